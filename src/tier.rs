//! The tier ladder. `Ord` is strength: `Seccomp < Seatbelt < FsOnly < Full`
//! (Seatbelt, macOS's only tier, reads broadly: weaker than FS-ONLY).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// seccomp only: no filesystem isolation.
    Seccomp,
    /// macOS: a Seatbelt profile (writes scoped, reads broad, network and
    /// Mach lookups restricted). Never offered on Linux.
    Seatbelt,
    /// Landlock + seccomp, no namespaces.
    FsOnly,
    /// Landlock + user/mount/net/pid namespaces + seccomp.
    Full,
}

impl Tier {
    /// Linux's tiers, strongest first (`--tier auto`'s order there).
    pub const ALL: [Tier; 3] = [Tier::Full, Tier::FsOnly, Tier::Seccomp];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Seccomp => "seccomp",
            Tier::Seatbelt => "seatbelt",
            Tier::FsOnly => "fs-only",
            Tier::Full => "full",
        }
    }
}

/// The job's loopback is its own (FULL: its namespace; FS-ONLY: the one
/// its sockets are made in): a connect to a port where none of its
/// servers listens is refused by the kernel, as a test suite's own
/// wait-for-port loop is. Where a service of the host's listens at that
/// port the connect is recorded; where nothing listens anywhere it
/// reached nothing and is not.
const LOOPBACK_UNOBSERVED: &str = "a connection to a loopback port where nothing listens, in the sandbox or on the host (it reached nothing)";

impl Tier {
    /// The attempts this tier refuses without vetto seeing them, so that a
    /// clean verdict is never read as "none attempted" (issue P10, item 7).
    /// Every report names them.
    /// [`Tier::unobserved`] in one short line, for a clean session's
    /// terminal (the reports keep the whole list).
    pub fn unobserved_short(self) -> &'static str {
        match self {
            Tier::Full => "reads outside its view, connects to closed loopback ports",
            Tier::FsOnly => {
                "reads Landlock refuses (masked secrets included), writes into existing files, connects to closed loopback ports"
            }
            Tier::Seccomp => "any file access",
            Tier::Seatbelt => "file accesses the profile refuses",
        }
    }

    pub fn unobserved(self) -> &'static [&'static str] {
        match self {
            Tier::Full => &[
                "a read of a path outside the sandbox's view, or a write into an existing file there opened without O_CREAT (it does not exist there)",
                LOOPBACK_UNOBSERVED,
            ],
            Tier::FsOnly => &[
                "a read Landlock refuses, masked secrets included",
                "a write into an existing file outside the writable paths, opened without O_CREAT",
                LOOPBACK_UNOBSERVED,
            ],
            Tier::Seccomp => &["any file access: this tier isolates no files"],
            Tier::Seatbelt => &["a file access the Seatbelt profile refuses"],
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(Tier::Full),
            "fs-only" => Ok(Tier::FsOnly),
            "seccomp" => Ok(Tier::Seccomp),
            "seatbelt" => Ok(Tier::Seatbelt),
            other => Err(format!(
                "unknown tier `{other}`; expected one of: full, fs-only, seccomp"
            )),
        }
    }
}

/// What the user asked for with `--tier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TierRequest {
    /// The strongest tier the host offers that enforces the whole policy.
    #[default]
    Auto,
    /// Exactly this tier, or a refusal.
    Exactly(Tier),
    /// The experimental Windows AppContainer backend (off the Linux
    /// ladder: it is not stronger or weaker than a Linux tier, it is
    /// another platform's). Refused until it is built.
    AppContainer,
}

impl FromStr for TierRequest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(TierRequest::Auto),
            "appcontainer" => Ok(TierRequest::AppContainer),
            _ => s.parse().map(TierRequest::Exactly).map_err(|_| {
                format!(
                    "unknown tier `{s}`; expected one of: auto, full, fs-only, seccomp, appcontainer"
                )
            }),
        }
    }
}
