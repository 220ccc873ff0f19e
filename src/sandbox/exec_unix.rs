//! The last step of every Unix stage: running the program as `execvp`
//! would, but with the job's environment rather than vetto's, and once the
//! sandbox decides what may run.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;

/// The paths `execvp` would try for the job's program, in order: the name
/// itself when it holds a `/`, else each directory of the job's `PATH`
/// (else `default_path`, the platform's own default) where something by
/// that name is there. `access(2)` only prunes what is absent: it answers
/// for the file's permissions, not for Landlock, which refuses at
/// `execve` — so whether a candidate runs is [`exec_first`]'s to find.
pub fn resolve_program(
    argv: &[Vec<u8>],
    env: &[(String, String)],
    default_path: &str,
) -> Result<Vec<CString>, Errno> {
    let name = argv.first().ok_or(Errno::ENOENT)?;
    if name.is_empty() {
        return Err(Errno::ENOENT);
    }
    if name.contains(&b'/') {
        return Ok(vec![CString::new(name.clone()).map_err(|_| Errno::EINVAL)?]);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or(default_path, |(_, v)| v.as_str());
    let mut found = Vec::new();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(OsStr::from_bytes(name));
        match nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK) {
            Ok(()) | Err(Errno::EACCES) => {
                found.push(
                    CString::new(candidate.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?,
                );
            }
            Err(_) => {}
        }
    }
    if found.is_empty() {
        return Err(Errno::ENOENT);
    }
    Ok(found)
}

/// `execve` each candidate in turn, as `execvp` does: one the kernel
/// refuses (`EACCES`, which is how Landlock says no) or that is gone is
/// passed over for the next. Returns only when none ran: the error, and
/// the candidate it concerns — the first refused one, since a refusal
/// says more than a later "not found" (as `execvp` reports it).
pub fn exec_first(
    candidates: &[CString],
    argv: &[CString],
    envp: &[CString],
) -> (Errno, Option<CString>) {
    let mut refused: Option<&CString> = None;
    let mut last = (Errno::ENOENT, None);
    for program in candidates {
        let err = nix::unistd::execve(program, argv, envp)
            .err()
            .unwrap_or(Errno::EINVAL);
        match err {
            Errno::EACCES => {
                refused.get_or_insert(program);
            }
            Errno::ENOENT | Errno::ENOTDIR | Errno::ESTALE | Errno::ENODEV | Errno::ETIMEDOUT => {
                last = (err, Some(program));
            }
            _ => return (err, Some(program.clone())),
        }
    }
    match refused {
        Some(program) => (Errno::EACCES, Some(program.clone())),
        None => (last.0, last.1.cloned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &str) -> Vec<(String, String)> {
        vec![("PATH".into(), path.into())]
    }

    #[test]
    fn every_path_directory_holding_the_name_is_a_candidate_in_order() {
        let found = resolve_program(&[b"sh".to_vec()], &env("/nonexistent:/usr/bin:/bin"), "")
            .unwrap_or_default();
        let found: Vec<_> = found
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        assert!(
            found.first().is_some_and(|p| p == "/usr/bin/sh"),
            "{found:?}"
        );
        assert!(!found.iter().any(|p| p.starts_with("/nonexistent")));
    }

    #[test]
    fn a_name_with_a_slash_is_its_own_candidate_and_nothing_found_is_enoent() {
        assert_eq!(
            resolve_program(&[b"./x".to_vec()], &env("/bin"), ""),
            Ok(vec![CString::from(c"./x")])
        );
        assert_eq!(
            resolve_program(&[b"no-such-program-here".to_vec()], &env("/bin"), ""),
            Err(Errno::ENOENT)
        );
        assert_eq!(resolve_program(&[], &env("/bin"), ""), Err(Errno::ENOENT));
    }

    /// Nothing here execs: a candidate that is a directory is refused by
    /// `execve` (`EACCES`), one that is gone is not found; the refusal is
    /// what is reported, with its path.
    #[test]
    fn a_refused_candidate_is_reported_over_a_later_missing_one() {
        let argv = [CString::from(c"x")];
        let (err, at) = exec_first(
            &[CString::from(c"/"), CString::from(c"/nonexistent/x")],
            &argv,
            &[],
        );
        assert_eq!(err, Errno::EACCES);
        assert_eq!(at, Some(CString::from(c"/")));
        let (err, at) = exec_first(&[CString::from(c"/nonexistent/x")], &argv, &[]);
        assert_eq!(
            (err, at),
            (Errno::ENOENT, Some(CString::from(c"/nonexistent/x")))
        );
    }
}
