//! `vetto ci`: the `run` pipeline, then the reports into `--report-dir`,
//! the step summary, annotations, a one-screen console summary and
//! `--fail-on`. Reporting never loses the command's exit status: every
//! reporting failure is printed and the status is kept.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::CiArgs;
use super::report::error_chain;
use crate::events::rule_id::Level;
use crate::exit::{self, Outcome};
use crate::report::{self, Model, Outputs, annotations, human_ms, sarif::SarifOptions};

/// `--fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FailOn {
    /// Exit 3 when the command passed but violations were recorded.
    #[default]
    Violation,
    /// Only the command's own status counts.
    Never,
}

/// Where `ci` reports go when `--report-dir` is not given.
pub const DEFAULT_REPORT_DIR: &str = "vetto-report";

/// What [`finish`] needs besides the outcome and the log.
#[derive(Debug, Clone)]
pub struct CiReportOptions {
    pub report_dir: PathBuf,
    pub fail_on: FailOn,
    /// `$GITHUB_STEP_SUMMARY`, appended to when set.
    pub step_summary: Option<PathBuf>,
    /// Print `::error` annotations (inside GitHub Actions).
    pub annotations: bool,
    pub category: Option<String>,
}

impl CiReportOptions {
    /// From the command line and the (runner's) environment.
    pub fn from_args(args: &CiArgs) -> Self {
        CiReportOptions {
            report_dir: args
                .run
                .report_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_REPORT_DIR)),
            fail_on: args.fail_on,
            step_summary: std::env::var_os("GITHUB_STEP_SUMMARY")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            annotations: std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true"),
            category: None,
        }
    }
}

pub fn ci(args: CiArgs) -> anyhow::Result<ExitCode> {
    let opts = CiReportOptions::from_args(&args);
    match super::run::execute(
        &args.run,
        Some(&opts.report_dir),
        super::run::Output::Neutralised,
    )? {
        super::run::Executed::Refused(code) => Ok(ExitCode::from(code)),
        super::run::Executed::Ran {
            outcome,
            log: Some(log),
        } => Ok(finish(outcome, &log, &opts)),
        super::run::Executed::Ran { outcome, log: None } => {
            eprintln!(
                "vetto: error: no session log, no reports; the command's exit status ({}) is kept",
                outcome.code()
            );
            Ok(outcome.exit_code())
        }
    }
}

/// Everything after the command ended: reports, step summary, annotations,
/// console summary, and the exit status (`--fail-on`). The command's own
/// status is returned unless it passed and `--fail-on violation` found
/// violations (then 3); reporting failures never change it.
pub fn finish(outcome: Outcome, session_log: &Path, opts: &CiReportOptions) -> ExitCode {
    let status = outcome.code();
    let model = match report::load(session_log) {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!(
                "vetto: error: cannot read the session log, no reports written: {}; the command's exit status ({status}) is kept",
                error_chain(&e)
            );
            None
        }
    };
    if let Some(model) = &model {
        write_reports(model, session_log, opts, status);
        if opts.annotations {
            let mut out = std::io::stdout().lock();
            for line in annotations::render(model, annotations::TOP) {
                let _ = writeln!(out, "{line}");
            }
        }
        eprint!("{}", console_summary(model, &opts.report_dir));
    }
    let code = final_status(status, opts.fail_on, model.as_ref());
    if code != status {
        eprintln!(
            "vetto: exit {code}: the command passed, but violations were recorded (--fail-on violation)"
        );
    }
    ExitCode::from(code)
}

/// The exit status `ci` returns.
pub fn final_status(command_status: u8, fail_on: FailOn, model: Option<&Model>) -> u8 {
    match (command_status, fail_on, model) {
        (0, FailOn::Violation, Some(m)) if m.failing_violations > 0 => exit::VIOLATIONS,
        _ => command_status,
    }
}

fn write_reports(model: &Model, session_log: &Path, opts: &CiReportOptions, status: u8) {
    let dir = &opts.report_dir;
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!(
            "vetto: error: cannot create the report directory {}: {e}; no reports written, the command's exit status ({status}) is kept",
            dir.display()
        );
        return;
    }
    // Keep the log with its reports when it was written elsewhere.
    let log_in_dir = dir.join("session.jsonl");
    if !same_file(session_log, &log_in_dir)
        && let Err(e) = std::fs::copy(session_log, &log_in_dir)
    {
        eprintln!(
            "vetto: error: cannot copy the session log to {}: {e}",
            log_in_dir.display()
        );
    }
    let sarif_opts = SarifOptions {
        category: opts.category.clone(),
        ..Default::default()
    };
    let errors = report::write_outputs(model, &Outputs::in_dir(dir), &sarif_opts);
    for e in &errors {
        eprintln!(
            "vetto: error: {}; the command's exit status ({status}) is kept",
            error_chain(e)
        );
    }
    if let Some(summary_path) = &opts.step_summary
        && let Err(e) = append(summary_path, report::summary::render(model).as_bytes())
    {
        eprintln!(
            "vetto: error: cannot append to $GITHUB_STEP_SUMMARY ({}): {e}",
            summary_path.display()
        );
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.write_all(b"\n")
}

/// Text from the sandboxed side, safe for a terminal: control characters
/// (escape sequences that could rewrite the screen or forge output) become `?`.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The one-screen summary printed at the end (≤ ~20 lines).
pub fn console_summary(model: &Model, report_dir: &Path) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let verdict = model.verdict().as_str().to_uppercase();
    let status = model
        .end
        .as_ref()
        .map(|e| e.exit_code.to_string())
        .unwrap_or_else(|| "?".into());
    let _ = writeln!(
        s,
        "\nvetto: {verdict} — tier {}{}, exit status {status}, {}",
        model.start.tier,
        if model.start.audit { " (audit)" } else { "" },
        human_ms(model.duration_ms())
    );
    if model.total_violations > 0 {
        let _ = writeln!(
            s,
            "  {} violation(s), {} distinct:",
            model.total_violations,
            model.findings.len()
        );
        let roots = model.start.roots();
        for f in model.findings.iter().take(8) {
            let v = &f.violation;
            let mark = match v.rule.level() {
                Level::Error => "✗",
                Level::Warning => "!",
                Level::Note => "·",
            };
            let target = match v.target.path() {
                Some(p) => roots.normalise(p),
                None => v.target.display(),
            };
            let mut target = printable(&target);
            if target.chars().count() > 60 {
                target = format!("{}…", target.chars().take(59).collect::<String>());
            }
            let _ = writeln!(
                s,
                "  {mark} {:<24} {target}  by {}{}",
                v.rule.as_str(),
                printable(&f.actor()),
                if f.count > 1 {
                    format!(" ×{}", f.count)
                } else {
                    String::new()
                }
            );
        }
        if model.findings.len() > 8 {
            let _ = writeln!(s, "  … {} more", model.findings.len() - 8);
        }
    }
    let _ = writeln!(
        s,
        "  reports: {}/{{report.html,vetto.sarif,summary.md,session.jsonl}}",
        report_dir.display()
    );
    s
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn opts(dir: &Path) -> CiReportOptions {
        CiReportOptions {
            report_dir: dir.to_path_buf(),
            fail_on: FailOn::Violation,
            step_summary: None,
            annotations: false,
            category: None,
        }
    }

    fn write_log(dir: &Path) -> PathBuf {
        let p = dir.join("in.jsonl");
        std::fs::write(&p, fixture::to_jsonl(&fixture::attack_session())).unwrap();
        p
    }

    #[test]
    fn violations_turn_a_passing_command_into_exit_3() {
        let m = fixture::attack_model();
        assert_eq!(final_status(0, FailOn::Violation, Some(&m)), 3);
        assert_eq!(final_status(0, FailOn::Never, Some(&m)), 0);
        assert_eq!(
            final_status(1, FailOn::Violation, Some(&m)),
            1,
            "the command's failure wins"
        );
        assert_eq!(final_status(124, FailOn::Violation, Some(&m)), 124);
    }

    #[test]
    fn withheld_variables_alone_do_not_fail_the_job() {
        let events: Vec<_> = fixture::attack_session()
            .into_iter()
            .map(|e| match e {
                crate::events::Event::SessionEnd(mut end) => {
                    end.violations_by_rule
                        .retain(|r, _| *r == crate::events::RuleId::SecretEnvWithheld);
                    crate::events::Event::SessionEnd(end)
                }
                other => other,
            })
            .filter(|e| match e {
                crate::events::Event::Violation(v) => {
                    v.rule == crate::events::RuleId::SecretEnvWithheld
                }
                crate::events::Event::Repeated(_) => false,
                _ => true,
            })
            .collect();
        let log = crate::events::log::SessionLog::parse(&fixture::to_jsonl(&events));
        let m = Model::build(&log).unwrap();
        assert_eq!(m.findings.len(), 1);
        assert_eq!(final_status(0, FailOn::Violation, Some(&m)), 0);
        assert_eq!(m.verdict(), crate::report::Verdict::Clean);
    }

    #[test]
    fn ci_writes_every_report_and_the_step_summary() {
        let tmp = tempfile::tempdir().unwrap();
        let log = write_log(tmp.path());
        let dir = tmp.path().join("vetto-report");
        let mut o = opts(&dir);
        let step = tmp.path().join("step-summary.md");
        std::fs::write(&step, "earlier step\n").unwrap();
        o.step_summary = Some(step.clone());
        let code = finish(Outcome::Exited(0), &log, &o);
        assert_eq!(code, ExitCode::from(3));
        for f in ["vetto.sarif", "report.html", "summary.md", "session.jsonl"] {
            assert!(dir.join(f).is_file(), "{f} missing");
        }
        let step = std::fs::read_to_string(step).unwrap();
        assert!(step.starts_with("earlier step\n") && step.contains("vetto: violations"));
    }

    #[test]
    fn an_unwritable_report_dir_keeps_the_commands_status() {
        let tmp = tempfile::tempdir().unwrap();
        let log = write_log(tmp.path());
        // A regular file where the directory should be: creating it fails
        // even for root.
        let blocker = tmp.path().join("not-a-dir");
        std::fs::write(&blocker, "").unwrap();
        let o = CiReportOptions {
            fail_on: FailOn::Never,
            ..opts(&blocker.join("reports"))
        };
        assert_eq!(finish(Outcome::Exited(42), &log, &o), ExitCode::from(42));
        assert_eq!(finish(Outcome::Signaled(9), &log, &o), ExitCode::from(137));
    }

    #[test]
    fn a_missing_session_log_keeps_the_commands_status() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        assert_eq!(
            finish(Outcome::TimedOut, &tmp.path().join("nope.jsonl"), &o),
            ExitCode::from(124)
        );
    }

    #[test]
    fn escape_sequences_in_file_names_never_reach_the_terminal() {
        assert_eq!(printable("a\x1b]0;pwned\x07b\n"), "a?]0;pwned?b?");
    }

    #[test]
    fn console_summary_fits_one_screen() {
        let s = console_summary(&fixture::attack_model(), Path::new("vetto-report"));
        assert!(s.lines().count() <= 24, "{s}");
        assert!(s.contains("VIOLATIONS") && s.contains("npm:evil@6.6.6"));
    }
}

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
