//! The first walk of a tree, read by several threads (issue 12, part 4).
//!
//! With nothing remembered, a `**` from the project root reads every
//! directory below it; the reads are independent, so threads share them:
//! a queue of directories, each thread lists one, queues its
//! subdirectories and takes the next. What comes back is the same as the
//! serial walk would read — every directory under the root, links never
//! followed, the walker's skipped names never entered — as plain
//! listings; the walker then counts each against its cap (so a tree over
//! the cap still fails the load) and answers the patterns from them in
//! its own order, sorted. A directory that cannot be read is left out:
//! the walker reads it itself and decides as it always does. The threads
//! stop as soon as more entries than the cap were read.
//!
//! A warm load (a remembered walk, see `walk_cache`) reads almost nothing
//! but stamps every remembered directory; [`stamp_all`] shares those
//! stamps among threads the same way.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::walk_cache::{DirStamp, Entry};
use crate::sandbox::os::{Lstat, LstatAt};

/// One directory as read: its stamp (taken before the read, when the
/// walker may remember it) and its entries.
pub struct Read {
    pub dir: PathBuf,
    pub stamp: Option<DirStamp>,
    pub entries: Vec<Entry>,
}

/// How the threads stamp a directory before reading it: `None` when its
/// listing is not to be remembered.
pub type StampFn<'a> = &'a (dyn Fn(&Path) -> Option<DirStamp> + Sync);

struct Queue {
    dirs: Vec<PathBuf>,
    /// Directories queued or being read.
    pending: usize,
}

/// Every directory below and including `root` (not entering `skip`
/// names), read by up to `threads` threads; `None` when more than `cap`
/// entries were read (the walker then fails on its own count).
pub fn read_tree(
    root: &Path,
    skip: &[String],
    cap: usize,
    threads: usize,
    stamp: StampFn<'_>,
) -> Option<Vec<Read>> {
    let queue = Mutex::new(Queue {
        dirs: vec![root.to_path_buf()],
        pending: 1,
    });
    let wake = Condvar::new();
    let seen = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| worker(&queue, &wake, &seen, &out, skip, cap, stamp));
        }
    });
    if seen.load(Ordering::Relaxed) > cap {
        return None;
    }
    out.into_inner().ok()
}

fn worker(
    queue: &Mutex<Queue>,
    wake: &Condvar,
    seen: &AtomicUsize,
    out: &Mutex<Vec<Read>>,
    skip: &[String],
    cap: usize,
    stamp: StampFn<'_>,
) {
    let mut mine = Vec::new();
    loop {
        let dir = {
            let Ok(mut q) = queue.lock() else { return };
            loop {
                if seen.load(Ordering::Relaxed) > cap || q.pending == 0 {
                    wake.notify_all();
                    drop(q);
                    if let Ok(mut o) = out.lock() {
                        o.append(&mut mine);
                    }
                    return;
                }
                if let Some(d) = q.dirs.pop() {
                    break d;
                }
                q = match wake.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
        };
        let read = read_one(&dir, stamp, seen);
        let Ok(mut q) = queue.lock() else { return };
        q.pending -= 1;
        if let Some(read) = read {
            for e in &read.entries {
                if e.is_dir
                    && !skip
                        .iter()
                        .any(|s| s.as_bytes() == e.name.as_encoded_bytes())
                {
                    q.dirs.push(dir.join(&e.name));
                    q.pending += 1;
                }
            }
            mine.push(read);
        }
        wake.notify_all();
    }
}

fn read_one(dir: &Path, stamp: StampFn<'_>, seen: &AtomicUsize) -> Option<Read> {
    let st = stamp(dir);
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        entries.push(Entry {
            name: entry.file_name(),
            is_dir: entry.file_type().is_ok_and(|t| t.is_dir()),
        });
    }
    seen.fetch_add(entries.len(), Ordering::Relaxed);
    Some(Read {
        dir: dir.to_path_buf(),
        stamp: st,
        entries,
    })
}

/// The stamps of remembered directories, taken ahead by up to `threads`
/// threads: a warm load's work is one `lstat` per directory, and the
/// answers do not depend on each other. `dirs` sorted, so that each
/// thread's share is a run of siblings and their parent is opened once.
/// A directory whose `lstat` fails is left out: the walker asks again
/// and decides as it always does.
pub fn stamp_all(dirs: &[&Path], threads: usize) -> Vec<(PathBuf, Lstat)> {
    let share = dirs.len().div_ceil(threads.max(1)).max(1);
    let run = |part: &[&Path]| -> Vec<(PathBuf, Lstat)> {
        let mut lstat = LstatAt::new();
        part.iter()
            .filter_map(|d| Some((d.to_path_buf(), lstat.lstat(d).ok()?)))
            .collect()
    };
    let mut parts = dirs.chunks(share);
    let Some(own) = parts.next() else {
        return Vec::new();
    };
    std::thread::scope(|s| {
        let others: Vec<_> = parts.map(|p| s.spawn(move || run(p))).collect();
        let mut out = run(own);
        for o in others {
            // A thread that panicked only costs its share a second look.
            out.extend(o.join().unwrap_or_default());
        }
        out
    })
}
