//! Filesystem rules → Landlock grants, with carving for `deny`/`protect`
//! beneath an allowed root, and the directories where the supervisor
//! emulates creation because carving took the create rights away.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::FsRule;
// The decision rule lives with the policy; the plan applies it.
pub use crate::policy::Access;
pub use crate::policy::paths::{beneath, decide, decide_rule, normalise_abs};

/// Whether the policy's rules (the longest match decides) make `path`
/// writable: what the notification server asks of them for a creation
/// outside the carved directories, a socket's path and a metadata change.
pub fn writable<'a>(rules: impl IntoIterator<Item = (&'a Path, Access)>, path: &Path) -> bool {
    matches!(decide(rules, path), Some((Access::Write, _)))
}

/// Landlock filesystem access rights, with the kernel's bit values
/// (`LANDLOCK_ACCESS_FS_*`, stable UAPI).
pub mod rights {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;

    /// Rights that make sense on a regular file (the kernel rejects others).
    pub const FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    pub const READ: u64 = EXECUTE | READ_FILE | READ_DIR;

    /// Every filesystem right the given ABI knows.
    pub fn all_for_abi(abi: u8) -> u64 {
        let mut all = (1 << 13) - 1;
        if abi >= 2 {
            all |= REFER;
        }
        if abi >= 3 {
            all |= TRUNCATE;
        }
        if abi >= 5 {
            all |= IOCTL_DEV;
        }
        all
    }
}

/// One `landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockRule {
    pub path: PathBuf,
    /// `rights::*` bits, already masked to file rights for non-directories.
    pub access: u64,
}

/// What the child hands to Landlock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The ABI the ruleset is built for (every ABI the kernel has, up to 7).
    pub abi: u8,
    /// Rights the ruleset handles (denied unless a rule grants them).
    pub handled_fs: u64,
    /// Handle TCP bind/connect with no rule: no TCP at all (ABI 4).
    pub deny_tcp: bool,
    /// Scope signals and abstract unix sockets to the sandbox (ABI 6).
    pub scope: bool,
    pub rules: Vec<LandlockRule>,
}

/// A directory where carving removed the create/remove rights: the
/// supervisor performs creations, renames and removals of unprotected
/// names itself, on its own descriptor of this directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarvedDir {
    pub path: PathBuf,
    /// Names that must never be created, removed or renamed here, compared
    /// case-insensitively (`.git`, `hooks`, `config`, …).
    pub protected_names: Vec<String>,
}

/// Entries made before the domain exists and granted by their own inode.
/// Landlock rules follow an inode across renames, so a spare the
/// supervisor renames into a carved directory becomes a new entry the job
/// can fully use: a directory it can fill (a plainly created directory
/// there would stay read-only), or, in a list-only directory (a masked file
/// sits in it), a file it can read back and execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SparePool {
    /// Where the spares wait: inside the project's `.git` (same filesystem,
    /// invisible to `git status`); created by the stage, removed by vetto
    /// when the session ends.
    pub dir: PathBuf,
    /// Names of spare regular files in `dir`.
    pub files: Vec<String>,
    /// Names of spare directories in `dir`.
    pub dirs: Vec<String>,
    /// Carved directories whose new files come from spares (the list-only
    /// ones); new directories come from spares in every carved directory
    /// on the pool's filesystem.
    pub file_dirs: Vec<PathBuf>,
}

impl SparePool {
    /// Spares per session: enough for the top-level entries builds, test
    /// suites and agents create (`target`, `node_modules`, `.venv`,
    /// `.pytest_cache`, `htmlcov`, `dist`, …). Rules are fixed when the
    /// domain is made, so the pool cannot grow later: past it a new entry
    /// is refused and recorded (`Reason::SparesSpent`), never made as one
    /// the job could not fill or read back. A spare directory costs a
    /// block to make and to remove when unused; a spare file, none.
    pub const FILES: usize = 64;
    pub const DIRS: usize = 16;
}

/// What the supervisor decides through seccomp user notification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyPlan {
    /// Emulate creation in these directories.
    pub carved_dirs: Vec<CarvedDir>,
    /// Broker `connect()` to pathname unix sockets: allowed only where the
    /// resolved socket lies in a writable, unexcepted part of the policy.
    pub broker_unix_connect: bool,
    /// The filesystem rules, for deciding socket paths (longest match wins).
    pub rules: Vec<(PathBuf, Access)>,
    /// `[network] unix`: sockets allowed wherever they lie. The supervisor
    /// opens each when it starts and allows exactly those inodes (a socket
    /// bound at the path later is not allowed).
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
    /// Spares for the project root when a masked file sits in it.
    #[serde(default)]
    pub spares: Option<SparePool>,
    /// Calls the filter refuses outright but notifies, so the supervisor
    /// answers `EPERM` and records the attempt (`SeccompPlan::record_denials`).
    #[serde(default)]
    pub denied_calls: Vec<String>,
    /// `--audit`: allow what the policy would refuse, and record it.
    #[serde(default)]
    pub audit: bool,
    /// `bind()` is notified: a pathname unix socket's where the policy
    /// allows no writing is recorded (the kernel refuses it).
    #[serde(default)]
    pub unix_bind: bool,
    /// Which `connect()`s of sockets other than unix ones the supervisor
    /// performs. It performs them itself (so the job cannot swap in a unix
    /// socket after the check), and so outside Landlock's TCP rules and
    /// with its own credentials: with the network off it must not.
    #[serde(default)]
    pub net_connect: NetConnect,
    /// Open the slave of a pseudo-terminal the job created
    /// (`ioctl(master, TIOCGPTPEER)`) on the supervisor's copy of the
    /// master: where the host's `/dev/pts` is shared (FS-ONLY), Landlock
    /// grants only the job's own terminal there (see `plan::terminal`).
    #[serde(default)]
    pub pty_peer: bool,
    /// The project root: an entry named `.git` below it (a nested
    /// repository, which a later `git status` would act on outside the
    /// sandbox) is refused wherever the supervisor sees it created.
    #[serde(default)]
    pub project: Option<PathBuf>,
    /// The shared host directories scrubbed after the session
    /// (`Plan::scrub_dirs`): the name of every entry the job is seen
    /// creating directly in one of them is reported, so the scrub removes
    /// only what the job made (see `docs/tiers.md`).
    #[serde(default)]
    pub shared_dirs: Vec<PathBuf>,
    /// Filtered egress without a namespace (FS-ONLY), where unprivileged
    /// user namespaces exist: each UDP `socket()` of the job is answered
    /// with a socket made in a network namespace of vetto's that has only
    /// loopback (every destination local there), where vetto's DNS stub
    /// listens on port 53. Without it, UDP sockets are refused.
    #[serde(default)]
    pub udp_dead_net: bool,
    /// Below FULL (FS-ONLY), network off or filtered, where that namespace
    /// exists: each TCP `socket()` is answered with a socket made there
    /// too, so the job's own servers work on its loopback (bind, listen,
    /// connect) and face nothing else; its `bind()` and `connect()` are
    /// performed by the supervisor on its own copy (Landlock refuses them
    /// to the job). With the network off a connect to anything but
    /// loopback is refused and recorded; with filtered egress the proxy's
    /// listeners are in that namespace too, and a connect is decided as
    /// before, then sent to them.
    #[serde(default)]
    pub tcp_dead_net: bool,
    /// Filtered egress without a namespace (FS-ONLY): each `listen()` of
    /// the job is decided by the supervisor on its own copy of the socket.
    /// A unix socket, or an internet socket bound to a loopback address,
    /// is made to listen by the supervisor; an unbound internet socket
    /// (which the kernel would bind to every interface) or one bound
    /// elsewhere is refused and recorded.
    #[serde(default)]
    pub listen: bool,
    /// Mode, owner and time changes (`chmod`, `chown`, `utimensat`, …),
    /// which Landlock does not restrict: FS-ONLY, where no read-only mount
    /// refuses them. The supervisor performs each on its own descriptor of
    /// the target, only where the policy makes the target writable and it
    /// is no carved directory's protected name; anything else is refused
    /// (`EPERM`) and recorded.
    #[serde(default)]
    pub metadata: bool,
    /// FULL: the job's root is a view vetto built, which leaves out what
    /// the policy grants nothing of. A creation whose parent that view
    /// lacks but the host has reached for a host path the policy keeps
    /// from the job (the kernel answers `ENOENT`): it is recorded as the
    /// refused write it is, as it would be where the view is the host's.
    #[serde(default)]
    pub own_view: bool,
    /// Refused calls the policy expects (`[syscalls] expected`, by the
    /// names the supervisor gives them): still refused, recorded as
    /// expected rather than as findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_calls: Vec<String>,
}

/// What the supervisor does with a `connect()` that is not to a unix socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetConnect {
    /// The network is the host's: performed.
    #[default]
    Open,
    /// The network is off by a namespace of its own (FULL): loopback is the
    /// job's own and performed; any other internet address is an attempt
    /// to leave, refused with `ENETUNREACH` (as the missing route would)
    /// and recorded; other families are refused.
    LoopbackOnly,
    /// The network is off without a namespace (FS-ONLY, SECCOMP): the job
    /// cannot create such sockets, so one it holds was smuggled in (received
    /// over a unix socket): refused like the above, loopback included.
    Closed,
    /// Filtered egress without a namespace (FS-ONLY): a TCP connect to the
    /// proxy's own address is performed; one to an address the proxy
    /// allows (an IP rule or a pin) is redirected to the proxy, which
    /// learns where the job wanted to go; every other one is refused
    /// with `ECONNREFUSED` and recorded.
    Proxy,
}

impl NotifyPlan {
    pub fn is_empty(&self) -> bool {
        self.carved_dirs.is_empty() && !self.broker_unix_connect && !self.pty_peer && !self.metadata
    }
}

/// What carving needs to know about the filesystem (faked in tests).
pub trait FsView {
    /// `lstat`: `None` when the path does not exist.
    fn kind(&self, path: &Path) -> Option<EntryKind>;
    /// Names in a directory (unsorted; empty when unreadable).
    fn children(&self, dir: &Path) -> Vec<std::ffi::OsString>;
    /// The target of a symbolic link.
    fn read_link(&self, path: &Path) -> Option<PathBuf>;
    /// The real path of the unix socket at `path` (symlinks followed, as
    /// a `connect()` would), or `None` when no socket is there.
    fn socket_at(&self, path: &Path) -> Option<PathBuf>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    /// A regular file; `nlink` > 1 means other names may share the inode.
    File {
        nlink: u64,
    },
    Symlink,
    /// Sockets, fifos, devices.
    Other,
}

/// The real filesystem.
pub struct RealFs;

impl FsView for RealFs {
    fn socket_at(&self, path: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(path).ok()?;
        let md = std::fs::symlink_metadata(&real).ok()?;
        crate::sys::os::is_socket(&md.file_type()).then_some(real)
    }

    fn kind(&self, path: &Path) -> Option<EntryKind> {
        let md = std::fs::symlink_metadata(path).ok()?;
        let ft = md.file_type();
        Some(if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File {
                nlink: crate::sys::os::nlink(&md),
            }
        } else {
            EntryKind::Other
        })
    }

    fn children(&self, dir: &Path) -> Vec<std::ffi::OsString> {
        match std::fs::read_dir(dir) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }
}

/// A view that asks `inner` once per path: planning looks at many paths
/// more than once (each tier's rules, carving, the mounts), and one answer
/// per path also makes the plan one consistent picture of the filesystem.
pub struct Remembered<'a> {
    inner: &'a dyn FsView,
    kinds: std::cell::RefCell<std::collections::HashMap<PathBuf, Option<EntryKind>>>,
}

impl<'a> Remembered<'a> {
    pub fn new(inner: &'a dyn FsView) -> Self {
        Remembered {
            inner,
            kinds: std::cell::RefCell::default(),
        }
    }
}

impl FsView for Remembered<'_> {
    fn kind(&self, path: &Path) -> Option<EntryKind> {
        if let Some(kind) = self.kinds.borrow().get(path) {
            return *kind;
        }
        let kind = self.inner.kind(path);
        self.kinds.borrow_mut().insert(path.to_path_buf(), kind);
        kind
    }

    fn children(&self, dir: &Path) -> Vec<std::ffi::OsString> {
        self.inner.children(dir)
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        self.inner.read_link(path)
    }

    fn socket_at(&self, path: &Path) -> Option<PathBuf> {
        self.inner.socket_at(path)
    }
}

/// One access per path (the strongest restriction among rules naming the
/// same path), sorted so that every path's descendants follow it.
pub fn normalize(rules: &[FsRule]) -> Vec<(PathBuf, Access)> {
    let mut by_path: std::collections::HashMap<&std::ffi::OsStr, Access> =
        std::collections::HashMap::with_capacity(rules.len());
    for r in rules {
        by_path
            .entry(r.path.as_os_str())
            .and_modify(|a| *a = (*a).max(r.access))
            .or_insert(r.access);
    }
    let mut norm: Vec<(PathBuf, Access)> = by_path
        .into_iter()
        .map(|(p, a)| (PathBuf::from(p), a))
        .collect();
    norm.sort();
    norm
}

/// Landlock rights a policy access level grants, within `handled`.
pub fn rights_for(access: Access, handled: u64) -> u64 {
    match access {
        Access::Read | Access::Protect => rights::READ & handled,
        Access::Write => handled,
        Access::Deny => 0,
    }
}

/// The result of translating path rules for Landlock.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Carved {
    pub rules: Vec<LandlockRule>,
    pub carved_dirs: Vec<CarvedDir>,
    /// Writable carved directories that can only be listed (a masked file
    /// sits directly in them): what the job creates there could not be
    /// read back without a [`SparePool`].
    pub list_only_dirs: Vec<PathBuf>,
}

/// Translate policy rules into Landlock grants.
///
/// Landlock rights are inherited by everything beneath the granted path and
/// can only be added, never subtracted. So a rule with weaker rules beneath
/// it ("exceptions": a masked `.env` under a writable project, a protected
/// `.git/hooks`) is *carved*: the ancestors of each exception get only what
/// the exception may have (`READ_DIR` above a masked path, so names stay
/// listable; read rights above a protected one), and every sibling on the
/// way gets the full grant. Symlinks are never granted (they would grant
/// their target), nor are regular files with several links at a carved
/// level (a hard link could alias a protected file).
pub fn carve(rules: &[FsRule], handled: u64, view: &dyn FsView) -> Carved {
    let norm = normalize(rules);

    let mut out = Carved::default();
    for (path, access) in &norm {
        let granted = rights_for(*access, handled);
        if granted == 0 {
            continue;
        }
        let exceptions: Vec<&(PathBuf, Access)> = norm
            .iter()
            .filter(|(p, a)| {
                p.as_os_str() != path.as_os_str()
                    && beneath(p, path)
                    && rights_for(*a, handled) & granted != granted
                    // A masked path that does not exist needs no carving:
                    // creating it only creates the job's own file.
                    && !(*a == Access::Deny && view.kind(p).is_none())
            })
            .collect();
        carve_dir(path, granted, &exceptions, handled, view, &mut out);
    }
    out.rules.sort_by(|a, b| a.path.cmp(&b.path));
    out.rules.dedup();
    out
}

fn carve_dir(
    dir: &Path,
    granted: u64,
    exceptions: &[&(PathBuf, Access)],
    handled: u64,
    view: &dyn FsView,
    out: &mut Carved,
) {
    let Some(kind) = view.kind(dir) else {
        return;
    };
    let beneath: Vec<&&(PathBuf, Access)> = exceptions
        .iter()
        .filter(|(p, _)| p.as_os_str() != dir.as_os_str() && beneath(p, dir))
        .collect();
    if beneath.is_empty() || kind != EntryKind::Dir {
        out.rules.push(grant(dir, granted, kind));
        return;
    }
    // What the exceptions beneath allow their ancestors to pass down.
    let mut ancestor = granted;
    for (_, a) in &beneath {
        ancestor &= rights_for(*a, handled) | rights::READ_DIR;
    }
    if ancestor != 0 {
        out.rules.push(LandlockRule {
            path: dir.to_path_buf(),
            access: ancestor,
        });
    }
    let creates = rights::MAKE_DIR | rights::MAKE_REG | rights::REMOVE_FILE | rights::REMOVE_DIR;
    let mut protected: Vec<String> = beneath
        .iter()
        .filter_map(|(p, _)| p.strip_prefix(dir).ok()?.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    protected.sort();
    protected.dedup();
    if granted & creates != 0 && ancestor & creates != creates {
        out.carved_dirs.push(CarvedDir {
            path: dir.to_path_buf(),
            protected_names: protected.clone(),
        });
        if ancestor & rights::READ_FILE == 0 {
            out.list_only_dirs.push(dir.to_path_buf());
        }
    }
    let mut names = view.children(dir);
    names.sort();
    for name in names {
        let child = dir.join(&name);
        if exceptions
            .iter()
            .any(|(p, _)| p.as_os_str() == child.as_os_str())
        {
            continue;
        }
        match view.kind(&child) {
            None | Some(EntryKind::Symlink) => {}
            Some(EntryKind::File { nlink }) if nlink > 1 => {}
            Some(EntryKind::Dir) => carve_dir(&child, granted, exceptions, handled, view, out),
            Some(k) => out.rules.push(grant(&child, granted, k)),
        }
    }
}

fn grant(path: &Path, access: u64, kind: EntryKind) -> LandlockRule {
    let access = if kind == EntryKind::Dir {
        access
    } else {
        access & rights::FILE
    };
    LandlockRule {
        path: path.to_path_buf(),
        access,
    }
}
