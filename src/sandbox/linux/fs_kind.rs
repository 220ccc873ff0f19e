//! What kind of filesystem a path is on, for the decisions that depend on
//! its promises.

use std::path::Path;

/// Local filesystems whose directories' `ctime` changes with every entry
/// created, removed or renamed in them, and which no unprivileged process
/// can set: ext2/3/4, XFS, Btrfs, F2FS, tmpfs, overlayfs (whose copy-up
/// stamps a new `ctime`). Network, FUSE and pseudo filesystems are not
/// trusted: their `ctime` comes from a server or is made up.
const HONEST_CTIME: &[i64] = &[
    0xEF53,      // ext2/3/4
    0x5846_5342, // XFS
    0x9123_683E, // Btrfs
    0xF2F5_2010, // F2FS
    0x0102_1994, // tmpfs
    0x794C_7630, // overlayfs
];

/// Whether `path`'s filesystem keeps a directory's `ctime` honest (see
/// [`HONEST_CTIME`]); `false` when it cannot be told.
pub fn honest_change_times(path: &Path) -> bool {
    match nix::sys::statfs::statfs(path) {
        #[allow(clippy::unnecessary_cast, reason = "f_type's width differs by target")]
        Ok(st) => HONEST_CTIME.contains(&(st.filesystem_type().0 as i64)),
        Err(_) => false,
    }
}
