//! Host-side helpers for `vetto verify`: the outside-world stand-ins that
//! need Linux-only interfaces (abstract unix sockets) or a raw syscall.
//! Nothing here restricts anything; `verify` uses them to build the world
//! its probes attack and to observe the evidence.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

/// Listen on the abstract unix socket `@name` (the D-Bus/X11 kind of
/// socket that has no file, so path rules cannot cover it).
pub fn bind_abstract(name: &[u8]) -> io::Result<UnixListener> {
    UnixListener::bind_addr(&SocketAddr::from_abstract_name(name)?)
}

/// `kill(pid, SIGKILL)`: remove a daemon that escaped the session.
pub fn kill_process(pid: i32) -> io::Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(io::Error::from)
}

/// Where another process's environment block lives, from its
/// `/proc/PID/stat` (fields 50 and 51, `env_start`/`env_end`). Read by
/// verify *outside* the sandbox, so the probe inside gets a real target
/// even when its own view of `/proc` hides the addresses.
pub fn environ_range(pid: u32) -> io::Result<(usize, usize)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))?;
    let field = |n: usize| -> io::Result<usize> {
        rest.split_whitespace()
            .nth(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
    };
    let (start, end) = (field(50)?, field(51)?);
    if start == 0 || end <= start {
        return Err(io::Error::from(io::ErrorKind::PermissionDenied));
    }
    Ok((start, end - start))
}

/// `process_vm_readv`: read `len` bytes at `addr` in process `pid` — the
/// same access check as `PTRACE_ATTACH`, with a result that is evidence.
pub fn read_remote(pid: i32, addr: usize, len: usize) -> io::Result<Vec<u8>> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    let mut buf = vec![0u8; len.min(1 << 16)];
    let n = process_vm_readv(
        nix::unistd::Pid::from_raw(pid),
        &mut [io::IoSliceMut::new(&mut buf)],
        &[RemoteIoVec {
            base: addr,
            len: len.min(1 << 16),
        }],
    )
    .map_err(io::Error::from)?;
    buf.truncate(n);
    Ok(buf)
}
