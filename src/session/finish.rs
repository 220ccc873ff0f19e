//! After the command ended: the reports, the step summary, annotations, a
//! one-screen console summary and `--fail-on`. Reporting never loses the
//! command's exit status: every reporting failure is printed and the status
//! is kept.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::events::log::LOG_MODE;
use crate::events::rule_id::Level;
use crate::exit::{self, Outcome};
use crate::report::{
    self, Model, Verdict, annotations, error_chain, human_ms, sarif::SarifOptions,
};
use crate::sys::safe_fs;
use crate::text;

/// `--fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FailOn {
    /// Exit 3 when the command passed but violations were recorded.
    #[default]
    Violation,
    /// Only the command's own status counts.
    Never,
}

impl FailOn {
    /// The `--fail-on` in force: the one given, else `violation` — except
    /// under `--audit`, which observes and never fails the job unless
    /// `--fail-on` is given explicitly.
    pub fn effective(given: Option<FailOn>, audit: bool) -> FailOn {
        match (given, audit) {
            (Some(f), _) => f,
            (None, true) => FailOn::Never,
            (None, false) => FailOn::Violation,
        }
    }
}

/// Where `ci` reports go when `--report-dir` is not given.
pub const DEFAULT_REPORT_DIR: &str = "vetto-report";

/// What [`finish`] needs besides the outcome and the log.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub report_dir: PathBuf,
    pub fail_on: FailOn,
    /// `$GITHUB_STEP_SUMMARY`, appended to when set.
    pub step_summary: Option<PathBuf>,
    /// `$GITHUB_OUTPUT`: the step outputs `tier` and `violations` are
    /// appended to it when set.
    pub step_output: Option<PathBuf>,
    /// Print `::error` annotations (inside GitHub Actions).
    pub annotations: bool,
    pub category: Option<String>,
}

impl ReportOptions {
    /// Reports into `report_dir` and nothing else: no step summary, no
    /// annotations, the command's status kept (`vetto run --report-dir`).
    pub fn files_only(report_dir: PathBuf) -> Self {
        ReportOptions {
            report_dir,
            fail_on: FailOn::Never,
            step_summary: None,
            step_output: None,
            annotations: false,
            category: None,
        }
    }
}

/// Everything after the command ended: reports, step summary, annotations,
/// console summary, and the exit status (`--fail-on`). The command's own
/// status is returned unless it passed and `--fail-on violation` found
/// violations (then 3); reporting failures never change it.
pub fn finish(outcome: Outcome, session_log: &Path, opts: &ReportOptions) -> ExitCode {
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
        if let Some(path) = &opts.step_output {
            write_step_outputs(model, path);
        }
        if opts.annotations {
            let _ = annotations::print(&mut std::io::stdout().lock(), model, annotations::TOP);
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
        (0, FailOn::Violation, Some(m)) if m.total_violations > 0 => exit::VIOLATIONS,
        _ => command_status,
    }
}

fn write_reports(model: &Model, session_log: &Path, opts: &ReportOptions, status: u8) {
    // Checked and held open: the directory may hold what an earlier job
    // planted, and nothing here follows it (`safe_fs`).
    let new_dir = std::fs::symlink_metadata(&opts.report_dir).is_err();
    let dir = match safe_fs::Dir::create(&opts.report_dir, safe_fs::Parents::Walk, 0o755) {
        Ok(dir) => {
            super::mark_ignored(&dir, new_dir);
            dir
        }
        Err(e) => {
            eprintln!(
                "vetto: error: no reports written: {}; the command's exit status ({status}) is kept",
                error_chain(&e)
            );
            return;
        }
    };
    // Keep the log with its reports when it was written elsewhere.
    let log_in_dir = dir.join("session.jsonl");
    if !same_entry(session_log, &log_in_dir)
        && let Err(e) = dir.copy_in("session.jsonl", session_log, LOG_MODE)
    {
        eprintln!(
            "vetto: error: cannot copy the session log to {}: {}",
            log_in_dir.display(),
            error_chain(&e)
        );
    }
    let sarif_opts = SarifOptions {
        category: opts.category.clone(),
        ..Default::default()
    };
    let errors = report::write_outputs_in(model, &dir, &sarif_opts);
    for e in &errors {
        eprintln!(
            "vetto: error: {}; the command's exit status ({status}) is kept",
            error_chain(e)
        );
    }
    if let Some(summary_path) = &opts.step_summary {
        let mut text = report::summary::render(model);
        text.push('\n');
        if let Err(e) = safe_fs::append(summary_path, text.as_bytes()) {
            eprintln!(
                "vetto: error: cannot append to $GITHUB_STEP_SUMMARY: {}",
                error_chain(&e)
            );
        }
    }
}

/// The step outputs (`name=value` lines, `$GITHUB_OUTPUT`'s format): the
/// tier the session ran at and its violations, repeats included. Both are
/// vetto's own words (a tier name, a number), never the job's.
fn write_step_outputs(model: &Model, path: &Path) {
    let text = step_outputs(model);
    if let Err(e) = safe_fs::append(path, text.as_bytes()) {
        eprintln!(
            "vetto: error: cannot append to $GITHUB_OUTPUT: {}",
            error_chain(&e)
        );
    }
}

/// `tier=…` and `violations=…`, one line each.
fn step_outputs(model: &Model) -> String {
    format!(
        "tier={}\nviolations={}\n",
        model.start.tier, model.total_violations
    )
}

/// The same directory entry (not following a link at either name).
fn same_entry(a: &Path, b: &Path) -> bool {
    use crate::sys::os::file_id;
    match (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => file_id(&x).is_some_and(|id| file_id(&y) == Some(id)),
        _ => false,
    }
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
    let unobserved = model.start.tier.unobserved();
    // A clean session gets one short line (a clean verdict is still never
    // read as "none attempted"); one with findings or a failure, the list.
    if model.verdict() == Verdict::Clean {
        let _ = writeln!(
            s,
            "  not observed at this tier: {}",
            model.start.tier.unobserved_short()
        );
    } else if !unobserved.is_empty() {
        let _ = writeln!(
            s,
            "  not observed at this tier (refused, but not recorded): {}",
            unobserved.join("; ")
        );
    }
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
            let target = text::clip(&text::escape(&target), 60).into_owned();
            let _ = writeln!(
                s,
                "  {mark} {:<24} {target}  by {}{}",
                v.rule.as_str(),
                text::name(&f.actor()),
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
    let expected = model.expected_phrases();
    if !expected.is_empty() {
        let shown: Vec<String> = expected
            .iter()
            .take(4)
            .map(|e| text::clip(&text::escape(e), 80).into_owned())
            .collect();
        let more = expected.len().saturating_sub(shown.len());
        let _ = writeln!(
            s,
            "  expected by the policy (no finding): {}{}",
            shown.join("; "),
            if more > 0 {
                format!("; … {more} more")
            } else {
                String::new()
            }
        );
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

    fn opts(dir: &Path) -> ReportOptions {
        ReportOptions {
            report_dir: dir.to_path_buf(),
            fail_on: FailOn::Violation,
            step_summary: None,
            step_output: None,
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

    /// `--audit` observes: what it saw fails nothing unless `--fail-on`
    /// is given explicitly.
    #[test]
    fn audit_never_fails_the_job_unless_fail_on_is_given() {
        let m = fixture::attack_model();
        assert_eq!(FailOn::effective(None, true), FailOn::Never);
        assert_eq!(final_status(0, FailOn::effective(None, true), Some(&m)), 0);
        assert_eq!(FailOn::effective(None, false), FailOn::Violation);
        assert_eq!(
            final_status(
                0,
                FailOn::effective(Some(FailOn::Violation), true),
                Some(&m)
            ),
            3
        );
        assert_eq!(FailOn::effective(Some(FailOn::Never), false), FailOn::Never);
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
    fn ci_appends_the_tier_and_the_violation_count_to_the_step_outputs() {
        let tmp = tempfile::tempdir().unwrap();
        let log = write_log(tmp.path());
        let mut o = opts(&tmp.path().join("vetto-report"));
        let out = tmp.path().join("github-output");
        std::fs::write(&out, "earlier=1\n").unwrap();
        o.step_output = Some(out.clone());
        finish(Outcome::Exited(0), &log, &o);
        let m = fixture::attack_model();
        assert!(m.total_violations > 0);
        assert_eq!(
            std::fs::read_to_string(out).unwrap(),
            format!(
                "earlier=1\ntier={}\nviolations={}\n",
                m.start.tier, m.total_violations
            )
        );
    }

    #[test]
    fn an_unwritable_report_dir_keeps_the_commands_status() {
        let tmp = tempfile::tempdir().unwrap();
        let log = write_log(tmp.path());
        // A regular file where the directory should be: creating it fails
        // even for root.
        let blocker = tmp.path().join("not-a-dir");
        std::fs::write(&blocker, "").unwrap();
        let o = ReportOptions {
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
        let mut events = fixture::attack_session();
        for e in &mut events {
            if let crate::events::Event::Violation(v) = e
                && let crate::events::Target::Path { path } = &mut v.target
            {
                *path = PathBuf::from(
                    "/work/app/x\n::warning title=t::\x1b]0;pwned\x07\u{9b}2J\r::error::y",
                );
                v.process.exe = PathBuf::from("/bin/\x1b[2Jsh\n::add-mask::X");
            }
        }
        let log = crate::events::log::SessionLog::parse(&fixture::to_jsonl(&events));
        let m = Model::build(&log).unwrap();
        let s = console_summary(&m, Path::new("vetto-report"));
        assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}");
        assert!(s.lines().all(|l| !l.trim_start().starts_with("::")), "{s}");
        assert!(
            s.contains("x\\n::warning title=t::\\x1b]0;pwned\\x07"),
            "{s}"
        );
    }

    #[test]
    fn console_summary_fits_one_screen() {
        let s = console_summary(&fixture::attack_model(), Path::new("vetto-report"));
        assert!(s.lines().count() <= 24, "{s}");
        assert!(s.contains("VIOLATIONS") && s.contains("npm:evil@6.6.6"));
    }
}
