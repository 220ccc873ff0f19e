//! Files vetto writes outside the sandbox, on Windows: the same interface
//! as the Unix `safe_fs.rs`, and weaker, said here plainly. Windows has no
//! `openat`, so every check is made on a path and the operation after it
//! names the path again: a process of the same user that swaps an entry
//! between the two can win the race. What holds: a final name that exists
//! is never opened for writing (`create_new`, then a rename that replaces
//! the entry, a reparse point included, without following it); a
//! symbolic link (reparse point) is refused wherever the Unix version
//! refuses one, by `symlink_metadata`; reads open reparse points
//! themselves, not their targets. Not checked: the owner and the ACL of a
//! directory (the Unix version's owner and group/other-write checks), and
//! hard links of a file appended to (the standard library does not count
//! them here).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::windows::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// `CreateFileW` opens a reparse point itself rather than its target.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;

use super::safe_fs_common::Result;
pub use super::safe_fs_common::{Parents, SafeFsError};

/// A directory checked to be one (and not a link) when it was opened.
#[derive(Debug)]
pub struct Dir {
    path: PathBuf,
}

impl Dir {
    pub fn open(path: &Path, parents: Parents) -> Result<Dir> {
        Dir::open_or_make(path, parents, false)
    }

    /// The same, making what is missing first (Windows has no mode bits:
    /// `mode` is not used).
    pub fn create(path: &Path, parents: Parents, _mode: u32) -> Result<Dir> {
        Dir::open_or_make(path, parents, true)
    }

    fn open_or_make(path: &Path, parents: Parents, make: bool) -> Result<Dir> {
        let last_is_name = matches!(path.components().next_back(), Some(Component::Normal(_)));
        match parents {
            Parents::Walk if path.is_relative() && last_is_name => {
                let mut at = PathBuf::new();
                for c in path.components() {
                    at.push(c);
                    if matches!(c, Component::Normal(_)) {
                        checked_dir(&at, make)?;
                    }
                }
                Ok(Dir { path: at })
            }
            Parents::Walk | Parents::AsNamed => {
                if make {
                    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                        std::fs::create_dir_all(parent)
                            .map_err(|e| SafeFsError::io("create the directory", parent, e))?;
                    }
                }
                checked_dir(path, make)?;
                Ok(Dir {
                    path: path.to_path_buf(),
                })
            }
            Parents::Followed => {
                if make {
                    std::fs::create_dir_all(path)
                        .map_err(|e| SafeFsError::io("create the directory", path, e))?;
                }
                let md = std::fs::metadata(path)
                    .map_err(|e| SafeFsError::io("open the directory", path, e))?;
                if !md.is_dir() {
                    return Err(SafeFsError::NotDir {
                        path: path.to_path_buf(),
                    });
                }
                Ok(Dir {
                    path: path.to_path_buf(),
                })
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A new file under `name`: fails if anything exists there.
    pub fn create_new(&self, name: &str, _mode: u32) -> Result<File> {
        self.check_name(name)?;
        let path = self.join(name);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(&path)
            .map_err(|e| SafeFsError::io("create", &path, e))
    }

    pub fn create_unique(&self, prefix: &str, suffix: &str, mode: u32) -> Result<(File, String)> {
        let mut last = None;
        for _ in 0..4 {
            let name = format!("{prefix}{}{suffix}", random_hex(16)?);
            match self.create_new(&name, mode) {
                Ok(f) => return Ok((f, name)),
                Err(e) if e.is_exists() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            SafeFsError::io(
                "create",
                &self.path,
                io::Error::from(io::ErrorKind::AlreadyExists),
            )
        }))
    }

    pub fn write_with(
        &self,
        name: &str,
        mode: u32,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> Result<()> {
        self.check_name(name)?;
        let (mut file, tmp) = self.create_unique(&format!(".{name}."), ".tmp", mode)?;
        let result = fill(&mut file)
            .and_then(|()| file.sync_data())
            .map_err(|e| SafeFsError::io("write", &self.join(name), e));
        drop(file);
        let result = result.and_then(|()| self.rename_onto(&tmp, name));
        if result.is_err() {
            let _ = std::fs::remove_file(self.join(&tmp));
        }
        result
    }

    pub fn remove_file(&self, name: &str) -> Result<()> {
        self.check_name(name)?;
        match std::fs::remove_file(self.join(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(SafeFsError::io("remove", &self.join(name), e)),
        }
    }

    pub fn write_file(&self, name: &str, contents: &[u8], mode: u32) -> Result<()> {
        self.write_with(name, mode, |f| f.write_all(contents))
    }

    /// As on Unix, for a cache whose reader discards a torn file; on
    /// Windows (where nothing is remembered) written as any file.
    pub fn write_cache(&self, name: &str, contents: &[u8], mode: u32) -> Result<()> {
        self.write_file(name, contents, mode)
    }

    pub fn replace_with_new(&self, name: &str, mode: u32) -> Result<File> {
        self.check_name(name)?;
        let (file, tmp) = self.create_unique(&format!(".{name}."), ".tmp", mode)?;
        if let Err(e) = self.rename_onto(&tmp, name) {
            drop(file);
            let _ = std::fs::remove_file(self.join(&tmp));
            return Err(e);
        }
        Ok(file)
    }

    pub fn copy_in(&self, name: &str, from: &Path, mode: u32) -> Result<()> {
        let mut src = open_regular(from)?;
        self.write_with(name, mode, |f| io::copy(&mut src, f).map(drop))
    }

    pub fn read_file(&self, name: &str, max: u64) -> Result<Vec<u8>> {
        self.check_name(name)?;
        let path = self.join(name);
        let file = open_regular(&path)?;
        let mut bytes = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| SafeFsError::io("read", &path, e))?;
        if bytes.len() as u64 > max {
            return Err(SafeFsError::TooLarge { path, max });
        }
        Ok(bytes)
    }

    pub fn create_dir_new(&self, name: &str, _mode: u32) -> Result<Dir> {
        self.check_name(name)?;
        let path = self.join(name);
        std::fs::create_dir(&path)
            .map_err(|e| SafeFsError::io("create the directory", &path, e))?;
        checked_dir(&path, false)?;
        Ok(Dir { path })
    }

    /// A new link `name` to `target`, which must not exist.
    pub fn link_new(&self, name: &str, target: &Path) -> Result<()> {
        self.check_name(name)?;
        let path = self.join(name);
        super::os::symlink(target, &path).map_err(|e| SafeFsError::io("create the link", &path, e))
    }

    fn rename_onto(&self, tmp: &str, name: &str) -> Result<()> {
        std::fs::rename(self.join(tmp), self.join(name))
            .map_err(|e| SafeFsError::io("replace", &self.join(name), e))
    }

    fn check_name(&self, name: &str) -> Result<()> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', ':']) {
            return Err(SafeFsError::BadName {
                dir: self.path.clone(),
                name: name.to_owned(),
            });
        }
        Ok(())
    }
}

/// A new directory only the user can use (on Windows: a new directory; its
/// ACL is inherited from the parent).
pub fn create_private_dir(path: &Path, parents: Parents) -> Result<Dir> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(OsStr::to_str))
    else {
        return Err(SafeFsError::io(
            "create the directory",
            path,
            io::Error::from(io::ErrorKind::InvalidInput),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    Dir::open(parent, parents)?.create_dir_new(name, 0o700)
}

/// Opens a regular file for reading, never through a link.
pub fn open_regular(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
        .map_err(|e| SafeFsError::io("read", path, e))?;
    let md = file
        .metadata()
        .map_err(|e| SafeFsError::io("read", path, e))?;
    if md.file_type().is_symlink() {
        return Err(SafeFsError::LinkedFile {
            path: path.to_path_buf(),
        });
    }
    if !md.is_file() {
        return Err(SafeFsError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Appends to a regular file that is not a link (made if missing).
pub fn append(path: &Path, bytes: &[u8]) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_symlink() => {
            return Err(SafeFsError::LinkedFile {
                path: path.to_path_buf(),
            });
        }
        Ok(md) if !md.is_file() => {
            return Err(SafeFsError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        _ => {}
    }
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
        .map_err(|e| SafeFsError::io("open", path, e))?;
    let md = file
        .metadata()
        .map_err(|e| SafeFsError::io("inspect", path, e))?;
    if !md.is_file() {
        return Err(SafeFsError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    file.write_all(bytes)
        .map_err(|e| SafeFsError::io("append to", path, e))
}

pub fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(SafeFsError::Random)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// `path` is a directory and not a link; made first when `make` says so.
fn checked_dir(path: &Path, make: bool) -> Result<()> {
    if make {
        match std::fs::create_dir(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(SafeFsError::io("create the directory", path, e)),
        }
    }
    let md = std::fs::symlink_metadata(path)
        .map_err(|e| SafeFsError::io("open the directory", path, e))?;
    if md.file_type().is_symlink() {
        return Err(SafeFsError::Link {
            path: path.to_path_buf(),
        });
    }
    if !md.is_dir() {
        return Err(SafeFsError::NotDir {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}
