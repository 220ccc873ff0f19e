//! The proxy's front door: one task per accepted connection, which tells
//! what the client is (an explicit proxy request, SOCKS, a transparent or
//! redirected connection) and hands it to the relay's building blocks
//! (`relay`) or the SOCKS server (`socks`).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::events::{ConnDecision, ConnReason, ConnVia};

use super::{ListenerKind, Shared, http, socks};

use super::relay::*;
use super::route::*;

/// The proxy's credential challenge, on a connection kept open for the
/// answer.
const CHALLENGE: &[u8] = b"HTTP/1.1 407 Proxy Authentication Required\r\n\
Proxy-Authenticate: Basic realm=\"vetto\"\r\nContent-Length: 0\r\n\r\n";

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
    // A client that authenticates only when challenged (curl with
    // `CURLAUTH_ANY`, which git sets) asks first without the credential:
    // the 407 is the first half of HTTP proxy authentication, so it is
    // answered on a connection kept open for the second half, and is no
    // refusal. Once per connection, only for a head with no credential at
    // all and no body (a body is not read to find the next head). A client
    // that leaves after the challenge is recorded as one without the
    // credential.
    let mut challenged = false;
    let (head, end) = loop {
        let end = loop {
            if let Some(end) = super::wire::head_end(&buf) {
                break end;
            }
            match read_some(shared, &mut client, &mut buf, max).await {
                // The client left after the challenge (it authenticates on
                // a new connection, or cannot): nothing was asked for.
                Ok(0) if challenged && buf.is_empty() => {
                    rec.refuse(
                        shared,
                        ConnReason::NoCredential,
                        "closed after the proxy's credential challenge".into(),
                    );
                    return;
                }
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
        if head.has_credential(&shared.auth_token) {
            break (head, end);
        }
        let bodiless = head.header("transfer-encoding").is_none()
            && head
                .header("content-length")
                .is_none_or(|n| n.trim() == "0");
        // A wrong credential is a guess, not a handshake: refused at once.
        let unauthenticated = head.header("proxy-authorization").is_none();
        if !challenged && bodiless && unauthenticated {
            challenged = true;
            if client.write_all(CHALLENGE).await.is_err() {
                rec.refuse(
                    shared,
                    ConnReason::NoCredential,
                    "closed after the proxy's credential challenge".into(),
                );
                return;
            }
            buf.drain(..end);
            continue;
        }
        let _ = client
            .write_all(&http::response(
                407,
                "Proxy Authentication Required",
                "Proxy-Authenticate: Basic realm=\"vetto\"\r\n",
            ))
            .await;
        let asked = if head.method.eq_ignore_ascii_case("CONNECT") {
            http::authority(&head.target).ok()
        } else {
            http::absolute(&head.target).ok().map(|(h, p, _)| (h, p))
        };
        if let Some((host, port)) = asked {
            rec.target(Some(&host), port);
        }
        rec.refuse(shared, ConnReason::NoCredential, String::new());
        return;
    };
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
