//! `summary.md`: short Markdown for `$GITHUB_STEP_SUMMARY` (and the PR
//! comment). Kept under GitHub's 1 MiB per step; everything from the
//! sandboxed side is put in code spans with pipes escaped, so a file name
//! cannot inject Markdown, HTML or @-mentions.

use std::fmt::Write;

use super::{Model, Verdict, human_bytes, human_ms, outcome_text};

/// GitHub refuses step summaries over 1 MiB; keep a margin.
pub const MAX_BYTES: usize = 1024 * 1024 - 16 * 1024;
/// Findings listed in the table (the rest are counted).
pub const TOP: usize = 50;

/// Render `summary.md`.
pub fn render(model: &Model) -> String {
    render_capped(model, MAX_BYTES)
}

pub fn render_capped(model: &Model, max_bytes: usize) -> String {
    let mut out = String::new();
    let verdict = match model.verdict() {
        Verdict::Clean => "✅ **vetto: clean** — the command passed and nothing was blocked",
        Verdict::Violations if model.start.audit => {
            "⚠️ **vetto: violations observed** — audit mode: nothing was blocked"
        }
        Verdict::Violations => {
            "❌ **vetto: violations** — the command passed, but the sandbox recorded violations"
        }
        Verdict::Failed => "❌ **vetto: the command failed**",
        Verdict::Incomplete => {
            "⚠️ **vetto: incomplete** — the session log ends abruptly (vetto was killed)"
        }
    };
    let _ = writeln!(out, "### {verdict}\n");
    let s = &model.start;
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| command | {} |", code(&model.command_line()));
    let status = match &model.end {
        Some(e) => format!("{} ({})", e.exit_code, outcome_text(e.outcome)),
        None => "unknown".into(),
    };
    let _ = writeln!(out, "| exit status | {status} |");
    let unobserved = model.start.tier.unobserved();
    if !unobserved.is_empty() {
        let _ = writeln!(
            out,
            "| not observed at this tier | {} (refused, but not recorded) |",
            unobserved.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "| tier | {}{} |",
        code(s.tier.as_str()),
        if s.audit {
            " (audit: observed, not blocked)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "| enforced | {} |", cell(&s.enforced.join(", ")));
    if !s.withheld_env.is_empty() {
        let _ = writeln!(
            out,
            "| withheld from the job | {} |",
            cell(&s.withheld_env.join(", "))
        );
    }
    let expected = model.expected_phrases();
    if !expected.is_empty() {
        let shown: Vec<String> = expected.iter().take(TOP).map(|e| code(e)).collect();
        let _ = writeln!(
            out,
            "| expected by the policy (no finding: refused, or a kept change) | {} |",
            shown.join(", ")
        );
    }
    if !s.degraded.is_empty() {
        let _ = writeln!(
            out,
            "| **not enforced** | {} |",
            cell(&s.degraded.join(", "))
        );
    }
    let _ = writeln!(out, "| duration | {} |", human_ms(model.duration_ms()));
    if let Some(e) = &model.end {
        let _ = writeln!(
            out,
            "| resources | CPU {} user / {} sys, peak memory {}, peak {} processes |",
            human_ms(e.cpu_user_ms),
            human_ms(e.cpu_sys_ms),
            human_bytes(e.peak_rss_bytes),
            e.peak_procs
        );
    }
    match &s.policy.line {
        Some(line) => {
            let _ = writeln!(
                out,
                "| policy | {} ({}) |",
                cell(line),
                code(&s.policy.digest)
            );
        }
        None => {
            let _ = writeln!(out, "| policy | {} |", code(&s.policy.digest));
        }
    }
    if s.policy.working_tree_differs {
        let _ = writeln!(
            out,
            "| **policy in the working tree** | differs from the one in force, and was not used |"
        );
    }
    let _ = writeln!(out);

    if model.total_violations > 0 {
        let _ = writeln!(
            out,
            "**{} violation(s), {} distinct**\n",
            model.total_violations,
            model.findings.len()
        );
        let _ = writeln!(out, "| rule | count |\n|---|---:|");
        for (rule, n) in &model.counts_by_rule {
            let _ = writeln!(out, "| [{}]({}) | {n} |", rule.as_str(), rule.docs_url());
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "| rule | target | by | count | to allow |\n|---|---|---|---:|---|"
        );
        let roots = s.roots();
        let mut listed = 0;
        for f in model.findings.iter().take(TOP) {
            let v = &f.violation;
            let target = match v.target.path() {
                Some(p) => roots.normalise(p),
                None => v.target.display(),
            };
            let by = match &v.attribution {
                Some(p) => p.display(),
                None if v.process.exe.as_os_str().is_empty() => "an unknown process".into(),
                None => roots.normalise(&v.process.exe),
            };
            let row = format!(
                "| {} | {} | {} | {} | {} |\n",
                v.rule.as_str(),
                code(&target),
                code(&by),
                f.count,
                code(&model.suggestion(f)),
            );
            // Leave room for the closing note.
            if out.len() + row.len() > max_bytes.saturating_sub(512) {
                break;
            }
            out.push_str(&row);
            listed += 1;
        }
        let rest = model.findings.len() - listed;
        if rest > 0 {
            let _ = writeln!(
                out,
                "\n_…and {rest} more distinct violation(s), left out to keep this summary short; see `report.html` and `vetto.sarif`._"
            );
        }
    }
    destinations(&mut out, model, max_bytes);
    secret_uses(&mut out, model, max_bytes);
    if model.torn_tail || model.skipped_lines > 0 {
        let _ = writeln!(
            out,
            "\n_The session log was cut short or had unreadable lines; this summary shows what was recorded._"
        );
    }
    if out.len() > max_bytes {
        let mut cut = max_bytes.saturating_sub(200);
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n\n_(truncated to stay under GitHub's 1 MiB step-summary limit)_\n");
    }
    out
}

/// The "Network destinations" table: the first [`TOP`] destinations
/// (denied first), within the byte budget.
fn destinations(out: &mut String, model: &Model, max_bytes: usize) {
    use crate::events::ConnDecision;
    use crate::report::html::variant_name;
    let all = &model.destinations;
    if all.is_empty() {
        return;
    }
    let counts: Vec<String> = [
        (ConnDecision::Denied, "denied"),
        (ConnDecision::Observed, "observed (audit)"),
        (ConnDecision::Failed, "unreachable"),
        (ConnDecision::Allowed, "allowed"),
    ]
    .into_iter()
    .filter_map(|(d, word)| {
        let n = all.iter().filter(|x| x.decision == d).count();
        (n > 0).then(|| format!("{n} {word}"))
    })
    .collect();
    let _ = writeln!(out, "\n**Network destinations: {}**\n", counts.join(", "));
    let _ = writeln!(
        out,
        "| destination | decision | address | connections | up / down | by |\n|---|---|---|---:|---:|---|"
    );
    let mut listed = 0;
    for d in all.iter().take(TOP) {
        let mut decision = match d.reason {
            crate::events::ConnReason::AllowedByRule => variant_name(d.decision),
            reason => format!("{} ({})", variant_name(d.decision), variant_name(reason)),
        };
        if let Some(rule) = &d.rule {
            decision.push_str(&format!(" {}", code(rule)));
        }
        let addrs = if d.addrs.is_empty() {
            "—".to_string()
        } else {
            d.addrs
                .iter()
                .map(|a| code(a))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut by = d
            .actors
            .iter()
            .map(|a| code(a))
            .collect::<Vec<_>>()
            .join(" ");
        if d.more_actors > 0 {
            by.push_str(&format!(" and {} more", d.more_actors));
        }
        let row = format!(
            "| {} | {decision} | {addrs} | {} | {} / {} | {by} |\n",
            code(&d.display()),
            d.connections,
            human_bytes(d.bytes_up),
            human_bytes(d.bytes_down),
        );
        if !push_within(out, &row, max_bytes) {
            break;
        }
        listed += 1;
    }
    let rest = (all.len() - listed) as u64 + model.destinations_dropped;
    if rest > 0 {
        let _ = writeln!(
            out,
            "\n_…and {rest} more destination(s); see `report.html` and `session.jsonl`._"
        );
    }
}

/// The "Secrets used" table: each request vetto's proxy put a secret in,
/// by whom (names only, never a value), within the byte budget.
fn secret_uses(out: &mut String, model: &Model, max_bytes: usize) {
    let all = &model.secret_uses;
    if all.is_empty() {
        return;
    }
    let mut names: Vec<(&str, u64)> = Vec::new();
    for u in all {
        match names.iter_mut().find(|(n, _)| *n == u.secret) {
            Some((_, c)) => *c += u.count,
            None => names.push((&u.secret, u.count)),
        }
    }
    let counted: Vec<String> = names
        .iter()
        .map(|(n, c)| format!("{} ({c} request(s))", code(n)))
        .collect();
    let _ = writeln!(
        out,
        "\n**Secrets used: {}** — put in by vetto's proxy; the job held placeholders\n",
        counted.join(", ")
    );
    let _ = writeln!(
        out,
        "| secret | request | status | requests | by |\n|---|---|---:|---:|---|"
    );
    let mut listed = 0;
    for u in all {
        let status = u.status.map_or("—".to_string(), |s| s.to_string());
        let row = format!(
            "| {} | {} | {status} | {} | {} |\n",
            code(&u.secret),
            code(&format!("{} https://{}{}", u.method, u.host, u.path)),
            u.count,
            code(&u.actor),
        );
        if !push_within(out, &row, max_bytes) {
            break;
        }
        listed += 1;
    }
    let rest = (all.len() - listed) as u64 + model.secret_uses_dropped;
    if rest > 0 {
        let _ = writeln!(
            out,
            "\n_…and {rest} more use(s); see `report.html` and `session.jsonl`._"
        );
    }
}

/// Append a table row unless it would take the summary past its budget
/// (less 512 bytes for the lines after the table); whether it did.
fn push_within(out: &mut String, row: &str, max_bytes: usize) -> bool {
    if out.len() + row.len() > max_bytes.saturating_sub(512) {
        return false;
    }
    out.push_str(row);
    true
}

/// Untrusted text as an inline code span inside a table cell: control,
/// bidirectional and invisible characters shown escaped
/// ([`crate::text::escape`]), a backtick (which would end the span) as `'`,
/// a pipe (which would end the cell, even inside a span) as `\|`.
pub fn code(s: &str) -> String {
    let clean = crate::text::escape(s).replace('`', "'");
    format!("`{}`", clean.replace('|', "\\|"))
}

/// Trusted-ish prose in a table cell: pipes and angle brackets escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', " ")
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::events::log::SessionLog;
    use crate::report::fixture;

    #[test]
    fn attack_session_summary() {
        insta::assert_snapshot!(render(&fixture::attack_model()));
    }

    #[test]
    fn file_names_cannot_inject_markdown_or_html() {
        let md = render(&fixture::attack_model());
        assert!(
            md.contains("`~/work/app/app/../<img src=x onerror=alert(1)>`")
                || md.contains("<img src=x onerror=alert(1)>`")
        );
        for line in md.lines().filter(|l| l.contains("<img")) {
            // Only ever inside a code span.
            let before = &line[..line.find("<img").unwrap()];
            assert_eq!(before.matches('`').count() % 2, 1, "{line}");
        }
        assert_eq!(code("a|b`c\nd"), "`a\\|b'c\\nd`");
        assert_eq!(code("\u{202e}fdp.exe\x1b[2J"), "`\\u{202e}fdp.exe\\x1b[2J`");
    }

    #[test]
    fn egress_session_summary() {
        let md = render(&fixture::egress_model());
        assert!(
            md.contains("**Network destinations: 5 denied, 2 allowed**"),
            "{md}"
        );
        // A name the job chose is only ever inside a code span.
        for line in md.lines().filter(|l| l.contains("<img")) {
            let before = &line[..line.find("<img").unwrap()];
            assert_eq!(before.matches('`').count() % 2, 1, "{line}");
        }
        insta::assert_snapshot!(md);
    }

    #[test]
    fn a_timed_out_job_is_reported_as_failed_with_its_status() {
        let events: Vec<_> = fixture::attack_session()
            .into_iter()
            .map(|e| match e {
                crate::events::Event::SessionEnd(mut end) => {
                    end.outcome = crate::exit::Outcome::TimedOut;
                    end.exit_code = 124;
                    crate::events::Event::SessionEnd(end)
                }
                other => other,
            })
            .collect();
        let model =
            crate::report::Model::build(&SessionLog::parse(&fixture::to_jsonl(&events))).unwrap();
        assert_eq!(model.verdict(), crate::report::Verdict::Failed);
        let md = render(&model);
        assert!(
            md.contains("| exit status | 124 (killed at the --timeout) |"),
            "{md}"
        );
    }

    #[test]
    fn a_huge_session_is_truncated_under_the_step_summary_limit() {
        let events = fixture::storm_session(3_000, 3_000);
        let model =
            crate::report::Model::build(&SessionLog::parse(&fixture::to_jsonl(&events))).unwrap();
        let md = render_capped(&model, 8_000);
        assert!(md.len() <= 8_000, "{}", md.len());
        assert!(md.contains("more distinct violation(s)"));
    }
}
