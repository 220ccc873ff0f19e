//! The job's process tree as the kernel reports it: a kqueue with
//! `EVFILT_PROC` (`NOTE_FORK | NOTE_EXIT`) on every process of the tree,
//! so the end of a session (and `--timeout`) kills what left the job's
//! process group *and* lost its parent (`setsid` + double fork: re-parented
//! to launchd, invisible to a walk of parent links from vetto).
//!
//! XNU refuses `NOTE_TRACK` (`filt_procattach` answers `ENOTSUP` for
//! `NOTE_TRACK | NOTE_TRACKERR | NOTE_CHILD`): the kernel says *that* a
//! process forked, not the child's pid. So:
//!
//! - each `NOTE_FORK` makes vetto list that process's children
//!   (`proc_listchildpids`) and watch the new ones, and their children;
//! - a watched process is checked by its start time before it is killed
//!   (the start time stays across `exec`): a pid whose process is gone
//!   and reused by another program before the check is not killed; only
//!   a reuse between the check and the `kill` itself (microseconds) could
//!   still be hit;
//! - each process has a **unique id** (`p_uniqueid`, never reused while the
//!   machine runs; read again at every `NOTE_EXEC`, in case an `exec`
//!   gives a new one);
//! - every process records its original parent's unique id
//!   (`p_puniqueid`), which re-parenting to launchd does not change
//!   (`proc_reparentlocked` leaves it): when a watched process that forked
//!   exits, and at the end-of-session kill, the process table is searched
//!   for processes whose original parent was of the tree — what a parent
//!   forked just before it exited is adopted that way.
//!
//! **Left open:** a process forks and exits, its child forks and exits
//! too, before vetto looked: the grandchild's original parent was never
//! seen, and if it also left the process group it escapes. Only
//! `NOTE_TRACK`, which macOS no longer has, closes that race.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use nix::errno::Errno;
use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};

/// A watched process: its unique id now, and when it started.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Watched {
    id: u64,
    started: (u64, u64),
}

/// The tree: the watched processes and every unique id ever of the tree
/// (their children are the tree's too).
struct Tree {
    live: BTreeMap<i32, Watched>,
    known: BTreeSet<u64>,
    /// Watched processes that forked: their exit looks for orphans.
    forked: BTreeSet<i32>,
}

static TREE: Mutex<Tree> = Mutex::new(Tree {
    live: BTreeMap::new(),
    known: BTreeSet::new(),
    forked: BTreeSet::new(),
});
static QUEUE: OnceLock<Kqueue> = OnceLock::new();
/// Set once the end-of-session kill is over.
static STOP: AtomicBool = AtomicBool::new(false);
/// Most processes watched at once (the rest are found by the walks).
const MAX_WATCHED: usize = 1 << 16;
/// Most unique ids remembered; past it, the ids of processes no longer
/// alive are dropped (their orphans were adopted when they exited).
const MAX_KNOWN: usize = 1 << 20;
/// Searches of the process table for orphans, per adoption.
const ADOPT_PASSES: usize = 8;
/// Events taken per wait.
const EVENTS: usize = 64;
/// How long one wait lasts before the stop flag is looked at.
const WAIT: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};

/// Watch `root` (the stage, before it execs the job) and, from a thread of
/// its own, every process it forks.
pub(super) fn start(root: i32) -> std::io::Result<()> {
    let kq = Kqueue::new()?;
    let kq = QUEUE.get_or_init(|| kq);
    watch(kq, root);
    std::thread::Builder::new()
        .name("vetto-kqueue".into())
        .spawn(move || follow(kq))?;
    Ok(())
}

/// The tree's processes alive now, orphans adopted first: what the
/// end-of-session kill kills besides the group and vetto's descendants.
pub(super) fn live() -> Vec<i32> {
    if let Some(kq) = QUEUE.get() {
        adopt(kq);
    }
    watched()
}

/// The watched processes alive now (no search for orphans: cheap enough
/// for every resource sample).
pub(super) fn watched() -> Vec<i32> {
    let Ok(mut tree) = TREE.lock() else {
        return Vec::new();
    };
    tree.live
        .retain(|pid, w| super::process::started(*pid) == Some(w.started));
    tree.live.keys().copied().collect()
}

/// The end-of-session kill is over: nothing more to follow.
pub(super) fn stop() {
    STOP.store(true, Ordering::SeqCst);
}

fn follow(kq: &'static Kqueue) {
    let empty = KEvent::new(
        0,
        EventFilter::EVFILT_PROC,
        EvFlags::empty(),
        FilterFlag::empty(),
        0,
        0,
    );
    let mut events = [empty; EVENTS];
    while !STOP.load(Ordering::SeqCst) {
        let n = match kq.kevent(&[], &mut events, Some(WAIT)) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(e) => {
                eprintln!(
                    "vetto: warning: following the job's processes stopped (kevent: {e}); the end-of-session kill falls back to the process group and vetto's descendants"
                );
                return;
            }
        };
        let mut orphans = false;
        for e in events.iter().take(n) {
            let Ok(pid) = i32::try_from(e.ident()) else {
                continue;
            };
            if e.flags().contains(EvFlags::EV_ERROR) {
                forget(pid);
                continue;
            }
            // A fork, then the exit, in one event: the children first.
            if e.fflags().contains(FilterFlag::NOTE_FORK) {
                if let Ok(mut t) = TREE.lock() {
                    t.forked.insert(pid);
                }
                for child in super::process::child_pids(pid) {
                    watch(kq, child);
                }
            }
            if e.fflags().contains(FilterFlag::NOTE_EXEC) {
                renamed(pid);
            }
            if e.fflags().contains(FilterFlag::NOTE_EXIT) {
                // What it forked may be re-parented already.
                orphans |= forget(pid);
            }
        }
        if orphans {
            adopt(kq);
        }
    }
}

/// Watch `pid` if it is new, then the children it made before it was
/// watched, and theirs.
fn watch(kq: &Kqueue, pid: i32) {
    let mut todo = vec![pid];
    while let Some(pid) = todo.pop() {
        let (Some((id, _)), Some(started)) = (
            super::process::unique_ids(pid),
            super::process::started(pid),
        ) else {
            continue;
        };
        let me = Watched { id, started };
        let known = TREE
            .lock()
            .map(|t| t.live.get(&pid) == Some(&me) || t.live.len() >= MAX_WATCHED)
            .unwrap_or(true);
        if known {
            continue;
        }
        let Ok(ident) = usize::try_from(pid) else {
            continue;
        };
        let change = KEvent::new(
            ident,
            EventFilter::EVFILT_PROC,
            EvFlags::EV_ADD,
            FilterFlag::NOTE_FORK | FilterFlag::NOTE_EXEC | FilterFlag::NOTE_EXIT,
            0,
            0,
        );
        // No room for events: an error in the change comes back as the
        // call's (ESRCH: it is gone already; its children are adopted by
        // their original parent's id).
        let watched = kq.kevent(&[change], &mut [], None).is_ok();
        if let Ok(mut t) = TREE.lock() {
            if t.known.len() >= MAX_KNOWN {
                let alive: BTreeSet<u64> = t.live.values().map(|w| w.id).collect();
                t.known.retain(|k| alive.contains(k));
            }
            t.known.insert(id);
            if watched {
                t.live.insert(pid, me);
            }
        }
        todo.extend(super::process::child_pids(pid));
    }
}

/// Watch every process whose original parent was of the tree (re-parented
/// to launchd or not), until a search finds none new.
fn adopt(kq: &Kqueue) {
    for _ in 0..ADOPT_PASSES {
        let found: Vec<i32> = {
            let Ok(t) = TREE.lock() else {
                return;
            };
            super::process::all_unique_ids()
                .into_iter()
                .filter(|(_, id, parent)| t.known.contains(parent) && !t.known.contains(id))
                .map(|(pid, _, _)| pid)
                .collect()
        };
        if found.is_empty() {
            return;
        }
        for pid in found {
            watch(kq, pid);
        }
    }
}

/// A watched process exec'ed: its unique id as it is now is the tree's
/// too (what it forks from now on names that one as its parent).
fn renamed(pid: i32) {
    let Some((id, _)) = super::process::unique_ids(pid) else {
        return;
    };
    if let Ok(mut t) = TREE.lock()
        && let Some(w) = t.live.get_mut(&pid)
    {
        w.id = id;
        t.known.insert(id);
    }
}

/// Forget a watched process; whether it had forked.
fn forget(pid: i32) -> bool {
    TREE.lock().is_ok_and(|mut t| {
        t.live.remove(&pid);
        t.forked.remove(&pid)
    })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::*;

    /// The daemon trick (runs on macOS only, on the `platforms` workflow):
    /// fork, `setsid`, fork again and let the parents exit, so the last
    /// process is in a session of its own and re-parented to launchd.
    /// Without kqueue, a walk of parent links from vetto and a look at the
    /// job's process group both miss it; followed, it is among the tree's
    /// live processes (which the end-of-session kill kills). The parents
    /// linger a moment before they exit: the race that only `NOTE_TRACK`
    /// would close (both parents gone before vetto looked) is documented,
    /// not tested.
    #[test]
    fn a_double_forked_setsid_daemon_is_still_followed() {
        let dir = std::env::temp_dir().join(format!("vetto-tree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let go = dir.join("go");
        let pidfile = dir.join("daemon.pid");
        let daemon = r#"use POSIX; if (fork) { sleep 2; exit 0 } POSIX::setsid(); if (fork) { sleep 2; exit 0 } sleep 1 while getppid() != 1; open(my $f, ">", "$ARGV[0].tmp") or die; print $f "$$\n"; close $f; rename("$ARGV[0].tmp", $ARGV[0]); sleep 300"#;
        let script = format!(
            "while [ ! -e \"$1\" ]; do sleep 0.05; done; /usr/bin/perl -e '{daemon}' \"$2\"; wait"
        );
        let mut job = Command::new("/bin/sh")
            .args(["-c", &script, "sh"])
            .arg(&go)
            .arg(&pidfile)
            .process_group(0)
            .spawn()
            .unwrap();
        let job_pid = i32::try_from(job.id()).unwrap();
        start(job_pid).unwrap();
        std::fs::write(&go, b"").unwrap();
        // A hang guard, not a timing assertion.
        let until = Instant::now() + Duration::from_secs(120);
        while !pidfile.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let daemon: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = job.wait();
        // The attack works against the walks alone: not a descendant of
        // this process, not in the job's group.
        let me = std::process::id();
        assert!(!super::super::process::descendants_of_in_table(me).contains(&daemon));
        let group = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(daemon))).unwrap();
        assert_ne!(group.as_raw(), job_pid);
        // Followed, it is there.
        let seen = live().contains(&daemon);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(daemon),
            nix::sys::signal::Signal::SIGKILL,
        );
        stop();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(seen, "the daemon {daemon} was not followed");
    }
}
