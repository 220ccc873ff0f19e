//! Sending to a host daemon's datagram socket (`/dev/log`, the journal, a
//! systemd notify socket …) outside the project: `sendto()` names the path
//! itself, so no `connect()` reaches the broker. A datagram socket cannot
//! be created at all in the sandbox — including `SOCK_RAW`, which the
//! kernel quietly turns into `SOCK_DGRAM` for unix sockets.

use std::os::unix::net::UnixDatagram;

use crate::util::{Tier, World, user};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: a datagram socket of the test, bound
/// outside the project, stands for a host daemon. The job sends to it from
/// a `SOCK_DGRAM` and from a `SOCK_RAW` unix socket. Evidence: bare, both
/// datagrams arrive; sandboxed, none does (FS-ONLY refuses the sockets, at
/// FULL the path is not in the view either).
fn sending_to_a_host_datagram_socket_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let path = w.outside.join("daemon.sock");
    let daemon = UnixDatagram::bind(&path).unwrap();
    daemon.set_nonblocking(true).unwrap();
    if user().drop_from_root {
        std::os::unix::fs::chown(&path, Some(user().uid), Some(user().gid)).unwrap();
    }
    let script = format!(
        "import socket\n\
         for kind in (socket.SOCK_DGRAM, 3):\n\
         \x20   try:\n\
         \x20       socket.socket(socket.AF_UNIX, kind).sendto(b'kind%d' % kind, '{}')\n\
         \x20       print('sent', kind)\n\
         \x20   except OSError as e:\n\
         \x20       print('refused', kind, e.errno)\n",
        path.display()
    );
    let received = || {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n) = daemon.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        got
    };

    w.sh_bare(&format!("python3 -c \"{script}\""))
        .assert_stdout_contains("sent 2")
        .assert_stdout_contains("sent 3");
    assert_eq!(
        received(),
        vec!["kind2", "kind3"],
        "control: both datagrams arrive bare"
    );

    let out = w.sh_sandboxed(&format!("python3 -c \"{script}\""));
    out.assert_ran()
        .assert_stdout_contains("refused 2")
        .assert_stdout_contains("refused 3");
    assert!(
        received().is_empty(),
        "a datagram left the sandbox\n{}",
        out.dump()
    );
}
at_every_tier!(sending_to_a_host_datagram_socket_is_blocked);
