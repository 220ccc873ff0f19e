//! A test suite's own servers on loopback, with the network off or
//! filtered (issue P11): an HTTP test server on port 0, a Node app under
//! test, the IPv6 probe urllib3 makes at import. At FULL the job's network
//! namespace is its own; at FS-ONLY its TCP sockets are made in vetto's
//! namespace that leads nowhere, where the proxy listens too. Either way the job's loopback is the job's: the host's
//! loopback services stay out of reach, and a connection anywhere else is
//! refused and recorded.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Python's `http.server` on `127.0.0.1:0` and on `[::1]:0`, fetched with
/// urllib, after importing urllib3 (pip's copy), whose import binds a
/// socket to `::1` to see whether IPv6 works.
const PY_SERVER: &str = r#"python3 - <<'PY'
import http.server, socket, threading, urllib.request
from pip._vendor import urllib3
print("urllib3 ipv6:", urllib3.util.connection.HAS_IPV6)
class V6(http.server.HTTPServer):
    address_family = socket.AF_INET6
for cls, host, url in [(http.server.HTTPServer, "127.0.0.1", "127.0.0.1"), (V6, "::1", "[::1]")]:
    srv = cls((host, 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    body = urllib.request.urlopen(f"http://{url}:{srv.server_address[1]}/served.txt", timeout=20).read()
    print("python", host, body.decode().strip())
    srv.shutdown()
PY"#;

/// Node's `http.createServer().listen(0)` (every address), fetched on
/// `127.0.0.1`.
const NODE_SERVER: &str = r#"node -e "
const http = require('http');
const srv = http.createServer((q, r) => r.end('node-served')).listen(0, () => {
  http.get({host: '127.0.0.1', port: srv.address().port}, r => {
    let b = ''; r.on('data', d => b += d); r.on('end', () => { console.log('node', b); srv.close(); });
  });
});""#;

/// Runs as an unprivileged user, `vetto ci` with no flags (the network
/// off): a test suite's servers on loopback work and the verdict is clean.
/// Evidence: the same script bare prints the same; before issue P11, at
/// FS-ONLY the first `socket()` was refused and recorded.
fn a_test_suites_loopback_servers_work_with_the_network_off(tier: Tier) {
    loopback_servers_work(tier, &[]);
}

/// Runs as an unprivileged user, with filtered egress (`--allow-domain`,
/// as a preset chosen for the project gives): the same test suite's
/// servers work and the verdict is clean. Evidence: before, at FS-ONLY
/// the job's TCP sockets were the host's and Landlock refused their
/// `bind()` (`EACCES`), so the suite failed and was recorded.
fn a_test_suites_loopback_servers_work_with_filtered_egress(tier: Tier) {
    loopback_servers_work(
        tier,
        &[
            "--allow-domain",
            "allowed.test:443",
            "--resolve",
            "allowed.test:192.0.2.7",
        ],
    );
}

/// Python's and Node's servers on loopback, bare and under `vetto ci`
/// with `options`: the same output, `CLEAN`, no violation.
fn loopback_servers_work(tier: Tier, options: &[&str]) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(&w.project.join("served.txt"), "served-from-loopback\n");
    let script = format!("{PY_SERVER}\n{NODE_SERVER}");
    let expect = [
        "urllib3 ipv6: True",
        "python 127.0.0.1 served-from-loopback",
        "python ::1 served-from-loopback",
        "node node-served",
    ];
    let bare = w.sh_bare(&script);
    for e in expect {
        bare.assert_stdout_contains(e);
    }
    let (out, log) = w.ci_sh_with(options, &script);
    for e in expect {
        out.assert_stdout_contains(e);
    }
    out.assert_stderr_contains("CLEAN");
    assert_eq!(out.code(), 0, "{}", out.dump());
    let violations: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"type\":\"violation\""))
        .collect();
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
}

/// A listener of the host's (the test runner's) that counts connections.
struct HostService {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl HostService {
    fn start() -> HostService {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                drop(s);
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        HostService { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Runs as an unprivileged user, the network off: a job that reaches for
/// a service on the host's loopback (a database, a docker API on TCP, a
/// language server) finds none — the job's loopback is its own — and both
/// that connect (a service of the host's listens there, none of the
/// job's) and a connection to any other address are refused and recorded
/// with the process. Evidence: bare, the same connect reaches the host's
/// service.
fn the_hosts_loopback_services_stay_out_of_reach_with_the_network_off(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let host = HostService::start();
    let script = format!(
        "python3 - <<'PY'\nimport socket\nfor addr in [('127.0.0.1', {}), ('192.0.2.1', 80)]:\n    \
         try:\n        socket.create_connection(addr, 10).close(); print('reached', addr[0])\n    \
         except OSError as e:\n        print('refused', addr[0], e.errno)\nPY",
        host.port
    );
    w.sh_bare(&script)
        .assert_stdout_contains("reached 127.0.0.1");
    assert!(
        crate::util::eventually(std::time::Duration::from_secs(20), || host.accepted() == 1),
        "bare, the host's service is not reached"
    );
    let (out, log) = w.ci_sh(&script);
    out.assert_stdout_contains("refused 127.0.0.1 111")
        .assert_stdout_contains("refused 192.0.2.1");
    assert_eq!(
        host.accepted(),
        1,
        "the job reached the host's service\n{}",
        out.dump()
    );
    let port = format!("\"port\":{}", host.port);
    for to in [["192.0.2.1", "\"port\":80"], ["127.0.0.1", &port]] {
        assert!(
            log.lines().any(|l| l.contains("\"type\":\"violation\"")
                && to.iter().all(|t| l.contains(t))
                && l.contains("python3")),
            "the connect to {to:?} is not recorded with the process\n{log}\n{}",
            out.dump()
        );
    }
}

at_every_tier!(
    a_test_suites_loopback_servers_work_with_the_network_off,
    a_test_suites_loopback_servers_work_with_filtered_egress,
    the_hosts_loopback_services_stay_out_of_reach_with_the_network_off
);

/// A host service at `ip` that answers each connection with a line.
fn banner_service(ip: &str) -> (u16, Arc<AtomicUsize>) {
    use std::io::Write;
    let l = TcpListener::bind((ip, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let _ = s.write_all(b"host-service-banner\n");
        }
    });
    (port, accepted)
}

/// Runs as an unprivileged user: a CI `services:` database on the host's
/// loopback, reached by a client that ignores the proxy variables (psql,
/// a JDBC or Go driver: a plain socket here), with one allow rule — by
/// address (`127.0.0.1:PORT`, `[::1]:PORT`) or by name (`localhost:PORT`)
/// — at both tiers, recorded as a connection with the process. Evidence:
/// without the rule the same client is refused, the refusal is recorded
/// with the process, and the service sees nothing.
fn a_host_service_on_loopback_is_reached_with_one_allow_rule(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let (port, accepted) = banner_service("127.0.0.1");
    let (port6, accepted6) = banner_service("::1");
    let client = |host: &str, port: u16| {
        format!(
            "python3 -c \"import socket; s = socket.create_connection(('{host}', {port}), 10); \
             print('got', s.makefile().readline().strip())\" 2>&1 || echo refused"
        )
    };
    let (out, log) = w.ci_sh(&client("127.0.0.1", port));
    out.assert_stdout_contains("refused");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "{}", out.dump());
    assert!(
        log.lines().any(|l| l.contains("\"net-egress-blocked\"")
            && l.contains(&format!("\"port\":{port}"))
            && l.contains("python3")),
        "the refused connect is not named\n{log}\n{}",
        out.dump()
    );
    for (rule, host, port) in [
        (format!("127.0.0.1:{port}"), "127.0.0.1", port),
        (format!("localhost:{port}"), "localhost", port),
        (format!("[::1]:{port6}"), "::1", port6),
    ] {
        let dir = w.root.join(format!("reports-{host}"));
        let out = w
            .sandboxed_with(
                &[
                    "--allow-domain",
                    &rule,
                    "--report-dir",
                    dir.to_str().unwrap_or_default(),
                ],
                &["sh", "-c", &client(host, port)],
            )
            .run();
        out.assert_stdout_contains("got host-service-banner");
        let log = std::fs::read_to_string(dir.join("session.jsonl")).unwrap_or_default();
        assert!(
            log.lines().any(|l| l.contains("\"type\":\"connection\"")
                && l.contains("\"decision\":\"allowed\"")
                && l.contains(&format!("\"port\":{port}"))
                && l.contains("python3")),
            "the connection is not recorded with the process\n{log}\n{}",
            out.dump()
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(accepted6.load(Ordering::SeqCst), 1);
}
at_every_tier!(a_host_service_on_loopback_is_reached_with_one_allow_rule);

/// A job's dev server, kept up until the test writes `done` in the
/// project: Python's `http.server` on the job's `127.0.0.1:3000`.
const DEV_SERVER: &str = "python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 & S=$!; \
     i=0; while [ ! -e done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
     kill $S; wait $S 2>/dev/null; echo job-done";

/// `GET /served.txt` at `at`: the body, if anything answered.
fn fetch(at: std::net::SocketAddr) -> Option<String> {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect_timeout(&at, std::time::Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    s.write_all(b"GET /served.txt HTTP/1.0\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// A host port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// Runs as an unprivileged user, the network off: `--publish HOST:3000`
/// makes the job's dev server reachable from the host's loopback (the
/// developer's browser, a later CI step) and each outside connection is
/// recorded; the same port is not reachable at the host's network
/// address, and without the rule the job's server faces nothing outside.
/// Evidence: bare, the server is reached directly on 3000; sandboxed,
/// only through the published port.
fn a_published_port_reaches_the_jobs_dev_server_from_the_hosts_loopback(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(&w.project.join("served.txt"), "served-through-publish\n");
    let port = free_port();
    let project = w.project.to_str().unwrap_or_default().to_string();
    let spec = format!("{port}:3000");
    let mut args = vec!["ci", "--tier", w.tier.name(), "--project", &project];
    args.extend_from_slice(w.tier.options());
    args.extend_from_slice(&["--publish", &spec, "--", "sh", "-c", DEV_SERVER]);
    let mut job = w
        .vetto(&args)
        .timeout(std::time::Duration::from_secs(120))
        .spawn();
    let at = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut got = None;
    let reached = crate::util::eventually(std::time::Duration::from_secs(60), || {
        got = fetch(at).filter(|b| b.contains("served-through-publish"));
        got.is_some()
    });
    // The job's own port is not the host's.
    let direct = fetch(std::net::SocketAddr::from(([127, 0, 0, 1], 3000)))
        .is_some_and(|b| b.contains("served-through-publish"));
    let outside = crate::attacks::egress::host_address_or_skip()
        .and_then(|ip| fetch(std::net::SocketAddr::new(ip, port)));
    w.write(&w.project.join("done"), "");
    let out = job.wait();
    assert!(reached, "the published port never answered\n{}", out.dump());
    assert!(
        !direct,
        "the job's port 3000 is reachable on the host's loopback"
    );
    assert!(
        outside.is_none(),
        "the published port answers at the host's network address: {outside:?}"
    );
    out.assert_stdout_contains("job-done")
        .assert_stderr_contains(&format!("publishing 127.0.0.1:{port}"));
    assert_eq!(out.code(), 0, "{}", out.dump());
    let log =
        std::fs::read_to_string(w.project.join("vetto-report/session.jsonl")).unwrap_or_default();
    assert!(
        log.lines().any(|l| l.contains("\"via\":\"published\"")
            && l.contains("\"port\":3000")
            && l.contains("from 127.0.0.1:")),
        "the outside connection is not recorded\n{log}"
    );
}

/// Runs as an unprivileged user: a published port with the host's network
/// (whose listeners are the host's already) is refused before anything
/// runs, naming the rule; a malformed one is an error naming what was
/// expected.
#[test]
fn a_publish_rule_that_cannot_hold_is_refused_before_the_job_runs() {
    let w = World::at(Tier::FsOnly);
    let out = w
        .sandboxed_with(&["--publish", "3000", "--net", "host"], &["echo", "ran"])
        .run();
    assert_eq!(out.code(), 125, "{}", out.dump());
    out.assert_stdout_lacks("ran")
        .assert_stderr_contains("[network] publish 127.0.0.1:3000");
    let out = w
        .sandboxed_with(&["--publish", "80:80:80:80"], &["echo", "ran"])
        .run();
    assert_ne!(out.code(), 0, "{}", out.dump());
    out.assert_stdout_lacks("ran")
        .assert_stderr_contains("expected `[HOST_ADDR:]HOST_PORT[:JOB_PORT]`");
}

at_every_tier!(a_published_port_reaches_the_jobs_dev_server_from_the_hosts_loopback);

/// A UDP echo on the job's loopback: a datagram to a bound socket and the
/// answer back (a DNS or StatsD test server, a game's test harness).
const UDP_ECHO: &str = r#"python3 - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(10)
c.sendto(b"ping", s.getsockname())
data, peer = s.recvfrom(100)
s.sendto(data.upper(), peer)
print("udp echo", c.recvfrom(100)[0].decode())
PY"#;

/// Runs as an unprivileged user, with the network off and with filtered
/// egress: a UDP echo on loopback works and the verdict is clean. At
/// FS-ONLY both sockets are made in the namespace that leads nowhere.
fn a_udp_echo_on_loopback_works(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare(UDP_ECHO).assert_stdout_contains("udp echo PING");
    for options in [
        &[][..],
        &[
            "--allow-domain",
            "allowed.test:443",
            "--resolve",
            "allowed.test:192.0.2.7",
        ][..],
    ] {
        let (out, log) = w.ci_sh_with(options, UDP_ECHO);
        out.assert_stdout_contains("udp echo PING");
        assert_eq!(out.code(), 0, "{options:?}\n{}", out.dump());
        assert!(
            !log.contains("\"type\":\"violation\""),
            "{options:?}\n{log}\n{}",
            out.dump()
        );
    }
}
at_every_tier!(a_udp_echo_on_loopback_works);

/// Runs as an unprivileged user: session A publishes its dev server at the
/// host's every address (`0.0.0.0:HOST_PORT:3000`, asked for): reached at
/// the host's network address. Session B's job (the network off) reaches
/// neither A's published port — a service of the host's, refused and
/// recorded with the process — nor A's listener on 3000 (its own
/// namespace is another).
fn a_published_port_faces_only_the_address_named_and_no_other_sessions_job(tier: Tier) {
    require!(tier.feature());
    let a = World::at(tier);
    a.write(&a.project.join("served.txt"), "served-through-publish\n");
    let port = free_port();
    let project = a.project.to_str().unwrap_or_default().to_string();
    let spec = format!("0.0.0.0:{port}:3000");
    let mut args = vec!["ci", "--tier", a.tier.name(), "--project", &project];
    args.extend_from_slice(a.tier.options());
    args.extend_from_slice(&["--publish", &spec, "--", "sh", "-c", DEV_SERVER]);
    let mut job = a
        .vetto(&args)
        .timeout(std::time::Duration::from_secs(120))
        .spawn();
    let up = crate::util::eventually(std::time::Duration::from_secs(60), || {
        fetch(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .is_some_and(|b| b.contains("served-through-publish"))
    });
    let outside = crate::attacks::egress::host_address_or_skip()
        .map(|ip| fetch(std::net::SocketAddr::new(ip, port)));
    let b = World::at(tier);
    let probe = format!(
        "python3 - <<'PY'\nimport socket\nfor p in ({port}, 3000):\n    try:\n        \
         socket.create_connection(('127.0.0.1', p), 5).close(); print('reached', p)\n    \
         except OSError as e:\n        print('refused', p, e.errno)\nPY"
    );
    let (other, log) = b.ci_sh(&probe);
    a.write(&a.project.join("done"), "");
    let out = job.wait();
    assert!(up, "the published port never answered\n{}", out.dump());
    if let Some(outside) = outside {
        assert!(
            outside.is_some_and(|b| b.contains("served-through-publish")),
            "asked for, the published port is not reached at the host's address"
        );
    }
    other
        .assert_stdout_contains(&format!("refused {port} 111"))
        .assert_stdout_contains("refused 3000 111");
    assert!(
        log.lines().any(|l| l.contains("\"net-egress-blocked\"")
            && l.contains(&format!("\"port\":{port}"))
            && l.contains("python3")),
        "session B's reach for the published port is not recorded\n{log}\n{}",
        other.dump()
    );
    assert_eq!(out.code(), 0, "{}", out.dump());
}
at_every_tier!(a_published_port_faces_only_the_address_named_and_no_other_sessions_job);
