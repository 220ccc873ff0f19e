//! What this host can enforce, as plain data. Only [`probe`] asks the kernel.

use serde::{Deserialize, Serialize};

mod probe;

pub use probe::probe;

/// A feature that is either there or missing for a stated reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "reason")]
pub enum Availability {
    Available,
    /// Missing, with the reason and (where known) the fix.
    Missing(String),
}

impl Availability {
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }
}

/// Kernel facts that decide which tiers can run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCaps {
    /// `uname -r`.
    pub kernel: String,
    /// `uname -m`.
    pub arch: String,
    /// Landlock ABI version, 0 when Landlock is unavailable.
    pub landlock_abi: u8,
    /// Why Landlock is unavailable (when `landlock_abi == 0`).
    pub landlock_missing: Option<String>,
    pub userns: Availability,
    pub seccomp: Availability,
    /// `SECCOMP_RET_USER_NOTIF` with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`.
    pub seccomp_notify: Availability,
}

impl HostCaps {
    /// A host with every feature, for plan tests.
    pub fn everything() -> Self {
        HostCaps {
            kernel: "6.18.0".into(),
            arch: "x86_64".into(),
            landlock_abi: 7,
            landlock_missing: None,
            userns: Availability::Available,
            seccomp: Availability::Available,
            seccomp_notify: Availability::Available,
        }
    }
}
