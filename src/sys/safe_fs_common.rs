//! What `safe_fs` (Unix, and its weaker Windows twin) says when it
//! refuses, and how it trusts a directory's parents: one definition for
//! both, so a refusal reads the same on every platform. The Windows
//! version never checks owners, group/other write or hard links, and so
//! never returns those refusals.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SafeFsError {
    #[error(
        "refusing to use {path}: it is a symbolic link (an earlier job may have planted it); remove it or name another directory"
    )]
    Link { path: PathBuf },
    #[error("refusing to use {path}: it is not a directory")]
    NotDir { path: PathBuf },
    #[error(
        "refusing to use {path}: it belongs to uid {owner}, neither to you (uid {me}) nor to root"
    )]
    ForeignOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "refusing to use {path}: other users can write in it (mode {mode}, not sticky); `chmod go-w` it or name another directory"
    )]
    OthersWrite { path: PathBuf, mode: String },
    #[error("refusing to write to {path}: it is a symbolic link")]
    LinkedFile { path: PathBuf },
    #[error("refusing to write to {path}: it is not a regular file")]
    NotRegular { path: PathBuf },
    #[error("refusing to append to {path}: it has {links} hard links (one of them may be planted)")]
    HardLinked { path: PathBuf, links: u64 },
    #[error("refusing to read {path}: larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("refusing to write {name:?} in {dir}: not a plain file name")]
    BadName { dir: PathBuf, name: String },
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("no randomness from the operating system for a temporary name")]
    Random(#[source] getrandom::Error),
}

impl SafeFsError {
    pub(super) fn io(op: &'static str, path: &Path, source: impl Into<io::Error>) -> Self {
        SafeFsError::Io {
            op,
            path: path.to_path_buf(),
            source: source.into(),
        }
    }

    /// The name (or one of the temporary names tried) already exists.
    pub fn is_exists(&self) -> bool {
        matches!(self, SafeFsError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists)
    }

    /// Nothing is there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, SafeFsError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

pub(super) type Result<T> = std::result::Result<T, SafeFsError>;

/// How the components before a directory's last one are trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parents {
    /// A relative path is walked from the working directory one component
    /// at a time, and no component may be a link: the working tree is the
    /// job's, so any of them may be planted (the report directory). An
    /// absolute path is taken as named up to its last component.
    Walk,
    /// Up to the last component as named, the last one never a link (the
    /// project's `.git`).
    AsNamed,
    /// The whole path as named, a link at its end included: a directory
    /// the user names for a file (`vetto report --sarif out/x.sarif`,
    /// `$TMPDIR`), whose links are theirs. It is still checked.
    Followed,
}
