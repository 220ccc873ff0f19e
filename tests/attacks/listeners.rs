//! A listener of the job never faces anything but loopback (issue P9,
//! item 4). Bare, `listen()` on a socket nobody bound makes the kernel
//! bind it to `0.0.0.0:<ephemeral>` — a server the host's whole network
//! reaches. Sandboxed, the job's sockets live in a network namespace
//! that only its own processes reach (FULL's; at FS-ONLY, vetto's that
//! leads nowhere, issue P11).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::util::{self, Tier, World};
use crate::{at_every_tier, require};

/// Listens without binding; writes `refused ERRNO` or the port to
/// `listen.out` (renamed into place, so never seen half-written), then
/// waits a few seconds for one peer.
const LISTEN_UNBOUND: &str = "import os, socket, sys
def say(what):
    # Whole or not at all: the test reads the file as soon as it exists.
    with open('listen.out.tmp', 'w') as f:
        f.write(what)
    os.rename('listen.out.tmp', 'listen.out')
s = socket.socket()
try:
    s.listen()
except OSError as e:
    say('refused %d' % e.errno)
    sys.exit(0)
s.settimeout(4)
say(str(s.getsockname()[1]))
try:
    s.accept()
    print('a peer got in', flush=True)
except socket.timeout:
    print('no peer', flush=True)
";

/// Whether an outside peer reaches `port` at the host's own address.
fn outside_peer_reaches(ip: std::net::IpAddr, port: u16) -> bool {
    TcpStream::connect_timeout(&SocketAddr::new(ip, port), Duration::from_secs(2)).is_ok()
}

/// Runs as an unprivileged user, with filtered egress (`--allow-domain`).
/// Bare, a job's `listen()` on an unbound socket is reached by a peer at
/// the host's network address. Sandboxed, it listens in a namespace the
/// host's address does not lead to (FULL: the sandbox's own; FS-ONLY: the
/// one vetto makes the job's sockets in): the peer is refused.
fn listen_without_bind_never_faces_the_hosts_network(tier: Tier) {
    never_faces_the_hosts_network(tier, LISTEN_UNBOUND);
}

/// Runs as an unprivileged user, with filtered egress: a job's server
/// bound to every address (`0.0.0.0`, `::`) is reached bare by a peer at
/// the host's network address; sandboxed it binds every address of its
/// own namespace only, and the peer is refused.
fn bind_to_every_address_never_faces_the_hosts_network(tier: Tier) {
    let every = "s = socket.socket()\ns.bind(('0.0.0.0', 0))";
    let every6 = "s = socket.socket(socket.AF_INET6)\ns.bind(('::', 0))";
    for bound in [every, every6] {
        never_faces_the_hosts_network(tier, &LISTEN_UNBOUND.replace("s = socket.socket()", bound));
    }
}

/// Bare, the listener `script` makes is reached at the host's address;
/// sandboxed (filtered egress) it is not.
fn never_faces_the_hosts_network(tier: Tier, script: &str) {
    require!(tier.feature());
    let Some(ip) = super::egress::host_address_or_skip() else {
        return;
    };
    let wait_for = |w: &World| {
        let out = w.project.join("listen.out");
        assert!(
            util::eventually(Duration::from_secs(20), || out.exists()),
            "the job never listened nor was refused"
        );
        util::read(&out).unwrap_or_default()
    };

    let bare = World::at(tier);
    let mut job = bare.bare(&["python3", "-c", script]).spawn();
    let port: u16 = wait_for(&bare).parse().expect("bare listen gives a port");
    assert!(
        outside_peer_reaches(ip, port),
        "control: the bare listener is not reachable at {ip}:{port}"
    );
    job.wait().assert_stdout_contains("a peer got in");

    let w = World::at(tier);
    let report = w.root.join("reports");
    let mut job = w
        .sandboxed_with(
            &[
                "--allow-domain",
                "allowed.test:443",
                "--resolve",
                "allowed.test:127.0.0.1",
                "--report-dir",
                report.to_str().unwrap_or_default(),
            ],
            &["python3", "-c", script],
        )
        .spawn();
    let said = wait_for(&w);
    let port: u16 = said.parse().expect("a port");
    assert!(
        !outside_peer_reaches(ip, port),
        "the sandbox's listener is reachable at {ip}:{port}"
    );
    job.wait().assert_stdout_contains("no peer");
}
at_every_tier!(
    listen_without_bind_never_faces_the_hosts_network,
    bind_to_every_address_never_faces_the_hosts_network
);

/// Runs as an unprivileged user, with filtered egress: a unix socket
/// server in `$TMPDIR` (a test suite's own) still listens and is reached
/// from inside the job, at both tiers.
fn a_unix_socket_server_of_the_job_still_listens(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = "import socket, os
p = os.path.join(os.environ['TMPDIR'], 's')
srv = socket.socket(socket.AF_UNIX)
srv.bind(p)
srv.listen()
c = socket.socket(socket.AF_UNIX)
c.connect(p)
a, _ = srv.accept()
c.sendall(b'over unix')
print(a.recv(64).decode(), flush=True)
";
    w.sandboxed_with(
        &[
            "--allow-domain",
            "allowed.test:443",
            "--resolve",
            "allowed.test:127.0.0.1",
        ],
        &["python3", "-c", script],
    )
    .run()
    .assert_success()
    .assert_stdout_contains("over unix");
}
at_every_tier!(a_unix_socket_server_of_the_job_still_listens);
