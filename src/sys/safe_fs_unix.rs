//! Files vetto writes outside the sandbox, in places an earlier job could
//! have prepared: the report directory, the temporary directory, the
//! project's `.git`. A job (or an earlier `vetto run`) can plant a link
//! there — `vetto-report/summary.md.tmp -> ~/.bashrc` — and vetto, which
//! writes unsandboxed with all of the user's rights, must never follow it.
//!
//! The rules, for every write:
//! - The directory is opened with `O_DIRECTORY|O_NOFOLLOW` and checked on
//!   its descriptor ([`Dir`]): a real directory, owned by the user or by
//!   root, that no other user can write in (unless it is sticky, like
//!   `/tmp`, where nobody can replace another's entries). A relative path
//!   ([`Parents::Walk`]) is walked one component at a time from the
//!   working directory, none of them a link: the working tree is the
//!   job's. An absolute path ([`Parents::AsNamed`]) is taken as named up
//!   to its last component. The directory of a file the user names
//!   (`--sarif out/x.sarif`, `$TMPDIR`: [`Parents::Followed`]) is taken
//!   as named, their own links included, and still checked.
//! - Files are made relative to that descriptor under a fresh name with
//!   128 random bits from the kernel (`getrandom(2)`), with
//!   `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`: nothing that exists — a link,
//!   a hard link, a FIFO — is ever opened. Then `renameat` puts the file
//!   onto its final name, which replaces whatever entry was planted there
//!   (a link is replaced, never followed; a hard link's other name keeps
//!   its contents).
//! - Appending to a file vetto does not own (`$GITHUB_STEP_SUMMARY`, the
//!   runner's) opens it with `O_NOFOLLOW|O_APPEND` and writes only to a
//!   regular file with one link.
//! - Directories vetto makes (`mkdirat`) are opened again the same way and
//!   checked before anything goes in them.
//!
//! Why not `std::hash::RandomState` for the names: its keys are random
//! once per thread and then only incremented, and the standard library
//! promises nothing about their unpredictability. A name a job can guess
//! is a name it can plant; `getrandom(2)` is the kernel's CSPRNG.
//!
//! Everything here is safe code over `nix`'s `*at` wrappers; it is under
//! `sandbox/` because it is where vetto's OS-specific file handling lives.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{Gid, Group, UnlinkatFlags, User, geteuid, unlinkat};

use super::safe_fs_common::Result;
pub use super::safe_fs_common::{Parents, SafeFsError};

/// A directory opened without following a link and checked on its
/// descriptor; every file is made relative to it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

impl Dir {
    /// Open an existing directory (see [`Parents`]) and check it.
    pub fn open(path: &Path, parents: Parents) -> Result<Dir> {
        Dir::open_or_make(path, parents, None)
    }

    /// The same, making what is missing first (with `mode`, less the
    /// umask); an entry that exists must pass the same checks.
    pub fn create(path: &Path, parents: Parents, mode: u32) -> Result<Dir> {
        Dir::open_or_make(path, parents, Some(mode))
    }

    fn open_or_make(path: &Path, parents: Parents, make: Option<u32>) -> Result<Dir> {
        let last_is_name = matches!(path.components().next_back(), Some(Component::Normal(_)));
        match parents {
            Parents::Walk if path.is_relative() && last_is_name => Dir::walk(AT_FDCWD, path, make),
            Parents::Walk | Parents::AsNamed => Dir::open_as_named(path, make),
            Parents::Followed => {
                if let Some(mode) = make {
                    make_dir_all(path, mode)?;
                }
                Dir::open_followed(path)
            }
        }
    }

    fn open_followed(path: &Path) -> Result<Dir> {
        let fd = nix::fcntl::open(path, DIR_FLAGS.difference(OFlag::O_NOFOLLOW), Mode::empty())
            .map_err(|e| SafeFsError::io("open the directory", path, e))?;
        Dir::checked(fd, path)
    }

    /// Every component of the relative `path` from `start`, none a link.
    fn walk(start: BorrowedFd<'_>, path: &Path, make: Option<u32>) -> Result<Dir> {
        let mut at: Option<OwnedFd> = None;
        let mut shown = PathBuf::new();
        for c in path.components() {
            let name: &OsStr = match c {
                Component::CurDir => continue,
                Component::ParentDir => OsStr::new(".."),
                Component::Normal(n) => n,
                // Not in a relative path.
                Component::RootDir | Component::Prefix(_) => {
                    return Err(SafeFsError::io("open", path, Errno::EINVAL));
                }
            };
            shown.push(name);
            let dir = at.as_ref().map_or(start, |fd| fd.as_fd());
            if let Some(mode) = make {
                mkdir_if_missing(dir, name, mode, &shown)?;
            }
            at = Some(open_dir_at(dir, name, &shown)?);
        }
        let fd = at.ok_or_else(|| SafeFsError::io("open", path, Errno::EINVAL))?;
        Dir::checked(fd, path)
    }

    /// The parent as named, the last component without following a link.
    fn open_as_named(path: &Path, make: Option<u32>) -> Result<Dir> {
        let name = match path.components().next_back() {
            Some(Component::Normal(name)) => name,
            // `/`, `.`, `..`: nothing planted can stand there.
            _ => return Dir::open_followed(path),
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Some(mode) = make {
            make_dir_all(parent, mode)?;
        }
        let parent_fd = nix::fcntl::open(
            parent,
            DIR_FLAGS.difference(OFlag::O_NOFOLLOW),
            Mode::empty(),
        )
        .map_err(|e| SafeFsError::io("open the directory", parent, e))?;
        if let Some(mode) = make {
            mkdir_if_missing(parent_fd.as_fd(), name, mode, path)?;
        }
        let fd = open_dir_at(parent_fd.as_fd(), name, path)?;
        Dir::checked(fd, path)
    }

    fn checked(fd: OwnedFd, path: &Path) -> Result<Dir> {
        let st = fstat(&fd).map_err(|e| SafeFsError::io("inspect", path, e))?;
        check_dir(&st, path)?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The directory `rel` (names only) beneath this one, every component
    /// opened without following a link.
    pub fn open_beneath(&self, rel: &Path) -> Result<Dir> {
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(SafeFsError::io("open", &self.path.join(rel), Errno::EINVAL));
        }
        let mut dir = Dir::walk(self.fd.as_fd(), rel, None)?;
        dir.path = self.path.join(rel);
        Ok(dir)
    }

    /// Move the entry `name` (whatever it is, a link itself, never its
    /// target) aside to `NAME.vetto-planted-RANDOM` here, a name nothing
    /// loads and nobody can have made beforehand; the new name.
    pub fn set_aside(&self, name: &str) -> Result<String> {
        self.check_name(name)?;
        let to = format!("{name}.vetto-planted-{}", random_hex(4)?);
        renameat(&self.fd, name, &self.fd, to.as_str())
            .map_err(|e| SafeFsError::io("move aside", &self.join(name), e))?;
        Ok(to)
    }

    /// The path this directory was opened by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` in this directory, for messages and for the caller's records.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Create `name`, which must not exist in any form (a link included),
    /// as an empty file open for writing.
    pub fn create_new(&self, name: &str, mode: u32) -> Result<File> {
        self.check_name(name)?;
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        openat(&self.fd, name, flags, mode_bits(mode))
            .map(File::from)
            .map_err(|e| SafeFsError::io("create", &self.join(name), e))
    }

    /// A new file under `PREFIX<random>SUFFIX`; returns it and its name.
    pub fn create_unique(&self, prefix: &str, suffix: &str, mode: u32) -> Result<(File, String)> {
        let mut last = None;
        // A fresh 128-bit name exists only if someone planted it: retry a
        // few times, then give up saying so.
        for _ in 0..4 {
            let name = format!("{prefix}{}{suffix}", random_hex(16)?);
            match self.create_new(&name, mode) {
                Ok(f) => return Ok((f, name)),
                Err(e) if e.is_exists() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| SafeFsError::io("create", &self.path, Errno::EEXIST)))
    }

    /// Write `name` whole: `fill` writes a fresh temporary file (see
    /// [`Dir::create_unique`]), which is synced and renamed onto `name`,
    /// replacing whatever entry is there without following it. A failure
    /// leaves no temporary file and `name` as it was.
    pub fn write_with(
        &self,
        name: &str,
        mode: u32,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> Result<()> {
        self.write_whole(name, mode, true, fill)
    }

    /// [`Dir::write_file`] without the sync, for a cache whose reader
    /// discards a torn or empty file (after a crash the next reader
    /// misses, it is never misled): the sync was ≈ 10 ms of a session
    /// that wrote its walk cache.
    pub fn write_cache(&self, name: &str, contents: &[u8], mode: u32) -> Result<()> {
        self.write_whole(name, mode, false, |f| f.write_all(contents))
    }

    fn write_whole(
        &self,
        name: &str,
        mode: u32,
        sync: bool,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> Result<()> {
        self.check_name(name)?;
        let (mut file, tmp) = self.create_unique(&format!(".{name}."), ".tmp", mode)?;
        let result = fill(&mut file)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
            .map_err(|e| SafeFsError::io("write", &self.join(name), e))
            .and_then(|()| self.rename_onto(&tmp, name));
        if result.is_err() {
            let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        result
    }

    /// Remove the file `name` (not a directory); gone already is fine.
    pub fn remove_file(&self, name: &str) -> Result<()> {
        self.check_name(name)?;
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(SafeFsError::io("remove", &self.join(name), e)),
        }
    }

    /// [`Dir::write_with`] for bytes in memory.
    pub fn write_file(&self, name: &str, contents: &[u8], mode: u32) -> Result<()> {
        self.write_with(name, mode, |f| f.write_all(contents))
    }

    /// A new, empty file that has already replaced `name` (as
    /// [`Dir::write_with`] does), for a file written as things happen
    /// (`session.jsonl`): it is readable under its name from the start.
    pub fn replace_with_new(&self, name: &str, mode: u32) -> Result<File> {
        self.check_name(name)?;
        let (file, tmp) = self.create_unique(&format!(".{name}."), ".tmp", mode)?;
        if let Err(e) = self.rename_onto(&tmp, name) {
            let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
            return Err(e);
        }
        Ok(file)
    }

    /// Copy the regular file `from` (not followed if it is a link) to
    /// `name`, as [`Dir::write_with`] writes.
    pub fn copy_in(&self, name: &str, from: &Path, mode: u32) -> Result<()> {
        let mut src = open_regular(from)?;
        self.write_with(name, mode, |f| io::copy(&mut src, f).map(drop))
    }

    /// Read `name` in this directory whole, at most `max` bytes: never
    /// through a link (a report directory may hold one an earlier job
    /// planted, `summary.md -> ~/.ssh/id_ed25519`), only a regular file (a
    /// FIFO would block).
    pub fn read_file(&self, name: &str, max: u64) -> Result<Vec<u8>> {
        self.check_name(name)?;
        let path = self.join(name);
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = match openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) if is_link(self.fd.as_fd(), OsStr::new(name)) => {
                return Err(SafeFsError::LinkedFile { path });
            }
            Err(e) => return Err(SafeFsError::io("read", &path, e)),
        };
        let st = fstat(&fd).map_err(|e| SafeFsError::io("inspect", &path, e))?;
        if kind(&st) != SFlag::S_IFREG {
            return Err(SafeFsError::NotRegular { path });
        }
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut io::Read::take(File::from(fd), max + 1), &mut bytes)
            .map_err(|e| SafeFsError::io("read", &path, e))?;
        if bytes.len() as u64 > max {
            return Err(SafeFsError::TooLarge { path, max });
        }
        Ok(bytes)
    }

    /// Make the directory `name`, which must not exist, and open it.
    pub fn create_dir_new(&self, name: &str, mode: u32) -> Result<Dir> {
        self.check_name(name)?;
        let path = self.join(name);
        mkdirat(&self.fd, name, mode_bits(mode))
            .map_err(|e| SafeFsError::io("create the directory", &path, e))?;
        let fd = open_dir_at(self.fd.as_fd(), OsStr::new(name), &path)?;
        Dir::checked(fd, &path)
    }

    /// A new link `name` to `target`, which must not exist (a link is
    /// made, never followed: what it names is read later by the job,
    /// under the sandbox's rules for `target`).
    pub fn link_new(&self, name: &str, target: &Path) -> Result<()> {
        self.check_name(name)?;
        nix::unistd::symlinkat(target, &self.fd, name)
            .map_err(|e| SafeFsError::io("create the link", &self.join(name), e))
    }

    /// What the entry `name` is, never following a link: `None` when
    /// nothing is there.
    pub fn entry_kind(&self, name: &OsStr) -> Result<Option<EntryKind>> {
        match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(entry_kind(&st))),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(SafeFsError::io("inspect", &self.path.join(name), e)),
        }
    }

    /// The entries of this directory with what each is (never followed),
    /// at most `max`: more is an error, not a silent cut.
    pub fn entries(&self, max: usize) -> Result<Vec<(std::ffi::OsString, EntryKind)>> {
        let fd = openat(&self.fd, ".", DIR_FLAGS, Mode::empty())
            .map_err(|e| SafeFsError::io("list", &self.path, e))?;
        let mut dir =
            nix::dir::Dir::from_fd(fd).map_err(|e| SafeFsError::io("list", &self.path, e))?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(|e| SafeFsError::io("list", &self.path, e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            if out.len() == max {
                return Err(SafeFsError::io("list", &self.path, Errno::E2BIG));
            }
            let kind = self.entry_kind(name)?.unwrap_or(EntryKind::Other);
            out.push((name.to_os_string(), kind));
        }
        Ok(out)
    }

    /// The directory `name` in this one, opened without following a link.
    pub fn open_child(&self, name: &OsStr) -> Result<Dir> {
        let path = self.path.join(name);
        let fd = open_dir_at(self.fd.as_fd(), name, &path)?;
        Dir::checked(fd, &path)
    }

    /// A link's target (the link itself, never what it names).
    pub fn read_link(&self, name: &OsStr) -> Result<std::ffi::OsString> {
        nix::fcntl::readlinkat(&self.fd, name)
            .map_err(|e| SafeFsError::io("read the link", &self.path.join(name), e))
    }

    /// Read the regular file `name` (never through a link, never a FIFO)
    /// with its permission bits, at most `max` bytes.
    pub fn read_file_with_mode(&self, name: &OsStr, max: u64) -> Result<(Vec<u8>, u32)> {
        let path = self.path.join(name);
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::empty())
            .map_err(|e| SafeFsError::io("read", &path, e))?;
        let st = fstat(&fd).map_err(|e| SafeFsError::io("inspect", &path, e))?;
        if kind(&st) != SFlag::S_IFREG {
            return Err(SafeFsError::NotRegular { path });
        }
        let file = File::from(fd);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &file
                .metadata()
                .map_err(|e| SafeFsError::io("inspect", &path, e))?
                .permissions(),
        ) & 0o7777;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut io::Read::take(file, max + 1), &mut bytes)
            .map_err(|e| SafeFsError::io("read", &path, e))?;
        if bytes.len() as u64 > max {
            return Err(SafeFsError::TooLarge { path, max });
        }
        Ok((bytes, mode))
    }

    /// Remove the entry `name` whatever it is — a file, a link (never
    /// what it names) or a directory with everything in it, each
    /// directory opened without following a link — taking at most
    /// `budget` entries; gone already is fine.
    pub fn remove_entry(&self, name: &OsStr, budget: &mut usize) -> Result<()> {
        match self.entry_kind(name)? {
            None => Ok(()),
            Some(EntryKind::Dir) => {
                let child = self.open_child(name)?;
                for (entry, _) in child.entries(*budget)? {
                    *budget = budget
                        .checked_sub(1)
                        .ok_or_else(|| SafeFsError::io("remove", &child.path, Errno::E2BIG))?;
                    child.remove_entry(&entry, budget)?;
                }
                unlinkat(&self.fd, name, UnlinkatFlags::RemoveDir)
                    .map_err(|e| SafeFsError::io("remove", &self.path.join(name), e))
            }
            Some(_) => match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => Ok(()),
                Err(e) => Err(SafeFsError::io("remove", &self.path.join(name), e)),
            },
        }
    }

    /// Rename `from` onto `name` in this directory (git's lock-file
    /// protocol: `index.lock` onto `index`), replacing without following.
    pub fn rename_over(&self, from: &str, name: &str) -> Result<()> {
        self.check_name(from)?;
        self.check_name(name)?;
        self.rename_onto(from, name)
    }

    fn rename_onto(&self, tmp: &str, name: &str) -> Result<()> {
        renameat(&self.fd, tmp, &self.fd, name)
            .map_err(|e| SafeFsError::io("replace", &self.join(name), e))
    }

    fn check_name(&self, name: &str) -> Result<()> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(SafeFsError::BadName {
                dir: self.path.clone(),
                name: name.to_owned(),
            });
        }
        Ok(())
    }
}

/// Make `path` a new directory only the user can enter: it must not exist
/// in any form. Its parent is opened as `parents` says.
pub fn create_private_dir(path: &Path, parents: Parents) -> Result<Dir> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(OsStr::to_str))
    else {
        return Err(SafeFsError::io("create the directory", path, Errno::EINVAL));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    Dir::open(parent, parents)?.create_dir_new(name, 0o700)
}

/// Open `path` for reading only if it is a regular file and not a link
/// (a FIFO would block, a link could lead anywhere).
pub fn open_regular(path: &Path) -> Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| SafeFsError::io("read", path, e))?;
    let regular = file
        .metadata()
        .map_err(|e| SafeFsError::io("read", path, e))?
        .is_file();
    if !regular {
        return Err(SafeFsError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Append `bytes` to `path`, a file vetto does not own: never through a
/// link, only to a regular file with a single name (a FIFO would block,
/// a device or a second name could be anything).
pub fn append(path: &Path, bytes: &[u8]) -> Result<()> {
    let flags = OFlag::O_WRONLY
        | OFlag::O_APPEND
        | OFlag::O_CREAT
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_CLOEXEC;
    let fd = match nix::fcntl::open(path, flags, mode_bits(0o644)) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) if is_link(AT_FDCWD, path.as_os_str()) => {
            return Err(SafeFsError::LinkedFile {
                path: path.to_path_buf(),
            });
        }
        // A FIFO nobody reads.
        Err(Errno::ENXIO) => {
            return Err(SafeFsError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(SafeFsError::io("open", path, e)),
    };
    let st = fstat(&fd).map_err(|e| SafeFsError::io("inspect", path, e))?;
    if kind(&st) != SFlag::S_IFREG {
        return Err(SafeFsError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    if st.st_nlink > 1 {
        return Err(SafeFsError::HardLinked {
            path: path.to_path_buf(),
            links: st.st_nlink as u64,
        });
    }
    File::from(fd)
        .write_all(bytes)
        .map_err(|e| SafeFsError::io("append to", path, e))
}

/// `bytes` random bytes from the kernel, as lowercase hex.
pub fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(SafeFsError::Random)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn mode_bits(bits: u32) -> Mode {
    Mode::from_bits_truncate(bits as nix::libc::mode_t)
}

/// What an entry is, as [`Dir::entries`] and [`Dir::entry_kind`] say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Symlink,
    /// A device, FIFO or socket.
    Other,
}

fn entry_kind(st: &FileStat) -> EntryKind {
    match kind(st) {
        SFlag::S_IFDIR => EntryKind::Dir,
        SFlag::S_IFREG => EntryKind::File,
        SFlag::S_IFLNK => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// A real directory, the user's or root's, that no other user can write
/// in unless it is sticky.
fn check_dir(st: &FileStat, path: &Path) -> Result<()> {
    if kind(st) != SFlag::S_IFDIR {
        return Err(SafeFsError::NotDir {
            path: path.to_path_buf(),
        });
    }
    let me = geteuid().as_raw();
    if st.st_uid != me && st.st_uid != 0 {
        return Err(SafeFsError::ForeignOwner {
            path: path.to_path_buf(),
            owner: st.st_uid,
            me,
        });
    }
    let mode = Mode::from_bits_truncate(st.st_mode);
    let others_write = mode.contains(Mode::S_IWOTH)
        || (mode.contains(Mode::S_IWGRP) && !own_private_group(st.st_gid));
    if others_write && !mode.contains(Mode::S_ISVTX) {
        return Err(SafeFsError::OthersWrite {
            path: path.to_path_buf(),
            mode: format!("{:04o}", mode.bits()),
        });
    }
    Ok(())
}

/// Is `gid` the user's private group (named after the user, no other
/// member)? Its write bit lets nobody else in: the umask 002 of
/// distributions with user private groups makes directories like that.
fn own_private_group(gid: u32) -> bool {
    let (Ok(Some(user)), Ok(Some(group))) = (
        User::from_uid(geteuid()),
        Group::from_gid(Gid::from_raw(gid)),
    ) else {
        return false;
    };
    user.gid == group.gid && group.name == user.name && group.mem.iter().all(|m| *m == user.name)
}

fn is_link(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| kind(&st) == SFlag::S_IFLNK)
}

/// Open the directory `name` in `dir`, never through a link.
fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr, shown: &Path) -> Result<OwnedFd> {
    match openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::ELOOP | Errno::ENOTDIR) if is_link(dir, name) => Err(SafeFsError::Link {
            path: shown.to_path_buf(),
        }),
        Err(Errno::ENOTDIR) => Err(SafeFsError::NotDir {
            path: shown.to_path_buf(),
        }),
        Err(e) => Err(SafeFsError::io("open the directory", shown, e)),
    }
}

fn make_dir_all(path: &Path, mode: u32) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(|e| SafeFsError::io("create the directory", path, e))
}

fn mkdir_if_missing(dir: BorrowedFd<'_>, name: &OsStr, mode: u32, shown: &Path) -> Result<()> {
    if name.as_bytes() == b".." {
        return Ok(());
    }
    match mkdirat(dir, name, mode_bits(mode)) {
        // What exists is checked when it is opened.
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(SafeFsError::io("create the directory", shown, e)),
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    use super::*;

    const VICTIM: &str = "the victim's own contents\n";

    fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("reports");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, VICTIM).unwrap();
        (tmp, dir, victim)
    }

    #[test]
    fn naive_create_of_a_planted_temp_name_overwrites_the_victim() {
        // The attack the module exists for, as `report::write_file` did it.
        let (_tmp, dir, victim) = world();
        symlink(&victim, dir.join("summary.md.tmp")).unwrap();
        std::fs::File::create(dir.join("summary.md.tmp"))
            .unwrap()
            .write_all(b"report")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "report");
    }

    #[test]
    fn a_link_at_the_final_name_is_replaced_not_followed() {
        let (_tmp, dir, victim) = world();
        symlink(&victim, dir.join("summary.md")).unwrap();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        d.write_file("summary.md", b"report", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
        let md = std::fs::symlink_metadata(dir.join("summary.md")).unwrap();
        assert!(md.is_file());
        assert_eq!(std::fs::read(dir.join("summary.md")).unwrap(), b"report");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    }

    #[test]
    fn a_planted_link_read_as_the_summary_is_refused_not_followed() {
        // Followed, the read hands the victim's contents to whoever posts it.
        let (_tmp, dir, victim) = world();
        symlink(&victim, dir.join("summary.md")).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("summary.md")).unwrap(),
            VICTIM
        );
        let d = Dir::open(&dir, Parents::Walk).unwrap();
        let e = d.read_file("summary.md", 1024).unwrap_err();
        assert!(matches!(e, SafeFsError::LinkedFile { .. }), "{e}");
        nix::unistd::mkfifo(&dir.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let e = d.read_file("fifo", 1024).unwrap_err();
        assert!(matches!(e, SafeFsError::NotRegular { .. }), "{e}");
    }

    #[test]
    fn a_read_is_bounded() {
        let (_tmp, dir, _victim) = world();
        std::fs::write(dir.join("summary.md"), "12345").unwrap();
        let d = Dir::open(&dir, Parents::Walk).unwrap();
        assert_eq!(d.read_file("summary.md", 5).unwrap(), b"12345");
        let e = d.read_file("summary.md", 4).unwrap_err();
        assert!(matches!(e, SafeFsError::TooLarge { max: 4, .. }), "{e}");
    }

    #[test]
    fn a_hard_link_at_the_final_name_keeps_the_victims_contents() {
        let (_tmp, dir, victim) = world();
        std::fs::hard_link(&victim, dir.join("vetto.sarif")).unwrap();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        d.write_file("vetto.sarif", b"{}", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
        assert_eq!(std::fs::metadata(&victim).unwrap().nlink(), 1);
    }

    #[test]
    fn an_existing_temporary_name_is_never_opened() {
        let (_tmp, dir, victim) = world();
        symlink(&victim, dir.join("planted")).unwrap();
        std::fs::hard_link(&victim, dir.join("hard")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        for name in ["planted", "hard", "fifo"] {
            let e = d.create_new(name, 0o600).unwrap_err();
            assert!(e.is_exists(), "{name}: {e}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
    }

    #[test]
    fn temporary_names_are_fresh_and_random() {
        let (_tmp, dir, _victim) = world();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        let (_, a) = d.create_unique(".x.", ".tmp", 0o600).unwrap();
        let (_, b) = d.create_unique(".x.", ".tmp", 0o600).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), ".x.".len() + 32 + ".tmp".len());
    }

    #[test]
    fn a_directory_that_is_a_link_is_refused() {
        let (tmp, dir, _victim) = world();
        let link = tmp.path().join("link");
        symlink(&dir, &link).unwrap();
        for parents in [Parents::Walk, Parents::AsNamed] {
            let e = Dir::open(&link, parents).unwrap_err();
            assert!(matches!(e, SafeFsError::Link { .. }), "{e}");
            assert!(e.to_string().contains("symbolic link"), "{e}");
            let e = Dir::create(&link, parents, 0o755).unwrap_err();
            assert!(matches!(e, SafeFsError::Link { .. }), "{e}");
        }
    }

    #[test]
    fn a_link_anywhere_in_a_walked_relative_path_is_refused() {
        let (tmp, dir, _victim) = world();
        symlink(&dir, tmp.path().join("link")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        // Walked from the world, as `Parents::Walk` walks from the cwd.
        let base = File::open(tmp.path()).unwrap();
        let walk = |rel: &str| Dir::walk(base.as_fd(), Path::new(rel), Some(0o755)).map(drop);
        let e = walk("link/sub").unwrap_err();
        assert!(
            matches!(e, SafeFsError::Link { ref path } if path == Path::new("link")),
            "{e}"
        );
        let e = walk("reports/sub/../../link").unwrap_err();
        assert!(matches!(e, SafeFsError::Link { .. }), "{e}");
        walk("reports/new/deeper").unwrap();
        assert!(dir.join("new/deeper").is_dir());
        // As named, the parent may be the user's own link; followed, the
        // directory itself too.
        Dir::open(&tmp.path().join("link/sub"), Parents::AsNamed).unwrap();
        Dir::open(&tmp.path().join("link"), Parents::Followed).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let (_tmp, dir, _victim) = world();
        // Only root can give a directory away; elsewhere there is nothing to test.
        if nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(65534)), None).is_err() {
            eprintln!("SKIP a_directory_of_another_user_is_refused: cannot chown (not root)");
            return;
        }
        let e = Dir::open(&dir, Parents::AsNamed).unwrap_err();
        assert!(
            matches!(e, SafeFsError::ForeignOwner { owner: 65534, .. }),
            "{e}"
        );
    }

    #[test]
    fn a_directory_others_can_write_in_is_refused_unless_sticky() {
        let (_tmp, dir, _victim) = world();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Dir::open(&dir, Parents::AsNamed).unwrap_err();
        assert!(matches!(e, SafeFsError::OthersWrite { .. }), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Dir::open(&dir, Parents::AsNamed).unwrap();
    }

    #[test]
    fn a_made_directory_must_be_new() {
        let (_tmp, dir, victim) = world();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        let made = d.create_dir_new("spares", 0o700).unwrap();
        made.create_new("f0", 0o600).unwrap();
        assert!(d.create_dir_new("spares", 0o700).unwrap_err().is_exists());
        symlink(victim.parent().unwrap(), dir.join("planted")).unwrap();
        assert!(d.create_dir_new("planted", 0o700).unwrap_err().is_exists());
        let private = create_private_dir(&dir.join("session"), Parents::Followed).unwrap();
        let mode = std::fs::metadata(private.path()).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(
            create_private_dir(&dir.join("session"), Parents::Followed)
                .unwrap_err()
                .is_exists()
        );
    }

    #[test]
    fn appending_refuses_links_fifos_and_second_names() {
        let (_tmp, dir, victim) = world();
        let link = dir.join("link");
        symlink(&victim, &link).unwrap();
        let e = append(&link, b"x").unwrap_err();
        assert!(matches!(e, SafeFsError::LinkedFile { .. }), "{e}");
        let hard = dir.join("hard");
        std::fs::hard_link(&victim, &hard).unwrap();
        let e = append(&hard, b"x").unwrap_err();
        assert!(matches!(e, SafeFsError::HardLinked { links: 2, .. }), "{e}");
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let e = append(&fifo, b"x").unwrap_err();
        assert!(matches!(e, SafeFsError::NotRegular { .. }), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
        let own = dir.join("summary");
        append(&own, b"a").unwrap();
        append(&own, b"b").unwrap();
        assert_eq!(std::fs::read(&own).unwrap(), b"ab");
    }

    #[test]
    fn replacing_with_a_new_file_keeps_writing_under_the_name() {
        let (_tmp, dir, victim) = world();
        symlink(&victim, dir.join("session.jsonl")).unwrap();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        let mut f = d.replace_with_new("session.jsonl", 0o644).unwrap();
        f.write_all(b"line 1\n").unwrap();
        f.write_all(b"line 2\n").unwrap();
        assert_eq!(
            std::fs::read(dir.join("session.jsonl")).unwrap(),
            b"line 1\nline 2\n"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
        let src = dir.join("session.jsonl");
        d.copy_in("copy.jsonl", &src, 0o600).unwrap();
        assert_eq!(
            std::fs::read(dir.join("copy.jsonl")).unwrap(),
            b"line 1\nline 2\n"
        );
        let e = d
            .copy_in("copy2.jsonl", &dir.join("missing"), 0o600)
            .unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn names_with_slashes_are_refused() {
        let (_tmp, dir, _victim) = world();
        let d = Dir::open(&dir, Parents::AsNamed).unwrap();
        for name in ["", ".", "..", "a/b", "../x"] {
            assert!(matches!(
                d.write_file(name, b"", 0o644),
                Err(SafeFsError::BadName { .. })
            ));
        }
    }
}
