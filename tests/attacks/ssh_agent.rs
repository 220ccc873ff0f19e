//! Using the developer's ssh-agent (or docker socket): a pathname unix
//! socket outside the project signs or runs whatever the job asks.
//! Landlock does not cover `connect(2)` on pathname sockets.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

use crate::util::{Tier, World, user};
use crate::{at_every_tier, require};

const AGENT_REPLY: &str = "CANARY-agent-identity-8c1d";

/// An agent stand-in: bound where the test says, answers every client.
fn agent_at(path: &Path) -> UnixListener {
    let l = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    if user().drop_from_root {
        std::os::unix::fs::chown(path, Some(user().uid), Some(user().gid)).unwrap();
    }
    l.set_nonblocking(true).unwrap();
    l
}

/// How many clients connected; each gets the canary reply.
fn serve(l: &UnixListener) -> usize {
    let mut n = 0;
    loop {
        match l.accept() {
            Ok((mut s, _)) => {
                n += 1;
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut buf = Vec::new();
                let _ = s.read_to_end(&mut buf);
                let _ = s.write_all(AGENT_REPLY.as_bytes());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Runs as an unprivileged user: `SSH_AUTH_SOCK` points at an agent
/// stand-in in a temp dir outside the project, passed on purpose with
/// `--env-pass SSH_AUTH_SOCK`. Evidence: bare, the probe connects (the
/// listener accepts); sandboxed, nothing is accepted: at FS-ONLY `connect`
/// is refused, at FULL the socket is not in the job's view (ENOENT).
fn connecting_to_ssh_agent_socket_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let sock = w.outside.join("agent.sock");
    let l = agent_at(&sock);
    let path = sock.to_str().unwrap();

    // The bare probe blocks in read until the agent answers: serve concurrently.
    let server = std::thread::spawn({
        let l = l.try_clone().unwrap();
        move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut n = 0;
            while n == 0 && std::time::Instant::now() < deadline {
                n = serve(&l);
                std::thread::sleep(Duration::from_millis(10));
            }
            n
        }
    });
    let bare = w.probe_bare(&["connect-unix", path]);
    assert_eq!(
        server.join().unwrap(),
        1,
        "control: the agent stand-in saw no client"
    );
    bare.assert_ok();

    let p = w.probe_sandboxed_with(&["--env-pass", "SSH_AUTH_SOCK"], &["connect-unix", path]);
    let clients = serve(&l);
    // At FULL the socket is not even in the sandbox's view.
    match tier {
        Tier::FsOnly => p.assert_blocked(),
        Tier::Full | Tier::FullCreationsAfter => p.assert_blocked_with(&["ENOENT"]),
    };
    assert_eq!(
        clients,
        0,
        "a sandboxed client reached the agent\n{}",
        p.out.dump()
    );

    // The same through the variable, as ssh-add would find it.
    let out = w
        .sandboxed_with(&["--env-pass", "SSH_AUTH_SOCK"], &["python3", "-c", "import os, socket; s = socket.socket(socket.AF_UNIX); s.connect(os.environ['SSH_AUTH_SOCK']); s.sendall(b'x'); print(s.recv(100))"])
        .env("SSH_AUTH_SOCK", &sock)
        .run();
    out.assert_ran().assert_no_leak(AGENT_REPLY);
    assert_eq!(serve(&l), 0, "python reached the agent\n{}", out.dump());
}
at_every_tier!(connecting_to_ssh_agent_socket_is_blocked);
