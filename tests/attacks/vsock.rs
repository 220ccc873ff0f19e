//! `AF_VSOCK` does not go through a network namespace: from any namespace
//! a vsock socket reaches the hypervisor's host (CID 2) and other VMs of
//! a cloud runner — an egress past FULL's empty namespace, with the
//! network off (issue P9: escapes found by attacking egress).

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Connects to the hypervisor's host (CID 2) and prints what happened.
const VSOCK_TO_HOST: &str = "import socket
try:
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
except OSError as e:
    print('socket refused', e.errno); raise SystemExit
s.settimeout(3)
try:
    s.connect((2, 1024)); print('reached the host')
except ConnectionResetError:
    print('reached the host (reset)')
except OSError as e:
    print('connect failed', e.errno)
";

/// Runs as an unprivileged user, the network off. Bare, a vsock connect
/// reaches the hypervisor's host (it answers, if only with a reset).
/// Sandboxed, at both tiers, the vsock `socket()` is refused and recorded
/// as `net-socket-denied` with the process. Where the host has no vsock
/// transport (not a VM, or no vsock device) the attack is not possible:
/// a visible SKIP.
fn a_vsock_socket_never_reaches_the_hypervisor_host(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bare = w.run_bare(&["python3", "-c", VSOCK_TO_HOST]);
    if !bare.stdout().contains("reached the host") {
        assert!(
            !crate::util::required_by_name("vsock"),
            "{}: VETTO_TEST_REQUIRE lists vsock, but bare: {}",
            crate::util::test_name(),
            bare.dump()
        );
        crate::util::skip::say(
            &crate::util::test_name(),
            &format!(
                "this host's vsock does not reach a hypervisor bare: {}",
                bare.stdout().trim()
            ),
        );
        return;
    }
    let (out, log) = w.ci_sh(&format!(
        "python3 -c \"{}\"",
        VSOCK_TO_HOST.replace('"', "\\\"")
    ));
    out.assert_stdout_contains("socket refused");
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        log.lines()
            .any(|l| l.contains("\"net-socket-denied\"") && l.contains("python")),
        "the refused vsock socket is not recorded with its process:\n{log}"
    );
}
at_every_tier!(a_vsock_socket_never_reaches_the_hypervisor_host);
