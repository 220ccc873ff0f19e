//! `vetto report --session FILE`: re-render the reports from a session log.

use std::process::ExitCode;

use super::ReportArgs;
use crate::report::{self, Outputs, error_chain, sarif::SarifOptions};

pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let log = crate::events::log::SessionLog::read(&args.session)?;
    if let Some(v) = log.newer_schema {
        eprintln!(
            "vetto: warning: the session log has schema {v}, newer than this vetto understands ({}); some events may be missing from the reports",
            crate::events::SCHEMA_VERSION
        );
    }
    if !log.skipped.is_empty() {
        eprintln!(
            "vetto: warning: {} line(s) of the session log could not be read (first: line {}: {})",
            log.skipped.len(),
            log.skipped[0].line,
            crate::text::escape(&log.skipped[0].reason)
        );
    }
    let model =
        report::Model::build(&log).ok_or_else(|| crate::events::log::LogError::NoStart {
            path: args.session.clone(),
        })?;
    let mut outputs = Outputs {
        sarif: args.sarif,
        html: args.html,
        summary: args.summary,
    };
    if outputs.sarif.is_none() && outputs.html.is_none() && outputs.summary.is_none() {
        // Nothing named: every report, next to the session log.
        let dir = args
            .session
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        outputs = Outputs::in_dir(dir);
    }
    if model.torn_tail {
        eprintln!(
            "vetto: note: the session log's last line is torn (the session was killed); rendering what was recorded"
        );
    }
    let opts = SarifOptions {
        category: args.category,
        ..Default::default()
    };
    let mut failed = false;
    // Each report, as it went: what was written where, or why not.
    for (path, written) in report::write_outputs(&model, &outputs, &opts) {
        match written {
            Ok(()) => eprintln!("vetto: wrote {}", crate::text::path_name(&path)),
            Err(e) => {
                failed = true;
                eprintln!("vetto: error: {}", error_chain(&e));
            }
        }
    }
    if !failed {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(crate::exit::REFUSED))
    }
}
