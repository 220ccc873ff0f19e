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
