//! `vetto policy check` and `vetto policy explain`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::ExplainArgs;
use crate::exit;
use crate::policy::{self, explain};

/// Prints `FILE: ok` or the diagnostics of each file; 125 if any failed.
pub fn check(files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for f in files {
        match policy::check_file(f) {
            Ok(()) => println!("{}: ok", f.display()),
            Err(e) => {
                failed = true;
                eprintln!("{e}");
            }
        }
    }
    Ok(if failed {
        ExitCode::from(exit::REFUSED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The resolved policy and, for each query, the deciding rule. The
/// session directory is a placeholder (`$TMPDIR/vetto-<session>`) that is
/// never created.
pub fn explain(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let request = args
        .policy
        .load_request(&explain::placeholder_tmp(), None)?;
    let mut policy = match policy::load(&request) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(exit::REFUSED));
        }
    };
    // What a session would discover and which caches it would use (none
    // is created here).
    let (env, home) = (&request.env, &request.home);
    let mut notes = crate::session::tools::discover(&mut policy, env, home);
    match crate::session::tools::caches(&mut policy, env, home, false) {
        Ok(lines) => notes.extend(lines),
        Err(e) => notes.push(e.to_string()),
    }
    notes.iter().for_each(|l| eprintln!("vetto: {l}"));
    let terminals = crate::sandbox::terminal::own_terminals();
    let decisions: Vec<_> = args
        .queries
        .iter()
        .map(|q| explain::decide(&policy, q, &request.cwd, &request.home, &terminals))
        .collect();
    if args.json {
        let out = explain::Explanation {
            policy: &policy,
            decisions,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).context("cannot render JSON")?
        );
    } else if decisions.is_empty() || args.all {
        print!("{}", explain::render_text(&policy, &decisions));
    } else {
        // The answers first: what was asked is what the reader wants.
        print!("{}", explain::render_answers(&policy, &decisions));
    }
    Ok(ExitCode::SUCCESS)
}

/// `vetto policy suggest SESSION.jsonl...`: print a policy to review.
pub fn suggest(sessions: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut logs = Vec::with_capacity(sessions.len());
    for path in sessions {
        let log = crate::events::log::SessionLog::read(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        logs.push(log);
    }
    print!("{}", crate::report::suggest::suggest(&logs));
    Ok(ExitCode::SUCCESS)
}
