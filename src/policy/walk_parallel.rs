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
//! but stamps every remembered directory; [`StampsAhead`] takes those
//! stamps on another thread from the moment the cache file is read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::walk_cache::{DirStamp, Entry, dir_paths};
use crate::sys::os::{Lstat, LstatAt, os_str_from_bytes};

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

/// The stamps of every directory of a remembered walk's file, begun on
/// another thread as soon as the file is read (before it is decoded, the
/// host probed and the policy parsed), so that they are taken while the
/// session's other start-up work runs. The walker finishes what is left
/// when it first needs them ([`StampsAhead::finish`]).
pub struct StampsAhead {
    shared: Arc<Shared>,
}

struct Shared {
    /// The cache file, as read.
    bytes: Arc<Vec<u8>>,
    /// Where its directories' paths are ([`dir_paths`]), found once by
    /// whichever thread comes first.
    paths: OnceLock<Vec<(usize, usize)>>,
    next: AtomicUsize,
    /// The stamps of the chunks done, and how many chunks are done.
    taken: Mutex<(Vec<(usize, Lstat)>, usize)>,
    done: Condvar,
}

/// Directories per chunk: a run of siblings shares one open parent, and
/// taking a chunk costs one atomic add.
const CHUNK: usize = 32;

impl Shared {
    fn paths(&self) -> &[(usize, usize)] {
        self.paths
            .get_or_init(|| dir_paths(&self.bytes).unwrap_or_default())
    }

    /// Take chunks until none is left.
    fn work(&self) {
        let paths = self.paths();
        let mut lstat = LstatAt::new();
        loop {
            let start = self.next.fetch_add(CHUNK, Ordering::Relaxed);
            let Some(part) = paths.get(start..).filter(|p| !p.is_empty()) else {
                break;
            };
            // Counted as done however this chunk ends (a panic included),
            // so that `finish` never waits for it forever.
            let mut chunk = ChunkDone {
                shared: self,
                mine: Vec::with_capacity(CHUNK),
            };
            let mine = &mut chunk.mine;
            for (i, (at, len)) in part.iter().enumerate().take(CHUNK) {
                let Some(dir) = self
                    .bytes
                    .get(*at..at.saturating_add(*len))
                    .and_then(os_str_from_bytes)
                else {
                    continue;
                };
                if let Ok(l) = lstat.lstat(Path::new(dir)) {
                    mine.push((start + i, l));
                }
            }
        }
    }
}

/// A chunk being stamped: its stamps are handed over, and it is counted as
/// done, when it is dropped.
struct ChunkDone<'a> {
    shared: &'a Shared,
    mine: Vec<(usize, Lstat)>,
}

impl Drop for ChunkDone<'_> {
    fn drop(&mut self) {
        let mut t = self
            .shared
            .taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.0.append(&mut self.mine);
        t.1 += 1;
        self.shared.done.notify_all();
    }
}

impl StampsAhead {
    /// Begin stamping the directories of the cache file `bytes` on another
    /// thread; `None` on one CPU (the walker then stamps as it goes).
    pub fn start(bytes: Arc<Vec<u8>>, threads: usize) -> Option<StampsAhead> {
        if threads < 2 {
            return None;
        }
        let shared = Arc::new(Shared {
            bytes,
            paths: OnceLock::new(),
            next: AtomicUsize::new(0),
            taken: Mutex::new((Vec::new(), 0)),
            done: Condvar::new(),
        });
        let theirs = Arc::clone(&shared);
        // Detached: `finish` waits for the chunks taken, never for a
        // thread that a busy machine has not run yet.
        std::thread::Builder::new()
            .name("vetto-stamps".into())
            .spawn(move || theirs.work())
            .ok()?;
        Some(StampsAhead { shared })
    }

    /// Every stamp, by [`CachedDir::index`](super::walk_cache::CachedDir::index):
    /// the chunks nobody has taken yet are stamped here, then those the
    /// other thread took are waited for. A directory whose `lstat` failed
    /// has none (the walker asks again and decides as it always does).
    pub fn finish(self) -> Vec<Option<Lstat>> {
        self.shared.work();
        let n = self.shared.paths().len();
        let chunks = n.div_ceil(CHUNK);
        let mut out = vec![None; n];
        let mut t = self
            .shared
            .taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while t.1 < chunks {
            // A chunk whose thread panicked is counted all the same; its
            // directories only get a second look from the walker.
            t = self
                .shared
                .done
                .wait(t)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        for (i, l) in t.0.iter() {
            if let Some(slot) = out.get_mut(*i) {
                *slot = Some(*l);
            }
        }
        out
    }
}

impl Drop for StampsAhead {
    /// Unused (a policy with no `**`, or a load that failed): the other
    /// thread stops after its chunk.
    fn drop(&mut self) {
        self.shared.next.store(usize::MAX / 2, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for StampsAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StampsAhead").finish_non_exhaustive()
    }
}
