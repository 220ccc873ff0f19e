//! What the seccomp-notification server decides, as plain data: the
//! vocabulary between the platform backend that answers the job's calls
//! (`sandbox::notify_server`) and the supervisor that turns its answers
//! into violations — below both, next to the plan the server applies, so
//! neither imports the other's.

use std::path::PathBuf;

pub mod connect;
pub mod entries;

/// Who a sandboxed thread belongs to, as the platform could read it: its
/// process, executable, arguments, working directory and the chain of
/// parents up to (not including) vetto.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessFacts {
    pub pid: u32,
    pub exe: std::path::PathBuf,
    pub argv: Vec<String>,
    pub cwd: std::path::PathBuf,
    /// Nearest parent first.
    pub parents: Vec<(u32, std::path::PathBuf)>,
    /// The argv and working directory of each of `parents`, in the same
    /// order: a parent's script is often the code responsible.
    pub parent_commands: Vec<(Vec<String>, std::path::PathBuf)>,
}

/// What the notification server asks the egress proxy when the job
/// connects an internet socket under filtered egress without a network
/// namespace (FS-ONLY, `NetConnect::Proxy`). The session implements it
/// over the running proxy.
pub trait EgressBroker: Send + Sync + std::fmt::Debug {
    /// The proxy's explicit listeners on the host's loopback (credential
    /// required): a connect to one of these is performed as asked.
    fn explicit(&self) -> Vec<std::net::SocketAddr>;
    /// Where a connect the proxy allows by address is sent instead: its
    /// redirected listener for this family (`None`: none, refuse).
    fn redirect_to(&self, v6: bool) -> Option<std::net::SocketAddr>;
    /// FS-ONLY: the supervisor's DNS stub (DNS over TCP) for this family,
    /// where every TCP connect to port 53 is sent instead (`None`: none,
    /// such connects are decided like any other). [`Self::expect`] for a
    /// port-53 original then names the process to the stub.
    fn dns_via(&self, v6: bool) -> Option<std::net::SocketAddr>;
    /// Whether the proxy allows `to` by address (an IP rule, or a pin and
    /// a rule for the name pinned there).
    fn allows(&self, to: std::net::SocketAddr) -> bool;
    /// FULL: whether an IP rule allows `to`, a loopback address, which is
    /// then the host's (a CI service, a database on `127.0.0.1:5432`)
    /// rather than the job's own, reached through the proxy.
    fn allows_host_loopback(&self, to: std::net::SocketAddr) -> bool;
    /// Whether the proxy wants to know which process made a connect to
    /// `to` that is performed as asked (its explicit or transparent
    /// listeners): then the connect is registered with [`Self::expect`]
    /// like a redirected one.
    fn names_process(&self, to: std::net::SocketAddr) -> bool;
    /// Register, before the redirected connect is made, that the
    /// connection from `local` (the job's socket) stands for `original`.
    fn expect(
        &self,
        local: std::net::SocketAddr,
        original: std::net::SocketAddr,
        process: Option<ProcessFacts>,
    );
    /// FS-ONLY (`NotifyPlan::udp_dead_net`, `tcp_dead_net`): a UDP (or,
    /// `stream`, TCP) socket of this family made in vetto's network
    /// namespace that leads nowhere, for `process` (who later sends from
    /// it). `None`: there is no such namespace, and the socket is refused.
    fn dead_net_socket(
        &self,
        v6: bool,
        stream: bool,
        process: ProcessFacts,
    ) -> Option<std::io::Result<crate::sys::os::OwnedFd>>;
    /// `sock` is one made by [`Self::dead_net_socket`]'s namespace:
    /// whatever it binds or connects to is in that namespace.
    fn is_dead_net(&self, sock: crate::sys::os::BorrowedFd<'_>) -> bool;
    /// The `/proc/PID/net` directory of that namespace (its socket
    /// tables), once it runs.
    fn dead_net_proc(&self) -> Option<PathBuf>;
    /// A TCP socket (`v6`: IPv6) of vetto's own in that namespace, to
    /// reach a listener of the job's there (`[network] publish`); `None`:
    /// there is no such namespace.
    fn dead_net_stream(&self, v6: bool) -> Option<std::io::Result<crate::sys::os::OwnedFd>>;
}

/// What the supervisor did with one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The supervisor performed the call itself and returned its result
    /// (which may be an error the operation itself produced).
    Emulated,
    /// Let the kernel run it: Landlock decides.
    Continued,
    /// Refused by policy with this errno (a violation).
    Denied(i32),
}

/// Why the supervisor decided as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A call the supervisor does not handle, or a foreign architecture.
    NotHandled,
    /// The parent directory is not a carved directory.
    NotCarved,
    /// A protected name (`.git`, `hooks`, `config`, …) in a carved directory.
    Protected,
    /// The name already exists: Landlock decides on the existing inode.
    Exists,
    /// Flags, names or paths the supervisor does not emulate.
    Unsupported,
    /// The job's memory or descriptors could not be read (not dumpable).
    Unreadable,
    /// Performed in a carved directory.
    CarvedDir,
    /// A rename across a carved directory boundary: `EXDEV`.
    CrossCarve,
    /// A pathname unix socket in a writable part of the policy.
    SocketAllowed,
    /// A pathname unix socket outside the writable part of the policy.
    SocketOutside,
    /// An abstract unix socket: allowed only when the job's own processes
    /// listen on it (Landlock's scoping, reproduced).
    SocketAbstract,
    /// A socket address without a name to check (other families, unnamed).
    SocketNoName,
    /// A creation, removal or rename the policy does not allow where it
    /// lands (outside every carved directory): Landlock refuses it.
    OutsidePolicy,
    /// `--audit`: something the policy would refuse (a socket outside it),
    /// performed and recorded.
    WouldDeny,
    /// A call the plan refuses outright (ptrace, io_uring, mount, network
    /// sockets when the network is off …), notified only to be recorded.
    Forbidden,
    /// The slave of a pseudo-terminal whose master the job holds, opened by
    /// the supervisor (`ioctl(TIOCGPTPEER)` where the host's `/dev/pts` is
    /// shared and Landlock grants only the job's own terminal there).
    OwnPty,
    /// A socket made in vetto's network namespace that leads nowhere, or
    /// its bind or connect there (FS-ONLY: UDP under filtered egress, UDP
    /// and TCP with the network off): the job's own business, not recorded.
    DeadNet,
    /// A connection out of the sandbox's own network namespace, whose only
    /// interface is loopback (FULL, network off): refused with
    /// `ENETUNREACH`, as the missing route would refuse it.
    Egress,
    /// Filtered egress: a connect the proxy allows by address, redirected
    /// to the proxy (FS-ONLY).
    Redirected,
    /// An entry named `.git` below the project root (a nested repository
    /// that a later `git status` outside the sandbox would act on).
    NestedGit,
    /// A mode, owner or time change (`chmod`, `chown`, `utimensat`, …)
    /// performed by the supervisor: its target lies where the policy
    /// allows writing (not recorded: the common case).
    Metadata,
    /// A mode, owner or time change of a file the policy does not make
    /// writable, or of a protected name: refused (`EPERM`).
    MetadataOutside,
    /// A new entry in a carved directory once the session's spares of
    /// that kind are all used (`SparePool`): a plainly made one would be
    /// an entry the job cannot fill (a directory) or read back (a file in
    /// a list-only directory), so it is refused (`EACCES`) and recorded.
    SparesSpent,
}

/// One decision, for the session log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyEvent {
    pub tid: i32,
    pub syscall: &'static str,
    /// The path as the job gave it (for `connect`, the socket path).
    pub path: Option<PathBuf>,
    /// For a `connect` to an internet address: where to.
    pub addr: Option<std::net::SocketAddr>,
    pub decision: Decision,
    pub reason: Reason,
    /// The process behind a violation, read before the answer.
    pub process: Option<ProcessFacts>,
    /// When it was answered (the supervisor may see it a tick later).
    pub time: std::time::SystemTime,
}

impl NotifyEvent {
    /// See [`is_violation`].
    pub fn is_violation(&self) -> bool {
        is_violation(self.decision, self.reason)
    }
}

/// The one classification of a notification's answer: a refusal, and a
/// protected-name hit, a policy denial or an audited would-be denial let
/// through, are what reports call violations. The server asks it before
/// answering (to name the process while the call still blocks), the
/// supervisor when it records.
pub fn is_violation(decision: Decision, reason: Reason) -> bool {
    matches!(decision, Decision::Denied(_))
        || matches!(
            reason,
            Reason::Protected
                | Reason::OutsidePolicy
                | Reason::Forbidden
                | Reason::WouldDeny
                | Reason::NestedGit
                | Reason::MetadataOutside
        )
}
