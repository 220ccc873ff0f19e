//! Seccomp user-notification plumbing for the supervisor: the listener
//! ioctls, reading the job's memory, taking its descriptors and the few
//! `*at` calls the supervisor performs on its own descriptors.
//!
//! This is the only place with the `SECCOMP_IOCTL_NOTIF_*` ioctls. It makes
//! no decision: the notification server (`notify_server`) decides, with
//! the plan's rules and vocabulary (`plan::fs`, `plan::notify`); this module
//! only translates.
//! Every buffer is bounded; every descriptor this module opens is
//! `O_CLOEXEC`.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Longest path the supervisor copies from the job, NUL included (the
/// kernel's own `PATH_MAX`).
pub const PATH_MAX: usize = 4096;
/// Longest socket address the kernel accepts (`sizeof(struct sockaddr_storage)`).
pub const SOCKADDR_MAX: usize = 128;
/// `offsetof(struct sockaddr_un, sun_path)`.
pub const SUN_PATH_OFFSET: usize = 2;
/// `sizeof(struct sockaddr_un)`.
pub const SOCKADDR_UN_LEN: usize = size_of::<libc::sockaddr_un>();

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (linux/seccomp.h, 6.6): wake the
/// notifying thread on the supervisor's CPU instead of a cross-CPU wake-up.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

/// Constants the decision logic needs, so it names no `libc` item itself.
/// Numbers of the calls the plan names (for the calls it refuses outright).
pub use super::seccomp::syscall_number;

pub mod consts {
    pub const AT_FDCWD: i32 = libc::AT_FDCWD;
    pub const AT_REMOVEDIR: i32 = libc::AT_REMOVEDIR;
    pub const AF_UNIX: i32 = libc::AF_UNIX;
    pub const AF_INET: i32 = libc::AF_INET;
    pub const AF_INET6: i32 = libc::AF_INET6;
    pub const ENETUNREACH: i32 = libc::ENETUNREACH;
    pub const RENAME_NOREPLACE: u32 = libc::RENAME_NOREPLACE;
    pub const RENAME_EXCHANGE: u32 = libc::RENAME_EXCHANGE;

    pub const O_ACCMODE: i32 = libc::O_ACCMODE;
    pub const O_CREAT: i32 = libc::O_CREAT;
    pub const O_RDWR: i32 = libc::O_RDWR;
    pub const O_NOCTTY: i32 = libc::O_NOCTTY;
    pub const O_EXCL: i32 = libc::O_EXCL;
    pub const O_TRUNC: i32 = libc::O_TRUNC;
    pub const O_RDONLY: i32 = libc::O_RDONLY;
    pub const O_WRONLY: i32 = libc::O_WRONLY;
    pub const O_CLOEXEC: i32 = libc::O_CLOEXEC;
    pub const O_NOFOLLOW: i32 = libc::O_NOFOLLOW;
    pub const O_NONBLOCK: i32 = libc::O_NONBLOCK;
    pub const O_PATH: i32 = libc::O_PATH;
    pub const O_DIRECTORY: i32 = libc::O_DIRECTORY;
    /// Flags of an `O_CREAT` open that the supervisor reproduces on the
    /// file it creates (file-description flags and harmless hints).
    pub const O_KEPT: i32 = libc::O_ACCMODE
        | libc::O_APPEND
        | libc::O_NONBLOCK
        | libc::O_DSYNC
        | libc::O_SYNC
        | libc::O_DIRECT
        | libc::O_NOATIME
        | libc::O_LARGEFILE;
    /// Flags accepted but not reproduced: `O_CREAT|O_EXCL|O_NOFOLLOW` are
    /// always added, `O_TRUNC` means nothing on a new file, `O_CLOEXEC`
    /// travels as the descriptor flag, `O_NOCTTY` only matters for ttys.
    pub const O_ABSORBED: i32 = libc::O_CREAT
        | libc::O_EXCL
        | libc::O_TRUNC
        | libc::O_CLOEXEC
        | libc::O_NOCTTY
        | libc::O_NOFOLLOW
        | KERNEL_O_LARGEFILE;
    /// The kernel's own `O_LARGEFILE` bit, which raw callers pass even on
    /// 64-bit (where libc defines `O_LARGEFILE` as 0) and the kernel sets
    /// by itself anyway.
    #[cfg(target_arch = "x86_64")]
    pub const KERNEL_O_LARGEFILE: i32 = 0o100000;
    #[cfg(not(target_arch = "x86_64"))]
    pub const KERNEL_O_LARGEFILE: i32 = libc::O_LARGEFILE;

    pub const EACCES: i32 = libc::EACCES;
    pub const EPERM: i32 = libc::EPERM;
    pub const EXDEV: i32 = libc::EXDEV;
    pub const EEXIST: i32 = libc::EEXIST;
    pub const EINVAL: i32 = libc::EINVAL;
    pub const EIO: i32 = libc::EIO;
    pub const ENOENT: i32 = libc::ENOENT;
    pub const ENOTSOCK: i32 = libc::ENOTSOCK;
    pub const ECONNREFUSED: i32 = libc::ECONNREFUSED;
    pub const ESRCH: i32 = libc::ESRCH;
    pub const EBADF: i32 = libc::EBADF;
    pub const EFAULT: i32 = libc::EFAULT;
    pub const EAGAIN: i32 = libc::EAGAIN;
    pub const ENOSYS: i32 = libc::ENOSYS;
}

/// The notified system calls the supervisor knows, whatever their number
/// on this architecture (aarch64 has only the `*at` forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Open,
    Openat,
    Creat,
    Mkdir,
    Mkdirat,
    Rename,
    Renameat,
    Renameat2,
    Unlink,
    Unlinkat,
    Rmdir,
    Symlink,
    Symlinkat,
    /// Notified only to refuse a nested `.git`; Landlock decides the rest.
    Link,
    Linkat,
    Mknod,
    Mknodat,
    Connect,
    /// `ioctl`: notified for `TIOCGPTPEER` (the slave of a pseudo-terminal
    /// the job created) and for the refused terminal commands.
    Ioctl,
    /// A new process (`clone` without `CLONE_THREAD`, `fork`, `vfork`):
    /// notified only for `--max-memory` shares.
    Fork,
    /// A mode, owner or time change (`chmod*`, `chown*`, `utime*`): which
    /// one is in the number.
    Metadata,
    /// Anything else: a call the plan refuses outright (answered EPERM and
    /// recorded; allowed and recorded under `--audit`).
    Other,
}

impl Call {
    /// Creates, removes or renames a directory entry.
    pub fn is_creation(self) -> bool {
        !matches!(
            self,
            Call::Connect | Call::Ioctl | Call::Fork | Call::Metadata | Call::Other
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Call::Open => "open",
            Call::Openat => "openat",
            Call::Creat => "creat",
            Call::Mkdir => "mkdir",
            Call::Mkdirat => "mkdirat",
            Call::Rename => "rename",
            Call::Renameat => "renameat",
            Call::Renameat2 => "renameat2",
            Call::Unlink => "unlink",
            Call::Unlinkat => "unlinkat",
            Call::Rmdir => "rmdir",
            Call::Symlink => "symlink",
            Call::Symlinkat => "symlinkat",
            Call::Link => "link",
            Call::Linkat => "linkat",
            Call::Mknod => "mknod",
            Call::Mknodat => "mknodat",
            Call::Connect => "connect",
            Call::Ioctl => "ioctl",
            Call::Fork => "clone",
            Call::Metadata => "metadata",
            Call::Other => "other",
        }
    }

    /// The call for a native system-call number.
    pub fn from_nr(nr: i64) -> Call {
        #[cfg(target_arch = "x86_64")]
        {
            match nr {
                libc::SYS_open => return Call::Open,
                libc::SYS_creat => return Call::Creat,
                libc::SYS_mkdir => return Call::Mkdir,
                libc::SYS_rename => return Call::Rename,
                libc::SYS_unlink => return Call::Unlink,
                libc::SYS_rmdir => return Call::Rmdir,
                libc::SYS_symlink => return Call::Symlink,
                libc::SYS_link => return Call::Link,
                libc::SYS_mknod => return Call::Mknod,
                libc::SYS_fork | libc::SYS_vfork => return Call::Fork,
                libc::SYS_chmod
                | libc::SYS_chown
                | libc::SYS_lchown
                | libc::SYS_utime
                | libc::SYS_utimes
                | libc::SYS_futimesat => return Call::Metadata,
                _ => {}
            }
        }
        match nr {
            libc::SYS_clone => Call::Fork,
            libc::SYS_openat => Call::Openat,
            libc::SYS_mkdirat => Call::Mkdirat,
            libc::SYS_renameat => Call::Renameat,
            libc::SYS_renameat2 => Call::Renameat2,
            libc::SYS_unlinkat => Call::Unlinkat,
            libc::SYS_symlinkat => Call::Symlinkat,
            libc::SYS_linkat => Call::Linkat,
            libc::SYS_mknodat => Call::Mknodat,
            libc::SYS_connect => Call::Connect,
            libc::SYS_ioctl => Call::Ioctl,
            libc::SYS_fchmod
            | libc::SYS_fchmodat
            | libc::SYS_fchmodat2
            | libc::SYS_fchown
            | libc::SYS_fchownat
            | libc::SYS_utimensat => Call::Metadata,
            _ => Call::Other,
        }
    }

    /// The native number of this call, if the architecture has it.
    pub fn nr(self) -> Option<i64> {
        #[cfg(target_arch = "x86_64")]
        {
            let legacy = match self {
                Call::Open => Some(libc::SYS_open),
                Call::Creat => Some(libc::SYS_creat),
                Call::Mkdir => Some(libc::SYS_mkdir),
                Call::Rename => Some(libc::SYS_rename),
                Call::Unlink => Some(libc::SYS_unlink),
                Call::Rmdir => Some(libc::SYS_rmdir),
                Call::Symlink => Some(libc::SYS_symlink),
                Call::Link => Some(libc::SYS_link),
                Call::Mknod => Some(libc::SYS_mknod),
                _ => None,
            };
            if legacy.is_some() {
                return legacy;
            }
        }
        match self {
            Call::Openat => Some(libc::SYS_openat),
            Call::Mkdirat => Some(libc::SYS_mkdirat),
            Call::Renameat => Some(libc::SYS_renameat),
            Call::Renameat2 => Some(libc::SYS_renameat2),
            Call::Unlinkat => Some(libc::SYS_unlinkat),
            Call::Symlinkat => Some(libc::SYS_symlinkat),
            Call::Linkat => Some(libc::SYS_linkat),
            Call::Mknodat => Some(libc::SYS_mknodat),
            Call::Connect => Some(libc::SYS_connect),
            Call::Ioctl => Some(libc::SYS_ioctl),
            _ => None,
        }
    }
}

/// `AUDIT_ARCH_*` of the architecture vetto was built for.
#[cfg(target_arch = "x86_64")]
pub const NATIVE_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
pub const NATIVE_ARCH: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const NATIVE_ARCH: u32 = 0;

/// One received notification, copied out of the kernel's struct.
#[derive(Debug, Clone, Copy)]
pub struct Notif {
    pub id: u64,
    /// A thread id, not a process id.
    pub tid: i32,
    pub call: Call,
    /// The call came in with the native architecture's numbering (not
    /// i386 or x32, whose numbers mean other calls).
    pub native: bool,
    /// The raw system-call number (to name a call refused outright).
    pub nr: i64,
    pub args: [u64; 6],
}

/// The listener descriptor returned by `SECCOMP_FILTER_FLAG_NEW_LISTENER`.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The errno of an `io::Error`, `EIO` when it carries none.
pub fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Listener {
    pub fn new(fd: OwnedFd) -> Self {
        Listener { fd }
    }

    /// Ask for synchronous wake-ups (6.6+). Only a speed-up: about 35 µs
    /// per notification on a 2-vCPU VM.
    pub fn set_sync_wakeup(&self) -> io::Result<()> {
        let flags: u64 = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
        // SAFETY: the ioctl reads a u64 from a valid pointer on our own fd.
        cvt(unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                &flags,
            )
        })?;
        Ok(())
    }

    /// Wait for the next notification. `Ok(None)`: nothing to answer
    /// (withdrawn, interrupted, or no task left — see [`Listener::hung_up`]).
    pub fn recv(&self) -> io::Result<Option<Notif>> {
        // SAFETY: an all-zero seccomp_notif is valid and the kernel insists on it.
        let mut raw: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the kernel writes one seccomp_notif into our zeroed struct.
        let ret = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut raw,
            )
        };
        if ret < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EINTR) => Ok(None),
                _ => Err(err),
            };
        }
        // x32 calls arrive with the x86_64 arch and bit 30 set in the number.
        let x32 = cfg!(target_arch = "x86_64") && raw.data.nr & 0x4000_0000 != 0;
        let native = raw.data.arch == NATIVE_ARCH && !x32;
        Ok(Some(Notif {
            id: raw.id,
            tid: raw.pid as i32,
            call: if native {
                Call::from_nr(i64::from(raw.data.nr))
            } else {
                Call::Other
            },
            native,
            nr: i64::from(raw.data.nr),
            args: raw.data.args,
        }))
    }

    /// Let the sandbox's init start the job: with `--max-memory` shares
    /// its `fork` is notified too, and it comes before the supervisor
    /// serves notifications (it waits for the job's `execve`). The first
    /// notification on a new listener is that fork (nothing else runs in
    /// the filter yet); anything else is refused. Returns at once if the
    /// init is gone.
    pub fn pass_first_fork(&self) -> io::Result<()> {
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; waits without a timeout.
            let ret = unsafe { libc::poll(&mut pfd, 1, -1) };
            if ret < 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(err);
            }
            if pfd.revents & libc::POLLIN == 0 {
                // Hung up: the init died before forking.
                return Ok(());
            }
            let Some(n) = self.recv()? else {
                continue;
            };
            return if n.native && n.call == Call::Fork {
                self.respond_continue(n.id)
            } else {
                self.respond_errno(n.id, libc::EPERM)
            };
        }
    }

    /// No task is left in the filter: the job is gone.
    pub fn hung_up(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let ret = unsafe { libc::poll(&mut pfd, 1, 0) };
        ret > 0 && pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
    }

    /// The notifying thread is still blocked in this very call: anything
    /// read about `tid` before this returned true was about that thread.
    pub fn id_valid(&self, id: u64) -> bool {
        // SAFETY: the ioctl reads a u64 from a valid pointer on our own fd.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
    }

    fn send(&self, id: u64, val: i64, error: i32, flags: u32) -> io::Result<()> {
        let mut resp = libc::seccomp_notif_resp {
            id,
            val,
            error,
            flags,
        };
        // SAFETY: the kernel reads one seccomp_notif_resp from a valid pointer.
        cvt(unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp,
            )
        })?;
        Ok(())
    }

    /// Let the kernel run the call as the job asked: only right where an
    /// in-kernel policy (Landlock) decides.
    pub fn respond_continue(&self, id: u64) -> io::Result<()> {
        self.send(id, 0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32)
    }

    /// Fail the call with `errno` (positive).
    pub fn respond_errno(&self, id: u64, errno: i32) -> io::Result<()> {
        self.send(id, 0, -errno.abs(), 0)
    }

    /// Succeed with return value `val`.
    pub fn respond_value(&self, id: u64, val: i64) -> io::Result<()> {
        self.send(id, val, 0, 0)
    }

    /// Install `fd` in the job and answer the call with its number, in one
    /// step (`SECCOMP_ADDFD_FLAG_SEND`).
    pub fn add_fd_send(&self, id: u64, fd: BorrowedFd<'_>, cloexec: bool) -> io::Result<i32> {
        let addfd = libc::seccomp_notif_addfd {
            id,
            flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
            srcfd: fd.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: the kernel reads one seccomp_notif_addfd from a valid pointer.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) })
    }
}

/// Read up to `buf.len()` bytes of `tid`'s memory at `addr`. Stops at the
/// first unreadable page, so a string near the end of a mapping still
/// reads. `process_vm_readv` first, `/proc/TID/mem` if that is refused.
pub fn read_remote(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    match read_remote_pvr(tid, addr, buf) {
        Ok(n) => Ok(n),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => read_remote_mem(tid, addr, buf),
        Err(e) => Err(e),
    }
}

const PAGE: u64 = 4096;

fn read_remote_pvr(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    // Split the remote range at page boundaries: a partial transfer stops
    // between iovec elements, never inside one.
    let mut remote = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 3];
    let mut count = 0;
    let mut at = addr;
    let end = addr.saturating_add(buf.len() as u64);
    while at < end && count < remote.len() {
        let next = ((at / PAGE) + 1).saturating_mul(PAGE).min(end);
        remote[count] = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: (next - at) as usize,
        };
        count += 1;
        at = next;
    }
    let covered = (at - addr) as usize;
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: covered,
    };
    // SAFETY: the local iovec covers `covered` <= buf.len() writable bytes;
    // remote addresses are only read by the kernel in the other process.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, remote.as_ptr(), count as _, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn read_remote_mem(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let path = format!("/proc/{tid}/mem");
    let file = std::fs::File::open(path)?;
    let mut done = 0;
    while done < buf.len() {
        let at = addr.saturating_add(done as u64);
        let chunk = ((PAGE - at % PAGE) as usize).min(buf.len() - done);
        match std::os::unix::fs::FileExt::read_at(&file, &mut buf[done..done + chunk], at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// Copy a NUL-terminated string of at most `max` bytes (NUL included)
/// from the job, once. `Ok(None)`: no NUL within `max` bytes.
pub fn read_remote_cstr(tid: i32, addr: u64, max: usize) -> io::Result<Option<CString>> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut buf = vec![0u8; max];
    let n = read_remote(tid, addr, &mut buf)?;
    let Some(end) = buf[..n].iter().position(|&b| b == 0) else {
        return Ok(None);
    };
    buf.truncate(end);
    // The position search guarantees there is no interior NUL.
    Ok(CString::new(buf).ok())
}

/// `pidfd_open(tid, PIDFD_THREAD)` (6.9+). Older kernels open pidfds of
/// thread-group leaders only: there, the pidfd of `tid`'s process (whose
/// descriptor table the thread shares). Callers check afterwards that the
/// notification is still live, so `tid` was not reused meanwhile.
pub fn pidfd_open_thread(tid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, libc::PIDFD_THREAD) };
    let ret = match cvt_long(ret) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let leader = super::proc::status_field(tid, "Tgid:")
                .and_then(|p| i32::try_from(p).ok())
                .ok_or(e)?;
            // SAFETY: as above, without flags.
            cvt_long(unsafe { libc::syscall(libc::SYS_pidfd_open, leader, 0) })?
        }
        Err(e) => return Err(e),
    };
    // SAFETY: the kernel returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `ioctl(master, TIOCGPTPEER, flags | O_NOCTTY | O_CLOEXEC)`: open the
/// slave of the pseudo-terminal whose master is `master`, on the
/// supervisor's own descriptor. The kernel itself checks that `master` is
/// a pseudo-terminal master (`ENOTTY` otherwise). `O_NOCTTY` is always
/// added: the terminal must never become the supervisor's own.
pub fn pty_peer(master: BorrowedFd<'_>, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: TIOCGPTPEER takes an integer argument and returns a new fd or -1.
    let ret = cvt(unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            // The request's C type is the libc's (glibc: unsigned long, musl: int).
            TIOCGPTPEER as _,
            flags | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(ret) })
}

/// `ioctl(fd, TIOCGPTN)`: the index `N` of the pseudo-terminal whose
/// master is `fd` (its slave is `pts/N`). An error for anything else.
pub fn pty_number(master: BorrowedFd<'_>) -> io::Result<u32> {
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one unsigned int through a valid pointer.
    cvt(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTN, &mut n) })?;
    Ok(n)
}

/// `TIOCGPTPEER` (`<asm-generic/ioctls.h>`, Linux 4.13), `_IO('T', 0x41)`.
pub const TIOCGPTPEER: libc::c_ulong = 0x5441;

/// Duplicate the job's descriptor `target` into this process (`O_CLOEXEC`).
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes integers and returns a new fd or -1.
    let ret =
        cvt_long(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) })?;
    // SAFETY: the kernel returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `struct open_how` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Resolution flags for [`openat2`].
pub mod resolve {
    pub const NO_XDEV: u64 = libc::RESOLVE_NO_XDEV;
    pub const NO_MAGICLINKS: u64 = libc::RESOLVE_NO_MAGICLINKS;
    pub const NO_SYMLINKS: u64 = libc::RESOLVE_NO_SYMLINKS;
    pub const BENEATH: u64 = libc::RESOLVE_BENEATH;
    /// Absolute paths and `..` stay inside the directory given: used with
    /// the job's `/proc/TID/root`, so a path means what it means to the job
    /// (at FULL its root is not ours).
    pub const IN_ROOT: u64 = libc::RESOLVE_IN_ROOT;
}

/// `openat2(dir, path, {flags | O_CLOEXEC, mode, resolve})`.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u32 as u64,
        mode: u64::from(mode),
        resolve,
    };
    loop {
        // SAFETY: valid C string and open_how for the duration of the call.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how,
                size_of::<OpenHow>(),
            )
        };
        match cvt_long(ret) {
            // SAFETY: the kernel returned a fresh descriptor that we now own.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
            Err(e) => return Err(e),
        }
    }
}

fn proc_path(tid: i32, what: &str) -> CString {
    // Digits and a fixed suffix: no NUL can occur.
    CString::new(format!("/proc/{tid}/{what}")).unwrap_or_default()
}

/// An `O_PATH|O_DIRECTORY` descriptor of the job thread's working
/// directory (`what` = `cwd`), root (`root`) or an fd (`fd/N`). Follows
/// the magic link on purpose: it names the job's own directory.
pub fn open_proc_dir(tid: i32, what: &str) -> io::Result<OwnedFd> {
    let path = proc_path(tid, what);
    // SAFETY: valid C string; the result is checked.
    let fd = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The facts of the directory `rel` (relative) names from the job
/// thread's `cwd` or `fd/N`, in one `statx` that follows every link on
/// the way. A hint, never the directory the supervisor acts on: it can
/// only show that a name is in none of the directories the supervisor
/// looks after (what is, is then resolved exactly). It also returns the
/// directory's birth time where the filesystem keeps one: `(dev, ino,
/// birth)` names one directory for as long as it exists and is never
/// reused by a later one, unlike an inode number. The `Err` is the errno.
pub fn proc_dir_identity_at(
    tid: i32,
    what: &str,
    rel: &[u8],
) -> Result<(FileFacts, Option<(i64, u32)>), i32> {
    let mut bytes = format!("/proc/{tid}/{what}/").into_bytes();
    bytes.extend_from_slice(rel);
    let path = CString::new(bytes).map_err(|_| libc::EINVAL)?;
    // SAFETY: an all-zero statx is a valid out-buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // The system call itself, not glibc's `statx`: the standard library
    // declares that symbol weak, and in the static, LTO-built binary the
    // Action installs the two declarations merge into a weak reference
    // that nothing resolves — a call through a null pointer at the first
    // notified creation (`weak_libc_symbols_are_never_called_directly`).
    // SAFETY: valid C string and out-pointer; AT_FDCWD is ignored for an
    // absolute path.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_statx,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_TYPE | libc::STATX_INO | libc::STATX_NLINK | libc::STATX_BTIME,
            &mut st as *mut libc::statx,
        )
    };
    if ret < 0 {
        return Err(errno_of(&io::Error::last_os_error()));
    }
    let mode = u32::from(st.stx_mode);
    if mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(libc::ENOTDIR);
    }
    let facts = FileFacts {
        dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        mode,
        nlink: u64::from(st.stx_nlink),
    };
    let birth = (st.stx_mask & libc::STATX_BTIME != 0)
        .then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec));
    Ok((facts, birth))
}

/// The facts of the directory behind the job thread's `cwd` or `fd/N`
/// magic link, without opening it (one `stat`).
pub fn proc_dir_facts(tid: i32, what: &str) -> io::Result<FileFacts> {
    dir_facts(&proc_path(tid, what))
}

/// One `stat` of `path`, which must be a directory.
fn dir_facts(path: &CStr) -> io::Result<FileFacts> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    cvt(unsafe { libc::stat(path.as_ptr(), &mut st) })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(FileFacts {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        nlink: st.st_nlink,
    })
}

/// An `O_PATH|O_DIRECTORY|O_NOFOLLOW` descriptor of an absolute path of
/// the supervisor's own view (a carved directory, `/`).
pub fn open_dir_path(path: &std::path::Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: valid C string; the result is checked.
    let fd = cvt(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The job thread's umask, from `/proc/TID/status`.
pub fn thread_umask(tid: i32) -> io::Result<u32> {
    let status = std::fs::read(format!("/proc/{tid}/status"))?;
    for line in status.split(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"Umask:") {
            let text = std::str::from_utf8(rest)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            return u32::from_str_radix(text.trim(), 8)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
        }
    }
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

/// What identifies an inode, and the facts the supervisor checks about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFacts {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub nlink: u64,
}

impl FileFacts {
    pub fn is_regular(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    pub fn is_socket(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFSOCK
    }
}

/// `fstat` of a descriptor (works on `O_PATH` ones).
pub fn facts(fd: BorrowedFd<'_>) -> io::Result<FileFacts> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and out-pointer.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(FileFacts {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        nlink: st.st_nlink,
    })
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid fd and C string.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })?;
    Ok(())
}

/// `unlinkat(dir, name, flags)`.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<()> {
    // SAFETY: valid fd and C string.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })?;
    Ok(())
}

/// `renameat2(old_dir, old, new_dir, new, flags)`.
pub fn renameat2(
    old_dir: BorrowedFd<'_>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
    flags: u32,
) -> io::Result<()> {
    // The system call itself: the musl that Rust's musl target links has
    // no `renameat2` wrapper.
    // SAFETY: valid fds and NUL-terminated C strings that outlive the call;
    // renameat2 takes exactly these five arguments.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            flags,
        )
    })?;
    Ok(())
}

/// `symlinkat(target, dir, name)`.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: valid fd and C strings.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })?;
    Ok(())
}

/// Give this thread its own filesystem context (cwd, root, umask) and a
/// zero umask there, so modes the supervisor computes from the job's
/// umask are applied exactly, without touching the rest of the process.
pub fn private_fs_zero_umask() -> io::Result<()> {
    // SAFETY: unshare(CLONE_FS) affects only the calling thread.
    cvt(unsafe { libc::unshare(libc::CLONE_FS) })?;
    // SAFETY: umask cannot fail; with a private fs_struct it is per-thread.
    unsafe { libc::umask(0) };
    Ok(())
}

mod sockets;
pub use sockets::*;

/// The path the kernel gives for an open descriptor (`/proc/self/fd/N`).
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Make a C string of raw name bytes (no NUL inside by construction).
pub fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The directory may compare names without regard to case or Unicode
/// form: a casefolded directory (`chattr +F`) or a filesystem known for it.
/// Unknown answers count as yes, so the caller stays conservative.
pub fn case_insensitive_dir(path: &std::path::Path) -> bool {
    const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;
    const INSENSITIVE: &[i64] = &[
        0x4d44,      // msdos / vfat
        0x2011_bab0, // exfat
        0x5346_544e, // ntfs (fuse/ntfs-3g reports fuse)
        0x7366_746e, // ntfs3
        0x482b,      // hfs+
        0x4244,      // hfs
        0xff53_4d42, // cifs
        0xfe53_4d42, // smb2
        0x0102_1997, // 9p
        0x6573_5546, // fuse (unknown underneath)
        0x786f_4256, // vboxsf
    ];
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return true;
    }
    // SAFETY: a fresh descriptor that we now own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero statfs is a valid out-buffer.
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and out-pointer.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut sfs) } != 0 {
        return true;
    }
    #[allow(clippy::unnecessary_cast, reason = "f_type's width differs by target")]
    let fs_type = sfs.f_type as i64;
    if INSENSITIVE.contains(&fs_type) {
        return true;
    }
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one long into a valid pointer.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) };
    if ret != 0 {
        // tmpfs and others without inode flags: not casefolded unless
        // mounted with casefold, which also exposes the flag.
        return !matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTTY) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
        );
    }
    flags & FS_CASEFOLD_FL != 0
}

/// An `O_PATH|O_NOFOLLOW` look at `name` in `dir`, for its facts.
pub fn facts_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<FileFacts> {
    let fd = openat2(
        dir,
        name,
        libc::O_PATH | libc::O_NOFOLLOW,
        0,
        resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS,
    )?;
    facts(fd.as_fd())
}

/// Parent process id of `pid` from `/proc/PID/stat`.
pub fn parent_of(pid: i32) -> io::Result<i32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat"))?;
    // The command name may contain spaces and parentheses: skip to the
    // last ')'.
    let close = stat
        .iter()
        .rposition(|&b| b == b')')
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let rest = std::str::from_utf8(&stat[close + 1..])
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next();
    fields
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Inodes of the listening unix sockets bound to the abstract `name`
/// (`/proc/net/unix`, this network namespace). `Ok(None)` when the name
/// cannot be matched unambiguously in that file (the kernel prints NUL
/// as `@` and other bytes raw, so spaces, `@` and control bytes are out).
pub fn abstract_listeners(tid: i32, name: &[u8]) -> io::Result<Option<Vec<u64>>> {
    const SO_ACCEPTCON: u32 = 0x0001_0000;
    if name.is_empty() || name.iter().any(|&b| b <= b' ' || b == b'@' || b >= 0x7f) {
        return Ok(None);
    }
    // The job's network namespace (its own at FULL), where the name lives.
    let table = std::fs::read(format!("/proc/{tid}/net/unix"))?;
    let mut inodes = Vec::new();
    for line in table.split(|&b| b == b'\n').skip(1) {
        let fields: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty())
            .collect();
        let (Some(flags), Some(inode), Some(path)) = (fields.get(3), fields.get(6), fields.get(7))
        else {
            continue;
        };
        let parse_hex = |f: &[u8]| {
            std::str::from_utf8(f)
                .ok()
                .and_then(|t| u32::from_str_radix(t, 16).ok())
        };
        if parse_hex(flags).is_none_or(|f| f & SO_ACCEPTCON == 0) {
            continue;
        }
        if path.first() == Some(&b'@') && &path[1..] == name {
            if let Some(ino) = std::str::from_utf8(inode).ok().and_then(|t| t.parse().ok()) {
                inodes.push(ino);
            }
        }
    }
    Ok(Some(inodes))
}

/// Process ids of every process that descends from this one (the job's
/// whole tree when this is the subreaper supervisor).
pub fn descendants() -> io::Result<Vec<i32>> {
    let own = own_pid();
    let mut parent = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Ok(ppid) = parent_of(pid) {
            parent.insert(pid, ppid);
        }
    }
    let mut found = Vec::new();
    for &pid in parent.keys() {
        let mut at = pid;
        // Bounded walk: pid chains are short, a cycle (pid reuse) is not.
        for _ in 0..4096 {
            match parent.get(&at) {
                Some(&p) if p == own => {
                    found.push(pid);
                    break;
                }
                Some(&p) if p > 1 => at = p,
                _ => break,
            }
        }
    }
    Ok(found)
}

/// Process `pid` has a descriptor of the socket with this inode.
pub fn holds_socket(pid: i32, inode: u64) -> bool {
    let want = format!("socket:[{inode}]");
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str().as_bytes() == want.as_bytes())
    })
}

/// This process's id.
pub fn own_pid() -> i32 {
    std::process::id() as i32
}

#[doc(hidden)]
pub mod testing;

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use super::sockets::{canonical_local, listens_in};
    use super::*;

    #[test]
    fn reading_own_memory_stops_at_the_string_end() {
        let s = CString::new("hello/world").unwrap();
        let got = read_remote_cstr(own_pid(), s.as_ptr() as u64, PATH_MAX).unwrap();
        assert_eq!(got.as_deref(), Some(s.as_c_str()));
    }

    #[test]
    fn a_path_without_nul_within_path_max_is_refused() {
        let long = vec![b'a'; PATH_MAX + 10];
        let got = read_remote_cstr(own_pid(), long.as_ptr() as u64, PATH_MAX).unwrap();
        assert_eq!(got, None);
    }

    #[test]
    fn syscall_numbers_round_trip() {
        for call in [
            Call::Openat,
            Call::Mkdirat,
            Call::Renameat2,
            Call::Connect,
            Call::Symlinkat,
        ] {
            assert_eq!(Call::from_nr(call.nr().unwrap()), call);
        }
    }

    #[test]
    fn parent_of_self_is_our_parent() {
        // SAFETY: getppid cannot fail.
        let ppid = unsafe { libc::getppid() };
        assert_eq!(parent_of(own_pid()).unwrap(), ppid);
    }

    /// The tables as this kernel prints them (little-endian words).
    #[test]
    fn a_listener_is_found_by_address_port_and_state() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 100 0 0 10 0
";
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5 1 0000000000000000 100 0 0 10 0
";
        let at = |s: &str| canonical_local(s.parse().unwrap());
        let rows = |t: &str| -> Vec<String> { t.lines().skip(1).map(str::to_string).collect() };
        let (v4, v6) = (rows(v4), rows(v6));
        if cfg!(target_endian = "little") {
            // 127.0.0.1:5432 listens; :22 on every address.
            assert!(listens_in(&v4, at("127.0.0.1:5432")));
            assert!(listens_in(&v4, at("127.0.0.1:22")));
            assert!(listens_in(&v4, at("0.0.0.0:5432")));
            assert!(!listens_in(&v4, at("127.0.0.2:5432")));
            // Established, not listening.
            assert!(!listens_in(&v4, at("127.0.0.1:8080")));
            // [::1]:3000, and :80 on every address of both families.
            assert!(listens_in(&v6, at("[::1]:3000")));
            assert!(!listens_in(&v6, at("127.0.0.1:3000")));
            assert!(listens_in(&v6, at("127.0.0.1:80")));
            assert!(listens_in(&v6, at("[::ffff:127.0.0.1]:80")));
            assert!(!listens_in(&v4, at("[::1]:5432")));
        }
        assert!(!listens_in(
            &rows("garbage\n 0: zz:zz zz 0A\n"),
            at("127.0.0.1:1")
        ));
    }

    #[test]
    fn this_hosts_own_listener_is_seen_through_proc() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert!(tcp_listens(std::path::Path::new("/proc/self/net"), addr));
    }
}
