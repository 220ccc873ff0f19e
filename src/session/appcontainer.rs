//! `--tier appcontainer` (Windows, experimental): policy → launch plan →
//! the AppContainer launcher. No stage and no session log: the launcher
//! waits for the job itself, and Windows reports no violations to vetto
//! (docs/windows.md).

use crate::plan::appcontainer;
use crate::sandbox::appcontainer::{LaunchError, NOT_OBSERVED};
use crate::{exit, policy, sandbox};

use super::{Executed, Options, Output, Request, SessionTmp, admit, withheld_line};

/// The session under the AppContainer launcher; refusals are 125.
pub(super) fn execute(mut request: Request, options: &Options) -> anyhow::Result<Executed> {
    let refuse = |e: LaunchError| {
        eprintln!("vetto: {e}");
        Ok(Executed::Refused(e.exit_status()))
    };
    match admit::project(&request.policy) {
        Ok(note) => note.iter().for_each(|l| eprintln!("vetto: {l}")),
        Err(refusal) => {
            eprintln!("vetto: {refusal}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    }
    if options.output == Output::Neutralised {
        return refuse(LaunchError::OutputFilter);
    }
    if options.reports.is_some() {
        return refuse(LaunchError::Reports);
    }
    if request.audit {
        return refuse(LaunchError::Audit);
    }
    let mut session_tmp = SessionTmp::reserve(true)?;
    request.policy.session_tmp = session_tmp.path().to_path_buf();
    request.policy.report_dir = None;
    let policy = match policy::load(&request.policy) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    eprintln!("vetto: {}", policy.provenance.line());
    let plan = match appcontainer::launch_plan(
        &policy,
        &request.policy.env,
        &request.policy.cwd,
        &crate::plan::fs::RealFs,
    ) {
        Ok(plan) => plan,
        Err(refusals) => {
            eprintln!("vetto: {}", appcontainer::refusal(&refusals));
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    if let Some(line) = withheld_line(&plan.env.withheld) {
        eprintln!("{line}");
    }
    eprintln!(
        "vetto: tier appcontainer (experimental): LPAC, {} allow and {} deny ACE(s), {} capability(ies); {NOT_OBSERVED}",
        plan.grants.grants.len(),
        plan.grants.denies.len(),
        plan.grants.capabilities.len()
    );
    session_tmp.create()?;
    let outcome = match sandbox::run_appcontainer(&plan, &request.command) {
        Ok(outcome) => outcome,
        Err(e) => return refuse(e),
    };
    drop(session_tmp);
    Ok(Executed::Ran { outcome, log: None })
}
