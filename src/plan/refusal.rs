//! Why a tier cannot run a policy, in words that say how to accept less.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Tier;

/// A kernel feature a rule needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelFeature {
    /// Landlock at this ABI version or newer.
    LandlockAbi(u8),
    UserNamespaces,
    Seccomp,
    SeccompUserNotify,
    /// A capability vetto has not built for this tier yet.
    NotImplemented,
    /// Windows' AppContainer (`--tier appcontainer`).
    AppContainer,
    /// A listening unix socket at the path a rule names (not a kernel
    /// feature: the host's state when the session starts).
    UnixSocket,
    /// macOS's Seatbelt sandbox (`sandbox_init`).
    Seatbelt,
}

impl fmt::Display for KernelFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelFeature::LandlockAbi(v) => write!(f, "Landlock ABI {v}"),
            KernelFeature::UserNamespaces => f.write_str("unprivileged user namespaces"),
            KernelFeature::Seccomp => f.write_str("seccomp filters"),
            KernelFeature::SeccompUserNotify => {
                f.write_str("seccomp user notification (Linux 5.19+)")
            }
            KernelFeature::NotImplemented => f.write_str("support in this vetto version"),
            KernelFeature::AppContainer => f.write_str("Windows AppContainer"),
            KernelFeature::UnixSocket => f.write_str("a unix socket at that path"),
            KernelFeature::Seatbelt => f.write_str("macOS Seatbelt (sandbox_init)"),
        }
    }
}

/// A refusal: exit 125 and this text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub tier: Option<Tier>,
    /// The rule that cannot be enforced, as written with its origin.
    pub rule: String,
    pub missing: KernelFeature,
    /// What the host reported about the feature.
    pub detail: String,
    /// How to accept less (or fix the host).
    pub hint: String,
}

impl std::error::Error for Refusal {}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tier {
            Some(t) => write!(f, "cannot run at tier {t}: ")?,
            None => write!(f, "cannot run: ")?,
        }
        write!(f, "{} needs {}", self.rule, self.missing)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        write!(f, "\nhint: {}", self.hint)
    }
}
