//! The last step of every Unix stage: finding the program as `execvp`
//! would, but with the job's environment rather than vetto's.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

/// `execvp`'s search, done with the job's `PATH` (else `default_path`, the
/// platform's own default), so the job's environment decides it.
pub fn resolve_program(
    argv: &[Vec<u8>],
    env: &[(String, String)],
    default_path: &str,
) -> Result<CString, Errno> {
    let name = argv.first().ok_or(Errno::ENOENT)?;
    if name.is_empty() {
        return Err(Errno::ENOENT);
    }
    if name.contains(&b'/') {
        return CString::new(name.clone()).map_err(|_| Errno::EINVAL);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or(default_path, |(_, v)| v.as_str());
    let mut last = Errno::ENOENT;
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate: PathBuf = Path::new(dir).join(OsStr::from_bytes(name));
        match nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK) {
            Ok(()) if !candidate.is_dir() => {
                return CString::new(candidate.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL);
            }
            Ok(()) => last = Errno::EACCES,
            Err(Errno::EACCES) => last = Errno::EACCES,
            Err(_) => {}
        }
    }
    Err(last)
}
