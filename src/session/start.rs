//! The `session-start` record: what is in force, on what host, for what command.

use std::path::{Path, PathBuf};

/// The facts of a GitHub Actions run, from the runner's environment
/// (`GITHUB_WORKFLOW_REF`, `GITHUB_JOB`, `GITHUB_SERVER_URL`,
/// `GITHUB_REPOSITORY`, `GITHUB_RUN_ID`); `None` outside Actions.
pub fn ci_info(env: &[(String, String)]) -> Option<crate::events::CiInfo> {
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if get("GITHUB_ACTIONS").as_deref() != Some("true") {
        return None;
    }
    // owner/repo/.github/workflows/ci.yml@refs/heads/main
    let workflow = get("GITHUB_WORKFLOW_REF").and_then(|r| {
        let path = r.split('@').next()?;
        let at = path.find(".github/workflows/")?;
        Some(path[at..].to_string())
    });
    let run_url = match (
        get("GITHUB_SERVER_URL"),
        get("GITHUB_REPOSITORY"),
        get("GITHUB_RUN_ID"),
    ) {
        (Some(s), Some(r), Some(id)) => Some(format!("{s}/{r}/actions/runs/{id}")),
        _ => None,
    };
    Some(crate::events::CiInfo {
        workflow,
        job: get("GITHUB_JOB"),
        run_url,
    })
}

/// The commit, branch and remote of the project, when it is a git checkout
/// (runs `git`, outside the sandbox, before the job starts).
pub fn git_info(project: &Path) -> Option<crate::events::GitInfo> {
    // Two git processes side by side instead of three in a row: this runs
    // before the job starts.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(project)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()
    };
    let output = |child: Option<std::process::Child>| -> Option<String> {
        let out = child?.wait_with_output().ok()?;
        let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !s.is_empty()).then_some(s)
    };
    let remote = git(&["remote", "get-url", "origin"]);
    let heads = output(git(&["rev-parse", "HEAD", "--abbrev-ref", "HEAD"]));
    // Credentials in a remote URL (https://token@host/…) never reach a report.
    let remote_url = output(remote).map(|u| strip_userinfo(&u));
    let heads = heads?;
    let mut lines = heads.lines();
    Some(crate::events::GitInfo {
        commit: lines.next()?.to_string(),
        branch: lines.next().filter(|b| *b != "HEAD").map(str::to_string),
        remote_url,
    })
}

fn strip_userinfo(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !url[scheme + 3..at].contains('/') => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// The `session-start` event for a run, from what the run pipeline has in
/// hand. `enforced` is derived from the plan, `policy.rules` from the
/// resolved policy with each rule's origin.
pub fn session_start(
    plan: &crate::plan::Plan,
    policy: &crate::policy::Policy,
    caps: &crate::host::HostCaps,
    command: &[std::ffi::OsString],
    audit: bool,
    env: &[(String, String)],
    proxy: Option<std::net::SocketAddr>,
) -> crate::events::SessionStart {
    use crate::events::{HostFacts, PolicyInfo, PolicySource, SessionStart, Timestamp};
    let mut enforced = Vec::new();
    if let Some(l) = &plan.landlock {
        enforced.push(format!("landlock-abi-{}", l.abi));
        if l.deny_tcp {
            enforced.push("landlock-tcp".into());
        }
        if l.scope {
            enforced.push("landlock-scope".into());
        }
    }
    if let Some(ns) = &plan.namespaces {
        enforced.push("user+mount+pid+ipc+uts namespaces".into());
        if ns.net {
            enforced.push("network namespace (loopback only)".into());
        }
        enforced.push("secret masking (mounts)".into());
        if ns.masks().next().is_some() && caps.fuse.is_available() {
            enforced.push("secret traps (who reads a mask is named)".into());
        }
    }
    enforced.push("seccomp".into());
    // Said wherever the enforcement is listed (reports, summary): the
    // live refusal of new entries is what this mode gives up.
    if plan.checked_after.is_some() {
        enforced.push(
            "protected paths by read-only mounts; new entries checked after the session, not refused"
                .into(),
        );
    }
    // The proxy's address only: its credential is the job's, never logged.
    if let (Some(how), Some(addr)) = (plan.egress, proxy) {
        enforced.push(format!(
            "filtered egress, proxy at {addr}: {}",
            how.describe()
        ));
    }
    if let Some(line) = crate::plan::memory::session_line(plan) {
        enforced.push(line);
    }
    if !plan.env.withheld.is_empty() {
        enforced.push("environment scrubbing".into());
    }
    let mut rules: Vec<String> = policy
        .fs
        .iter()
        .map(|r| {
            format!(
                "{:<7} {}  ({})",
                r.access.as_str(),
                r.path.display(),
                r.origin
            )
        })
        .collect();
    rules.push(match &policy.net {
        crate::policy::NetPolicy::Off => "net     off".to_string(),
        crate::policy::NetPolicy::Host => "net     host (unrestricted)".to_string(),
        crate::policy::NetPolicy::Allow {
            hosts, ips, deny, ..
        } => {
            let mut allowed: Vec<String> = hosts
                .iter()
                .map(|h| match h.port {
                    Some(p) => format!("{}:{p}", h.host),
                    None => h.host.clone(),
                })
                .collect();
            allowed.extend(ips.iter().map(ToString::to_string));
            let mut line = format!("net     allow {}", allowed.join(", "));
            if !deny.is_empty() {
                let denied: Vec<&str> = deny.iter().map(|h| h.host.as_str()).collect();
                line.push_str(&format!("; deny {}", denied.join(", ")));
            }
            line
        }
    });
    let digest = format!(
        "sha256:{}",
        crate::hash::sha256_hex(&[&serde_json::to_vec(policy).unwrap_or_default()])
    );
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v));
    SessionStart {
        vetto_version: env!("CARGO_PKG_VERSION").into(),
        started_at: Timestamp::now(),
        tier: plan.tier,
        enforced,
        degraded: plan.degraded.clone(),
        audit,
        host: HostFacts::from(caps),
        policy: PolicyInfo {
            sources: policy
                .sources
                .iter()
                .map(|s| PolicySource {
                    name: s.name.clone(),
                    digest: s.digest.clone(),
                })
                .collect(),
            digest,
            rules,
            origin: Some(policy.provenance.origin.clone()),
            line: Some(policy.provenance.line()),
            working_tree_differs: policy.provenance.working_tree_differs == Some(true),
        },
        command: command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: plan.cwd.clone(),
        project: policy.project.clone(),
        home,
        session_tmp: Some(policy.session_tmp.clone()),
        git: git_info(&policy.project),
        ci: ci_info(env),
        withheld_env: plan.env.withheld.clone(),
    }
}

/// The one line that says what the job's environment lacks, said at
/// session start (the session log has the names in `withheld_env`).
/// Withholding is information, never a violation. The CI command-file
/// variables are named apart, with no way to pass them: none exists.
pub fn withheld_line(withheld: &[String]) -> Option<String> {
    let (ci, credentials): (Vec<&str>, Vec<&str>) = withheld
        .iter()
        .map(String::as_str)
        .partition(|n| crate::policy::CI_CONTROL_VARS.contains(n));
    let list = |names: &[&str]| {
        names
            .iter()
            .map(|n| super::denials::escaped(n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !credentials.is_empty() {
        parts.push(format!(
            "{} (credential-like; --secret NAME@HOST lets the job use one without holding it, --env-pass NAME passes one)",
            list(&credentials)
        ));
    }
    if !ci.is_empty() {
        parts.push(format!("{} (CI command files; never passed)", list(&ci)));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "vetto: withheld {} variable(s) from the job's environment: {}",
            withheld.len(),
            parts.join(" and ")
        )
    })
}

#[cfg(test)]
mod env_tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn github_actions_facts_come_from_the_runner_environment() {
        let info = ci_info(&env(&[
            ("GITHUB_ACTIONS", "true"),
            (
                "GITHUB_WORKFLOW_REF",
                "octo/app/.github/workflows/ci.yml@refs/heads/main",
            ),
            ("GITHUB_JOB", "test"),
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "octo/app"),
            ("GITHUB_RUN_ID", "42"),
        ]));
        let info = info.unwrap_or_default();
        assert_eq!(info.workflow.as_deref(), Some(".github/workflows/ci.yml"));
        assert_eq!(info.job.as_deref(), Some("test"));
        assert_eq!(
            info.run_url.as_deref(),
            Some("https://github.com/octo/app/actions/runs/42")
        );
        assert_eq!(ci_info(&env(&[("GITHUB_JOB", "x")])), None);
    }

    /// Said once, and never with a way to pass a CI command file.
    #[test]
    fn withholding_is_one_line_that_never_offers_to_pass_a_ci_command_file() {
        assert_eq!(withheld_line(&[]), None);
        let line =
            withheld_line(&["GITHUB_ENV".into(), "GITHUB_OUTPUT".into()]).unwrap_or_default();
        assert_eq!(
            line,
            "vetto: withheld 2 variable(s) from the job's environment: GITHUB_ENV, GITHUB_OUTPUT (CI command files; never passed)"
        );
        assert!(!line.contains("--env-pass"));
        let line =
            withheld_line(&["GITHUB_ENV".into(), "NPM_TOKEN\x1b[2J".into()]).unwrap_or_default();
        assert_eq!(line.lines().count(), 1);
        assert!(
            line.contains(
                "NPM_TOKEN\\x1b[2J (credential-like; --secret NAME@HOST lets the job use one without holding it, --env-pass NAME passes one) and GITHUB_ENV"
            ),
            "{line}"
        );
    }

    #[test]
    fn tokens_in_remote_urls_never_reach_a_report() {
        assert_eq!(
            strip_userinfo("https://x-access-token:ghs_secret@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            strip_userinfo("git@github.com:o/r.git"),
            "git@github.com:o/r.git"
        );
    }
}
