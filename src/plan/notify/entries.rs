//! What the notification server decides about entries and inodes: whether
//! a name may be made in a carved directory, and whether an inode's mode,
//! owner or times may change (FS-ONLY, where Landlock does not decide
//! those). Pure: the server reads the facts through its own descriptors
//! (the inode's real path, identity, mode and links) and performs what is
//! decided on the same descriptors.

use std::path::{Path, PathBuf};

use super::Reason;
use crate::plan::fs::{Access, writable};

/// A carved directory as the server holds it.
#[derive(Debug, Clone, Copy)]
pub struct Carved<'a> {
    /// Its real path, as the server's descriptor names it.
    pub path: &'a Path,
    pub dev: u64,
    pub ino: u64,
    /// Names never made, removed or renamed here, [`fold`]ed.
    pub protected: &'a [Vec<u8>],
    /// Names may match regardless of case or Unicode form here.
    pub case_insensitive: bool,
}

/// The comparison form of a name: ASCII lower case, without the trailing
/// dots and spaces some filesystems drop (`.git.` is `.git` on vfat).
pub fn fold(name: &[u8]) -> Vec<u8> {
    let mut end = name.len();
    while end > 0 && matches!(name[end - 1], b'.' | b' ') {
        end -= 1;
    }
    // `.` and `..` fold to nothing; keep them as they are.
    let kept = if end == 0 { name } else { &name[..end] };
    kept.to_ascii_lowercase()
}

/// Whether `name` may be made, removed or renamed in `dir`.
pub fn check_name(dir: &Carved<'_>, name: &[u8]) -> Result<(), Reason> {
    // Where names may fold, a non-ASCII name could fold onto a protected
    // one (`conﬁg`, `hoo\u{212a}s`): not emulated.
    if dir.case_insensitive && !name.is_ascii() {
        return Err(Reason::Unsupported);
    }
    if dir.protected.contains(&fold(name)) {
        return Err(Reason::Protected);
    }
    Ok(())
}

/// The file type bits of a mode, and a directory's (as `stat` gives them
/// on every Unix).
const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;

/// A mode, owner or time change, as far as deciding it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Mode(u32),
    Owner,
    Times,
}

/// The inode a change names, from the server's own descriptor of it.
#[derive(Debug, Clone, Copy)]
pub struct Inode<'a> {
    /// Its path (`/proc/self/fd/N`'s link): `None` when unreadable; not
    /// absolute for an anonymous inode (`pipe:[…]`).
    pub real: Option<&'a Path>,
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub nlink: u64,
}

/// Whether the inode may have its mode, owner or times changed: where the
/// policy's (resolved) rules let the job write, and neither a carved
/// directory opened to others nor a protected name in one (nor a file
/// with other names, which may be a protected file's).
pub fn may_change(
    rules: &[(PathBuf, Access)],
    carved: &[Carved<'_>],
    inode: Inode<'_>,
    change: Change,
) -> bool {
    let Some(real) = inode.real else {
        return false;
    };
    if !real.is_absolute() {
        // A pipe, socket or other anonymous inode: no name in any
        // filesystem.
        return true;
    }
    if real.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") {
        // Gone from every directory: nobody else can reach it by name.
        return inode.nlink == 0;
    }
    if !writable(rules.iter().map(|(p, a)| (p.as_path(), *a)), real) {
        return false;
    }
    // A carved directory itself (the project root, `.git`): its entries
    // are the supervisor's to make, so nobody else may be let in, and the
    // owner keeps its access. Times are harmless.
    if carved
        .iter()
        .any(|d| d.dev == inode.dev && d.ino == inode.ino)
    {
        return match change {
            Change::Times => true,
            Change::Owner => false,
            Change::Mode(mode) => {
                let added = mode & !inode.mode;
                mode & 0o700 == 0o700 && added & 0o022 == 0
            }
        };
    }
    let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
        return false;
    };
    let is_dir = inode.mode & S_IFMT == S_IFDIR;
    !carved.iter().any(|dir| {
        dir.path == parent
            && (check_name(dir, name.as_encoded_bytes()).is_err()
                || (!is_dir && inode.nlink > 1 && change != Change::Times))
    })
}

/// Where the parent of a creation outside the carved directories was
/// found, when the server looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// In the job's view, or not looked at (a bare name: its directory is
    /// the job's cwd, which exists).
    Seen,
    /// Not in the job's view. `on_host`: vetto's own view has it, so the
    /// job's (FULL's, which leaves out what the policy grants nothing of)
    /// hid it.
    Missing { on_host: bool },
}

/// Whether a creation, removal or rename outside the carved directories
/// (which the kernel decides: Landlock, or FULL's view) is a refused write
/// to record. `writable`: the policy makes the target writable.
/// `mkdir_of_existing`: a `mkdir` of a directory already in the job's view,
/// which fails with `EEXIST`, not a refusal.
pub fn refused_outside(writable: bool, parent: Parent, mkdir_of_existing: bool) -> bool {
    if writable || mkdir_of_existing {
        return false;
    }
    match parent {
        // The kernel answers ENOENT before any permission is checked, and
        // there was nothing there to write anywhere.
        Parent::Missing { on_host: false } => false,
        // A host path the view left out: at FS-ONLY, where the view is the
        // host's, Landlock would have refused the same call.
        Parent::Missing { on_host: true } | Parent::Seen => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_name_variants_fold_to_the_same_name() {
        for variant in [".git", ".GIT", ".Git.", ".git ", ".git..", ".gIt. ."] {
            assert_eq!(fold(variant.as_bytes()), b".git", "{variant}");
        }
        assert_eq!(fold(b"HOOKS"), b"hooks");
        assert_ne!(fold(b".gitignore"), b".git");
        assert_eq!(fold(b".."), b"..");
    }

    /// Each row: the inode (path, mode, links; `carved` when it is the
    /// carved `.git` itself), the change, and whether it may happen.
    #[test]
    fn only_writable_unprotected_inodes_may_change() {
        let rules = vec![
            (PathBuf::from("/"), Access::Read),
            (PathBuf::from("/p"), Access::Write),
            (PathBuf::from("/p/.env"), Access::Deny),
        ];
        let root_protected = vec![b".git".to_vec()];
        let git_protected = vec![b"hooks".to_vec(), b"config".to_vec()];
        let carved = [
            Carved {
                path: Path::new("/p"),
                dev: 1,
                ino: 10,
                protected: &root_protected,
                case_insensitive: false,
            },
            Carved {
                path: Path::new("/p/.git"),
                dev: 1,
                ino: 11,
                protected: &git_protected,
                case_insensitive: false,
            },
        ];
        const FILE: u32 = 0o100_644;
        const DIR: u32 = S_IFDIR | 0o755;
        let inode = |real: Option<&'static str>, ino: u64, mode: u32, nlink: u64| Inode {
            real: real.map(Path::new),
            dev: 1,
            ino,
            mode,
            nlink,
        };
        #[rustfmt::skip]
        let rows = [
            ("a file in the project", inode(Some("/p/a"), 1, FILE, 1), Change::Mode(0o755), true),
            ("its owner", inode(Some("/p/src/b"), 2, FILE, 1), Change::Owner, true),
            ("outside the write grant", inode(Some("/home/.bashrc"), 3, FILE, 1), Change::Mode(0o777), false),
            ("outside, times", inode(Some("/home/.bashrc"), 3, FILE, 1), Change::Times, false),
            ("masked", inode(Some("/p/.env"), 4, FILE, 1), Change::Mode(0o644), false),
            ("a protected name", inode(Some("/p/.git/config"), 5, FILE, 1), Change::Mode(0o644), false),
            ("a protected name, other case", inode(Some("/p/.git/CONFIG"), 5, FILE, 1), Change::Mode(0o644), false),
            ("another name of a protected file", inode(Some("/p/.git/alias"), 5, FILE, 2), Change::Mode(0o644), false),
            ("its times", inode(Some("/p/.git/alias"), 5, FILE, 2), Change::Times, true),
            ("the carved .git, times", inode(Some("/p/.git"), 11, DIR, 2), Change::Times, true),
            ("the carved .git, owner only", inode(Some("/p/.git"), 11, DIR, 2), Change::Mode(0o700), true),
            ("the carved .git, opened to all", inode(Some("/p/.git"), 11, DIR, 2), Change::Mode(0o777), false),
            ("the carved .git, closed to its owner", inode(Some("/p/.git"), 11, DIR, 2), Change::Mode(0o000), false),
            ("the carved .git, given away", inode(Some("/p/.git"), 11, DIR, 2), Change::Owner, false),
            ("the project, group-writable", inode(Some("/p"), 10, DIR, 3), Change::Mode(0o775), false),
            ("a pipe", inode(Some("pipe:[1]"), 6, FILE, 1), Change::Mode(0o600), true),
            ("a deleted file, last name", inode(Some("/home/x (deleted)"), 7, FILE, 0), Change::Mode(0o600), true),
            ("a deleted name of a linked file", inode(Some("/home/x (deleted)"), 7, FILE, 1), Change::Mode(0o600), false),
            ("no path", inode(None, 8, FILE, 1), Change::Times, false),
        ];
        for (name, inode, change, expected) in rows {
            assert_eq!(
                may_change(&rules, &carved, inode, change),
                expected,
                "{name}"
            );
        }
    }

    /// Each row: writable by the policy, where the parent was found,
    /// a `mkdir` of what exists, and whether the attempt is recorded.
    #[test]
    fn a_write_the_view_or_landlock_refuses_is_recorded_and_nothing_else() {
        let hidden = Parent::Missing { on_host: true };
        let nowhere = Parent::Missing { on_host: false };
        #[rustfmt::skip]
        let rows = [
            ("`>> ~/.bashrc` at FS-ONLY: Landlock refuses", false, Parent::Seen, false, true),
            ("`>> ~/.bashrc` at FULL: the view hid ~", false, hidden, false, true),
            ("a file in a directory that is nowhere", false, nowhere, false, false),
            ("a writable target the view lacks the parent of", true, hidden, false, false),
            ("a writable target", true, Parent::Seen, false, false),
            ("`mkdir -p` over a directory that exists", false, Parent::Seen, true, false),
            ("`mkdir -p` into a directory the view hid", false, hidden, false, true),
            ("`mkdir` of a new directory outside", false, Parent::Seen, false, true),
        ];
        for (name, writable, parent, mkdir_of_existing, expected) in rows {
            assert_eq!(
                refused_outside(writable, parent, mkdir_of_existing),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn a_non_ascii_name_where_names_fold_is_not_emulated() {
        let protected = vec![b"config".to_vec()];
        let mut dir = Carved {
            path: Path::new("/p/.git"),
            dev: 1,
            ino: 1,
            protected: &protected,
            case_insensitive: true,
        };
        assert_eq!(
            check_name(&dir, "con\u{fb01}g".as_bytes()),
            Err(Reason::Unsupported)
        );
        assert_eq!(check_name(&dir, b"Config."), Err(Reason::Protected));
        assert_eq!(check_name(&dir, b"description"), Ok(()));
        dir.case_insensitive = false;
        assert_eq!(check_name(&dir, "con\u{fb01}g".as_bytes()), Ok(()));
    }
}
