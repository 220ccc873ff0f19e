//! `vetto ci`: the session with the job's output neutralised, then the
//! reports into `--report-dir`, the step summary, annotations, a
//! one-screen console summary and `--fail-on` ([`crate::session::finish`]).

use std::path::PathBuf;
use std::process::ExitCode;

use super::CiArgs;
use crate::session::{self, DEFAULT_REPORT_DIR, FailOn, Output, ReportOptions};

pub fn ci(args: CiArgs) -> anyhow::Result<ExitCode> {
    let options = session::Options {
        output: Output::Neutralised,
        reports: Some(report_options(&args)),
        verbose: args.run.verbose,
    };
    session::run(args.run.request()?, &options)
}

/// From the command line and the (runner's) environment.
fn report_options(args: &CiArgs) -> ReportOptions {
    ReportOptions {
        report_dir: args
            .run
            .report_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_REPORT_DIR)),
        fail_on: FailOn::effective(args.fail_on, args.run.audit),
        step_summary: std::env::var_os("GITHUB_STEP_SUMMARY")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
        step_output: std::env::var_os("GITHUB_OUTPUT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
        annotations: std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true"),
        category: None,
    }
}
