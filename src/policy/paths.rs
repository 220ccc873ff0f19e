//! Policy paths: lexical normalisation and glob expansion.
//!
//! Paths are normalised without touching the filesystem (`.` dropped, `..`
//! pops a component but never climbs above `/`); symlinks are NOT resolved,
//! because the sandbox decides on the path the job uses.
//!
//! Globs (`*`, `?` within one component, `**` for any depth) are expanded
//! against the filesystem at load time by a walk that never follows
//! symlinks, never enters `.git` or directories named like an `outputs`
//! entry when crossing a `**`, and stops with an error (fail closed) after
//! [`WALK_CAP`] directory entries.

use super::walk_cache::{
    CachedAnswer, CachedDir, DirStamp, Entry, KeepsNames, PathKey, PathMap, WalkCache, path_map,
    tree_digest,
};
use super::{Access, FsRule};
use crate::sys::os;
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// The most directory entries one policy load may visit while expanding
/// globs. Beyond it loading fails: a silently truncated walk could miss a
/// secret that a `deny` pattern was meant to mask.
pub const WALK_CAP: usize = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("empty path; expected an absolute path")]
    Empty,
    #[error("relative path `{0}`; expected an absolute path")]
    Relative(String),
    #[error("path contains a NUL byte")]
    Nul,
}

/// Make `p` absolute and lexically normal, or say why it cannot be.
pub fn normalise(p: &str) -> Result<PathBuf, PathError> {
    if p.is_empty() {
        return Err(PathError::Empty);
    }
    if p.contains('\0') {
        return Err(PathError::Nul);
    }
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err(PathError::Relative(p.to_string()));
    }
    Ok(normalise_abs(path))
}

/// Lexical normalisation of an absolute path.
pub fn normalise_abs(path: &Path) -> PathBuf {
    // Nearly every rule is written normal already; rebuilding it component
    // by component was a tenth of the policy load.
    if is_normal(path) {
        return path.to_path_buf();
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Absolute with no empty, `.` or `..` component and no trailing `/`:
/// what [`normalise_abs`] would return unchanged.
fn is_normal(path: &Path) -> bool {
    let bytes = os::os_bytes(path.as_os_str());
    match bytes.split_first() {
        Some((b'/', [])) => true,
        Some((b'/', rest)) => rest
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".."),
        _ => false,
    }
}

/// Whether a written path is a glob.
pub fn is_glob(p: &str) -> bool {
    p.contains(['*', '?'])
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("`**` must be a whole path component (`a/**/b`), found `{0}`")]
    BadDoubleStar(String),
    #[error(
        "expanding this glob visited more than {cap} directory entries (under {root}); vetto stops rather than miss a match"
    )]
    TooLarge { cap: usize, root: String },
    #[error("cannot read {path} while expanding the glob: {error}")]
    Io { path: String, error: String },
}

#[derive(Debug, Clone)]
enum Seg {
    Lit(String),
    Pat(String),
    Any,
}

/// The entries of one directory.
type Entries = Rc<Vec<Entry>>;

/// The components a remembered listing kept the names of.
type Kept = Rc<BTreeSet<String>>;

/// A listing the walker holds: complete when read in this load, or (from
/// the [`WalkCache`]) every subdirectory and the names matching `only`.
#[derive(Debug)]
struct Listing {
    entries: Entries,
    only: Option<Rc<BTreeSet<String>>>,
    /// Set when the listing may be remembered for the next load: read in
    /// this load from a directory whose last change has settled.
    stamp: Option<DirStamp>,
}

impl Listing {
    fn answers(&self, need: Option<&str>) -> bool {
        match (&self.only, need) {
            (None, _) | (Some(_), None) => true,
            (Some(set), Some(m)) => set.contains(m),
        }
    }
}

/// Which filesystems keep the promises the [`WalkCache`] relies on; asked
/// once per device.
pub type TrustFs = fn(&Path) -> bool;

/// The remembered walk in use: what the last load left, and which devices
/// are trusted.
#[derive(Debug)]
struct Memory {
    prior: WalkCache,
    trust: TrustFs,
    trusted: HashMap<u64, bool>,
    /// Components every remembered listing keeps the names of, whatever
    /// the policy asks (another reader of the listings needs them).
    keep: &'static [&'static str],
    /// A listing was read that the next load can use.
    changed: bool,
    /// How the directories are stamped: through their parents.
    lstat: os::LstatAt,
    /// Stamps taken ahead by another thread ([`GlobWalker::stamp_ahead`]),
    /// each used once, and the time just before they were begun.
    ahead: Vec<Option<os::Lstat>>,
    ahead_now: i128,
    /// Stamps begun before the load ([`super::walk_parallel::StampsAhead`])
    /// and the time just before they were begun.
    begun: Option<(super::walk_parallel::StampsAhead, i128)>,
    /// The answers of this load to keep: found anew, or recalled.
    answers: Vec<CachedAnswer>,
    /// Per `**` root: the digest of its remembered tree when every
    /// directory of it is as remembered (asked once per root).
    roots: PathMap<Option<String>>,
}

/// Whether device `dev` (of `dir`) keeps the promises: asked of `trust`
/// once per device, the answer kept in `trusted`.
fn trusts(trusted: &mut HashMap<u64, bool>, trust: TrustFs, dev: u64, dir: &Path) -> bool {
    *trusted.entry(dev).or_insert_with(|| trust(dir))
}

/// Nanoseconds since the epoch.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// Threads for a parallel walk: asked once per process (it reads the
/// cgroup's CPU quota).
pub fn walk_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

/// Expands globs for one policy load. Directory listings are cached, so
/// several patterns over the same tree (the default preset has a dozen
/// `${PROJECT}/**/…`) cost one walk, and the entry budget counts each
/// directory entry once for the whole load. With [`GlobWalker::remember`]
/// the listings also outlive the load (see [`super::walk_cache`]).
#[derive(Debug)]
pub struct GlobWalker {
    visited: usize,
    cap: usize,
    /// Directory names a `**` never enters.
    skip: Vec<String>,
    listings: PathMap<Listing>,
    /// Every component a listing was asked about.
    asked: BTreeSet<String>,
    memory: Option<Memory>,
    /// Every directory a `**` from a directory reaches, found once: the
    /// dozen `${PROJECT}/**/…` of the default preset then each cost a
    /// loop over the directories, not a walk.
    trees: PathMap<Rc<Vec<Node>>>,
}

/// A directory a `**` reaches, with the listing that was at hand when the
/// tree was found.
#[derive(Debug)]
struct Node {
    dir: PathBuf,
    entries: Entries,
    only: Option<Rc<BTreeSet<String>>>,
}

impl GlobWalker {
    pub fn new(skip: Vec<String>) -> Self {
        Self::with_cap(skip, WALK_CAP)
    }

    pub fn with_cap(mut skip: Vec<String>, cap: usize) -> Self {
        skip.push(".git".into());
        GlobWalker {
            visited: 0,
            cap,
            skip,
            listings: path_map(0),
            asked: BTreeSet::new(),
            memory: None,
            trees: path_map(0),
        }
    }

    /// Use (and then keep) a remembered walk; `trust` says which
    /// filesystems' change times are honest; `keep`: components whose
    /// names every remembered listing keeps (a listing remembered without
    /// them is read again).
    pub fn remember(&mut self, prior: WalkCache, trust: TrustFs, keep: &'static [&'static str]) {
        self.asked.extend(keep.iter().map(|k| (*k).to_string()));
        self.listings.reserve(prior.dirs.len());
        self.memory = Some(Memory {
            prior,
            trust,
            trusted: HashMap::new(),
            keep,
            changed: false,
            lstat: os::LstatAt::new(),
            ahead: Vec::new(),
            ahead_now: 0,
            begun: None,
            answers: Vec::new(),
            roots: path_map(0),
        });
    }

    /// Stamps of the remembered directories begun at `now` (before the
    /// load): the walker takes them instead of stamping ahead itself.
    /// After [`Self::remember`].
    pub fn stamps_begun(&mut self, begun: super::walk_parallel::StampsAhead, now: i128) {
        if let Some(memory) = &mut self.memory {
            memory.begun = Some((begun, now));
        }
    }

    /// Every directory named `.git` (any case) in a listing this load
    /// holds, below the directory listed: the repositories the start's
    /// walk saw but did not enter (`.git` is never walked).
    pub fn git_dirs(&self) -> Vec<PathBuf> {
        self.listings
            .iter()
            .flat_map(|(dir, l)| {
                l.entries
                    .iter()
                    .filter(|e| e.is_dir && e.name.as_encoded_bytes().eq_ignore_ascii_case(b".git"))
                    .map(move |e| dir.join(&e.name))
            })
            .collect()
    }

    /// The walk to remember for the next load: `None` when nothing was
    /// learnt (every listing came from the cache) or nothing is remembered.
    pub fn into_cache(self) -> Option<WalkCache> {
        self.into_listings()
            .and_then(|(cache, changed)| changed.then_some(cache))
    }

    /// Every remembered listing this load holds (read or recalled), and
    /// whether any was read anew; `None` when nothing is remembered.
    pub fn into_listings(self) -> Option<(WalkCache, bool)> {
        let memory = self.memory?;
        let asked = Rc::new(self.asked);
        let mut out = WalkCache {
            answers: memory.answers,
            ..WalkCache::default()
        };
        let kept_names = NameSet::new(asked.iter());
        out.dirs.reserve(self.listings.len());
        for (path, l) in self.listings {
            let Some(stamp) = l.stamp else { continue };
            let (set, entries) = match l.only {
                Some(set) => (set, l.entries),
                None => {
                    let kept = l
                        .entries
                        .iter()
                        .filter(|e| e.is_dir || kept_names.any(&e.name))
                        .cloned()
                        .collect();
                    (Rc::clone(&asked), Rc::new(kept))
                }
            };
            out.dirs.insert(
                path,
                CachedDir {
                    stamp,
                    set,
                    entries,
                    index: super::walk_cache::NOT_READ,
                },
            );
        }
        Some((out, memory.changed))
    }

    #[cfg(test)]
    pub fn visited(&self) -> usize {
        self.visited
    }

    /// Every existing path matching `pattern` (absolute, normalised), sorted.
    pub fn expand(&mut self, pattern: &Path) -> Result<Vec<PathBuf>, GlobError> {
        let mut root = PathBuf::from("/");
        let mut segs = Vec::new();
        for c in pattern.components() {
            let Component::Normal(n) = c else { continue };
            let s = n.to_string_lossy().into_owned();
            let seg = if s == "**" {
                Seg::Any
            } else if s.contains("**") {
                return Err(GlobError::BadDoubleStar(s));
            } else if is_glob(&s) {
                Seg::Pat(s)
            } else {
                Seg::Lit(s)
            };
            if segs.is_empty() {
                if let Seg::Lit(l) = &seg {
                    root.push(l);
                    continue;
                }
            }
            segs.push(seg);
        }
        let mut out = BTreeSet::new();
        if segs.is_empty() {
            out.insert(root);
            return Ok(out.into_iter().collect());
        }
        let root_s = root.display().to_string();
        // `root/**/LAST` consults only the listings of the tree below
        // `root`: its answer holds while every one of them does.
        let answerable = matches!(segs.as_slice(), [Seg::Any, Seg::Lit(_) | Seg::Pat(_)]);
        if matches!(segs.first(), Some(Seg::Any)) {
            self.read_ahead(&root, &root_s)?;
        }
        if answerable && let Some(found) = self.recall_answer(pattern, &root) {
            return Ok(found);
        }
        self.walk(&root, &segs, &mut out, &root_s)?;
        let out: Vec<PathBuf> = out.into_iter().collect();
        if answerable {
            self.note_answer(pattern, &root, &out);
        }
        Ok(out)
    }

    /// The remembered answer to `pattern` (a `root/**/LAST`), when every
    /// directory of the tree it was found in is as remembered.
    fn recall_answer(&mut self, pattern: &Path, root: &Path) -> Option<Vec<PathBuf>> {
        let digest = self.unchanged_tree(root)?;
        let memory = self.memory.as_mut()?;
        let answer = memory
            .prior
            .answers
            .iter()
            .find(|a| a.pattern == pattern && a.skip == self.skip && a.tree == digest)?
            .clone();
        let found = answer.matches.clone();
        if !memory.answers.iter().any(|a| a.pattern == pattern) {
            memory.answers.push(answer);
        }
        Some(found)
    }

    /// Remember `pattern`'s answer when every directory of `root`'s tree
    /// was stamped (settled, on a trusted filesystem) in this load.
    fn note_answer(&mut self, pattern: &Path, root: &Path, found: &[PathBuf]) {
        let Some(memory) = &mut self.memory else {
            return;
        };
        if memory.answers.iter().any(|a| a.pattern == pattern) {
            return;
        }
        let Some(tree) = self.trees.get(root.as_os_str()) else {
            return;
        };
        let mut dirs = Vec::with_capacity(tree.len());
        for node in tree.iter() {
            match self.listings.get(node.dir.as_os_str()) {
                Some(l) if l.stamp.is_some() => dirs.push(node.dir.as_path()),
                _ => return,
            }
        }
        let answer = CachedAnswer {
            pattern: pattern.to_path_buf(),
            skip: self.skip.clone(),
            tree: tree_digest(&mut dirs),
            matches: found.to_vec(),
        };
        if !memory.prior.answers.contains(&answer) {
            memory.changed = true;
        }
        memory.answers.push(answer);
    }

    /// The digest of `root`'s remembered tree — every remembered directory
    /// below it that a `**` enters — when each is as remembered now (the
    /// same identity and change times, settled, on a trusted filesystem);
    /// those listings are then taken as this load's. `None` otherwise.
    fn unchanged_tree(&mut self, root: &Path) -> Option<String> {
        let memory = self.memory.as_mut()?;
        if let Some(known) = memory.roots.get(root.as_os_str()) {
            return known.clone();
        }
        // Asked of a directory beneath `root` only: compared as bytes, as
        // `beneath` does (a `Path` would parse every component).
        let root_len = os::os_bytes(root.as_os_str()).len();
        let skipped = |d: &Path| {
            os::os_bytes(d.as_os_str())
                .get(root_len..)
                .unwrap_or_default()
                .split(|b| *b == b'/')
                .any(|c| self.skip.iter().any(|s| s.as_bytes() == c))
        };
        let mut dirs: Vec<(&PathKey, &CachedDir)> = Vec::new();
        let mut unchanged = true;
        for (d, cached) in &memory.prior.dirs {
            if !beneath(d, root) || skipped(d) {
                continue;
            }
            let (now, looked) = match memory.ahead.get(cached.index).copied().flatten() {
                Some(l) => (memory.ahead_now, Some(l)),
                None => (now_ns(), memory.lstat.lstat(d).ok()),
            };
            let holds = looked.as_ref().and_then(DirStamp::of).is_some_and(|st| {
                st == cached.stamp
                    && st.settled(now)
                    && trusts(&mut memory.trusted, memory.trust, st.dev, d)
            });
            if !holds {
                unchanged = false;
                break;
            }
            dirs.push((d, cached));
        }
        let digest = (unchanged && !dirs.is_empty()).then(|| {
            let mut paths: Vec<&Path> = dirs.iter().map(|(d, _)| &***d).collect();
            tree_digest(&mut paths)
        });
        if digest.is_some() {
            let mut sets = KeepsNames::new(memory.keep);
            for (d, c) in dirs {
                if sets.keeps(&c.set) {
                    self.listings.entry(d.clone()).or_insert_with(|| Listing {
                        entries: Rc::clone(&c.entries),
                        only: Some(Rc::clone(&c.set)),
                        stamp: Some(c.stamp),
                    });
                }
            }
        }
        memory.roots.insert(PathKey::from(root), digest.clone());
        digest
    }

    /// A first walk (nothing remembered, nothing read yet) of `root`'s
    /// tree is read by several threads ([`super::walk_parallel`]) before
    /// the patterns are answered from the listings, serially as always.
    fn read_ahead(&mut self, root: &Path, root_s: &str) -> Result<(), GlobError> {
        // Cheapest question first: this runs for every `**` pattern, and a
        // warm load (something remembered) or a tree already read (the
        // second pattern on) never reads ahead.
        let cold = self.memory.as_ref().is_none_or(|m| m.prior.dirs.is_empty());
        if !cold {
            self.stamp_ahead();
            return Ok(());
        }
        if self.trees.contains_key(root.as_os_str()) {
            return Ok(());
        }
        // Only the root itself may have been read (the default preset's
        // `${PROJECT}/.env.*` comes before its first `**`).
        if self
            .listings
            .keys()
            .any(|d| **d != *root && beneath(d, root))
        {
            return Ok(());
        }
        let threads = walk_threads();
        let is_dir = std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir());
        if threads < 2 || !is_dir {
            return Ok(());
        }
        let trust = self.memory.as_ref().map(|m| m.trust);
        // Asked once for the root's device, as the serial walk does.
        let root_dev = std::fs::symlink_metadata(root)
            .ok()
            .and_then(|m| os::file_id(&m))
            .map_or(0, |(dev, _)| dev);
        let root_trusted = trust.is_some_and(|t| t(root));
        let stamp = move |dir: &Path| -> Option<DirStamp> {
            let trust = trust?;
            let now = now_ns();
            let stamp = DirStamp::of(&os::lstat_of(&std::fs::symlink_metadata(dir).ok()?))?;
            let trusted = if stamp.dev == root_dev {
                root_trusted
            } else {
                trust(dir)
            };
            (stamp.settled(now) && trusted).then_some(stamp)
        };
        let remaining = self.cap.saturating_sub(self.visited);
        let Some(reads) =
            super::walk_parallel::read_tree(root, &self.skip, remaining, threads, &stamp)
        else {
            return Err(GlobError::TooLarge {
                cap: self.cap,
                root: root_s.to_string(),
            });
        };
        for r in reads {
            if self.listings.contains_key(r.dir.as_os_str()) {
                continue;
            }
            self.count(r.entries.len(), root_s)?;
            if let (Some(memory), Some(_)) = (&mut self.memory, r.stamp) {
                memory.changed = true;
            }
            let listing = Listing {
                entries: Rc::new(r.entries),
                only: None,
                stamp: r.stamp,
            };
            self.listings.insert(PathKey::from(r.dir), listing);
        }
        Ok(())
    }

    /// A warm load: the stamps of the remembered directories, begun on
    /// another thread when the cache file was read
    /// ([`super::walk_parallel::StampsAhead`]), are taken once. Without
    /// them (one CPU, or no thread could be started) the walk stamps each
    /// directory as it comes to it.
    fn stamp_ahead(&mut self) {
        let Some(memory) = &mut self.memory else {
            return;
        };
        if let Some((begun, now)) = memory.begun.take() {
            memory.ahead_now = now;
            memory.ahead = begun.finish();
        }
    }

    fn count(&mut self, n: usize, root: &str) -> Result<(), GlobError> {
        self.visited += n;
        if self.visited > self.cap {
            return Err(GlobError::TooLarge {
                cap: self.cap,
                root: root.to_string(),
            });
        }
        Ok(())
    }

    fn walk(
        &mut self,
        dir: &Path,
        segs: &[Seg],
        out: &mut BTreeSet<PathBuf>,
        root: &str,
    ) -> Result<(), GlobError> {
        let Some((first, rest)) = segs.split_first() else {
            out.insert(dir.to_path_buf());
            return Ok(());
        };
        match first {
            Seg::Lit(name) => {
                let p = dir.join(name);
                // A listing at hand (or a remembered one) answers without
                // a system call; otherwise one `lstat`.
                if self.memory.is_some() || self.listings.contains_key(dir.as_os_str()) {
                    let entries = self.entries(dir, Some(name), root)?;
                    let found = entries
                        .iter()
                        .find(|e| os::os_bytes(&e.name) == name.as_bytes())
                        .map(|e| e.is_dir);
                    return match found {
                        Some(is_dir) if rest.is_empty() || is_dir => self.walk(&p, rest, out, root),
                        _ => Ok(()),
                    };
                }
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if rest.is_empty() || m.is_dir() => self.walk(&p, rest, out, root),
                    Ok(_) => Ok(()),
                    Err(e) => skip_or_fail(&p, e),
                }
            }
            Seg::Pat(pat) => {
                for e in self.entries(dir, Some(pat), root)?.iter() {
                    if (rest.is_empty() || e.is_dir)
                        && glob_component(pat, &e.name.to_string_lossy())
                    {
                        self.walk(&dir.join(&e.name), rest, out, root)?;
                    }
                }
                Ok(())
            }
            // `dir` and every directory below it, then the rest from each.
            Seg::Any => {
                let tree = self.tree(dir, root)?;
                let last = match rest {
                    [Seg::Lit(l)] => Some((l, NameSet::new([l]))),
                    [Seg::Pat(p)] => Some((p, NameSet::new([p]))),
                    _ => None,
                };
                let Some((last, want)) = last else {
                    for node in tree.iter() {
                        self.walk(&node.dir, rest, out, root)?;
                    }
                    return Ok(());
                };
                // One last component (`**/*.pem`): answered from the
                // listing the tree holds when it can, as `walk` would.
                if !self.asked.contains(last) {
                    self.asked.insert(last.clone());
                }
                for node in tree.iter() {
                    let entries = match &node.only {
                        Some(set) if !set.contains(last) => {
                            self.entries(&node.dir, Some(last), root)?
                        }
                        _ => Rc::clone(&node.entries),
                    };
                    for e in entries.iter() {
                        if want.any(&e.name) {
                            out.insert(node.dir.join(&e.name));
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// `top` and every directory below it that a `**` enters (links never
    /// followed, the skipped names never entered), each listed once.
    fn tree(&mut self, top: &Path, root: &str) -> Result<Rc<Vec<Node>>, GlobError> {
        if let Some(t) = self.trees.get(top.as_os_str()) {
            return Ok(Rc::clone(t));
        }
        let mut nodes = Vec::new();
        let mut stack = vec![top.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let (entries, only) = self.listing(&dir, None, root)?;
            for e in entries.iter() {
                if e.is_dir
                    && !self
                        .skip
                        .iter()
                        .any(|s| s.as_bytes() == os::os_bytes(&e.name))
                {
                    stack.push(dir.join(&e.name));
                }
            }
            nodes.push(Node { dir, entries, only });
        }
        let nodes = Rc::new(nodes);
        self.trees.insert(PathKey::from(top), Rc::clone(&nodes));
        Ok(nodes)
    }

    /// Entries of `dir` that answer a question about the component `need`
    /// (`None`: only its subdirectories are wanted). Symlinks are never
    /// reported as directories, so the walk never follows them.
    fn entries(
        &mut self,
        dir: &Path,
        need: Option<&str>,
        root: &str,
    ) -> Result<Entries, GlobError> {
        self.listing(dir, need, root).map(|(entries, _)| entries)
    }

    /// [`Self::entries`], and the names a remembered listing is limited to
    /// (`None`: every name).
    fn listing(
        &mut self,
        dir: &Path,
        need: Option<&str>,
        root: &str,
    ) -> Result<(Entries, Option<Kept>), GlobError> {
        if let Some(m) = need {
            if !self.asked.contains(m) {
                self.asked.insert(m.to_string());
            }
        }
        if let Some(l) = self.listings.get(dir.as_os_str()) {
            if l.answers(need) {
                return Ok((Rc::clone(&l.entries), l.only.clone()));
            }
        }
        // The stamp before the read: a change after it shows in the next one.
        let stamp = match &mut self.memory {
            None => None,
            Some(memory) => {
                // A stamp taken ahead counts from the moment before it was
                // taken, as one taken here does.
                let ahead = memory
                    .prior
                    .dirs
                    .get(dir.as_os_str())
                    .and_then(|c| memory.ahead.get_mut(c.index))
                    .and_then(Option::take);
                let (now, looked) = match ahead {
                    Some(l) => (memory.ahead_now, Ok(l)),
                    None => (now_ns(), memory.lstat.lstat(dir)),
                };
                match looked {
                    Ok(m) if m.is_dir => 'stamped: {
                        // Without a file identity and a change time
                        // (Windows) nothing is remembered.
                        let Some(stamp) = DirStamp::of(&m) else {
                            break 'stamped None;
                        };
                        let trusted = trusts(&mut memory.trusted, memory.trust, stamp.dev, dir);
                        if trusted {
                            if let Some(c) = memory.prior.dirs.get(dir.as_os_str()) {
                                let settled = c.stamp.settled(now);
                                if c.stamp == stamp
                                    && settled
                                    && need.is_none_or(|m| c.set.contains(m))
                                    && memory.keep.iter().all(|k| c.set.contains(*k))
                                {
                                    let l = Listing {
                                        entries: Rc::clone(&c.entries),
                                        only: Some(Rc::clone(&c.set)),
                                        stamp: Some(stamp),
                                    };
                                    let entries = Rc::clone(&l.entries);
                                    let only = l.only.clone();
                                    self.count(entries.len(), root)?;
                                    self.listings.insert(PathKey::from(dir), l);
                                    return Ok((entries, only));
                                }
                            }
                        }
                        (trusted && stamp.settled(now)).then_some(stamp)
                    }
                    Ok(_) => return Ok((Entries::default(), None)),
                    Err(e) => return skip_or_fail(dir, e).map(|()| (Entries::default(), None)),
                }
            }
        };
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => return skip_or_fail(dir, e).map(|()| (Entries::default(), None)),
        };
        let mut out = Vec::new();
        for entry in rd {
            self.count(1, root)?;
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    skip_or_fail(dir, e)?;
                    continue;
                }
            };
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            out.push(Entry {
                name: entry.file_name(),
                is_dir,
            });
        }
        if let (Some(memory), Some(_)) = (&mut self.memory, stamp) {
            memory.changed = true;
        }
        let out = Rc::new(out);
        self.listings.insert(
            PathKey::from(dir),
            Listing {
                entries: Rc::clone(&out),
                only: None,
                stamp,
            },
        );
        Ok((out, None))
    }
}

/// Missing paths and directories the user cannot read are skipped: the
/// job runs as the same user with fewer rights, so it cannot read them
/// either. Anything else fails the load.
fn skip_or_fail(path: &Path, e: io::Error) -> Result<(), GlobError> {
    match e.kind() {
        io::ErrorKind::NotFound
        | io::ErrorKind::PermissionDenied
        | io::ErrorKind::NotADirectory => Ok(()),
        _ => Err(GlobError::Io {
            path: path.display().to_string(),
            error: e.to_string(),
        }),
    }
}

/// `*` (any run, including none) and `?` (one character) within one
/// component; a leading `.` is matched like any other character.
pub fn glob_component(pattern: &str, name: &str) -> bool {
    // On bytes, without allocating, where that is the same match: with no
    // `?` (a literal run of valid UTF-8 found in valid UTF-8 starts and
    // ends on character boundaries, so every `*` spans whole characters)
    // or an ASCII name (one byte, one character). The walk asks this of
    // every name in the project, for every pattern.
    if !pattern.contains('?') || name.is_ascii() {
        return glob_bytes(pattern.as_bytes(), name.as_bytes());
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    wildcard_match(&p, &n, '*', Some('?'))
}

/// Component patterns compiled to test many names: the literal each
/// pattern's matches start and end with is compared first, on the name's
/// bytes, so a name that matches none (nearly every name in a project)
/// costs a byte comparison or two per pattern. The same answers as
/// [`glob_component`] on the name as text: a name that is not UTF-8 is
/// shown lossily, each bad sequence as U+FFFD and every other character
/// as its own bytes, so a literal without U+FFFD that the text starts or
/// ends with is one the bytes start or end with (a pattern holding U+FFFD
/// is not compared first).
struct NameSet {
    pats: Vec<(String, usize, usize)>,
}

impl NameSet {
    fn new<'a>(pats: impl IntoIterator<Item = &'a String>) -> Self {
        let pats = pats
            .into_iter()
            .map(|p| {
                let b = p.as_bytes();
                let wild = |c: &u8| *c == b'*' || *c == b'?';
                let (head, tail) = if p.contains(char::REPLACEMENT_CHARACTER) {
                    (0, 0)
                } else {
                    (
                        b.iter().position(wild).unwrap_or(b.len()),
                        b.iter().rev().position(wild).unwrap_or(b.len()),
                    )
                };
                (p.clone(), head, tail)
            })
            .collect();
        NameSet { pats }
    }

    fn any(&self, name: &std::ffi::OsStr) -> bool {
        let n = os::os_bytes(name);
        let mut text = None;
        self.pats.iter().any(|(p, head, tail)| {
            let b = p.as_bytes();
            if !(ends_with(n, &b[b.len() - *tail..]) && n.starts_with(&b[..*head])) {
                return false;
            }
            glob_component(p, text.get_or_insert_with(|| name.to_string_lossy()))
        })
    }
}

/// `n` ends with `t`, its last byte compared first (most names differ
/// there from a pattern's extension).
fn ends_with(n: &[u8], t: &[u8]) -> bool {
    match (n.last(), t.last()) {
        (_, None) => true,
        (Some(a), Some(b)) if a == b => n.ends_with(t),
        _ => false,
    }
}

/// [`glob_component`]'s matcher over bytes: `?` is one byte.
fn glob_bytes(p: &[u8], n: &[u8]) -> bool {
    wildcard_match(p, n, b'*', Some(b'?'))
}

/// The wildcard matcher of [`glob_component`] and the environment's name
/// patterns, over any units (bytes, characters): `star` matches any run
/// of units, including none; `one`, when there is one, matches exactly
/// one; every other unit matches itself. Backtracks to the last `star`
/// only, so the cost is at most `p.len() * n.len()`.
pub fn wildcard_match<T: Copy + PartialEq>(p: &[T], n: &[T], star: T, one: Option<T>) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let (mut last_star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (Some(p[pi]) == one || (p[pi] != star && p[pi] == n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == star {
            last_star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = last_star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == star)
}

// The decision rule, shared by the plan (what the kernel is told) and
// `policy explain` (what the user is told): one function, so the two
// cannot disagree.

/// `path` is `ancestor` or lies beneath it. Both are absolute and
/// lexically normal (the policy guarantees it), so a byte-prefix test at a
/// component boundary is exact — and far cheaper than `Path::starts_with`,
/// which matters on the startup path where every rule meets every rule.
pub fn beneath(path: &Path, ancestor: &Path) -> bool {
    let (p, a) = (
        os::os_bytes(path.as_os_str()),
        os::os_bytes(ancestor.as_os_str()),
    );
    if a == b"/" {
        return p.first() == Some(&b'/');
    }
    p.starts_with(a) && (p.len() == a.len() || p[a.len()] == b'/')
}

/// The access that decides `path`: the rule with the longest path that is
/// `path` or an ancestor of it; ties go to the stronger restriction.
/// `None` when no rule covers the path (deny by default).
pub fn decide<'a, I>(rules: I, path: &Path) -> Option<(Access, &'a Path)>
where
    I: IntoIterator<Item = (&'a Path, Access)>,
{
    let mut best: Option<(Access, &Path)> = None;
    for (rule_path, access) in rules {
        if !beneath(path, rule_path) {
            continue;
        }
        best = match best {
            Some((a, p)) if p.as_os_str().len() > rule_path.as_os_str().len() => Some((a, p)),
            Some((a, p)) if p.as_os_str().len() == rule_path.as_os_str().len() && a >= access => {
                Some((a, p))
            }
            _ => Some((access, rule_path)),
        };
    }
    best
}

/// Convenience over [`decide`] for policy rules.
pub fn decide_rule<'a>(rules: &'a [FsRule], path: &Path) -> Option<&'a FsRule> {
    let (access, p) = decide(rules.iter().map(|r| (r.path.as_path(), r.access)), path)?;
    rules.iter().find(|r| r.path == p && r.access == access)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotdot_never_climbs_above_root() {
        assert_eq!(
            normalise("/a/../../..//b/./c/").ok(),
            Some(PathBuf::from("/b/c"))
        );
        assert_eq!(normalise("/..").ok(), Some(PathBuf::from("/")));
        assert_eq!(normalise("a/b"), Err(PathError::Relative("a/b".into())));
        assert_eq!(normalise(""), Err(PathError::Empty));
    }

    #[test]
    fn the_shortcut_for_normal_paths_changes_nothing() {
        let slow = |p: &str| {
            let mut out = PathBuf::from("/");
            for c in Path::new(p).components() {
                match c {
                    Component::Normal(n) => out.push(n),
                    Component::ParentDir => {
                        out.pop();
                    }
                    _ => {}
                }
            }
            out
        };
        for p in [
            "/",
            "//",
            "/a",
            "/a/",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/.a/..b/...",
            "/a b/é",
            "/a/b/c.d",
        ] {
            assert_eq!(normalise_abs(Path::new(p)), slow(p), "{p}");
        }
    }

    #[test]
    fn component_globs() {
        assert!(glob_component("*.pem", "server.pem"));
        assert!(glob_component("*.pem", ".hidden.pem"));
        assert!(!glob_component("*.pem", "server.pem.txt"));
        assert!(glob_component(".env.*", ".env.local"));
        assert!(!glob_component(".env.*", ".env"));
        assert!(glob_component("id_?sa", "id_rsa"));
        assert!(glob_component("*", ""));
        // Off the byte path: `?` is one character, not one byte.
        assert!(glob_component("caf?", "café"));
        assert!(!glob_component("caf??", "café"));
        assert!(glob_component("*é*.pem", "clé.pem"));
        assert!(!glob_component("*é", "cle"));
    }

    #[cfg(unix)]
    #[test]
    fn a_compiled_name_set_answers_as_glob_component() {
        use std::os::unix::ffi::OsStrExt;
        let pats: Vec<String> = [
            "*.pem",
            ".env",
            ".env.*",
            "id_?sa",
            "privkey*.pem",
            "*",
            "a*b*c",
            "caf?",
            "*\u{fffd}",
            "\u{fffd}x",
            "",
        ]
        .iter()
        .map(|p| p.to_string())
        .collect();
        let names: [&[u8]; 14] = [
            b"server.pem",
            b".env",
            b".env.local",
            b"id_rsa",
            b"privkey1.pem",
            b"abc",
            b"aXbYc",
            "café".as_bytes(),
            b"k\xff",
            b"\xffx",
            b"k\xff.pem",
            b"",
            b"file0.rs",
            b"pem",
        ];
        for p in &pats {
            let set = NameSet::new([p]);
            for n in names {
                let name = std::ffi::OsStr::from_bytes(n);
                let want = glob_component(p, &name.to_string_lossy());
                assert_eq!(set.any(name), want, "{p} {name:?}");
            }
        }
    }
}
