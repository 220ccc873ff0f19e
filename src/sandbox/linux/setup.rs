//! The child side: one ordered sequence, read top to bottom.
//!
//! It runs in `vetto __stage`, a fresh single-threaded process re-executed
//! from the vetto binary with an empty environment (so nothing of the
//! caller's environment is readable in its /proc entry), which receives the
//! plan over an inherited pipe. After restricting itself it forks: the
//! child execs the job, the parent stays as the sandbox's init — inside the
//! same Landlock domain and seccomp filter — reaping orphans, forwarding
//! signals, and killing every leftover process when the job ends or vetto
//! dies.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, signal, sigprocmask};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getppid};

use super::{StageReport, StageRequest, landlock, namespaces, seccomp, sys};

/// The signal the init gets when vetto dies (`PR_SET_PDEATHSIG`): kill
/// everything and leave. A signal nothing else sends; the job sending it
/// itself is ignored unless vetto is really gone.
pub const PARENT_DEATH_SIGNAL: Signal = Signal::SIGPWR;

/// Signals the init passes on to the job when another process sent them.
const FORWARDED: [Signal; 7] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// Upper bound on the serialized plan read from the supervisor.
const MAX_PLAN_BYTES: u64 = 64 << 20;

pub struct StageFds {
    pub plan: RawFd,
    pub status: RawFd,
    pub notify: RawFd,
}

/// Runs the stage; returns only on failure before the job started (the
/// init exits from within).
pub fn stage(fds: StageFds, early: Option<crate::sandbox::EarlyNamespaces>) -> u8 {
    // SAFETY-free adoption of the three inherited descriptors: the
    // supervisor passed their numbers and nothing else owns them.
    let (plan_fd, status_fd, notify_fd) = match adopt(&fds) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("vetto: stage: bad descriptors: {e}");
            return crate::exit::REFUSED;
        }
    };
    let mut status = Some(File::from(status_fd));
    // 0. vetto expects the FULL tier: create its namespaces now, while
    //    vetto is still loading the policy (the most expensive step of the
    //    tier, the network namespace, then costs the job nothing). Only the
    //    namespaces: the view stays the host's until the plan says what to
    //    build, and the steps before 6 still see it. If the plan is not for
    //    these namespaces, vetto replaces this stage unlaunched.
    let early = early.map(|e| namespaces::enter(e.net));
    let (report, code) = match apply(plan_fd, notify_fd, &mut status, early) {
        Ok(never) => match never {},
        Err(Failure::Setup(message)) => (StageReport::SetupFailed(message), crate::exit::REFUSED),
        Err(Failure::Exec(errno)) => (
            StageReport::ExecFailed {
                errno: errno as i32,
                path: None,
            },
            exec_status(errno),
        ),
    };
    if let Some(mut status) = status {
        let _ = status.write_all(&report.encode());
    }
    code
}

/// Why the job did not start.
enum Failure {
    /// vetto could not build the sandbox: exit 125.
    Setup(String),
    /// The program could not be executed: 126/127 like a shell.
    Exec(Errno),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Setup(message)
    }
}

fn adopt(fds: &StageFds) -> std::io::Result<(OwnedFd, OwnedFd, OwnedFd)> {
    let mut owned = Vec::new();
    for fd in [fds.plan, fds.status, fds.notify] {
        if fd < 3 || !sys::fd_is_open(fd) {
            return Err(std::io::Error::from_raw_os_error(libc::EBADF));
        }
        // SAFETY: the supervisor handed us these fd numbers for our exclusive
        // use and we checked they are open; each is adopted exactly once.
        owned.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let notify = owned.pop();
    let status = owned.pop();
    let plan = owned.pop();
    match (plan, status, notify) {
        (Some(p), Some(s), Some(n)) => {
            for fd in [&p, &s, &n] {
                sys::set_cloexec(fd.as_fd())?;
            }
            Ok((p, s, n))
        }
        _ => Err(std::io::Error::from_raw_os_error(libc::EBADF)),
    }
}

enum Never {}

fn apply(
    plan_fd: OwnedFd,
    notify_fd: OwnedFd,
    status: &mut Option<File>,
    early: Option<Result<(), String>>,
) -> Result<Never, Failure> {
    // 1. Read the request. Bounded: the supervisor is trusted, but a
    //    truncated or runaway pipe must not exhaust memory.
    // Room for a typical plan at once (a default-policy plan is ≈ 14 KiB):
    // one read instead of a doubling series of small ones.
    let mut buf = Vec::with_capacity(64 << 10);
    File::from(plan_fd)
        .take(MAX_PLAN_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read the plan: {e}"))?;
    let request: StageRequest =
        serde_json::from_slice(&buf).map_err(|e| format!("cannot decode the plan: {e}"))?;
    let plan = &request.plan;

    // 2. Die with vetto. If vetto died before PDEATHSIG was set, our
    //    parent has already changed: leave now.
    nix::sys::prctl::set_pdeathsig(PARENT_DEATH_SIGNAL)
        .map_err(|e| format!("prctl(PR_SET_PDEATHSIG): {e}"))?;
    if getppid().as_raw() != request.supervisor {
        return Err(Failure::Setup(
            "vetto exited before the sandbox started".into(),
        ));
    }

    // 3. Non-dumpable: the job, in the same domain and uid, cannot read
    //    this process's memory (the plan, including passed variables).
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("prctl(PR_SET_DUMPABLE): {e}"))?;

    // 4. Resource limits: rlimits are inherited, so set them before fork.
    //    RLIMIT_NPROC counts a uid's tasks in each user namespace up the
    //    chain, and a new user namespace takes its creator's limit as its
    //    ceiling in the parent. Set before the namespaces exist (step 6),
    //    that ceiling is the user's host task count at launch plus N.
    //    Created at step 0, the namespace's ceiling is already fixed, so
    //    the limit that binds is the count inside it: this process (the
    //    relay), the init and the job's tasks — N of them for the init and
    //    the job, as before.
    let nproc_limit = match (&early, plan.limits.max_procs) {
        (Some(Ok(())), Some(n)) => Some(u64::from(n) + 1),
        _ => request.nproc_limit,
    };
    if let Some(n) = nproc_limit {
        setrlimit(Resource::RLIMIT_NPROC, n, n)
            .map_err(|e| format!("setrlimit(RLIMIT_NPROC): {e}"))?;
    }

    // 5. Output directories, while we may still create them: Landlock
    //    grants bind to existing inodes, so they must exist before step 9.
    for dir in &plan.prepare_dirs {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display()).into()),
        }
    }
    //    Likewise the spares the supervisor turns into the job's new
    //    entries in a list-only project root (docs/tiers.md).
    if let Some(pool) = &plan.notify.spares {
        make_spares(pool)
            .map_err(|e| format!("cannot create the spares {}: {e}", pool.dir.display()))?;
    }

    // 6. FULL tier: namespaces. This process stays outside as a relay;
    //    its child is the sandbox's PID 1 and carries on with the sequence
    //    inside the new root.
    match (&plan.namespaces, early) {
        (Some(ns), None) => namespaces::enter(ns.net)?,
        // Entered at step 0 (vetto checked that they are the plan's), or
        // failed there as they would have failed here.
        (Some(_), Some(entered)) => entered?,
        (None, None) => {}
        (None, Some(_)) => {
            return Err(Failure::Setup(
                "the sandbox stage was prepared for another tier".into(),
            ));
        }
    }
    if let Some(ns) = &plan.namespaces {
        namespaces::prepare_scratch()?;
        // The secret traps, mounted here and not in PID 1: this process is
        // still in the host's PID namespace, so the kernel names the
        // processes touching a trap by the pids vetto sees. vetto serves
        // them from now on, before PID 1 exists.
        let traps = if ns.masks().next().is_some() {
            super::traps::mount_and_send(ns, namespaces::trap_mount_point, notify_fd.as_fd())?
        } else {
            Vec::new()
        };
        // SAFETY: single-threaded process (see the module comment).
        match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
            ForkResult::Parent { child } => {
                drop(status.take());
                drop(notify_fd);
                relay(child, request.supervisor)
            }
            ForkResult::Child => {
                // Dies with the relay; SIGKILL reaches a namespace's PID 1
                // from outside it, and its death ends every process inside.
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                    .map_err(|e| format!("prctl(PR_SET_PDEATHSIG): {e}"))?;
                namespaces::build_root(ns, &traps)?;
                // Filtered egress: the proxy's listeners, made here in the
                // job's namespace (whose only interface is loopback) and
                // served by vetto outside it; nothing else leaves.
                if plan.egress == Some(crate::plan::net::EgressPlan::Netns) {
                    send_egress_listeners(notify_fd.as_fd(), ns.dns_stub.as_ref())?;
                } else if ns.dns_stub.is_some() {
                    // Network off: only the DNS stub, which refuses every
                    // name (and so records the name asked).
                    send_dns_stub(notify_fd.as_fd())?;
                }
                // Everything that needed the namespace's capabilities is
                // done; the job starts with none, whatever uid it maps to.
                sys::drop_all_capabilities().map_err(|e| format!("drop capabilities: {e}"))?;
            }
        }
    }

    // 7. The job's working directory, resolved before the domain exists
    //    so the path means what the plan meant.
    std::env::set_current_dir(&plan.cwd)
        .map_err(|e| format!("cannot enter {}: {e}", plan.cwd.display()))?;

    // 8. no_new_privs: required for unprivileged seccomp and Landlock, and
    //    makes setuid binaries gain nothing.
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("prctl(PR_SET_NO_NEW_PRIVS): {e}"))?;

    // 9. Landlock, before seccomp: its own syscalls are then not filtered.
    if let Some(ll) = &plan.landlock {
        landlock::restrict(ll).map_err(|e| e.to_string())?;
    }

    // 10. Find the program's candidates on the job's PATH (which of them
    //     the domain lets run, `execve` finds out at 15).
    let candidates = crate::sandbox::exec_unix::resolve_program(
        &request.argv,
        &plan.env.vars,
        "/usr/local/bin:/usr/bin:/bin",
    )
    .map_err(Failure::Exec)?;
    let argv = cstrings(request.argv.iter().map(|a| a.as_slice()))?;
    let envp = cstrings(
        plan.env
            .vars
            .iter()
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
            .collect::<Vec<_>>()
            .iter()
            .map(Vec::as_slice),
    )?;

    // 11. Subreaper: daemons that double-fork and setsid come back to us.
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| format!("prctl(PR_SET_CHILD_SUBREAPER): {e}"))?;

    // 12. Nothing the caller of vetto inherited passes into the job.
    sys::cloexec_from(3).map_err(|e| format!("close_range: {e}"))?;

    // 13. Block the signals the init waits for, before the job exists, so
    //     none is lost between fork and the wait loop.
    let mut waited = SigSet::empty();
    for s in FORWARDED {
        waited.add(s);
    }
    waited.add(Signal::SIGCHLD);
    let death = PARENT_DEATH_SIGNAL;
    waited.add(death);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&waited), None)
        .map_err(|e| format!("sigprocmask: {e}"))?;

    // 13b. No capabilities: a job started by root keeps none of root's
    //      powers over the host (ptrace-reading vetto's environment,
    //      overriding file permissions, …). After Landlock, which needs
    //      none, and before seccomp, which filters capset.
    sys::drop_all_capabilities().map_err(|e| format!("drop capabilities: {e}"))?;

    // 13c. --max-memory: RLIMIT_DATA, inherited by the job and all it
    //      starts. It counts private writable memory (heap, thread
    //      stacks, writable private mappings), not the PROT_NONE address
    //      space V8, the JVM and Go reserve. The hard limit is the limit;
    //      the supervisor moves the soft one to share it out over the
    //      tree (`plan::memory`). Here, late: vetto's own set-up is not
    //      counted; before seccomp, which then forbids the job to change it.
    if let Some(memory) = &plan.memory {
        setrlimit(Resource::RLIMIT_DATA, memory.limit, memory.limit)
            .map_err(|e| format!("setrlimit(RLIMIT_DATA): {e}"))?;
    }

    // 14. seccomp last: nothing after it but sendmsg, fork and execve. Only
    //     the fork may be notified (`--max-memory` shares), after the
    //     listener was sent: vetto answers that one first
    //     (`Listener::pass_first_fork`).
    let listener = seccomp::install(&plan.seccomp).map_err(|e| e.to_string())?;
    if let Some(listener) = listener {
        let fds = [listener.as_raw_fd()];
        sendmsg::<()>(
            notify_fd.as_raw_fd(),
            &[std::io::IoSlice::new(b"L")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(|e| format!("cannot hand the notification listener to vetto: {e}"))?;
    }
    // The same socket then carries the init's reports (processes the job
    // left running). Non-blocking: a full buffer drops reports, it never
    // stalls the init.
    let reports = std::os::unix::net::UnixStream::from(notify_fd);
    let _ = reports.set_nonblocking(true);

    // 15. Fork the job.
    // SAFETY: this process is single-threaded (a fresh exec that started no
    // threads), so the child may run arbitrary code after fork.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
            let _ = nix::sys::prctl::set_child_subreaper(false);
            // The Rust runtime of this stage ignores SIGPIPE, and an ignored
            // signal survives execve: the job would see EPIPE where it
            // expects to die quietly (`yes | head`), as std's Command
            // avoids for the processes it spawns.
            // SAFETY: restoring the default disposition installs no handler code.
            let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
            let (err, at) = crate::sandbox::exec_unix::exec_first(&candidates, &argv, &envp);
            if let Some(status) = status.as_mut() {
                let report = StageReport::ExecFailed {
                    errno: err as i32,
                    path: at.map(|p| p.to_string_lossy().into_owned()),
                };
                let _ = status.write_all(&report.encode());
            }
            std::process::exit(i32::from(exec_status(err)));
        }
        ForkResult::Parent { child } => {
            // Closing our copy lets the supervisor see EOF once the job has
            // exec'ed (the job's copy is close-on-exec).
            drop(status.take());
            init(
                child,
                (&waited, death),
                request.supervisor,
                &request.plan.expected_daemons,
                reports,
            )
        }
    }
}

/// The spare pool: a new directory (never one that exists, nor anything
/// through a link) in the project's checked `.git`, and its entries made
/// relative to it (`safe_fs`). Its name comes from the session
/// directory's, which nobody can guess.
fn make_spares(pool: &crate::plan::fs::SparePool) -> Result<(), crate::sys::safe_fs::SafeFsError> {
    use crate::sys::safe_fs;
    let dir = safe_fs::create_private_dir(&pool.dir, safe_fs::Parents::AsNamed)?;
    for name in &pool.files {
        dir.create_new(name, 0o600)?;
    }
    for name in &pool.dirs {
        dir.create_dir_new(name, 0o700)?;
    }
    Ok(())
}

fn exec_status(e: Errno) -> u8 {
    if e == Errno::ENOENT {
        crate::exit::NOT_FOUND
    } else {
        crate::exit::NOT_EXECUTABLE
    }
}

fn cstrings<'a>(items: impl Iterator<Item = &'a [u8]>) -> Result<Vec<CString>, String> {
    items
        .map(|b| CString::new(b).map_err(|_| "an argument contains a NUL byte".to_string()))
        .collect()
}

/// The sandbox's init: wait for the job, pass signals on, and when the job
/// ends (or vetto dies) kill every process left and exit as the job did.
fn init(
    job: Pid,
    (waited, death): (&SigSet, Signal),
    supervisor: i32,
    expected: &[crate::policy::ExpectedDaemon],
    mut reports: std::os::unix::net::UnixStream,
) -> ! {
    let mut job_status: Option<WaitStatus> = None;
    loop {
        if let Some(caught) = sys::sigtimedwait(waited, Duration::from_secs(3600)) {
            let sig = Signal::try_from(caught.signo).ok();
            if sig == Some(death) && getppid().as_raw() != supervisor {
                kill_descendants();
                std::process::exit(128 + libc::SIGKILL);
            }
            if let Some(sig) = sig
                && sig != Signal::SIGCHLD
                && caught.from_user()
            {
                let _ = kill(job, sig);
            }
        }
        // Reap everything that has exited: orphans come to us too.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(ws) => {
                    if ws.pid() == Some(job) {
                        job_status = Some(ws);
                    }
                }
            }
        }
        if let Some(ws) = job_status {
            // What the job's tools left running may end by itself first.
            grace_for_leftovers((waited, death), supervisor, expected);
            // The session is over: nothing the job started outlives it.
            report_escapes(&mut reports);
            kill_descendants();
            // Only now, with every process reaped, may vetto stop waiting.
            report_end(&mut reports, ws);
            exit_like(ws);
        }
    }
}

/// How long what the job left running may go on after the job ended.
/// Everyday tools start helpers that outlive the command by a moment:
/// git's `maintenance run --auto --detach` after a commit (seconds on a
/// repository with thousands of loose objects), a `gpg-agent` a test
/// suite's signed commit started (it ends once its home is removed), a
/// background child about to end. Bounded: a daemon meant to stay costs
/// the session this much, then is killed and recorded.
const LEFTOVER_GRACE: Duration = Duration::from_secs(5);

/// The job has ended: give what it left running [`LEFTOVER_GRACE`] to
/// end by itself, still sandboxed (its calls are decided and recorded as
/// before), reaping as it goes. What ends in time is no finding; what is
/// still running then is reported and killed by the caller. Ends early
/// once nothing is left, or nothing but daemons the policy expects (they
/// never end by themselves: no wait for them), or on a signal vetto sends.
fn grace_for_leftovers(
    (waited, death): (&SigSet, Signal),
    supervisor: i32,
    expected: &[crate::policy::ExpectedDaemon],
) {
    let deadline = std::time::Instant::now() + LEFTOVER_GRACE;
    loop {
        while let Ok(ws) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if ws == WaitStatus::StillAlive {
                break;
            }
        }
        let only_expected = super::proc::descendants(std::process::id())
            .into_iter()
            .filter(|pid| !super::proc::is_exiting(*pid))
            .all(|pid| {
                std::fs::read_link(format!("/proc/{pid}/exe"))
                    .is_ok_and(|exe| expected.iter().any(|d| d.matches(&exe)))
            });
        let now = std::time::Instant::now();
        if only_expected || now >= deadline {
            return;
        }
        // A child's end wakes this at once (SIGCHLD); one deeper in the
        // tree is seen at the next look.
        let Some(caught) = sys::sigtimedwait(
            waited,
            deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(100)),
        ) else {
            continue;
        };
        let sig = Signal::try_from(caught.signo).ok();
        if sig == Some(death) && getppid().as_raw() != supervisor {
            kill_descendants();
            std::process::exit(128 + libc::SIGKILL);
        }
        if sig.is_some_and(|s| s != Signal::SIGCHLD) && caught.from_user() {
            return;
        }
    }
}

/// Tell vetto which processes the job left running (daemons, background
/// jobs) before they are killed: one JSON line each, at most
/// [`MAX_ESCAPE_REPORTS`]. A process already on its way out is none: a
/// child the job's last process left that exits with it (git's
/// `git-remote-https`) is a zombie, or mid-exit, for a moment after the
/// job was reaped, and was reported as escaped by an unknown process.
fn report_escapes(reports: &mut std::os::unix::net::UnixStream) {
    for pid in super::proc::descendants(std::process::id())
        .into_iter()
        .filter(|pid| !super::proc::is_exiting(*pid))
        .take(MAX_ESCAPE_REPORTS)
    {
        let escaped = super::InitReport::Escaped(super::super::EscapedProcess {
            pid,
            exe: std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            argv: super::proc::cmdline(pid),
        });
        if send_report(reports, &escaped).is_err() {
            break;
        }
    }
}

/// Tell vetto how the job ended, once nothing of it runs any more.
fn report_end(reports: &mut std::os::unix::net::UnixStream, ws: WaitStatus) {
    let status = match ws {
        WaitStatus::Exited(_, code) => super::super::JobStatus::Exited(code),
        WaitStatus::Signaled(_, sig, _) => super::super::JobStatus::Signaled(sig as i32),
        // Not an end: vetto falls back to waiting for this process.
        _ => return,
    };
    let (cpu_user_ms, cpu_sys_ms) = super::proc::reaped_children_cpu_ms();
    let end = super::InitReport::Ended(super::super::JobEnd {
        status,
        cpu_user_ms,
        cpu_sys_ms,
    });
    let _ = send_report(reports, &end);
}

fn send_report(
    reports: &mut std::os::unix::net::UnixStream,
    report: &super::InitReport,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(report)?;
    line.push(b'\n');
    reports.write_all(&line)
}

/// How many left-over processes the init reports (it kills them all).
const MAX_ESCAPE_REPORTS: usize = 64;

/// SIGKILL every descendant until none is left, reaping as we go.
pub fn kill_descendants() {
    for _ in 0..1000 {
        let pids = super::proc::descendants(std::process::id());
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        while let Ok(ws) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if ws == WaitStatus::StillAlive {
                break;
            }
        }
    }
    while waitpid(None, None).is_ok() {}
}

/// Exit with the job's status, re-raising its fatal signal so the
/// supervisor sees exactly what the job saw.
fn exit_like(ws: WaitStatus) -> ! {
    match ws {
        WaitStatus::Exited(_, code) => std::process::exit(code),
        WaitStatus::Signaled(_, sig, _) => {
            // No core file of the init for the job's crash.
            let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
            let _ = super::raise_default(sig);
            std::process::exit(128 + sig as i32)
        }
        _ => std::process::exit(i32::from(crate::exit::REFUSED)),
    }
}

/// FULL tier, outside the namespaces: pass signals on to the sandbox's
/// PID 1, and leave as it did. If vetto dies, kill PID 1: the kernel then
/// kills every process in its namespace.
fn relay(init: Pid, supervisor: i32) -> ! {
    let mut waited = SigSet::empty();
    for s in FORWARDED {
        waited.add(s);
    }
    waited.add(Signal::SIGCHLD);
    waited.add(PARENT_DEATH_SIGNAL);
    if sigprocmask(SigmaskHow::SIG_BLOCK, Some(&waited), None).is_err() {
        let _ = kill(init, Signal::SIGKILL);
        std::process::exit(i32::from(crate::exit::REFUSED));
    }
    loop {
        if let Some(caught) = sys::sigtimedwait(&waited, Duration::from_secs(3600)) {
            let sig = Signal::try_from(caught.signo).ok();
            if sig == Some(PARENT_DEATH_SIGNAL) && getppid().as_raw() != supervisor {
                let _ = kill(init, Signal::SIGKILL);
                std::process::exit(128 + libc::SIGKILL);
            }
            if let Some(sig) = sig
                && FORWARDED.contains(&sig)
                && caught.from_user()
            {
                let _ = kill(init, sig);
            }
        }
        if let Ok(ws) = waitpid(init, Some(WaitPidFlag::WNOHANG))
            && ws != WaitStatus::StillAlive
        {
            exit_like(ws);
        }
    }
}

/// Bind the egress proxy's listeners on the namespace's loopback
/// (127.0.0.1 and, where IPv6 is up, ::1) and hand them to vetto, tagged
/// `N`, before the notification listener; then the redirected listeners
/// (`R`, port 3129: connects an IP rule allows), the DNS stub's sockets
/// (`D`, [`send_dns_stub`]) and the transparent listeners (`T`).
/// Ports below 1024 need `CAP_NET_BIND_SERVICE` in the namespace: this
/// process still has it.
fn send_egress_listeners(
    to: std::os::fd::BorrowedFd<'_>,
    stub: Option<&crate::plan::net::DnsStub>,
) -> Result<(), Failure> {
    let port = crate::plan::net::NETNS_PROXY_PORT;
    let v4 = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} for the egress proxy: {e}"))?;
    let v6 = std::net::TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, port)).ok();
    let mut fds = vec![v4.as_raw_fd()];
    fds.extend(v6.as_ref().map(AsRawFd::as_raw_fd));
    send_tagged(to, b'N', &fds)?;
    let redirect = crate::plan::net::NETNS_REDIRECT_PORT;
    let r4 = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, redirect))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{redirect} for the egress proxy: {e}"))?;
    let r6 = std::net::TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, redirect)).ok();
    let mut fds = vec![r4.as_raw_fd()];
    fds.extend(r6.as_ref().map(AsRawFd::as_raw_fd));
    send_tagged(to, b'R', &fds)?;
    let Some(stub) = stub else { return Ok(()) };
    send_dns_stub(to)?;
    // Every address of 127/8 is the namespace's loopback: 0.0.0.0 takes
    // connections to the stub's synthetic addresses.
    let listeners: Vec<std::net::TcpListener> = stub
        .ports
        .iter()
        .filter_map(|p| std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, *p)).ok())
        .collect();
    let fds: Vec<RawFd> = listeners.iter().map(AsRawFd::as_raw_fd).collect();
    send_tagged(to, b'T', &fds)?;
    Ok(())
}

/// The DNS stub's sockets (`D`), made in the job's namespace on
/// 127.0.0.53:53: a UDP socket and a TCP listener (DNS over TCP: `dig
/// +tcp`, `RES_OPTIONS=use-vc`), each left out if it cannot be bound;
/// vetto tells them apart by their type.
fn send_dns_stub(to: std::os::fd::BorrowedFd<'_>) -> Result<(), Failure> {
    let udp = std::net::UdpSocket::bind(crate::plan::net::DNS_STUB_ADDR).ok();
    let tcp = std::net::TcpListener::bind(crate::plan::net::DNS_STUB_ADDR).ok();
    let mut fds: Vec<RawFd> = udp.iter().map(AsRawFd::as_raw_fd).collect();
    fds.extend(tcp.iter().map(AsRawFd::as_raw_fd));
    send_tagged(to, b'D', &fds)
}

fn send_tagged(to: std::os::fd::BorrowedFd<'_>, tag: u8, fds: &[RawFd]) -> Result<(), Failure> {
    let tags = [tag];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
    sendmsg::<()>(
        to.as_raw_fd(),
        &[std::io::IoSlice::new(&tags)],
        cmsgs,
        MsgFlags::empty(),
        None,
    )
    .map_err(|e| format!("cannot hand the egress proxy's sockets to vetto: {e}"))?;
    Ok(())
}
