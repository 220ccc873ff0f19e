//! The one vocabulary shared by the supervisor, the seccomp-notify handler,
//! the egress proxy and the reports. Producers send [`Event`]s over an
//! [`log::EventSink`]; [`log`] persists them as `session.jsonl`; reports are
//! pure functions of the [`log::SessionLog`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::tier::Tier;

pub mod log;
pub mod rule_id;
pub mod violation;

pub use rule_id::RuleId;
pub use violation::{
    Action, AggregationKey, Aggregator, Ecosystem, Package, PolicyRef, ProcessInfo, Provenance,
    Repeated, Roots, Target, Violation,
};

/// The version of the `session.jsonl` format, written on every line. Bump
/// it on any change that an older reader would misread; adding an optional
/// field is not such a change.
pub const SCHEMA_VERSION: u32 = 1;

/// Milliseconds since the Unix epoch; RFC 3339 (UTC, millisecond
/// precision) on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp::from(SystemTime::now())
    }

    /// Milliseconds from `earlier` to `self` (0 if `earlier` is later).
    pub fn since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn parse(s: &str) -> Option<Self> {
        // YYYY-MM-DDTHH:MM:SS[.fff]Z — the only form vetto writes.
        let b = s.as_bytes();
        if b.len() < 20 || !s.ends_with('Z') || b[4] != b'-' || b[10] != b'T' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        let ms = match s.get(19..s.len() - 1)? {
            "" => 0,
            frac => {
                let digits = frac.strip_prefix('.')?;
                let padded: String = digits.chars().chain("000".chars()).take(3).collect();
                padded.parse::<i64>().ok()?
            }
        };
        let days = days_from_civil(y, mo, d);
        let total = ((days * 24 + h) * 60 + mi) * 60 + sec;
        u64::try_from(total * 1000 + ms).ok().map(Timestamp)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        Timestamp(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = (self.0 / 1000) as i64;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            self.0 % 1000
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 UTC time: {s}")))
    }
}

// Howard Hinnant's civil calendar algorithms (public domain).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// One line of `session.jsonl` (without the `schema` field, which
/// [`log::SessionLog`] adds and checks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
#[non_exhaustive]
pub enum Event {
    SessionStart(Box<SessionStart>),
    Violation(Box<Violation>),
    /// Later occurrences of an already logged violation (see [`Aggregator`]).
    Repeated(Repeated),
    Process(ProcessEvent),
    Resource(ResourceSample),
    Limit(LimitEvent),
    /// One connection (or DNS query) the egress layer decided, allowed or not.
    Connection(Box<Connection>),
    SessionEnd(Box<SessionEnd>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStart {
    pub vetto_version: String,
    pub started_at: Timestamp,
    pub tier: Tier,
    /// What this tier enforced, in words (`landlock-abi-6`, `seccomp`, `netns` …).
    pub enforced: Vec<String>,
    /// Rules the tier did not enforce (only with `--allow-degraded`).
    #[serde(default)]
    pub degraded: Vec<String>,
    /// `--audit`: violations were observed, not blocked.
    #[serde(default)]
    pub audit: bool,
    pub host: HostFacts,
    pub policy: PolicyInfo,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub project: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_tmp: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
    /// Facts about the CI run (GitHub Actions), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CiInfo>,
    /// The variables the plan withheld from the job's environment (names
    /// only): credential-like names and the CI command-file variables.
    /// Information about the session, said once here — never a violation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld_env: Vec<String>,
}

impl SessionStart {
    pub fn roots(&self) -> Roots {
        Roots {
            project: Some(self.project.clone()),
            home: self.home.clone(),
            session_tmp: self.session_tmp.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostFacts {
    pub kernel: String,
    pub arch: String,
    pub landlock_abi: u8,
    pub userns: bool,
    pub seccomp: bool,
    pub seccomp_notify: bool,
}

impl From<&crate::host::HostCaps> for HostFacts {
    fn from(c: &crate::host::HostCaps) -> Self {
        HostFacts {
            kernel: c.kernel.clone(),
            arch: c.arch.clone(),
            landlock_abi: c.landlock_abi,
            userns: c.userns.is_available(),
            seccomp: c.seccomp.is_available(),
            seccomp_notify: c.seccomp_notify.is_available(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PolicyInfo {
    /// The files and presets the policy was merged from, with their digests.
    pub sources: Vec<PolicySource>,
    /// Digest of the resolved policy.
    pub digest: String,
    /// The rules in effect, one line each (`write $PROJECT/target  (vetto.toml:12)`).
    #[serde(default)]
    pub rules: Vec<String>,
    /// Where the policy file came from (`built-in`, `working-tree`,
    /// `git-ref`); absent in logs of older vettos.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::policy::PolicyOrigin>,
    /// The session-start line that said it (`policy vetto.toml (extends
    /// default) sha256:… from the working tree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// With `--policy-ref`: the working tree's copy of the policy file
    /// differs from the one in force.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub working_tree_differs: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PolicySource {
    pub name: String,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GitInfo {
    pub commit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CiInfo {
    /// The workflow file relative to the repository (`.github/workflows/ci.yml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEvent {
    pub time: Timestamp,
    pub pid: u32,
    pub ppid: u32,
    pub kind: ProcessKind,
    #[serde(default)]
    pub exe: PathBuf,
    #[serde(default)]
    pub argv: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "what")]
pub enum ProcessKind {
    Exec,
    Exit {
        status: i32,
    },
    /// Still alive at the end of the session; killed.
    Escaped,
}

/// A periodic sample of the whole process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResourceSample {
    /// Milliseconds since the session started.
    pub t: u64,
    pub cpu_user_ms: u64,
    pub cpu_sys_ms: u64,
    pub rss_bytes: u64,
    pub procs: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitEvent {
    pub time: Timestamp,
    pub limit: LimitKind,
    /// The configured limit (ms, bytes or processes).
    pub max: u64,
    /// The value observed when it was hit.
    pub observed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitKind {
    Timeout,
    Memory,
    Procs,
}

/// One connection (or DNS query) the egress layer decided: the proxy for
/// what reached it, the supervisor for connects and queries it refused
/// itself. A denied one is also logged as a `net-egress-blocked`
/// [`Violation`] (see [`Connection::violation`]); an allowed one only here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connection {
    /// When it was decided.
    pub time: Timestamp,
    /// The name: the CONNECT target, the request's host, the SOCKS name,
    /// the name a DNS-stub address stands for, or the queried name. `None`
    /// for a connection to a bare address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub port: u16,
    /// The address vetto connected to (for a name: the pinned answer), or
    /// the bare address the job asked for; `None` when refused before any
    /// address was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    pub decision: ConnDecision,
    pub reason: ConnReason,
    /// The deciding rule in words (`allow "*.example.com" (vetto.toml:3:9)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub via: ConnVia,
    /// Bytes from the job to the destination.
    #[serde(default)]
    pub bytes_up: u64,
    /// Bytes from the destination to the job.
    #[serde(default)]
    pub bytes_down: u64,
    #[serde(default)]
    pub duration_ms: u64,
    /// The job's process, where known (a notified connect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Package>,
    /// Extra facts in words (the SNI that disagreed, the limit hit …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The requests read on a connection to a host a secret is for (the
    /// proxy ends the job's TLS there only): at most 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<HttpRequest>,
}

/// One request the proxy read on an intercepted connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRequest {
    pub method: String,
    /// The path as the job sent it (placeholders, never values), printable
    /// ASCII, at most 256 characters.
    pub path: String,
    /// The response's status; `None` when none came (or could be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The secrets whose values were put in it (names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Connection {
    /// The `net-egress-blocked` violation a denied (or, under `--audit`,
    /// observed) connection is also logged as; `None` for one the policy
    /// allowed. `provenance`: who decided (the proxy, or the supervisor on a
    /// notified connect).
    pub fn violation(&self, provenance: Provenance) -> Option<Violation> {
        let action = match self.decision {
            ConnDecision::Denied => Action::Blocked,
            ConnDecision::Observed => Action::Observed,
            ConnDecision::Allowed | ConnDecision::Failed => return None,
        };
        let target = self.target();
        let mut detail = self.reason.describe().to_string();
        if !self.detail.is_empty() {
            detail = format!("{detail}: {}", self.detail);
        }
        Some(Violation {
            rule: RuleId::NetEgressBlocked,
            time: self.time,
            action,
            process: self.process.clone().unwrap_or_default(),
            target,
            attribution: self.attribution.clone(),
            policy_rule: None,
            detail,
            provenance,
        })
    }

    /// The violation of a refusal, recorded as expected where `[network]
    /// expected` names the name (a name no rule allows, a deny rule, or
    /// its lookup at the DNS stub): still refused, no finding.
    pub fn violation_expecting(
        &self,
        provenance: Provenance,
        expected: &[crate::policy::HostPattern],
    ) -> Option<Violation> {
        let mut v = self.violation(provenance)?;
        let by_name = matches!(
            self.reason,
            ConnReason::NotAllowed | ConnReason::DeniedByRule | ConnReason::DnsRefused
        );
        let port = (self.reason != ConnReason::DnsRefused).then_some(self.port);
        if v.action == Action::Blocked
            && by_name
            && let Some(host) = self.host.as_deref()
            && expected.iter().any(|e| e.matches(host, port.or(e.port)))
        {
            v.action = Action::Expected;
        }
        Some(v)
    }

    /// The `secret-sent-elsewhere` violation for the secret `name`, whose
    /// placeholder this connection carried to a host it is not for.
    pub fn secret_sent_elsewhere(&self, name: &str) -> Violation {
        Violation {
            rule: RuleId::SecretSentElsewhere,
            time: self.time,
            action: Action::Blocked,
            process: self.process.clone().unwrap_or_default(),
            target: self.target(),
            attribution: self.attribution.clone(),
            policy_rule: None,
            detail: format!(
                "{name}'s placeholder, sent as it is: it authenticates nothing here (the value stays with vetto)"
            ),
            provenance: Provenance::Proxy,
        }
    }

    /// Where it went, as a violation's target.
    fn target(&self) -> Target {
        let port = Some(self.port);
        match (&self.host, &self.addr) {
            (Some(host), _) => Target::Host {
                host: host.clone(),
                port,
            },
            (None, Some(addr)) => Target::Address {
                addr: addr.clone(),
                port,
            },
            (None, None) => Target::Address {
                addr: String::new(),
                port,
            },
        }
    }
}

/// What became of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnDecision {
    /// The policy allowed it and vetto connected.
    Allowed,
    /// Refused.
    Denied,
    /// `--audit`: it would have been denied; vetto let it through.
    Observed,
    /// The policy allowed it, but the destination (or the upstream proxy)
    /// could not be reached.
    Failed,
}

/// Why, in one word: decided by the egress rules (`policy::egress`),
/// recorded here.
pub use crate::policy::egress::ConnReason;

/// How the connection reached the egress layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnVia {
    /// HTTP `CONNECT` to the explicit proxy.
    Connect,
    /// A plain-HTTP request (absolute form) to the explicit proxy.
    Http,
    /// SOCKS5 to the explicit proxy.
    Socks5,
    /// FULL: a connection to a DNS-stub address.
    Transparent,
    /// FS-ONLY: a connect the supervisor redirected to the proxy.
    Redirect,
    /// A DNS query.
    Dns,
    /// An outside connection to a port of the job's the session publishes
    /// on the host (`[network] publish`).
    Published,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEnd {
    pub ended_at: Timestamp,
    pub outcome: crate::exit::Outcome,
    /// The exit status vetto returned for the command.
    pub exit_code: u8,
    pub duration_ms: u64,
    pub cpu_user_ms: u64,
    pub cpu_sys_ms: u64,
    pub peak_rss_bytes: u64,
    pub peak_procs: u32,
    #[serde(default)]
    pub proxy_bytes: u64,
    /// Every observed violation counted by rule, repeats included (filled
    /// in by the log writer from its [`Aggregator`]).
    #[serde(default)]
    pub violations_by_rule: BTreeMap<RuleId, u64>,
    /// Distinct violations not logged because the aggregator was full.
    #[serde(default)]
    pub dropped_distinct: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[network] expected = ["github.com"]`: a refusal of that name (by
    /// no rule, by a deny rule, or its lookup at the DNS stub) is recorded
    /// as expected; another name, or an address refused as internal, is a
    /// finding as before.
    #[test]
    fn a_refused_name_the_policy_expects_is_no_finding() {
        use crate::report::fixture::refused_connection;
        let origin = crate::policy::Origin {
            source: "t".into(),
            line: 0,
            col: 0,
            written: String::new(),
        };
        let expected = [crate::policy::HostPattern {
            host: "github.com".into(),
            port: Some(443),
            origin,
        }];
        let action = |host: &str, port: u16, reason: ConnReason| {
            refused_connection(Some(host), port, None, reason)
                .violation_expecting(violation::Provenance::Proxy, &expected)
                .map(|v| v.action)
        };
        #[rustfmt::skip]
        let rows = [
            ("github.com", 443, ConnReason::NotAllowed, Action::Expected),
            ("GitHub.com.", 443, ConnReason::DeniedByRule, Action::Expected),
            ("github.com", 53, ConnReason::DnsRefused, Action::Expected),
            ("github.com", 22, ConnReason::NotAllowed, Action::Blocked),
            ("api.github.com", 443, ConnReason::NotAllowed, Action::Blocked),
            ("github.com", 443, ConnReason::PrivateAddress, Action::Blocked),
        ];
        for (host, port, reason, want) in rows {
            assert_eq!(
                action(host, port, reason),
                Some(want),
                "{host}:{port} {reason:?}"
            );
        }
    }

    #[test]
    fn timestamps_round_trip_through_rfc3339() {
        for ms in [0, 951_782_400_123, 1_700_000_000_000, 4_102_444_799_999] {
            let t = Timestamp(ms);
            assert_eq!(Timestamp::parse(&t.to_string()), Some(t), "{t}");
        }
        assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(951_782_400_123).to_string(),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            Timestamp::parse("2024-01-02T03:04:05Z"),
            Some(Timestamp(1_704_164_645_000))
        );
        assert_eq!(Timestamp::parse("yesterday"), None);
    }
}
