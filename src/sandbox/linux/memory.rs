//! `--max-memory` shared out over the tree (`plan::memory::TreeBound::Shares`):
//! the kernel side. Every process of the job runs under a hard
//! `RLIMIT_DATA` of the limit (set by the stage); the supervisor moves
//! each one's *soft* limit — what the kernel enforces — to what it holds
//! plus a share of what the tree has left, every tick and at every fork.
//! The job cannot set its own (seccomp), so the soft limits together
//! never exceed the limit.

use std::sync::Mutex;

use crate::plan::memory::{fork_allowance, shares};

/// The shares of one session.
#[derive(Debug)]
pub struct Shares {
    limit: u64,
    fork_floor: u64,
    /// Rebalancing and fork splits never interleave.
    lock: Mutex<()>,
}

impl Shares {
    pub fn new(limit: u64, fork_floor: u64) -> Shares {
        Shares {
            limit,
            fork_floor,
            lock: Mutex::new(()),
        }
    }

    /// Thread `tid` is about to create a process (it waits in its
    /// notified `clone`/`fork`/`vfork`): halve its process's unused share,
    /// which the child then inherits, so that the two together hold no
    /// more than the parent did.
    pub fn on_fork(&self, tid: i32) {
        let _held = self.lock.lock();
        let pid = super::proc::status_field(tid, "Tgid:")
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(tid);
        let (Some(data), Some((soft, hard))) = (data_bytes(pid), data_limit(pid)) else {
            return;
        };
        if hard != self.limit {
            return;
        }
        let keep = data + fork_allowance(soft.saturating_sub(data), self.fork_floor);
        let _ = set_soft_limit(pid, keep.min(soft), hard);
    }

    /// Share what the tree has left among `pids` (the job's processes,
    /// none of vetto's): each gets what it holds plus an equal part.
    pub fn rebalance(&self, pids: &[i32]) {
        let _held = self.lock.lock();
        let held: Vec<(i32, u64)> = pids
            .iter()
            .filter_map(|&p| Some((p, data_bytes(p)?)))
            .collect();
        let data: Vec<u64> = held.iter().map(|(_, d)| *d).collect();
        for ((pid, _), soft) in held.iter().zip(shares(self.limit, &data)) {
            // Only a process under the job's hard limit: a pid that was
            // reused by another process since the listing is left alone.
            if let Some((now, hard)) = data_limit(*pid)
                && hard == self.limit
                && now != soft
            {
                let _ = set_soft_limit(*pid, soft, hard);
            }
        }
    }
}

/// What `RLIMIT_DATA` counts for `pid` (`VmData`: private writable
/// mappings, heap and thread stacks; not `PROT_NONE` reservations).
pub fn data_bytes(pid: i32) -> Option<u64> {
    super::proc::status_field(pid, "VmData:").map(|kib| u64::from(kib) << 10)
}

/// `RLIMIT_DATA` of `pid`: (soft, hard).
fn data_limit(pid: i32) -> Option<(u64, u64)> {
    super::sys::prlimit(pid, libc::RLIMIT_DATA, None)
        .ok()
        .map(|l| (l.rlim_cur, l.rlim_max))
}

fn set_soft_limit(pid: i32, soft: u64, hard: u64) -> std::io::Result<()> {
    let new = libc::rlimit64 {
        rlim_cur: soft,
        rlim_max: hard,
    };
    super::sys::prlimit(pid, libc::RLIMIT_DATA, Some(&new)).map(|_| ())
}

/// The job's processes beneath the stage `stage`: at FULL (`full`) the
/// stage's only child is the sandbox's init, vetto's own, and left out.
pub fn job_processes(stage: i32, full: bool) -> Vec<i32> {
    let Ok(stage) = u32::try_from(stage) else {
        return Vec::new();
    };
    let all = super::proc::descendants(stage);
    if !full {
        return all;
    }
    let init = super::proc::children(stage);
    all.into_iter().filter(|p| !init.contains(p)).collect()
}

/// Memory `pid` holds that is not a file's: anonymous and shared-memory
/// resident pages (`RssAnon + RssShmem`; shared memory is outside
/// `RLIMIT_DATA`, so the sampler watches it).
pub fn held_bytes(pid: i32) -> u64 {
    ["RssAnon:", "RssShmem:"]
        .iter()
        .filter_map(|f| super::proc::status_field(pid, f))
        .map(|kib| u64::from(kib) << 10)
        .sum()
}
