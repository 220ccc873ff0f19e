//! io_uring: its submissions are not seen by seccomp, so a job with a ring
//! could open, connect and write past the filter.

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: `io_uring_setup`. Evidence: bare, a ring
/// is created; sandboxed, EPERM.
fn io_uring_setup_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bare = w.probe_bare(&["io-uring"]);
    if !bare.ok() {
        // kernel.io_uring_disabled: nothing to contain on this host.
        crate::require_attack_possible!("io_uring", bare);
    }
    w.probe_sandboxed(&["io-uring"]).assert_blocked();
}
at_every_tier!(io_uring_setup_is_blocked);
