//! A network namespace that leads nowhere, for the job's UDP sockets under
//! filtered egress at FS-ONLY (`NotifyPlan::udp_dead_net`), and its TCP
//! sockets too with the network off (`NotifyPlan::tcp_dead_net`): the
//! job's own servers on loopback, and nothing else.
//!
//! A socket keeps the network namespace it was created in for its whole
//! life: whatever the job sends on a socket made here, to whatever address
//! (`sendto`, `sendmsg`'s `msg_name`, a connected peer), can only reach this
//! namespace. It has one interface, loopback, and a local route for every
//! IPv4 and IPv6 address (`local 0.0.0.0/0` and `local ::/0` on `lo`, table
//! local): every destination is this namespace itself, so a DNS query to
//! any resolver address reaches vetto's stub, bound here on port 53, and a
//! datagram to any other port finds no socket (`ECONNREFUSED` on a
//! connected socket, nothing otherwise). Nothing is decided on the job's
//! memory.
//!
//! The namespace is made by a helper, `vetto __dead-net PARENT`, re-executed
//! from `/proc/self/exe` (a process with threads cannot `unshare` a user
//! namespace). Its standard input is a unix socket to vetto: it first sends
//! the stub's sockets, then answers each one-byte request (`4` or `6`: UDP,
//! `t` or `T`: TCP) with a socket of that family (a four-byte errno, and the socket with
//! `SCM_RIGHTS` when it is zero). It dies with vetto (`PR_SET_DEATHSIG`)
//! and when vetto closes its end.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, sendmsg,
};

/// How long vetto waits for the helper's answer (a hang guard).
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// The running helper, as the supervisor holds it.
#[derive(Debug)]
pub struct DeadNet {
    /// The namespace's cookie (`SO_NETNS_COOKIE`): a socket with it was
    /// made there.
    cookie: u64,
    requests: Mutex<UnixStream>,
    child: Mutex<Option<Child>>,
}

/// What [`DeadNet::start`] gives: the helper, and the DNS stub's UDP
/// sockets bound on port 53 in its namespace (`0.0.0.0`, and `[::]` where
/// IPv6 is there).
pub type Started = (DeadNet, Vec<std::net::UdpSocket>);

impl DeadNet {
    /// Start the helper and receive the stub's sockets.
    pub fn start() -> std::io::Result<Started> {
        DeadNet::spawn(None)
    }

    /// A socket maker in the network namespace of the sandbox whose first
    /// process is `pid` — FULL's, for `--publish` — rather than a new one:
    /// the helper joins the user namespace of one of the sandbox's
    /// processes (vetto's user owns it, so the helper has `CAP_SYS_ADMIN`
    /// there) and then its network namespace, through a pidfd (one
    /// `setns`). vetto's own init and stage are not dumpable, so no
    /// process may open their namespaces: the job's processes are tried,
    /// newest first, and the first one whose namespaces open is taken. It
    /// makes sockets only; no stub.
    pub fn join(pid: u32) -> std::io::Result<DeadNet> {
        let mut candidates = super::proc::descendants(pid);
        candidates.reverse();
        candidates.truncate(64);
        candidates.push(i32::try_from(pid).unwrap_or(-1));
        DeadNet::spawn(Some(&candidates)).map(|(net, _)| net)
    }

    fn spawn(join: Option<&[i32]>) -> std::io::Result<Started> {
        let (ours, theirs) = UnixStream::pair()?;
        let mut command = Command::new("/proc/self/exe");
        command
            .arg0("vetto")
            .arg(crate::hidden::Hidden::DeadNet.arg())
            .arg(std::process::id().to_string());
        for pid in join.unwrap_or_default() {
            command.arg(pid.to_string());
        }
        let child = command
            .env_clear()
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut net = DeadNet {
            cookie: 0,
            requests: Mutex::new(ours),
            child: Mutex::new(Some(child)),
        };
        let dns: Vec<std::net::UdpSocket> = {
            let sock = net
                .requests
                .lock()
                .map_err(|_| std::io::Error::other("the dead-net helper is gone"))?;
            sock.set_read_timeout(Some(ANSWER_WITHIN))?;
            let (tag, fds) = super::receive_fds::<2>(&sock)
                .ok_or_else(|| std::io::Error::other("the dead-net helper ended early"))?;
            if tag != b'D' || fds.is_empty() {
                return Err(std::io::Error::other(
                    "the dead-net helper could not set up its namespace",
                ));
            }
            fds.into_iter().map(std::net::UdpSocket::from).collect()
        };
        let first = dns
            .first()
            .ok_or_else(|| std::io::Error::other("the dead-net helper sent no socket"))?;
        net.cookie = netns_cookie(first.as_fd())?;
        Ok((net, dns))
    }

    /// What tells a socket made in this namespace from any other, copied
    /// out: checking a socket then needs neither the helper nor a lock.
    pub fn identity(&self) -> Identity {
        Identity {
            cookie: self.cookie,
            pid: self
                .child
                .lock()
                .ok()
                .and_then(|c| c.as_ref().map(Child::id)),
        }
    }

    /// A UDP (or, `stream`, TCP) socket made in the namespace
    /// (close-on-exec, blocking).
    pub fn socket(&self, v6: bool, stream: bool) -> std::io::Result<OwnedFd> {
        let sock = self
            .requests
            .lock()
            .map_err(|_| std::io::Error::other("the dead-net helper is gone"))?;
        let request: &[u8; 1] = match (v6, stream) {
            (false, false) => b"4",
            (true, false) => b"6",
            (false, true) => b"t",
            (true, true) => b"T",
        };
        (&*sock).write_all(request)?;
        let (tag, fds) = super::receive_fds::<1>(&sock)
            .ok_or_else(|| std::io::Error::other("the dead-net helper ended"))?;
        match (tag, fds.into_iter().next()) {
            (0, Some(fd)) => Ok(fd),
            (0, None) => Err(std::io::Error::other("the dead-net helper sent no socket")),
            (errno, _) => Err(std::io::Error::from_raw_os_error(i32::from(errno))),
        }
    }

    /// A TCP listener of vetto's in the namespace, on `ip` (a loopback
    /// address there) and a port the kernel picks: where the proxy and the
    /// DNS stub meet the job's sockets, which are made here too. Nothing
    /// outside the namespace can reach it.
    pub fn listener(&self, ip: std::net::IpAddr) -> std::io::Result<std::net::TcpListener> {
        let fd = self.socket(ip.is_ipv6(), true)?;
        super::notify::bind_inet(fd.as_fd(), std::net::SocketAddr::new(ip, 0))?;
        nix::sys::socket::listen(&fd, nix::sys::socket::Backlog::MAXCONN)?;
        Ok(std::net::TcpListener::from(fd))
    }
}

/// Connect `sock`, a TCP socket made by [`DeadNet::socket`], to `to` in
/// its namespace (blocking): the stream vetto relays a published port's
/// outside connection through.
pub fn connect_stream(
    sock: OwnedFd,
    to: std::net::SocketAddr,
) -> std::io::Result<std::net::TcpStream> {
    super::notify::connect_raw(sock.as_fd(), &super::notify::inet_bytes(to))?;
    Ok(std::net::TcpStream::from(sock))
}

/// A TCP socket on the host's network, made by vetto (close-on-exec,
/// blocking): what the job gets for `socket()` under filtered egress when
/// the namespace that leads nowhere could not be made (`--audit`, or no
/// helper), as if the call had not been notified.
pub fn host_stream_socket(v6: bool) -> std::io::Result<OwnedFd> {
    let family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    Ok(nix::sys::socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?)
}

impl Drop for DeadNet {
    fn drop(&mut self) {
        if let Ok(mut child) = self.child.lock()
            && let Some(mut c) = child.take()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `SO_NETNS_COOKIE` (asm-generic; Linux 5.14).
const SO_NETNS_COOKIE: libc::c_int = 71;

/// A dead net's network namespace, by its cookie, and the helper that
/// lives in it (whose `/proc/PID/net` shows the namespace's sockets).
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    cookie: u64,
    pid: Option<u32>,
}

impl Identity {
    /// `/proc/PID/net` of the helper: the namespace's socket tables.
    pub fn proc_net(&self) -> Option<std::path::PathBuf> {
        self.pid
            .map(|pid| std::path::PathBuf::from(format!("/proc/{pid}/net")))
    }

    /// `sock` was made in this namespace (its network namespace is this
    /// one: a property of the socket, not of any address).
    pub fn holds(&self, sock: std::os::fd::BorrowedFd<'_>) -> bool {
        netns_cookie(sock).is_ok_and(|c| c == self.cookie)
    }
}

/// The cookie of the network namespace `sock` belongs to.
fn netns_cookie(sock: std::os::fd::BorrowedFd<'_>) -> std::io::Result<u64> {
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `cookie`, a u64 we own.
    let ret = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&raw mut cookie).cast(),
            &mut len,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}

/// The stub's side of a socket bound in the namespace: have the kernel say
/// where each datagram was sent (any address is local here), so that the
/// answer comes from that very address — what a resolver that sent to
/// `8.8.8.8` or `2001:db8::53` accepts. IPv4 answers from the destination
/// anyway; IPv6 would answer from `::1`.
pub fn want_destinations(sock: &std::net::UdpSocket) -> std::io::Result<()> {
    use nix::sys::socket::sockopt;
    if sock.local_addr()?.is_ipv6() {
        nix::sys::socket::setsockopt(sock, sockopt::Ipv6RecvPacketInfo, &true)?;
        // IPv6 answers only from an address on an interface unless the
        // socket may use any (every address is local here, none assigned).
        let on: libc::c_int = 1;
        // SAFETY: the kernel reads one c_int from a valid pointer.
        let ret = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_FREEBIND,
                (&raw const on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(std::io::Error::last_os_error());
        }
    } else {
        nix::sys::socket::setsockopt(sock, sockopt::Ipv4PacketInfo, &true)?;
    }
    Ok(())
}

/// Wake every thread blocked receiving on `sock` (the stub's, at the end
/// of the session): `shutdown(SHUT_RD)` on a UDP socket answers
/// `ENOTCONN` yet marks it shut and wakes its waiters, whose receive then
/// returns at once — rather than at their next read timeout.
pub fn wake_receivers(sock: &std::net::UdpSocket) {
    let _ = nix::sys::socket::shutdown(sock.as_raw_fd(), nix::sys::socket::Shutdown::Read);
}

/// Wake the thread blocked accepting on `listener` (a DNS stub's, at the
/// end of the session): `shutdown(SHUT_RD)` on a listening TCP socket
/// stops it listening and its `accept` fails at once (`EINVAL`). Works
/// where vetto cannot connect to it (a listener in the job's namespace).
pub fn wake_acceptor(listener: &std::net::TcpListener) {
    let _ = nix::sys::socket::shutdown(listener.as_raw_fd(), nix::sys::socket::Shutdown::Read);
}

/// One datagram: its length, sender, and the address it was sent to.
pub fn recv_query(
    sock: &std::net::UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, std::net::SocketAddr, Option<std::net::IpAddr>)> {
    use nix::sys::socket::{ControlMessageOwned, SockaddrStorage, recvmsg};
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!(libc::in6_pktinfo, libc::in_pktinfo);
    let msg = recvmsg::<SockaddrStorage>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )?;
    let peer = msg
        .address
        .and_then(|a| {
            a.as_sockaddr_in()
                .map(|v4| std::net::SocketAddr::V4((*v4).into()))
                .or_else(|| {
                    a.as_sockaddr_in6()
                        .map(|v6| std::net::SocketAddr::V6((*v6).into()))
                })
        })
        .ok_or_else(|| std::io::Error::other("a datagram without a sender"))?;
    let mut dst = None;
    for cmsg in msg.cmsgs()? {
        match cmsg {
            ControlMessageOwned::Ipv6PacketInfo(info) => {
                dst = Some(std::net::Ipv6Addr::from(info.ipi6_addr.s6_addr).into());
            }
            ControlMessageOwned::Ipv4PacketInfo(info) => {
                dst = Some(std::net::Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)).into());
            }
            _ => {}
        }
    }
    Ok((msg.bytes, peer, dst))
}

/// Answer `peer` from `from` (the address its query was sent to).
pub fn send_answer(
    sock: &std::net::UdpSocket,
    answer: &[u8],
    peer: std::net::SocketAddr,
    from: Option<std::net::IpAddr>,
) -> std::io::Result<()> {
    use nix::sys::socket::SockaddrStorage;
    let to = SockaddrStorage::from(peer);
    let iov = [std::io::IoSlice::new(answer)];
    let v6_info;
    let v4_info;
    let cmsgs: Vec<ControlMessage<'_>> = match from {
        Some(std::net::IpAddr::V6(ip)) => {
            v6_info = libc::in6_pktinfo {
                ipi6_addr: libc::in6_addr {
                    s6_addr: ip.octets(),
                },
                ipi6_ifindex: 0,
            };
            vec![ControlMessage::Ipv6PacketInfo(&v6_info)]
        }
        Some(std::net::IpAddr::V4(ip)) => {
            v4_info = libc::in_pktinfo {
                ipi_ifindex: 0,
                ipi_spec_dst: libc::in_addr {
                    s_addr: u32::from(ip).to_be(),
                },
                ipi_addr: libc::in_addr { s_addr: 0 },
            };
            vec![ControlMessage::Ipv4PacketInfo(&v4_info)]
        }
        None => Vec::new(),
    };
    sendmsg(sock.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), Some(&to))?;
    Ok(())
}

/// The hidden entry: `vetto __dead-net PARENT`, before any thread starts.
pub fn entry() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if !crate::hidden::Hidden::DeadNet.is(&args.next()?) {
        return None;
    }
    let parent = args
        .next()
        .and_then(|a| a.to_str().and_then(|s| s.parse::<i32>().ok()))
        .unwrap_or(-1);
    let join: Vec<i32> = args
        .filter_map(|a| a.to_str().and_then(|s| s.parse::<i32>().ok()))
        .collect();
    Some(ExitCode::from(u8::from(helper(parent, &join).is_err())))
}

/// Standard input: the socket to vetto.
const TO_VETTO: RawFd = 0;

fn helper(parent: i32, join: &[i32]) -> Result<(), ()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(|_| ())?;
    // vetto may have ended before the death signal was armed.
    if nix::unistd::getppid().as_raw() != parent {
        return Err(());
    }
    // No same-uid process (the job) may read this one's memory or take
    // its descriptors.
    nix::sys::prctl::set_dumpable(false).map_err(|_| ())?;
    let to = TO_VETTO;
    let setup = || -> std::io::Result<Vec<OwnedFd>> {
        if !join.is_empty() {
            let joined = join
                .iter()
                .any(|pid| super::sys::join_user_and_net(*pid).is_ok());
            if !joined {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            // One socket there: vetto reads the namespace's cookie from it.
            return Ok(vec![OwnedFd::from(std::net::UdpSocket::bind((
                std::net::Ipv4Addr::LOCALHOST,
                0,
            ))?)]);
        }
        nix::sched::unshare(
            nix::sched::CloneFlags::CLONE_NEWUSER | nix::sched::CloneFlags::CLONE_NEWNET,
        )?;
        super::sys::loopback_up()?;
        let lo = nix::net::if_::if_nametoindex("lo")?;
        every_address_local(libc::AF_INET as u8, lo)?;
        let v6 = every_address_local(libc::AF_INET6 as u8, lo).is_ok();
        let mut stub = vec![OwnedFd::from(std::net::UdpSocket::bind((
            std::net::Ipv4Addr::UNSPECIFIED,
            53,
        ))?)];
        if v6 {
            let s = nix::sys::socket::socket(
                AddressFamily::Inet6,
                SockType::Datagram,
                SockFlag::SOCK_CLOEXEC,
                None,
            )?;
            nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::Ipv6V6Only, &true)?;
            nix::sys::socket::bind(
                s.as_raw_fd(),
                &nix::sys::socket::SockaddrIn6::from(std::net::SocketAddrV6::new(
                    std::net::Ipv6Addr::UNSPECIFIED,
                    53,
                    0,
                    0,
                )),
            )?;
            stub.push(s);
        }
        Ok(stub)
    };
    match setup() {
        Ok(stub) => {
            let raw: Vec<RawFd> = stub.iter().map(AsRawFd::as_raw_fd).collect();
            send(to, b'D', &raw)?;
        }
        Err(_) => {
            send(to, b'E', &[])?;
            return Err(());
        }
    }
    // SAFETY: descriptor 0 is the socket vetto passed as standard input;
    // nothing else in this process owns it.
    let mut requests =
        UnixStream::from(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(to) });
    let mut request = [0u8; 1];
    loop {
        if requests.read_exact(&mut request).is_err() {
            return Ok(());
        }
        let (family, kind, protocol) = match request[0] {
            b'4' => (AddressFamily::Inet, SockType::Datagram, SockProtocol::Udp),
            b'6' => (AddressFamily::Inet6, SockType::Datagram, SockProtocol::Udp),
            b't' => (AddressFamily::Inet, SockType::Stream, SockProtocol::Tcp),
            b'T' => (AddressFamily::Inet6, SockType::Stream, SockProtocol::Tcp),
            _ => return Err(()),
        };
        match nix::sys::socket::socket(family, kind, SockFlag::SOCK_CLOEXEC, protocol) {
            Ok(s) => send(requests.as_raw_fd(), 0, &[s.as_raw_fd()])?,
            Err(e) => send(
                requests.as_raw_fd(),
                u8::try_from(e as i32).unwrap_or(libc::EIO as u8),
                &[],
            )?,
        }
    }
}

fn send(to: RawFd, tag: u8, fds: &[RawFd]) -> Result<(), ()> {
    let tags = [tag];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
    sendmsg::<()>(
        to,
        &[std::io::IoSlice::new(&tags)],
        cmsgs,
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(drop)
}

/// `ip route add local default dev lo table local` for `family`: one
/// `RTM_NEWROUTE` over route netlink, acknowledged.
fn every_address_local(family: u8, lo: u32) -> std::io::Result<()> {
    let sock = nix::sys::socket::socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    nix::sys::socket::bind(sock.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    let msg = new_route(family, lo);
    nix::sys::socket::sendto(
        sock.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )?;
    let mut ack = [0u8; 512];
    let n = nix::sys::socket::recv(sock.as_fd().as_raw_fd(), &mut ack, MsgFlags::empty())?;
    // nlmsghdr (16 bytes), then nlmsgerr's errno (0: acknowledged).
    let kind = ack.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let errno = ack
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (n >= 20, kind, errno) {
        (true, Some(k), Some(0)) if k == libc::NLMSG_ERROR as u16 => Ok(()),
        (true, Some(k), Some(e)) if k == libc::NLMSG_ERROR as u16 => {
            Err(std::io::Error::from_raw_os_error(-e))
        }
        _ => Err(std::io::Error::other(
            "no acknowledgement from route netlink",
        )),
    }
}

/// The bytes of that request: `nlmsghdr`, `rtmsg` (no destination: the
/// default route, prefix length 0) and one `RTA_OIF` attribute.
fn new_route(family: u8, oif: u32) -> Vec<u8> {
    const HDR: usize = 16;
    const RTMSG: usize = 12;
    const RTA: usize = 8;
    let len = u32::try_from(HDR + RTMSG + RTA).unwrap_or(u32::MAX);
    let flags =
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    let mut m = Vec::with_capacity(HDR + RTMSG + RTA);
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&libc::RTM_NEWROUTE.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    m.extend_from_slice(&[
        family,
        0, // destination prefix length
        0, // source prefix length
        0, // tos
        libc::RT_TABLE_LOCAL,
        libc::RTPROT_BOOT,
        libc::RT_SCOPE_HOST,
        libc::RTN_LOCAL,
    ]);
    m.extend_from_slice(&0u32.to_ne_bytes()); // rtm_flags
    m.extend_from_slice(&(RTA as u16).to_ne_bytes());
    m.extend_from_slice(&libc::RTA_OIF.to_ne_bytes());
    m.extend_from_slice(&oif.to_ne_bytes());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_request_is_one_local_default_route_on_the_interface() {
        let m = new_route(libc::AF_INET6 as u8, 1);
        assert_eq!(m.len(), 36);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]), 36);
        assert_eq!(m[16], libc::AF_INET6 as u8);
        assert_eq!(
            (m[17], m[20], m[23]),
            (0, libc::RT_TABLE_LOCAL, libc::RTN_LOCAL)
        );
        assert_eq!(&m[32..36], &1u32.to_ne_bytes());
    }
}
