//! The glob walk remembered between sessions, as git's untracked cache
//! remembers its walk: a directory whose identity and change times are
//! those recorded has the names recorded.
//!
//! What makes that true, and why a job cannot make it false:
//!
//! * A directory's `ctime` changes whenever an entry is created, removed
//!   or renamed in it (its `mtime` too), and no unprivileged process can
//!   set a `ctime`: `utimensat` sets `mtime` and `atime` and stamps `ctime`
//!   with the current time. The stamp holds `ctime` with its nanoseconds,
//!   the device and the inode number (a directory removed and made again
//!   is a new stamp) and `mtime` as well.
//! * Timestamps come from a coarse clock: a change in the same tick as
//!   the walk's read can leave `ctime` as it was. A listing is therefore
//!   only kept when its directory's `ctime` is more than
//!   [`SETTLE_SECS`] older than the moment before its stamp was taken;
//!   anything changed later has a later `ctime`.
//! * Only filesystems that keep those promises are trusted (the walker
//!   is told which, per device); on any other the walk reads as before.
//! * The file lives in a vetto-owned directory that every confined
//!   session masks from its job (`session` checks it against the final
//!   policy and does not use the cache otherwise). It is parsed
//!   defensively: any defect discards the whole cache, which only costs a
//!   full walk.
//!
//! A cached listing keeps every subdirectory and only the other names
//! that match one of the components the walk asked about (its `set`): a
//! question about another component is answered by reading the directory.
//!
//! A `root/**/LAST` pattern consults nothing but the listings of the tree
//! below `root`, so its matches are kept too ([`CachedAnswer`]), with a
//! SHA-256 of the tree's directory paths, and only when every directory
//! of the tree was stamped. A later load takes them while the remembered
//! directories below `root` (those a `**` enters) have exactly that
//! digest and each is as stamped: any entry created, removed or renamed
//! anywhere in the tree changes some directory's `ctime`, so the pattern
//! is walked again. The digest is cryptographic because the job names the
//! directories it hashes.

use crate::sys::os::{os_bytes, os_string_from_bytes};
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::rc::Rc;

/// How much older than the walk a directory's last change must be for
/// its listing to be kept.
pub const SETTLE_SECS: i64 = 2;

/// The largest cache file read; a bigger one is ignored.
pub const MAX_BYTES: u64 = 64 << 20;

const MAGIC: &[u8; 12] = b"vetto-walk2\n";

/// A directory's identity and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirStamp {
    pub dev: u64,
    pub ino: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl DirStamp {
    /// The stamp of what `lstat` found: `None` for anything but a
    /// directory with an identity and a change time (Windows has neither).
    pub fn of(l: &crate::sys::os::Lstat) -> Option<DirStamp> {
        let (dev, ino) = l.id?;
        Some(DirStamp {
            dev,
            ino,
            mtime: l.mtime,
            ctime: l.ctime?,
        })
        .filter(|_| l.is_dir)
    }

    /// Whether the directory's last change is more than [`SETTLE_SECS`]
    /// before `now` (nanoseconds since the epoch).
    pub fn settled(&self, now: i128) -> bool {
        let ctime = i128::from(self.ctime.0) * 1_000_000_000 + i128::from(self.ctime.1);
        ctime + i128::from(SETTLE_SECS) * 1_000_000_000 < now
    }
}

/// One directory entry: its name as the kernel gave it, and whether it is
/// a real directory (never a symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub is_dir: bool,
}

/// A remembered listing: every subdirectory, and the other names matching
/// one of `set`.
#[derive(Debug, Clone)]
pub struct CachedDir {
    pub stamp: DirStamp,
    pub set: Rc<BTreeSet<String>>,
    pub entries: Rc<Vec<Entry>>,
    /// Its place among the directories of the file it was read from
    /// ([`dir_paths`] lists them in that order); [`NOT_READ`] for a
    /// listing of this load.
    pub index: usize,
}

/// [`CachedDir::index`] of a listing that was not read from a file.
pub const NOT_READ: usize = usize::MAX;

/// A map keyed by path, hashed with foldhash: a warm load looks up every
/// directory of the project two or three times, and SipHash was a tenth
/// of it. foldhash is seeded per process, so a job naming directories
/// cannot aim collisions at the next load. Look up with `path.as_os_str()`.
pub type PathMap<V> = HashMap<PathKey, V, foldhash::fast::RandomState>;

/// A path as a map key, hashed and compared as bytes. The walk's paths
/// are absolute and normalised (no `.`, `..`, doubled or trailing
/// slash), so equal bytes are equal paths; `Path`'s own hash and
/// equality parse every component, which was a tenth of a warm load.
/// Shared (`Rc`): a remembered directory's key is the same allocation in
/// the remembered walk, the walk's listings and the end check's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathKey(Rc<std::ffi::OsStr>);

impl std::borrow::Borrow<std::ffi::OsStr> for PathKey {
    fn borrow(&self) -> &std::ffi::OsStr {
        &self.0
    }
}

impl std::ops::Deref for PathKey {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        std::path::Path::new(&*self.0)
    }
}

impl From<PathBuf> for PathKey {
    fn from(p: PathBuf) -> Self {
        PathKey(Rc::from(p.into_os_string()))
    }
}

impl From<&std::path::Path> for PathKey {
    fn from(p: &std::path::Path) -> Self {
        PathKey(Rc::from(p.as_os_str()))
    }
}

/// An empty [`PathMap`] with room for `n` paths.
pub fn path_map<V>(n: usize) -> PathMap<V> {
    HashMap::with_capacity_and_hasher(n, foldhash::fast::RandomState::default())
}

/// Whether a set of kept names ([`CachedDir::set`]) keeps every one of
/// `names`: the listings of one load share one or two sets, so each set
/// is asked once (by identity) however many listings carry it.
#[derive(Debug)]
pub struct KeepsNames {
    names: &'static [&'static str],
    known: Vec<(Rc<BTreeSet<String>>, bool)>,
}

impl KeepsNames {
    pub fn new(names: &'static [&'static str]) -> Self {
        KeepsNames {
            names,
            known: Vec::new(),
        }
    }

    pub fn keeps(&mut self, set: &Rc<BTreeSet<String>>) -> bool {
        if let Some((_, keeps)) = self.known.iter().find(|(s, _)| Rc::ptr_eq(s, set)) {
            return *keeps;
        }
        let keeps = self.names.iter().all(|n| set.contains(*n));
        self.known.push((Rc::clone(set), keeps));
        keeps
    }
}

/// What a `**` pattern matched, remembered with the tree it was found
/// in: while every directory of that tree is as remembered, the pattern
/// matches the same paths, and a load takes them without walking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedAnswer {
    /// The pattern as `GlobWalker::expand` took it (absolute, normalised).
    pub pattern: PathBuf,
    /// The directory names a `**` never entered.
    pub skip: Vec<String>,
    /// [`tree_digest`] of the tree's directories: every one of them was
    /// remembered (stamped) when the pattern was answered.
    pub tree: String,
    pub matches: Vec<PathBuf>,
}

/// The remembered walk of one project's policy loads.
#[derive(Debug, Clone, Default)]
pub struct WalkCache {
    pub dirs: PathMap<CachedDir>,
    pub answers: Vec<CachedAnswer>,
}

/// A digest of a set of directories (sorted as bytes here): equal digests,
/// equal sets.
pub fn tree_digest(dirs: &mut [&std::path::Path]) -> String {
    dirs.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    let parts: Vec<&[u8]> = dirs
        .iter()
        .flat_map(|d| [os_bytes(d.as_os_str()), b"\0".as_slice()])
        .collect();
    crate::hash::sha256_hex(&parts)
}

impl WalkCache {
    /// Encode for the cache file.
    pub fn encode(&self) -> Vec<u8> {
        let mut sets: Vec<Rc<BTreeSet<String>>> = Vec::new();
        let mut out = MAGIC.to_vec();
        let mut body = Vec::new();
        let mut dirs: Vec<_> = self.dirs.iter().collect();
        dirs.sort_by(|a, b| a.0.cmp(b.0));
        put_u32(&mut body, dirs.len());
        for (path, d) in dirs {
            let idx = match sets
                .iter()
                .position(|s| Rc::ptr_eq(s, &d.set) || **s == *d.set)
            {
                Some(i) => i,
                None => {
                    sets.push(Rc::clone(&d.set));
                    sets.len() - 1
                }
            };
            put_bytes(&mut body, os_bytes(path.as_os_str()));
            for v in [d.stamp.dev, d.stamp.ino] {
                body.extend_from_slice(&v.to_le_bytes());
            }
            for v in [
                d.stamp.mtime.0,
                d.stamp.mtime.1,
                d.stamp.ctime.0,
                d.stamp.ctime.1,
            ] {
                body.extend_from_slice(&v.to_le_bytes());
            }
            put_u32(&mut body, idx);
            put_u32(&mut body, d.entries.len());
            for e in d.entries.iter() {
                body.push(u8::from(e.is_dir));
                put_bytes(&mut body, os_bytes(&e.name));
            }
        }
        put_u32(&mut body, self.answers.len());
        for a in &self.answers {
            put_bytes(&mut body, os_bytes(a.pattern.as_os_str()));
            put_u32(&mut body, a.skip.len());
            for k in &a.skip {
                put_bytes(&mut body, k.as_bytes());
            }
            put_bytes(&mut body, a.tree.as_bytes());
            put_u32(&mut body, a.matches.len());
            for m in &a.matches {
                put_bytes(&mut body, os_bytes(m.as_os_str()));
            }
        }
        put_u32(&mut out, sets.len());
        for s in &sets {
            put_u32(&mut out, s.len());
            for m in s.iter() {
                put_bytes(&mut out, m.as_bytes());
            }
        }
        out.extend_from_slice(&body);
        // A torn or truncated write never decodes: the length goes last.
        let len = out.len() as u64;
        out.extend_from_slice(&len.to_le_bytes());
        out
    }

    /// Decode a cache file; `None` for anything but a whole, well-formed one.
    pub fn decode(bytes: &[u8]) -> Option<WalkCache> {
        let (body, len) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
        if u64::from_le_bytes(len.try_into().ok()?) != body.len() as u64 {
            return None;
        }
        let mut r = Reader { rest: body };
        if r.take(MAGIC.len())? != MAGIC {
            return None;
        }
        let nsets = r.u32()?;
        let mut sets = Vec::new();
        for _ in 0..nsets {
            let n = r.u32()?;
            let mut s = BTreeSet::new();
            for _ in 0..n {
                s.insert(String::from_utf8(r.bytes()?.to_vec()).ok()?);
            }
            sets.push(Rc::new(s));
        }
        let ndirs = r.u32()?;
        // Room for as many as the bytes left can hold (a directory takes
        // more than 56), never for what a defective count claims.
        let mut dirs = path_map(ndirs.min(r.rest.len() / 56));
        for _ in 0..ndirs {
            let path = PathBuf::from(os_string_from_bytes(r.bytes()?.to_vec())?);
            if !path.is_absolute() {
                return None;
            }
            let dev = r.u64()?;
            let ino = r.u64()?;
            let mtime = (r.i64()?, r.i64()?);
            let ctime = (r.i64()?, r.i64()?);
            let set = Rc::clone(sets.get(r.u32()?)?);
            let n = r.u32()?;
            // Each entry takes at least five bytes: a count beyond what
            // is left is a defect, not an allocation.
            if n > r.rest.len() / 5 {
                return None;
            }
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                let is_dir = match r.take(1)? {
                    [0] => false,
                    [1] => true,
                    _ => return None,
                };
                let name = r.bytes()?;
                if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
                    return None;
                }
                entries.push(Entry {
                    name: os_string_from_bytes(name.to_vec())?,
                    is_dir,
                });
            }
            let stamp = DirStamp {
                dev,
                ino,
                mtime,
                ctime,
            };
            let entries = Rc::new(entries);
            let index = dirs.len();
            dirs.insert(
                PathKey::from(path),
                CachedDir {
                    stamp,
                    set,
                    entries,
                    index,
                },
            );
        }
        let nanswers = r.u32()?;
        let mut answers = Vec::with_capacity(nanswers.min(r.rest.len() / 16));
        for _ in 0..nanswers {
            let abs = |b: &[u8]| {
                let p = PathBuf::from(os_string_from_bytes(b.to_vec())?);
                p.is_absolute().then_some(p)
            };
            let pattern = abs(r.bytes()?)?;
            let nskip = r.u32()?;
            let mut skip = Vec::with_capacity(nskip.min(r.rest.len() / 4));
            for _ in 0..nskip {
                skip.push(String::from_utf8(r.bytes()?.to_vec()).ok()?);
            }
            let tree = String::from_utf8(r.bytes()?.to_vec()).ok()?;
            let nmatches = r.u32()?;
            let mut matches = Vec::with_capacity(nmatches.min(r.rest.len() / 4));
            for _ in 0..nmatches {
                matches.push(abs(r.bytes()?)?);
            }
            answers.push(CachedAnswer {
                pattern,
                skip,
                tree,
                matches,
            });
        }
        r.rest.is_empty().then_some(WalkCache { dirs, answers })
    }
}

/// Where each directory's path lies in a cache file (offset, length), in
/// the order [`WalkCache::decode`] numbers them: what the stamps need,
/// read without decoding the rest (so that they can begin while the rest
/// is decoded). `None` for a file `decode` would not take as far as its
/// directories (a later defect is `decode`'s to find: its answer decides).
pub fn dir_paths(bytes: &[u8]) -> Option<Vec<(usize, usize)>> {
    let body = bytes.get(..bytes.len().checked_sub(8)?)?;
    let mut r = Reader { rest: body };
    if r.take(MAGIC.len())? != MAGIC {
        return None;
    }
    for _ in 0..r.u32()? {
        for _ in 0..r.u32()? {
            r.bytes()?;
        }
    }
    let ndirs = r.u32()?;
    let mut out = Vec::with_capacity(ndirs.min(r.rest.len() / 56));
    for _ in 0..ndirs {
        let path = r.bytes()?;
        let at = body.len() - r.rest.len() - path.len();
        out.push((at, path.len()));
        // dev, ino, two times, the set's index.
        r.take(8 * 6 + 4)?;
        for _ in 0..r.u32()? {
            r.take(1)?;
            r.bytes()?;
        }
    }
    Some(out)
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    // Counts and lengths come from memory the walk filled from one
    // directory listing each: far below 4 Gi.
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<usize> {
        let b = self.take(4)?;
        usize::try_from(u32::from_le_bytes(b.try_into().ok()?)).ok()
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.take(n)
    }
}

// Unix names and paths: non-UTF-8 bytes, `/`-rooted (the cache is only
// written where directories have an identity and a change time).
#[cfg(all(test, unix))]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    fn sample() -> WalkCache {
        let set = Rc::new(BTreeSet::from(["*.pem".to_string(), ".env".to_string()]));
        let mut c = WalkCache::default();
        c.dirs.insert(
            PathKey::from(PathBuf::from("/p/src")),
            CachedDir {
                stamp: DirStamp {
                    dev: 1,
                    ino: 2,
                    mtime: (3, 4),
                    ctime: (5, 6),
                },
                set,
                entries: Rc::new(vec![
                    Entry {
                        name: OsString::from_vec(b"k\xff.pem".to_vec()),
                        is_dir: false,
                    },
                    Entry {
                        name: "sub".into(),
                        is_dir: true,
                    },
                ]),
                index: NOT_READ,
            },
        );
        c.answers.push(CachedAnswer {
            pattern: PathBuf::from("/p/**/*.pem"),
            skip: vec![".git".into(), "target".into()],
            tree: "ab12".into(),
            matches: vec![PathBuf::from(OsString::from_vec(
                b"/p/src/k\xff.pem".to_vec(),
            ))],
        });
        c
    }

    #[test]
    fn a_cache_round_trips_with_names_that_are_not_utf8() {
        let bytes = sample().encode();
        let back = WalkCache::decode(&bytes).unwrap();
        let d = &back.dirs[std::ffi::OsStr::new("/p/src")];
        assert_eq!(d.stamp.ctime, (5, 6));
        assert_eq!(d.entries[0].name.as_bytes(), b"k\xff.pem");
        assert!(d.set.contains("*.pem"));
        assert_eq!(back.answers, sample().answers);
    }

    #[test]
    fn the_paths_the_stamps_take_are_the_decoded_directories_in_order() {
        let mut c = sample();
        let second = c.dirs.values().next().unwrap().clone();
        c.dirs.insert(PathKey::from(PathBuf::from("/p/a")), second);
        let bytes = c.encode();
        let back = WalkCache::decode(&bytes).unwrap();
        let paths = dir_paths(&bytes).unwrap();
        assert_eq!(paths.len(), 2);
        for (d, cached) in &back.dirs {
            let (at, len) = paths[cached.index];
            assert_eq!(&bytes[at..at + len], d.as_os_str().as_bytes());
        }
        for cut in 0..bytes.len() {
            // Never a panic, never a path outside the bytes.
            for (at, len) in dir_paths(&bytes[..cut]).unwrap_or_default() {
                assert!(at + len <= cut);
            }
        }
    }

    #[test]
    fn a_truncated_or_altered_cache_is_discarded() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(WalkCache::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut evil = bytes.clone();
        let at = evil.len() - 20;
        evil[at] ^= 0x2f;
        // Either rejected or decoded to something well-formed: never a panic.
        let _ = WalkCache::decode(&evil);
    }
}
