//! The FULL tier's DNS stub: answers the job's resolver inside its network
//! namespace (on a socket the stage made there and handed over). An
//! allowed name gets a synthetic loopback address that stands for it for
//! the whole session (`127.77.x.y`); a connection to that address on a
//! transparent port reaches the proxy, which learns the name from the
//! address ([`Names::name_of`]) and decides, resolves and pins as for any
//! request. A name no rule allows gets NXDOMAIN and is recorded, with the
//! queried name. Nothing is forwarded to a real resolver: a query carries
//! no data out.
//!
//! The stage makes a TCP listener on the stub's address too: DNS over
//! TCP (`dig +tcp`, `RES_OPTIONS=use-vc`) gets the same answers from
//! [`TcpStub`] ([`TcpStubAt::JobNamespace`]).
//!
//! FS-ONLY has no namespace of the job's own. Its UDP sockets (with
//! filtered egress, and with the network off where the stub refuses
//! every name) come from a namespace of vetto's that leads nowhere
//! (`sandbox::dead_net`), where
//! every address is local and the same stub serves port 53
//! ([`Stub::start_dead_net`]): a query to any resolver address is answered
//! here. Every TCP connect to port 53 is redirected by the supervisor to
//! [`TcpStub`], which answers the same way and knows the process from the
//! connect it registered (glibc with `RES_OPTIONS=use-vc`, and where no
//! such namespace can be made).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::events::log::EventSink;
use crate::events::violation::Provenance;
use crate::events::{
    ConnDecision, ConnReason, ConnVia, Connection, Event, Package, ProcessInfo, Timestamp,
};
use crate::policy::{HostPattern, NetPolicy};

/// Synthetic addresses: 127.77.0.1 onwards.
const FIRST: u32 = u32::from_be_bytes([127, 77, 0, 1]);
/// At most this many names get an address in one session.
const MAX_NAMES: u32 = 65_000;
/// A DNS message over UDP without EDNS is at most 512 bytes; queries with
/// EDNS may be longer, but no question needs more.
const MAX_QUERY: usize = 1232;

/// The session's name ↔ synthetic address table.
#[derive(Debug, Default)]
pub struct Names {
    by_name: HashMap<String, Ipv4Addr>,
    by_addr: HashMap<Ipv4Addr, String>,
}

impl Names {
    /// The address standing for `name` (made on first use); `None` when
    /// the table is full.
    fn address_for(&mut self, name: &str) -> Option<Ipv4Addr> {
        if let Some(a) = self.by_name.get(name) {
            return Some(*a);
        }
        let n = u32::try_from(self.by_name.len()).ok()?;
        if n >= MAX_NAMES {
            return None;
        }
        let addr = Ipv4Addr::from(FIRST + n);
        self.by_name.insert(name.to_string(), addr);
        self.by_addr.insert(addr, name.to_string());
        Some(addr)
    }

    /// The name a synthetic address stands for.
    pub fn name_of(&self, ip: IpAddr) -> Option<String> {
        match ip.to_canonical() {
            IpAddr::V4(v4) => self.by_addr.get(&v4).cloned(),
            IpAddr::V6(_) => None,
        }
    }
}

/// What the stub may answer: names some allow rule names (on any port)
/// and no port-less deny rule refuses. The proxy decides each connection
/// again, with its port.
#[derive(Debug, Clone)]
pub struct Answerable {
    allow: Vec<HostPattern>,
    deny: Vec<HostPattern>,
    /// `[network] expected`: a refused lookup of one is recorded as
    /// expected.
    expected: Vec<HostPattern>,
}

impl Answerable {
    pub fn for_policy(net: &NetPolicy) -> Answerable {
        match net {
            NetPolicy::Allow { hosts, deny, .. } => Answerable {
                allow: hosts.clone(),
                deny: deny.clone(),
                expected: Vec::new(),
            },
            _ => Answerable {
                allow: Vec::new(),
                deny: Vec::new(),
                expected: Vec::new(),
            },
        }
    }

    /// The same, recording a refused lookup of an `expected` name as
    /// expected.
    pub fn expecting(mut self, expected: &[HostPattern]) -> Answerable {
        self.expected = expected.to_vec();
        self
    }

    fn allows(&self, name: &str) -> bool {
        self.allow.iter().any(|h| h.matches(name, h.port))
            && !self
                .deny
                .iter()
                .any(|d| d.port.is_none() && d.matches(name, None))
    }
}

/// One parsed question.
#[derive(Debug, PartialEq, Eq)]
struct Question {
    id: u16,
    /// The RD bit, echoed.
    recursion: bool,
    name: String,
    qtype: u16,
    /// Where the question section ends (it is echoed in the answer).
    end: usize,
}

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;
const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
const SERVFAIL: u8 = 2;
const NXDOMAIN: u8 = 3;

/// Parse a standard query with one question (no compression: a query's
/// only name is the first). `Err(Some(id))`: malformed but answerable
/// with FORMERR; `Err(None)`: not even a header.
fn parse(q: &[u8]) -> Result<Question, Option<u16>> {
    let header = q.get(..12).ok_or(None)?;
    let id = u16::from_be_bytes([header[0], header[1]]);
    let flags = u16::from_be_bytes([header[2], header[3]]);
    let qdcount = u16::from_be_bytes([header[4], header[5]]);
    // A response, or an opcode other than QUERY: nothing to answer.
    if flags & 0x8000 != 0 || (flags >> 11) & 0xf != 0 {
        return Err(None);
    }
    if qdcount != 1 {
        return Err(Some(id));
    }
    let mut at = 12;
    let mut labels: Vec<String> = Vec::new();
    let mut total = 0usize;
    loop {
        let len = usize::from(*q.get(at).ok_or(Some(id))?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return Err(Some(id));
        }
        let label = q.get(at..at + len).ok_or(Some(id))?;
        total += len + 1;
        if total > 255 {
            return Err(Some(id));
        }
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*q.get(at).ok_or(Some(id))?, *q.get(at + 1).ok_or(Some(id))?]);
    let qclass = u16::from_be_bytes([
        *q.get(at + 2).ok_or(Some(id))?,
        *q.get(at + 3).ok_or(Some(id))?,
    ]);
    if qclass != CLASS_IN || labels.is_empty() {
        return Err(Some(id));
    }
    Ok(Question {
        id,
        recursion: flags & 0x0100 != 0,
        name: labels.join("."),
        qtype,
        end: at + 4,
    })
}

/// The answer to `q` (whose bytes are `query`).
fn answer(query: &[u8], q: &Question, rcode: u8, addr: Option<Ipv4Addr>) -> Vec<u8> {
    let mut out = Vec::with_capacity(q.end + 16);
    out.extend_from_slice(&q.id.to_be_bytes());
    // QR, AA, RD echoed, RA.
    let flags: u16 = 0x8000 | 0x0400 | if q.recursion { 0x0100 } else { 0 } | 0x0080;
    out.extend_from_slice(&(flags | u16::from(rcode)).to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&u16::from(addr.is_some()).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(query.get(12..q.end).unwrap_or_default());
    if let Some(a) = addr {
        // The question's name (a pointer to offset 12), A, IN, TTL, 4 bytes.
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&300u32.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&a.octets());
    }
    out
}

fn header_only(id: u16, rcode: u8) -> Vec<u8> {
    let mut out = id.to_be_bytes().to_vec();
    out.extend_from_slice(&(0x8000u16 | u16::from(rcode)).to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    out
}

/// `z.y.x.127.in-addr.arpa` or `::1`'s `1.0.…0.ip6.arpa`: the reverse
/// name of a loopback address.
fn is_loopback_reverse(name: &str) -> bool {
    if let Some(v4) = name.strip_suffix(".127.in-addr.arpa") {
        let labels: Vec<&str> = v4.split('.').collect();
        return labels.len() == 3 && labels.iter().all(|l| l.parse::<u8>().is_ok());
    }
    let Some(v6) = name.strip_suffix(".ip6.arpa") else {
        return false;
    };
    let nibbles: Vec<&str> = v6.split('.').collect();
    nibbles.len() == 32 && nibbles[0] == "1" && nibbles[1..].iter().all(|n| *n == "0")
}

/// Decide one query: the reply, and the record of a refused name.
fn respond(
    query: &[u8],
    names: &Mutex<Names>,
    rules: &Answerable,
) -> (Option<Vec<u8>>, Option<String>) {
    let q = match parse(query) {
        Ok(q) => q,
        Err(Some(id)) => return (Some(header_only(id, FORMERR)), None),
        Err(None) => return (None, None),
    };
    // The job asking the name of its own loopback (Python's
    // `socket.getfqdn("::1")` when a test server binds it, where
    // /etc/hosts has no `::1` line): nothing the policy allows or refuses,
    // and a query here carries nothing out anyway. No such name, unrecorded.
    if is_loopback_reverse(&q.name) {
        return (Some(answer(query, &q, NXDOMAIN, None)), None);
    }
    if !rules.allows(&q.name) {
        return (Some(answer(query, &q, NXDOMAIN, None)), Some(q.name));
    }
    let Ok(mut table) = names.lock() else {
        return (Some(answer(query, &q, SERVFAIL, None)), None);
    };
    match table.address_for(&q.name) {
        // AAAA and the rest: the name exists, with no such record (the
        // client falls back to A).
        Some(a) if q.qtype == TYPE_A => (Some(answer(query, &q, NOERROR, Some(a))), None),
        Some(_) => (Some(answer(query, &q, NOERROR, None)), None),
        None => (Some(answer(query, &q, SERVFAIL, None)), None),
    }
}

/// The running stub.
pub struct Stub {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The sockets again, to wake the threads at [`Stub::stop`].
    sockets: Vec<UdpSocket>,
}

impl std::fmt::Debug for Stub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stub")
    }
}

/// Who sent from a UDP address, when that can be known.
pub type UdpAskers =
    Arc<dyn Fn(SocketAddr) -> Option<(ProcessInfo, Option<Package>)> + Send + Sync>;

impl Stub {
    /// FULL: serve `socket` (in the job's namespace) until [`Stub::stop`];
    /// `askers`, where given, names the process that sent a query.
    pub fn start(
        socket: UdpSocket,
        names: Arc<Mutex<Names>>,
        rules: Answerable,
        sink: Arc<dyn EventSink + Sync>,
        askers: Option<UdpAskers>,
    ) -> std::io::Result<Stub> {
        Stub::serve(vec![socket], false, names, rules, sink, askers)
    }

    /// FS-ONLY: serve the sockets bound on port 53 in the namespace the
    /// job's UDP sockets come from (`sandbox::dead_net`), where every
    /// address is local: a query to any resolver address arrives, and is
    /// answered from the address it was sent to. `askers` names the
    /// process that owns the sending socket.
    pub fn start_dead_net(
        sockets: Vec<UdpSocket>,
        names: Arc<Mutex<Names>>,
        rules: Answerable,
        sink: Arc<dyn EventSink + Sync>,
        askers: UdpAskers,
    ) -> std::io::Result<Stub> {
        for s in &sockets {
            crate::sandbox::dead_net::want_destinations(s)?;
        }
        Stub::serve(sockets, true, names, rules, sink, Some(askers))
    }

    fn serve(
        sockets: Vec<UdpSocket>,
        dead_net: bool,
        names: Arc<Mutex<Names>>,
        rules: Answerable,
        sink: Arc<dyn EventSink + Sync>,
        askers: Option<UdpAskers>,
    ) -> std::io::Result<Stub> {
        let mut stub = Stub {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            sockets: Vec::new(),
        };
        for socket in sockets {
            // A socket that cannot be served stops those already served:
            // no thread is left looping for a stub no one stops.
            if let Err(e) = stub.serve_one(socket, dead_net, &names, &rules, &sink, &askers) {
                stub.stop();
                return Err(e);
            }
        }
        Ok(stub)
    }

    fn serve_one(
        &mut self,
        socket: UdpSocket,
        dead_net: bool,
        names: &Arc<Mutex<Names>>,
        rules: &Answerable,
        sink: &Arc<dyn EventSink + Sync>,
        askers: &Option<UdpAskers>,
    ) -> std::io::Result<()> {
        socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        let waker = socket.try_clone()?;
        let stopping = self.stop.clone();
        let (names, rules, sink, askers) =
            (names.clone(), rules.clone(), sink.clone(), askers.clone());
        let thread = std::thread::Builder::new()
            .name("vetto-dns".into())
            .spawn(move || {
                let mut buf = [0u8; MAX_QUERY];
                while !stopping.load(Ordering::SeqCst) {
                    let received = if dead_net {
                        crate::sandbox::dead_net::recv_query(&socket, &mut buf)
                    } else {
                        recv_datagram(&socket, &mut buf).map(|(n, peer)| (n, peer, None))
                    };
                    let Ok((n, peer, to)) = received else {
                        continue;
                    };
                    let Some(query) = buf.get(..n) else {
                        continue;
                    };
                    let (reply, refused) = respond(query, &names, &rules);
                    if let Some(name) = refused {
                        let who = askers.as_ref().and_then(|a| a(peer));
                        record_refused(
                            sink.as_ref(),
                            name,
                            who,
                            Provenance::Proxy,
                            &rules.expected,
                        );
                    }
                    if let Some(reply) = reply {
                        let _ = if dead_net {
                            crate::sandbox::dead_net::send_answer(&socket, &reply, peer, to)
                        } else {
                            socket.send_to(&reply, peer).map(drop)
                        };
                    }
                }
            })?;
        self.threads.push(thread);
        self.sockets.push(waker);
        Ok(())
    }

    /// Stop serving: at once, not at the threads' next read timeout (the
    /// end of every session waits for it).
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for s in &self.sockets {
            crate::sandbox::dead_net::wake_receivers(s);
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// One datagram for the stub: its length and sender. Not
/// `UdpSocket::recv_from`: std asserts that the kernel's sender address
/// is as long as its family says, and a short one (seen from gVisor's
/// netstack in the job's namespace) panicked the stub's thread, which
/// ended the session. A datagram whose sender is not a whole IPv4 or
/// IPv6 address is an error here: it cannot be answered.
#[cfg(unix)]
fn recv_datagram(socket: &UdpSocket, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
    use nix::sys::socket::{SockaddrStorage, recvfrom};
    use std::os::fd::AsRawFd;
    let (n, from) = recvfrom::<SockaddrStorage>(socket.as_raw_fd(), buf)?;
    from.as_ref()
        .and_then(sender_of)
        .map(|peer| (n, peer))
        .ok_or_else(|| std::io::Error::other("a datagram without a whole sender address"))
}

/// The IPv4 or IPv6 address in `a`, when it holds a whole one.
#[cfg(unix)]
fn sender_of(a: &nix::sys::socket::SockaddrStorage) -> Option<SocketAddr> {
    a.as_sockaddr_in()
        .map(|v4| SocketAddr::V4((*v4).into()))
        .or_else(|| a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into())))
}

/// One connection to the TCP stub and its peer, read as
/// [`recv_datagram`] reads a sender (std's `accept` asserts the same way).
/// `accept4` is Linux's (the stub serves the Linux tiers); elsewhere std's.
#[cfg(target_os = "linux")]
fn accept_client(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    use nix::sys::socket::{SockFlag, SockaddrStorage, accept4, getpeername};
    let stream = TcpStream::from(accept4(listener, SockFlag::SOCK_CLOEXEC)?);
    let peer = getpeername::<SockaddrStorage>(std::os::fd::AsRawFd::as_raw_fd(&stream))?;
    let peer = sender_of(&peer)
        .ok_or_else(|| std::io::Error::other("a connection without a whole peer address"))?;
    Ok((stream, peer))
}

#[cfg(not(target_os = "linux"))]
fn accept_client(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    listener.accept()
}

#[cfg(not(unix))]
fn recv_datagram(socket: &UdpSocket, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
    socket.recv_from(buf)
}

/// Who made a connect to the TCP stub: the job socket's local address
/// (the peer the stub sees), registered by the supervisor before the
/// connect is made. Bounded like the proxy's redirects.
pub type Askers = Arc<Mutex<HashMap<SocketAddr, (ProcessInfo, Option<Package>)>>>;

/// Registrations kept at once; past it the table is emptied (those
/// queries are then recorded without the process).
const MAX_ASKERS: usize = 4096;
/// Connections served at once; more wait in the listen backlog.
const MAX_TCP_CLIENTS: usize = 32;
/// A client that sends nothing for this long is dropped.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Register who the connection from `local` comes from.
pub fn expect_asker(askers: &Askers, local: SocketAddr, who: (ProcessInfo, Option<Package>)) {
    if let Ok(mut map) = askers.lock() {
        if map.len() >= MAX_ASKERS {
            map.clear();
        }
        map.insert(local, who);
    }
}

/// The stub for DNS over TCP (RFC 1035 4.2.2: each message has a
/// two-byte length), bounded: a message longer than a query may be ends
/// its connection, at most [`MAX_TCP_CLIENTS`] are served at once, and an
/// idle one is dropped after [`TCP_IDLE`]. The job's bytes are read from
/// the stub's own socket: nothing is decided on memory the job can change.
pub struct TcpStub {
    stop: Arc<AtomicBool>,
    /// Each listener again (shut down to wake its blocking accept) and its
    /// thread.
    threads: Vec<(TcpListener, std::thread::JoinHandle<()>)>,
}

/// Where a [`TcpStub`] listens, which says how it learns who connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpStubAt {
    /// FS-ONLY: on the host's loopback, reached by the supervisor's
    /// redirected connects. A registration stands for one connection and
    /// is taken when it arrives (any host process could connect after).
    HostLoopback,
    /// FULL: 127.0.0.53:53 in the job's namespace, reached by the job's
    /// own notified connects, registered in the table the UDP stub reads:
    /// kept there (a UDP socket of the job may have the same port).
    JobNamespace,
}

impl std::fmt::Debug for TcpStub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TcpStub")
    }
}

/// What every TCP stub connection shares.
struct TcpShared {
    names: Arc<Mutex<Names>>,
    rules: Answerable,
    sink: Arc<dyn EventSink + Sync>,
    askers: Askers,
    at: TcpStubAt,
    clients: AtomicUsize,
}

impl TcpStub {
    /// Serve `listeners` (all at `at`) until [`TcpStub::stop`].
    pub fn start(
        listeners: Vec<TcpListener>,
        at: TcpStubAt,
        names: Arc<Mutex<Names>>,
        rules: Answerable,
        sink: Arc<dyn EventSink + Sync>,
        askers: Askers,
    ) -> std::io::Result<TcpStub> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(TcpShared {
            names,
            rules,
            sink,
            askers,
            at,
            clients: AtomicUsize::new(0),
        });
        let mut stub = TcpStub {
            stop,
            threads: Vec::new(),
        };
        for listener in listeners {
            // As for the UDP stub: a listener that cannot be served stops
            // the accept threads already started.
            let started = listener.set_nonblocking(false).and_then(|()| {
                let waker = listener.try_clone()?;
                let stopping = stub.stop.clone();
                let shared = shared.clone();
                let thread = std::thread::Builder::new()
                    .name("vetto-dns-tcp".into())
                    .spawn(move || accept_loop(&listener, &stopping, &shared))?;
                Ok((waker, thread))
            });
            match started {
                Ok(t) => stub.threads.push(t),
                Err(e) => {
                    stub.stop();
                    return Err(e);
                }
            }
        }
        Ok(stub)
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for (listener, t) in self.threads {
            // Wake the blocking accept; it then sees `stop`.
            crate::sandbox::dead_net::wake_acceptor(&listener);
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, stop: &AtomicBool, shared: &Arc<TcpShared>) {
    while !stop.load(Ordering::SeqCst) {
        if shared.clients.load(Ordering::SeqCst) >= MAX_TCP_CLIENTS {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let (stream, peer) = match accept_client(listener) {
            Ok(c) => c,
            // Woken to stop (the listener shut down).
            Err(_) if stop.load(Ordering::SeqCst) => return,
            Err(_) => {
                // EMFILE and the like: do not spin.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        let who = shared.askers.lock().ok().and_then(|mut m| match shared.at {
            TcpStubAt::HostLoopback => m.remove(&peer),
            TcpStubAt::JobNamespace => m.get(&peer).cloned(),
        });
        // On the host's loopback anyone may connect: only a connect the
        // supervisor registered is the job's. A stranger is closed at
        // once, unanswered and unrecorded: it costs the session nothing
        // (no client slot held, no violation in its verdict).
        if shared.at == TcpStubAt::HostLoopback && who.is_none() {
            drop(stream);
            continue;
        }
        shared.clients.fetch_add(1, Ordering::SeqCst);
        let client = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("vetto-dns-client".into())
            .spawn(move || {
                serve_tcp(stream, &client, who);
                client.clients.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.clients.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Answer the messages of one connection until it ends, idles, or sends
/// one longer than a query may be.
fn serve_tcp(
    mut stream: TcpStream,
    shared: &TcpShared,
    who: Option<(ProcessInfo, Option<Package>)>,
) {
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(TCP_IDLE)).is_err() {
        return;
    }
    let _ = stream.set_write_timeout(Some(TCP_IDLE));
    let mut buf = [0u8; MAX_QUERY];
    loop {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).is_err() {
            return;
        }
        let n = usize::from(u16::from_be_bytes(len));
        let Some(msg) = buf.get_mut(..n) else {
            return;
        };
        if stream.read_exact(msg).is_err() {
            return;
        }
        let (reply, refused) = respond(msg, &shared.names, &shared.rules);
        if let Some(name) = refused {
            // As the UDP stub beside it records.
            let provenance = match shared.at {
                TcpStubAt::HostLoopback => Provenance::SeccompNotify,
                TcpStubAt::JobNamespace => Provenance::Proxy,
            };
            record_refused(
                shared.sink.as_ref(),
                name,
                who.clone(),
                provenance,
                &shared.rules.expected,
            );
        }
        let Some(reply) = reply else {
            return;
        };
        let Ok(rlen) = u16::try_from(reply.len()) else {
            return;
        };
        let mut out = rlen.to_be_bytes().to_vec();
        out.extend_from_slice(&reply);
        if stream.write_all(&out).is_err() {
            return;
        }
    }
}

/// A refused query: a connection record (the name) and its violation.
fn record_refused(
    sink: &(dyn EventSink + Sync),
    name: String,
    who: Option<(ProcessInfo, Option<Package>)>,
    provenance: Provenance,
    expected: &[HostPattern],
) {
    let (process, attribution) = match who {
        Some((p, a)) => (Some(p), a),
        None => (None, None),
    };
    let conn = Connection {
        requests: Vec::new(),
        time: Timestamp::now(),
        host: Some(name),
        port: 53,
        addr: None,
        decision: ConnDecision::Denied,
        reason: ConnReason::DnsRefused,
        rule: None,
        via: ConnVia::Dns,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        process,
        attribution,
        detail: "a DNS query to vetto's stub for a name no rule allows: NXDOMAIN".into(),
    };
    let violation = conn.violation_expecting(provenance, expected);
    sink.emit(Event::Connection(Box::new(conn)));
    if let Some(v) = violation {
        sink.emit(Event::Violation(Box::new(v)));
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::policy::Origin;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q
    }

    fn rules() -> Answerable {
        let pat = |h: &str, port| HostPattern {
            host: h.into(),
            port,
            origin: Origin {
                source: "test".into(),
                line: 0,
                col: 0,
                written: h.into(),
            },
        };
        Answerable {
            allow: vec![pat("allowed.test", Some(8443)), pat("*.example.com", None)],
            deny: vec![pat("evil.example.com", None)],
            expected: Vec::new(),
        }
    }

    #[test]
    fn only_the_loopback_addresses_reverse_names_are_unrecorded() {
        let v6_loopback = format!("1{}.ip6.arpa", ".0".repeat(31));
        assert!(is_loopback_reverse(&v6_loopback));
        assert!(is_loopback_reverse("1.0.0.127.in-addr.arpa"));
        for recorded in [
            "2.0.0.127.in-addr.arpa.exfil.test",
            "data.0.0.127.in-addr.arpa",
            "1.0.0.10.in-addr.arpa",
            "127.in-addr.arpa",
            &format!("2{}.ip6.arpa", ".0".repeat(31)),
            &format!("1{}.ip6.arpa", ".0".repeat(30)),
        ] {
            assert!(!is_loopback_reverse(recorded), "{recorded}");
        }
    }

    #[test]
    fn allowed_names_get_a_stable_synthetic_address_and_others_nxdomain() {
        let names = Mutex::new(Names::default());
        let (reply, refused) = respond(&query("Allowed.Test", TYPE_A), &names, &rules());
        let reply = reply.unwrap();
        assert_eq!(refused, None);
        assert_eq!(reply[3] & 0xf, NOERROR);
        assert_eq!(&reply[reply.len() - 4..], &[127, 77, 0, 1]);
        let again = respond(&query("allowed.test", TYPE_A), &names, &rules())
            .0
            .unwrap();
        assert_eq!(&again[again.len() - 4..], &[127, 77, 0, 1]);
        let ip: IpAddr = Ipv4Addr::new(127, 77, 0, 1).into();
        assert_eq!(
            names.lock().unwrap().name_of(ip).as_deref(),
            Some("allowed.test")
        );

        let (reply, refused) = respond(&query("canary.denied.test", TYPE_A), &names, &rules());
        assert_eq!(reply.unwrap()[3] & 0xf, NXDOMAIN);
        assert_eq!(refused.as_deref(), Some("canary.denied.test"));
        let (reply, refused) = respond(&query("evil.example.com", TYPE_A), &names, &rules());
        assert_eq!(reply.unwrap()[3] & 0xf, NXDOMAIN, "deny wins");
        assert!(refused.is_some());
        // AAAA: the name exists, no IPv6 record.
        let reply = respond(&query("a.example.com", 28), &names, &rules())
            .0
            .unwrap();
        assert_eq!((reply[3] & 0xf, reply[7]), (NOERROR, 0));
    }

    // The asker is registered by a socket made with nix, as the Linux
    // supervisor makes it.
    #[cfg(unix)]
    #[test]
    fn the_tcp_stub_answers_framed_queries_and_names_the_asker() {
        use crate::events::log::VecSink;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let sink = Arc::new(VecSink::default());
        let askers = Askers::default();
        let names = Arc::new(Mutex::new(Names::default()));
        let stub = TcpStub::start(
            vec![listener],
            TcpStubAt::HostLoopback,
            names,
            rules(),
            sink.clone(),
            askers.clone(),
        )
        .unwrap();
        // As the supervisor does: bind, register, then connect.
        use nix::sys::socket::{self as ns, AddressFamily, SockFlag, SockType, SockaddrIn};
        use std::os::fd::AsRawFd;
        let fd = ns::socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )
        .unwrap();
        ns::bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
        let local: SockaddrIn = ns::getsockname(fd.as_raw_fd()).unwrap();
        let curl = ProcessInfo {
            pid: 7,
            exe: "/usr/bin/curl".into(),
            ..Default::default()
        };
        expect_asker(
            &askers,
            SocketAddr::from((Ipv4Addr::LOCALHOST, local.port())),
            (curl, None),
        );
        ns::connect(
            fd.as_raw_fd(),
            &SockaddrIn::from(match at {
                SocketAddr::V4(v4) => v4,
                SocketAddr::V6(_) => unreachable!(),
            }),
        )
        .unwrap();
        let mut client = std::net::TcpStream::from(fd);
        client
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut ask = |name: &str| {
            let q = query(name, TYPE_A);
            let mut framed = (q.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&q);
            client.write_all(&framed).unwrap();
            let mut len = [0u8; 2];
            client.read_exact(&mut len).unwrap();
            let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
            client.read_exact(&mut reply).unwrap();
            reply
        };
        let good = ask("allowed.test");
        assert_eq!(&good[good.len() - 4..], &[127, 77, 0, 1]);
        let bad = ask("canary.denied.test");
        assert_eq!(bad[3] & 0xf, NXDOMAIN);
        // An oversized message ends the connection, unanswered.
        client.write_all(&[0xff, 0xff]).unwrap();
        client.write_all(&[0u8; 64]).unwrap();
        let mut rest = Vec::new();
        let _ = client.read_to_end(&mut rest);
        assert!(rest.is_empty());
        stub.stop();
        let events = sink.0.lock().unwrap();
        let refused = events
            .iter()
            .find_map(|e| match e {
                Event::Connection(c) => Some(c.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(refused.host.as_deref(), Some("canary.denied.test"));
        assert_eq!(refused.process.unwrap().pid, 7);
        assert!(events.iter().any(|e| matches!(e, Event::Violation(_))));
    }

    /// Another user's process on the host connects to the stub's port on
    /// loopback: it gets no answer and the session records nothing.
    #[test]
    fn a_stranger_on_the_hosts_loopback_gets_nothing_from_the_tcp_stub() {
        use crate::events::log::VecSink;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let sink = Arc::new(VecSink::default());
        let stub = TcpStub::start(
            vec![listener],
            TcpStubAt::HostLoopback,
            Arc::new(Mutex::new(Names::default())),
            rules(),
            sink.clone(),
            Askers::default(),
        )
        .unwrap();
        let mut stranger = std::net::TcpStream::connect(at).unwrap();
        stranger
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let q = query("canary.denied.test", TYPE_A);
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        // The stub may already have closed it: a write error is fine.
        let _ = stranger.write_all(&framed);
        let mut got = Vec::new();
        let _ = stranger.read_to_end(&mut got);
        assert!(got.is_empty(), "a stranger was answered");
        stub.stop();
        assert!(sink.0.lock().unwrap().is_empty(), "a stranger was recorded");
    }

    #[test]
    fn malformed_queries_are_refused_without_panics() {
        let names = Mutex::new(Names::default());
        assert_eq!(respond(&[1, 2, 3], &names, &rules()).0, None);
        let mut q = query("allowed.test", TYPE_A);
        q.truncate(q.len() - 3);
        assert_eq!(respond(&q, &names, &rules()).0.unwrap()[3] & 0xf, FORMERR);
        let mut long = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for _ in 0..10 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        assert_eq!(
            respond(&long, &names, &rules()).0.unwrap()[3] & 0xf,
            FORMERR
        );
        // Every prefix of a valid query: an answer or nothing, never a panic.
        let q = query("allowed.test", TYPE_A);
        for n in 0..q.len() {
            let _ = respond(&q[..n], &names, &rules());
        }
    }

    #[test]
    fn the_stub_reads_a_datagram_and_its_sender_without_std_recv_from() {
        // A real datagram: its length and sender.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"query", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = recv_datagram(&rx, &mut buf).unwrap();
        assert_eq!((n, from), (5, tx.local_addr().unwrap()));
    }
}
