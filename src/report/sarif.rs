//! SARIF 2.1.0 for GitHub code scanning.
//!
//! One result per distinct violation, except blocked connections: every
//! `net-egress-blocked` violation of one destination (host or address, and
//! port) is one result, whoever connected, fingerprinted by rule and
//! destination ([`DESTINATION_KEY`]). Allowed connections are no result.
//!
//! Every result gets one location inside the repository, a line of a file
//! code scanning can open ([`super::locate`]: the lockfile line that
//! brings in the package responsible, the target, the deciding policy
//! line, the workflow, a root file). GitHub's
//! limits (25,000 results a run, 1,000 locations a result, 10 MB gzipped)
//! are never exceeded: findings are already aggregated, the least severe are
//! cut first, and the cut is stated in the run's notifications.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use serde_json::{Value, json};
use serde_sarif::sarif;

use super::locate::{Locator, RepoLocation, code_of};
use super::{Finding, Model, ReportError};
use crate::events::RuleId;

/// GitHub: at most 25,000 results per run.
pub const MAX_RESULTS: usize = 25_000;
/// GitHub: at most 10 MB gzipped; keep a margin for the envelope.
pub const MAX_GZIPPED_BYTES: usize = 9_500_000;
/// The `partialFingerprints` key (versioned: a change of the key's recipe
/// must change its name, or GitHub would see every alert as new).
pub const FINGERPRINT_KEY: &str = "vettoViolation/v1";
/// The `partialFingerprints` key of a blocked destination (one result per
/// host and port, see [`destination_fingerprint`]).
pub const DESTINATION_KEY: &str = "vettoDestination/v1";

#[derive(Debug, Clone)]
pub struct SarifOptions {
    /// `automationDetails.id` category; defaults to `vetto/<job>`.
    pub category: Option<String>,
    pub max_results: usize,
    pub max_gzipped_bytes: usize,
}

impl Default for SarifOptions {
    fn default() -> Self {
        SarifOptions {
            category: None,
            max_results: MAX_RESULTS,
            max_gzipped_bytes: MAX_GZIPPED_BYTES,
        }
    }
}

/// Render the SARIF file (pretty JSON bytes).
pub fn render(model: &Model, opts: &SarifOptions) -> Result<Vec<u8>, ReportError> {
    let mut limit = items(model).len().min(opts.max_results);
    loop {
        let log = build(model, opts, limit);
        let bytes = serde_json::to_vec(&log).map_err(|source| ReportError::Serialize {
            what: "SARIF",
            source,
        })?;
        if limit == 0 || gzipped_len(&bytes) <= opts.max_gzipped_bytes {
            return Ok(bytes);
        }
        limit /= 2;
    }
}

fn gzipped_len(bytes: &[u8]) -> usize {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    if enc.write_all(bytes).is_err() {
        return usize::MAX;
    }
    enc.finish().map(|v| v.len()).unwrap_or(usize::MAX)
}

fn text(s: impl Into<String>) -> sarif::Message {
    sarif::Message::builder().text(s.into()).build()
}

fn mstring(text: impl Into<String>, markdown: Option<String>) -> sarif::MultiformatMessageString {
    match markdown {
        Some(md) => sarif::MultiformatMessageString::builder()
            .text(text.into())
            .markdown(md)
            .build(),
        None => sarif::MultiformatMessageString::builder()
            .text(text.into())
            .build(),
    }
}

fn bag(tags: Option<Vec<String>>, props: BTreeMap<String, Value>) -> sarif::PropertyBag {
    match tags {
        Some(t) => sarif::PropertyBag::builder()
            .tags(t)
            .additional_properties(props)
            .build(),
        None => sarif::PropertyBag::builder()
            .additional_properties(props)
            .build(),
    }
}

fn rule(r: RuleId) -> sarif::ReportingDescriptor {
    let props = BTreeMap::from([
        (
            "security-severity".to_string(),
            json!(format!("{:.1}", r.security_severity())),
        ),
        ("precision".to_string(), json!("very-high")),
        ("problem.severity".to_string(), json!(level_str(r))),
    ]);
    sarif::ReportingDescriptor::builder()
        .id(r.as_str())
        .name(r.name())
        .short_description(mstring(r.description(), None))
        .full_description(mstring(r.full_description(), None))
        .help(mstring(r.help_text(), Some(r.help_markdown().to_string())))
        .help_uri(r.docs_url())
        .default_configuration(
            sarif::ReportingConfiguration::builder()
                .level(json!(level_str(r)))
                .build(),
        )
        .properties(bag(
            Some(r.tags().into_iter().map(String::from).collect()),
            props,
        ))
        .build()
}

fn level_str(r: RuleId) -> &'static str {
    match r.level() {
        crate::events::rule_id::Level::Error => "error",
        crate::events::rule_id::Level::Warning => "warning",
        crate::events::rule_id::Level::Note => "note",
    }
}

fn result_level(r: RuleId) -> sarif::ResultLevel {
    match r.level() {
        crate::events::rule_id::Level::Error => sarif::ResultLevel::Error,
        crate::events::rule_id::Level::Warning => sarif::ResultLevel::Warning,
        crate::events::rule_id::Level::Note => sarif::ResultLevel::Note,
    }
}

/// Percent-encode a relative path for `artifactLocation.uri`.
pub fn uri_encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn message(model: &Model, f: &Finding, loc: &RepoLocation) -> String {
    let v = &f.violation;
    let roots = model.start.roots();
    let verb = match v.action {
        crate::events::Action::Blocked => "blocked",
        crate::events::Action::Observed => "observed (not blocked)",
        crate::events::Action::Expected => "blocked, as the policy expects",
        crate::events::Action::PutBack => "found after the session and put back as it was",
    };
    let target = match v.target.path() {
        Some(p) => roots.normalise(p),
        None => v.target.display(),
    };
    let who = match &v.attribution {
        Some(p) => format!(
            "package {} ({})",
            p.display(),
            roots.normalise(&v.process.exe)
        ),
        None => roots.normalise(&v.process.exe),
    };
    let times = if f.count > 1 {
        format!(", {} times", f.count)
    } else {
        String::new()
    };
    format!(
        "{}: {target} by {who} — {verb}{times}. {}. Shown here: {}.{}",
        v.rule.as_str(),
        v.rule.description(),
        loc.why,
        code_line(model, v.attribution.as_ref())
    )
}

/// " The code that did it: DIR." for a package responsible.
fn code_line(model: &Model, p: Option<&crate::events::Package>) -> String {
    p.map(|p| format!(" The code that did it: {}.", code_of(model, p)))
        .unwrap_or_default()
}

fn physical(loc: &RepoLocation) -> sarif::Location {
    let region = sarif::Region::builder()
        .start_line(i64::from(loc.line))
        .build();
    let physical = sarif::PhysicalLocation::builder()
        .artifact_location(
            sarif::ArtifactLocation::builder()
                .uri(uri_encode(&loc.path))
                .uri_base_id("%SRCROOT%")
                .build(),
        )
        .region(region)
        .build();
    sarif::Location::builder()
        .physical_location(physical)
        .build()
}

fn result(model: &Model, at: &Locator<'_>, f: &Finding) -> sarif::Result {
    let v = &f.violation;
    let loc = at.locate(f);
    let roots = model.start.roots();
    let mut props = BTreeMap::from([
        ("target".to_string(), json!(v.target.normalised(&roots))),
        ("action".to_string(), json!(v.action)),
        ("provenance".to_string(), json!(v.provenance)),
        ("firstSeen".to_string(), json!(v.time.to_string())),
        ("lastSeen".to_string(), json!(f.last.to_string())),
        ("exe".to_string(), json!(roots.normalise(&v.process.exe))),
    ]);
    if let Some(p) = &v.attribution {
        props.insert("package".into(), json!(p.display()));
    }
    sarif::Result::builder()
        .rule_id(v.rule.as_str())
        .rule_index(rule_index(v.rule))
        .level(result_level(v.rule))
        .kind(sarif::ResultKind::Fail)
        .message(text(message(model, f, &loc)))
        .locations(vec![physical(&loc)])
        .partial_fingerprints(BTreeMap::from([(
            FINGERPRINT_KEY.to_string(),
            f.fingerprint(),
        )]))
        .occurrence_count(i64::try_from(f.count).unwrap_or(i64::MAX))
        .properties(bag(None, props))
        .build()
}

/// What one SARIF result stands for.
enum Item<'a> {
    /// One distinct violation.
    Finding(&'a Finding),
    /// Every `net-egress-blocked` violation of one destination (host or
    /// address, and port), whichever process or package made it: the
    /// order of the findings (most frequent first).
    Destination(Vec<&'a Finding>),
}

/// The results of a model, most severe first: blocked connections are
/// folded into one result per destination.
fn items(model: &Model) -> Vec<Item<'_>> {
    let roots = model.start.roots();
    let mut out: Vec<Item<'_>> = Vec::new();
    let mut by_dest: HashMap<String, usize> = HashMap::new();
    for f in &model.findings {
        if f.violation.rule != RuleId::NetEgressBlocked {
            out.push(Item::Finding(f));
            continue;
        }
        let key = f.violation.target.normalised(&roots);
        match by_dest.get(&key).and_then(|&i| out.get_mut(i)) {
            Some(Item::Destination(group)) => group.push(f),
            _ => {
                by_dest.insert(key, out.len());
                out.push(Item::Destination(vec![f]));
            }
        }
    }
    out
}

/// The `partialFingerprints` value of a destination: the rule and the
/// normalised host (or address) and port — not who connected, so a second
/// package reaching the same host updates the alert instead of adding one.
pub fn destination_fingerprint(rule: RuleId, target: &str) -> String {
    crate::hash::sha256_hex(&[rule.as_str().as_bytes(), &[0], target.as_bytes()])
}

fn destination_result(
    model: &Model,
    at: &Locator<'_>,
    group: &[&Finding],
) -> Option<sarif::Result> {
    let first = group.first()?;
    let v = &first.violation;
    let roots = model.start.roots();
    // Shown where a package responsible is brought in, when one is.
    let shown = group
        .iter()
        .find(|f| f.violation.attribution.is_some())
        .unwrap_or(first);
    let loc = at.locate(shown);
    let count: u64 = group.iter().map(|f| f.count).sum();
    let mut actors: Vec<String> = Vec::new();
    for f in group {
        let who = match &f.violation.attribution {
            Some(p) => format!("package {}", p.display()),
            None if f.violation.process.exe.as_os_str().is_empty() => {
                "an unknown process".to_string()
            }
            None => roots.normalise(&f.violation.process.exe),
        };
        if !actors.contains(&who) {
            actors.push(who);
        }
    }
    let more = actors.len().saturating_sub(super::destinations::MAX_ACTORS);
    actors.truncate(super::destinations::MAX_ACTORS);
    let mut who = actors.join(", ");
    if more > 0 {
        who.push_str(&format!(" and {more} more"));
    }
    let verb = match v.action {
        crate::events::Action::Blocked => "blocked",
        crate::events::Action::Observed => "observed (not blocked)",
        crate::events::Action::Expected => "blocked, as the policy expects",
        crate::events::Action::PutBack => "found after the session and put back as it was",
    };
    let times = if count > 1 {
        format!(", {count} times")
    } else {
        String::new()
    };
    // Why, from the egress record of the destination where there is one
    // (the proxy's reason in words), else from the violations.
    let why = model
        .denied_destination(&v.target)
        .map(|d| match d.detail.as_str() {
            "" => d.reason.describe().to_string(),
            detail => format!("{}: {detail}", d.reason.describe()),
        })
        .or_else(|| {
            group
                .iter()
                .map(|f| f.violation.detail.clone())
                .find(|d| !d.is_empty())
        })
        .map(|d| format!(" Why: {d}."))
        .unwrap_or_default();
    let target = v.target.normalised(&roots);
    let message = format!(
        "{}: {} by {who} — {verb}{times}. {}.{why} Shown here: {}.{}",
        v.rule.as_str(),
        v.target.display(),
        v.rule.description(),
        loc.why,
        code_line(model, shown.violation.attribution.as_ref())
    );
    let first_seen = group
        .iter()
        .map(|f| f.violation.time)
        .min()
        .unwrap_or(v.time);
    let last_seen = group.iter().map(|f| f.last).max().unwrap_or(first.last);
    let mut packages: Vec<String> = Vec::new();
    for p in group
        .iter()
        .filter_map(|f| f.violation.attribution.as_ref())
    {
        if !packages.contains(&p.display()) && packages.len() < super::destinations::MAX_ACTORS {
            packages.push(p.display());
        }
    }
    let mut props = BTreeMap::from([
        ("target".to_string(), json!(target)),
        ("action".to_string(), json!(v.action)),
        ("provenance".to_string(), json!(v.provenance)),
        ("firstSeen".to_string(), json!(first_seen.to_string())),
        ("lastSeen".to_string(), json!(last_seen.to_string())),
        ("exe".to_string(), json!(roots.normalise(&v.process.exe))),
        ("actors".to_string(), json!(actors)),
    ]);
    if !packages.is_empty() {
        props.insert("packages".into(), json!(packages));
    }
    Some(
        sarif::Result::builder()
            .rule_id(v.rule.as_str())
            .rule_index(rule_index(v.rule))
            .level(result_level(v.rule))
            .kind(sarif::ResultKind::Fail)
            .message(text(message))
            .locations(vec![physical(&loc)])
            .partial_fingerprints(BTreeMap::from([(
                DESTINATION_KEY.to_string(),
                destination_fingerprint(v.rule, &target),
            )]))
            .occurrence_count(i64::try_from(count).unwrap_or(i64::MAX))
            .properties(bag(None, props))
            .build(),
    )
}

fn rule_index(r: RuleId) -> i64 {
    RuleId::ALL.iter().position(|x| *x == r).unwrap_or(0) as i64
}

fn build(model: &Model, opts: &SarifOptions, limit: usize) -> sarif::Sarif {
    let items = items(model);
    let at = Locator::new(model);
    let results: Vec<sarif::Result> = items
        .iter()
        .take(limit)
        .filter_map(|item| match item {
            Item::Finding(f) => Some(result(model, &at, f)),
            Item::Destination(group) => destination_result(model, &at, group),
        })
        .collect();
    let omitted = items.len().saturating_sub(results.len());
    let driver = sarif::ToolComponent::builder()
        .name("vetto")
        .semantic_version(model.start.vetto_version.clone())
        .version(model.start.vetto_version.clone())
        .information_uri(crate::events::rule_id::HOMEPAGE)
        .rules(RuleId::ALL.into_iter().map(rule).collect::<Vec<_>>())
        .build();
    let mut notes = Vec::new();
    if omitted > 0 {
        notes.push(
            sarif::Notification::builder()
                .level(json!("warning"))
                .message(text(format!(
                    "{omitted} of {} distinct violations were left out to stay within GitHub's limits; \
                     the least severe were cut. The session log and report.html have them all.",
                    items.len()
                )))
                .build(),
        );
    }
    if model.torn_tail || model.end.is_none() {
        notes.push(
            sarif::Notification::builder()
                .level(json!("warning"))
                .message(text(
                    "The session log ends abruptly (vetto was killed); the report shows what was recorded.",
                ))
                .build(),
        );
    }
    let start = &model.start;
    let mut inv_props = BTreeMap::from([
        ("tier".to_string(), json!(start.tier)),
        ("enforced".to_string(), json!(start.enforced)),
        ("audit".to_string(), json!(start.audit)),
        ("policyDigest".to_string(), json!(start.policy.digest)),
        ("verdict".to_string(), json!(model.verdict().as_str())),
    ]);
    if let Some(end) = &model.end {
        inv_props.insert("outcome".into(), json!(end.outcome));
    }
    let inv = sarif::Invocation::builder()
        .execution_successful(model.end.is_some())
        .command_line(model.command_line())
        .arguments(start.command.clone())
        .start_time_utc(start.started_at.to_string())
        .working_directory(
            sarif::ArtifactLocation::builder()
                .uri(format!(
                    "file://{}",
                    uri_encode(&start.cwd.to_string_lossy())
                ))
                .build(),
        )
        .tool_execution_notifications(notes)
        .properties(bag(None, inv_props));
    let inv = match &model.end {
        Some(end) => inv
            .exit_code(i64::from(end.exit_code))
            .end_time_utc(end.ended_at.to_string())
            .build(),
        None => inv.build(),
    };
    let category = opts.category.clone().unwrap_or_else(|| {
        match start.ci.as_ref().and_then(|c| c.job.as_deref()) {
            Some(job) => format!("vetto/{job}"),
            None => "vetto".to_string(),
        }
    });
    let automation = sarif::RunAutomationDetails::builder()
        .id(format!("{category}/"))
        .build();
    let mut run = sarif::Run::builder()
        .tool(sarif::Tool::builder().driver(driver).build())
        .results(results)
        .invocations(vec![inv])
        .automation_details(automation)
        .column_kind(json!("utf16CodeUnits"))
        .original_uri_base_ids(BTreeMap::from([(
            "%SRCROOT%".to_string(),
            sarif::ArtifactLocation::builder()
                .uri(format!(
                    "file://{}/",
                    uri_encode(&start.project.to_string_lossy()).trim_end_matches('/')
                ))
                .build(),
        )]))
        .build();
    if let Some(git) = &start.git
        && let Some(remote) = &git.remote_url
    {
        let vcs = sarif::VersionControlDetails::builder()
            .repository_uri(remote.clone())
            .revision_id(git.commit.clone())
            .mapped_to(
                sarif::ArtifactLocation::builder()
                    .uri_base_id("%SRCROOT%")
                    .build(),
            );
        let vcs = match &git.branch {
            Some(b) => vcs.branch(b.clone()).build(),
            None => vcs.build(),
        };
        run.version_control_provenance = Some(vec![vcs]);
    }
    sarif::Sarif::builder()
        .schema("https://json.schemastore.org/sarif-2.1.0.json".to_string())
        .version(json!("2.1.0"))
        .runs(vec![run])
        .build()
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::events::log::SessionLog;
    use crate::report::fixture;

    fn schema_errors(sarif: &Value) -> Vec<String> {
        let schema: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/sarif-schema-2.1.0.json"))
                .unwrap();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        validator
            .iter_errors(sarif)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// GitHub's own checks on top of the schema.
    fn assert_github_accepts(sarif: &Value) {
        let errors = schema_errors(sarif);
        assert!(errors.is_empty(), "schema errors: {errors:#?}");
        let runs = sarif["runs"].as_array().unwrap();
        assert!(!runs.is_empty() && runs.len() <= 20);
        for run in runs {
            for rule in run["tool"]["driver"]["rules"].as_array().unwrap() {
                for field in ["shortDescription", "fullDescription", "help"] {
                    assert!(
                        rule[field]["text"].is_string(),
                        "rule {} lacks {field}",
                        rule["id"]
                    );
                }
                assert!(rule["properties"]["security-severity"].is_string());
            }
            let results = run["results"].as_array().unwrap();
            assert!(results.len() <= MAX_RESULTS);
            for r in results {
                let locs = r["locations"].as_array().unwrap();
                assert!(!locs.is_empty() && locs.len() <= 1000);
                let uri = locs[0]["physicalLocation"]["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap();
                assert!(
                    !uri.starts_with('/') && !uri.contains("..") && !uri.contains("://"),
                    "{uri}"
                );
                // A relative reference under %SRCROOT%: no scheme (SARIF1004).
                let scheme = uri.split_once(':').is_some_and(|(s, _)| !s.contains('/'));
                assert!(!scheme, "a URI with a scheme under %SRCROOT%: {uri}");
                let fp = &r["partialFingerprints"];
                assert!(
                    fp[FINGERPRINT_KEY].is_string() || fp[DESTINATION_KEY].is_string(),
                    "{fp}"
                );
                assert!(r["message"]["text"].is_string());
            }
        }
    }

    fn render_value(model: &Model) -> Value {
        serde_json::from_slice(&render(model, &SarifOptions::default()).unwrap()).unwrap()
    }

    #[test]
    fn attack_session_sarif_is_schema_valid_and_github_ready() {
        let sarif = render_value(&fixture::attack_model());
        assert_github_accepts(&sarif);
        insta::assert_json_snapshot!("sarif_attack_session", sarif);
        // The validator is not vacuous.
        let mut broken = sarif.clone();
        broken["runs"][0]["results"][0]["level"] = json!("fatal");
        assert!(!schema_errors(&broken).is_empty());
    }

    #[test]
    fn every_result_is_located_in_the_repository() {
        let model = fixture::attack_model();
        let locs: Vec<_> = model
            .findings
            .iter()
            .map(|f| {
                (
                    f.violation.rule.as_str(),
                    Locator::new(&model).locate(f).path,
                )
            })
            .collect();
        insta::assert_yaml_snapshot!(locs);
    }

    #[test]
    fn fingerprints_are_stable_across_runs_on_other_machines() {
        // Another run: other pids, times, temp dir and checkout path.
        let a = fixture::attack_model();
        let text = fixture::to_jsonl(&fixture::attack_session())
            .replace(fixture::PROJECT, "/builds/other/checkout")
            .replace("/tmp/vetto-77-abc", "/tmp/vetto-999-zzz")
            .replace("\"pid\":101", "\"pid\":5101")
            .replace("2026-01-01T00:00:0", "2026-03-04T05:06:0");
        let b = Model::build(&SessionLog::parse(&text)).unwrap();
        let fp = |m: &Model| {
            let mut v: Vec<_> = m.findings.iter().map(|f| f.fingerprint()).collect();
            v.sort();
            v
        };
        assert_eq!(fp(&a), fp(&b));
        assert_eq!(
            fp(&a).len(),
            a.findings.len(),
            "distinct findings, distinct fingerprints"
        );
    }

    #[test]
    fn a_flood_of_distinct_violations_stays_within_githubs_limits() {
        // GitHub's real cap, scaled down 25x to keep the test fast.
        assert_eq!(SarifOptions::default().max_results, 25_000);
        let events = fixture::storm_session(1_200, 1_200);
        let model = Model::build(&SessionLog::parse(&fixture::to_jsonl(&events))).unwrap();
        assert_eq!(model.findings.len(), 1_200);
        let opts = SarifOptions {
            max_results: 1_000,
            ..Default::default()
        };
        let sarif: Value = serde_json::from_slice(&render(&model, &opts).unwrap()).unwrap();
        let results = sarif["runs"][0]["results"].as_array().unwrap();
        assert_eq!(results.len(), 1_000);
        let notes = &sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"];
        assert!(
            notes[0]["message"]["text"]
                .as_str()
                .unwrap()
                .contains("200 of 1200")
        );
    }

    #[test]
    fn results_are_halved_until_the_gzipped_size_fits() {
        let events = fixture::storm_session(2_000, 2_000);
        let model = Model::build(&SessionLog::parse(&fixture::to_jsonl(&events))).unwrap();
        let opts = SarifOptions {
            max_gzipped_bytes: 40_000,
            ..Default::default()
        };
        let bytes = render(&model, &opts).unwrap();
        assert!(gzipped_len(&bytes) <= 40_000);
        let sarif: Value = serde_json::from_slice(&bytes).unwrap();
        let n = sarif["runs"][0]["results"].as_array().unwrap().len();
        assert!(n > 0 && n < 2_000, "{n}");
    }

    #[test]
    fn a_killed_session_still_renders_valid_sarif() {
        let text = fixture::to_jsonl(&fixture::attack_session());
        let cut = text
            .rfind("{\"schema\":1,\"type\":\"session-end\"")
            .unwrap();
        let model = Model::build(&SessionLog::parse(&text[..cut + 30])).unwrap();
        assert!(model.end.is_none() && model.torn_tail);
        let sarif = render_value(&model);
        assert_github_accepts(&sarif);
        assert_eq!(
            sarif["runs"][0]["invocations"][0]["executionSuccessful"],
            json!(false)
        );
    }

    /// Outside CI, with only the built-in policy: results are located in a
    /// file of the repository, never at `preset:default` (SARIF1004 under
    /// `%SRCROOT%`, and code scanning shows no file for it).
    #[test]
    fn results_decided_by_a_preset_are_located_in_a_repository_file() {
        let mut events = fixture::attack_session();
        if let Some(crate::events::Event::SessionStart(start)) = events.first_mut() {
            start.ci = None;
            start
                .policy
                .sources
                .retain(|s| s.name.starts_with("preset:"));
        }
        let model = Model::build(&SessionLog::parse(&fixture::to_jsonl(&events))).unwrap();
        let sarif = render_value(&model);
        assert_github_accepts(&sarif);
        for f in &model.findings {
            let loc = Locator::new(&model).locate(f);
            assert!(!loc.path.starts_with("preset:"), "{loc:?}");
        }
        // A policy file named relative to the working directory is a file.
        let mut with_file = model.clone();
        with_file
            .start
            .policy
            .sources
            .push(crate::events::PolicySource {
                name: "ci/vetto.toml".into(),
                digest: String::new(),
            });
        let f = with_file
            .findings
            .iter()
            .find(|f| f.violation.rule == RuleId::SyscallDenied)
            .unwrap();
        assert_eq!(Locator::new(&with_file).locate(f).path, "ci/vetto.toml");
    }

    /// One result per denied destination, whoever connected; none for an
    /// allowed one; fingerprints by rule, host and port.
    #[test]
    fn egress_sarif_has_one_result_per_denied_destination() {
        let model = fixture::egress_model();
        let sarif = render_value(&model);
        assert_github_accepts(&sarif);
        let results = sarif["runs"][0]["results"].as_array().unwrap();
        let targets: Vec<&str> = results
            .iter()
            .map(|r| r["properties"]["target"].as_str().unwrap())
            .collect();
        assert_eq!(
            targets,
            [
                "host:exfil.evil.test:443",
                "addr:169.254.169.254:80",
                "host:<img src=x onerror=alert(1)>.evil.test:443",
                "host:c2f1.canary.evil.test:53",
                "host:pastebin.com:443",
            ]
        );
        for r in results {
            assert_eq!(r["ruleId"], "net-egress-blocked");
            let target = r["properties"]["target"].as_str().unwrap();
            assert_eq!(
                r["partialFingerprints"][DESTINATION_KEY].as_str().unwrap(),
                destination_fingerprint(RuleId::NetEgressBlocked, target)
            );
        }
        let text = serde_json::to_string(results).unwrap();
        for allowed in ["registry.npmjs.org", "github.com:443"] {
            assert!(!text.contains(allowed), "{allowed} is no result");
        }
        insta::assert_json_snapshot!("sarif_egress_results", sarif["runs"][0]["results"]);
    }

    /// Another program reaching the same denied host adds to the alert's
    /// count: it is not a second alert, and its fingerprint stays.
    #[test]
    fn a_second_program_reaching_a_denied_host_updates_the_same_result() {
        let before = render_value(&fixture::egress_model());
        let mut events = fixture::egress_session();
        let mut v = events
            .iter()
            .find_map(|e| match e {
                crate::events::Event::Violation(v)
                    if v.target.display() == "exfil.evil.test:443" =>
                {
                    Some((**v).clone())
                }
                _ => None,
            })
            .unwrap();
        v.attribution = None;
        v.process.exe = "/usr/bin/wget".into();
        events.insert(1, crate::events::Event::Violation(Box::new(v)));
        let model = Model::build(&SessionLog::parse(&fixture::to_jsonl(&events))).unwrap();
        let after = render_value(&model);
        let find = |s: &Value| {
            s["runs"][0]["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["properties"]["target"] == "host:exfil.evil.test:443")
                .cloned()
                .unwrap()
        };
        let (a, b) = (find(&before), find(&after));
        assert_eq!(a["partialFingerprints"], b["partialFingerprints"]);
        assert_eq!(b["occurrenceCount"], json!(3));
        assert_eq!(
            before["runs"][0]["results"].as_array().unwrap().len(),
            after["runs"][0]["results"].as_array().unwrap().len()
        );
        let msg = b["message"]["text"].as_str().unwrap();
        assert!(
            msg.contains("npm:evil@6.6.6") && msg.contains("/usr/bin/wget"),
            "{msg}"
        );
        // Still shown at the same place: the package's manifest lies in
        // node_modules (gitignored) and the fixture's checkout has no
        // lockfile, so the workflow.
        assert_eq!(
            b["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            ".github/workflows/ci.yml"
        );
    }

    #[test]
    fn uris_are_percent_encoded() {
        assert_eq!(uri_encode("src/a b/<img>.js"), "src/a%20b/%3Cimg%3E.js");
    }
}
