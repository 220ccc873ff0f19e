//! `report.html`: one self-contained page for reviewers. Inline CSS and
//! SVG, no script, no external request, a strict CSP. The template is
//! embedded (`templates/report.html.j2`) and rendered by minijinja with HTML
//! auto-escaping forced on for every value: paths, argv and host names come
//! from the sandboxed side and are hostile.

use std::collections::BTreeMap;

use minijinja::{AutoEscape, Environment, HtmlEscape, Value};
use serde::Serialize;

use super::{Finding, Model, ReportError, Verdict, human_bytes, human_ms};
use crate::events::{ProcessKind, RuleId};

/// Findings rendered in full; the rest are counted (keeps the page under a
/// few MB for a storm of distinct violations).
pub const MAX_FINDINGS: usize = 2_000;
/// Markers drawn on the timeline.
const MAX_MARKS: usize = 400;

const TEMPLATE: &str = include_str!("../../templates/report.html.j2");
const STYLE: &str = include_str!("../../templates/style.css");

/// Render `report.html`.
pub fn render(model: &Model) -> Result<String, ReportError> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    // Every string shows its control, bidirectional and invisible
    // characters escaped ([`crate::text::escape`]) before HTML escaping: a
    // browser would hide an ESC and honour a right-to-left override, so a
    // name could read as another. (`| safe` values are vetto's own.)
    env.set_formatter(|out, state, value| match value.as_str() {
        Some(s) if !value.is_safe() => {
            let shown = Value::from(crate::text::escape(s).as_ref());
            minijinja::escape_formatter(out, state, &shown)
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    env.add_template("report.html", TEMPLATE)?;
    let view = View::build(model);
    Ok(env
        .get_template("report.html")?
        .render(minijinja::value::Serde(&view))?)
}

#[derive(Serialize)]
struct View {
    style: &'static str,
    verdict: &'static str,
    verdict_text: &'static str,
    /// What this tier refuses without vetto seeing it.
    unobserved: &'static [&'static str],
    command: String,
    status: String,
    tier: String,
    audit: bool,
    enforced: Vec<String>,
    withheld_env: Vec<String>,
    /// Refusals the policy expects (`Model::expected_phrases`).
    expected: Vec<String>,
    degraded: Vec<String>,
    started_at: String,
    duration: String,
    cwd: String,
    project: String,
    git: Option<String>,
    total: u64,
    distinct: usize,
    hidden: usize,
    counts: Vec<RuleCount>,
    classes: Vec<ClassGroup>,
    packages: Vec<ActorGroup>,
    destinations: Vec<DestinationView>,
    destinations_total: usize,
    destinations_more: u64,
    secret_uses: Vec<SecretUseView>,
    secret_uses_more: u64,
    timeline: Timeline,
    charts: Vec<Chart>,
    totals: Vec<(String, String)>,
    policy_digest: String,
    policy_sources: Vec<(String, String)>,
    policy_rules: Vec<String>,
    host: Vec<(String, String)>,
    vetto_version: String,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct RuleCount {
    id: &'static str,
    count: u64,
    level: &'static str,
    description: &'static str,
    docs: String,
}

#[derive(Serialize)]
struct ClassGroup {
    class: &'static str,
    count: u64,
    findings: Vec<FindingView>,
}

#[derive(Serialize)]
struct FindingView {
    rule: &'static str,
    level: &'static str,
    description: &'static str,
    docs: String,
    target: String,
    action: &'static str,
    actor: String,
    package: Option<String>,
    count: u64,
    first: String,
    last: String,
    chain: Vec<String>,
    argv: String,
    cwd: String,
    /// TOML to copy, HTML-escaped here and shown as it is: its
    /// backslashes are TOML escapes, and [`Model::suggestion`] leaves no
    /// control character in it.
    suggestion: String,
    detail: String,
    provenance: String,
    policy_rule: Option<String>,
}

#[derive(Serialize)]
struct ActorGroup {
    actor: String,
    is_package: bool,
    count: u64,
    rules: Vec<&'static str>,
}

/// One row of "Secrets used" (names and request lines only).
#[derive(Serialize)]
struct SecretUseView {
    secret: String,
    request: String,
    status: String,
    count: u64,
    actor: String,
}

#[derive(Serialize)]
struct DestinationView {
    target: String,
    decision: String,
    level: &'static str,
    addrs: Vec<String>,
    reason: String,
    detail: String,
    rule: Option<String>,
    connections: u64,
    up: String,
    down: String,
    actors: Vec<String>,
    more_actors: u64,
}

/// A serde unit variant's name (`not-allowed`), for the enums of the log.
pub(crate) fn variant_name(v: impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn destination_view(d: &super::destinations::Destination) -> DestinationView {
    use crate::events::ConnDecision;
    DestinationView {
        target: d.display(),
        decision: variant_name(d.decision),
        level: match d.decision {
            ConnDecision::Denied => "error",
            ConnDecision::Observed | ConnDecision::Failed => "warning",
            ConnDecision::Allowed => "note",
        },
        addrs: d.addrs.clone(),
        reason: d.reason.describe().to_string(),
        detail: d.detail.clone(),
        rule: d.rule.clone(),
        connections: d.connections,
        up: human_bytes(d.bytes_up),
        down: human_bytes(d.bytes_down),
        actors: d.actors.clone(),
        more_actors: d.more_actors,
    }
}

#[derive(Serialize)]
struct Timeline {
    duration: String,
    marks: Vec<Mark>,
    rows: Vec<TimelineRow>,
    more: usize,
}

#[derive(Serialize)]
struct Mark {
    x: String,
    level: &'static str,
    title: String,
}

#[derive(Serialize)]
struct TimelineRow {
    at: String,
    level: &'static str,
    what: String,
}

#[derive(Serialize)]
struct Chart {
    title: &'static str,
    peak: String,
    points: String,
    area: String,
    empty: bool,
}

fn level(r: RuleId) -> &'static str {
    match r.level() {
        crate::events::rule_id::Level::Error => "error",
        crate::events::rule_id::Level::Warning => "warning",
        crate::events::rule_id::Level::Note => "note",
    }
}

impl View {
    fn build(m: &Model) -> View {
        let s = &m.start;
        let roots = s.roots();
        let (verdict, verdict_text) = match m.verdict() {
            Verdict::Clean => ("clean", "Clean: the command passed and nothing was blocked"),
            Verdict::Violations if s.audit => (
                "violations",
                "Violations observed: audit mode, nothing was blocked",
            ),
            Verdict::Violations => (
                "violations",
                "Violations: the command passed, but the sandbox recorded violations",
            ),
            Verdict::Failed => ("failed", "The command failed"),
            Verdict::Incomplete => (
                "incomplete",
                "Incomplete: the session log ends abruptly (vetto was killed)",
            ),
        };
        let status = match &m.end {
            Some(e) => format!("{} ({})", e.exit_code, super::outcome_text(e.outcome)),
            None => "unknown".into(),
        };
        let finding_view = |f: &Finding| {
            let v = &f.violation;
            FindingView {
                rule: v.rule.as_str(),
                level: level(v.rule),
                description: v.rule.description(),
                docs: v.rule.docs_url(),
                target: match v.target.path() {
                    Some(p) => roots.normalise(p),
                    None => v.target.display(),
                },
                action: match v.action {
                    crate::events::Action::Blocked => "blocked",
                    crate::events::Action::Observed => "observed",
                    crate::events::Action::Expected => "expected",
                    crate::events::Action::PutBack => "put back",
                },
                actor: f.actor(),
                package: v
                    .attribution
                    .as_ref()
                    .map(|p| format!("{} — {}", p.display(), roots.normalise(&p.manifest))),
                count: f.count,
                first: format!("+{}", human_ms(v.time.since(s.started_at))),
                last: format!("+{}", human_ms(f.last.since(s.started_at))),
                chain: std::iter::once(format!(
                    "{} (pid {})",
                    roots.normalise(&v.process.exe),
                    v.process.pid
                ))
                .chain(
                    v.process
                        .parent_chain
                        .iter()
                        .map(|(pid, exe)| format!("{} (pid {pid})", roots.normalise(exe))),
                )
                .collect(),
                argv: super::shell_join(&v.process.argv),
                cwd: roots.normalise(&v.process.cwd),
                suggestion: HtmlEscape(&m.suggestion(f)).to_string(),
                detail: v.detail.clone(),
                provenance: serde_json::to_value(v.provenance)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                policy_rule: v.policy_rule.as_ref().map(|p| {
                    format!(
                        "{}:{} {}",
                        roots.normalise(std::path::Path::new(&p.source)),
                        p.line,
                        p.written
                    )
                }),
            }
        };
        let shown = &m.findings[..m.findings.len().min(MAX_FINDINGS)];
        let mut classes: Vec<ClassGroup> = Vec::new();
        for f in shown {
            let class = f.violation.rule.class();
            match classes.iter_mut().find(|c| c.class == class) {
                Some(c) => {
                    c.count += f.count;
                    c.findings.push(finding_view(f));
                }
                None => classes.push(ClassGroup {
                    class,
                    count: f.count,
                    findings: vec![finding_view(f)],
                }),
            }
        }
        let mut actors: BTreeMap<String, ActorGroup> = BTreeMap::new();
        for f in &m.findings {
            let a = actors.entry(f.actor()).or_insert_with(|| ActorGroup {
                actor: f.actor(),
                is_package: f.violation.attribution.is_some(),
                count: 0,
                rules: vec![],
            });
            a.count += f.count;
            if !a.rules.contains(&f.violation.rule.as_str()) {
                a.rules.push(f.violation.rule.as_str());
            }
        }
        let mut packages: Vec<ActorGroup> = actors.into_values().collect();
        packages.sort_by(|a, b| b.is_package.cmp(&a.is_package).then(b.count.cmp(&a.count)));

        let mut warnings = Vec::new();
        if m.torn_tail || m.end.is_none() {
            warnings.push("The session log ends abruptly: vetto or the runner was killed. This report shows what was recorded until then.".to_string());
        }
        if m.skipped_lines > 0 {
            warnings.push(format!(
                "{} line(s) of the session log could not be read.",
                m.skipped_lines
            ));
        }
        if s.audit {
            warnings.push(
                "--audit: nothing was enforced; what the policy would refuse was recorded as observed."
                    .into(),
            );
        } else if !s.degraded.is_empty() {
            warnings.push(
                "This tier did not enforce every rule of the policy (--allow-degraded).".into(),
            );
        }
        if let Some(e) = &m.end
            && e.dropped_distinct > 0
        {
            warnings.push(format!(
                "{} further distinct violation(s) were counted but not recorded individually.",
                e.dropped_distinct
            ));
        }

        let mut totals = vec![];
        if let Some(e) = &m.end {
            totals.push(("CPU user".into(), human_ms(e.cpu_user_ms)));
            totals.push(("CPU system".into(), human_ms(e.cpu_sys_ms)));
            totals.push(("peak memory".into(), human_bytes(e.peak_rss_bytes)));
            totals.push(("peak processes".into(), e.peak_procs.to_string()));
            if e.proxy_bytes > 0 {
                totals.push(("through the proxy".into(), human_bytes(e.proxy_bytes)));
            }
        }
        let h = &s.host;
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        View {
            style: STYLE,
            verdict,
            verdict_text,
            unobserved: s.tier.unobserved(),
            command: m.command_line(),
            status,
            tier: s.tier.to_string(),
            audit: s.audit,
            enforced: s.enforced.clone(),
            withheld_env: s.withheld_env.clone(),
            expected: m.expected_phrases(),
            degraded: s.degraded.clone(),
            started_at: s.started_at.to_string(),
            duration: human_ms(m.duration_ms()),
            cwd: s.cwd.display().to_string(),
            project: s.project.display().to_string(),
            git: s.git.as_ref().map(|g| match &g.branch {
                Some(b) => format!("{} ({b})", g.commit),
                None => g.commit.clone(),
            }),
            total: m.total_violations,
            distinct: m.findings.len(),
            hidden: m.findings.len() - shown.len(),
            counts: m
                .counts_by_rule
                .iter()
                .map(|(r, n)| RuleCount {
                    id: r.as_str(),
                    count: *n,
                    level: level(*r),
                    description: r.description(),
                    docs: r.docs_url(),
                })
                .collect(),
            classes,
            packages,
            destinations: m
                .destinations
                .iter()
                .take(super::destinations::TOP)
                .map(destination_view)
                .collect(),
            secret_uses: m
                .secret_uses
                .iter()
                .map(|u| SecretUseView {
                    secret: u.secret.clone(),
                    request: format!("{} https://{}{}", u.method, u.host, u.path),
                    status: u.status.map_or("—".to_string(), |s| s.to_string()),
                    count: u.count,
                    actor: u.actor.clone(),
                })
                .collect(),
            secret_uses_more: m.secret_uses_dropped,
            destinations_total: m.destinations.len(),
            destinations_more: m
                .destinations
                .len()
                .saturating_sub(super::destinations::TOP) as u64
                + m.destinations_dropped,
            timeline: timeline(m),
            charts: charts(m),
            totals,
            policy_digest: s.policy.digest.clone(),
            policy_sources: s
                .policy
                .sources
                .iter()
                .map(|p| (p.name.clone(), p.digest.clone()))
                .collect(),
            policy_rules: s.policy.rules.clone(),
            host: vec![
                ("kernel".into(), h.kernel.clone()),
                ("architecture".into(), h.arch.clone()),
                ("Landlock ABI".into(), h.landlock_abi.to_string()),
                ("user namespaces".into(), yes(h.userns)),
                ("seccomp".into(), yes(h.seccomp)),
                ("seccomp user notification".into(), yes(h.seccomp_notify)),
            ],
            vetto_version: s.vetto_version.clone(),
            warnings,
        }
    }
}

fn timeline(m: &Model) -> Timeline {
    let t0 = m.start.started_at;
    let total = m.duration_ms().max(1);
    let x = |ms: u64| format!("{:.1}", (ms.min(total) as f64 / total as f64) * 1000.0);
    let roots = m.start.roots();
    let mut rows: Vec<(u64, &'static str, String)> = Vec::new();
    for f in &m.findings {
        let v = &f.violation;
        let target = match v.target.path() {
            Some(p) => roots.normalise(p),
            None => v.target.display(),
        };
        let times = if f.count > 1 {
            format!(" (×{})", f.count)
        } else {
            String::new()
        };
        rows.push((
            v.time.since(t0),
            level(v.rule),
            format!("{}: {target} by {}{times}", v.rule.as_str(), f.actor()),
        ));
    }
    for l in &m.limits {
        rows.push((
            l.time.since(t0),
            "error",
            format!(
                "limit {} reached ({} of {})",
                match l.limit {
                    crate::events::LimitKind::Timeout => "timeout",
                    crate::events::LimitKind::Memory => "memory",
                    crate::events::LimitKind::Procs => "processes",
                },
                l.observed,
                l.max
            ),
        ));
    }
    for p in &m.processes {
        let what = match p.kind {
            ProcessKind::Exec => format!("exec {}", super::shell_join(&p.argv)),
            ProcessKind::Exit { status } => format!("pid {} exited {status}", p.pid),
            ProcessKind::Escaped => format!(
                "pid {} ({}) outlived the job",
                p.pid,
                roots.normalise(&p.exe)
            ),
        };
        rows.push((p.time.since(t0), "note", what));
    }
    if let Some(e) = &m.end {
        rows.push((
            e.duration_ms,
            "note",
            format!("session ended: exit status {}", e.exit_code),
        ));
    }
    rows.sort_by_key(|r| r.0);
    let marks = rows
        .iter()
        .take(MAX_MARKS)
        .map(|(t, lvl, what)| Mark {
            x: x(*t),
            level: lvl,
            title: format!("+{} {what}", human_ms(*t)),
        })
        .collect();
    let limit = 200;
    let more = rows.len().saturating_sub(limit);
    Timeline {
        duration: human_ms(total),
        marks,
        rows: rows
            .into_iter()
            .take(limit)
            .map(|(t, level, what)| TimelineRow {
                at: format!("+{}", human_ms(t)),
                level,
                what,
            })
            .collect(),
        more,
    }
}

/// CPU (% of one core), memory and processes over time, as SVG polylines
/// in a 600×100 box.
fn charts(m: &Model) -> Vec<Chart> {
    let r = &m.resources;
    let total = m
        .duration_ms()
        .max(r.last().map(|s| s.t).unwrap_or(0))
        .max(1);
    let cpu: Vec<(u64, f64)> = r
        .windows(2)
        .map(|w| {
            let dt = w[1].t.saturating_sub(w[0].t).max(1) as f64;
            let used = (w[1].cpu_user_ms + w[1].cpu_sys_ms)
                .saturating_sub(w[0].cpu_user_ms + w[0].cpu_sys_ms) as f64;
            (w[1].t, used / dt * 100.0)
        })
        .collect();
    let mem: Vec<(u64, f64)> = r.iter().map(|s| (s.t, s.rss_bytes as f64)).collect();
    let procs: Vec<(u64, f64)> = r.iter().map(|s| (s.t, f64::from(s.procs))).collect();
    let peak = |v: &[(u64, f64)]| v.iter().map(|p| p.1).fold(0.0, f64::max);
    vec![
        chart("CPU", &cpu, total, format!("{:.0}% of a core", peak(&cpu))),
        chart("Memory", &mem, total, human_bytes(peak(&mem) as u64)),
        chart("Processes", &procs, total, format!("{:.0}", peak(&procs))),
    ]
}

fn chart(title: &'static str, pts: &[(u64, f64)], total: u64, peak_label: String) -> Chart {
    let peak = pts
        .iter()
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    // Down-sample to at most 600 points: one per horizontal unit.
    let step = (pts.len() / 600).max(1);
    let coords: Vec<(f64, f64)> = pts
        .iter()
        .step_by(step)
        .map(|(t, v)| (*t as f64 / total as f64 * 600.0, 100.0 - (v / peak * 95.0)))
        .collect();
    let points = coords
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ");
    let area = match (coords.first(), coords.last()) {
        (Some(first), Some(last)) => format!("{:.1},100 {points} {:.1},100", first.0, last.0),
        _ => String::new(),
    };
    Chart {
        title,
        peak: peak_label,
        points,
        area,
        empty: coords.len() < 2,
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn hostile_file_names_render_as_text() {
        let html = render(&fixture::attack_model()).unwrap();
        assert!(
            !html.contains("<img src=x"),
            "unescaped <img> in the report"
        );
        assert!(
            !html.contains("<script>alert"),
            "unescaped <script> in the report"
        );
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    }

    /// An audited session enforced nothing by choice: its report says so,
    /// and does not claim the tier was accepted weaker (`--allow-degraded`).
    #[test]
    fn an_audit_report_says_audit_not_allow_degraded() {
        let mut events = fixture::attack_session();
        for e in &mut events {
            if let crate::events::Event::SessionStart(s) = e {
                s.audit = true;
                s.degraded = vec![
                    "--audit: nothing is enforced; what the policy would refuse is recorded as observed"
                        .into(),
                ];
            }
        }
        let log = crate::events::log::SessionLog::parse(&fixture::to_jsonl(&events));
        let html = render(&crate::report::Model::build(&log).unwrap()).unwrap();
        assert!(
            html.contains("--audit: nothing was enforced"),
            "audit not said"
        );
        assert!(
            !html.contains("--allow-degraded"),
            "claims --allow-degraded"
        );
    }

    #[test]
    fn control_and_bidi_characters_in_names_are_shown_escaped() {
        let mut events = fixture::attack_session();
        for e in &mut events {
            if let crate::events::Event::Violation(v) = e
                && let crate::events::Target::Path { path } = &mut v.target
            {
                *path = std::path::PathBuf::from("/work/app/\u{202e}txt.exe\x1b]0;p\x07\u{9b}");
            }
        }
        let log = crate::events::log::SessionLog::parse(&fixture::to_jsonl(&events));
        let html = render(&crate::report::Model::build(&log).unwrap()).unwrap();
        assert!(
            html.contains("\\u{202e}txt.exe\\x1b]0;p\\x07\\u{9b}"),
            "not shown escaped"
        );
        for c in ['\u{202e}', '\x1b', '\x07', '\u{9b}'] {
            assert!(!html.contains(c), "raw {c:?} in the page");
        }
    }

    #[test]
    fn the_page_is_self_contained_and_locked_down() {
        let html = render(&fixture::attack_model()).unwrap();
        assert!(html.contains(
            r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">"#
        ));
        assert!(!html.contains("<script"), "no JavaScript");
        for needle in ["src=\"http", "href=\"//", "@import", "url(http", "<link"] {
            assert!(!html.contains(needle), "external reference: {needle}");
        }
    }

    #[test]
    fn html_structure() {
        // Pin the page's outline (headings and section ids), not every byte.
        let html = render(&fixture::attack_model()).unwrap();
        let outline: Vec<&str> = html
            .lines()
            .map(str::trim)
            .filter(|l| {
                l.starts_with("<h1")
                    || l.starts_with("<h2")
                    || l.starts_with("<h3")
                    || l.starts_with("<section")
            })
            .collect();
        insta::assert_snapshot!(outline.join("\n"));
    }

    #[test]
    fn a_storm_of_distinct_violations_keeps_the_page_small() {
        let events = fixture::storm_session(5_000, 5_000);
        let log = crate::events::log::SessionLog::parse(&fixture::to_jsonl(&events));
        let model = crate::report::Model::build(&log).unwrap();
        let html = render(&model).unwrap();
        assert!(html.len() < 5 * 1024 * 1024, "{} bytes", html.len());
        assert!(html.contains("3000 more distinct violation(s) are not shown"));
    }

    /// The destinations table: allowed and denied, with the pinned
    /// address, the reason and who connected; a name the job chose is text.
    #[test]
    fn egress_destinations_table_lists_allowed_and_denied() {
        let html = render(&fixture::egress_model()).unwrap();
        let table = &html[html.find("<section id=\"destinations\">").unwrap()..];
        let table = &table[..table.find("</section>").unwrap()];
        for needle in [
            "<code>registry.npmjs.org:443</code>",
            "<code>104.16.0.1</code>",
            "allowed by a rule",
            "<code>exfil.evil.test:443</code>",
            "no allow rule names this destination",
            "a deny rule names this destination",
            "<code>169.254.169.254:80</code>",
            "a direct connect() past the proxy, refused by the supervisor",
            "the address is internal",
            "<code>npm:evil@6.6.6</code>",
            "<code>&#x2f;usr&#x2f;bin&#x2f;git</code>",
            "&lt;img src=x onerror=alert(1)&gt;.evil.test:443",
        ] {
            assert!(table.contains(needle), "{needle} missing:\n{table}");
        }
        assert!(!html.contains("<img src=x"), "unescaped <img>");
        // Denied first.
        let pos = |s: &str| table.find(s).unwrap();
        assert!(pos("exfil.evil.test:443") < pos("registry.npmjs.org:443"));
        let outline: Vec<&str> = html
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("<h2") || l.starts_with("<section"))
            .collect();
        insta::assert_snapshot!(outline.join("\n"));
    }

    /// A job that contacts thousands of hosts gets a bounded table.
    #[test]
    fn a_storm_of_destinations_is_listed_bounded() {
        let mut events = fixture::egress_session();
        let extra: Vec<crate::events::Event> = (0..10_050u32)
            .map(|i| {
                let mut c = fixture::egress_connections().remove(0);
                c.host = Some(format!("h{i}.example.test"));
                crate::events::Event::Connection(Box::new(c))
            })
            .collect();
        events.splice(1..1, extra);
        let log = crate::events::log::SessionLog::parse(&fixture::to_jsonl(&events));
        let model = crate::report::Model::build(&log).unwrap();
        assert_eq!(
            model.destinations.len(),
            super::super::destinations::MAX_DESTINATIONS
        );
        assert!(model.destinations_dropped > 0);
        let html = render(&model).unwrap();
        let rows = html.matches("<tr><td class=\"dst\"><code>h").count();
        assert!(rows <= super::super::destinations::TOP, "{rows}");
        let more = model.destinations.len() - super::super::destinations::TOP
            + model.destinations_dropped as usize;
        assert!(
            html.contains(&format!("…and {more} more destination(s)")),
            "no count of the rest"
        );
        assert!(html.len() < 5 * 1024 * 1024, "{} bytes", html.len());
    }

    #[test]
    fn every_attack_appears_with_its_package() {
        let html = render(&fixture::attack_model()).unwrap();
        for rule in [
            "secret-read-denied",
            "git-persistence-blocked",
            "ci-control-file-blocked",
            "syscall-denied",
            "process-escaped",
        ] {
            assert!(html.contains(rule), "{rule} missing");
        }
        assert!(html.contains("npm:evil@6.6.6"));
    }
}
