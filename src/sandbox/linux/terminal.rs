//! The terminals vetto itself runs on: the job's own (see `plan::terminal`).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;

/// The terminal devices on vetto's standard input, output and error, by the
/// host path that names the same inode (`/dev/pts/3`). A stream whose path
/// does not lead back to its own device (vetto in another mount namespace
/// than its terminal, a terminal since closed) is left out: the job gets no
/// grant for a name that means something else.
pub fn own_terminals() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for fd in 0..=2 {
        let link = format!("/proc/self/fd/{fd}");
        let (Ok(path), Ok(held)) = (std::fs::read_link(&link), std::fs::metadata(&link)) else {
            continue;
        };
        if !held.file_type().is_char_device() {
            continue;
        }
        let Ok(named) = std::fs::metadata(&path) else {
            continue;
        };
        let same =
            named.dev() == held.dev() && named.ino() == held.ino() && named.rdev() == held.rdev();
        if same && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}
