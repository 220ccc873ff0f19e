//! macOS backend: re-exec as `vetto __stage`, hand over the plan; the stage
//! becomes its own process group leader (std's `process_group(0)`), sets
//! `RLIMIT_NPROC`/`RLIMIT_DATA`, applies the plan's Seatbelt profile and
//! execs the job. The supervisor waits for it, kills its process group and
//! every descendant of vetto at the end, and reads the Sandbox's denials
//! from the unified log (`log stream`).
//!
//! The job's tree is followed with kqueue (`tree.rs`): what leaves the
//! process group and is orphaned to launchd is still killed at the end.
//! What Linux has and this backend does not: no subreaper, no seccomp, no
//! namespaces.

use std::collections::HashSet;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;

use nix::errno::Errno;
use nix::sys::resource::{Resource, setrlimit};
use serde::{Deserialize, Serialize};

use crate::plan::Plan;

// What macOS has no version of its own of (seccomp notification, the
// dead network, splice, the probe's Linux syscalls…) answers as on any
// platform without them.
#[path = "../unsupported.rs"]
#[expect(
    dead_code,
    clippy::wrong_self_convention,
    reason = "the no-backend module whole; macOS replaces its stage, process and memory parts"
)]
mod none;
pub use none::{
    ctime_clock_now, dead_net, fs_kind, notify, notify_server, splice, terminal, try_syscall,
    verify_host,
};

pub mod memory;
pub mod process;
mod seatbelt;
mod tree;

/// Upper bound on a stage report.
const MAX_REPORT_BYTES: u64 = 64 << 10;
/// Upper bound on the plan the stage reads.
const MAX_REQUEST_BYTES: u64 = 64 << 20;
/// The unified log's command-line reader.
const LOG: &str = "/usr/bin/log";

/// `sw_vers -productVersion`, bounded: one short line or nothing.
pub fn os_version() -> Option<String> {
    let out = std::process::Command::new("/usr/bin/sw_vers")
        .arg("-productVersion")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim();
    (out.status.success() && !version.is_empty() && version.len() <= 32).then(|| version.to_owned())
}

pub use super::setup_error::SetupError;

#[derive(Debug, Serialize, Deserialize)]
struct StageRequest {
    plan: Plan,
    argv: Vec<Vec<u8>>,
    nproc_limit: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
enum StageReport {
    SetupFailed(String),
    /// The program did not run: the error, and the path it concerns.
    ExecFailed {
        errno: i32,
        path: Option<String>,
    },
}

/// The job, once exec'ed: its pid is also its process group.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
    pub listener: Option<OwnedFd>,
    pub secrets: Option<crate::sandbox::SecretFeed>,
    pub nproc_limit: Option<crate::sandbox::NprocLimit>,
    pub egress: crate::sandbox::EgressSockets,
    denials: Option<Denials>,
}

impl Spawned {
    /// No init reports on macOS: the supervisor learns of the end from
    /// `waitpid` and kills what is left itself.
    pub fn ended(&mut self) -> Option<crate::sandbox::JobEnd> {
        None
    }

    pub fn escaped(&mut self) -> Vec<crate::sandbox::EscapedProcess> {
        process::take_escaped()
    }

    pub fn memory_oom_killed(&self) -> bool {
        false
    }

    /// The Sandbox's denials of the session's processes since the last
    /// call; `end` waits a moment for the log's last lines, then stops it.
    pub fn observed_violations(&mut self, end: bool) -> Vec<crate::events::Violation> {
        let Some(d) = &mut self.denials else {
            return Vec::new();
        };
        let got = d.take(end);
        if end {
            self.denials = None;
        }
        got
    }
}

/// `log stream` for the session, read by a thread of its own.
#[derive(Debug)]
struct Denials {
    child: Child,
    lines: mpsc::Receiver<crate::sandbox::sandbox_log::Denial>,
    /// Pids seen in the job's tree (a denial of a process that ended
    /// before its line arrived still counts if it was seen).
    known: HashSet<u32>,
}

/// How long the end of a session waits for the log's last lines.
const LOG_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

impl Denials {
    fn start() -> std::io::Result<Denials> {
        let mut child = Command::new(LOG)
            .args([
                "stream",
                "--style",
                "ndjson",
                "--predicate",
                "sender == \"Sandbox\"",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("vetto-seatbelt-log".into())
            .spawn(move || {
                let mut reader = BufReader::new(out);
                let mut line = Vec::new();
                let mut first = true;
                loop {
                    line.clear();
                    let limit = crate::sandbox::sandbox_log::MAX_LINE as u64 + 1;
                    match (&mut reader).take(limit).read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    if first {
                        // The header: the stream is filtering from now on.
                        first = false;
                        let _ = ready_tx.send(());
                    }
                    if line.last() != Some(&b'\n') && line.len() as u64 >= limit {
                        // Oversized: skip to the end of this line.
                        let mut rest = Vec::new();
                        let _ = reader.read_until(b'\n', &mut rest);
                        continue;
                    }
                    if let Some(d) = std::str::from_utf8(&line)
                        .ok()
                        .and_then(|l| crate::sandbox::sandbox_log::parse_line(l.trim_end()))
                        && tx.send(d).is_err()
                    {
                        return;
                    }
                }
            })?;
        // The stream prints its header once it filters; a job started
        // before would have its first denials missed. Bounded: a slow log
        // costs those, never the session.
        let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(5));
        Ok(Denials {
            child,
            lines: rx,
            known: HashSet::new(),
        })
    }

    fn take(&mut self, end: bool) -> Vec<crate::events::Violation> {
        let vetto = std::process::id();
        self.known.extend(
            process::descendants(vetto)
                .into_iter()
                .filter_map(|p| u32::try_from(p).ok()),
        );
        let mut got = Vec::new();
        let mut handle = |d: crate::sandbox::sandbox_log::Denial, known: &HashSet<u32>| {
            if !known.contains(&d.pid) {
                return;
            }
            let facts = process::describe(i32::try_from(d.pid).unwrap_or(-1));
            let info = (facts.pid == d.pid).then_some(crate::events::ProcessInfo {
                pid: facts.pid,
                exe: facts.exe,
                argv: facts.argv,
                cwd: facts.cwd,
                parent_chain: facts.parents,
            });
            if let Some(v) =
                crate::sandbox::sandbox_log::violation(&d, crate::events::Timestamp::now(), info)
            {
                got.push(v);
            }
        };
        for d in self.lines.try_iter() {
            handle(d, &self.known);
        }
        if end {
            let until = std::time::Instant::now() + LOG_GRACE;
            while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
                match self.lines.recv_timeout(left) {
                    Ok(d) => handle(d, &self.known),
                    Err(_) => break,
                }
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        got
    }
}

impl Drop for Denials {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stage process started before the plan exists. Dropped unlaunched,
/// it is killed and reaped.
#[derive(Debug)]
pub struct Stage {
    child: Option<Child>,
    plan_w: Option<File>,
    status_r: Option<File>,
    output: Option<crate::sandbox::JobOutput>,
    writers: Option<[OwnedFd; 2]>,
}

pub fn start_stage(
    output: crate::sandbox::StageOutput,
    _early: Option<crate::sandbox::EarlyNamespaces>,
) -> Result<Stage, SetupError> {
    let (writers, readers) = match output {
        crate::sandbox::StageOutput::Inherit => (None, None),
        crate::sandbox::StageOutput::Pipe => {
            let (out_r, out_w) = nix::unistd::pipe().map_err(|e| SetupError::Spawn(e.into()))?;
            let (err_r, err_w) = nix::unistd::pipe().map_err(|e| SetupError::Spawn(e.into()))?;
            for fd in [&out_r, &out_w, &err_r, &err_w] {
                process::set_cloexec(fd.as_fd()).map_err(SetupError::Spawn)?;
            }
            let readers = crate::sandbox::JobOutput {
                stdout: File::from(out_r),
                stderr: File::from(err_r),
            };
            (Some([out_w, err_w]), Some(readers))
        }
    };
    let mut stage = spawn_stage(writers)?;
    stage.output = readers;
    Ok(stage)
}

fn spawn_stage(writers: Option<[OwnedFd; 2]>) -> Result<Stage, SetupError> {
    let exe = std::env::current_exe().map_err(SetupError::Spawn)?;
    // The plan on one pipe, the stage's report on another (close-on-exec
    // in the stage: end of file means the job exec'ed). The stage's ends
    // are inherited (pipe(2) makes them so), ours are close-on-exec; no
    // other thread spawns anything yet.
    let (plan_r, plan_w) = nix::unistd::pipe().map_err(|e| SetupError::Spawn(e.into()))?;
    let (status_r, status_w) = nix::unistd::pipe().map_err(|e| SetupError::Spawn(e.into()))?;
    process::set_cloexec(plan_w.as_fd()).map_err(SetupError::Spawn)?;
    process::set_cloexec(status_r.as_fd()).map_err(SetupError::Spawn)?;
    let mut cmd = Command::new(exe);
    cmd.arg0("vetto")
        .arg(crate::hidden::Hidden::Stage.arg())
        .arg(plan_r.as_raw_fd().to_string())
        .arg(status_w.as_raw_fd().to_string())
        // Nothing of the caller's environment: the job's is in the plan.
        .env_clear()
        // The job's own process group: the supervisor kills it whole.
        .process_group(0);
    if let Some([out_w, err_w]) = &writers {
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(SetupError::Spawn);
        cmd.stdout(Stdio::from(dup(out_w)?))
            .stderr(Stdio::from(dup(err_w)?));
    }
    let child = cmd.spawn().map_err(SetupError::Spawn)?;
    drop(cmd);
    drop((plan_r, status_w));
    Ok(Stage {
        child: Some(child),
        plan_w: Some(File::from(plan_w)),
        status_r: Some(File::from(status_r)),
        output: None,
        writers,
    })
}

impl Stage {
    pub fn take_output(&mut self) -> Option<crate::sandbox::JobOutput> {
        self.output.take()
    }

    /// No namespaces are made ahead of the plan here: every stage fits.
    pub fn fits(&self, _plan: &Plan) -> bool {
        true
    }

    pub fn respawn(mut self) -> Result<Stage, SetupError> {
        let writers = self.writers.take();
        let output = self.output.take();
        drop(self);
        let mut stage = spawn_stage(writers)?;
        stage.output = output;
        Ok(stage)
    }

    pub fn launch(mut self, plan: &Plan, command: &[OsString]) -> Result<Spawned, SetupError> {
        if plan.seatbelt.is_none() {
            return Err(SetupError::Stage(format!(
                "the {} tier is not available on macOS; use --tier seatbelt",
                plan.tier
            )));
        }
        drop(self.writers.take());
        // RLIMIT_NPROC counts every process of the user, not just ours.
        let nproc_limit = plan
            .limits
            .max_procs
            .map(|n| process::tasks_of_uid(nix::unistd::getuid().as_raw()) + u64::from(n));
        let binding = nproc_limit.map(|max| crate::sandbox::NprocLimit {
            max,
            counts: crate::sandbox::NprocCount::UserTasks,
        });
        // The log first: the job's first denial must find it reading.
        let denials = match Denials::start() {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!(
                    "vetto: warning: the Sandbox's denials will not be recorded: cannot run {LOG} stream: {e}"
                );
                None
            }
        };
        // The tree is followed from the stage on, before it can fork: its
        // forks are what the end-of-session kill finds outside the group.
        let stage_pid = self
            .child
            .as_ref()
            .and_then(|c| i32::try_from(c.id()).ok())
            .ok_or_else(|| SetupError::Stage("the sandbox stage is gone".into()))?;
        tree::start(stage_pid).map_err(SetupError::Track)?;
        let request = StageRequest {
            plan: plan.clone(),
            argv: command.iter().map(|a| a.as_bytes().to_vec()).collect(),
            nproc_limit,
        };
        let mut plan_w = self
            .plan_w
            .take()
            .ok_or_else(|| SetupError::Handover(std::io::Error::from_raw_os_error(libc::EBADF)))?;
        serde_json::to_vec(&request)
            .map_err(|e| SetupError::Handover(e.into()))
            .and_then(|bytes| plan_w.write_all(&bytes).map_err(SetupError::Handover))?;
        drop(plan_w);
        let mut report = Vec::new();
        if let Some(status_r) = self.status_r.take() {
            let _ = status_r.take(MAX_REPORT_BYTES).read_to_end(&mut report);
        }
        if !report.is_empty() {
            return Err(match serde_json::from_slice::<StageReport>(&report) {
                Ok(StageReport::ExecFailed { errno, path }) => SetupError::Exec { errno, path },
                Ok(StageReport::SetupFailed(message)) => SetupError::Stage(message),
                Err(_) => SetupError::Stage("the sandbox stage failed".into()),
            });
        }
        let child = self
            .child
            .take()
            .ok_or_else(|| SetupError::Stage("the sandbox stage is gone".into()))?;
        let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        process::set_job_group(pid);
        Ok(Spawned {
            pid,
            listener: None,
            secrets: None,
            nproc_limit: binding,
            egress: crate::sandbox::EgressSockets::default(),
            denials,
        })
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn stage_entry() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if !crate::hidden::Hidden::Stage.is(&args.next()?) {
        return None;
    }
    let mut fd = || {
        args.next()
            .and_then(|a| a.to_str().and_then(|s| s.parse::<i32>().ok()))
            .unwrap_or(-1)
    };
    let (plan_fd, status_fd) = (fd(), fd());
    Some(ExitCode::from(stage(plan_fd, status_fd)))
}

/// A descriptor the supervisor handed the stage by number, owned from here
/// on and closed at the job's exec.
fn handed(fd: i32) -> Option<File> {
    // SAFETY: `fd` is one of the two pipes the supervisor left open for
    // this process and named on its command line; nothing else in the
    // stage owns it.
    let file = (fd > 2).then(|| unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) })?;
    let _ = process::set_cloexec(file.as_fd());
    Some(file)
}

/// The stage: read the plan, restrict this process, exec the job. On any
/// failure the report goes to the supervisor and nothing runs.
fn stage(plan_fd: i32, status_fd: i32) -> u8 {
    let mut status = handed(status_fd);
    let Some(plan_r) = handed(plan_fd) else {
        return crate::exit::REFUSED;
    };
    let fail = |status: &mut Option<File>, report: StageReport| {
        if let Some(s) = status.as_mut() {
            let _ = s.write_all(&serde_json::to_vec(&report).unwrap_or_default());
        }
    };
    let mut bytes = Vec::new();
    if plan_r
        .take(MAX_REQUEST_BYTES)
        .read_to_end(&mut bytes)
        .is_err()
    {
        fail(
            &mut status,
            StageReport::SetupFailed("cannot read the plan".into()),
        );
        return crate::exit::REFUSED;
    }
    let request: StageRequest = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            fail(
                &mut status,
                StageReport::SetupFailed(format!("the plan is unreadable: {e}")),
            );
            return crate::exit::REFUSED;
        }
    };
    match restrict_and_exec(&request) {
        Ok(never) => match never {},
        Err(StageFailure::Exec(e, path)) => {
            fail(
                &mut status,
                StageReport::ExecFailed {
                    errno: e as i32,
                    path,
                },
            );
            if e == Errno::ENOENT {
                crate::exit::NOT_FOUND
            } else {
                crate::exit::NOT_EXECUTABLE
            }
        }
        Err(StageFailure::Setup(m)) => {
            fail(&mut status, StageReport::SetupFailed(m));
            crate::exit::REFUSED
        }
    }
}

enum StageFailure {
    Setup(String),
    /// The program did not run: the error, and the path it concerns.
    Exec(Errno, Option<String>),
}

fn restrict_and_exec(request: &StageRequest) -> Result<std::convert::Infallible, StageFailure> {
    let plan = &request.plan;
    let profile = plan
        .seatbelt
        .as_ref()
        .ok_or_else(|| StageFailure::Setup("the plan has no Seatbelt profile".into()))?;
    if profile.needs_proxy_port {
        // Filtered egress whose proxy never listened: refused, not run
        // without the network the policy allows.
        return Err(StageFailure::Setup(
            "filtered egress: the Seatbelt profile lacks the egress proxy's port".into(),
        ));
    }
    if let Some(n) = request.nproc_limit {
        rlimit_nproc(n)
            .map_err(|e| StageFailure::Setup(format!("setrlimit(RLIMIT_NPROC): {e}")))?;
    }
    if let Some(m) = &plan.memory {
        setrlimit(Resource::RLIMIT_DATA, m.limit, m.limit)
            .map_err(|e| StageFailure::Setup(format!("setrlimit(RLIMIT_DATA): {e}")))?;
    }
    std::env::set_current_dir(&plan.cwd)
        .map_err(|e| StageFailure::Setup(format!("cannot enter {}: {e}", plan.cwd.display())))?;
    seatbelt::apply(profile).map_err(|e| StageFailure::Setup(e.to_string()))?;
    let candidates = crate::sandbox::exec_unix::resolve_program(
        &request.argv,
        &plan.env.vars,
        "/usr/bin:/bin:/usr/sbin:/sbin",
    )
    .map_err(|e| StageFailure::Exec(e, None))?;
    let argv = cstrings(request.argv.iter().map(Vec::as_slice))?;
    let envp = cstrings(
        plan.env
            .vars
            .iter()
            .map(|(k, v)| format!("{k}={v}").into_bytes())
            .collect::<Vec<_>>()
            .iter()
            .map(Vec::as_slice),
    )?;
    // The Rust runtime ignores SIGPIPE, and an ignored signal survives exec.
    // SAFETY: restoring the default disposition installs no handler code.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
    let _ = nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    );
    let (err, at) = crate::sandbox::exec_unix::exec_first(&candidates, &argv, &envp);
    Err(StageFailure::Exec(
        err,
        at.map(|p| p.to_string_lossy().into_owned()),
    ))
}

/// nix has no `RLIMIT_NPROC` for Apple targets; libc does.
fn rlimit_nproc(n: u64) -> Result<(), Errno> {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: `lim` is a valid rlimit read by the call, which keeps no
    // pointer to it.
    Errno::result(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lim) }).map(drop)
}

fn cstrings<'a>(items: impl Iterator<Item = &'a [u8]>) -> Result<Vec<CString>, StageFailure> {
    items
        .map(|b| {
            CString::new(b)
                .map_err(|_| StageFailure::Setup("an argument contains a NUL byte".into()))
        })
        .collect()
}
