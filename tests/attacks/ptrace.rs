//! Attaching to a process outside the sandbox (same uid): ptrace and
//! `process_vm_readv` read its memory, tokens included.

use crate::require;
use crate::util::{Feature, World};

/// Runs as an unprivileged user: `ptrace(PTRACE_SEIZE)` a `sleep` the test
/// started as the same user. Evidence: bare, the attach succeeds;
/// sandboxed, EPERM, and the sleep keeps running untraced.
#[test]
fn ptrace_of_outside_process_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
    let victim = w.outside_sleep(&[]);
    let pid = victim.pid().to_string();
    w.probe_bare(&["ptrace-attach", &pid]).assert_ok();
    // The bare tracer exited, which detached it.
    let p = w.probe_sandboxed(&["ptrace-attach", &pid]);
    p.assert_blocked();
    assert!(victim.alive(), "the victim died\n{}", p.out.dump());
}

/// Runs as an unprivileged user: `process_vm_readv` from the same `sleep`.
/// Evidence: bare, bytes are read; sandboxed, EPERM.
#[test]
fn process_vm_readv_of_outside_process_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
    let victim = w.outside_sleep(&[]);
    let pid = victim.pid().to_string();
    let bare = w.probe_bare(&["process-vm-read", &pid]);
    bare.assert_ok();
    w.probe_sandboxed(&["process-vm-read", &pid])
        .assert_blocked();
}
