//! vetto's egress proxy. It runs in the supervisor — never in the stage or
//! the job — on a tokio runtime of its own threads, and decides every
//! connection out of the sandbox by name and port:
//!
//! - **Explicit** listeners speak HTTP `CONNECT`, plain HTTP in absolute
//!   form and SOCKS5, and require the session's credential (so no other
//!   process on the host can use the proxy).
//! - **Transparent** listeners (FULL) sit inside the job's network
//!   namespace; the address the job connected to stands for a name the DNS
//!   stub handed out.
//! - **Redirected** connections (FS-ONLY) are connects the supervisor
//!   pointed at the proxy; it registered where they were going.
//!
//! The proxy resolves names itself, pins each answer for the session and
//! connects only to the pinned address, never to one the job supplied
//! (except where an IP rule allows that address). Internal addresses are
//! refused unless a pin or an IP rule names them; a TLS ClientHello's server
//! name must agree with the allowed name. Every connection is one
//! [`Event::Connection`]; a denied one also a `net-egress-blocked`
//! violation. Everything is bounded: header bytes, connections, idle time,
//! bytes per session.

mod conn;
mod http;
mod intercept;
mod relay;
mod resolve;
mod route;
mod sni;
mod socks;
#[cfg(test)]
mod tests;
mod upstream;
mod wire;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};

pub use crate::policy::addr::{AddrClass, classify};
pub use crate::policy::egress as rules;
pub use crate::policy::egress::{Cidr, Decision, IpRule, RuleParseError};
#[doc(hidden)]
pub use intercept::fuzzing;
pub use intercept::{InterceptError, Secret};
pub use upstream::{Upstream, UpstreamParseError};

use crate::events::log::EventSink;
use crate::events::{Event, Package, ProcessInfo};
use crate::policy::{HostPattern, PinnedHost};

/// What the proxy enforces for one session.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Names (exact, `*.suffix`) with an optional port; without one, 80
    /// and 443.
    pub allow: Vec<HostPattern>,
    /// Wins over `allow`; without a port, every port.
    pub deny: Vec<HostPattern>,
    /// Addresses allowed directly (also internal ones).
    pub ip_rules: Vec<IpRule>,
    /// `--resolve HOST:IP`: the name resolves to these addresses only, and
    /// they may be internal.
    pub pins: Vec<PinnedHost>,
    /// vetto's own `HTTPS_PROXY` (a corporate proxy): connections to names
    /// are chained through it.
    pub upstream: Option<Upstream>,
    pub limits: Limits,
    /// `--audit`: let every destination through and record what would
    /// have been refused as `observed`.
    pub audit: bool,
    /// `--secret`: the job's TLS to these secrets' hosts ends at the proxy,
    /// which puts each value where the job sent its placeholder.
    pub secrets: Vec<Secret>,
    /// `--rule`: the requests allowed to the hosts they name (read the
    /// same way).
    pub rules: Vec<crate::policy::RequestRule>,
    /// `[network] expected`: names whose refusal is recorded as expected.
    pub expected: Vec<HostPattern>,
}

/// The proxy's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The request head (request line + headers) or SOCKS handshake.
    pub max_header_bytes: usize,
    /// Connections open at once; more are refused.
    pub max_connections: usize,
    /// A connection with no byte either way for this long is closed (also
    /// while the request head is still arriving).
    pub idle_timeout: Duration,
    /// Connecting to a destination (and resolving its name).
    pub connect_timeout: Duration,
    /// Bytes both ways over the whole session; past it connections close.
    pub session_bytes: u64,
    /// Distinct names the pin cache holds; a new name past it is refused.
    pub max_names: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 16 * 1024,
            max_connections: 512,
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(30),
            session_bytes: 64 * 1024 * 1024 * 1024,
            max_names: 4096,
        }
    }
}

/// What kind of connections a listener receives.
#[derive(Clone)]
pub enum ListenerKind {
    /// CONNECT, absolute-form HTTP and SOCKS5; the credential is required.
    Explicit,
    /// FULL: a listener inside the job's network namespace. `names` maps the
    /// local address the job connected to (a DNS-stub address) to the name
    /// it stands for; the port is the local port. No credential: only the
    /// sandbox can reach the listener.
    Transparent {
        names: Arc<dyn Fn(IpAddr) -> Option<String> + Send + Sync>,
    },
    /// FS-ONLY: the peer address was registered with
    /// [`Proxy::expect_redirect`]; only IP rules decide (no name is known).
    Redirected,
}

impl std::fmt::Debug for ListenerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ListenerKind::Explicit => "Explicit",
            ListenerKind::Transparent { .. } => "Transparent",
            ListenerKind::Redirected => "Redirected",
        })
    }
}

/// Where a redirected (or transparently accepted) connection was going,
/// and who made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Original {
    pub ip: IpAddr,
    pub port: u16,
    /// FS-ONLY: the name `ip` stands for (a DNS-stub synthetic address):
    /// then the proxy decides, resolves and pins this name at `port`, as
    /// for a transparent connection, and never connects to `ip`.
    pub name: Option<String>,
    pub process: Option<ProcessInfo>,
    pub attribution: Option<Package>,
}

/// Totals at shutdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub connections: u64,
    pub denied: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

impl Stats {
    /// For `SessionEnd.proxy_bytes`.
    pub fn bytes(&self) -> u64 {
        self.bytes_up.saturating_add(self.bytes_down)
    }
}

/// Registered redirects are few and short-lived; a bound keeps a job that
/// connects without ever reaching the proxy from growing the table.
const MAX_PENDING_REDIRECTS: usize = 4096;

/// State shared by every connection task.
pub(crate) struct Shared {
    pub(crate) rules: rules::Rules,
    pub(crate) audit: bool,
    pub(crate) limits: Limits,
    pub(crate) upstream: Option<Upstream>,
    /// `Basic base64(vetto:CRED)`, compared in constant time.
    pub(crate) auth_token: String,
    pub(crate) credential: String,
    pub(crate) resolver: resolve::Resolver,
    /// Present when a secret is injected.
    pub(crate) intercept: Option<intercept::Interceptor>,
    pub(crate) sink: Arc<dyn EventSink + Sync>,
    pub(crate) redirects: Mutex<HashMap<SocketAddr, Original>>,
    /// Serve only peers the supervisor registered ([`Proxy::only_registered_peers`]).
    pub(crate) registered_only: AtomicBool,
    /// Connections from unregistered peers, closed unserved.
    pub(crate) strangers: AtomicU64,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) stopping: AtomicBool,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) connections: AtomicU64,
    pub(crate) denied: AtomicU64,
    pub(crate) bytes_up: AtomicU64,
    pub(crate) bytes_down: AtomicU64,
}

impl Shared {
    /// Bytes still allowed this session.
    pub(crate) fn bytes_left(&self) -> u64 {
        let used = self
            .bytes_up
            .load(Ordering::Relaxed)
            .saturating_add(self.bytes_down.load(Ordering::Relaxed));
        self.limits.session_bytes.saturating_sub(used)
    }
}

/// The running proxy. Dropping it without [`Proxy::shutdown`] stops it too,
/// without waiting. It owns its runtime: start, drop and shut it down from
/// synchronous code (the supervisor), never from inside another runtime.
pub struct Proxy {
    shared: Arc<Shared>,
    runtime: tokio::runtime::Runtime,
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("cannot draw the proxy credential from the kernel's random source")]
    Random(#[source] getrandom::Error),
    #[error("cannot start the proxy's runtime")]
    Runtime(#[source] io::Error),
    #[error(transparent)]
    Intercept(#[from] InterceptError),
}

impl Proxy {
    /// Start the runtime (two worker threads named `vetto-proxy`). No
    /// listener yet: see [`Proxy::listen_host`] and [`Proxy::serve`].
    /// Events go to `sink` as they are decided.
    pub fn start(config: Config, sink: Arc<dyn EventSink + Sync>) -> Result<Proxy, StartError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(StartError::Random)?;
        let credential: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vetto-proxy")
            // Name lookups (getaddrinfo) run on blocking threads: a few are
            // enough, and a job asking for many names cannot make more.
            .max_blocking_threads(4)
            .enable_io()
            .enable_time()
            .build()
            .map_err(StartError::Runtime)?;
        let intercept = match config.secrets.is_empty() && config.rules.is_empty() {
            true => None,
            false => Some(intercept::Interceptor::new(config.secrets, config.rules)?),
        };
        let rules = rules::Rules {
            allow: config.allow,
            deny: config.deny,
            ip_rules: config.ip_rules,
            pins: config.pins,
            expected: config.expected,
        };
        let shared = Arc::new(Shared {
            resolver: resolve::Resolver::new(
                config.limits.max_names,
                config.limits.connect_timeout,
            ),
            rules,
            intercept,
            audit: config.audit,
            slots: Arc::new(Semaphore::new(config.limits.max_connections)),
            limits: config.limits,
            upstream: config.upstream,
            auth_token: format!(
                "Basic {}",
                wire::base64(format!("vetto:{credential}").as_bytes())
            ),
            credential,
            sink,
            redirects: Mutex::new(HashMap::new()),
            registered_only: AtomicBool::new(false),
            strangers: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            stop: watch::Sender::new(false),
            connections: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
        });
        Ok(Proxy { shared, runtime })
    }

    /// The session authority's certificate (PEM) when a secret is
    /// injected: the job trusts it for the secrets' hosts.
    pub fn trust_bundle_pem(&self) -> Option<String> {
        self.shared.intercept.as_ref().map(|i| i.trust_bundle_pem())
    }

    /// The session authority's certificate alone (PEM), when a secret or a
    /// rule is in force.
    pub fn authority_pem(&self) -> Option<String> {
        self.shared.intercept.as_ref().map(|i| i.authority_pem())
    }

    /// The per-session secret (256 bits from `getrandom`, hex).
    pub fn credential(&self) -> &str {
        &self.shared.credential
    }

    /// The `Proxy-Authorization` value the explicit proxy expects
    /// (`Basic base64(vetto:CRED)`), for clients that take a header.
    pub fn proxy_authorization(&self) -> String {
        self.shared.auth_token.clone()
    }

    /// `http://vetto:CRED@ADDR` for `HTTP_PROXY`/`HTTPS_PROXY`; the same
    /// listener speaks SOCKS5, so `socks5h://vetto:CRED@ADDR` (from
    /// [`Proxy::socks_url`]) works for `ALL_PROXY`.
    pub fn proxy_url(&self, addr: SocketAddr) -> String {
        format!("http://vetto:{}@{addr}", self.shared.credential)
    }

    /// `socks5h://vetto:CRED@ADDR` for `ALL_PROXY`.
    pub fn socks_url(&self, addr: SocketAddr) -> String {
        format!("socks5h://vetto:{}@{addr}", self.shared.credential)
    }

    /// Bind an explicit-proxy listener on the host's loopback (an ephemeral
    /// port) and serve it.
    pub fn listen_host(&self) -> io::Result<SocketAddr> {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        self.serve(listener, ListenerKind::Explicit)?;
        Ok(addr)
    }

    /// Serve a listener (FULL: one created inside the job's network
    /// namespace and handed over).
    pub fn serve(&self, listener: std::net::TcpListener, kind: ListenerKind) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        let _guard = self.runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        self.runtime
            .spawn(conn::accept_loop(self.shared.clone(), listener, kind));
        Ok(())
    }

    /// FS-ONLY: the proxy's listeners are on the host's loopback, where any
    /// process of any user can connect, while every connect of the job's
    /// is the supervisor's, registered ([`Proxy::expect_redirect`]) before
    /// it is made. From now on a peer nobody registered is closed as soon
    /// as it is accepted: it takes no connection slot, is read nothing
    /// from and recorded nowhere, so a stranger holding idle connections
    /// costs the session nothing (only counted: [`Proxy::strangers`]).
    pub fn only_registered_peers(&self) {
        self.shared.registered_only.store(true, Ordering::Relaxed);
    }

    /// Connections closed unserved because nobody registered their peer.
    pub fn strangers(&self) -> u64 {
        self.shared.strangers.load(Ordering::Relaxed)
    }

    /// FS-ONLY: before answering the job's connect, register the redirected
    /// socket's local address (the peer the proxy will see) and where the
    /// job wanted to go. Also for a job's connect to an explicit or
    /// transparent listener: there only the process is taken from it. At most 4,096 may be pending; past that the table
    /// is emptied (those connections, should they still come, are refused
    /// and recorded).
    pub fn expect_redirect(&self, peer: SocketAddr, original: Original) {
        if let Ok(mut map) = self.shared.redirects.lock() {
            if map.len() >= MAX_PENDING_REDIRECTS {
                map.clear();
            }
            map.insert(peer, original);
        }
    }

    /// The decision for a bare address (a notified connect to an IP): an IP
    /// rule allows it, or it is refused (`private-address` for an internal
    /// one). Pins do not allow addresses by number.
    pub fn decide_addr(&self, ip: IpAddr, port: u16) -> Decision {
        self.shared.rules.decide_addr(ip, port)
    }

    /// Whether the session is `--audit` (then a refused decision is only
    /// observed).
    pub fn audit(&self) -> bool {
        self.shared.audit
    }

    /// Stop accepting, give open connections a moment to finish (they end
    /// when the job's processes are gone) and return the totals.
    pub fn shutdown(self) -> Stats {
        let shared = self.shared.clone();
        shared.stopping.store(true, Ordering::SeqCst);
        shared.stop.send_replace(true);
        let max = u32::try_from(shared.limits.max_connections).unwrap_or(u32::MAX);
        let slots = shared.slots.clone();
        self.runtime.block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), slots.acquire_many(max)).await;
        });
        self.runtime.shutdown_timeout(Duration::from_millis(100));
        Stats {
            connections: shared.connections.load(Ordering::SeqCst),
            denied: shared.denied.load(Ordering::SeqCst),
            bytes_up: shared.bytes_up.load(Ordering::SeqCst),
            bytes_down: shared.bytes_down.load(Ordering::SeqCst),
        }
    }
}

/// One event to the sink (the proxy's only output).
pub(crate) fn emit(shared: &Shared, event: Event) {
    shared.sink.emit(event);
}
