//! What this host can enforce, as plain data. Only [`probe`] asks the kernel;
//! everything here is pure, so `plan` and `vetto doctor` reason about fake
//! hosts in tests exactly as about the real one.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::tier::Tier;

mod probe;

pub use probe::{WAIT_KILLABLE_RECV_SINCE, confirm, probe, probe_tested};

/// A feature that is either there or missing for a stated reason.
///
/// A reason may end in `; fix: …` (how to get the feature); `vetto doctor`
/// prints that part on its own line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "reason")]
pub enum Availability {
    Available,
    /// Missing, with the reason and (where known) the fix.
    Missing(String),
}

impl Availability {
    /// A fact this vetto's log or JSON did not record (older versions).
    pub fn not_probed() -> Self {
        Availability::Missing("not probed".into())
    }

    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    pub fn is_missing(&self) -> bool {
        !self.is_available()
    }

    /// The reason when missing.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Availability::Available => None,
            Availability::Missing(why) => Some(why),
        }
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
    /// `/dev/fuse`, for the FULL tier's secret traps.
    #[serde(default = "Availability::not_probed")]
    pub fuse: Availability,
    /// Landlock errata bitmask: fixes this kernel carries (0 before Linux 6.15).
    #[serde(default)]
    pub landlock_errata: u32,
    /// vetto runs with effective uid 0.
    #[serde(default)]
    pub root: bool,
    /// What already confines vetto itself.
    #[serde(default)]
    pub confinement: Confinement,
    /// `userns` and `seccomp_notify` were confirmed (or refuted) by test
    /// children that did what the tiers do; `vetto run` skips this to stay fast.
    #[serde(default)]
    pub tested: bool,
    /// Whether vetto can give a job a cgroup v2 with a memory limit.
    #[serde(default = "CgroupMemory::not_probed")]
    pub cgroup_memory: CgroupMemory,
    /// macOS's Seatbelt sandbox, the SEATBELT tier's one mechanism
    /// (recorded only where it is available: never on Linux).
    #[serde(
        default = "Availability::not_probed",
        skip_serializing_if = "Availability::is_missing"
    )]
    pub seatbelt: Availability,
}

/// A delegated cgroup v2 subtree with the memory controller, writable by
/// vetto (a container with a cgroup namespace, a `Delegate=yes` unit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "detail")]
pub enum CgroupMemory {
    Delegated {
        /// vetto's own cgroup directory.
        dir: std::path::PathBuf,
        /// vetto must move itself into a leaf first (its cgroup's
        /// children do not have the memory controller yet).
        move_supervisor: bool,
    },
    Unavailable(String),
}

impl CgroupMemory {
    pub fn not_probed() -> Self {
        CgroupMemory::Unavailable("not probed".into())
    }
}

/// What already restricts the vetto process (a container, an outer sandbox).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// vetto runs under a seccomp filter (`Seccomp: 2` in /proc/self/status).
    pub seccomp_filter: bool,
    /// `no_new_privs` is already set on vetto.
    pub no_new_privs: bool,
    /// vetto runs in a user namespace other than the initial one.
    pub user_namespace: bool,
    /// A container runtime's marker, e.g. `docker` or `podman`.
    pub container: Option<String>,
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
            fuse: Availability::Available,
            landlock_errata: 0,
            root: false,
            confinement: Confinement::default(),
            tested: false,
            cgroup_memory: CgroupMemory::not_probed(),
            seatbelt: Availability::not_probed(),
        }
    }

    /// The kernel release as a number, when it starts like `6.8.0`.
    pub fn kernel_version(&self) -> Option<KernelVersion> {
        KernelVersion::parse(&self.kernel)
    }

    /// Landlock as an [`Availability`] (ABI ≥ 1).
    pub fn landlock(&self) -> Availability {
        if self.landlock_abi >= 1 {
            Availability::Available
        } else {
            Availability::Missing(
                self.landlock_missing
                    .clone()
                    .unwrap_or_else(|| "Landlock is not available".into()),
            )
        }
    }

    /// Whether the host has `feature`, with the reason when not.
    pub fn feature(&self, feature: HostFeature) -> Availability {
        match feature {
            HostFeature::Landlock => self.landlock(),
            HostFeature::UserNamespaces => self.userns.clone(),
            HostFeature::Seccomp => self.seccomp.clone(),
            HostFeature::SeccompNotify => self.seccomp_notify.clone(),
            HostFeature::Fuse => self.fuse.clone(),
        }
    }

    /// What `tier` needs from the host, what is missing, and what it loses here.
    pub fn tier_verdict(&self, tier: Tier) -> TierVerdict {
        let missing: Vec<HostFeature> = HostFeature::needed_by(tier)
            .iter()
            .copied()
            .filter(|f| !self.feature(*f).is_available())
            .collect();
        let mut costs = Vec::new();
        if tier >= Tier::FsOnly && self.landlock_abi >= 1 {
            costs.extend(
                LandlockFeature::ALL
                    .iter()
                    .filter(|f| !f.available_at(self.landlock_abi))
                    // FULL's own PID and network namespaces already keep
                    // host processes and abstract sockets out of reach.
                    .filter(|f| !(tier == Tier::Full && **f == LandlockFeature::Scope))
                    .map(|f| format!("Landlock ABI < {}: {}", f.abi(), f.cost_when_missing())),
            );
        }
        // FULL hides host sockets and protects `.git` with mounts; FS-ONLY
        // needs the supervisor for both.
        if tier == Tier::FsOnly && !self.seccomp_notify.is_available() {
            costs.push(HostFeature::SeccompNotify.cost_when_missing().into());
        }
        if tier == Tier::Full && !self.fuse.is_available() {
            costs.push(HostFeature::Fuse.cost_when_missing().into());
        }
        if tier == Tier::Seccomp {
            costs.push(
                "no filesystem isolation: runs only with --tier seccomp or --allow-degraded".into(),
            );
        }
        TierVerdict {
            tier,
            runnable: missing.is_empty(),
            missing,
            costs,
        }
    }

    /// Verdicts for every tier, strongest first.
    pub fn tier_verdicts(&self) -> Vec<TierVerdict> {
        Tier::ALL.iter().map(|t| self.tier_verdict(*t)).collect()
    }

    /// The strongest tier this host can run at all. Whether a given policy
    /// can run there (or is refused for a rule) is `plan::build`'s decision.
    pub fn best_tier(&self) -> Option<Tier> {
        Tier::ALL
            .iter()
            .copied()
            .find(|t| self.tier_verdict(*t).runnable)
    }
}

/// A kernel release as numbers (`6.8.0-45-generic` → 6.8.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KernelVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl KernelVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        KernelVersion {
            major,
            minor,
            patch,
        }
    }

    /// Parse the leading `MAJOR.MINOR[.PATCH]` of a release string.
    pub fn parse(release: &str) -> Option<Self> {
        let numeric_prefix = |s: &str| -> Option<u32> {
            let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            s[..end].parse().ok()
        };
        let mut parts = release.splitn(3, '.');
        let major = numeric_prefix(parts.next()?)?;
        let minor = numeric_prefix(parts.next()?)?;
        let patch = parts.next().and_then(numeric_prefix).unwrap_or(0);
        Some(KernelVersion::new(major, minor, patch))
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The kernel features the tiers are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostFeature {
    Landlock,
    UserNamespaces,
    Seccomp,
    SeccompNotify,
    Fuse,
}

impl HostFeature {
    pub const ALL: [HostFeature; 5] = [
        HostFeature::Landlock,
        HostFeature::UserNamespaces,
        HostFeature::Seccomp,
        HostFeature::SeccompNotify,
        HostFeature::Fuse,
    ];

    /// What a tier cannot run without (see docs/tiers.md and the contract).
    pub fn needed_by(tier: Tier) -> &'static [HostFeature] {
        match tier {
            Tier::Full => &[
                HostFeature::Landlock,
                HostFeature::UserNamespaces,
                HostFeature::Seccomp,
            ],
            Tier::FsOnly => &[HostFeature::Landlock, HostFeature::Seccomp],
            Tier::Seccomp => &[HostFeature::Seccomp],
            // Seatbelt is no Linux kernel feature (see `HostCaps::seatbelt`).
            Tier::Seatbelt => &[],
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HostFeature::Landlock => "Landlock",
            HostFeature::UserNamespaces => "user namespaces",
            HostFeature::Seccomp => "seccomp",
            HostFeature::SeccompNotify => "seccomp user notify",
            HostFeature::Fuse => "FUSE",
        }
    }

    /// What vetto does with the feature, in one line.
    pub fn meaning(self) -> &'static str {
        match self {
            HostFeature::Landlock => "scoped reads and writes for unprivileged processes",
            HostFeature::UserNamespaces => {
                "unprivileged user namespaces: mount, network and PID isolation (FULL tier)"
            }
            HostFeature::Seccomp => "syscall filters that answer EPERM",
            HostFeature::SeccompNotify => {
                "SECCOMP_RET_USER_NOTIF with WAIT_KILLABLE_RECV (Linux 5.19+): \
                 the supervisor decides socket connects and creations"
            }
            HostFeature::Fuse => {
                "/dev/fuse: at FULL each masked secret is a trap that names \
                 the process touching it"
            }
        }
    }

    /// What vetto loses without the feature.
    pub fn cost_when_missing(self) -> &'static str {
        match self {
            HostFeature::Landlock => {
                "without Landlock: no FULL or FS-ONLY tier; only the SECCOMP tier, \
                 which has no filesystem isolation"
            }
            HostFeature::UserNamespaces => {
                "without user namespaces: no FULL tier; secrets are carved by Landlock \
                 rules instead of being absent; filtered egress unavailable"
            }
            HostFeature::Seccomp => "without seccomp: no tier can run",
            HostFeature::SeccompNotify => {
                "no seccomp user notification: ssh-agent/docker sockets cannot be brokered \
                 and new top-level entries in the project cannot be created \
                 → refused unless --allow-degraded"
            }
            HostFeature::Fuse => {
                "without FUSE: masked secrets stay masked at FULL, \
                 but reads of them are not seen"
            }
        }
    }
}

impl fmt::Display for HostFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What each Landlock ABI version adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockFeature {
    /// ABI 1 (5.13): filesystem access rights.
    Fs,
    /// ABI 2 (5.19): `LANDLOCK_ACCESS_FS_REFER`.
    Refer,
    /// ABI 3 (6.2): `LANDLOCK_ACCESS_FS_TRUNCATE`.
    Truncate,
    /// ABI 4 (6.7): TCP bind/connect rights.
    Tcp,
    /// ABI 5 (6.10): `LANDLOCK_ACCESS_FS_IOCTL_DEV`.
    IoctlDev,
    /// ABI 6 (6.12): scoping of signals and abstract unix sockets.
    Scope,
    /// ABI 7 (6.15): audit logging flags.
    Audit,
}

impl LandlockFeature {
    pub const ALL: [LandlockFeature; 7] = [
        LandlockFeature::Fs,
        LandlockFeature::Refer,
        LandlockFeature::Truncate,
        LandlockFeature::Tcp,
        LandlockFeature::IoctlDev,
        LandlockFeature::Scope,
        LandlockFeature::Audit,
    ];

    /// The first ABI version with this feature.
    pub fn abi(self) -> u8 {
        match self {
            LandlockFeature::Fs => 1,
            LandlockFeature::Refer => 2,
            LandlockFeature::Truncate => 3,
            LandlockFeature::Tcp => 4,
            LandlockFeature::IoctlDev => 5,
            LandlockFeature::Scope => 6,
            LandlockFeature::Audit => 7,
        }
    }

    pub fn available_at(self, abi: u8) -> bool {
        abi >= self.abi()
    }

    /// The features an ABI version provides.
    pub fn provided_by(abi: u8) -> impl Iterator<Item = LandlockFeature> {
        Self::ALL.into_iter().filter(move |f| f.available_at(abi))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LandlockFeature::Fs => "fs",
            LandlockFeature::Refer => "refer",
            LandlockFeature::Truncate => "truncate",
            LandlockFeature::Tcp => "tcp",
            LandlockFeature::IoctlDev => "ioctl-dev",
            LandlockFeature::Scope => "scope",
            LandlockFeature::Audit => "audit",
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            LandlockFeature::Fs => "read, write and execute rights beneath allowed paths",
            LandlockFeature::Refer => "rename and link between directories under control",
            LandlockFeature::Truncate => "truncate(2) of read-only files denied",
            LandlockFeature::Tcp => "TCP bind and connect rules",
            LandlockFeature::IoctlDev => "ioctl on device files under control",
            LandlockFeature::Scope => "signals and abstract unix sockets stay inside the sandbox",
            LandlockFeature::Audit => "denials logged by the kernel audit subsystem",
        }
    }

    pub fn cost_when_missing(self) -> &'static str {
        match self {
            LandlockFeature::Fs => "no filesystem isolation",
            LandlockFeature::Refer => {
                "renames and links between directories fail (EXDEV); mv falls back to copying"
            }
            LandlockFeature::Truncate => {
                "read-only and protected files can be truncated \
                 → refused unless --allow-degraded"
            }
            LandlockFeature::Tcp => "TCP is restricted by seccomp alone",
            LandlockFeature::IoctlDev => "ioctl on devices is restricted by seccomp alone",
            LandlockFeature::Scope => {
                "signals and abstract unix sockets of the host reachable \
                 → FS-ONLY refused unless --allow-degraded"
            }
            LandlockFeature::Audit => "Landlock denials are not in the kernel audit log",
        }
    }
}

impl fmt::Display for LandlockFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether this host can run a tier, as the host sees it (a policy may still
/// be refused there for one of its rules: that is `plan::build`'s call).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierVerdict {
    pub tier: Tier,
    pub runnable: bool,
    /// Features the tier needs and the host lacks.
    pub missing: Vec<HostFeature>,
    /// What the tier does not enforce here, or enforces less strongly.
    pub costs: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_without_userns() -> HostCaps {
        HostCaps {
            userns: Availability::Missing(
                "kernel.apparmor_restrict_unprivileged_userns = 1".into(),
            ),
            ..HostCaps::everything()
        }
    }

    #[test]
    fn auto_takes_full_on_a_complete_host() {
        assert_eq!(HostCaps::everything().best_tier(), Some(Tier::Full));
    }

    #[test]
    fn apparmor_userns_restriction_leaves_fs_only() {
        let host = host_without_userns();
        assert_eq!(host.best_tier(), Some(Tier::FsOnly));
        let full = host.tier_verdict(Tier::Full);
        assert!(!full.runnable);
        assert_eq!(full.missing, vec![HostFeature::UserNamespaces]);
    }

    #[test]
    fn without_fuse_full_still_runs_and_says_what_it_does_not_see() {
        let host = HostCaps {
            fuse: Availability::Missing("no /dev/fuse".into()),
            ..HostCaps::everything()
        };
        assert_eq!(host.best_tier(), Some(Tier::Full));
        let full = host.tier_verdict(Tier::Full);
        assert!(full.runnable && full.missing.is_empty());
        assert!(
            full.costs
                .iter()
                .any(|c| c.contains("reads of them are not seen"))
        );
        assert!(host.tier_verdict(Tier::FsOnly).costs.is_empty());
    }

    #[test]
    fn kernel_without_landlock_leaves_only_seccomp() {
        let host = HostCaps {
            landlock_abi: 0,
            landlock_missing: Some("ENOSYS".into()),
            ..HostCaps::everything()
        };
        assert_eq!(host.best_tier(), Some(Tier::Seccomp));
        assert_eq!(
            host.tier_verdict(Tier::FsOnly).missing,
            vec![HostFeature::Landlock]
        );
    }

    #[test]
    fn without_seccomp_no_tier_runs() {
        let host = HostCaps {
            seccomp: Availability::Missing("CONFIG_SECCOMP=n".into()),
            ..HostCaps::everything()
        };
        assert_eq!(host.best_tier(), None);
    }

    #[test]
    fn old_landlock_abi_lists_what_fs_only_loses() {
        let host = HostCaps {
            landlock_abi: 4,
            ..HostCaps::everything()
        };
        let costs = host.tier_verdict(Tier::FsOnly).costs;
        assert_eq!(costs.len(), 3, "{costs:?}");
        assert!(costs[1].starts_with("Landlock ABI < 6: signals and abstract unix sockets"));
        assert!(host.tier_verdict(Tier::FsOnly).runnable);
    }

    #[test]
    fn missing_notify_costs_socket_brokering() {
        let host = HostCaps {
            seccomp_notify: Availability::Missing("Linux 5.15".into()),
            ..HostCaps::everything()
        };
        let v = host.tier_verdict(Tier::FsOnly);
        assert!(v.runnable);
        assert!(v.costs.iter().any(|c| c.contains("ssh-agent/docker")));
    }

    #[test]
    fn full_tier_does_not_need_landlock_scoping() {
        let host = HostCaps {
            landlock_abi: 5,
            ..HostCaps::everything()
        };
        assert!(
            host.tier_verdict(Tier::Full)
                .costs
                .iter()
                .all(|c| !c.contains("signals"))
        );
        assert!(
            host.tier_verdict(Tier::FsOnly)
                .costs
                .iter()
                .any(|c| c.contains("signals"))
        );
    }

    #[test]
    fn landlock_abi_maps_to_features() {
        let names: Vec<_> = LandlockFeature::provided_by(7)
            .map(|f| f.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "fs",
                "refer",
                "truncate",
                "tcp",
                "ioctl-dev",
                "scope",
                "audit"
            ]
        );
        assert_eq!(LandlockFeature::provided_by(0).count(), 0);
        assert_eq!(LandlockFeature::provided_by(3).count(), 3);
    }

    #[test]
    fn kernel_versions_parse_from_distribution_releases() {
        for (release, want) in [
            ("6.8.0-45-generic", Some(KernelVersion::new(6, 8, 0))),
            ("6.18.44-fc-v595", Some(KernelVersion::new(6, 18, 44))),
            ("5.19", Some(KernelVersion::new(5, 19, 0))),
            ("4.19.0+", Some(KernelVersion::new(4, 19, 0))),
            ("6.1-rc3", Some(KernelVersion::new(6, 1, 0))),
            ("", None),
            ("linux", None),
        ] {
            assert_eq!(KernelVersion::parse(release), want, "{release}");
        }
        assert!(KernelVersion::new(5, 19, 0) > KernelVersion::new(5, 4, 200));
    }
}
