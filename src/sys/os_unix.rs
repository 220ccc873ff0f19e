//! The Unix vocabulary the rest of vetto speaks (file identity, change
//! times, modes, process groups, descriptors, errno, signals), in one
//! place so that no module outside `sandbox/` names `std::os::unix`, `nix`
//! or `libc` for it. Windows has its own file (`windows/os.rs`) with the
//! same names and what that platform can honestly answer.

use std::ffi::{OsStr, OsString};
use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};

pub use super::lstat::{Lstat, lstat_of};

pub use nix::Result;
pub use nix::errno::Errno;
pub use nix::sys::signal::Signal;
pub use nix::sys::wait::WaitStatus;
pub use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
pub use std::os::unix::net::UnixListener;

/// A path component's bytes, exactly as the kernel has them.
pub fn os_bytes(s: &OsStr) -> &[u8] {
    s.as_bytes()
}

/// The name those bytes spell (any bytes are a name on Unix).
pub fn os_string_from_bytes(bytes: Vec<u8>) -> Option<OsString> {
    Some(OsString::from_vec(bytes))
}

/// The name those bytes spell, borrowed.
pub fn os_str_from_bytes(bytes: &[u8]) -> Option<&OsStr> {
    Some(OsStr::from_bytes(bytes))
}

/// (device, inode): the file's identity.
pub fn file_id(md: &Metadata) -> Option<(u64, u64)> {
    Some((md.dev(), md.ino()))
}

/// The inode change time (seconds, nanoseconds).
pub fn change_time(md: &Metadata) -> Option<(i64, i64)> {
    Some((md.ctime(), md.ctime_nsec()))
}

/// The modification time (seconds, nanoseconds).
pub fn modify_time(md: &Metadata) -> (i64, i64) {
    (md.mtime(), md.mtime_nsec())
}

/// The mode bits (type and permissions).
pub fn mode(md: &Metadata) -> u32 {
    md.mode()
}

/// The owner's uid.
pub fn owner_uid(md: &Metadata) -> Option<u32> {
    Some(md.uid())
}

/// Hard links to the file.
pub fn nlink(md: &Metadata) -> u64 {
    md.nlink()
}

/// A regular file someone may execute (any x bit).
pub fn is_executable(md: &Metadata) -> bool {
    md.is_file() && md.permissions().mode() & 0o111 != 0
}

/// A setuid-root regular file.
pub fn is_setuid_root(md: &Metadata) -> bool {
    md.is_file() && md.mode() & 0o4000 != 0 && md.uid() == 0
}

pub fn is_socket(ft: &FileType) -> bool {
    ft.is_socket()
}

/// The real uid of vetto.
pub fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The effective uid of vetto.
pub fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// vetto runs as root (effective uid 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The caller may write to `p` (access(2) W_OK).
pub fn can_write(p: &Path) -> bool {
    nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Opens `p` for reading without following a final symlink and without
/// blocking on a FIFO.
pub fn open_nofollow_nonblock(p: &Path) -> io::Result<File> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(p)
}

/// Sets the permission bits of `p`.
pub fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Starts `cmd` as the leader of a process group of its own.
pub fn spawn_own_group(cmd: &mut Command) -> io::Result<Child> {
    cmd.process_group(0).spawn()
}

/// Kills the process group `child` leads (everything it started).
pub fn kill_group(child: &mut Child) {
    let Ok(pid) = i32::try_from(child.id()) else {
        return;
    };
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// CPU time (user + system) of this process so far.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    use std::time::Duration;
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let t = |tv: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(tv.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(tv.tv_usec()).unwrap_or(0))
    };
    Some(t(u.user_time()) + t(u.system_time()))
}

/// `lstat` of many paths that share parents, each through its parent
/// directory, opened by its path once (the last one is kept): the kernel
/// looks up one component instead of the whole path, which on a project
/// of a thousand directories was most of each `lstat`. The same answer as
/// `lstat(path)`: the parent is opened by path (links in it followed, as
/// `lstat` follows them) and the last component is not followed. Kept for
/// one walk only.
#[derive(Debug, Default)]
pub struct LstatAt {
    parent: Option<(std::path::PathBuf, OwnedFd)>,
}

impl LstatAt {
    pub fn new() -> Self {
        LstatAt { parent: None }
    }

    #[allow(
        clippy::unnecessary_cast,
        reason = "`stat`'s field types differ between Unix targets"
    )]
    pub fn lstat(&mut self, path: &Path) -> io::Result<Lstat> {
        use nix::fcntl::{OFlag, open};
        use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return std::fs::symlink_metadata(path).map(|m| lstat_of(&m));
        };
        // Compared as bytes: a `Path` comparison parses both into components.
        if self
            .parent
            .as_ref()
            .is_none_or(|(p, _)| p.as_os_str() != parent.as_os_str())
        {
            self.parent = None;
            #[cfg(target_os = "linux")]
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            #[cfg(not(target_os = "linux"))]
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            match open(parent, flags, Mode::empty()) {
                Ok(fd) => self.parent = Some((parent.to_path_buf(), fd)),
                Err(_) => return std::fs::symlink_metadata(path).map(|m| lstat_of(&m)),
            }
        }
        let Some((_, fd)) = &self.parent else {
            return std::fs::symlink_metadata(path).map(|m| lstat_of(&m));
        };
        let st: FileStat =
            fstatat(fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).map_err(io::Error::from)?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        Ok(Lstat {
            is_dir: kind == SFlag::S_IFDIR,
            id: Some((st.st_dev as u64, st.st_ino as u64)),
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: Some((st.st_ctime as i64, st.st_ctime_nsec as i64)),
        })
    }
}
