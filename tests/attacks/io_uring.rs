//! io_uring: its submissions are not seen by seccomp, so a job with a ring
//! could open, connect and write past the filter.

use crate::require;
use crate::util::{Feature, World};

/// Runs as an unprivileged user: `io_uring_setup`. Evidence: bare, a ring
/// is created; sandboxed, EPERM.
#[test]
fn io_uring_setup_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
    let bare = w.probe_bare(&["io-uring"]);
    if !bare.ok() {
        // kernel.io_uring_disabled: nothing to contain on this host.
        crate::require_attack_possible!("io_uring", bare);
    }
    w.probe_sandboxed(&["io-uring"]).assert_blocked();
}
