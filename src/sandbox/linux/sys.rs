//! Thin safe wrappers over the raw syscalls no crate covers. Every `unsafe`
//! block says why it is sound.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

// The filter is installed by the floor's one wrapper, which the host
// probe's listener test uses too.
pub use crate::sys::caps::seccomp_set_filter;

/// Mark every descriptor from `first` upwards close-on-exec, so nothing the
/// caller of vetto inherited leaks into the job.
pub fn cloexec_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on our own fds.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Clear `FD_CLOEXEC` so `fd` survives the re-exec into the stage. Only
/// async-signal-safe calls: it runs between fork and exec.
pub fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd number has no memory-safety requirements.
    let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Whether `fd` is an open descriptor of this process.
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD on any fd number has no memory-safety requirements.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Set `FD_CLOEXEC` on `fd`.
pub fn set_cloexec(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a valid borrowed fd has no memory-safety requirements.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Have the kernel send the calling thread SIGIO whenever `fd` has input,
/// for a `sigtimedwait` in that thread (which must block SIGIO).
///
/// Thread-directed, so no other thread is interrupted, and with a handler
/// that does nothing (restarting calls), so a SIGIO still pending when the
/// thread unblocks it is harmless rather than fatal.
pub fn signal_on_input(fd: BorrowedFd<'_>) -> io::Result<()> {
    extern "C" fn ignore(_: libc::c_int) {}
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(ignore),
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGIO, &action) }?;
    // <asm-generic/fcntl.h>; the libc crate does not carry them.
    #[repr(C)]
    struct FOwnerEx {
        kind: libc::c_int,
        pid: libc::pid_t,
    }
    const F_SETOWN_EX: libc::c_int = 15;
    const F_OWNER_TID: libc::c_int = 0;
    let owner = FOwnerEx {
        kind: F_OWNER_TID,
        pid: nix::unistd::gettid().as_raw(),
    };
    // SAFETY: `owner` is a valid f_owner_ex for the duration of the call.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), F_SETOWN_EX, &owner) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl on a valid borrowed fd has no memory-safety requirements.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_ASYNC) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A signal taken from the pending set.
#[derive(Debug, Clone, Copy)]
pub struct Caught {
    pub signo: i32,
    /// `si_code`: `SI_KERNEL` for terminal-generated signals (already sent
    /// to the whole foreground process group, so not to be forwarded).
    pub code: i32,
}

impl Caught {
    /// Sent by a process with kill(2)/sigqueue(2) rather than by the kernel.
    pub fn from_user(&self) -> bool {
        self.code == libc::SI_USER || self.code == libc::SI_QUEUE || self.code == libc::SI_TKILL
    }
}

/// `sigtimedwait`: wait for one of the (blocked) signals in `set`.
pub fn sigtimedwait(set: &nix::sys::signal::SigSet, timeout: Duration) -> Option<Caught> {
    let ts = libc::timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    // SAFETY: zeroed siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: all pointers are valid for the duration of the call.
    let signo = unsafe { libc::sigtimedwait(set.as_ref(), &mut info, &ts) };
    if signo <= 0 {
        return None;
    }
    Some(Caught {
        signo,
        code: info.si_code,
    })
}

/// `MOUNT_ATTR_RDONLY` for [`mount_setattr`].
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID` for [`mount_setattr`].
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(AT_FDCWD, path, AT_RECURSIVE, {attr_set})`: set flags on
/// a mount and every mount beneath it, keeping the flags a user namespace
/// may not clear (a plain remount would have to repeat them).
pub fn mount_setattr_recursive(path: &std::path::Path, attr_set: u64) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let attr = MountAttr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `c` and `attr` are valid for the call; the size matches the struct.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Join the user namespace and then the network namespace of process
/// `pid`, in one `setns` on its pidfd (the calling process must be
/// single-threaded, and own that user namespace from its parent).
pub fn join_user_and_net(pid: i32) -> io::Result<()> {
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: fd is a fresh pidfd we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
    nix::sched::setns(
        pidfd,
        nix::sched::CloneFlags::CLONE_NEWUSER | nix::sched::CloneFlags::CLONE_NEWNET,
    )?;
    Ok(())
}

/// Bring the loopback interface of the current network namespace up.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket(2) has no memory-safety requirements.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a zeroed ifreq is a valid value of this plain C struct.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq for SIOCGIFFLAGS/SIOCSIFFLAGS on our socket.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Drop every capability: the bounding set, the ambient set, and the
/// effective, permitted and inheritable sets. A job run by root would
/// otherwise keep CAP_SYS_PTRACE (reading other processes' environments
/// despite Landlock) and CAP_DAC_OVERRIDE; inside the FULL tier's user
/// namespace the setup held them all.
pub fn drop_all_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only.
        let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            // EINVAL: past the last capability this kernel knows. EPERM:
            // no CAP_SETPCAP, so nothing is held to drop (no_new_privs
            // already keeps an exec from gaining any).
            if matches!(err.raw_os_error(), Some(libc::EINVAL | libc::EPERM)) {
                break;
            }
            return Err(err);
        }
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data are valid v3 capset arguments (two data words).
    let ret = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Serve every allocation of 1 MiB or more with its own mmap, fixed (no
/// dynamic threshold). Each secret trap's thread allocates FUSE buffers of
/// 16 MiB; carved from a thread arena they would be zeroed page by page
/// (10 MiB resident per trap, half a second of page faults for 64 traps),
/// mapped fresh they stay untouched until the kernel writes a request.
pub fn large_allocations_from_mmap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only tunes the allocator; it takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// `prlimit`'s resource argument: glibc names its type, musl takes an int.
#[cfg(target_env = "gnu")]
type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type RlimitResource = libc::c_int;

/// `prlimit(pid, resource, new, &old)`: sets `new` when given; returns the
/// limit as it was.
pub fn prlimit(
    pid: i32,
    resource: RlimitResource,
    new: Option<&libc::rlimit64>,
) -> io::Result<libc::rlimit64> {
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let new_ptr = new.map_or(std::ptr::null(), |n| n as *const libc::rlimit64);
    // SAFETY: `new_ptr` is null or points at a live rlimit64 the kernel
    // only reads; `old` is a valid out-parameter for the call's duration.
    let rc = unsafe { libc::prlimit64(pid, resource, new_ptr, &mut old) };
    if rc == 0 {
        Ok(old)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The number of the pseudo-terminal whose master is `master` (`TIOCGPTN`:
/// its slave is `N` in the devpts instance it came from).
pub fn pty_number(master: BorrowedFd<'_>) -> io::Result<u32> {
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one unsigned int through the pointer, which
    // is valid and writable for the call.
    let ret = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTN as _, &mut n) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n)
}
