//! Filesystem rules → Landlock grants, with carving for `deny`/`protect`
//! beneath an allowed root, and the directories where the supervisor
//! emulates creation because carving took the create rights away.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::{Access, FsRule};

/// Landlock filesystem access rights, with the kernel's bit values
/// (`LANDLOCK_ACCESS_FS_*`, stable UAPI).
pub mod rights {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;

    /// Rights that make sense on a regular file (the kernel rejects others).
    pub const FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    pub const READ: u64 = EXECUTE | READ_FILE | READ_DIR;

    /// Every filesystem right the given ABI knows.
    pub fn all_for_abi(abi: u8) -> u64 {
        let mut all = (1 << 13) - 1;
        if abi >= 2 {
            all |= REFER;
        }
        if abi >= 3 {
            all |= TRUNCATE;
        }
        if abi >= 5 {
            all |= IOCTL_DEV;
        }
        all
    }
}

/// One `landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockRule {
    pub path: PathBuf,
    /// `rights::*` bits, already masked to file rights for non-directories.
    pub access: u64,
}

/// What the child hands to Landlock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The ABI the ruleset is built for (every ABI the kernel has, up to 7).
    pub abi: u8,
    /// Rights the ruleset handles (denied unless a rule grants them).
    pub handled_fs: u64,
    /// Handle TCP bind/connect with no rule: no TCP at all (ABI 4).
    pub deny_tcp: bool,
    /// Scope signals and abstract unix sockets to the sandbox (ABI 6).
    pub scope: bool,
    pub rules: Vec<LandlockRule>,
}

/// A directory where carving removed the create/remove rights: the
/// supervisor performs creations, renames and removals of unprotected
/// names itself, on its own descriptor of this directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarvedDir {
    pub path: PathBuf,
    /// Names that must never be created, removed or renamed here, compared
    /// case-insensitively (`.git`, `hooks`, `config`, …).
    pub protected_names: Vec<String>,
}

/// What the supervisor decides through seccomp user notification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyPlan {
    /// Emulate creation in these directories.
    pub carved_dirs: Vec<CarvedDir>,
    /// Broker `connect()` to pathname unix sockets: allowed only where the
    /// resolved socket lies in a writable, unexcepted part of the policy.
    pub broker_unix_connect: bool,
    /// The filesystem rules, for deciding socket paths (longest match wins).
    pub rules: Vec<(PathBuf, Access)>,
}

impl NotifyPlan {
    pub fn is_empty(&self) -> bool {
        self.carved_dirs.is_empty() && !self.broker_unix_connect
    }
}

/// The access that decides `path`: the rule with the longest path that is
/// `path` or an ancestor of it; ties go to the stronger restriction.
/// `None` when no rule covers the path (deny by default).
pub fn decide<'a, I>(rules: I, path: &Path) -> Option<(Access, &'a Path)>
where
    I: IntoIterator<Item = (&'a Path, Access)>,
{
    let mut best: Option<(Access, &Path)> = None;
    for (rule_path, access) in rules {
        if !path.starts_with(rule_path) {
            continue;
        }
        best = match best {
            Some((a, p)) if p.as_os_str().len() > rule_path.as_os_str().len() => Some((a, p)),
            Some((a, p)) if p.as_os_str().len() == rule_path.as_os_str().len() && a >= access => {
                Some((a, p))
            }
            _ => Some((access, rule_path)),
        };
    }
    best
}

/// Convenience over [`decide`] for policy rules.
pub fn decide_rule<'a>(rules: &'a [FsRule], path: &Path) -> Option<&'a FsRule> {
    let (access, p) = decide(rules.iter().map(|r| (r.path.as_path(), r.access)), path)?;
    rules.iter().find(|r| r.path == p && r.access == access)
}
