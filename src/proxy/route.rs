//! Where a connection goes and whether it may: the record every
//! connection leaves, the decision by name or address, and the dial to the
//! pinned address. What the relay (`relay`), the SOCKS server (`socks`)
//! and the secret-injecting interceptor (`intercept`) share, below all
//! three.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::events::{
    ConnDecision, ConnReason, ConnVia, Connection, Event, Package, ProcessInfo, Provenance,
    Timestamp,
};

use super::resolve::ResolveError;
use super::{Shared, emit};
use crate::policy::egress::normalise_name;

/// What one connection did, filled in as it goes.
pub(crate) struct Record {
    pub(super) time: Timestamp,
    pub(super) started: Instant,
    pub(crate) via: ConnVia,
    pub(super) host: Option<String>,
    pub(super) port: u16,
    pub(super) addr: Option<String>,
    pub(super) rule: Option<String>,
    /// Set when refused (or failed); `None` while allowed.
    pub(super) outcome: Option<(ConnDecision, ConnReason)>,
    /// `--audit`: the refusal that was only observed.
    pub(super) observed: Option<ConnReason>,
    pub(crate) detail: String,
    pub(crate) bytes_up: u64,
    pub(crate) bytes_down: u64,
    pub(super) process: Option<ProcessInfo>,
    pub(super) attribution: Option<Package>,
    /// The requests read on an intercepted connection.
    pub(crate) requests: Vec<crate::events::HttpRequest>,
    /// Secrets whose placeholder this connection carried to a host they
    /// are not for.
    pub(crate) elsewhere: Vec<String>,
}

impl Record {
    pub(super) fn new(via: ConnVia) -> Record {
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
    pub(super) fn target(&mut self, host: Option<&str>, port: u16) {
        self.host = host.map(|h| normalise_name(h).unwrap_or_else(|| printable(h)));
        self.port = port;
    }

    pub(super) fn finish(self, shared: &Shared) {
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
        let violation = conn.violation_expecting(Provenance::Proxy, &shared.rules.expected);
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
pub(super) fn printable(s: &str) -> String {
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

pub(super) fn session_ended() -> io::Error {
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
    pub(super) port: u16,
    pub(super) through: Through,
}

impl Route {
    pub(crate) fn port(&self) -> u16 {
        self.port
    }
}

pub(super) enum Through {
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
