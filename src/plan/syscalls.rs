//! The seccomp filter as data: which syscalls (with which arguments) get
//! which action. `sandbox::linux::seccomp` compiles it; nothing is decided there.

use serde::{Deserialize, Serialize};

/// What happens to a matching syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Fail with `EPERM`: the program sees "operation not permitted" and can degrade.
    Deny,
    /// Fail with `ENOSYS`: for calls whose arguments BPF cannot inspect
    /// (`clone3`, `openat2`); libc falls back to the inspectable variant.
    Unsupported,
    /// Ask the supervisor (seccomp user notification).
    Notify,
}

/// A comparison on one syscall argument (all must hold for the rule to match).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgCheck {
    /// `arg[index] == value`
    Eq { index: u8, value: u64 },
    /// `arg[index] != value`
    Ne { index: u8, value: u64 },
    /// `arg[index] & mask != 0`
    AnyBits { index: u8, mask: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallRule {
    /// The syscall name as in `<asm/unistd.h>` (`io_uring_setup`).
    pub name: String,
    pub action: Action,
    /// All must match; empty means always.
    pub when: Vec<ArgCheck>,
    /// Why, for `vetto doctor`/`policy explain` and reports.
    pub why: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompPlan {
    /// Rules; a syscall may have several (any matching rule applies, the
    /// strongest action wins: `Deny` > `Unsupported` > `Notify`).
    pub rules: Vec<SyscallRule>,
}
