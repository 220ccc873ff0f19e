//! One connection, from accept to the record: read what the job wants
//! (bounded, under the idle timeout), decide, connect to the pinned address,
//! check the TLS server name, copy both ways, and log one
//! [`Event::Connection`] (plus a violation when it was refused).

use crate::sys::os::AsFd;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::events::ConnReason;
use crate::sandbox::splice::{self, Pipe};

use super::route::*;
use super::sni::{self, Hello};
use super::{Shared, http};
use crate::policy::egress::normalise_name;

/// The copy buffer, per direction (when `splice(2)` is not available).
pub(super) const BUF: usize = 64 * 1024;

/// The most one `splice(2)` moves into a pipe.
pub(super) const SPLICE_MAX: usize = 1 << 20;

/// Ports whose protocols always have the client speak first (implicit TLS,
/// HTTP): a connection there waits for the job's first bytes, however late.
pub(super) const CLIENT_FIRST: &[u16] = &[
    80, 443, 465, 563, 636, 853, 989, 990, 992, 993, 994, 995, 5061, 6697, 8443, 9443,
];

/// Ports whose protocols have the server speak first (FTP, SSH, telnet,
/// SMTP, POP3, NNTP, IMAP, submission, MySQL, ManageSieve): dialled at once.
pub(super) const SERVER_FIRST: &[u16] = &[21, 22, 23, 25, 110, 119, 143, 587, 2525, 3306, 4190];

/// Elsewhere, how long the job's first bytes are awaited before the server
/// is dialled anyway (a server-first protocol on an unusual port).
pub(super) const FIRST_BYTES_GRACE: Duration = Duration::from_millis(300);

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
pub(super) async fn hello_agrees(
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
pub(super) async fn splice_way(
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
