//! Secrets the job uses but never holds (issue P13): for the hosts a
//! secret is for, the proxy ends the job's TLS with a certificate of the
//! session's own authority, opens its own TLS to the real server (checked
//! against the host's trust roots), and reads each request head:
//! the placeholder the job was given is replaced by the value there, and
//! only there. Every other host stays a tunnel the proxy cannot read.
//!
//! - The authority's key is made at start in vetto's memory and never
//!   written anywhere; the job gets its certificate only (to trust it).
//! - Only the credential headers of a request head are rewritten
//!   ([`CREDENTIAL_HEADERS`], a Basic credential decoded and encoded
//!   again); a placeholder anywhere else is sent as it is and recorded.
//!   Bodies are streamed through as their framing says, never buffered
//!   whole.
//! - Every request on a kept-alive connection is read and framed as
//!   `http::Body` frames it for the plain-HTTP proxy, so a second request
//!   is never passed unread behind the first.
//! - HTTP/2 where the server chose it: the job's hello is read first, the
//!   server's TLS offers what the job offered, and the job is offered the
//!   one protocol the server chose; each HTTP/2 stream is read and checked
//!   as a request (`http2`). Nothing is translated between the two, and
//!   nothing passes unread.
//! - Every response head (`1xx` and trailers too) is read and any form
//!   of a secret's value in it replaced by its placeholder (`scrub`), and
//!   paired with its request's status for the record. A head that cannot
//!   be parsed is scrubbed and passed on, the rest unread; a body whose
//!   framing breaks ends the connection.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::events::{ConnReason, HttpRequest};
use crate::policy::{HostPattern, RequestRule};

use super::route::{Record, Route};
use super::{Shared, http};

#[doc(hidden)]
pub mod fuzzing;
mod http2;
mod scrub;

/// The headers a secret's value goes in: where a credential goes. Any
/// other place in a request head (its target, `Origin`, `Referer`,
/// `Cookie`, any other header) keeps the placeholder, since a server may
/// hand what it read there back (a redirect keeping the query, CORS
/// echoing `Origin`). `Authorization` for Bearer, Basic (decoded) and the
/// other schemes; the rest are the API-key headers of the services the
/// recipes name (Anthropic's `x-api-key`, Google's `x-goog-api-key`) and
/// of those users name themselves (GitLab's `private-token`, Azure's
/// `api-key`).
pub(crate) const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "private-token",
    "api-key",
];

/// A secret as the proxy holds it.
#[derive(Clone)]
pub struct Secret {
    /// The variable's name (for the records).
    pub name: String,
    /// What the job holds instead of the value.
    pub placeholder: String,
    /// The value, put in requests to `hosts` only.
    pub value: String,
    /// Where the value may go (HTTPS, so port 443 unless a port is named).
    pub hosts: Vec<HostPattern>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Secret {
    fn covers(&self, host: &str, port: u16) -> bool {
        self.hosts
            .iter()
            .any(|p| p.matches(host, Some(port)) && (p.port.is_some() || port == 443))
    }
}

/// Why interception could not be set up (the session is then refused).
#[derive(Debug, thiserror::Error)]
pub enum InterceptError {
    #[error("cannot make the session's certificate authority: {0}")]
    Authority(#[from] rcgen::Error),
    #[error(
        "no trusted root certificate found on the host to check the servers a secret goes to against (install ca-certificates, or point SSL_CERT_FILE at a bundle)"
    )]
    NoRoots,
    #[error("cannot set up TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// Names with a certificate made; past this many a name's is made again
/// at each connection.
const MAX_LEAVES: usize = 256;

/// Requests recorded per connection; the rest are counted in its detail.
const MAX_RECORDED: usize = 256;

/// The part of a request's path kept in the record.
const MAX_PATH: usize = 256;

/// The interception state of one session.
pub(crate) struct Interceptor {
    secrets: Vec<Secret>,
    rules: Vec<RequestRule>,
    authority: CertifiedIssuer<'static, KeyPair>,
    /// Per name, and per protocol offered (HTTP/2 or HTTP/1.1).
    leaves: Mutex<HashMap<(String, bool), Arc<rustls::ServerConfig>>>,
    /// To the real server, offering HTTP/1.1 only, and HTTP/2 first.
    upstream: Arc<rustls::ClientConfig>,
    upstream_h2: Arc<rustls::ClientConfig>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    /// The host's roots, as the job's bundle carries them.
    roots_pem: String,
    /// Every secret's value in the forms a response head could hold it.
    scrubber: scrub::Scrubber,
}

impl Interceptor {
    pub(crate) fn new(
        secrets: Vec<Secret>,
        rules: Vec<RequestRule>,
    ) -> Result<Interceptor, InterceptError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "vetto session authority");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let authority = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        // The host's roots as `SSL_CERT_FILE`/`SSL_CERT_DIR` or the
        // system's store name them; an unreadable one among many is skipped.
        let native = rustls_native_certs::load_native_certs().certs;
        let roots_pem: String = native.iter().map(|c| pem(c.as_ref())).collect();
        let (added, _) = roots.add_parsable_certificates(native);
        if added == 0 {
            return Err(InterceptError::NoRoots);
        }
        let mut upstream = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut upstream_h2 = upstream.clone();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        upstream_h2.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let scrubber = scrub::Scrubber::new(
            secrets
                .iter()
                .map(|s| (s.value.as_str(), s.placeholder.as_str())),
        );
        Ok(Interceptor {
            scrubber,
            secrets,
            rules,
            authority,
            leaves: Mutex::new(HashMap::new()),
            upstream: Arc::new(upstream),
            upstream_h2: Arc::new(upstream_h2),
            provider,
            roots_pem,
        })
    }

    /// What the job trusts (PEM): the host's roots, so its other TLS
    /// works as before, and the session's authority.
    pub(crate) fn authority_pem(&self) -> String {
        self.authority.pem()
    }

    pub(crate) fn trust_bundle_pem(&self) -> String {
        let mut out = self.roots_pem.clone();
        out.push_str(&self.authority.pem());
        out
    }

    /// Whether connections to `host:port` are read (a secret or a rule is
    /// for it).
    pub(crate) fn covers(&self, host: &str, port: u16) -> bool {
        self.secrets.iter().any(|s| s.covers(host, port))
            || self.rules.iter().any(|r| r.host.matches(host, Some(port)))
    }

    /// The secrets whose placeholder is in `bytes`, sent to `host:port`,
    /// which they are not for (`host` `None`: an address).
    pub(crate) fn misdirected(&self, bytes: &[u8], host: Option<&str>, port: u16) -> Vec<String> {
        self.secrets
            .iter()
            .filter(|s| !host.is_some_and(|h| s.covers(h, port)))
            .filter(|s| {
                bytes
                    .windows(s.placeholder.len())
                    .any(|w| w == s.placeholder.as_bytes())
            })
            .map(|s| s.name.clone())
            .collect()
    }

    /// Whether the rules let `head` through to `host:port`: always, where
    /// no rule names the host; else its target must be one every server
    /// reads as the rule does ([`unambiguous_path`]) and one of its rules
    /// must allow the method and the path (its query aside).
    fn permits(&self, head: &http::Head, host: &str, port: u16) -> Result<(), String> {
        let mine: Vec<&RequestRule> = self
            .rules
            .iter()
            .filter(|r| r.host.matches(host, Some(port)))
            .collect();
        if mine.is_empty() {
            return Ok(());
        }
        let path = unambiguous_path(&head.target).map_err(|why| {
            format!(
                "the target {} {why}, which servers read as another path than the one a rule matches",
                printable_header(&head.target)
                    .chars()
                    .take(64)
                    .collect::<String>()
            )
        })?;
        let allowed = mine.iter().any(|r| {
            r.methods
                .iter()
                .any(|m| m == "*" || m.eq_ignore_ascii_case(&head.method))
                && crate::policy::paths::wildcard_match(
                    r.path.as_bytes(),
                    path.as_bytes(),
                    b'*',
                    None,
                )
        });
        if allowed {
            Ok(())
        } else {
            let listed: Vec<String> = mine.iter().map(|r| r.describe()).collect();
            Err(format!(
                "{} {} is allowed by no rule of {host} ({})",
                head.method,
                printable_header(path).chars().take(64).collect::<String>(),
                listed.join("; ")
            ))
        }
    }

    /// The job-facing TLS configuration for `host`: a certificate for that
    /// name alone, signed by the session's authority, offering HTTP/2
    /// (`h2`) or HTTP/1.1 — what the real server chose.
    fn leaf(&self, host: &str, h2: bool) -> Result<Arc<rustls::ServerConfig>, InterceptError> {
        let slot = (host.to_string(), h2);
        if let Some(c) = self.leaves.lock().ok().and_then(|m| m.get(&slot).cloned()) {
            return Ok(c);
        }
        let key = KeyPair::generate()?;
        let cert =
            CertificateParams::new(vec![host.to_string()])?.signed_by(&key, &self.authority)?;
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), self.authority.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )?;
        config.alpn_protocols = vec![if h2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        let config = Arc::new(config);
        if let Ok(mut m) = self.leaves.lock()
            && m.len() < MAX_LEAVES
        {
            m.insert(slot, config.clone());
        }
        Ok(config)
    }

    /// The head with the placeholder of each secret for `host:port`
    /// replaced by its value in the credential headers, as HTTP/1.1 bytes;
    /// the names of the secrets used, and of those whose placeholder was
    /// elsewhere in the head (sent as it is).
    fn inject(&self, head: &http::Head, host: &str, port: u16) -> (Vec<u8>, Injected) {
        let (target, headers, used) = self.injected(head, host, port);
        let mut bytes = format!("{} {target} {}\r\n", head.method, head.version).into_bytes();
        for (name, value) in &headers {
            bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
        (bytes, used)
    }

    /// The request target and headers of `head` with the placeholder of
    /// each secret for `host:port` replaced by its value in the credential
    /// headers ([`CREDENTIAL_HEADERS`]) only; the names of the secrets
    /// used and of those left as placeholders elsewhere.
    fn injected(
        &self,
        head: &http::Head,
        host: &str,
        port: u16,
    ) -> (String, Vec<(String, String)>, Injected) {
        let mut used = Injected::default();
        let mine: Vec<&Secret> = self
            .secrets
            .iter()
            .filter(|s| s.covers(host, port))
            .collect();
        let mut swap = |text: &str| -> String {
            let mut out = text.to_string();
            for s in &mine {
                if out.contains(&s.placeholder) {
                    out = out.replace(&s.placeholder, &s.value);
                    if !used.used.contains(&s.name) {
                        used.used.push(s.name.clone());
                    }
                }
            }
            out
        };
        let mut headers = Vec::with_capacity(head.headers.len());
        for (name, value) in &head.headers {
            let credential = CREDENTIAL_HEADERS
                .iter()
                .any(|c| name.eq_ignore_ascii_case(c));
            let value = match basic(name, value) {
                // git and npm send a token as a Basic credential's user or
                // password: decoded, swapped, encoded again.
                Some(decoded) => {
                    let swapped = swap(&decoded);
                    if swapped == decoded {
                        swap(value)
                    } else {
                        format!("Basic {}", super::wire::base64(swapped.as_bytes()))
                    }
                }
                None if credential => swap(value),
                None => value.clone(),
            };
            headers.push((name.clone(), value));
        }
        // Where the value does not go: the target and every other header.
        let elsewhere = head
            .headers
            .iter()
            .filter(|(n, _)| !CREDENTIAL_HEADERS.iter().any(|c| n.eq_ignore_ascii_case(c)))
            .flat_map(|(n, v)| [n.as_str(), v.as_str()])
            .chain([head.target.as_str()]);
        for text in elsewhere {
            for s in mine.iter().filter(|s| text.contains(&s.placeholder)) {
                if !used.misplaced.contains(&s.name) {
                    used.misplaced.push(s.name.clone());
                }
            }
        }
        (head.target.clone(), headers, used)
    }

    /// `bytes` (a response head, trailers) with every form of a value
    /// replaced by its placeholder's, and the secrets found; `None` where
    /// none is there.
    fn scrub(&self, bytes: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
        let (clean, found) = self.scrubber.scrub(bytes)?;
        let names = found
            .into_iter()
            .filter_map(|i| self.secrets.get(i).map(|s| s.name.clone()))
            .collect();
        Some((clean, names))
    }
}

/// What injecting did to a request head.
#[derive(Debug, Default, PartialEq, Eq)]
struct Injected {
    /// Secrets whose value was put in (a credential header).
    used: Vec<String>,
    /// Secrets whose placeholder was elsewhere in the head (the target,
    /// another header), sent there as it is.
    misplaced: Vec<String>,
}

/// A certificate in PEM.
fn pem(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The decoded `user:password` of an `Authorization: Basic …` header.
fn basic(name: &str, value: &str) -> Option<String> {
    use base64::Engine;
    if !name.eq_ignore_ascii_case("authorization") {
        return None;
    }
    let (scheme, cred) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(cred.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// A stream that yields `early` (bytes already read from it) first.
struct Prefixed {
    early: Vec<u8>,
    at: usize,
    inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        if self.at < self.early.len() {
            let n = (self.early.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.early[at..at + n]);
            self.at += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connection to a host a secret is for, from the job's ClientHello
/// (`early`, already checked against `route`) to its end.
pub(crate) async fn serve(
    shared: &Shared,
    icp: &Interceptor,
    rec: &mut Record,
    client: TcpStream,
    route: Route,
    early: Vec<u8>,
) {
    let port = route.port();
    let Ok(server) = super::route::connect_route(shared, rec, &route).await else {
        return;
    };
    let idle = shared.limits.idle_timeout;
    let prefixed = Prefixed {
        early,
        at: 0,
        inner: client,
    };
    // The job's hello first: whether it offers HTTP/2.
    let hello =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), prefixed);
    let start = match timeout(idle, hello).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            rec.detail = format!("the job's TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            rec.detail = "closed: idle timeout (TLS handshake)".into();
            return;
        }
    };
    let offers_h2 = start
        .client_hello()
        .alpn()
        .is_some_and(|mut offered| offered.any(|p| p == b"h2"));
    // Then the real server's TLS, offering what the job offers: the job is
    // then offered the one protocol the server chose, so each side speaks
    // the same and every request is read as the server will read it.
    let Ok(name) = rustls::pki_types::ServerName::try_from(route.name.clone()) else {
        return;
    };
    let connector = tokio_rustls::TlsConnector::from(if offers_h2 {
        icp.upstream_h2.clone()
    } else {
        icp.upstream.clone()
    });
    let server = match timeout(
        shared.limits.connect_timeout,
        connector.connect(name, server),
    )
    .await
    {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("TLS with {}: {e}", route.name)),
        Err(_) => Err(format!("TLS with {}: timed out", route.name)),
    };
    let h2 = matches!(&server, Ok(s) if s.get_ref().1.alpn_protocol() == Some(b"h2"));
    let config = match icp.leaf(&route.name, h2) {
        Ok(c) => c,
        Err(e) => {
            rec.fail(
                ConnReason::UpstreamFailed,
                format!("no certificate for the job: {e}"),
            );
            return;
        }
    };
    let mut client = match timeout(idle, start.into_stream(config)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            rec.detail = format!(
                "the job's TLS handshake failed (does it trust the session's authority?): {e}"
            );
            return;
        }
        Err(_) => {
            rec.detail = "closed: idle timeout (TLS handshake)".into();
            return;
        }
    };
    let server = match server {
        Ok(s) => s,
        Err(why) => {
            // The job's side speaks HTTP/1.1 here (no server chose h2).
            let answer = http::response(
                502,
                "Bad Gateway",
                &format!("X-Vetto-Reason: {}\r\n", printable_header(&why)),
            );
            let _ = send(&mut client, &answer).await;
            rec.fail(ConnReason::UpstreamFailed, why);
            return;
        }
    };
    if h2 {
        http2::serve(shared, icp, rec, &route.name, port, client, server).await;
        return;
    }
    let requests = Mutex::new(Requests::default());
    let (cr, mut cw) = tokio::io::split(client);
    let (sr, sw) = tokio::io::split(server);
    let mut stop = shared.stop.subscribe();
    let (up, end, down) = {
        let (answered_tx, answered_rx) = tokio::sync::watch::channel(Answered::default());
        let up = requests_up(
            shared,
            icp,
            &route.name,
            port,
            (cr, sw),
            &requests,
            answered_rx,
        );
        let down = responses_down(shared, icp, sr, &mut cw, &requests, answered_tx);
        tokio::pin!(up, down);
        let mut down_bytes = None;
        let (up_bytes, end) = loop {
            tokio::select! {
                r = &mut up => break r,
                n = &mut down, if down_bytes.is_none() => down_bytes = Some(n),
                _ = stop.wait_for(|s| *s) => break (0, End::Closed("closed: the session ended".into())),
            }
        };
        // A refused request is answered after the responses to the ones
        // before it (bounded: the server was told no more is coming).
        if matches!(end, End::Refused(..)) && down_bytes.is_none() {
            let answered = async {
                loop {
                    let waiting = requests.lock().map_or(0, |r| r.pending.len());
                    if waiting == 0 {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            };
            tokio::select! {
                n = &mut down => down_bytes = Some(n),
                _ = answered => {}
                _ = tokio::time::sleep(REFUSAL_GRACE) => {}
            }
        } else if down_bytes.is_none() && matches!(end, End::Done) {
            down_bytes = Some(down.await);
        }
        (up_bytes, end, down_bytes.unwrap_or(0))
    };
    rec.bytes_up += up;
    rec.bytes_down += down;
    match end {
        End::Done => {}
        End::Closed(why) => rec.detail = why,
        End::Refused(status, why) => {
            let answer = http::response(
                status,
                match status {
                    421 => "Misdirected Request",
                    403 => "Forbidden",
                    _ => "Bad Request",
                },
                &format!("X-Vetto-Reason: {}\r\n", printable_header(&why)),
            );
            let _ = send(&mut cw, &answer).await;
            let _ = cw.shutdown().await;
            rec.refuse(shared, ConnReason::RequestRefused, why);
        }
    }
    if let Ok(r) = requests.into_inner() {
        r.into_record(rec);
    }
}

/// How long a refused request waits for the responses to those before it.
const REFUSAL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How the job's side of an intercepted connection ended.
enum End {
    /// It closed.
    Done,
    /// It was closed, for this reason (a bound, a framing error).
    Closed(String),
    /// A request was refused: the status to answer and why. Nothing of it
    /// reached the server.
    Refused(u16, String),
}

/// The path of a request target (its query aside) where every common
/// server reads the same path a rule matches; else what makes servers
/// read it otherwise. Refused: a fragment (`#`: Go keeps it in the path),
/// `;` parameters in a segment (Tomcat, Jetty and Spring read `..;` as
/// `..`), a backslash (WHATWG URL parsers, as in node, read it as `/`),
/// an encoded `/`, `\`, `%` or NUL, a `%` that encodes nothing, and a `.`
/// or `..` segment once decoded (`%2e%2e`). `*` (`OPTIONS *`) is no path
/// and matches no rule's.
pub(crate) fn unambiguous_path(target: &str) -> Result<&str, &'static str> {
    if target.contains('#') {
        return Err("has a fragment (#)");
    }
    let path = target.split('?').next().unwrap_or_default();
    if !path.starts_with('/') {
        return Err("is not a path");
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err("has a space or a control character");
    }
    if path.contains(';') {
        return Err("has ; parameters in a segment");
    }
    if path.contains('\\') {
        return Err("has a backslash");
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("has a % that encodes nothing")?;
            if matches!(hex, b'/' | b'\\' | b'%' | 0 | b';' | b'#' | b'?') {
                return Err("has an encoded /, \\, %, ;, #, ? or NUL");
            }
            decoded.push(hex);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    if decoded
        .split(|b| *b == b'/')
        .any(|seg| seg == b"." || seg == b"..")
    {
        return Err("has a . or .. segment (once decoded)");
    }
    Ok(path)
}

/// Whether a request names the connection's server, and no other: its
/// target is a path (`/…`; `*` for `OPTIONS`) and its one `Host` header is
/// `host` (with `port`, or without it for 443). A `Host` of another name
/// on a shared front end (a CDN) would reach another origin with the
/// secret (domain fronting).
fn addressed_to(head: &http::Head, host: &str, port: u16) -> Result<(), String> {
    let origin_form = head.target.starts_with('/')
        || (head.target == "*" && head.method.eq_ignore_ascii_case("OPTIONS"));
    if !origin_form {
        return Err(format!(
            "the request target is not a path ({})",
            printable_header(&head.target)
                .chars()
                .take(64)
                .collect::<String>()
        ));
    }
    let mut hosts = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.as_str());
    let (Some(named), None) = (hosts.next(), hosts.next()) else {
        return Err("the request has no Host header, or more than one".into());
    };
    let (name, named_port) = match named.rsplit_once(':') {
        Some((n, p)) => (n, p.parse::<u16>().ok()),
        None => (named, Some(443)),
    };
    let same = crate::policy::egress::normalise_name(name).as_deref() == Some(host)
        && named_port == Some(port);
    if same {
        Ok(())
    } else {
        Err(format!(
            "the request names {} on a connection to {host}:{port}",
            printable_header(named).chars().take(64).collect::<String>()
        ))
    }
}

/// The requests of one connection: answered, and still waiting for their
/// response (with whether each was `HEAD`, whose response has no body).
#[derive(Default)]
struct Requests {
    done: Vec<HttpRequest>,
    pending: VecDeque<(HttpRequest, bool)>,
    unrecorded: u64,
    /// Secrets whose placeholder a request carried here, not their host.
    elsewhere: Vec<String>,
    /// Secrets whose value a response head carried back (replaced by the
    /// placeholder before the job got it).
    scrubbed: Vec<String>,
    /// The protocol the connection was upgraded to, after a `101`.
    upgraded: Option<String>,
    /// A request was refused: the job's side stays open for the answer.
    refused: bool,
}

impl Requests {
    /// Into the connection's record: every request read (answered or
    /// not), how many more were not recorded, and the secrets sent here
    /// that are not for this host.
    fn into_record(self, rec: &mut Record) {
        if self.unrecorded > 0 {
            let more = format!("{} more request(s) not recorded", self.unrecorded);
            rec.detail = if rec.detail.is_empty() {
                more
            } else {
                format!("{}; {more}", rec.detail)
            };
        }
        if let Some(protocol) = &self.upgraded {
            let note = format!(
                "upgraded to {protocol} after the server's 101; what followed was copied unread"
            );
            rec.detail = if rec.detail.is_empty() {
                note
            } else {
                format!("{}; {note}", rec.detail)
            };
        }
        if !self.scrubbed.is_empty() {
            let note = format!(
                "the server sent back the value of {} in a response head; the job got the placeholder",
                self.scrubbed.join(", ")
            );
            rec.detail = if rec.detail.is_empty() {
                note
            } else {
                format!("{}; {note}", rec.detail)
            };
        }
        rec.requests = self
            .done
            .into_iter()
            .chain(self.pending.into_iter().map(|(q, _)| q))
            .collect();
        for name in self.elsewhere {
            if !rec.elsewhere.contains(&name) {
                rec.elsewhere.push(name);
            }
        }
    }
}

/// Header values vetto writes itself: printable ASCII only.
fn printable_header(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(512)
        .collect()
}

/// The final responses the server has sent on a connection (`1xx` other
/// than `101` aside), and the status of the last.
#[derive(Debug, Clone, Copy, Default)]
struct Answered {
    count: u64,
    last: u16,
}

/// The job's requests, one head at a time: read (bounded), checked,
/// rewritten, sent, and the body streamed as framed. After a request that
/// asks for an upgrade (`Connection: upgrade`) nothing more is read until
/// the server answers it (`answered`): a `101` turns the connection into a
/// copy both ways (recorded), any other answer leaves it HTTP, and what
/// the job sent behind the request is read as the next request. Returns
/// the bytes sent and how it ended.
async fn requests_up<R, W>(
    shared: &Shared,
    icp: &Interceptor,
    host: &str,
    port: u16,
    (mut from, mut to): (R, W),
    requests: &Mutex<Requests>,
    mut answered: tokio::sync::watch::Receiver<Answered>,
) -> (u64, End)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let max = shared.limits.max_header_bytes;
    let idle = shared.limits.idle_timeout;
    let mut sent = 0u64;
    // Requests sent to the server so far.
    let mut asked = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // The head.
        let end = loop {
            if let Some(end) = super::wire::head_end(&buf) {
                break end;
            }
            if buf.len() > max {
                return (
                    sent,
                    End::Closed(format!("closed: a request head longer than {max} bytes")),
                );
            }
            match timeout(idle, from.read(&mut chunk)).await {
                Ok(Ok(0)) => {
                    let _ = to.shutdown().await;
                    return (sent, End::Done);
                }
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
                Ok(Err(_)) => return (sent, End::Done),
                Err(_) => return (sent, End::Closed("closed: idle timeout".into())),
            }
        };
        let head = match http::parse_head(&buf[..end]) {
            Ok(h) => h,
            Err(why) => return (sent, End::Refused(400, why.to_string())),
        };
        // A request naming another server (421), or one no rule of this
        // host allows (403): recorded, answered, and nothing of it sent.
        let refusal = addressed_to(&head, host, port)
            .map_err(|why| (421, why))
            .and_then(|()| icp.permits(&head, host, port).map_err(|why| (403, why)));
        if let Err((status, why)) = refusal {
            if let Ok(mut r) = requests.lock()
                && r.done.len() + r.pending.len() < MAX_RECORDED
            {
                r.done.push(HttpRequest {
                    method: head.method.clone(),
                    path: printable_header(&head.target)
                        .chars()
                        .take(MAX_PATH)
                        .collect(),
                    status: Some(status),
                    secrets: Vec::new(),
                });
            }
            // Before the server is told: its close must not close the
            // job's side before the refusal is answered there.
            if let Ok(mut r) = requests.lock() {
                r.refused = true;
            }
            let _ = to.shutdown().await;
            return (sent, End::Refused(status, why));
        }
        let (bytes, injected) = icp.inject(&head, host, port);
        let mut elsewhere = icp.misdirected(&buf[..end], Some(host), port);
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
        let record = HttpRequest {
            method: head.method.clone(),
            path: printable_header(&head.target)
                .chars()
                .take(MAX_PATH)
                .collect(),
            status: None,
            secrets: used,
        };
        if let Ok(mut r) = requests.lock() {
            if r.done.len() + r.pending.len() < MAX_RECORDED {
                r.pending
                    .push_back((record, head.method.eq_ignore_ascii_case("HEAD")));
            } else {
                r.unrecorded += 1;
            }
        }
        let mut bytes = bytes;
        let upgrade = http::is_upgrade(&head).then(|| {
            head.header("upgrade")
                .map_or_else(|| "an unnamed protocol".to_string(), printable_header)
        });
        let mut body = http::body_of(&head);
        // The head with what of the body has come: one write (one TLS
        // record).
        let first = body.take(&buf[end..]);
        bytes.extend_from_slice(&buf[end..end + first]);
        if shared.bytes_left() < bytes.len() as u64 {
            return (
                sent,
                End::Closed("closed: the session's byte limit was reached".into()),
            );
        }
        if send(&mut to, &bytes).await.is_err() {
            return (sent, End::Done);
        }
        sent += count_up(shared, bytes.len());
        asked += 1;
        buf.drain(..end + first);
        // The rest of the body, as the head frames it.
        loop {
            let n = body.take(&buf);
            if n > 0 {
                if shared.bytes_left() < n as u64 {
                    return (
                        sent,
                        End::Closed("closed: the session's byte limit was reached".into()),
                    );
                }
                if send(&mut to, &buf[..n]).await.is_err() {
                    return (sent, End::Done);
                }
                sent += count_up(shared, n);
                buf.drain(..n);
            }
            if body.done() {
                break;
            }
            if !buf.is_empty() {
                // Bytes past a broken chunked body are not passed on.
                return (
                    sent,
                    End::Closed("closed: a request body that breaks its framing".into()),
                );
            }
            match timeout(idle, from.read(&mut chunk)).await {
                Ok(Ok(0)) => return (sent, End::Done),
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
                Ok(Err(_)) => return (sent, End::Done),
                Err(_) => return (sent, End::Closed("closed: idle timeout".into())),
            }
        }
        let Some(protocol) = upgrade else {
            continue;
        };
        // An upgrade: nothing more is read from the job until the server
        // answers it.
        let verdict = timeout(idle, answered.wait_for(|a| a.count >= asked))
            .await
            .map(|r| r.map(|a| *a));
        match verdict {
            Ok(Ok(a)) if a.last == 101 => {}
            Ok(Ok(_)) => continue,
            Ok(Err(_)) => return (sent, End::Done),
            Err(_) => return (sent, End::Closed("closed: idle timeout".into())),
        }
        if let Ok(mut r) = requests.lock() {
            r.upgraded = Some(protocol);
        }
        if !buf.is_empty() {
            if shared.bytes_left() < buf.len() as u64 {
                return (
                    sent,
                    End::Closed("closed: the session's byte limit was reached".into()),
                );
            }
            if send(&mut to, &buf).await.is_err() {
                return (sent, End::Done);
            }
            sent += count_up(shared, buf.len());
        }
        return match copy_counted(shared, &mut from, &mut to, true).await {
            Ok(n) => (sent + n, End::Done),
            Err(e) => (sent, End::Closed(e)),
        };
    }
}

/// Write `bytes` and flush them: a TLS stream takes the plaintext into its
/// session and may keep the records it makes when the socket is full, so
/// without the flush the last of a response can wait there while the
/// proxy waits to read (a keep-alive server sends nothing more) — the
/// job then waits for bytes vetto already holds.
async fn send<W: AsyncWrite + Unpin>(to: &mut W, bytes: &[u8]) -> io::Result<()> {
    to.write_all(bytes).await?;
    to.flush().await
}

fn count_up(shared: &Shared, n: usize) -> u64 {
    shared.bytes_up.fetch_add(n as u64, Ordering::Relaxed);
    n as u64
}

/// Copy until the end, with the idle timeout and the session's budget;
/// `up`: which of the session's counters it adds to.
async fn copy_counted<R, W>(
    shared: &Shared,
    from: &mut R,
    to: &mut W,
    up: bool,
) -> Result<u64, String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut chunk = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match timeout(shared.limits.idle_timeout, from.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                let _ = to.shutdown().await;
                return Ok(total);
            }
            Ok(Ok(n)) => n,
            Err(_) => return Err("closed: idle timeout".into()),
        };
        if shared.bytes_left() < n as u64 {
            return Err("closed: the session's byte limit was reached".into());
        }
        if send(to, &chunk[..n]).await.is_err() {
            return Ok(total);
        }
        let counter = if up {
            &shared.bytes_up
        } else {
            &shared.bytes_down
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
        total += n as u64;
    }
}

/// The server's side ended: the job's is closed too, unless a request
/// was refused, whose answer the caller writes there first (then closes).
async fn close_job<W: AsyncWrite + Unpin>(to: &mut W, requests: &Mutex<Requests>) {
    if !requests.lock().is_ok_and(|r| r.refused) {
        let _ = to.shutdown().await;
    }
}

/// Where a chunked body's trailer section (`bytes` starting at it) ends:
/// after its empty line.
fn trailer_end(bytes: &[u8]) -> Option<usize> {
    if bytes.starts_with(b"\r\n") {
        return Some(2);
    }
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
}

/// The server's responses, passed to the job as they come; each head is
/// read to record its request's status while the framing can be followed.
async fn responses_down<R, W>(
    shared: &Shared,
    icp: &Interceptor,
    mut from: R,
    mut to: W,
    requests: &Mutex<Requests>,
    answered: tokio::sync::watch::Sender<Answered>,
) -> u64
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let max = shared.limits.max_header_bytes;
    let mut sent = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 64 * 1024];
    let pass = |n: usize| {
        shared.bytes_down.fetch_add(n as u64, Ordering::Relaxed);
        n as u64
    };
    loop {
        let end = loop {
            if let Some(end) = super::wire::head_end(&buf) {
                break Some(end);
            }
            if buf.len() > max {
                break None;
            }
            match timeout(shared.limits.idle_timeout, from.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => {
                    if !buf.is_empty() && send(&mut to, &buf).await.is_ok() {
                        sent += pass(buf.len());
                    }
                    close_job(&mut to, requests).await;
                    return sent;
                }
            }
        };
        // Every head the job gets is read for a value first, whether it
        // can be parsed or not.
        let scrubbed = icp.scrub(&buf[..end.unwrap_or(buf.len())]);
        let end = match scrubbed {
            Some((clean, found)) => {
                http2::note_scrubbed(requests, found);
                let was = end.unwrap_or(buf.len());
                let now = clean.len();
                buf.splice(..was, clean);
                end.map(|_| now)
            }
            None => end,
        };
        let parsed = end.and_then(|e| http::parse_response_head(&buf[..e]).ok().map(|h| (e, h)));
        let Some((end, head)) = parsed else {
            // Unreadable: passed on as it is, and the rest with it.
            if send(&mut to, &buf).await.is_ok() {
                sent += pass(buf.len());
                if let Ok(n) = copy_counted(shared, &mut from, &mut to, false).await {
                    sent += n;
                }
            }
            return sent;
        };
        let informational = (100..200).contains(&head.status) && head.status != 101;
        if !informational {
            answered.send_modify(|a| {
                a.count += 1;
                a.last = head.status;
            });
        }
        let was_head = if informational {
            false
        } else {
            let mut r = requests.lock().ok();
            match r.as_mut().and_then(|r| r.pending.pop_front()) {
                Some((mut q, was_head)) => {
                    q.status = Some(head.status);
                    if let Some(r) = r.as_mut() {
                        r.done.push(q);
                    }
                    was_head
                }
                None => false,
            }
        };
        let no_body = informational || was_head || head.status == 204 || head.status == 304;
        if head.status == 101 || (head.framing.is_none() && !no_body) {
            // An upgrade, or a body that ends with the connection.
            if send(&mut to, &buf).await.is_err() {
                return sent;
            }
            sent += pass(buf.len());
            if let Ok(n) = copy_counted(shared, &mut from, &mut to, false).await {
                sent += n;
            }
            return sent;
        }
        let mut body = match head.framing {
            Some(framing) if !no_body => framing,
            _ => http::Body::Done,
        };
        // The head with what of the body has come: one write (one TLS
        // record) where the server's was one.
        let first = end + body.take_to_trailer(&buf[end..]);
        if send(&mut to, &buf[..first]).await.is_err() {
            return sent;
        }
        sent += pass(first);
        buf.drain(..first);
        loop {
            let n = body.take_to_trailer(&buf);
            if n > 0 {
                if send(&mut to, &buf[..n]).await.is_err() {
                    return sent;
                }
                sent += pass(n);
                buf.drain(..n);
            }
            // Trailers are a head too: read whole (bounded as one), and
            // any value in them replaced.
            if body.in_trailer()
                && let Some(end) = trailer_end(&buf)
            {
                let (mut part, rest) = (buf[..end].to_vec(), buf.split_off(end));
                if let Some((clean, found)) = icp.scrub(&part) {
                    http2::note_scrubbed(requests, found);
                    part = clean;
                }
                if body.take(&part) != part.len() || send(&mut to, &part).await.is_err() {
                    return sent;
                }
                sent += pass(part.len());
                buf = rest;
            } else if body.in_trailer() && buf.len() > max {
                close_job(&mut to, requests).await;
                return sent;
            }
            if body.done() {
                break;
            }
            if body.in_trailer() && trailer_end(&buf).is_none() {
                // More of the trailer section to come.
                match timeout(shared.limits.idle_timeout, from.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => {
                        close_job(&mut to, requests).await;
                        return sent;
                    }
                }
                continue;
            }
            if !buf.is_empty() {
                // Framing lost: what follows cannot be read as heads, so
                // nothing more is passed.
                close_job(&mut to, requests).await;
                return sent;
            }
            match timeout(shared.limits.idle_timeout, from.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => {
                    close_job(&mut to, requests).await;
                    return sent;
                }
            }
        }
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::policy::Origin;

    fn secret(name: &str, placeholder: &str, value: &str, host: &str) -> Secret {
        Secret {
            name: name.into(),
            placeholder: placeholder.into(),
            value: value.into(),
            hosts: vec![HostPattern {
                host: host.into(),
                port: None,
                origin: Origin::command_line("--secret", ""),
            }],
        }
    }

    fn head(text: &str) -> http::Head {
        http::parse_head(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_placeholder_becomes_the_value_only_for_its_own_host() {
        let icp = Interceptor::new(
            vec![
                secret("NPM", "npm_PLACEHOLDER1", "npm_VALUE1", "registry.test"),
                secret("GH", "ghp_PLACEHOLDER2", "ghp_VALUE2", "api.github.test"),
            ],
            vec![],
        )
        .unwrap();
        let h = head(
            "GET /a HTTP/1.1\r\nHost: registry.test\r\n\
             Authorization: Bearer npm_PLACEHOLDER1\r\nX-Other: ghp_PLACEHOLDER2\r\n\r\n",
        );
        let (bytes, used) = icp.inject(&h, "registry.test", 443);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(used.used, ["NPM"]);
        assert!(used.misplaced.is_empty());
        assert_eq!(
            text,
            "GET /a HTTP/1.1\r\nHost: registry.test\r\n\
             Authorization: Bearer npm_VALUE1\r\nX-Other: ghp_PLACEHOLDER2\r\n\r\n"
        );
        // Another port than the secret's (443 when none is named).
        let (bytes, used) = icp.inject(&h, "registry.test", 8443);
        assert!(used.used.is_empty() && !String::from_utf8(bytes).unwrap().contains("VALUE"));
    }

    #[test]
    fn a_placeholder_outside_a_credential_header_is_sent_as_it_is_and_named() {
        let icp = Interceptor::new(
            vec![secret(
                "NPM",
                "npm_PLACEHOLDER1",
                "npm_VALUE1",
                "registry.test",
            )],
            vec![],
        )
        .unwrap();
        for (where_, h) in [
            ("target", "GET /dir?t=npm_PLACEHOLDER1 HTTP/1.1\r\n"),
            (
                "Origin",
                "GET / HTTP/1.1\r\nOrigin: https://npm_PLACEHOLDER1\r\n",
            ),
            (
                "Referer",
                "GET / HTTP/1.1\r\nReferer: https://x/?npm_PLACEHOLDER1\r\n",
            ),
            ("Cookie", "GET / HTTP/1.1\r\nCookie: s=npm_PLACEHOLDER1\r\n"),
            ("other", "GET / HTTP/1.1\r\nX-Session: npm_PLACEHOLDER1\r\n"),
        ] {
            let h = head(&format!("{h}Host: registry.test\r\n\r\n"));
            let (bytes, used) = icp.inject(&h, "registry.test", 443);
            let text = String::from_utf8(bytes).unwrap();
            assert!(!text.contains("npm_VALUE1"), "{where_}: {text}");
            assert!(text.contains("npm_PLACEHOLDER1"), "{where_}: {text}");
            assert_eq!(used.misplaced, ["NPM"], "{where_}");
            assert!(used.used.is_empty(), "{where_}");
        }
        // The API-key headers of the recipes' services take it.
        for name in ["x-api-key", "X-Goog-Api-Key", "PRIVATE-TOKEN"] {
            let h = head(&format!(
                "GET / HTTP/1.1\r\nHost: registry.test\r\n{name}: npm_PLACEHOLDER1\r\n\r\n"
            ));
            let (bytes, used) = icp.inject(&h, "registry.test", 443);
            assert!(
                String::from_utf8(bytes)
                    .unwrap()
                    .contains(&format!("{name}: npm_VALUE1"))
            );
            assert_eq!(
                (used.used.as_slice(), used.misplaced.len()),
                (["NPM".to_string()].as_slice(), 0)
            );
        }
    }

    #[test]
    fn a_value_in_a_response_head_becomes_the_placeholder() {
        let icp = Interceptor::new(
            vec![secret(
                "NPM",
                "npm_PLACEHOLDER1",
                "npm_VALUE1xyz",
                "registry.test",
            )],
            vec![],
        )
        .unwrap();
        let (clean, found) = icp
            .scrub(b"HTTP/1.1 301 Moved\r\nLocation: /dir/?t=npm_VALUE1xyz\r\n\r\n")
            .unwrap();
        assert_eq!(found, ["NPM"]);
        assert_eq!(
            clean,
            b"HTTP/1.1 301 Moved\r\nLocation: /dir/?t=npm_PLACEHOLDER1\r\n\r\n"
        );
        assert!(icp.scrub(b"HTTP/1.1 200 OK\r\n\r\n").is_none());
        assert_eq!(trailer_end(b"\r\nnext"), Some(2));
        assert_eq!(trailer_end(b"X-T: 1\r\n\r\nnext"), Some(10));
        assert_eq!(trailer_end(b"X-T: 1\r\n"), None);
    }

    #[test]
    fn a_basic_credential_is_decoded_swapped_and_encoded_again() {
        let icp = Interceptor::new(
            vec![secret(
                "GH",
                "ghp_PLACEHOLDER2",
                "ghp_VALUE2",
                "github.test",
            )],
            vec![],
        )
        .unwrap();
        let basic = crate::proxy::wire::base64(b"x-access-token:ghp_PLACEHOLDER2");
        let h = head(&format!(
            "GET /o/r.git/info/refs HTTP/1.1\r\nHost: github.test\r\nAuthorization: Basic {basic}\r\n\r\n"
        ));
        let (bytes, used) = icp.inject(&h, "github.test", 443);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(used.used, ["GH"]);
        let expected = crate::proxy::wire::base64(b"x-access-token:ghp_VALUE2");
        assert!(
            text.contains(&format!("Authorization: Basic {expected}\r\n")),
            "{text}"
        );
    }

    #[test]
    fn a_request_naming_another_server_is_refused() {
        let ok = head("GET / HTTP/1.1\r\nHost: registry.test\r\n\r\n");
        assert_eq!(addressed_to(&ok, "registry.test", 443), Ok(()));
        let port = head("GET / HTTP/1.1\r\nHost: Registry.Test.:8443\r\n\r\n");
        assert_eq!(addressed_to(&port, "registry.test", 8443), Ok(()));
        for bad in [
            "GET / HTTP/1.1\r\nHost: attacker.test\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: registry.test:8443\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: registry.test\r\nHost: attacker.test\r\n\r\n",
            "GET https://attacker.test/ HTTP/1.1\r\nHost: registry.test\r\n\r\n",
        ] {
            assert!(
                addressed_to(&head(bad), "registry.test", 443).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_request_no_rule_of_its_host_allows_is_refused() {
        let origin = Origin::command_line("--rule", "");
        let rule =
            |s: &str| crate::policy::validate::parse_request_rule(s, origin.clone()).unwrap();
        let icp = Interceptor::new(
            vec![],
            vec![
                rule("GET,HEAD code.test/repos/acme/app/*"),
                rule("* code.test/meta"),
            ],
        )
        .unwrap();
        let req = |m: &str, t: &str| head(&format!("{m} {t} HTTP/1.1\r\nHost: code.test\r\n\r\n"));
        for (m, t) in [
            ("GET", "/repos/acme/app/pulls?state=open"),
            ("HEAD", "/repos/acme/app/"),
            ("DELETE", "/meta"),
        ] {
            assert_eq!(icp.permits(&req(m, t), "code.test", 443), Ok(()), "{m} {t}");
        }
        for (m, t) in [
            ("POST", "/repos/acme/app/issues"),
            ("GET", "/repos/acme/other/issues"),
            ("GET", "/repos/acme/app/../../evil/x"),
            ("GET", "/repos/acme/app/%2e%2e/%2e%2e/evil"),
            ("GET", "/repos/acme/app%2f..%2fevil"),
            ("GET", "/meta/more"),
        ] {
            assert!(
                icp.permits(&req(m, t), "code.test", 443).is_err(),
                "{m} {t}"
            );
        }
        // Only the rule's host and port are read.
        assert!(icp.covers("code.test", 443) && !icp.covers("code.test", 80));
        assert_eq!(icp.permits(&req("POST", "/x"), "other.test", 443), Ok(()));
    }

    #[test]
    fn a_target_a_server_reads_as_another_path_is_refused() {
        for ok in [
            "/api/allowed/x",
            "/api/allowed/x?next=/../forbidden;x",
            "/api/allowed/a%20b",
            "/api/allowed/..x/...",
            "/api/allowed/%41",
            "/",
        ] {
            assert!(unambiguous_path(ok).is_ok(), "{ok}");
        }
        assert_eq!(unambiguous_path("/a/b?q=1"), Ok("/a/b"));
        for (bad, why) in [
            ("/api/allowed/x#/../../forbidden", "fragment"),
            ("/api/allowed/x?q#", "fragment"),
            ("/api/allowed/..;/forbidden", "; parameters"),
            ("/api/allowed;jsessionid=1/x", "; parameters"),
            ("/api/allowed/..\\forbidden", "backslash"),
            ("/api/allowed/..%2fforbidden", "encoded"),
            ("/api/allowed/..%2Fforbidden", "encoded"),
            ("/api/allowed/..%5cforbidden", "encoded"),
            ("/api/allowed/x%00", "encoded"),
            ("/api/allowed/%252e%252e/forbidden", "encoded"),
            ("/api/allowed/%3b/x", "encoded"),
            ("/api/allowed/%zz", "encodes nothing"),
            ("/api/allowed/%2", "encodes nothing"),
            ("/api/allowed/../forbidden", "segment"),
            ("/api/allowed/./x", "segment"),
            ("/api/allowed/%2e%2e/forbidden", "segment"),
            ("/api/allowed/.%2E/forbidden", "segment"),
            ("/api/allowed/..", "segment"),
            ("/api/allowed/x\u{0}/../y", "control character"),
            ("*", "not a path"),
            ("https://other.test/api/allowed/x", "not a path"),
        ] {
            let got = unambiguous_path(bad);
            assert!(got.is_err_and(|e| e.contains(why)), "{bad}: {got:?}");
        }
    }

    #[test]
    fn a_response_head_frames_its_body() {
        let r = |t: &str| http::parse_response_head(t.as_bytes()).unwrap();
        let cl = r("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
        assert_eq!((cl.status, cl.framing), (200, Some(http::Body::Length(5))));
        let ch = r("HTTP/1.1 404 Not Found\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert!(matches!(ch.framing, Some(http::Body::Chunked(_))));
        let close = r("HTTP/1.0 200 OK\r\n\r\n");
        assert_eq!(close.framing, None);
        assert!(http::parse_response_head(b"HTTP/2 200\r\n\r\n").is_err());
        assert!(http::parse_response_head(b"HTTP/1.1 20 OK\r\n\r\n").is_err());
    }
}
