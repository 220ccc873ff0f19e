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
        crate::policy::NetPolicy::Allow { hosts, .. } => format!(
            "net     allow {}",
            hosts
                .iter()
                .map(|h| match h.port {
                    Some(p) => format!("{}:{p}", h.host),
                    None => h.host.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
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
    }
}

/// One `secret-env-withheld` violation per variable the plan withheld
/// (names only; values are never logged). Send them right after
/// `session-start`.
pub fn withheld_env_violations(
    start: &crate::events::SessionStart,
    withheld: &[String],
) -> Vec<crate::events::Violation> {
    use crate::events::{Action, ProcessInfo, Provenance, RuleId, Target, Violation};
    withheld
        .iter()
        .map(|name| Violation {
            rule: RuleId::SecretEnvWithheld,
            time: start.started_at,
            action: if start.audit {
                Action::Observed
            } else {
                Action::Blocked
            },
            process: ProcessInfo {
                pid: 0,
                exe: start.command.first().map(PathBuf::from).unwrap_or_default(),
                argv: start.command.clone(),
                cwd: start.cwd.clone(),
                parent_chain: vec![],
            },
            target: Target::EnvVar { name: name.clone() },
            attribution: None,
            policy_rule: None,
            detail: String::new(),
            provenance: Provenance::Plan,
        })
        .collect()
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
