//! After the session: what the job left behind for other tools to run
//! later, outside the sandbox (issue 9, item 3).
//!
//! A `git status` from a shell prompt or an IDE in a repository the job
//! planted runs that repository's `core.fsmonitor`; direnv, VS Code tasks
//! and dev containers run what their files say. The supervisor refuses the
//! creation of nested `.git` entries where it sees creations; this check is
//! the part that holds on every tier and catches what the supervisor could
//! not see (a write into an existing file, a racing thread that changed a
//! name after the supervisor read it).
//!
//! The places that run later by name or by configuration (the root's
//! editor, shell and agent files, what the repository's config names) are
//! compared by content against a snapshot taken at the start
//! (`supervisor::snapshot`), which a rename into place cannot evade; this
//! module keeps the walk below the root, which finds repositories planted
//! or changed anywhere in the project.
//!
//! **How "changed" is decided here: by change time, not by a snapshot.** The
//! kernel stamps `ctime` on every write, truncation, rename, link, chmod
//! and creation, from `CLOCK_REALTIME_COARSE`, and nobody without
//! `CAP_SYS_TIME` can set it. So the start costs one clock read — no walk
//! of the project, whatever its size — and an entry whose `ctime` is not
//! before the session's start was created or changed during the session.
//! A file the job did not touch keeps its old stamp and its content is the
//! user's own. Stamps alone cannot tell a repository completed in this
//! session from files an earlier session left (`mv sub/HEAD.x sub/HEAD`:
//! the config keeps the earlier stamp), so a repository is also judged by
//! whether it was one at the start: the start's glob walk listed every
//! directory but `.git` and the `outputs` directories before the job ran,
//! with `HEAD`, `objects/`, `refs/` and `.git` in its listings
//! ([`What::Became`]).
//!
//! **What is looked at.** At the project root: `.envrc`, `.vscode/{tasks,
//! launch,settings}.json`, `.devcontainer/` (everything in it),
//! `.gitattributes`, `.lfsconfig`, `.gitmodules`, and the root repository's
//! `config`, `config.worktree`, `commondir`, `hooks/`, `info/` and the
//! submodules' git directories under `modules/`. Below the root: every
//! entry named `.git` (a directory, a `gitdir:` file or a link) and every
//! bare repository (a directory holding `HEAD`, `objects/`, `refs/`), with
//! the same git-directory files. `.gitattributes` below the root is not
//! reported: dependency trees ship them, and an attribute can only select
//! a filter or diff driver that a repository's config defines — which is
//! checked.
//!
//! **Safely, and bounded.** The walk runs after every process of the job
//! is dead, lists directories by their entry types (`d_type`, or `lstat`),
//! never follows a link, never descends into a `.git` directory's objects,
//! and stops after [`Limits::entries`] entries: a job that makes a million
//! files costs a bounded walk, and what was left unchecked is itself a
//! finding (fail closed), as is a directory that cannot be listed.
//!
//! **Directories the session did not change are not read again.** An
//! entry created, removed or renamed in a directory stamps the
//! directory's `ctime`, which nobody can set back; so a directory whose
//! device, inode, `mtime` and `ctime` are those of a listing the start's
//! glob walk remembered (`policy::walk_cache`, on a filesystem whose
//! change times are honest), and whose `ctime` is before the session's
//! start, has the entries remembered. Those listings keep every
//! subdirectory and every name [`REMEMBERED_NAMES`] matches — all this
//! walk looks at — so the walk takes them instead of a `getdents`, and
//! still `lstat`s every subdirectory (a file planted in an old directory's
//! subdirectory stamps that subdirectory). What a remembered listing
//! cannot show — a write into an existing file — is found as before: every
//! `.git` entry and every repository's config, hooks and info are
//! `lstat`ed and judged by their own `ctime`, and their small directories
//! (`hooks/`, `info/`, `.devcontainer/`) are always read.
//! When the job changed no entry at all, the walk below the root is
//! worked out on the start's listings while the job runs ([`Clean`]),
//! and stands at the end only where it found nothing there.
//! Measured (release build, ext4, a loaded 2-core VM): 50,000 files in
//! 2,562 directories take 32–39 ms read with a warm page cache, 160 ms
//! cold; see docs/benchmarks.md for the remembered case.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::events::{Action, ProcessInfo, Provenance, RuleId, Target, Timestamp, Violation};
use crate::policy::walk_cache::{DirStamp, Entry, KeepsNames, WalkCache};
use crate::sys::os;

/// What this walk needs of a directory besides its subdirectories, as
/// glob components every remembered listing keeps (`session::walk`):
/// `.???` takes every spelling of `.git` that [`is_git_name`] takes (and
/// a few other four-character dot names), `HEAD` a bare repository's.
pub const REMEMBERED_NAMES: [&str; 2] = [".???", "HEAD"];

/// A time on the clock the kernel stamps `ctime` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    pub sec: i64,
    pub nsec: i64,
}

/// What an entry is (the same vocabulary as the content snapshot's).
pub use crate::policy::autorun::Kind;

/// What `lstat` says about an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub ctime: Stamp,
}

/// What the check needs from the filesystem (faked in tests). Neither
/// call may follow a symbolic link.
pub trait Tree {
    /// `lstat`: `None` when nothing is there.
    fn lstat(&self, path: &Path) -> Option<Meta>;
    /// Up to `max` entries of directory `dir` with their kinds; an error
    /// when it cannot be listed.
    fn list(&self, dir: &Path, max: usize) -> std::io::Result<Vec<(OsString, Kind)>>;
    /// What the entry is, precisely enough to tell whether it changed
    /// (inode, size, stamps, content or link target); `None` when it
    /// cannot be read.
    fn identity(&self, path: &Path) -> Option<Identity>;
    /// A directory's device and inode (`lstat`); `None` when unknown.
    fn dir_id(&self, path: &Path) -> Option<(u64, u64)> {
        let _ = path;
        None
    }
    /// The entries of directory `dir` as remembered — every subdirectory
    /// and the names [`REMEMBERED_NAMES`] match — when `dir` is known to
    /// have gained and lost no entry since it was listed, nor since
    /// `since`; `None`: it must be listed.
    fn remembered(&self, dir: &Path, since: Stamp) -> Option<Rc<Vec<Entry>>> {
        let _ = (dir, since);
        None
    }
}

/// A directory's entries for the walk: as listed now, or as remembered
/// (shared with the start's walk, not copied).
enum Listed {
    Now(Vec<(OsString, Kind)>),
    Remembered(Rc<Vec<Entry>>),
}

impl Listed {
    fn iter(&self) -> impl Iterator<Item = (&OsStr, Kind)> + '_ {
        let (now, remembered) = match self {
            Listed::Now(v) => (Some(v), None),
            Listed::Remembered(r) => (None, Some(r)),
        };
        let now = now.into_iter().flatten().map(|(n, k)| (n.as_os_str(), *k));
        // A remembered listing tells directories from everything else.
        let remembered = remembered.into_iter().flat_map(|r| r.iter()).map(|e| {
            let kind = if e.is_dir { Kind::Dir } else { Kind::Other };
            (e.name.as_os_str(), kind)
        });
        now.chain(remembered)
    }
}

/// An entry as it was: compared, never interpreted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity(Vec<u8>);

/// How much the check may do.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Directory entries listed in all.
    pub entries: usize,
    /// Findings kept (the rest are counted).
    pub findings: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            entries: 1_000_000,
            findings: 64,
        }
    }
}

/// What the session start hands to the end: the project and the time.
#[derive(Debug, Clone)]
pub struct Watch {
    pub project: PathBuf,
    /// Changes stamped at or after this are the session's.
    pub since: Stamp,
    /// The root's watched entries that already carried a stamp at or after
    /// [`Watch::since`] when the session started (changed in the tick
    /// before it: a `git init`, a checkout, right before vetto), as they
    /// were then. Still so at the end, they are not the job's.
    pub settled: HashMap<PathBuf, Identity>,
    /// Paths the policy keeps read-only that nothing kept so during the
    /// session (`Plan::checked_after`): each is judged like the root's
    /// fixed paths, wherever it lies.
    pub also: Vec<PathBuf>,
    /// The `.git` directories below the root that the start's walk listed
    /// (it never enters one), and whether each was a git directory then
    /// (`HEAD`, `objects/`, `refs/`): one that was not and is at the end
    /// was completed during the session, whatever its files' stamps.
    pub git_dirs: HashMap<PathBuf, bool>,
}

impl Watch {
    /// Call right before the job is launched: one clock read and the
    /// root's fixed paths (a few dozen `lstat`s), nothing that grows with
    /// the project.
    /// `also`: [`Watch::also`]; `git_dirs`: the `.git` directories the
    /// start's walk listed (`policy::Walking::git_dirs`), three `lstat`s
    /// each.
    pub fn start(project: &Path, also: &[PathBuf], git_dirs: &[PathBuf]) -> Watch {
        Watch::start_in(project, also, git_dirs, &RealTree)
    }

    fn start_in(project: &Path, also: &[PathBuf], git_dirs: &[PathBuf], tree: &dyn Tree) -> Watch {
        let mut watch = Watch::at(project, tree);
        watch.also = also.to_vec();
        watch.git_dirs = git_dirs
            .iter()
            .filter(|g| g.starts_with(project) && g.parent() != Some(project))
            .map(|g| (g.clone(), is_git_dir(tree, g)))
            .collect();
        let ambiguous = watch.check_root(tree, Limits::default());
        watch.settled = ambiguous
            .into_iter()
            .filter_map(|f| Some((f.path.clone(), tree.identity(&f.path)?)))
            .collect();
        watch
    }

    fn at(project: &Path, tree: &dyn Tree) -> Watch {
        let now = coarse_now();
        // A filesystem with whole-second stamps (ext4 with small inodes,
        // FAT) truncates a change in this very second to before `now`:
        // compare by seconds there (a change in the second before the
        // start may then be reported; none is missed).
        let coarse = tree.lstat(project).is_some_and(|m| m.ctime.nsec == 0);
        Watch {
            project: project.to_path_buf(),
            since: if coarse {
                Stamp {
                    sec: now.sec,
                    nsec: 0,
                }
            } else {
                now
            },
            settled: HashMap::new(),
            also: Vec::new(),
            git_dirs: HashMap::new(),
        }
    }

    /// The root's fixed paths only (no walk): what looks new there.
    fn check_root(&self, tree: &dyn Tree, limits: Limits) -> Vec<Finding> {
        let mut c = Checker::new(self, tree, limits);
        c.root(&self.project);
        c.also(&self.also);
        c.found
    }
}

fn coarse_now() -> Stamp {
    let (sec, nsec) = crate::sandbox::ctime_clock_now();
    // One tick of the coarse clock earlier: a stamp taken on another CPU
    // right after this read is never before it.
    let nsec = nsec - 10_000_000;
    if nsec < 0 {
        Stamp {
            sec: sec - 1,
            nsec: nsec + 1_000_000_000,
        }
    } else {
        Stamp { sec, nsec }
    }
}

/// One thing the job left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub what: What,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// Created or changed during the session.
    Changed,
    /// A symbolic link created or changed during the session.
    Link,
    /// A repository below the project root whose git directory gained
    /// or changed `count` entries of config, hooks or info (`first` names
    /// one).
    Repository { count: usize, first: PathBuf },
    /// A directory below the project root that is a repository now and
    /// was not this one when the session began: made, replaced, or
    /// completed by a rename (a `HEAD` renamed into place), whatever its
    /// files' stamps.
    Became,
    /// Not checked: a directory that cannot be listed, or the walk's
    /// limit was reached here.
    Unchecked(String),
    /// More findings than are kept.
    More(usize),
    /// A place something runs from later, changed by content
    /// (`supervisor::snapshot`): what changed and why it runs.
    Runs(String),
    /// The same, changed as the policy expects (`[persistence] keep`):
    /// left as the session made it, and no finding.
    Kept(String),
    /// A change hidden from `git status` by an index flag the session set
    /// (`supervisor::concealment`): which flag, and how it was put back.
    Concealed {
        flags: String,
        said: String,
        undone: bool,
    },
    /// A runs-later change that was put back after the session (what, why
    /// it runs, and where the session's version went).
    PutBack(String),
}

impl What {
    pub fn describe(&self) -> String {
        match self {
            What::Changed => "created or changed during the session".into(),
            What::Link => "a symbolic link created or changed during the session".into(),
            What::Repository { count, first } => format!(
                "a repository whose config, hooks or info gained or changed {count} entr{} during the session (first: {})",
                if *count == 1 { "y" } else { "ies" },
                first.display()
            ),
            What::Became => "a repository that was not this one when the session began (made, replaced, or completed by a rename during the session)".into(),
            What::Unchecked(why) => format!("not checked: {why}"),
            What::More(n) => format!("and {n} more finding(s) not listed"),
            What::Runs(how) => how.clone(),
            What::Kept(how) => format!("{how}; kept, as [persistence] keep says"),
            What::PutBack(how) => how.clone(),
            What::Concealed { flags, said, .. } => format!(
                "changed during the session and hidden from `git status` and `git diff` by the {flags} flag the session set in the index; {said}"
            ),
        }
    }
}

/// Files at the project root that other tools act on.
const ROOT_FILES: [&str; 7] = [
    ".envrc",
    ".vscode/tasks.json",
    ".vscode/launch.json",
    ".vscode/settings.json",
    ".gitattributes",
    ".lfsconfig",
    ".gitmodules",
];
/// Files of a git directory that configure it or point it elsewhere.
const GIT_FILES: [&str; 3] = ["config", "config.worktree", "commondir"];
/// Directories of a git directory whose every entry matters.
const GIT_DIRS: [&str; 2] = ["hooks", "info"];
/// How deep the small subtrees (`hooks/`, `.devcontainer/`) are followed.
const SUBTREE_DEPTH: usize = 8;

/// The whole check: the fixed root paths, the root repository, and the
/// repositories below the root.
pub fn check(watch: &Watch, tree: &dyn Tree, limits: Limits) -> Vec<Finding> {
    check_knowing(watch, tree, limits, None, None)
}

/// What the walk below the root finds in the start's remembered listings
/// alone, worked out while the job runs ([`Clean::of`]): when it finds
/// nothing and the job changes no entry (so that those listings are still
/// the tree's), the walk at the end would find nothing either.
#[derive(Debug, Clone, Copy)]
pub struct Clean {
    /// Entries the walk counted against the budget.
    entries: usize,
}

impl Clean {
    /// `Some` when walking below the root with the start's listings — as
    /// the check does when the job changes no entry — takes every
    /// directory from them and finds nothing: no directory left to list,
    /// no `.git`, no repository, the budget not reached.
    pub fn of(watch: &Watch, listings: &WalkCache) -> Option<Clean> {
        let tree = ListingsOnly {
            listings,
            sets: Remembered::default(),
            asked_more: std::cell::Cell::new(false),
        };
        let limits = Limits::default();
        let mut c = Checker::new(watch, &tree, limits);
        c.walk(&watch.project);
        let clean = c.found.is_empty() && c.more == 0 && !tree.asked_more.get();
        clean.then(|| Clean {
            entries: limits.entries - c.budget,
        })
    }
}

/// The start's listings and nothing else: anything else the walk asks
/// for is noted, and makes the walk's answer not [`Clean`].
struct ListingsOnly<'a> {
    listings: &'a WalkCache,
    sets: Remembered,
    asked_more: std::cell::Cell<bool>,
}

impl Tree for ListingsOnly<'_> {
    fn lstat(&self, _: &Path) -> Option<Meta> {
        self.asked_more.set(true);
        None
    }

    fn list(&self, _: &Path, _: usize) -> std::io::Result<Vec<(OsString, Kind)>> {
        self.asked_more.set(true);
        Err(std::io::Error::other("not remembered"))
    }

    fn identity(&self, _: &Path) -> Option<Identity> {
        self.asked_more.set(true);
        None
    }

    fn remembered(&self, dir: &Path, _: Stamp) -> Option<Rc<Vec<Entry>>> {
        let cached = self.listings.dirs.get(dir.as_os_str())?;
        self.sets
            .keeps_names(&cached.set)
            .then(|| Rc::clone(&cached.entries))
    }
}

/// Which sets of kept names keep [`REMEMBERED_NAMES`], the names the
/// check reads.
struct Remembered(RefCell<KeepsNames>);

impl Default for Remembered {
    fn default() -> Self {
        Remembered(RefCell::new(KeepsNames::new(&REMEMBERED_NAMES)))
    }
}

impl Remembered {
    fn keeps_names(&self, set: &Rc<BTreeSet<String>>) -> bool {
        self.0.borrow_mut().keeps(set)
    }
}

/// [`check`], skipping the walk below the root where `clean` says it finds
/// nothing (only pass it when the job changed no entry).
fn check_knowing(
    watch: &Watch,
    tree: &dyn Tree,
    limits: Limits,
    clean: Option<Clean>,
    start: Option<&WalkCache>,
) -> Vec<Finding> {
    let mut c = Checker::new(watch, tree, limits);
    c.start = start.map(|listings| AtStart {
        listings,
        sets: Remembered::default(),
    });
    let root = &watch.project;
    c.root(root);
    c.also(&watch.also);
    match clean {
        // The same walk with what the root's checks left of the budget.
        Some(clean) if clean.entries <= c.budget => c.budget -= clean.entries,
        _ => c.walk(root),
    }
    if c.more > 0 {
        c.found.push(Finding {
            path: root.clone(),
            what: What::More(c.more),
        });
    }
    c.found
}

/// What the start's glob walk listed, before the job ran: which
/// directories below the root were repositories then. Its listings hold
/// every subdirectory and the names [`REMEMBERED_NAMES`] match, so
/// `HEAD`, `objects/`, `refs/` and `.git` are in them when they were
/// there. A listing stands for the start whatever changed since.
struct AtStart<'a> {
    listings: &'a WalkCache,
    sets: Remembered,
}

impl AtStart<'_> {
    fn listing(&self, dir: &Path) -> Option<Listed> {
        let cached = self.listings.dirs.get(dir.as_os_str())?;
        self.sets
            .keeps_names(&cached.set)
            .then(|| Listed::Remembered(Rc::clone(&cached.entries)))
    }

    /// Whether `dir` was a git directory (`HEAD`, `objects/`, `refs/`),
    /// and its device and inode then; `None`: the start did not list it.
    fn was_git_dir(&self, dir: &Path) -> Option<(bool, (u64, u64))> {
        let stamp = self.listings.dirs.get(dir.as_os_str())?.stamp;
        self.listing(dir)
            .map(|l| (looks_like_git_dir(&l), (stamp.dev, stamp.ino)))
    }

    /// Whether `dir` held a `.git` entry; `None`: not listed.
    fn had_git_entry(&self, dir: &Path) -> Option<bool> {
        self.listing(dir)
            .map(|l| l.iter().any(|(name, _)| is_git_name(name)))
    }
}

struct Checker<'a> {
    tree: &'a dyn Tree,
    /// The start's listings, where the session had them.
    start: Option<AtStart<'a>>,
    since: Stamp,
    settled: &'a HashMap<PathBuf, Identity>,
    git_dirs: &'a HashMap<PathBuf, bool>,
    budget: usize,
    max: usize,
    found: Vec<Finding>,
    more: usize,
}

impl<'a> Checker<'a> {
    fn new(watch: &'a Watch, tree: &'a dyn Tree, limits: Limits) -> Self {
        Checker {
            tree,
            start: None,
            since: watch.since,
            settled: &watch.settled,
            git_dirs: &watch.git_dirs,
            budget: limits.entries,
            max: limits.findings,
            found: Vec::new(),
            more: 0,
        }
    }

    /// The fixed paths at the root and the root repository.
    fn root(&mut self, root: &Path) {
        for rel in ROOT_FILES {
            self.path_of(root, rel);
        }
        self.entry(&root.join(".vscode"), true);
        self.subtree(&root.join(".devcontainer"), 0);
        let git = root.join(".git");
        match self.tree.lstat(&git).map(|m| m.kind) {
            Some(Kind::Dir) => self.git_dir(&git),
            Some(_) => {
                self.entry(&git, false);
            }
            None => {}
        }
    }

    fn push(&mut self, path: PathBuf, what: What) {
        if self.found.len() < self.max {
            self.found.push(Finding { path, what });
        } else {
            self.more += 1;
        }
    }

    /// A finding when `path` is new; `links_only` reports only a planted
    /// link (for a directory whose own changes mean nothing).
    fn entry(&mut self, path: &Path, links_only: bool) -> Option<Meta> {
        let meta = self.tree.lstat(path)?;
        if meta.ctime >= self.since && !self.unchanged_since_start(path) {
            match meta.kind {
                Kind::Symlink => self.push(path.to_path_buf(), What::Link),
                _ if links_only => {}
                _ => self.push(path.to_path_buf(), What::Changed),
            }
        }
        Some(meta)
    }

    /// Stamped in the tick before the start, and exactly as it was then.
    fn unchanged_since_start(&self, path: &Path) -> bool {
        self.settled
            .get(path)
            .is_some_and(|then| self.tree.identity(path).as_ref() == Some(then))
    }

    /// `root/rel`, through directories only: a link on the way is itself
    /// reported when new, and never followed.
    fn path_of(&mut self, root: &Path, rel: &str) {
        self.path_through(root, rel.split('/').map(OsStr::new));
    }

    /// Each absolute path of `paths`, as [`Self::path_of`] (the first it
    /// finds of one already found is not reported twice).
    fn also(&mut self, paths: &[PathBuf]) {
        for p in paths {
            let parts = p.components().filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n),
                _ => None,
            });
            let before = self.found.len();
            self.path_through(Path::new("/"), parts);
            if self.found.len() > before && self.found[..before].contains(&self.found[before]) {
                self.found.truncate(before);
            }
        }
    }

    fn path_through<'p>(&mut self, root: &Path, parts: impl Iterator<Item = &'p OsStr>) {
        let mut at = root.to_path_buf();
        let mut parts = parts.peekable();
        while let Some(part) = parts.next() {
            at.push(part);
            if parts.peek().is_none() {
                self.entry(&at, false);
            } else if self.tree.lstat(&at).map(|m| m.kind) != Some(Kind::Dir) {
                return;
            }
        }
    }

    /// `dir` and everything in it (a small directory: hooks, info, a dev
    /// container): every new entry, the directory itself included (a
    /// directory renamed into place is new, its old contents are not).
    fn subtree(&mut self, dir: &Path, depth: usize) {
        let Some(meta) = self.entry(dir, false) else {
            return;
        };
        if meta.kind != Kind::Dir {
            return;
        }
        if depth >= SUBTREE_DEPTH {
            self.push(dir.to_path_buf(), What::Unchecked("too deep".into()));
            return;
        }
        let Some(entries) = self.list(dir) else {
            return;
        };
        for (name, kind) in entries {
            let child = dir.join(&name);
            if kind == Kind::Dir {
                self.subtree(&child, depth + 1);
            } else {
                self.entry(&child, false);
            }
        }
    }

    fn list(&mut self, dir: &Path) -> Option<Vec<(OsString, Kind)>> {
        if self.budget == 0 {
            self.push(
                dir.to_path_buf(),
                What::Unchecked("the check's limit of directory entries was reached".into()),
            );
            return None;
        }
        match self.tree.list(dir, self.budget.saturating_add(1)) {
            Ok(entries) if entries.len() > self.budget => {
                self.budget = 0;
                self.push(
                    dir.to_path_buf(),
                    What::Unchecked("the check's limit of directory entries was reached".into()),
                );
                None
            }
            Ok(entries) => {
                self.budget -= entries.len();
                Some(entries)
            }
            Err(e) => {
                self.push(
                    dir.to_path_buf(),
                    What::Unchecked(format!("cannot be listed: {e}")),
                );
                None
            }
        }
    }

    /// The files of git directory `g` that run or point at something.
    fn git_dir(&mut self, g: &Path) {
        for name in GIT_FILES {
            self.entry(&g.join(name), false);
        }
        for name in GIT_DIRS {
            self.subtree(&g.join(name), 0);
        }
        self.modules(&g.join("modules"), 0);
    }

    /// Submodules' git directories (`modules/<path>/`, nested).
    fn modules(&mut self, dir: &Path, depth: usize) {
        if self.tree.lstat(dir).map(|m| m.kind) != Some(Kind::Dir) {
            self.entry(dir, false);
            return;
        }
        if depth >= SUBTREE_DEPTH {
            return;
        }
        let Some(entries) = self.list(dir) else {
            return;
        };
        for (name, kind) in entries {
            let child = dir.join(&name);
            match kind {
                Kind::Dir if self.tree.lstat(&child.join("config")).is_some() => {
                    self.git_dir(&child);
                }
                Kind::Dir => self.modules(&child, depth + 1),
                _ => {
                    self.entry(&child, true);
                }
            }
        }
    }

    /// The project below its root: nested `.git` entries and bare
    /// repositories. Depth first with an explicit stack (no recursion on
    /// the job's tree), links never followed.
    fn walk(&mut self, root: &Path) {
        let mut stack = vec![(root.to_path_buf(), true)];
        while let Some((dir, is_root)) = stack.pop() {
            let Some(entries) = self.walk_list(&dir) else {
                if self.budget == 0 {
                    return;
                }
                continue;
            };
            if !is_root && looks_like_git_dir(&entries) {
                self.bare(&dir);
                continue;
            }
            for (name, kind) in entries.iter() {
                let child = dir.join(name);
                if is_git_name(name) {
                    // The root's own repository was checked on its own.
                    if !is_root {
                        self.nested(&dir, &child, kind);
                    }
                } else if kind == Kind::Dir {
                    stack.push((child, false));
                }
            }
        }
    }

    /// A directory of the walk: remembered when unchanged, else listed.
    /// Either way its entries count against the budget.
    fn walk_list(&mut self, dir: &Path) -> Option<Listed> {
        match self.tree.remembered(dir, self.since) {
            Some(entries) if entries.len() <= self.budget => {
                self.budget -= entries.len();
                Some(Listed::Remembered(entries))
            }
            _ => self.list(dir).map(Listed::Now),
        }
    }

    /// A `.git` below the root, in `dir`: a link or a `gitdir:` file is
    /// judged by its own stamp (a rename stamps it too), a directory that
    /// was not there at the start is new whatever its files' stamps, as is
    /// one that was there but no git directory then (a `HEAD` renamed into
    /// it completes it, and its config may carry an earlier session's
    /// stamp); one that was a repository is judged by what is in it.
    fn nested(&mut self, dir: &Path, path: &Path, kind: Kind) {
        if kind != Kind::Dir {
            self.entry(path, false);
        } else if self.start.as_ref().and_then(|s| s.had_git_entry(dir)) == Some(false)
            || (self.git_dirs.get(path) == Some(&false) && is_git_dir(self.tree, path))
        {
            self.push(path.to_path_buf(), What::Became);
        } else {
            self.repository(path);
        }
    }

    /// A directory below the root that git takes for a git directory now
    /// (a bare repository, or a worktree's through `core.worktree`). Its
    /// config and hooks may carry an earlier session's stamps: what counts
    /// is whether it was one when this session began. Where the start's
    /// walk did not list it (an `outputs` directory, a policy without a
    /// `**` pattern), a `HEAD` stamped during the session, or `objects/`
    /// or `refs/` made or renamed into it (which stamps the directory
    /// too), says the same.
    fn bare(&mut self, dir: &Path) {
        let became = match self.start.as_ref().and_then(|s| s.was_git_dir(dir)) {
            // Replaced by another directory (`rm -rf sub; mv stage sub`).
            Some((true, then)) => self.tree.dir_id(dir).is_some_and(|now| now != then),
            Some((false, _)) => true,
            None => {
                let new = |name: &str| {
                    self.tree
                        .lstat(&dir.join(name))
                        .is_some_and(|m| m.ctime >= self.since)
                };
                let dir_new = self.tree.lstat(dir).is_some_and(|m| m.ctime >= self.since);
                new("HEAD") || (dir_new && (new("objects") || new("refs")))
            }
        };
        if became {
            self.push(dir.to_path_buf(), What::Became);
        } else {
            self.repository(dir);
        }
    }

    /// Git directory `g` below the root: one finding for all of it.
    fn repository(&mut self, g: &Path) {
        let kept = std::mem::take(&mut self.found);
        let (max, more) = (self.max, self.more);
        (self.max, self.more) = (usize::MAX, 0);
        self.git_dir(g);
        let inner = std::mem::replace(&mut self.found, kept);
        (self.max, self.more) = (max, more);
        let mut changed = inner
            .iter()
            .filter(|f| !matches!(f.what, What::Unchecked(_)));
        if let Some(first) = changed.next() {
            let count = 1 + changed.count();
            let first = first.path.clone();
            self.push(g.to_path_buf(), What::Repository { count, first });
        }
        for f in inner {
            if matches!(f.what, What::Unchecked(_)) {
                self.push(f.path, f.what);
            }
        }
    }
}

/// `.git` as git (on a case-insensitive filesystem too) would take it.
fn is_git_name(name: &OsStr) -> bool {
    name.as_encoded_bytes().eq_ignore_ascii_case(b".git")
}

/// `lstat`'s answer to [`looks_like_git_dir`]'s question for `dir`.
fn is_git_dir(tree: &dyn Tree, dir: &Path) -> bool {
    let kind = |n: &str| tree.lstat(&dir.join(n)).map(|m| m.kind);
    kind("HEAD").is_some_and(|k| k != Kind::Dir)
        && kind("objects") == Some(Kind::Dir)
        && kind("refs") == Some(Kind::Dir)
}

/// What git's discovery takes for a git directory: `HEAD`, `objects/`
/// and `refs/` (a bare repository that `safe.bareRepository = all`, the
/// default, lets a `git status` in it use).
fn looks_like_git_dir(entries: &Listed) -> bool {
    let has = |n: &str, k: Option<Kind>| {
        entries
            .iter()
            .any(|(name, kind)| name == n && k.is_none_or(|k| kind == k))
    };
    has("HEAD", None) && has("objects", Some(Kind::Dir)) && has("refs", Some(Kind::Dir))
}

/// The real filesystem, never following links.
pub struct RealTree;

impl Tree for RealTree {
    fn dir_id(&self, path: &Path) -> Option<(u64, u64)> {
        os::file_id(&std::fs::symlink_metadata(path).ok()?)
    }

    fn lstat(&self, path: &Path) -> Option<Meta> {
        let md = std::fs::symlink_metadata(path).ok()?;
        // Windows keeps no change time: the modification time, which a
        // job can set back, stands in (docs/windows.md).
        let (sec, nsec) = os::change_time(&md).unwrap_or_else(|| os::modify_time(&md));
        Some(Meta {
            kind: kind_of(md.file_type()),
            ctime: Stamp { sec, nsec },
        })
    }

    fn identity(&self, path: &Path) -> Option<Identity> {
        use std::io::Read;
        /// Content read to tell a change the stamps may hide (a write in
        /// the same tick): config files and hooks are small.
        const MAX_CONTENT: u64 = 1 << 20;
        let md = std::fs::symlink_metadata(path).ok()?;
        let mut id = Vec::new();
        let (dev, ino) = os::file_id(&md).unwrap_or((0, 0));
        let mtime = os::modify_time(&md);
        let ctime = os::change_time(&md).unwrap_or((0, 0));
        for n in [
            dev,
            ino,
            u64::from(os::mode(&md)),
            md.len(),
            mtime.0 as u64,
            mtime.1 as u64,
            ctime.0 as u64,
            ctime.1 as u64,
        ] {
            id.extend_from_slice(&n.to_le_bytes());
        }
        let ft = md.file_type();
        if ft.is_symlink() {
            id.extend_from_slice(
                std::fs::read_link(path)
                    .ok()?
                    .as_os_str()
                    .as_encoded_bytes(),
            );
        } else if ft.is_file() {
            // Never through a link, nor a FIFO that blocks.
            let f = crate::sys::safe_fs::open_regular(path).ok()?;
            let mut content = Vec::new();
            f.take(MAX_CONTENT + 1).read_to_end(&mut content).ok()?;
            if content.len() as u64 > MAX_CONTENT {
                return None;
            }
            id.extend_from_slice(crate::hash::sha256_hex(&[&content]).as_bytes());
        }
        Some(Identity(id))
    }

    fn list(&self, dir: &Path, max: usize) -> std::io::Result<Vec<(OsString, Kind)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)?.take(max) {
            let entry = entry?;
            // d_type, or an lstat where the filesystem gives none.
            let kind = entry.file_type().map_or(Kind::Other, kind_of);
            out.push((entry.file_name(), kind));
        }
        Ok(out)
    }
}

/// An entry's kind from its file type (never following a link).
pub(crate) fn kind_of(ft: std::fs::FileType) -> Kind {
    if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

/// The real filesystem, with the listings the start's glob walk
/// remembered for the directories that have not changed since.
pub struct Remembering<'a> {
    listings: &'a WalkCache,
    /// The job asked to change no directory entry: the listings the start
    /// held are still the tree's, no stamp needs comparing.
    untouched: bool,
    /// Which filesystems' change times are honest (asked once per device).
    trust: fn(&Path) -> bool,
    trusted: RefCell<HashMap<u64, bool>>,
    /// Each remembered directory is stamped through its parent.
    lstat: RefCell<os::LstatAt>,
    sets: Remembered,
}

impl<'a> Remembering<'a> {
    pub fn new(listings: &'a WalkCache, trust: fn(&Path) -> bool, untouched: bool) -> Self {
        Remembering {
            listings,
            untouched,
            trust,
            trusted: RefCell::new(HashMap::new()),
            lstat: RefCell::new(os::LstatAt::new()),
            sets: Remembered::default(),
        }
    }
}

impl Tree for Remembering<'_> {
    fn lstat(&self, path: &Path) -> Option<Meta> {
        RealTree.lstat(path)
    }

    fn list(&self, dir: &Path, max: usize) -> std::io::Result<Vec<(OsString, Kind)>> {
        RealTree.list(dir, max)
    }

    fn identity(&self, path: &Path) -> Option<Identity> {
        RealTree.identity(path)
    }

    fn dir_id(&self, path: &Path) -> Option<(u64, u64)> {
        RealTree.dir_id(path)
    }

    fn remembered(&self, dir: &Path, since: Stamp) -> Option<Rc<Vec<Entry>>> {
        let cached = self.listings.dirs.get(dir.as_os_str())?;
        if !self.sets.keeps_names(&cached.set) {
            return None;
        }
        if self.untouched {
            return Some(Rc::clone(&cached.entries));
        }
        let now = DirStamp::of(&self.lstat.borrow_mut().lstat(dir).ok()?)?;
        let (sec, nsec) = now.ctime;
        let ctime = Stamp { sec, nsec };
        if now != cached.stamp || ctime >= since {
            return None;
        }
        let trusted = *self
            .trusted
            .borrow_mut()
            .entry(now.dev)
            .or_insert_with(|| (self.trust)(dir));
        trusted.then(|| Rc::clone(&cached.entries))
    }
}

/// The findings as violations for the session log: reported, not blocked
/// (the files are there), by the supervisor, the process unknown.
pub fn violations(findings: &[Finding]) -> Vec<Violation> {
    findings
        .iter()
        .map(|f| Violation {
            rule: RuleId::PersistencePlanted,
            time: Timestamp::now(),
            action: match &f.what {
                What::Kept(_) => Action::Expected,
                What::PutBack(_) => Action::PutBack,
                What::Concealed { undone: true, .. } => Action::PutBack,
                _ => Action::Observed,
            },
            process: ProcessInfo::default(),
            target: Target::Path {
                path: f.path.clone(),
            },
            attribution: None,
            policy_rule: None,
            detail: f.what.describe(),
            provenance: Provenance::Supervisor,
        })
        .collect()
}

/// What the end does with a change where a tool runs it later: put it
/// back, the session's version archived at `archive`, unless the policy
/// keeps it.
#[derive(Debug, Clone)]
pub struct PutBack {
    /// `false` under `--audit`, which blocks nothing and undoes nothing:
    /// what changed is recorded as observed and left.
    pub undo: bool,
    pub keep: Vec<crate::policy::KeepChange>,
    pub archive: super::put_back::Archives,
    /// The project's index as the session started: the skip-worktree and
    /// assume-unchanged flags the session set on files it changed.
    #[cfg(target_os = "linux")]
    pub index: Option<super::concealment::IndexAtStart>,
}

/// At the session's end, after every process of the job is gone: check,
/// print one line per finding, and record each in the session log (before
/// its end). `listings`: what the start's glob walk remembered, for the
/// directories that have not changed since; `untouched`: the job changed
/// no directory entry at all (`Session::changed_no_entry`), so those
/// listings are taken without comparing stamps; `clean`: the walk below
/// the root found nothing in those listings ([`Clean::of`]), which then
/// stands for the walk when `untouched`.
pub fn finish(
    watch: &Watch,
    listings: Option<&WalkCache>,
    untouched: bool,
    clean: Option<Clean>,
    snapshot: Option<&super::snapshot::Snapshot>,
    put: &PutBack,
    sink: Option<&dyn crate::events::log::EventSink>,
) {
    let mut findings = match listings {
        Some(l) => check_knowing(
            watch,
            &Remembering::new(l, crate::sandbox::fs_kind::honest_change_times, untouched),
            Limits::default(),
            clean.filter(|_| untouched),
            Some(l),
        ),
        None => check(watch, &RealTree, Limits::default()),
    };
    // What runs later, by content: one finding per path, the snapshot's
    // (which says why the path runs, and compares it in its tool's
    // format) over the change time's wherever the snapshot watches.
    if let Some(snapshot) = snapshot {
        let (changes, unchecked) = snapshot.compare();
        // A nested repository the snapshot holds by content is judged by
        // it, not by its stamps.
        findings.retain(|f| {
            let held = match f.what {
                What::Repository { .. } => snapshot.watches(&f.path.join("config")),
                _ => false,
            };
            !held && !snapshot.watches(&f.path)
        });
        let (kept, changes): (Vec<_>, Vec<_>) = changes
            .into_iter()
            .partition(|c| put.keep.iter().any(|k| k.keeps(&c.path)));
        // What the change times found that makes a repository where there
        // was none is undone too: a `.git` entry made below the root is
        // taken away, and a directory that became a repository loses the
        // `HEAD` that made it one (git no longer takes it for one; its
        // objects and config stay).
        let made: Vec<super::snapshot::Change> = findings
            .iter()
            .filter(|f| !put.keep.iter().any(|k| k.keeps(&f.path)))
            .filter_map(|f| {
                let path = match f.what {
                    What::Became => f.path.join("HEAD"),
                    What::Changed | What::Link
                        if f.path.file_name().is_some_and(is_git_name)
                            && f.path.parent() != Some(watch.project.as_path()) =>
                    {
                        f.path.clone()
                    }
                    _ => return None,
                };
                Some(super::snapshot::Change {
                    path,
                    why: f.what.describe(),
                    before: super::snapshot::Seen::Absent,
                    after: super::snapshot::Seen::Other,
                    compare: crate::policy::autorun::Compare::Bytes,
                    keys: Vec::new(),
                    inside: 0,
                    root: watch.project.clone(),
                })
            })
            .collect();
        let undo: Vec<&super::snapshot::Change> = changes.iter().chain(made.iter()).collect();
        #[cfg(target_os = "linux")]
        let (outcomes, archives) = if put.undo {
            super::put_back::put_back(snapshot.project(), &undo, put.archive.clone())
        } else {
            (Vec::new(), Vec::new())
        };
        #[cfg(not(target_os = "linux"))]
        let (outcomes, archives): (Vec<super::put_back::Outcome>, Vec<PathBuf>) =
            (Vec::new(), Vec::new());
        for c in &changes {
            let mut what = c.describe();
            let undone = outcomes.iter().any(|o| o.path == c.path && o.undone);
            if let Some(o) = outcomes.iter().find(|o| o.path == c.path) {
                what.push_str(&format!("; {}", o.said));
                if let (true, Some(a)) = (o.undone, &o.archive) {
                    if !matches!(c.after, super::snapshot::Seen::Absent) {
                        what.push_str(&format!(
                            "; to keep the session's version: {}",
                            super::put_back::accept_command(a, snapshot.project(), &c.path)
                        ));
                    }
                }
            } else if undo
                .iter()
                .any(|i| c.path.starts_with(&i.path) && i.path != c.path)
            {
                what.push_str("; taken away with the directory it is in");
            }
            findings.push(Finding {
                path: c.path.clone(),
                what: if undone {
                    What::PutBack(what)
                } else {
                    What::Runs(what)
                },
            });
        }
        for a in &archives {
            eprintln!(
                "vetto: what the session changed where a tool runs it later was put back; the session's versions are in {} (name a path in [persistence] keep to keep such a change)",
                crate::text::escape_path(a)
            );
        }
        for m in &made {
            let Some(o) = outcomes.iter().find(|o| o.path == m.path) else {
                continue;
            };
            let reported = if m.path.file_name() == Some(OsStr::new("HEAD")) {
                m.path.parent().unwrap_or(&m.path)
            } else {
                m.path.as_path()
            };
            if let Some(f) = findings.iter_mut().find(|f| f.path == reported) {
                let mut what = format!(
                    "{}; {}: {}",
                    f.what.describe(),
                    crate::text::path_name(&m.path),
                    o.said
                );
                if let (true, Some(a)) = (o.undone, &o.archive) {
                    what.push_str(&format!(
                        "; to keep it: {}",
                        super::put_back::accept_command(a, snapshot.project(), &m.path)
                    ));
                }
                f.what = if o.undone {
                    What::PutBack(what)
                } else {
                    What::Runs(what)
                };
            }
        }
        for c in kept {
            findings.push(Finding {
                path: c.path.clone(),
                what: What::Kept(c.describe()),
            });
        }
        for (path, why) in unchecked {
            findings.push(Finding {
                path,
                what: What::Unchecked(why),
            });
        }
    }
    #[cfg(target_os = "linux")]
    if let Some(index) = &put.index {
        match index.check(put.undo) {
            Ok(hidden) => findings.extend(hidden.into_iter().map(|c| Finding {
                path: c.path,
                what: What::Concealed {
                    flags: c.flags,
                    said: c.said,
                    undone: c.undone,
                },
            })),
            Err(why) => findings.push(Finding {
                path: watch.project.join(".git/index"),
                what: What::Unchecked(format!("the index's flags: {why}")),
            }),
        }
    }
    for f in &findings {
        eprintln!("{}", line(f));
    }
    #[cfg(target_os = "linux")]
    for f in &findings {
        if let Some(line) = set_aside_planted(watch, f) {
            eprintln!("vetto: {line}");
        }
    }
    if let Some(sink) = sink {
        for v in violations(&findings) {
            sink.emit(crate::events::Event::Violation(Box::new(v)));
        }
    }
}

/// What the job made at a path the policy keeps read-only but no mount
/// kept ([`Watch::also`], `check_creations = "after"`) is moved aside, so
/// that nothing loads it later (a planted `vetto.toml`, a
/// `.pre-commit-config.yaml`): the end state a refusal as it was made
/// would have left. Only beneath the project, each directory on the way
/// opened without following a link (the job may have planted any of
/// them), the entry itself renamed, never followed. The line to print, if
/// anything was moved or could not be.
#[cfg(target_os = "linux")]
fn set_aside_planted(watch: &Watch, f: &Finding) -> Option<String> {
    use crate::sys::safe_fs::{Dir, Parents};
    // What the snapshot compared (`What::Runs`) it has put back already.
    if !matches!(f.what, What::Changed | What::Link) || !watch.also.contains(&f.path) {
        return None;
    }
    let rel = f.path.strip_prefix(&watch.project).ok()?;
    let name = rel.file_name()?.to_str()?;
    let shown = crate::text::path_name(&f.path);
    let moved = Dir::open(&watch.project, Parents::AsNamed)
        .and_then(|root| match rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => root.open_beneath(p),
            _ => Ok(root),
        })
        .and_then(|dir| dir.set_aside(name));
    Some(match moved {
        Ok(to) => format!("moved {shown} aside to {}", crate::text::escape(&to)),
        Err(e) => format!(
            "warning: could not move {shown} aside ({}): remove it before running anything in the project",
            crate::text::escape(&e.to_string())
        ),
    })
}

/// One line for the terminal, control characters shown escaped.
pub fn line(f: &Finding) -> String {
    let head = match f.what {
        What::Kept(_) => "changed where a tool runs it later, kept",
        _ => "persistence planted",
    };
    format!(
        "vetto: {head}: {} ({})",
        crate::text::path_name(&f.path),
        crate::text::escape(&f.what.describe())
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const OLD: Stamp = Stamp { sec: 100, nsec: 0 };
    const NEW: Stamp = Stamp { sec: 200, nsec: 0 };
    const SINCE: Stamp = Stamp { sec: 150, nsec: 0 };

    /// Paths to (kind, ctime); directories are implied by their entries.
    #[derive(Default)]
    struct Fake {
        entries: BTreeMap<PathBuf, Meta>,
        unlistable: Vec<PathBuf>,
        /// Listings as the start's glob walk left them.
        remembered: BTreeMap<PathBuf, Vec<(OsString, Kind)>>,
        /// Directories' device and inode, where a test gives them.
        ids: BTreeMap<PathBuf, (u64, u64)>,
    }

    impl Fake {
        fn add(&mut self, path: &str, kind: Kind, ctime: Stamp) -> &mut Self {
            let p = PathBuf::from(path);
            for a in p.ancestors().skip(1) {
                self.entries.entry(a.to_path_buf()).or_insert(Meta {
                    kind: Kind::Dir,
                    ctime: OLD,
                });
            }
            self.entries.insert(p, Meta { kind, ctime });
            self
        }

        fn file(&mut self, path: &str, ctime: Stamp) -> &mut Self {
            self.add(path, Kind::File, ctime)
        }
    }

    impl Tree for Fake {
        fn lstat(&self, path: &Path) -> Option<Meta> {
            self.entries.get(path).copied()
        }

        fn list(&self, dir: &Path, max: usize) -> std::io::Result<Vec<(OsString, Kind)>> {
            if self.unlistable.iter().any(|d| d == dir) {
                return Err(std::io::Error::from_raw_os_error(13));
            }
            Ok(self
                .entries
                .iter()
                .filter(|(p, _)| p.parent() == Some(dir))
                .filter_map(|(p, m)| Some((p.file_name()?.to_os_string(), m.kind)))
                .take(max)
                .collect())
        }

        fn dir_id(&self, path: &Path) -> Option<(u64, u64)> {
            self.ids.get(path).copied()
        }

        fn identity(&self, path: &Path) -> Option<Identity> {
            let m = self.entries.get(path)?;
            Some(Identity(format!("{:?} {:?}", m.kind, m.ctime).into_bytes()))
        }

        /// As the real one: only for a directory unchanged since `since`.
        fn remembered(&self, dir: &Path, since: Stamp) -> Option<Rc<Vec<Entry>>> {
            let m = self.entries.get(dir)?;
            let listed = (m.kind == Kind::Dir && m.ctime < since)
                .then(|| self.remembered.get(dir))
                .flatten()?;
            Some(Rc::new(
                listed
                    .iter()
                    .map(|(name, kind)| Entry {
                        name: name.clone(),
                        is_dir: *kind == Kind::Dir,
                    })
                    .collect(),
            ))
        }
    }

    /// What the glob walk remembers of `dir` now: its subdirectories and
    /// the names persist asks for, the rest left out.
    fn remember(f: &mut Fake, dir: &str) {
        let d = Path::new(dir);
        let entries = f
            .entries
            .iter()
            .filter(|(p, _)| p.parent() == Some(d))
            .filter_map(|(p, m)| {
                let name = p.file_name()?.to_string_lossy().into_owned();
                let kept = m.kind == Kind::Dir
                    || REMEMBERED_NAMES
                        .iter()
                        .any(|n| crate::policy::paths::glob_component(n, &name));
                let kind = if m.kind == Kind::Dir {
                    Kind::Dir
                } else {
                    Kind::Other
                };
                kept.then(|| (OsString::from(name), kind))
            })
            .collect();
        f.remembered.insert(d.to_path_buf(), entries);
    }

    /// A project whose every directory outside `.git` is remembered.
    fn remembered_project() -> Fake {
        let mut f = project();
        f.file("/p/vendor/lib/.git/config", OLD)
            .file("/p/vendor/lib/.git/HEAD", OLD)
            .file("/p/vendor/lib/.git/hooks/pre-commit.sample", OLD)
            .file("/p/vendor/lib/src/lib.c", OLD)
            .file("/p/w/.git", OLD)
            .file("/p/w/notes.txt", OLD);
        for d in [
            "/p",
            "/p/src",
            "/p/vendor",
            "/p/vendor/lib",
            "/p/vendor/lib/src",
            "/p/w",
        ] {
            remember(&mut f, d);
        }
        f
    }

    #[test]
    fn unchanged_directories_are_taken_from_their_remembered_listing() {
        let mut f = remembered_project();
        assert!(
            !f.remembered[Path::new("/p/w")]
                .iter()
                .any(|(n, _)| n == "notes.txt")
        );
        // Were they listed, these would be findings.
        f.unlistable
            .extend(["/p".into(), "/p/vendor".into(), "/p/src".into()]);
        assert_eq!(run(&f), []);
    }

    /// The job writes a hook into an old nested repository, rewrites its
    /// config and an old `gitdir:` file in place: no directory on the way
    /// gained an entry except `hooks/`, which is always read.
    #[test]
    fn persistence_planted_in_an_old_directory_is_still_found() {
        let mut f = remembered_project();
        f.file("/p/vendor/lib/.git/hooks/post-checkout", NEW)
            .file("/p/w/.git", NEW);
        let found = run(&f);
        assert_eq!(
            found,
            [
                ("/p/w/.git".to_string(), What::Changed),
                (
                    "/p/vendor/lib/.git".to_string(),
                    What::Repository {
                        count: 1,
                        first: "/p/vendor/lib/.git/hooks/post-checkout".into()
                    }
                ),
            ]
        );
        let mut f = remembered_project();
        f.file("/p/vendor/lib/.git/config", NEW);
        assert_eq!(run(&f).len(), 1);
    }

    /// A directory that gained an entry carries a new stamp: its stale
    /// remembered listing is not used.
    #[test]
    fn a_changed_directory_is_listed_again() {
        let mut f = remembered_project();
        f.file("/p/vendor/lib/src/sub/.git/config", NEW)
            .add("/p/vendor/lib/src", Kind::Dir, NEW);
        let found = run(&f);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "/p/vendor/lib/src/sub/.git");
    }

    /// The listings a session's start would hand on for what `f` remembers.
    fn listings_of(f: &Fake) -> WalkCache {
        let set = Rc::new(REMEMBERED_NAMES.iter().map(|n| n.to_string()).collect());
        let mut cache = WalkCache::default();
        for (dir, entries) in &f.remembered {
            let entries = entries
                .iter()
                .map(|(name, kind)| Entry {
                    name: name.clone(),
                    is_dir: *kind == Kind::Dir,
                })
                .collect();
            cache
                .dirs
                .insert(dir.clone().into(), unstamped(&set, entries));
        }
        cache
    }

    /// A remembered listing of `entries` keeping `set`, with a stamp no
    /// directory has.
    fn unstamped(
        set: &Rc<BTreeSet<String>>,
        entries: Vec<Entry>,
    ) -> crate::policy::walk_cache::CachedDir {
        crate::policy::walk_cache::CachedDir {
            stamp: DirStamp {
                dev: 0,
                ino: 0,
                mtime: (0, 0),
                ctime: (0, 0),
            },
            set: Rc::clone(set),
            entries: Rc::new(entries),
            index: crate::policy::walk_cache::NOT_READ,
        }
    }

    fn watch() -> Watch {
        Watch {
            project: "/p".into(),
            since: SINCE,
            settled: HashMap::new(),
            also: Vec::new(),
            git_dirs: HashMap::new(),
        }
    }

    /// Worked out while the job runs, the walk below the root stands for
    /// the end's only where it finds nothing from the listings alone: a
    /// nested repository (remembered or planted under an old name), or a
    /// directory the listings lack, leaves the walk to the end.
    #[test]
    #[expect(clippy::expect_used, reason = "tests")]
    fn a_walk_worked_out_ahead_never_hides_a_nested_repository() {
        // Nothing below the root: the walk ahead stands for the end's, and
        // what the root's own checks find is still found.
        let mut f = project();
        for d in ["/p", "/p/src"] {
            remember(&mut f, d);
        }
        let clean = Clean::of(&watch(), &listings_of(&f)).expect("nothing below the root");
        f.file("/p/.git/hooks/post-checkout", NEW);
        let ahead = check_knowing(&watch(), &f, Limits::default(), Some(clean), None);
        assert_eq!(ahead, check(&watch(), &f, Limits::default()));
        assert_eq!(ahead.len(), 1, "{ahead:?}");

        // Repositories below the root (the nested `.git` of `/p/w` and
        // `/p/vendor/lib`): never clean, the end walks and finds them.
        let mut f = remembered_project();
        assert!(Clean::of(&watch(), &listings_of(&f)).is_none());
        f.file("/p/w/.git", NEW);
        assert_eq!(run(&f), [("/p/w/.git".to_string(), What::Changed)]);

        // A directory the listings do not hold is for the end to list.
        let mut f = project();
        remember(&mut f, "/p");
        assert!(Clean::of(&watch(), &listings_of(&f)).is_none());
    }

    fn project() -> Fake {
        let mut f = Fake::default();
        f.file("/p/README.md", OLD)
            .file("/p/.git/config", OLD)
            .file("/p/.git/HEAD", OLD)
            .file("/p/.git/hooks/pre-commit.sample", OLD)
            .file("/p/.git/info/exclude", OLD)
            .file("/p/.git/objects/ab/cdef", NEW)
            .file("/p/.git/index", NEW)
            .file("/p/src/main.c", OLD);
        f
    }

    fn run(f: &Fake) -> Vec<(String, What)> {
        let w = Watch {
            project: "/p".into(),
            since: SINCE,
            settled: HashMap::new(),
            also: Vec::new(),
            git_dirs: HashMap::new(),
        };
        check(&w, f, Limits::default())
            .into_iter()
            .map(|x| (x.path.display().to_string(), x.what))
            .collect()
    }

    /// A `git init` or a checkout in the tick before vetto started carries
    /// a stamp at the start's own time: what was so at the start is not the
    /// job's, whatever the job changes afterwards is.
    #[test]
    fn entries_stamped_just_before_the_start_are_not_the_jobs() {
        let mut f = project();
        f.file("/p/.git/config", NEW)
            .file("/p/.git/hooks/pre-push.sample", NEW)
            .file("/p/.envrc", NEW);
        let mut w = Watch {
            project: "/p".into(),
            since: SINCE,
            settled: HashMap::new(),
            also: Vec::new(),
            git_dirs: HashMap::new(),
        };
        let ambiguous = w.check_root(&f, Limits::default());
        assert_eq!(ambiguous.len(), 3, "{ambiguous:?}");
        w.settled = ambiguous
            .iter()
            .filter_map(|x| Some((x.path.clone(), f.identity(&x.path)?)))
            .collect();
        assert_eq!(check(&w, &f, Limits::default()), []);
        // The job rewrites one of them and plants a new one.
        f.file("/p/.git/config", Stamp { sec: 201, nsec: 0 })
            .file("/p/.git/hooks/pre-commit", NEW);
        let found: Vec<_> = check(&w, &f, Limits::default())
            .into_iter()
            .map(|x| x.path.display().to_string())
            .collect();
        assert_eq!(found, ["/p/.git/config", "/p/.git/hooks/pre-commit"]);
    }

    #[test]
    fn an_ordinary_session_leaves_nothing_to_report() {
        let mut f = project();
        // New sources, a `git` and a `.github` directory, a commit.
        f.file("/p/src/new.c", NEW)
            .file("/p/git/notes", NEW)
            .file("/p/.github/workflows/ci.yml", NEW)
            .file("/p/node_modules/x/.gitattributes", NEW)
            .file("/p/.vscode/extensions.json", NEW);
        assert_eq!(run(&f), []);
    }

    #[test]
    fn a_nested_repository_planted_by_git_init_is_one_finding() {
        let mut f = project();
        f.file("/p/sub/.git/config", NEW)
            .file("/p/sub/.git/HEAD", NEW)
            .file("/p/sub/.git/hooks/pre-commit.sample", NEW)
            .file("/p/sub/.git/info/exclude", NEW);
        let found = run(&f);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "/p/sub/.git");
        assert!(matches!(found[0].1, What::Repository { count, .. } if count >= 3));
    }

    #[test]
    fn a_changed_config_of_an_existing_nested_repository_is_found() {
        let mut f = project();
        f.file("/p/vendor/lib/.git/config", NEW)
            .file("/p/vendor/lib/.git/HEAD", OLD);
        let found = run(&f);
        assert_eq!(
            found,
            [(
                "/p/vendor/lib/.git".to_string(),
                What::Repository {
                    count: 1,
                    first: "/p/vendor/lib/.git/config".into()
                }
            )]
        );
    }

    #[test]
    fn an_untouched_nested_repository_is_not_reported() {
        let mut f = project();
        f.file("/p/vendor/lib/.git/config", OLD)
            .file("/p/vendor/lib/.git/index", NEW)
            .file("/p/vendor/lib/.git/HEAD", OLD);
        assert_eq!(run(&f), []);
    }

    #[test]
    fn gitdir_files_links_and_case_variants_are_nested_repositories() {
        let mut f = project();
        f.file("/p/a/.git", NEW)
            .add("/p/b/.git", Kind::Symlink, NEW)
            .file("/p/c/.GIT/config", NEW);
        let found = run(&f);
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths.len(), 3, "{found:?}");
        for p in ["/p/a/.git", "/p/b/.git", "/p/c/.GIT"] {
            assert!(paths.contains(&p), "{p} missing from {found:?}");
        }
        assert!(found.contains(&("/p/b/.git".into(), What::Link)));
    }

    /// The check with what the start's walk listed (`start`, taken from
    /// the fake before the job's changes).
    fn run_from(f: &Fake, start: &WalkCache) -> Vec<(String, What)> {
        check_knowing(&watch(), f, Limits::default(), None, Some(start))
            .into_iter()
            .map(|x| (x.path.display().to_string(), x.what))
            .collect()
    }

    /// Session 1 leaves `sub/` with a config that runs a program,
    /// `objects/`, `refs/` and `HEAD.x`: not a repository, nothing to
    /// report. Session 2 renames `HEAD.x` to `HEAD`: `sub` is a repository
    /// whose config carries session 1's stamp. It was not one at the start:
    /// new, whatever the stamps say.
    #[test]
    fn a_directory_completed_into_a_repository_by_a_rename_is_new() {
        let mut f = project();
        f.file("/p/sub/config", OLD)
            .file("/p/sub/HEAD.x", OLD)
            .add("/p/sub/objects", Kind::Dir, OLD)
            .add("/p/sub/refs", Kind::Dir, OLD);
        for d in ["/p", "/p/src", "/p/sub"] {
            remember(&mut f, d);
        }
        let start = listings_of(&f);
        assert_eq!(run_from(&f, &start), []);
        f.entries.remove(Path::new("/p/sub/HEAD.x"));
        // Even a HEAD whose stamp the rename had left old.
        f.file("/p/sub/HEAD", OLD).add("/p/sub", Kind::Dir, NEW);
        assert_eq!(run_from(&f, &start), [("/p/sub".to_string(), What::Became)]);
        // Without the start's listing the stamps decide: the renamed HEAD
        // carries the session's.
        f.file("/p/sub/HEAD", NEW);
        assert_eq!(run(&f), [("/p/sub".to_string(), What::Became)]);
    }

    /// A bare repository the project already had (a fixture remote) into
    /// which the job pushes: its objects change, nothing that runs does.
    #[test]
    fn a_push_into_an_existing_bare_repository_is_no_finding() {
        let mut f = project();
        f.file("/p/remote.git/config", OLD)
            .file("/p/remote.git/HEAD", OLD)
            .add("/p/remote.git/objects", Kind::Dir, OLD)
            .add("/p/remote.git/refs", Kind::Dir, OLD);
        for d in ["/p", "/p/src", "/p/remote.git"] {
            remember(&mut f, d);
        }
        let start = listings_of(&f);
        f.file("/p/remote.git/objects/ab/cdef", NEW)
            .add("/p/remote.git/objects", Kind::Dir, NEW)
            .file("/p/remote.git/refs/heads/main", NEW);
        assert_eq!(run_from(&f, &start), []);
        assert_eq!(run(&f), []);
        // Its config changed: found as before.
        f.file("/p/remote.git/config", NEW);
        assert_eq!(run_from(&f, &start).len(), 1);
    }

    /// `rm -rf sub; mv stage sub`: a repository where one was, but another
    /// directory.
    #[test]
    fn a_repository_replaced_by_another_directory_is_new() {
        let mut f = project();
        f.file("/p/sub/config", OLD)
            .file("/p/sub/HEAD", OLD)
            .add("/p/sub/objects", Kind::Dir, OLD)
            .add("/p/sub/refs", Kind::Dir, OLD);
        for d in ["/p", "/p/src", "/p/sub"] {
            remember(&mut f, d);
        }
        let mut start = listings_of(&f);
        if let Some(d) = start.dirs.get_mut(Path::new("/p/sub").as_os_str()) {
            d.stamp.dev = 1;
            d.stamp.ino = 7;
        }
        f.ids.insert("/p/sub".into(), (1, 7));
        assert_eq!(run_from(&f, &start), []);
        f.ids.insert("/p/sub".into(), (1, 8));
        assert_eq!(run_from(&f, &start), [("/p/sub".to_string(), What::Became)]);
    }

    /// A nested `.git` directory where the start's listing had none (the
    /// supervisor refuses making one; this holds where it could not see).
    #[test]
    fn a_nested_git_directory_absent_at_the_start_is_new() {
        let mut f = project();
        f.add("/p/w", Kind::Dir, OLD);
        for d in ["/p", "/p/src", "/p/w"] {
            remember(&mut f, d);
        }
        let start = listings_of(&f);
        f.file("/p/w/.git/config", OLD)
            .file("/p/w/.git/HEAD", OLD)
            .add("/p/w", Kind::Dir, NEW);
        assert_eq!(
            run_from(&f, &start),
            [("/p/w/.git".to_string(), What::Became)]
        );
        assert_eq!(run(&f), []);
    }

    /// A nested `.git` directory that was there at the start but no git
    /// directory (an earlier session left a config that runs a program,
    /// `objects/`, `refs/` and `HEAD.x` in it) is completed by renaming
    /// `HEAD.x` to `HEAD`: the config keeps the earlier stamp, and a
    /// `HEAD` renamed on some filesystems keeps its own. Not one at the
    /// start, one now: new. A repository that was one (a `git checkout`
    /// rewrites its `HEAD`) is judged by its config, hooks and info.
    #[test]
    fn a_nested_git_directory_completed_inside_by_a_rename_is_new() {
        let mut f = project();
        f.file("/p/w/.git/config", OLD)
            .file("/p/w/.git/HEAD.x", OLD)
            .add("/p/w/.git/objects", Kind::Dir, OLD)
            .add("/p/w/.git/refs", Kind::Dir, OLD)
            .file("/p/v/.git/config", OLD)
            .file("/p/v/.git/HEAD", OLD)
            .add("/p/v/.git/objects", Kind::Dir, OLD)
            .add("/p/v/.git/refs", Kind::Dir, OLD);
        for d in ["/p", "/p/src", "/p/w", "/p/v"] {
            remember(&mut f, d);
        }
        let start = listings_of(&f);
        let git_dirs = [PathBuf::from("/p/w/.git"), PathBuf::from("/p/v/.git")];
        let begun = Watch::start_in(Path::new("/p"), &[], &git_dirs, &f);
        assert_eq!(
            begun.git_dirs,
            HashMap::from([(git_dirs[0].clone(), false), (git_dirs[1].clone(), true)])
        );
        let w = Watch {
            since: SINCE,
            ..begun
        };
        let found = |f: &Fake| -> Vec<(String, What)> {
            check_knowing(&w, f, Limits::default(), None, Some(&start))
                .into_iter()
                .map(|x| (x.path.display().to_string(), x.what))
                .collect()
        };
        assert_eq!(found(&f), []);
        f.entries.remove(Path::new("/p/w/.git/HEAD.x"));
        f.file("/p/w/.git/HEAD", OLD)
            .file("/p/v/.git/HEAD", NEW)
            .add("/p/w/.git", Kind::Dir, NEW);
        assert_eq!(found(&f), [("/p/w/.git".to_string(), What::Became)]);
    }

    #[test]
    fn a_bare_repository_below_the_root_is_checked_like_a_git_dir() {
        let mut f = project();
        f.file("/p/fixtures/evil/HEAD", NEW)
            .file("/p/fixtures/evil/config", NEW)
            .add("/p/fixtures/evil/objects", Kind::Dir, NEW)
            .add("/p/fixtures/evil/refs", Kind::Dir, NEW);
        let found = run(&f);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "/p/fixtures/evil");
    }

    #[test]
    fn root_files_other_tools_run_are_found_and_links_are_named() {
        let mut f = project();
        f.file("/p/.envrc", NEW)
            .file("/p/.vscode/tasks.json", NEW)
            .add("/p/.lfsconfig", Kind::Symlink, NEW)
            .file("/p/.devcontainer/devcontainer.json", NEW)
            .file("/p/.gitmodules", OLD)
            .file("/p/.git/hooks/post-checkout", NEW)
            .file("/p/.git/info/exclude", NEW)
            .file("/p/.git/modules/sm/config", NEW);
        let found = run(&f);
        for (p, w) in [
            ("/p/.envrc", What::Changed),
            ("/p/.vscode/tasks.json", What::Changed),
            ("/p/.lfsconfig", What::Link),
            ("/p/.devcontainer/devcontainer.json", What::Changed),
            ("/p/.git/hooks/post-checkout", What::Changed),
            ("/p/.git/info/exclude", What::Changed),
            ("/p/.git/modules/sm/config", What::Changed),
        ] {
            assert!(
                found.contains(&(p.into(), w.clone())),
                "{p} missing: {found:?}"
            );
        }
        assert!(!found.iter().any(|(p, _)| p == "/p/.gitmodules"));
    }

    #[test]
    fn a_linked_vscode_directory_is_reported_and_not_followed() {
        let mut f = project();
        f.add("/p/.vscode", Kind::Symlink, NEW)
            .file("/elsewhere/tasks.json", NEW);
        assert_eq!(run(&f), [("/p/.vscode".to_string(), What::Link)]);
    }

    #[test]
    fn the_walk_stops_at_its_limit_and_says_so() {
        let mut f = project();
        for i in 0..50 {
            f.file(&format!("/p/many/f{i}"), NEW);
        }
        f.file("/p/zz/.git/config", NEW);
        let w = Watch {
            project: "/p".into(),
            since: SINCE,
            settled: HashMap::new(),
            also: Vec::new(),
            git_dirs: HashMap::new(),
        };
        let found = check(
            &w,
            &f,
            Limits {
                entries: 20,
                findings: 64,
            },
        );
        assert!(
            found.iter().any(|x| matches!(x.what, What::Unchecked(_))),
            "{found:?}"
        );
    }

    #[test]
    fn an_unlistable_directory_is_a_finding() {
        let mut f = project();
        f.file("/p/locked/x", NEW);
        f.unlistable.push("/p/locked".into());
        let found = run(&f);
        assert_eq!(found.len(), 1);
        assert!(matches!(found[0].1, What::Unchecked(_)));
    }

    #[test]
    fn findings_beyond_the_limit_are_counted() {
        let mut f = project();
        for i in 0..10 {
            f.file(&format!("/p/.devcontainer/f{i}"), NEW);
        }
        let w = Watch {
            project: "/p".into(),
            since: SINCE,
            settled: HashMap::new(),
            also: Vec::new(),
            git_dirs: HashMap::new(),
        };
        let found = check(
            &w,
            &f,
            Limits {
                entries: 1000,
                findings: 4,
            },
        );
        assert_eq!(found.len(), 5);
        assert_eq!(found[4].what, What::More(6));
    }

    #[test]
    fn terminal_lines_escape_control_characters() {
        let f = Finding {
            path: "/p/a\n::warning title=x::\u{1b}]0;t\u{7}/.git".into(),
            what: What::Changed,
        };
        let l = line(&f);
        assert!(!l.chars().any(|c| c.is_control()), "{l:?}");
        assert!(l.contains("\\n::warning"));
    }

    #[test]
    fn the_real_tree_never_follows_links() {
        let dir = std::env::temp_dir().join(format!("vetto-persist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real")).unwrap_or_default();
        os::symlink(&dir.join("real"), &dir.join("link")).unwrap_or_default();
        let kinds = RealTree.list(&dir, 10).unwrap_or_default();
        assert!(kinds.contains(&(OsString::from("link"), Kind::Symlink)));
        assert!(kinds.contains(&(OsString::from("real"), Kind::Dir)));
        assert_eq!(
            RealTree.lstat(&dir.join("link")).map(|m| m.kind),
            Some(Kind::Symlink)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A remembered listing whose stamp no longer matches (here: a bogus
    /// inode) is read again, unless the job changed no entry at all.
    #[test]
    fn a_stale_stamp_is_taken_only_when_the_job_changed_no_entry() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().to_path_buf();
        let mut cache = WalkCache::default();
        let set = Rc::new(REMEMBERED_NAMES.iter().map(|n| n.to_string()).collect());
        let git = Entry {
            name: ".git".into(),
            is_dir: true,
        };
        cache
            .dirs
            .insert(path.clone().into(), unstamped(&set, vec![git]));
        let trust: fn(&Path) -> bool = |_| true;
        let later = Stamp {
            sec: i64::MAX,
            nsec: 0,
        };
        assert_eq!(
            Remembering::new(&cache, trust, false).remembered(&path, later),
            None
        );
        assert_eq!(
            Remembering::new(&cache, trust, true).remembered(&path, later),
            Some(Rc::new(vec![Entry {
                name: ".git".into(),
                is_dir: true
            }]))
        );
        Ok(())
    }
}
