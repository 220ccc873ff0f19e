//! `--max-memory` on macOS: `RLIMIT_DATA` per process (set by the stage)
//! plus the tree's resident memory sampled by the supervisor; no cgroup,
//! no shares (they need seccomp notification).

/// Never made on macOS (the plan's tree bound is `Sampled`); the type the
/// notification server, which does not exist here, would take.
pub use super::none::memory::Shares;

/// The job's processes: the stage's process and its descendants.
pub fn job_processes(stage: i32, _full: bool) -> Vec<i32> {
    let mut pids = vec![stage];
    pids.extend(super::process::descendants(
        u32::try_from(stage).unwrap_or(0),
    ));
    pids
}

/// Resident bytes of `pid`.
pub fn held_bytes(pid: i32) -> u64 {
    super::process::rss_bytes(pid)
}
