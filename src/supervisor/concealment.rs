//! Concealment (issue P14, item 3): an edit nobody sees is as good as a
//! planted program. `git update-index --skip-worktree FILE` (or
//! `--assume-unchanged`) makes `git status` and `git diff` pass over FILE
//! from then on, so an edit the job made there reaches the next commit, a
//! release or a reviewer's checkout unseen. A flag set during the session
//! on a file whose content differs from what the index holds is a finding,
//! and is put back: the flag is cleared, so the edit shows in the next
//! `git status`. A sparse checkout's flags on files it leaves untouched
//! (absent from the worktree, or as the index has them) are not.
//!
//! The index is read as bytes at the start (before the job can touch it)
//! and at the end, and decoded only when the two differ — by gitoxide, not
//! by running git on a repository the job may have configured. It is
//! written back with git's own lock protocol (`index.lock` made
//! exclusively, then renamed onto `index`), so a git running meanwhile
//! outside the sandbox is never overwritten, and never through a link.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gix_index::entry::Flags;

/// An index larger than this is not compared (a finding says so).
pub const MAX_INDEX: u64 = 256 << 20;

/// The flags that hide a file's changes from `git status`.
const HIDING: Flags = Flags::SKIP_WORKTREE.union(Flags::ASSUME_VALID);

/// The project's index as the session started.
#[derive(Debug, Clone)]
pub struct IndexAtStart {
    gitdir: PathBuf,
    worktree: PathBuf,
    /// `None`: there was none (a repository with no commit yet).
    bytes: Option<Vec<u8>>,
}

/// A file whose change the session hid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concealed {
    pub path: PathBuf,
    /// "skip-worktree", "assume-unchanged", or both.
    pub flags: String,
    /// How it was put back, or why it could not be.
    pub said: String,
    /// The flag is cleared.
    pub undone: bool,
}

impl IndexAtStart {
    /// Right before the job starts: the index of the repository the
    /// project is or belongs to, if any.
    pub fn take(project: &Path) -> Option<IndexAtStart> {
        let (gitdir, worktree) =
            crate::policy::autorun::repository_of(project, &super::snapshot::RealFiles)?;
        let bytes = read_index(&gitdir.join("index")).ok().flatten();
        Some(IndexAtStart {
            gitdir,
            worktree,
            bytes,
        })
    }

    /// After every process of the job is dead: what the session hid, each
    /// flag cleared when `clear` (not under `--audit`); `Err` names what
    /// could not be checked.
    pub fn check(&self, clear: bool) -> Result<Vec<Concealed>, String> {
        let index = self.gitdir.join("index");
        let Some(end) = read_index(&index)? else {
            return Ok(Vec::new());
        };
        if self.bytes.as_deref() == Some(end.as_slice()) {
            return Ok(Vec::new());
        }
        let before = match &self.bytes {
            Some(b) => hiding(&decode(b)?),
            None => BTreeMap::new(),
        };
        let mut state = decode(&end)?;
        let mut found = Vec::new();
        let (entries, paths) = state.entries_mut_and_pathbacking();
        for entry in entries.iter_mut() {
            let hidden = entry.flags & HIDING;
            if hidden.is_empty() {
                continue;
            }
            let rel = entry.path_in(paths).to_string();
            let new = hidden - before.get(&rel).copied().unwrap_or(Flags::empty());
            if new.is_empty() {
                continue;
            }
            let path = self.worktree.join(&rel);
            if !differs(&path, entry) {
                continue;
            }
            entry.flags.remove(new);
            found.push(Concealed {
                path,
                flags: describe(new),
                said: String::new(),
                undone: false,
            });
        }
        if !clear {
            for c in &mut found {
                c.said = "left as it is (--audit undoes nothing)".into();
            }
        }
        if found.is_empty() || !clear {
            return Ok(found);
        }
        let written = write_index(&self.gitdir, state);
        let undone = written.is_ok();
        let said = match written {
            Ok(()) => "the flag is cleared, so `git status` and `git diff` show the change again"
                .to_string(),
            Err(e) => format!(
                "the flag could not be cleared ({e}): run `git update-index --no-skip-worktree --no-assume-unchanged -- PATH` before trusting `git status`"
            ),
        };
        for c in &mut found {
            c.said.clone_from(&said);
            c.undone = undone;
        }
        Ok(found)
    }
}

/// The index's bytes: `None` when there is none; an error when it is not a
/// regular file or too large to compare.
fn read_index(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    let file = match crate::sys::safe_fs::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut bytes = Vec::new();
    file.take(MAX_INDEX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_INDEX {
        return Err(format!("the index is larger than {} MiB", MAX_INDEX >> 20));
    }
    Ok(Some(bytes))
}

fn decode(bytes: &[u8]) -> Result<gix_index::State, String> {
    let options = gix_index::decode::Options {
        thread_limit: Some(1),
        alloc_limit_bytes: Some(4 * MAX_INDEX as usize),
        ..Default::default()
    };
    gix_index::State::from_bytes(
        bytes,
        filetime::FileTime::now(),
        gix_index::hash::Kind::Sha1,
        options,
    )
    .map(|(state, _)| state)
    .map_err(|e| format!("the index cannot be read: {e}"))
}

/// Each path and the hiding flags it carries.
fn hiding(state: &gix_index::State) -> BTreeMap<String, Flags> {
    state
        .entries()
        .iter()
        .filter(|e| e.flags.intersects(HIDING))
        .map(|e| (e.path(state).to_string(), e.flags & HIDING))
        .collect()
}

fn describe(flags: Flags) -> String {
    let mut names = Vec::new();
    if flags.contains(Flags::SKIP_WORKTREE) {
        names.push("skip-worktree");
    }
    if flags.contains(Flags::ASSUME_VALID) {
        names.push("assume-unchanged");
    }
    names.join(" and ")
}

/// Whether the worktree's file differs from the blob the index names: its
/// git object id (`blob LEN\0CONTENT`, a link's target for a link). A file
/// that is not there — what a sparse checkout leaves — does not.
fn differs(path: &Path, entry: &gix_index::Entry) -> bool {
    use std::io::Read;
    let content = match std::fs::symlink_metadata(path) {
        Err(_) => return false,
        Ok(md) if md.file_type().is_symlink() => match std::fs::read_link(path) {
            Ok(to) => to.into_os_string().into_encoded_bytes(),
            Err(_) => return true,
        },
        Ok(md) if md.is_file() => {
            let Ok(f) = crate::sys::safe_fs::open_regular(path) else {
                return true;
            };
            let mut bytes = Vec::new();
            if f.take(MAX_INDEX + 1).read_to_end(&mut bytes).is_err()
                || bytes.len() as u64 > MAX_INDEX
            {
                return true;
            }
            bytes
        }
        // A directory or a device where the index has a file.
        Ok(_) => return true,
    };
    let mut h = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(&content);
    h.try_finalize().map_or(true, |id| id != entry.id)
}

/// Write `state` as `gitdir/index`, as git does: `index.lock` made
/// exclusively (a git at work meanwhile keeps its own), then renamed onto
/// `index`; never through a link.
fn write_index(gitdir: &Path, state: gix_index::State) -> Result<(), String> {
    use crate::sys::safe_fs::{Dir, Parents};
    use std::io::Write;
    let dir = Dir::open(gitdir, Parents::AsNamed).map_err(|e| e.to_string())?;
    let file = gix_index::File::from_state(state, gitdir.join("index"));
    let mut bytes = Vec::new();
    file.write_to(&mut bytes, gix_index::write::Options::default())
        .map_err(|e| e.to_string())?;
    let mut lock = dir
        .create_new("index.lock", 0o644)
        .map_err(|e| e.to_string())?;
    let written = lock.write_all(&bytes).and_then(|()| lock.sync_all());
    if let Err(e) = written {
        let _ = dir.remove_file("index.lock");
        return Err(e.to_string());
    }
    dir.rename_over("index.lock", "index").map_err(|e| {
        let _ = dir.remove_file("index.lock");
        e.to_string()
    })
}
