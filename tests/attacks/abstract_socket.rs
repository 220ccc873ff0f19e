//! Abstract unix sockets (`@name`) have no file, so path rules cannot
//! cover them; D-Bus, X11 and many agents listen on them. Landlock ABI 6
//! scopes them to the sandbox's own domain.

use std::io::{ErrorKind, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::time::Duration;

use crate::util::{Tier, World, unique_sleep_arg};
use crate::{at_every_tier, require};

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
                let _ = s.write_all(b"abstract-reply");
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Runs as an unprivileged user: connect to an abstract socket the test
/// listens on. Evidence: bare, the listener accepts; sandboxed, `connect`
/// fails and nothing is accepted.
fn connecting_to_abstract_unix_socket_outside_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let name = format!("vetto-test-{}", unique_sleep_arg());
    let l =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    l.set_nonblocking(true).unwrap();

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
    w.probe_bare(&["abstract-connect", &name]).assert_ok();
    assert_eq!(server.join().unwrap(), 1, "control: no bare client arrived");

    let p = w.probe_sandboxed(&["abstract-connect", &name]);
    let n = serve(&l);
    // At FULL the name does not exist in the sandbox's network namespace:
    // refused (ECONNREFUSED) or denied, never delivered.
    match tier {
        Tier::FsOnly => p.assert_blocked(),
        Tier::Full | Tier::FullCreationsAfter => {
            p.assert_blocked_with(&["EPERM", "EACCES", "ECONNREFUSED"])
        }
    };
    assert_eq!(
        n,
        0,
        "a sandboxed client reached the abstract socket\n{}",
        p.out.dump()
    );
}
at_every_tier!(connecting_to_abstract_unix_socket_outside_is_blocked);
