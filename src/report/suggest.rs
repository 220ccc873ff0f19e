//! `vetto policy suggest`: the smallest change to the default policy that
//! would have allowed what audited sessions did — as a TOML policy to
//! review, never applied by itself. Attempts that persist code beyond the
//! job (hooks, CI command files), read secrets or need a refused syscall are
//! listed as comments, not suggested — and so is any path that would make a
//! protected or masked path writable ([`reopens_protection`]), or a host
//! cache (its vetto-owned cache is suggested instead). Withheld
//! variables are no violation and never a suggestion.
//!
//! Network: the destinations the sessions' egress records show the job
//! contacted (allowed, or observed under `--audit`) become `[network]
//! allow` entries — by name, never the resolver's address; an address the
//! job connected to without a name becomes an ip rule with a comment. A
//! deny-listed host, the metadata address, a name lookup and whatever the
//! proxy refused for its own reasons (an SNI that disagreed, no
//! credential, a malformed request) are never suggested.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::events::log::SessionLog;
use crate::events::{ConnReason, ConnVia, Connection, Event, Roots, RuleId, SessionStart, Target};
use crate::policy::tools::{Cache, host_cache_of};

/// Comments listing what is deliberately not suggested (the rest are
/// counted): a job that tried ten thousand names gets a readable file.
const MAX_REFUSED: usize = 200;

/// What the sessions did that the policy refused, folded by rule and path.
#[derive(Debug, Default)]
struct Needs {
    /// Directories to make writable → (count, who).
    write: BTreeMap<String, (u64, String)>,
    /// Host sockets to reach (`[network] unix`) → (count, who).
    sockets: BTreeMap<String, (u64, String)>,
    network: Option<(u64, String)>,
    /// Names the job contacted → port → (count, who).
    names: BTreeMap<String, BTreeMap<u16, (u64, String)>>,
    /// Addresses contacted without a name (`ip:port` as an ip rule is
    /// written) → (count, who, what the address is).
    addrs: BTreeMap<String, (u64, String, Option<&'static str>)>,
    /// Not suggested, with the reason → count.
    refused: BTreeMap<String, u64>,
    /// Presets that fit the sessions' commands and projects.
    presets: BTreeMap<&'static str, crate::policy::markers::Suggestion>,
    /// Presets in force in the sessions (chosen for the job by vetto, as
    /// `--audit` and `vetto ci` do from the project's markers, or named):
    /// a policy with `extends` chooses none by itself, so each is named.
    used: BTreeSet<String>,
    /// Vetto-owned caches for denied writes in a host cache → (count, who).
    caches: BTreeMap<Cache, (u64, String)>,
    /// Withheld credentials whose recipe names hosts the job contacted →
    /// those hosts (`[secrets]`).
    secrets: BTreeMap<String, BTreeSet<String>>,
    /// Withheld names with no contacted host known for them.
    withheld: BTreeSet<String>,
}

/// A TOML policy for the sessions' logs (review it before use). The
/// presets that fit ([`crate::policy::markers`]) are looked for in each
/// session's project as it is now.
pub fn suggest(logs: &[SessionLog]) -> String {
    suggest_with(logs, |project, marker| project.join(marker).is_file())
}

/// [`suggest`], with `has(project, marker)` saying which marker files a
/// project has.
fn suggest_with(logs: &[SessionLog], has: impl Fn(&Path, &str) -> bool) -> String {
    let mut needs = Needs::default();
    for start in logs.iter().filter_map(|l| l.start()) {
        let in_force =
            crate::policy::markers::in_force(start.policy.sources.iter().map(|s| s.name.as_str()));
        needs.used.extend(
            in_force
                .iter()
                .filter(|p| **p != "default" && crate::policy::presets::get(p).is_some())
                .map(|p| (*p).to_string()),
        );
        if let Some(fit) =
            crate::policy::markers::suggest(&start.command, |m| has(&start.project, m), &in_force)
        {
            needs.presets.entry(fit.preset).or_insert(fit);
        }
    }
    let conns: Vec<&Connection> = logs
        .iter()
        .flat_map(|l| l.events.iter())
        .filter_map(|e| match e {
            Event::Connection(c) => Some(&**c),
            _ => None,
        })
        .collect();
    connections(&mut needs, &conns);
    withheld_secrets(&mut needs, logs, &conns);
    for log in logs {
        let roots = log.start().map(|s| s.roots()).unwrap_or_default();
        let guarded = log.start().map(protections).unwrap_or_default();
        // The egress records say more than the violations: where they
        // exist, a blocked connection is suggested (or not) from them.
        let recorded = log.events.iter().any(|e| matches!(e, Event::Connection(_)));
        for v in log.violations() {
            if recorded && v.rule == RuleId::NetEgressBlocked {
                continue;
            }
            let who = v
                .attribution
                .as_ref()
                .map(|p| p.display())
                .unwrap_or_else(|| v.process.exe.display().to_string());
            let bump = |map: &mut BTreeMap<String, (u64, String)>, key: String| {
                let e = map.entry(key).or_insert((0, who.clone()));
                e.0 += 1;
            };
            let reopened = match (&v.rule, &v.target) {
                (
                    RuleId::FsWriteDenied | RuleId::UnixSocketDenied,
                    Target::Path { path } | Target::Socket { path },
                ) => reopens_protection(path, &guarded).map(|why| (path, why)),
                _ => None,
            };
            // A new entry past the session's spares: no rule grants what
            // does not exist when the session starts.
            if v.detail.ends_with(SPARES_SPENT_DETAIL) {
                let what = format!(
                    "{} {} — {}: not suggested",
                    v.rule.as_str(),
                    v.target.display(),
                    SPARES_SPENT
                );
                *needs.refused.entry(what).or_insert(0) += 1;
                continue;
            }
            if let Some((path, why)) = reopened {
                let what = format!(
                    "{} {} — {why}: not suggested",
                    v.rule.as_str(),
                    written(path, &roots)
                );
                *needs.refused.entry(what).or_insert(0) += 1;
                continue;
            }
            // A host cache is never suggested: the vetto-owned cache is
            // (docs/caches.md).
            if let (RuleId::FsWriteDenied, Target::Path { path }) = (&v.rule, &v.target)
                && let Some(cache) = roots.home.as_deref().and_then(|h| host_cache_of(path, h))
            {
                let e = needs.caches.entry(cache).or_insert((0, who.clone()));
                e.0 += 1;
                continue;
            }
            match (&v.rule, &v.target) {
                (RuleId::FsWriteDenied, Target::Path { path }) => {
                    // Reopening checked above: a grant exists.
                    if let Ok(grant) = write_grant(path, roots.home.as_deref(), &guarded) {
                        bump(&mut needs.write, written(&grant, &roots));
                    }
                }
                (RuleId::UnixSocketDenied, Target::Socket { path }) => {
                    bump(&mut needs.sockets, written(path, &roots));
                }
                (RuleId::NetSocketDenied | RuleId::NetEgressBlocked, _) => {
                    let e = needs.network.get_or_insert((0, who.clone()));
                    e.0 += 1;
                }
                (RuleId::SecretEnvWithheld, _) => {}
                (rule, target) => {
                    let why = match rule {
                        RuleId::GitPersistenceBlocked
                        | RuleId::PersistencePlanted
                        | RuleId::CiControlFileBlocked => {
                            "persists code beyond the job: not suggested"
                        }
                        RuleId::SecretReadDenied => "reads a masked secret: not suggested",
                        RuleId::SyscallDenied => "a refused syscall: no policy allows it",
                        _ => "not a policy rule",
                    };
                    *needs
                        .refused
                        .entry(format!("{} {} — {why}", rule.as_str(), target.display()))
                        .or_insert(0) += 1;
                }
            }
        }
    }
    render(&needs, logs.len())
}

/// Credentials the sessions withheld from the job: one whose recipe
/// (`--secret NAME`) names a host the job contacted becomes a `[secrets]`
/// entry for those hosts — the job then holds a placeholder, and vetto's
/// proxy puts the value in its requests to them only; any other is
/// listed, for the user who knows which host it is for.
fn withheld_secrets(needs: &mut Needs, logs: &[SessionLog], conns: &[&Connection]) {
    let contacted: BTreeSet<String> = conns
        .iter()
        .filter(|c| c.via != ConnVia::Dns && c.reason != ConnReason::DeniedByRule)
        .filter_map(|c| c.host.as_deref())
        .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
        .collect();
    let names = logs
        .iter()
        .filter_map(|l| l.start())
        .flat_map(|s| s.withheld_env.iter())
        // The CI command-file variables are withheld as files the job must
        // not write, not as credentials.
        .filter(|n| !crate::policy::merge::CI_CONTROL_VARS.contains(&n.as_str()));
    for name in names {
        let hosts: BTreeSet<String> = crate::policy::validate::secret_recipe(name)
            .unwrap_or_default()
            .iter()
            .filter(|h| contacted.contains(**h))
            .map(|h| (*h).to_owned())
            .collect();
        if hosts.is_empty() {
            needs.withheld.insert(name.clone());
        } else {
            needs.secrets.entry(name.clone()).or_default().extend(hosts);
        }
    }
    needs.withheld.retain(|n| !needs.secrets.contains_key(n));
}

/// Who made a connection, for a comment.
fn conn_who(c: &Connection) -> String {
    match (&c.attribution, &c.process) {
        (Some(p), _) => p.display(),
        (None, Some(p)) if !p.exe.as_os_str().is_empty() => p.exe.display().to_string(),
        _ => "an unknown process".to_string(),
    }
}

/// Fold the egress records into allow entries (or reasons not to).
fn connections(needs: &mut Needs, conns: &[&Connection]) {
    // A name on the deny list anywhere is never suggested, whatever else
    // the sessions say about it.
    let deny_listed: Vec<String> = conns
        .iter()
        .filter(|c| c.reason == ConnReason::DeniedByRule)
        .filter_map(|c| c.host.as_deref().map(|h| h.to_ascii_lowercase()))
        .collect();
    for c in conns {
        let who = conn_who(c);
        let mut refuse = |what: String| *needs.refused.entry(what).or_insert(0) += 1;
        let host = c
            .host
            .as_deref()
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase());
        let shown = match (&host, &c.addr) {
            (Some(h), _) => format!("{h}:{}", c.port),
            (None, Some(a)) => format!("{a}:{}", c.port),
            (None, None) => format!("?:{}", c.port),
        };
        if c.via == ConnVia::Dns {
            refuse(format!(
                "name lookup {shown} — vetto resolves names itself; the connection that follows is what an entry allows"
            ));
            continue;
        }
        // At FULL a transparent connection goes to an address vetto's DNS
        // stub made up for a name: the name is the entry, never the address.
        if c.via == ConnVia::Transparent && host.is_none() {
            refuse(format!(
                "{shown} — an address vetto's DNS stub made up, without its name: not suggested"
            ));
            continue;
        }
        if let Some(h) = &host
            && deny_listed.contains(h)
        {
            refuse(format!("{shown} — on the deny list: not suggested"));
            continue;
        }
        // A name that is an address literal (`CONNECT 10.0.0.1:443`) is an
        // address.
        let ip = match (&host, &c.addr) {
            (Some(h), _) => h.parse::<std::net::IpAddr>().ok(),
            (None, Some(a)) => a.parse::<std::net::IpAddr>().ok(),
            (None, None) => None,
        };
        // A name that resolved to an internal address: what would let
        // exactly that through is said, and left to the reader (an
        // internal address in a policy is a decision, not a finding).
        let resolved = c
            .addr
            .as_deref()
            .and_then(|a| a.parse::<std::net::IpAddr>().ok());
        let internal = match (&host, resolved) {
            // `ip` is `None` for a name (not an address literal).
            (Some(h), Some(addr)) if c.reason == ConnReason::PrivateAddress && ip.is_none() => {
                use crate::policy::egress::{InternalReach, internal_reach};
                Some(match internal_reach(h, addr) {
                    InternalReach::Pin(p) => format!(
                        "its name resolved to the internal address {addr}: `resolve = [\"{}\"]` pins it, for this name alone, if that is intended",
                        toml_basic(&p)
                    ),
                    InternalReach::Never(why) => format!("its name resolved to {addr}, {why}"),
                })
            }
            _ => None,
        };
        if let Some(why) = internal {
            refuse(format!("{shown} — {why}: not suggested"));
            continue;
        }
        // What an allow entry would not change is not suggested: the
        // proxy's own refusals.
        let why_not = match c.reason {
            ConnReason::AllowedByRule | ConnReason::NotAllowed | ConnReason::UpstreamFailed => None,
            ConnReason::ResolveFailed => Some("the name did not resolve"),
            ConnReason::PrivateAddress if ip.is_some() => None,
            ConnReason::PrivateAddress => Some(
                "its name resolved to an internal address: a pin of the name to it (`resolve`) lets that name alone through, if that is intended",
            ),
            ConnReason::DeniedByRule => Some("on the deny list"),
            ConnReason::SniMismatch => {
                Some("its TLS server name disagreed with the host (domain fronting)")
            }
            ConnReason::SniMissing => Some("TLS without a server name"),
            ConnReason::NoCredential => Some("a client without the session's proxy credential"),
            ConnReason::Malformed => Some("a malformed request"),
            ConnReason::Limit => Some("over a limit of the proxy"),
            ConnReason::DnsRefused => Some("a name lookup"),
            ConnReason::RequestRefused => Some("a request refused on a connection vetto reads"),
        };
        if let Some(why) = why_not {
            refuse(format!("{shown} — {why}: not suggested"));
            continue;
        }
        match (ip, &host) {
            (Some(ip), _) => {
                let class = crate::policy::addr::classify(ip);
                if class == crate::policy::addr::AddrClass::Metadata {
                    refuse(format!(
                        "{shown} — the cloud metadata address: never suggested"
                    ));
                    continue;
                }
                if c.port == 53 {
                    refuse(format!(
                        "{shown} — a resolver: vetto resolves names itself, so no entry is needed"
                    ));
                    continue;
                }
                let rule = match ip {
                    std::net::IpAddr::V6(v6) => format!("[{v6}]:{}", c.port),
                    ip => format!("{ip}:{}", c.port),
                };
                let e = needs.addrs.entry(rule).or_insert((
                    0,
                    who.clone(),
                    (!class.is_public()).then(|| class.as_str()),
                ));
                e.0 += 1;
            }
            (None, Some(h)) => match crate::policy::validate::parse_host(h) {
                Ok((name, None)) if !name.starts_with("*.") => {
                    let e = needs
                        .names
                        .entry(name)
                        .or_default()
                        .entry(c.port)
                        .or_insert((0, who.clone()));
                    e.0 += 1;
                }
                _ => refuse(format!("{shown} — not a host name: not suggested")),
            },
            (None, None) => refuse(format!("{shown} — no name or address recorded")),
        }
    }
}

/// The paths of a session's policy that stay closed whatever a suggestion
/// says: its `protect` and `deny` rules, from the rule list the session log
/// records (`"{access:<7} {path}  ({origin})"`).
pub(crate) fn protections(start: &SessionStart) -> Vec<PathBuf> {
    start
        .policy
        .rules
        .iter()
        .filter_map(|line| {
            let (access, rest) = line.split_once(' ')?;
            if access != "protect" && access != "deny" {
                return None;
            }
            let rest = rest.trim_start();
            let path = rest.split_once("  (").map_or(rest, |(p, _)| p);
            Some(PathBuf::from(path))
        })
        .collect()
}

/// Why making `path` writable would re-open a protection, if it would: it
/// is (or lies inside) a protected or masked path of the policy, a git
/// directory's hooks or config, or the runner's CI command files. An
/// ancestor of a protected path is fine: the more specific rule still wins.
pub(crate) fn reopens_protection(path: &Path, guarded: &[PathBuf]) -> Option<&'static str> {
    if holds_programs(path) {
        return Some(
            "a bin/ directory: a later run outside the sandbox would run what the job put there",
        );
    }
    if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        [
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".profile",
            ".zshrc",
            ".zprofile",
            ".zshenv",
            ".zlogin",
        ]
        .contains(&n)
    }) {
        return Some("a shell start-up file: the next shell outside the sandbox runs it");
    }
    if path
        .components()
        .any(|c| c.as_os_str() == "_runner_file_commands")
    {
        return Some("a CI command file");
    }
    let names: Vec<_> = path.components().map(|c| c.as_os_str()).collect();
    if names.windows(2).any(|w| {
        w[0] == ".git"
            && ["hooks", "config", "info", "modules", "commondir"]
                .iter()
                .any(|n| w[1] == *n)
    }) {
        return Some("git's hooks and config run outside the sandbox");
    }
    guarded
        .iter()
        .any(|g| path.starts_with(g))
        .then_some("a protected or masked path of the policy")
}

/// Whether `path` is (or lies in) a directory of programs — `bin`,
/// `.bin` (`node_modules/.bin`), `sbin` — that tools and shells run later,
/// outside the sandbox.
pub(crate) fn holds_programs(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c.as_os_str().to_str(), Some("bin" | ".bin" | "sbin")))
}

/// Directories under the home directory that hold a tool's programs next
/// to its caches (`~/.cargo/bin`, `~/go/bin`, `~/.local/bin` …): never
/// granted whole, only the subdirectory that was denied.
const TOOL_HOMES: &[&str] = &[
    ".cargo", ".rustup", ".local", "go", ".deno", ".bun", ".pyenv", ".nvm", ".sdkman", ".yarn",
    ".config",
];

/// Whether `dir`'s name is one of [`TOOL_HOMES`].
fn is_tool_home_name(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| TOOL_HOMES.contains(&n))
}

/// Granting `dir` would grant more than the denied subdirectory below it:
/// the root, the home directory, a tool home that holds programs
/// ([`TOOL_HOMES`]), or a directory that has a `bin` of its own.
fn wider_than_denied(dir: &Path, home: Option<&Path>) -> bool {
    if dir.parent().is_none() || home.is_some_and(|h| dir == h) {
        return true;
    }
    let tool_home = home.is_some_and(|h| dir.parent() == Some(h) && is_tool_home_name(dir));
    tool_home || ["bin", ".bin", "sbin"].iter().any(|b| dir.join(b).is_dir())
}

/// What to make writable so that the denied write of `path` succeeds: its
/// directory — or, where that is wider than what was denied
/// ([`wider_than_denied`]) or protected, the path itself (the denied
/// subdirectory). `Err`: why nothing may be proposed (a protected or
/// masked path, a `bin/` directory).
pub(crate) fn write_grant(
    path: &Path,
    home: Option<&Path>,
    guarded: &[PathBuf],
) -> Result<PathBuf, &'static str> {
    if let Some(why) = reopens_protection(path, guarded) {
        return Err(why);
    }
    if path.as_os_str().is_empty() {
        return Err(
            "the path is not known (the process is not dumpable, so vetto cannot read it); --tier full can",
        );
    }
    if path
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err("a path that climbs with `..`: its real place is not known");
    }
    // The shared /tmp (FS-ONLY; FULL's is the job's own), random name or
    // not (what works is the same: $TMPDIR, or FULL): it holds every
    // user's and program's sockets and files (ssh-agent's, an unsandboxed
    // daemon's), and a name there is anyone's to take first.
    if path == Path::new("/tmp") || path.parent() == Some(Path::new("/tmp")) {
        return Err(
            "the shared /tmp holds other programs' sockets (ssh-agent's, an unsandboxed daemon's): the job's own temporary directory is $TMPDIR, and at FULL /tmp is the job's own (writable unless the project lies under /tmp, which keeps its top read-only)",
        );
    }
    // A name made anew each run (`~/.claude.json.tmp.12.a8f3k2`,
    // `~/.node-spawn-wrap-4321-9f1c2e`): a grant of it never matches the
    // next run. Its stable directory is proposed where that may be
    // granted whole, else nothing.
    if let Some(stable) = before_random_part(path) {
        let refused = stable.parent().is_none()
            || home == Some(stable)
            || stable == Path::new("/tmp")
            || wider_than_denied(stable, home)
            || reopens_protection(stable, guarded).is_some();
        return if refused {
            Err(RANDOM_NAME)
        } else {
            Ok(stable.to_path_buf())
        };
    }
    // A device is granted by itself, never its directory (all of /dev).
    if path.starts_with("/dev") {
        return Ok(path.to_path_buf());
    }
    // The home directory itself (a `mkdir -p ~/…` where FULL's view hid
    // it): its parent would grant every home on the machine.
    if home == Some(path) {
        return Err(
            "the home directory: granting it whole grants every shell start-up file and tool home in it",
        );
    }
    // The tool home itself (the job made `~/.cargo` where there was none):
    // granting it grants its `bin/` to come, whatever existed before.
    if path.parent().is_some_and(|dir| home == Some(dir)) && is_tool_home_name(path) {
        return Err("a tool's home, which will hold its programs (its bin/): never granted whole");
    }
    match path.parent() {
        Some(dir)
            if !wider_than_denied(dir, home) && reopens_protection(dir, guarded).is_none() =>
        {
            Ok(dir.to_path_buf())
        }
        _ => Ok(path.to_path_buf()),
    }
}

/// How a refusal past the session's spares ends its violation's detail
/// (`supervisor::violation_of`: the call, then the reason).
pub(crate) const SPARES_SPENT_DETAIL: &str = "(SparesSpent)";

/// Why a new entry past the session's spares gets no flag.
pub(crate) const SPARES_SPENT: &str = "a new entry in a directory whose own entries are protected comes from the spares vetto grants before the sandbox starts, and this session used them all; what is there when the session starts is granted whole, so make it before the session (mkdir -p, touch)";

/// Why a path with a random part gets no flag.
pub(crate) const RANDOM_NAME: &str = "the name holds a random part (made anew each run): a grant of it would never match the next run, and its directory is not one to grant whole";

/// The directory above the first component of `path` that holds a random
/// part ([`random_name`]) and does not exist (a name the job made up and
/// was refused, or removed): `None` when none does. A directory that is
/// there (a project in `mktemp -d`'s `/tmp/tmp.X8k2Jd9q`, the home of a
/// CI runner) is a place, not a name of this run.
pub(crate) fn before_random_part(path: &Path) -> Option<&Path> {
    path.ancestors()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find(|a| {
            a.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(random_name)
                && std::fs::symlink_metadata(a).is_err()
        })
        .and_then(Path::parent)
}

/// Whether a file name holds a part a program made up for this run: a
/// number of four digits or more beside other words (a process id, a
/// time: `x.tmp.48213`, `wrap-4321-…`, but not `1000` alone), or a run
/// of six or more letters and digits that switches between them at least
/// three times (`a8f3k2`, a hex or base-36 id; not `sha256`, `x86_64`,
/// `python311`).
pub(crate) fn random_name(name: &str) -> bool {
    let words: Vec<&str> = name
        .split(['.', '-', '_', '+', '~', '#'])
        .filter(|w| !w.is_empty())
        .collect();
    let several = words.len() > 1;
    words.iter().any(|w| {
        let number = w.bytes().all(|b| b.is_ascii_digit());
        let switches = w
            .as_bytes()
            .windows(2)
            .filter(|p| {
                let class = |b: u8| (b.is_ascii_digit(), b.is_ascii_alphabetic());
                class(p[0]) != class(p[1])
            })
            .count();
        (several && number && w.len() >= 4)
            || (w.len() >= 6 && w.bytes().all(|b| b.is_ascii_alphanumeric()) && switches >= 3)
    })
}

/// A path as a policy would write it: `${PROJECT}/…`, `~/…`, or absolute.
pub(crate) fn written(path: &Path, roots: &Roots) -> String {
    let rel = |root: &Option<PathBuf>| root.as_ref().and_then(|r| path.strip_prefix(r).ok());
    let s = match (rel(&roots.project), rel(&roots.home)) {
        (Some(p), _) if p.as_os_str().is_empty() => "${PROJECT}".to_string(),
        (Some(p), _) => format!("${{PROJECT}}/{}", p.display()),
        (None, Some(h)) if h.as_os_str().is_empty() => "~".to_string(),
        (None, Some(h)) => format!("~/{}", h.display()),
        _ => path.display().to_string(),
    };
    toml_basic(&s)
}

/// The inside of a TOML basic string naming the same text: `\\` and `"`
/// escaped, and every character [`crate::text::escape`] would show (a
/// control, a line break, a bidirectional override) as `\\uXXXX` — valid
/// TOML for the very same path, and one line on the terminal that prints it.
pub(crate) fn toml_basic(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if crate::text::needs_escape(c) => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The `[network] allow` entries with their comments: a name seen on
/// exactly ports 80 and 443 as the bare name, every other port named.
fn allow_entries(needs: &Needs) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, ports) in &needs.names {
        let seen: Vec<u16> = ports.keys().copied().collect();
        let times = |ps: &[u16]| -> (u64, String) {
            let n = ps.iter().filter_map(|p| ports.get(p)).map(|e| e.0).sum();
            let who = ps
                .iter()
                .find_map(|p| ports.get(p))
                .map(|e| e.1.clone())
                .unwrap_or_default();
            (n, who)
        };
        if seen == [80, 443] {
            let (n, who) = times(&seen);
            out.push((
                name.clone(),
                format!("×{n}, by {}", crate::text::name(&who)),
            ));
            continue;
        }
        for p in seen {
            let (n, who) = times(&[p]);
            out.push((
                format!("{name}:{p}"),
                format!("×{n}, by {}", crate::text::name(&who)),
            ));
        }
    }
    for (rule, (n, who, class)) in &needs.addrs {
        let what = match class {
            Some(c) => format!("an address without a name ({c} address): an ip rule"),
            None => "an address without a name: an ip rule".to_string(),
        };
        out.push((
            rule.clone(),
            format!("{what}, ×{n}, by {}", crate::text::name(who)),
        ));
    }
    out
}

fn render(needs: &Needs, sessions: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Suggested by `vetto policy suggest` from {sessions} session log(s).\n\
         # Review every line: each one widens what a job (and its dependencies) may do."
    );
    for fit in needs.presets.values() {
        let why = match fit.marker {
            Some(m) => format!("the project has {m} and the command is {}", fit.command),
            None => format!("the command is {}", fit.command),
        };
        let _ = writeln!(
            out,
            "# The `{}` preset fits ({why}): it allows what that toolchain needs.",
            fit.preset
        );
    }
    if !needs.used.is_empty() {
        let used: Vec<&str> = needs.used.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "# In force in the session(s): {} (a policy that names its presets gets no other).",
            used.join(", ")
        );
    }
    let mut extends: Vec<String> = vec!["\"default\"".to_string()];
    for p in needs
        .used
        .iter()
        .map(String::as_str)
        .chain(needs.presets.keys().copied())
    {
        let quoted = format!("\"{p}\"");
        if !extends.contains(&quoted) {
            extends.push(quoted);
        }
    }
    let _ = writeln!(out, "extends = [{}]", extends.join(", "));
    if !needs.write.is_empty() || !needs.caches.is_empty() {
        let _ = writeln!(out, "\n[filesystem]");
    }
    if !needs.write.is_empty() {
        let _ = writeln!(out, "write = [");
        for (path, (count, who)) in &needs.write {
            let who = crate::text::name(who);
            let _ = writeln!(out, "    \"{path}\", # ×{count}, by {who}");
        }
        let _ = writeln!(out, "]");
    }
    if !needs.caches.is_empty() {
        let _ = writeln!(
            out,
            "# Writes denied in the host's own caches: a later build outside the sandbox\n\
             # would trust what a job put there, so each tool gets a vetto-owned cache instead.\n\
             caches = ["
        );
        for (cache, (count, who)) in &needs.caches {
            let who = crate::text::name(who);
            let _ = writeln!(out, "    \"{cache}\", # ×{count}, by {who}");
        }
        let _ = writeln!(out, "]");
    }
    let allow = allow_entries(needs);
    match (&needs.network, allow.is_empty()) {
        (Some((count, who)), true) => {
            let _ = writeln!(
                out,
                "\n[network]\n# ×{count}, by {}: no destination was recorded by name (a UDP or raw socket, or a run before audits went through the proxy)\nmode = \"host\"",
                crate::text::name(who)
            );
        }
        (network, false) => {
            let _ = writeln!(
                out,
                "\n[network]\n# What the job contacted. A rule without a port allows 80 and 443.\nallow = ["
            );
            for (entry, note) in &allow {
                let _ = writeln!(out, "    \"{}\", # {note}", toml_basic(entry));
            }
            let _ = writeln!(out, "]");
            if let Some((count, _)) = network {
                let _ = writeln!(
                    out,
                    "# ×{count} other network attempt(s) (a UDP or raw socket) have no allow entry: filtered egress carries TCP"
                );
            }
        }
        (None, true) => {}
    }
    if !needs.sockets.is_empty() {
        if needs.network.is_none() && allow.is_empty() {
            let _ = writeln!(out, "\n[network]");
        }
        let _ = writeln!(
            out,
            "# Unix sockets the job connected to: each is whatever its server does for a client.\nunix = ["
        );
        for (path, (count, who)) in &needs.sockets {
            let who = crate::text::name(who);
            let _ = writeln!(out, "    \"{path}\", # ×{count}, by {who}");
        }
        let _ = writeln!(out, "]");
    }
    secrets_section(&mut out, needs, allow.is_empty() && needs.network.is_some());
    if !needs.refused.is_empty() {
        let _ = writeln!(out, "\n# Seen, and deliberately not suggested:");
        for (what, count) in needs.refused.iter().take(MAX_REFUSED) {
            let _ = writeln!(out, "#   {} (×{count})", crate::text::escape(what));
        }
        let rest = needs.refused.len().saturating_sub(MAX_REFUSED);
        if rest > 0 {
            let _ = writeln!(out, "#   … and {rest} more (see the session logs)");
        }
    }
    out
}

/// The `[secrets]` part of [`render`]; `host_mode`: the suggestion says
/// `mode = "host"`, which a `[secrets]` table may not sit beside.
fn secrets_section(out: &mut String, needs: &Needs, host_mode: bool) {
    // Names are the job's environment's: only a valid TOML bare key is
    // written as one (the rest cannot be a secret's name anyway).
    let bare = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let entries: Vec<(&String, &BTreeSet<String>)> =
        needs.secrets.iter().filter(|(n, _)| bare(n)).collect();
    if !entries.is_empty() {
        let lead = if host_mode { "# " } else { "" };
        let _ = writeln!(
            out,
            "\n# Withheld from the job, and the job contacted the hosts they are for. With\n\
             # these the job holds placeholders, and vetto's proxy puts each value in HTTPS\n\
             # requests to those hosts only (docs/network.md)."
        );
        if host_mode {
            let _ = writeln!(
                out,
                "# (Commented out: `[secrets]` needs filtered egress, not mode = \"host\".)"
            );
        }
        let _ = writeln!(out, "{lead}[secrets]");
        for (name, hosts) in entries {
            let list: Vec<String> = hosts
                .iter()
                .map(|h| format!("\"{}\"", toml_basic(h)))
                .collect();
            let _ = writeln!(out, "{lead}{name} = [{}]", list.join(", "));
        }
    }
    let rest: Vec<&String> = needs.withheld.iter().filter(|n| bare(n)).collect();
    if !rest.is_empty() {
        let _ = writeln!(
            out,
            "\n# Withheld from the job, with no host known for them: if the job needs one,\n\
             # give it as a placeholder for the host it is for (`--secret NAME@HOST`):"
        );
        for name in rest.iter().take(MAX_REFUSED) {
            let _ = writeln!(out, "#   {name}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn suggests_writable_parents_and_never_persistence() {
        let log = SessionLog::parse(&fixture::to_jsonl(&fixture::attack_session()));
        let toml = suggest(&[log]);
        assert!(toml.starts_with("# Suggested by"), "{toml}");
        assert!(toml.contains("extends = [\"default\"]"), "{toml}");
        assert!(
            !toml.contains("\".git/hooks") && !toml.contains("/.git/hooks\","),
            "{toml}"
        );
        // The result is a valid policy.
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
    }

    /// The egress session audited: what was denied is only observed.
    fn audited_egress() -> Vec<crate::events::Event> {
        use crate::events::{Action, ConnDecision, Event};
        let mut events = fixture::egress_session();
        for e in &mut events {
            match e {
                Event::SessionStart(s) => s.audit = true,
                Event::Connection(c) if c.decision == ConnDecision::Denied => {
                    c.decision = ConnDecision::Observed;
                }
                Event::Violation(v) => v.action = Action::Observed,
                _ => {}
            }
        }
        events
    }

    fn allow_list(toml: &str) -> Vec<String> {
        let parsed: toml::Table = toml::from_str(toml).unwrap_or_default();
        parsed
            .get("network")
            .and_then(|n| n.get("allow"))
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An audited run names what the job contacted: the allowed registry,
    /// the git host and the host the postinstall reached for — by name —
    /// and never the deny-listed host, the metadata address, a name lookup
    /// or a name that is no host name.
    #[test]
    fn suggests_contacted_hosts_by_name_never_deny_listed_or_metadata() {
        let toml = suggest(&[SessionLog::parse(&fixture::to_jsonl(&audited_egress()))]);
        assert_eq!(
            allow_list(&toml),
            [
                "exfil.evil.test:443",
                "github.com:443",
                "registry.npmjs.org:443"
            ],
            "{toml}"
        );
        assert!(!toml.contains("mode = \"host\""), "{toml}");
        for line in toml.lines().filter(|l| !l.trim_start().starts_with('#')) {
            for never in ["pastebin", "169.254.169.254", "canary", "<img"] {
                assert!(!line.contains(never), "{never} suggested:\n{toml}");
            }
        }
        assert!(
            toml.contains("pastebin.com:443 — on the deny list: not suggested"),
            "{toml}"
        );
        assert!(toml.contains("×5, by /usr/bin/npm"), "{toml}");
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
    }

    /// A credential the job was denied, for a host it contacted, is
    /// suggested as a placeholder for that host (never as a pass-through);
    /// one with no known host is listed; the CI command-file variables and
    /// names that are no TOML key are neither.
    #[test]
    fn a_withheld_token_for_a_contacted_host_becomes_a_secret_for_that_host_only() {
        use crate::events::Event;
        let mut events = audited_egress();
        for e in &mut events {
            if let Event::SessionStart(s) = e {
                s.withheld_env = ["GITHUB_ENV", "NPM_TOKEN", "GITHUB_TOKEN", "X\"]\n[env]"]
                    .map(String::from)
                    .to_vec();
            }
        }
        let toml = suggest(&[SessionLog::parse(&fixture::to_jsonl(&events))]);
        let parsed: toml::Table = toml::from_str(&toml).unwrap_or_default();
        let secrets = parsed.get("secrets").and_then(|s| s.as_table());
        assert_eq!(
            secrets.map(|t| t.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["GITHUB_TOKEN".to_owned()]),
            "{toml}"
        );
        assert_eq!(
            secrets
                .and_then(|t| t.get("GITHUB_TOKEN"))
                .map(ToString::to_string),
            Some("[\"github.com\"]".to_owned()),
            "only the contacted host of the recipe's: {toml}"
        );
        assert!(toml.contains("#   NPM_TOKEN"), "{toml}");
        assert!(!toml.contains("GITHUB_ENV"), "{toml}");
        assert!(!toml.contains("[env]"), "{toml}");
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
    }

    /// Ten thousand refused names give a bounded list of comments.
    #[test]
    fn a_storm_of_refused_names_is_listed_bounded() {
        use crate::events::{ConnReason, Event};
        let mut events = audited_egress();
        let base = fixture::egress_connections().remove(0);
        for i in 0..10_000 {
            let mut c = base.clone();
            c.host = Some(format!("x{i}.deny.test"));
            c.reason = ConnReason::SniMismatch;
            events.insert(1, Event::Connection(Box::new(c)));
        }
        let toml = suggest(&[SessionLog::parse(&fixture::to_jsonl(&events))]);
        assert!(toml.lines().count() < 400, "{} lines", toml.lines().count());
        // The storm and the fixture's own four: a deny-listed host, the
        // metadata address, a name lookup, a name that is no host name.
        assert!(
            toml.contains(&format!("… and {} more", 10_004 - MAX_REFUSED)),
            "{toml}"
        );
    }

    /// A connection to an address without a name is an ip rule, said so
    /// in a comment; the resolver's address and a DNS-stub address are
    /// never an entry, and a name
    /// seen on both web ports is one bare entry.
    #[test]
    fn addresses_become_ip_rules_and_resolvers_nothing() {
        use crate::events::{ConnDecision, ConnReason, ConnVia, Event};
        let mut events = audited_egress();
        let base = fixture::egress_connections().remove(0);
        let mut add = |host: Option<&str>, addr: &str, port: u16| {
            let mut c = base.clone();
            c.host = host.map(str::to_string);
            c.addr = Some(addr.into());
            c.port = port;
            c.decision = ConnDecision::Observed;
            c.reason = ConnReason::NotAllowed;
            c.via = ConnVia::Redirect;
            events.insert(1, Event::Connection(Box::new(c)));
        };
        add(None, "10.1.2.3", 5432);
        add(None, "8.8.8.8", 53);
        add(Some("registry.npmjs.org"), "104.16.0.1", 80);
        let mut stub = base.clone();
        stub.host = None;
        stub.addr = Some("127.77.0.9".into());
        stub.via = ConnVia::Transparent;
        events.insert(1, Event::Connection(Box::new(stub)));
        let toml = suggest(&[SessionLog::parse(&fixture::to_jsonl(&events))]);
        let allow = allow_list(&toml);
        assert!(allow.contains(&"10.1.2.3:5432".to_string()), "{toml}");
        assert!(allow.contains(&"registry.npmjs.org".to_string()), "{toml}");
        assert!(!allow.iter().any(|a| a.contains("8.8.8.8")), "{toml}");
        assert!(!allow.iter().any(|a| a.contains("127.77.")), "{toml}");
        assert!(
            toml.contains(
                "\"10.1.2.3:5432\", # an address without a name (private address): an ip rule"
            ),
            "{toml}"
        );
        assert!(toml.contains("8.8.8.8:53 — a resolver"), "{toml}");
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
    }

    /// A directory name that, printed raw, would end the TOML string and
    /// add a table, and drive the terminal and the CI log.
    const HOSTILE_DIR: &str =
        "/work/app/d\"\n]\n[network]\nmode = \"host\"\n#\x1b]0;x\x07\r::error::e\u{202e}";

    #[test]
    fn hostile_paths_in_a_session_log_cannot_break_out_of_the_suggestion() {
        let mut events = fixture::attack_session();
        for e in &mut events {
            if let crate::events::Event::Violation(v) = e {
                if let Target::Path { path } = &mut v.target {
                    *path = PathBuf::from(format!("{HOSTILE_DIR}/f"));
                }
                v.process.exe = PathBuf::from("/bin/sh\n::add-mask::X\x1b[2J");
                v.attribution = None;
            }
        }
        let toml = suggest(&[SessionLog::parse(&fixture::to_jsonl(&events))]);
        assert!(
            !toml
                .chars()
                .any(|c| !matches!(c, '\n' | '\\') && crate::text::needs_escape(c)),
            "{toml:?}"
        );
        // No line of the name's own: the one `[network]` is the fixture's
        // network finding.
        assert!(toml.lines().all(|l| !l.starts_with("::")), "{toml}");
        assert_eq!(
            toml.lines().filter(|l| *l == "[network]").count(),
            1,
            "{toml}"
        );
        // Still a valid policy, naming the very same directory.
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
        let parsed: toml::Table = toml::from_str(&toml).unwrap_or_default();
        let write: Vec<String> = parsed
            .get("filesystem")
            .and_then(|f| f.get("write"))
            .and_then(|w| w.as_array())
            .map(|w| {
                w.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        assert!(write.iter().any(|w| w == HOSTILE_DIR), "{write:?}\n{toml}");
    }

    /// A denied write into a protected path (a hook manager's directory, a
    /// masked credential directory) is never turned into a writable rule:
    /// not the path, not its directory.
    /// Issue P10, item 5: a job that made `~/.cargo` (absent before the
    /// audited run) is never proposed `write = ["~/.cargo"]`, nor any tool
    /// home; its own subdirectories may be.
    #[test]
    fn a_tool_home_the_job_made_is_never_proposed() {
        let home = Path::new("/h");
        for tool in [".cargo", "go", ".local", ".config"] {
            let path = home.join(tool);
            assert!(write_grant(&path, Some(home), &[]).is_err(), "{tool}");
        }
        assert_eq!(
            write_grant(&home.join(".cargo/registry/index"), Some(home), &[]),
            Ok(home.join(".cargo/registry"))
        );
    }

    /// A `mkdir -p ~/…` at FULL whose view hid the home is denied at the
    /// home itself: neither it nor its parent (every user's home) is
    /// proposed.
    #[test]
    fn a_denied_write_of_the_home_itself_proposes_nothing() {
        let home = Path::new("/home/u");
        assert!(write_grant(home, Some(home), &[]).is_err());
    }

    /// Claude Code's `~/.claude.json.tmp.N.RANDOM`, nyc's
    /// `~/.node-spawn-wrap-PID-RANDOM`: each run names another file, so a
    /// grant of the one seen never converges; in the home (not granted
    /// whole) nothing is proposed, in a directory that may be granted,
    /// that directory.
    #[test]
    fn a_name_with_a_random_part_is_never_proposed() {
        let home = Path::new("/home/u");
        for p in [
            "/home/u/.claude.json.tmp.12.a8f3k2q9",
            "/home/u/.claude.json.tmp.3.1733561234567",
            "/home/u/.node-spawn-wrap-4321-9f1c2e7a0b3d",
            "/home/u/.node-spawn-wrap-4321-9f1c2e7a0b3d/node",
        ] {
            assert_eq!(
                write_grant(Path::new(p), Some(home), &[]),
                Err(RANDOM_NAME),
                "{p}"
            );
        }
        assert_eq!(
            write_grant(
                Path::new("/home/u/work/out/tmp-48213-x9k2m4/part"),
                Some(home),
                &[]
            ),
            Ok(PathBuf::from("/home/u/work/out"))
        );
        for stable in [
            "sha256",
            "x86_64-linux-gnu",
            "python311",
            "1000",
            "id_ed25519",
            "node-v20.11.0",
            "libssl.so.1.1",
            "base64",
            ".claude.json",
            "Cargo.lock",
        ] {
            assert!(!random_name(stable), "{stable}");
        }
        // Not dumpable: no path was read, and none is proposed.
        assert!(write_grant(Path::new(""), Some(home), &[]).is_err());
    }

    /// Codex at FS-ONLY makes `/tmp/codex-daemon-UID` for its daemon's
    /// socket: `--allow-write /tmp` was proposed, which hands the job the
    /// sockets of every program in the shared /tmp (an unsandboxed Codex
    /// daemon's among them). Nothing in /tmp is proposed.
    #[test]
    fn nothing_in_the_shared_tmp_is_proposed() {
        let home = Path::new("/home/u");
        for p in ["/tmp/codex-daemon-1001", "/tmp", "/tmp/x.sock"] {
            assert!(write_grant(Path::new(p), Some(home), &[]).is_err(), "{p}");
        }
        assert!(write_grant(Path::new("/tmp/build/out.o"), Some(home), &[]).is_ok());
    }

    #[test]
    fn never_suggests_writing_a_protected_or_masked_path() {
        let mut events = fixture::attack_session();
        let start = match events.first_mut() {
            Some(crate::events::Event::SessionStart(s)) => s,
            _ => unreachable!("the fixture starts with the start"),
        };
        start.policy.rules = vec![
            format!(
                "protect {}/.husky  (policies/default.toml:70)",
                fixture::PROJECT
            ),
            format!("deny    {}/.ssh  (policies/default.toml:30)", fixture::HOME),
        ];
        let viol = |path: String| {
            let mut v = fixture::attack_violations()
                .into_iter()
                .find(|v| v.rule == RuleId::FsWriteDenied)
                .unwrap_or_else(|| unreachable!("the fixture has write denials"));
            v.target = Target::Path { path: path.into() };
            crate::events::Event::Violation(Box::new(v))
        };
        let extra = [
            viol(format!("{}/.husky/pre-commit", fixture::PROJECT)),
            viol(format!("{}/.ssh/authorized_keys", fixture::HOME)),
            viol(format!("{}/sub/.git/hooks/post-checkout", fixture::PROJECT)),
            viol(format!("{}/tool/cache.db", fixture::HOME)),
        ];
        events.splice(1..1, extra);
        let toml = suggest(&[SessionLog::parse(&fixture::to_jsonl(&events))]);
        let rules: Vec<&str> = toml
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        let rules = rules.join("\n");
        for bad in [".husky", ".ssh", "hooks"] {
            assert!(!rules.contains(bad), "{bad} suggested:\n{toml}");
        }
        assert!(rules.contains("\"~/tool\""), "{toml}");
        assert!(
            toml.contains("a protected or masked path of the policy: not suggested"),
            "{toml}"
        );
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
    }

    /// A registry whose name resolved to an internal address is not
    /// suggested (an internal address in a policy is the reader's call),
    /// but the comment names the pin that would let that name alone
    /// through — never an address rule.
    #[test]
    fn a_name_resolved_to_an_internal_address_is_named_with_the_rule_that_lets_it_through() {
        let mut events = fixture::egress_session();
        let end = events.len() - 1;
        events.insert(
            end,
            Event::Connection(Box::new(fixture::refused_connection(
                Some("mirror.example.test"),
                443,
                Some("203.0.113.80"),
                crate::events::ConnReason::PrivateAddress,
            ))),
        );
        let log = SessionLog::parse(&fixture::to_jsonl(&events));
        let toml = suggest_with(&[log], |_, _| false);
        assert!(
            toml.contains("#   mirror.example.test:443 — its name resolved to the internal address 203.0.113.80: `resolve = [\"mirror.example.test:203.0.113.80\"]` pins it, for this name alone, if that is intended: not suggested"),
            "{toml}"
        );
        assert!(!toml.contains("203.0.113.80:443"), "{toml}");
    }

    /// The cargo and npm sessions of issue 12: denied writes in a tool's
    /// host cache, next to its `bin/`, in `node_modules/.bin`, in a policy
    /// file, and a connection — suggested as the vetto-owned cache, the
    /// host and the presets that fit, never `~/.cargo`, its registry or a
    /// `bin/`.
    /// `vetto ci --audit -- pip install …` in a project with a
    /// `requirements.txt`: vetto chose the pip preset for the job. The
    /// suggested policy names its presets (`extends`), so a policy that
    /// left pip out would get none and refuse what the audit allowed.
    #[test]
    fn the_presets_a_session_used_are_kept() {
        let mut events = fixture::attack_session();
        if let Some(crate::events::Event::SessionStart(s)) = events.first_mut() {
            s.command = vec!["pip".into(), "install".into(), "-r".into(), "r.txt".into()];
            for name in ["preset:pip", "preset:python", "preset:no-such-preset"] {
                s.policy.sources.push(crate::events::PolicySource {
                    name: name.into(),
                    digest: "sha256:4444".into(),
                });
            }
        }
        let log = SessionLog::parse(&fixture::to_jsonl(&events));
        let toml = suggest_with(&[log], |_, m| m == "requirements.txt");
        let extends = toml
            .lines()
            .find(|l| l.starts_with("extends = "))
            .unwrap_or_default();
        assert_eq!(
            extends, r#"extends = ["default", "pip", "python"]"#,
            "{toml}"
        );
    }

    #[test]
    fn suggestion_snapshot_for_a_cargo_and_npm_session() {
        let mut events = fixture::attack_session();
        if let Some(crate::events::Event::SessionStart(s)) = events.first_mut() {
            s.command = vec!["cargo".into(), "build".into()];
            s.policy.rules = vec![format!(
                "protect {}/vetto.toml  (built-in rules)",
                fixture::PROJECT
            )];
        }
        let viol = |path: String| {
            let mut v = fixture::attack_violations()
                .into_iter()
                .find(|v| v.rule == RuleId::FsWriteDenied)
                .unwrap_or_else(|| unreachable!("the fixture has write denials"));
            v.target = Target::Path { path: path.into() };
            crate::events::Event::Violation(Box::new(v))
        };
        let home = fixture::HOME;
        let project = fixture::PROJECT;
        events.splice(
            1..1,
            [
                viol(format!("{home}/.cargo/registry")),
                viol(format!("{home}/.cargo/registry/cache/x/serde.crate")),
                viol(format!("{home}/.cargo/bin/cargo")),
                viol(format!("{home}/.local/bin/pytest")),
                viol(format!("{project}/node_modules/.bin/tsc")),
                viol(format!("{project}/vetto.toml")),
            ],
        );
        let log = SessionLog::parse(&fixture::to_jsonl(&events));
        let toml = suggest_with(&[log], |_, m| m == "Cargo.toml");
        let rules: String = toml
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(|l| l.split(" #").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for never in ["\"~/.cargo\"", "/bin", ".bin", "vetto.toml\"", ".bashrc"] {
            assert!(!rules.contains(never), "{never} suggested:\n{toml}");
        }
        // A host cache is never made writable: the vetto-owned one is
        // suggested (a planted build.rs in ~/.cargo/registry/src would
        // run in the next build outside the sandbox).
        assert!(!rules.contains("~/.cargo/registry"), "{toml}");
        assert!(rules.contains("caches = [\n    \"cargo\",\n]"), "{toml}");
        assert!(crate::policy::check_text(&toml).is_ok(), "{toml}");
        insta::assert_snapshot!("suggest_cargo_npm", toml);
    }
}
