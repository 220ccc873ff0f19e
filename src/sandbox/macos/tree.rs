//! The job's process tree as the kernel reports it: a kqueue with
//! `EVFILT_PROC` (`NOTE_FORK | NOTE_EXIT`) on every process of the tree,
//! so the end of a session (and `--timeout`) kills what left the job's
//! process group *and* lost its parent (`setsid` + double fork: re-parented
//! to launchd, invisible to a walk of parent links from vetto).
//!
//! XNU refuses `NOTE_TRACK` (`filt_procattach` answers `ENOTSUP` for
//! `NOTE_TRACK | NOTE_TRACKERR | NOTE_CHILD`): the kernel says *that* a
//! process forked, not the child's pid. So each `NOTE_FORK` makes vetto
//! list that process's children (`proc_listchildpids`) and watch those it
//! did not know, and their children in turn (they may have forked before
//! they were watched). `NOTE_EXIT` forgets a process: a pid is never
//! killed after it could be another program's, and every kill checks the
//! process's start time against the one recorded when it was first seen.
//!
//! **Left open:** a child that forks and exits before vetto lists its
//! parent's children hands over a grandchild vetto never sees if that
//! grandchild also left the process group; only `NOTE_TRACK`, which
//! macOS no longer has, closes that race.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};

/// When a process started (seconds, microseconds): with the pid, which
/// process it is.
type Started = (u64, u64);

/// Every process of the tree known alive, with when it started.
static TREE: Mutex<BTreeMap<i32, Started>> = Mutex::new(BTreeMap::new());
/// Set once the end-of-session kill is over.
static STOP: AtomicBool = AtomicBool::new(false);
/// Most processes watched at once (the rest are found by the other walks).
const MAX_WATCHED: usize = 1 << 16;
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
    watch(&kq, root);
    std::thread::Builder::new()
        .name("vetto-kqueue".into())
        .spawn(move || follow(&kq))?;
    Ok(())
}

/// The watched processes still alive as what they were when first seen.
pub(super) fn live() -> Vec<i32> {
    let Ok(mut tree) = TREE.lock() else {
        return Vec::new();
    };
    tree.retain(|pid, started| super::process::started(*pid) == Some(*started));
    tree.keys().copied().collect()
}

/// The end-of-session kill is over: nothing more to follow.
pub(super) fn stop() {
    STOP.store(true, Ordering::SeqCst);
}

fn follow(kq: &Kqueue) {
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
            Err(_) => return,
        };
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
                for child in super::process::child_pids(pid) {
                    watch(kq, child);
                }
            }
            if e.fflags().contains(FilterFlag::NOTE_EXIT) {
                forget(pid);
            }
        }
    }
}

/// Watch `pid` if it is new, then the children it made before it was
/// watched, and theirs.
fn watch(kq: &Kqueue, pid: i32) {
    let mut todo = vec![pid];
    while let Some(pid) = todo.pop() {
        let Some(started) = super::process::started(pid) else {
            continue;
        };
        let known = TREE
            .lock()
            .map(|t| t.get(&pid) == Some(&started) || t.len() >= MAX_WATCHED)
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
            FilterFlag::NOTE_FORK | FilterFlag::NOTE_EXIT,
            0,
            0,
        );
        // No room for events: an error in the change comes back as the
        // call's (ESRCH: it is gone already).
        if kq.kevent(&[change], &mut [], None).is_err() {
            continue;
        }
        if let Ok(mut t) = TREE.lock() {
            t.insert(pid, started);
        }
        todo.extend(super::process::child_pids(pid));
    }
}

fn forget(pid: i32) {
    if let Ok(mut t) = TREE.lock() {
        t.remove(&pid);
    }
}
