//! FULL tier: seeing reads of masked secrets.
//!
//! Every masked path is covered by its own empty stand-in (one inode each,
//! `namespaces::build_root`), so reading it gives nothing — and an inotify
//! watch on the stand-in tells vetto that something opened it. The watches
//! are set by the sandbox's PID 1 right after it built the new root, before
//! the job exists, so not even the job's very first `open` can slip past;
//! the inotify descriptor then goes to vetto over the stage's socket. (vetto
//! cannot set them itself through `/proc/<pid1>/root`: PID 1 is
//! non-dumpable, which denies that link to an unprivileged supervisor, and
//! by the time the job runs its first reads may be over.)
//!
//! inotify does not say which process opened the file: a read is reported
//! with the path only.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use serde::{Deserialize, Serialize};

use crate::plan::mounts::NamespacePlan;
use crate::sandbox::MaskReads;

/// The tag of the watch message on the stage's socket.
const TAG: u8 = b'W';
/// Upper bound on the watch list the stage sends.
const MAX_LIST_BYTES: u32 = 1 << 20;
/// Reads of the inotify descriptor per [`MaskWatch::drain`] (4 KiB each,
/// a few hundred events): a storm of opens cannot hold up the supervisor.
const MAX_READS_PER_DRAIN: usize = 16;

/// What the stage tells vetto along with the inotify descriptor.
#[derive(Debug, Default, Serialize, Deserialize)]
struct WatchList {
    /// Watch descriptor → index of the mask in the plan's mounts.
    watched: Vec<(i32, usize)>,
    /// Masks that could not be watched, and why.
    problems: Vec<String>,
}

/// In the sandbox's PID 1, after the new root is built (paths are the
/// sandbox's own): watch every stand-in and hand the watches to vetto.
/// Failing to watch is not a setup failure — the masks still hold — but
/// vetto is told, and says so.
pub(super) fn watch_and_send(ns: &NamespacePlan, sock: BorrowedFd<'_>) -> Result<(), String> {
    let mut list = WatchList::default();
    let inotify = match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
        Ok(inotify) => Some(inotify),
        Err(e) => {
            list.problems.push(format!("inotify_init1: {e}"));
            None
        }
    };
    if let Some(inotify) = &inotify {
        for (index, path, is_dir) in ns.masks() {
            // Opens only: every read, listing or mapping of the stand-in
            // needs one (no descriptor of it exists before the watch), and
            // IN_ACCESS would count a directory listing twice and fill the
            // queue faster in a flood.
            let mut flags = AddWatchFlags::IN_OPEN | AddWatchFlags::IN_DONT_FOLLOW;
            if is_dir {
                flags |= AddWatchFlags::IN_ONLYDIR;
            }
            match inotify.add_watch(path, flags) {
                Ok(wd) => list.watched.push((wd.as_raw(), index)),
                Err(e) => list.problems.push(format!("{}: {e}", path.display())),
            }
        }
    }
    let payload = serde_json::to_vec(&list).map_err(|e| format!("encode the watch list: {e}"))?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|n| *n <= MAX_LIST_BYTES)
        .ok_or("too many masked paths to watch")?;
    let fds = inotify.as_ref().map(|i| [i.as_fd().as_raw_fd()]);
    let cmsgs: Vec<ControlMessage<'_>> = fds
        .as_ref()
        .map(|fds| vec![ControlMessage::ScmRights(fds)])
        .unwrap_or_default();
    // The tag carries the descriptor; the length and list follow as plain
    // stream bytes (a blocking socket: written in full).
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[std::io::IoSlice::new(&[TAG])],
        &cmsgs,
        MsgFlags::empty(),
        None,
    )
    .map_err(|e| format!("cannot hand the mask watches to vetto: {e}"))?;
    let mut stream = std::fs::File::from(
        sock.try_clone_to_owned()
            .map_err(|e| format!("dup the stage socket: {e}"))?,
    );
    stream
        .write_all(&len.to_le_bytes())
        .and_then(|()| stream.write_all(&payload))
        .map_err(|e| format!("cannot hand the mask watches to vetto: {e}"))
    // Our copy of the inotify descriptor closes here: vetto holds it now.
}

/// The watches on the masked stand-ins, held by vetto for the session.
#[derive(Debug)]
pub struct MaskWatch {
    inotify: Option<Inotify>,
    paths: HashMap<i32, PathBuf>,
    /// Masks that are not watched (reads of them go unseen), and why.
    pub problems: Vec<String>,
}

/// In vetto: receive what [`watch_and_send`] sent. `None` if the stage
/// ended before sending it (its failure is reported on the status pipe).
pub(super) fn receive(sock: &UnixStream, ns: &NamespacePlan) -> Option<MaskWatch> {
    let mut tag = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut tag)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .ok()?;
    if msg.bytes != 1 {
        return None;
    }
    let mut fd = None;
    for cmsg in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for raw in fds {
                // SAFETY: SCM_RIGHTS installed this descriptor in our table
                // just now; nothing else owns it.
                let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
                fd.get_or_insert(owned);
            }
        }
    }
    if tag[0] != TAG {
        return None;
    }
    let mut len = [0u8; 4];
    let mut reader = sock;
    reader.read_exact(&mut len).ok()?;
    let len = u32::from_le_bytes(len).min(MAX_LIST_BYTES);
    let mut payload = Vec::new();
    reader.take(u64::from(len)).read_to_end(&mut payload).ok()?;
    let list: WatchList = serde_json::from_slice(&payload).unwrap_or_else(|e| WatchList {
        watched: Vec::new(),
        problems: vec![format!("unreadable watch list: {e}")],
    });
    let by_index: HashMap<usize, PathBuf> = ns
        .masks()
        .map(|(i, path, _)| (i, path.to_path_buf()))
        .collect();
    let paths = list
        .watched
        .iter()
        .filter_map(|(wd, i)| Some((*wd, by_index.get(i)?.clone())))
        .collect();
    // SAFETY: the stage sent this descriptor as the inotify instance it
    // created (`watch_and_send`), before the job existed.
    let inotify = fd.map(|fd| unsafe { Inotify::from_owned_fd(fd) });
    Some(MaskWatch {
        inotify,
        paths,
        problems: list.problems,
    })
}

impl MaskWatch {
    /// The masked paths opened since the last call, one entry per open the
    /// kernel queued (it merges identical consecutive ones).
    /// Never blocks; reads a bounded amount each call.
    pub fn drain(&self) -> MaskReads {
        let mut reads = MaskReads::default();
        let Some(inotify) = &self.inotify else {
            return reads;
        };
        for _ in 0..MAX_READS_PER_DRAIN {
            let events = match inotify.read_events() {
                Ok(events) if !events.is_empty() => events,
                Ok(_) | Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            };
            for e in events {
                if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    reads.lost = true;
                } else if e.mask.contains(AddWatchFlags::IN_OPEN)
                    && let Some(path) = self.paths.get(&e.wd.as_raw())
                {
                    reads.paths.push(path.clone());
                }
            }
        }
        reads
    }
}
