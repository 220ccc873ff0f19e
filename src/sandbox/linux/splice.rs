//! Zero-copy forwarding for the egress proxy: `splice(2)` moves bytes from
//! one socket into a pipe and from the pipe into the other socket without
//! copying them through user space. Both calls are non-blocking; the proxy
//! waits for readiness itself (tokio) and retries on `WouldBlock`.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};

/// A pipe used as the in-kernel buffer of one direction.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

/// The pipe's capacity asked for (the kernel may give less; the default is
/// 64 KiB).
const CAPACITY: i32 = 1 << 20;

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        // A larger pipe means fewer calls per byte; refused (the
        // unprivileged limit in /proc/sys/fs/pipe-max-size) is fine.
        let _ = fcntl(&write, FcntlArg::F_SETPIPE_SZ(CAPACITY));
        Ok(Pipe { read, write })
    }

    fn flags() -> SpliceFFlags {
        SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK
    }

    /// Move up to `max` bytes from `src` into the pipe; `Ok(0)` at EOF.
    pub fn fill_from(&self, src: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        Ok(splice(src, None, &self.write, None, max, Self::flags())?)
    }

    /// Move up to `len` bytes from the pipe into `dst`.
    pub fn drain_to(&self, dst: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        Ok(splice(&self.read, None, dst, None, len, Self::flags())?)
    }
}

/// `shutdown(fd, SHUT_WR)`: the peer sees EOF; reading goes on.
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    Ok(nix::sys::socket::shutdown(
        fd.as_raw_fd(),
        nix::sys::socket::Shutdown::Write,
    )?)
}
