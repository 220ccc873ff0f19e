//! `Policy → SBPL profile + parameters` for the macOS Seatbelt backend.
//! Pure, and compiled on every OS, so the profile is unit- and
//! snapshot-tested on Linux; applying it (`sandbox_init_with_parameters`)
//! lives under `src/sandbox/macos/`.
//!
//! **No path is ever spliced into the profile text.** Every path is a
//! parameter (`(param "P3")`), handed to the sandbox compiler as a C string
//! beside the text, so a path with quotes, parentheses, backslashes or
//! newlines cannot change what the profile means: the text depends only on
//! the *shape* of the policy (how many rules of which kind, in which
//! order), never on the bytes of a path. The only literals are vetto's own:
//! operation names and Mach service names, which still pass
//! [`sbpl_string`], and the egress proxy's port, a `u16` written in decimal
//! by [`proxy_rule`]. No host name of the policy reaches the profile: names
//! are the proxy's to decide.
//!
//! **Filtered egress** (`[network] mode = "allow"`): the job may connect
//! to the egress proxy's port on loopback and nowhere else (no resolver
//! either: names go to the proxy through the proxy variables). The port is
//! known only once the supervisor's proxy listens, after the plan is made,
//! so the profile is planned without it ([`SeatbeltProfile::needs_proxy_port`])
//! and [`SeatbeltProfile::allow_proxy_port`] appends the one rule; the
//! stage refuses a profile still waiting for it.
//!
//! **Last match wins** in SBPL. vetto's own rule ("the rule with the
//! longest path that covers it decides; ties go to the stronger
//! restriction", [`crate::policy::paths::decide`]) is kept by emitting the
//! rules shortest path first, weaker before stronger on a tie, each rule
//! saying both what it does to reads and to writes.
//!
//! **Weaker than Linux:** reads are broad. dyld, the shared cache and the
//! frameworks a toolchain loads live in many places, and path-fragmented
//! read rules make dyld abort; so every path that no rule covers is
//! readable, and the masked secrets (the policy's `deny` rules, plus the
//! macOS stores below) are denied explicitly. Writes are deny-by-default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::fs::{EntryKind, FsView};
use crate::policy::{Access, NetPolicy, Policy};

/// What the profile needs beyond the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatbeltContext {
    /// `$HOME`, for the macOS secret stores masked whatever the policy says.
    pub home: Option<PathBuf>,
    /// Where vetto writes the session's reports: read-only to the job.
    pub report_dir: Option<PathBuf>,
}

/// The profile text and the parameters it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatbeltProfile {
    pub text: String,
    /// `(name, value)`: each value is a path's bytes, passed as a C string.
    pub params: Vec<(String, Vec<u8>)>,
    /// What each rule compiled to, for `vetto doctor` and `policy explain`.
    pub compiled: Vec<CompiledRule>,
    /// Filtered egress whose proxy port is not in the text yet: until
    /// [`SeatbeltProfile::allow_proxy_port`] the job has no network at
    /// all, and the stage refuses to apply the profile.
    #[serde(default)]
    pub needs_proxy_port: bool,
}

/// The one rule filtered egress adds: outbound TCP connections to the
/// egress proxy's port on loopback (`localhost` is 127.0.0.1 and ::1 to
/// Seatbelt; the proxy listens on both). TCP, not `ip`: a datagram to that
/// port would reach whatever else on the host holds it for UDP. The port
/// is a `u16` rendered in decimal: no text of the policy or of a path can
/// reach it.
pub fn proxy_rule(port: u16) -> String {
    format!("(allow network-outbound (remote tcp \"localhost:{port}\"))")
}

impl SeatbeltProfile {
    /// Complete a filtered-egress profile with the proxy's loopback port.
    /// Appended last, so it is the last match for a connection to that
    /// port and changes nothing else (last match wins, and only it allows).
    pub fn allow_proxy_port(&mut self, port: u16) -> Result<(), SeatbeltError> {
        if !self.needs_proxy_port {
            return Err(SeatbeltError::NoProxyWanted);
        }
        if port == 0 {
            return Err(SeatbeltError::BadProxyPort);
        }
        let rule = proxy_rule(port);
        self.text
            .push_str(";; The egress proxy's port on loopback; nothing else of the network.\n");
        self.text.push_str(&rule);
        self.text.push('\n');
        self.compiled.push(CompiledRule {
            rule: "network allow: only the egress proxy on loopback".into(),
            sbpl: vec![rule],
        });
        self.needs_proxy_port = false;
        Ok(())
    }
}

/// One rule of the policy (or of vetto's own) and the SBPL it became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompiledRule {
    /// The rule as the policy says it (`deny ~/.ssh (policies/default.toml:36:5)`).
    pub rule: String,
    pub sbpl: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeatbeltError {
    /// A C string parameter cannot hold a NUL byte (no real path has one).
    #[error("the path {path:?} contains a NUL byte and cannot be passed to Seatbelt")]
    NulInPath { path: PathBuf },
    #[error("the profile does not ask for the egress proxy (its network is not filtered)")]
    NoProxyWanted,
    #[error("the egress proxy has no port to allow")]
    BadProxyPort,
    #[error("{0:?} cannot be written as an SBPL string (control character)")]
    BadLiteral(String),
}

/// The Mach services ordinary toolchains (compilers, interpreters, git,
/// package managers) look up: logging, name and user lookup, preferences,
/// certificate trust, and the notification centre. Everything else
/// (pasteboard, window server, launch services, keychain agent…) is denied.
pub const MACH_SERVICES: &[&str] = &[
    "com.apple.system.logger",
    "com.apple.system.notification_center",
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.opendirectoryd.membership",
    "com.apple.system.DirectoryService.libinfo_v1",
    "com.apple.cfprefsd.daemon",
    "com.apple.cfprefsd.agent",
    "com.apple.trustd",
    "com.apple.trustd.agent",
    "com.apple.logd",
    "com.apple.diagnosticd",
];

/// Looked up only with `--net host`: the resolver and network configuration.
pub const MACH_SERVICES_NET_HOST: &[&str] = &[
    "com.apple.dnssd.service",
    "com.apple.SystemConfiguration.configd",
    "com.apple.SystemConfiguration.DNSConfiguration",
    "com.apple.networkd",
];

/// Secret stores under `$HOME` that are masked on macOS whatever the policy
/// says: keychains, browser profiles and cookie jars.
pub const MACOS_HOME_MASKS: &[&str] = &[
    "Library/Keychains",
    "Library/Cookies",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Chromium",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Safari",
    "Library/Containers/com.apple.Safari",
];

/// Any path whose last component is `.env` or `.env.*`: dotenv files made
/// after the policy was loaded are masked too. Path-independent, so a
/// literal.
const DOTENV_REGEX: &str = r#"(regex #"/\.env(\.[^/]*)?$")"#;

/// Execution of set-user-ID and set-group-ID files (mode bits 04000 and
/// 02000), which the job would otherwise run with their owner's rights.
const SETID_EXEC: [&str; 2] = [
    "(deny process-exec* (file-mode #o4000))",
    "(deny process-exec* (file-mode #o2000))",
];

/// An SBPL string literal: `"` and `\` escaped; control characters refused
/// (vetto never needs one, and a newline must not reach the text).
pub fn sbpl_string(s: &str) -> Result<String, SeatbeltError> {
    if s.chars().any(char::is_control) {
        return Err(SeatbeltError::BadLiteral(s.to_string()));
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(out)
}

/// The parameters and the text that names them.
#[derive(Default)]
struct Params {
    list: Vec<(String, Vec<u8>)>,
}

impl Params {
    /// A new parameter for `path`; returns `(param "Pn")`.
    fn path(&mut self, path: &Path) -> Result<String, SeatbeltError> {
        let bytes = path.as_os_str().as_encoded_bytes().to_vec();
        if bytes.contains(&0) {
            return Err(SeatbeltError::NulInPath {
                path: path.to_path_buf(),
            });
        }
        let name = format!("P{}", self.list.len());
        let expr = format!("(param {})", sbpl_string(&name)?);
        self.list.push((name, bytes));
        Ok(expr)
    }
}

/// One path rule, as SBPL sees it.
struct PathRule {
    path: PathBuf,
    access: Access,
    describe: String,
}

fn statements(access: Access, target: &str) -> Vec<String> {
    let sub = format!("(subpath {target})");
    match access {
        Access::Read | Access::Protect => vec![
            format!("(allow file-read* {sub})"),
            format!("(deny file-write* {sub})"),
        ],
        Access::Write => vec![
            format!("(allow file-read* {sub})"),
            format!("(allow file-write* {sub})"),
        ],
        Access::Deny => vec![format!("(deny file-read* file-write* {sub})")],
    }
}

/// Build the profile. Pure: the same policy and context give the same
/// text and parameters.
pub fn profile(policy: &Policy, ctx: &SeatbeltContext) -> Result<SeatbeltProfile, SeatbeltError> {
    let mut rules: Vec<PathRule> = policy
        .fs
        .iter()
        .map(|r| PathRule {
            path: r.path.clone(),
            access: r.access,
            describe: format!("{} {}", r.access.as_str(), r.origin),
        })
        .collect();
    rules.push(PathRule {
        path: policy.session_tmp.clone(),
        access: Access::Write,
        describe: "write the session's temporary directory (TMPDIR)".into(),
    });
    if let Some(file) = &policy.policy_file {
        rules.push(PathRule {
            path: file.clone(),
            access: Access::Protect,
            describe: "protect the policy file in use".into(),
        });
    }
    if let Some(dir) = &ctx.report_dir {
        rules.push(PathRule {
            path: dir.clone(),
            access: Access::Protect,
            describe: "protect the report directory".into(),
        });
    }
    if let Some(home) = &ctx.home {
        for m in MACOS_HOME_MASKS {
            rules.push(PathRule {
                path: home.join(m),
                access: Access::Deny,
                describe: format!("deny ~/{m} (macOS secret store, built in)"),
            });
        }
    }
    // Shortest path first, weaker first on a tie: under last-match-wins
    // the longest covering path decides, and the stronger rule on a tie.
    // Equal rules keep their order (a stable sort).
    rules.sort_by(|a, b| {
        let (la, lb) = (a.path.as_os_str().len(), b.path.as_os_str().len());
        la.cmp(&lb).then(a.access.cmp(&b.access))
    });

    let mut params = Params::default();
    let mut compiled = Vec::new();
    let mut text = String::from(
        ";; vetto: generated from the policy; paths are parameters, never text.\n\
         (version 1)\n\
         (deny default)\n\
         ;; Processes of the job, and only them.\n\
         (allow process-fork)\n\
         (allow process-exec*)\n\
         (allow signal (target same-sandbox))\n\
         (allow process-info* (target same-sandbox))\n\
         (allow sysctl-read)\n\
         (allow pseudo-tty)\n\
         (allow file-ioctl)\n\
         (allow ipc-posix-sem)\n\
         (allow ipc-posix-shm)\n\
         ;; Reads are broad (dyld needs them); secrets are denied below.\n\
         (allow file-read*)\n\
         ;; The policy's path rules, shortest path first (last match wins).\n",
    );
    for r in &rules {
        let target = params.path(&r.path)?;
        let sbpl = statements(r.access, &target);
        for s in &sbpl {
            text.push_str(s);
            text.push('\n');
        }
        compiled.push(CompiledRule {
            rule: r.describe.clone(),
            sbpl,
        });
    }

    let mut fixed = |rule: &str, sbpl: Vec<String>, text: &mut String| {
        for s in &sbpl {
            text.push_str(s);
            text.push('\n');
        }
        compiled.push(CompiledRule {
            rule: rule.to_string(),
            sbpl,
        });
    };
    text.push_str(";; Dotenv files anywhere, including ones made after the policy was read.\n");
    fixed(
        "deny .env and .env.* anywhere (built in)",
        vec![format!("(deny file-read* file-write* {DOTENV_REGEX})")],
        &mut text,
    );
    text.push_str(";; No set-user-ID or set-group-ID programs.\n");
    fixed(
        "no execution of set-user-ID/set-group-ID files (built in)",
        SETID_EXEC.iter().map(|s| s.to_string()).collect(),
        &mut text,
    );

    let mut mach: Vec<&str> = MACH_SERVICES.to_vec();
    if matches!(policy.net, NetPolicy::Host) {
        mach.extend_from_slice(MACH_SERVICES_NET_HOST);
    }
    let mut lookup = String::from("(allow mach-lookup");
    for name in &mach {
        lookup.push_str(&format!("\n  (global-name {})", sbpl_string(name)?));
    }
    lookup.push(')');
    text.push_str(";; Mach services ordinary toolchains need; no others.\n");
    fixed(
        "Mach lookups limited to the toolchain list (built in)",
        vec![lookup],
        &mut text,
    );

    text.push_str(";; Network.\n");
    let (net_rule, mut net) = match &policy.net {
        NetPolicy::Off => ("network off", vec!["(deny network*)".to_string()]),
        NetPolicy::Host => ("network host", vec!["(allow network*)".to_string()]),
        // Completed with the proxy's port by `allow_proxy_port`.
        NetPolicy::Allow { .. } => (
            "network allow: nothing but the egress proxy's loopback port (its rule is added when the proxy listens)",
            vec!["(deny network*)".to_string()],
        ),
    };
    for u in &policy.unix {
        let target = params.path(&u.path)?;
        net.push(format!(
            "(allow network-outbound (remote unix-socket (path-literal {target})))"
        ));
    }
    fixed(net_rule, net, &mut text);

    Ok(SeatbeltProfile {
        text,
        params: params.list,
        compiled,
        needs_proxy_port: matches!(policy.net, NetPolicy::Allow { .. }),
    })
}

/// Symbolic links followed while resolving one path (as the kernel's
/// `MAXSYMLINKS`): a loop ends resolution where it stands.
const MAX_LINKS: usize = 32;

/// The real path Seatbelt matches `path` as: every symbolic link on the
/// way resolved (`/tmp` is `/private/tmp`, `/var` is `/private/var` on
/// macOS), `.` and `..` folded; components that do not exist yet are kept
/// as written. Through [`FsView`], so it is tested with a fake.
pub fn real_path(view: &dyn FsView, path: &Path) -> PathBuf {
    use std::path::Component;
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&name);
        if view.kind(&next) == Some(EntryKind::Symlink)
            && links < MAX_LINKS
            && let Some(target) = view.read_link(&next)
        {
            links += 1;
            if target.is_absolute() {
                out = PathBuf::from("/");
            }
            pending.extend(target.components().rev().filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            }));
            continue;
        }
        out = next;
    }
    out
}

/// `policy` with every path it names as [`real_path`] gives it: Seatbelt
/// compares resolved paths, so a rule for `/tmp/x` written as such would
/// match nothing.
pub fn with_real_paths(policy: &Policy, view: &dyn FsView) -> Policy {
    let real = |p: &Path| real_path(view, p);
    let mut out = policy.clone();
    for r in &mut out.fs {
        r.path = real(&r.path);
    }
    for u in &mut out.unix {
        u.path = real(&u.path);
    }
    out.session_tmp = real(&policy.session_tmp);
    out.project = real(&policy.project);
    out.policy_file = policy.policy_file.as_deref().map(real);
    out
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::policy::{FsRule, Origin, UnixSocket};
    use std::ffi::OsString;

    fn rule(path: impl Into<PathBuf>, access: Access) -> FsRule {
        FsRule {
            path: path.into(),
            access,
            origin: Origin {
                source: "vetto.toml".into(),
                line: 1,
                col: 1,
                written: "x".into(),
            },
        }
    }

    fn policy(project: PathBuf, net: NetPolicy) -> Policy {
        Policy {
            fs: vec![
                rule("/usr", Access::Read),
                rule(project.clone(), Access::Write),
                rule(project.join(".git/hooks"), Access::Protect),
                rule(project.join(".git/config"), Access::Protect),
                rule(project.join(".env"), Access::Deny),
                rule("/Users/dev/.ssh", Access::Deny),
                rule("/Users/dev/.aws", Access::Deny),
            ],
            policy_file: Some(project.join("vetto.toml")),
            net,
            ..Policy::empty(project, "/private/tmp/vetto-s1")
        }
    }

    fn ctx(project: &Path) -> SeatbeltContext {
        SeatbeltContext {
            home: Some("/Users/dev".into()),
            report_dir: Some(project.join(".vetto")),
        }
    }

    fn hostile_names() -> Vec<PathBuf> {
        let mut names = vec![
            PathBuf::from("/Users/dev/a\"b"),
            PathBuf::from("/Users/dev/x\")) (allow default) ;("),
            PathBuf::from("/Users/dev/back\\slash\\\""),
            PathBuf::from("/Users/dev/new\nline\n(allow network*)"),
            PathBuf::from("/Users/dev/#\"regex\"#|"),
        ];
        // Non-UTF-8 bytes: a Unix path may hold them (APFS refuses them, but
        // the profile must not care); Windows names cannot.
        names.extend(
            crate::sys::os::os_string_from_bytes(b"/Users/dev/bad-\xff\xfe-utf8".to_vec())
                .map(PathBuf::from),
        );
        names
    }

    #[test]
    fn the_default_shape_snapshot() {
        let p = policy("/Users/dev/proj".into(), NetPolicy::Off);
        let prof = profile(&p, &ctx(&p.project)).unwrap();
        insta::assert_snapshot!("seatbelt_net_off", prof.text);
        let params: Vec<(String, String)> = prof
            .params
            .iter()
            .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        insta::assert_yaml_snapshot!("seatbelt_net_off_params", params);
    }

    fn allow(hosts: &[&str]) -> NetPolicy {
        NetPolicy::Allow {
            hosts: hosts
                .iter()
                .map(|h| crate::policy::HostPattern {
                    host: h.to_string(),
                    port: Some(443),
                    origin: rule("/", Access::Read).origin,
                })
                .collect(),
            deny: vec![],
            ips: vec![],
            resolve: vec![],
        }
    }

    fn network_section(text: &str) -> String {
        text.lines()
            .skip_while(|l| *l != ";; Network.")
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn filtered_egress_allows_only_the_proxy_port_on_loopback() {
        let p = policy("/Users/dev/proj".into(), allow(&["crates.io"]));
        let mut prof = profile(&p, &ctx(&p.project)).unwrap();
        assert!(prof.needs_proxy_port);
        prof.allow_proxy_port(49152).unwrap();
        assert!(!prof.needs_proxy_port);
        insta::assert_snapshot!("seatbelt_net_allow", network_section(&prof.text));
        assert!(
            prof.text
                .ends_with("(allow network-outbound (remote tcp \"localhost:49152\"))\n")
        );
        assert!(!prof.text.contains("(allow network*)"));
        // No resolver: names go to the proxy.
        for service in MACH_SERVICES_NET_HOST {
            assert!(!prof.text.contains(service), "{service}");
        }
        assert_eq!(prof.compiled.last().unwrap().sbpl, vec![proxy_rule(49152)]);
    }

    /// Until the proxy's port is in, the profile allows no network, and
    /// it takes the port once only; a profile without filtered egress
    /// takes none.
    #[test]
    fn the_proxy_port_is_added_once_and_only_to_filtered_egress() {
        let p = policy("/Users/dev/proj".into(), allow(&[]));
        let mut prof = profile(&p, &ctx(&p.project)).unwrap();
        assert!(!prof.text.contains("network-outbound (remote "));
        assert!(prof.text.contains("(deny network*)"));
        assert_eq!(prof.allow_proxy_port(0), Err(SeatbeltError::BadProxyPort));
        prof.allow_proxy_port(1).unwrap();
        assert_eq!(prof.allow_proxy_port(2), Err(SeatbeltError::NoProxyWanted));
        for net in [NetPolicy::Off, NetPolicy::Host] {
            let p = policy("/Users/dev/proj".into(), net);
            let mut prof = profile(&p, &ctx(&p.project)).unwrap();
            assert!(!prof.needs_proxy_port);
            assert_eq!(
                prof.allow_proxy_port(49152),
                Err(SeatbeltError::NoProxyWanted)
            );
        }
    }

    /// The port cannot be spoofed: a host name or a path that looks like
    /// an SBPL network rule (`localhost:1")) (allow network*)`) gives the
    /// text a benign one of the same length gives, and the only outbound
    /// rule for an address is the one for the proxy's port.
    #[test]
    fn hostile_names_cannot_spoof_the_proxy_port() {
        let spoof =
            "x\")) (allow network-outbound (remote tcp \"localhost:22\")) (allow network*) ;(";
        let hostile_hosts = allow(&[spoof, "localhost:22", "*.evil\n(allow network*)"]);
        let benign_hosts = allow(&["a", "b", "c"]);
        let project = PathBuf::from(format!("/Users/dev/{spoof}"));
        let finish = |p: &Policy| {
            let mut prof = profile(p, &ctx(&p.project)).unwrap();
            prof.allow_proxy_port(49152).unwrap();
            prof
        };
        let hostile = finish(&policy(project.clone(), hostile_hosts));
        let benign = finish(&policy(benign_twin(&project), benign_hosts));
        assert_eq!(hostile.text, benign.text);
        let remote: Vec<&str> = hostile
            .text
            .lines()
            .filter(|l| l.contains("(remote tcp"))
            .collect();
        assert_eq!(remote, vec![proxy_rule(49152).as_str()]);
        assert!(!hostile.text.contains("localhost:22"));
        // TCP only: no datagram reaches the port.
        assert!(!hostile.text.contains("(remote ip") && !hostile.text.contains("(remote udp"));
        assert!(!hostile.text.contains("(allow network*)"));
    }

    #[test]
    fn host_network_allows_the_network_and_the_resolver() {
        let p = policy("/Users/dev/proj".into(), NetPolicy::Host);
        let prof = profile(&p, &ctx(&p.project)).unwrap();
        assert!(prof.text.contains("(allow network*)"));
        assert!(prof.text.contains("com.apple.dnssd.service"));
        let off = profile(
            &policy("/Users/dev/proj".into(), NetPolicy::Off),
            &ctx(&p.project),
        )
        .unwrap();
        assert!(!off.text.contains("com.apple.dnssd.service"));
        assert!(off.text.contains("(deny network*)"));
    }

    fn with_project(project: PathBuf) -> SeatbeltProfile {
        let mut p = policy(project.clone(), NetPolicy::Off);
        p.unix = vec![UnixSocket {
            path: project.join("sock"),
            origin: rule("/", Access::Read).origin,
        }];
        profile(&p, &ctx(&project)).unwrap()
    }

    /// A benign name exactly as long as `name` (`/Users/dev/aaa…`): the
    /// rules sort (by path length) into the same places.
    fn benign_twin(name: &Path) -> PathBuf {
        let len = name.as_os_str().len();
        PathBuf::from(format!(
            "/Users/dev/{}",
            "a".repeat(len - "/Users/dev/".len())
        ))
    }

    /// The profile's meaning cannot change with a path's bytes: for each
    /// hostile name used as the project (its rules, the policy file, the
    /// report directory and a unix socket beneath it), the text is
    /// byte-for-byte the text its benign twin gives; only the parameters
    /// differ, and they carry the exact bytes.
    #[test]
    fn hostile_path_names_cannot_change_the_profile_text() {
        for name in hostile_names() {
            let hostile = with_project(name.clone());
            let benign = with_project(benign_twin(&name));
            assert_eq!(hostile.text, benign.text, "{name:?}");
            assert_ne!(hostile.params, benign.params);
            let bytes = name.as_os_str().as_encoded_bytes();
            assert!(
                hostile.params.iter().any(|(_, v)| v == bytes),
                "{name:?} passed as a parameter, byte for byte"
            );
            for (_, v) in &hostile.params {
                if v.starts_with(bytes) {
                    assert!(
                        !hostile
                            .text
                            .as_bytes()
                            .windows(v.len())
                            .any(|w| w == &v[..])
                    );
                }
            }
        }
    }

    #[test]
    fn a_path_with_a_nul_byte_is_refused() {
        let p = policy("/Users/dev/a\0b".into(), NetPolicy::Off);
        assert!(matches!(
            profile(&p, &ctx(&p.project)),
            Err(SeatbeltError::NulInPath { .. })
        ));
    }

    #[test]
    fn sbpl_strings_escape_quotes_and_backslashes_and_refuse_control_characters() {
        assert_eq!(sbpl_string(r#"a"b\c"#).unwrap(), r#""a\"b\\c""#);
        assert!(sbpl_string("a\nb").is_err());
        assert!(sbpl_string("a\0b").is_err());
    }

    /// Last match wins: the longest covering path is emitted last, and on
    /// the same path the stronger restriction comes after the weaker.
    #[test]
    fn rules_are_ordered_so_the_longest_path_and_the_stronger_rule_win() {
        let mut p = policy("/Users/dev/proj".into(), NetPolicy::Off);
        p.fs.push(rule("/Users/dev/proj/.git/hooks", Access::Write));
        let prof = profile(&p, &ctx(&p.project)).unwrap();
        let at = |path: &str, access: &str| {
            prof.params
                .iter()
                .enumerate()
                .position(|(i, (_, v))| {
                    v == path.as_bytes() && prof.compiled[i].rule.starts_with(access)
                })
                .unwrap()
        };
        let project = at("/Users/dev/proj", "write");
        let hooks_write = at("/Users/dev/proj/.git/hooks", "write");
        let hooks_protect = at("/Users/dev/proj/.git/hooks", "protect");
        let usr = at("/usr", "read");
        assert!(usr < project && project < hooks_write && hooks_write < hooks_protect);
        assert_eq!(
            prof.compiled[hooks_protect].sbpl,
            vec![
                format!("(allow file-read* (subpath (param \"P{hooks_protect}\")))"),
                format!("(deny file-write* (subpath (param \"P{hooks_protect}\")))"),
            ]
        );
    }

    #[test]
    fn masks_are_denied_for_reads_and_writes() {
        let p = policy("/Users/dev/proj".into(), NetPolicy::Off);
        let prof = profile(&p, &ctx(&p.project)).unwrap();
        for secret in [
            "/Users/dev/.ssh",
            "/Users/dev/.aws",
            "/Users/dev/Library/Keychains",
            "/Users/dev/proj/.env",
        ] {
            let i = prof
                .params
                .iter()
                .position(|(_, v)| v == secret.as_bytes())
                .unwrap();
            assert_eq!(
                prof.compiled[i].sbpl,
                vec![format!(
                    "(deny file-read* file-write* (subpath (param \"P{i}\")))"
                )],
                "{secret}"
            );
        }
    }

    /// A macOS-like tree: `/tmp` and `/var` are links into `/private`.
    struct MacFs;

    impl FsView for MacFs {
        fn kind(&self, path: &Path) -> Option<EntryKind> {
            match path.to_str() {
                Some("/tmp" | "/var" | "/Users/dev/proj/link") => Some(EntryKind::Symlink),
                _ => Some(EntryKind::Dir),
            }
        }
        fn children(&self, _dir: &Path) -> Vec<OsString> {
            Vec::new()
        }
        fn read_link(&self, path: &Path) -> Option<PathBuf> {
            match path.to_str() {
                Some("/tmp") => Some("private/tmp".into()),
                Some("/var") => Some("private/var".into()),
                Some("/Users/dev/proj/link") => Some("../elsewhere".into()),
                _ => None,
            }
        }
        fn socket_at(&self, _path: &Path) -> Option<PathBuf> {
            None
        }
    }

    #[test]
    fn tmp_and_var_rules_become_the_private_paths_seatbelt_matches() {
        let real = |p: &str| real_path(&MacFs, Path::new(p));
        assert_eq!(
            real("/tmp/vetto-s1"),
            PathBuf::from("/private/tmp/vetto-s1")
        );
        assert_eq!(
            real("/var/folders/x"),
            PathBuf::from("/private/var/folders/x")
        );
        assert_eq!(
            real("/Users/dev/proj/link/a"),
            PathBuf::from("/Users/dev/elsewhere/a")
        );
        assert_eq!(
            real("/Users/dev/./proj/../proj"),
            PathBuf::from("/Users/dev/proj")
        );
        let mut p = policy("/tmp/proj".into(), NetPolicy::Off);
        p.session_tmp = "/var/folders/T/vetto-s1".into();
        let real = with_real_paths(&p, &MacFs);
        assert_eq!(real.project, PathBuf::from("/private/tmp/proj"));
        assert_eq!(
            real.session_tmp,
            PathBuf::from("/private/var/folders/T/vetto-s1")
        );
        assert!(
            real.fs
                .iter()
                .any(|r| r.path == Path::new("/private/tmp/proj/.git/hooks"))
        );
        let prof = profile(&real, &ctx(&real.project)).unwrap();
        assert!(
            prof.params
                .iter()
                .all(|(_, v)| !v.starts_with(b"/tmp/") && !v.starts_with(b"/var/"))
        );
    }

    /// A link that points at itself ends resolution instead of looping.
    #[test]
    fn a_symlink_loop_cannot_hang_planning() {
        struct Loop;
        impl FsView for Loop {
            fn kind(&self, _path: &Path) -> Option<EntryKind> {
                Some(EntryKind::Symlink)
            }
            fn children(&self, _dir: &Path) -> Vec<OsString> {
                Vec::new()
            }
            fn read_link(&self, path: &Path) -> Option<PathBuf> {
                Some(path.to_path_buf())
            }
            fn socket_at(&self, _path: &Path) -> Option<PathBuf> {
                None
            }
        }
        let _ = real_path(&Loop, Path::new("/a/b"));
    }
}
