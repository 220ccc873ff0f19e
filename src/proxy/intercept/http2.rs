//! HTTP/2 on a connection to a host a secret (or a request rule) is for:
//! offered to the job only when the real server chose it too, so both
//! sides speak the same and every request is read as the server reads it.
//!
//! Each stream is a request, read and checked before anything of it
//! reaches the server — its `:authority` (or one `Host`) must be the
//! connection's host, its method and path allowed by the host's rules —
//! then sent on the proxy's own connection to the server with the
//! placeholders in its credential headers replaced (never in its body);
//! the response's headers and trailers are read for a secret's value
//! (replaced by the placeholder), and its `1xx` heads are not passed.
//! A refused stream is answered `403`/`421` with the reason and reset;
//! the connection's other streams go on, each checked alike. Bodies are
//! streamed both ways under HTTP/2's flow control: the proxy takes no
//! more from one side than the other has room for, so nothing is
//! buffered whole. HPACK, framing and flow control are the `h2` crate's.

use std::future::poll_fn;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::timeout;

use super::{Interceptor, MAX_PATH, MAX_RECORDED, Requests, addressed_to, printable_header};
use crate::events::{ConnReason, HttpRequest};
use crate::proxy::route::Record;
use crate::proxy::{Shared, http};

/// How much each side may send vetto ahead, per stream and per
/// connection: HTTP/2's default (64 KiB) stalls a download at every window
/// on a fast link (the 256 MiB bench ran at half a tunnel's speed); this
/// bounds what vetto holds of one connection to 4 MiB each way.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

/// Streams the job (and the server) may have open at once on one
/// connection: each holds its head (at most the session's header limit)
/// while it waits, so this and the header limit bound what vetto holds of
/// a connection's heads. Browsers open 100; package managers fewer.
const MAX_STREAMS: u32 = 100;

/// Streams the job may reset before vetto has read them, and what vetto
/// buffers to send on one stream (its data waits for the peer's window
/// anyway).
const MAX_PENDING_RESETS: usize = 20;
const MAX_SEND_BUFFER: usize = 256 << 10;

/// The largest response header list taken from the server: real servers'
/// heads outgrow the job's 16 KiB now and then (policies, many cookies),
/// and a refused one would break the job; still bounded per stream.
const MAX_RESPONSE_HEAD: u32 = 256 << 10;

/// What one stream did.
#[derive(Default)]
struct Streamed {
    up: u64,
    down: u64,
    /// Refused: the status answered and why.
    refused: Option<(u16, String)>,
}

/// Serve the job's HTTP/2 connection `client` over the server's `server`
/// until either ends, the session stops, or the job is idle.
pub(super) async fn serve<C, S>(
    shared: &Shared,
    icp: &Interceptor,
    rec: &mut Record,
    host: &str,
    port: u16,
    client: C,
    server: S,
) where
    C: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = shared.limits.idle_timeout;
    // A header list is decoded no further than HTTP/1.1's head limit (an
    // HPACK table entry referenced thousands of times decodes to
    // megabytes): a larger one is refused before anything is copied.
    let max_head = u32::try_from(shared.limits.max_header_bytes).unwrap_or(u32::MAX);
    let server_side = h2::server::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(max_head)
        .max_concurrent_streams(MAX_STREAMS)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .handshake(client);
    let mut job = match timeout(idle, server_side).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            rec.detail = format!("the job's HTTP/2 preface failed: {e}");
            return;
        }
        Err(_) => {
            rec.detail = "closed: idle timeout (HTTP/2 preface)".into();
            return;
        }
    };
    let client_side = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_RESPONSE_HEAD)
        .max_concurrent_streams(MAX_STREAMS)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .handshake(server);
    let (upstream, connection) = match timeout(shared.limits.connect_timeout, client_side).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            rec.fail(
                ConnReason::UpstreamFailed,
                format!("HTTP/2 with {host}: {e}"),
            );
            return;
        }
        Err(_) => {
            rec.fail(
                ConnReason::UpstreamFailed,
                format!("HTTP/2 with {host}: timed out"),
            );
            return;
        }
    };
    let mut connection = std::pin::pin!(connection);
    let requests = Mutex::new(Requests::default());
    let mut streams = FuturesUnordered::new();
    let mut stop = shared.stop.subscribe();
    let mut accepting = true;
    let mut server_open = true;
    let mut refused: Option<(u16, String)> = None;
    let mut end = None;
    while accepting || !streams.is_empty() {
        tokio::select! {
            next = timeout(idle, job.accept()), if accepting => match next {
                Ok(Some(Ok((request, respond)))) => streams.push(stream(
                    shared,
                    icp,
                    host,
                    port,
                    upstream.clone(),
                    request,
                    respond,
                    &requests,
                )),
                Ok(Some(Err(e))) => {
                    end.get_or_insert(format!("closed: the job's HTTP/2: {e}"));
                    accepting = false;
                }
                Ok(None) => accepting = false,
                // Idle between requests; a long transfer keeps the job.
                Err(_) if streams.is_empty() => {
                    end.get_or_insert("closed: idle timeout".to_string());
                    accepting = false;
                }
                Err(_) => {}
            },
            Some(done) = streams.next() => {
                rec.bytes_up += done.up;
                rec.bytes_down += done.down;
                if let (None, Some(r)) = (&refused, done.refused) {
                    refused = Some(r);
                }
            }
            r = &mut connection, if server_open => {
                server_open = false;
                if let Err(e) = r {
                    end.get_or_insert(format!("closed: HTTP/2 with {host}: {e}"));
                }
            }
            _ = stop.wait_for(|s| *s) => {
                end.get_or_insert("closed: the session ended".to_string());
                break;
            }
        }
    }
    // Streams the session's end cut short are dropped (reset) here.
    drop(streams);
    if let Some(why) = end {
        rec.detail = why;
    }
    if let Some((_, why)) = refused {
        rec.refuse(shared, ConnReason::RequestRefused, why);
    }
    if let Ok(r) = requests.into_inner() {
        r.into_record(rec);
    }
}

/// The head of an HTTP/2 request as the checks read an HTTP/1.1 one: its
/// `:authority` stands as its `Host` (a `host` header beside it is a
/// second one, which the checks refuse unless it is the same).
fn head_of(parts: &::http::request::Parts) -> Result<http::Head, String> {
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    let mut headers = Vec::with_capacity(parts.headers.len() + 1);
    let authority = parts.uri.authority().map(|a| a.as_str().to_string());
    if let Some(a) = &authority {
        headers.push(("host".to_string(), a.clone()));
    }
    for (name, value) in &parts.headers {
        let value = value
            .to_str()
            .map_err(|_| format!("the header {name} is not text"))?;
        if name == ::http::header::HOST && authority.as_deref() == Some(value) {
            continue;
        }
        headers.push((name.as_str().to_string(), value.to_string()));
    }
    Ok(http::Head {
        method: parts.method.as_str().to_string(),
        target,
        version: "HTTP/2",
        headers,
    })
}

fn record(requests: &Mutex<Requests>, request: HttpRequest) -> Option<usize> {
    let mut r = requests.lock().ok()?;
    if r.done.len() < MAX_RECORDED {
        r.done.push(request);
        Some(r.done.len() - 1)
    } else {
        r.unrecorded += 1;
        None
    }
}

/// One request: checked, rewritten, sent; its body up and its response
/// down at once (a server may answer before the body ends, and a
/// bidirectional stream needs both).
#[expect(clippy::too_many_arguments, reason = "one stream's whole context")]
async fn stream(
    shared: &Shared,
    icp: &Interceptor,
    host: &str,
    port: u16,
    upstream: h2::client::SendRequest<Bytes>,
    request: ::http::Request<RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    requests: &Mutex<Requests>,
) -> Streamed {
    let (parts, body) = request.into_parts();
    // A tunnel inside the connection would carry bytes no check reads.
    let tunnel = (parts.method == ::http::Method::CONNECT).then(|| {
        (
            405,
            "CONNECT inside a connection the proxy reads is not passed".to_string(),
        )
    });
    let checked = match tunnel {
        Some(refusal) => Err(refusal),
        None => head_of(&parts).map_err(|why| (400, why)),
    }
    .and_then(|head| {
        addressed_to(&head, host, port)
            .map_err(|why| (421, why))
            .and_then(|()| icp.permits(&head, host, port).map_err(|why| (403, why)))
            .map(|()| head)
    });
    let path =
        |target: &str| -> String { printable_header(target).chars().take(MAX_PATH).collect() };
    let head = match checked {
        Ok(head) => head,
        Err((status, why)) => {
            record(
                requests,
                HttpRequest {
                    method: parts.method.to_string(),
                    path: path(parts.uri.path()),
                    status: Some(status),
                    secrets: Vec::new(),
                },
            );
            refuse(&mut respond, status, &why);
            drain(shared, body, &mut respond).await;
            return Streamed {
                refused: Some((status, why)),
                ..Streamed::default()
            };
        }
    };
    let (target, headers, injected) = icp.injected(&head, host, port);
    let seen: Vec<u8> = headers
        .iter()
        .flat_map(|(n, v)| [n.as_bytes(), b": ", v.as_bytes(), b"\n"].concat())
        .chain(head.target.bytes())
        .collect();
    let mut elsewhere = icp.misdirected(&seen, Some(host), port);
    drop(seen);
    elsewhere.extend(injected.misplaced);
    let used = injected.used;
    if !elsewhere.is_empty()
        && let Ok(mut r) = requests.lock()
    {
        for name in elsewhere {
            if !r.elsewhere.contains(&name) {
                r.elsewhere.push(name);
            }
        }
    }
    let authority = if port == 443 {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    let mut out = ::http::Request::builder()
        .method(parts.method.clone())
        .version(::http::Version::HTTP_2)
        .uri(format!("https://{authority}{target}"));
    for (name, value) in &headers {
        if !name.eq_ignore_ascii_case("host") {
            out = out.header(name.as_str(), value.as_str());
        }
    }
    let at = record(
        requests,
        HttpRequest {
            method: head.method.clone(),
            path: path(&head.target),
            status: None,
            secrets: used,
        },
    );
    let Ok(out) = out.body(()) else {
        refuse(&mut respond, 400, "the request cannot be sent as rewritten");
        drain(shared, body, &mut respond).await;
        return Streamed::default();
    };
    // Only the request to send is held while the server is waited for.
    drop((parts, head, target, headers));
    let sent = match upstream.ready().await {
        Ok(mut ready) => ready.send_request(out, body.is_end_stream()),
        Err(e) => Err(e),
    };
    let (response, to_server) = match sent {
        Ok(s) => s,
        Err(e) => {
            respond.send_reset(e.reason().unwrap_or(h2::Reason::REFUSED_STREAM));
            return Streamed::default();
        }
    };
    let up = async {
        if body.is_end_stream() {
            return 0;
        }
        pipe(shared, body, to_server, None).await
    };
    let down = async {
        let response = match response.await {
            Ok(r) => r,
            Err(e) => {
                respond.send_reset(e.reason().unwrap_or(h2::Reason::INTERNAL_ERROR));
                return 0;
            }
        };
        if let (Some(at), Ok(mut r)) = (at, requests.lock())
            && let Some(q) = r.done.get_mut(at)
        {
            q.status = Some(response.status().as_u16());
        }
        let (mut parts, body) = response.into_parts();
        scrub_headers(icp, requests, &mut parts.headers);
        let end = body.is_end_stream();
        match respond.send_response(::http::Response::from_parts(parts, ()), end) {
            Ok(to_job) if !end => pipe(shared, body, to_job, Some((icp, requests))).await,
            _ => 0,
        }
    };
    let (up, down) = tokio::join!(up, down);
    Streamed {
        up,
        down,
        refused: None,
    }
}

/// Answer a refused request (nothing of it was sent).
fn refuse(respond: &mut h2::server::SendResponse<Bytes>, status: u16, why: &str) {
    let answer = ::http::Response::builder()
        .status(status)
        .header("x-vetto-reason", printable_header(why))
        .body(());
    match answer {
        Ok(answer) => {
            let _ = respond.send_response(answer, true);
        }
        Err(_) => respond.send_reset(h2::Reason::REFUSED_STREAM),
    }
}

/// What of a refused request's body is read and dropped, so the stream
/// ends as the client expects; past it the stream is reset.
const MAX_DRAINED: usize = 1 << 20;

/// The body of a refused request, still coming, read and dropped (never
/// sent): dropping it unread resets the stream as cancelled, and resetting
/// it "without error" after the answer (RFC 9113 §8.1) is taken for an
/// error by clients all the same (curl 7.88) — either way the job would
/// lose the answer that says why. Bounded by [`MAX_DRAINED`] and the idle
/// timeout, then reset.
async fn drain(
    shared: &Shared,
    mut body: RecvStream,
    respond: &mut h2::server::SendResponse<Bytes>,
) {
    let mut left = MAX_DRAINED;
    while !body.is_end_stream() {
        match timeout(shared.limits.idle_timeout, body.data()).await {
            Ok(Some(Ok(data))) if data.len() <= left => {
                left -= data.len();
                let _ = body.flow_control().release_capacity(data.len());
            }
            Ok(None) => return,
            _ => {
                respond.send_reset(h2::Reason::NO_ERROR);
                return;
            }
        }
    }
}

/// Every header value of a response head (or trailers) from the server
/// with each form of a secret's value replaced by its placeholder's
/// (`scrub`), and the secrets found recorded. A value that cannot be
/// rebuilt is dropped.
fn scrub_headers(icp: &Interceptor, requests: &Mutex<Requests>, headers: &mut ::http::HeaderMap) {
    let mut found: Vec<String> = Vec::new();
    for value in headers.values_mut() {
        if let Some((clean, names)) = icp.scrub(value.as_bytes()) {
            *value = ::http::HeaderValue::from_bytes(&clean)
                .unwrap_or_else(|_| ::http::HeaderValue::from_static(""));
            found.extend(names);
        }
    }
    if !found.is_empty() {
        note_scrubbed(requests, found);
    }
}

/// Record that a response carried these secrets' values (replaced).
pub(super) fn note_scrubbed(requests: &Mutex<Requests>, found: Vec<String>) {
    if let Ok(mut r) = requests.lock() {
        for name in found {
            if !r.scrubbed.contains(&name) {
                r.scrubbed.push(name);
            }
        }
    }
}

/// A body from one side to the other: each frame sent once the other side
/// has room for it, and only then its room given back to the sender;
/// trailers after, read for a secret's value on the way down (`scrub`:
/// the response's). Bounded by the session's bytes. The bytes passed.
async fn pipe(
    shared: &Shared,
    mut from: RecvStream,
    mut to: SendStream<Bytes>,
    scrub: Option<(&Interceptor, &Mutex<Requests>)>,
) -> u64 {
    let counter = if scrub.is_none() {
        &shared.bytes_up
    } else {
        &shared.bytes_down
    };
    let mut passed = 0u64;
    while let Some(frame) = from.data().await {
        let mut data = match frame {
            Ok(d) => d,
            Err(e) => {
                to.send_reset(e.reason().unwrap_or(h2::Reason::CANCEL));
                return passed;
            }
        };
        let n = data.len();
        if shared.bytes_left() < n as u64 {
            // Dropping `from` on return resets the sender's side too.
            to.send_reset(h2::Reason::CANCEL);
            return passed;
        }
        while !data.is_empty() {
            to.reserve_capacity(data.len());
            let room = match poll_fn(|cx| to.poll_capacity(cx)).await {
                Some(Ok(room)) if room > 0 => room,
                _ => return passed,
            };
            let part = data.split_to(room.min(data.len()));
            if to.send_data(part, false).is_err() {
                return passed;
            }
        }
        let _ = from.flow_control().release_capacity(n);
        counter.fetch_add(n as u64, Ordering::Relaxed);
        passed += n as u64;
    }
    match from.trailers().await {
        Ok(Some(mut trailers)) => {
            if let Some((icp, requests)) = scrub {
                scrub_headers(icp, requests, &mut trailers);
            }
            let _ = to.send_trailers(trailers);
        }
        Ok(None) => {
            let _ = to.send_data(Bytes::new(), true);
        }
        Err(e) => to.send_reset(e.reason().unwrap_or(h2::Reason::CANCEL)),
    }
    passed
}
