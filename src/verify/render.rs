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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::Tier;
    use crate::verify::{Counts, ProbeResult, SCHEMA};

    fn report(results: &[(&'static str, Kind, Verdict)]) -> Report {
        let probes: Vec<ProbeResult> = results
            .iter()
            .map(|&(id, kind, result)| ProbeResult {
                id,
                kind,
                technique: "t",
                result,
                evidence: "e".into(),
                millis: 1,
            })
            .collect();
        let ids = |v: Verdict| {
            probes
                .iter()
                .filter(|p| p.result == v)
                .map(|p| p.id)
                .collect::<Vec<_>>()
        };
        Report {
            schema: SCHEMA,
            tier: Tier::FsOnly,
            requested: "auto".into(),
            net: "off",
            allow_degraded: false,
            degraded: vec![],
            passed: !probes.iter().any(|p| p.result.is_failure()),
            escaped: ids(Verdict::NotContained),
            failed_controls: ids(Verdict::Failed),
            inconclusive: ids(Verdict::Inconclusive),
            counts: Counts::default(),
            millis: 7,
            probes,
        }
    }

    #[test]
    fn verdict_line_names_the_escapes_and_broken_controls() {
        let r = report(&[
            ("read-ssh-key", Kind::Attack, Verdict::NotContained),
            ("io-uring", Kind::Attack, Verdict::Contained),
            ("control-git-status", Kind::Control, Verdict::Failed),
        ]);
        let line = verdict_line(&r);
        assert!(
            line.starts_with("verdict: NOT CONTAINED at tier fs-only"),
            "{line}"
        );
        assert!(line.contains("not contained: read-ssh-key"), "{line}");
        assert!(line.contains("controls failed"), "{line}");
    }

    #[test]
    fn a_clean_run_says_contained_and_the_table_lists_every_probe() {
        let r = report(&[
            ("read-ssh-key", Kind::Attack, Verdict::Contained),
            ("x32-syscall", Kind::Attack, Verdict::NotApplicable),
            ("control-project-write", Kind::Control, Verdict::Works),
        ]);
        let t = text(&r);
        assert!(t.contains("verdict: CONTAINED at tier fs-only"), "{t}");
        for id in ["read-ssh-key", "x32-syscall", "control-project-write"] {
            assert!(t.contains(id), "{t}");
        }
    }

    #[test]
    #[expect(clippy::unwrap_used, reason = "test")]
    fn json_results_are_kebab_case() {
        let r = report(&[("a", Kind::Attack, Verdict::NotContained)]);
        let doc: serde_json::Value = serde_json::from_str(&json(&r).unwrap()).unwrap();
        assert_eq!(doc["probes"][0]["result"], "not-contained");
        assert_eq!(doc["probes"][0]["kind"], "attack");
        assert_eq!(doc["tier"], "fs-only");
    }
}
