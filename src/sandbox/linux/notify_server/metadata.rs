//! Mode, owner and time changes at FS-ONLY (`NotifyPlan::metadata`).
//!
//! Landlock (up to ABI 7) does not restrict `chmod`, `chown` or `utime*`,
//! and below FULL no read-only mount refuses them: a job could make
//! `~/.bashrc` world-writable, or open `~/.ssh`, files it may only read.
//! So each such call is notified and decided here, on the supervisor's own
//! descriptor of the target: the path is copied once, resolved as the job
//! would (its cwd or directory descriptor, its symlinks unless the call
//! does not follow them, never a magic link) and opened `O_PATH`; a
//! descriptor argument is taken with `pidfd_getfd`. The target's real path
//! (from that descriptor) must get `Access::Write` from the policy and be
//! no carved directory's protected name. Then the supervisor performs the
//! change on that descriptor and answers with its result. Anything else is
//! refused with `EPERM` and recorded (`Reason::MetadataOutside`). CONTINUE
//! is never answered: Landlock would not decide.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::{Answer, Shared, start_dir, sys};
use super::{Notif, PATH_MAX, c, resolve};
use crate::plan::notify::{Decision, Reason, entries};

/// What the call changes, as the supervisor's own copy.
#[derive(Debug, Clone, Copy)]
enum Change {
    Mode(u32),
    Owner(u32, u32),
    /// `None`: both to now.
    Times(Option<[libc::timespec; 2]>),
}

/// Which inode the call names.
#[derive(Debug, Clone, Copy)]
enum Names {
    /// A path from `dirfd` (`AT_FDCWD`: the cwd).
    Path {
        dirfd: i32,
        addr: u64,
        follow: bool,
        empty_path: bool,
    },
    /// A descriptor of the job's.
    Fd(i32),
}

/// How the job's times argument is laid out.
#[derive(Debug, Clone, Copy)]
enum TimesArg {
    /// `struct utimbuf` (`utime`): two `time_t` seconds.
    Utimbuf(u64),
    /// `struct timeval[2]` (`utimes`, `futimesat`).
    Timeval(u64),
    /// `struct timespec[2]` (`utimensat`).
    Timespec(u64),
}

/// The name of a notified metadata call, from its number.
pub(super) fn call_name(nr: i64) -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        match nr {
            libc::SYS_chmod => return "chmod",
            libc::SYS_chown => return "chown",
            libc::SYS_lchown => return "lchown",
            libc::SYS_utime => return "utime",
            libc::SYS_utimes => return "utimes",
            libc::SYS_futimesat => return "futimesat",
            _ => {}
        }
    }
    match nr {
        libc::SYS_fchmod => "fchmod",
        libc::SYS_fchmodat => "fchmodat",
        libc::SYS_fchmodat2 => "fchmodat2",
        libc::SYS_fchown => "fchown",
        libc::SYS_fchownat => "fchownat",
        libc::SYS_utimensat => "utimensat",
        _ => "metadata",
    }
}

fn denied(reason: Reason) -> Answer {
    Answer::Errno(c::EPERM, Decision::Denied(c::EPERM), reason)
}

fn kernel_says(errno: i32) -> Answer {
    Answer::Errno(errno, Decision::Emulated, Reason::Metadata)
}

/// The call's target and change, from its registers (times still to be
/// read from memory).
fn parse(n: &Notif) -> Option<(Names, Result<Change, TimesArg>)> {
    let a = n.args;
    let fd = |i: usize| a[i] as u32 as i32;
    let mode = |i: usize| a[i] as u32;
    let path = |dirfd: i32, addr: u64, flags: u64| Names::Path {
        dirfd,
        addr,
        follow: flags & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
        empty_path: flags & libc::AT_EMPTY_PATH as u64 != 0,
    };
    #[cfg(target_arch = "x86_64")]
    {
        let cwd = c::AT_FDCWD;
        let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
        let parsed = match n.nr {
            libc::SYS_chmod => Some((path(cwd, a[0], 0), Ok(Change::Mode(mode(1))))),
            libc::SYS_chown => Some((
                path(cwd, a[0], 0),
                Ok(Change::Owner(a[1] as u32, a[2] as u32)),
            )),
            libc::SYS_lchown => Some((
                path(cwd, a[0], nofollow),
                Ok(Change::Owner(a[1] as u32, a[2] as u32)),
            )),
            libc::SYS_utime => Some((path(cwd, a[0], 0), Err(TimesArg::Utimbuf(a[1])))),
            libc::SYS_utimes => Some((path(cwd, a[0], 0), Err(TimesArg::Timeval(a[1])))),
            libc::SYS_futimesat => Some((path(fd(0), a[1], 0), Err(TimesArg::Timeval(a[2])))),
            _ => None,
        };
        if parsed.is_some() {
            return parsed;
        }
    }
    match n.nr {
        libc::SYS_fchmod => Some((Names::Fd(fd(0)), Ok(Change::Mode(mode(1))))),
        libc::SYS_fchmodat => Some((path(fd(0), a[1], 0), Ok(Change::Mode(mode(2))))),
        libc::SYS_fchmodat2 => Some((path(fd(0), a[1], a[3]), Ok(Change::Mode(mode(2))))),
        libc::SYS_fchown => Some((
            Names::Fd(fd(0)),
            Ok(Change::Owner(a[1] as u32, a[2] as u32)),
        )),
        libc::SYS_fchownat => Some((
            path(fd(0), a[1], a[4]),
            Ok(Change::Owner(a[2] as u32, a[3] as u32)),
        )),
        libc::SYS_utimensat => Some((path(fd(0), a[1], a[3]), Err(TimesArg::Timespec(a[2])))),
        _ => None,
    }
}

/// Read `N` bytes of the job's memory once.
fn read_exact<const N: usize>(tid: i32, addr: u64) -> Result<[u8; N], Answer> {
    let mut buf = [0u8; N];
    match sys::read_remote(tid, addr, &mut buf) {
        Ok(got) if got == N => Ok(buf),
        Ok(_) => Err(kernel_says(c::EFAULT)),
        Err(e) if sys::errno_of(&e) == c::EFAULT => Err(kernel_says(c::EFAULT)),
        // Not dumpable, or gone: fail closed.
        Err(_) => Err(denied(Reason::Unreadable)),
    }
}

fn word(bytes: &[u8], at: usize) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    i64::from_ne_bytes(w)
}

fn timespec(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    }
}

/// The times argument, copied once (a null pointer: both to now).
fn read_times(tid: i32, arg: TimesArg) -> Result<Change, Answer> {
    let (TimesArg::Utimbuf(addr) | TimesArg::Timeval(addr) | TimesArg::Timespec(addr)) = arg;
    if addr == 0 {
        return Ok(Change::Times(None));
    }
    let times = match arg {
        TimesArg::Utimbuf(_) => {
            let b = read_exact::<16>(tid, addr)?;
            [timespec(word(&b, 0), 0), timespec(word(&b, 8), 0)]
        }
        TimesArg::Timeval(_) => {
            let b = read_exact::<32>(tid, addr)?;
            let usec = [word(&b, 8), word(&b, 24)];
            // As the kernel checks before converting.
            if usec.iter().any(|u| !(0..1_000_000).contains(u)) {
                return Err(kernel_says(c::EINVAL));
            }
            [
                timespec(word(&b, 0), usec[0] * 1000),
                timespec(word(&b, 16), usec[1] * 1000),
            ]
        }
        // Passed on as they are (`UTIME_NOW`, `UTIME_OMIT` included): the
        // kernel checks them.
        TimesArg::Timespec(_) => {
            let b = read_exact::<32>(tid, addr)?;
            [
                timespec(word(&b, 0), word(&b, 8)),
                timespec(word(&b, 16), word(&b, 24)),
            ]
        }
    };
    Ok(Change::Times(Some(times)))
}

impl Shared {
    /// Decide and perform a mode, owner or time change.
    pub(super) fn metadata(&self, n: &Notif) -> (Answer, Option<PathBuf>) {
        let Some((names, change)) = parse(n) else {
            return (denied(Reason::NotHandled), None);
        };
        let change = match change {
            Ok(change) => change,
            Err(arg) => match read_times(n.tid, arg) {
                Ok(change) => change,
                Err(answer) => return (self.stale_or(n, answer), None),
            },
        };
        let (target, by_path) = match self.metadata_target(n, names) {
            Ok(t) => t,
            Err(answer) => return (self.stale_or(n, answer), None),
        };
        // Every read of memory and of /proc/TID is done: it was about this
        // thread, blocked in this call.
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, None);
        }
        let Ok(facts) = sys::facts(target.as_fd()) else {
            return (denied(Reason::Unreadable), None);
        };
        let real = sys::fd_path(target.as_fd()).ok();
        let shown = real.clone();
        if !self.may_change(real.as_deref(), facts, change) {
            if self.audit {
                return (Answer::Continue(Reason::WouldDeny), shown);
            }
            return (denied(Reason::MetadataOutside), shown);
        }
        let result = match change {
            // A symbolic link has no mode of its own on Linux.
            Change::Mode(_) if facts.mode & libc::S_IFMT == libc::S_IFLNK => {
                Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP))
            }
            Change::Mode(mode) if by_path => sys::chmod_checked(target.as_fd(), mode),
            Change::Mode(mode) => sys::fchmod(target.as_fd(), mode),
            Change::Owner(uid, gid) => sys::chown_checked(target.as_fd(), uid, gid),
            Change::Times(times) => sys::utimens_checked(target.as_fd(), times),
        };
        let answer = match result {
            Ok(()) => Answer::Value(0, Reason::Metadata),
            Err(e) => kernel_says(sys::errno_of(&e)),
        };
        (answer, None)
    }

    /// The supervisor's own descriptor of the inode the call names, and
    /// whether it was reached by a path (an `O_PATH` descriptor).
    fn metadata_target(&self, n: &Notif, names: Names) -> Result<(OwnedFd, bool), Answer> {
        let take = |fd: i32| -> Result<OwnedFd, Answer> {
            let pidfd = sys::pidfd_open_thread(n.tid).map_err(|_| denied(Reason::Unreadable))?;
            sys::pidfd_getfd(pidfd.as_fd(), fd).map_err(|e| match sys::errno_of(&e) {
                c::EBADF => kernel_says(c::EBADF),
                // Not dumpable: fail closed.
                _ => denied(Reason::Unreadable),
            })
        };
        let (dirfd, addr, follow, empty_path) = match names {
            Names::Fd(fd) => return take(fd).map(|f| (f, false)),
            Names::Path {
                dirfd,
                addr,
                follow,
                empty_path,
            } => (dirfd, addr, follow, empty_path),
        };
        // `utimensat(fd, NULL, …)`: the descriptor itself.
        if addr == 0 {
            if dirfd == c::AT_FDCWD {
                return Err(kernel_says(c::EFAULT));
            }
            return take(dirfd).map(|f| (f, false));
        }
        let path = match sys::read_remote_cstr(n.tid, addr, PATH_MAX) {
            Ok(Some(p)) => p,
            Ok(None) => return Err(kernel_says(libc::ENAMETOOLONG)),
            Err(e) if sys::errno_of(&e) == c::EFAULT => return Err(kernel_says(c::EFAULT)),
            Err(_) => return Err(denied(Reason::Unreadable)),
        };
        let bytes = path.as_bytes();
        if bytes.is_empty() {
            if !empty_path {
                return Err(kernel_says(c::ENOENT));
            }
            if dirfd == c::AT_FDCWD {
                return sys::open_proc_dir(n.tid, "cwd")
                    .map(|f| (f, true))
                    .map_err(|_| denied(Reason::Unreadable));
            }
            return take(dirfd).map(|f| (f, false));
        }
        let what = start_dir(bytes, dirfd).ok_or(kernel_says(c::EBADF))?;
        let base = sys::open_proc_dir(n.tid, &what).map_err(|e| match sys::errno_of(&e) {
            libc::ENOTDIR => kernel_says(libc::ENOTDIR),
            c::ENOENT if dirfd != c::AT_FDCWD => kernel_says(c::EBADF),
            _ => denied(Reason::Unreadable),
        })?;
        let in_root = if bytes.first() == Some(&b'/') {
            resolve::IN_ROOT
        } else {
            0
        };
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        sys::openat2(
            base.as_fd(),
            &path,
            libc::O_PATH | nofollow,
            0,
            resolve::NO_MAGICLINKS | in_root,
        )
        .map(|f| (f, true))
        .map_err(|e| kernel_says(sys::errno_of(&e)))
    }

    /// Whether the inode at `real` (its path from the supervisor's own
    /// descriptor) may have its mode, owner or times changed: the plan's
    /// decision (`plan::notify::entries::may_change`) on these facts.
    fn may_change(&self, real: Option<&Path>, facts: sys::FileFacts, change: Change) -> bool {
        let carved: Vec<_> = self.carved.iter().map(super::Carved::view).collect();
        let inode = entries::Inode {
            real,
            dev: facts.dev,
            ino: facts.ino,
            mode: facts.mode,
            nlink: facts.nlink,
        };
        let change = match change {
            Change::Mode(mode) => entries::Change::Mode(mode),
            Change::Owner(..) => entries::Change::Owner,
            Change::Times(_) => entries::Change::Times,
        };
        entries::may_change(self.resolved_rules(), &carved, inode, change)
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::super::Listener;
    use super::*;
    use crate::plan::fs::{Access, CarvedDir, NotifyPlan};

    #[test]
    fn only_writable_unprotected_targets_may_change() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let p = root.join("p");
        let home = root.join("home");
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        for f in ["p/a", "p/src/b", "p/.env", "home/.bashrc"] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        std::fs::write(p.join(".git/config"), "x").unwrap();
        std::fs::hard_link(p.join(".git/config"), p.join("alias")).unwrap();
        let shared = Shared::new(
            Listener::new(OwnedFd::from(std::fs::File::open("/").unwrap())),
            &NotifyPlan {
                carved_dirs: vec![
                    CarvedDir {
                        path: p.clone(),
                        protected_names: vec![".git".into()],
                    },
                    CarvedDir {
                        path: p.join(".git"),
                        protected_names: vec!["hooks".into(), "config".into()],
                    },
                ],
                rules: vec![
                    (root.clone(), Access::Read),
                    (p.clone(), Access::Write),
                    (p.join(".env"), Access::Deny),
                ],
                metadata: true,
                ..NotifyPlan::default()
            },
        )
        .unwrap();
        let may = |rel: &str, change: Change| {
            let path = root.join(rel);
            let f = std::fs::File::open(&path).unwrap();
            let facts = sys::facts(f.as_fd()).unwrap();
            shared.may_change(Some(&path), facts, change)
        };
        let chmod = Change::Mode(0o755);
        assert!(may("p/a", chmod));
        assert!(may("p/src/b", chmod));
        assert!(may("p/src/b", Change::Owner(u32::MAX, u32::MAX)));
        assert!(!may("home/.bashrc", chmod), "outside the write grant");
        assert!(!may("home/.bashrc", Change::Times(None)));
        assert!(!may("p/.env", chmod), "masked");
        assert!(!may("p/.git/config", chmod), "a protected name");
        assert!(!may("p/alias", chmod), "another name of a protected file");
        assert!(may("p/alias", Change::Times(None)));
        // The carved directories themselves: times, and modes that keep
        // the owner's access and let nobody else write.
        assert!(may("p/.git", Change::Times(None)));
        assert!(may("p/.git", Change::Mode(0o700)));
        assert!(!may("p/.git", Change::Mode(0o777)), "opened to everyone");
        assert!(!may("p/.git", Change::Mode(0o000)), "closed to the owner");
        assert!(!may("p/.git", Change::Owner(0, 0)));
        assert!(!may("p", Change::Mode(0o757)));
        assert!(shared.may_change(
            Some(Path::new("pipe:[1]")),
            sys::facts(std::fs::File::open("/").unwrap().as_fd()).unwrap(),
            chmod
        ));
        assert!(!shared.may_change(
            None,
            sys::facts(std::fs::File::open("/").unwrap().as_fd()).unwrap(),
            chmod
        ));
    }
}
