//! The resolved, validated policy: what the rest of vetto consumes.
//!
//! Everything here is absolute and concrete: variables are expanded, globs
//! are matched against the filesystem, presets are merged. Each rule keeps
//! its [`Origin`] so `vetto policy explain` can say which line decided.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::tier::Tier;

/// Where a rule came from: a policy file or preset line, or a CLI option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// `policies/default.toml` for a preset, the file path for a policy
    /// file, `--allow-read` for a command-line option.
    pub source: String,
    /// 1-based line and column; 0 when the origin is not a file.
    pub line: u32,
    pub col: u32,
    /// The rule as written, before expansion (e.g. `~/.ssh`, `${PROJECT}/.env.*`).
    pub written: String,
}

impl Origin {
    /// A rule from the command line: the option's name and what was
    /// written after it.
    pub fn command_line(option: &str, written: &str) -> Origin {
        Origin {
            source: option.to_string(),
            line: 0,
            col: 0,
            written: written.to_string(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{} {}", self.source, self.written)
        } else {
            write!(
                f,
                "{}:{}:{} {:?}",
                self.source, self.line, self.col, self.written
            )
        }
    }
}

/// What a filesystem rule grants. `Ord` is the tie-break when two rules name
/// the same path: the stronger restriction wins (`Deny` > `Protect` > `Write` > `Read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read, list and execute.
    Read,
    /// Everything `Read` gives, plus create, modify, delete.
    Write,
    /// Readable but never writable, even beneath a writable root.
    Protect,
    /// Masked: neither readable nor writable.
    Deny,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Protect => "protect",
            Access::Deny => "deny",
        }
    }
}

/// One concrete path rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsRule {
    /// Absolute, lexically normalised (no `.`/`..`), symlinks not resolved.
    pub path: PathBuf,
    pub access: Access,
    pub origin: Origin,
}

/// Network policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum NetPolicy {
    /// No network at all (the default).
    Off,
    /// Unrestricted, said explicitly.
    Host,
    /// Only these hosts, through vetto's egress proxy.
    Allow {
        hosts: Vec<HostPattern>,
        /// Refused even where `hosts` would allow them (`[network] deny`).
        #[serde(default)]
        deny: Vec<HostPattern>,
        /// Addresses allowed directly (`10.1.2.0/24:5432`), private ones too.
        #[serde(default)]
        ips: Vec<IpRule>,
        resolve: Vec<PinnedHost>,
    },
}

/// `10.1.2.0/24:5432`, `192.0.2.7`, `[2001:db8::/32]:443`: an address
/// range, optionally one port, allowed without a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRule {
    /// The network address (host bits zero).
    pub net: std::net::IpAddr,
    /// Prefix length: 0..=32 for IPv4, 0..=128 for IPv6.
    pub prefix: u8,
    /// `None`: every port.
    pub port: Option<u16>,
    pub origin: Origin,
}

impl std::fmt::Display for IpRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let full = if self.net.is_ipv4() { 32 } else { 128 };
        let range = if self.prefix == full {
            self.net.to_string()
        } else {
            format!("{}/{}", self.net, self.prefix)
        };
        match (self.port, self.net.is_ipv6()) {
            (None, _) => f.write_str(&range),
            (Some(p), false) => write!(f, "{range}:{p}"),
            (Some(p), true) => write!(f, "[{range}]:{p}"),
        }
    }
}

/// `example.com`, `*.example.com`, optionally with `:port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPattern {
    /// Lower-case host; a leading `*.` matches any subdomain (not the apex).
    pub host: String,
    pub port: Option<u16>,
    pub origin: Origin,
}

impl HostPattern {
    /// As written: `host` or `host:port`.
    pub fn written(&self) -> String {
        match self.port {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.clone(),
        }
    }

    /// Whether a connection to `host:port` matches: `*.example.com` matches
    /// subdomains at any depth but not `example.com` itself; a pattern
    /// without a port matches every port, one with a port only that port.
    /// `host` is compared case-insensitively; a `host` that is not a plain
    /// name (empty, or containing `*`, `/`, `:`, whitespace…) never matches.
    pub fn matches(&self, host: &str, port: Option<u16>) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        {
            return false;
        }
        let name_ok = match self.host.strip_prefix("*.") {
            Some(apex) => host
                .strip_suffix(apex)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => host == self.host,
        };
        let port_ok = match (self.port, port) {
            (None, _) => true,
            (Some(p), Some(q)) => p == q,
            (Some(_), None) => false,
        };
        name_ok && port_ok
    }
}

/// `--resolve HOST:IP`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedHost {
    pub host: String,
    pub addr: std::net::IpAddr,
    pub origin: Origin,
}

/// `[network] unix`: a pathname unix socket the job may connect to. The
/// supervisor allows the inode found at this path when the session
/// starts, not the path string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnixSocket {
    pub path: PathBuf,
    pub origin: Origin,
}

/// `[network] publish`, `--publish`: a port of the job's own loopback
/// made reachable at an address of the host's (its loopback unless the
/// rule names another).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Publish {
    /// Where vetto listens on the host.
    pub host: std::net::SocketAddr,
    /// The job's port, on its loopback.
    pub port: u16,
    pub origin: Origin,
}

/// `[secrets]`, `--secret NAME@HOST`: a variable of vetto's own
/// environment the job holds only as a placeholder; vetto's proxy puts
/// the value in the job's HTTPS requests to these hosts, and nowhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRule {
    pub name: String,
    /// Where the value may go (port 443 unless one is named).
    pub hosts: Vec<HostPattern>,
    pub origin: Origin,
}

/// `[network] rules`, `--rule`: the requests allowed to a host, by method
/// and path. The proxy reads every request to a host a rule names (it
/// ends the job's TLS there, as for a secret's host) and refuses (403)
/// one that no rule of that host allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRule {
    /// Upper-case methods; `*` is any.
    pub methods: Vec<String>,
    /// The host (and port: 443 unless one is named).
    pub host: HostPattern,
    /// A path pattern from `/`, where `*` is any run of characters.
    pub path: String,
    pub origin: Origin,
}

impl RequestRule {
    /// The rule as written back (`GET,HEAD api.example.com/repos/*`).
    pub fn describe(&self) -> String {
        let port = self.host.port.map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "{} {}{port}{}",
            self.methods.join(","),
            self.host.host,
            self.path
        )
    }
}

/// A class of calls the sandbox always refuses that a program makes as a
/// matter of course (`[syscalls] expected`): still refused, and recorded
/// as expected rather than as a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DenialClass {
    /// Creating or joining namespaces: what a nested sandbox (bubblewrap,
    /// an agent's own, a browser's) tries at its start. vetto refuses
    /// them inside its own sandbox whatever a policy says.
    Namespaces,
}

impl DenialClass {
    /// The names a policy writes, in the order a message lists them.
    pub const NAMES: &[&str] = &["namespaces"];

    pub fn parse(name: &str) -> Option<DenialClass> {
        match name {
            "namespaces" => Some(DenialClass::Namespaces),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DenialClass::Namespaces => "namespaces",
        }
    }

    /// The system calls whose refusal the class covers, as the supervisor
    /// names them (`clone` is refused only with a namespace flag).
    pub fn calls(self) -> &'static [&'static str] {
        match self {
            DenialClass::Namespaces => &["clone", "clone3", "unshare", "setns"],
        }
    }
}

/// `[syscalls] expected`, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedDenial {
    pub class: DenialClass,
    pub origin: Origin,
}

/// `[process] daemons`: a program (a path, `*` and `?` within a
/// component) that starts a daemon of its own as a matter of course, which
/// outlives the command: still killed when the session ends, recorded as
/// expected rather than as a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedDaemon {
    pub pattern: PathBuf,
    pub origin: Origin,
}

impl ExpectedDaemon {
    /// Whether `exe` (as the kernel names a process's program) is one.
    pub fn matches(&self, exe: &std::path::Path) -> bool {
        let (mut p, mut e) = (self.pattern.components(), exe.components());
        loop {
            match (p.next(), e.next()) {
                (None, None) => return true,
                (Some(a), Some(b)) => {
                    let (Some(a), Some(b)) = (a.as_os_str().to_str(), b.as_os_str().to_str())
                    else {
                        return false;
                    };
                    if !super::paths::glob_component(a, b) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }
}

/// `[persistence] keep`: a path (`*` and `?` within a component) where a
/// change the session makes to what a tool runs later is left as the
/// session made it — recorded as expected, no finding, not put back. It
/// trusts the job with that path: what it writes there runs outside the
/// sandbox next time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeepChange {
    pub pattern: PathBuf,
    pub origin: Origin,
}

impl KeepChange {
    /// Whether a change at `path` is kept: the pattern names it or a
    /// directory it is in.
    pub fn keeps(&self, path: &std::path::Path) -> bool {
        let mut e = path.components();
        for p in self.pattern.components() {
            let Some(b) = e.next() else {
                return false;
            };
            let (Some(a), Some(b)) = (p.as_os_str().to_str(), b.as_os_str().to_str()) else {
                return false;
            };
            if !super::paths::glob_component(a, b) {
                return false;
            }
        }
        true
    }
}

/// Resource bounds; `None` means unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    #[serde(with = "opt_duration_ms")]
    pub timeout: Option<Duration>,
    pub max_procs: Option<u32>,
    /// Bytes.
    pub max_memory: Option<u64>,
}

/// Environment scrubbing: names matching `withhold` are not passed unless
/// they match `pass_exact` (from `--env-pass` or a policy's `pass_secret`).
/// Names matching neither `pass` nor `withhold` are not passed either:
/// the pass-list is the allow-list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPolicy {
    /// Glob patterns (`*` only) of ordinary variables passed to the job.
    pub pass: Vec<String>,
    /// Glob patterns of credential-like names that are withheld.
    pub withhold: Vec<String>,
    /// Exact names passed even though they match `withhold`.
    pub pass_exact: Vec<String>,
    /// Variables set for the job (after scrubbing), e.g. `CI=true`.
    pub set: Vec<(String, String)>,
}

/// A source that contributed to the policy, for the session log and explain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceInfo {
    /// `preset:default`, a file path, or `command line`.
    pub name: String,
    /// Hex SHA-256 of the source text (empty for the command line).
    pub digest: String,
}

/// Where the project's policy came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PolicyOrigin {
    /// No policy file: the built-in `default` preset.
    BuiltIn,
    /// A file in the working tree.
    WorkingTree { path: PathBuf },
    /// `--policy-ref REF`: the file as committed at `REF` (the commit
    /// `commit`), read without a checkout. `found` is false when `REF` has
    /// no such file: then the built-in default applies.
    GitRef {
        #[serde(rename = "ref")]
        reference: String,
        commit: String,
        /// The file's path relative to the project (`vetto.toml`).
        path: String,
        found: bool,
    },
}

/// Which policy is in force, from where: the session-start line and the
/// session log's `policy.origin` are made from this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub origin: PolicyOrigin,
    /// The policy file as diagnostics name it (`vetto.toml`,
    /// `origin/main:vetto.toml`); `None` for the built-in default.
    pub file: Option<String>,
    /// Hex SHA-256 of the policy file's text (of the `default` preset's
    /// when there is no file): what `sha256sum` of the file prints.
    pub digest: String,
    /// The presets the file extends: as written, or `["default"]` when it
    /// has no `extends`.
    pub extends: Vec<String>,
    /// The file has no `extends`, so it extends `default`.
    pub extends_implicit: bool,
    /// Where `extends = []` (the blank slate) was written, if it was.
    pub blank_slate: Option<Origin>,
    /// `--preset` options, in order.
    pub presets: Vec<String>,
    /// The preset chosen because the project's marker and the command agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_preset: Option<AutoPreset>,
    /// Command-line options shaped the policy too.
    pub command_line: bool,
    /// With `--policy-ref`: whether the working tree's copy of the file
    /// differs from the one in force (a missing copy differs from a found
    /// one). `None` when nothing was compared.
    pub working_tree_differs: Option<bool>,
}

/// A preset applied without being named: the project has `marker` and the
/// command is `command` (`package.json`, `npm` → `npm`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoPreset {
    pub preset: String,
    pub marker: String,
    pub command: String,
}

/// When new directory entries in writable places (a nested `.git`, a
/// protected name that does not exist yet) are looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckCreations {
    /// As they are made: every creation is a seccomp notification the
    /// supervisor decides (refusing a nested `.git` or a protected name,
    /// naming what the kernel refuses).
    #[default]
    Live,
    /// At FULL, left to the kernel: what exists is kept by read-only
    /// mounts, and what the job creates is found by the check after the
    /// session (`persistence-planted`) instead of refused. No creation is
    /// notified, so a creation costs what it costs bare; a write the kernel
    /// refuses is not named. Below FULL no mount can keep what exists, so
    /// creations are checked live there whatever this says.
    After,
}

impl CheckCreations {
    pub fn is_live(&self) -> bool {
        *self == CheckCreations::Live
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CheckCreations::Live => "live",
            CheckCreations::After => "after",
        }
    }
}

impl std::str::FromStr for CheckCreations {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "live" => Ok(CheckCreations::Live),
            "after" => Ok(CheckCreations::After),
            other => Err(format!(
                "unknown creation check `{other}`; expected `live` or `after`"
            )),
        }
    }
}

/// The resolved policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The project root (absolute, canonical).
    pub project: PathBuf,
    /// The per-session temporary directory exported as `TMPDIR`.
    pub session_tmp: PathBuf,
    /// The policy file in use, if any (it is protected from the job).
    pub policy_file: Option<PathBuf>,
    pub sources: Vec<SourceInfo>,
    /// Concrete rules; several may name the same path (the strongest wins).
    pub fs: Vec<FsRule>,
    /// The glob rules as written (variables expanded): what `fs` holds of
    /// them is their matches at load; `policy explain` matches a path
    /// against these, so that a file that does not exist yet shows what
    /// it would be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub globs: Vec<FsRule>,
    /// Directory names at the project root that are created before the job
    /// starts if missing (`target`, `node_modules`, …), so the job can write
    /// into them (see docs/tiers.md: carving and new top-level entries).
    pub outputs: Vec<String>,
    pub net: NetPolicy,
    /// `[network] unix`: pathname unix sockets the job may connect to,
    /// whatever the network mode.
    #[serde(default)]
    pub unix: Vec<UnixSocket>,
    /// `[network] publish`: the job's loopback ports reachable on the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<Publish>,
    /// `[secrets]`: values put in requests by the proxy, never given to the job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretRule>,
    /// `[network] rules`: the requests allowed to the hosts they name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_rules: Vec<RequestRule>,
    /// `[network] discover`: registries found, before the plan, from the
    /// tools' own configuration (`session::tools`); used in `allow` mode.
    #[serde(default)]
    pub discover: Vec<super::tools::DiscoverRule>,
    /// `[filesystem] caches`: vetto-owned caches the job's tools use.
    #[serde(default)]
    pub caches: Vec<super::tools::CacheRule>,
    pub limits: Limits,
    pub env: EnvPolicy,
    /// The weakest tier this policy accepts (`auto` never goes below it).
    pub min_tier: Option<Tier>,
    /// `[filesystem] check_creations`: when new directory entries in
    /// writable places are looked at.
    #[serde(default, skip_serializing_if = "CheckCreations::is_live")]
    pub check_creations: CheckCreations,
    /// `[syscalls] expected`: refusals that are no finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_denials: Vec<ExpectedDenial>,
    /// `[network] expected`: names a program contacts as a matter of
    /// course that the policy keeps refused; each refusal is recorded as
    /// expected, no finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_hosts: Vec<HostPattern>,
    /// `[process] daemons`: programs whose outliving the command is no
    /// finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_daemons: Vec<ExpectedDaemon>,
    /// `[persistence] keep`: changes where a tool runs them later that
    /// are left as the session made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_changes: Vec<KeepChange>,
    /// Which policy this is, from where.
    pub provenance: Provenance,
}

#[cfg(test)]
impl Policy {
    /// A policy of `project` that grants nothing, the network off, every
    /// other part empty or default: the tests' one starting point, each
    /// naming what it needs on top (`Policy { fs, ..Policy::empty(p, t) }`),
    /// so a part added to [`Policy`] is added here once.
    pub fn empty(project: impl Into<PathBuf>, session_tmp: impl Into<PathBuf>) -> Policy {
        Policy {
            project: project.into(),
            session_tmp: session_tmp.into(),
            policy_file: None,
            sources: vec![],
            fs: vec![],
            globs: vec![],
            outputs: vec![],
            net: NetPolicy::Off,
            unix: vec![],
            publish: vec![],
            secrets: vec![],
            request_rules: vec![],
            discover: vec![],
            caches: vec![],
            limits: Limits::default(),
            env: EnvPolicy::default(),
            min_tier: None,
            check_creations: CheckCreations::Live,
            expected_denials: vec![],
            expected_daemons: vec![],
            keep_changes: vec![],
            expected_hosts: vec![],
            provenance: Provenance::default(),
        }
    }
}

mod opt_duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}
