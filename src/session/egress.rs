//! Filtered egress for one session: the proxy started before the job (only
//! when the plan asks for it), the job's proxy variables, the broker the
//! FS-ONLY notification server asks, and the totals at the end.
//!
//! The credential travels only in the job's environment (inside the plan,
//! whose values are never logged); the session log and vetto's own lines
//! name the proxy's address alone.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use crate::events::log::EventSink;
use crate::events::{ConnDecision, Connection, Event};
use crate::plan::Plan;
use crate::plan::net::{EgressPlan, NETNS_PROXY_PORT, NETNS_REDIRECT_PORT, proxy_vars};
use crate::plan::notify::EgressBroker;
use crate::policy::{NetPolicy, Policy};
use crate::proxy::{self, ListenerKind, Original, Proxy};

/// Denied destinations kept for the end-of-session line.
const SAID_MAX: usize = 64;

/// The running egress layer of a session.
#[derive(Debug)]
pub struct Egress {
    broker: Arc<Broker>,
    /// Where the job's proxy variables point (without the credential).
    pub address: SocketAddr,
    said: Arc<Said>,
    sink: Arc<Tee>,
    /// The DNS stub's table and rules, and the UDP stub in the job's
    /// namespace once serving (FULL; FS-ONLY's is the dead net's).
    names: Arc<Mutex<super::dns::Names>>,
    answerable: super::dns::Answerable,
    stub: Option<super::dns::Stub>,
    /// The DNS-over-TCP stub (FS-ONLY: on the host's loopback; FULL: in
    /// the job's namespace).
    tcp_stub: Option<super::dns::TcpStub>,
    /// FS-ONLY: what the start line says of UDP.
    udp_said: String,
}

/// The proxy as the notification server sees it. `None` once shut down:
/// then every connect is refused.
struct Broker {
    proxy: Mutex<Option<Proxy>>,
    explicit: Vec<SocketAddr>,
    redirect_v4: Option<SocketAddr>,
    redirect_v6: Option<SocketAddr>,
    /// FULL: the loopback ports inside the namespace where the proxy
    /// listens (explicit and transparent).
    netns_ports: Vec<u16>,
    /// The DNS stub's names: a synthetic address stands for one (FS-ONLY:
    /// a connect to it is redirected to the proxy with the name).
    names: Arc<Mutex<super::dns::Names>>,
    /// FS-ONLY: the DNS-over-TCP stub's listeners, and who connected
    /// (FULL: who connected a UDP socket to the stub in the namespace).
    dns_v4: Option<SocketAddr>,
    dns_v6: Option<SocketAddr>,
    askers: super::dns::Askers,
    /// FS-ONLY: where the job's UDP sockets are made, and who got each.
    udp: DeadNetUdp,
}

/// FS-ONLY: the namespace that leads nowhere, where the job's UDP sockets
/// are made, its DNS stub, and who got each socket.
#[derive(Debug, Default)]
struct DeadNetUdp {
    state: Mutex<UdpNet>,
    owners: Arc<UdpOwners>,
    /// The namespace's identity once it runs: every connect asks whether
    /// its socket is of the dead net, and must not wait on `state`, which
    /// is held while the helper starts and while it makes a socket.
    running: std::sync::OnceLock<crate::sandbox::dead_net::Identity>,
}

#[derive(Debug, Default)]
enum UdpNet {
    /// None (not planned, could not be made, or stopped): UDP sockets are
    /// refused.
    #[default]
    Absent,
    /// Made at the job's first UDP socket: most jobs with the network off
    /// make none, and pay nothing for it.
    Pending {
        names: Arc<Mutex<super::dns::Names>>,
        rules: super::dns::Answerable,
        sink: Arc<Tee>,
    },
    Running {
        net: crate::sandbox::dead_net::DeadNet,
        stub: super::dns::Stub,
    },
}

impl DeadNetUdp {
    /// Start the helper now, and the DNS stub on its port-53 sockets with
    /// `rules`; or why not.
    fn start(
        names: Arc<Mutex<super::dns::Names>>,
        rules: super::dns::Answerable,
        sink: Arc<Tee>,
    ) -> Result<DeadNetUdp, String> {
        let owners = Arc::new(UdpOwners::default());
        let (net, stub) = launch(names, rules, sink, &owners)?;
        let running = std::sync::OnceLock::from(net.identity());
        Ok(DeadNetUdp {
            state: Mutex::new(UdpNet::Running { net, stub }),
            owners,
            running,
        })
    }

    /// The same, at the job's first UDP socket.
    fn at_first_socket(
        names: Arc<Mutex<super::dns::Names>>,
        rules: super::dns::Answerable,
        sink: Arc<Tee>,
    ) -> DeadNetUdp {
        DeadNetUdp {
            state: Mutex::new(UdpNet::Pending { names, rules, sink }),
            owners: Arc::default(),
            running: std::sync::OnceLock::new(),
        }
    }

    /// A UDP (or, `stream`, TCP) socket made there for `process`; of a UDP
    /// one the supervisor keeps a copy, to name who asked the DNS stub
    /// (never of a TCP one, whose peer would then never see it closed).
    /// `None`: there is no such namespace.
    fn socket(
        &self,
        v6: bool,
        stream: bool,
        process: crate::sandbox::ProcessFacts,
    ) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
        let made = self.make(v6, stream)?;
        if stream {
            return Some(made);
        }
        Some(made.and_then(|fd| {
            let copy = fd.try_clone()?;
            self.owners
                .add(copy, crate::supervisor::process_and_package(process));
            Ok(fd)
        }))
    }

    /// A socket made there, the helper started first if it is pending.
    fn make(&self, v6: bool, stream: bool) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
        let mut state = self.state.lock().ok()?;
        if let UdpNet::Pending { .. } = &*state
            && let UdpNet::Pending { names, rules, sink } = std::mem::take(&mut *state)
        {
            match launch(names, rules, sink, &self.owners) {
                Ok((net, stub)) => {
                    // Before any socket of the net exists.
                    let _ = self.running.set(net.identity());
                    *state = UdpNet::Running { net, stub };
                }
                Err(why) => eprintln!(
                    "vetto: warning: the job's UDP (and, with the network off, TCP) sockets are refused (no namespace for them: {why})"
                ),
            }
        }
        let UdpNet::Running { net, .. } = &*state else {
            return None;
        };
        Some(net.socket(v6, stream))
    }

    fn holds(&self, sock: crate::sys::os::BorrowedFd<'_>) -> bool {
        self.running.get().is_some_and(|net| net.holds(sock))
    }

    /// A listener of vetto's there, on `ip` (see
    /// `dead_net::DeadNet::listener`); an error when it is not running.
    fn listener(&self, ip: IpAddr) -> std::io::Result<std::net::TcpListener> {
        let state = self
            .state
            .lock()
            .map_err(|_| std::io::Error::other("the dead-net helper is gone"))?;
        match &*state {
            UdpNet::Running { net, .. } => net.listener(ip),
            _ => Err(std::io::Error::other("no namespace that leads nowhere")),
        }
    }

    /// Stop the stub and end the helper (the job is gone).
    fn stop(&self) {
        let state = self
            .state
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        if let UdpNet::Running { net, stub } = state {
            stub.stop();
            drop(net);
        }
    }
}

/// Start the dead-net helper and the DNS stub on its port-53 sockets; the
/// stub names a sender by `owners`.
fn launch(
    names: Arc<Mutex<super::dns::Names>>,
    rules: super::dns::Answerable,
    sink: Arc<Tee>,
    owners: &Arc<UdpOwners>,
) -> Result<(crate::sandbox::dead_net::DeadNet, super::dns::Stub), String> {
    let (net, sockets) = crate::sandbox::dead_net::DeadNet::start().map_err(|e| e.to_string())?;
    let of = owners.clone();
    let stub = super::dns::Stub::start_dead_net(
        sockets,
        names,
        rules,
        sink,
        Arc::new(move |peer| of.of(peer)),
    )
    .map_err(|e| e.to_string())?;
    Ok((net, stub))
}

/// Who made something: the process and its package.
type Who = (crate::events::ProcessInfo, Option<crate::events::Package>);

/// The supervisor's copy of each UDP socket the job got, and who got it:
/// the DNS stub names the sender of a refused query by the socket's port.
/// A copy keeps the socket (and its port) alive after the job closes it,
/// so a port is never another socket's while its copy is held; bounded,
/// the oldest copy is closed first (its queries are then recorded without
/// the process).
#[derive(Debug, Default)]
struct UdpOwners(Mutex<std::collections::VecDeque<(crate::sys::os::OwnedFd, Who)>>);

/// Copies kept at once.
const MAX_UDP_OWNERS: usize = 256;

impl UdpOwners {
    fn add(&self, fd: crate::sys::os::OwnedFd, who: Who) {
        if let Ok(mut owners) = self.0.lock() {
            if owners.len() >= MAX_UDP_OWNERS {
                owners.pop_front();
            }
            owners.push_back((fd, who));
        }
    }

    /// Who holds the socket a datagram from `peer` came from.
    fn of(&self, peer: SocketAddr) -> Option<Who> {
        use crate::sys::os::AsFd;
        let owners = self.0.lock().ok()?;
        owners
            .iter()
            .rev()
            .find(|(fd, _)| {
                crate::sandbox::notify::local_inet_addr(fd.as_fd())
                    .is_ok_and(|a| a.port() == peer.port())
            })
            .map(|(_, who)| who.clone())
    }
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("explicit", &self.explicit)
            .field("redirect_v4", &self.redirect_v4)
            .field("redirect_v6", &self.redirect_v6)
            .finish()
    }
}

impl Broker {
    fn name_of(&self, ip: IpAddr) -> Option<String> {
        self.names.lock().ok().and_then(|n| n.name_of(ip))
    }
}

impl EgressBroker for Broker {
    fn explicit(&self) -> Vec<SocketAddr> {
        self.explicit.clone()
    }

    fn names_process(&self, to: SocketAddr) -> bool {
        let to = SocketAddr::new(to.ip().to_canonical(), to.port());
        self.explicit.contains(&to)
            || (to.ip().is_loopback() && self.netns_ports.contains(&to.port()))
            || (!self.netns_ports.is_empty() && DnsAskers::is_stub(to))
    }

    fn redirect_to(&self, v6: bool) -> Option<SocketAddr> {
        if v6 {
            self.redirect_v6
        } else {
            self.redirect_v4
        }
    }

    fn dns_via(&self, v6: bool) -> Option<SocketAddr> {
        if v6 { self.dns_v6 } else { self.dns_v4 }
    }

    fn allows(&self, to: SocketAddr) -> bool {
        if self.name_of(to.ip()).is_some() {
            // The proxy decides the name and the port.
            return true;
        }
        let Ok(proxy) = self.proxy.lock() else {
            return false;
        };
        proxy
            .as_ref()
            .is_some_and(|p| p.audit() || p.decide_addr(to.ip().to_canonical(), to.port()).allowed)
    }

    fn allows_host_loopback(&self, to: SocketAddr) -> bool {
        let ip = to.ip().to_canonical();
        // A synthetic address stands for a name: the DNS stub's, not the
        // host's loopback.
        if !ip.is_loopback() || self.name_of(ip).is_some() {
            return false;
        }
        let Ok(proxy) = self.proxy.lock() else {
            return false;
        };
        proxy
            .as_ref()
            .is_some_and(|p| p.decide_addr(ip, to.port()).allowed)
    }

    fn expect(
        &self,
        local: SocketAddr,
        original: SocketAddr,
        process: Option<crate::sandbox::ProcessFacts>,
    ) {
        let who = process.map(crate::supervisor::process_and_package);
        if !self.netns_ports.is_empty() && DnsAskers::is_stub(original) {
            // FULL: a UDP connect to the stub in the namespace; the stub
            // names who sends from that port.
            if let Some(who) = who {
                super::dns::expect_asker(
                    &self.askers,
                    SocketAddr::new(local.ip().to_canonical(), local.port()),
                    who,
                );
            }
            return;
        }
        if original.port() == 53 && self.dns_v4.is_some() {
            // The notification server sent it to the DNS stub (`dns_via`).
            if let Some(who) = who {
                super::dns::expect_asker(
                    &self.askers,
                    SocketAddr::new(local.ip().to_canonical(), local.port()),
                    who,
                );
            }
            return;
        }
        let name = self.name_of(original.ip());
        let (process, attribution) = match who {
            Some((p, a)) => (Some(p), a),
            None => (None, None),
        };
        if let Ok(proxy) = self.proxy.lock()
            && let Some(p) = proxy.as_ref()
        {
            // As the proxy's listener sees its peer (a v4-mapped address
            // arrives at the IPv4 listener as IPv4).
            p.expect_redirect(
                SocketAddr::new(local.ip().to_canonical(), local.port()),
                Original {
                    ip: original.ip().to_canonical(),
                    port: original.port(),
                    name,
                    process,
                    attribution,
                },
            );
        }
    }

    fn dead_net_socket(
        &self,
        v6: bool,
        stream: bool,
        process: crate::sandbox::ProcessFacts,
    ) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
        match self.udp.socket(v6, stream, process) {
            // Without the namespace (`--audit`, or it could not be made)
            // the proxy listens on the host's loopback: a TCP socket of
            // the host's, as if its `socket()` had not been notified.
            None if stream => Some(crate::sandbox::dead_net::host_stream_socket(v6)),
            made => made,
        }
    }

    fn is_dead_net(&self, sock: crate::sys::os::BorrowedFd<'_>) -> bool {
        self.udp.holds(sock)
    }

    fn dead_net_proc(&self) -> Option<std::path::PathBuf> {
        self.udp.running.get().and_then(|i| i.proc_net())
    }

    fn dead_net_stream(&self, v6: bool) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
        self.udp.make(v6, true)
    }
}

/// The connections the egress layer refused, for the end-of-run guidance.
#[derive(Debug, Default)]
pub struct Refused {
    /// Distinct refusals, each with its count.
    pub connections: Vec<(Connection, u64)>,
    /// Refusals past the bound, counted only.
    pub unlisted: u64,
}

/// What the proxy and the DNS stub refused, for vetto's last words (the
/// log has it all): distinct connections by name, address, port and
/// reason, with counts, at most [`SAID_MAX`] of them (the rest counted).
#[derive(Debug, Default)]
struct Said {
    denied: Mutex<(Vec<(Connection, u64)>, u64)>,
}

impl Said {
    /// What was refused, for the end-of-run guidance (once, at the end).
    fn take(&self) -> Refused {
        let (connections, unlisted) = self
            .denied
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default();
        Refused {
            connections,
            unlisted,
        }
    }
}

/// The proxy's events: to the session log, and the refusals remembered.
#[derive(Debug)]
struct Tee {
    log: Option<crate::events::log::ChannelSink>,
    said: Arc<Said>,
}

impl EventSink for Tee {
    fn emit(&self, event: Event) {
        if let Event::Connection(c) = &event
            && matches!(c.decision, ConnDecision::Denied | ConnDecision::Observed)
            && let Ok(mut d) = self.said.denied.lock()
        {
            let same = |k: &Connection| {
                k.host == c.host && k.addr == c.addr && k.port == c.port && k.reason == c.reason
            };
            let (list, unlisted) = &mut *d;
            match list.iter().position(|(k, _)| same(k)) {
                Some(i) => list[i].1 += 1,
                None if list.len() < SAID_MAX => list.push(((**c).clone(), 1)),
                None => *unlisted += 1,
            }
        }
        if let Some(log) = &self.log {
            log.emit(event);
        }
    }
}

/// Why filtered egress could not be set up: the session is refused (the
/// network is never opened instead).
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("cannot start the egress proxy: {0}")]
    Start(#[from] proxy::StartError),
    #[error("cannot listen for the egress proxy on the host's loopback: {0}")]
    Listen(#[source] std::io::Error),
    #[error("the upstream proxy in vetto's environment is not usable: {0}")]
    Upstream(#[from] proxy::UpstreamParseError),
    #[error("cannot allow the egress proxy in the Seatbelt profile: {0}")]
    Profile(#[from] crate::plan::seatbelt::SeatbeltError),
    #[error(
        "a secret is put in the job's requests by vetto's proxy, and this plan has none (no filtered egress); remove --net host or the secret"
    )]
    NoProxyForSecrets,
    #[error("cannot give the job the session's certificate authority: {0}")]
    Trust(#[source] crate::sys::safe_fs::SafeFsError),
}

/// The variables that make the job's tools trust `bundle` (the host's
/// roots and the session's authority): OpenSSL and what reads its
/// variable (Python's ssl, Ruby, Go on Linux), Node (yarn, pnpm), npm
/// (whose `cafile`, which Debian's global npmrc sets, replaces Node's
/// roots), Python's requests (pip), curl, git, cargo. The bundle is
/// written into the session's own temporary directory.
const TRUST_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "npm_config_cafile",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
];

const TRUST_BUNDLE: &str = "vetto-ca-bundle.pem";

/// Whether the job runs a JVM build tool (the maven or gradle preset):
/// then the JVM, which reads none of the variables above, gets a trust
/// store of its own.
fn uses_java(policy: &Policy) -> bool {
    use crate::policy::tools::{Cache, Registry};
    policy
        .discover
        .iter()
        .any(|d| d.registry == Registry::Maven)
        || policy
            .caches
            .iter()
            .any(|c| matches!(c.cache, Cache::Maven | Cache::Gradle))
}

fn trust_vars(
    session_tmp: &std::path::Path,
    bundle: &str,
) -> Result<Vec<(String, String)>, crate::sys::safe_fs::SafeFsError> {
    use crate::sys::safe_fs::{Dir, Parents};
    Dir::open(session_tmp, Parents::AsNamed)?.write_file(TRUST_BUNDLE, bundle.as_bytes(), 0o644)?;
    let path = session_tmp
        .join(TRUST_BUNDLE)
        .to_string_lossy()
        .into_owned();
    Ok(TRUST_VARS
        .iter()
        .map(|v| (v.to_string(), path.clone()))
        .collect())
}

/// The proxy's rules from the policy; `env` is vetto's own environment
/// (where a corporate proxy to chain through is named).
fn config(
    policy: &Policy,
    audit: bool,
    env: &[(String, String)],
    secrets: Vec<proxy::Secret>,
) -> Result<proxy::Config, EgressError> {
    let net = &policy.net;
    let rules = policy.request_rules.clone();
    let upstream =
        proxy::Upstream::from_env(|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
            .transpose()?;
    let NetPolicy::Allow {
        hosts,
        deny,
        ips,
        resolve,
    } = net
    else {
        // No rules: under `--audit` (the only plan with egress and no
        // network policy) every destination is let through and recorded.
        return Ok(proxy::Config {
            upstream,
            audit,
            secrets,
            rules,
            expected: policy.expected_hosts.clone(),
            ..proxy::Config::default()
        });
    };
    Ok(proxy::Config {
        allow: hosts.clone(),
        deny: deny.clone(),
        ip_rules: proxy::IpRule::from_policy(ips),
        pins: resolve.clone(),
        upstream,
        limits: proxy::Limits::default(),
        audit,
        secrets,
        rules,
        expected: policy.expected_hosts.clone(),
    })
}

/// Start the proxy when the plan asks for filtered egress, and give the job
/// its variables. `None`: no filtered egress in this plan.
pub fn start(
    plan: &mut Plan,
    policy: &Policy,
    audit: bool,
    env: &[(String, String)],
    secrets: Vec<proxy::Secret>,
    log: Option<crate::events::log::ChannelSink>,
) -> Result<Option<Egress>, EgressError> {
    let Some(how) = plan.egress else {
        if !secrets.is_empty() {
            return Err(EgressError::NoProxyForSecrets);
        }
        return Ok(None);
    };
    // The values never reach the log, whatever the job prints or sends.
    if let Some(log) = &log {
        for s in &secrets {
            log.redact(&s.value);
        }
    }
    let said = Arc::new(Said::default());
    let sink = Arc::new(Tee {
        log,
        said: Arc::clone(&said),
    });
    let proxy = Proxy::start(config(policy, audit, env, secrets)?, sink.clone())?;
    if let Some(bundle) = proxy.trust_bundle_pem() {
        plan.env
            .set_all(trust_vars(&policy.session_tmp, &bundle).map_err(EgressError::Trust)?);
        if let Some(authority) = proxy.authority_pem()
            && uses_java(policy)
        {
            // Without it the JVM's TLS to a read host fails (and says so);
            // everything else of the session stands.
            match super::java_trust::store(&policy.session_tmp, &authority, env, &plan.env.vars) {
                Ok(options) => plan.env.set_all(vec![options]),
                Err(e) => eprintln!(
                    "vetto: warning: the JVM does not trust the session's certificate authority ({e}): its HTTPS to a secret's or a rule's host fails"
                ),
            }
        }
    }
    let names = Arc::new(Mutex::new(super::dns::Names::default()));
    let answerable =
        super::dns::Answerable::for_policy(&policy.net).expecting(&policy.expected_hosts);
    // FS-ONLY: the job's sockets come from a namespace that leads nowhere,
    // where the DNS stub serves port 53 and the proxy listens: nothing of
    // the session faces the host's loopback, and the job's own servers
    // work on its loopback there (issue P11). If it cannot be made, UDP
    // sockets are refused, as the filter refuses them without user
    // namespaces, and TCP ones are the host's. `--audit` enforces nothing:
    // its sockets are the host's, its queries go where the job sends them.
    let mut udp = Udp::Refused;
    if how == EgressPlan::Redirect && plan.notify.udp_dead_net && !audit {
        udp = match DeadNetUdp::start(names.clone(), answerable.clone(), sink.clone()) {
            Ok(net) => Udp::DeadNet(net),
            Err(why) => Udp::Failed(why),
        };
    }
    let dead_net = match &udp {
        Udp::DeadNet(net) if plan.notify.tcp_dead_net => Some(net),
        _ => None,
    };
    let (address, explicit, redirect_v4, redirect_v6) = match how {
        // The stage's listeners inside the namespace are served after the
        // launch (`serve_netns`); the variables point at them.
        // The redirected listeners inside the namespace: a connect to an
        // address an IP rule allows is sent there (by the supervisor, on
        // the job's socket, which lives in the namespace).
        EgressPlan::Netns => (
            SocketAddr::from((Ipv4Addr::LOCALHOST, NETNS_PROXY_PORT)),
            Vec::new(),
            Some(SocketAddr::from((Ipv4Addr::LOCALHOST, NETNS_REDIRECT_PORT))),
            Some(SocketAddr::from((Ipv6Addr::LOCALHOST, NETNS_REDIRECT_PORT))),
        ),
        EgressPlan::Redirect if dead_net.is_some() => {
            let net = dead_net.ok_or_else(|| {
                EgressError::Listen(std::io::Error::other("no namespace that leads nowhere"))
            })?;
            // Only the job's own connects, which the supervisor registers,
            // are served (the job's are the only sockets there).
            proxy.only_registered_peers();
            let listen = |ip: IpAddr, kind: ListenerKind| -> std::io::Result<SocketAddr> {
                let l = net.listener(ip)?;
                let addr = l.local_addr()?;
                proxy.serve(l, kind)?;
                Ok(addr)
            };
            let explicit = listen(Ipv4Addr::LOCALHOST.into(), ListenerKind::Explicit)
                .map_err(EgressError::Listen)?;
            let v4 = listen(Ipv4Addr::LOCALHOST.into(), ListenerKind::Redirected)
                .map_err(EgressError::Listen)?;
            // No IPv6 loopback there: IPv6 connects are refused.
            let v6 = listen(Ipv6Addr::LOCALHOST.into(), ListenerKind::Redirected).ok();
            (explicit, vec![explicit], Some(v4), v6)
        }
        EgressPlan::Redirect => {
            // On the host's loopback: only the job's own connects, which
            // the supervisor registers, are served.
            if !audit {
                proxy.only_registered_peers();
            }
            let explicit = proxy.listen_host().map_err(EgressError::Listen)?;
            let v4 = redirected(&proxy, Ipv4Addr::LOCALHOST.into()).map_err(EgressError::Listen)?;
            // A host without IPv6 loopback: IPv6 connects are refused.
            let v6 = redirected(&proxy, Ipv6Addr::LOCALHOST.into()).ok();
            (explicit, vec![explicit], Some(v4), v6)
        }
        // SEATBELT: one port on both loopback addresses (Seatbelt's
        // `localhost` is either), and the profile allows only that port.
        EgressPlan::Loopback => {
            let listeners = loopback_listeners().map_err(EgressError::Listen)?;
            let mut explicit = Vec::new();
            for l in listeners {
                explicit.push(l.local_addr().map_err(EgressError::Listen)?);
                proxy
                    .serve(l, ListenerKind::Explicit)
                    .map_err(EgressError::Listen)?;
            }
            let address = explicit.first().copied().ok_or_else(|| {
                EgressError::Listen(std::io::Error::from(std::io::ErrorKind::AddrNotAvailable))
            })?;
            match plan.seatbelt.as_mut() {
                Some(profile) => profile.allow_proxy_port(address.port())?,
                None => return Err(crate::plan::seatbelt::SeatbeltError::NoProxyWanted.into()),
            }
            (address, explicit, None, None)
        }
    };
    let netns_ports = match (
        how,
        plan.namespaces.as_ref().and_then(|n| n.dns_stub.as_ref()),
    ) {
        (EgressPlan::Netns, Some(stub)) => {
            let mut ports = stub.ports.clone();
            ports.push(NETNS_PROXY_PORT);
            ports
        }
        (EgressPlan::Netns, None) => vec![NETNS_PROXY_PORT],
        (EgressPlan::Redirect | EgressPlan::Loopback, _) => Vec::new(),
    };
    // The credential, as the variables carry it and as a header carries
    // it, never reaches the log (a job's argv may hold either).
    if let Some(log) = &sink.log {
        log.redact(proxy.credential());
        if let Some(basic) = proxy.proxy_authorization().strip_prefix("Basic ") {
            log.redact(basic);
        }
    }
    let socks = proxy.socks_url(address);
    plan.env
        .set_all(proxy_vars(&proxy.proxy_url(address), &socks));
    let askers = super::dns::Askers::default();
    let (dns_v4, dns_v6, tcp_stub) = match how {
        // `--audit` enforces nothing: its queries go where the job sends
        // them (through the proxy, as every connect), not to a stub that
        // would answer NXDOMAIN.
        // SEATBELT: no resolver at all; names go through the proxy.
        EgressPlan::Netns | EgressPlan::Loopback => (None, None, None),
        EgressPlan::Redirect if audit => (None, None, None),
        EgressPlan::Redirect => {
            let (listeners, v4, v6) = match dead_net {
                Some(net) => dead_net_dns_listeners(net),
                None => dns_listeners(),
            }
            .map_err(EgressError::Listen)?;
            let stub = super::dns::TcpStub::start(
                listeners,
                super::dns::TcpStubAt::HostLoopback,
                names.clone(),
                answerable.clone(),
                sink.clone(),
                askers.clone(),
            )
            .map_err(EgressError::Listen)?;
            plan.env.set_all(vec![use_vc(&plan.env.vars)]);
            (Some(v4), v6, Some(stub))
        }
    };
    let tcp_too = dead_net.is_some();
    let (dead_net, udp_said) = match udp {
        Udp::DeadNet(net) if tcp_too => (
            net,
            "; the job's sockets are made in a network namespace that leads nowhere, where the proxy and vetto's DNS stub listen (its own servers work on its loopback)".to_string(),
        ),
        Udp::DeadNet(net) => (
            net,
            "; UDP only to vetto's DNS stub (a network namespace that leads nowhere)".to_string(),
        ),
        Udp::Failed(why) => (
            DeadNetUdp::default(),
            format!("; UDP sockets refused (no namespace for them: {why})"),
        ),
        Udp::Refused if how == EgressPlan::Redirect && !audit => (
            DeadNetUdp::default(),
            "; UDP sockets refused (no unprivileged user namespaces)".to_string(),
        ),
        Udp::Refused if how == EgressPlan::Loopback => (
            DeadNetUdp::default(),
            "; nothing else: no UDP and no system resolver (programs that ignore the proxy variables have no network)"
                .to_string(),
        ),
        Udp::Refused => (DeadNetUdp::default(), String::new()),
    };
    Ok(Some(Egress {
        broker: Arc::new(Broker {
            proxy: Mutex::new(Some(proxy)),
            explicit,
            redirect_v4,
            redirect_v6,
            netns_ports,
            names: names.clone(),
            dns_v4,
            dns_v6,
            askers,
            udp: dead_net,
        }),
        address,
        said,
        sink,
        names,
        answerable,
        stub: None,
        tcp_stub,
        udp_said,
    }))
}

/// What became of the job's UDP sockets at FS-ONLY.
enum Udp {
    DeadNet(DeadNetUdp),
    Failed(String),
    Refused,
}

/// Tries at finding a port free on both loopback addresses.
const LOOPBACK_TRIES: usize = 16;

/// SEATBELT: the proxy's listeners, one port on 127.0.0.1 and on ::1.
/// Seatbelt's `localhost:PORT` allows both addresses, so a port vetto
/// held on one only would let the job reach whatever another program
/// listens on at the other: a port taken on ::1 is given up and another
/// tried. A host without IPv6 loopback gets the IPv4 listener alone
/// (nothing can listen on ::1 there).
fn loopback_listeners() -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut last = None;
    for _ in 0..LOOPBACK_TRIES {
        let v4 = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = v4.local_addr()?.port();
        match std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, port)) {
            Ok(v6) => return Ok(vec![v4, v6]),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(_) if std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_err() => {
                return Ok(vec![v4]);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse)))
}

/// FS-ONLY: the DNS-over-TCP stub's listeners on the host's loopback
/// (IPv6 where the host has it).
fn dns_listeners() -> std::io::Result<(Vec<std::net::TcpListener>, SocketAddr, Option<SocketAddr>)>
{
    let v4 = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let v4_addr = v4.local_addr()?;
    let mut listeners = vec![v4];
    let mut v6_addr = None;
    if let Ok(v6) = std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0))
        && let Ok(a) = v6.local_addr()
    {
        v6_addr = Some(a);
        listeners.push(v6);
    }
    Ok((listeners, v4_addr, v6_addr))
}

/// FS-ONLY: the DNS-over-TCP stub's listeners in the namespace that leads
/// nowhere (IPv6 where it has it).
fn dead_net_dns_listeners(
    net: &DeadNetUdp,
) -> std::io::Result<(Vec<std::net::TcpListener>, SocketAddr, Option<SocketAddr>)> {
    let v4 = net.listener(Ipv4Addr::LOCALHOST.into())?;
    let v4_addr = v4.local_addr()?;
    let mut listeners = vec![v4];
    let mut v6_addr = None;
    if let Ok(v6) = net.listener(Ipv6Addr::LOCALHOST.into())
        && let Ok(a) = v6.local_addr()
    {
        v6_addr = Some(a);
        listeners.push(v6);
    }
    Ok((listeners, v4_addr, v6_addr))
}

/// The job's `RES_OPTIONS` with `use-vc`: glibc's resolver (and others
/// that read it) sends its queries over TCP, which the supervisor
/// redirects to the DNS stub (UDP sockets stay refused at FS-ONLY).
fn use_vc(vars: &[(String, String)]) -> (String, String) {
    let value = match vars.iter().find(|(n, _)| n == "RES_OPTIONS") {
        Some((_, v)) if !v.trim().is_empty() => format!("{v} use-vc"),
        _ => "use-vc".to_string(),
    };
    ("RES_OPTIONS".to_string(), value)
}

/// A listener for redirected connects on the host's loopback.
fn redirected(proxy: &Proxy, ip: IpAddr) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind((ip, 0))?;
    let addr = listener.local_addr()?;
    proxy.serve(listener, ListenerKind::Redirected)?;
    Ok(addr)
}

impl Egress {
    /// What the notification server asks (FS-ONLY).
    pub fn broker(&self) -> Arc<dyn EgressBroker> {
        self.broker.clone()
    }

    /// FULL: serve what the stage made inside the namespace: the explicit
    /// listeners, the DNS stub and the transparent listeners (whose
    /// synthetic local addresses name what the job asked for).
    pub fn serve_netns(&mut self, sockets: crate::sandbox::EgressSockets) -> std::io::Result<()> {
        {
            let proxy = self
                .broker
                .proxy
                .lock()
                .map_err(|_| std::io::Error::other("the egress proxy is gone"))?;
            let proxy = proxy
                .as_ref()
                .ok_or_else(|| std::io::Error::other("the egress proxy is gone"))?;
            for l in sockets.explicit {
                proxy.serve(l.into(), ListenerKind::Explicit)?;
            }
            for l in sockets.redirected {
                proxy.serve(l.into(), ListenerKind::Redirected)?;
            }
            let names = self.names.clone();
            let kind = ListenerKind::Transparent {
                names: Arc::new(move |ip| names.lock().ok().and_then(|n| n.name_of(ip))),
            };
            for l in sockets.transparent {
                proxy.serve(l.into(), kind.clone())?;
            }
        }
        if let Some(dns) = sockets.dns {
            self.stub = Some(super::dns::Stub::start(
                dns.into(),
                self.names.clone(),
                self.answerable.clone(),
                self.sink.clone(),
                Some(asked_by(self.broker.askers.clone())),
            )?);
        }
        if let Some(dns) = sockets.dns_tcp {
            self.tcp_stub = Some(super::dns::TcpStub::start(
                vec![dns.into()],
                super::dns::TcpStubAt::JobNamespace,
                self.names.clone(),
                self.answerable.clone(),
                self.sink.clone(),
                self.broker.askers.clone(),
            )?);
        }
        Ok(())
    }

    /// The line vetto says at the start (no credential in it).
    pub fn start_line(&self) -> String {
        format!(
            "egress: only allowed destinations, through vetto's proxy at {} (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY set){}",
            self.address, self.udp_said
        )
    }

    /// Stop the proxy: its byte total for `SessionEnd.proxy_bytes`, and
    /// the connections it refused (with counts) for the end-of-run
    /// guidance.
    pub fn finish(self) -> (u64, Refused) {
        if let Some(stub) = self.stub {
            stub.stop();
        }
        if let Some(stub) = self.tcp_stub {
            stub.stop();
        }
        self.broker.udp.stop();
        let proxy = self.broker.proxy.lock().ok().and_then(|mut p| p.take());
        if let Some(n) = proxy.as_ref().map(Proxy::strangers).filter(|n| *n > 0) {
            // Information, never a violation: nothing of the job's.
            eprintln!(
                "vetto: {n} connection(s) to the proxy from outside the sandbox (another process on this host) were closed unserved"
            );
        }
        let bytes = proxy.map(|p| p.shutdown().bytes()).unwrap_or(0);
        (bytes, self.said.take())
    }
}

/// With the network off, vetto's DNS stub refuses every name, so a lookup
/// is recorded by the name asked and the process that asked, rather than
/// as a refused connect to (or socket for) the host's resolver.
/// - FULL: in the job's namespace on 127.0.0.53:53, UDP and TCP, where
///   the sandbox's `/etc/resolv.conf` points.
/// - FS-ONLY, where user namespaces exist: on port 53 of the namespace
///   that leads nowhere, where the job's UDP sockets are made, so a query
///   to any resolver address reaches it.
#[derive(Debug)]
pub struct RefusingDns {
    broker: Arc<DnsAskers>,
    said: Arc<Said>,
    stub: Option<super::dns::Stub>,
    tcp_stub: Option<super::dns::TcpStub>,
}

/// The notification server's view with the network off. FULL: a connect
/// to the stub is performed as asked and registered with its process (the
/// stub then names who sent from that socket). FS-ONLY: UDP sockets come
/// from the namespace that leads nowhere. Nothing is allowed or
/// redirected.
#[derive(Debug, Default)]
struct DnsAskers {
    askers: super::dns::Askers,
    udp: DeadNetUdp,
}

impl DnsAskers {
    fn is_stub(to: SocketAddr) -> bool {
        SocketAddr::new(to.ip().to_canonical(), to.port())
            == SocketAddr::V4(crate::plan::net::DNS_STUB_ADDR)
    }
}

impl EgressBroker for DnsAskers {
    fn explicit(&self) -> Vec<SocketAddr> {
        Vec::new()
    }

    fn redirect_to(&self, _: bool) -> Option<SocketAddr> {
        None
    }

    fn dns_via(&self, _: bool) -> Option<SocketAddr> {
        None
    }

    fn allows(&self, _: SocketAddr) -> bool {
        false
    }

    fn allows_host_loopback(&self, _: SocketAddr) -> bool {
        false
    }

    fn names_process(&self, to: SocketAddr) -> bool {
        DnsAskers::is_stub(to)
    }

    fn expect(
        &self,
        local: SocketAddr,
        original: SocketAddr,
        process: Option<crate::sandbox::ProcessFacts>,
    ) {
        if let (true, Some(p)) = (DnsAskers::is_stub(original), process) {
            super::dns::expect_asker(
                &self.askers,
                SocketAddr::new(local.ip().to_canonical(), local.port()),
                crate::supervisor::process_and_package(p),
            );
        }
    }

    fn dead_net_socket(
        &self,
        v6: bool,
        stream: bool,
        process: crate::sandbox::ProcessFacts,
    ) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
        self.udp.socket(v6, stream, process)
    }

    fn is_dead_net(&self, sock: crate::sys::os::BorrowedFd<'_>) -> bool {
        self.udp.holds(sock)
    }

    fn dead_net_proc(&self) -> Option<std::path::PathBuf> {
        self.udp.running.get().and_then(|i| i.proc_net())
    }

    fn dead_net_stream(&self, v6: bool) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
        self.udp.make(v6, true)
    }
}

/// FULL: who sent a query from `peer`, as registered at its socket's
/// connect to the stub (kept: glibc asks A and AAAA from one socket).
fn asked_by(askers: super::dns::Askers) -> super::dns::UdpAskers {
    Arc::new(move |peer: SocketAddr| {
        askers.lock().ok().and_then(|m| {
            m.get(&SocketAddr::new(peer.ip().to_canonical(), peer.port()))
                .cloned()
        })
    })
}

impl RefusingDns {
    /// Serve the stub: FULL, on the sockets the stage made; FS-ONLY, in
    /// the namespace that leads nowhere (`plan.notify.udp_dead_net`), made
    /// at the job's first UDP socket (if it cannot be, UDP sockets are
    /// refused, and vetto says so). `None`: filtered egress serves names
    /// instead, or there is no stub (the plan has none, or the stage could
    /// not bind it: lookups then fail without an answer).
    pub fn serve(
        plan: &Plan,
        sockets: &mut crate::sandbox::EgressSockets,
        log: Option<crate::events::log::ChannelSink>,
    ) -> std::io::Result<Option<RefusingDns>> {
        if plan.egress.is_some() {
            return Ok(None);
        }
        let said = Arc::new(Said::default());
        let sink = Arc::new(Tee {
            log,
            said: Arc::clone(&said),
        });
        let refuse_all = || super::dns::Answerable::for_policy(&NetPolicy::Off);
        if plan.notify.udp_dead_net {
            return Ok(Some(RefusingDns {
                broker: Arc::new(DnsAskers {
                    askers: Default::default(),
                    udp: DeadNetUdp::at_first_socket(Arc::default(), refuse_all(), sink),
                }),
                said,
                stub: None,
                tcp_stub: None,
            }));
        }
        if sockets.dns.is_none() && sockets.dns_tcp.is_none() {
            return Ok(None);
        }
        let broker = Arc::new(DnsAskers::default());
        let stub = match sockets.dns.take() {
            Some(socket) => Some(super::dns::Stub::start(
                socket.into(),
                Arc::default(),
                refuse_all(),
                sink.clone(),
                Some(asked_by(broker.askers.clone())),
            )?),
            None => None,
        };
        let tcp_stub = match sockets.dns_tcp.take().map(|listener| {
            super::dns::TcpStub::start(
                vec![listener.into()],
                super::dns::TcpStubAt::JobNamespace,
                Arc::default(),
                refuse_all(),
                sink,
                broker.askers.clone(),
            )
        }) {
            Some(Ok(tcp)) => Some(tcp),
            Some(Err(e)) => {
                if let Some(udp) = stub {
                    udp.stop();
                }
                return Err(e);
            }
            None => None,
        };
        Ok(Some(RefusingDns {
            broker,
            said,
            stub,
            tcp_stub,
        }))
    }

    /// What the notification server asks.
    pub fn broker(&self) -> Arc<dyn EgressBroker> {
        self.broker.clone()
    }

    /// Stop the stubs: the names they refused, for the end-of-run
    /// guidance.
    pub fn finish(self) -> Refused {
        if let Some(stub) = self.stub {
            stub.stop();
        }
        if let Some(stub) = self.tcp_stub {
            stub.stop();
        }
        self.broker.udp.stop();
        self.said.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SEATBELT: the profile the plan made without a network is completed
    /// with the port of vetto's own proxy, the job's variables point there
    /// with the session's credential, and on both loopback addresses that
    /// port is the proxy (a request without the credential gets its 407).
    #[test]
    fn seatbelt_filtered_egress_allows_exactly_the_proxys_own_port() {
        use std::io::{Read, Write};

        use crate::policy::{HostPattern, Origin};
        let origin = Origin {
            source: "vetto.toml".into(),
            line: 1,
            col: 1,
            written: "x".into(),
        };
        let policy = Policy {
            net: NetPolicy::Allow {
                hosts: vec![HostPattern {
                    host: "allowed.test".into(),
                    port: Some(443),
                    origin,
                }],
                deny: vec![],
                ips: vec![],
                resolve: vec![],
            },
            ..Policy::empty("/nonexistent/vetto-proj", "/nonexistent/vetto-s1")
        };
        let host = crate::host::HostCaps {
            seatbelt: crate::host::Availability::Available,
            ..crate::host::HostCaps::everything()
        };
        let options = crate::plan::BuildOptions {
            allow_degraded: false,
            audit: false,
            env: vec![],
            cwd: "/nonexistent/vetto-proj".into(),
            terminals: vec![],
        };
        let Ok(mut plan) = crate::plan::build(
            &policy,
            &host,
            crate::plan::TierRequest::Exactly(crate::plan::Tier::Seatbelt),
            &options,
        ) else {
            panic!("no seatbelt plan");
        };
        assert_eq!(plan.egress, Some(EgressPlan::Loopback));
        assert!(plan.seatbelt.as_ref().is_some_and(|p| p.needs_proxy_port));
        let Ok(Some(egress)) = start(&mut plan, &policy, false, &[], Vec::new(), None) else {
            panic!("no egress");
        };
        let port = egress.address.port();
        assert_eq!(egress.address.ip(), IpAddr::from(Ipv4Addr::LOCALHOST));
        let Some(profile) = plan.seatbelt.as_ref() else {
            panic!("no profile");
        };
        assert!(!profile.needs_proxy_port);
        let rule = crate::plan::seatbelt::proxy_rule(port);
        assert!(
            profile.text.ends_with(&format!("{rule}\n")),
            "{}",
            profile.text
        );
        assert_eq!(profile.text.matches("(remote tcp").count(), 1);
        let var = |name: &str| {
            plan.env
                .vars
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        assert!(var("HTTPS_PROXY").starts_with("http://vetto:"));
        assert!(var("HTTPS_PROXY").ends_with(&format!("@{}", egress.address)));
        assert!(var("ALL_PROXY").starts_with("socks5h://vetto:"));
        let mut ips = vec![IpAddr::from(Ipv4Addr::LOCALHOST)];
        if std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok() {
            ips.push(IpAddr::from(Ipv6Addr::LOCALHOST));
        }
        for ip in ips {
            let Ok(mut s) = std::net::TcpStream::connect((ip, port)) else {
                panic!("nothing listens on {ip} port {port}");
            };
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(60)));
            let _ =
                s.write_all(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n");
            let mut head = [0u8; 12];
            let _ = s.read_exact(&mut head);
            assert_eq!(&head, b"HTTP/1.1 407", "{ip}");
        }
        let _ = egress.finish();
    }

    /// The SEATBELT proxy holds its port on both loopback addresses where
    /// the host has both, so `localhost:PORT` reaches vetto alone.
    #[test]
    fn the_seatbelt_proxy_holds_one_port_on_both_loopback_addresses() {
        let Ok(listeners) = loopback_listeners() else {
            panic!("no loopback port");
        };
        let addrs: Vec<SocketAddr> = listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect();
        assert_eq!(addrs[0].ip(), IpAddr::from(Ipv4Addr::LOCALHOST));
        let v6 = std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok();
        assert_eq!(addrs.len(), if v6 { 2 } else { 1 });
        assert!(
            addrs
                .iter()
                .all(|a| a.port() == addrs[0].port() && a.ip().is_loopback())
        );
    }

    #[test]
    fn the_jobs_resolver_options_keep_its_own_and_add_tcp() {
        let var = |v: &str| vec![("RES_OPTIONS".to_string(), v.to_string())];
        assert_eq!(use_vc(&[]).1, "use-vc");
        assert_eq!(use_vc(&var("  ")).1, "use-vc");
        assert_eq!(
            use_vc(&var("ndots:2 timeout:1")).1,
            "ndots:2 timeout:1 use-vc"
        );
    }
}
