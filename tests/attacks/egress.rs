//! Filtered egress (`--allow-domain`): every TCP connection of the job goes
//! through vetto's proxy, which lets through only the allowed names. No
//! internet: the servers run on the host's loopback, and the names are
//! pinned to them with `--resolve` (the proxy resolves and connects itself).
//!
//! Process attribution: a connection the supervisor refuses on a notified
//! `connect()` (FS-ONLY: a direct connect to anything but the proxy) names
//! the process; one the proxy refuses after an explicit request (`CONNECT`,
//! an absolute-form request, SOCKS) does not — the proxy sees a socket, not
//! who holds it — and is recorded with the name.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::util::{Out, Tier, World, cmd_output};
use crate::{at_every_tier, require};

/// A plain HTTP server on the host's loopback that answers every request
/// with `body` and counts the requests it saw.
pub(crate) struct Server {
    pub(crate) port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn start(body: &'static str) -> Server {
        Server::start_on("127.0.0.1:0", body)
    }

    pub(crate) fn start_on(addr: &str, body: &'static str) -> Server {
        let l = TcpListener::bind(addr).unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut head = String::new();
                let mut r = BufReader::new(&s);
                loop {
                    let mut line = String::new();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line == "\r\n" || line == "\n" => break,
                        Ok(_) => head.push_str(&line),
                    }
                }
                if head.is_empty() {
                    continue;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes());
            }
        });
        Server { port, hits }
    }

    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

const ALLOWED_BODY: &str = "ALLOWED-SERVER-7a1d";
const DENIED_BODY: &str = "DENIED-SERVER-exfil-4c2b";

/// The session log's events of one type.
fn events(dir: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == kind)
        .collect()
}

/// `net-egress-blocked` violations whose target mentions `needle`.
fn blocked(dir: &Path, needle: &str) -> Vec<Value> {
    events(dir, "violation")
        .into_iter()
        .filter(|v| v["rule"] == "net-egress-blocked" && v["target"].to_string().contains(needle))
        .collect()
}

/// The DNS query for `host` is recorded as refused with python as the
/// process, and a `net-egress-blocked` violation names it.
fn assert_python_query_refused(dir: &Path, host: &str, out: &Out) {
    let conns = events(dir, "connection");
    assert!(
        conns.iter().any(|c| c["via"] == "dns"
            && c["host"] == host
            && c["decision"] == "denied"
            && c["process"]["exe"]
                .as_str()
                .is_some_and(|e| e.contains("python"))),
        "the refused query is not recorded with its name and process\n{conns:?}\n{}",
        out.dump()
    );
    assert!(!blocked(dir, host).is_empty());
}

/// Options that allow `allowed.test:PORT` only, with both test names pinned
/// to the host's loopback, and a report directory.
fn egress_options(w: &World, allowed_port: u16) -> (Vec<String>, std::path::PathBuf) {
    let dir = w.root.join("reports");
    let opts = vec![
        "--allow-domain".into(),
        format!("allowed.test:{allowed_port}"),
        "--resolve".into(),
        "allowed.test:127.0.0.1".into(),
        "--resolve".into(),
        "denied.test:127.0.0.1".into(),
        "--report-dir".into(),
        dir.to_str().unwrap().into(),
    ];
    (opts, dir)
}

fn run_sh(w: &World, opts: &[String], script: &str) -> crate::util::Out {
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    w.sandboxed_with(&opts, &["sh", "-c", script])
        .timeout(Duration::from_secs(90))
        .run()
}

/// Runs as an unprivileged user: `curl` through the proxy variables vetto
/// sets reaches the allowed server, and the same `curl` to `denied.test`
/// (a server that would take the job's data) gets nothing. Evidence: bare,
/// curl reaches both servers; sandboxed, only the allowed one, and the
/// refusal of `denied.test` is in the session log.
fn only_the_allowed_name_is_reached_through_the_proxy(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);

    let bare = w.sh_bare(&format!(
        "curl -s -m 10 --resolve allowed.test:{a}:127.0.0.1 http://allowed.test:{a}/; echo; \
         curl -s -m 10 --resolve denied.test:{d}:127.0.0.1 http://denied.test:{d}/"
    ));
    bare.assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains(DENIED_BODY);
    assert_eq!(
        (allowed.hits(), denied.hits()),
        (1, 1),
        "control: bare, both are reached"
    );

    let (opts, dir) = egress_options(&w, a);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "curl -s -m 20 http://allowed.test:{a}/; echo; curl -s -m 20 http://denied.test:{d}/; echo; \
             test -n \"$HTTPS_PROXY\" && test -n \"$https_proxy\" && echo \"$ALL_PROXY\" | grep -q '^socks5h://' && echo vars-set; \
             echo \"PROXY=$HTTP_PROXY\""
        ),
    );
    out.assert_ran()
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains("vars-set")
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(
        denied.hits(),
        1,
        "the sandboxed request reached denied.test\n{}",
        out.dump()
    );
    assert_eq!(allowed.hits(), 2, "{}", out.dump());
    assert!(
        !blocked(&dir, "denied.test").is_empty(),
        "the refusal of denied.test is not in the session log\n{}",
        out.dump()
    );
    // The credential is the job's alone: not in vetto's words, not in the log.
    let log = std::fs::read_to_string(dir.join("session.jsonl")).unwrap_or_default();
    let start = events(&dir, "session-start");
    assert!(
        start
            .first()
            .is_some_and(|s| s["enforced"].to_string().contains("filtered egress")),
        "{log}"
    );
    let end = events(&dir, "session-end");
    assert!(
        end.first()
            .is_some_and(|e| e["proxy_bytes"].as_u64().unwrap_or(0) > 0),
        "no proxy bytes in the session end: {end:?}"
    );
    let stdout = out.stdout();
    let secret = stdout
        .lines()
        .find_map(|l| l.strip_prefix("PROXY=http://vetto:"))
        .and_then(|rest| rest.split('@').next())
        .unwrap_or_default();
    assert!(
        secret.len() >= 32,
        "no credential in HTTP_PROXY\n{}",
        out.dump()
    );
    assert!(
        !log.contains(secret),
        "the credential is in the session log"
    );
    assert!(
        !out.stderr().contains(secret),
        "the credential was printed\n{}",
        out.dump()
    );
}
at_every_tier!(only_the_allowed_name_is_reached_through_the_proxy);

/// Runs as an unprivileged user: git's http(s) remotes go through the
/// proxy with curl's `CURLAUTH_ANY` (git's default), which asks without
/// the credential first and answers the proxy's 407 challenge (so does
/// `curl --proxy-anyauth`). That first request was a `net-egress-blocked`
/// violation on every `git fetch` of a job (a false alarm, `vetto ci`
/// exit 3). Evidence: the server gets both tools' requests, and the
/// session records no violation, at every tier.
fn git_answering_the_proxys_credential_challenge_is_no_violation(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let a = allowed.port;
    let (opts, dir) = egress_options(&w, a);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "git ls-remote http://allowed.test:{a}/repo.git; \
             curl -s -m 20 --proxy-anyauth http://allowed.test:{a}/; echo; echo script-finished"
        ),
    );
    out.assert_ran()
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains("script-finished");
    assert!(
        allowed.hits() >= 2,
        "git's request did not reach the server\n{}",
        out.dump()
    );
    let violations = events(&dir, "violation");
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
}
at_every_tier!(git_answering_the_proxys_credential_challenge_is_no_violation);

/// Issue P10, item 3: an agent contacts hosts the policy keeps refused at
/// every start (Codex fetches its plugin marketplace from GitHub, with no
/// switch to turn it off). Runs as an unprivileged user: with `[network]
/// expected = ["denied.test"]` a request to `denied.test` through the
/// proxy is still refused (the server is never reached), recorded as
/// expected, and no finding; another refused name is a finding as before.
fn a_refused_name_the_policy_expects_is_refused_and_no_finding(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);
    w.write(
        &w.project.join("vetto.toml"),
        "[network]\nexpected = [\"denied.test\"]\n",
    );
    let (opts, dir) = egress_options(&w, a);
    let out = run_sh(
        &w,
        &opts,
        &format!("curl -s -m 20 http://denied.test:{d}/; echo; echo script-finished"),
    );
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(denied.hits(), 0, "{}", out.dump());
    let violations = events(&dir, "violation");
    assert!(
        !violations.is_empty() && violations.iter().all(|v| v["action"] == "expected"),
        "{violations:?}\n{}",
        out.dump()
    );
    assert!(
        out.stderr().contains("[network] expected"),
        "{}",
        out.dump()
    );

    let out = run_sh(
        &w,
        &opts,
        &format!(
            "curl -s -m 20 --resolve other.test:{d}:127.0.0.1 http://other.test:{d}/; echo; echo script-finished"
        ),
    );
    out.assert_ran().assert_stdout_lacks(DENIED_BODY);
    assert!(
        events(&dir, "violation")
            .iter()
            .any(|v| v["action"] == "blocked" && v["target"].to_string().contains("other.test")),
        "{}",
        out.dump()
    );
}
at_every_tier!(a_refused_name_the_policy_expects_is_refused_and_no_finding);

/// Runs as an unprivileged user: a job that passes its proxy URL in argv
/// (`curl -x "$HTTP_PROXY"`), to a destination that is refused, is named
/// with its argv in the violation and the connection records. The
/// credential in that argv is written as `[redacted]`: not in the session
/// log, nor in the SARIF and HTML reports rendered from it.
fn the_proxy_credential_in_argv_is_redacted_from_every_record(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let (opts, dir) = egress_options(&w, allowed.port);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "echo \"PROXY=$HTTP_PROXY\"; curl -s -m 20 -x \"$HTTP_PROXY\" http://denied.test:{}/",
            denied.port
        ),
    );
    out.assert_ran().assert_stdout_lacks(DENIED_BODY);
    let secret = out
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("PROXY=http://vetto:"))
        .and_then(|rest| rest.split('@').next())
        .unwrap_or_default()
        .to_string();
    assert!(
        secret.len() >= 32,
        "no credential in HTTP_PROXY\n{}",
        out.dump()
    );
    let refused = blocked(&dir, "denied.test");
    assert!(
        refused.iter().any(|v| v["process"]["argv"]
            .to_string()
            .contains("vetto:[redacted]@")),
        "the refusal does not name curl's argv, redacted: {refused:?}\n{}",
        out.dump()
    );
    let written: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        written.len() >= 3,
        "the reports were not written: {written:?}\n{}",
        out.dump()
    );
    for file in written {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            !text.contains(&secret),
            "the credential is in {}",
            file.display()
        );
    }
}
at_every_tier!(the_proxy_credential_in_argv_is_redacted_from_every_record);

/// A server that reads everything one client sends on a connection (until
/// it has been quiet for a second) and keeps the `Host` of every request
/// in it, pipelined ones included.
struct HostsSeen {
    port: u16,
    hosts: Arc<std::sync::Mutex<Vec<String>>>,
}

impl HostsSeen {
    fn start() -> HostsSeen {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hosts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = hosts.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut all = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = std::io::Read::read(&mut s, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    all.extend_from_slice(&buf[..n]);
                }
                let text = String::from_utf8_lossy(&all).into_owned();
                let mut found: Vec<String> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("Host: "))
                    .map(str::to_string)
                    .collect();
                seen.lock().unwrap().append(&mut found);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        HostsSeen { port, hosts }
    }

    fn hosts(&self) -> Vec<String> {
        self.hosts.lock().unwrap().clone()
    }
}

/// Two requests in one write on one connection, the second for
/// `other.test`: straight to `127.0.0.1:PORT` bare (argv: `direct PORT`),
/// through the proxy of `$HTTP_PROXY` sandboxed (`proxy PORT`).
const PIPELINE: &str = "import base64, os, socket, sys, urllib.parse
how, port = sys.argv[1], int(sys.argv[2])
first = 'allowed.test:%d' % port
if how == 'proxy':
    p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
    auth = base64.b64encode(('%s:%s' % (p.username, p.password)).encode()).decode()
    s = socket.create_connection((p.hostname, p.port))
    target, extra = 'http://%s/' % first, 'Proxy-Authorization: Basic %s\\r\\n' % auth
else:
    s = socket.create_connection(('127.0.0.1', port))
    target, extra = '/', ''
one = 'GET %s HTTP/1.1\\r\\nHost: %s\\r\\n%s\\r\\n' % (target, first, extra)
two = 'GET / HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n'
s.sendall((one + two).encode())
reply = b''
while True:
    b = s.recv(4096)
    if not b:
        break
    reply += b
print(reply.decode(errors='replace').split('\\r\\n')[0], flush=True)
";

/// Runs as an unprivileged user: a request to an allowed name with a
/// second one pipelined behind it on the same connection, for another
/// `Host` (what a shared front end or a virtual host answers with another
/// site). Bare, the server receives both; through vetto's proxy only the
/// first, which was checked, reaches it.
fn a_request_pipelined_behind_an_allowed_one_never_reaches_the_server(tier: Tier) {
    require!(tier.feature());
    let bare_server = HostsSeen::start();
    let w = World::at(tier);
    let port = bare_server.port.to_string();
    w.run_bare(&["python3", "-c", PIPELINE, "direct", &port])
        .assert_success()
        .assert_stdout_contains("200 OK");
    assert!(
        crate::util::eventually(Duration::from_secs(5), || bare_server.hosts().len() == 2),
        "control: the bare server did not see both requests: {:?}",
        bare_server.hosts()
    );

    let server = HostsSeen::start();
    let (opts, _) = egress_options(&w, server.port);
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let port = server.port.to_string();
    let out = w
        .sandboxed_with(&opts, &["python3", "-c", PIPELINE, "proxy", &port])
        .timeout(Duration::from_secs(90))
        .run();
    out.assert_success().assert_stdout_contains("200 OK");
    assert!(
        crate::util::eventually(Duration::from_secs(5), || !server.hosts().is_empty()),
        "the allowed request did not arrive\n{}",
        out.dump()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        server.hosts(),
        [format!("allowed.test:{port}")],
        "{}",
        out.dump()
    );
}
at_every_tier!(a_request_pipelined_behind_an_allowed_one_never_reaches_the_server);

/// Runs as an unprivileged user, at FS-ONLY: a stranger (any process of
/// any user on the host) tries to open more idle connections to the
/// proxy's port than it has slots, presenting nothing. Evidence: the
/// proxy is not on the host's loopback at all (it listens in the network
/// namespace the job's sockets come from), so none is accepted; the job's
/// own request through the proxy works, no violation is recorded and
/// `vetto ci` passes.
#[test]
fn strangers_holding_idle_connections_to_the_proxy_cost_the_session_nothing_at_fs_only() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let allowed = Server::start(ALLOWED_BODY);
    let a = allowed.port;
    let project = w.project.to_str().unwrap_or_default();
    let script = format!(
        "echo \"PROXY=$HTTP_PROXY\"; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
         curl -s -m 30 http://allowed.test:{a}/"
    );
    let mut job = w
        .vetto(&[
            "ci",
            "--tier",
            "fs-only",
            "--project",
            project,
            "--allow-domain",
            &format!("allowed.test:{a}"),
            "--resolve",
            "allowed.test:127.0.0.1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .timeout(Duration::from_secs(120))
        .spawn();
    job.wait_for_stdout("PROXY=", Duration::from_secs(60));
    job.wait_for_stdout("\n", Duration::from_secs(10));
    // The proxy's port, as the job's variables name it.
    let port = job
        .stdout_so_far()
        .lines()
        .find_map(|l| l.strip_prefix("PROXY="))
        .and_then(|u| u.rsplit(':').next())
        .and_then(|p| p.trim().parse::<u16>().ok())
        .expect("the proxy's port in HTTP_PROXY");
    let strangers: Vec<_> = (0..600)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    // The proxy listens in the namespace the job's sockets are made in:
    // the host's loopback has nothing of the session's to connect to.
    assert!(
        strangers.is_empty(),
        "a stranger on the host reached the proxy's port ({} connections)",
        strangers.len()
    );
    w.write(&w.project.join("go"), "");
    let out = job.wait();
    drop(strangers);
    out.assert_stdout_contains(ALLOWED_BODY);
    assert_eq!(out.code(), 0, "{}", out.dump());
    let log =
        std::fs::read_to_string(w.project.join("vetto-report/session.jsonl")).unwrap_or_default();
    let violations: Vec<_> = log
        .lines()
        .filter(|l| l.contains("\"type\":\"violation\""))
        .collect();
    assert!(violations.is_empty(), "{violations:?}");
}

/// openssl's TLS test server on the host's loopback, with a certificate
/// for `allowed.test` made here; killed when dropped.
struct TlsServer(std::process::Child);

impl TlsServer {
    fn start(w: &World) -> (TlsServer, u16) {
        let certs = w.root.join("tls");
        std::fs::create_dir_all(&certs).unwrap();
        let (key, cert) = (certs.join("key.pem"), certs.join("cert.pem"));
        cmd_output(
            std::process::Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                ])
                .arg("/CN=allowed.test")
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&cert),
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = std::process::Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-key")
            .arg(&key)
            .arg("-cert")
            .arg(&cert)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            crate::util::eventually(Duration::from_secs(20), || std::net::TcpStream::connect((
                "127.0.0.1",
                port
            ))
            .is_ok()),
            "openssl s_server did not start"
        );
        (TlsServer(server), port)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs as an unprivileged user: HTTPS through the proxy (`CONNECT`) to a
/// TLS server (openssl's, with a certificate made here) reaches it when
/// the name is allowed. Evidence: bare and sandboxed the page arrives; a
/// sandboxed `CONNECT` to `denied.test` on the same server does not.
fn https_to_the_allowed_name_works_and_to_another_name_does_not(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let (server, port) = TlsServer::start(&w);
    let page = "s_server";
    w.sh_bare(&format!(
        "curl -sk -m 10 --resolve allowed.test:{port}:127.0.0.1 https://allowed.test:{port}/"
    ))
    .assert_stdout_contains(page);

    let (opts, dir) = egress_options(&w, port);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "curl -sk -m 20 https://allowed.test:{port}/; echo; \
             curl -sk -m 20 https://denied.test:{port}/ && echo denied-reached; echo done"
        ),
    );
    drop(server);
    out.assert_ran()
        .assert_stdout_contains(page)
        .assert_stdout_contains("done")
        .assert_stdout_lacks("denied-reached");
    assert!(!blocked(&dir, "denied.test").is_empty(), "{}", out.dump());
}
at_every_tier!(https_to_the_allowed_name_works_and_to_another_name_does_not);

/// Runs as an unprivileged user: a program that ignores the proxy
/// variables (`curl --noproxy '*'`) connects straight to a local server.
/// Evidence: bare it is reached; sandboxed it is not: 127.0.0.1 is the
/// job's own loopback (FULL's namespace, FS-ONLY's that leads nowhere),
/// and since none of the job's servers listens there but the host's
/// does, the connect is refused (`ECONNREFUSED`) and recorded with the
/// process at both tiers.
fn a_direct_connection_past_the_proxy_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let d = denied.port;
    w.sh_bare(&format!("curl -s -m 10 http://127.0.0.1:{d}/"))
        .assert_stdout_contains(DENIED_BODY);

    let (opts, dir) = egress_options(&w, allowed.port);
    let out = run_sh(
        &w,
        &opts,
        &format!("curl -s -m 20 --noproxy '*' http://127.0.0.1:{d}/; echo rc=$?"),
    );
    out.assert_ran().assert_stdout_lacks(DENIED_BODY);
    assert_eq!(
        denied.hits(),
        1,
        "the direct connection arrived\n{}",
        out.dump()
    );
    out.assert_stdout_contains("rc=7");
    let hits = blocked(&dir, &d.to_string());
    assert!(
        hits.iter()
            .any(|v| v["process"].to_string().contains("curl")),
        "the refused connect is not recorded with curl\n{hits:?}\n{}",
        out.dump()
    );
}
at_every_tier!(a_direct_connection_past_the_proxy_is_refused);

/// Runs as an unprivileged user: an allowed name that resolves to the
/// cloud metadata address (DNS rebinding, a poisoned pin) is not
/// connected to without an IP rule naming that address. Evidence: the
/// session log records the refusal; the job gets no answer. (Nothing on
/// this host serves 169.254.169.254, so the bare half is the control that
/// the same request without the rule would be attempted: curl's own
/// resolution is pinned there and it tries to connect.)
fn a_name_pinned_to_the_metadata_address_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let dir = w.root.join("reports");
    let out = w
        .sandboxed_with(
            &[
                "--allow-domain",
                "meta.test",
                "--resolve",
                "meta.test:169.254.169.254",
                "--report-dir",
                dir.to_str().unwrap(),
            ],
            &[
                "sh",
                "-c",
                "curl -s -m 20 http://meta.test/latest/meta-data/; echo rc=$?",
            ],
        )
        .timeout(Duration::from_secs(90))
        .run();
    out.assert_ran();
    let conns = events(&dir, "connection");
    assert!(
        conns
            .iter()
            .any(|c| c["host"] == "meta.test" && c["decision"] == "denied"),
        "the metadata connection is not refused\n{conns:?}\n{}",
        out.dump()
    );
}
at_every_tier!(a_name_pinned_to_the_metadata_address_is_refused);

/// Runs as an unprivileged user: a process that finds the proxy's address
/// but not its credential (another local user's program, or the job with
/// the credential stripped) is refused. Evidence: with the credential the
/// allowed server answers; without it, nothing reaches the server.
fn the_proxy_refuses_a_client_without_the_credential(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let a = allowed.port;
    let (opts, _dir) = egress_options(&w, a);
    // Strip `vetto:SECRET@` from the proxy URL and use what is left.
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "bare=$(echo \"$HTTP_PROXY\" | sed 's#//[^@]*@#//#'); \
             curl -s -m 20 http://allowed.test:{a}/; echo; \
             curl -s -m 20 --proxy \"$bare\" http://allowed.test:{a}/ && echo; echo stripped-done"
        ),
    );
    out.assert_ran()
        .assert_stdout_contains("stripped-done")
        .assert_stdout_contains(ALLOWED_BODY);
    assert_eq!(
        allowed.hits(),
        1,
        "a request without the credential reached the server\n{}",
        out.dump()
    );
}
at_every_tier!(the_proxy_refuses_a_client_without_the_credential);

/// Fetch `/` from 127.0.0.1:{A} with a blocking and a non-blocking connect
/// (no timeout set: Python's timeouts make every socket non-blocking), and
/// from {D}.
const PY_GET: &str = r#"python3 - <<'PY'
import socket, select
def get(port, blocking):
    s = socket.socket()
    try:
        if blocking:
            s.connect(('127.0.0.1', port))
        else:
            s.setblocking(False)
            s.connect_ex(('127.0.0.1', port))
            select.select([], [s], [], 20)
            e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if e:
                raise OSError(e, 'connect')
            s.setblocking(True)
        s.sendall(b'GET / HTTP/1.0\r\nHost: x\r\n\r\n')
        got = b''
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        print(port, blocking, got.decode(errors='replace').split('\r\n\r\n')[-1])
    except OSError as e:
        print(port, blocking, 'refused', e.errno)
get({A}, True)
get({A}, False)
get({D}, True)
PY"#;

/// Runs as an unprivileged user, at FS-ONLY: an address an IP rule allows
/// is reached without any proxy variable — the supervisor redirects the
/// job's notified connect to the proxy, which connects to the address
/// itself — blocking and non-blocking, and over IPv6 where the host has
/// `::1`. A port the rule does not name is refused. Evidence: bare, both
/// servers answer; sandboxed, only the one the rule names.
#[test]
fn an_ip_rule_is_reached_transparently_and_nothing_next_to_it_at_fs_only() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);
    let script = PY_GET
        .replace("{A}", &a.to_string())
        .replace("{D}", &d.to_string());
    let bare = w.sh_bare(&script);
    bare.assert_stdout_contains(&format!("{d} True {DENIED_BODY}"));
    let dir = w.root.join("reports");
    let out = run_sh(
        &w,
        &[
            "--allow-domain".into(),
            format!("127.0.0.1:{a}"),
            "--report-dir".into(),
            dir.to_str().unwrap().into(),
        ],
        &script,
    );
    out.assert_ran()
        .assert_stdout_contains(&format!("{a} True {ALLOWED_BODY}"))
        .assert_stdout_contains(&format!("{a} False {ALLOWED_BODY}"))
        .assert_stdout_contains(&format!("{d} True refused 111"))
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(denied.hits(), 1, "{}", out.dump());
    let conns = events(&dir, "connection");
    assert!(
        conns
            .iter()
            .any(|c| c["via"] == "redirect" && c["decision"] == "allowed" && c["port"] == a),
        "the redirected connection is not recorded\n{conns:?}"
    );
}

/// A python script that sends a DNS query for `<canary>.denied.test` to
/// `127.0.0.1:PORT` three ways: `sendto`, `sendmsg` with a destination
/// (`msg_name`), and on a connected socket. Prints each outcome.
fn udp_tunnel_script(port: u16) -> String {
    format!(
        "python3 -c \"\nimport socket\nq = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00' + \
         b'\\x0bcanary-5f3e\\x06denied\\x04test\\x00\\x00\\x01\\x00\\x01'\nto = ('127.0.0.1', {port})\n\
         def way(name, f):\n\x20   try:\n\x20       f(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)); print(name, 'sent')\n\
         \x20   except OSError as e:\n\x20       print(name, 'refused', e.errno)\n\
         way('sendto', lambda s: s.sendto(q, to))\n\
         way('sendmsg', lambda s: s.sendmsg([q], [], 0, to))\n\
         way('connected', lambda s: (s.connect(to), s.send(q)))\n\""
    )
}

/// Runs as an unprivileged user: DNS tunnelling over UDP (the data rides
/// in the queried name) to a resolver of the job's choosing — here one on
/// the host's loopback, standing for the attacker's — never arrives, by
/// `sendto`, by `sendmsg` with a destination, or on a connected socket.
/// At FULL the datagrams go to the namespace's own loopback. At FS-ONLY
/// the job's UDP sockets are made in vetto's namespace that leads nowhere:
/// they "work", and whatever they send stays there (port 53 there is
/// vetto's stub; this port has nothing). Evidence: bare, the resolver
/// receives all three queries; sandboxed, none.
fn dns_tunnel_over_udp_to_an_outside_resolver_never_leaves(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let resolver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    resolver
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = resolver.local_addr().unwrap().port();
    let allowed = Server::start(ALLOWED_BODY);
    let script = udp_tunnel_script(port);
    w.sh_bare(&script)
        .assert_stdout_contains("sendto sent")
        .assert_stdout_contains("sendmsg sent")
        .assert_stdout_contains("connected sent");
    let mut buf = [0u8; 512];
    for _ in 0..3 {
        let (n, _) = resolver
            .recv_from(&mut buf)
            .expect("control: the bare query arrives");
        assert!(buf[..n].windows(11).any(|w| w == b"canary-5f3e"));
    }

    let (opts, dir) = egress_options(&w, allowed.port);
    let out = run_sh(&w, &opts, &script);
    out.assert_ran();
    resolver.set_nonblocking(true).unwrap();
    assert!(
        resolver.recv_from(&mut buf).is_err(),
        "a sandboxed DNS query arrived\n{}",
        out.dump()
    );
    if tier == Tier::FsOnly {
        out.assert_stdout_contains("sendto sent")
            .assert_stdout_contains("sendmsg sent");
        let socket_denied = events(&dir, "violation")
            .into_iter()
            .any(|v| v["rule"] == "net-socket-denied");
        assert!(!socket_denied, "a UDP socket was refused\n{}", out.dump());
    }
}
at_every_tier!(dns_tunnel_over_udp_to_an_outside_resolver_never_leaves);

/// Runs as an unprivileged user, at FS-ONLY: a resolver that speaks UDP
/// itself (Go's, c-ares, `dig`; here a python script sending a raw query
/// to a hard-coded public resolver, IPv4 and IPv6) gets vetto's answers:
/// the synthetic address for an allowed name, NXDOMAIN for the tunnelling
/// canary, which is recorded with the name and the process. Evidence:
/// the answers come "from" the address asked, and the session log names
/// the canary and python.
#[test]
fn udp_resolver_resolves_allowed_names_at_fs_only() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let allowed = Server::start(ALLOWED_BODY);
    let (opts, dir) = egress_options(&w, allowed.port);
    let v6 = if Path::new("/proc/net/if_inet6").exists() {
        "ask('allowed.test', '2001:4860:4860::8888')\n"
    } else {
        ""
    };
    let script = format!(
        "python3 -c \"\nimport socket, struct\n\
         def ask(name, server):\n\
         \x20   s = socket.socket(socket.AF_INET6 if ':' in server else socket.AF_INET, socket.SOCK_DGRAM)\n\
         \x20   s.settimeout(20)\n\
         \x20   q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\\0' + struct.pack('>HH', 1, 1)\n\
         \x20   s.sendto(q, (server, 53))\n\
         \x20   r, peer = s.recvfrom(1500)\n\
         \x20   print(name, 'rcode', r[3] & 15, 'addr', '.'.join(map(str, r[-4:])), 'from', peer[0])\n\
         ask('allowed.test', '8.8.8.8')\nask('canary-5f3e.denied.test', '8.8.8.8')\n{v6}\""
    );
    let out = run_sh(&w, &opts, &script);
    out.assert_ran()
        .assert_stdout_contains("allowed.test rcode 0 addr 127.77.")
        .assert_stdout_contains("canary-5f3e.denied.test rcode 3");
    if !v6.is_empty() {
        out.assert_stdout_contains("from 2001:4860:4860::8888");
    }
    assert_python_query_refused(&dir, "canary-5f3e.denied.test", &out);
}

/// Runs as an unprivileged user: glibc's `getaddrinfo` sorts several
/// answers with a UDP socket it connects and asks `getsockname` (RFC
/// 3484), and programs probe for a route the same way. At FS-ONLY that
/// socket comes from vetto's namespace that leads nowhere: `vetto ci`
/// passes with no violation at all (it used to record
/// `net-socket-denied`). Evidence: exit 0 and an empty violation list.
#[test]
fn getaddrinfo_sorting_is_not_a_violation() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let project = w.project.to_str().unwrap_or_default();
    let out = w
        .vetto(&[
            "ci",
            "--tier",
            "fs-only",
            "--project",
            project,
            "--allow-domain",
            "allowed.test",
            "--",
            "python3",
            "-c",
            "import socket\n\
             for fam, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n\
             \x20   s = socket.socket(fam, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)\n\
             \x20   s.connect((host, 80)); print('sorted', s.getsockname()[0])\n\
             socket.getaddrinfo('localhost', 80); print('resolved')",
        ])
        .timeout(Duration::from_secs(90))
        .run();
    out.assert_code(0)
        .assert_stdout_contains("sorted 127.0.0.1")
        .assert_stdout_contains("sorted ::1")
        .assert_stdout_contains("resolved");
    let log =
        std::fs::read_to_string(w.project.join("vetto-report/session.jsonl")).unwrap_or_default();
    let violations: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"type\":\"violation\""))
        .collect();
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
}

/// Runs as an unprivileged user: a program that ignores the proxy
/// variables (`curl --noproxy '*'`) reaches an allowed name by name, while
/// a name no rule allows (the tunnelling canary) gets NXDOMAIN and the
/// query is recorded with the name. At FULL the DNS stub in the namespace
/// answers with a synthetic address and the transparent listener on that
/// port takes the connection to the proxy; at FS-ONLY the resolver queries
/// over TCP (`RES_OPTIONS=use-vc`), the supervisor redirects that connect
/// to port 53 to its stub, and the connect to the synthetic address goes
/// to the proxy with the name — there the query is recorded with the
/// process too. Evidence: bare, curl reaches both servers; sandboxed, only
/// the allowed one.
fn names_resolve_only_to_allowed_destinations_for_programs_without_proxy(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);
    w.sh_bare(&format!(
        "curl -s -m 10 --resolve canary-5f3e.denied.test:{d}:127.0.0.1 http://canary-5f3e.denied.test:{d}/"
    ))
    .assert_stdout_contains(DENIED_BODY);
    let (opts, dir) = egress_options(&w, a);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "curl -s -m 20 --noproxy '*' http://allowed.test:{a}/; echo; \
             curl -s -m 20 --noproxy '*' http://canary-5f3e.denied.test:{d}/; echo rc=$?"
        ),
    );
    out.assert_ran()
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains("rc=6")
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(denied.hits(), 1, "{}", out.dump());
    let fs_only = tier == Tier::FsOnly;
    let conns = events(&dir, "connection");
    assert!(
        conns.iter().any(|c| c["via"] == "dns"
            && c["host"] == "canary-5f3e.denied.test"
            && c["decision"] == "denied"
            && (!fs_only
                || c["process"]["exe"]
                    .as_str()
                    .is_some_and(|e| e.ends_with("curl")))),
        "the refused query is not recorded with its name (and, at FS-ONLY, its process)\n{conns:?}\n{}",
        out.dump()
    );
    let via = if fs_only { "redirect" } else { "transparent" };
    assert!(
        conns
            .iter()
            .any(|c| c["via"] == via && c["host"] == "allowed.test" && c["decision"] == "allowed"),
        "{conns:?}"
    );
    if fs_only {
        assert!(
            !blocked(&dir, "canary-5f3e.denied.test").is_empty(),
            "no violation names the queried name\n{}",
            out.dump()
        );
    }
}
at_every_tier!(names_resolve_only_to_allowed_destinations_for_programs_without_proxy);

/// Runs as an unprivileged user, at FULL: a resolver that speaks TCP
/// (`dig +tcp`, glibc's `use-vc`; here python sending length-prefixed
/// queries to `127.0.0.53:53`, where the sandbox's `/etc/resolv.conf`
/// points) gets the DNS stub's answers over TCP too: the synthetic address
/// for an allowed name, NXDOMAIN for the tunnelling canary, which is
/// recorded with the name and python as the process. Evidence: the
/// answers and the record (the same query shown leaving bare is
/// `dns_tunnel_over_tcp_with_the_network_off_never_leaves`).
#[test]
fn a_dns_query_over_tcp_gets_the_stubs_answers_at_full() {
    require!(Tier::Full.feature());
    let w = World::at(Tier::Full);
    w.write(&w.project.join("tunnel.py"), super::network::PY_TCP_TUNNEL);
    let allowed = Server::start(ALLOWED_BODY);
    let (opts, dir) = egress_options(&w, allowed.port);
    let canary = format!("vt{}x{}.denied.test", std::process::id(), line!());
    let script = format!(
        "python3 tunnel.py allowed.test 127.0.0.53:53; python3 tunnel.py {canary} 127.0.0.53:53"
    );
    let out = run_sh(&w, &opts, &script);
    out.assert_ran()
        .assert_stdout_contains("127.0.0.53:53 rcode 0 addr 127.77.")
        .assert_stdout_contains("127.0.0.53:53 rcode 3");
    assert_python_query_refused(&dir, &canary, &out);
}

/// Runs as an unprivileged user, at FS-ONLY: DNS tunnelling over TCP to
/// a resolver of the job's choosing (not on port 53, which always goes to
/// vetto's stub) does not arrive: the connect is refused (`ECONNREFUSED`).
/// Evidence: bare, the test's listener receives the canary; sandboxed, not.
#[test]
fn a_dns_query_over_tcp_to_another_resolver_does_not_arrive_at_fs_only() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let resolver = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    resolver.set_nonblocking(true).unwrap();
    let port = resolver.local_addr().unwrap().port();
    let allowed = Server::start(ALLOWED_BODY);
    let script = format!(
        "python3 -c \"\nimport socket\nq = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00' + \
         b'\\x0bcanary-5f3e\\x06denied\\x04test\\x00\\x00\\x01\\x00\\x01'\ntry:\n\
         \x20   s = socket.create_connection(('127.0.0.1', {port}), 10); s.sendall(len(q).to_bytes(2, 'big') + q); print('sent')\n\
         except OSError as e:\n\x20   print('refused', e.errno)\n\""
    );
    w.sh_bare(&script).assert_stdout_contains("sent");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let arrived = loop {
        match resolver.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = Vec::new();
                let _ = std::io::Read::read_to_end(&mut s, &mut buf);
                break buf;
            }
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("control: the bare query never arrived: {e}"),
        }
    };
    assert!(arrived.windows(11).any(|w| w == b"canary-5f3e"));

    let (opts, _dir) = egress_options(&w, allowed.port);
    let out = run_sh(&w, &opts, &script);
    out.assert_ran().assert_stdout_contains("refused 111");
    assert!(
        resolver.accept().is_err(),
        "a sandboxed DNS query arrived\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `--audit` with a network policy blocks
/// nothing but sends every connection through the proxy, which records
/// it — what `vetto policy suggest` learns the names from. Evidence: the
/// request to a name the policy does not allow arrives (audit), and the
/// session log has it as an observed connection with its name.
#[test]
fn audit_lets_every_destination_through_the_proxy_and_records_it() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start(DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);
    let (mut opts, dir) = egress_options(&w, a);
    opts.push("--audit".into());
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let out = w
        .vetto(
            &[
                &["run", "--project", w.project.to_str().unwrap()][..],
                &opts,
                &[
                    "--",
                    "sh",
                    "-c",
                    &format!("curl -s -m 20 http://denied.test:{d}/"),
                ],
            ]
            .concat(),
        )
        .timeout(Duration::from_secs(90))
        .run();
    out.assert_ran().assert_stdout_contains(DENIED_BODY);
    let conns = events(&dir, "connection");
    assert!(
        conns
            .iter()
            .any(|c| c["host"] == "denied.test" && c["decision"] == "observed"),
        "{conns:?}\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `--audit` with no network policy at all
/// (the default, `off`) still sends every connection through the proxy
/// and records it by name, so `vetto policy suggest` proposes the names —
/// not `mode = "host"`, which gives up the very egress protection the
/// audit was meant to teach (issue P10 item 4). Evidence: the request
/// arrives, the session log has it as an observed connection to
/// `localhost`, and the suggestion allows exactly `localhost:PORT`.
/// (Audit has one tier of its own: no Landlock, no namespaces.)
#[test]
fn audit_without_a_network_policy_learns_the_names_the_job_contacted() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let server = Server::start(ALLOWED_BODY);
    let port = server.port;
    let dir = w.root.join("reports");
    let out = w
        .vetto(&[
            "ci",
            "--audit",
            "--project",
            w.project.to_str().unwrap(),
            "--report-dir",
            dir.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            // (`--noproxy ''`: through the proxy even for localhost, which
            // the job's NO_PROXY names.)
            &format!("curl -s -m 20 --noproxy '' http://localhost:{port}/"),
        ])
        .timeout(Duration::from_secs(90))
        .run();
    out.assert_success().assert_stdout_contains(ALLOWED_BODY);
    let conns = events(&dir, "connection");
    assert!(
        conns
            .iter()
            .any(|c| c["host"] == "localhost" && c["decision"] == "observed"),
        "{conns:?}\n{}",
        out.dump()
    );
    let suggested = w
        .vetto(&[
            "policy",
            "suggest",
            dir.join("session.jsonl").to_str().unwrap(),
        ])
        .run();
    suggested
        .assert_success()
        .assert_stdout_contains(&format!("\"localhost:{port}\""))
        .assert_stdout_lacks("mode = \"host\"");
}

/// Runs as an unprivileged user, at FS-ONLY: a process that made itself
/// non-dumpable (as ssh and gpg-agent do) hides its memory and descriptors
/// from a same-uid supervisor, which then cannot decide on its connect: the
/// connect is refused, never let through. Evidence: the same script reaches
/// the address an IP rule allows while dumpable, and not after
/// `PR_SET_DUMPABLE 0`.
#[test]
fn a_non_dumpable_job_cannot_connect_past_the_supervisor_at_fs_only() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let allowed = Server::start(ALLOWED_BODY);
    let a = allowed.port;
    let script = format!(
        "python3 -c \"\nimport ctypes, socket, sys\nif sys.argv[1] == 'hide':\n\
         \x20   ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\ns = socket.socket()\ntry:\n\
         \x20   s.connect(('127.0.0.1', {a})); print(sys.argv[1], 'connected')\n\
         except OSError as e:\n\x20   print(sys.argv[1], 'refused', e.errno)\n\" "
    );
    let out = run_sh(
        &w,
        &["--allow-domain".into(), format!("127.0.0.1:{a}")],
        &format!("{script} show; {script} hide"),
    );
    out.assert_ran()
        .assert_stdout_contains("show connected")
        .assert_stdout_contains("hide refused 1");
}

/// Runs as an unprivileged user: a policy with filtered egress at the
/// SECCOMP tier is refused (125) with the truth — which tiers filter
/// egress and what to pass instead — never run with the network open or
/// silently off.
#[test]
fn filtered_egress_at_the_seccomp_tier_is_refused_with_the_truth() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let out = w
        .sandboxed_at(
            "seccomp",
            &["--allow-domain", "registry.npmjs.org"],
            &["true"],
        )
        .run();
    out.assert_code(125)
        .assert_stderr_contains("FULL and FS-ONLY tiers only")
        .assert_stderr_contains("--tier fs-only or --tier full");
}

/// Runs as an unprivileged user, at FS-ONLY: the same over IPv6 — an IPv6
/// socket's connect to an address a range allows is redirected to the
/// proxy's `[::1]` listener; one to another IPv6 loopback port is refused.
/// Evidence: bare, both servers answer; sandboxed, only the allowed one.
#[test]
fn an_ipv6_connect_is_redirected_or_refused_like_ipv4_at_fs_only() {
    require!(Tier::FsOnly.feature());
    if let Err(e) = TcpListener::bind("[::1]:0") {
        assert!(
            !crate::util::required_by_name("ipv6"),
            "VETTO_TEST_REQUIRE lists ipv6, but the host has no IPv6 loopback: {e}"
        );
        crate::util::skip::say(&crate::util::test_name(), &format!("no IPv6 loopback: {e}"));
        return;
    }
    let w = World::at(Tier::FsOnly);
    let allowed = Server::start_on("[::1]:0", ALLOWED_BODY);
    let denied = Server::start_on("[::1]:0", DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);
    let script = format!(
        "curl -s -m 20 'http://[::1]:{a}/'; echo; curl -s -m 20 'http://[::1]:{d}/'; echo rc=$?"
    );
    w.sh_bare(&script)
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains(DENIED_BODY);
    let out = run_sh(
        &w,
        &["--allow-domain".into(), format!("[::1]:{a}")],
        &script,
    );
    out.assert_ran()
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains("rc=7")
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(denied.hits(), 1, "{}", out.dump());
}

/// The host's own non-loopback address (the one a route out would use),
/// if it has one: a UDP "connect" picks it without sending anything.
fn host_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// [`host_address`], or a visible SKIP (a failure where
/// `VETTO_TEST_REQUIRE` lists `host-address`).
pub(crate) fn host_address_or_skip() -> Option<std::net::IpAddr> {
    let ip = host_address();
    if ip.is_none() {
        assert!(
            !crate::util::required_by_name("host-address"),
            "{}: VETTO_TEST_REQUIRE lists host-address, but the host has none",
            crate::util::test_name()
        );
        crate::util::skip::say(
            &crate::util::test_name(),
            "the host has no non-loopback address",
        );
    }
    ip
}

/// Runs as an unprivileged user, at FULL: a program that ignores the proxy
/// connects to a server on the host's own network address. Evidence: bare
/// it is reached; sandboxed the connect is refused (`ENETUNREACH`: the
/// namespace has no route) and recorded with curl as the process.
#[test]
fn a_direct_connection_to_a_host_address_is_refused_and_recorded_at_full() {
    require!(Tier::Full.feature());
    let Some(ip) = host_address_or_skip() else {
        return;
    };
    let w = World::at(Tier::Full);
    let allowed = Server::start(ALLOWED_BODY);
    let denied = Server::start_on("0.0.0.0:0", DENIED_BODY);
    let url = format!("http://{ip}:{}/", denied.port);
    w.sh_bare(&format!("curl -s -m 10 {url}"))
        .assert_stdout_contains(DENIED_BODY);
    let (opts, dir) = egress_options(&w, allowed.port);
    let out = run_sh(
        &w,
        &opts,
        &format!("curl -s -m 20 --noproxy '*' {url}; echo rc=$?"),
    );
    out.assert_ran()
        .assert_stdout_contains("rc=7")
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(denied.hits(), 1, "{}", out.dump());
    let hits = blocked(&dir, &ip.to_string());
    assert!(
        hits.iter()
            .any(|v| v["process"].to_string().contains("curl")),
        "the refused connect is not recorded with curl\n{hits:?}\n{}",
        out.dump()
    );
    let conns = events(&dir, "connection");
    assert!(
        conns
            .iter()
            .any(|c| c["addr"] == ip.to_string() && c["decision"] == "denied"),
        "{conns:?}"
    );
}

/// Runs as an unprivileged user: domain fronting — a `CONNECT` for the
/// allowed name whose TLS ClientHello names another server — is refused
/// by the proxy, which reads the server name before relaying a byte.
/// Evidence: the same client, through the same `CONNECT`, completes a TLS
/// handshake with the allowed name in its ClientHello, and none with
/// `denied.test` in it.
fn a_connect_whose_tls_server_name_disagrees_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let (server, port) = TlsServer::start(&w);
    let script = PY_FRONTING.replace("{PORT}", &port.to_string());
    let (opts, dir) = egress_options(&w, port);
    let out = run_sh(&w, &opts, &script);
    drop(server);
    out.assert_ran()
        .assert_stdout_contains("allowed.test tls")
        .assert_stdout_contains("denied.test refused");
    let conns = events(&dir, "connection");
    assert!(
        conns
            .iter()
            .any(|c| c["reason"] == "sni-mismatch" && c["decision"] == "denied"),
        "the fronted CONNECT is not refused for its server name\n{conns:?}\n{}",
        out.dump()
    );
}

/// `CONNECT allowed.test:{PORT}` through `$HTTPS_PROXY`, then a TLS
/// handshake naming each server in turn.
const PY_FRONTING: &str = r#"python3 - <<'PY'
import os, socket, ssl, base64, urllib.parse
u = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
auth = base64.b64encode(f'{u.username}:{u.password}'.encode()).decode()
for sni in ['allowed.test', 'denied.test']:
    s = socket.create_connection((u.hostname, u.port), 20)
    s.sendall(f'CONNECT allowed.test:{PORT} HTTP/1.1\r\nHost: allowed.test:{PORT}\r\nProxy-Authorization: Basic {auth}\r\n\r\n'.encode())
    s.recv(4096)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.wrap_socket(s, server_hostname=sni).do_handshake()
        print(sni, 'tls')
    except (OSError, ssl.SSLError) as e:
        print(sni, 'refused', e)
PY"#;
at_every_tier!(a_connect_whose_tls_server_name_disagrees_is_refused);

/// Runs as an unprivileged user: a fronted handshake (a `CONNECT` for the
/// allowed name, a ClientHello naming another) never even opens a
/// connection to the allowed server — the server learns nothing of the
/// attempt, not its timing, not the job's address. Evidence: bare, the same
/// handshake reaches the server; sandboxed, the server accepts nothing for
/// it, and exactly one connection for the handshake that names it. Port 443
/// (a client-first port: vetto waits for the hello however late it comes)
/// on a loopback address of the tier's own.
fn a_fronted_handshake_never_reaches_the_allowed_server(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let ip = match tier {
        Tier::Full => "127.0.0.2",
        _ => "127.0.0.3",
    };
    let server = CountingServer::start(&format!("{ip}:443"));
    w.sh_bare(&format!(
        "python3 - <<'PY'\nimport socket, ssl\ns = socket.create_connection(('{ip}', 443), 20)\n\
         c = ssl.create_default_context()\nc.check_hostname = False\nc.verify_mode = ssl.CERT_NONE\n\
         try:\n    c.wrap_socket(s, server_hostname='denied.test')\nexcept Exception:\n    pass\n\
         print('bare done')\nPY"
    ))
    .assert_stdout_contains("bare done");
    assert!(
        crate::util::eventually(Duration::from_secs(20), || server.accepted() == 1),
        "bare, the handshake does not reach the server"
    );
    let dir = w.root.join("reports");
    let opts = vec![
        "--allow-domain".to_string(),
        "allowed.test:443".into(),
        "--resolve".into(),
        format!("allowed.test:{ip}"),
        "--report-dir".into(),
        dir.to_str().unwrap().into(),
    ];
    let script = PY_FRONTING
        .replace("{PORT}", "443")
        .replace("['allowed.test', 'denied.test']", "['denied.test']");
    let out = run_sh(&w, &opts, &script);
    out.assert_ran()
        .assert_stdout_contains("denied.test refused");
    assert_eq!(
        server.accepted(),
        1,
        "the fronted handshake opened a connection to the allowed server\n{}",
        out.dump()
    );
    let conns = events(&dir, "connection");
    assert!(
        conns.iter().any(|c| c["reason"] == "sni-mismatch"),
        "{conns:?}"
    );
    // The handshake that names the server is dialled (once).
    let script = PY_FRONTING
        .replace("{PORT}", "443")
        .replace("['allowed.test', 'denied.test']", "['allowed.test']");
    let out = run_sh(&w, &opts, &script);
    out.assert_ran();
    assert!(
        crate::util::eventually(Duration::from_secs(20), || server.accepted() == 2),
        "the allowed handshake did not reach the server\n{}",
        out.dump()
    );
}
at_every_tier!(a_fronted_handshake_never_reaches_the_allowed_server);

/// A listener that counts the connections it accepts and closes each.
struct CountingServer {
    count: Arc<AtomicUsize>,
}

impl CountingServer {
    fn start(addr: &str) -> CountingServer {
        let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                drop(s);
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
        CountingServer { count }
    }

    fn accepted(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// Runs as an unprivileged user: `git clone` over HTTP from a local git
/// server (a bare repository served as static files, git's "dumb" HTTP)
/// works through the proxy with only that host allowed, and the same
/// server under a name no rule allows is refused. Evidence: bare, both
/// clones work; sandboxed, only the allowed one.
fn git_clone_reaches_only_the_allowed_git_host(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let srv = w.root.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        cmd_output(
            std::process::Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "init.defaultBranch=main",
                ])
                .args(args)
                .current_dir(dir),
        );
    };
    git(&srv, &["init", "-q", "work"]);
    std::fs::write(srv.join("work/README"), "CLONED-7e11\n").unwrap();
    git(&srv.join("work"), &["add", "README"]);
    git(&srv.join("work"), &["commit", "-qm", "one"]);
    git(&srv, &["clone", "-q", "--bare", "work", "origin.git"]);
    git(&srv.join("origin.git"), &["update-server-info"]);
    let (mut server, port) = python_server(STATIC_SERVER, &srv);
    // Into $TMPDIR: a repository inside the project is refused (nested-repo).
    let script = |name: &str, into: &str| {
        format!(
            "git clone -q http://{name}:{port}/origin.git \"$TMPDIR/{into}\" && cat \"$TMPDIR/{into}/README\"; echo {into}-rc=$?"
        )
    };
    w.sh_bare(&format!(
        "{}; {}",
        script("127.0.0.1", "bare-a"),
        script("localhost", "bare-b")
    ))
    .assert_stdout_contains("bare-a-rc=0")
    .assert_stdout_contains("bare-b-rc=0");

    let (opts, _dir) = egress_options(&w, port);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "{}; {}",
            script("allowed.test", "a"),
            script("denied.test", "d")
        ),
    );
    let _ = server.kill();
    let _ = server.wait();
    out.assert_ran()
        .assert_stdout_contains("CLONED-7e11")
        .assert_stdout_contains("a-rc=0")
        .assert_stdout_lacks("d-rc=0");
}
at_every_tier!(git_clone_reaches_only_the_allowed_git_host);

/// Runs as an unprivileged user, at FULL: an address an IP rule allows is
/// reached without proxy variables — the supervisor sends the job's
/// notified connect to the proxy's redirected listener inside the
/// namespace, and the proxy connects to the address from outside — while
/// another port of the same host stays unreachable. Evidence: bare, both
/// servers answer; sandboxed, only the one the rule names.
#[test]
fn an_ip_rule_is_reached_transparently_and_nothing_next_to_it_at_full() {
    require!(Tier::Full.feature());
    let Some(ip) = host_address_or_skip() else {
        return;
    };
    let w = World::at(Tier::Full);
    let allowed = Server::start_on("0.0.0.0:0", ALLOWED_BODY);
    let denied = Server::start_on("0.0.0.0:0", DENIED_BODY);
    let (a, d) = (allowed.port, denied.port);
    let script = format!(
        "curl -s -m 20 --noproxy '*' http://{ip}:{a}/; echo; curl -s -m 20 --noproxy '*' http://{ip}:{d}/; echo rc=$?"
    );
    w.sh_bare(&script)
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains(DENIED_BODY);
    let dir = w.root.join("reports");
    let out = run_sh(
        &w,
        &[
            "--allow-domain".into(),
            format!("{ip}:{a}"),
            "--report-dir".into(),
            dir.to_str().unwrap().into(),
        ],
        &script,
    );
    out.assert_ran()
        .assert_stdout_contains(ALLOWED_BODY)
        .assert_stdout_contains("rc=7")
        .assert_stdout_lacks(DENIED_BODY);
    assert_eq!(denied.hits(), 1, "{}", out.dump());
    let conns = events(&dir, "connection");
    assert!(
        conns.iter().any(|c| c["via"] == "redirect"
            && c["decision"] == "allowed"
            && c["process"].to_string().contains("curl")),
        "{conns:?}"
    );
}

/// A local npm registry stand-in on the host's loopback: `vetto-canary`
/// 1.0.0 (its `index.js` exports [`NPM_CANARY`]), a packument whose
/// tarball URL names the host the request was sent to, and the tarball,
/// under `w.root/registry`. The caller kills the child.
pub fn npm_registry(w: &World) -> (std::process::Child, u16) {
    let srv = w.root.join("registry");
    let pkg = w.root.join("pkgsrc");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"vetto-canary","version":"1.0.0","description":"x","license":"MIT"}"#,
    )
    .unwrap();
    std::fs::write(
        pkg.join("index.js"),
        format!("module.exports = '{NPM_CANARY}';\n"),
    )
    .unwrap();
    std::fs::create_dir_all(srv.join("vetto-canary/-")).unwrap();
    cmd_output(
        std::process::Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(srv.join("vetto-canary/-"))
            .current_dir(&pkg)
            .env("npm_config_cache", w.root.join("npm-cache-build")),
    );
    python_server(
        "import http.server, functools, sys, json, hashlib, os\n\
             root = sys.argv[1]\n\
             class H(http.server.SimpleHTTPRequestHandler):\n\
             \x20   def do_GET(self):\n\
             \x20       if self.path.rstrip('/') == '/vetto-canary':\n\
             \x20           host = self.headers['Host']\n\
             \x20           tgz = open(os.path.join(root, 'vetto-canary/-/vetto-canary-1.0.0.tgz'), 'rb').read()\n\
             \x20           doc = {'name': 'vetto-canary', 'dist-tags': {'latest': '1.0.0'}, 'versions': {'1.0.0': {'name': 'vetto-canary', 'version': '1.0.0', 'dist': {'tarball': f'http://{host}/vetto-canary/-/vetto-canary-1.0.0.tgz', 'shasum': hashlib.sha1(tgz).hexdigest()}}}}\n\
             \x20           body = json.dumps(doc).encode()\n\
             \x20           self.send_response(200)\n\
             \x20           self.send_header('Content-Type', 'application/json')\n\
             \x20           self.send_header('Content-Length', str(len(body)))\n\
             \x20           self.end_headers()\n\
             \x20           self.wfile.write(body)\n\
             \x20       else:\n\
             \x20           super().do_GET()\n\
             s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(H, directory=root))\n\
             print(s.server_port, flush=True)\n\
             s.serve_forever()",
        &srv,
    )
}

/// What the npm stand-in's package exports.
pub const NPM_CANARY: &str = "PACKED-3b9c";

/// Runs as an unprivileged user: `npm pack` of a package from a local
/// registry stand-in (a packument and a tarball served as static files),
/// with only that registry allowed, works through the proxy; the same
/// registry under a name no rule allows is refused. Evidence: bare, both
/// work; sandboxed, only the allowed one.
fn npm_pack_reaches_only_the_allowed_registry(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let (mut server, port) = npm_registry(&w);
    let script = |name: &str, into: &str| {
        format!(
            "mkdir -p \"$TMPDIR/{into}\" && cd \"$TMPDIR/{into}\" && \
             npm_config_cache=\"$TMPDIR/npm-cache-{into}\" npm pack --silent --registry http://{name}:{port}/ vetto-canary >/dev/null 2>&1 \
             && tar -xzOf vetto-canary-1.0.0.tgz package/index.js; echo {into}-rc=$?; cd /"
        )
    };
    w.sh_bare(&script("127.0.0.1", "bare"))
        .assert_stdout_contains("PACKED-3b9c");
    let (opts, _dir) = egress_options(&w, port);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "{}; {}",
            script("allowed.test", "a"),
            script("denied.test", "d")
        ),
    );
    let _ = server.kill();
    let _ = server.wait();
    out.assert_ran()
        .assert_stdout_contains("PACKED-3b9c")
        .assert_stdout_contains("a-rc=0")
        .assert_stdout_lacks("d-rc=0");
}
at_every_tier!(npm_pack_reaches_only_the_allowed_registry);

/// A local package index stand-in on the host's loopback: a PEP 503
/// "simple" index (`/simple/vetto-canary/`) and the wheel [`PIP_WHEEL`]
/// (its `vetto_canary.py` holds [`PIP_CANARY`]) served as static files
/// from `w.root/pypi`. The caller kills the child.
pub fn pip_index(w: &World) -> (std::process::Child, u16) {
    let srv = w.root.join("pypi");
    std::fs::create_dir_all(srv.join("simple/vetto-canary")).unwrap();
    std::fs::create_dir_all(srv.join("files")).unwrap();
    let wheel = PIP_WHEEL;
    cmd_output(
        std::process::Command::new("python3")
            .args([
                "-c",
                "import zipfile, sys\n\
                 with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
                 \x20   z.writestr('vetto_canary.py', 'CANARY = \"%s\"\\n' % sys.argv[2])\n\
                 \x20   z.writestr('vetto_canary-1.0.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: vetto-canary\\nVersion: 1.0.0\\n')\n\
                 \x20   z.writestr('vetto_canary-1.0.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
                 \x20   z.writestr('vetto_canary-1.0.0.dist-info/RECORD', '')\n",
            ])
            .arg(srv.join("files").join(wheel))
            .arg(PIP_CANARY),
    );
    std::fs::write(
        srv.join("simple/vetto-canary/index.html"),
        format!("<html><body><a href=\"../../files/{wheel}\">{wheel}</a></body></html>\n"),
    )
    .unwrap();
    python_server(STATIC_SERVER, &srv)
}

/// The pip stand-in's one wheel, and what its module holds.
pub const PIP_WHEEL: &str = "vetto_canary-1.0.0-py3-none-any.whl";
pub const PIP_CANARY: &str = "WHEEL-81f0";

/// Runs as an unprivileged user: `pip download` from a local package index
/// stand-in (a PEP 503 "simple" index and a wheel served as static files),
/// with only that index allowed, works through the proxy; the same index
/// under a name no rule allows is refused. Evidence: bare, the download
/// works; sandboxed, only from the allowed name.
fn pip_download_reaches_only_the_allowed_index(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let wheel = PIP_WHEEL;
    let (mut server, port) = pip_index(&w);
    let script = |name: &str, into: &str| {
        format!(
            "python3 -m pip download -q --no-cache-dir --disable-pip-version-check --no-deps \
             --index-url http://{name}:{port}/simple/ --trusted-host {name} -d \"$TMPDIR/{into}\" vetto-canary >/dev/null 2>&1 \
             && python3 -c \"import zipfile,sys; print(zipfile.ZipFile(sys.argv[1]).read('vetto_canary.py').decode())\" \"$TMPDIR/{into}/{wheel}\"; \
             echo {into}-rc=$?"
        )
    };
    w.sh_bare(&script("127.0.0.1", "bare"))
        .assert_stdout_contains("WHEEL-81f0");
    let (opts, _dir) = egress_options(&w, port);
    let out = run_sh(
        &w,
        &opts,
        &format!(
            "{}; {}",
            script("allowed.test", "a"),
            script("denied.test", "d")
        ),
    );
    let _ = server.kill();
    let _ = server.wait();
    out.assert_ran()
        .assert_stdout_contains("WHEEL-81f0")
        .assert_stdout_contains("a-rc=0")
        .assert_stdout_lacks("d-rc=0");
}
at_every_tier!(pip_download_reaches_only_the_allowed_index);

/// A static file server of `dir` on the host's loopback, for registry
/// stand-ins: `python_server(STATIC_SERVER, dir)`.
const STATIC_SERVER: &str = "import http.server, functools, sys\n\
             h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n\
             s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n\
             print(s.server_port, flush=True)\n\
             s.serve_forever()";

/// Start `script` (which prints its port, then serves `dir`) and read the
/// port; the caller kills the child.
fn python_server(script: &str, dir: &std::path::Path) -> (std::process::Child, u16) {
    let mut server = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (server, line.trim().parse().unwrap())
}
