//! `vetto policy explain`: for a path or a host, the decision and the rule
//! (with its origin) that made it. Paths are decided by
//! [`crate::policy::paths::decide_rule`], the same function the plan uses.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::egress::ConnReason;
use super::egress::Rules;
use super::paths::decide_rule;
use super::{Access, FsRule, HostPattern, NetPolicy, PinnedHost, Policy, UnixSocket, paths};
use crate::policy::addr::AddrClass;

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
    /// pseudo-terminals the job creates (`policy::terminal`).
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
    /// The glob rule the path matches (`**/*.pem`, `.env.*`), when one
    /// does: a deny or protect pattern decides a path that does not exist
    /// yet as it would a match found at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glob: Option<FsRule>,
    /// The `[network] unix` entry naming this path: a unix socket there
    /// may be connected to, wherever it lies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unix: Option<UnixSocket>,
    /// The tool whose host cache the path lies in: such a cache is never
    /// made writable, the tool gets a vetto-owned one (docs/caches.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_cache: Option<HostCache>,
}

/// A path in a tool's host cache, and whether the policy gives that tool
/// its vetto-owned cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct HostCache {
    pub cache: super::tools::Cache,
    pub vetto_owned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDecision {
    pub query: String,
    pub allowed: bool,
    /// Why, in words (`network is off`, `matches *.github.com:443`).
    pub reason: String,
    /// The `allow` or `deny` pattern that decided it.
    pub rule: Option<HostPattern>,
    /// The `--resolve` pin of the name: the only address vetto connects to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin: Option<PinnedHost>,
    /// What the queried (or pinned) address is (`private`, `metadata` …),
    /// when the proxy treats it as internal: refused unless an ip rule
    /// names it (or, for loopback, a pin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<&'static str>,
    /// Further facts, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl HostDecision {
    fn new(query: &str, allowed: bool, reason: String) -> Self {
        HostDecision {
            query: query.to_string(),
            allowed,
            reason,
            rule: None,
            pin: None,
            address: None,
            notes: Vec::new(),
        }
    }
}

/// The class of an internal address — the egress proxy's own
/// classification ([`crate::policy::addr::classify`]), so explain says what the
/// proxy does — or `None` for a public one.
fn internal(ip: IpAddr) -> Option<AddrClass> {
    let class = crate::policy::addr::classify(ip);
    (!class.is_public()).then_some(class)
}

/// An address class as part of a sentence (`… is a private address`).
fn class_words(class: AddrClass) -> String {
    match class {
        AddrClass::Metadata => "a cloud metadata address".into(),
        AddrClass::Unspecified | AddrClass::Broadcast => format!("the {} address", class.as_str()),
        _ => format!("a {} address", class.as_str()),
    }
}

/// What `explain` was asked about: a name or an address, with or without
/// a port.
enum Query {
    Name { host: String, port: Option<u16> },
    Addr { ip: IpAddr, port: Option<u16> },
}

fn parse_port(query: &str, p: &str) -> Result<u16, String> {
    p.parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("invalid port in `{query}`: expected a number from 1 to 65535"))
}

fn parse_query(query: &str) -> Result<Query, String> {
    if let Some(rest) = query.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{query}`: an IPv6 address in brackets lacks its `]`"))?;
        let ip = inside
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("`{query}`: `{inside}` is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(parse_port(
                query,
                p.strip_prefix(':')
                    .ok_or_else(|| format!("`{query}`: expected `:PORT` after the address"))?,
            )?),
        };
        return Ok(Query::Addr {
            ip: IpAddr::V6(ip),
            port,
        });
    }
    if let Ok(ip) = query.parse::<IpAddr>() {
        return Ok(Query::Addr { ip, port: None });
    }
    if let Some((h, p)) = query.rsplit_once(':')
        && let Ok(ip) = h.parse::<Ipv4Addr>()
    {
        return Ok(Query::Addr {
            ip: IpAddr::V4(ip),
            port: Some(parse_port(query, p)?),
        });
    }
    // Parsed as an allow entry is (lower-cased, port split off), so the
    // query matches exactly what the policy would let through.
    match super::validate::parse_host(query) {
        Ok((h, _)) if h.starts_with("*.") => {
            Err(format!("`{query}` is a pattern, not a host name"))
        }
        Ok((host, port)) => Ok(Query::Name { host, port }),
        Err((msg, _)) => Err(msg),
    }
}

/// The ports a query without one is decided for: the ones a rule without
/// a port allows ([`crate::policy::egress::DEFAULT_PORTS`]), HTTPS first.
const QUERY_PORTS: [u16; 2] = [443, 80];

/// For a host or an address, what the egress proxy would decide and by
/// which rule — decided by the proxy's own [`Rules`], so explain cannot
/// disagree with it.
pub fn decide_host(policy: &Policy, query: &str) -> HostDecision {
    let target = match parse_query(query) {
        Ok(t) => t,
        Err(msg) => return HostDecision::new(query, false, msg),
    };
    let rules = match &policy.net {
        NetPolicy::Off => return HostDecision::new(query, false, "the network is off".into()),
        NetPolicy::Host => {
            return HostDecision::new(
                query,
                true,
                "the network is unrestricted (mode host)".into(),
            );
        }
        NetPolicy::Allow {
            hosts,
            deny,
            ips,
            resolve,
        } => Rules {
            allow: hosts.clone(),
            deny: deny.clone(),
            // As the session gives them to the proxy.
            ip_rules: super::egress::IpRule::from_policy(ips),
            pins: resolve.clone(),
            expected: Vec::new(),
        },
    };
    match target {
        Query::Name { host, port } => decide_name(query, &host, port, &rules),
        Query::Addr { ip, port } => decide_addr(query, ip, port, &rules),
    }
}

fn ports_text(ports: &[u16]) -> String {
    match ports {
        [p] => format!("port {p}"),
        _ => format!(
            "ports {}",
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    }
}

/// The ports to decide a query for: its own, else those of
/// [`QUERY_PORTS`] that `allowed` lets through, else the first port a rule
/// names for it, else the defaults (to say why not).
fn query_ports(port: Option<u16>, allowed: impl Fn(u16) -> bool, named: Option<u16>) -> Vec<u16> {
    if let Some(p) = port {
        return vec![p];
    }
    let open: Vec<u16> = QUERY_PORTS.into_iter().filter(|p| allowed(*p)).collect();
    match (open.is_empty(), named) {
        (false, _) => open,
        (true, Some(p)) => vec![p],
        (true, None) => QUERY_PORTS.to_vec(),
    }
}

fn decide_name(query: &str, host: &str, port: Option<u16>, rules: &Rules) -> HostDecision {
    let named = rules
        .allow
        .iter()
        .filter(|h| h.matches(host, h.port))
        .find_map(|h| h.port);
    let ports = query_ports(port, |p| rules.decide_name(host, p).allowed, named);
    let first = ports.first().copied().unwrap_or(443);
    let decision = rules.decide_name(host, first);
    let mut d = match decision.reason {
        _ if decision.allowed => {
            let pattern = rules.allow.iter().find(|h| {
                h.matches(host, Some(first))
                    && (h.port.is_some() || crate::policy::egress::DEFAULT_PORTS.contains(&first))
            });
            let mut why = match pattern {
                Some(h) => format!("matches `{}`", h.origin.written),
                None => "allowed".to_string(),
            };
            if port.is_none() {
                let _ = write!(why, " ({} only)", ports_text(&ports));
            }
            let mut d = HostDecision::new(query, true, why);
            d.rule = pattern.cloned();
            d
        }
        ConnReason::DeniedByRule => {
            let pattern = rules.deny.iter().find(|h| h.matches(host, Some(first)));
            let written = pattern.map(|h| h.origin.written.as_str()).unwrap_or("deny");
            let mut d = HostDecision::new(
                query,
                false,
                format!("denied by `{written}` (a deny rule wins over every allow rule)"),
            );
            d.rule = pattern.cloned();
            d
        }
        _ => {
            let why = match (port, rules.allow.iter().find(|h| h.matches(host, None))) {
                (Some(p), Some(h)) => format!(
                    "`{}` names the host without a port, which allows ports 80 and 443 only; write \"{host}:{p}\" to allow port {p}",
                    h.origin.written
                ),
                _ => "no `allow` entry matches (only listed hosts are reachable)".to_string(),
            };
            HostDecision::new(query, false, why)
        }
    };
    if !d.allowed {
        return d;
    }
    let pins: Vec<&PinnedHost> = rules
        .pins
        .iter()
        .filter(|r| r.host.eq_ignore_ascii_case(host))
        .collect();
    if pins.is_empty() {
        d.notes.push(
            "resolved by vetto on the host, and only that answer is connected to; an internal \
             answer (loopback, private, link-local, CGNAT, multicast, metadata) is refused unless \
             an ip rule names it or a --resolve pin puts this name there (never the metadata service)"
                .into(),
        );
        return d;
    }
    for pin in &pins {
        match rules.check_resolved(pin.addr, first, true) {
            Ok(()) => d.notes.push(format!(
                "connects to {} only: pinned by `{}` ({})",
                pin.addr, pin.origin.written, pin.origin
            )),
            Err(class) => d.notes.push(format!(
                "pinned to {} by `{}` ({}), which is {}: refused unless an ip rule names it",
                pin.addr,
                pin.origin.written,
                pin.origin,
                class_words(class)
            )),
        }
        if let Some(class) = internal(pin.addr) {
            d.address.get_or_insert(class.as_str());
        }
    }
    // Every pinned answer refused: so is the name.
    if pins
        .iter()
        .all(|pin| rules.check_resolved(pin.addr, first, true).is_err())
    {
        d.allowed = false;
        d.reason = format!(
            "{}, but its pinned address is internal and no ip rule names it",
            d.reason
        );
    }
    d.pin = pins.first().map(|p| (*p).clone());
    d
}

fn decide_addr(query: &str, ip: IpAddr, port: Option<u16>, rules: &Rules) -> HostDecision {
    let ports = query_ports(port, |p| rules.decide_addr(ip, p).allowed, None);
    let first = ports.first().copied().unwrap_or(443);
    let decision = rules.decide_addr(ip, first);
    let shown = match (ip, port) {
        (IpAddr::V6(v6), Some(p)) => format!("[{v6}]:{p}"),
        (ip, Some(p)) => format!("{ip}:{p}"),
        (ip, None) => ip.to_string(),
    };
    let other_port = rules
        .ip_rules
        .iter()
        .find(|r| r.net.contains(ip) && r.port.is_some());
    let mut d = match (&decision.rule, other_port) {
        (Some(rule), _) if decision.allowed => {
            HostDecision::new(query, true, format!("matches {rule}"))
        }
        (_, Some(r)) => HostDecision::new(
            query,
            false,
            format!(
                "the ip rule `{}` ({}) allows {ip} on port {} only",
                r.origin.written,
                r.origin,
                r.port.unwrap_or_default()
            ),
        ),
        _ => HostDecision::new(
            query,
            false,
            format!(
                "no ip rule covers {shown}: `allow` names hosts, and the proxy never connects to an address the job chose"
            ),
        ),
    };
    for pin in rules.pins.iter().filter(|r| r.addr == ip) {
        d.notes.push(format!(
            "pinned for `{}` by `{}` ({}): reachable by that name only",
            pin.host, pin.origin.written, pin.origin
        ));
    }
    if let Some(class) = internal(ip) {
        d.address = Some(class.as_str());
        if !d.allowed {
            d.notes.push(format!(
                "{ip} is {}: refused unless an ip rule names it",
                class_words(class)
            ));
        }
    }
    d
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
    // A host name never has a slash; an existing file is a path even
    // when its name looks like a host (`example.com`, `key.pem`).
    let is_path = query.contains('/')
        || query.starts_with('~')
        || query.starts_with('.')
        || std::fs::symlink_metadata(cwd.join(query)).is_ok();
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
        d.host_cache = super::tools::host_cache_of(&path, home).map(|cache| HostCache {
            cache,
            vetto_owned: policy.caches.iter().any(|c| c.cache == cache),
        });
        if super::terminal::governs(&policy.fs, &path).is_some()
            && !super::terminal::own_pts(terminals).contains(&path)
        {
            d.verdict = PathVerdict::OtherTerminal;
        }
        Decision::Path(d)
    } else {
        Decision::Host(decide_host(policy, query))
    }
}

pub fn decide_path(policy: &Policy, query: &str, path: &Path) -> PathDecision {
    let mut rule = decide_rule(&policy.fs, path).cloned();
    // The strongest glob rule the path matches: a match is a rule of its
    // exact path — the longest there is — so a deny or protect pattern
    // decides it, existing yet or not.
    let glob = policy
        .globs
        .iter()
        .filter(|g| glob_matches(&g.path, path, &policy.outputs))
        .max_by_key(|g| strength(g.access))
        .cloned();
    if let Some(g) = &glob
        && matches!(g.access, Access::Deny | Access::Protect)
        && rule
            .as_ref()
            .is_none_or(|r| strength(r.access) < strength(g.access))
    {
        rule = Some(g.clone());
    }
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
        glob,
        unix: policy.unix.iter().find(|u| u.path == path).cloned(),
        host_cache: None,
    }
}

/// Same path: deny > protect > write > read.
fn strength(a: Access) -> u8 {
    match a {
        Access::Read => 0,
        Access::Write => 1,
        Access::Protect => 2,
        Access::Deny => 3,
    }
}

/// Whether `path` matches the glob `pattern` (both absolute and normal)
/// as the load's walk would find it: `*` and `?` within a component, `**`
/// any run of directories — never through `.git` or an output directory,
/// which the walk does not enter.
pub fn glob_matches(pattern: &Path, path: &Path, outputs: &[String]) -> bool {
    fn names(p: &Path) -> Vec<String> {
        p.components()
            .filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    }
    fn go(pat: &[String], path: &[String], skip: &dyn Fn(&str) -> bool) -> bool {
        match pat.split_first() {
            None => path.is_empty(),
            Some((p, rest)) if p == "**" => {
                go(rest, path, skip)
                    || path.split_first().is_some_and(|(d, more)| {
                        !skip(d) && !more.is_empty() && go(pat, more, skip)
                    })
            }
            Some((p, rest)) => path
                .split_first()
                .is_some_and(|(n, more)| paths::glob_component(p, n) && go(rest, more, skip)),
        }
    }
    let skip = |d: &str| d == ".git" || outputs.iter().any(|o| o == d);
    go(&names(pattern), &names(path), &skip)
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
/// `policy explain PATH|HOST`: the answers first, then which policy gave
/// them (the whole policy is [`render_text`]'s, with `--all`).
pub fn render_answers(policy: &Policy, decisions: &[Decision]) -> String {
    let mut answers = String::new();
    render_decisions(&mut answers, decisions);
    let mut o = answers.trim_start_matches('\n').to_string();
    let _ = writeln!(
        o,
        "\n{} — project {} (the whole policy: --all)",
        policy.provenance.line(),
        policy.project.display()
    );
    if let Some(l) = policy.provenance.differs_line() {
        let _ = writeln!(o, "{l}");
    }
    o
}

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
    if !policy.globs.is_empty() {
        let _ = writeln!(
            o,
            "  patterns (matched at start; a path that matches one is decided by it, existing yet or not):"
        );
        for g in &policy.globs {
            let _ = writeln!(
                o,
                "    {:<7} {}  ← {}",
                g.access.as_str(),
                g.path.display(),
                g.origin
            );
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
        NetPolicy::Allow {
            hosts,
            deny,
            ips,
            resolve,
        } => {
            let _ = writeln!(
                o,
                "  allow, through vetto's proxy (a host without a port: 80 and 443; deny wins):"
            );
            if hosts.is_empty() && ips.is_empty() {
                let _ = writeln!(o, "    (no hosts)");
            }
            for h in hosts {
                let port = h.port.map(|p| format!(":{p}")).unwrap_or_default();
                let _ = writeln!(o, "    {}{port}  ← {}", h.host, h.origin);
            }
            for r in ips {
                let _ = writeln!(o, "    ip {r}  ← {}", r.origin);
            }
            for h in deny {
                let port = h.port.map(|p| format!(":{p}")).unwrap_or_default();
                let _ = writeln!(o, "    deny {}{port}  ← {}", h.host, h.origin);
            }
            for r in resolve {
                let _ = writeln!(o, "    resolve {} → {}  ← {}", r.host, r.addr, r.origin);
            }
        }
    }
    if !policy.unix.is_empty() {
        let _ = writeln!(
            o,
            "  unix sockets the job may connect to (the socket found at start):"
        );
        for u in &policy.unix {
            let _ = writeln!(o, "    {}  ← {}", u.path.display(), u.origin);
        }
    }
    if !policy.secrets.is_empty() {
        let _ = writeln!(
            o,
            "  secrets (the job holds a placeholder; the proxy puts the value in HTTPS requests to these hosts only):"
        );
        for s in &policy.secrets {
            let hosts: Vec<String> = s.hosts.iter().map(|h| h.written()).collect();
            let _ = writeln!(o, "    {} → {}  ← {}", s.name, hosts.join(", "), s.origin);
        }
    }
    if !policy.request_rules.is_empty() {
        let _ = writeln!(
            o,
            "  request rules (the proxy reads each request to these hosts and refuses, 403, what none allows):"
        );
        for r in &policy.request_rules {
            let _ = writeln!(o, "    {}  ← {}", r.describe(), r.origin);
        }
    }
    if !policy.expected_hosts.is_empty() {
        let _ = writeln!(
            o,
            "  expected (refused all the same; recorded as expected, no finding):"
        );
        for h in &policy.expected_hosts {
            let port = h.port.map(|p| format!(":{p}")).unwrap_or_default();
            let _ = writeln!(o, "    {}{port}  ← {}", h.host, h.origin);
        }
    }
    if !policy.expected_denials.is_empty() || !policy.expected_daemons.is_empty() {
        let _ = writeln!(
            o,
            "\nexpected (refused or killed all the same; recorded as expected, no finding):"
        );
        for e in &policy.expected_denials {
            let _ = writeln!(
                o,
                "  refused calls: {} ({})  ← {}",
                e.class.as_str(),
                e.class.calls().join(", "),
                e.origin
            );
        }
        for d in &policy.expected_daemons {
            let _ = writeln!(o, "  daemon: {}  ← {}", d.pattern.display(), d.origin);
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
    if !policy.check_creations.is_live() {
        let _ = writeln!(
            o,
            "  check_creations: {} (FULL: creations are reported after the session, not refused)",
            policy.check_creations.as_str()
        );
    }
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
    render_decisions(&mut o, decisions);
    o
}

/// The answers to `policy explain PATH|HOST`, one per query.
fn render_decisions(o: &mut String, decisions: &[Decision]) {
    if !decisions.is_empty() {
        let _ = writeln!(o, "\ndecisions:");
    }
    for d in decisions {
        match d {
            Decision::Path(p) => {
                let _ = write!(
                    o,
                    "  {}: {}",
                    crate::text::escape(&p.query),
                    p.verdict.as_str()
                );
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
                if let Some(g) = &p.glob {
                    let exists = if std::fs::symlink_metadata(&p.path).is_ok() {
                        "it exists"
                    } else {
                        "it does not exist yet: a match present when a session starts is decided by the pattern"
                    };
                    let _ = writeln!(
                        o,
                        "      matches the pattern {} {}  ← {} ({exists})",
                        g.access.as_str(),
                        crate::text::escape(&g.path.to_string_lossy()),
                        g.origin
                    );
                }
                if let Some(u) = &p.unix {
                    let _ = writeln!(
                        o,
                        "      unix socket: connecting allowed — [network] unix  ← {}",
                        u.origin
                    );
                }
                match &p.host_cache {
                    Some(HostCache {
                        cache,
                        vetto_owned: true,
                    }) => {
                        let _ = writeln!(
                            o,
                            "      {cache}'s host cache: the job's {cache} uses its vetto-owned cache instead ([filesystem] caches)"
                        );
                    }
                    Some(HostCache { cache, .. }) => {
                        let _ = writeln!(
                            o,
                            "      {cache}'s host cache: never made writable (a build outside the sandbox trusts it); --preset {cache} gives {cache} a vetto-owned cache"
                        );
                    }
                    None => {}
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
                for n in &h.notes {
                    let _ = writeln!(o, "      {n}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Origin;

    fn origin(line: u32, written: &str) -> Origin {
        Origin {
            source: "vetto.toml".into(),
            line,
            col: 10,
            written: written.into(),
        }
    }

    fn pattern(line: u32, written: &str) -> HostPattern {
        let (host, port) = match written.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()),
            None => (written.to_string(), None),
        };
        HostPattern {
            host,
            port,
            origin: origin(line, written),
        }
    }

    fn pin(host: &str, addr: &str) -> PinnedHost {
        PinnedHost {
            host: host.into(),
            addr: addr.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            origin: Origin {
                source: "--resolve".into(),
                line: 0,
                col: 0,
                written: format!("{host}:{addr}"),
            },
        }
    }

    fn name(q: &str, hosts: &[HostPattern], resolve: &[PinnedHost]) -> HostDecision {
        let rules = Rules {
            allow: hosts.to_vec(),
            pins: resolve.to_vec(),
            ..Rules::default()
        };
        match parse_query(q) {
            Ok(Query::Name { host, port }) => decide_name(q, &host, port, &rules),
            Ok(Query::Addr { ip, port }) => decide_addr(q, ip, port, &rules),
            Err(e) => HostDecision::new(q, false, e),
        }
    }

    /// A rule without a port allows the web's ports, 80 and 443, and no
    /// other: `registry.npmjs.org` does not open its ssh or a debug port.
    #[test]
    fn a_rule_without_a_port_allows_80_and_443_only() {
        let hosts = [
            pattern(3, "registry.npmjs.org"),
            pattern(4, "*.github.com:22"),
        ];
        for q in ["registry.npmjs.org:443", "registry.npmjs.org:80"] {
            let d = name(q, &hosts, &[]);
            assert!(d.allowed, "{q}: {d:?}");
            assert_eq!(d.rule.map(|r| r.origin.line), Some(3));
        }
        let d = name("registry.npmjs.org:8443", &hosts, &[]);
        assert!(!d.allowed, "{d:?}");
        assert!(d.reason.contains("80 and 443 only"), "{}", d.reason);
        assert!(d.reason.contains("registry.npmjs.org:8443"), "{}", d.reason);
        let d = name("registry.npmjs.org", &hosts, &[]);
        assert!(
            d.allowed && d.reason.contains("ports 443 and 80 only"),
            "{d:?}"
        );
        let d = name("git.github.com", &hosts, &[]);
        assert!(d.allowed && d.reason.contains("port 22 only"), "{d:?}");
        assert!(!name("git.github.com:443", &hosts, &[]).allowed);
    }

    /// An allowed name is resolved by vetto and refused when the answer is
    /// internal, unless a pin names it: explain says which.
    #[test]
    fn pins_and_internal_answers_are_explained() {
        let hosts = [pattern(3, "allowed.test")];
        let d = name("allowed.test:443", &hosts, &[]);
        assert!(d.allowed && d.pin.is_none());
        assert!(
            d.notes.iter().any(|n| n.contains("metadata) is refused")),
            "{d:?}"
        );
        let pins = [pin("allowed.test", "127.0.0.1")];
        let d = name("ALLOWED.test:443", &hosts, &pins);
        assert!(d.allowed, "{d:?}");
        assert_eq!(
            d.pin.as_ref().map(|p| p.addr.to_string()),
            Some("127.0.0.1".into())
        );
        assert_eq!(d.address, Some("loopback"));
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("connects to 127.0.0.1 only")),
            "{d:?}"
        );
        // A pin alone allows nothing: the name must still be allowed.
        let d = name("other.test:443", &hosts, &[pin("other.test", "10.0.0.1")]);
        assert!(!d.allowed && d.pin.is_none(), "{d:?}");
    }

    /// explain says what the proxy does with a pinned answer: the two
    /// cannot disagree, whatever the proxy's rule for internal pins is.
    #[test]
    fn a_pinned_answer_is_explained_as_the_proxy_decides_it() {
        let hosts = [pattern(3, "allowed.test")];
        for addr in [
            "127.0.0.1",
            "10.0.0.1",
            "169.254.169.254",
            "fd00:ec2::254",
            "93.184.215.14",
        ] {
            let pins = [pin("allowed.test", addr)];
            let rules = Rules {
                allow: hosts.to_vec(),
                pins: pins.to_vec(),
                ..Rules::default()
            };
            let ip: IpAddr = addr.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            let d = name("allowed.test:443", &hosts, &pins);
            assert_eq!(
                d.allowed,
                rules.check_resolved(ip, 443, true).is_ok(),
                "{addr}: {d:?}"
            );
            assert_eq!(
                d.address.is_some(),
                !crate::policy::addr::classify(ip).is_public(),
                "{addr}"
            );
        }
    }

    /// A deny rule wins over every allow rule, on every port, and explain
    /// names it.
    #[test]
    fn a_deny_rule_wins_and_is_named() {
        let rules = Rules {
            allow: vec![pattern(3, "*.example.com")],
            deny: vec![pattern(4, "evil.example.com")],
            ..Rules::default()
        };
        for q in [
            "evil.example.com",
            "evil.example.com:443",
            "evil.example.com:22",
        ] {
            let Ok(Query::Name { host, port }) = parse_query(q) else {
                panic!("{q} is a name");
            };
            let d = decide_name(q, &host, port, &rules);
            assert!(!d.allowed, "{q}: {d:?}");
            assert!(
                d.reason.contains("denied by `evil.example.com`"),
                "{}",
                d.reason
            );
            assert_eq!(d.rule.map(|r| r.origin.line), Some(4));
        }
        let d = decide_name("ok.example.com:443", "ok.example.com", Some(443), &rules);
        assert!(d.allowed, "{d:?}");
    }

    /// An address the job names is reached only through an ip rule, and
    /// internal ones are named as such — the metadata address above all.
    #[test]
    fn addresses_are_refused_and_internal_ones_named() {
        let pins = [pin("allowed.test", "10.0.0.1")];
        for (q, class) in [
            ("169.254.169.254", Some("metadata")),
            ("169.254.169.254:80", Some("metadata")),
            ("[fd00:ec2::254]:80", Some("metadata")),
            ("[::ffff:169.254.169.254]:80", Some("metadata")),
            ("10.0.0.1:5432", Some("private")),
            ("172.31.255.1", Some("private")),
            ("fd12::1", Some("private")),
            ("127.0.0.1:8080", Some("loopback")),
            ("[::1]:22", Some("loopback")),
            ("169.254.1.1", Some("link-local")),
            ("fe80::1", Some("link-local")),
            ("100.64.1.1", Some("CGNAT")),
            ("224.0.0.251", Some("multicast")),
            ("0.0.0.0", Some("unspecified")),
            ("93.184.215.14:443", None),
            ("172.32.0.1", None),
            ("2606:4700::1111", None),
        ] {
            let d = name(q, &[pattern(3, "allowed.test")], &pins);
            assert!(!d.allowed, "{q}: {d:?}");
            assert!(d.reason.contains("no ip rule"), "{q}: {}", d.reason);
            assert_eq!(d.address, class, "{q}");
            assert_eq!(
                d.notes.iter().any(|n| n.contains("refused unless")),
                class.is_some(),
                "{q}: {d:?}"
            );
        }
        let d = name("10.0.0.1", &[], &pins);
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("pinned for `allowed.test`")),
            "{d:?}"
        );
        for bad in ["[::1", "[::1]x", "1.2.3.4:0", "1.2.3.4:99999", "[zz]:1"] {
            assert!(!name(bad, &[], &[]).allowed, "{bad}");
        }
    }
}
