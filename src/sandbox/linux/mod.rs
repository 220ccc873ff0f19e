//! Linux backend: re-exec as `vetto __stage`, hand over the plan, and
//! receive the seccomp notification listener.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};

use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, raise, signal, sigprocmask};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use serde::{Deserialize, Serialize};

use crate::plan::Plan;

mod cgroup;
pub mod dead_net;
pub mod fs_kind;
mod landlock;
pub mod memory;
mod namespaces;
pub mod notify;
pub mod notify_server;
mod proc;
pub mod process;
mod seccomp;
mod setup;
pub mod splice;
mod sys;
pub mod terminal;
mod traps;
pub mod try_syscall;
pub mod verify_host;

/// Upper bound on a stage report.
const MAX_REPORT_BYTES: u64 = 64 << 10;

pub use super::setup_error::SetupError;

/// What the supervisor hands the stage.
#[derive(Debug, Serialize, Deserialize)]
struct StageRequest {
    plan: Plan,
    /// The command, as raw bytes (arguments need not be UTF-8).
    argv: Vec<Vec<u8>>,
    /// vetto's pid: the stage checks it is still its parent.
    supervisor: i32,
    /// `RLIMIT_NPROC` for the job, from `--max-procs`.
    nproc_limit: Option<u64>,
}

/// What the stage tells the supervisor when the job did not start.
#[derive(Debug, Serialize, Deserialize)]
enum StageReport {
    SetupFailed(String),
    /// The program did not run: the error, and the path it concerns.
    ExecFailed {
        errno: i32,
        path: Option<String>,
    },
}

impl StageReport {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A started sandbox: the init process and, when the plan notifies, the
/// seccomp listener.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
    pub listener: Option<OwnedFd>,
    /// FULL tier with masked paths: who touched them, as their traps
    /// report it.
    pub secrets: Option<crate::sandbox::SecretFeed>,
    /// The `RLIMIT_NPROC` the job runs under (`--max-procs`).
    pub nproc_limit: Option<crate::sandbox::NprocLimit>,
    /// FULL with filtered egress: the sockets the stage made in the job's
    /// network namespace, for the supervisor to serve.
    pub egress: crate::sandbox::EgressSockets,
    /// The init's reports, as they arrive.
    reports: Reports,
    /// `--max-memory` held by a cgroup v2: the job's, removed when this
    /// is dropped.
    cgroup: Option<cgroup::JobCgroup>,
}

/// What the sandbox's init tells vetto, one JSON line each, on the stage's
/// socket.
#[derive(Debug, Serialize, Deserialize)]
enum InitReport {
    /// A process the job left running, about to be killed.
    Escaped(crate::sandbox::EscapedProcess),
    /// Everything is dead and reaped; the last report.
    Ended(crate::sandbox::JobEnd),
}

impl Spawned {
    /// How the job ended, once the init has said so: every process of the
    /// session is gone by then. Never blocks. The socket raises SIGIO in
    /// vetto when a report arrives (see [`process::SignalWaiter`]).
    pub fn ended(&mut self) -> Option<crate::sandbox::JobEnd> {
        self.reports.pump();
        self.reports.end
    }

    /// The kernel killed the job's cgroup at its `memory.max`.
    pub fn memory_oom_killed(&self) -> bool {
        self.cgroup
            .as_ref()
            .is_some_and(cgroup::JobCgroup::oom_killed)
    }

    /// The processes the job left running, as the init reported them
    /// before killing them. Call after the sandbox has ended.
    pub fn escaped(&mut self) -> Vec<crate::sandbox::EscapedProcess> {
        self.reports.pump();
        if self.reports.end.is_none() {
            // The init ended without its last report (killed): what it
            // sent is all there is, up to end of file.
            let _ = self.reports.sock.set_nonblocking(false);
            self.reports.pump();
        }
        std::mem::take(&mut self.reports.escaped)
    }
}

/// The init's reports, read as they come without ever blocking the
/// supervisor (unless asked to read to the end).
#[derive(Debug)]
struct Reports {
    sock: UnixStream,
    partial: Vec<u8>,
    /// Bytes read so far: the init may report at most [`MAX_REPORTS_BYTES`].
    read: u64,
    escaped: Vec<crate::sandbox::EscapedProcess>,
    end: Option<crate::sandbox::JobEnd>,
}

/// Upper bound on what the init may report.
const MAX_REPORTS_BYTES: u64 = 1 << 20;

impl Reports {
    fn new(sock: UnixStream) -> Reports {
        // Wake the supervisor when a report arrives; without it, vetto
        // still learns of the end from the init's exit.
        let _ = sock
            .set_nonblocking(true)
            .and_then(|()| sys::signal_on_input(sock.as_fd()));
        Reports {
            sock,
            partial: Vec::new(),
            read: 0,
            escaped: Vec::new(),
            end: None,
        }
    }

    fn pump(&mut self) {
        let mut chunk = [0u8; 4096];
        while self.end.is_none() && self.read < MAX_REPORTS_BYTES {
            let n = match (&self.sock).read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            self.read += n as u64;
            self.partial.extend_from_slice(&chunk[..n]);
            while let Some(at) = self.partial.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.partial.drain(..=at).collect();
                match serde_json::from_slice(&line) {
                    Ok(InitReport::Escaped(p)) => self.escaped.push(p),
                    Ok(InitReport::Ended(end)) => self.end = Some(end),
                    // A torn or foreign line: skipped.
                    Err(_) => {}
                }
            }
        }
    }
}

/// A stage process started before the plan exists: its exec and start-up
/// overlap the supervisor's policy loading and planning. It waits for the
/// plan on its pipe; dropped unlaunched, it is killed and reaped.
#[derive(Debug)]
pub struct Stage {
    pid: i32,
    plan_w: Option<File>,
    status_r: Option<OwnedFd>,
    notify: UnixStream,
    output: Option<crate::sandbox::JobOutput>,
    /// Our copies of the job's stdout and stderr write ends (piped output),
    /// kept until launch so that a replacement stage can get them.
    writers: Option<[OwnedFd; 2]>,
    /// The namespaces the stage created ahead of the plan.
    early: Option<crate::sandbox::EarlyNamespaces>,
}

/// How the stage learns of [`crate::sandbox::EarlyNamespaces`]: its fifth
/// argument.
const EARLY_NET: &str = "early-ns";
const EARLY_HOST_NET: &str = "early-ns-host-net";

pub fn start_stage(
    output: crate::sandbox::StageOutput,
    early: Option<crate::sandbox::EarlyNamespaces>,
) -> Result<Stage, SetupError> {
    let (writers, readers) = match output {
        crate::sandbox::StageOutput::Inherit => (None, None),
        crate::sandbox::StageOutput::Pipe => {
            let pipe = || {
                nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                    .map_err(|e| SetupError::Spawn(e.into()))
            };
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            let readers = crate::sandbox::JobOutput {
                stdout: File::from(out_r),
                stderr: File::from(err_r),
            };
            (Some([out_w, err_w]), Some(readers))
        }
    };
    let mut stage = spawn_stage(writers, early)?;
    stage.output = readers;
    Ok(stage)
}

fn spawn_stage(
    writers: Option<[OwnedFd; 2]>,
    early: Option<crate::sandbox::EarlyNamespaces>,
) -> Result<Stage, SetupError> {
    let (plan_r, plan_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SetupError::Spawn(e.into()))?;
    let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SetupError::Spawn(e.into()))?;
    let (notify_ours, notify_theirs) = UnixStream::pair().map_err(SetupError::Spawn)?;
    let fds = [
        plan_r.as_raw_fd(),
        status_w.as_raw_fd(),
        notify_theirs.as_raw_fd(),
    ];
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("vetto")
        .arg(crate::hidden::Hidden::Stage.arg())
        .args(fds.iter().map(|fd| fd.to_string()))
        // Nothing of the caller's environment in the stage's /proc entry:
        // the job's environment travels inside the plan.
        .env_clear();
    match early {
        Some(e) if e.net => cmd.arg(EARLY_NET),
        Some(_) => cmd.arg(EARLY_HOST_NET),
        None => &mut cmd,
    };
    // The stage's three descriptors must survive its exec; ours must not.
    // Clearing close-on-exec here instead of in a pre_exec hook lets std
    // spawn with vfork semantics (no page-table copy of the supervisor);
    // it is safe because no other thread exists yet to spawn anything.
    for fd in fds {
        sys::clear_cloexec(fd).map_err(SetupError::Spawn)?;
    }
    // Piped output: the stage's stdout and stderr are the write ends (std
    // moves them to 1 and 2 in the child); ours are close-on-exec.
    if let Some([out_w, err_w]) = &writers {
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(SetupError::Spawn);
        cmd.stdout(Stdio::from(dup(out_w)?))
            .stderr(Stdio::from(dup(err_w)?));
    }
    let child = cmd.spawn().map_err(SetupError::Spawn)?;
    // Dropping the command closes the copies it held: the write ends now
    // live in the stage (and the job), and in `writers` until launch.
    drop(cmd);
    drop((plan_r, status_w, notify_theirs));
    Ok(Stage {
        pid: i32::try_from(child.id()).unwrap_or(i32::MAX),
        plan_w: Some(File::from(plan_w)),
        status_r: Some(status_r),
        notify: notify_ours,
        output: None,
        writers,
        early,
    })
}

impl Stage {
    /// The job's output pipes, when started with [`StageOutput::Pipe`]
    /// (once; read them before the job can fill them).
    ///
    /// [`StageOutput::Pipe`]: crate::sandbox::StageOutput::Pipe
    pub fn take_output(&mut self) -> Option<crate::sandbox::JobOutput> {
        self.output.take()
    }

    /// Whether this stage can run `plan`: the namespaces it created ahead
    /// of the plan, if any, are the plan's.
    pub fn fits(&self, plan: &Plan) -> bool {
        match (self.early, &plan.namespaces) {
            (None, _) => true,
            (Some(early), Some(ns)) => early.net == ns.net,
            (Some(_), None) => false,
        }
    }

    /// A fresh stage in place of this one (which is killed), with the same
    /// output and no namespaces created ahead: for a plan this one does not
    /// [`fit`](Stage::fits).
    pub fn respawn(mut self) -> Result<Stage, SetupError> {
        let writers = self.writers.take();
        let output = self.output.take();
        drop(self);
        let mut stage = spawn_stage(writers, None)?;
        stage.output = output;
        Ok(stage)
    }

    /// Hand the stage its plan and command; returns once the job has
    /// exec'ed (or failed to start).
    pub fn launch(mut self, plan: &Plan, command: &[OsString]) -> Result<Spawned, SetupError> {
        if !self.fits(plan) {
            // vetto's own mistake, but a sandbox shaped for another plan
            // must not run this one.
            return Err(SetupError::Stage(
                "the sandbox stage was prepared for another tier".into(),
            ));
        }
        // Only the stage and the job hold the output's write ends now: the
        // readers see end of file once they are gone.
        drop(self.writers.take());
        let nproc_limit = plan.limits.max_procs.map(|n| {
            // RLIMIT_NPROC counts every task of the real uid, not just ours.
            process::tasks_of_uid(nix::unistd::getuid().as_raw()) + u64::from(n)
        });
        // What binds, as the stage sets it (`setup::stage`, step 4): in
        // namespaces made early, the count inside them against N + 1 (the
        // relay, the init and the job); else the user's count at launch + N.
        let binding = plan
            .limits
            .max_procs
            .map(|n| match (self.early, &plan.namespaces) {
                (Some(_), Some(_)) => crate::sandbox::NprocLimit {
                    max: u64::from(n) + 1,
                    counts: crate::sandbox::NprocCount::SandboxTasks,
                },
                _ => crate::sandbox::NprocLimit {
                    max: nproc_limit.unwrap_or(u64::from(n)),
                    counts: crate::sandbox::NprocCount::UserTasks,
                },
            });
        let request = StageRequest {
            plan: plan.clone(),
            argv: command.iter().map(|a| a.as_bytes().to_vec()).collect(),
            supervisor: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            nproc_limit,
        };
        // The job's cgroup, before the stage reads its plan: everything it
        // forks from then on is inside.
        let cgroup = match &plan.memory {
            Some(crate::plan::memory::MemoryPlan {
                limit,
                tree: crate::plan::memory::TreeBound::Cgroup(c),
            }) => Some(cgroup::JobCgroup::enter(c, *limit, self.pid).map_err(|e| {
                SetupError::Stage(format!("cannot give the job a cgroup v2 memory limit: {e}"))
            })?),
            _ => None,
        };
        let mut plan_w = self
            .plan_w
            .take()
            .ok_or_else(|| SetupError::Handover(std::io::Error::from_raw_os_error(libc::EBADF)))?;
        serde_json::to_vec(&request)
            .map_err(|e| SetupError::Handover(e.into()))
            .and_then(|bytes| plan_w.write_all(&bytes).map_err(SetupError::Handover))?;
        drop(plan_w);

        // The relay sends the secret traps (FULL) before PID 1 sends the
        // listener; they are served from here on.
        let secrets = match &plan.namespaces {
            Some(ns) if ns.masks().next().is_some() => traps::receive_and_serve(&self.notify, ns),
            _ => None,
        };
        // Then PID 1 sends the egress proxy's listeners (FULL, filtered
        // egress), before the notification listener.
        // With the network off, PID 1 sends the DNS stub's sockets alone.
        let mut egress = crate::sandbox::EgressSockets::default();
        let filtered = plan.egress == Some(crate::plan::net::EgressPlan::Netns);
        if filtered {
            if let Some((b'N', fds)) = receive_fds::<2>(&self.notify) {
                egress.explicit = fds;
            }
            if let Some((b'R', fds)) = receive_fds::<2>(&self.notify) {
                egress.redirected = fds;
            }
        }
        if plan
            .namespaces
            .as_ref()
            .is_some_and(|n| n.dns_stub.is_some())
        {
            if let Some((b'D', fds)) = receive_fds::<2>(&self.notify) {
                for fd in fds {
                    match notify::socket_type(fd.as_fd()) {
                        Ok(libc::SOCK_DGRAM) => egress.dns = Some(fd),
                        Ok(libc::SOCK_STREAM) => egress.dns_tcp = Some(fd),
                        _ => {}
                    }
                }
            }
            if filtered
                && let Some((b'T', fds)) =
                    receive_fds::<{ crate::plan::net::MAX_TRANSPARENT_PORTS }>(&self.notify)
            {
                egress.transparent = fds;
            }
        }
        let listener = if plan.seccomp.record_denials
            || plan
                .seccomp
                .rules
                .iter()
                .any(|r| r.action == crate::plan::syscalls::Action::Notify)
        {
            receive_listener(&self.notify)
        } else {
            None
        };

        if let (
            Some(fd),
            Some(crate::plan::memory::MemoryPlan {
                tree: crate::plan::memory::TreeBound::Shares { .. },
                ..
            }),
        ) = (&listener, &plan.memory)
        {
            fd.try_clone()
                .and_then(|fd| notify::Listener::new(fd).pass_first_fork())
                .map_err(|e| {
                    SetupError::Stage(format!("cannot let the sandbox start the job: {e}"))
                })?;
        }
        let mut report = Vec::new();
        if let Some(status_r) = self.status_r.take() {
            let _ = File::from(status_r)
                .take(MAX_REPORT_BYTES)
                .read_to_end(&mut report);
        }
        if !report.is_empty() {
            return Err(match serde_json::from_slice::<StageReport>(&report) {
                Ok(StageReport::ExecFailed { errno, path }) => SetupError::Exec { errno, path },
                Ok(StageReport::SetupFailed(message)) => SetupError::Stage(message),
                Err(_) => SetupError::Stage("the sandbox stage failed".into()),
            });
        }
        if plan.egress == Some(crate::plan::net::EgressPlan::Netns) && egress.explicit.is_empty() {
            return Err(SetupError::Stage(
                "the sandbox did not hand over the egress proxy's listeners".into(),
            ));
        }
        let pid = self.pid;
        // Launched: from here the supervisor owns the process.
        self.pid = 0;
        let reports = Reports::new(self.notify.try_clone().map_err(SetupError::Spawn)?);
        Ok(Spawned {
            pid,
            listener,
            secrets,
            nproc_limit: binding,
            egress,
            reports,
            cgroup,
        })
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if self.pid > 0 {
            let pid = nix::unistd::Pid::from_raw(self.pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
    }
}

/// The listener the stage sends over the socketpair, if it got that far.
fn receive_listener(sock: &UnixStream) -> Option<OwnedFd> {
    receive_fds::<1>(sock)?.1.into_iter().next()
}

/// One message of the stage: its one-byte tag and the descriptors it
/// carried (at most `N`, each owned here, close-on-exec). `None` if the
/// stage ended first.
fn receive_fds<const N: usize>(sock: &UnixStream) -> Option<(u8, Vec<OwnedFd>)> {
    let mut tag = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut tag)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; N]);
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
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            for fd in raw {
                // SAFETY: SCM_RIGHTS installed this descriptor in our table
                // just now; nothing else owns it.
                fds.push(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
            }
        }
    }
    Some((tag[0], fds))
}

/// Raise `sig` with its default action (used by the init to die like the job).
fn raise_default(sig: Signal) -> nix::Result<()> {
    // SAFETY: restoring the default disposition installs no handler code.
    unsafe { signal(sig, SigHandler::SigDfl) }?;
    let mut set = SigSet::empty();
    set.add(sig);
    sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None)?;
    raise(sig)
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
    let fds = setup::StageFds {
        plan: fd(),
        status: fd(),
        notify: fd(),
    };
    let early = match args.next() {
        Some(a) if a == EARLY_NET => Some(crate::sandbox::EarlyNamespaces { net: true }),
        Some(a) if a == EARLY_HOST_NET => Some(crate::sandbox::EarlyNamespaces { net: false }),
        _ => None,
    };
    Some(ExitCode::from(setup::stage(fds, early)))
}

/// The clock the kernel stamps file change times from
/// (`CLOCK_REALTIME_COARSE`, else `CLOCK_REALTIME`), as (seconds,
/// nanoseconds).
pub fn ctime_clock_now() -> (i64, i64) {
    use nix::time::{ClockId, clock_gettime};
    let t = clock_gettime(ClockId::CLOCK_REALTIME_COARSE)
        .or_else(|_| clock_gettime(ClockId::CLOCK_REALTIME))
        .unwrap_or(nix::sys::time::TimeSpec::new(0, 0));
    (t.tv_sec(), t.tv_nsec())
}

#[cfg(test)]
mod tests {
    /// glibc functions the standard library references weakly (`nm` of the
    /// static build lists them as `w`): under fat LTO a direct call from
    /// vetto merges into that weak reference, and in a `crt-static` binary
    /// — the one `action.yml` installs — nothing resolves it, so the call
    /// jumps to address 0. Such calls go through `libc::syscall`.
    const WEAK_IN_STD: &[&str] = &[
        "statx",
        "copy_file_range",
        "gettid",
        "pidfd_getpid",
        "pidfd_spawnp",
        "posix_spawn_file_actions_addchdir",
        "posix_spawn_file_actions_addchdir_np",
    ];

    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn weak_libc_symbols_are_never_called_directly() {
        let mut files = Vec::new();
        sources(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        assert!(files.len() > 50, "the sources were not found");
        let mut calls = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for name in WEAK_IN_STD {
                if text.contains(&format!("libc::{name}(")) {
                    calls.push(format!("{}: libc::{name}", file.display()));
                }
            }
        }
        assert!(
            calls.is_empty(),
            "call these through libc::syscall: {calls:?}"
        );
    }
}
