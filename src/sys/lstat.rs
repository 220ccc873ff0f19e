//! The facts of a directory the glob walk and the persistence check
//! compare, the same on every OS: what differs (identity, change time)
//! is each platform's `os` module's answer.

use std::fs::Metadata;

use super::os::{change_time, file_id, modify_time};

/// What the glob walk and the persistence check ask of a directory:
/// whether it is one (a link is not), its identity and its times
/// (Windows: no identity and no change time, so nothing is remembered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lstat {
    pub is_dir: bool,
    pub id: Option<(u64, u64)>,
    pub mtime: (i64, i64),
    pub ctime: Option<(i64, i64)>,
}

/// [`Lstat`] from the standard library's metadata.
pub fn lstat_of(md: &Metadata) -> Lstat {
    Lstat {
        is_dir: md.is_dir(),
        id: file_id(md),
        mtime: modify_time(md),
        ctime: change_time(md),
    }
}
