//! `vetto run`: policy → plan → sandbox → supervisor → exit status.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::{PolicyArgs, RunArgs};
use crate::events::log::{ChannelSink, EventSink, SessionWriter, spawn_writer};
use crate::events::{Event, SessionEnd, Timestamp};
use crate::plan::{self, BuildOptions};
use crate::policy::{self, LoadRequest, Overrides};
use crate::supervisor::output::OutputCopier;
use crate::{exit, host, sandbox, supervisor};

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // `run` writes reports only when asked, and its status is always the
    // command's own.
    let report_dir = args.report_dir.clone();
    match execute(&args, report_dir.as_deref(), Output::Direct)? {
        Executed::Refused(code) => Ok(ExitCode::from(code)),
        Executed::Ran { outcome, log } => match (report_dir, log) {
            (Some(dir), Some(log)) => {
                let opts = super::ci::CiReportOptions {
                    report_dir: dir,
                    fail_on: super::ci::FailOn::Never,
                    step_summary: None,
                    annotations: false,
                    category: None,
                };
                Ok(super::ci::finish(outcome, &log, &opts))
            }
            _ => Ok(outcome.exit_code()),
        },
    }
}

/// How a session ended, for the command drivers.
pub enum Executed {
    /// vetto refused or failed before the command started: this status.
    Refused(u8),
    /// The command ran; its session log when one was asked for.
    Ran {
        outcome: exit::Outcome,
        log: Option<PathBuf>,
    },
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

/// The FULL tier's namespaces when the command line and the host make
/// FULL the likely plan: `auto` or `--tier full`, user namespaces here, not
/// `--audit` (which creates none). The policy file may still decide
/// otherwise; then the stage is replaced ([`sandbox::Stage::fits`]).
fn likely_namespaces(args: &RunArgs, caps: &host::HostCaps) -> Option<sandbox::EarlyNamespaces> {
    let full_wanted = matches!(
        args.tier,
        plan::TierRequest::Auto | plan::TierRequest::Exactly(plan::Tier::Full)
    );
    (full_wanted && !args.audit && caps.userns.is_available()).then(|| sandbox::EarlyNamespaces {
        net: args.policy.net.as_deref() != Some("host"),
    })
}

/// The whole pipeline: policy → plan → sandbox → supervisor, with a
/// session log in `log_dir` when given (the reports are the caller's).
pub fn execute(args: &RunArgs, log_dir: Option<&Path>, output: Output) -> anyhow::Result<Executed> {
    let signals = supervisor::prepare().context("cannot prepare the supervisor")?;
    let caps = host::probe();
    // Started first: the stage's exec runs while we load and plan — and
    // where FULL is likely, so does the creation of its namespaces.
    let stage_output = match output {
        Output::Direct => sandbox::StageOutput::Inherit,
        Output::Neutralised => sandbox::StageOutput::Pipe,
    };
    let early = likely_namespaces(args, &caps);
    let mut stage = match sandbox::start_stage(stage_output, early) {
        Ok(stage) => stage,
        Err(e) => {
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(e.exit_status()));
        }
    };
    // Copying starts now: whatever the stage or the job prints is read as
    // it comes, so neither can block on a full pipe.
    let copier = match stage.take_output().map(OutputCopier::start).transpose() {
        Ok(copier) => copier,
        Err(e) => {
            eprintln!("vetto: cannot start copying the command's output: {e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    // FULL keeps the job's temporary files in its own /tmp: no directory.
    let mut session_tmp = SessionTmp::reserve(early.is_none());
    // The reports are read back and written outside the sandbox: their
    // directory must be read-only for the job (`ci`'s default included),
    // and it must exist before planning, so that the plan binds or carves
    // it like any path rather than skipping a path that is not there yet.
    // (Failing here is not fatal: `open_log` falls back and says so.)
    if let Some(dir) = log_dir {
        let _ = std::fs::create_dir_all(dir);
    }
    let request = args.policy.load_request(session_tmp.path(), log_dir)?;
    let policy = match policy::load(&request) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    let options = BuildOptions {
        allow_degraded: args.allow_degraded,
        audit: args.audit,
        env: request.env.clone(),
        cwd: request.cwd.clone(),
    };
    let plan = match plan::build(&policy, &caps, args.tier, &options) {
        Ok(plan) => plan,
        Err(refusal) => {
            eprintln!("vetto: {refusal}");
            return Ok(Executed::Refused(exit::REFUSED));
        }
    };
    if !plan.env.withheld.is_empty() {
        eprintln!(
            "vetto: withheld {} credential-like variable(s) from the job: {} (pass one with --env-pass NAME)",
            plan.env.withheld.len(),
            plan.env.withheld.join(", ")
        );
    }
    for d in &plan.degraded {
        eprintln!("vetto: warning: degraded: {d}");
    }
    if let Some(line) = plan::memory::session_line(&plan) {
        eprintln!("vetto: {line}");
    }
    if plan.session_tmp.is_some() {
        session_tmp.create()?;
    }
    // Whatever happens from here, the spares do not outlive the session.
    let _spares = RemoveOnDrop(plan.notify.spares.as_ref().map(|p| p.dir.clone()));

    // The session log, written as things happen. A log that cannot be
    // created costs the reports, never the command.
    let log = log_dir.and_then(|dir| open_log(dir, &session_tmp));
    if let Some((_, sink, _)) = &log {
        let start = super::ci::session_start(
            &plan,
            &policy,
            &caps,
            &args.command,
            args.audit,
            &request.env,
        );
        let withheld = super::ci::withheld_env_violations(&start, &plan.env.withheld);
        sink.emit(Event::SessionStart(Box::new(start)));
        for v in withheld {
            sink.emit(Event::Violation(Box::new(v)));
        }
    }

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
    let child = match stage.launch(&plan, &args.command) {
        Ok(child) => child,
        Err(e) => {
            // The stage is gone: whatever it printed is out by now.
            finish_output(copier);
            eprintln!("vetto: {e}");
            return Ok(Executed::Refused(e.exit_status()));
        }
    };
    let sink = log.as_ref().map(|(_, sink, _)| sink as &dyn EventSink);
    let session = supervisor::run(child, &plan, &signals, &shared_before, sink);
    let outcome = session.outcome;
    // Every process of the sandbox is dead: the job's output ends here,
    // before vetto's own last words.
    finish_output(copier);
    tell(&session, args.audit);
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
            proxy_bytes: 0,
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

fn finish_output(copier: Option<OutputCopier>) {
    if let Some(copier) = copier
        && !copier.finish(supervisor::output::FINISH_GRACE)
    {
        eprintln!(
            "vetto: warning: the command's output is still open after it ended (a process outside the sandbox holds it); stopped waiting for it"
        );
    }
}

/// One line each for what the user should know about the session.
fn tell(session: &supervisor::Session, audit: bool) {
    if let Some(hit) = session.limit {
        eprintln!("vetto: {}", hit.message());
    }
    if !session.escaped.is_empty() {
        let names: Vec<String> = session
            .escaped
            .iter()
            .map(|p| format!("{} ({})", p.pid, p.argv.first().unwrap_or(&p.exe)))
            .collect();
        eprintln!(
            "vetto: killed {} process(es) the command left running: {}",
            session.escaped.len(),
            names.join(", ")
        );
    }
    if !session.scrubbed.is_empty() {
        let names: Vec<String> = session
            .scrubbed
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        eprintln!(
            "vetto: removed what the command left in shared directories: {}",
            names.join(", ")
        );
    }
    if !session.secret_reads.is_empty() {
        let paths: Vec<String> = session
            .secret_reads
            .iter()
            .map(|r| match r.count {
                1 => r.path.display().to_string(),
                n => format!("{} ({n}×)", r.path.display()),
            })
            .collect();
        let more = match session.secret_reads_unlisted {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        eprintln!(
            "vetto: the command tried to read masked secrets: {}{more} (it got nothing of them)",
            paths.join(", ")
        );
    }
    let denied = session.denials();
    if denied > 0 {
        if audit {
            eprintln!(
                "vetto: the policy would have refused {denied} operation(s) (--audit: allowed)"
            );
        } else {
            eprintln!("vetto: the sandbox denied {denied} operation(s)");
        }
    }
}

type OpenLog = (PathBuf, ChannelSink, SessionWriter);

/// `session.jsonl` in the report directory, or, when that cannot be
/// written, in a temporary place (the reports then say so).
fn open_log(dir: &Path, session_tmp: &SessionTmp) -> Option<OpenLog> {
    let in_dir = std::fs::create_dir_all(dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            let path = dir.join("session.jsonl");
            spawn_writer(&path)
                .map(|(sink, writer)| (path, sink, writer))
                .map_err(|e| e.to_string())
        });
    match in_dir {
        Ok(log) => Some(log),
        Err(e) => {
            let fallback = std::env::temp_dir().join(format!(
                "{}-session.jsonl",
                session_tmp
                    .path()
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "vetto".into())
            ));
            eprintln!(
                "vetto: error: cannot write the session log in {}: {e}; logging to {} instead",
                dir.display(),
                fallback.display()
            );
            spawn_writer(&fallback)
                .map(|(sink, writer)| (fallback, sink, writer))
                .map_err(|e| eprintln!("vetto: error: no session log: {e}"))
                .ok()
        }
    }
}

/// The log outlives the session directory it may have been written in.
fn keep_log(path: PathBuf, session_tmp: &SessionTmp) -> PathBuf {
    if !path.starts_with(session_tmp.path()) {
        return path;
    }
    let kept = std::env::temp_dir().join(path.file_name().unwrap_or_default());
    match std::fs::copy(&path, &kept) {
        Ok(_) => kept,
        Err(_) => path,
    }
}

impl PolicyArgs {
    /// The policy request for this invocation, from the process environment.
    pub fn load_request(
        &self,
        session_tmp: &Path,
        report_dir: Option<&Path>,
    ) -> anyhow::Result<LoadRequest> {
        let cwd = std::env::current_dir().context("cannot determine the working directory")?;
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .context("HOME is not set")?;
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Ok(LoadRequest {
            cwd,
            project: self.project.clone(),
            policy_file: self.policy.clone(),
            home,
            session_tmp: session_tmp.to_path_buf(),
            report_dir: report_dir.map(Path::to_path_buf),
            env,
            overrides: Overrides {
                allow_read: self.allow_read.clone(),
                allow_write: self.allow_write.clone(),
                deny: self.deny.clone(),
                net: self.net.clone(),
                allow_domain: self.allow_domain.clone(),
                resolve: self.resolve.clone(),
                timeout: self.timeout.clone(),
                max_procs: self.max_procs,
                max_memory: self.max_memory.clone(),
                env_pass: self.env_pass.clone(),
                presets: self.preset.clone(),
            },
        })
    }
}

/// A directory vetto made for the session, removed with everything in it.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The per-session temporary directory: named before the policy is
/// loaded (`${TMPDIR}` expands to it), created only if the plan needs it
/// on the host, removed when the session ends.
pub struct SessionTmp {
    path: PathBuf,
    /// The directory is made in the background while vetto loads and
    /// plans (a fresh directory on a busy ext4 /tmp costs a good part of
    /// the start-up); joined when the plan needs it or the session ends.
    making: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    created: bool,
}

impl SessionTmp {
    /// A name for the session directory (under `$TMPDIR`), made in the
    /// background when the plan is `likely` to need it.
    pub fn reserve(likely: bool) -> Self {
        let path = std::env::temp_dir().join(format!("vetto-{}-{}", std::process::id(), nonce()));
        let target = path.clone();
        let making = likely
            .then(|| {
                std::thread::Builder::new()
                    .name("vetto-tmpdir".into())
                    .spawn(move || std::fs::DirBuilder::new().mode(0o700).create(&target))
                    .ok()
            })
            .flatten();
        SessionTmp {
            path,
            making,
            created: false,
        }
    }

    /// Wait for the directory (or make it now).
    pub fn create(&mut self) -> anyhow::Result<()> {
        let made = match self.making.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => std::fs::DirBuilder::new().mode(0o700).create(&self.path),
        };
        made.with_context(|| {
            format!(
                "cannot create the session directory {}",
                self.path.display()
            )
        })?;
        self.created = true;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionTmp {
    fn drop(&mut self) {
        // Made in the background but never needed: remove it too.
        if let Some(Ok(Ok(()))) = self.making.take().map(std::thread::JoinHandle::join) {
            self.created = true;
        }
        if self.created {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
