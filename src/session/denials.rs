//! The end-of-session account of what the sandbox denied: the first few
//! distinct denials (all of them with `-v`), each with its rule and the
//! exact flag that would allow it — or, for a protection, that none does.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::events::{RuleId, Target};
use crate::report::suggest::reopens_protection;
use crate::supervisor::{self, notify::NotifyEvent};

/// How many distinct denials are named without `-v`.
pub(super) const FIRST: usize = 3;

/// Text the job chose (paths, names), safe for a terminal and a CI log.
pub(super) fn escaped(s: &str) -> String {
    crate::text::escape(s).into_owned()
}

/// One distinct denial: what, the rule, and how to allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Denial {
    pub rule: RuleId,
    /// The path, socket, syscall or address, escaped, with `~` for home.
    pub what: String,
    /// The flag that would allow it, or why no flag does.
    pub fix: String,
}

/// The distinct denials among the supervisor's decisions, in the order
/// first seen.
pub(super) fn distinct(decisions: &[NotifyEvent], audit: bool, home: &Path) -> Vec<Denial> {
    let mut seen_raw = HashSet::new();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for d in decisions.iter().filter(|d| d.is_violation()) {
        // Cheap first: most repeats are the same call on the same name.
        if !seen_raw.insert((d.syscall, d.path.clone(), d.addr)) {
            continue;
        }
        let Some(v) = supervisor::violation_of(d, audit) else {
            continue;
        };
        let target = match &v.target {
            Target::Path { path } | Target::Socket { path } if path.is_relative() => Target::Path {
                path: v.process.cwd.join(path),
            },
            t => t.clone(),
        };
        let denial = Denial {
            rule: v.rule,
            what: shown(&target, home),
            fix: fix(v.rule, &target, home),
        };
        if seen.insert((denial.rule, denial.what.clone())) {
            out.push(denial);
        }
    }
    out
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

/// The flag that allows it, exactly as it would be typed, or why none does.
fn fix(rule: RuleId, target: &Target, home: &Path) -> String {
    let flag = |flag: &str, path: &Path| match reopens_protection(path, &[]) {
        Some(why) => format!("no flag: {why}"),
        None => format!("{flag} {}", escaped(&home_relative(path, home))),
    };
    let path = target.path().map(PathBuf::from).unwrap_or_default();
    match rule {
        // A device is granted by itself, never its directory (all of /dev).
        RuleId::FsWriteDenied if path.starts_with("/dev") => flag("--allow-write", &path),
        RuleId::FsWriteDenied => flag("--allow-write", path.parent().unwrap_or(&path)),
        // No path: the client could not be read (not dumpable: ssh,
        // gpg-agent), so where it connects is unknown.
        RuleId::UnixSocketDenied if path.as_os_str().is_empty() => {
            "no flag: the client is not dumpable, so vetto cannot read where it connects; --tier full can".into()
        }
        RuleId::UnixSocketDenied => flag("--allow-unix", &path),
        RuleId::FsReadDenied => flag("--allow-read", &path),
        // Only the whole network allows another kind of socket: filtered
        // egress carries TCP (and names over TCP) through vetto alone.
        RuleId::NetSocketDenied => {
            "only --net host (the whole network); --allow-domain carries TCP only".into()
        }
        // The one destination, through the proxy; not the whole network.
        RuleId::NetEgressBlocked => match target {
            Target::Address {
                addr,
                port: Some(p),
            } if addr.contains(':') => format!("--allow-domain [{addr}]:{p}"),
            Target::Address {
                addr,
                port: Some(p),
            }
            | Target::Host {
                host: addr,
                port: Some(p),
            } => format!("--allow-domain {}:{p}", escaped(addr)),
            _ => "--net host".into(),
        },
        RuleId::GitPersistenceBlocked
        | RuleId::PersistencePlanted
        | RuleId::CiControlFileBlocked => {
            "no flag: it would run code outside the sandbox later".into()
        }
        RuleId::SecretReadDenied => "no flag: the secret stays masked".into(),
        RuleId::SyscallDenied => "no flag: no policy allows this call".into(),
        RuleId::ProcessEscaped
        | RuleId::LimitTimeout
        | RuleId::LimitMemory
        | RuleId::LimitProcs
        | RuleId::SecretEnvWithheld => "no flag".into(),
    }
}

/// The lines `vetto` prints about denials when the session ends: a count,
/// then the first [`FIRST`] distinct denials (all with `verbose`).
pub(super) fn lines(
    decisions: &[NotifyEvent],
    dropped: u64,
    audit: bool,
    verbose: bool,
    home: &Path,
) -> Vec<String> {
    let denied = decisions.iter().filter(|d| d.is_violation()).count() as u64 + dropped;
    if denied == 0 {
        return Vec::new();
    }
    let all = distinct(decisions, audit, home);
    let head = if audit {
        format!("vetto: the policy would have refused {denied} operation(s) (--audit: allowed)")
    } else {
        format!("vetto: the sandbox denied {denied} operation(s)")
    };
    let mut out = vec![match all.len() {
        0 => head,
        n => format!("{head}, {n} distinct:"),
    }];
    let shown = if verbose { all.len() } else { FIRST };
    for d in all.iter().take(shown) {
        out.push(format!(
            "vetto:   {} {}  — to allow: {}",
            d.rule.as_str(),
            d.what,
            d.fix
        ));
    }
    if all.len() > shown {
        out.push(format!(
            "vetto:   … and {} more (-v lists them all)",
            all.len() - shown
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
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

    #[test]
    fn denials_are_named_with_the_rule_and_the_flag_that_allows_them() {
        let home = Path::new("/home/u");
        let decisions = vec![
            event(
                "openat",
                "/home/u/.npm/_cacache/index",
                Reason::OutsidePolicy,
            ),
            event(
                "openat",
                "/home/u/.npm/_cacache/index",
                Reason::OutsidePolicy,
            ),
            event("mkdirat", "/home/u/app/.git/hooks/x", Reason::Protected),
            event("socket", "", Reason::Forbidden),
            event("openat", "/home/u/.cache/tool/db", Reason::OutsidePolicy),
        ];
        let out = lines(&decisions, 0, false, false, home);
        assert_eq!(
            out[0],
            "vetto: the sandbox denied 5 operation(s), 4 distinct:"
        );
        assert_eq!(
            out[1],
            "vetto:   fs-write-denied ~/.npm/_cacache/index  — to allow: --allow-write ~/.npm/_cacache"
        );
        assert!(out[2].contains("git-persistence-blocked") && out[2].contains("no flag"));
        assert!(
            out[3].contains("net-socket-denied")
                && out[3].ends_with("--allow-domain carries TCP only")
        );
        assert_eq!(out[4], "vetto:   … and 1 more (-v lists them all)");
        let all = lines(&decisions, 0, false, true, home);
        assert_eq!(all.len(), 5);
        assert!(all[4].ends_with("--allow-write ~/.cache/tool"), "{all:?}");
    }

    #[test]
    fn a_refused_destination_is_allowed_by_naming_it_not_by_opening_the_network() {
        let home = Path::new("/home/u");
        let mut v4 = event("connect", "", Reason::Egress);
        v4.addr = Some("10.1.2.3:5432".parse().unwrap_or_else(|_| unreachable!()));
        let mut v6 = event("connect", "", Reason::Egress);
        v6.addr = Some(
            "[2001:db8::1]:443"
                .parse()
                .unwrap_or_else(|_| unreachable!()),
        );
        let out = lines(&[v4, v6], 0, false, true, home);
        assert!(out[1].ends_with("--allow-domain 10.1.2.3:5432"), "{out:?}");
        assert!(
            out[2].ends_with("--allow-domain [2001:db8::1]:443"),
            "{out:?}"
        );
    }

    #[test]
    fn control_characters_in_denied_paths_are_escaped() {
        let home = Path::new("/home/u");
        let decisions = vec![event(
            "openat",
            "/tmp/x\n::warning title=forged::\u{1b}]0;pwned\u{7}\u{9b}",
            Reason::OutsidePolicy,
        )];
        let out = lines(&decisions, 0, false, false, home);
        assert!(
            out.iter().all(|l| !l.chars().any(char::is_control)),
            "{out:?}"
        );
        assert!(
            out[1].contains(
                &crate::text::escape("/tmp/x\n::warning title=forged::\u{1b}]0;pwned\u{7}\u{9b}")
                    .into_owned()
            ),
            "{out:?}"
        );
    }

    #[test]
    fn under_audit_the_same_list_says_what_would_have_been_refused() {
        let decisions = vec![event("openat", "/opt/out", Reason::WouldDeny)];
        let out = lines(&decisions, 0, true, false, Path::new("/home/u"));
        assert!(
            out[0].contains("would have refused 1 operation(s)"),
            "{out:?}"
        );
        assert!(out[1].ends_with("--allow-write /opt"), "{out:?}");
        assert!(lines(&[], 0, false, false, Path::new("/")).is_empty());
    }
}
