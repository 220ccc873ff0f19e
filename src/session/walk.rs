//! The remembered glob walk (`policy::walk_cache`): where it lives, read
//! before the policy loads, kept after planning only when the job cannot
//! change it.
//!
//! It lives in `$XDG_CACHE_HOME/vetto/walk/` (else `~/.cache/vetto/walk/`),
//! one file per project. The policy masks that directory wherever a rule
//! would expose it; a session whose final policy still lets the job write
//! there (a rule beneath it), or that confines no file writes at all
//! (`--audit`, the seccomp tier), does not keep what it learnt and forgets
//! every remembered walk when it ends — a job that could write the cache
//! could have planted a listing that hides a secret from the next session.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::plan::{Plan, Tier};
use crate::policy::walk_cache::{MAX_BYTES, WalkCache};
use crate::policy::walk_parallel::StampsAhead;
use crate::policy::{Access, LoadRequest, Policy, WalkMemory, paths};
use crate::sandbox::{fs_kind, safe_fs};

/// The walk cache of this session's project.
pub struct Remembered {
    dir: safe_fs::Dir,
    name: String,
}

/// `$XDG_CACHE_HOME/vetto/walk` (an absolute `XDG_CACHE_HOME` only), else
/// `~/.cache/vetto/walk`.
pub fn cache_dir(req: &LoadRequest) -> PathBuf {
    let xdg = req
        .env
        .iter()
        .find(|(k, _)| k == "XDG_CACHE_HOME")
        .map(|(_, v)| PathBuf::from(v))
        .filter(|p| p.is_absolute());
    paths::normalise_abs(&xdg.unwrap_or_else(|| req.home.join(".cache")))
        .join("vetto")
        .join("walk")
}

/// Open (making it) the cache directory and read this project's walk.
/// Anything amiss gives an empty memory: the walk then reads every
/// directory, as without a cache.
pub fn recall(req: &LoadRequest) -> (Option<Remembered>, WalkMemory) {
    let path = cache_dir(req);
    let project = req.project.as_deref().unwrap_or(&req.cwd);
    let project = paths::normalise_abs(&req.cwd.join(project));
    let name = crate::hash::sha256_hex(&[project.as_os_str().as_encoded_bytes()]);
    let dir = safe_fs::Dir::create(&path, safe_fs::Parents::AsNamed, 0o700).ok();
    let bytes = dir.as_ref().and_then(|d| read_bounded(&d.join(&name)));
    // The stamps begin now, on another CPU, while the file is decoded and
    // the session's other start-up work runs; the walk takes them when it
    // needs them.
    let now = paths::now_ns();
    let (prior, begun) = match bytes {
        Some(bytes) => {
            let bytes = std::sync::Arc::new(bytes);
            let begun = StampsAhead::start(std::sync::Arc::clone(&bytes), paths::walk_threads());
            let prior = WalkCache::decode(&bytes);
            // A file that does not decode has nothing to stamp.
            let begun = begun.filter(|_| prior.is_some()).map(|b| (b, now));
            (prior.unwrap_or_default(), begun)
        }
        None => (WalkCache::default(), None),
    };
    let memory = WalkMemory {
        dir: path,
        prior,
        begun,
        trust: fs_kind::honest_change_times,
        keep: &crate::supervisor::persist::REMEMBERED_NAMES,
    };
    (dir.map(|dir| Remembered { dir, name }), memory)
}

fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    let file = safe_fs::open_regular(path).ok()?;
    // Sized once from the file's length (read in one call, not grown).
    let len = file.metadata().map_or(0, |m| m.len().min(MAX_BYTES));
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= MAX_BYTES).then_some(bytes)
}

/// Whether the job of `plan` can neither read nor change `dir`: the
/// policy decides it masked (or leaves it out) and no rule beneath it
/// grants anything, and the tier enforces file rules.
pub fn sealed_from_job(policy: &Policy, plan: &Plan, audit: bool, dir: &Path) -> bool {
    let decided = paths::decide_rule(&policy.fs, dir).is_none_or(|r| r.access == Access::Deny);
    let nothing_beneath = !policy
        .fs
        .iter()
        .any(|r| r.path != dir && paths::beneath(&r.path, dir) && r.access != Access::Deny);
    decided && nothing_beneath && !audit && plan.tier != Tier::Seccomp
}

impl Remembered {
    /// vetto's own directory, sealed from the job as the walk is.
    pub fn dir(&self) -> &safe_fs::Dir {
        &self.dir
    }

    /// Keep what this load walked for the next one. A failure only costs
    /// the next session a full walk.
    pub fn keep(&self, learnt: &WalkCache) {
        // Unsynced: a torn file never decodes (`WalkCache::decode`).
        let _ = self.dir.write_cache(&self.name, &learnt.encode(), 0o600);
    }

    /// Forget every remembered walk (this session's job could have
    /// written any of them).
    pub fn forget_all(&self) {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return;
        };
        for e in entries.flatten() {
            if let Some(name) = e.file_name().to_str() {
                let _ = self.dir.remove_file(name);
            }
        }
    }
}
