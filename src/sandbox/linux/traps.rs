//! FULL tier: masked secrets are traps that name whoever touches them.
//!
//! Each masked path is covered by its own tiny FUSE filesystem — an empty,
//! read-only file or directory — which vetto serves from outside the
//! sandbox. Not a byte of the secret is in the sandbox's view; every open
//! of the file, every listing of the directory and every name looked up
//! beneath it reaches vetto as a request that carries the caller's pid.
//! vetto describes that process while it is still blocked in its syscall
//! (so the pid cannot have been reused), records it, and only then
//! answers: empty, or no such file.
//!
//! The relay mounts the traps right after entering the namespaces, while
//! it is still in the host's PID namespace: the kernel reports the
//! callers' pids in the mounter's PID namespace, so vetto reads them as
//! its own. The `/dev/fuse` descriptors go to vetto before the sandbox's
//! PID 1 exists and the relay keeps no copy: if vetto is gone, touching a
//! trap fails (ENOTCONN) instead of hanging, and still yields nothing.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, OpenFlags, ReplyAttr,
    ReplyDirectory, ReplyEntry, ReplyOpen, Request,
};
use nix::fcntl::OFlag;
use nix::mount::MsFlags;
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

use crate::plan::mounts::NamespacePlan;
use crate::sandbox::{SecretAccess, SecretFeed, SecretOp};

/// The tag of the trap message on the stage's socket.
const TAG: u8 = b'T';
/// At most this many traps (two threads each in vetto); masks beyond it
/// get a plain empty stand-in, still masked but not observed.
pub const MAX_TRAPS: usize = 64;
/// Upper bound on the trap list the relay sends.
const MAX_LIST_BYTES: u32 = 1 << 20;
/// Accesses queued for the supervisor before a trap waits for it: the job
/// is slowed, never the record lost.
const QUEUE: usize = 4096;
/// How long the kernel may cache a trap's attributes: they never change.
const TTL: Duration = Duration::from_secs(3600);

/// What the relay tells vetto along with the descriptors.
#[derive(Debug, Default, Serialize, Deserialize)]
struct TrapList {
    /// For each descriptor, in order: the index of its mask in the plan's
    /// mounts.
    mounted: Vec<usize>,
    /// Masks that are not traps (reads of them go unseen), and why.
    problems: Vec<String>,
}

/// In the relay, after `namespaces::prepare_scratch`: mount a trap for
/// every mask at `mount_point(index)`, hand the descriptors to vetto and
/// close ours. Returns the indices of the masks that are traps; the others
/// get the plain stand-in. A trap that cannot be mounted is not a setup
/// failure — the mask still holds — but vetto is told, and says so.
pub(super) fn mount_and_send(
    ns: &NamespacePlan,
    mount_point: impl Fn(usize) -> PathBuf,
    sock: BorrowedFd<'_>,
) -> Result<Vec<usize>, String> {
    let mut list = TrapList::default();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut beyond: Vec<&Path> = Vec::new();
    for (index, path, is_dir) in ns.masks() {
        if fds.len() == MAX_TRAPS {
            beyond.push(path);
            continue;
        }
        match mount_trap(&mount_point(index), is_dir, uid, gid) {
            Ok(fd) => {
                fds.push(fd);
                list.mounted.push(index);
            }
            Err(e) => list.problems.push(format!("{}: {e}", path.display())),
        }
    }
    if let Some(first) = beyond.first() {
        list.problems.push(format!(
            "{} and {} more: only the first {MAX_TRAPS} masked paths are traps",
            first.display(),
            beyond.len() - 1
        ));
    }
    let payload = serde_json::to_vec(&list).map_err(|e| format!("encode the trap list: {e}"))?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|n| *n <= MAX_LIST_BYTES)
        .ok_or("too many masked paths")?;
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let cmsgs: Vec<ControlMessage<'_>> = if raw.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(&raw)]
    };
    // The tag carries the descriptors; the length and the list follow as
    // plain stream bytes (a blocking socket: written in full).
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[std::io::IoSlice::new(&[TAG])],
        &cmsgs,
        MsgFlags::empty(),
        None,
    )
    .map_err(|e| format!("cannot hand the secret traps to vetto: {e}"))?;
    let mut stream = std::fs::File::from(
        sock.try_clone_to_owned()
            .map_err(|e| format!("dup the stage socket: {e}"))?,
    );
    stream
        .write_all(&len.to_le_bytes())
        .and_then(|()| stream.write_all(&payload))
        .map_err(|e| format!("cannot hand the secret traps to vetto: {e}"))?;
    // Our copies close here, before PID 1 is forked: vetto alone serves
    // the traps.
    drop(fds);
    Ok(list.mounted)
}

/// Mount one trap: a FUSE filesystem whose root is an empty file or
/// directory, read-only, owned by the caller (its uid maps to itself).
fn mount_trap(
    at: &Path,
    is_dir: bool,
    uid: nix::unistd::Uid,
    gid: nix::unistd::Gid,
) -> Result<OwnedFd, String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let fd = nix::fcntl::open("/dev/fuse", OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| format!("open /dev/fuse: {e}"))?;
    if let Some(parent) = at.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    }
    let made = if is_dir {
        std::fs::DirBuilder::new().mode(0o500).create(at)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(at)
            .map(drop)
    };
    made.map_err(|e| format!("create {}: {e}", at.display()))?;
    // `rootmode` is the root's file type in octal (S_IFDIR or S_IFREG);
    // `default_permissions` lets the kernel check the mode bits, so the
    // traps never decide who may do what, they only watch.
    let options = format!(
        "fd={},rootmode={},user_id={uid},group_id={gid},default_permissions",
        fd.as_raw_fd(),
        if is_dir { "40000" } else { "100000" },
    );
    nix::mount::mount(
        Some("vetto-trap"),
        at,
        Some("fuse"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
        Some(options.as_str()),
    )
    .map_err(|e| format!("mount fuse: {e}"))?;
    Ok(fd)
}

/// In vetto: receive what [`mount_and_send`] sent and start serving every
/// trap at once (the sandbox's setup may already be touching them).
/// `None` if the stage ended before sending (its failure is reported on
/// the status pipe).
pub(super) fn receive_and_serve(sock: &UnixStream, ns: &NamespacePlan) -> Option<SecretFeed> {
    let (tag, fds) = super::receive_fds::<MAX_TRAPS>(sock)?;
    if tag != TAG {
        return None;
    }
    let mut len = [0u8; 4];
    let mut reader = sock;
    reader.read_exact(&mut len).ok()?;
    let len = u32::from_le_bytes(len).min(MAX_LIST_BYTES);
    let mut payload = Vec::new();
    reader.take(u64::from(len)).read_to_end(&mut payload).ok()?;
    let list: TrapList = serde_json::from_slice(&payload).unwrap_or_else(|e| TrapList {
        mounted: Vec::new(),
        problems: vec![format!("unreadable trap list: {e}")],
    });

    super::sys::large_allocations_from_mmap();
    let (tx, accesses) = std::sync::mpsc::sync_channel(QUEUE);
    let mut problems = list.problems;
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    for (fd, index) in fds.into_iter().zip(list.mounted) {
        let Some((_, path, is_dir)) = ns.masks().find(|(i, _, _)| *i == index) else {
            // Not a mask of this plan: dropping the descriptor makes the
            // trap fail closed.
            continue;
        };
        let trap = Trap {
            mask: path.to_path_buf(),
            is_dir,
            uid,
            gid,
            tx: tx.clone(),
        };
        let served = std::thread::Builder::new()
            .name(format!("vetto-trap-{index}"))
            .spawn(move || serve(trap, fd));
        if let Err(e) = served {
            // The descriptor went down with the closure: the trap answers
            // ENOTCONN, still nothing of the secret.
            problems.push(format!("{}: cannot start serving it: {e}", path.display()));
        }
    }
    Some(SecretFeed { accesses, problems })
}

/// Serve one trap until the sandbox's mounts of it are gone.
fn serve(trap: Trap, fd: OwnedFd) {
    // `All`: the kernel already admits only the sandbox's uid (no
    // allow_other), and whatever it admits must be recorded, not refused
    // unseen.
    let session =
        fuser::Session::from_fd(trap, fd, fuser::SessionACL::All, fuser::Config::default());
    if let Ok(session) = session {
        // Ends with ENODEV when the last mount goes with the sandbox.
        let _ = session.run();
    }
}

/// One masked path as a filesystem of a single empty node.
struct Trap {
    mask: PathBuf,
    is_dir: bool,
    uid: u32,
    gid: u32,
    tx: SyncSender<SecretAccess>,
}

impl Trap {
    fn root_attr(&self) -> FileAttr {
        let (kind, perm, nlink) = if self.is_dir {
            (FileType::Directory, 0o555, 2)
        } else {
            (FileType::RegularFile, 0o444, 1)
        };
        FileAttr {
            ino: INodeNo::ROOT,
            size: 0,
            blocks: 0,
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Name the process and hand the access to the supervisor, before the
    /// caller gets its answer: the caller is blocked until then, so its pid
    /// still names it.
    fn record(&self, req: &Request, path: PathBuf, op: SecretOp) {
        let time = SystemTime::now();
        let process = i32::try_from(req.pid())
            .ok()
            .filter(|pid| *pid > 0)
            .map(super::process::describe)
            .unwrap_or_default();
        let access = SecretAccess {
            path,
            op,
            process,
            time,
        };
        match self.tx.try_send(access) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(access)) => {
                // The supervisor sleeps between ticks: wake it (SIGIO is
                // what it waits for), then wait for room. The job is held
                // up for as long; the record is never dropped.
                let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::SIGIO);
                let _ = self.tx.send(access);
            }
        }
    }
}

impl Filesystem for Trap {
    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == INodeNo::ROOT && self.is_dir {
            // Opening or stat-ing anything beneath a masked directory.
            self.record(req, self.mask.join(name), SecretOp::Lookup);
        }
        // Not cached (no negative entry): every later lookup is seen too.
        reply.error(Errno::ENOENT);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        // stat of the mask itself is not a read of the secret: unrecorded,
        // and cached by the kernel.
        if ino == INodeNo::ROOT {
            reply.attr(&TTL, &self.root_attr());
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino == INodeNo::ROOT && !self.is_dir {
            self.record(req, self.mask.clone(), SecretOp::Open);
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    #[allow(clippy::too_many_arguments)] // the trait's signature
    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: fuser::ReplyData,
    ) {
        reply.data(&[]);
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino == INodeNo::ROOT && self.is_dir {
            self.record(req, self.mask.clone(), SecretOp::List);
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // Each entry's offset is where the next listing resumes.
        for (next, name) in [(1, "."), (2, "..")] {
            if next > offset && reply.add(INodeNo::ROOT, next, FileType::Directory, name) {
                break;
            }
        }
        reply.ok();
    }
}
