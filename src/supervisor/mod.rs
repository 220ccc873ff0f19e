//! The parent side: waits for the job, forwards signals, enforces the time
//! and memory limits, and answers seccomp notifications. It never restricts
//! itself, so it may run threads.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;

pub mod notify;

use std::sync::mpsc;

use crate::exit::Outcome;
use crate::plan::Plan;
use crate::sandbox::Spawned;
use crate::sandbox::process::{self, SignalWaiter};

/// Signals vetto passes on to the sandbox when another process sent them.
/// Terminal-generated ones already reach the job's process group.
pub const FORWARDED: [Signal; 7] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// How often limits are checked while the job runs.
const TICK: Duration = Duration::from_millis(100);

/// Prepare this process to supervise: subreaper, non-dumpable, and the
/// forwarded signals blocked so they queue for the wait loop (threads
/// started afterwards inherit the mask, so no thread dies of SIGTERM).
pub fn prepare() -> nix::Result<SignalWaiter> {
    process::harden_supervisor()?;
    SignalWaiter::block(&FORWARDED)
}

/// Wait for the sandbox to end and return how it ended.
pub fn run(mut child: Spawned, plan: &Plan, signals: &SignalWaiter) -> Outcome {
    let (events, decisions) = mpsc::channel();
    let server = match child.listener.take() {
        Some(listener) => match notify::serve(listener, &plan.notify, events) {
            Ok(server) => Some(server),
            Err(e) => {
                // The listener is gone with the error: notified calls now
                // fail with ENOSYS, closed rather than open.
                eprintln!("vetto: cannot answer seccomp notifications: {e}");
                None
            }
        },
        None => None,
    };
    let start = Instant::now();
    let deadline = plan.limits.timeout.map(|t| start + t);
    let outcome = loop {
        let wait = deadline
            .map(|d| d.saturating_duration_since(Instant::now()).min(TICK))
            .unwrap_or(TICK);
        if let Some(caught) = signals.wait(wait)
            && caught.from_user()
            && let Some(sig) = FORWARDED.iter().find(|s| **s as i32 == caught.signo)
        {
            process::send(child.pid, *sig);
        }
        if let Some(ws) = process::try_wait(child.pid) {
            break match ws {
                WaitStatus::Exited(_, code) => Outcome::Exited(code),
                WaitStatus::Signaled(_, sig, _) => Outcome::Signaled(sig as i32),
                _ => Outcome::Exited(i32::from(crate::exit::REFUSED)),
            };
        }
        process::reap_orphans(child.pid);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Outcome::TimedOut;
        }
        if let Some(max) = plan.limits.max_memory
            && tree_rss() > max
        {
            break Outcome::LimitKilled;
        }
    };
    // Whatever is left (the whole tree on a limit; escaped stragglers if the
    // init was killed) dies with the session.
    process::kill_all_descendants();
    if let Some(server) = server
        && let Err(e) = server.join()
    {
        eprintln!("vetto: seccomp notification handling failed: {e}");
    }
    let escaped = child.escaped();
    if !escaped.is_empty() {
        let names: Vec<String> = escaped
            .iter()
            .map(|p| format!("{} ({})", p.pid, p.argv.first().unwrap_or(&p.exe)))
            .collect();
        eprintln!(
            "vetto: killed {} process(es) the command left running: {}",
            escaped.len(),
            names.join(", ")
        );
    }
    // Violations become reports in `vetto ci`; `run` only counts them.
    let denied = decisions
        .try_iter()
        .filter(notify::NotifyEvent::is_violation)
        .count();
    if denied > 0 {
        eprintln!("vetto: {denied} operation(s) were denied by the sandbox");
    }
    for dir in &plan.prepare_dirs {
        // Only removes what stayed empty: the job's output is kept.
        let _ = std::fs::remove_dir(dir);
    }
    outcome
}

fn tree_rss() -> u64 {
    process::descendants(std::process::id())
        .into_iter()
        .map(process::rss_bytes)
        .sum()
}
