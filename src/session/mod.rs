//! One sandboxed session, start to end — the one home of the pipeline that
//! `vetto run`, `vetto ci` and `vetto verify`'s probes drive:
//!
//! ```text
//! Request ─► stage started early ─► policy::load ─► plan::build ─► session log opened
//!         ─► stage launched (sandbox::Stage) ─► supervisor::run ─► session end
//!         ─► reports (finish) ─► exit status
//! ```
//!
//! The drivers differ only in [`Options`]: how the job's output reaches
//! vetto's, and whether (and how) reports are written. Each stage below is
//! a call into its own module; this one only orders them and decides what
//! a failure at each step costs (a refusal before the command starts, a
//! missing report after — never the command's status).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::events::log::{
    ChannelSink, EventSink, LOG_MODE, LogWriter, SessionWriter, spawn_writer_to,
};
use crate::events::{Event, SessionEnd, Timestamp};
use crate::plan::{self, BuildOptions, TierRequest};
use crate::policy::{self, LoadRequest};
use crate::supervisor::output::OutputCopier;
use crate::sys::safe_fs;
use crate::{exit, host, sandbox, supervisor};

mod admit;
mod appcontainer;
mod configs;
mod denials;
mod dns;
mod egress;
mod finish;
mod java_trust;
mod publish;
mod secrets;
mod start;
mod tell;
mod tmp;
pub mod tools;
mod walk;

pub use finish::{
    DEFAULT_REPORT_DIR, FailOn, ReportOptions, console_summary, final_status, finish,
};
pub use start::{ci_info, git_info, session_start, withheld_line};
use tmp::RemoveOnDrop;
pub use tmp::SessionTmp;

/// What to run, and under which policy.
#[derive(Debug, Clone)]
pub struct Request {
    /// The policy to load. Its `session_tmp` and `report_dir` are the
    /// session's: [`run`] sets them.
    pub policy: LoadRequest,
    pub tier: TierRequest,
    pub allow_degraded: bool,
    pub audit: bool,
    pub command: Vec<OsString>,
}

/// How the job's stdout and stderr reach vetto's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Inherited: the job writes to vetto's own (`run`).
    Direct,
    /// Through vetto, with forged workflow commands broken (`ci`: the
    /// runner would execute `::set-env`, `::add-path` … that the job
    /// prints). Stdin stays inherited.
    Neutralised,
}

/// How a driver wants the session run.
#[derive(Debug, Clone)]
pub struct Options {
    pub output: Output,
    /// Reports (and the session log they are made from), or none.
    pub reports: Option<ReportOptions>,
    /// `-v`: name every distinct denial at the end, not the first few.
    pub verbose: bool,
}

/// Run one session and return the exit status the contract gives it.
pub fn run(request: Request, options: &Options) -> anyhow::Result<ExitCode> {
    let log_dir = options.reports.as_ref().map(|r| r.report_dir.as_path());
    match execute(request, log_dir, options)? {
        Executed::Refused(code) => Ok(ExitCode::from(code)),
        Executed::Ran { outcome, log } => match (&options.reports, log) {
            (Some(reports), Some(log)) => Ok(finish(outcome, &log, reports)),
            (Some(_), None) => {
                eprintln!(
                    "vetto: error: no session log, no reports; the command's exit status ({}) is kept",
                    outcome.code()
                );
                Ok(outcome.exit_code())
            }
            (None, _) => Ok(outcome.exit_code()),
        },
    }
}

/// How the sandboxed part of a session ended.
enum Executed {
    /// vetto refused or failed before the command started: this status.
    Refused(u8),
    /// The command ran; its session log when one was asked for.
    Ran {
        outcome: exit::Outcome,
        log: Option<PathBuf>,
    },
}

/// The FULL tier's namespaces when the command line and the host make
/// FULL the likely plan: `auto` or `--tier full`, user namespaces here, not
/// `--audit` (which creates none). The policy file may still decide
/// otherwise; then the stage is replaced ([`sandbox::Stage::fits`]).
fn likely_namespaces(request: &Request, caps: &host::HostCaps) -> Option<sandbox::EarlyNamespaces> {
    let full_wanted = matches!(
        request.tier,
        TierRequest::Auto | TierRequest::Exactly(plan::Tier::Full)
    );
    (full_wanted && !request.audit && caps.userns.is_available()).then(|| {
        sandbox::EarlyNamespaces {
            net: request.policy.overrides.net.as_deref() != Some("host"),
        }
    })
}

/// The pipeline: policy → plan → sandbox → supervisor, with a session log
/// in `log_dir` when given (the reports are [`run`]'s).
fn execute(
    mut request: Request,
    log_dir: Option<&Path>,
    options: &Options,
) -> anyhow::Result<Executed> {
    // Windows' AppContainer has a pipeline of its own (elsewhere the
    // plan refuses the tier, below).
    if request.tier == TierRequest::AppContainer && sandbox::appcontainer_host().is_ok() {
        return appcontainer::execute(request, options);
    }
    // 0. The project is never the home directory or above it.
    match admit::project(&request.policy) {
        Ok(note) => note.iter().for_each(|l| eprintln!("vetto: {l}")),
        Err(refusal) => {
            eprintln!("vetto: {refusal}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    }
    let output = options.output;
    let signals = supervisor::prepare().context("cannot prepare the supervisor")?;
    let caps = host::probe();
    // 1. The stage first: its exec runs while we load and plan — and where
    //    FULL is likely, so does the creation of its namespaces.
    let stage_output = match output {
        Output::Direct => sandbox::StageOutput::Inherit,
        Output::Neutralised => sandbox::StageOutput::Pipe,
    };
    let early = likely_namespaces(&request, &caps);
    let mut stage = match sandbox::start_stage(stage_output, early) {
        Ok(stage) => stage,
        Err(e) => {
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(e.exit_status()));
        }
    };
    // 2. Copying starts now: whatever the stage or the job prints is read
    //    as it comes, so neither can block on a full pipe.
    let copier = match stage.take_output().map(OutputCopier::start).transpose() {
        Ok(copier) => copier,
        Err(e) => {
            eprintln!("vetto: cannot start copying the command's output: {e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    // FULL keeps the job's temporary files in its own /tmp: no directory.
    let mut session_tmp = SessionTmp::reserve(early.is_none())?;
    // 3. The reports are read back and written outside the sandbox: their
    //    directory must be read-only for the job (`ci`'s default included),
    //    and it must exist before planning, so that the plan binds or
    //    carves it like any path rather than skipping a path that is not
    //    there yet. (Failing here is not fatal: `open_log` falls back and
    //    says so.)
    if let Some(dir) = log_dir {
        let _ = safe_fs::Dir::create(dir, safe_fs::Parents::Walk, 0o755);
    }
    // 4. Policy, then plan: a refusal here means the command never starts.
    request.policy.session_tmp = session_tmp.path().to_path_buf();
    request.policy.report_dir = log_dir.map(Path::to_path_buf);
    //    The glob walk is remembered between sessions (`walk`); its
    //    directories are stamped on another CPU while the policy is
    //    parsed. (Not before the stage starts: the stage's exec then
    //    competed with the stamps for the CPUs and started later.)
    let (remembered, memory) = walk::recall(&request.policy);
    let walk_dir = memory.dir.clone();
    let (policy, walking) = policy::load_remembering(&request.policy, memory);
    let mut policy = match policy {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    // 4a. The presets' registries and vetto-owned caches, from the host's
    //     own tool configuration (docs/presets.md, docs/caches.md).
    let (env, home) = (&request.policy.env, &request.policy.home);
    //     Answers are remembered beside the walk (`tools::Memo`).
    let memo = remembered.as_ref().map(walk::Remembered::dir);
    let (mut tool_lines, discovered) = tools::discover_remembering(&mut policy, env, home, memo);
    match tools::caches(&mut policy, env, home, true) {
        Ok(lines) => tool_lines.extend(lines),
        Err(e) => {
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    }
    // The tools' own configuration (npm's, pip's, a netrc), without the
    // credentials the policy masks (written once the session's temporary
    // directory exists).
    let config_copies = configs::copies(&mut policy, env, home);
    tool_lines.extend(
        config_copies
            .iter()
            .filter(|c| c.named_by(&request.command))
            .map(|c| c.line.clone()),
    );
    // The secrets the proxy puts in the job's requests: the job holds
    // placeholders (set here, before the plan takes the environment).
    let secrets = match secrets::prepare(&mut policy, env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    let reads_requests = !secrets.is_empty() || !policy.request_rules.is_empty();
    if reads_requests && !matches!(policy.net, crate::policy::NetPolicy::Allow { .. }) {
        let mode = match policy.net {
            crate::policy::NetPolicy::Host => "host",
            _ => "off",
        };
        eprintln!("vetto: {}", secrets::SecretError::Unfiltered { mode });
        return Ok(Executed::Refused(exit::REFUSED));
    }
    tool_lines.extend(secrets::line(&secrets));
    if !policy.request_rules.is_empty() {
        let rules: Vec<String> = policy.request_rules.iter().map(|r| r.describe()).collect();
        tool_lines.push(format!(
            "request rules: {} — vetto's proxy reads each request to these hosts and refuses (403) what no rule allows",
            rules.join("; ")
        ));
    }
    // Which policy is in force, from where (and when the working tree's
    // copy is not it).
    eprintln!("vetto: {}", policy.provenance.line());
    if let Some(l) = policy.provenance.differs_line() {
        eprintln!("vetto: {l}");
    }
    tool_lines.iter().for_each(|l| eprintln!("vetto: {l}"));
    denials::unmade_grants(&policy, home, |p| p.symlink_metadata().is_ok())
        .iter()
        .for_each(|l| eprintln!("vetto: warning: {l}"));
    let build_options = BuildOptions {
        allow_degraded: request.allow_degraded,
        audit: request.audit,
        env: request.policy.env.clone(),
        cwd: request.policy.cwd.clone(),
        terminals: crate::sandbox::terminal::own_terminals(),
    };
    let mut plan = match plan::build(&policy, &caps, request.tier, &build_options) {
        Ok(plan) => plan,
        Err(refusal) => {
            eprintln!("vetto: {refusal}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    // What the walk learnt is kept only where no job can change it; a
    // session whose job could forgets every remembered walk at its end.
    let sealed = walk::sealed_from_job(&policy, &plan, request.audit, &walk_dir);
    match admit::reachable(&plan, &policy, &request.command) {
        Err(unreachable) => {
            eprintln!("vetto: {unreachable}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
        Ok(Some(passed_over)) => eprintln!("vetto: note: {passed_over}"),
        Ok(None) => {}
    }
    // A secret's name holds its placeholder, not a withheld value.
    plan.env
        .withheld
        .retain(|n| !secrets.iter().any(|s| s.name == *n));
    if let Some(line) = withheld_line(&plan.env.withheld) {
        eprintln!("{line}");
    }
    for d in &plan.degraded {
        eprintln!("vetto: warning: degraded: {d}");
    }
    if let Some(line) = creations_line(&policy, &plan) {
        eprintln!("vetto: {line}");
    }
    if let Some(line) = plan::memory::session_line(&plan) {
        eprintln!("vetto: {line}");
    }
    if plan.session_tmp.is_some() {
        session_tmp.create()?;
        for c in &config_copies {
            if let Err(e) = c.write() {
                eprintln!("vetto: warning: {}", c.unwritten(&e));
            }
        }
    }
    // Whatever happens from here, the spares do not outlive the session.
    let _spares = RemoveOnDrop(plan.notify.spares.as_ref().map(|p| p.dir.clone()));

    // 5. The session log, written as things happen. A log that cannot be
    //    created costs the reports, never the command.
    let log = log_dir.and_then(open_log);

    // 5a. Published ports: the host's listeners, bound before the job
    //     starts, so that a port taken is said before anything ran.
    let published = match publish::bind(&plan.publish) {
        Ok(bound) => bound,
        Err(e) => {
            finish_output(copier);
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    if let Some(line) = published.start_line() {
        eprintln!("vetto: {line}");
    }

    // 5b. Filtered egress: the proxy, before the job (only when the plan
    //     asks for it); the job's proxy variables carry its credential. A
    //     proxy that cannot start refuses the session: the network is
    //     never opened instead.
    let mut egress = match egress::start(
        &mut plan,
        &policy,
        request.audit,
        &request.policy.env,
        secrets,
        log.as_ref().map(|(_, sink, _)| sink.clone()),
    ) {
        Ok(egress) => egress,
        Err(e) => {
            finish_output(copier);
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    if let Some(e) = &egress {
        eprintln!("vetto: {}", e.start_line());
    }
    if let Some((_, sink, _)) = &log {
        let start = session_start(
            &plan,
            &policy,
            &caps,
            &request.command,
            request.audit,
            &request.policy.env,
            egress.as_ref().map(|e| e.address),
        );
        sink.emit(Event::SessionStart(Box::new(start)));
    }

    // 6. The stage becomes the job.
    if !stage.fits(&plan) {
        // The guess was wrong (a policy file that sets the network, a tier
        // the policy cannot have): start over, without namespaces.
        stage = match stage.respawn() {
            Ok(stage) => stage,
            Err(e) => {
                finish_output(copier);
                eprintln!("vetto: {e}");
                return Ok(Executed::Refused(e.exit_status()));
            }
        };
    }
    let shared_before = supervisor::snapshot_shared(&plan);
    let git_dirs = walking
        .as_ref()
        .map(policy::Walking::git_dirs)
        .unwrap_or_default();
    let persistence = supervisor::persist::Watch::start(
        &policy.project,
        plan.checked_after.as_deref().unwrap_or_default(),
        &git_dirs,
    );
    let autorun = supervisor::snapshot::Snapshot::take(autorun_roots(
        &policy,
        &request.policy.home,
        &request.policy.env,
        git_dirs,
    ));
    #[cfg(target_os = "linux")]
    let index = supervisor::concealment::IndexAtStart::take(&policy.project);
    let mut child = match stage.launch(&plan, &request.command) {
        Ok(child) => child,
        Err(e) => {
            // The stage is gone: whatever it printed is out by now.
            finish_output(copier);
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(e.exit_status()));
        }
    };

    // FULL: the proxy serves the listeners made inside the namespace. If it
    // cannot, the job has no way out at all: closed, not open.
    if let Some(e) = &mut egress {
        let sockets = std::mem::take(&mut child.egress);
        if let Err(err) = e.serve_netns(sockets) {
            eprintln!("vetto: warning: the egress proxy cannot serve the sandbox: {err}");
        }
    }
    // Network off: the DNS stub refuses every name, naming it (FULL: in
    // the job's namespace; FS-ONLY: in vetto's that leads nowhere).
    let refusing = egress::RefusingDns::serve(
        &plan,
        &mut child.egress,
        log.as_ref().map(|(_, sink, _)| sink.clone()),
    )
    .unwrap_or_else(|err| {
        eprintln!("vetto: warning: the DNS stub cannot serve the sandbox: {err}");
        None
    });

    // 7. Supervise to the end.
    let sink = log.as_ref().map(|(_, sink, _)| sink as &dyn EventSink);
    let broker = egress
        .as_ref()
        .map(egress::Egress::broker)
        .or_else(|| refusing.as_ref().map(egress::RefusingDns::broker));
    let publishing = serve_published(
        published,
        &plan,
        child.pid,
        broker.clone(),
        log.as_ref().map(|(_, sink, _)| sink.clone()),
    );
    // While the job runs (it cannot reach vetto's cache directory): what
    // the walk held becomes the listings the end's check takes, the walk is
    // kept for the next session, and the end's walk below the root is done
    // on those listings ahead (`persist::Clean`).
    let mut walked = None;
    let mut clean = None;
    let meanwhile = || {
        walked = walking.and_then(policy::Walking::walked);
        if let (Some(r), Some(w), true) = (&remembered, &walked, sealed) {
            if w.learnt {
                r.keep(&w.listings);
            }
        }
        if let (Some(r), true) = (&remembered, sealed) {
            discovered.keep(r.dir());
        }
        clean = walked
            .as_ref()
            .and_then(|w| supervisor::persist::Clean::of(&persistence, &w.listings));
    };
    let session = supervisor::run(
        child,
        &plan,
        &signals,
        &shared_before,
        sink,
        broker,
        meanwhile,
    );
    if let (Some(r), false) = (&remembered, sealed) {
        r.forget_all();
    }
    if let Some(p) = publishing {
        p.stop();
    }
    // Every process of the sandbox is dead: no connection is left to carry.
    let (proxy_bytes, refused) = match (egress, refusing) {
        (Some(e), _) => e.finish(),
        (None, Some(dns)) => (0, dns.finish()),
        (None, None) => Default::default(),
    };
    let outcome = session.outcome;
    // Every process of the sandbox is dead: the job's output ends here,
    // before vetto's own last words.
    finish_output(copier);
    tell::tell(
        &session,
        &refused,
        request.audit,
        options.verbose,
        &denials::Context::new(&policy, &request.command, &request.policy.home).with_report_dir(
            request
                .policy
                .report_dir
                .as_ref()
                .map(|d| crate::policy::paths::normalise_abs(&request.policy.cwd.join(d)))
                .as_deref(),
            &policy.project,
        ),
    );
    if let Some(line) = creations_hint(&policy, &plan, request.audit, session.entry_calls_checked())
    {
        eprintln!("vetto: {line}");
    }
    // What the job left for other tools to run later is recorded before
    // the session's end, so that `--fail-on violation` counts it.
    //    Directories unchanged since a remembered listing are not read
    //    again, none at all when the job changed no entry.
    let listings = walked.as_ref().map(|w| &w.listings);
    supervisor::persist::finish(
        &persistence,
        listings,
        session.changed_no_entry(),
        clean,
        Some(&autorun),
        &supervisor::persist::PutBack {
            undo: !request.audit,
            keep: policy.keep_changes.clone(),
            archive: put_back_archive(&request.policy),
            #[cfg(target_os = "linux")]
            index,
        },
        sink,
    );

    // 8. The session end closes the log.
    let log = log.map(|(path, sink, writer)| {
        sink.emit(Event::SessionEnd(Box::new(SessionEnd {
            ended_at: Timestamp::now(),
            outcome,
            exit_code: outcome.code(),
            duration_ms: session.duration.as_millis() as u64,
            cpu_user_ms: session.cpu_user_ms,
            cpu_sys_ms: session.cpu_sys_ms,
            peak_rss_bytes: session.peak_rss_bytes,
            peak_procs: session.peak_procs,
            proxy_bytes,
            violations_by_rule: Default::default(),
            dropped_distinct: 0,
        })));
        drop(sink);
        if let Err(e) = writer.finish() {
            eprintln!("vetto: error: the session log is incomplete: {e}");
        }
        path
    });
    // The log may live in the session directory: read it before that goes.
    let log = log.map(|path| keep_log(path, &session_tmp));
    drop(session_tmp);
    Ok(Executed::Ran { outcome, log })
}

/// Where things that run later are looked for: the project, and the
/// agents' settings in the home directory that the policy lets the job
/// write (a preset's grant), which are put back when the session changed
/// what they run (`supervisor::snapshot`).
/// Where the session's versions of what is put back go: the project's
/// to the report directory when there is one, else to vetto's state
/// directory (`$XDG_STATE_HOME/vetto/put-back`, an absolute one only, else
/// `~/.local/state/vetto/put-back`), as what lay outside the project
/// always does.
fn put_back_archive(req: &policy::LoadRequest) -> supervisor::put_back::Archives {
    let state = req
        .env
        .iter()
        .find(|(k, v)| k == "XDG_STATE_HOME" && v.starts_with('/'))
        .map_or_else(|| req.home.join(".local/state"), |(_, v)| PathBuf::from(v))
        .join("vetto/put-back");
    let project = match &req.report_dir {
        // Absolute, for the command that takes a version back from
        // wherever the user runs it.
        Some(dir) => supervisor::put_back::ArchiveAt::ReportDir(
            std::env::current_dir().map_or_else(|_| dir.clone(), |cwd| cwd.join(dir)),
        ),
        None => supervisor::put_back::ArchiveAt::State(state.clone()),
    };
    supervisor::put_back::Archives {
        project,
        outside: state,
    }
}

fn autorun_roots(
    policy: &policy::Policy,
    home: &Path,
    env: &[(String, String)],
    git_dirs: Vec<PathBuf>,
) -> policy::autorun::Roots {
    let writable = |p: &Path| {
        policy::paths::decide(policy.fs.iter().map(|r| (r.path.as_path(), r.access)), p)
            .is_some_and(|(access, _)| access == policy::Access::Write)
    };
    policy::autorun::Roots {
        project: policy.project.clone(),
        home: Some(home.to_path_buf()),
        agent_files: policy::autorun::agent_home_files(home, env)
            .into_iter()
            .filter(|(p, _)| !p.starts_with(&policy.project) && writable(p))
            .collect(),
        agent_trees: policy::autorun::agent_home_trees(home, env)
            .into_iter()
            .filter(|p| !p.starts_with(&policy.project) && writable(p))
            .collect(),
        nested_git_dirs: git_dirs
            .into_iter()
            .filter(|g| g.starts_with(&policy.project) && g.parent() != Some(&policy.project))
            .collect(),
    }
}

/// Serve the published ports: sockets in the job's network namespace come
/// from the helper that makes the job's own (FS-ONLY), or from one that
/// joins the namespaces of the sandbox below its first process (`pid`,
/// FULL). `None` when nothing is published; a relay that cannot reach the
/// job records why with the connection, and the job runs on.
fn serve_published(
    bound: publish::Bound,
    plan: &plan::Plan,
    pid: i32,
    broker: Option<std::sync::Arc<dyn supervisor::notify::EgressBroker>>,
    log: Option<crate::events::log::ChannelSink>,
) -> Option<publish::Publishing> {
    bound.start_line()?;
    let maker: publish::SocketMaker = if plan.tier == crate::tier::Tier::Full {
        // Joined at the first outside connection, when the job's server
        // runs (its processes are the ones whose namespaces can be
        // opened); again at the next if that failed.
        let joined = std::sync::Mutex::new(None::<crate::sandbox::dead_net::DeadNet>);
        std::sync::Arc::new(move |v6| {
            let mut net = joined
                .lock()
                .map_err(|_| std::io::Error::other("the relay's helper is gone"))?;
            if net.is_none() {
                let first = u32::try_from(pid)
                    .map_err(|_| std::io::Error::other("no process for the sandbox"))?;
                *net = Some(crate::sandbox::dead_net::DeadNet::join(first)?);
            }
            let made = match net.as_ref() {
                Some(n) => n.socket(v6, true),
                None => Err(std::io::Error::other("the relay's helper is gone")),
            };
            // A helper that stopped answering (started from a relay's
            // thread, which has ended: `PR_SET_PDEATHSIG`) is started again
            // at the next connection, from its acceptor.
            if made.is_err() {
                *net = None;
            }
            made
        })
    } else {
        let Some(broker) = broker else {
            eprintln!(
                "vetto: warning: the published ports cannot reach the sandbox (no namespace for the job's sockets): nothing is published"
            );
            return None;
        };
        std::sync::Arc::new(move |v6| {
            broker
                .dead_net_stream(v6)
                .unwrap_or_else(|| Err(std::io::Error::other("no namespace for the job's sockets")))
        })
    };
    Some(bound.serve(maker, log))
}

fn finish_output(copier: Option<OutputCopier>) {
    if let Some(copier) = copier
        && !copier.finish(supervisor::output::FINISH_GRACE)
    {
        eprintln!(
            "vetto: warning: the command's output is still open after it ended (a process outside the sandbox holds it); stopped waiting for it"
        );
    }
}

type OpenLog = (PathBuf, ChannelSink, SessionWriter);
/// `session.jsonl` in the report directory, or, when that cannot be
/// written, in a temporary place (the reports then say so). Both are made
/// without following anything planted there ([`safe_fs`]): the report
/// directory may hold what an earlier job left.
fn open_log(dir: &Path) -> Option<OpenLog> {
    let new_dir = std::fs::symlink_metadata(dir).is_err();
    let in_dir = safe_fs::Dir::create(dir, safe_fs::Parents::Walk, 0o755)
        .and_then(|d| {
            mark_ignored(&d, new_dir);
            let file = d.replace_with_new("session.jsonl", LOG_MODE)?;
            Ok(LogWriter::from_file(file, d.join("session.jsonl")))
        })
        .map_err(|e| e.to_string())
        .and_then(|w| spawn_writer_to(w).map_err(|e| e.to_string()));
    match in_dir {
        Ok((sink, writer)) => Some((dir.join("session.jsonl"), sink, writer)),
        Err(e) => {
            eprintln!(
                "vetto: error: cannot write the session log in {}: {e}",
                dir.display()
            );
            let (file, path) = private_temp_file("session")
                .map_err(|e| eprintln!("vetto: error: no session log: {e}"))
                .ok()?;
            eprintln!("vetto: logging to {} instead", path.display());
            spawn_writer_to(LogWriter::from_file(file, path.clone()))
                .map(|(sink, writer)| (path, sink, writer))
                .map_err(|e| eprintln!("vetto: error: no session log: {e}"))
                .ok()
        }
    }
}

/// Mark the report directory ignored by git, as tools that own a
/// directory do (`.gitignore` holding `*`): `vetto-report/` is then never
/// untracked in the repository, `git add -A` leaves it out and `git clean
/// -fd` leaves it alone. Only a directory vetto made now or its default
/// one (never a directory of the user's, `--report-dir docs`), and never
/// over a `.gitignore` that is there.
pub(crate) fn mark_ignored(dir: &safe_fs::Dir, made_now: bool) {
    let default = dir.path().file_name() == Some(std::ffi::OsStr::new(finish::DEFAULT_REPORT_DIR));
    if !(made_now || default) {
        return;
    }
    if let Ok(mut f) = dir.create_new(".gitignore", 0o644) {
        use std::io::Write as _;
        let _ = f.write_all(b"# vetto's reports: not part of the project\n*\n");
    }
}

/// A new file only the user can read, under a fresh unpredictable name in
/// the temporary directory.
fn private_temp_file(what: &str) -> Result<(std::fs::File, PathBuf), safe_fs::SafeFsError> {
    let tmp = safe_fs::Dir::open(&std::env::temp_dir(), safe_fs::Parents::Followed)?;
    let (file, name) = tmp.create_unique(&format!("vetto-{what}-"), ".jsonl", 0o600)?;
    Ok((file, tmp.join(&name)))
}

/// The log outlives the session directory it may have been written in.
fn keep_log(path: PathBuf, session_tmp: &SessionTmp) -> PathBuf {
    if !path.starts_with(session_tmp.path()) {
        return path;
    }
    let copied = private_temp_file("session").and_then(|(mut to, kept)| {
        let mut from = safe_fs::open_regular(&path)?;
        std::io::copy(&mut from, &mut to).map_err(|e| safe_fs::SafeFsError::Io {
            op: "write",
            path: kept.clone(),
            source: e,
        })?;
        Ok(kept)
    });
    match copied {
        Ok(kept) => kept,
        Err(e) => {
            eprintln!("vetto: warning: cannot keep the session log: {e}");
            path
        }
    }
}

/// From this many creation calls checked live on, a FULL session names the
/// faster mode: at 10–15 µs each, what checking them cost is then worth a
/// change of mode (about a second); a 3-second job's few thousand (tens
/// of milliseconds) are not.
const CREATIONS_HINTED: u64 = 50_000;

/// After a FULL session whose creations were checked live, many of them:
/// the mode that checks them after the session instead. Only where it
/// applies (FULL, live, enforcing), so the hint never leads to the line
/// that says the option did not take effect.
fn creations_hint(
    policy: &policy::Policy,
    plan: &plan::Plan,
    audit: bool,
    checked: u64,
) -> Option<String> {
    (plan.tier == plan::Tier::Full
        && policy.check_creations.is_live()
        && !audit
        && checked >= CREATIONS_HINTED)
        .then(|| {
            format!(
                "{checked} calls that create, remove or rename entries were checked one by one while the job ran; \
                 --check-creations after (policy: [filesystem] check_creations = \"after\") keeps protected paths \
                 by read-only mounts and checks new entries after the session instead, which is faster \
                 (what it gives up: docs/tiers.md)"
            )
        })
}

/// What `check_creations = "after"` does on this tier: at FULL, that what
/// the job creates is checked after the session; below it, that nothing
/// changed (no mount keeps what exists there, so creations stay live).
fn creations_line(policy: &policy::Policy, plan: &plan::Plan) -> Option<String> {
    if policy.check_creations.is_live() {
        return None;
    }
    Some(match &plan.checked_after {
        Some(_) => "creations are checked after the session (check_creations = \"after\"): \
                    a nested repository or a protected name the job makes is reported, not refused"
            .into(),
        None => format!(
            "check_creations = \"after\" takes effect at the full tier only; at {} creations are checked live",
            plan.tier
        ),
    })
}
