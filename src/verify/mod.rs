//! `vetto verify`: prove, on this machine, that the sandbox contains the
//! attacks it claims to contain.
//!
//! A throwaway [`world::World`] (fake home with canary secrets, a git
//! project, listeners, host processes, CI control files) is built in a
//! temporary directory; each probe of the [`catalogue`] runs inside the
//! sandbox through the normal pipeline — `vetto run --tier T --project P --
//! JOB`, the very command a user runs — and [`evidence`] decides the result
//! from what is observed *outside*: a canary in the job's output, a file
//! changed, a listener that accepted a connection, a host process that died,
//! a daemon that outlived the session. Only where an attempt has no
//! observable side effect (io_uring, unshare, the x32 ABI, ptrace) does the
//! kernel's answer decide, and the probe's description says so.
//!
//! ```text
//! Options ─► World::new ─► plan::build (tier or refusal) ─► CATALOGUE × `vetto run` ─► evidence ─► Report
//! ```

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::plan::{self, BuildOptions, Tier, TierRequest};
use crate::policy::{self, LoadRequest, Overrides};

pub mod catalogue;
pub mod evidence;
mod exec;
mod probes_extra;
pub mod render;
pub mod world;

pub use probes_extra::entry as probe_entry;

use catalogue::{Applies, CATALOGUE, Job, Kind, Spec};
use exec::Captured;
use world::World;

/// The JSON document's version; bump on any incompatible change.
pub const SCHEMA: u32 = 1;

/// How long one probe may run before it is killed (and reported).
const PROBE_LIMIT: Duration = Duration::from_secs(15);

/// The line every shell job prints first: a job that never ran cannot
/// pass for a contained one.
const RAN_MARKER: &str = "VETTO-VERIFY-RAN";

/// What to verify.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub tier: TierRequest,
    /// `--net host`: the network probes are expected to escape.
    pub net_host: bool,
    pub allow_degraded: bool,
}

/// How `verify` ended.
#[derive(Debug)]
pub enum Outcome {
    Ran(Report),
    /// The tier cannot run here; the refusal text (exit 125).
    Refused(String),
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error("cannot build the verification world")]
    World(#[from] world::WorldError),
    #[error("the built-in policy does not load for the verification world:\n{0}")]
    Policy(String),
}

/// One probe's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Attack: the evidence shows nothing got through.
    Contained,
    /// Attack: the evidence shows the attack worked.
    NotContained,
    /// The probe does not apply to this tier or host (with the reason).
    NotApplicable,
    /// Control: the ordinary operation worked.
    Works,
    /// Control: the ordinary operation failed; the sandbox is broken.
    Failed,
    /// The job did not run as planned, so nothing is proven either way.
    Inconclusive,
}

impl Verdict {
    /// Does this result make `verify` fail?
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Verdict::NotContained | Verdict::Failed | Verdict::Inconclusive
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            Verdict::Contained => "contained",
            Verdict::NotContained => "NOT CONTAINED",
            Verdict::NotApplicable => "n/a",
            Verdict::Works => "works",
            Verdict::Failed => "FAILED",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    pub id: &'static str,
    pub kind: Kind,
    pub technique: &'static str,
    pub result: Verdict,
    /// What was observed outside the sandbox (or why it does not apply).
    pub evidence: String,
    pub millis: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: u32,
    pub tier: Tier,
    pub requested: String,
    pub net: &'static str,
    pub allow_degraded: bool,
    /// Rules the tier does not enforce (non-empty only with --allow-degraded).
    pub degraded: Vec<String>,
    /// True when every attack was contained or not applicable and every
    /// control worked.
    pub passed: bool,
    pub escaped: Vec<&'static str>,
    pub failed_controls: Vec<&'static str>,
    pub inconclusive: Vec<&'static str>,
    pub counts: Counts,
    pub millis: u64,
    pub probes: Vec<ProbeResult>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub contained: usize,
    pub not_contained: usize,
    pub not_applicable: usize,
    pub works: usize,
    pub failed: usize,
    pub inconclusive: usize,
}

/// The facts that decide which probes apply.
#[derive(Debug, Clone)]
struct Context {
    tier: Tier,
    net_host: bool,
    git: bool,
    setuid: Option<PathBuf>,
}

/// Build the world, choose the tier, run every probe, collect the evidence.
pub fn run(options: &Options) -> Result<Outcome, VerifyError> {
    let started = Instant::now();
    let mut world = World::new(&std::env::temp_dir())?;
    let (tier, degraded) = match resolve_tier(&world, options)? {
        Ok(t) => t,
        Err(refusal) => return Ok(Outcome::Refused(refusal)),
    };
    world.start()?;
    let ctx = Context {
        tier,
        net_host: options.net_host,
        git: world.git,
        setuid: world.setuid.clone(),
    };
    let results = run_all(&world, &ctx, options);
    drop(world);
    Ok(Outcome::Ran(summarise(
        options,
        tier,
        degraded,
        results,
        started.elapsed(),
    )))
}

/// The tier `vetto run` would take for the world's project, or its refusal.
type Resolved = Result<(Tier, Vec<String>), String>;

fn resolve_tier(world: &World, options: &Options) -> Result<Resolved, VerifyError> {
    let p = world.project_for("preflight")?;
    let env: Vec<(String, String)> = world.env().into_iter().collect();
    let request = LoadRequest {
        cwd: p.clone(),
        project: Some(p.clone()),
        policy_file: None,
        policy_ref: None,
        home: world.home.clone(),
        session_tmp: world.tmp.join("preflight-session"),
        report_dir: None,
        env: env.clone(),
        overrides: overrides(options),
        job: None,
    };
    let policy = policy::load(&request).map_err(|e| VerifyError::Policy(e.to_string()))?;
    let caps = crate::host::probe();
    let build = BuildOptions {
        allow_degraded: options.allow_degraded,
        audit: false,
        env,
        cwd: p,
        terminals: Vec::new(),
    };
    Ok(match plan::build(&policy, &caps, options.tier, &build) {
        Ok(plan) => Ok((plan.tier, plan.degraded)),
        Err(refusal) => Err(refusal.to_string()),
    })
}

fn overrides(options: &Options) -> Overrides {
    Overrides {
        net: options.net_host.then(|| "host".to_owned()),
        env_pass: vec!["SSH_AUTH_SOCK".to_owned()],
        ..Overrides::default()
    }
}

/// Run every probe, a few at a time (each is its own `vetto run`).
fn run_all(world: &World, ctx: &Context, options: &Options) -> Vec<ProbeResult> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<ProbeResult>>> = Mutex::new(vec![None; CATALOGUE.len()]);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(4, 8);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(spec) = CATALOGUE.get(i) else { break };
                    let r = run_one(world, ctx, options, spec);
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                }
            });
        }
    });
    // A missing result must never read as a pass.
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    CATALOGUE
        .iter()
        .zip(results)
        .map(|(spec, r)| {
            r.unwrap_or_else(|| ProbeResult {
                id: spec.id,
                kind: spec.kind,
                technique: spec.technique,
                result: Verdict::Inconclusive,
                evidence: "the probe produced no result".to_owned(),
                millis: 0,
            })
        })
        .collect()
}

fn run_one(world: &World, ctx: &Context, options: &Options, spec: &Spec) -> ProbeResult {
    let started = Instant::now();
    let (result, evidence) = match not_applicable(spec, ctx) {
        Some(reason) => (Verdict::NotApplicable, reason),
        None => match attempt(world, ctx, options, spec) {
            Ok(v) => v,
            Err(e) => (
                Verdict::Inconclusive,
                format!("could not run the probe: {e}"),
            ),
        },
    };
    ProbeResult {
        id: spec.id,
        kind: spec.kind,
        technique: spec.technique,
        result,
        evidence,
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

fn not_applicable(spec: &Spec, ctx: &Context) -> Option<String> {
    match spec.applies {
        Applies::Always => None,
        Applies::FullOnly(reason) => (ctx.tier != Tier::Full).then(|| reason.to_owned()),
        Applies::X86_64 => (!cfg!(target_arch = "x86_64"))
            .then(|| "only x86_64 has the x32 and i386 syscall ABIs".to_owned()),
        Applies::Git => (!ctx.git).then(|| "git is not installed".to_owned()),
        Applies::Setuid => ctx.setuid.is_none().then(|| {
            if crate::sys::os::is_root() {
                "vetto runs as root: a setuid-root binary has nothing to gain".to_owned()
            } else {
                "no setuid-root binary (passwd, su, chsh, …) is installed".to_owned()
            }
        }),
        Applies::DevShm => (!std::path::Path::new("/dev/shm").is_dir())
            .then(|| "the host has no /dev/shm".to_owned()),
        Applies::Loopback => (ctx.tier != Tier::Full && !ctx.net_host).then(|| {
            format!(
                "the network is off at {} (no private loopback below FULL)",
                ctx.tier
            )
        }),
    }
}

/// Prepare the probe's project, run the job sandboxed, judge the evidence.
fn attempt(
    world: &World,
    ctx: &Context,
    options: &Options,
    spec: &Spec,
) -> Result<(Verdict, String), world::WorldError> {
    let p = world.project_for(spec.id)?;
    let before = evidence::Before::capture(world, spec, &p);
    // Where the evidence is the kernel's answer or a process's credentials,
    // the same job runs unsandboxed first: an attack the host refuses to
    // everyone proves nothing about the sandbox.
    let bare = match spec.evidence {
        catalogue::Evidence::KernelAnswer | catalogue::Evidence::SetuidNoGain => {
            let argv = job_argv(world, spec.job, &p);
            let (program, args) = argv.split_first().unzip();
            let mut c = Command::new(program.map_or("sh", String::as_str));
            c.args(args.unwrap_or_default());
            prepare(&mut c, world, &p);
            Some(exec::run(c, PROBE_LIMIT))
        }
        _ => None,
    };
    let mut c = Command::new(world.bin());
    c.args(["run", "--tier", ctx.tier.as_str(), "--project"])
        .arg(&p)
        .args(["--env-pass", "SSH_AUTH_SOCK", "--timeout", "10s"]);
    if options.net_host {
        c.args(["--net", "host"]);
    }
    if options.allow_degraded {
        c.arg("--allow-degraded");
    }
    c.arg("--").args(job_argv(world, spec.job, &p));
    prepare(&mut c, world, &p);
    let job = exec::run(c, PROBE_LIMIT);
    let job = match job {
        Ok(j) => j,
        Err(e) => {
            return Ok((
                Verdict::Inconclusive,
                format!("could not start vetto run: {e}"),
            ));
        }
    };
    let bare = match bare {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            return Ok((
                Verdict::Inconclusive,
                format!("could not run the probe unsandboxed for reference: {e}"),
            ));
        }
        None => None,
    };
    let (verdict, evidence) = evidence::judge(
        world,
        spec,
        &p,
        &before,
        &job,
        bare.as_ref(),
        ran(spec.job, &job),
    );
    Ok((verdict, world.abbreviate(&evidence, &p)))
}

fn prepare(c: &mut Command, world: &World, p: &std::path::Path) {
    c.current_dir(p).env_clear().envs(world.env());
}

fn job_argv(world: &World, job: Job, p: &std::path::Path) -> Vec<String> {
    let probe = World::probe_bin(p).display().to_string();
    match job {
        Job::Sh(script) => vec![
            "sh".into(),
            "-c".into(),
            format!("echo {RAN_MARKER}\n{}", world.expand(script, p)),
        ],
        Job::Probe(args) => std::iter::once(probe)
            .chain(std::iter::once(crate::probe::COMMAND.to_owned()))
            .chain(args.iter().map(|a| world.expand(a, p)))
            .collect(),
        Job::Extra(args) => std::iter::once(probe)
            .chain(std::iter::once(probes_extra::COMMAND.to_owned()))
            .chain(args.iter().map(|a| world.expand(a, p)))
            .collect(),
    }
}

/// Did the job itself start (as opposed to vetto refusing, or the program
/// not being found)?
fn ran(job: Job, out: &Captured) -> bool {
    match job {
        Job::Sh(_) => out.stdout.contains(RAN_MARKER),
        Job::Probe(_) => out.stdout.contains("{\"action\""),
        Job::Extra(_) => out.stdout.contains(probes_extra::MARKER),
    }
}

fn summarise(
    options: &Options,
    tier: Tier,
    degraded: Vec<String>,
    probes: Vec<ProbeResult>,
    elapsed: Duration,
) -> Report {
    let mut counts = Counts::default();
    for p in &probes {
        *match p.result {
            Verdict::Contained => &mut counts.contained,
            Verdict::NotContained => &mut counts.not_contained,
            Verdict::NotApplicable => &mut counts.not_applicable,
            Verdict::Works => &mut counts.works,
            Verdict::Failed => &mut counts.failed,
            Verdict::Inconclusive => &mut counts.inconclusive,
        } += 1;
    }
    let ids = |v: Verdict| {
        probes
            .iter()
            .filter(|p| p.result == v)
            .map(|p| p.id)
            .collect::<Vec<_>>()
    };
    Report {
        schema: SCHEMA,
        tier,
        requested: match options.tier {
            TierRequest::Auto => "auto".to_owned(),
            TierRequest::Exactly(t) => t.to_string(),
            TierRequest::AppContainer => "appcontainer".to_owned(),
        },
        net: if options.net_host { "host" } else { "off" },
        allow_degraded: options.allow_degraded,
        degraded,
        // Nothing proven (no contained attack, no working control) is not a pass.
        passed: !probes.iter().any(|p| p.result.is_failure())
            && counts.contained > 0
            && counts.works > 0,
        escaped: ids(Verdict::NotContained),
        failed_controls: ids(Verdict::Failed),
        inconclusive: ids(Verdict::Inconclusive),
        counts,
        millis: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        probes,
    }
}
