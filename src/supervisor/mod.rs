//! The parent side: waits for the job, forwards signals, enforces the time
//! and memory limits, and answers seccomp notifications. It never restricts
//! itself, so it may run threads.

use std::time::{Duration, Instant};

use crate::sys::os::{Signal, WaitStatus};

#[cfg(target_os = "linux")]
pub mod concealment;
pub mod notify;
pub mod output;
pub mod persist;
pub mod put_back;
pub mod snapshot;

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::events::log::EventSink;
use crate::events::{
    Action, Event, LimitEvent, LimitKind, Package, ProcessEvent, ProcessInfo, ProcessKind,
    Provenance, ResourceSample, RuleId, Target, Timestamp, Violation,
};
use crate::exit::Outcome;
use crate::plan::Plan;
use crate::plan::memory::{MemoryPlan, TreeBound};
use crate::sandbox::process::{self, SignalWaiter};
use crate::sandbox::{JobStatus, SecretAccess, SecretFeed, SecretOp, Spawned};

/// Signals vetto passes on to the sandbox when another process sent them.
/// Terminal-generated ones already reach the job's process group.
pub const FORWARDED: [Signal; 7] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// How often limits are checked while the job runs.
const TICK: Duration = Duration::from_millis(100);

/// Prepare this process to supervise: subreaper, non-dumpable, and the
/// forwarded signals blocked so they queue for the wait loop (threads
/// started afterwards inherit the mask, so no thread dies of SIGTERM).
pub fn prepare() -> crate::sys::os::Result<SignalWaiter> {
    process::harden_supervisor()?;
    SignalWaiter::block(&FORWARDED)
}

/// How often the process tree is sampled for the resource figures.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// How often `--max-memory` is checked and its shares rebalanced (unless
/// a cgroup holds it).
const MEMORY_EVERY: Duration = Duration::from_millis(crate::plan::memory::SAMPLE_EVERY_MS);
/// Resource samples kept; beyond it every other one is dropped, so a long
/// session keeps an even, bounded timeline.
const MAX_SAMPLES: usize = 4096;
/// Seccomp-notification decisions kept for the reports (the rest counted).
const MAX_DECISIONS: usize = 10_000;
/// Distinct masked paths listed in the session summary (the log's
/// aggregator bounds its own).
pub const MAX_SECRET_PATHS: usize = 256;

/// One sample of the whole sandboxed process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// Milliseconds since the job started.
    pub t: u64,
    pub cpu_user_ms: u64,
    pub cpu_sys_ms: u64,
    pub rss_bytes: u64,
    pub procs: u32,
}

/// A resource limit that ended the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    Timeout { max_ms: u64 },
    Memory { max: u64, observed: u64 },
}

impl LimitHit {
    /// What happened, for vetto's one line about it.
    pub fn message(&self) -> String {
        let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
        match *self {
            LimitHit::Timeout { max_ms } => {
                format!("the command was killed at the {max_ms} ms --timeout")
            }
            LimitHit::Memory { max, observed } => format!(
                "the command was killed: its processes held {:.1} MiB of memory, over the --max-memory of {:.1} MiB (the whole process tree was stopped)",
                mib(observed),
                mib(max)
            ),
        }
    }
}

/// Everything the supervisor observed about one session.
#[derive(Debug)]
pub struct Session {
    pub outcome: Outcome,
    pub duration: Duration,
    /// CPU of the whole tree (every process was reaped by the end).
    pub cpu_user_ms: u64,
    pub cpu_sys_ms: u64,
    pub peak_rss_bytes: u64,
    pub peak_procs: u32,
    pub samples: Vec<Sample>,
    pub limit: Option<LimitHit>,
    /// Processes the job left running (killed at the end).
    pub escaped: Vec<crate::sandbox::EscapedProcess>,
    /// What the seccomp-notification handler decided, in order.
    pub decisions: Vec<notify::NotifyEvent>,
    /// Decisions beyond [`MAX_DECISIONS`], not kept.
    pub decisions_dropped: u64,
    /// What the job left in shared host directories, removed at the end.
    pub scrubbed: Vec<PathBuf>,
    /// New entries of the user's there that could not be attributed to
    /// the job or to anyone else (names not kept, a directory not
    /// watched): left in place.
    pub scrub_unattributed: u64,
    /// Masked secrets the job tried to read (FULL tier), in the order
    /// first seen, at most [`MAX_SECRET_PATHS`].
    pub secret_reads: Vec<SecretRead>,
    /// Accesses to further paths (names looked up beneath a masked
    /// directory can be endless): counted, not listed.
    pub secret_reads_unlisted: u64,
    /// Whether the job asked to add, remove or rename any directory entry;
    /// `None` when that cannot be known (the filter lets some such call
    /// through unseen, or nothing answers notifications).
    pub entry_changes: Option<notify::EntryChanges>,
}

impl Session {
    /// The job changed no directory entry anywhere: every such call is
    /// notified, and none was. Read once every process of the job is gone
    /// (a worker still holding a notification notes it before it checks
    /// that the caller lives, and acts only if it does).
    pub fn changed_no_entry(&self) -> bool {
        self.entry_changes
            .as_ref()
            .is_some_and(notify::EntryChanges::none)
    }

    /// How many calls adding, removing or renaming an entry the
    /// supervisor looked at while the job ran.
    pub fn entry_calls_checked(&self) -> u64 {
        self.entry_changes
            .as_ref()
            .map_or(0, notify::EntryChanges::checked)
    }
}

/// A masked path the job opened, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRead {
    pub path: PathBuf,
    /// Every open, listing or lookup: the traps miss none.
    pub count: u64,
}

impl Session {
    /// Decisions that are violations (denied or protected).
    pub fn denials(&self) -> usize {
        self.decisions.iter().filter(|d| d.is_violation()).count()
    }
}

/// Whether every change the job can make to a directory entry, itself or
/// through a host program it talks to, passes the supervisor: every call
/// that makes one is notified or refused; `--audit` refuses nothing (its
/// io_uring would go unseen); and every connection to something outside
/// the sandbox is brokered (a pathname unix socket, noted as a possible
/// change) rather than the host's own network, where a local service
/// could act for the job unseen.
fn entries_are_seen(plan: &Plan) -> bool {
    plan.seccomp.notifies_every_entry_change()
        && !plan.notify.audit
        && plan.notify.broker_unix_connect
        && plan.notify.net_connect != crate::plan::fs::NetConnect::Open
}

/// The entries of the plan's shared directories before the job starts, so
/// that what it adds can be removed afterwards. Call before launching.
pub fn snapshot_shared(plan: &Plan) -> Vec<(PathBuf, HashSet<OsString>)> {
    plan.scrub_dirs
        .iter()
        .map(|d| (d.clone(), entries(d)))
        .collect()
}

fn entries(dir: &Path) -> HashSet<OsString> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect()
}

/// Remove what the job added to the shared directories: only entries the
/// notification server saw the job create (`created`), that are new since
/// the snapshot and belong to this user, never following symlinks. The
/// user's other processes (a browser, another session) create entries
/// there meanwhile too: what was not seen created by the job is never
/// removed. Returns what was removed and how many new entries of the
/// user's could not be attributed (where the record is incomplete).
///
/// The names come from the job's memory, read before its call went on: a
/// racing thread can have the kernel create another name. Removing a
/// recorded name gives the job nothing it lacks (Landlock lets it remove
/// any of the user's entries there itself); a raced name is left behind.
fn scrub_shared(
    before: &[(PathBuf, HashSet<OsString>)],
    created: Option<&notify::SharedCreations>,
) -> (Vec<PathBuf>, u64) {
    let uid = crate::sys::os::current_uid();
    let mut removed = Vec::new();
    let mut unattributed = 0;
    for (dir, old) in before {
        let seen = created.and_then(|c| c.dirs.iter().find(|(d, _)| d == dir));
        let complete = seen.is_some() && created.is_some_and(|c| c.unkept == 0);
        for name in entries(dir).difference(old) {
            let path = dir.join(name);
            let Ok(md) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if crate::sys::os::owner_uid(&md) != Some(uid) {
                continue;
            }
            if !seen.is_some_and(|(_, names)| names.contains(name)) {
                if !complete {
                    unattributed += 1;
                }
                continue;
            }
            let gone = if md.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if gone.is_ok() {
                removed.push(path);
            }
        }
    }
    (removed, unattributed)
}

/// Wait for the sandbox to end and return what happened. `meanwhile`
/// runs once the job's notifications are being answered, before the
/// waiting: the session's own work that can be done while the job runs.
pub fn run(
    mut child: Spawned,
    plan: &Plan,
    signals: &SignalWaiter,
    shared_before: &[(PathBuf, HashSet<OsString>)],
    sink: Option<&dyn EventSink>,
    egress: Option<std::sync::Arc<dyn notify::EgressBroker>>,
    meanwhile: impl FnOnce(),
) -> Session {
    let (events, decisions) = mpsc::channel();
    let memory = plan.memory.as_ref();
    let shares = match memory {
        Some(MemoryPlan {
            limit,
            tree: TreeBound::Shares { fork_floor },
        }) => Some(std::sync::Arc::new(crate::sandbox::memory::Shares::new(
            *limit,
            *fork_floor,
        ))),
        _ => None,
    };
    // The supervisor samples the tree itself unless a cgroup holds it.
    let sampled = memory.filter(|m| !matches!(m.tree, TreeBound::Cgroup(_)));
    let full = plan.namespaces.is_some();
    let server = match child.listener.take() {
        Some(listener) => {
            match notify::serve(listener, &plan.notify, shares.clone(), egress, events) {
                Ok(server) => Some(server),
                Err(e) => {
                    // The listener is gone with the error: notified calls now
                    // fail with ENOSYS, closed rather than open.
                    eprintln!("vetto: cannot answer seccomp notifications: {e}");
                    None
                }
            }
        }
        None => None,
    };
    let start = Instant::now();
    // A job that ends meanwhile is seen at the first wait below (its
    // SIGCHLD stays pending).
    meanwhile();
    let deadline = plan.limits.timeout.map(|t| start + t);
    let mut session = Session {
        outcome: Outcome::Exited(0),
        duration: Duration::ZERO,
        cpu_user_ms: 0,
        cpu_sys_ms: 0,
        peak_rss_bytes: 0,
        peak_procs: 0,
        samples: Vec::new(),
        limit: None,
        escaped: Vec::new(),
        decisions: Vec::new(),
        decisions_dropped: 0,
        scrubbed: Vec::new(),
        scrub_unattributed: 0,
        secret_reads: Vec::new(),
        secret_reads_unlisted: 0,
        entry_changes: server
            .as_ref()
            .filter(|_| entries_are_seen(plan))
            .map(notify::NotifyServer::entry_changes),
    };
    let secrets = child.secrets.take();
    for problem in secrets.iter().flat_map(|f| &f.problems) {
        eprintln!("vetto: warning: reads of a masked secret will not be seen: {problem}");
    }
    let mut next_sample = start;
    let mut next_memory = start;
    let mut procs_limit_seen = false;
    let mut ended = None;
    session.outcome = loop {
        let tick = match sampled {
            Some(_) => next_memory
                .saturating_duration_since(Instant::now())
                .min(TICK),
            None => TICK,
        };
        let wait = deadline
            .map(|d| d.saturating_duration_since(Instant::now()).min(tick))
            .unwrap_or(tick);
        if let Some(caught) = signals.wait(wait)
            && caught.from_user()
            && let Some(sig) = FORWARDED.iter().find(|s| **s as i32 == caught.signo)
        {
            process::send(child.pid, *sig);
        }
        keep_decisions(&mut session, &decisions, sink, &plan.notify);
        if let Some(feed) = &secrets {
            keep_secret_reads(&mut session, feed, sink);
        }
        keep_observed(&mut child, false, sink);
        if let Some(end) = child.ended() {
            ended = Some(end);
            if let Some(m) = memory
                && child.memory_oom_killed()
            {
                session.limit = Some(LimitHit::Memory {
                    max: m.limit,
                    observed: m.limit.max(session.peak_rss_bytes),
                });
                break Outcome::LimitKilled;
            }
            break match end.status {
                JobStatus::Exited(code) => Outcome::Exited(code),
                JobStatus::Signaled(sig) => Outcome::Signaled(sig),
            };
        }
        if let Some(ws) = process::try_wait(child.pid) {
            break match ws {
                WaitStatus::Exited(_, code) => Outcome::Exited(code),
                WaitStatus::Signaled(_, sig, _) => Outcome::Signaled(sig as i32),
                _ => Outcome::Exited(i32::from(crate::exit::REFUSED)),
            };
        }
        process::reap_orphans(child.pid);
        if let Some(d) = deadline
            && Instant::now() >= d
        {
            let max_ms = plan.limits.timeout.map_or(0, |t| t.as_millis() as u64);
            session.limit = Some(LimitHit::Timeout { max_ms });
            break Outcome::TimedOut;
        }
        if let Some(m) = sampled
            && Instant::now() >= next_memory
        {
            next_memory = Instant::now() + MEMORY_EVERY;
            if let Some(shares) = &shares {
                shares.rebalance(&crate::sandbox::memory::job_processes(child.pid, full));
            }
            let rss = crate::sandbox::memory::job_processes(child.pid, full)
                .into_iter()
                .map(crate::sandbox::memory::held_bytes)
                .sum();
            session.peak_rss_bytes = session.peak_rss_bytes.max(rss);
            if rss > m.limit {
                session.limit = Some(LimitHit::Memory {
                    max: m.limit,
                    observed: rss,
                });
                break Outcome::LimitKilled;
            }
        }
        if Instant::now() >= next_sample {
            next_sample += SAMPLE_EVERY;
            let sample = sample_tree(start);
            record(&mut session, sample);
            if let Some(sink) = sink {
                sink.emit(Event::Resource(ResourceSample {
                    t: sample.t,
                    cpu_user_ms: sample.cpu_user_ms,
                    cpu_sys_ms: sample.cpu_sys_ms,
                    rss_bytes: sample.rss_bytes,
                    procs: sample.procs,
                }));
            }
            // The kernel refuses forks past the limit; the job seen at it,
            // counted as the kernel counts it, is recorded once (sampled: a
            // burst between two samples can go unseen).
            if let (Some(max), Some(limit), Some(sink)) =
                (plan.limits.max_procs, child.nproc_limit, sink)
                && !procs_limit_seen
                && match limit.counts {
                    crate::sandbox::NprocCount::UserTasks => {
                        process::tasks_of_uid(crate::sys::os::current_uid())
                    }
                    crate::sandbox::NprocCount::SandboxTasks => process::tasks_of_descendants(),
                } >= limit.max
            {
                procs_limit_seen = true;
                sink.emit(Event::Limit(LimitEvent {
                    time: Timestamp::now(),
                    limit: LimitKind::Procs,
                    max: u64::from(max),
                    observed: u64::from(sample.procs),
                }));
                sink.emit(limit_violation(RuleId::LimitProcs, "max-procs"));
            }
        }
    };
    session.duration = start.elapsed();
    // Whatever is left (the whole tree on a limit; escaped stragglers if the
    // init was killed) dies with the session. After the init's last report
    // nothing is left but the init leaving: its exit (at FULL, the kernel
    // tearing the namespaces down) goes on without vetto waiting.
    if ended.is_none() {
        process::kill_all_descendants();
    }
    // The listener hangs up only once the init is reaped, after the
    // kernel has torn its namespaces down. After the init's last report no
    // process of the job can make a call any more: its decisions are all
    // in, and the workers are left to end with vetto.
    let created = server.as_ref().map(notify::NotifyServer::shared_creations);
    if let Some(server) = server
        && ended.is_none()
        && let Err(e) = server.join()
    {
        eprintln!("vetto: seccomp notification handling failed: {e}");
    }
    keep_decisions(&mut session, &decisions, sink, &plan.notify);
    // Every trap recorded its access before answering it: by the end,
    // all of them are queued.
    if let Some(feed) = &secrets {
        keep_secret_reads(&mut session, feed, sink);
    }
    keep_observed(&mut child, true, sink);
    session.escaped = child.escaped();
    if let Some(sink) = sink {
        report_end_of_session(&session, sink, &plan.expected_daemons);
    }
    (session.cpu_user_ms, session.cpu_sys_ms) = match ended {
        Some(end) => (end.cpu_user_ms, end.cpu_sys_ms),
        None => process::reaped_children_cpu_ms(),
    };
    for dir in &plan.prepare_dirs {
        // Only removes what stayed empty: the job's output is kept.
        let _ = std::fs::remove_dir(dir);
    }
    // Every creation was recorded before it was answered: by now all are.
    let created = created.and_then(|c| c.lock().ok().map(|c| c.clone()));
    (session.scrubbed, session.scrub_unattributed) = scrub_shared(shared_before, created.as_ref());
    session
}

fn keep_decisions(
    session: &mut Session,
    decisions: &mpsc::Receiver<notify::NotifyEvent>,
    sink: Option<&dyn EventSink>,
    plan: &crate::plan::fs::NotifyPlan,
) {
    for d in decisions.try_iter() {
        if let Some(sink) = sink
            && let Some(v) = violation_of(&d, plan.audit, &plan.expected_calls)
        {
            // A connect refused on its notification is a connection too
            // (with the process, read before the answer).
            if let (RuleId::NetEgressBlocked, Some(to)) = (v.rule, d.addr) {
                sink.emit(Event::Connection(Box::new(refused_connection(&v, to))));
            }
            sink.emit(Event::Violation(Box::new(v)));
        }
        if session.decisions.len() < MAX_DECISIONS {
            session.decisions.push(d);
        } else {
            session.decisions_dropped += 1;
        }
    }
}

/// Count the masked secrets touched since the last tick, and log each
/// access as a violation (the log's aggregator folds repeats into a count).
/// What the platform observed on its own (macOS: the Sandbox's denials),
/// into the session log.
fn keep_observed(child: &mut Spawned, end: bool, sink: Option<&dyn EventSink>) {
    for v in crate::sandbox::observed_violations(child, end) {
        if let Some(sink) = sink {
            sink.emit(Event::Violation(Box::new(v)));
        }
    }
}

fn keep_secret_reads(session: &mut Session, feed: &SecretFeed, sink: Option<&dyn EventSink>) {
    for access in feed.accesses.try_iter() {
        let listed = session.secret_reads.len();
        match session
            .secret_reads
            .iter_mut()
            .find(|r| r.path == access.path)
        {
            Some(seen) => seen.count += 1,
            None if listed < MAX_SECRET_PATHS => session.secret_reads.push(SecretRead {
                path: access.path.clone(),
                count: 1,
            }),
            None => session.secret_reads_unlisted += 1,
        }
        if let Some(sink) = sink {
            sink.emit(Event::Violation(Box::new(secret_read_violation(access))));
        }
    }
}

/// An access to a masked secret's trap as a violation, with the process
/// the trap named and the package it runs.
fn secret_read_violation(access: SecretAccess) -> Violation {
    let (process, attribution) = process_and_package(access.process);
    let detail = match access.op {
        SecretOp::Open => "opened the masked file; it read as empty",
        SecretOp::List => "listed the masked directory; it is empty",
        SecretOp::Lookup => "looked up a name in the masked directory; nothing is there",
    };
    Violation {
        rule: RuleId::SecretReadDenied,
        time: Timestamp::from(access.time),
        // The trap is empty: the secret never reached the job.
        action: Action::Blocked,
        process,
        target: Target::Path { path: access.path },
        attribution,
        policy_rule: None,
        detail: detail.into(),
        provenance: Provenance::MaskTrap,
    }
}

fn record(session: &mut Session, sample: Sample) {
    session.peak_rss_bytes = session.peak_rss_bytes.max(sample.rss_bytes);
    session.peak_procs = session.peak_procs.max(sample.procs);
    if session.samples.len() >= MAX_SAMPLES {
        let mut i = 0;
        session.samples.retain(|_| {
            i += 1;
            i % 2 == 0
        });
    }
    session.samples.push(sample);
}

/// CPU, memory and process count of every process beneath vetto.
fn sample_tree(start: Instant) -> Sample {
    let mut s = Sample {
        t: start.elapsed().as_millis() as u64,
        ..Sample::default()
    };
    for pid in process::descendants(std::process::id()) {
        let (user, sys) = process::cpu_ms(pid);
        s.cpu_user_ms += user;
        s.cpu_sys_ms += sys;
        s.rss_bytes += process::rss_bytes(pid);
        s.procs += 1;
    }
    s
}

/// Names whose creation, removal or renaming in a carved directory would
/// plant something that runs later, outside the sandbox.
const PERSISTENCE_NAMES: [&str; 9] = [
    ".git",
    "hooks",
    "config",
    "modules",
    "commondir",
    "config.worktree",
    ".husky",
    ".pre-commit-config.yaml",
    "lefthook.yml",
];

/// One of the runner's command files (`$GITHUB_ENV` & co): writing them
/// injects environment, PATH entries or outputs into later steps.
fn is_ci_control_file(path: &Path) -> bool {
    crate::policy::CI_CONTROL_VARS
        .iter()
        .filter_map(std::env::var_os)
        .any(|f| Path::new(&f) == path)
        || path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "_runner_file_commands")
}

/// The connection record of a connect the supervisor refused itself.
fn refused_connection(v: &Violation, to: std::net::SocketAddr) -> crate::events::Connection {
    use crate::events::{ConnDecision, ConnReason, ConnVia, Connection};
    Connection {
        requests: Vec::new(),
        time: v.time,
        host: None,
        port: to.port(),
        addr: Some(to.ip().to_string()),
        decision: match v.action {
            Action::Observed => ConnDecision::Observed,
            _ => ConnDecision::Denied,
        },
        // Why, as the proxy would say it: an internal address, or none of
        // the rules.
        reason: if crate::proxy::classify(to.ip().to_canonical()).is_public() {
            ConnReason::NotAllowed
        } else {
            ConnReason::PrivateAddress
        },
        rule: None,
        via: ConnVia::Redirect,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        process: Some(v.process.clone()),
        attribution: v.attribution.clone(),
        detail: "a direct connect() past the proxy, refused by the supervisor".into(),
    }
}

/// A notification decision as a violation (`None` if it is not one):
/// blocked, or under `--audit` only observed; a refused call the policy
/// expects (`expected`: `[syscalls] expected`'s calls) is recorded as
/// expected.
pub fn violation_of(
    d: &notify::NotifyEvent,
    audit: bool,
    expected: &[String],
) -> Option<Violation> {
    if !d.is_violation() {
        return None;
    }
    let (process, attribution) = process_and_package(d.process.clone().unwrap_or_default());
    let path = d.path.clone().unwrap_or_default();
    let (rule, target) = if d.reason == notify::Reason::Forbidden {
        let rule = if matches!(d.syscall, "socket" | "listen" | "connect") {
            RuleId::NetSocketDenied
        } else {
            RuleId::SyscallDenied
        };
        let name = d.syscall.to_string();
        (rule, Target::Syscall { name })
    } else if let (Some(to), notify::Reason::Egress) = (d.addr, d.reason) {
        let target = Target::Address {
            addr: to.ip().to_string(),
            port: Some(to.port()),
        };
        (RuleId::NetEgressBlocked, target)
    } else if d.syscall == "connect" {
        (RuleId::UnixSocketDenied, Target::Socket { path })
    } else if d.reason == notify::Reason::NestedGit {
        (RuleId::PersistencePlanted, Target::Path { path })
    } else if d.reason == notify::Reason::SparesSpent {
        // A limit of the carve, wherever it is (in `.git` too): no
        // persistence, and said so by its detail.
        (RuleId::FsWriteDenied, Target::Path { path })
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let in_git = path.components().any(|c| c.as_os_str() == ".git");
        let rule = if is_ci_control_file(&path) {
            RuleId::CiControlFileBlocked
        } else if in_git || PERSISTENCE_NAMES.contains(&name.as_str()) {
            RuleId::GitPersistenceBlocked
        } else {
            RuleId::FsWriteDenied
        };
        (rule, Target::Path { path })
    };
    Some(Violation {
        rule,
        time: Timestamp::from(d.time),
        action: if audit {
            Action::Observed
        } else if rule == RuleId::SyscallDenied && expected.iter().any(|c| c == d.syscall) {
            Action::Expected
        } else {
            Action::Blocked
        },
        process,
        target,
        attribution,
        policy_rule: None,
        detail: format!("{} ({:?})", d.syscall, d.reason),
        provenance: Provenance::SeccompNotify,
    })
}

/// The process as the reports show it, and the package whose code is
/// responsible: the process's own first, else its nearest parent's (the
/// `cat ~/.npmrc` a postinstall script runs is that script's doing).
pub(crate) fn process_and_package(
    facts: crate::sandbox::ProcessFacts,
) -> (ProcessInfo, Option<Package>) {
    let read = read_manifest;
    let process = ProcessInfo {
        pid: facts.pid,
        exe: facts.exe,
        argv: facts.argv,
        cwd: facts.cwd,
        parent_chain: facts.parents,
    };
    let package = crate::events::violation::attribute(&process, &read).or_else(|| {
        process
            .parent_chain
            .iter()
            .zip(facts.parent_commands)
            .find_map(|((pid, exe), (argv, cwd))| {
                let parent = ProcessInfo {
                    pid: *pid,
                    exe: exe.clone(),
                    argv,
                    cwd,
                    parent_chain: Vec::new(),
                };
                crate::events::violation::attribute(&parent, &read)
            })
    });
    (process, package)
}

/// Largest dependency manifest read for its version.
const MAX_MANIFEST_BYTES: u64 = 64 << 10;
/// Manifests remembered per session (the rest are read each time).
const MAX_MANIFESTS: usize = 256;

/// A dependency's manifest (`package.json`), read for its version. The job
/// wrote it and vetto reads it outside the sandbox, in the loop that
/// enforces the limits: so it is opened without following a final link and
/// without blocking (a FIFO would hold the open forever), read only when it
/// is a regular file (not a link to `/dev/zero`), and at most 64 KiB. Each
/// path is read once per session: a storm of violations by one package
/// does not reread it.
fn read_manifest(path: &Path) -> Option<String> {
    use std::collections::HashMap;
    use std::io::Read;
    use std::sync::{Mutex, OnceLock};
    static READ: OnceLock<Mutex<HashMap<PathBuf, Option<String>>>> = OnceLock::new();
    let cache = READ.get_or_init(Mutex::default);
    if let Some(text) = cache.lock().ok()?.get(path) {
        return text.clone();
    }
    let text = crate::sys::os::open_nofollow_nonblock(path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
        .and_then(|f| {
            let mut text = String::new();
            f.take(MAX_MANIFEST_BYTES)
                .read_to_string(&mut text)
                .ok()
                .map(|_| text)
        });
    let mut cache = cache.lock().ok()?;
    if cache.len() < MAX_MANIFESTS {
        cache.insert(path.to_path_buf(), text.clone());
    }
    text
}

/// Limits hit, and processes the job left running, as events.
fn report_end_of_session(
    session: &Session,
    sink: &dyn EventSink,
    daemons: &[crate::policy::ExpectedDaemon],
) {
    match session.limit {
        Some(LimitHit::Timeout { max_ms }) => {
            sink.emit(Event::Limit(LimitEvent {
                time: Timestamp::now(),
                limit: LimitKind::Timeout,
                max: max_ms,
                observed: session.duration.as_millis() as u64,
            }));
            sink.emit(limit_violation(RuleId::LimitTimeout, "timeout"));
        }
        Some(LimitHit::Memory { max, observed }) => {
            sink.emit(Event::Limit(LimitEvent {
                time: Timestamp::now(),
                limit: LimitKind::Memory,
                max,
                observed,
            }));
            sink.emit(limit_violation(RuleId::LimitMemory, "max-memory"));
        }
        None => {}
    }
    for p in &session.escaped {
        let pid = u32::try_from(p.pid).unwrap_or(0);
        let exe = PathBuf::from(&p.exe);
        sink.emit(Event::Process(ProcessEvent {
            time: Timestamp::now(),
            pid,
            ppid: 0,
            kind: ProcessKind::Escaped,
            exe: exe.clone(),
            argv: p.argv.clone(),
        }));
        let process = ProcessInfo {
            pid,
            exe: exe.clone(),
            argv: p.argv.clone(),
            cwd: PathBuf::new(),
            parent_chain: Vec::new(),
        };
        let attribution = crate::events::violation::attribute(&process, &read_manifest);
        // `[process] daemons`: killed all the same, no finding.
        let expected = daemons.iter().any(|d| d.matches(&exe));
        sink.emit(Event::Violation(Box::new(Violation {
            rule: RuleId::ProcessEscaped,
            time: Timestamp::now(),
            action: if expected {
                Action::Expected
            } else {
                Action::Blocked
            },
            process,
            target: Target::Process { pid, exe },
            attribution,
            policy_rule: None,
            detail: "still running when the command ended; killed".into(),
            provenance: Provenance::Supervisor,
        })));
    }
}

fn limit_violation(rule: RuleId, limit: &str) -> Event {
    Event::Violation(Box::new(Violation {
        rule,
        time: Timestamp::now(),
        action: Action::Blocked,
        process: ProcessInfo::default(),
        target: Target::Limit {
            limit: limit.into(),
        },
        attribution: None,
        policy_rule: None,
        detail: String::new(),
        provenance: Provenance::Supervisor,
    }))
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn seen(dir: &Path, names: &[&str], unkept: u64) -> notify::SharedCreations {
        notify::SharedCreations {
            dirs: vec![(
                dir.to_path_buf(),
                names.iter().map(OsString::from).collect(),
            )],
            unkept,
        }
    }

    #[test]
    fn the_scrub_removes_only_what_the_job_was_seen_creating() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("before"), "").unwrap();
        let before = vec![(dir.to_path_buf(), entries(dir))];
        std::fs::write(dir.join("jobs"), "").unwrap();
        std::fs::create_dir(dir.join("jobs-dir")).unwrap();
        std::fs::write(dir.join("jobs-dir/inner"), "").unwrap();
        std::fs::write(dir.join("theirs"), "").unwrap();
        // "before" was reported too (the job rewrote it): it is not new.
        let created = seen(dir, &["jobs", "jobs-dir", "before", "gone"], 0);
        let (mut removed, unattributed) = scrub_shared(&before, Some(&created));
        removed.sort();
        assert_eq!(removed, [dir.join("jobs"), dir.join("jobs-dir")]);
        assert_eq!(unattributed, 0);
        assert!(dir.join("theirs").exists() && dir.join("before").exists());
    }

    #[test]
    fn an_incomplete_record_removes_nothing_unseen_and_counts_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = vec![(dir.to_path_buf(), entries(dir))];
        std::fs::write(dir.join("jobs"), "").unwrap();
        std::fs::write(dir.join("unseen"), "").unwrap();
        let (removed, unattributed) = scrub_shared(&before, Some(&seen(dir, &["jobs"], 1)));
        assert_eq!(removed, [dir.join("jobs")]);
        assert_eq!(unattributed, 1);
        // No record at all (no notification server): nothing is removed.
        let (removed, unattributed) = scrub_shared(&before, None);
        assert!(removed.is_empty());
        assert_eq!(unattributed, 1);
        assert!(dir.join("unseen").exists());
    }
}
