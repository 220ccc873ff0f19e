//! `--max-memory` as data: which mechanism holds the limit on this host,
//! and the arithmetic of the per-process shares. Pure; the kernel side is
//! `sandbox::linux::{cgroup, memory}`. docs/limits.md explains the choice.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::host::{CgroupMemory, HostCaps};

/// How often the supervisor samples the tree and rebalances the shares.
pub const SAMPLE_EVERY_MS: u64 = 10;

/// The smallest unused share a fork leaves the parent and gives the
/// child (so that an `exec` right after a fork still has room).
const FORK_FLOOR_MIN: u64 = 16 << 20;
const FORK_FLOOR_MAX: u64 = 64 << 20;

/// How the limit is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// Bytes: `RLIMIT_DATA` of every process, and the bound of the tree.
    pub limit: u64,
    pub tree: TreeBound,
}

/// What bounds the whole tree (every process's `RLIMIT_DATA` bounds it
/// alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TreeBound {
    /// A leaf cgroup v2 for the job under vetto's delegated cgroup, with
    /// `memory.max`, `memory.swap.max = 0` and `memory.oom.group = 1`.
    Cgroup(CgroupPlan),
    /// The limit shared out as per-process soft `RLIMIT_DATA`s that the
    /// supervisor rebalances every [`SAMPLE_EVERY_MS`] and splits at each
    /// fork (seccomp-notified); the job cannot change its `RLIMIT_DATA`.
    Shares { fork_floor: u64 },
    /// No seccomp notification: the tree's resident memory is sampled
    /// every [`SAMPLE_EVERY_MS`] and the tree killed past the limit.
    Sampled,
}

/// Where the job's cgroup goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupPlan {
    /// vetto's own (delegated) cgroup directory.
    pub parent: PathBuf,
    /// vetto must first move itself into a leaf beside the job's
    /// ("no internal processes": the parent may hold none once its
    /// children get the memory controller).
    pub move_supervisor: bool,
}

/// The mechanism for `limit` on `host` (`None`: no limit asked).
pub fn decide(limit: Option<u64>, host: &HostCaps) -> Option<MemoryPlan> {
    let limit = limit?;
    let tree = match &host.cgroup_memory {
        CgroupMemory::Delegated {
            dir,
            move_supervisor,
        } => TreeBound::Cgroup(CgroupPlan {
            parent: dir.clone(),
            move_supervisor: *move_supervisor,
        }),
        CgroupMemory::Unavailable(_) if host.seccomp_notify.is_available() => TreeBound::Shares {
            fork_floor: (limit / 16).clamp(FORK_FLOOR_MIN, FORK_FLOOR_MAX),
        },
        CgroupMemory::Unavailable(_) => TreeBound::Sampled,
    };
    Some(MemoryPlan { limit, tree })
}

/// vetto's line at session start: which mechanism holds `--max-memory`.
pub fn session_line(plan: &super::Plan) -> Option<String> {
    plan.memory.as_ref().map(MemoryPlan::describe)
}

impl MemoryPlan {
    /// One line naming what holds the limit (session start, `doctor`).
    pub fn describe(&self) -> String {
        format!("memory {}: {}", size(self.limit), mechanism(&self.tree))
    }
}

/// `256 MiB`, `1.5 GiB`, or bytes.
fn size(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if bytes >= GIB && bytes % (GIB / 10) == 0 {
        format!("{} GiB", bytes as f64 / GIB as f64)
    } else if bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The mechanism, in words.
pub fn mechanism(tree: &TreeBound) -> &'static str {
    match tree {
        TreeBound::Cgroup(_) => {
            "cgroup v2 memory.max, no swap, OOM kills the group (tree) + RLIMIT_DATA (per process)"
        }
        TreeBound::Shares { .. } => {
            "RLIMIT_DATA per process, shared out over the tree (rebalanced every 10 ms and at each fork) + resident memory sampled every 10 ms"
        }
        TreeBound::Sampled => {
            "RLIMIT_DATA per process + the tree's resident memory sampled every 10 ms"
        }
    }
}

/// The unused share a parent keeps at a fork, which is also what the
/// child inherits: half of it, but never less than `floor` (or all of it
/// when it is smaller).
pub fn fork_allowance(allowance: u64, floor: u64) -> u64 {
    let half = allowance / 2;
    if half >= floor {
        half
    } else {
        allowance.min(floor)
    }
}

/// Soft `RLIMIT_DATA`s for processes holding `data` bytes each: what each
/// holds plus an equal part of what the tree has left, so that together
/// they never exceed `limit` (nor does any exceed it alone).
pub fn shares(limit: u64, data: &[u64]) -> Vec<u64> {
    let used: u64 = data.iter().sum();
    let n = u64::try_from(data.len()).unwrap_or(u64::MAX).max(1);
    let part = limit.saturating_sub(used) / n;
    data.iter().map(|d| (d + part).min(limit)).collect()
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::host::Availability;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_delegated_cgroup_holds_the_tree() {
        let host = HostCaps {
            cgroup_memory: CgroupMemory::Delegated {
                dir: "/sys/fs/cgroup/ci.slice/job.service".into(),
                move_supervisor: true,
            },
            ..HostCaps::everything()
        };
        let plan = decide(Some(256 * MIB), &host).unwrap();
        assert_eq!(
            plan.tree,
            TreeBound::Cgroup(CgroupPlan {
                parent: "/sys/fs/cgroup/ci.slice/job.service".into(),
                move_supervisor: true
            })
        );
        assert!(plan.describe().contains("cgroup v2 memory.max"));
    }

    #[test]
    fn without_a_delegated_cgroup_the_limit_is_shared_out() {
        let host = HostCaps {
            cgroup_memory: CgroupMemory::Unavailable("cgroup v1".into()),
            ..HostCaps::everything()
        };
        let plan = decide(Some(256 * MIB), &host).unwrap();
        assert_eq!(
            plan.tree,
            TreeBound::Shares {
                fork_floor: 16 * MIB
            }
        );
        let big = decide(Some(4 << 30), &host).unwrap();
        assert_eq!(
            big.tree,
            TreeBound::Shares {
                fork_floor: 64 * MIB
            }
        );
    }

    #[test]
    fn without_notification_the_tree_is_only_sampled() {
        let host = HostCaps {
            cgroup_memory: CgroupMemory::Unavailable("cgroup v1".into()),
            seccomp_notify: Availability::Missing("old kernel".into()),
            ..HostCaps::everything()
        };
        assert_eq!(
            decide(Some(MIB), &host).map(|p| p.tree),
            Some(TreeBound::Sampled)
        );
        assert_eq!(decide(None, &host), None);
    }

    #[test]
    fn shares_never_sum_past_the_limit() {
        let limit = 256 * MIB;
        for data in [
            vec![],
            vec![MIB],
            vec![MIB, 100 * MIB, 3 * MIB, 3 * MIB],
            vec![200 * MIB, 200 * MIB],
        ] {
            let soft = shares(limit, &data);
            let used: u64 = data.iter().sum();
            assert!(
                soft.iter().sum::<u64>() <= limit.max(used),
                "{data:?} → {soft:?}"
            );
            for (s, d) in soft.iter().zip(&data) {
                assert!(s >= d.min(&limit), "a share below what is held: {s} < {d}");
            }
        }
        assert_eq!(shares(limit, &[MIB]), vec![limit]);
    }

    #[test]
    fn a_fork_splits_the_unused_share_in_two_down_to_the_floor() {
        let floor = 16 * MIB;
        assert_eq!(fork_allowance(256 * MIB, floor), 128 * MIB);
        assert_eq!(fork_allowance(24 * MIB, floor), 16 * MIB);
        assert_eq!(fork_allowance(4 * MIB, floor), 4 * MIB);
        // Four forks of a lone process: the children's shares stay under
        // the limit together, whatever the order of scheduling.
        let mut parent = 256 * MIB;
        let mut children = 0;
        for _ in 0..4 {
            parent = fork_allowance(parent, floor);
            children += parent;
        }
        assert!(children <= 256 * MIB, "{children}");
    }
}
