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

mod metadata;

use super::notify::{
    self as sys, Call, FileFacts, Listener, Notif, PATH_MAX, SOCKADDR_MAX, SOCKADDR_UN_LEN,
    SUN_PATH_OFFSET, consts as c, resolve,
};
use crate::plan::fs::{Access, NetConnect, NotifyPlan, beneath, normalise_abs, writable};
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

/// A connect the supervisor performs.
enum Connect {
    /// To the checked socket inode behind this `O_PATH` descriptor, with
    /// the reason it is performed (allowed, or only audited).
    Checked(OwnedFd, Reason),
    /// With the job's address (copied): no name resolved, or an abstract
    /// name whose listener belongs to the job.
    Raw([u8; SOCKADDR_MAX], usize, Reason),
    /// Filtered egress: to the proxy's own listener at `to` as asked, which
    /// is told first which process this socket is (attribution only).
    Named {
        addr: [u8; SOCKADDR_MAX],
        len: usize,
        to: std::net::SocketAddr,
    },
    /// Filtered egress: to the proxy's redirected listener `via`, which is
    /// told first that this socket stands for `to`.
    Redirect {
        to: std::net::SocketAddr,
        via: std::net::SocketAddr,
    },
}

/// Where filtered egress sends a connect to an internet address.
enum Route {
    /// To the proxy's explicit listener: performed as asked.
    AsAsked,
    /// Allowed by address: redirected to the proxy.
    Redirect,
    /// To port 53 (any address): redirected to the supervisor's DNS stub.
    Dns,
    /// Refused.
    Refuse,
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
            net_connect: plan.net_connect,
            egress: None,
            pty_peer: plan.pty_peer,
            metadata: plan.metadata,
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
        if n.call.is_creation() {
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
            Call::Other if self.tcp_dead_net && n.nr == libc::SYS_bind => {
                (self.dead_net_bind(&n), None)
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

    /// `ioctl(master, TIOCGPTPEER, flags)`. The descriptor number and the
    /// flags are registers, not memory, so nothing the job can still change
    /// is read. The supervisor takes the job's descriptor (the same open
    /// file: a master the job holds is a terminal it already controls
    /// entirely) and performs the ioctl on it itself; the kernel checks that
    /// it is a master. Whatever is unclear is left to the kernel (CONTINUE),
    /// where Landlock refuses the slave of any terminal but the job's own.
    fn pty_peer(&self, n: &Notif) -> Answer {
        let Ok(master) = i32::try_from(n.args[0] as u32) else {
            return Answer::Continue(Reason::Unsupported);
        };
        let flags = n.args[2] as u32 as i32;
        let kept = libc::O_ACCMODE | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
        if flags & !kept != 0 || flags & libc::O_ACCMODE == libc::O_ACCMODE {
            return Answer::Continue(Reason::Unsupported);
        }
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return self.stale_or(n, Answer::Continue(Reason::Unreadable));
        };
        let ours = match sys::pidfd_getfd(pidfd.as_fd(), master) {
            Ok(fd) => fd,
            Err(_) => return self.stale_or(n, Answer::Continue(Reason::Unreadable)),
        };
        // The thread was alive and blocked in this call throughout: the
        // descriptor is the one it passed.
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        match sys::pty_peer(ours.as_fd(), flags & !libc::O_CLOEXEC) {
            Ok(slave) => Answer::Fd {
                fd: slave,
                cloexec: flags & libc::O_CLOEXEC != 0,
                reason: Reason::OwnPty,
                undo: None,
            },
            Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::OwnPty),
        }
    }

    // ----- listeners --------------------------------------------------------

    /// `listen(fd, backlog)` under filtered egress without a namespace
    /// (FS-ONLY). Landlock refuses `bind()`, but `listen()` on an unbound
    /// internet socket binds it itself, to `0.0.0.0`/`[::]`: a server the
    /// host's whole network can reach. Both arguments are registers; the
    /// supervisor takes the job's socket (the same open file description)
    /// and decides on its own copy: a unix socket, or an internet socket
    /// bound to a loopback address, is made to listen by the supervisor on
    /// that copy — so a socket the job swaps in under the same number after
    /// the check is never the one that listens. Anything else is refused
    /// with `EACCES` (as Landlock refuses `bind()`) and recorded with the
    /// process.
    fn listen(&self, n: &Notif) -> Answer {
        let refuse = Answer::Errno(c::EACCES, Decision::Denied(c::EACCES), Reason::Forbidden);
        let Ok(target) = i32::try_from(n.args[0] as u32) else {
            return Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled);
        };
        let backlog = nix::sys::socket::Backlog::new(n.args[1] as u32 as i32)
            .unwrap_or(nix::sys::socket::Backlog::MAXCONN);
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return self.stale_or(n, refuse);
        };
        let sock = match sys::pidfd_getfd(pidfd.as_fd(), target) {
            Ok(fd) => fd,
            // Not a descriptor of the job's: the kernel's own answer.
            Err(e) if e.raw_os_error() == Some(c::EBADF) => {
                return self.stale_or(
                    n,
                    Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled),
                );
            }
            Err(_) => return self.stale_or(n, refuse),
        };
        // The thread was alive and blocked in this call throughout: the
        // descriptor is the one it passed.
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        let allowed = match sys::socket_domain(sock.as_fd()) {
            Ok(libc::AF_UNIX) => true,
            // Made in the namespace that leads nowhere: whatever it is
            // bound to (every interface, when unbound) is that
            // namespace's, reachable from the job's own sockets only.
            Ok(libc::AF_INET | libc::AF_INET6)
                if self.tcp_dead_net
                    && self
                        .egress
                        .as_ref()
                        .is_some_and(|e| e.is_dead_net(sock.as_fd())) =>
            {
                true
            }
            Ok(libc::AF_INET | libc::AF_INET6) => sys::local_inet_addr(sock.as_fd())
                .is_ok_and(|local| local.port() != 0 && local.ip().to_canonical().is_loopback()),
            // Not a socket: the kernel's own answer.
            Err(e) if e.raw_os_error() == Some(c::ENOTSOCK) => {
                return Answer::Errno(c::ENOTSOCK, Decision::Emulated, Reason::NotHandled);
            }
            _ => false,
        };
        if !allowed {
            return refuse;
        }
        match nix::sys::socket::listen(&sock, backlog) {
            Ok(()) => Answer::Value(0, Reason::NotHandled),
            Err(e) => Answer::Errno(e as i32, Decision::Emulated, Reason::NotHandled),
        }
    }

    // ----- Sockets from a network namespace that leads nowhere ----------

    /// `socket(AF_INET or AF_INET6, SOCK_DGRAM, 0 or IPPROTO_UDP)` at
    /// FS-ONLY (and with the network off `SOCK_STREAM, 0 or IPPROTO_TCP`
    /// too, `tcp_dead_net`): answered with a socket the egress broker made
    /// in its namespace with only loopback, where every destination is
    /// local and vetto's DNS stub listens on port 53. The arguments are
    /// registers: nothing the job can still change is read. `None`: not
    /// such a socket, or no such namespace: refused (EPERM, recorded) as
    /// the filter refuses every other.
    fn dead_net_socket(&self, n: &Notif) -> Option<Answer> {
        let (domain, kind, protocol) = (
            n.args[0] as u32 as i32,
            n.args[1] as u32 as i32,
            n.args[2] as u32 as i32,
        );
        let v6 = match domain {
            libc::AF_INET => false,
            libc::AF_INET6 => true,
            _ => return None,
        };
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let stream = match (kind & !flags, protocol) {
            (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => false,
            (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) if self.tcp_dead_net => true,
            _ => return None,
        };
        let egress = self.egress.as_ref()?;
        let process = self.describe(n.tid);
        if !self.listener.id_valid(n.id) {
            return Some(Answer::Drop);
        }
        let fd = match egress.dead_net_socket(v6, stream, process)? {
            Ok(fd) => fd,
            Err(e) => {
                return Some(Answer::Errno(
                    sys::errno_of(&e),
                    Decision::Emulated,
                    Reason::DeadNet,
                ));
            }
        };
        // O_NONBLOCK lives on the open file description the job shares.
        if kind & libc::SOCK_NONBLOCK != 0
            && let Err(e) = sys::set_nonblocking(fd.as_fd())
        {
            return Some(Answer::Errno(
                sys::errno_of(&e),
                Decision::Emulated,
                Reason::DeadNet,
            ));
        }
        Some(Answer::Fd {
            fd,
            cloexec: kind & libc::SOCK_CLOEXEC != 0,
            reason: Reason::DeadNet,
            undo: None,
        })
    }

    /// `bind()` with the network off at FS-ONLY (`tcp_dead_net`): on a
    /// socket of the namespace that leads nowhere, performed here on our
    /// copy of it with the address as copied once — any address there is
    /// that namespace's, so there is nothing to decide, and Landlock (which
    /// refuses TCP binds to the job) does not hold the supervisor. Any
    /// other socket: the kernel decides, under the job's own Landlock
    /// domain, as if nothing had been notified.
    fn dead_net_bind(&self, n: &Notif) -> Answer {
        let einval = Answer::Errno(c::EINVAL, Decision::Emulated, Reason::DeadNet);
        let Ok(target) = i32::try_from(n.args[0] as u32) else {
            return Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled);
        };
        let len = n.args[2] as u32 as usize;
        if len > SOCKADDR_MAX {
            return einval;
        }
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return self.stale_or(n, Answer::Continue(Reason::NotHandled));
        };
        let sock = match sys::pidfd_getfd(pidfd.as_fd(), target) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(c::EBADF) => {
                return self.stale_or(
                    n,
                    Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled),
                );
            }
            Err(_) => return self.stale_or(n, Answer::Continue(Reason::NotHandled)),
        };
        let ours = matches!(
            sys::socket_domain(sock.as_fd()),
            Ok(libc::AF_INET | libc::AF_INET6)
        ) && self
            .egress
            .as_ref()
            .is_some_and(|e| e.is_dead_net(sock.as_fd()));
        if !ours {
            return self.stale_or(n, Answer::Continue(Reason::NotHandled));
        }
        let mut addr = [0u8; SOCKADDR_MAX];
        match sys::read_remote(n.tid, n.args[1], &mut addr[..len]) {
            Ok(got) if got == len => {}
            _ => {
                return self.stale_or(
                    n,
                    Answer::Errno(c::EFAULT, Decision::Emulated, Reason::DeadNet),
                );
            }
        }
        // The thread was alive and blocked in this call through the reads:
        // the descriptor and the bytes are the ones it passed.
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        match sys::bind_raw(sock.as_fd(), &addr[..len]) {
            Ok(()) => Answer::Value(0, Reason::DeadNet),
            Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::DeadNet),
        }
    }

    /// `open*("/dev/pts/N", O_RDWR | O_NOCTTY)`: the slave of a pty by the
    /// name `ptsname()` gave (Go's `creack/pty`). `None`: not such an open
    /// (the BPF notifies it for `O_CREAT` too). The path is copied once and
    /// decided on as copied: it must be exactly `/dev/pts/N`, absolute and
    /// in canonical form (what `ptsname()` returns). The job's own
    /// descriptor table must hold the master of pty `N` (a `ptmx`
    /// descriptor, checked with `TIOCGPTN` on the supervisor's own copy).
    /// The supervisor then opens the slave through that master
    /// (`TIOCGPTPEER`), so what the job gets is the slave of a terminal it
    /// already controls entirely, and only if it is the very inode
    /// `/dev/pts/N` names. Anything else → CONTINUE, where Landlock grants
    /// no terminal but the job's own: nothing is granted on this path.
    fn pty_slave_by_path(&self, n: &Notif) -> Option<Answer> {
        let (path_addr, flags) = match n.call {
            Call::Open => (n.args[0], n.args[1] as u32 as i32),
            Call::Openat => (n.args[1], n.args[2] as u32 as i32),
            _ => return None,
        };
        let slave_open = c::O_RDWR | c::O_NOCTTY;
        if !self.pty_peer
            || !n.native
            || flags & (c::O_ACCMODE | c::O_NOCTTY) != slave_open
            || flags & c::O_CREAT != 0
        {
            return None;
        }
        let leave = Some(Answer::Continue(Reason::NotHandled));
        let kept = c::O_ACCMODE | c::O_NOCTTY | c::O_NONBLOCK | c::O_CLOEXEC;
        if flags & !(kept | c::KERNEL_O_LARGEFILE) != 0 {
            return leave;
        }
        let Ok(path) = copy_path(n.tid, path_addr) else {
            return leave;
        };
        let Some(index) = pts_index(path.to_bytes()) else {
            return leave;
        };
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return Some(self.stale_or(n, Answer::Continue(Reason::NotHandled)));
        };
        let Some(master) = held_master(n.tid, pidfd.as_fd(), index) else {
            return Some(self.stale_or(n, Answer::Continue(Reason::NotHandled)));
        };
        // The thread was alive and blocked in this call throughout: the
        // descriptors read are its own.
        if !self.listener.id_valid(n.id) {
            return Some(Answer::Drop);
        }
        let slave = match sys::pty_peer(master.as_fd(), flags & (c::O_ACCMODE | c::O_NONBLOCK)) {
            Ok(slave) => slave,
            Err(e) => {
                return Some(Answer::Errno(
                    sys::errno_of(&e),
                    Decision::Emulated,
                    Reason::OwnPty,
                ));
            }
        };
        let named = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
        let same = match (sys::facts(slave.as_fd()), std::fs::metadata(named)) {
            (Ok(ours), Ok(there)) => {
                use std::os::unix::fs::MetadataExt;
                ours.dev == there.dev() && ours.ino == there.ino()
            }
            _ => false,
        };
        if !same {
            return leave;
        }
        Some(Answer::Fd {
            fd: slave,
            cloexec: flags & c::O_CLOEXEC != 0,
            reason: Reason::OwnPty,
            undo: None,
        })
    }

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

    fn creation(&self, n: &Notified) -> (Answer, Option<PathBuf>) {
        let a = n.args;
        let fd_arg = |i: usize| a[i] as u32 as i32;
        let cwd = c::AT_FDCWD;
        match n.call {
            Call::Open => self.create_file(n, cwd, a[0], a[1] as u32 as i32, a[2] as u32),
            Call::Openat => self.create_file(n, fd_arg(0), a[1], a[2] as u32 as i32, a[3] as u32),
            Call::Creat => self.create_file(
                n,
                cwd,
                a[0],
                c::O_CREAT | c::O_WRONLY | c::O_TRUNC,
                a[1] as u32,
            ),
            Call::Mkdir => self.simple(n, Op::Mkdir(a[1] as u32), cwd, a[0]),
            Call::Mkdirat => self.simple(n, Op::Mkdir(a[2] as u32), fd_arg(0), a[1]),
            Call::Unlink => self.simple(n, Op::Unlink(0), cwd, a[0]),
            Call::Rmdir => self.simple(n, Op::Unlink(c::AT_REMOVEDIR), cwd, a[0]),
            Call::Unlinkat => self.simple(n, Op::Unlink(a[2] as u32 as i32), fd_arg(0), a[1]),
            Call::Symlink => self.simple(n, Op::Symlink(a[0]), cwd, a[1]),
            Call::Symlinkat => self.simple(n, Op::Symlink(a[0]), fd_arg(1), a[2]),
            Call::Rename => self.rename(n, (cwd, a[0]), (cwd, a[1]), 0),
            Call::Renameat => self.rename(n, (fd_arg(0), a[1]), (fd_arg(2), a[3]), 0),
            Call::Renameat2 => self.rename(n, (fd_arg(0), a[1]), (fd_arg(2), a[3]), a[4] as u32),
            Call::Link => self.new_name_only(n, cwd, a[1]),
            Call::Linkat => self.new_name_only(n, fd_arg(2), a[3]),
            Call::Mknod => self.new_name_only(n, cwd, a[0]),
            Call::Mknodat => self.new_name_only(n, fd_arg(0), a[1]),
            _ => (Answer::Continue(Reason::NotHandled), None),
        }
    }

    /// `open*`/`creat` with `O_CREAT`: create exclusively, hand the file over.
    fn create_file(
        &self,
        n: &Notified,
        dirfd: i32,
        path_addr: u64,
        flags: i32,
        mode: u32,
    ) -> (Answer, Option<PathBuf>) {
        let path = match n.path(path_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        let shown = Some(show(&path));
        if flags & c::O_CREAT == 0
            || flags & !(c::O_KEPT | c::O_ABSORBED) != 0
            || flags & c::O_ACCMODE == c::O_ACCMODE
        {
            return (Answer::Continue(Reason::Unsupported), shown);
        }
        if let Some(refused) = self.nested_git(n, dirfd, &path) {
            return (refused, shown);
        }
        let target = match self.locate(n, dirfd, &path, false) {
            Ok(t) => t,
            Err(answer) => {
                let (answer, target) = self.judge_outside(n, dirfd, &path, answer, false);
                return (answer, target.or(shown));
            }
        };
        let umask = match sys::thread_umask(n.tid) {
            Ok(u) => u,
            Err(_) => return (Answer::Continue(Reason::Unreadable), shown),
        };
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, shown);
        }
        if let Err(reason) = self.check_name(target.carved, &target.name) {
            return (Answer::Continue(reason), shown);
        }
        let dir = self.carved[target.carved].fd.as_fd();
        let name = target.name_c.clone();
        let created = match self.file_from_spare(target.carved, &name, flags, mode & !umask) {
            Some(result) => result,
            None => sys::openat2(
                dir,
                &name,
                (flags & c::O_KEPT) | c::O_CREAT | c::O_EXCL | c::O_NOFOLLOW,
                mode & 0o7777 & !umask,
                resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
            ),
        };
        let answer = match created {
            Ok(fd) => {
                if let Ok(f) = sys::facts(fd.as_fd()) {
                    self.remember(f);
                }
                Answer::Fd {
                    fd,
                    cloexec: flags & c::O_CLOEXEC != 0,
                    reason: Reason::CarvedDir,
                    undo: Some((target.carved, name)),
                }
            }
            // It exists (perhaps just now): unless the supervisor made it,
            // Landlock decides on the existing inode, exactly as without
            // the supervisor.
            Err(e) if sys::errno_of(&e) == c::EEXIST => self
                .reopen_created(dir, &name, flags)
                .unwrap_or(Answer::Continue(Reason::Exists)),
            Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::CarvedDir),
        };
        (answer, shown)
    }

    /// Create `name` in carved directory `carved` from a spare file: open
    /// the spare (so the descriptor is the spare's inode whatever happens
    /// to names meanwhile), empty it and give it the job's mode, then move
    /// it into place without replacing anything. `None`: no spare here.
    fn file_from_spare(
        &self,
        carved: usize,
        name: &CStr,
        flags: i32,
        mode: u32,
    ) -> Option<io::Result<OwnedFd>> {
        let spares = self
            .spares
            .as_ref()
            .filter(|s| s.file_dirs.contains(&carved))?;
        let spare = Spares::take(&spares.files)?;
        let fd = match sys::openat2(
            spares.pool.as_fd(),
            &spare,
            (flags & c::O_KEPT) | c::O_NOFOLLOW | c::O_NONBLOCK,
            0,
            resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
        ) {
            Ok(fd) => fd,
            // Gone or replaced: the spare is spent; create plainly.
            Err(_) => return None,
        };
        let usable = sys::facts(fd.as_fd()).is_ok_and(|f| f.is_regular() && f.nlink == 1)
            && (flags & c::O_NONBLOCK != 0 || sys::clear_nonblocking(fd.as_fd()).is_ok())
            && sys::truncate_to_zero(fd.as_fd()).is_ok()
            && sys::fchmod(fd.as_fd(), mode & 0o7777).is_ok();
        if !usable {
            return None;
        }
        let dir = self.carved[carved].fd.as_fd();
        match sys::renameat2(spares.pool.as_fd(), &spare, dir, name, c::RENAME_NOREPLACE) {
            Ok(()) => Some(Ok(fd)),
            Err(e) => {
                Spares::give_back(&spares.files, spare);
                // The name exists: answer as the plain path would; any
                // other failure (another filesystem): create plainly.
                (sys::errno_of(&e) == c::EEXIST).then_some(Err(e))
            }
        }
    }

    /// `mkdir` in carved directory `carved` from a spare directory, which
    /// stays fully writable to the job beneath its new name.
    fn dir_from_spare(&self, carved: usize, name: &CStr, mode: u32) -> Option<io::Result<()>> {
        let spares = self
            .spares
            .as_ref()
            .filter(|s| s.dev == self.carved[carved].dev)?;
        let spare = Spares::take(&spares.dirs)?;
        let fd = sys::openat2(
            spares.pool.as_fd(),
            &spare,
            c::O_RDONLY | c::O_DIRECTORY | c::O_NOFOLLOW,
            0,
            resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
        )
        .ok()?;
        sys::fchmod(fd.as_fd(), mode & 0o7777).ok()?;
        let dir = self.carved[carved].fd.as_fd();
        match sys::renameat2(spares.pool.as_fd(), &spare, dir, name, c::RENAME_NOREPLACE) {
            Ok(()) => Some(Ok(())),
            Err(e) => {
                Spares::give_back(&spares.dirs, spare);
                (sys::errno_of(&e) == c::EEXIST).then_some(Err(e))
            }
        }
    }

    fn remember(&self, f: FileFacts) {
        if let Ok(mut set) = self.created.lock() {
            set.insert((f.dev, f.ino));
        }
    }

    fn was_created_here(&self, f: &FileFacts) -> bool {
        self.created
            .lock()
            .map(|set| set.contains(&(f.dev, f.ino)))
            .unwrap_or(false)
    }

    /// Open again a regular file this supervisor created (and nothing
    /// else: checked on the opened descriptor, before any truncation).
    fn reopen_created(&self, dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> Option<Answer> {
        if flags & c::O_EXCL != 0 {
            return None;
        }
        // O_NONBLOCK: a FIFO swapped in cannot stall the worker.
        let fd = sys::openat2(
            dir,
            name,
            (flags & c::O_KEPT) | c::O_NOFOLLOW | c::O_NONBLOCK,
            0,
            resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
        )
        .ok()?;
        let f = sys::facts(fd.as_fd()).ok()?;
        if !f.is_regular() || f.nlink != 1 || !self.was_created_here(&f) {
            return None;
        }
        if flags & c::O_NONBLOCK == 0 && sys::clear_nonblocking(fd.as_fd()).is_err() {
            return None;
        }
        if flags & c::O_TRUNC != 0 {
            if let Err(e) = sys::truncate_to_zero(fd.as_fd()) {
                return Some(Answer::Errno(
                    sys::errno_of(&e),
                    Decision::Emulated,
                    Reason::CarvedDir,
                ));
            }
        }
        Some(Answer::Fd {
            fd,
            cloexec: flags & c::O_CLOEXEC != 0,
            reason: Reason::CarvedDir,
            undo: None,
        })
    }

    /// `mkdir*`, `unlink*`, `rmdir`, `symlink*`.
    fn simple(
        &self,
        n: &Notified,
        op: Op,
        dirfd: i32,
        path_addr: u64,
    ) -> (Answer, Option<PathBuf>) {
        let path = match n.path(path_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        let shown = Some(show(&path));
        if !matches!(op, Op::Unlink(_))
            && let Some(refused) = self.nested_git(n, dirfd, &path)
        {
            return (refused, shown);
        }
        // Trailing slashes name a directory: fine for mkdir and rmdir,
        // not something to reproduce for files and symlinks.
        let dir_op =
            matches!(op, Op::Mkdir(_)) || matches!(op, Op::Unlink(f) if f == c::AT_REMOVEDIR);
        if let Op::Unlink(flags) = op {
            if flags != 0 && flags != c::AT_REMOVEDIR {
                return (Answer::Continue(Reason::Unsupported), shown);
            }
        }
        let target_bytes = match op {
            Op::Symlink(addr) => match n.path(addr) {
                Ok(t) if !t.as_bytes().is_empty() => Some(t),
                Ok(_) => return (Answer::Continue(Reason::Unsupported), shown),
                Err(answer) => return (answer, shown),
            },
            _ => None,
        };
        let target = match self.locate(n, dirfd, &path, dir_op) {
            Ok(t) => t,
            Err(answer) => {
                let mkdir = matches!(op, Op::Mkdir(_));
                let (answer, target) = self.judge_outside(n, dirfd, &path, answer, mkdir);
                return (answer, target.or(shown));
            }
        };
        let umask = match op {
            Op::Mkdir(_) => match sys::thread_umask(n.tid) {
                Ok(u) => u,
                Err(_) => return (Answer::Continue(Reason::Unreadable), shown),
            },
            _ => 0,
        };
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, shown);
        }
        if let Err(reason) = self.check_name(target.carved, &target.name) {
            return (Answer::Continue(reason), shown);
        }
        let dir = self.carved[target.carved].fd.as_fd();
        let name = &target.name_c;
        let result = match op {
            Op::Mkdir(mode) => self
                .dir_from_spare(target.carved, name, mode & !umask)
                .unwrap_or_else(|| sys::mkdirat(dir, name, mode & 0o7777 & !umask)),
            Op::Unlink(flags) => sys::unlinkat(dir, name, flags),
            Op::Symlink(_) => match &target_bytes {
                Some(t) => sys::symlinkat(t, dir, name),
                None => return (Answer::Continue(Reason::Unsupported), shown),
            },
        };
        (done(result), shown)
    }

    fn rename(
        &self,
        n: &Notified,
        (old_dirfd, old_addr): (i32, u64),
        (new_dirfd, new_addr): (i32, u64),
        flags: u32,
    ) -> (Answer, Option<PathBuf>) {
        let old = match n.path(old_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        let shown = Some(show(&old));
        let new = match n.path(new_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, shown),
        };
        // An exchange puts something new under both names.
        if let Some(refused) = self.nested_git(n, new_dirfd, &new).or_else(|| {
            (flags & c::RENAME_EXCHANGE != 0)
                .then(|| self.nested_git(n, old_dirfd, &old))
                .flatten()
        }) {
            return (refused, shown);
        }
        if flags & !(c::RENAME_NOREPLACE | c::RENAME_EXCHANGE) != 0 {
            return (Answer::Continue(Reason::Unsupported), shown);
        }
        let from = self.locate(n, old_dirfd, &old, true);
        let to = self.locate(n, new_dirfd, &new, true);
        let (from, to) = match (from, to) {
            (Ok(f), Ok(t)) => (Some(f), Some(t)),
            (Ok(f), Err(Answer::Continue(Reason::NotCarved))) => (Some(f), None),
            (Err(Answer::Continue(Reason::NotCarved)), Ok(t)) => (None, Some(t)),
            (
                Err(Answer::Continue(Reason::NotCarved)),
                Err(Answer::Continue(Reason::NotCarved)),
            ) => {
                // Neither side carved: Landlock decides; record a rename
                // the policy would refuse on either side.
                let not_carved = || Answer::Continue(Reason::NotCarved);
                let (a, target) = self.judge_outside(n, old_dirfd, &old, not_carved(), false);
                let (a, target) = match a {
                    Answer::Continue(Reason::NotCarved) => {
                        self.judge_outside(n, new_dirfd, &new, not_carved(), false)
                    }
                    other => (other, target),
                };
                return (a, target.or(shown));
            }
            (Err(a), _) | (_, Err(a)) => return (a, shown),
        };
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, shown);
        }
        for t in [&from, &to].into_iter().flatten() {
            if let Err(reason) = self.check_name(t.carved, &t.name) {
                return (Answer::Continue(reason), shown);
            }
        }
        let answer = match (from, to) {
            (Some(f), Some(t)) if f.carved == t.carved => {
                let dir = self.carved[f.carved].fd.as_fd();
                // A trailing slash is kept: the kernel then insists on
                // directories, as it would have for the job.
                match (f.with_slash(), t.with_slash()) {
                    (Ok(old), Ok(new)) => done(sys::renameat2(dir, &old, dir, &new, flags)),
                    _ => Answer::Continue(Reason::Unsupported),
                }
            }
            // One side in a carved directory (or two different ones):
            // `mv` falls back to copy and unlink, which are emulated.
            _ => Answer::Errno(c::EXDEV, Decision::Emulated, Reason::CrossCarve),
        };
        (answer, shown)
    }

    /// Resolve the parent of `path` as the job sees it (from `dirfd`, its
    /// cwd, or `/`) without following symlinks, and match it against the
    /// carved directories by inode. Anything unclear → CONTINUE.
    fn locate(
        &self,
        n: &Notified,
        dirfd: i32,
        path: &CStr,
        dir_op: bool,
    ) -> Result<Target, Answer> {
        let bytes = path.to_bytes();
        let (parent, name, trailing) = split(bytes).ok_or(Answer::Continue(Reason::Unsupported))?;
        if trailing && !dir_op {
            return Err(Answer::Continue(Reason::Unsupported));
        }
        if name.is_empty() || name == b"." || name == b".." {
            return Err(Answer::Continue(Reason::Unsupported));
        }
        // Absolute paths resolve from the job's own root (at FULL it is
        // not ours), clamped to it with RESOLVE_IN_ROOT.
        let absolute = bytes.first() == Some(&b'/');
        let what = start_dir(bytes, dirfd).ok_or(Answer::Continue(Reason::Unsupported))?;
        let facts: FileFacts = if parent.is_empty() {
            // The common case, a bare name: one stat of the magic link.
            sys::proc_dir_facts(n.tid, &what).map_err(|_| Answer::Continue(Reason::Unreadable))?
        } else if self.not_carved_hint(n, &what, parent) {
            // The next most common (`.git/objects/ab/tmp_obj_…`, and the
            // absolute paths cargo hands rustc): one `statx` shows the
            // parent is none of the carved directories, or does not exist,
            // so Landlock decides — the answer the exact resolution gives
            // whatever it finds (another directory, a link on the way,
            // nothing). For an absolute path the `statx` starts at the
            // job's root but takes an absolute link or a `..` above it
            // from ours: a wrong hint only makes a creation in a carved
            // directory CONTINUE, which Landlock refuses — never a grant.
            return Err(Answer::Continue(Reason::NotCarved));
        } else {
            let base = sys::open_proc_dir(n.tid, &what)
                .map_err(|_| Answer::Continue(Reason::Unreadable))?;
            let in_root = if absolute { resolve::IN_ROOT } else { 0 };
            let p = sys::cstring(parent).map_err(|_| Answer::Continue(Reason::Unsupported))?;
            let parent_fd = sys::openat2(
                base.as_fd(),
                &p,
                c::O_PATH | c::O_DIRECTORY,
                0,
                resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | in_root,
            )
            .map_err(|_| Answer::Continue(Reason::Unsupported))?;
            sys::facts(parent_fd.as_fd()).map_err(|_| Answer::Continue(Reason::Unsupported))?
        };
        let carved = self
            .carved
            .iter()
            .position(|d| d.dev == facts.dev && d.ino == facts.ino)
            .ok_or(Answer::Continue(Reason::NotCarved))?;
        let name_c = sys::cstring(name).map_err(|_| Answer::Continue(Reason::Unsupported))?;
        Ok(Target {
            carved,
            name: name.to_vec(),
            name_c,
            trailing,
        })
    }

    /// A creation outside the carved directories is Landlock's to decide;
    /// when the policy does not make its target writable the kernel will
    /// refuse it, so record the attempt (the answer stays CONTINUE). The
    /// path is the job's, made absolute lexically: this names the attempt
    /// in reports and decides nothing.
    fn judge_outside(
        &self,
        n: &Notified,
        dirfd: i32,
        path: &CStr,
        answer: Answer,
        mkdir: bool,
    ) -> (Answer, Option<PathBuf>) {
        if !matches!(answer, Answer::Continue(Reason::NotCarved)) {
            return (answer, None);
        }
        let bytes = path.to_bytes();
        // The parent as `locate` saw it (one `statx`, already made for a
        // path with a parent; nothing new is read here).
        let seen = match (start_dir(bytes, dirfd), split(bytes)) {
            (Some(what), Some((parent, _, _))) if !parent.is_empty() => Some(n.hint(&what, parent)),
            _ => None,
        };
        // No parent: the kernel answers ENOENT before any permission is
        // checked, so nothing is refused.
        if matches!(seen, Some(Err(c::ENOENT))) {
            return (answer, None);
        }
        // A directory already found writable, with no rule below it: every
        // name in it is too (the longest rule decides), so nothing to read.
        let known = match seen {
            Some(Ok((f, Some(birth)))) => Some((f.dev, f.ino, birth)),
            _ => None,
        };
        let remembered = known.and_then(|k| {
            self.writable_dirs
                .lock()
                .ok()
                .and_then(|w| w.get(&k).copied())
        });
        if remembered == Some(true) {
            return (answer, None);
        }
        let absolute = if bytes.first() == Some(&b'/') {
            PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
        } else {
            let what = if dirfd == c::AT_FDCWD {
                "cwd".to_string()
            } else if dirfd >= 0 {
                format!("fd/{dirfd}")
            } else {
                return (answer, None);
            };
            match std::fs::read_link(format!("/proc/{}/{what}", n.tid)) {
                Ok(base) => base.join(std::ffi::OsStr::from_bytes(bytes)),
                Err(_) => return (answer, None),
            }
        };
        let target = normalise_abs(&absolute);
        let rules = self.resolved_rules().iter().map(|(p, a)| (p.as_path(), *a));
        if writable(rules, &target) {
            if let (Some(k), None) = (known, remembered) {
                self.learn_writable(k, &target);
            }
            return (answer, None);
        }
        // `mkdir -p` of a directory that exists fails with EEXIST before any
        // permission is checked: nothing was refused.
        if mkdir {
            let in_job = Path::new(&format!("/proc/{}/root", n.tid))
                .join(target.strip_prefix("/").unwrap_or(&target));
            if std::fs::symlink_metadata(in_job).is_ok() {
                return (answer, None);
            }
        }
        (Answer::Continue(Reason::OutsidePolicy), Some(target))
    }

    /// Remember that the directory `(dev, ino, birth)` holding `target` is
    /// writable by the policy, if that holds for every name in it: no rule
    /// lies below it, and the path the verdict was made on (the job's,
    /// made absolute lexically) really is that directory, with no link on
    /// the way (one `openat2` with `RESOLVE_NO_SYMLINKS`, once per
    /// directory; a directory where it does not hold is remembered as
    /// such and not looked at again). Only names a refused write, and
    /// decides nothing: Landlock decides on the call.
    fn learn_writable(&self, known: DirId, target: &Path) {
        let holds = target
            .parent()
            .is_some_and(|dir| self.writable_for_every_name(known, dir));
        if let Ok(mut w) = self.writable_dirs.lock() {
            if w.len() >= WRITABLE_DIRS_MAX {
                w.clear();
            }
            w.insert(known, holds);
        }
    }

    fn writable_for_every_name(&self, known: DirId, dir: &Path) -> bool {
        let rules = self.resolved_rules();
        if rules
            .iter()
            .any(|(p, _)| p.as_path() != dir && beneath(p, dir))
        {
            return false;
        }
        let Ok(dir_c) = CString::new(dir.as_os_str().as_bytes()) else {
            return false;
        };
        sys::open_dir_path(Path::new("/"))
            .and_then(|root| {
                sys::openat2(
                    root.as_fd(),
                    &dir_c,
                    c::O_PATH | c::O_DIRECTORY,
                    0,
                    resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS,
                )
            })
            .and_then(|fd| sys::facts(fd.as_fd()))
            .is_ok_and(|f| (f.dev, f.ino) == (known.0, known.1))
    }

    /// `link*`, `mknod*`: only a nested `.git` is refused; Landlock
    /// decides everything else (it denies both in carved directories).
    fn new_name_only(&self, n: &Notified, dirfd: i32, path_addr: u64) -> (Answer, Option<PathBuf>) {
        let path = match n.path(path_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        match self.nested_git(n, dirfd, &path) {
            Some(refused) => (refused, Some(show(&path))),
            None => (Answer::Continue(Reason::NotHandled), None),
        }
    }

    /// A new entry named `.git` (as git on a case-insensitive filesystem
    /// would take it) whose parent lies below the project root: refused
    /// with `EPERM` and recorded (under `--audit`, only recorded). The
    /// name is the supervisor's own copy; refusing on it is safe whatever
    /// the job's memory says later. (A racing thread can still make the
    /// kernel see `.git` where this copy said another name: the check
    /// after the session catches what gets through.) The root's own
    /// `.git` is the carve's (a protected name). A parent that cannot be
    /// resolved is taken to be below the root: refused, closed.
    fn nested_git(&self, n: &Notif, dirfd: i32, path: &CStr) -> Option<Answer> {
        let project = self.project?;
        let bytes = path.to_bytes();
        let (parent, name, _) = split(bytes)?;
        if fold(name) != b".git" {
            return None;
        }
        let below = self
            .below(n.tid, dirfd, bytes, parent, project)
            .unwrap_or(true);
        if !below {
            return None;
        }
        if !self.listener.id_valid(n.id) {
            return Some(Answer::Drop);
        }
        Some(if self.audit {
            Answer::Continue(Reason::NestedGit)
        } else {
            Answer::Errno(c::EPERM, Decision::Denied(c::EPERM), Reason::NestedGit)
        })
    }

    /// Whether the parent of a path (as the job resolves it, following
    /// its symlinks but no magic links) lies strictly below the project
    /// root, found by walking `..` up to the first directory met twice.
    /// `None` when the parent cannot be resolved.
    fn below(
        &self,
        tid: i32,
        dirfd: i32,
        path: &[u8],
        parent: &[u8],
        project: (u64, u64),
    ) -> Option<bool> {
        let mut dir = self.job_dir(tid, dirfd, path, parent)?;
        let dotdot = sys::cstring(b"..").ok()?;
        let mut first = true;
        // PATH_MAX bounds how deep a directory the job can name.
        for _ in 0..libc::PATH_MAX {
            let here = sys::facts(dir.as_fd()).ok()?;
            if (here.dev, here.ino) == project {
                return Some(!first);
            }
            let up = sys::openat2(
                dir.as_fd(),
                &dotdot,
                c::O_PATH | c::O_DIRECTORY,
                0,
                resolve::NO_MAGICLINKS,
            )
            .ok()?;
            let there = sys::facts(up.as_fd()).ok()?;
            if (there.dev, there.ino) == (here.dev, here.ino) {
                return Some(false);
            }
            dir = up;
            first = false;
        }
        None
    }

    /// One `statx` of a relative `parent` from the job's `what` (links
    /// followed) shows a directory that is not carved, or nothing.
    fn not_carved_hint(&self, n: &Notified, what: &str, parent: &[u8]) -> bool {
        match n.hint(what, parent) {
            Ok((f, _)) => !self.carved.iter().any(|d| d.dev == f.dev && d.ino == f.ino),
            // Nothing there: the job's call fails as it would without
            // vetto, unless a racing thread makes the parent first — and
            // then Landlock decides (a carved directory is read-only).
            Err(e) => e == c::ENOENT,
        }
    }

    /// The directory `parent` of `path` names for thread `tid` (from
    /// `dirfd`, its cwd, or its root), following its symlinks but no
    /// magic links.
    fn job_dir(&self, tid: i32, dirfd: i32, path: &[u8], parent: &[u8]) -> Option<OwnedFd> {
        let absolute = path.first() == Some(&b'/');
        let what = start_dir(path, dirfd)?;
        let base = sys::open_proc_dir(tid, &what).ok()?;
        if parent.is_empty() {
            return Some(base);
        }
        let in_root = if absolute { resolve::IN_ROOT } else { 0 };
        let p = sys::cstring(parent).ok()?;
        sys::openat2(
            base.as_fd(),
            &p,
            c::O_PATH | c::O_DIRECTORY,
            0,
            resolve::NO_MAGICLINKS | in_root,
        )
        .ok()
    }

    fn check_name(&self, carved: usize, name: &[u8]) -> Result<(), Reason> {
        let dir = &self.carved[carved];
        // Where names may fold, a non-ASCII name could fold onto a
        // protected one (`conﬁg`, `hoo\u{212a}s`): not emulated.
        if dir.case_insensitive && !name.is_ascii() {
            return Err(Reason::Unsupported);
        }
        let folded = fold(name);
        if dir.protected.contains(&folded) {
            return Err(Reason::Protected);
        }
        Ok(())
    }

    // ----- unix socket brokering ----------------------------------------

    /// Decide a `connect()`. `Ok`: perform this connect; `Err`: answer.
    fn connect(&self, n: &Notif) -> (Result<(Connect, OwnedFd), Answer>, Option<PathBuf>) {
        let sockfd = n.args[0] as u32 as i32;
        let addr_ptr = n.args[1];
        let len = n.args[2] as u32 as i32;
        let denied = |errno, reason| Answer::Errno(errno, Decision::Denied(errno), reason);
        if len < 0 || len as usize > SOCKADDR_MAX {
            return (
                Err(Answer::Errno(
                    c::EINVAL,
                    Decision::Emulated,
                    Reason::SocketNoName,
                )),
                None,
            );
        }
        let len = len as usize;
        let mut addr = [0u8; SOCKADDR_MAX];
        if len > 0 {
            match sys::read_remote(n.tid, addr_ptr, &mut addr[..len]) {
                Ok(got) if got == len => {}
                Ok(_) => {
                    return (
                        Err(Answer::Errno(
                            c::EFAULT,
                            Decision::Emulated,
                            Reason::SocketNoName,
                        )),
                        None,
                    );
                }
                Err(e) if sys::errno_of(&e) == c::EPERM || sys::errno_of(&e) == c::EACCES => {
                    return (Err(denied(c::EPERM, Reason::Unreadable)), None);
                }
                Err(e) if sys::errno_of(&e) == c::ESRCH => {
                    return (
                        Err(self.stale_or(n, denied(c::EPERM, Reason::Unreadable))),
                        None,
                    );
                }
                Err(_) => {
                    return (
                        Err(Answer::Errno(
                            c::EFAULT,
                            Decision::Emulated,
                            Reason::SocketNoName,
                        )),
                        None,
                    );
                }
            }
        }
        // With the network off, an internet address the job may not reach
        // is refused on this one copy of its bytes, and never performed;
        // with filtered egress, the proxy decides on the same copy.
        let mut redirect = None;
        let mut named = None;
        // FS-ONLY with UDP from vetto's namespace that leads nowhere: a
        // refusal waits for the socket, which may be one of those.
        let mut refused = None;
        if let Some(to) = inet_addr(&addr[..len]) {
            if self.net_connect == NetConnect::Proxy {
                match self.route(to) {
                    Route::AsAsked => {}
                    Route::Redirect => redirect = Some((to, false)),
                    Route::Dns => redirect = Some((to, true)),
                    Route::Refuse if self.udp_dead_net => refused = Some(Answer::Refused(to)),
                    Route::Refuse => return (Err(Answer::Refused(to)), None),
                }
            } else if self.net_connect == NetConnect::LoopbackOnly
                && self
                    .egress
                    .as_ref()
                    .is_some_and(|e| e.allows_host_loopback(to))
            {
                // FULL with an IP rule for a loopback address: the host's
                // service there (a CI `services:` database), through the
                // proxy, for programs that ignore the proxy variables too.
                redirect = Some((to, false));
            } else if self.refuses(to) {
                // FULL with filtered egress: an address an IP rule allows
                // goes to the proxy's redirected listener in the namespace.
                let allowed = self.net_connect == NetConnect::LoopbackOnly
                    && self.egress.as_ref().is_some_and(|e| e.allows(to));
                if allowed {
                    redirect = Some((to, false));
                } else if self.udp_dead_net {
                    refused = Some(Answer::Unreachable(to));
                } else {
                    return (Err(Answer::Unreachable(to)), None);
                }
            }
            if redirect.is_none() && self.egress.as_ref().is_some_and(|e| e.names_process(to)) {
                named = Some(to);
            }
        }
        let kind = classify(&addr[..len]);
        // A unix address longer than `sockaddr_un` is one the kernel refuses
        // (EINVAL): vetto, which connects its own resolved copy, must too.
        if kind != SockAddr::Other && len > SOCKADDR_UN_LEN {
            return (
                Err(Answer::Errno(
                    c::EINVAL,
                    Decision::Emulated,
                    Reason::SocketNoName,
                )),
                None,
            );
        }
        let shown = match &kind {
            SockAddr::Path(p) => Some(PathBuf::from(std::ffi::OsStr::from_bytes(p))),
            SockAddr::Abstract(name) => {
                let mut s = b"@".to_vec();
                s.extend_from_slice(name);
                Some(PathBuf::from(std::ffi::OsStr::from_bytes(&s)))
            }
            SockAddr::Other => None,
        };
        // Open the socket path relative to the job's cwd before the
        // validity check, so that one check covers every remote look-up.
        // Absolute socket paths resolve from the job's root, relative ones
        // from its cwd: what the path means to the job.
        let cwd = match &kind {
            SockAddr::Path(p) => {
                let what = if p.first() == Some(&b'/') {
                    "root"
                } else {
                    "cwd"
                };
                match sys::open_proc_dir(n.tid, what) {
                    Ok(fd) => Some(fd),
                    Err(_) => return (Err(denied(c::EPERM, Reason::Unreadable)), shown),
                }
            }
            _ => None,
        };
        let pidfd = match sys::pidfd_open_thread(n.tid) {
            Ok(fd) => fd,
            Err(_) => {
                return (
                    Err(self.stale_or(n, denied(c::EPERM, Reason::Unreadable))),
                    shown,
                );
            }
        };
        let sock = match sys::pidfd_getfd(pidfd.as_fd(), sockfd) {
            Ok(s) => s,
            Err(e) => {
                let errno = sys::errno_of(&e);
                let answer = if !self.listener.id_valid(n.id) {
                    Answer::Drop
                } else if errno == c::EBADF {
                    Answer::Errno(c::EBADF, Decision::Emulated, Reason::SocketNoName)
                } else {
                    denied(c::EPERM, Reason::Unreadable)
                };
                return (Err(answer), shown);
            }
        };
        // The thread was alive and blocked in this call through the memory
        // read, the cwd look-up and pidfd_open: all were about it.
        if !self.listener.id_valid(n.id) {
            return (Err(Answer::Drop), shown);
        }
        let domain = match sys::socket_domain(sock.as_fd()) {
            Ok(d) => d,
            Err(e) => {
                return (
                    Err(Answer::Errno(
                        sys::errno_of(&e),
                        Decision::Emulated,
                        Reason::SocketNoName,
                    )),
                    shown,
                );
            }
        };
        let dead_net = self.udp_dead_net
            && (domain == c::AF_INET || domain == c::AF_INET6)
            && self
                .egress
                .as_ref()
                .is_some_and(|e| e.is_dead_net(sock.as_fd()));
        let stream = || matches!(sys::socket_type(sock.as_fd()), Ok(t) if t == libc::SOCK_STREAM);
        let connect = if dead_net {
            // Decided on the socket itself (our copy of it), not on a
            // number the job can re-point: it can only reach the
            // namespace it was made in. Performed as asked — but a TCP
            // connect to anything but loopback (the job's own servers) is
            // an attempt to leave, refused and recorded, as at FULL; and
            // one to port 53 is DNS over TCP to a resolver, never the
            // job's own: refused (no stub serves TCP there) and recorded.
            match inet_addr(&addr[..len]) {
                Some(to) if self.tcp_dead_net && stream() => {
                    let ip = to.ip().to_canonical();
                    let local = ip.is_loopback() || ip.is_unspecified();
                    if self.net_connect == NetConnect::Proxy {
                        // Filtered egress: decided as for any socket
                        // (`route`), then sent to the proxy's listeners,
                        // which are in this namespace too. Loopback is
                        // the job's own unless an IP rule names the
                        // host's service there (`--audit` allows every
                        // address: its loopback stays the job's).
                        match (redirect, named) {
                            (Some((to, true)), _) => match self.dead_net_via(domain, true) {
                                Some(via) => Connect::Redirect { to, via },
                                None => return (Err(Answer::Refused(to)), shown),
                            },
                            (Some((to, false)), _) if !local || !self.audit => {
                                match self.dead_net_via(domain, false) {
                                    Some(via) => Connect::Redirect { to, via },
                                    None => return (Err(Answer::Refused(to)), shown),
                                }
                            }
                            (_, Some(to)) => Connect::Named { addr, len, to },
                            _ if local && self.reaches_for_host_service(None, to) => {
                                return (Err(Answer::Refused(to)), shown);
                            }
                            _ if local => Connect::Raw(addr, len, Reason::DeadNet),
                            _ => {
                                return (Err(refused.unwrap_or(Answer::Refused(to))), shown);
                            }
                        }
                    } else {
                        if !local {
                            return (Err(Answer::Unreachable(to)), shown);
                        }
                        if to.port() == 53 || self.reaches_for_host_service(None, to) {
                            return (Err(Answer::Refused(to)), shown);
                        }
                        Connect::Raw(addr, len, Reason::DeadNet)
                    }
                }
                _ => Connect::Raw(addr, len, Reason::DeadNet),
            }
        } else if let Some(answer) = refused {
            return (Err(answer), shown);
        } else if domain != c::AF_UNIX
            && domain != c::AF_INET
            && domain != c::AF_INET6
            && self.net_connect != NetConnect::Open
        {
            // Netlink and the rest: the supervisor's credentials would
            // decide for the job's socket. Not with the network off.
            return (Err(denied(c::EACCES, Reason::Forbidden)), shown);
        } else if let Some((to, dns)) = redirect {
            // Allowed by address: to the proxy, never to `to` itself (a
            // DNS query: to the DNS stub). Only a TCP internet socket can
            // be handed over.
            let stream = stream();
            let v6 = domain == c::AF_INET6;
            let via = self.egress.as_ref().and_then(|e| {
                if dns {
                    e.dns_via(v6)
                } else {
                    e.redirect_to(v6)
                }
            });
            match via {
                Some(via) if stream && domain != c::AF_UNIX => Connect::Redirect { to, via },
                _ => return (Err(Answer::Refused(to)), shown),
            }
        } else if let Some(to) = named.filter(|_| domain != c::AF_UNIX) {
            Connect::Named { addr, len, to }
        } else if domain != c::AF_UNIX {
            // An internet socket the network mode lets through (host
            // network, or the job's own loopback at FULL; the address was
            // checked above). Performing it ourselves keeps the job from
            // swapping in a unix socket after the check.
            if let Some(to) = inet_addr(&addr[..len])
                && self.net_connect == NetConnect::LoopbackOnly
                && stream()
                && self.reaches_for_host_service(Some(n.tid), to)
            {
                return (Err(Answer::Refused(to)), shown);
            }
            Connect::Raw(addr, len, Reason::SocketNoName)
        } else {
            match kind {
                SockAddr::Other => Connect::Raw(addr, len, Reason::SocketNoName),
                SockAddr::Abstract(name) => {
                    // CONTINUE would let the job rewrite the address into a
                    // path after this check, and a connect of ours skips
                    // Landlock's abstract-socket scoping: so reproduce the
                    // scoping here (the listener must belong to the job).
                    match abstract_owner(n.tid, &name) {
                        Owner::Job => Connect::Raw(addr, len, Reason::SocketAbstract),
                        Owner::Nobody => {
                            return (
                                Err(Answer::Errno(
                                    c::ECONNREFUSED,
                                    Decision::Emulated,
                                    Reason::SocketAbstract,
                                )),
                                shown,
                            );
                        }
                        // Audit: what would be refused is performed, and named.
                        Owner::Outside if self.audit => Connect::Raw(addr, len, Reason::WouldDeny),
                        Owner::Outside => {
                            return (Err(denied(c::EACCES, Reason::SocketAbstract)), shown);
                        }
                    }
                }
                SockAddr::Path(p) => match self.check_socket_path(cwd, &p) {
                    Ok((target, reason)) => Connect::Checked(target, reason),
                    Err(answer) => return (Err(answer), shown),
                },
            }
        };
        (Ok((connect, sock)), shown)
    }

    /// Whether a connect to `to` is refused: with the network off, anything
    /// at FS-ONLY (the job cannot create such a socket: one it holds was
    /// smuggled in, or made in vetto's namespace that leads nowhere, which
    /// `connect` tells apart by the socket itself), and at FULL anything
    /// but the job's own loopback.
    fn refuses(&self, to: std::net::SocketAddr) -> bool {
        let ip = to.ip().to_canonical();
        match self.net_connect {
            NetConnect::Open => false,
            NetConnect::LoopbackOnly => !ip.is_loopback() && !ip.is_unspecified(),
            NetConnect::Closed => true,
            // Decided by `route`.
            NetConnect::Proxy => true,
        }
    }

    /// Filtered egress (FS-ONLY): the proxy's own explicit listener is
    /// reached as asked (and nothing else on the host's loopback: other
    /// local ports stay refused), a DNS query (port 53, any address) goes
    /// to the DNS stub, an address the proxy allows (an IP rule, or a
    /// synthetic address standing for a name) is redirected to it,
    /// everything else refused. No proxy: refused.
    fn route(&self, to: std::net::SocketAddr) -> Route {
        let Some(egress) = &self.egress else {
            return Route::Refuse;
        };
        let to = std::net::SocketAddr::new(to.ip().to_canonical(), to.port());
        if egress.explicit().contains(&to) {
            Route::AsAsked
        } else if to.port() == 53 && egress.dns_via(false).is_some() {
            Route::Dns
        } else if egress.allows(to) {
            Route::Redirect
        } else {
            Route::Refuse
        }
    }

    /// A TCP connect to loopback (`to`) in the sandbox's own network —
    /// FULL's namespace (that of thread `tid`), or at FS-ONLY the one that
    /// leads nowhere (`tid` `None`) — where none of the job's servers
    /// listens, but a service of the host's does: the job reaching for the
    /// host's service. The namespace refuses it all the same; this names
    /// it, so that it is recorded with its process (issue P10, item 6).
    /// A connect where nothing listens at all reached nothing, and a test
    /// suite's wait-for-port loop before its own server is up is no
    /// finding. Read from the kernel's socket tables, not from the job's
    /// memory; a server the job starts right after this look still gets
    /// its connection.
    fn reaches_for_host_service(&self, tid: Option<i32>, to: std::net::SocketAddr) -> bool {
        let ip = to.ip().to_canonical();
        if self.audit || !(ip.is_loopback() || ip.is_unspecified()) {
            return false;
        }
        let sandbox = match tid {
            Some(tid) => Some(PathBuf::from(format!("/proc/{tid}/net"))),
            None => self.egress.as_ref().and_then(|e| e.dead_net_proc()),
        };
        let Some(sandbox) = sandbox else {
            return false;
        };
        !sys::tcp_listens(&sandbox, to) && sys::tcp_listens(Path::new("/proc/self/net"), to)
    }

    /// Where a redirected connect of a socket of the namespace that leads
    /// nowhere goes: the proxy's (or, `dns`, the DNS stub's) listener
    /// there for the socket's family.
    fn dead_net_via(&self, domain: i32, dns: bool) -> Option<std::net::SocketAddr> {
        let v6 = domain == c::AF_INET6;
        let egress = self.egress.as_ref()?;
        if dns {
            egress.dns_via(v6)
        } else {
            egress.redirect_to(v6)
        }
    }

    /// Nothing to answer if the notification is gone; `answer` otherwise
    /// (an unanswered live notification would hang the job's thread).
    fn stale_or(&self, n: &Notif, answer: Answer) -> Answer {
        if self.listener.id_valid(n.id) {
            answer
        } else {
            Answer::Drop
        }
    }

    fn check_socket_path(
        &self,
        base: Option<OwnedFd>,
        path: &[u8],
    ) -> Result<(OwnedFd, Reason), Answer> {
        let denied = |errno, reason| Answer::Errno(errno, Decision::Denied(errno), reason);
        let c_path = sys::cstring(path).map_err(|_| denied(c::EACCES, Reason::SocketOutside))?;
        let Some(base) = base else {
            return Err(denied(c::EACCES, Reason::SocketOutside));
        };
        // An absolute path starts at the job's root and stays in it.
        let in_root = if path.first() == Some(&b'/') {
            resolve::IN_ROOT
        } else {
            0
        };
        // Follow symlinks as the kernel would; decide on what was reached.
        let target = sys::openat2(
            base.as_fd(),
            &c_path,
            c::O_PATH,
            0,
            resolve::NO_MAGICLINKS | in_root,
        )
        .map_err(|e| {
            let errno = sys::errno_of(&e);
            // At FULL a host socket outside the job's view is simply not
            // there for the job; it still asked for it, so name it. The
            // job's answer stays what its view says.
            if errno == c::ENOENT && in_root != 0 && host_socket_at(&c_path) {
                denied(errno, Reason::SocketOutside)
            } else {
                Answer::Errno(errno, Decision::Emulated, Reason::SocketOutside)
            }
        })?;
        let facts = sys::facts(target.as_fd()).map_err(|e| {
            Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::SocketOutside)
        })?;
        if !facts.is_socket() {
            return Err(Answer::Errno(
                c::ECONNREFUSED,
                Decision::Emulated,
                Reason::SocketOutside,
            ));
        }
        let real =
            sys::fd_path(target.as_fd()).map_err(|_| denied(c::EACCES, Reason::SocketOutside))?;
        if !self.unix_sockets.contains(&(facts.dev, facts.ino)) && !self.socket_allowed(&real) {
            // Audit: connect anyway, and name it.
            if self.audit {
                return Ok((target, Reason::WouldDeny));
            }
            return Err(denied(c::EACCES, Reason::SocketOutside));
        }
        Ok((target, Reason::SocketAllowed))
    }

    /// Whether `real`, the resolved path of a socket inode, lies where the
    /// policy's filesystem rules allow sockets (writable).
    fn socket_allowed(&self, real: &Path) -> bool {
        if !real.is_absolute() || real.as_os_str().as_bytes().ends_with(b" (deleted)") {
            return false;
        }
        let rules = self.resolved_rules().iter().map(|(p, a)| (p.as_path(), *a));
        writable(rules, real)
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

    /// Connect the job's socket (our copy) and answer. A blocking socket
    /// may wait long (a full backlog, a slow TCP handshake): that wait
    /// happens in a thread of its own so the workers keep answering.
    fn perform_connect(
        self: &Arc<Self>,
        n: Notif,
        connect: Connect,
        sock: OwnedFd,
        path: Option<PathBuf>,
        events: &Sender<NotifyEvent>,
    ) {
        let reason = match connect {
            Connect::Checked(_, reason) | Connect::Raw(_, _, reason) => reason,
            Connect::Redirect { .. } => Reason::Redirected,
            Connect::Named { .. } => Reason::SocketNoName,
        };
        let may_block = !matches!(sys::is_nonblocking(sock.as_fd()), Ok(true));
        let run = move |shared: &Shared, events: &Sender<NotifyEvent>| {
            let result = match &connect {
                Connect::Checked(target, _) => {
                    sys::connect_to_checked(sock.as_fd(), target.as_fd())
                }
                Connect::Raw(addr, len, _) => sys::connect_raw(sock.as_fd(), &addr[..*len]),
                Connect::Redirect { to, via } => shared.redirect(&n, sock.as_fd(), *to, *via),
                Connect::Named { addr, len, to } => {
                    shared.name_process(&n, sock.as_fd(), *to);
                    sys::connect_raw(sock.as_fd(), &addr[..*len])
                }
            };
            let answer = match result {
                Ok(()) => Answer::Value(0, reason),
                // EINPROGRESS/EAGAIN pass through unchanged: the job polls
                // its own descriptor, which shares our file description.
                Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, reason),
            };
            shared.answer(&n, n.call.name(), answer, path, events);
        };
        if !may_block {
            run(self, events);
            return;
        }
        // A blocking connect may wait for long (a full backlog, a slow
        // handshake): it runs in a pool thread, never in a worker, so the
        // workers keep answering and end when the job is gone.
        let shared = Arc::clone(self);
        let events = events.clone();
        let id = n.id;
        let task: Task = Box::new(move || {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&shared, &events);
            }));
            if ran.is_err() {
                let _ = shared.listener.respond_errno(id, c::EPERM);
            }
        });
        if let Err(task) = self.pool.submit(task) {
            // At the thread cap: wait here rather than fail the call.
            task();
        }
    }
}

impl Shared {
    /// Connect the job's socket (our copy) to the proxy's redirected
    /// listener, telling the proxy first what it stands for: the socket is
    /// bound (to loopback, if the job did not bind it) so its address is
    /// known before the proxy can see the connection.
    fn redirect(
        &self,
        n: &Notif,
        sock: BorrowedFd<'_>,
        to: std::net::SocketAddr,
        via: std::net::SocketAddr,
    ) -> io::Result<()> {
        let egress = self
            .egress
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(c::ECONNREFUSED))?;
        let local = bound_to_loopback(sock, via)?;
        egress.expect(local, to, Some(self.describe(n.tid)));
        sys::connect_raw(sock, &sys::inet_bytes(via))
    }

    /// Tell the proxy which process the connection from this socket to
    /// its listener at `to` comes from. Attribution only: if the socket
    /// cannot be bound first, the connect goes ahead unnamed.
    fn name_process(&self, n: &Notif, sock: BorrowedFd<'_>, to: std::net::SocketAddr) {
        if let Some(egress) = &self.egress
            && let Ok(local) = bound_to_loopback(sock, to)
        {
            egress.expect(local, to, Some(self.describe(n.tid)));
        }
    }
}

/// The local address of `sock`, bound first (to the loopback address of
/// `to`'s family, as the connect to `to` would bind it) if the job did not
/// bind it, so that it is known before the connection exists.
fn bound_to_loopback(
    sock: BorrowedFd<'_>,
    to: std::net::SocketAddr,
) -> io::Result<std::net::SocketAddr> {
    let local = sys::local_inet_addr(sock)?;
    if local.port() != 0 {
        return Ok(local);
    }
    let loopback: std::net::IpAddr = match to.ip() {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        // A v4-mapped destination from a dual-stack socket.
        std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => {
            std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped().into()
        }
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    sys::bind_inet(sock, std::net::SocketAddr::new(loopback, 0))?;
    sys::local_inet_addr(sock)
}

type Task = Box<dyn FnOnce() + Send>;

/// Threads for connects that may block, reused (a hand-off costs far less
/// than a thread start) and added when none is idle, up to a cap.
struct ConnectPool {
    tx: Sender<Task>,
    inner: Arc<PoolInner>,
}

struct PoolInner {
    rx: Mutex<std::sync::mpsc::Receiver<Task>>,
    idle: AtomicUsize,
    live: AtomicUsize,
}

impl std::fmt::Debug for ConnectPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectPool")
            .field("idle", &self.inner.idle.load(Ordering::Relaxed))
            .field("live", &self.inner.live.load(Ordering::Relaxed))
            .finish()
    }
}

impl ConnectPool {
    fn new() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        ConnectPool {
            tx,
            inner: Arc::new(PoolInner {
                rx: Mutex::new(rx),
                idle: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
            }),
        }
    }

    /// Hand `task` to an idle thread (reserved first, so every queued task
    /// has a thread of its own) or to a new one. `Err` at the cap.
    fn submit(&self, task: Task) -> Result<(), Task> {
        let inner = &self.inner;
        let reserved = inner
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !reserved {
            if inner.live.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECT_THREADS {
                inner.live.fetch_sub(1, Ordering::AcqRel);
                return Err(task);
            }
            let pool = Arc::clone(inner);
            let spawned = std::thread::Builder::new()
                .name("vetto-connect".into())
                .spawn(move || pool.run());
            if spawned.is_err() {
                inner.live.fetch_sub(1, Ordering::AcqRel);
                return Err(task);
            }
        }
        self.tx.send(task).map_err(|e| e.0)
    }
}

impl PoolInner {
    fn run(&self) {
        loop {
            let task = match self.rx.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => break,
            };
            // The sender is gone with the supervisor state: nothing is left.
            let Ok(task) = task else { break };
            task();
            self.idle.fetch_add(1, Ordering::AcqRel);
        }
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A located name in a carved directory.
struct Target {
    carved: usize,
    name: Vec<u8>,
    name_c: CString,
    /// The job's path ended in `/`.
    trailing: bool,
}

impl Target {
    fn with_slash(&self) -> io::Result<CString> {
        if self.trailing {
            let mut bytes = self.name.clone();
            bytes.push(b'/');
            sys::cstring(&bytes)
        } else {
            Ok(self.name_c.clone())
        }
    }
}

#[derive(Clone, Copy)]
enum Op {
    Mkdir(u32),
    /// `unlinkat` flags: 0 or `AT_REMOVEDIR`.
    Unlink(i32),
    /// Address of the symlink target in the job's memory.
    Symlink(u64),
}

/// The kinds of socket address.
#[derive(Debug, PartialEq, Eq)]
enum SockAddr {
    /// `AF_UNIX` with a path (up to the first NUL, as the kernel reads it).
    Path(Vec<u8>),
    /// `AF_UNIX` abstract name (after the leading NUL).
    Abstract(Vec<u8>),
    /// Unnamed, too short, or another family.
    Other,
}

/// The sockets `[network] unix` names, opened `O_PATH` (symlinks
/// followed, as the job's connect would) with their (dev, ino). A path
/// that is no socket now is left out: nothing there is allowed (the plan
/// refused the session if it was none when planning).
/// Whether an absolute path names a socket in vetto's own view of the
/// host (for the record only: it decides nothing the job gets).
fn host_socket_at(path: &CStr) -> bool {
    let Ok(root) = sys::open_dir_path(Path::new("/")) else {
        return false;
    };
    sys::openat2(
        root.as_fd(),
        path,
        c::O_PATH,
        0,
        resolve::NO_MAGICLINKS | resolve::IN_ROOT,
    )
    .and_then(|fd| sys::facts(fd.as_fd()))
    .is_ok_and(|f| f.is_socket())
}

fn named_sockets(paths: &[PathBuf]) -> Vec<(std::fs::File, (u64, u64))> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    paths
        .iter()
        .filter_map(|path| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(c::O_PATH)
                .open(path)
                .ok()?;
            let md = file.metadata().ok()?;
            md.file_type()
                .is_socket()
                .then(|| (file, (md.dev(), md.ino())))
        })
        .collect()
}

/// A `sockaddr_in` or `sockaddr_in6`, read from its bytes (ports and
/// addresses in network order, the family in ours).
/// A `clone` whose flags ask for a thread or a namespace: not a plain
/// new process (`fork`/`vfork` take no flags).
fn creates_namespaces(n: &Notif) -> bool {
    /// CLONE_THREAD and every CLONE_NEW* flag.
    const NOT_A_FORK: u64 = 0x0001_0000 | 0x7e02_0000;
    n.nr == libc::SYS_clone && n.args[0] & NOT_A_FORK != 0
}

fn inet_addr(addr: &[u8]) -> Option<std::net::SocketAddr> {
    let family = i32::from(u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]));
    let port = u16::from_be_bytes([*addr.get(2)?, *addr.get(3)?]);
    if family == c::AF_INET {
        let ip: [u8; 4] = addr.get(4..8)?.try_into().ok()?;
        Some(std::net::SocketAddr::from((ip, port)))
    } else if family == c::AF_INET6 {
        let ip: [u8; 16] = addr.get(8..24)?.try_into().ok()?;
        Some(std::net::SocketAddr::from((ip, port)))
    } else {
        None
    }
}

fn classify(addr: &[u8]) -> SockAddr {
    if addr.len() <= SUN_PATH_OFFSET {
        return SockAddr::Other;
    }
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    if i32::from(family) != c::AF_UNIX {
        return SockAddr::Other;
    }
    let sun_path = &addr[SUN_PATH_OFFSET..];
    if sun_path[0] == 0 {
        return SockAddr::Abstract(sun_path[1..].to_vec());
    }
    let end = sun_path
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(sun_path.len());
    SockAddr::Path(sun_path[..end].to_vec())
}

enum Owner {
    /// Every listener of the name is held by a process of the job.
    Job,
    /// No listener.
    Nobody,
    /// Anything else (outside, unknown, ambiguous).
    Outside,
}

/// Who listens on the abstract `name`: the job's processes (descendants of
/// the supervisor), nobody, or someone else. Slow (walks /proc) and only
/// for abstract connects, which are rare. A listener could change between
/// this look and the connect only if a process outside the sandbox binds
/// the very name the job just released.
fn abstract_owner(tid: i32, name: &[u8]) -> Owner {
    let inodes = match sys::abstract_listeners(tid, name) {
        Ok(Some(inodes)) => inodes,
        _ => return Owner::Outside,
    };
    if inodes.is_empty() {
        return Owner::Nobody;
    }
    let Ok(job) = sys::descendants() else {
        return Owner::Outside;
    };
    if inodes
        .iter()
        .all(|&ino| job.iter().any(|&pid| sys::holds_socket(pid, ino)))
    {
        Owner::Job
    } else {
        Owner::Outside
    }
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

/// Descriptors of a job's thread looked at for a pty master, at most.
const MAX_FDS_SCANNED: usize = 4096;

/// `N` of `/dev/pts/N`, written exactly as `ptsname()` writes it (no
/// leading zeros, nothing around it).
fn pts_index(path: &[u8]) -> Option<u32> {
    let digits = path.strip_prefix(b"/dev/pts/")?;
    let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (n.to_string().as_bytes() == digits).then_some(n)
}

/// The supervisor's own copy of a descriptor in thread `tid`'s table that
/// is the master of pty `index`. The `/proc` link (a `ptmx`) only picks
/// candidates; `TIOCGPTN` on the copy decides.
fn held_master(tid: i32, pidfd: BorrowedFd<'_>, index: u32) -> Option<OwnedFd> {
    let fds = std::fs::read_dir(format!("/proc/{tid}/fd")).ok()?;
    for entry in fds.take(MAX_FDS_SCANNED).flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|f| f.parse().ok()) else {
            continue;
        };
        let is_ptmx = std::fs::read_link(entry.path())
            .is_ok_and(|link| link.as_os_str().as_bytes().ends_with(b"/ptmx"));
        if !is_ptmx {
            continue;
        }
        let Ok(ours) = sys::pidfd_getfd(pidfd, fd) else {
            continue;
        };
        if sys::pty_number(ours.as_fd()).is_ok_and(|n| n == index) {
            return Some(ours);
        }
    }
    None
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

/// The comparison form of a name: ASCII lower case, without the trailing
/// dots and spaces some filesystems drop (`.git.` is `.git` on vfat).
fn fold(name: &[u8]) -> Vec<u8> {
    let mut end = name.len();
    while end > 0 && matches!(name[end - 1], b'.' | b' ') {
        end -= 1;
    }
    // `.` and `..` fold to nothing; keep them as they are.
    let kept = if end == 0 { name } else { &name[..end] };
    kept.to_ascii_lowercase()
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
    fn protected_name_variants_fold_to_the_same_name() {
        for variant in [".git", ".GIT", ".Git.", ".git ", ".git..", ".gIt. ."] {
            assert_eq!(fold(variant.as_bytes()), b".git", "{variant}");
        }
        assert_eq!(fold(b"HOOKS"), b"hooks");
        assert_ne!(fold(b".gitignore"), b".git");
        assert_eq!(fold(b".."), b"..");
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
