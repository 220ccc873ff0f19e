//! Windows answers to the Unix vocabulary of `os_unix.rs`: the same names,
//! and only what Windows can honestly say through the standard library.
//! Where it has no answer (inode identity, change times, mode bits, uids,
//! process groups, errno values), the function says "unknown" (`None`) or
//! the type exists only so that Linux-only code paths type-check; those
//! paths are never reached here, because no sandbox backend on Windows
//! hands out what they take (every such entry refuses first).

use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::fs::{File, FileType, Metadata};
use std::io;
use std::path::Path;
use std::process::{Child, Command};

pub use super::lstat::{Lstat, lstat_of};

pub use std::os::windows::io::{BorrowedSocket as BorrowedFd, OwnedSocket as OwnedFd};

/// Borrowing the OS handle of a socket, as `AsFd` does on Unix.
pub trait AsFd {
    fn as_fd(&self) -> BorrowedFd<'_>;
}

impl<T: std::os::windows::io::AsSocket> AsFd for T {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.as_socket()
    }
}

/// The POSIX error numbers vetto's kernel probes tell apart. Windows has
/// none of those kernel features, so every probe answers `ENOSYS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Errno {
    EACCES,
    EBUSY,
    EINVAL,
    ENODEV,
    ENOENT,
    ENOSPC,
    ENOSYS,
    ENXIO,
    EOPNOTSUPP,
    EPERM,
    EUSERS,
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            Errno::EACCES => "EACCES: Permission denied",
            Errno::EBUSY => "EBUSY: Device or resource busy",
            Errno::EINVAL => "EINVAL: Invalid argument",
            Errno::ENODEV => "ENODEV: No such device",
            Errno::ENOENT => "ENOENT: No such file or directory",
            Errno::ENOSPC => "ENOSPC: No space left on device",
            Errno::ENOSYS => "ENOSYS: Function not implemented",
            Errno::ENXIO => "ENXIO: No such device or address",
            Errno::EOPNOTSUPP => "EOPNOTSUPP: Operation not supported",
            Errno::EPERM => "EPERM: Operation not permitted",
            Errno::EUSERS => "EUSERS: Too many users",
        };
        f.write_str(text)
    }
}

impl std::error::Error for Errno {}

pub type Result<T> = std::result::Result<T, Errno>;

/// The signals vetto forwards on Unix. Windows delivers none of them to a
/// console program (Ctrl-C arrives as a console event), so none is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Signal {
    SIGHUP = 1,
    SIGINT = 2,
    SIGQUIT = 3,
    SIGKILL = 9,
    SIGUSR1 = 10,
    SIGUSR2 = 12,
    SIGTERM = 15,
    SIGWINCH = 28,
}

/// How a waited-for Unix process ended; never produced on Windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStatus {
    Exited(i32, i32),
    Signaled(i32, Signal, bool),
    StillAlive,
}

/// A Unix-domain listener: Windows' AF_UNIX is not in the standard
/// library, so binding one fails and no value of this type exists.
#[derive(Debug)]
pub struct UnixListener {
    never: Infallible,
}

impl UnixListener {
    pub fn bind(_path: &Path) -> io::Result<UnixListener> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "Unix-domain sockets are not available to vetto on Windows",
        ))
    }
    pub fn accept(&self) -> io::Result<(File, ())> {
        match self.never {}
    }
    pub fn set_nonblocking(&self, _on: bool) -> io::Result<()> {
        match self.never {}
    }
}

/// A path component's bytes in the standard library's encoding (WTF-8).
pub fn os_bytes(s: &OsStr) -> &[u8] {
    s.as_encoded_bytes()
}

/// The name those bytes spell, when they are UTF-8 (what vetto itself
/// writes); anything else is not taken as a name.
pub fn os_string_from_bytes(bytes: Vec<u8>) -> Option<OsString> {
    String::from_utf8(bytes).ok().map(OsString::from)
}

/// The name those bytes spell, borrowed, when they are UTF-8.
pub fn os_str_from_bytes(bytes: &[u8]) -> Option<&OsStr> {
    std::str::from_utf8(bytes).ok().map(OsStr::new)
}

/// The standard library gives no stable file identity on Windows.
pub fn file_id(_md: &Metadata) -> Option<(u64, u64)> {
    None
}

/// Windows keeps no inode change time that the standard library reads.
pub fn change_time(_md: &Metadata) -> Option<(i64, i64)> {
    None
}

/// The modification time (seconds, nanoseconds since the Unix epoch).
pub fn modify_time(md: &Metadata) -> (i64, i64) {
    match md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    {
        Some(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        ),
        None => (0, 0),
    }
}

/// No mode bits on Windows: 0.
pub fn mode(_md: &Metadata) -> u32 {
    0
}

/// No uids on Windows.
pub fn owner_uid(_md: &Metadata) -> Option<u32> {
    None
}

/// The standard library does not count hard links on Windows: 1.
pub fn nlink(_md: &Metadata) -> u64 {
    1
}

/// Windows runs any regular file it is asked to (by extension): a file is
/// executable when it is a regular file.
pub fn is_executable(md: &Metadata) -> bool {
    md.is_file()
}

/// No setuid on Windows.
pub fn is_setuid_root(_md: &Metadata) -> bool {
    false
}

/// The standard library does not tell AF_UNIX socket files apart here.
pub fn is_socket(_ft: &FileType) -> bool {
    false
}

/// No uids on Windows: 0 stands for "this user".
pub fn current_uid() -> u32 {
    0
}

/// No uids on Windows: 0 stands for "this user".
pub fn effective_uid() -> u32 {
    0
}

/// Administrator rights are not asked about: never "root".
pub fn is_root() -> bool {
    false
}

/// Writable unless the read-only attribute is set.
pub fn can_write(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| !m.permissions().readonly())
}

/// Opens `p` for reading without following a final symlink (reparse
/// point).
pub fn open_nofollow_nonblock(p: &Path) -> io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(p)
}

/// Windows has no permission bits: a mode without any write bit sets the
/// read-only attribute, any other clears it.
pub fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    let mut perms = std::fs::metadata(p)?.permissions();
    perms.set_readonly(mode & 0o222 == 0);
    std::fs::set_permissions(p, perms)
}

pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    if target.is_dir() {
        std::os::windows::fs::symlink_dir(target, link)
    } else {
        std::os::windows::fs::symlink_file(target, link)
    }
}

/// Starts `cmd` in a process group of its own (a new console group).
pub fn spawn_own_group(cmd: &mut Command) -> io::Result<Child> {
    use std::os::windows::process::CommandExt;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP).spawn()
}

/// Kills `child`. Windows has no group kill without a Job Object, so what
/// the child started itself may survive it.
pub fn kill_group(child: &mut Child) {
    let _ = child.kill();
}

/// Not read on Windows (it would take GetProcessTimes).
pub fn process_cpu_time() -> Option<std::time::Duration> {
    None
}

/// `lstat` of many paths; on Windows each by its whole path.
#[derive(Debug, Default)]
pub struct LstatAt;

impl LstatAt {
    pub fn new() -> Self {
        LstatAt
    }

    pub fn lstat(&mut self, path: &Path) -> io::Result<Lstat> {
        std::fs::symlink_metadata(path).map(|m| lstat_of(&m))
    }
}
