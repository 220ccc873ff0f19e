//! Bypassing the seccomp filter through another syscall ABI: x32 numbers
//! (native number | 0x40000000) and i386 `int 0x80` (other numbers, other
//! `AUDIT_ARCH`). A filter that matches native numbers only lets them pass.

use crate::require;
use crate::util::{Feature, World};

/// Runs as an unprivileged user: `socket(AF_INET)` through the x32 ABI,
/// which the network-off filter must stop. Evidence: sandboxed, the call
/// fails (EPERM, ENOSYS or SIGSYS) — never a socket. Bare, it works when
/// the kernel has x32 (CONFIG_X86_X32_ABI); many kernels do not, and then
/// the bare half only shows that there is nothing to bypass.
#[test]
fn x32_syscall_bypass_is_blocked() {
    require!(Feature::FsOnly);
    require!(Feature::X86_64);
    let w = World::new();
    let bare = w.probe_bare(&["x32-syscall"]);
    if !bare.ok() {
        eprintln!(
            "NOTE {}: this kernel has no x32 ABI ({}); the bare half is vacuous",
            crate::util::test_name(),
            bare.error()
        );
    }
    let p = w.probe_sandboxed(&["x32-syscall"]);
    p.out.assert_ran();
    assert!(
        !p.ok(),
        "an x32 socket() got through the filter: {}\n{}",
        p.json,
        p.out.dump()
    );
}

/// Runs as an unprivileged user: `socket(AF_INET)` through `int 0x80`.
/// Evidence: bare, a socket is created (IA32 emulation); sandboxed, the
/// call is refused (EPERM/ENOSYS) or the probe is killed by the filter (SIGSYS).
#[test]
fn i386_syscall_bypass_is_blocked() {
    require!(Feature::FsOnly);
    require!(Feature::X86_64);
    let w = World::new();
    let bare = w.probe_bare(&["i386-syscall"]);
    if !bare.ok() {
        crate::require_attack_possible!("i386-syscall", bare);
    }
    // The filter answers foreign-ABI calls with ENOSYS (docs/tiers.md):
    // the bare half proved the call exists, so ENOSYS here is the filter.
    w.probe_sandboxed(&["i386-syscall"])
        .assert_blocked_with(&["EPERM", "EACCES", "ENOSYS"]);
}
