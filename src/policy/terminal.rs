//! Which paths are terminals, and which rule decides one: read from the
//! policy's rules alone, so that `policy explain` and the plan
//! (`plan::terminal`, where each tier's handling is told) agree.

use std::path::{Path, PathBuf};

use super::paths::{beneath, decide};
use super::{Access, FsRule};

/// The host's pseudo-terminal directory.
pub const PTS: &str = "/dev/pts";
/// The terminals vetto runs on that live in `/dev/pts` (`/dev/pts/N`): the
/// only ones the terminal rule is about.
pub fn own_pts(terminals: &[PathBuf]) -> Vec<PathBuf> {
    let mut own: Vec<PathBuf> = terminals.iter().filter(|t| is_pts(t)).cloned().collect();
    own.sort();
    own.dedup();
    own
}

/// `/dev/pts/N`.
pub fn is_pts(path: &Path) -> bool {
    path.parent() == Some(Path::new(PTS))
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// What the rules give `/dev/pts` itself: `None` when nothing, or a mask.
pub fn pts_access(rules: &[FsRule]) -> Option<(Access, &Path)> {
    let (access, path) = decide(
        rules.iter().map(|r| (r.path.as_path(), r.access)),
        Path::new(PTS),
    )?;
    (access != Access::Deny).then_some((access, path))
}

/// The rule deciding a terminal path, when that rule is the terminal rule:
/// it reaches `/dev/pts` from `/dev/pts` or above, and the path is a
/// terminal beneath it. Such a path is reachable only if it is one of
/// `terminals` (the job's own).
pub fn governs(rules: &[FsRule], path: &Path) -> Option<Access> {
    if !is_pts(path) {
        return None;
    }
    let (access, by) = decide(rules.iter().map(|r| (r.path.as_path(), r.access)), path)?;
    (access != Access::Deny && beneath(Path::new(PTS), by)).then_some(access)
}
