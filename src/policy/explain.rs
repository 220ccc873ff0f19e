//! `vetto policy explain`: for a path or a host, the decision and the rule
//! (with its origin) that made it. Paths are decided by
//! [`crate::policy::paths::decide_rule`], the same function the plan uses.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::paths::decide_rule;
use super::{Access, FsRule, HostPattern, NetPolicy, Policy, paths};

/// The session directory `explain` and `check` pretend to use: it is never
/// created; `${TMPDIR}` rules point at it.
pub fn placeholder_tmp() -> PathBuf {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    base.join("vetto-<session>")
}

/// What the job may do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathVerdict {
    Readable,
    Writable,
    /// Readable, but read-only even beneath a writable root.
    Protected,
    /// Neither readable nor writable.
    Masked,
    /// No rule covers it: not allowed (deny by default).
    NoRule,
    /// A terminal the rule reaches, but not the job's own: a grant of
    /// `/dev/pts` is only the terminal vetto runs on and the
    /// pseudo-terminals the job creates (`plan::terminal`).
    OtherTerminal,
}

impl PathVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            PathVerdict::Readable => "readable",
            PathVerdict::Writable => "writable",
            PathVerdict::Protected => "read-only (protected)",
            PathVerdict::Masked => "masked",
            PathVerdict::NoRule => "not allowed (no rule)",
            PathVerdict::OtherTerminal => {
                "not allowed (another terminal: a /dev/pts rule reaches only the terminal vetto runs on and the pseudo-terminals the job creates)"
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathDecision {
    pub query: String,
    pub path: PathBuf,
    pub verdict: PathVerdict,
    pub rule: Option<FsRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDecision {
    pub query: String,
    pub allowed: bool,
    /// Why, in words (`network is off`, `matches *.github.com:443`).
    pub reason: String,
    pub rule: Option<HostPattern>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Decision {
    Path(PathDecision),
    Host(HostDecision),
}

/// A query is a path if it is absolute or starts with `~` or `.`;
/// anything else is a host (`name` or `name:port`).
///
/// `terminals` are the terminals vetto runs on: the only host terminals a
/// rule on `/dev/pts` (or above it) reaches.
pub fn decide(
    policy: &Policy,
    query: &str,
    cwd: &Path,
    home: &Path,
    terminals: &[PathBuf],
) -> Decision {
    let is_path = query.starts_with('/') || query.starts_with('~') || query.starts_with('.');
    if is_path {
        let raw = if query == "~" {
            home.to_path_buf()
        } else if let Some(rest) = query.strip_prefix("~/") {
            home.join(rest)
        } else {
            cwd.join(query)
        };
        let path = paths::normalise_abs(&raw);
        let mut d = decide_path(policy, query, &path);
        if crate::plan::terminal::governs(&policy.fs, &path).is_some()
            && !crate::plan::terminal::own_pts(terminals).contains(&path)
        {
            d.verdict = PathVerdict::OtherTerminal;
        }
        Decision::Path(d)
    } else {
        Decision::Host(decide_host(policy, query))
    }
}

pub fn decide_path(policy: &Policy, query: &str, path: &Path) -> PathDecision {
    let rule = decide_rule(&policy.fs, path).cloned();
    let verdict = match rule.as_ref().map(|r| r.access) {
        None => PathVerdict::NoRule,
        Some(Access::Read) => PathVerdict::Readable,
        Some(Access::Write) => PathVerdict::Writable,
        Some(Access::Protect) => PathVerdict::Protected,
        Some(Access::Deny) => PathVerdict::Masked,
    };
    PathDecision {
        query: query.to_string(),
        path: path.to_path_buf(),
        verdict,
        rule,
    }
}

pub fn decide_host(policy: &Policy, query: &str) -> HostDecision {
    // Parsed as an allow entry is (lower-cased, port split off), so the
    // query matches exactly what the policy would let through.
    let parsed = super::validate::parse_host(query).and_then(|(h, p)| {
        if h.starts_with("*.") {
            Err((format!("`{query}` is a pattern, not a host name"), None))
        } else {
            Ok((h, p))
        }
    });
    let (host, port) = match parsed {
        Ok(hp) => hp,
        Err((msg, _)) => {
            return HostDecision {
                query: query.to_string(),
                allowed: false,
                reason: msg,
                rule: None,
            };
        }
    };
    let host = host.as_str();
    let (allowed, reason, rule) = match &policy.net {
        NetPolicy::Off => (false, "the network is off".to_string(), None),
        NetPolicy::Host => (
            true,
            "the network is unrestricted (mode host)".to_string(),
            None,
        ),
        NetPolicy::Allow { hosts, .. } => {
            // Without a port in the query, any port a rule allows counts.
            match hosts.iter().find(|h| h.matches(host, port.or(h.port))) {
                Some(h) => {
                    let mut why = format!("matches `{}`", h.origin.written);
                    if let (Some(p), None) = (h.port, port) {
                        let _ = write!(why, " (port {p} only)");
                    }
                    (true, why, Some(h.clone()))
                }
                None => (
                    false,
                    "no `allow` entry matches (only listed hosts are reachable)".to_string(),
                    None,
                ),
            }
        }
    };
    HostDecision {
        query: query.to_string(),
        allowed,
        reason,
        rule,
    }
}

/// The whole explanation, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation<'a> {
    pub policy: &'a Policy,
    pub decisions: Vec<Decision>,
}

fn fmt_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    for (n, u) in [(h, 'h'), (m, 'm'), (s, 's')] {
        if n > 0 {
            let _ = write!(out, "{n}{u}");
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

fn fmt_size(b: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if b >= 1 << shift && b % (1 << shift) == 0 {
            return format!("{}{unit}", b >> shift);
        }
    }
    format!("{b} bytes")
}

/// Human-readable rendering of the resolved policy and the decisions.
pub fn render_text(policy: &Policy, decisions: &[Decision]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "project: {}", policy.project.display());
    let _ = writeln!(o, "{}", policy.provenance.line());
    if let Some(l) = policy.provenance.differs_line() {
        let _ = writeln!(o, "{l}");
    }
    let _ = writeln!(o, "session tmp: {}", policy.session_tmp.display());
    let _ = writeln!(o, "\nsources (lowest precedence first):");
    for s in &policy.sources {
        if s.digest.is_empty() {
            let _ = writeln!(o, "  {}", s.name);
        } else {
            let _ = writeln!(o, "  {}  sha256:{}", s.name, s.digest);
        }
    }
    let _ = writeln!(
        o,
        "\nfilesystem (longest matching path decides; same path: deny > protect > write > read):"
    );
    for access in [Access::Read, Access::Write, Access::Protect, Access::Deny] {
        let rules: Vec<&FsRule> = policy.fs.iter().filter(|r| r.access == access).collect();
        let title = match access {
            Access::Read => "read",
            Access::Write => "write",
            Access::Protect => "protect (read-only)",
            Access::Deny => "deny (masked)",
        };
        let _ = writeln!(o, "  {title}:");
        if rules.is_empty() {
            let _ = writeln!(o, "    (none)");
        }
        for r in rules {
            let _ = writeln!(o, "    {}  ← {}", r.path.display(), r.origin);
        }
    }
    let outputs = if policy.outputs.is_empty() {
        "(none)".to_string()
    } else {
        policy.outputs.join(", ")
    };
    let _ = writeln!(
        o,
        "  outputs (created at the project root before the job): {outputs}"
    );
    let _ = writeln!(o, "\nnetwork:");
    match &policy.net {
        NetPolicy::Off => {
            let _ = writeln!(o, "  off");
        }
        NetPolicy::Host => {
            let _ = writeln!(o, "  host (unrestricted)");
        }
        NetPolicy::Allow { hosts, resolve, .. } => {
            let _ = writeln!(o, "  allow, through vetto's proxy:");
            if hosts.is_empty() {
                let _ = writeln!(o, "    (no hosts)");
            }
            for h in hosts {
                let port = h.port.map(|p| format!(":{p}")).unwrap_or_default();
                let _ = writeln!(o, "    {}{port}  ← {}", h.host, h.origin);
            }
            for r in resolve {
                let _ = writeln!(o, "    resolve {} → {}  ← {}", r.host, r.addr, r.origin);
            }
        }
    }
    let l = &policy.limits;
    let _ = writeln!(o, "\nlimits:");
    let _ = writeln!(
        o,
        "  timeout: {}",
        l.timeout.map_or("none".into(), fmt_duration)
    );
    let _ = writeln!(
        o,
        "  max_procs: {}",
        l.max_procs.map_or("none".into(), |n| n.to_string())
    );
    let _ = writeln!(
        o,
        "  max_memory: {}",
        l.max_memory.map_or("none".into(), fmt_size)
    );
    let _ = writeln!(
        o,
        "  min_tier: {}",
        policy.min_tier.map_or("none".into(), |t| t.to_string())
    );
    let e = &policy.env;
    let _ = writeln!(
        o,
        "\nenvironment (only `pass` names reach the job; `withhold` wins unless named in pass_secret/--env-pass):"
    );
    let _ = writeln!(o, "  pass: {}", e.pass.join(" "));
    let _ = writeln!(o, "  withhold: {}", e.withhold.join(" "));
    let _ = writeln!(
        o,
        "  pass_secret: {}",
        if e.pass_exact.is_empty() {
            "(none)".into()
        } else {
            e.pass_exact.join(" ")
        }
    );
    let set: Vec<String> = e.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(
        o,
        "  set: {}",
        if set.is_empty() {
            "(none)".into()
        } else {
            set.join(" ")
        }
    );
    if !decisions.is_empty() {
        let _ = writeln!(o, "\ndecisions:");
    }
    for d in decisions {
        match d {
            Decision::Path(p) => {
                let _ = write!(o, "  {}: {}", p.query, p.verdict.as_str());
                match &p.rule {
                    Some(r) => {
                        let _ = writeln!(
                            o,
                            " — {} {}  ← {}",
                            r.access.as_str(),
                            r.path.display(),
                            r.origin
                        );
                    }
                    None => {
                        let _ = writeln!(o, " — no rule covers {}", p.path.display());
                    }
                }
            }
            Decision::Host(h) => {
                let verdict = if h.allowed { "allowed" } else { "blocked" };
                let _ = write!(o, "  {}: {verdict} — {}", h.query, h.reason);
                match &h.rule {
                    Some(r) => {
                        let _ = writeln!(o, "  ← {}", r.origin);
                    }
                    None => {
                        let _ = writeln!(o);
                    }
                }
            }
        }
    }
    o
}
