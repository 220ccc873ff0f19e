//! Reports: pure functions of a [`SessionLog`]. Nothing here touches the
//! kernel, and every failure is a returned [`ReportError`]: the caller
//! prints it and keeps the command's exit status.
//!
//! [`Model::build`] folds the log once (aggregated findings with counts,
//! resource samples, the verdict); each renderer reads the model.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::events::log::{LogError, SessionLog};
use crate::events::{
    AggregationKey, Event, LimitEvent, ProcessEvent, ResourceSample, RuleId, SessionEnd,
    SessionStart, Timestamp, Violation,
};
use crate::exit::Outcome;
use crate::sys::safe_fs::{Dir, Parents, SafeFsError};

pub mod annotations;
pub mod destinations;
pub mod html;
pub mod locate;
pub mod sarif;
pub mod secret_uses;
pub mod suggest;
pub mod summary;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("cannot serialise the {what} report")]
    Serialize {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("cannot render the HTML report")]
    Render(#[from] minijinja::Error),
    #[error("cannot write {path}")]
    Write { path: PathBuf, source: SafeFsError },
}

/// The mode of every report file (artifacts for reviewers).
pub const REPORT_MODE: u32 = 0o644;

/// Write `contents` to `path`, a file the user named: in its directory
/// (taken as named), under a fresh temporary name that is then renamed
/// onto `path` — a link planted at `path` or at any temporary name is
/// replaced or refused, never followed ([`crate::sys::safe_fs`]), and
/// a full disk leaves no half-written report behind.
pub fn write_file(path: &Path, contents: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        err(SafeFsError::BadName {
            dir: path.parent().unwrap_or(Path::new("")).to_path_buf(),
            name: path.display().to_string(),
        })
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Dir::open(parent, Parents::Followed)
        .and_then(|dir| dir.write_file(name, contents, REPORT_MODE))
        .map_err(err)
}

/// One distinct violation with how often it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The first occurrence, as logged.
    pub violation: Violation,
    pub count: u64,
    pub last: Timestamp,
    pub key: AggregationKey,
}

impl Finding {
    /// Stable across runs and machines: a hash of the aggregation key (rule,
    /// normalised target, package or executable) — never pids or times.
    pub fn fingerprint(&self) -> String {
        self.key.fingerprint()
    }

    /// Who did it, as reviewers read it.
    pub fn actor(&self) -> String {
        match &self.violation.attribution {
            Some(p) => p.display(),
            // Observed without a process (a mask watch, a limit).
            None if self.violation.process.exe.as_os_str().is_empty() => {
                "an unknown process".to_string()
            }
            None => self.violation.process.exe.display().to_string(),
        }
    }
}

/// How the session went, in one word for the reviewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The command passed and nothing was blocked or observed.
    Clean,
    /// The command passed but violations were recorded.
    Violations,
    /// The command failed (its own status, a signal, a limit).
    Failed,
    /// The log has no session end: vetto was killed or is still running.
    Incomplete,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::Violations => "violations",
            Verdict::Failed => "failed",
            Verdict::Incomplete => "incomplete",
        }
    }
}

/// Everything the renderers need, folded from the log once.
#[derive(Debug, Clone)]
pub struct Model {
    pub start: SessionStart,
    pub end: Option<SessionEnd>,
    /// Sorted: most severe first, then most frequent, then by key.
    pub findings: Vec<Finding>,
    /// Refusals the policy expects (`[syscalls] expected`): recorded, no
    /// finding — in no count, verdict or SARIF alert. In log order.
    pub expected: Vec<Finding>,
    pub resources: Vec<ResourceSample>,
    pub limits: Vec<LimitEvent>,
    pub processes: Vec<ProcessEvent>,
    /// Every destination the egress layer decided, folded by (host, port,
    /// decision): denied first, then observed, then allowed.
    pub destinations: Vec<destinations::Destination>,
    /// Connections to distinct destinations beyond
    /// [`destinations::MAX_DESTINATIONS`] (counted, not listed).
    pub destinations_dropped: u64,
    /// Which secret was put in which request, by whom (`--secret`).
    pub secret_uses: Vec<secret_uses::SecretUse>,
    /// Distinct uses beyond [`secret_uses::MAX_USES`] (counted).
    pub secret_uses_dropped: u64,
    /// Occurrences counted by rule (repeats included).
    pub counts_by_rule: Vec<(RuleId, u64)>,
    pub total_violations: u64,
    pub torn_tail: bool,
    pub skipped_lines: usize,
}

impl Model {
    pub fn build(log: &SessionLog) -> Option<Model> {
        let mut start = log.start()?.clone();
        let roots = start.roots();
        let mut findings: Vec<Finding> = Vec::new();
        let mut by_key: HashMap<AggregationKey, usize> = HashMap::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        let mut expected: Vec<Finding> = Vec::new();
        let mut expected_by_id: HashMap<String, usize> = HashMap::new();
        let mut resources = Vec::new();
        let mut limits = Vec::new();
        let mut processes = Vec::new();
        let mut dests = destinations::Fold::default();
        let mut uses = secret_uses::Fold::default();
        for e in &log.events {
            match e {
                // Logs of earlier versions made each withheld variable a
                // violation: it is information about the session.
                Event::Violation(v) if v.rule == RuleId::SecretEnvWithheld => {
                    if let crate::events::Target::EnvVar { name } = &v.target
                        && !start.withheld_env.contains(name)
                    {
                        start.withheld_env.push(name.clone());
                    }
                }
                Event::Violation(v) if !v.is_finding() => {
                    let key = AggregationKey::of(v, &roots);
                    if let Some(&i) = expected_by_id.get(&key.id()) {
                        expected[i].count += 1;
                    } else {
                        expected_by_id.insert(key.id(), expected.len());
                        expected.push(Finding {
                            violation: (**v).clone(),
                            count: 1,
                            last: v.time,
                            key,
                        });
                    }
                }
                Event::Violation(v) => {
                    let key = AggregationKey::of(v, &roots);
                    if let Some(&i) = by_key.get(&key) {
                        findings[i].count += 1;
                        findings[i].last = findings[i].last.max(v.time);
                    } else {
                        by_id.insert(key.id(), findings.len());
                        by_key.insert(key.clone(), findings.len());
                        findings.push(Finding {
                            violation: (**v).clone(),
                            count: 1,
                            last: v.time,
                            key,
                        });
                    }
                }
                Event::Repeated(r) => {
                    let slot = match (by_id.get(&r.key), expected_by_id.get(&r.key)) {
                        (Some(&i), _) => findings.get_mut(i),
                        (None, Some(&i)) => expected.get_mut(i),
                        (None, None) => None,
                    };
                    if let Some(f) = slot {
                        // `count` is the running total for the key.
                        f.count = f.count.max(r.count);
                        f.last = f.last.max(r.last);
                    }
                }
                Event::Resource(s) => resources.push(*s),
                Event::Limit(l) => limits.push(l.clone()),
                Event::Process(p) => processes.push(p.clone()),
                Event::Connection(c) => {
                    dests.add(c, &roots);
                    uses.add(c, &roots);
                }
                _ => {}
            }
        }
        findings.sort_by(|a, b| {
            let sa = a.violation.rule.security_severity();
            let sb = b.violation.rule.security_severity();
            sb.total_cmp(&sa)
                .then(b.count.cmp(&a.count))
                .then_with(|| a.key.cmp(&b.key))
        });
        let end = log.end().cloned();
        let mut counts: std::collections::BTreeMap<RuleId, u64> = std::collections::BTreeMap::new();
        for f in &findings {
            *counts.entry(f.violation.rule).or_default() += f.count;
        }
        // The writer's totals include violations beyond the aggregator's cap.
        if let Some(end) = &end {
            for (rule, n) in &end.violations_by_rule {
                if *rule == RuleId::SecretEnvWithheld {
                    continue;
                }
                let c = counts.entry(*rule).or_default();
                *c = (*c).max(*n);
            }
        }
        let total_violations = counts.values().sum();
        let (destinations, destinations_dropped) = dests.finish();
        let (secret_uses, secret_uses_dropped) = uses.finish();
        let mut counts_by_rule: Vec<(RuleId, u64)> = counts.into_iter().collect();
        counts_by_rule.sort_by(|a, b| {
            b.0.security_severity()
                .total_cmp(&a.0.security_severity())
                .then(b.1.cmp(&a.1))
        });
        Some(Model {
            start,
            end,
            findings,
            expected,
            resources,
            limits,
            processes,
            destinations,
            destinations_dropped,
            secret_uses,
            secret_uses_dropped,
            counts_by_rule,
            total_violations,
            torn_tail: log.torn_tail,
            skipped_lines: log.skipped.len(),
        })
    }

    /// The refusals the policy expects, one phrase each as the reports
    /// show them (`clone() by /usr/bin/bwrap ×2`), unescaped: each
    /// renderer escapes for its reader.
    pub fn expected_phrases(&self) -> Vec<String> {
        let roots = self.start.roots();
        self.expected
            .iter()
            .map(|f| {
                let v = &f.violation;
                let target = match v.target.path() {
                    Some(p) => roots.normalise(p),
                    None => v.target.display(),
                };
                let times = if f.count > 1 {
                    format!(" ×{}", f.count)
                } else {
                    String::new()
                };
                format!("{target} by {}{times}", f.actor())
            })
            .collect()
    }

    pub fn verdict(&self) -> Verdict {
        match &self.end {
            None => Verdict::Incomplete,
            Some(end) if end.exit_code != 0 => Verdict::Failed,
            Some(_) if self.total_violations > 0 => Verdict::Violations,
            Some(_) => Verdict::Clean,
        }
    }

    pub fn outcome(&self) -> Option<Outcome> {
        self.end.as_ref().map(|e| e.outcome)
    }

    /// The command line, shell-quoted for display.
    pub fn command_line(&self) -> String {
        shell_join(&self.start.command)
    }

    /// A path relative to the project, with `/` separators, when inside it.
    pub fn repo_relative(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.start.project).ok()?;
        if rel.as_os_str().is_empty() {
            return None;
        }
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.iter().any(|p| p == "..") {
            return None;
        }
        Some(parts.join("/"))
    }

    /// Duration in milliseconds (from the end event, else the last sample).
    pub fn duration_ms(&self) -> u64 {
        match &self.end {
            Some(e) => e.duration_ms,
            None => self.resources.last().map(|r| r.t).unwrap_or(0),
        }
    }

    /// Policy-file-shaped suggestion to allow a finding, in the tables and
    /// keys the policy parser accepts (paths written as `vetto policy
    /// suggest` writes them). A protection is never offered for re-opening:
    /// the CI command files, git's hooks and config, masked secrets and
    /// refused syscalls have no policy line here.
    pub fn suggestion(&self, f: &Finding) -> String {
        let roots = self.start.roots();
        let v = &f.violation;
        let path = || {
            v.target
                .path()
                .map(|p| suggest::written(p, &roots))
                .unwrap_or_default()
        };
        let guarded = suggest::protections(&self.start);
        let reopened = v
            .target
            .path()
            .and_then(|p| suggest::reopens_protection(p, &guarded));
        match v.rule {
            RuleId::FsWriteDenied | RuleId::UnixSocketDenied | RuleId::FsReadDenied
                if reopened.is_some() =>
            {
                format!(
                    "no policy switch: {}; fix the job",
                    reopened.unwrap_or_default()
                )
            }
            // A host cache is never made writable: its tool gets a
            // vetto-owned cache (docs/caches.md).
            RuleId::FsWriteDenied => {
                let cache = v
                    .target
                    .path()
                    .zip(roots.home.as_deref())
                    .and_then(|(p, home)| crate::policy::tools::host_cache_of(p, home));
                match cache {
                    Some(cache) => format!("[filesystem] caches = [\"{cache}\"]"),
                    None => format!("[filesystem] write = [\"{}\"]", path()),
                }
            }
            RuleId::UnixSocketDenied => format!("[network] unix = [\"{}\"]", path()),
            RuleId::FsReadDenied => format!("[filesystem] read = [\"{}\"]", path()),
            RuleId::GitPersistenceBlocked | RuleId::CiControlFileBlocked => {
                "no policy switch: this runs code outside the sandbox later; fix the job".into()
            }
            RuleId::SecretReadDenied => {
                "no policy switch: the secret stays masked; a step that needs a token for HTTPS requests gets it through vetto's proxy without holding it (--secret NAME@HOST)".into()
            }
            RuleId::NetEgressBlocked => self.egress_suggestion(v),
            RuleId::NetSocketDenied => {
                "[network] mode = \"host\"  (or --net host: everything)".into()
            }
            // Never a finding (`Model::build` folds it into the start).
            RuleId::SecretEnvWithheld => String::new(),
            RuleId::LimitTimeout => "[limits] timeout = \"<longer>\"".into(),
            RuleId::LimitMemory => "[limits] max_memory = \"<more>\"".into(),
            RuleId::LimitProcs => "[limits] max_procs = <more>".into(),
            RuleId::SyscallDenied | RuleId::ProcessEscaped => {
                "no policy switch: fix the job".into()
            }
            RuleId::PersistencePlanted => {
                "no policy switch: inspect the path before any git or editor touches it".into()
            }
            RuleId::SecretSentElsewhere => {
                "no policy switch: the value never goes there; if the job really sends it to this host, list the host with the secret ([secrets] NAME = [\"…\", \"<host>\"])".into()
            }
        }
    }
}

impl Model {
    /// The policy line for a blocked connection: the host by name (as
    /// `vetto policy suggest` writes it) when the egress layer recorded
    /// why it refused and an `allow` entry is what it lacked; no switch
    /// for the deny list, the metadata address, a name lookup or what the
    /// proxy refused for its own reasons; `mode = "host"` for a session
    /// without egress records (the network was off).
    /// The denied (or, under `--audit`, observed) destination a blocked
    /// connection's target names, from the egress records.
    pub fn denied_destination(
        &self,
        target: &crate::events::Target,
    ) -> Option<&destinations::Destination> {
        use crate::events::{ConnDecision, Target};
        let (host, port) = match target {
            Target::Host {
                host,
                port: Some(port),
            }
            | Target::Address {
                addr: host,
                port: Some(port),
            } => (host.trim_end_matches('.').to_ascii_lowercase(), *port),
            _ => return None,
        };
        self.destinations.iter().find(|d| {
            d.host == host
                && d.port == port
                && matches!(d.decision, ConnDecision::Denied | ConnDecision::Observed)
        })
    }

    fn egress_suggestion(&self, v: &Violation) -> String {
        use crate::events::{ConnReason, Target};
        let host_mode = || "[network] mode = \"host\"  (or --net host: everything)".to_string();
        let (host, port) = match &v.target {
            Target::Host {
                host,
                port: Some(port),
            }
            | Target::Address {
                addr: host,
                port: Some(port),
            } => (host.trim_end_matches('.').to_ascii_lowercase(), *port),
            _ => return host_mode(),
        };
        let Some(d) = self.denied_destination(&v.target) else {
            return host_mode();
        };
        let ip = host.parse::<std::net::IpAddr>().ok();
        let entry = match (d.reason, ip) {
            (ConnReason::DeniedByRule, _) => {
                return "no policy switch: the policy's own `deny` list names it".into();
            }
            (ConnReason::DnsRefused, _) => {
                return "no policy switch: a name lookup; vetto resolves names itself — allow the host the job then connects to".into();
            }
            (ConnReason::NotAllowed | ConnReason::PrivateAddress, Some(ip)) => {
                if crate::policy::addr::classify(ip) == crate::policy::addr::AddrClass::Metadata {
                    return "no policy switch: the cloud metadata address hands out the machine's credentials".into();
                }
                match ip {
                    std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                    ip => format!("{ip}:{port}"),
                }
            }
            (ConnReason::NotAllowed, None) => match crate::policy::validate::parse_host(&host) {
                Ok((name, None)) if !name.starts_with("*.") => format!("{name}:{port}"),
                _ => return "no policy switch: not a host name".into(),
            },
            // The name resolved to an internal address: what lets exactly
            // that through, if it is intended.
            (ConnReason::PrivateAddress, None) => {
                use crate::policy::egress::{InternalReach, internal_reach};
                let addr = d.addrs.first().and_then(|a| a.parse().ok());
                return match addr.map(|ip| (ip, internal_reach(&host, ip))) {
                    Some((_, InternalReach::Pin(pin))) => format!(
                        "[network] resolve = [\"{}\"]  (the name resolved to this internal address: pin it, for this name alone, only if that is intended)",
                        suggest::toml_basic(&pin)
                    ),
                    Some((ip, InternalReach::Never(why))) => {
                        format!("no policy switch: the name resolved to {ip}, {why}")
                    }
                    None => "a pin of the name to the internal address it resolved to (`[network] resolve = [\"NAME:IP\"]`), only if that is intended".into(),
                };
            }
            _ => {
                return "no policy switch: the proxy refused the connection itself (see the reason)".into();
            }
        };
        format!("[network] allow = [\"{}\"]", suggest::toml_basic(&entry))
    }
}

/// How the command ended, in words.
pub fn outcome_text(o: Outcome) -> String {
    match o {
        Outcome::Exited(c) => format!("exited {c}"),
        Outcome::Signaled(n) => format!("killed by signal {n}"),
        Outcome::TimedOut => "killed at the --timeout".into(),
        Outcome::LimitKilled => "killed at the memory limit".into(),
        Outcome::ExecFailed(c) => format!("could not start ({c})"),
    }
}

/// `sh`-style quoting, for showing commands.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Human size: `1.5 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Human duration: `1m 02.5s`.
pub fn human_ms(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m {:04.1}s", ms / 60_000, (ms % 60_000) as f64 / 1000.0)
    }
}

#[doc(hidden)]
pub mod fixture;

/// Which files to write; `None` skips one.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    pub sarif: Option<PathBuf>,
    pub html: Option<PathBuf>,
    pub summary: Option<PathBuf>,
}

impl Outputs {
    /// The standard names inside a report directory.
    pub fn in_dir(dir: &Path) -> Self {
        Outputs {
            sarif: Some(dir.join(Kind::Sarif.file_name())),
            html: Some(dir.join(Kind::Html.file_name())),
            summary: Some(dir.join(Kind::Summary.file_name())),
        }
    }
}

/// Render and write every requested output. One failing output does not
/// stop the others; the failures are returned for the caller to print.
pub fn write_outputs(
    model: &Model,
    outputs: &Outputs,
    sarif_opts: &sarif::SarifOptions,
) -> Vec<(PathBuf, Result<(), ReportError>)> {
    let targets = [
        (Kind::Sarif, &outputs.sarif),
        (Kind::Html, &outputs.html),
        (Kind::Summary, &outputs.summary),
    ];
    targets
        .into_iter()
        .filter_map(|(kind, path)| {
            let path = path.as_ref()?;
            let written = kind
                .render(model, sarif_opts)
                .and_then(|bytes| write_file(path, &bytes));
            Some((path.clone(), written))
        })
        .collect()
}

/// Every output under its standard name in `dir`, a report directory
/// vetto has opened and checked.
pub fn write_outputs_in(
    model: &Model,
    dir: &Dir,
    sarif_opts: &sarif::SarifOptions,
) -> Vec<ReportError> {
    [Kind::Sarif, Kind::Html, Kind::Summary]
        .into_iter()
        .filter_map(|kind| {
            kind.render(model, sarif_opts)
                .and_then(|bytes| {
                    dir.write_file(kind.file_name(), &bytes, REPORT_MODE)
                        .map_err(|source| ReportError::Write {
                            path: dir.join(kind.file_name()),
                            source,
                        })
                })
                .err()
        })
        .collect()
}

/// The reports a report directory holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Sarif,
    Html,
    Summary,
}

impl Kind {
    fn file_name(self) -> &'static str {
        match self {
            Kind::Sarif => "vetto.sarif",
            Kind::Html => "report.html",
            Kind::Summary => "summary.md",
        }
    }

    fn render(
        self,
        model: &Model,
        sarif_opts: &sarif::SarifOptions,
    ) -> Result<Vec<u8>, ReportError> {
        match self {
            Kind::Sarif => sarif::render(model, sarif_opts),
            Kind::Html => html::render(model).map(String::into_bytes),
            Kind::Summary => Ok(summary::render(model).into_bytes()),
        }
    }
}

/// Read a session log and fold it into a model.
pub fn load(session: &Path) -> Result<Model, ReportError> {
    let log = SessionLog::read(session)?;
    Model::build(&log).ok_or_else(|| {
        ReportError::Log(LogError::NoStart {
            path: session.to_path_buf(),
        })
    })
}

/// An error and its sources on one line, like anyhow's `{:#}`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    /// `[syscalls] expected`: a session whose only refusals are expected
    /// is CLEAN, with them in `expected` (repeats folded in), none in the
    /// findings, counts or SARIF; one blocked refusal beside them is the
    /// one finding.
    #[test]
    fn refusals_the_policy_expects_are_kept_apart_from_the_findings() {
        use super::{Model, Verdict, sarif};
        use crate::events::{Action, Event, RuleId, Target, violation::Aggregator};
        let start = super::fixture::start();
        let mut agg = Aggregator::new(start.roots());
        let mut events = vec![Event::SessionStart(Box::new(start))];
        let mut probe = super::fixture::attack_violations()[0].clone();
        probe.rule = RuleId::SyscallDenied;
        probe.target = Target::Syscall {
            name: "clone".into(),
        };
        probe.action = Action::Expected;
        for _ in 0..3 {
            events.extend(
                agg.observe(probe.clone())
                    .map(|v| Event::Violation(Box::new(v))),
            );
        }
        events.extend(agg.flush().into_iter().map(Event::Repeated));
        let end = |agg: &Aggregator| {
            let mut e = super::fixture::attack_session()
                .into_iter()
                .find_map(|e| match e {
                    Event::SessionEnd(end) => Some(end),
                    _ => None,
                })
                .unwrap_or_else(|| unreachable!("the fixture ends"));
            e.violations_by_rule = agg.counts_by_rule();
            Event::SessionEnd(e)
        };
        let model_of = |events: &[Event]| {
            let log = crate::events::log::SessionLog::parse(&super::fixture::to_jsonl(events));
            Model::build(&log).unwrap_or_else(|| unreachable!("a start"))
        };
        let mut clean = events.clone();
        clean.push(end(&agg));
        let model = model_of(&clean);
        assert_eq!(model.verdict(), Verdict::Clean);
        assert_eq!(model.total_violations, 0);
        assert!(model.findings.is_empty());
        assert_eq!(model.expected.len(), 1);
        assert_eq!(model.expected[0].count, 3);
        assert!(
            model.expected_phrases()[0].ends_with("×3"),
            "{:?}",
            model.expected_phrases()
        );
        let sarif: serde_json::Value = sarif::render(&model, &sarif::SarifOptions::default())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]));

        let mut blocked = super::fixture::attack_violations()[0].clone();
        blocked.rule = RuleId::SyscallDenied;
        blocked.target = Target::Syscall {
            name: "ptrace".into(),
        };
        events.extend(agg.observe(blocked).map(|v| Event::Violation(Box::new(v))));
        events.push(end(&agg));
        let model = model_of(&events);
        assert_eq!(model.verdict(), Verdict::Violations);
        assert_eq!(model.total_violations, 1);
        assert_eq!(model.findings.len(), 1);
        assert_eq!(model.expected.len(), 1);
    }

    /// Every suggestion that reads as a policy line is one the policy
    /// parser accepts: a reviewer pastes it into `vetto.toml`.
    #[test]
    fn suggestions_are_policy_lines_the_parser_accepts() {
        let mut checked = 0;
        let models = [
            super::fixture::attack_model(),
            super::fixture::egress_model(),
        ];
        for (model, f) in models
            .iter()
            .flat_map(|m| m.findings.iter().map(move |f| (m, f)))
        {
            let suggestion = model.suggestion(f);
            let Some(rest) = suggestion.strip_prefix('[') else {
                continue;
            };
            let Some((table, line)) = rest.split_once("] ") else {
                panic!("not a table line: {suggestion}");
            };
            // Placeholders and the trailing note are for the reader.
            let line = line.split("  (").next().unwrap_or(line);
            let line = line
                .replace("<longer>", "30m")
                .replace("<more>", "1024")
                .replace("\"<NAME>\"", "\"NAME\"");
            let toml = format!("[{table}]\n{line}\n");
            if let Err(e) = crate::policy::check_text(&toml) {
                panic!("{suggestion:?} is not a valid policy:\n{e}");
            }
            checked += 1;
        }
        assert!(checked >= 4, "the fixture exercises too few suggestions");
    }

    /// The reports' "to allow" for a write denied in a host cache (the
    /// `build.rs` planted in `~/.cargo/registry/src`) is the tool's
    /// vetto-owned cache, never the host's directory.
    #[test]
    fn a_write_into_a_host_cache_is_suggested_as_a_vetto_owned_cache() {
        let model = super::fixture::attack_model();
        let Some(f) = model
            .findings
            .iter()
            .find(|f| f.violation.rule == crate::events::RuleId::FsWriteDenied)
        else {
            panic!("the fixture has a denied write");
        };
        let mut f = f.clone();
        f.violation.target = crate::events::Target::Path {
            path: format!(
                "{}/.cargo/registry/src/index/serde-1.0.200/build.rs",
                super::fixture::HOME
            )
            .into(),
        };
        assert_eq!(model.suggestion(&f), "[filesystem] caches = [\"cargo\"]");
    }

    /// An allowed name that resolved to an internal address (a registry
    /// mirror in a reserved range) is suggested the ip rule that lets it
    /// through, a loopback one the pin: never a pin that would be
    /// refused again.
    #[test]
    fn a_name_resolved_to_an_internal_address_is_suggested_the_rule_that_lets_it_through() {
        use crate::events::{ConnReason, Event, violation::Provenance};
        let suggestion_for = |addr: &str| {
            let mut events = super::fixture::egress_session();
            let c = super::fixture::refused_connection(
                Some("mirror.example.test"),
                443,
                Some(addr),
                ConnReason::PrivateAddress,
            );
            let Some(v) = c.violation(Provenance::Proxy) else {
                panic!("a refused connection is a violation");
            };
            let end = events.len() - 1;
            events.insert(end, Event::Violation(Box::new(v)));
            events.insert(end, Event::Connection(Box::new(c)));
            let log = crate::events::log::SessionLog::parse(&super::fixture::to_jsonl(&events));
            let Some(model) = super::Model::build(&log) else {
                panic!("the fixture has a start");
            };
            let Some(f) = model.findings.iter().find(|f| {
                f.violation
                    .target
                    .display()
                    .starts_with("mirror.example.test")
            }) else {
                panic!("no finding for the mirror");
            };
            model.suggestion(f)
        };
        assert_eq!(
            suggestion_for("203.0.113.80").split("  (").next(),
            Some("[network] resolve = [\"mirror.example.test:203.0.113.80\"]")
        );
        assert_eq!(
            suggestion_for("127.0.0.1").split("  (").next(),
            Some("[network] resolve = [\"mirror.example.test:127.0.0.1\"]")
        );
        assert!(suggestion_for("169.254.169.254").starts_with("no policy switch"));
    }

    /// A blocked connection is suggested as the host by name, and never
    /// for the deny list, the metadata address or a name lookup.
    #[test]
    fn blocked_connections_are_suggested_by_name_never_the_metadata_address() {
        let model = super::fixture::egress_model();
        let by_target: std::collections::BTreeMap<String, String> = model
            .findings
            .iter()
            .map(|f| (f.violation.target.display(), model.suggestion(f)))
            .collect();
        assert_eq!(
            by_target["exfil.evil.test:443"],
            "[network] allow = [\"exfil.evil.test:443\"]"
        );
        assert!(
            by_target["pastebin.com:443"].starts_with("no policy switch: the policy's own `deny`")
        );
        assert!(by_target["169.254.169.254:80"].contains("metadata"));
        assert!(by_target["c2f1.canary.evil.test:53"].contains("a name lookup"));
        assert!(
            by_target["<img src=x onerror=alert(1)>.evil.test:443"].contains("not a host name")
        );
    }

    /// No suggestion re-opens a protection: nothing for the CI command
    /// files, git's hooks and config or a masked secret, and no withheld
    /// variable is a finding to suggest passing.
    #[test]
    fn no_suggestion_reopens_a_protection() {
        use crate::events::RuleId;
        let model = super::fixture::attack_model();
        for f in &model.findings {
            let s = model.suggestion(f);
            match f.violation.rule {
                RuleId::CiControlFileBlocked
                | RuleId::GitPersistenceBlocked
                | RuleId::SecretReadDenied
                | RuleId::SyscallDenied => {
                    assert!(s.starts_with("no policy switch"), "{s}");
                }
                _ => {}
            }
            assert!(
                !s.contains("pass_secret") && !s.contains("GITHUB_ENV"),
                "{s}"
            );
        }
        assert!(
            model
                .findings
                .iter()
                .all(|f| f.violation.rule != RuleId::SecretEnvWithheld)
        );
    }

    /// Logs written by earlier versions made each withheld variable a
    /// violation: read back, they are the start's `withheld_env`, and a
    /// session that only withheld variables is clean.
    #[test]
    fn legacy_withheld_variable_violations_are_information() {
        use crate::events::{Event, RuleId, Target};
        let mut events: Vec<Event> = super::fixture::attack_session()
            .into_iter()
            .filter(|e| !matches!(e, Event::Violation(_) | Event::Repeated(_)))
            .collect();
        if let Some(Event::SessionStart(s)) = events.first_mut() {
            s.withheld_env.clear();
        }
        let mut v = super::fixture::attack_violations().remove(0);
        v.rule = RuleId::SecretEnvWithheld;
        v.target = Target::EnvVar {
            name: "GITHUB_ENV".into(),
        };
        events.insert(1, Event::Violation(Box::new(v)));
        for e in &mut events {
            if let Event::SessionEnd(end) = e {
                end.violations_by_rule = [(RuleId::SecretEnvWithheld, 1)].into_iter().collect();
            }
        }
        let log = crate::events::log::SessionLog::parse(&super::fixture::to_jsonl(&events));
        let model = super::Model::build(&log).unwrap_or_else(|| unreachable!());
        assert!(model.findings.is_empty());
        assert_eq!(model.total_violations, 0);
        assert_eq!(model.start.withheld_env, ["GITHUB_ENV"]);
        assert_eq!(model.verdict(), super::Verdict::Clean);
    }
}
