//! THE platform boundary: every `cfg(target_os)`, every `unsafe` block and
//! every raw syscall of vetto lives beneath this module.

use std::process::ExitCode;

#[cfg(target_os = "linux")]
#[path = "linux/mod.rs"]
mod imp;

#[cfg(target_os = "macos")]
#[path = "macos/mod.rs"]
mod imp;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[path = "unsupported.rs"]
mod imp;

// The OS floor this backend builds on (`crate::sys`), by its old names.
pub use crate::sys::{os, safe_fs};

/// FULL: the sockets the stage made inside the job's network namespace
/// and handed to vetto (with the network off, the DNS stub's alone).
#[derive(Debug, Default)]
pub struct EgressSockets {
    /// The proxy's explicit listeners (127.0.0.1 and ::1, port 3128).
    pub explicit: Vec<os::OwnedFd>,
    /// The proxy's redirected listeners (127.0.0.1 and ::1, port 3129).
    pub redirected: Vec<os::OwnedFd>,
    /// The DNS stub's UDP socket (127.0.0.53:53).
    pub dns: Option<os::OwnedFd>,
    /// The DNS stub's TCP listener (127.0.0.53:53).
    pub dns_tcp: Option<os::OwnedFd>,
    /// Transparent listeners (0.0.0.0, the stub's ports).
    pub transparent: Vec<os::OwnedFd>,
}

pub use imp::{
    SetupError, Spawned, Stage, dead_net, fs_kind, memory, notify, notify_server, process, splice,
    terminal,
};
// The Windows AppContainer launcher: its pure parts (quoting, ACEs, job
// limits, errors) on every OS, tested on Linux; the FFI on Windows.
#[path = "windows/container.rs"]
pub mod appcontainer;
#[cfg(windows)]
#[path = "windows/launcher.rs"]
mod launcher;

/// Whether this host has Windows AppContainer (`Err` off Windows).
pub fn appcontainer_host() -> Result<(), appcontainer::LaunchError> {
    #[cfg(windows)]
    return Ok(());
    #[cfg(not(windows))]
    Err(appcontainer::LaunchError::NotWindows {
        os: std::env::consts::OS,
    })
}

/// Run the job in an AppContainer under the plan (`--tier appcontainer`),
/// its output inherited; off Windows, the refusal.
pub fn run_appcontainer(
    plan: &crate::plan::appcontainer::LaunchPlan,
    command: &[std::ffi::OsString],
) -> Result<crate::exit::Outcome, appcontainer::LaunchError> {
    #[cfg(windows)]
    return launcher::run(plan, command);
    #[cfg(not(windows))]
    {
        let _ = (plan, command);
        Err(appcontainer::LaunchError::NotWindows {
            os: std::env::consts::OS,
        })
    }
}

// The sandbox's denials as the macOS unified log reports them (pure: the
// parser is tested on every OS).
#[path = "macos/sandbox_log.rs"]
pub mod sandbox_log;
// Why a Unix stage could not start the job (Linux and macOS).
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod setup_error;
// The stages' program search (Linux and macOS).
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod exec_unix;
// The probe's raw attempts (`vetto __probe`, `vetto verify`).
pub use imp::try_syscall;
// `vetto verify`'s host-side stand-ins.
pub use imp::verify_host;

/// A process the job left running when it ended; the sandbox's init
/// reports it, then kills it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EscapedProcess {
    /// As the sandbox saw it (its own PID namespace at FULL).
    pub pid: i32,
    pub exe: String,
    pub argv: Vec<String>,
}

/// How the job ended, as the sandbox's init saw it once it had killed and
/// reaped everything the job left behind: from this moment no process of
/// the session runs, so vetto need not wait for the init's own exit (at
/// FULL, the kernel's teardown of the namespaces is most of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobEnd {
    pub status: JobStatus,
    /// CPU of every process the init reaped: the job's whole tree.
    pub cpu_user_ms: u64,
    pub cpu_sys_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobStatus {
    Exited(i32),
    Signaled(i32),
}

/// Touches of masked secrets as the sandbox reports them (FULL tier), one
/// per access, each with the process that made it.
#[derive(Debug)]
pub struct SecretFeed {
    pub accesses: std::sync::mpsc::Receiver<SecretAccess>,
    /// Masks whose accesses go unseen (still masked), and why.
    pub problems: Vec<String>,
}

/// One access to a masked secret. It got nothing: the mask is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretAccess {
    /// The masked path, or the name looked up beneath a masked directory.
    pub path: std::path::PathBuf,
    pub op: SecretOp,
    pub process: ProcessFacts,
    /// When it happened (the supervisor may see it a tick later).
    pub time: std::time::SystemTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretOp {
    /// Opened the masked file (it read as empty).
    Open,
    /// Listed the masked directory (it is empty).
    List,
    /// Looked up a name beneath the masked directory (nothing is there).
    Lookup,
}

/// Where the job's stdout and stderr go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageOutput {
    /// vetto's own (`run`).
    Inherit,
    /// Pipes that vetto reads ([`Stage::take_output`]), so it can filter
    /// what the job prints (`ci`: forged workflow commands).
    Pipe,
}

/// The read ends of the job's stdout and stderr ([`StageOutput::Pipe`]).
/// They reach end of file when the last process holding a write end is
/// gone.
#[derive(Debug)]
pub struct JobOutput {
    pub stdout: std::fs::File,
    pub stderr: std::fs::File,
}

/// The FULL tier's namespaces, as the stage may create them before the
/// The `RLIMIT_NPROC` a job runs under (`--max-procs`) and what the kernel
/// counts against it, so the supervisor can tell when the job is at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NprocLimit {
    pub max: u64,
    pub counts: NprocCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NprocCount {
    /// Every task of the real uid on the host (no user namespace of the
    /// job's own, or one made after the limit was set).
    UserTasks,
    /// The tasks in the sandbox's own user namespace: vetto's descendants.
    SandboxTasks,
}

/// plan arrives: vetto's guess from the command line and the host, made
/// good or thrown away once the plan exists ([`Stage::fits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlyNamespaces {
    /// With its own network namespace (the network is not `host`).
    pub net: bool,
}

/// Start the sandbox stage ahead of the plan (see [`Stage::launch`]), so
/// its start-up — and with `early`, the creation of the namespaces —
/// overlaps policy loading and planning. The job inherits the stage's
/// stdin, and its stdout and stderr as `output` says.
pub fn start_stage(
    output: StageOutput,
    early: Option<EarlyNamespaces>,
) -> Result<Stage, SetupError> {
    imp::start_stage(output, early)
}

/// The macOS product version (`sw_vers -productVersion`); `None`
/// elsewhere or when it does not answer.
pub fn os_version() -> Option<String> {
    #[cfg(target_os = "macos")]
    return imp::os_version();
    #[cfg(not(target_os = "macos"))]
    None
}

/// Violations the platform observed outside the supervisor's own channels
/// since the last call (macOS: the Sandbox's denials in the unified log),
/// for the session log. Never blocks; `end` drains what is still coming.
pub fn observed_violations(spawned: &mut Spawned, end: bool) -> Vec<crate::events::Violation> {
    #[cfg(target_os = "macos")]
    return spawned.observed_violations(end);
    #[cfg(not(target_os = "macos"))]
    {
        let _ = (spawned, end);
        Vec::new()
    }
}

/// Now, by the clock file change times (`ctime`) are stamped from.
pub fn ctime_clock_now() -> (i64, i64) {
    imp::ctime_clock_now()
}

/// If this process was started as the hidden sandbox stage, run it and
/// return its exit status; otherwise `None`.
pub fn stage_entry() -> Option<ExitCode> {
    imp::stage_entry()
}

// Who a thread belongs to: the plan's vocabulary, read by this backend.
pub use crate::plan::notify::ProcessFacts;
