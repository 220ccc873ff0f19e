//! Kernel interfaces a build never needs and an exploit often does. Each
//! probe uses arguments that make an allowed call fail harmlessly with a
//! distinctive errno (EBADF/EFAULT/ENOENT), so "blocked" (EPERM) is told
//! apart from "allowed" without side effects.

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

fn blocked_inside_allowed_outside(tier: Tier, action: &str) {
    let w = World::at(tier);
    w.probe_bare(&[action]).assert_allowed();
    w.probe_sandboxed(&[action]).assert_blocked();
}

/// Runs as an unprivileged user: `mount("tmpfs")` (bare: ENOENT on the
/// missing target; sandboxed: EPERM before the target is looked at).
fn mount_is_blocked(tier: Tier) {
    require!(tier.feature());
    blocked_inside_allowed_outside(tier, "mount-tmpfs");
}
at_every_tier!(mount_is_blocked);

/// Runs as an unprivileged user: `bpf(BPF_OBJ_GET_INFO_BY_FD, -1)`.
fn bpf_is_blocked(tier: Tier) {
    require!(tier.feature());
    blocked_inside_allowed_outside(tier, "bpf");
}
at_every_tier!(bpf_is_blocked);

/// Runs as an unprivileged user: `perf_event_open(NULL, …)`.
fn perf_event_open_is_blocked(tier: Tier) {
    require!(tier.feature());
    blocked_inside_allowed_outside(tier, "perf-event-open");
}
at_every_tier!(perf_event_open_is_blocked);

/// Runs as an unprivileged user: `keyctl(KEYCTL_GET_KEYRING_ID)` (the
/// kernel keyring holds session keys and tokens of other tools).
fn keyctl_is_blocked(tier: Tier) {
    require!(tier.feature());
    blocked_inside_allowed_outside(tier, "keyctl");
}
at_every_tier!(keyctl_is_blocked);

/// Runs as an unprivileged user: `ioctl(TIOCSTI)`, which pushes input into
/// the terminal the job shares with the developer's shell.
fn tiocsti_is_blocked(tier: Tier) {
    require!(tier.feature());
    blocked_inside_allowed_outside(tier, "tiocsti");
}
at_every_tier!(tiocsti_is_blocked);

/// Runs as an unprivileged user: the kernel's count of the job's seccomp
/// filters. Every call the job makes runs each installed filter, so vetto
/// loads one whatever the plan's actions (`EPERM`, `ENOSYS`, notified).
/// Evidence: bare, no filter; sandboxed, exactly one.
fn the_job_runs_under_one_seccomp_filter(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let count = "grep '^Seccomp_filters:' /proc/self/status";
    w.sh_bare(count)
        .assert_success()
        .assert_stdout_contains("Seccomp_filters:\t0");
    w.sh_sandboxed(count)
        .assert_success()
        .assert_stdout_contains("Seccomp_filters:\t1");
}
at_every_tier!(the_job_runs_under_one_seccomp_filter);
