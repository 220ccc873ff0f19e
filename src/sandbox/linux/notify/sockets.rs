//! The socket calls the notification server makes on its own copies of
//! the job's sockets: options, addresses, binds and connects, and the
//! kernel's socket tables.

use super::*;

fn getsockopt_int(sock: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut val: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid out-pointers sized for an int.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(val)
}

/// The address family of a socket (`SO_DOMAIN`).
pub fn socket_domain(sock: BorrowedFd<'_>) -> io::Result<i32> {
    getsockopt_int(sock, libc::SOL_SOCKET, libc::SO_DOMAIN)
}

/// The type of a socket (`SO_TYPE`: `SOCK_STREAM`, `SOCK_DGRAM` …).
pub fn socket_type(sock: BorrowedFd<'_>) -> io::Result<i32> {
    getsockopt_int(sock, libc::SOL_SOCKET, libc::SO_TYPE)
}

/// The bytes of a `sockaddr_in`/`sockaddr_in6` for `addr`.
pub fn inet_bytes(addr: std::net::SocketAddr) -> Vec<u8> {
    match addr {
        std::net::SocketAddr::V4(a) => {
            let mut b = vec![0u8; size_of::<libc::sockaddr_in>()];
            b[..2].copy_from_slice(&(libc::AF_INET as libc::sa_family_t).to_ne_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&a.ip().octets());
            b
        }
        std::net::SocketAddr::V6(a) => {
            let mut b = vec![0u8; size_of::<libc::sockaddr_in6>()];
            b[..2].copy_from_slice(&(libc::AF_INET6 as libc::sa_family_t).to_ne_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            b[8..24].copy_from_slice(&a.ip().octets());
            b[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            b
        }
    }
}

/// The local address of an internet socket (`getsockname`); port 0 when
/// it is not bound yet.
pub fn local_inet_addr(sock: BorrowedFd<'_>) -> io::Result<std::net::SocketAddr> {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid out-pointers sized for a sockaddr_storage.
    cvt(unsafe {
        libc::getsockname(
            sock.as_raw_fd(),
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    })?;
    let len = (len as usize).min(size_of::<libc::sockaddr_storage>());
    if len < 4 {
        return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT));
    }
    // SAFETY: the kernel wrote `len` bytes of the storage, which lives on.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (&storage as *const libc::sockaddr_storage).cast::<u8>(),
            len,
        )
    };
    let family = i32::from(u16::from_ne_bytes([bytes[0], bytes[1]]));
    let port = u16::from_be_bytes([bytes[2], bytes[3]]);
    let ip: std::net::IpAddr = if family == libc::AF_INET && len >= 8 {
        <[u8; 4]>::try_from(&bytes[4..8])
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
            .into()
    } else if family == libc::AF_INET6 && len >= 24 {
        <[u8; 16]>::try_from(&bytes[8..24])
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
            .into()
    } else {
        return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT));
    };
    Ok(std::net::SocketAddr::new(ip, port))
}

/// The most of a `/proc/PID/net/tcp{,6}` table read: a host with more
/// listeners than this holds is looked at in part (a listener past it is
/// missed, and the connect goes unrecorded, as before the check existed).
const MAX_TCP_TABLE: u64 = 4 << 20;

/// Whether a TCP socket listens where a connect to `to` (a loopback or
/// unspecified address) would arrive, in the network namespace whose
/// `/proc/PID/net` directory is `net`: bound to that address or to every
/// address of its family (or, for IPv4, to every IPv6 address). `false`
/// when the tables cannot be read.
///
/// The kernel prints the listening sockets first (its listening hash, then
/// the established one, where a test suite's thousand `TIME_WAIT`
/// connections are), so the table is read only up to its first line that
/// is not listening: the cost is that of the listeners, not of every
/// connection the job made.
pub fn tcp_listens(net: &std::path::Path, to: std::net::SocketAddr) -> bool {
    use std::io::{BufRead, Read};
    let to = canonical_local(to);
    let listening = |name: &str| {
        std::fs::File::open(net.join(name))
            .map(|f| {
                std::io::BufReader::with_capacity(64 << 10, f.take(MAX_TCP_TABLE))
                    .lines()
                    .map_while(Result::ok)
                    .skip(1)
                    .take_while(|l| l.split_whitespace().nth(3) == Some("0A"))
                    .collect::<Vec<String>>()
            })
            .unwrap_or_default()
    };
    (to.is_ipv4() && listens_in(&listening("tcp"), to)) || listens_in(&listening("tcp6"), to)
}

/// `to` with its address canonical (a v4-mapped one as IPv4), and an
/// unspecified one as the loopback of its family, where a connect to it
/// arrives.
pub(super) fn canonical_local(to: std::net::SocketAddr) -> std::net::SocketAddr {
    let ip = to.ip().to_canonical();
    let ip = match ip {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    std::net::SocketAddr::new(ip, to.port())
}

/// [`tcp_listens`] on a table's lines (no header), as the kernel prints
/// them: a local address in hex (IPv4 one 32-bit word, IPv6 four, each in
/// the host's byte order), a port in hex, state `0A` for listening. A line
/// that does not parse is skipped.
pub(super) fn listens_in(lines: &[String], to: std::net::SocketAddr) -> bool {
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    lines.iter().any(|line| {
        let mut fields = line.split_whitespace();
        let (Some(local), Some(state)) = (fields.nth(1), fields.nth(1)) else {
            return false;
        };
        let Some((ip_hex, port_hex)) = local.split_once(':') else {
            return false;
        };
        if state != "0A" || u16::from_str_radix(port_hex, 16).ok() != Some(to.port()) {
            return false;
        }
        let ip: std::net::IpAddr = match ip_hex.len() {
            8 => match word(ip_hex) {
                Some(b) => b.into(),
                None => return false,
            },
            32 => {
                let mut b = [0u8; 16];
                for (i, chunk) in b.chunks_mut(4).enumerate() {
                    match ip_hex.get(i * 8..i * 8 + 8).and_then(word) {
                        Some(w) => chunk.copy_from_slice(&w),
                        None => return false,
                    }
                }
                b.into()
            }
            _ => return false,
        };
        let wildcard = ip.is_unspecified() && (ip.is_ipv6() || to.is_ipv4());
        wildcard || ip.to_canonical() == to.ip()
    })
}

/// `bind(sock, addr)` for an internet address.
pub fn bind_inet(sock: BorrowedFd<'_>, addr: std::net::SocketAddr) -> io::Result<()> {
    bind_raw(sock, &inet_bytes(addr))
}

/// Raw address bytes (the supervisor's copy) in aligned storage, which the
/// kernel reads `addr.len()` bytes of.
fn storage_of(addr: &[u8]) -> io::Result<libc::sockaddr_storage> {
    if addr.len() > SOCKADDR_MAX {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: addr.len() <= sizeof(sockaddr_storage) (SOCKADDR_MAX), the
    // regions don't overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            addr.len(),
        );
    }
    Ok(storage)
}

/// The open file description is in non-blocking mode (shared with the job).
pub fn is_nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no argument.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    Ok(flags & libc::O_NONBLOCK != 0)
}

/// Switch the open file description's `O_NONBLOCK` on (a socket made for
/// a `socket(…, SOCK_NONBLOCK, …)`).
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFL takes no argument.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: F_SETFL takes an int of flags.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Switch the open file description's `O_NONBLOCK` off (after an open
/// that used it against FIFOs and the job did not ask for it).
pub fn clear_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFL takes no argument.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: F_SETFL takes an int of flags.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) })?;
    Ok(())
}

/// `ftruncate(fd, 0)`.
/// `fchmod(fd, mode)`.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: plain syscall on a valid fd.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) })?;
    Ok(())
}

/// `chmod` of the inode behind `target` (an `O_PATH` descriptor the
/// supervisor opened and checked), through `/proc/self/fd/N`: no name the
/// job controls is resolved again.
pub fn chmod_checked(target: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let path = proc_path_of(target);
    // SAFETY: valid C string; plain syscall.
    cvt(unsafe { libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), mode, 0) })?;
    Ok(())
}

/// `fchownat(target, "", uid, gid, AT_EMPTY_PATH)`: the inode behind the
/// descriptor itself (a symbolic link when it was opened `O_NOFOLLOW`).
pub fn chown_checked(target: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: valid fd and empty C string; plain syscall.
    cvt(unsafe {
        libc::fchownat(
            target.as_raw_fd(),
            c"".as_ptr(),
            uid,
            gid,
            libc::AT_EMPTY_PATH,
        )
    })?;
    Ok(())
}

/// `utimensat(target, "", times, AT_EMPTY_PATH)`: the inode behind the
/// descriptor itself; `None` sets both times to now. `utimensat` takes
/// `AT_EMPTY_PATH` since Linux 5.8, below the 5.19 that notification
/// needs at all (`host::probe` refuses the tier on an older kernel).
pub fn utimens_checked(
    target: BorrowedFd<'_>,
    times: Option<[libc::timespec; 2]>,
) -> io::Result<()> {
    let ptr = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: valid fd, empty C string, and `ptr` null or two timespecs
    // that outlive the call.
    cvt(unsafe { libc::utimensat(target.as_raw_fd(), c"".as_ptr(), ptr, libc::AT_EMPTY_PATH) })?;
    Ok(())
}

fn proc_path_of(fd: BorrowedFd<'_>) -> CString {
    // Digits and a fixed prefix: no NUL can occur.
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

pub fn truncate_to_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a valid fd.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) })?;
    Ok(())
}

/// `bind(sock, addr)` with raw address bytes (the supervisor's copy).
pub fn bind_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let storage = storage_of(addr)?;
    // SAFETY: storage is valid for addr.len() bytes; a plain syscall.
    cvt(unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            addr.len() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `connect(sock, addr)` with raw address bytes (the supervisor's copy).
pub fn connect_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let storage = storage_of(addr)?;
    loop {
        // SAFETY: storage is valid for addr.len() bytes.
        let ret = unsafe {
            libc::connect(
                sock.as_raw_fd(),
                (&storage as *const libc::sockaddr_storage).cast(),
                addr.len() as libc::socklen_t,
            )
        };
        if ret == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        // A blocking connect interrupted in *our* thread: the job saw no
        // signal, so finish the connect for it.
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Connect `sock` to the unix socket inode behind `target`, an `O_PATH`
/// descriptor the supervisor opened and checked, through
/// `/proc/self/fd/N` (so no name is resolved again).
pub fn connect_to_checked(sock: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    let path = format!("/proc/self/fd/{}", target.as_raw_fd());
    let mut addr = vec![0u8; SUN_PATH_OFFSET + path.len() + 1];
    addr[..2].copy_from_slice(&(libc::AF_UNIX as libc::sa_family_t).to_ne_bytes());
    addr[SUN_PATH_OFFSET..SUN_PATH_OFFSET + path.len()].copy_from_slice(path.as_bytes());
    connect_raw(sock, &addr)
}
