//! `vetto run`: policy → plan → sandbox → supervisor → exit status.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::{PolicyArgs, RunArgs};
use crate::plan::{self, BuildOptions};
use crate::policy::{self, LoadRequest, Overrides};
use crate::{exit, host, sandbox, supervisor};

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let signals = supervisor::prepare().context("cannot prepare the supervisor")?;
    // Started first: the stage's exec runs while we load and plan.
    let stage = match sandbox::start_stage() {
        Ok(stage) => stage,
        Err(e) => {
            eprintln!("vetto: {e}");
            return Ok(ExitCode::from(e.exit_status()));
        }
    };
    let mut session_tmp = SessionTmp::reserve();
    let request = args
        .policy
        .load_request(session_tmp.path(), args.report_dir.as_deref())?;
    let policy = match policy::load(&request) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(exit::REFUSED));
        }
    };
    let caps = host::probe();
    let options = BuildOptions {
        allow_degraded: args.allow_degraded,
        env: request.env.clone(),
        cwd: request.cwd.clone(),
    };
    let plan = match plan::build(&policy, &caps, args.tier, &options) {
        Ok(plan) => plan,
        Err(refusal) => {
            eprintln!("vetto: {refusal}");
            return Ok(ExitCode::from(exit::REFUSED));
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
    if plan.session_tmp.is_some() {
        session_tmp.create()?;
    }
    // Whatever happens from here, the spares do not outlive the session.
    let _spares = RemoveOnDrop(plan.notify.spares.as_ref().map(|p| p.dir.clone()));
    let shared_before = supervisor::snapshot_shared(&plan);
    let child = match stage.launch(&plan, &args.command) {
        Ok(child) => child,
        Err(e) => {
            eprintln!("vetto: {e}");
            return Ok(ExitCode::from(e.exit_status()));
        }
    };
    let session = supervisor::run(child, &plan, &signals, &shared_before);
    let outcome = session.outcome;
    match session.limit {
        Some(supervisor::LimitHit::Timeout { max_ms }) => {
            eprintln!("vetto: the command was killed at the {max_ms} ms --timeout");
        }
        Some(supervisor::LimitHit::Memory { max, observed }) => eprintln!(
            "vetto: the command was killed: its processes used {observed} bytes, over the --max-memory of {max}"
        ),
        None => {}
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
    let denied = session.denials();
    if denied > 0 {
        eprintln!("vetto: the sandbox denied {denied} operation(s)");
    }
    drop(session_tmp);
    Ok(outcome.exit_code())
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
    created: bool,
}

impl SessionTmp {
    pub fn reserve() -> Self {
        let base = std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        SessionTmp {
            path: base.join(format!("vetto-{}-{}", std::process::id(), nonce())),
            created: false,
        }
    }

    pub fn create(&mut self) -> anyhow::Result<()> {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&self.path)
            .with_context(|| {
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
        if self.created {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
