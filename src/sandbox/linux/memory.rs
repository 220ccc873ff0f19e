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
    /// Rebalancing and fork splits never interleave. Holds the forks
    /// that may still be in the kernel, as (process, thread).
    forking: Mutex<Vec<(i32, i32)>>,
}

impl Shares {
    pub fn new(limit: u64, fork_floor: u64) -> Shares {
        Shares {
            limit,
            fork_floor,
            forking: Mutex::new(Vec::new()),
        }
    }

    /// Thread `tid` is about to create a process (it waits in its
    /// notified `clone`/`fork`/`vfork`): halve its process's unused share,
    /// which the child then inherits, so that the two together hold no
    /// more than the parent did.
    pub fn on_fork(&self, tid: i32) {
        let Ok(mut forking) = self.forking.lock() else {
            return;
        };
        let pid = super::proc::status_field(tid, "Tgid:")
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(tid);
        // Until the kernel has copied the limit into the child, the
        // parent's share must not grow again (see `rebalance`).
        if forking.len() < MAX_FORKING {
            forking.push((pid, tid));
        }
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
    ///
    /// A process whose fork may still be in the kernel (answered, but the
    /// thread not yet seen out of the call) is not raised: its child
    /// inherits the limit as the kernel copies it, and that child is not
    /// in `pids` yet. Its share is kept for it instead.
    pub fn rebalance(&self, pids: &[i32]) {
        let Ok(mut forking) = self.forking.lock() else {
            return;
        };
        forking.retain(|(_, tid)| still_forking(*tid));
        // (pid, held, soft): only processes under the job's hard limit (a
        // pid reused since the listing is left alone).
        let procs: Vec<(i32, u64, u64)> = pids
            .iter()
            .filter_map(|&p| {
                let (soft, hard) = data_limit(p)?;
                (hard == self.limit).then_some((p, data_bytes(p)?, soft))
            })
            .collect();
        let data: Vec<u64> = procs.iter().map(|(_, d, _)| *d).collect();
        let targets = shares(self.limit, &data);
        // Two phases, because a process keeps allocating while we read and
        // write: first lower, then count what each can still reach (a
        // forking process its soft limit once more for the child on its
        // way), and raise only within what is left.
        let mut reserved = Vec::with_capacity(procs.len());
        let mut raise = Vec::new();
        for (&(pid, _, soft), &target) in procs.iter().zip(&targets) {
            let forks = forking.iter().filter(|(p, _)| *p == pid).count() as u64;
            if forks > 0 {
                reserved.push(soft.saturating_mul(forks + 1));
            } else if target < soft {
                let _ = set_soft_limit(pid, target, self.limit);
                reserved.push(target.max(data_bytes(pid).unwrap_or(target)));
            } else {
                reserved.push(soft);
                if target > soft {
                    raise.push((pid, soft, target));
                }
            }
        }
        let mut left = self.limit.saturating_sub(reserved.iter().sum());
        for (i, &(pid, soft, target)) in raise.iter().enumerate() {
            let part = left / (raise.len() - i) as u64;
            let grant = (target - soft).min(part);
            if grant > 0 && set_soft_limit(pid, soft + grant, self.limit).is_ok() {
                left -= grant;
            }
        }
    }
}

/// Forks remembered at once (a storm beyond it goes unremembered: its
/// parents may then be raised while a fork is in the kernel).
const MAX_FORKING: usize = 4096;

/// Whether thread `tid` may still be inside `clone`/`fork`/`vfork`: it is
/// there, running (unknown), or unreadable. Gone or elsewhere: done.
fn still_forking(tid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/syscall")) else {
        return std::path::Path::new(&format!("/proc/{tid}")).exists();
    };
    let Some(nr) = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<i64>().ok())
    else {
        return true;
    };
    super::notify::Call::from_nr(nr) == super::notify::Call::Fork
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
