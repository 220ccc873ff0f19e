//! One connection, from accept to the record: read what the job wants
//! (bounded, under the idle timeout), decide, connect to the pinned address,
//! check the TLS server name, copy both ways, and log one
//! [`Event::Connection`] (plus a violation when it was refused).

use crate::sandbox::os::AsFd;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use crate::events::{
    ConnDecision, ConnReason, ConnVia, Connection, Event, Package, ProcessInfo, Provenance,
    Timestamp,
};
use crate::sandbox::splice::{self, Pipe};

use super::resolve::ResolveError;
use super::sni::{self, Hello};
use super::{ListenerKind, Shared, emit, http, socks};
use crate::policy::egress::normalise_name;

/// The copy buffer, per direction (when `splice(2)` is not available).
const BUF: usize = 64 * 1024;

/// The most one `splice(2)` moves into a pipe.
const SPLICE_MAX: usize = 1 << 20;

pub(crate) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, kind: ListenerKind) {
    let mut stop = shared.stop.subscribe();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            // Out of file descriptors or a connection reset before accept:
            // back off a little instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if shared.registered_only.load(Ordering::Relaxed) && !registered(&shared, peer) {
            shared.strangers.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        }
        let Ok(permit) = shared.slots.clone().try_acquire_owned() else {
            let mut rec = Record::new(via_of(&kind));
            if let Some(o) = take_redirect(&shared, peer) {
                rec.target(None, o.port);
                rec.addr = Some(o.ip.to_string());
                rec.process = o.process;
                rec.attribution = o.attribution;
            }
            rec.refuse(
                &shared,
                ConnReason::Limit,
                format!(
                    "more than {} connections open at once",
                    shared.limits.max_connections
                ),
            );
            rec.finish(&shared);
            drop(stream);
            continue;
        };
        let shared = shared.clone();
        let kind = kind.clone();
        tokio::spawn(async move {
            let mut rec = Record::new(via_of(&kind));
            let _ = stream.set_nodelay(true);
            match kind {
                ListenerKind::Explicit => explicit(&shared, stream, peer, &mut rec).await,
                ListenerKind::Transparent { names } => {
                    transparent(&shared, stream, peer, &*names, &mut rec).await
                }
                ListenerKind::Redirected => redirected(&shared, stream, peer, &mut rec).await,
            }
            rec.finish(&shared);
            drop(permit);
        });
    }
}

fn via_of(kind: &ListenerKind) -> ConnVia {
    match kind {
        ListenerKind::Explicit => ConnVia::Connect,
        ListenerKind::Transparent { .. } => ConnVia::Transparent,
        ListenerKind::Redirected => ConnVia::Redirect,
    }
}

/// What one connection did, filled in as it goes.
pub(crate) struct Record {
    time: Timestamp,
    started: Instant,
    pub(crate) via: ConnVia,
    host: Option<String>,
    port: u16,
    addr: Option<String>,
    rule: Option<String>,
    /// Set when refused (or failed); `None` while allowed.
    outcome: Option<(ConnDecision, ConnReason)>,
    /// `--audit`: the refusal that was only observed.
    observed: Option<ConnReason>,
    pub(crate) detail: String,
    pub(crate) bytes_up: u64,
    pub(crate) bytes_down: u64,
    process: Option<ProcessInfo>,
    attribution: Option<Package>,
    /// The requests read on an intercepted connection.
    pub(crate) requests: Vec<crate::events::HttpRequest>,
    /// Secrets whose placeholder this connection carried to a host they
    /// are not for.
    pub(crate) elsewhere: Vec<String>,
}

impl Record {
    fn new(via: ConnVia) -> Record {
        Record {
            time: Timestamp::now(),
            started: Instant::now(),
            via,
            host: None,
            port: 0,
            addr: None,
            rule: None,
            outcome: None,
            observed: None,
            detail: String::new(),
            bytes_up: 0,
            bytes_down: 0,
            process: None,
            attribution: None,
            requests: Vec::new(),
            elsewhere: Vec::new(),
        }
    }

    /// Note the placeholders of other hosts' secrets in `bytes` (what the
    /// job sends on this connection, where vetto can read it).
    pub(crate) fn look_for_placeholders(&mut self, shared: &Shared, bytes: &[u8]) {
        let Some(icp) = &shared.intercept else {
            return;
        };
        for name in icp.misdirected(bytes, self.host.as_deref(), self.port) {
            if !self.elsewhere.contains(&name) {
                self.elsewhere.push(name);
            }
        }
    }

    /// Refuse for `reason`. Under `--audit` a policy refusal (not a
    /// protocol error or a limit) is only observed: returns `true` when the
    /// connection may go on.
    pub(crate) fn refuse(&mut self, shared: &Shared, reason: ConnReason, detail: String) -> bool {
        let overridable = matches!(
            reason,
            ConnReason::NotAllowed
                | ConnReason::DeniedByRule
                | ConnReason::PrivateAddress
                | ConnReason::SniMismatch
                | ConnReason::SniMissing
        );
        self.detail = detail;
        if shared.audit && overridable {
            self.observed.get_or_insert(reason);
            true
        } else {
            self.outcome = Some((ConnDecision::Denied, reason));
            false
        }
    }

    /// The decision so far: `None` while allowed.
    pub(crate) fn decision(&self) -> Option<ConnDecision> {
        self.outcome.map(|(d, _)| d)
    }

    pub(crate) fn fail(&mut self, reason: ConnReason, detail: String) {
        self.detail = detail;
        self.outcome = Some((ConnDecision::Failed, reason));
    }

    /// Note where the connection is going (before any decision).
    fn target(&mut self, host: Option<&str>, port: u16) {
        self.host = host.map(|h| normalise_name(h).unwrap_or_else(|| printable(h)));
        self.port = port;
    }

    fn finish(self, shared: &Shared) {
        let (decision, reason) = match (self.outcome, self.observed) {
            (Some(o), _) => o,
            (None, Some(r)) => (ConnDecision::Observed, r),
            (None, None) => (ConnDecision::Allowed, ConnReason::AllowedByRule),
        };
        shared.connections.fetch_add(1, Ordering::Relaxed);
        if decision == ConnDecision::Denied {
            shared.denied.fetch_add(1, Ordering::Relaxed);
        }
        let conn = Connection {
            time: self.time,
            host: self.host,
            port: self.port,
            addr: self.addr,
            decision,
            reason,
            rule: self.rule,
            via: self.via,
            bytes_up: self.bytes_up,
            bytes_down: self.bytes_down,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            process: self.process,
            attribution: self.attribution,
            detail: self.detail,
            requests: self.requests,
        };
        let violation = conn.violation(Provenance::Proxy);
        let elsewhere: Vec<_> = self
            .elsewhere
            .iter()
            .map(|name| conn.secret_sent_elsewhere(name))
            .collect();
        emit(shared, Event::Connection(Box::new(conn)));
        if let Some(v) = violation {
            emit(shared, Event::Violation(Box::new(v)));
        }
        for v in elsewhere {
            emit(shared, Event::Violation(Box::new(v)));
        }
    }
}

/// A name from the job, safe to log: printable ASCII, at most 255 bytes.
fn printable(s: &str) -> String {
    s.chars()
        .take(255)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// Read more bytes into `buf` under the idle timeout; `Ok(0)` at EOF.
pub(crate) async fn read_some<R: AsyncRead + Unpin>(
    shared: &Shared,
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<usize> {
    let room = max.saturating_sub(buf.len()).min(4096);
    if room == 0 {
        return Err(io::Error::new(io::ErrorKind::OutOfMemory, "head too large"));
    }
    let mut chunk = [0u8; 4096];
    let mut stop = shared.stop.subscribe();
    let n = tokio::select! {
        r = timeout(shared.limits.idle_timeout, r.read(&mut chunk[..room])) => {
            r.map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "idle"))??
        }
        _ = stop.wait_for(|s| *s) => return Err(session_ended()),
    };
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn session_ended() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "the session ended")
}

/// Why reading a request failed, for the record.
pub(crate) fn read_refusal(e: &io::Error) -> (ConnReason, String) {
    match e.kind() {
        io::ErrorKind::TimedOut => (
            ConnReason::Limit,
            "idle timeout while reading the request".into(),
        ),
        io::ErrorKind::OutOfMemory => (
            ConnReason::Limit,
            "request head larger than the limit".into(),
        ),
        io::ErrorKind::Interrupted => (
            ConnReason::Limit,
            "the session ended during the request".into(),
        ),
        _ => (
            ConnReason::Malformed,
            format!("connection ended before the request was complete: {e}"),
        ),
    }
}

async fn explicit(shared: &Shared, mut client: TcpStream, peer: SocketAddr, rec: &mut Record) {
    // The supervisor registers the job's connects to the proxy too: then the
    // record names the process (the registered destination is the proxy).
    if let Some(o) = take_redirect(shared, peer) {
        rec.process = o.process;
        rec.attribution = o.attribution;
    }
    let max = shared.limits.max_header_bytes;
    let mut buf = Vec::with_capacity(1024);
    match read_some(shared, &mut client, &mut buf, max).await {
        Ok(0) => {
            rec.refuse(
                shared,
                ConnReason::Malformed,
                "closed without a request".into(),
            );
            return;
        }
        Ok(_) => {}
        Err(e) => {
            let (r, d) = read_refusal(&e);
            rec.refuse(shared, r, d);
            return;
        }
    }
    if buf.first() == Some(&5) {
        rec.via = ConnVia::Socks5;
        return socks::serve(shared, client, buf, rec).await;
    }
    // SOCKS4 (a client configured with `socks4://`): answered at once with
    // its own "rejected" reply, so it fails fast instead of waiting for a
    // request head that never comes while it holds a connection slot.
    if buf.first() == Some(&4) {
        rec.via = ConnVia::Socks5;
        let _ = client.write_all(&socks::SOCKS4_REJECTED).await;
        rec.refuse(
            shared,
            ConnReason::Malformed,
            "SOCKS4 is not spoken: SOCKS5 is (ALL_PROXY=socks5h://…)".into(),
        );
        return;
    }
    let end = loop {
        if let Some(end) = super::wire::head_end(&buf) {
            break end;
        }
        match read_some(shared, &mut client, &mut buf, max).await {
            Ok(0) => {
                rec.refuse(
                    shared,
                    ConnReason::Malformed,
                    "connection ended inside the request head".into(),
                );
                return;
            }
            Ok(_) => {}
            Err(e) => {
                let (r, d) = read_refusal(&e);
                if r == ConnReason::Limit && e.kind() == io::ErrorKind::OutOfMemory {
                    let _ = client
                        .write_all(&http::response(431, "Request Header Fields Too Large", ""))
                        .await;
                }
                rec.refuse(shared, r, d);
                return;
            }
        }
    };
    let head = match http::parse_head(&buf[..end]) {
        Ok(h) => h,
        Err(why) => {
            let _ = client
                .write_all(&http::response(400, "Bad Request", ""))
                .await;
            rec.refuse(shared, ConnReason::Malformed, why.into());
            return;
        }
    };
    if !head.has_credential(&shared.auth_token) {
        let _ = client
            .write_all(&http::response(
                407,
                "Proxy Authentication Required",
                "Proxy-Authenticate: Basic realm=\"vetto\"\r\n",
            ))
            .await;
        rec.refuse(shared, ConnReason::NoCredential, String::new());
        return;
    }
    let early = buf[end..].to_vec();
    if head.method.eq_ignore_ascii_case("CONNECT") {
        rec.via = ConnVia::Connect;
        let (host, port) = match http::authority(&head.target) {
            Ok(x) => x,
            Err(why) => return bad_request(shared, rec, &mut client, why).await,
        };
        const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
        match decide(shared, rec, &host, port).await {
            Err(()) => {
                let _ = client.write_all(&refusal_response(rec)).await;
            }
            // A bare address is dialled before the answer, so a failure
            // is a 502 the client can show.
            Ok(Target::Addr(ip)) => {
                let Ok(server) = dial(shared, rec, SocketAddr::new(ip, port)).await else {
                    let _ = client.write_all(&refusal_response(rec)).await;
                    return;
                };
                if client.write_all(ESTABLISHED).await.is_ok() {
                    tunnel(shared, rec, client, server, None, early).await;
                }
            }
            // A name is dialled only once the job's first bytes agree.
            Ok(Target::Name(route)) => {
                if client.write_all(ESTABLISHED).await.is_ok() {
                    tunnel_named(shared, rec, client, route, early).await;
                }
            }
        }
    } else {
        rec.via = ConnVia::Http;
        let (host, port, path) = match http::absolute(&head.target) {
            Ok(x) => x,
            Err(why) => return bad_request(shared, rec, &mut client, why).await,
        };
        rec.target(Some(&host), port);
        rec.look_for_placeholders(shared, &buf[..end]);
        let Some((server, name)) = open_or_answer(shared, rec, &mut client, &host, port).await
        else {
            return;
        };
        let host_for_header = name.unwrap_or(host);
        let mut first = http::origin_request(&head, &host_for_header, port, &path);
        // One request per connection (the origin was sent `Connection:
        // close`): its body and no byte after it. An upgrade (WebSocket)
        // is a tunnel from here on, as CONNECT is.
        if http::is_upgrade(&head) {
            first.extend_from_slice(&early);
            pump(shared, rec, client, server, first, None).await;
        } else {
            let mut body = http::body_of(&head);
            let n = body.take(&early);
            first.extend_from_slice(&early[..n]);
            pump(shared, rec, client, server, first, Some(body)).await;
        }
    }
}

/// A request whose target cannot be read: 400, recorded as malformed.
async fn bad_request(shared: &Shared, rec: &mut Record, client: &mut TcpStream, why: &str) {
    let _ = client
        .write_all(&http::response(400, "Bad Request", ""))
        .await;
    rec.refuse(shared, ConnReason::Malformed, why.into());
}

/// The upstream connection for `host:port`, or the refusal answered to
/// the client (the decision is already recorded by [`open`]).
async fn open_or_answer(
    shared: &Shared,
    rec: &mut Record,
    client: &mut TcpStream,
    host: &str,
    port: u16,
) -> Option<(TcpStream, Option<String>)> {
    match open(shared, rec, host, port).await {
        Ok(x) => Some(x),
        Err(()) => {
            let _ = client.write_all(&refusal_response(rec)).await;
            None
        }
    }
}

/// The response to a refused or failed CONNECT / HTTP request.
fn refusal_response(rec: &Record) -> Vec<u8> {
    let reason = rec.outcome.map(|(_, r)| r).unwrap_or(ConnReason::Malformed);
    let tag = serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let extra = format!("X-Vetto-Refused: {tag}\r\n");
    match rec.outcome {
        Some((ConnDecision::Failed, _)) => http::response(502, "Bad Gateway", &extra),
        Some((_, ConnReason::Limit)) => http::response(503, "Service Unavailable", &extra),
        Some((_, ConnReason::Malformed)) => http::response(400, "Bad Request", &extra),
        _ => http::response(403, "Forbidden", &extra),
    }
}

/// What the rules made of `host:port` as the job named it, before any
/// connection: a bare address (dialled at once: no server name to agree
/// with), or a name whose connection waits for the job's first bytes.
pub(crate) enum Target {
    Addr(IpAddr),
    Name(Route),
}

/// An allowed name, resolved and checked: where its connection goes once
/// the job's TLS server name (if it speaks TLS) agrees with it.
pub(crate) struct Route {
    /// The normalised name the TLS server name must agree with.
    pub(crate) name: String,
    port: u16,
    through: Through,
}

impl Route {
    pub(crate) fn port(&self) -> u16 {
        self.port
    }
}

enum Through {
    /// The configured upstream proxy, which resolves the name itself.
    Upstream,
    /// These addresses in turn (pinned, or resolved and checked).
    Addrs(Vec<IpAddr>),
}

/// Decide `host:port` as the job named it (a name or an IP literal):
/// the refusal is recorded here, and no connection is made.
pub(crate) async fn decide(
    shared: &Shared,
    rec: &mut Record,
    host: &str,
    port: u16,
) -> Result<Target, ()> {
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return decide_addr(shared, rec, ip, port).map(|()| Target::Addr(ip));
    }
    route(shared, rec, host, port).await.map(Target::Name)
}

/// Decide and connect at once (a plain-HTTP request, whose server name is
/// its `Host`, which vetto writes itself).
pub(crate) async fn open(
    shared: &Shared,
    rec: &mut Record,
    host: &str,
    port: u16,
) -> Result<(TcpStream, Option<String>), ()> {
    match decide(shared, rec, host, port).await? {
        Target::Addr(ip) => dial(shared, rec, SocketAddr::new(ip, port))
            .await
            .map(|s| (s, None)),
        Target::Name(r) => connect_route(shared, rec, &r)
            .await
            .map(|s| (s, Some(r.name))),
    }
}

/// A bare address: only an IP rule allows it (or `--audit`).
pub(crate) fn decide_addr(
    shared: &Shared,
    rec: &mut Record,
    ip: IpAddr,
    port: u16,
) -> Result<(), ()> {
    rec.target(None, port);
    rec.addr = Some(ip.to_string());
    let d = shared.rules.decide_addr(ip, port);
    rec.rule = d.rule;
    if !d.allowed {
        let detail = match d.reason {
            ConnReason::PrivateAddress => format!("{ip} is {}", super::classify(ip).as_str()),
            _ => format!("{ip} is named by no IP rule"),
        };
        if !rec.refuse(shared, d.reason, detail) {
            return Err(());
        }
    }
    Ok(())
}

pub(crate) async fn dial(
    shared: &Shared,
    rec: &mut Record,
    to: SocketAddr,
) -> Result<TcpStream, ()> {
    match timeout(shared.limits.connect_timeout, TcpStream::connect(to)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => {
            rec.fail(ConnReason::UpstreamFailed, format!("connect to {to}: {e}"));
            Err(())
        }
        Err(_) => {
            rec.fail(
                ConnReason::UpstreamFailed,
                format!("connect to {to}: timed out"),
            );
            Err(())
        }
    }
}

/// A name: the rules decide, then vetto resolves it itself (or takes its
/// pins) and refuses internal answers that no pin or IP rule names.
pub(crate) async fn route(
    shared: &Shared,
    rec: &mut Record,
    host: &str,
    port: u16,
) -> Result<Route, ()> {
    rec.target(Some(host), port);
    let d = shared.rules.decide_name(host, port);
    rec.rule = d.rule;
    let Some(name) = normalise_name(host) else {
        rec.refuse(shared, ConnReason::Malformed, "not a host name".into());
        return Err(());
    };
    if !d.allowed && !rec.refuse(shared, d.reason, String::new()) {
        return Err(());
    }
    let pins = shared.rules.pinned(&name);
    if pins.is_empty() && shared.upstream.is_some() {
        return Ok(Route {
            name,
            port,
            through: Through::Upstream,
        });
    }
    let (addrs, pinned) = if pins.is_empty() {
        match shared.resolver.resolve(&name, port).await {
            Ok(a) => (a, false),
            Err(ResolveError::NotFound) => {
                rec.fail(ConnReason::ResolveFailed, String::new());
                return Err(());
            }
            Err(ResolveError::Full) => {
                rec.refuse(
                    shared,
                    ConnReason::Limit,
                    format!("more than {} distinct names", shared.limits.max_names),
                );
                return Err(());
            }
        }
    } else {
        (pins, true)
    };
    let mut usable = Vec::with_capacity(addrs.len());
    let mut internal = None;
    for ip in addrs {
        match shared.rules.check_resolved(ip, port, pinned) {
            Ok(()) => usable.push(ip),
            Err(class) => {
                internal.get_or_insert((ip, class));
            }
        }
    }
    if usable.is_empty()
        && let Some((ip, class)) = internal
    {
        // Every address was internal: under --audit the first one is
        // still tried.
        rec.addr = Some(ip.to_string());
        let detail = format!("{name} resolved to {ip}, which is {}", class.as_str());
        if !rec.refuse(shared, ConnReason::PrivateAddress, detail) {
            return Err(());
        }
        usable.push(ip);
    }
    Ok(Route {
        name,
        port,
        through: Through::Addrs(usable),
    })
}

/// Connect along `route`: the first address that answers.
pub(crate) async fn connect_route(
    shared: &Shared,
    rec: &mut Record,
    route: &Route,
) -> Result<TcpStream, ()> {
    let addrs = match &route.through {
        Through::Upstream => {
            let Some(up) = &shared.upstream else {
                rec.fail(ConnReason::UpstreamFailed, "no upstream proxy".into());
                return Err(());
            };
            return match super::upstream::connect(shared, up, &route.name, route.port).await {
                Ok(s) => {
                    rec.addr = Some(format!("{}:{}", up.host, up.port));
                    rec.detail = "through the upstream proxy".into();
                    Ok(s)
                }
                Err(e) => {
                    rec.fail(ConnReason::UpstreamFailed, format!("upstream proxy: {e}"));
                    Err(())
                }
            };
        }
        Through::Addrs(a) => a,
    };
    let before = rec.outcome;
    for ip in addrs {
        rec.addr = Some(ip.to_string());
        if let Ok(s) = dial(shared, rec, SocketAddr::new(*ip, route.port)).await {
            // An earlier address's failure is not this connection's.
            rec.outcome = before;
            return Ok(s);
        }
    }
    if addrs.is_empty() {
        rec.fail(ConnReason::ResolveFailed, "no address".into());
    }
    Err(())
}

/// Ports whose protocols always have the client speak first (implicit TLS,
/// HTTP): a connection there waits for the job's first bytes, however late.
const CLIENT_FIRST: &[u16] = &[
    80, 443, 465, 563, 636, 853, 989, 990, 992, 993, 994, 995, 5061, 6697, 8443, 9443,
];

/// Ports whose protocols have the server speak first (FTP, SSH, telnet,
/// SMTP, POP3, NNTP, IMAP, submission, MySQL, ManageSieve): dialled at once.
const SERVER_FIRST: &[u16] = &[21, 22, 23, 25, 110, 119, 143, 587, 2525, 3306, 4190];

/// Elsewhere, how long the job's first bytes are awaited before the server
/// is dialled anyway (a server-first protocol on an unusual port).
const FIRST_BYTES_GRACE: Duration = Duration::from_millis(300);

/// A tunnel to a name: the job's first bytes are read, and a TLS server
/// name checked, *before* the server is dialled, so a refused handshake
/// never opens a connection to the allowed server (nor tells it anything).
pub(crate) async fn tunnel_named(
    shared: &Shared,
    rec: &mut Record,
    mut client: TcpStream,
    route: Route,
    mut early: Vec<u8>,
) {
    if early.is_empty() && !SERVER_FIRST.contains(&route.port) {
        let grace = (!CLIENT_FIRST.contains(&route.port)).then_some(FIRST_BYTES_GRACE);
        let read = read_some(shared, &mut client, &mut early, sni::MAX_HELLO + 4096);
        let got = match grace {
            Some(g) => timeout(g, read).await.ok(),
            None => Some(read.await),
        };
        match got {
            // The server may speak first: dial, and read on in `tunnel`.
            None => {}
            Some(Ok(0)) => return,
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                if e.kind() == io::ErrorKind::TimedOut {
                    rec.detail = "closed: idle timeout".into();
                }
                return;
            }
        }
    }
    if !early.is_empty()
        && !hello_agrees(shared, rec, &mut client, &mut early, Some(&route.name)).await
    {
        return;
    }
    if !early.first().is_some_and(|&b| sni::looks_like_tls(b)) {
        rec.look_for_placeholders(shared, &early);
    }
    // A host a secret is for: the job's TLS ends here (its ClientHello
    // named the host, checked just above).
    if let Some(icp) = &shared.intercept
        && early.first().is_some_and(|&b| sni::looks_like_tls(b))
        && icp.covers(&route.name, route.port)
    {
        return super::intercept::serve(shared, icp, rec, client, route, early).await;
    }
    let Ok(server) = connect_route(shared, rec, &route).await else {
        return;
    };
    if early.is_empty() {
        tunnel(shared, rec, client, server, Some(&route.name), early).await;
    } else {
        pump(shared, rec, client, server, early, None).await;
    }
}

/// After `200`/SOCKS success: if the job's first bytes are a TLS
/// ClientHello, its server name must be `name` (nothing of the job's reaches
/// the server before that); then copy.
pub(crate) async fn tunnel(
    shared: &Shared,
    rec: &mut Record,
    mut client: TcpStream,
    server: TcpStream,
    name: Option<&str>,
    mut early: Vec<u8>,
) {
    if early.is_empty() {
        // What is checked is the job's first bytes, whenever they come: a
        // server-first protocol's banner (SSH, SMTP) is passed to the job
        // meanwhile, and a readiness wake-up without data changes nothing.
        let mut banner = vec![0u8; 16 * 1024];
        loop {
            let mut first = Vec::new();
            let event = tokio::select! {
                r = read_some(shared, &mut client, &mut first, sni::MAX_HELLO + 4096) => Ok(r),
                r = server.readable() => Err(r),
            };
            match event {
                Ok(Ok(0)) => return,
                Ok(Ok(_)) => {
                    early = first;
                    break;
                }
                Ok(Err(e)) => {
                    if e.kind() == io::ErrorKind::TimedOut {
                        rec.detail = "closed: idle timeout".into();
                    }
                    return;
                }
                Err(Err(_)) => return,
                Err(Ok(())) => {
                    let n = match server.try_read(&mut banner) {
                        Ok(0) => return,
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(_) => return,
                    };
                    if shared.bytes_left() < n as u64 {
                        rec.detail = "closed: the session's byte limit was reached".into();
                        return;
                    }
                    if client.write_all(&banner[..n]).await.is_err() {
                        return;
                    }
                    rec.bytes_down += n as u64;
                    shared.bytes_down.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    }
    if !hello_agrees(shared, rec, &mut client, &mut early, name).await {
        return;
    }
    pump(shared, rec, client, server, early, None).await;
}

/// If the job's first bytes are a TLS ClientHello (read on until whole,
/// bounded), whether its server name is `name`; a refusal is recorded.
/// Bytes that are not TLS agree (there is no name in them to check).
async fn hello_agrees(
    shared: &Shared,
    rec: &mut Record,
    client: &mut TcpStream,
    early: &mut Vec<u8>,
    name: Option<&str>,
) -> bool {
    if !early.first().is_some_and(|&b| sni::looks_like_tls(b)) {
        return true;
    }
    loop {
        match sni::client_hello(early) {
            Hello::Incomplete => {
                match read_some(shared, client, early, sni::MAX_HELLO + 4096).await {
                    Ok(n) if n > 0 => continue,
                    Ok(_) => return false,
                    Err(e) => {
                        let (r, d) = read_refusal(&e);
                        rec.refuse(shared, r, format!("{d} (TLS ClientHello)"));
                        return false;
                    }
                }
            }
            Hello::Invalid => {
                rec.refuse(
                    shared,
                    ConnReason::Malformed,
                    "unreadable TLS ClientHello".into(),
                );
                return false;
            }
            Hello::Complete(sni) => {
                let Some(name) = name else {
                    return true;
                };
                return match &sni {
                    None => rec.refuse(shared, ConnReason::SniMissing, String::new()),
                    Some(s) if normalise_name(s).as_deref() != Some(name) => rec.refuse(
                        shared,
                        ConnReason::SniMismatch,
                        format!("the ClientHello names {}", printable(s)),
                    ),
                    Some(_) => true,
                };
            }
        }
    }
}

/// Copy both ways until both sides are done, a side is idle for the idle
/// timeout (measured over both directions), or the session's byte budget is
/// spent. `first` goes to the server before anything else.
pub(crate) async fn pump(
    shared: &Shared,
    rec: &mut Record,
    mut client: TcpStream,
    mut server: TcpStream,
    first: Vec<u8>,
    mut body: Option<http::Body>,
) {
    let start = Instant::now();
    let last = AtomicU64::new(0);
    if !first.is_empty() {
        if server.write_all(&first).await.is_err() {
            return;
        }
        let n = first.len() as u64;
        rec.bytes_up += n;
        shared.bytes_up.fetch_add(n, Ordering::Relaxed);
    }
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let mut stop = shared.stop.subscribe();
    // A framed request is copied through a buffer, where its end is seen.
    let pipes = match body {
        Some(_) => Err(io::Error::other("framed")),
        None => Pipe::new().and_then(|a| Ok((a, Pipe::new()?))),
    };
    let result = match pipes {
        // Zero-copy: the bytes stay in the kernel.
        Ok((pipe_up, pipe_down)) => {
            let both = async {
                tokio::try_join!(
                    splice_way(
                        shared,
                        &client,
                        &server,
                        &pipe_up,
                        &up,
                        &shared.bytes_up,
                        &last,
                        start
                    ),
                    splice_way(
                        shared,
                        &server,
                        &client,
                        &pipe_down,
                        &down,
                        &shared.bytes_down,
                        &last,
                        start
                    ),
                )
            };
            tokio::select! {
                r = both => r.map(|_| ()),
                _ = stop.wait_for(|s| *s) => Err(session_ended()),
            }
        }
        Err(_) => {
            let (mut cr, mut cw) = client.split();
            let (mut sr, mut sw) = server.split();
            let both = async {
                tokio::try_join!(
                    one_way(
                        shared,
                        &mut cr,
                        &mut sw,
                        Counters {
                            mine: &up,
                            total: &shared.bytes_up,
                            last: &last,
                            start
                        },
                        body.as_mut(),
                    ),
                    one_way(
                        shared,
                        &mut sr,
                        &mut cw,
                        Counters {
                            mine: &down,
                            total: &shared.bytes_down,
                            last: &last,
                            start
                        },
                        None,
                    ),
                )
            };
            tokio::select! {
                r = both => r.map(|_| ()),
                _ = stop.wait_for(|s| *s) => Err(session_ended()),
            }
        }
    };
    rec.bytes_up += up.load(Ordering::Relaxed);
    rec.bytes_down += down.load(Ordering::Relaxed);
    if let Err(e) = result {
        match e.kind() {
            io::ErrorKind::TimedOut => rec.detail = "closed: idle timeout".into(),
            io::ErrorKind::QuotaExceeded => {
                rec.detail = "closed: the session's byte limit was reached".into()
            }
            io::ErrorKind::Interrupted => rec.detail = "closed: the session ended".into(),
            _ => {}
        }
    }
}

/// One direction with `splice(2)` through `pipe`: move what `from` holds
/// into the pipe and from the pipe into `to`, until `from` has nothing
/// more (`WouldBlock`); only then wait for it to become readable (and for
/// `to` only when it is full), with the same idle and byte bounds as
/// [`one_way`]. No readiness future or timer per chunk while bytes keep
/// coming. The pipe is drained before the next read, so it never holds
/// more than one read's worth.
#[expect(
    clippy::too_many_arguments,
    reason = "the two directions share the counters"
)]
async fn splice_way(
    shared: &Shared,
    from: &TcpStream,
    to: &TcpStream,
    pipe: &Pipe,
    mine: &AtomicU64,
    total: &AtomicU64,
    last: &AtomicU64,
    start: Instant,
) -> io::Result<()> {
    let idle = shared.limits.idle_timeout;
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    let now_ms = || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "idle");
    loop {
        let left = shared.bytes_left();
        if left == 0 {
            return Err(io::Error::new(
                io::ErrorKind::QuotaExceeded,
                "session bytes",
            ));
        }
        let max = usize::try_from(left).unwrap_or(usize::MAX).min(SPLICE_MAX);
        // Without readiness recorded, `try_io` answers `WouldBlock`
        // without a call; a `WouldBlock` from the call clears it.
        let n = match from.try_io(Interest::READABLE, || pipe.fill_from(from.as_fd(), max)) {
            Ok(0) => {
                let _ = splice::shutdown_write(to.as_fd());
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                match timeout(idle, from.readable()).await {
                    Ok(r) => r?,
                    Err(_) if now_ms().saturating_sub(last.load(Ordering::Relaxed)) < idle_ms => {}
                    Err(_) => return Err(timed_out()),
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut in_pipe = n;
        while in_pipe > 0 {
            match to.try_io(Interest::WRITABLE, || pipe.drain_to(to.as_fd(), in_pipe)) {
                Ok(m) => in_pipe -= m.min(in_pipe),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    timeout(idle, to.writable())
                        .await
                        .map_err(|_| timed_out())??;
                }
                Err(e) => return Err(e),
            }
        }
        mine.fetch_add(n as u64, Ordering::Relaxed);
        total.fetch_add(n as u64, Ordering::Relaxed);
        last.store(now_ms(), Ordering::Relaxed);
    }
}

/// The byte counters of one direction of a connection.
pub(crate) struct Counters<'a> {
    pub mine: &'a AtomicU64,
    pub total: &'a AtomicU64,
    /// When either direction last moved a byte (ms since `start`).
    pub last: &'a AtomicU64,
    pub start: Instant,
}

/// Copy `r` to `w` until `r` ends (then shut `w`'s writing down), or, with
/// `body`, until that request's body ends (`w` is left open: the server
/// answers, then closes).
pub(crate) async fn one_way<R, W>(
    shared: &Shared,
    r: &mut R,
    w: &mut W,
    counters: Counters<'_>,
    mut body: Option<&mut http::Body>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Counters {
        mine,
        total,
        last,
        start,
    } = counters;
    let idle = shared.limits.idle_timeout;
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    let now_ms = || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "idle");
    let mut buf = vec![0u8; BUF];
    loop {
        if body.as_ref().is_some_and(|b| b.done()) {
            return Ok(());
        }
        let n = match timeout(idle, r.read(&mut buf)).await {
            Ok(Ok(0)) => {
                let _ = w.shutdown().await;
                return Ok(());
            }
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(e),
            // Idle this way; the connection is idle only if the other way
            // was quiet too.
            Err(_) if now_ms().saturating_sub(last.load(Ordering::Relaxed)) < idle_ms => continue,
            Err(_) => return Err(timed_out()),
        };
        if shared.bytes_left() < n as u64 {
            return Err(io::Error::new(
                io::ErrorKind::QuotaExceeded,
                "session bytes",
            ));
        }
        let n = match body.as_mut() {
            Some(b) => b.take(&buf[..n]),
            None => n,
        };
        timeout(idle, w.write_all(&buf[..n]))
            .await
            .map_err(|_| timed_out())??;
        mine.fetch_add(n as u64, Ordering::Relaxed);
        total.fetch_add(n as u64, Ordering::Relaxed);
        last.store(now_ms(), Ordering::Relaxed);
    }
}

/// FULL: a connection to a DNS-stub address inside the job's namespace.
/// A registration for the peer (see [`super::Proxy::expect_redirect`])
/// names the process.
async fn transparent(
    shared: &Shared,
    client: TcpStream,
    peer: SocketAddr,
    names: &(dyn Fn(IpAddr) -> Option<String> + Send + Sync),
    rec: &mut Record,
) {
    if let Some(o) = take_redirect(shared, peer) {
        rec.process = o.process;
        rec.attribution = o.attribution;
    }
    let local = match client.local_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    let Some(name) = names(local.ip()) else {
        rec.target(None, local.port());
        rec.addr = Some(local.ip().to_string());
        rec.refuse(
            shared,
            ConnReason::NotAllowed,
            format!("{} stands for no name", local.ip()),
        );
        return;
    };
    let Ok(route) = route(shared, rec, &name, local.port()).await else {
        return;
    };
    tunnel_named(shared, rec, client, route, Vec::new()).await;
}

/// FS-ONLY: a connect the supervisor redirected here.
async fn redirected(shared: &Shared, client: TcpStream, peer: SocketAddr, rec: &mut Record) {
    let Some(o) = take_redirect(shared, peer) else {
        rec.refuse(
            shared,
            ConnReason::Malformed,
            format!("no redirect registered for {peer}"),
        );
        return;
    };
    rec.process = o.process;
    rec.attribution = o.attribution;
    if let Some(name) = o.name {
        let Ok(route) = route(shared, rec, &name, o.port).await else {
            return;
        };
        tunnel_named(shared, rec, client, route, Vec::new()).await;
        return;
    }
    if decide_addr(shared, rec, o.ip, o.port).is_err() {
        return;
    }
    let Ok(server) = dial(shared, rec, SocketAddr::new(o.ip, o.port)).await else {
        return;
    };
    pump(shared, rec, client, server, Vec::new(), None).await;
}

/// Whether the supervisor registered `peer` (a connect of the job's).
fn registered(shared: &Shared, peer: SocketAddr) -> bool {
    shared
        .redirects
        .lock()
        .is_ok_and(|map| map.contains_key(&peer))
}

fn take_redirect(shared: &Shared, peer: SocketAddr) -> Option<super::Original> {
    shared.redirects.lock().ok()?.remove(&peer)
}
