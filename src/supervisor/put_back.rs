//! Put back what the session changed where a tool runs it later (issue
//! P14): naming a planted hook is not enough when the next `git commit`
//! outside the sandbox runs it. Every change [`super::snapshot`] finds —
//! in the project, and in an agent's home files and directories a preset
//! lets the job write — is undone: a created file or directory taken
//! away, a changed file written back with its start's bytes and mode, a
//! link made again to its start's target. The session's version is kept
//! in a tar archive outside the tree any tool reads (the report
//! directory's `put-back.tar`, else vetto's state directory): the
//! project's entries under `project/`, the others under `outside/` with
//! their absolute path, and one `tar` command takes each back.
//!
//! Safe against what the job left: it is dead by now, every directory on
//! the way is opened beneath the change's root (the project, or the
//! agent's directory) without following a link, the
//! entry itself is read, archived and removed through its directory's
//! descriptor (a link is archived as a link, never followed), and the
//! archive is a file vetto creates afresh. Bounded: [`MAX_ARCHIVED`]
//! bytes and [`MAX_REMOVED`] entries; what cannot be archived is renamed
//! aside where it is (`NAME.vetto-planted-RANDOM`: no tool loads that
//! name), so that nothing the job planted is left to run in any case.

use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
pub use undo::put_back;

/// Bytes of the session's versions archived in all.
pub const MAX_ARCHIVED: u64 = 256 << 20;
/// Entries removed in all (a planted tree).
pub const MAX_REMOVED: usize = 16_384;
/// The archive's name in the report directory.
pub const ARCHIVE_NAME: &str = "put-back.tar";

/// Where the session's versions go: the project's entries to `project`
/// (the report directory, which a CI step uploads for review); what lay
/// outside the project — an agent's settings, which may hold the user's
/// own keys — always to `outside`, vetto's state directory in the home,
/// never to the report directory or the project.
#[derive(Debug, Clone)]
pub struct Archives {
    pub project: ArchiveAt,
    pub outside: PathBuf,
}

/// One archive's place.
#[derive(Debug, Clone)]
pub enum ArchiveAt {
    /// `DIR/put-back.tar` (`vetto ci`, `--report-dir`).
    ReportDir(PathBuf),
    /// A new `PROJECT-RANDOM.tar` in vetto's state directory.
    State(PathBuf),
}

/// What became of one change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub path: PathBuf,
    /// Said after the finding ("put back as it was …").
    pub said: String,
    /// The start's state is there again.
    pub undone: bool,
    /// Where the session's version went (its archive), when it went into
    /// one.
    pub archive: Option<PathBuf>,
}

/// The undoing itself, over the OS floor's descriptor-relative calls.
#[cfg(target_os = "linux")]
mod undo {
    use std::ffi::OsStr;
    use std::fs::File;
    use std::path::{Path, PathBuf};

    use super::super::snapshot::{Change, Seen};
    use super::{ARCHIVE_NAME, ArchiveAt, Archives, MAX_ARCHIVED, MAX_REMOVED, Outcome};
    use crate::sys::safe_fs::{Dir, EntryKind, Parents};

    /// A file larger than this is not read into the archive.
    const MAX_FILE: u64 = 64 << 20;

    /// The archive, made at the first entry.
    struct Archive {
        at: ArchiveAt,
        open: Option<(tar::Builder<File>, PathBuf)>,
        written: u64,
    }

    impl Archive {
        fn builder(&mut self) -> Result<&mut tar::Builder<File>, String> {
            if self.open.is_none() {
                let (file, path) = match &self.at {
                    ArchiveAt::ReportDir(dir) => {
                        let d =
                            Dir::create(dir, Parents::Walk, 0o755).map_err(|e| e.to_string())?;
                        let f = d
                            .replace_with_new(ARCHIVE_NAME, 0o600)
                            .map_err(|e| e.to_string())?;
                        (f, d.join(ARCHIVE_NAME))
                    }
                    ArchiveAt::State(dir) => {
                        let d =
                            Dir::create(dir, Parents::AsNamed, 0o700).map_err(|e| e.to_string())?;
                        let (f, name) = d
                            .create_unique("put-back-", ".tar", 0o600)
                            .map_err(|e| e.to_string())?;
                        (f, d.join(&name))
                    }
                };
                let mut builder = tar::Builder::new(file);
                builder.follow_symlinks(false);
                self.open = Some((builder, path));
            }
            match &mut self.open {
                Some((b, _)) => Ok(b),
                None => Err("no archive".into()),
            }
        }

        /// The entry `name` of `dir`, whatever it is, as `rel` in the archive.
        fn add(&mut self, dir: &Dir, name: &OsStr, rel: &Path) -> Result<(), String> {
            let kind = dir
                .entry_kind(name)
                .map_err(|e| e.to_string())?
                .ok_or("gone")?;
            let mut header = tar::Header::new_gnu();
            header.set_mtime(now());
            header.set_uid(0);
            header.set_gid(0);
            match kind {
                EntryKind::File => {
                    let left = MAX_ARCHIVED.saturating_sub(self.written).min(MAX_FILE);
                    let (bytes, mode) = dir
                        .read_file_with_mode(name, left)
                        .map_err(|e| e.to_string())?;
                    self.written += bytes.len() as u64;
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(mode);
                    header.set_size(bytes.len() as u64);
                    self.builder()?
                        .append_data(&mut header, rel, bytes.as_slice())
                        .map_err(|e| e.to_string())
                }
                EntryKind::Symlink => {
                    let to = dir.read_link(name).map_err(|e| e.to_string())?;
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    self.builder()?
                        .append_link(&mut header, rel, &to)
                        .map_err(|e| e.to_string())
                }
                EntryKind::Dir => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(0o755);
                    header.set_size(0);
                    self.builder()?
                        .append_data(&mut header, rel, std::io::empty())
                        .map_err(|e| e.to_string())?;
                    let child = dir.open_child(name).map_err(|e| e.to_string())?;
                    let mut entries = child.entries(MAX_REMOVED).map_err(|e| e.to_string())?;
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                    for (entry, _) in entries {
                        self.add(&child, &entry, &rel.join(&entry))?;
                    }
                    Ok(())
                }
                EntryKind::Other => Err("a device, FIFO or socket".into()),
            }
        }

        /// Close it; where it is.
        fn finish(self) -> Option<Result<PathBuf, String>> {
            let (builder, path) = self.open?;
            Some(
                builder
                    .into_inner()
                    .and_then(|f| f.sync_all())
                    .map(|()| path)
                    .map_err(|e| e.to_string()),
            )
        }
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Undo each change of `changes` (sorted by path, as the snapshot
    /// gives them), each beneath its own root: the outcome of each, and the
    /// archive's path when one was written.
    pub fn put_back(
        project: &Path,
        changes: &[&Change],
        at: Archives,
    ) -> (Vec<Outcome>, Vec<PathBuf>) {
        let archive = |at| Archive {
            at,
            open: None,
            written: 0,
        };
        let mut inside = archive(at.project);
        let mut outside = archive(ArchiveAt::State(at.outside));
        let mut removed_budget = MAX_REMOVED;
        let mut taken: Vec<PathBuf> = Vec::new();
        let mut outcomes = Vec::new();
        for c in changes {
            // Inside a directory already taken away with everything in it.
            if taken.iter().any(|t| c.path.starts_with(t)) {
                continue;
            }
            let archive = if c.path.starts_with(project) {
                &mut inside
            } else {
                &mut outside
            };
            let said = match undo(project, c, archive, &mut removed_budget) {
                Ok((how, archived)) => {
                    if matches!(c.before, Seen::Absent) && matches!(c.after, Seen::Dir) {
                        taken.push(c.path.clone());
                    }
                    Outcome {
                        path: c.path.clone(),
                        said: how,
                        undone: true,
                        archive: archived
                            .then(|| archive.open.as_ref().map(|(_, p)| p.clone()))
                            .flatten(),
                    }
                }
                Err(why) => Outcome {
                    path: c.path.clone(),
                    said: format!(
                        "could not be put back ({why}): remove it before running anything in the project"
                    ),
                    undone: false,
                    archive: None,
                },
            };
            outcomes.push(said);
        }
        let mut written = Vec::new();
        for archive in [inside, outside] {
            match archive.finish() {
                Some(Ok(path)) => written.push(path),
                Some(Err(e)) => {
                    for o in &mut outcomes {
                        o.said.push_str(&format!(
                            " (the archive of the session's versions could not be finished: {e})"
                        ));
                    }
                }
                None => {}
            }
        }
        (outcomes, written)
    }

    /// One change: the session's version into the archive (else renamed
    /// aside), gone, and the start's version back. How, in words.
    fn undo(
        project: &Path,
        c: &Change,
        archive: &mut Archive,
        budget: &mut usize,
    ) -> Result<(String, bool), String> {
        let rel = c
            .path
            .strip_prefix(&c.root)
            .map_err(|_| "outside its root")?;
        let name = rel.file_name().ok_or("not a file name")?;
        let name_str = name.to_str().ok_or("a name that is not UTF-8")?;
        let member = super::member(project, &c.path);
        let root = Dir::open(&c.root, Parents::AsNamed).map_err(|e| e.to_string())?;
        let dir = match rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => {
                root.open_beneath(p).map_err(|e| e.to_string())?
            }
            _ => root,
        };
        let mut how = String::new();
        let mut archived = false;
        if dir.entry_kind(name).map_err(|e| e.to_string())?.is_some() {
            match archive.add(&dir, name, &member) {
                Ok(()) => {
                    dir.remove_entry(name, budget).map_err(|e| e.to_string())?;
                    how.push_str("the session's version is in the archive");
                    archived = true;
                }
                Err(why) => {
                    let aside = dir.set_aside(name_str).map_err(|e| e.to_string())?;
                    how.push_str(&format!(
                        "the session's version (not archived: {why}) was renamed to {}",
                        crate::text::escape(&aside)
                    ));
                }
            }
        }
        match &c.before {
            Seen::Absent => {}
            Seen::File {
                bytes: Some(bytes),
                mode,
                ..
            } => dir
                .write_file(name_str, bytes, *mode)
                .map_err(|e| e.to_string())?,
            Seen::Link(to) => dir
                .link_new(name_str, Path::new(to))
                .map_err(|e| e.to_string())?,
            Seen::Dir => {
                dir.create_dir_new(name_str, 0o755)
                    .map_err(|e| e.to_string())?;
            }
            Seen::File { bytes: None, .. } => {
                return Err(format!(
                    "{how}; its start's version was larger than vetto keeps, so the file is gone"
                ));
            }
            Seen::Other | Seen::Unreadable(_) => {
                return Err(format!("{how}; its start's version could not be kept"));
            }
        }
        let what = match c.before {
            Seen::Absent => "removed (it did not exist before the session)",
            _ => "put back as it was before the session",
        };
        Ok((format!("{what}; {how}"), archived))
    }
}

/// `path`'s name in the archive: `project/REL` in the project,
/// `outside/ABSOLUTE` elsewhere (two agents' `settings.json` never meet).
fn member(project: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix(project) {
        Ok(rel) => Path::new("project").join(rel),
        Err(_) => Path::new("outside").join(path.strip_prefix("/").unwrap_or(path)),
    }
}

/// The command that takes `path`'s session version out of `archive` and
/// back where it was, quoted for a POSIX shell.
pub fn accept_command(archive: &Path, project: &Path, path: &Path) -> String {
    let into = if path.starts_with(project) {
        project
    } else {
        Path::new("/")
    };
    format!(
        "tar -xpf {} -C {} --strip-components=1 -- {}",
        shell_quote(&archive.to_string_lossy()),
        shell_quote(&into.to_string_lossy()),
        shell_quote(&member(project, path).to_string_lossy())
    )
}

/// One word for `sh`: single quotes, a quote inside written `'\''`;
/// control characters shown escaped (the line is for a terminal).
fn shell_quote(s: &str) -> String {
    let escaped = crate::text::escape(s);
    format!("'{}'", escaped.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_command_quotes_every_word() {
        assert_eq!(
            accept_command(
                Path::new("/r/put-back.tar"),
                Path::new("/p"),
                Path::new("/p/it's/.git/hooks/pre-commit")
            ),
            "tar -xpf '/r/put-back.tar' -C '/p' --strip-components=1 -- 'project/it'\\''s/.git/hooks/pre-commit'"
        );
        assert_eq!(
            accept_command(
                Path::new("/r/put-back.tar"),
                Path::new("/p"),
                Path::new("/h/.claude/settings.json")
            ),
            "tar -xpf '/r/put-back.tar' -C '/' --strip-components=1 -- 'outside/h/.claude/settings.json'"
        );
    }
}
