//! The report as a table for people and as a stable JSON document.

use std::fmt::Write as _;

use super::catalogue::Kind;
use super::{Report, Verdict};

/// The table and the verdict line.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "vetto verify: tier {} (requested {}), network {}{}",
        r.tier,
        r.requested,
        r.net,
        if r.allow_degraded {
            ", --allow-degraded"
        } else {
            ""
        }
    );
    for d in &r.degraded {
        let _ = writeln!(s, "  degraded: {d}");
    }
    let id_w = r.probes.iter().map(|p| p.id.len()).max().unwrap_or(10);
    let res_w = 13;
    let _ = writeln!(s);
    let _ = writeln!(s, "{:<res_w$}  {:<id_w$}  TECHNIQUE", "RESULT", "PROBE");
    let mut last_kind = None;
    for p in &r.probes {
        if last_kind.is_some_and(|k| k != p.kind) {
            let _ = writeln!(s);
        }
        last_kind = Some(p.kind);
        let _ = writeln!(
            s,
            "{:<res_w$}  {:<id_w$}  {}",
            p.result.label(),
            p.id,
            p.technique
        );
        let _ = writeln!(s, "{:<res_w$}  {:<id_w$}  └ {}", "", "", p.evidence);
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "{}", verdict_line(r));
    s
}

/// One line: the overall verdict and the counts.
pub fn verdict_line(r: &Report) -> String {
    let c = &r.counts;
    let attacks = r
        .probes
        .iter()
        .filter(|p| p.kind == Kind::Attack && p.result != Verdict::NotApplicable)
        .count();
    let tail = format!(
        "{} of {attacks} attacks contained, {} not applicable, {} controls work ({} ms)",
        c.contained, c.not_applicable, c.works, r.millis
    );
    if r.passed {
        return format!("verdict: CONTAINED at tier {} — {tail}", r.tier);
    }
    let mut why = Vec::new();
    if !r.escaped.is_empty() {
        why.push(format!("not contained: {}", r.escaped.join(", ")));
    }
    if !r.failed_controls.is_empty() {
        why.push(format!(
            "controls failed (the sandbox is broken): {}",
            r.failed_controls.join(", ")
        ));
    }
    if !r.inconclusive.is_empty() {
        why.push(format!("inconclusive: {}", r.inconclusive.join(", ")));
    }
    format!(
        "verdict: NOT CONTAINED at tier {} — {}; {tail}",
        r.tier,
        why.join("; ")
    )
}

/// The `--json` document (see docs/verify.md for its fields).
pub fn json(r: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(r)
}
