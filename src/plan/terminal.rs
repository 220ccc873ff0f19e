//! Terminals: the job reaches its own terminal and the pseudo-terminals it
//! creates itself, never another terminal of the same user.
//!
//! A policy rule that reaches `/dev/pts` (the default policy's
//! `write = ["/dev/pts"]`, or an ancestor such as `read = ["/dev"]`) means
//! exactly that, at every tier that isolates the filesystem:
//!
//! - **FULL**: `/dev/pts` is a private devpts instance holding only the
//!   pseudo-terminals the job creates. The terminal vetto runs on is bound
//!   at its own number there (over a terminal of the instance vetto
//!   holds) and at `/dev/console`, so `tty` and `ttyname()` name it as
//!   outside.
//! - **FS-ONLY**: `/dev/pts` is the host's, shared by every terminal of the
//!   user. Landlock grants the directory nothing and the terminal vetto runs
//!   on by its own inode; the slave of a pty the job creates is opened by
//!   the supervisor (`TIOCGPTPEER` on the job's master, also when the job
//!   opens `/dev/pts/N` by path read-write with `O_NOCTTY`).

use std::path::{Path, PathBuf};

pub use crate::policy::terminal::{PTS, governs, is_pts, own_pts, pts_access};
use crate::policy::{Access, FsRule, Origin};

/// Where the FULL tier binds the terminal vetto runs on.
pub const CONSOLE: &str = "/dev/console";

fn built_in(path: &Path, access: Access, written: &str) -> FsRule {
    FsRule {
        path: path.to_path_buf(),
        access,
        origin: Origin {
            source: "built-in".into(),
            line: 0,
            col: 0,
            written: written.into(),
        },
    }
}

/// FS-ONLY: the rules that turn a grant of the host's shared `/dev/pts`
/// into the job's own terminals: the directory masked, each own terminal
/// granted what `/dev/pts` was. Empty when the policy grants no terminal.
pub fn shared_pts_rules(rules: &[FsRule], terminals: &[PathBuf]) -> Vec<FsRule> {
    let Some((access, _)) = pts_access(rules) else {
        return Vec::new();
    };
    let mut out = vec![built_in(
        Path::new(PTS),
        Access::Deny,
        "other terminals: the host's /dev/pts is shared by every terminal of the user",
    )];
    out.extend(
        own_pts(terminals)
            .iter()
            .map(|t| built_in(t, access, "the terminal vetto runs on")),
    );
    out
}

/// FULL: the terminal bound at [`CONSOLE`] (the first of `terminals` in
/// `/dev/pts`), when the policy grants terminals at all.
pub fn console(rules: &[FsRule], terminals: &[PathBuf]) -> Option<(PathBuf, Access)> {
    let (access, _) = pts_access(rules)?;
    let first = terminals.iter().find(|t| is_pts(t))?;
    Some((first.clone(), access))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, access: Access) -> FsRule {
        built_in(Path::new(path), access, path)
    }

    #[test]
    fn only_numbered_entries_of_dev_pts_are_terminals() {
        assert!(is_pts(Path::new("/dev/pts/0")));
        assert!(is_pts(Path::new("/dev/pts/17")));
        assert!(!is_pts(Path::new("/dev/pts/ptmx")));
        assert!(!is_pts(Path::new("/dev/pts")));
        assert!(!is_pts(Path::new("/dev/tty1")));
        assert!(!is_pts(Path::new("/dev/pts/1/x")));
    }

    #[test]
    fn a_grant_of_dev_pts_becomes_the_own_terminal_and_a_masked_directory() {
        let rules = [rule("/dev", Access::Read), rule("/dev/pts", Access::Write)];
        let own = [PathBuf::from("/dev/pts/3"), PathBuf::from("/dev/tty1")];
        let added = shared_pts_rules(&rules, &own);
        let got: Vec<(&Path, Access)> =
            added.iter().map(|r| (r.path.as_path(), r.access)).collect();
        assert_eq!(
            got,
            [
                (Path::new("/dev/pts"), Access::Deny),
                (Path::new("/dev/pts/3"), Access::Write)
            ]
        );
    }

    #[test]
    fn reading_dev_reaches_dev_pts_too_and_is_narrowed_the_same_way() {
        let rules = [rule("/dev", Access::Read)];
        let added = shared_pts_rules(&rules, &[PathBuf::from("/dev/pts/3")]);
        assert_eq!(added.len(), 2);
        assert_eq!(added[1].access, Access::Read);
        assert_eq!(governs(&rules, Path::new("/dev/pts/9")), Some(Access::Read));
    }

    #[test]
    fn no_grant_no_terminal_rules() {
        let rules = [rule("/usr", Access::Read), rule("/dev/pts", Access::Deny)];
        assert!(shared_pts_rules(&rules, &[PathBuf::from("/dev/pts/3")]).is_empty());
        assert!(console(&rules, &[PathBuf::from("/dev/pts/3")]).is_none());
    }

    #[test]
    fn a_rule_naming_one_terminal_is_the_authors_choice() {
        let rules = [
            rule("/dev/pts", Access::Write),
            rule("/dev/pts/7", Access::Write),
        ];
        assert_eq!(governs(&rules, Path::new("/dev/pts/7")), None);
        assert_eq!(
            governs(&rules, Path::new("/dev/pts/8")),
            Some(Access::Write)
        );
    }
}
