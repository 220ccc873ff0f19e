//! `[network] publish`, `--publish`: a port of the job's own loopback made
//! reachable at an address of the host's (issue P11, item 3) — a dev server
//! for the developer's browser, a service for a later CI step.
//!
//! The job's listeners live in a network namespace the host cannot reach
//! (FULL's, or at FS-ONLY the one vetto makes the job's sockets in). vetto
//! listens on the host's side, at the address the rule names (loopback
//! unless it names another), and relays each connection it accepts: a
//! socket made in the job's namespace — by the helper that made the job's
//! own (FS-ONLY), or by one that joined the job's namespaces (FULL) — is
//! connected to the job's port on its loopback, and bytes are copied both
//! ways. Nothing else of the job faces the host, and the job learns nothing
//! of the host from it: its server sees a peer on its own loopback.
//!
//! The host's listeners are bound before the job starts: a port taken is
//! said then, before anything ran. Each outside connection is recorded
//! (`connection`, `via: published`, the peer's address in its detail).
//! Bounded: [`MAX_RELAYED`] connections relayed at once, more are closed.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::events::log::{ChannelSink, EventSink};
use crate::events::{ConnDecision, ConnReason, ConnVia, Connection, Event, Timestamp};
use crate::policy::Publish;
use crate::sys::os::OwnedFd;

/// Connections relayed at once, all published ports together.
pub const MAX_RELAYED: usize = 128;

/// Makes a TCP socket (`true`: IPv6) in the job's network namespace.
pub type SocketMaker = Arc<dyn Fn(bool) -> io::Result<OwnedFd> + Send + Sync>;

/// The host's listeners, bound, not yet served.
pub struct Bound(Vec<(Publish, TcpListener)>);

/// Bind every published port's listener on the host; the error names the
/// rule and why (a port taken, an address the host does not have).
pub fn bind(rules: &[Publish]) -> Result<Bound, String> {
    let mut bound = Vec::new();
    for r in rules {
        let l = TcpListener::bind(r.host).map_err(|e| {
            format!(
                "cannot publish the job's port {} at {} ({}): {e}",
                r.port, r.host, r.origin
            )
        })?;
        bound.push((r.clone(), l));
    }
    Ok(Bound(bound))
}

/// The relays, running.
pub struct Publishing {
    stop: Arc<AtomicBool>,
    acceptors: Vec<(SocketAddr, JoinHandle<()>)>,
}

impl Bound {
    /// The line vetto says at the start; `None` when nothing is published.
    pub fn start_line(&self) -> Option<String> {
        let each: Vec<String> = self
            .0
            .iter()
            .map(|(r, _)| format!("{} → the job's port {}", r.host, r.port))
            .collect();
        (!each.is_empty()).then(|| format!("publishing {}", each.join(", ")))
    }

    /// Serve every listener: `maker` makes the sockets in the job's
    /// namespace, `log` records each outside connection.
    pub fn serve(self, maker: SocketMaker, log: Option<ChannelSink>) -> Publishing {
        let stop = Arc::new(AtomicBool::new(false));
        let relayed = Arc::new(AtomicUsize::new(0));
        let mut acceptors = Vec::new();
        for (rule, listener) in self.0 {
            let Ok(at) = listener.local_addr() else {
                continue;
            };
            let (stop, relayed, maker, log) =
                (stop.clone(), relayed.clone(), maker.clone(), log.clone());
            let spawned = std::thread::Builder::new()
                .name("vetto-publish".into())
                .spawn(move || accept_loop(&listener, &rule, &stop, &relayed, &maker, &log));
            if let Ok(handle) = spawned {
                acceptors.push((at, handle));
            }
        }
        Publishing { stop, acceptors }
    }
}

impl Publishing {
    /// Stop accepting (the job is gone); relays in flight end with their
    /// connections, whose job side is gone with the job's namespace.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for (at, handle) in self.acceptors {
            // Wake the blocking accept.
            let _ =
                TcpStream::connect_timeout(&wake_address(at), std::time::Duration::from_secs(1));
            let _ = handle.join();
        }
    }
}

/// Where to connect to wake a listener bound to `at` (an unspecified
/// address is reached on loopback).
fn wake_address(at: SocketAddr) -> SocketAddr {
    match at {
        SocketAddr::V4(a) if a.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, a.port()))
        }
        SocketAddr::V6(a) if a.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
        }
        other => other,
    }
}

fn accept_loop(
    listener: &TcpListener,
    rule: &Publish,
    stop: &AtomicBool,
    relayed: &Arc<AtomicUsize>,
    maker: &SocketMaker,
    log: &Option<ChannelSink>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(outside) = conn else {
            continue;
        };
        if relayed.fetch_add(1, Ordering::SeqCst) >= MAX_RELAYED {
            relayed.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        // The job's side is begun here, on this thread, which lives as
        // long as the listener: a helper the first socket starts dies with
        // the thread that started it (`PR_SET_PDEATHSIG`), never with one
        // connection's. An IPv6 one, needed only if the job's server is
        // not on IPv4, is made by the relay (the helper runs by then).
        let sockets = (maker(false), maker.clone());
        let (rule, held, log) = (rule.clone(), relayed.clone(), log.clone());
        let spawned = std::thread::Builder::new()
            .name("vetto-relay".into())
            .spawn(move || {
                relay(outside, &rule, sockets, log.as_ref());
                held.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // The closure (and the count it would give back) is gone.
            relayed.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The job's side of one connection, begun: an IPv4 socket made in the
/// job's namespace, and the maker for an IPv6 one.
type JobSockets = (io::Result<OwnedFd>, SocketMaker);

/// The job's side of one outside connection: its port on its IPv4
/// loopback, else on its IPv6 loopback.
fn job_side((v4, maker): JobSockets, port: u16) -> io::Result<TcpStream> {
    let first = v4.and_then(|s| {
        crate::sandbox::dead_net::connect_stream(
            s,
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)),
        )
    });
    match first {
        Ok(s) => Ok(s),
        Err(e) => maker(true)
            .and_then(|s| {
                crate::sandbox::dead_net::connect_stream(
                    s,
                    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
                )
            })
            .map_err(|_| e),
    }
}

fn relay(outside: TcpStream, rule: &Publish, sockets: JobSockets, log: Option<&ChannelSink>) {
    let began = Instant::now();
    let time = Timestamp::now();
    let peer = outside
        .peer_addr()
        .map_or_else(|_| "an unknown peer".to_string(), |p| p.to_string());
    let (up, down, detail) = match job_side(sockets, rule.port) {
        Ok(job) => {
            let (up, down) = copy_both(outside, job);
            (up, down, format!("from {peer}, outside the sandbox"))
        }
        Err(e) => (
            0,
            0,
            format!("from {peer}, outside the sandbox; nothing of the job's listens there ({e})"),
        ),
    };
    if let Some(log) = log {
        log.emit(Event::Connection(Box::new(Connection {
            requests: Vec::new(),
            time,
            host: None,
            port: rule.port,
            addr: Some(std::net::Ipv4Addr::LOCALHOST.to_string()),
            decision: ConnDecision::Allowed,
            reason: ConnReason::AllowedByRule,
            rule: Some(format!(
                "publish {} → {} ({})",
                rule.host, rule.port, rule.origin
            )),
            via: ConnVia::Published,
            bytes_up: up,
            bytes_down: down,
            duration_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
            process: None,
            attribution: None,
            detail,
        })));
    }
}

/// Copy both ways until both sides are done; bytes to the job, bytes from
/// it.
fn copy_both(outside: TcpStream, job: TcpStream) -> (u64, u64) {
    let (Ok(outside_r), Ok(job_w)) = (outside.try_clone(), job.try_clone()) else {
        return (0, 0);
    };
    let to_job = std::thread::Builder::new()
        .name("vetto-relay-up".into())
        .spawn(move || pump(outside_r, job_w));
    let down = pump(job, outside);
    let up = match to_job {
        Ok(h) => h.join().unwrap_or(0),
        Err(_) => 0,
    };
    (up, down)
}

/// Copy `from` to `to` until end of stream, then end `to`'s writing half
/// (and `from`'s reading one): the bytes copied.
fn pump(mut from: TcpStream, mut to: TcpStream) -> u64 {
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        total += n as u64;
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
    total
}
