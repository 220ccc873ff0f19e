//! The SECCOMP tier (no filesystem isolation, accepted by name with
//! `--allow-degraded`) still applies the whole syscall filter: run the
//! syscall attacks there too, even on a host that offers more (the filter
//! must not silently depend on Landlock being present).

use std::net::TcpListener;

use crate::require;
use crate::util::{Feature, World};

/// Runs as an unprivileged user: io_uring, `socket(AF_INET)`, a TCP
/// connect to a loopback listener, ptrace of an outside process, a new
/// user namespace, mount, bpf, perf_event_open, keyctl and TIOCSTI at
/// `--tier seccomp`. Evidence: each is allowed bare, here, right before
/// (an attempt the host itself refuses — io_uring disabled, no user
/// namespaces — is left out and said so, or fails under
/// `VETTO_TEST_REQUIRE`), and blocked at the tier; the listener accepts
/// only the bare connection.
#[test]
fn seccomp_tier_blocks_the_syscall_attacks() {
    require!(Feature::SeccompNotify);
    let w = World::new();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let victim = w.outside_sleep(&[]);
    let pid = victim.pid().to_string();
    for action in [
        vec!["io-uring"],
        vec!["socket-inet"],
        vec!["connect-tcp", &addr],
        vec!["ptrace-attach", &pid],
        vec!["unshare-user"],
        vec!["mount-tmpfs"],
        vec!["bpf"],
        vec!["perf-event-open"],
        vec!["keyctl"],
        vec!["tiocsti"],
    ] {
        let bare = w.probe_bare(&action);
        let host_refuses = match action[0] {
            "io-uring" => (!bare.ok()).then_some("io_uring"),
            "unshare-user" => (!bare.ok()).then_some("userns"),
            _ => None,
        };
        if let Some(feature) = host_refuses {
            assert!(
                !crate::util::required_by_name(feature),
                "VETTO_TEST_REQUIRE lists {feature}, but the host refuses it: {}",
                bare.describe()
            );
            eprintln!(
                "NOTE seccomp tier: {} not tried, the host refuses it too",
                action[0]
            );
            continue;
        }
        bare.assert_allowed();
        w.probe_sandboxed_at("seccomp", &["--allow-degraded"], &action)
            .assert_blocked();
    }
    l.set_nonblocking(true).unwrap();
    assert!(
        l.accept().is_ok(),
        "control: the bare connection did not arrive"
    );
    assert!(l.accept().is_err(), "a connection reached the listener");
    assert!(victim.alive());
}
