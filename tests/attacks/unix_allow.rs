//! `[network] unix = [...]`: the one socket the user names (a podman
//! socket, an ssh-agent passed on purpose) is reachable, and only that
//! one: a second socket next to it stays refused. Without the rule the
//! named socket is refused too.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::util::{Tier, World, user};
use crate::{at_every_tier, require};

const NAMED_REPLY: &str = "CANARY-named-socket-5e2a";
const OTHER_REPLY: &str = "CANARY-other-socket-91fd";

/// The job's client: connect, send, print what comes back (or the errno).
const CLIENT: &str = "import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print('REFUSED', e.errno)
    sys.exit(3)
s.sendall(b'hello')
s.shutdown(socket.SHUT_WR)
print(s.recv(100).decode())";

/// A listener outside the project that answers every client with `reply`,
/// served in a thread until dropped; counts its clients.
struct Listener {
    path: PathBuf,
    clients: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    fn start(path: PathBuf, reply: &'static str) -> Listener {
        let l = UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        if user().drop_from_root {
            std::os::unix::fs::chown(&path, Some(user().uid), Some(user().gid)).unwrap();
        }
        l.set_nonblocking(true).unwrap();
        let clients = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (clients, stop) = (Arc::clone(&clients), Arc::clone(&stop));
            move || {
                while !stop.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            clients.fetch_add(1, Ordering::Relaxed);
                            s.set_nonblocking(false).unwrap();
                            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                            let mut buf = Vec::new();
                            let _ = s.read_to_end(&mut buf);
                            let _ = s.write_all(reply.as_bytes());
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) => panic!("accept: {e}"),
                    }
                }
            }
        });
        Listener {
            path,
            clients,
            stop,
            thread: Some(thread),
        }
    }

    fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `unix-socket-denied` violations in the session log that name `path`.
fn denied(dir: &Path, path: &str) -> usize {
    std::fs::read_to_string(dir.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["type"] == "violation"
                && v["rule"] == "unix-socket-denied"
                && v["target"].to_string().contains(path)
        })
        .count()
}

/// Runs as an unprivileged user, with two socket servers in a directory
/// outside the project and outside `/tmp` (FULL's private `/tmp` would
/// allow a socket the policy binds there by its path alone). Evidence: bare, the job's client reaches the named
/// socket and gets its canary; sandboxed without a rule it does not (at
/// FS-ONLY refused, at FULL absent from the view; recorded as
/// `unix-socket-denied` at both); with `[network] unix = [that path]` in a
/// policy file it gets the canary, while the second socket next to it
/// stays unreached and is recorded.
fn only_the_unix_socket_the_policy_names_is_reached(tier: Tier) {
    require!(tier.feature());
    let w = World::at_in(tier, Path::new("/var/tmp"));
    let named = Listener::start(w.outside.join("named.sock"), NAMED_REPLY);
    let other = Listener::start(w.outside.join("other.sock"), OTHER_REPLY);
    let client = |opts: &[&str], path: &str| {
        w.sandboxed_with(opts, &["python3", "-c", CLIENT, path])
            .timeout(Duration::from_secs(90))
            .run()
    };

    let bare = w.bare(&["python3", "-c", CLIENT, named.path()]).run();
    bare.assert_success().assert_stdout_contains(NAMED_REPLY);
    assert_eq!(named.clients(), 1, "control: the server saw no client");

    // No rule: refused.
    let reports = w.root.join("reports-none");
    let none = client(&["--report-dir", reports.to_str().unwrap()], named.path());
    none.assert_ran().assert_stdout_lacks(NAMED_REPLY);
    none.assert_stdout_contains("REFUSED");
    assert_eq!(
        named.clients(),
        1,
        "reached without a rule\n{}",
        none.dump()
    );
    assert_eq!(denied(&reports, named.path()), 1, "{}", none.dump());

    // The rule names it: reached.
    let policy = w.root.join("unix.toml");
    std::fs::write(
        &policy,
        format!("[network]\nunix = [\"{}\"]\n", named.path()),
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    let allowed = client(&["--policy", policy], named.path());
    allowed.assert_success().assert_stdout_contains(NAMED_REPLY);
    assert_eq!(named.clients(), 2, "{}", allowed.dump());
    // The same from the command line.
    let flag = client(&["--allow-unix", named.path()], named.path());
    flag.assert_success().assert_stdout_contains(NAMED_REPLY);
    assert_eq!(named.clients(), 3, "{}", flag.dump());

    // The socket next to it: still refused, and recorded.
    let reports = w.root.join("reports-other");
    let next = client(
        &[
            "--policy",
            policy,
            "--report-dir",
            reports.to_str().unwrap(),
        ],
        other.path(),
    );
    next.assert_ran().assert_stdout_lacks(OTHER_REPLY);
    next.assert_stdout_contains("REFUSED");
    assert_eq!(other.clients(), 0, "{}", next.dump());
    assert_eq!(denied(&reports, other.path()), 1, "{}", next.dump());
}
at_every_tier!(only_the_unix_socket_the_policy_names_is_reached);

/// A rule naming a path where no socket is (yet) is refused (125) with the
/// rule's place in the file, rather than allowing whatever binds there later.
#[test]
fn a_unix_rule_without_a_socket_is_refused() {
    let w = World::new();
    let missing = w.outside.join("nothing.sock");
    let policy = w.root.join("unix.toml");
    std::fs::write(
        &policy,
        format!("[network]\nunix = [\"{}\"]\n", missing.display()),
    )
    .unwrap();
    let out = w
        .sandboxed_with(&["--policy", policy.to_str().unwrap()], &["true"])
        .run();
    out.assert_code(125)
        .assert_stderr_contains("unix.toml:2:9")
        .assert_stderr_contains("nothing is there");
}
