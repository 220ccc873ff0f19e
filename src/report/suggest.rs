//! `vetto policy suggest`: the smallest change to the default policy that
//! would have allowed what audited sessions did — as a TOML policy to
//! review, never applied by itself. Attempts that persist code beyond the
//! job (hooks, CI command files), read secrets or need a refused syscall are
//! listed as comments, not suggested — and so is any path that would make a
//! protected or masked path writable ([`reopens_protection`]). Withheld
//! variables are no violation and never a suggestion.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::events::log::SessionLog;
use crate::events::{Roots, RuleId, SessionStart, Target};

/// What the sessions did that the policy refused, folded by rule and path.
#[derive(Debug, Default)]
struct Needs {
    /// Directories to make writable → (count, who).
    write: BTreeMap<String, (u64, String)>,
    /// Host sockets to reach (their paths made writable) → (count, who).
    sockets: BTreeMap<String, (u64, String)>,
    network: Option<(u64, String)>,
    /// Not suggested, with the reason → count.
    refused: BTreeMap<String, u64>,
}

/// A TOML policy for the sessions' logs (review it before use).
pub fn suggest(logs: &[SessionLog]) -> String {
    let mut needs = Needs::default();
    for log in logs {
        let roots = log.start().map(|s| s.roots()).unwrap_or_default();
        let guarded = log.start().map(protections).unwrap_or_default();
        for v in log.violations() {
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
            if let Some((path, why)) = reopened {
                let what = format!(
                    "{} {} — {why}: not suggested",
                    v.rule.as_str(),
                    written(path, &roots)
                );
                *needs.refused.entry(what).or_insert(0) += 1;
                continue;
            }
            match (&v.rule, &v.target) {
                (RuleId::FsWriteDenied, Target::Path { path }) => {
                    let dir = path.parent().unwrap_or(path);
                    match reopens_protection(dir, &guarded) {
                        // Its directory is protected: the file alone, then.
                        Some(_) => bump(&mut needs.write, written(path, &roots)),
                        None => bump(&mut needs.write, written(dir, &roots)),
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

fn render(needs: &Needs, sessions: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Suggested by `vetto policy suggest` from {sessions} session log(s).\n\
         # Review every line: each one widens what a job (and its dependencies) may do."
    );
    let _ = writeln!(out, "extends = [\"default\"]");
    let mut write: Vec<(&String, &(u64, String))> =
        needs.write.iter().chain(needs.sockets.iter()).collect();
    write.sort_by(|a, b| a.0.cmp(b.0));
    write.dedup_by(|a, b| a.0 == b.0);
    if !write.is_empty() {
        let _ = writeln!(out, "\n[filesystem]\nwrite = [");
        for (path, (count, who)) in write {
            let who = crate::text::name(who);
            let _ = writeln!(out, "    \"{path}\", # ×{count}, by {who}");
        }
        let _ = writeln!(out, "]");
    }
    if let Some((count, who)) = &needs.network {
        let _ = writeln!(
            out,
            "\n[network]\n# ×{count}, by {}: prefer naming the hosts once filtered egress is available\nmode = \"host\"",
            crate::text::name(who)
        );
    }
    if !needs.refused.is_empty() {
        let _ = writeln!(out, "\n# Seen, and deliberately not suggested:");
        for (what, count) in &needs.refused {
            let _ = writeln!(out, "#   {} (×{count})", crate::text::escape(what));
        }
    }
    out
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
}
