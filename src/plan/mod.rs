//! `Policy × HostCaps × TierRequest → Plan | Refusal`. Pure: no syscalls
//! except the read-only directory listings that carving needs (behind
//! [`fs::FsView`], so tests can fake them).
//!
//! The plan is inert data that the child-side setup interprets without
//! making any decision of its own; `vetto doctor` and `vetto policy explain`
//! print the same plan the child applies.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::policy::{Limits, NetPolicy};

pub mod appcontainer;
pub mod env;
pub mod fs;
pub mod memory;
pub mod mounts;
pub mod net;
pub mod notify;
pub mod refusal;
pub mod seatbelt;
pub mod syscalls;
pub mod terminal;

mod build;
mod job;

pub use crate::tier::{Tier, TierRequest};
pub use build::{BuildOptions, build};
pub use refusal::{KernelFeature, Refusal};

/// Everything the child applies and the supervisor enforces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub tier: Tier,
    /// The per-session temporary directory vetto creates on the host (and
    /// removes afterwards); `None` at FULL, whose /tmp is private.
    pub session_tmp: Option<PathBuf>,
    /// FULL tier: namespaces and the new root; `None` below FULL.
    pub namespaces: Option<mounts::NamespacePlan>,
    /// Landlock rules; `None` at the SECCOMP tier.
    pub landlock: Option<fs::LandlockPlan>,
    /// The seccomp filter as data.
    pub seccomp: syscalls::SeccompPlan,
    /// What the supervisor decides through seccomp user notification.
    pub notify: fs::NotifyPlan,
    /// Directories created before the job starts (so Landlock can grant them).
    pub prepare_dirs: Vec<PathBuf>,
    /// Host directories shared by every process (`/dev/shm`) that the job
    /// may write below FULL: entries it leaves there are removed when the
    /// session ends, so nothing planted there outlives it.
    pub scrub_dirs: Vec<PathBuf>,
    pub env: env::EnvPlan,
    pub net: NetPolicy,
    /// Filtered egress: how the proxy is made the only way out (`None`
    /// unless the policy's network mode is `allow`).
    #[serde(default)]
    pub egress: Option<net::EgressPlan>,
    pub limits: Limits,
    /// `--max-memory`: what holds it (`None`: no limit).
    #[serde(default)]
    pub memory: Option<memory::MemoryPlan>,
    /// Working directory of the job.
    pub cwd: PathBuf,
    /// Rules this tier does not enforce; non-empty only with `--allow-degraded`.
    pub degraded: Vec<String>,
    /// The SEATBELT tier (macOS): the profile the stage applies, its paths
    /// already the real ones Seatbelt matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seatbelt: Option<seatbelt::SeatbeltProfile>,
    /// `check_creations = "after"` in force (FULL): no creation is
    /// notified, and these paths, which the policy keeps read-only but no
    /// mount could (not there at the start, or a link), are checked after
    /// the session instead (`persistence-planted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_after: Option<Vec<PathBuf>>,
    /// `[network] publish`: the job's loopback ports the session makes
    /// reachable on the host (FULL, and FS-ONLY where the job's sockets
    /// come from the namespace that leads nowhere; refused elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<crate::policy::Publish>,
    /// `[process] daemons`: programs whose outliving the command is
    /// recorded as expected (they are killed all the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_daemons: Vec<crate::policy::ExpectedDaemon>,
}

#[cfg(test)]
mod tests;
