//! Network egress when the network is off (the default): TCP and UDP to a
//! listener the test runs on loopback, which stands for any server.

use std::io::{ErrorKind, Read};
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use crate::require;
use crate::util::{Feature, World};

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
/// listener accepts the probe's line; sandboxed, `connect` is refused with
/// EPERM and the listener accepts nothing.
#[test]
fn tcp_connect_to_loopback_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
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

        w.probe_sandboxed(&["connect-tcp", &addr]).assert_blocked();
        assert_eq!(
            accepted(l),
            Vec::<String>::new(),
            "a sandboxed connection reached {addr}"
        );
    }
    w.probe_bare(&["socket-inet"]).assert_ok();
    w.probe_sandboxed(&["socket-inet"]).assert_blocked();
}

/// Runs as an unprivileged user: the same with the tools a job would use
/// (`curl`, python's socket module), which must fail without reaching the
/// listener.
#[test]
fn tcp_connect_with_ordinary_tools_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
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

/// Runs as an unprivileged user: send a UDP datagram to 127.0.0.1 (DNS
/// tunnelling, syslog, statsd…). Evidence: bare, it arrives; sandboxed,
/// it is refused and nothing arrives.
#[test]
fn udp_send_to_loopback_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
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
    p.assert_blocked();
    match sock.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("a sandboxed datagram arrived: {other:?}\n{}", p.out.dump()),
    }
}

/// Runs as an unprivileged user: with `--net host` said explicitly, the
/// same connection reaches the listener (the network switch is real, and
/// the blocks above come from `--net off`).
#[test]
fn net_host_allows_loopback_connections() {
    require!(Feature::FsOnly);
    let w = World::new();
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
