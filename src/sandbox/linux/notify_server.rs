//! Answers seccomp user notifications at the FS-ONLY tier.
//!
//! Landlock is the authority for the filesystem. The supervisor fills two
//! gaps it leaves:
//!
//! 1. **Carved directories** (the project root and `.git`): Landlock grants
//!    them read-only so `.git/hooks` and `.git/config` stay protected; the
//!    supervisor creates, removes and renames *unprotected* names directly in
//!    them, itself, on its own descriptor of the directory.
//! 2. **Pathname unix sockets**, which Landlock does not restrict: every
//!    `connect()` is performed by the supervisor on its own copy of the
//!    job's socket, to an inode it opened and checked.
//! 3. **Pseudo-terminals the job creates** (where the host's `/dev/pts` is
//!    shared): Landlock grants only the job's own terminal there, so the
//!    slave of a pty the job made (`ioctl(master, TIOCGPTPEER)`, what
//!    glibc's `openpty` does, or `open("/dev/pts/N", O_RDWR | O_NOCTTY)`
//!    after `ptsname()`) is opened by the supervisor on its own copy of the
//!    job's master descriptor and handed over.
//!
//! 4. **Names created in shared host directories** (`/dev/shm` below
//!    FULL): only recorded, never decided on, so the scrub after the
//!    session removes what the job made and nothing the user's other
//!    processes made meanwhile (`SharedCreations`).
//! 5. **Mode, owner and time changes** (`chmod`, `chown`, `utime*`), which
//!    Landlock does not restrict: performed on the supervisor's own
//!    descriptor of the target where the policy allows writing, refused
//!    elsewhere (`metadata`).
//!
//! The one rule: after an *allow* decision the supervisor performs the
//! operation itself, with its own copy of every argument (copied once) and
//! its own descriptors. CONTINUE only means "Landlock decides", which is
//! always safe for creations (Landlock denies them in carved directories)
//! and never used for `connect()`, whose target Landlock does not check.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

mod create;
mod metadata;
mod net;
use net::{ConnectPool, named_sockets};
mod terminal;

use super::notify::{
    self as sys, Call, FileFacts, Listener, Notif, PATH_MAX, SOCKADDR_MAX, SOCKADDR_UN_LEN,
    SUN_PATH_OFFSET, consts as c, resolve,
};
use crate::plan::fs::{Access, NetConnect, NotifyPlan, beneath, normalise_abs, writable};
use crate::plan::notify::entries::{self, fold};
use crate::plan::notify::{Decision, EgressBroker, NotifyEvent, Reason, is_violation};

/// Threads receiving on the listener: one slow call does not stall the rest.
const WORKERS: usize = 3;
/// At most this many blocking `connect()`s wait in pool threads.
const MAX_CONNECT_THREADS: usize = 64;

/// Names kept of the entries created in shared directories; beyond them
/// the rest are counted, and nothing unseen is ever removed.
pub const MAX_SHARED_NAMES: usize = 4096;

/// What the job was seen creating directly in the shared directories
/// (`NotifyPlan::shared_dirs`), for the scrub after the session.
///
/// Each name is read from the job's memory and the call is then CONTINUEd:
/// a racing thread can make the kernel create another name than the one
/// recorded. That gives the job nothing: Landlock grants it write access
/// to these directories, so it can already remove any entry of the user
/// there itself, and the scrub removing a recorded name is no more than
/// that. A raced name is merely left behind, as anything unseen is.
#[derive(Debug, Clone, Default)]
pub struct SharedCreations {
    /// Per shared directory the server watches (as planned), the names.
    pub dirs: Vec<(PathBuf, HashSet<std::ffi::OsString>)>,
    /// Creations whose name was not kept (past [`MAX_SHARED_NAMES`]).
    pub unkept: u64,
}

impl SharedCreations {
    fn note(&mut self, dir: usize, name: &[u8]) {
        let kept: usize = self.dirs.iter().map(|(_, names)| names.len()).sum();
        let Some((_, names)) = self.dirs.get_mut(dir) else {
            return;
        };
        let name = std::ffi::OsStr::from_bytes(name);
        if names.contains(name) {
            return;
        }
        if kept >= MAX_SHARED_NAMES {
            self.unkept += 1;
        } else {
            names.insert(name.to_os_string());
        }
    }
}

/// The running workers.
#[derive(Debug)]
pub struct NotifyServer {
    workers: Vec<JoinHandle<io::Result<()>>>,
    shared_creations: Arc<Mutex<SharedCreations>>,
    entry_changes: EntryChanges,
}

/// Whether the job asked for any call that adds, removes or renames a
/// directory entry (set before the call is answered, whatever the answer),
/// and how many such calls the supervisor looked at.
#[derive(Debug, Clone, Default)]
pub struct EntryChanges {
    /// A connect may change an entry too (through what listens).
    connected: Arc<AtomicBool>,
    calls: Arc<std::sync::atomic::AtomicU64>,
}

impl EntryChanges {
    /// No such call was notified so far (complete once no task of the job
    /// is left).
    pub fn none(&self) -> bool {
        self.calls.load(Ordering::SeqCst) == 0 && !self.connected.load(Ordering::SeqCst)
    }

    /// The notified calls that add, remove or rename an entry, so far.
    pub fn checked(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    fn note_connect(&self) {
        self.connected.store(true, Ordering::SeqCst);
    }

    fn note_entry_call(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

impl NotifyServer {
    /// What the job created in the shared directories, as recorded so far
    /// (each before its call was answered: complete once no task of the
    /// job is left).
    pub fn shared_creations(&self) -> Arc<Mutex<SharedCreations>> {
        Arc::clone(&self.shared_creations)
    }

    /// Whether the job asked to change any directory entry (see
    /// [`EntryChanges`]).
    pub fn entry_changes(&self) -> EntryChanges {
        self.entry_changes.clone()
    }

    /// Wait until the listener hangs up (no task of the job is left).
    pub fn join(self) -> io::Result<()> {
        let mut result = Ok(());
        for worker in self.workers {
            match worker.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("notify worker panicked")),
            }
        }
        result
    }
}

/// Start answering notifications from `listener` according to `plan`.
pub fn serve(
    listener: OwnedFd,
    plan: &NotifyPlan,
    shares: Option<Arc<super::memory::Shares>>,
    egress: Option<Arc<dyn EgressBroker>>,
    events: Sender<NotifyEvent>,
) -> io::Result<NotifyServer> {
    let listener = Listener::new(listener);
    // Only a speed-up (6.6+); older kernels answer EINVAL.
    let _ = listener.set_sync_wakeup();
    let mut shared = Shared::new(listener, plan)?;
    shared.shares = shares;
    shared.egress = egress;
    let shared = Arc::new(shared);
    let shared_creations = Arc::clone(&shared.shared_creations);
    let entry_changes = shared.entry_changes.clone();
    let mut workers = Vec::with_capacity(WORKERS);
    for n in 0..WORKERS {
        let shared = Arc::clone(&shared);
        let events = events.clone();
        let worker = std::thread::Builder::new()
            .name(format!("vetto-notify-{n}"))
            .spawn(move || worker(&shared, &events))?;
        workers.push(worker);
    }
    Ok(NotifyServer {
        workers,
        shared_creations,
        entry_changes,
    })
}

fn worker(shared: &Arc<Shared>, events: &Sender<NotifyEvent>) -> io::Result<()> {
    // Modes are computed from the job's umask; a private zero umask keeps
    // ours out of them without touching the rest of vetto. If that fails,
    // ours also applies: files come out more restrictive, never less.
    let _ = sys::private_fs_zero_umask();
    loop {
        match shared.listener.recv() {
            Ok(Some(notif)) => {
                // A bug must not leave the job's thread waiting forever
                // (after RECV it only dies of fatal signals): refuse instead.
                let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    shared.handle(notif, events)
                }));
                if handled.is_err() {
                    let _ = shared.listener.respond_errno(notif.id, c::EPERM);
                }
            }
            Ok(None) => {
                if shared.listener.hung_up() {
                    return Ok(());
                }
            }
            Err(e) => {
                if shared.listener.hung_up() {
                    return Ok(());
                }
                return Err(e);
            }
        }
    }
}

/// A carved directory as the supervisor holds it.
#[derive(Debug)]
struct Carved {
    fd: OwnedFd,
    /// Its real path, as the supervisor's descriptor names it.
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// Lower-cased, trailing dots and spaces removed.
    protected: Vec<Vec<u8>>,
    /// Names may match regardless of case/Unicode form here.
    case_insensitive: bool,
}

impl Carved {
    /// What the plan's decisions need of it.
    fn view(&self) -> entries::Carved<'_> {
        entries::Carved {
            path: &self.path,
            dev: self.dev,
            ino: self.ino,
            protected: &self.protected,
            case_insensitive: self.case_insensitive,
        }
    }
}

#[derive(Debug)]
struct Shared {
    listener: Listener,
    carved: Vec<Carved>,
    broker: bool,
    /// Policy rules as written.
    rules: Vec<(PathBuf, Access)>,
    /// The rules plus their canonical forms (a rule path through a
    /// symlink also names its target), made on first use: most sessions
    /// never need them, and resolving every rule costs a start-up.
    resolved: std::sync::OnceLock<Vec<(PathBuf, Access)>>,
    /// `[network] unix`: the (dev, ino) of each named socket, taken when
    /// the supervisor starts; a connect reaching one of these inodes is
    /// allowed wherever it lies.
    unix_sockets: Vec<(u64, u64)>,
    /// An `O_PATH` descriptor of each, held for the session so that no
    /// other socket can take a freed inode number.
    _held_sockets: Vec<std::fs::File>,
    pool: ConnectPool,
    /// Regular files the supervisor created in carved directories, by
    /// (dev, ino): Landlock never granted them, so reopening them with
    /// `O_CREAT` (`>>`, `>`) is performed here too. New inodes in a carved
    /// directory only come from the supervisor, so a number in this set
    /// cannot name anything the carve protects.
    created: Mutex<HashSet<(u64, u64)>>,
    /// `--max-memory` shared out over the tree: forks split a share.
    shares: Option<Arc<super::memory::Shares>>,
    /// Spares for a list-only carved directory (see `SparePool`).
    spares: Option<Spares>,
    /// Numbers and names of the calls the plan refuses outright.
    denied: Vec<(i64, &'static str)>,
    /// `--audit`: allow what would be refused, record it.
    audit: bool,
    /// `NotifyPlan::unix_bind`.
    unix_bind: bool,
    /// Which non-unix connects are performed (`NetConnect`).
    net_connect: NetConnect,
    /// The egress proxy, for `NetConnect::Proxy` (without it every
    /// internet connect is refused).
    egress: Option<Arc<dyn EgressBroker>>,
    /// Open the slave of a pseudo-terminal whose master the job holds
    /// (`NotifyPlan::pty_peer`).
    pty_peer: bool,
    /// Answer a UDP `socket()` with one from the egress broker's network
    /// namespace that leads nowhere (`NotifyPlan::udp_dead_net`).
    udp_dead_net: bool,
    /// A TCP `socket()` too, and the job's `bind()` performed here
    /// (`NotifyPlan::tcp_dead_net`).
    tcp_dead_net: bool,
    /// `NotifyPlan::listen`: each `listen()` is decided here.
    listen: bool,
    /// The project root's (dev, ino): no `.git` is created below it.
    project: Option<(u64, u64)>,
    /// Set by the first call that could change a directory entry.
    entry_changes: EntryChanges,
    /// The shared directories watched for creations, by (dev, ino), in
    /// the order of `shared_creations.dirs`.
    shared_dirs: Vec<(u64, u64)>,
    shared_creations: Arc<Mutex<SharedCreations>>,
    /// Directories found writable by the policy with no rule below them,
    /// by `(dev, ino, birth time)` (see `learn_writable`): a creation in
    /// one is no refused write, and needs no path to tell. Forgotten when
    /// the job renames a directory (it may then lie elsewhere). Bounded.
    /// `false`: seen, but not one whose verdict holds for every name.
    writable_dirs: Mutex<std::collections::HashMap<DirId, bool>>,
    /// Mode, owner and time changes are decided here
    /// (`NotifyPlan::metadata`).
    metadata: bool,
    /// `NotifyPlan::own_view`.
    own_view: bool,
    /// Process facts by thread id, for violations (bounded).
    described: Mutex<std::collections::HashMap<i32, crate::sandbox::process::ProcessFacts>>,
}

/// Threads whose process facts are remembered at once.
const DESCRIBED_MAX: usize = 4096;

/// A directory for as long as it exists, and never a later one:
/// `(dev, ino, birth time)`.
type DirId = (u64, u64, (i64, u32));

/// Directories remembered as writable (`Shared::writable_dirs`), at most.
const WRITABLE_DIRS_MAX: usize = 4096;

/// Files and directories made before the Landlock domain existed and
/// granted by their own inode: renamed into a list-only carved directory
/// they become new entries the job can fully use (a plainly created file
/// there could be written through its descriptor but never reopened).
#[derive(Debug)]
struct Spares {
    pool: OwnedFd,
    /// Device of the pool: a rename reaches only the same filesystem.
    dev: u64,
    /// Indices in `Shared::carved` of the directories new files are made
    /// from spares in (the list-only ones).
    file_dirs: Vec<usize>,
    files: Mutex<Vec<CString>>,
    dirs: Mutex<Vec<CString>>,
}

impl Spares {
    fn take(list: &Mutex<Vec<CString>>) -> Option<CString> {
        list.lock().ok()?.pop()
    }

    fn give_back(list: &Mutex<Vec<CString>>, name: CString) {
        if let Ok(mut l) = list.lock() {
            l.push(name);
        }
    }
}

/// What to answer.
enum Answer {
    Continue(Reason),
    Errno(i32, Decision, Reason),
    Value(i64, Reason),
    Fd {
        fd: OwnedFd,
        cloexec: bool,
        reason: Reason,
        /// To undo the creation if the descriptor cannot be installed.
        undo: Option<(usize, CString)>,
    },
    /// The notification is stale (the thread is gone): answer nothing.
    Drop,
    /// A connect out of the sandbox's own network namespace (FULL, network
    /// off): refused with `ENETUNREACH`, as the missing route would.
    Unreachable(std::net::SocketAddr),
    /// A connect filtered egress does not allow (FS-ONLY): refused with
    /// `ECONNREFUSED`, as a closed port would answer.
    Refused(std::net::SocketAddr),
}

/// One notification and what has been read for it. Each path argument
/// is copied from the job once and each parent looked at once, however
/// many checks (shared directories, nested `.git`, carving, the record of
/// a refused write) then use them: every check decides on the same copy,
/// and the common creation costs one `process_vm_readv` and one `statx`.
struct Notified {
    n: Notif,
    /// Path arguments by address, as copied (or why they could not be).
    copies: RefCell<Vec<(u64, Result<CString, Reason>)>>,
    /// `(start, parent)` → what one `statx` (links followed) found.
    hints: RefCell<Vec<Hint>>,
}

/// What one `statx` of a relative parent found (`proc_dir_identity_at`).
struct Hint {
    what: String,
    parent: Vec<u8>,
    found: Result<(FileFacts, Option<(i64, u32)>), i32>,
}

impl std::ops::Deref for Notified {
    type Target = Notif;
    fn deref(&self) -> &Notif {
        &self.n
    }
}

impl Notified {
    fn new(n: Notif) -> Notified {
        Notified {
            n,
            copies: RefCell::new(Vec::new()),
            hints: RefCell::new(Vec::new()),
        }
    }

    /// The path at `addr`, copied once (bounded to `PATH_MAX`).
    fn path(&self, addr: u64) -> Result<CString, Answer> {
        if let Some((_, copy)) = self.copies.borrow().iter().find(|(a, _)| *a == addr) {
            return copy.clone().map_err(Answer::Continue);
        }
        let copy = copy_path(self.n.tid, addr);
        self.copies.borrow_mut().push((addr, copy.clone()));
        copy.map_err(Answer::Continue)
    }

    /// The directory a relative `parent` names from `what` (`cwd`,
    /// `fd/N`), by one `statx` with links followed, looked at once.
    fn hint(&self, what: &str, parent: &[u8]) -> Result<(FileFacts, Option<(i64, u32)>), i32> {
        let seen = self.hints.borrow();
        if let Some(h) = seen.iter().find(|h| h.what == what && h.parent == parent) {
            return h.found;
        }
        drop(seen);
        let found = sys::proc_dir_identity_at(self.n.tid, what, parent);
        self.hints.borrow_mut().push(Hint {
            what: what.to_string(),
            parent: parent.to_vec(),
            found,
        });
        found
    }
}

impl Shared {
    fn new(listener: Listener, plan: &NotifyPlan) -> io::Result<Shared> {
        let mut carved = Vec::new();
        for dir in &plan.carved_dirs {
            // A directory that cannot be opened is not emulated: Landlock
            // keeps denying there, which is safe.
            let Ok(fd) = sys::open_dir_path(&dir.path) else {
                continue;
            };
            let facts = sys::facts(fd.as_fd())?;
            carved.push(Carved {
                path: sys::fd_path(fd.as_fd()).unwrap_or_else(|_| dir.path.clone()),
                fd,
                dev: facts.dev,
                ino: facts.ino,
                protected: dir
                    .protected_names
                    .iter()
                    .map(|n| fold(n.as_bytes()))
                    .collect(),
                case_insensitive: sys::case_insensitive_dir(&dir.path),
            });
        }
        let mut shared_dirs = Vec::new();
        let mut watched = Vec::new();
        for dir in &plan.shared_dirs {
            // One that cannot be opened is not watched: the scrub then
            // removes nothing there.
            if let Some(f) = sys::open_dir_path(dir)
                .ok()
                .and_then(|fd| sys::facts(fd.as_fd()).ok())
            {
                shared_dirs.push((f.dev, f.ino));
                watched.push((dir.clone(), HashSet::new()));
            }
        }
        let rules = plan.rules.clone();
        let held = named_sockets(&plan.unix_sockets);
        let spares = plan.spares.as_ref().and_then(|pool| {
            let fd = sys::open_dir_path(&pool.dir).ok()?;
            let dev = sys::facts(fd.as_fd()).ok()?.dev;
            let file_dirs = pool
                .file_dirs
                .iter()
                .filter_map(|d| {
                    let f = sys::facts(sys::open_dir_path(d).ok()?.as_fd()).ok()?;
                    carved.iter().position(|c| c.dev == f.dev && c.ino == f.ino)
                })
                .collect();
            let names = |list: &[String]| -> Vec<CString> {
                list.iter()
                    .filter_map(|n| CString::new(n.as_bytes()).ok())
                    .collect()
            };
            Some(Spares {
                pool: fd,
                dev,
                file_dirs,
                files: Mutex::new(names(&pool.files)),
                dirs: Mutex::new(names(&pool.dirs)),
            })
        });
        let denied = plan
            .denied_calls
            .iter()
            .filter_map(|name| {
                let name = crate::plan::syscalls::static_name(name)?;
                Some((sys::syscall_number(name)?, name))
            })
            .collect();
        Ok(Shared {
            listener,
            carved,
            spares,
            denied,
            audit: plan.audit,
            unix_bind: plan.unix_bind,
            net_connect: plan.net_connect,
            egress: None,
            pty_peer: plan.pty_peer,
            metadata: plan.metadata,
            own_view: plan.own_view,
            udp_dead_net: plan.udp_dead_net,
            tcp_dead_net: plan.tcp_dead_net,
            listen: plan.listen,
            broker: plan.broker_unix_connect,
            rules,
            unix_sockets: held.iter().map(|(_, id)| *id).collect(),
            _held_sockets: held.into_iter().map(|(f, _)| f).collect(),
            project: plan
                .project
                .as_ref()
                .and_then(|p| sys::facts(sys::open_dir_path(p).ok()?.as_fd()).ok())
                .map(|f| (f.dev, f.ino)),
            entry_changes: EntryChanges::default(),
            resolved: std::sync::OnceLock::new(),
            described: Mutex::new(std::collections::HashMap::new()),
            writable_dirs: Mutex::new(std::collections::HashMap::new()),
            pool: ConnectPool::new(),
            created: Mutex::new(HashSet::new()),
            shares: None,
            shared_dirs,
            shared_creations: Arc::new(Mutex::new(SharedCreations {
                dirs: watched,
                unkept: 0,
            })),
        })
    }

    fn handle(self: &Arc<Self>, n: Notif, events: &Sender<NotifyEvent>) {
        let n = Notified::new(n);
        // Before any answer: whatever the decision, the job may have
        // changed an entry (the check after the session reads again) —
        // itself, or through whatever listens on the socket it connects to.
        // An `open` for writing without `O_CREAT` (notified to reopen a
        // file made in a carved directory) makes no entry: not counted.
        let plain_open = match n.call {
            Call::Open => n.args[1] as u32 as i32 & c::O_CREAT == 0,
            Call::Openat => n.args[2] as u32 as i32 & c::O_CREAT == 0,
            _ => false,
        };
        if n.call.is_creation() && !plain_open {
            self.entry_changes.note_entry_call();
        } else if n.call == Call::Connect {
            self.entry_changes.note_connect();
        }
        if let Some(answer) = self.pty_slave_by_path(&n) {
            self.answer(&n, n.call.name(), answer, None, events);
            return;
        }
        if n.native && n.call.is_creation() && !self.shared_dirs.is_empty() {
            self.note_shared(&n);
        }
        // A directory the job moves may land below another rule.
        if n.native
            && matches!(n.call, Call::Rename | Call::Renameat | Call::Renameat2)
            && let Ok(mut w) = self.writable_dirs.lock()
        {
            w.clear();
        }
        let (answer, path) = match n.call {
            // Numbers of another ABI could mean anything, `connect` among
            // them: refuse rather than CONTINUE (the BPF should never
            // notify them).
            _ if !n.native => (
                Answer::Errno(c::ENOSYS, Decision::Denied(c::ENOSYS), Reason::NotHandled),
                None,
            ),
            // A new process under `--max-memory` shares: split the
            // parent's share, then let the kernel create it. Never a
            // namespace-creating clone (denied, and notified only to be
            // recorded): those take the refusal below.
            Call::Fork if self.shares.is_some() && !creates_namespaces(&n) => {
                if let Some(shares) = &self.shares {
                    shares.on_fork(n.tid);
                }
                (Answer::Continue(Reason::NotHandled), None)
            }
            Call::Connect if self.broker => {
                let (decision, path) = self.connect(&n);
                match decision {
                    Ok((connect, sock)) => {
                        self.perform_connect(*n, connect, sock, path, events);
                        return;
                    }
                    Err(answer) => (answer, path),
                }
            }
            Call::Ioctl if self.pty_peer && n.args[1] as u32 == sys::TIOCGPTPEER as u32 => {
                (self.pty_peer(&n), None)
            }
            Call::Other if (self.tcp_dead_net || self.unix_bind) && n.nr == libc::SYS_bind => {
                self.bind(&n)
            }
            Call::Other if self.udp_dead_net && n.nr == libc::SYS_socket => {
                match self.dead_net_socket(&n) {
                    Some(answer) => (answer, None),
                    None => (
                        Answer::Errno(c::EPERM, Decision::Denied(c::EPERM), Reason::Forbidden),
                        None,
                    ),
                }
            }
            Call::Other if self.listen && n.nr == libc::SYS_listen => (self.listen(&n), None),
            Call::Metadata if self.metadata => self.metadata(&n),
            call if call.is_creation() && (!self.carved.is_empty() || self.audit) => {
                self.creation(&n)
            }
            // Creations with nothing carved: Landlock decides.
            call if call.is_creation() => (Answer::Continue(Reason::NotHandled), None),
            // Audit: allowed, and recorded.
            _ if self.audit => (Answer::Continue(Reason::Forbidden), None),
            // Anything else is here only because the plan refuses it and
            // wants the attempt recorded. Never CONTINUE: refuse.
            _ => (
                Answer::Errno(c::EPERM, Decision::Denied(c::EPERM), Reason::Forbidden),
                None,
            ),
        };
        let syscall = match answer {
            _ if self.listen && n.native && n.nr == libc::SYS_listen => "listen",
            _ if n.call == Call::Other && n.native && n.nr == libc::SYS_bind => "bind",
            // A refused connect of another family (vsock, netlink): named.
            Answer::Errno(_, _, Reason::Forbidden) if n.call == Call::Connect => "connect",
            Answer::Errno(_, _, Reason::Forbidden) | Answer::Continue(Reason::Forbidden) => {
                self.denied_name(n.nr)
            }
            _ if n.call == Call::Metadata => metadata::call_name(n.nr),
            _ => n.call.name(),
        };
        self.answer(&n, syscall, answer, path, events);
    }

    /// Who thread `tid` belongs to; remembered per thread, so a storm of
    /// denials from one process reads /proc once, not once per call.
    fn describe(&self, tid: i32) -> crate::sandbox::process::ProcessFacts {
        // A thread id outlives an execve (and may be reused): a remembered
        // description counts only while the thread still runs the same
        // program with the same arguments.
        let remembered = self
            .described
            .lock()
            .ok()
            .and_then(|cache| cache.get(&tid).cloned());
        if let Some(facts) = remembered
            && std::fs::read_link(format!("/proc/{tid}/exe")).is_ok_and(|exe| exe == facts.exe)
            && super::proc::cmdline(tid) == facts.argv
        {
            return facts;
        }
        let facts = crate::sandbox::process::describe(tid);
        if let Ok(mut cache) = self.described.lock() {
            if cache.len() >= DESCRIBED_MAX {
                cache.clear();
            }
            cache.insert(tid, facts.clone());
        }
        facts
    }

    /// The name of a call the plan refuses outright, from its number.
    fn denied_name(&self, nr: i64) -> &'static str {
        self.denied
            .iter()
            .find(|(number, _)| *number == nr)
            .map_or("unknown", |(_, name)| *name)
    }

    fn answer(
        &self,
        n: &Notif,
        syscall: &'static str,
        answer: Answer,
        path: Option<PathBuf>,
        events: &Sender<NotifyEvent>,
    ) {
        let l = &self.listener;
        let addr = match answer {
            Answer::Unreachable(to) | Answer::Refused(to) => Some(to),
            _ => None,
        };
        let (decision, reason) = match &answer {
            Answer::Drop => return,
            Answer::Unreachable(_) => (Decision::Denied(c::ENETUNREACH), Reason::Egress),
            Answer::Refused(_) => (Decision::Denied(c::ECONNREFUSED), Reason::Egress),
            Answer::Continue(reason) => (Decision::Continued, *reason),
            Answer::Errno(_, decision, reason) => (*decision, *reason),
            Answer::Value(_, reason) => (Decision::Emulated, *reason),
            Answer::Fd { reason, .. } => (Decision::Emulated, *reason),
        };
        // Who did it, read while the thread is still blocked in the call
        // (only for violations: the common answers stay cheap).
        let process = is_violation(decision, reason).then(|| self.describe(n.tid));
        // Recorded before it is answered: once answered, the job runs on
        // and may end, and the supervisor takes the job's end for "every
        // decision is in" — an event sent after the answer could miss the
        // session log. "The kernel handled it" carries no information and
        // is by far the most common answer (every create outside carved
        // directories): not recorded.
        // Nor is the slave of the job's own pty: the job's own business.
        if !(decision == Decision::Continued
            && matches!(reason, Reason::NotCarved | Reason::NotHandled))
            && reason != Reason::OwnPty
            && reason != Reason::Metadata
            && reason != Reason::DeadNet
        {
            let _ = events.send(NotifyEvent {
                tid: n.tid,
                syscall,
                path,
                addr,
                decision,
                reason,
                process,
                time: std::time::SystemTime::now(),
            });
        }
        // A failed answer means the thread is gone (ENOENT): nothing to do.
        match answer {
            Answer::Drop => {}
            Answer::Unreachable(_) => {
                let _ = l.respond_errno(n.id, c::ENETUNREACH);
            }
            Answer::Refused(_) => {
                let _ = l.respond_errno(n.id, c::ECONNREFUSED);
            }
            Answer::Continue(_) => {
                let _ = l.respond_continue(n.id);
            }
            Answer::Errno(errno, _, _) => {
                let _ = l.respond_errno(n.id, errno);
            }
            Answer::Value(v, _) => {
                let _ = l.respond_value(n.id, v);
            }
            Answer::Fd {
                fd,
                cloexec,
                reason: _,
                undo,
            } => {
                match l.add_fd_send(n.id, fd.as_fd(), cloexec) {
                    Ok(_) => {}
                    Err(e) => {
                        // The job never got the file: take the creation back
                        // if the name still holds our inode.
                        if let Some((i, name)) = undo {
                            let dir = self.carved[i].fd.as_fd();
                            if let (Ok(ours), Ok(now)) =
                                (sys::facts(fd.as_fd()), sys::facts_at(dir, &name))
                            {
                                if ours.dev == now.dev && ours.ino == now.ino {
                                    let _ = sys::unlinkat(dir, &name, 0);
                                }
                            }
                        }
                        let _ = l.respond_errno(n.id, sys::errno_of(&e));
                    }
                }
            }
        }
    }

    // ----- the slave of a pseudo-terminal the job created ----------------

    // ----- listeners --------------------------------------------------------

    // ----- Sockets from a network namespace that leads nowhere ----------

    // ----- names created in shared directories --------------------------

    /// Record the name a creation makes, when its parent (resolved as the
    /// job resolves it) is a shared directory. Recorded before the call is
    /// answered; decides nothing (see `SharedCreations` for why a name
    /// read from the job's memory is good enough here).
    fn note_shared(&self, n: &Notified) {
        let a = n.args;
        let fd_arg = |i: usize| a[i] as u32 as i32;
        let cwd = c::AT_FDCWD;
        let creates = |flags: u64| flags as u32 as i32 & c::O_CREAT != 0;
        let (dirfd, addr) = match n.call {
            Call::Open if creates(a[1]) => (cwd, a[0]),
            Call::Openat if creates(a[2]) => (fd_arg(0), a[1]),
            Call::Creat | Call::Mkdir | Call::Mknod => (cwd, a[0]),
            Call::Mkdirat | Call::Mknodat => (fd_arg(0), a[1]),
            Call::Symlink | Call::Link | Call::Rename => (cwd, a[1]),
            Call::Symlinkat => (fd_arg(1), a[2]),
            Call::Linkat | Call::Renameat | Call::Renameat2 => (fd_arg(2), a[3]),
            _ => return,
        };
        let Ok(path) = n.path(addr) else {
            return;
        };
        let bytes = path.to_bytes();
        let Some((parent, name, _)) = split(bytes) else {
            return;
        };
        if name.is_empty() || name == b"." || name == b".." {
            return;
        }
        let Some(what) = start_dir(bytes, dirfd) else {
            return;
        };
        let dir = if parent.is_empty() {
            // A bare name: one stat of the magic link.
            sys::proc_dir_facts(n.tid, &what).ok()
        } else if n.hint(&what, parent) == Err(c::ENOENT) {
            // No parent, so nothing is created (unless a racing thread
            // makes one first: that name is left behind, see above).
            return;
        } else if let Some(hint) = n
            .hint(&what, parent)
            .ok()
            .map(|(f, _)| f)
            .filter(|f| !self.shared_dirs.contains(&(f.dev, f.ino)))
        {
            // The common case: one `statx` (links followed) shows a
            // parent that is no shared directory. (A magic link on the
            // way is not followed below either: nothing is noted there.
            // A wrong hint for an absolute path, see `locate`, only
            // leaves a name unrecorded, which the scrub then keeps.)
            Some(hint)
        } else {
            self.job_dir(n.tid, dirfd, bytes, parent)
                .and_then(|d| sys::facts(d.as_fd()).ok())
        };
        let Some(dir) = dir else {
            return;
        };
        if let Some(i) = self
            .shared_dirs
            .iter()
            .position(|&d| d == (dir.dev, dir.ino))
            && let Ok(mut seen) = self.shared_creations.lock()
        {
            seen.note(i, name);
        }
    }

    // ----- creations in carved directories -------------------------------

    // ----- unix socket brokering ----------------------------------------

    /// Nothing to answer if the notification is gone; `answer` otherwise
    /// (an unanswered live notification would hang the job's thread).
    fn stale_or(&self, n: &Notif, answer: Answer) -> Answer {
        if self.listener.id_valid(n.id) {
            answer
        } else {
            Answer::Drop
        }
    }

    fn resolved_rules(&self) -> &[(PathBuf, Access)] {
        self.resolved.get_or_init(|| {
            let mut rules = self.rules.clone();
            for (path, access) in &self.rules {
                if let Ok(real) = std::fs::canonicalize(path)
                    && &real != path
                {
                    rules.push((real, *access));
                }
            }
            rules
        })
    }
}

impl Shared {}

/// A `sockaddr_in` or `sockaddr_in6`, read from its bytes (ports and
/// addresses in network order, the family in ours).
/// A `clone` whose flags ask for a thread or a namespace: not a plain
/// new process (`fork`/`vfork` take no flags).
fn creates_namespaces(n: &Notif) -> bool {
    /// CLONE_THREAD and every CLONE_NEW* flag.
    const NOT_A_FORK: u64 = 0x0001_0000 | 0x7e02_0000;
    n.nr == libc::SYS_clone && n.args[0] & NOT_A_FORK != 0
}

/// Copy a path argument once, bounded to `PATH_MAX`.
/// The `Err` is the reason to answer CONTINUE with.
fn copy_path(tid: i32, addr: u64) -> Result<CString, Reason> {
    match sys::read_remote_cstr(tid, addr, PATH_MAX) {
        Ok(Some(p)) if !p.as_bytes().is_empty() => Ok(p),
        // Too long or empty: the kernel will say so.
        Ok(_) => Err(Reason::Unsupported),
        // Not dumpable, or gone: fail closed, which for creations is
        // letting Landlock deny.
        Err(_) => Err(Reason::Unreadable),
    }
}

/// Split into (parent, final name, had trailing slashes).
fn split(path: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    let mut end = path.len();
    while end > 0 && path[end - 1] == b'/' {
        end -= 1;
    }
    let trailing = end != path.len();
    let trimmed = &path[..end];
    if trimmed.is_empty() {
        return None;
    }
    match trimmed.iter().rposition(|&b| b == b'/') {
        None => Some((&[], trimmed, trailing)),
        Some(i) => {
            let parent = &trimmed[..i];
            let parent = if parent.is_empty() {
                &trimmed[..1]
            } else {
                parent
            };
            Some((parent, &trimmed[i + 1..], trailing))
        }
    }
}

fn show(path: &CStr) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(path.to_bytes()))
}

/// The answer for an operation the supervisor performed.
fn done(result: io::Result<()>) -> Answer {
    match result {
        Ok(()) => Answer::Value(0, Reason::CarvedDir),
        Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::CarvedDir),
    }
}

/// The entry of `/proc/TID/` a path resolves from: the job's root for an
/// absolute path, its working directory, or the directory descriptor it
/// passed; `None` for a descriptor that cannot be one.
fn start_dir(path: &[u8], dirfd: i32) -> Option<String> {
    if path.first() == Some(&b'/') {
        Some("root".to_string())
    } else if dirfd == c::AT_FDCWD {
        Some("cwd".to_string())
    } else if dirfd >= 0 {
        Some(format!("fd/{dirfd}"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::net::{SockAddr, classify, inet_addr};
    use super::terminal::pts_index;
    use super::*;

    #[test]
    fn shared_creations_keep_a_bounded_number_of_names() {
        let mut seen = SharedCreations {
            dirs: vec![(PathBuf::from("/dev/shm"), HashSet::new())],
            unkept: 0,
        };
        for i in 0..MAX_SHARED_NAMES + 10 {
            seen.note(0, format!("n{i}").as_bytes());
        }
        // A name already kept is not counted again; one past the bound is.
        seen.note(0, b"n0");
        seen.note(0, b"n0");
        seen.note(1, b"no such directory");
        assert_eq!(seen.dirs[0].1.len(), MAX_SHARED_NAMES);
        assert_eq!(seen.unkept, 10);
    }

    #[test]
    fn only_the_name_ptsname_writes_is_a_pty_slave_path() {
        assert_eq!(pts_index(b"/dev/pts/0"), Some(0));
        assert_eq!(pts_index(b"/dev/pts/17"), Some(17));
        for other in [
            &b"/dev/pts/"[..],
            b"/dev/pts/07",
            b"/dev/pts/+7",
            b"/dev/pts/7/",
            b"/dev/pts//7",
            b"/dev/pts/../pts/7",
            b"//dev/pts/7",
            b"pts/7",
            b"/dev/pts/ptmx",
            b"/dev/pts/99999999999",
        ] {
            assert_eq!(pts_index(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    fn sockaddr(family: i32, port: u16, ip: &[u8], ip_at: usize, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        #[expect(clippy::unwrap_used, reason = "tests")]
        b[..2].copy_from_slice(&u16::try_from(family).unwrap().to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[ip_at..ip_at + ip.len()].copy_from_slice(ip);
        b
    }

    #[test]
    fn internet_addresses_are_read_from_the_jobs_bytes_and_nothing_else() {
        let v4 = sockaddr(c::AF_INET, 80, &[1, 2, 3, 4], 4, 16);
        assert_eq!(inet_addr(&v4), Some(([1, 2, 3, 4], 80).into()));
        let mut loop6 = [0u8; 16];
        loop6[15] = 1;
        let v6 = sockaddr(c::AF_INET6, 443, &loop6, 8, 28);
        assert_eq!(inet_addr(&v6), Some((loop6, 443).into()));
        // Truncated, or a unix socket: not an internet address.
        assert_eq!(inet_addr(&v4[..6]), None);
        assert_eq!(inet_addr(&v6[..20]), None);
        assert_eq!(inet_addr(&sockaddr(c::AF_UNIX, 0, b"/x", 2, 8)), None);
        assert_eq!(inet_addr(&[]), None);
    }

    #[test]
    fn split_keeps_the_parent_and_a_single_final_name() {
        assert_eq!(split(b"x"), Some((&b""[..], &b"x"[..], false)));
        assert_eq!(split(b"a/b/c"), Some((&b"a/b"[..], &b"c"[..], false)));
        assert_eq!(split(b"/x"), Some((&b"/"[..], &b"x"[..], false)));
        assert_eq!(split(b"dir//"), Some((&b""[..], &b"dir"[..], true)));
        assert_eq!(split(b"a//b"), Some((&b"a/"[..], &b"b"[..], false)));
        assert_eq!(split(b"///"), None);
        assert_eq!(split(b"x/.."), Some((&b"x"[..], &b".."[..], false)));
    }

    #[test]
    fn socket_addresses_are_classified_as_the_kernel_reads_them() {
        let family = (c::AF_UNIX as u16).to_ne_bytes();
        let mut path = family.to_vec();
        path.extend_from_slice(b"/run/x.sock\0garbage");
        assert_eq!(classify(&path), SockAddr::Path(b"/run/x.sock".to_vec()));
        let mut abs = family.to_vec();
        abs.extend_from_slice(b"\0name");
        assert_eq!(classify(&abs), SockAddr::Abstract(b"name".to_vec()));
        assert_eq!(classify(&family), SockAddr::Other);
        let mut inet = 2u16.to_ne_bytes().to_vec();
        inet.extend_from_slice(&[0, 80, 127, 0, 0, 1]);
        assert_eq!(classify(&inet), SockAddr::Other);
        let mut unterminated = family.to_vec();
        unterminated.extend_from_slice(&[b'a'; 108]);
        assert_eq!(classify(&unterminated), SockAddr::Path(vec![b'a'; 108]));
    }

    #[test]
    fn only_sockets_in_writable_rules_are_allowed() {
        #[expect(clippy::unwrap_used, reason = "tests")]
        let shared = Shared::new(
            Listener::new(OwnedFd::from(std::fs::File::open("/").unwrap())),
            &NotifyPlan {
                carved_dirs: vec![],
                broker_unix_connect: true,
                rules: vec![
                    (PathBuf::from("/"), Access::Read),
                    (PathBuf::from("/work/p"), Access::Write),
                    (PathBuf::from("/work/p/.env"), Access::Deny),
                    (PathBuf::from("/work/p/.git"), Access::Protect),
                ],
                ..NotifyPlan::default()
            },
        )
        .unwrap();
        assert!(shared.socket_allowed(Path::new("/work/p/app.sock")));
        assert!(!shared.socket_allowed(Path::new("/work/p/.env/s.sock")));
        assert!(!shared.socket_allowed(Path::new("/work/p/.git/s.sock")));
        assert!(!shared.socket_allowed(Path::new("/home/u/.ssh/agent.sock")));
        assert!(!shared.socket_allowed(Path::new("/work/p/app.sock (deleted)")));
        assert!(!shared.socket_allowed(Path::new("relative.sock")));
    }
}
