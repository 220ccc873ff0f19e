//! Kernel interfaces a build never needs and an exploit often does. Each
//! probe uses arguments that make an allowed call fail harmlessly with a
//! distinctive errno (EBADF/EFAULT/ENOENT), so "blocked" (EPERM) is told
//! apart from "allowed" without side effects.

use crate::require;
use crate::util::{Feature, World};

fn blocked_inside_allowed_outside(action: &str) {
    let w = World::new();
    w.probe_bare(&[action]).assert_allowed();
    w.probe_sandboxed(&[action]).assert_blocked();
}

/// Runs as an unprivileged user: `mount("tmpfs")` (bare: ENOENT on the
/// missing target; sandboxed: EPERM before the target is looked at).
#[test]
fn mount_is_blocked() {
    require!(Feature::FsOnly);
    blocked_inside_allowed_outside("mount-tmpfs");
}

/// Runs as an unprivileged user: `bpf(BPF_OBJ_GET_INFO_BY_FD, -1)`.
#[test]
fn bpf_is_blocked() {
    require!(Feature::FsOnly);
    blocked_inside_allowed_outside("bpf");
}

/// Runs as an unprivileged user: `perf_event_open(NULL, …)`.
#[test]
fn perf_event_open_is_blocked() {
    require!(Feature::FsOnly);
    blocked_inside_allowed_outside("perf-event-open");
}

/// Runs as an unprivileged user: `keyctl(KEYCTL_GET_KEYRING_ID)` (the
/// kernel keyring holds session keys and tokens of other tools).
#[test]
fn keyctl_is_blocked() {
    require!(Feature::FsOnly);
    blocked_inside_allowed_outside("keyctl");
}

/// Runs as an unprivileged user: `ioctl(TIOCSTI)`, which pushes input into
/// the terminal the job shares with the developer's shell.
#[test]
fn tiocsti_is_blocked() {
    require!(Feature::FsOnly);
    blocked_inside_allowed_outside("tiocsti");
}
