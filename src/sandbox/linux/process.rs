//! Process control the supervisor needs: the tree, memory, signals.

use std::time::Duration;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

pub use super::proc::{
    cmdline, cpu_ms, descendants, reaped_children_cpu_ms, rss_bytes, tasks_of_uid,
};

/// The tasks (threads included) of vetto's descendants: what RLIMIT_NPROC
/// counts in a user namespace of the sandbox's own.
pub fn tasks_of_descendants() -> u64 {
    descendants(std::process::id())
        .into_iter()
        .map(|pid| u64::from(super::proc::status_field(pid, "Threads:").unwrap_or(1)))
        .sum()
}
pub use super::sys::Caught;

/// Become a subreaper (orphaned descendants are re-parented to us) and
/// non-dumpable (no same-uid process may read our memory or environment).
pub fn harden_supervisor() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)?;
    nix::sys::prctl::set_dumpable(false)
}

/// Signals the supervisor waits for synchronously.
pub struct SignalWaiter {
    set: SigSet,
}

impl SignalWaiter {
    /// Block `signals` (and SIGCHLD and SIGIO) in this thread; threads started later
    /// inherit the mask, so the signals queue for [`SignalWaiter::wait`].
    pub fn block(signals: &[Signal]) -> nix::Result<Self> {
        let mut set = SigSet::empty();
        for s in signals {
            set.add(*s);
        }
        set.add(Signal::SIGCHLD);
        // The init's reports arrive as SIGIO (`Spawned::ended`).
        set.add(Signal::SIGIO);
        sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
        Ok(SignalWaiter { set })
    }

    pub fn wait(&self, timeout: Duration) -> Option<Caught> {
        super::sys::sigtimedwait(&self.set, timeout)
    }
}

impl Drop for SignalWaiter {
    fn drop(&mut self) {
        let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&self.set), None);
    }
}

/// Non-blocking wait for one child; `Some` once it has exited.
pub fn try_wait(pid: i32) -> Option<WaitStatus> {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => None,
        Ok(ws) => Some(ws),
        Err(_) => None,
    }
}

/// Reap any exited children other than the ones we track (orphans that a
/// subreaper inherits).
pub fn reap_orphans(keep: i32) {
    for pid in descendants(std::process::id()) {
        if pid == keep {
            continue;
        }
        let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
    }
}

pub fn send(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// SIGKILL every descendant of this process until none is left.
pub fn kill_all_descendants() {
    for round in 0..1000 {
        let pids = descendants(std::process::id());
        if pids.is_empty() {
            return;
        }
        if round > 0 {
            // Let the kernel deliver the kills and re-parent orphans.
            std::thread::sleep(Duration::from_millis(1));
        }
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        for pid in pids {
            let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

pub use crate::sandbox::ProcessFacts;

/// Describe the process of thread `tid` (best effort: missing facts stay empty).
pub fn describe(tid: i32) -> ProcessFacts {
    let status = super::proc::status_field;
    let exe = |pid: i32| std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let pid = status(tid, "Tgid:")
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(tid);
    let cwd = |pid: i32| std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
    let me = std::process::id();
    let mut parents = Vec::new();
    let mut parent_commands = Vec::new();
    let mut cur = pid;
    for _ in 0..16 {
        let Some(ppid) = status(cur, "PPid:") else {
            break;
        };
        if ppid <= 1 || ppid == me {
            break;
        }
        let Ok(p) = i32::try_from(ppid) else {
            break;
        };
        parents.push((ppid, exe(p)));
        parent_commands.push((super::proc::cmdline(p), cwd(p)));
        cur = p;
    }
    // The chain ends at the job: the sandbox's init (and at FULL the relay
    // above it) are vetto's own, and non-dumpable, so their executable
    // cannot be read — nothing of the job's is above them.
    while parents
        .last()
        .is_some_and(|(_, exe)| exe.as_os_str().is_empty())
    {
        parents.pop();
        parent_commands.pop();
    }
    ProcessFacts {
        pid: u32::try_from(pid).unwrap_or(0),
        exe: exe(pid),
        argv: super::proc::cmdline(pid),
        cwd: cwd(pid),
        parents,
        parent_commands,
    }
}
