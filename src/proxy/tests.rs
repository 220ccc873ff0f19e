//! The proxy against local servers on loopback: an HTTPS server with a
//! test CA made here (rcgen), a plain HTTP server that echoes the request
//! head it got, and a TCP echo server. Names resolve through pins
//! (`allowed.test` → 127.0.0.1); nothing leaves the machine. Deadlines are
//! hang guards only; nothing here asserts a timing.

#![expect(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::events::log::VecSink;
use crate::events::{ConnDecision, ConnReason, ConnVia, Connection, RuleId, Target};
use crate::policy::Origin;

const GUARD: Duration = Duration::from_secs(60);

fn origin() -> Origin {
    Origin {
        source: "vetto.toml".into(),
        line: 1,
        col: 1,
        written: String::new(),
    }
}

fn allow(host: &str, port: u16) -> HostPattern {
    HostPattern {
        host: host.into(),
        port: Some(port),
        origin: origin(),
    }
}

fn pin(host: &str, ip: &str) -> PinnedHost {
    PinnedHost {
        host: host.into(),
        addr: ip.parse().unwrap(),
        origin: origin(),
    }
}

struct Harness {
    proxy: Proxy,
    sink: Arc<VecSink>,
    addr: SocketAddr,
    rt: tokio::runtime::Runtime,
}

impl Harness {
    fn new(config: Config) -> Harness {
        let sink = Arc::new(VecSink::default());
        let proxy = Proxy::start(config, sink.clone()).unwrap();
        let addr = proxy.listen_host().unwrap();
        // The local servers run on this runtime's own thread, so they keep
        // serving (and closing) while the proxy shuts down.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Harness {
            proxy,
            sink,
            addr,
            rt,
        }
    }

    fn token(&self) -> String {
        format!(
            "Basic {}",
            super::wire::base64(format!("vetto:{}", self.proxy.credential()).as_bytes())
        )
    }

    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt
            .block_on(async { tokio::time::timeout(GUARD, f).await.expect("hang guard") })
    }

    /// Stop the proxy; its connection and violation events.
    fn finish(self) -> (Stats, Vec<Connection>, Vec<crate::events::Violation>) {
        let stats = self.proxy.shutdown();
        drop(self.rt);
        let events = std::mem::take(&mut *self.sink.0.lock().unwrap());
        let mut conns = Vec::new();
        let mut viols = Vec::new();
        for e in events {
            match e {
                Event::Connection(c) => conns.push(*c),
                Event::Violation(v) => viols.push(*v),
                _ => {}
            }
        }
        (stats, conns, viols)
    }
}

#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
struct Tls {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
fn tls() -> Tls {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["allowed.test".into(), "denied.test".into()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Tls {
        server: Arc::new(server),
        client: Arc::new(client),
    }
}

async fn read_head<R: AsyncReadExt + Unpin>(s: &mut R) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while super::wire::head_end(&head).is_none() {
        match s.read(&mut b).await {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
/// An HTTPS server answering `hello` to any request.
async fn https_server(l: std::net::TcpListener, config: Arc<rustls::ServerConfig>) {
    let l = tokio_listener(l);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut t) = acceptor.accept(s).await {
                    read_head(&mut t).await;
                    let _ = t
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
                        .await;
                    let _ = t.shutdown().await;
                }
            });
        }
    });
}

/// A plain HTTP server whose body is the request head it received.
async fn http_echo_server(l: std::net::TcpListener) {
    let l = tokio_listener(l);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let head = read_head(&mut s).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{head}",
                    head.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
}

async fn echo_server(l: std::net::TcpListener) {
    tokio::spawn(echo_server_on(tokio_listener(l)));
}

async fn echo_server_on(l: TcpListener) {
    while let Ok((mut s, _)) = l.accept().await {
        tokio::spawn(async move {
            let (mut r, mut w) = s.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
        });
    }
}

/// A loopback listener and its port, bound before the proxy's config is
/// made (the rules name the port).
fn bind() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn tokio_listener(l: std::net::TcpListener) -> TcpListener {
    l.set_nonblocking(true).unwrap();
    TcpListener::from_std(l).unwrap()
}

/// Send a CONNECT (with `auth` as Proxy-Authorization, if any) and return
/// the stream and the response head.
async fn connect(proxy: SocketAddr, target: &str, auth: Option<&str>) -> (TcpStream, String) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(a) = auth {
        req.push_str(&format!("Proxy-Authorization: {a}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let head = read_head(&mut s).await;
    (s, head)
}

#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
/// A TLS GET over `s` naming `server_name`; the body, or the error.
async fn tls_get(
    s: TcpStream,
    client: Arc<rustls::ClientConfig>,
    server_name: &str,
) -> Result<String, std::io::Error> {
    let connector = tokio_rustls::TlsConnector::from(client);
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).unwrap();
    let mut t = connector.connect(name, s).await?;
    t.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    let mut out = Vec::new();
    let _ = t.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn pinned_config(port: u16) -> Config {
    Config {
        allow: vec![allow("allowed.test", port)],
        pins: vec![pin("allowed.test", "127.0.0.1")],
        ..Config::default()
    }
}

/// The one record with `reason` (records come in the order connections
/// end, which the tests do not assume).
fn with_reason(conns: &[Connection], reason: ConnReason) -> &Connection {
    let found: Vec<_> = conns.iter().filter(|c| c.reason == reason).collect();
    assert_eq!(found.len(), 1, "{reason:?} in {conns:#?}");
    found[0]
}

fn only(conns: &[Connection]) -> &Connection {
    assert_eq!(conns.len(), 1, "{conns:#?}");
    &conns[0]
}

#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
#[test]
fn https_through_connect_to_a_pinned_allowed_name_works() {
    let tls = tls();
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let body = h.run(async {
        https_server(l, tls.server.clone()).await;
        let (s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        tls_get(s, tls.client.clone(), "allowed.test")
            .await
            .unwrap()
    });
    assert!(body.ends_with("hello"), "{body}");
    let (stats, conns, viols) = h.finish();
    let c = only(&conns);
    assert_eq!(c.decision, ConnDecision::Allowed);
    assert_eq!(c.via, ConnVia::Connect);
    assert_eq!(c.host.as_deref(), Some("allowed.test"));
    assert_eq!(c.addr.as_deref(), Some("127.0.0.1"));
    assert!(c.bytes_up > 0 && c.bytes_down > 0, "{c:?}");
    assert_eq!(
        c.rule.as_deref(),
        Some(format!("allow \"allowed.test:{port}\" (vetto.toml:1:1)").as_str())
    );
    assert!(viols.is_empty());
    assert_eq!(stats.bytes(), c.bytes_up + c.bytes_down);
}

#[test]
fn connect_to_a_name_without_an_allow_rule_is_refused_and_recorded() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let head = h.run(async {
        echo_server(l).await;
        connect(h.addr, &format!("denied.test:{port}"), Some(&token))
            .await
            .1
    });
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("X-Vetto-Refused: not-allowed"), "{head}");
    let (_, conns, viols) = h.finish();
    let c = only(&conns);
    assert_eq!(
        (c.decision, c.reason),
        (ConnDecision::Denied, ConnReason::NotAllowed)
    );
    assert_eq!(c.addr, None);
    assert_eq!(viols.len(), 1);
    assert_eq!(viols[0].rule, RuleId::NetEgressBlocked);
    assert_eq!(
        viols[0].target,
        Target::Host {
            host: "denied.test".into(),
            port: Some(port)
        }
    );
}

#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
#[test]
fn sni_naming_another_host_than_the_connect_target_is_refused() {
    let tls = tls();
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let result = h.run(async {
        https_server(l, tls.server.clone()).await;
        let (s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        // Domain fronting: the tunnel is for allowed.test, the TLS for denied.test
        // (the server's certificate would even accept it).
        tls_get(s, tls.client.clone(), "denied.test").await
    });
    assert!(result.is_err(), "{result:?}");
    let (_, conns, viols) = h.finish();
    let c = only(&conns);
    assert_eq!(
        (c.decision, c.reason),
        (ConnDecision::Denied, ConnReason::SniMismatch)
    );
    assert!(c.detail.contains("denied.test"), "{}", c.detail);
    assert_eq!(c.bytes_down, 0);
    assert_eq!(viols.len(), 1);
}

/// Domain fronting must not even reach the allowed server: the name is
/// checked before vetto dials (the hello comes with the CONNECT, so the
/// test waits on nothing).
#[test]
fn a_fronted_handshake_never_opens_a_connection_to_the_allowed_server() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    h.run(async {
        let mut s = TcpStream::connect(h.addr).await.unwrap();
        let mut req = format!(
            "CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\
             Proxy-Authorization: {token}\r\n\r\n"
        )
        .into_bytes();
        req.extend(sni::tests::hello(Some("denied.test")));
        s.write_all(&req).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
    });
    let (_, conns, _) = h.finish();
    assert_eq!(only(&conns).reason, ConnReason::SniMismatch);
    // A dial would have left a connection in the listener's queue.
    l.set_nonblocking(true).unwrap();
    let queued = l.accept();
    assert!(
        queued
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the allowed server was dialled: {queued:?}"
    );
}

#[test]
fn a_tls_client_hello_without_a_server_name_is_refused_for_a_name_rule() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let echoed = h.run(async {
        echo_server(l).await;
        let (mut s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(&sni::tests::hello(None)).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        out
    });
    assert!(echoed.is_empty(), "the hello must not reach the server");
    let (_, conns, _) = h.finish();
    assert_eq!(only(&conns).reason, ConnReason::SniMissing);
}

#[test]
fn the_proxy_refuses_a_client_without_the_session_credential() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let target = format!("allowed.test:{port}");
    let heads = h.run(async {
        echo_server(l).await;
        let wrong = format!("Basic {}", super::wire::base64(b"vetto:guess"));
        let mut heads = Vec::new();
        for auth in [None, Some(wrong.as_str()), Some("Basic"), Some("Bearer x")] {
            heads.push(connect(h.addr, &target, auth).await.1);
        }
        heads
    });
    for head in &heads {
        assert!(head.starts_with("HTTP/1.1 407"), "{head}");
        assert!(head.contains("Proxy-Authenticate: Basic"), "{head}");
    }
    let (_, conns, viols) = h.finish();
    assert_eq!(conns.len(), 4);
    assert!(conns.iter().all(|c| c.reason == ConnReason::NoCredential));
    assert_eq!(viols.len(), 4);
}

/// curl with `CURLAUTH_ANY` (what git sets for every https remote) asks
/// without the credential first and answers the 407 on the same
/// connection. It was a `net-egress-blocked` violation on every `git
/// fetch` through the proxy. Now: the challenge keeps the connection open,
/// the second head carries the credential, the tunnel works, and the
/// connection is one allowed record with no violation.
#[test]
fn a_client_that_authenticates_when_challenged_is_no_violation() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let target = format!("allowed.test:{port}");
    let (first, second, echoed) = h.run(async {
        echo_server(l).await;
        let (mut s, first) = connect(h.addr, &target, None).await;
        let again = format!(
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: {token}\r\n\r\n"
        );
        s.write_all(again.as_bytes()).await.unwrap();
        let second = read_head(&mut s).await;
        s.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        s.read_exact(&mut echoed).await.unwrap();
        (first, second, echoed)
    });
    assert!(first.starts_with("HTTP/1.1 407"), "{first}");
    assert!(first.contains("Proxy-Authenticate: Basic"), "{first}");
    assert!(!first.contains("Connection: close"), "{first}");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert_eq!(&echoed, b"ping");
    let (_, conns, viols) = h.finish();
    assert_eq!(only(&conns).decision, ConnDecision::Allowed);
    assert!(viols.is_empty(), "{viols:?}");
}

#[test]
fn internal_addresses_are_refused_without_an_ip_rule_or_a_pin_of_the_name() {
    let (l, port) = bind();
    let mut config = pinned_config(port);
    // `localhost` resolves (on the host, /etc/hosts) to loopback; no pin.
    config.allow.push(allow("localhost", port));
    // Pinned to the metadata service: a pin never opens that.
    config.allow.push(allow("metadata.test", port));
    config.pins.push(pin("metadata.test", "169.254.169.254"));
    let h = Harness::new(config);
    let token = h.token();
    let heads = h.run(async {
        echo_server(l).await;
        let mut heads = Vec::new();
        for target in [
            format!("localhost:{port}"),
            format!("metadata.test:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::ffff:127.0.0.1]:{port}"),
        ] {
            heads.push(connect(h.addr, &target, Some(&token)).await.1);
        }
        heads
    });
    for head in &heads {
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    }
    let (_, conns, viols) = h.finish();
    assert_eq!(conns.len(), 4);
    for c in &conns {
        assert_eq!(c.reason, ConnReason::PrivateAddress, "{c:?}");
    }
    assert_eq!(viols.len(), 4);
}

/// A name pinned to a private address (a corporate mirror at 10.x) is
/// decided by the name: the proxy connects to the pinned address for that
/// name alone (here nothing listens at 10.255.255.1 within the timeout,
/// so the connect fails — it is tried, not refused), while the address by
/// number is refused as internal.
#[test]
fn a_name_pinned_to_a_private_address_is_tried_and_the_address_by_number_is_not() {
    let (_l, port) = bind();
    let mut config = pinned_config(port);
    config.allow.push(allow("intranet.test", port));
    config.pins.push(pin("intranet.test", "10.255.255.1"));
    config.limits.connect_timeout = std::time::Duration::from_millis(300);
    let h = Harness::new(config);
    let token = h.token();
    h.run(async {
        connect(h.addr, &format!("intranet.test:{port}"), Some(&token)).await;
        connect(h.addr, &format!("10.255.255.1:{port}"), Some(&token)).await;
    });
    let (_, conns, _) = h.finish();
    let by_name = conns
        .iter()
        .find(|c| c.host.as_deref() == Some("intranet.test"));
    assert!(
        by_name.is_some_and(|c| c.reason != ConnReason::PrivateAddress),
        "{conns:?}"
    );
    let by_number = conns.iter().find(|c| c.host.is_none());
    assert!(
        by_number
            .is_some_and(|c| c.reason == ConnReason::PrivateAddress
                && c.addr.as_deref() == Some("10.255.255.1")),
        "{conns:?}"
    );
}

#[test]
fn an_ip_rule_allows_a_bare_internal_address() {
    let (l, port) = bind();
    let config = Config {
        ip_rules: vec![IpRule::parse(&format!("127.0.0.0/8:{port}"), origin()).unwrap()],
        ..Config::default()
    };
    let h = Harness::new(config);
    let token = h.token();
    let echoed = h.run(async {
        echo_server(l).await;
        let (mut s, head) = connect(h.addr, &format!("127.0.0.1:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).await.unwrap();
        b
    });
    assert_eq!(&echoed, b"ping");
    let (_, conns, _) = h.finish();
    let c = only(&conns);
    assert_eq!(c.decision, ConnDecision::Allowed);
    assert_eq!(c.host, None);
    assert_eq!(c.addr.as_deref(), Some("127.0.0.1"));
}

#[test]
fn plain_http_is_forwarded_in_origin_form_without_proxy_headers() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let resp = h.run(async {
        http_echo_server(l).await;
        let mut s = TcpStream::connect(h.addr).await.unwrap();
        let req = format!(
            "GET http://allowed.test:{port}/a?b=c HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: {token}\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    });
    let body = resp.split_once("\r\n\r\n").unwrap().1;
    assert!(body.starts_with("GET /a?b=c HTTP/1.1\r\n"), "{body}");
    assert!(
        body.contains(&format!("Host: allowed.test:{port}\r\n")),
        "{body}"
    );
    assert!(!body.to_ascii_lowercase().contains("proxy-"), "{body}");
    assert!(!body.contains("evil.test"), "{body}");
    let (_, conns, _) = h.finish();
    let c = only(&conns);
    assert_eq!((c.via, c.decision), (ConnVia::Http, ConnDecision::Allowed));
}

/// Hostile request heads: each is answered (or dropped) and recorded; the
/// proxy keeps serving afterwards.
#[test]
fn malformed_and_oversized_requests_are_refused_without_harm() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let (answers, last) = h.run(async {
        echo_server(l).await;
        let mut answers = Vec::new();
        let huge = format!(
            "CONNECT allowed.test:{port} HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(20_000)
        );
        for req in [
            huge.into_bytes(),
            b"CONNECT allowed.test:443 HTTP/1.1\r\nX: \0\r\n\r\n".to_vec(),
            b"CONNECT allowed.test HTTP/1.1\r\n\r\n".to_vec(),
            b"CONNECT\r\n\r\n".to_vec(),
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            b"\x16\x03\x01\x00\x05hello\r\n\r\n".to_vec(),
            b"POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
                .to_vec(),
            vec![0xff; 100],
        ] {
            let mut s = TcpStream::connect(h.addr).await.unwrap();
            let _ = s.write_all(&req).await;
            let _ = s.shutdown().await;
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out).await;
            answers.push(String::from_utf8_lossy(&out).into_owned());
        }
        let (mut s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        s.write_all(b"still here").await.unwrap();
        let mut b = [0u8; 10];
        s.read_exact(&mut b).await.unwrap();
        (answers, head)
    });
    assert!(answers[0].starts_with("HTTP/1.1 431"), "{}", answers[0]);
    // 400 for what does not parse; 407 for a well-formed head without the
    // credential (checked before the target); nothing for what is not HTTP.
    for a in &answers[1..7] {
        assert!(
            a.starts_with("HTTP/1.1 400") || a.starts_with("HTTP/1.1 407") || a.is_empty(),
            "{a}"
        );
    }
    assert!(last.starts_with("HTTP/1.1 200"), "{last}");
    let (_, conns, viols) = h.finish();
    assert_eq!(conns.len(), 9);
    assert!(
        with_reason(&conns, ConnReason::Limit)
            .detail
            .contains("larger")
    );
    let denied = conns
        .iter()
        .filter(|c| c.decision == ConnDecision::Denied)
        .count();
    assert_eq!(denied, 8, "{conns:#?}");
    assert_eq!(viols.len(), 8);
}

#[test]
fn a_slow_client_is_closed_at_the_idle_timeout() {
    let (l, port) = bind();
    let mut config = pinned_config(port);
    config.limits.idle_timeout = Duration::from_millis(200);
    let h = Harness::new(config);
    let token = h.token();
    h.run(async {
        echo_server(l).await;
        // Half a request head, then nothing: the proxy must close.
        let mut s = TcpStream::connect(h.addr).await.unwrap();
        s.write_all(b"CONNECT allowed.te").await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        // An open tunnel with no traffic either way is closed too.
        let (mut s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b"x").await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        assert_eq!(out, b"x");
    });
    let (_, conns, _) = h.finish();
    assert_eq!(conns.len(), 2);
    let slow = with_reason(&conns, ConnReason::Limit);
    assert!(slow.detail.contains("idle"), "{}", slow.detail);
    let quiet = with_reason(&conns, ConnReason::AllowedByRule);
    assert!(quiet.detail.contains("idle"), "{}", quiet.detail);
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// 10,000 short tunnels (32 at a time): every one is recorded, no file
/// descriptor is left behind and memory stays bounded. Other tests run in
/// this process at the same time, so the margins absorb their fds and
/// allocations; a leak of one fd per connection would be 10,000.
#[test]
fn ten_thousand_short_connections_leak_no_fds() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let target = format!("allowed.test:{port}");
    let before = open_fds();
    let rss_before = rss_kib();
    h.run(async {
        echo_server(l).await;
        let mut workers = Vec::new();
        for _ in 0..32 {
            let (token, target, addr) = (token.clone(), target.clone(), h.addr);
            workers.push(tokio::spawn(async move {
                for _ in 0..(10_000 / 32 + 1) {
                    let (mut s, head) = connect(addr, &target, Some(&token)).await;
                    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                    s.write_all(b"p").await.unwrap();
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).await.unwrap();
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
    });
    let (stats, conns, _) = h.finish();
    let after = open_fds();
    assert_eq!(conns.len(), 32 * (10_000 / 32 + 1));
    assert!(conns.iter().all(|c| c.decision == ConnDecision::Allowed));
    assert_eq!(stats.connections, conns.len() as u64);
    assert!(after < before + 200, "fds before {before}, after {after}");
    let grown = rss_kib().saturating_sub(rss_before);
    assert!(grown < 256 * 1024, "RSS grew by {grown} KiB");
}

#[test]
fn more_connections_than_the_limit_are_refused() {
    let (l, port) = bind();
    let mut config = pinned_config(port);
    config.limits.max_connections = 1;
    let h = Harness::new(config);
    let token = h.token();
    h.run(async {
        echo_server(l).await;
        let (mut held, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut second = TcpStream::connect(h.addr).await.unwrap();
        let mut out = Vec::new();
        let _ = second.read_to_end(&mut out).await;
        assert!(out.is_empty());
        held.shutdown().await.unwrap();
        let _ = held.read_to_end(&mut out).await;
    });
    let (_, conns, _) = h.finish();
    assert!(
        conns.iter().any(|c| c.reason == ConnReason::Limit),
        "{conns:#?}"
    );
}

async fn socks_handshake(
    proxy: SocketAddr,
    user: &[u8],
    pass: &[u8],
    dest: &[u8],
    port: u16,
) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let mut msg = vec![5, 1, 2, 1, user.len() as u8];
    msg.extend(user);
    msg.push(pass.len() as u8);
    msg.extend(pass);
    msg.extend([5, 1, 0]);
    msg.extend(dest);
    msg.extend(port.to_be_bytes());
    s.write_all(&msg).await.unwrap();
    let mut answer = Vec::new();
    let mut b = [0u8; 1];
    // method choice (2) + auth status (2) + reply (10) for an IPv4 bind address.
    while answer.len() < 14 {
        match s.read(&mut b).await {
            Ok(1) => answer.push(b[0]),
            _ => break,
        }
    }
    (s, answer)
}

fn socks_name(name: &str) -> Vec<u8> {
    let mut d = vec![3, name.len() as u8];
    d.extend(name.as_bytes());
    d
}

#[test]
fn socks5h_with_the_credential_reaches_an_allowed_name_and_nothing_else() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let cred = h.proxy.credential().to_string();
    let answers = h.run(async {
        echo_server(l).await;
        let (mut s, ok) = socks_handshake(
            h.addr,
            b"vetto",
            cred.as_bytes(),
            &socks_name("allowed.test"),
            port,
        )
        .await;
        s.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"ping");
        let denied = socks_handshake(
            h.addr,
            b"vetto",
            cred.as_bytes(),
            &socks_name("denied.test"),
            port,
        )
        .await
        .1;
        let bad_pw = socks_handshake(
            h.addr,
            b"vetto",
            b"guess",
            &socks_name("allowed.test"),
            port,
        )
        .await
        .1;
        let ip = socks_handshake(h.addr, b"vetto", cred.as_bytes(), &[1, 127, 0, 0, 1], port)
            .await
            .1;
        (ok, denied, bad_pw, ip)
    });
    let (ok, denied, bad_pw, ip) = answers;
    assert_eq!(&ok[..4], &[5, 2, 1, 0]);
    assert_eq!(ok[5], 0, "{ok:?}");
    assert_eq!(denied[5], 2, "{denied:?}");
    assert_eq!(&bad_pw[..4], &[5, 2, 1, 1]);
    assert_eq!(ip[5], 2, "{ip:?}");
    let (_, conns, _) = h.finish();
    // Recorded as each connection ends: the held-open tunnel ends last.
    let mut reasons: Vec<_> = conns.iter().map(|c| (c.via, c.reason)).collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            (ConnVia::Socks5, ConnReason::AllowedByRule),
            (ConnVia::Socks5, ConnReason::NotAllowed),
            (ConnVia::Socks5, ConnReason::PrivateAddress),
            (ConnVia::Socks5, ConnReason::NoCredential),
        ]
    );
}

/// A SOCKS4 client gets SOCKS4's own refusal at once (it used to get
/// nothing, waiting out the idle timeout while holding a slot), recorded.
#[test]
fn a_socks4_client_is_refused_at_once() {
    let (_l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let answer = h.run(async {
        let mut s = TcpStream::connect(h.addr).await.unwrap();
        let mut msg = vec![4, 1];
        msg.extend(port.to_be_bytes());
        msg.extend([127, 0, 0, 1]);
        msg.extend(b"vetto\0");
        s.write_all(&msg).await.unwrap();
        let mut b = [0u8; 8];
        tokio::time::timeout(std::time::Duration::from_secs(5), s.read_exact(&mut b))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        b
    });
    assert_eq!(answer, [0, 91, 0, 0, 0, 0, 0, 0]);
    let (_, conns, _) = h.finish();
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].reason, ConnReason::Malformed, "{conns:?}");
}

/// FULL: the job connects to a DNS-stub address (here 127.0.0.2) on the
/// destination's port; the proxy knows the name from the address.
#[cfg(target_os = "linux")] // rustls/rcgen: Linux-only dev-dependencies (Cargo.toml)
#[test]
fn a_transparent_connection_is_decided_by_the_name_its_address_stands_for() {
    let tls = tls();
    let (l, port) = bind();
    let Ok(stub) = std::net::TcpListener::bind((Ipv4Addr::new(127, 0, 0, 2), port)) else {
        // The port is taken on 127.0.0.2 by something else: pick again.
        panic!("127.0.0.2:{port} is in use");
    };
    let h = Harness::new(pinned_config(port));
    let names: Arc<dyn Fn(IpAddr) -> Option<String> + Send + Sync> = Arc::new(|ip| {
        (ip == IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))).then(|| "allowed.test".to_string())
    });
    h.proxy
        .serve(stub, ListenerKind::Transparent { names })
        .unwrap();
    let (good, fronted) = h.run(async {
        https_server(l, tls.server.clone()).await;
        let to = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port));
        let s = TcpStream::connect(to).await.unwrap();
        let good = tls_get(s, tls.client.clone(), "allowed.test").await;
        let s = TcpStream::connect(to).await.unwrap();
        let fronted = tls_get(s, tls.client.clone(), "denied.test").await;
        (good, fronted)
    });
    assert!(good.unwrap().ends_with("hello"));
    assert!(fronted.is_err());
    let (_, conns, _) = h.finish();
    assert_eq!(conns.len(), 2);
    let good = with_reason(&conns, ConnReason::AllowedByRule);
    assert_eq!(good.via, ConnVia::Transparent);
    assert_eq!(good.decision, ConnDecision::Allowed);
    assert_eq!(good.host.as_deref(), Some("allowed.test"));
    with_reason(&conns, ConnReason::SniMismatch);
}

/// FS-ONLY: the supervisor registered where the redirected socket was
/// going and who made it; only an IP rule lets it through.
#[test]
fn a_redirected_connection_goes_where_registered_only_with_an_ip_rule() {
    let (l, port) = bind();
    let config = Config {
        ip_rules: vec![IpRule::parse(&format!("127.0.0.1:{port}"), origin()).unwrap()],
        ..Config::default()
    };
    let h = Harness::new(config);
    let redirect = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let raddr = redirect.local_addr().unwrap();
    h.proxy.serve(redirect, ListenerKind::Redirected).unwrap();
    let process = crate::events::ProcessInfo {
        pid: 42,
        exe: "/usr/bin/curl".into(),
        argv: vec!["curl".into()],
        ..Default::default()
    };
    let register = |dest_port: u16| {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        h.proxy.expect_redirect(
            sock.local_addr().unwrap(),
            Original {
                ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port: dest_port,
                name: None,
                process: Some(process.clone()),
                attribution: None,
            },
        );
        sock
    };
    let allowed = register(port);
    let other = register(port.wrapping_add(1).max(1));
    let (echoed, refused) = h.run(async {
        echo_server(l).await;
        let mut s = allowed.connect(raddr).await.unwrap();
        s.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).await.unwrap();
        let mut r = other.connect(raddr).await.unwrap();
        let mut out = Vec::new();
        let _ = r.read_to_end(&mut out).await;
        (b, out)
    });
    assert_eq!(&echoed, b"ping");
    assert!(refused.is_empty());
    let (_, conns, viols) = h.finish();
    assert_eq!(conns.len(), 2);
    let good = with_reason(&conns, ConnReason::AllowedByRule);
    assert_eq!(
        (good.via, good.decision),
        (ConnVia::Redirect, ConnDecision::Allowed)
    );
    let bad = with_reason(&conns, ConnReason::PrivateAddress);
    assert_eq!(bad.process.as_ref().map(|p| p.pid), Some(42));
    assert_eq!(viols.len(), 1);
    assert_eq!(
        viols[0].process.exe,
        std::path::PathBuf::from("/usr/bin/curl")
    );
}

#[test]
fn audit_lets_a_denied_name_through_and_records_it_as_observed() {
    let (l, port) = bind();
    let mut config = pinned_config(port);
    config.audit = true;
    config.pins.push(pin("denied.test", "127.0.0.1"));
    config.allow.clear();
    let h = Harness::new(config);
    let token = h.token();
    h.run(async {
        echo_server(l).await;
        let (mut s, head) = connect(h.addr, &format!("denied.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b"p").await.unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
    });
    let (_, conns, viols) = h.finish();
    let c = only(&conns);
    assert_eq!(
        (c.decision, c.reason),
        (ConnDecision::Observed, ConnReason::NotAllowed)
    );
    assert_eq!(viols.len(), 1);
    assert_eq!(viols[0].action, crate::events::Action::Observed);
}

/// vetto's own HTTPS_PROXY: the proxy chains through it with CONNECT (here
/// the upstream is a second vetto proxy, which pins the name).
#[test]
fn connections_chain_through_the_upstream_proxy() {
    let (l, port) = bind();
    let upstream = Harness::new(pinned_config(port));
    let up = Upstream::parse(&upstream.proxy.proxy_url(upstream.addr)).unwrap();
    let h = Harness::new(Config {
        allow: vec![allow("allowed.test", port)],
        upstream: Some(up),
        ..Config::default()
    });
    let token = h.token();
    h.run(async {
        echo_server(l).await;
        let (mut s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).await.unwrap();
    });
    let (_, conns, _) = h.finish();
    let c = only(&conns);
    assert_eq!(c.decision, ConnDecision::Allowed);
    assert_eq!(c.addr, Some(format!("127.0.0.1:{}", upstream.addr.port())));
    let (_, up_conns, _) = upstream.finish();
    assert_eq!(only(&up_conns).host.as_deref(), Some("allowed.test"));
}

#[test]
fn the_session_byte_limit_closes_tunnels() {
    let (l, port) = bind();
    let mut config = pinned_config(port);
    config.limits.session_bytes = 64 * 1024;
    let h = Harness::new(config);
    let token = h.token();
    let got = h.run(async {
        echo_server(l).await;
        let (s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (mut r, mut w) = s.into_split();
        let writer = tokio::spawn(async move {
            let chunk = vec![7u8; 16 * 1024];
            for _ in 0..64 {
                if w.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        let mut got = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 {
                break;
            }
            got += n;
        }
        let _ = writer.await;
        got
    });
    assert!(got <= 64 * 1024, "{got} bytes came back");
    let (stats, conns, _) = h.finish();
    assert!(only(&conns).detail.contains("byte limit"), "{conns:?}");
    assert!(stats.bytes() <= 64 * 1024, "{stats:?}");
}

/// The user-space copy (where splice(2) is unavailable) has the same
/// bounds: bytes arrive and are counted, a quiet connection times out.
#[test]
fn the_user_space_copy_counts_bytes_and_times_out() {
    let config = Config {
        limits: Limits {
            idle_timeout: Duration::from_millis(100),
            ..Limits::default()
        },
        ..Config::default()
    };
    let proxy = Proxy::start(config, Arc::new(VecSink::default())).unwrap();
    let shared = proxy.shared.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut job, mut job_side) = tokio::io::duplex(1024);
        let (mut dest_side, mut dest) = tokio::io::duplex(1024);
        let mine = std::sync::atomic::AtomicU64::new(0);
        let total = std::sync::atomic::AtomicU64::new(0);
        let last = std::sync::atomic::AtomicU64::new(0);
        let start = std::time::Instant::now();
        job.write_all(b"hello").await.unwrap();
        let copy = relay::one_way(
            &shared,
            &mut job_side,
            &mut dest_side,
            relay::Counters {
                mine: &mine,
                total: &total,
                last: &last,
                start,
            },
            None,
        );
        let read = async {
            let mut b = [0u8; 5];
            dest.read_exact(&mut b).await.unwrap();
            b
        };
        let (result, got) = tokio::join!(tokio::time::timeout(GUARD, copy), read);
        assert_eq!(&got, b"hello");
        let err = result.expect("hang guard").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(mine.load(std::sync::atomic::Ordering::Relaxed), 5);
    });
    drop(rt);
    proxy.shutdown();
}

/// A tiny deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = (self.next() as usize) % max;
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The parsers are total over arbitrary input (a cheap stand-in for a fuzz
/// target): random heads, hellos and names never panic, and no random
/// input is taken for an allowed request.
#[test]
fn parsers_survive_random_input() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let rules = rules::Rules {
        allow: vec![allow("allowed.test", 443)],
        ..rules::Rules::default()
    };
    for _ in 0..20_000 {
        let mut b = rng.bytes(300);
        let _ = sni::client_hello(&b);
        b.extend_from_slice(b"\r\n\r\n");
        if let Ok(h) = http::parse_head(&b) {
            let _ = http::authority(&h.target);
            let _ = http::absolute(&h.target);
        }
        let name = String::from_utf8_lossy(&b[..b.len() - 4]).into_owned();
        assert!(
            !rules.decide_name(&name, 443).allowed
                || name
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case("allowed.test")
        );
    }
    // Mutations of a real hello, a real head.
    let hello = sni::tests::hello(Some("allowed.test"));
    let head = b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
    for _ in 0..20_000 {
        for base in [&hello, &head] {
            let mut m = base.clone();
            let i = (rng.next() as usize) % m.len();
            m[i] = rng.next() as u8;
            let _ = sni::client_hello(&m);
            let _ = http::parse_head(&m);
        }
    }
}

/// Random bytes at the explicit listener (HTTP- and SOCKS-looking): each
/// connection is refused and recorded, and the proxy still serves.
#[test]
fn random_bytes_at_the_listener_are_refused_and_recorded() {
    let (l, port) = bind();
    let mut config = pinned_config(port);
    config.limits.idle_timeout = Duration::from_millis(300);
    let h = Harness::new(config);
    let token = h.token();
    h.run(async {
        echo_server(l).await;
        let mut rng = Rng(0xdead_beef_0000_0042);
        for i in 0..200 {
            let mut junk = rng.bytes(2_000);
            match i % 3 {
                0 => junk.insert(0, 5),
                1 => junk
                    .splice(0..0, b"CONNECT ".iter().copied())
                    .for_each(drop),
                _ => {}
            }
            let mut s = TcpStream::connect(h.addr).await.unwrap();
            let _ = s.write_all(&junk).await;
            let _ = s.shutdown().await;
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out).await;
        }
        let (mut s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b"ok").await.unwrap();
        let mut b = [0u8; 2];
        s.read_exact(&mut b).await.unwrap();
    });
    let (_, conns, _) = h.finish();
    assert_eq!(conns.len(), 201);
    let allowed = conns
        .iter()
        .filter(|c| c.decision == ConnDecision::Allowed)
        .count();
    assert_eq!(allowed, 1, "{conns:#?}");
}

/// A server that speaks first (an SSH-style banner), then echoes.
async fn banner_server(l: std::net::TcpListener) {
    let l = tokio_listener(l);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                if s.write_all(b"SSH-2.0-test\r\n").await.is_ok() {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                }
            });
        }
    });
}

/// A server-first protocol works through a tunnel, and the job's first
/// bytes are still checked after the banner: a TLS hello naming another
/// host is refused there too.
#[test]
fn a_server_first_banner_passes_and_the_jobs_first_bytes_are_still_checked() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let (ssh, fronted) = h.run(async {
        banner_server(l).await;
        let read_banner = |mut s: TcpStream| async move {
            let mut b = [0u8; 14];
            s.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"SSH-2.0-test\r\n");
            s
        };
        let (s, head) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut s = read_banner(s).await;
        s.write_all(b"SSH-2.0-client\r\n").await.unwrap();
        let mut b = [0u8; 16];
        s.read_exact(&mut b).await.unwrap();
        drop(s);
        let (s, _) = connect(h.addr, &format!("allowed.test:{port}"), Some(&token)).await;
        let mut s = read_banner(s).await;
        s.write_all(&sni::tests::hello(Some("denied.test")))
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        (b, out)
    });
    assert_eq!(&ssh, b"SSH-2.0-client\r\n");
    assert!(
        fronted.is_empty(),
        "the hello must not come back from the server"
    );
    let (_, conns, _) = h.finish();
    assert_eq!(conns.len(), 2);
    with_reason(&conns, ConnReason::AllowedByRule);
    with_reason(&conns, ConnReason::SniMismatch);
}

#[test]
fn the_job_gets_proxy_variables_in_both_cases_with_the_credential() {
    let proxy = Proxy::start(Config::default(), Arc::new(VecSink::default())).unwrap();
    let addr: SocketAddr = "127.0.0.1:3128".parse().unwrap();
    let vars = crate::plan::net::proxy_vars(&proxy.proxy_url(addr), &proxy.socks_url(addr));
    let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let url = format!("http://vetto:{}@127.0.0.1:3128", proxy.credential());
    assert_eq!(get("HTTPS_PROXY"), Some(url.clone()));
    assert_eq!(get("http_proxy"), Some(url));
    assert!(get("all_proxy").unwrap().starts_with("socks5h://vetto:"));
    assert_eq!(
        get("NO_PROXY").as_deref(),
        Some("localhost,127.0.0.1,::1,[::1]")
    );
    assert_eq!(vars.len(), 8);
    assert_eq!(proxy.credential().len(), 64);
    proxy.shutdown();
}

/// The supervisor registered the job's connect to the explicit listener:
/// the refusal names the process.
#[test]
fn a_registered_connect_to_the_explicit_listener_names_the_process() {
    let (l, port) = bind();
    let h = Harness::new(pinned_config(port));
    let token = h.token();
    let client = tokio::net::TcpSocket::new_v4().unwrap();
    client.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    h.proxy.expect_redirect(
        client.local_addr().unwrap(),
        Original {
            ip: h.addr.ip(),
            port: h.addr.port(),
            name: None,
            process: Some(crate::events::ProcessInfo {
                pid: 7,
                exe: "/usr/bin/curl".into(),
                ..Default::default()
            }),
            attribution: None,
        },
    );
    h.run(async {
        echo_server(l).await;
        let mut s = client.connect(h.addr).await.unwrap();
        let req =
            format!("CONNECT denied.test:{port} HTTP/1.1\r\nProxy-Authorization: {token}\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        assert!(read_head(&mut s).await.starts_with("HTTP/1.1 403"));
    });
    let (_, conns, viols) = h.finish();
    let c = with_reason(&conns, ConnReason::NotAllowed);
    assert_eq!(c.process.as_ref().map(|p| p.pid), Some(7));
    assert!(viols.iter().any(|v| v.process.pid == 7));
}
