//! What `vetto` tells the user on stderr when the session ends.

use crate::{supervisor, text};

/// One line each for what the user should know about the session; the
/// denials (the supervisor's, and the connections the egress layer
/// `refused`) grouped one a line (the first few, all when `verbose`).
pub(super) fn tell(
    session: &supervisor::Session,
    refused: &super::egress::Refused,
    audit: bool,
    verbose: bool,
    ctx: &super::denials::Context,
) {
    if let Some(hit) = session.limit {
        eprintln!("vetto: {}", hit.message());
    }
    if !session.escaped.is_empty() {
        let names: Vec<String> = session
            .escaped
            .iter()
            .map(|p| {
                format!(
                    "{} ({})",
                    p.pid,
                    text::name(p.argv.first().unwrap_or(&p.exe))
                )
            })
            .collect();
        eprintln!(
            "vetto: killed {} process(es) the command left running: {}",
            session.escaped.len(),
            names.join(", ")
        );
    }
    if !session.scrubbed.is_empty() {
        let names: Vec<String> = session
            .scrubbed
            .iter()
            .map(|p| text::path_name(p))
            .collect();
        eprintln!(
            "vetto: removed what the command left in shared directories: {}",
            names.join(", ")
        );
    }
    if session.scrub_unattributed > 0 {
        eprintln!(
            "vetto: left {} new entries in shared directories: they could not be attributed to the command",
            session.scrub_unattributed
        );
    }
    if !session.secret_reads.is_empty() {
        let paths: Vec<String> = session
            .secret_reads
            .iter()
            .map(|r| match r.count {
                1 => text::path_name(&r.path),
                n => format!("{} ({n}×)", text::path_name(&r.path)),
            })
            .collect();
        let more = match session.secret_reads_unlisted {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        eprintln!(
            "vetto: the command tried to read masked secrets: {}{more} (it got nothing of them)",
            paths.join(", ")
        );
    }
    for line in super::denials::lines(
        &session.decisions,
        session.decisions_dropped + refused.unlisted,
        &refused.connections,
        audit,
        verbose,
        ctx,
    ) {
        eprintln!("{line}");
    }
}
