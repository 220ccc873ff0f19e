//! The job's own pseudo-terminals: a slave opened for the job where the
//! host's `/dev/pts` is shared and Landlock grants only its own terminal.

use super::*;

impl Shared {
    /// `ioctl(master, TIOCGPTPEER, flags)`. The descriptor number and the
    /// flags are registers, not memory, so nothing the job can still change
    /// is read. The supervisor takes the job's descriptor (the same open
    /// file: a master the job holds is a terminal it already controls
    /// entirely) and performs the ioctl on it itself; the kernel checks that
    /// it is a master. Whatever is unclear is left to the kernel (CONTINUE),
    /// where Landlock refuses the slave of any terminal but the job's own.
    pub(super) fn pty_peer(&self, n: &Notif) -> Answer {
        let Ok(master) = i32::try_from(n.args[0] as u32) else {
            return Answer::Continue(Reason::Unsupported);
        };
        let flags = n.args[2] as u32 as i32;
        let kept = libc::O_ACCMODE | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
        if flags & !kept != 0 || flags & libc::O_ACCMODE == libc::O_ACCMODE {
            return Answer::Continue(Reason::Unsupported);
        }
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return self.stale_or(n, Answer::Continue(Reason::Unreadable));
        };
        let ours = match sys::pidfd_getfd(pidfd.as_fd(), master) {
            Ok(fd) => fd,
            Err(_) => return self.stale_or(n, Answer::Continue(Reason::Unreadable)),
        };
        // The thread was alive and blocked in this call throughout: the
        // descriptor is the one it passed.
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        match sys::pty_peer(ours.as_fd(), flags & !libc::O_CLOEXEC) {
            Ok(slave) => Answer::Fd {
                fd: slave,
                cloexec: flags & libc::O_CLOEXEC != 0,
                reason: Reason::OwnPty,
                undo: None,
            },
            Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::OwnPty),
        }
    }

    /// `open*("/dev/pts/N", O_RDWR | O_NOCTTY)`: the slave of a pty by the
    /// name `ptsname()` gave (Go's `creack/pty`). `None`: not such an open
    /// (the BPF notifies it for `O_CREAT` too). The path is copied once and
    /// decided on as copied: it must be exactly `/dev/pts/N`, absolute and
    /// in canonical form (what `ptsname()` returns). The job's own
    /// descriptor table must hold the master of pty `N` (a `ptmx`
    /// descriptor, checked with `TIOCGPTN` on the supervisor's own copy).
    /// Another path → `None`.
    /// The supervisor then opens the slave through that master
    /// (`TIOCGPTPEER`), so what the job gets is the slave of a terminal it
    /// already controls entirely, and only if it is the very inode
    /// `/dev/pts/N` names. Anything else → CONTINUE, where Landlock grants
    /// no terminal but the job's own: nothing is granted on this path.
    pub(super) fn pty_slave_by_path(&self, n: &Notif) -> Option<Answer> {
        let (path_addr, flags) = match n.call {
            Call::Open => (n.args[0], n.args[1] as u32 as i32),
            Call::Openat => (n.args[1], n.args[2] as u32 as i32),
            _ => return None,
        };
        let slave_open = c::O_RDWR | c::O_NOCTTY;
        if !self.pty_peer
            || !n.native
            || flags & (c::O_ACCMODE | c::O_NOCTTY) != slave_open
            || flags & c::O_CREAT != 0
        {
            return None;
        }
        let leave = Some(Answer::Continue(Reason::NotHandled));
        let kept = c::O_ACCMODE | c::O_NOCTTY | c::O_NONBLOCK | c::O_CLOEXEC;
        if flags & !(kept | c::KERNEL_O_LARGEFILE) != 0 {
            return leave;
        }
        let Ok(path) = copy_path(n.tid, path_addr) else {
            return leave;
        };
        // Not a pty's slave (GNU tools pass `O_NOCTTY` on ordinary
        // opens): decided as any other open is (a file the job made at
        // the top of the project is reopened for it).
        let index = pts_index(path.to_bytes())?;
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return Some(self.stale_or(n, Answer::Continue(Reason::NotHandled)));
        };
        let Some(master) = held_master(n.tid, pidfd.as_fd(), index) else {
            return Some(self.stale_or(n, Answer::Continue(Reason::NotHandled)));
        };
        // The thread was alive and blocked in this call throughout: the
        // descriptors read are its own.
        if !self.listener.id_valid(n.id) {
            return Some(Answer::Drop);
        }
        let slave = match sys::pty_peer(master.as_fd(), flags & (c::O_ACCMODE | c::O_NONBLOCK)) {
            Ok(slave) => slave,
            Err(e) => {
                return Some(Answer::Errno(
                    sys::errno_of(&e),
                    Decision::Emulated,
                    Reason::OwnPty,
                ));
            }
        };
        let named = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
        let same = match (sys::facts(slave.as_fd()), std::fs::metadata(named)) {
            (Ok(ours), Ok(there)) => {
                use std::os::unix::fs::MetadataExt;
                ours.dev == there.dev() && ours.ino == there.ino()
            }
            _ => false,
        };
        if !same {
            return leave;
        }
        Some(Answer::Fd {
            fd: slave,
            cloexec: flags & c::O_CLOEXEC != 0,
            reason: Reason::OwnPty,
            undo: None,
        })
    }
}

/// Descriptors of a job's thread looked at for a pty master, at most.
pub(super) const MAX_FDS_SCANNED: usize = 4096;

/// `N` of `/dev/pts/N`, written exactly as `ptsname()` writes it (no
/// leading zeros, nothing around it).
pub(super) fn pts_index(path: &[u8]) -> Option<u32> {
    let digits = path.strip_prefix(b"/dev/pts/")?;
    let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (n.to_string().as_bytes() == digits).then_some(n)
}

/// The supervisor's own copy of a descriptor in thread `tid`'s table that
/// is the master of pty `index`. The `/proc` link (a `ptmx`) only picks
/// candidates; `TIOCGPTN` on the copy decides.
pub(super) fn held_master(tid: i32, pidfd: BorrowedFd<'_>, index: u32) -> Option<OwnedFd> {
    let fds = std::fs::read_dir(format!("/proc/{tid}/fd")).ok()?;
    for entry in fds.take(MAX_FDS_SCANNED).flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|f| f.parse().ok()) else {
            continue;
        };
        let is_ptmx = std::fs::read_link(entry.path())
            .is_ok_and(|link| link.as_os_str().as_bytes().ends_with(b"/ptmx"));
        if !is_ptmx {
            continue;
        }
        let Ok(ours) = sys::pidfd_getfd(pidfd, fd) else {
            continue;
        };
        if sys::pty_number(ours.as_fd()).is_ok_and(|n| n == index) {
            return Some(ours);
        }
    }
    None
}
