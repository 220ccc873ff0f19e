//! Command-line surface (clap). Parsing and dispatch only; each command's
//! driver lives in its own module.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::exit;

mod ci;
mod doctor;
mod github;
mod policy;
pub mod report;
mod run;
mod verify;

#[derive(Debug, Parser)]
#[command(
    name = "vetto",
    version,
    about = "Run builds, tests and coding agents in a kernel sandbox",
    propagate_version = true,
    infer_subcommands = false
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sandbox COMMAND and stream its output (local and agent use)
    Run(Box<RunArgs>),
    /// Like `run`, plus reports for CI (SARIF, HTML, JSONL, step summary)
    Ci(Box<CiArgs>),
    /// Re-render reports from a session log
    Report(ReportArgs),
    /// What this host can enforce: tier, Landlock ABI, user namespaces, seccomp
    Doctor(DoctorArgs),
    /// Check and explain policies
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Run built-in attack probes inside the sandbox and show what is contained
    Verify(VerifyArgs),
    /// Post the summary to the pull request, upload SARIF to code scanning
    /// (exit 1: GitHub refused or could not be reached; 2: usage)
    #[command(subcommand)]
    Github(GithubCommand),
}

#[derive(Debug, Subcommand)]
pub enum GithubCommand {
    /// Create or update the pull request's one vetto comment with summary.md
    Comment(GithubCommentArgs),
    /// Upload SARIF to GitHub code scanning (from CI systems other than GitHub Actions)
    UploadSarif(GithubSarifArgs),
}

/// Where the API is and how to retry (token: $GITHUB_TOKEN, else $GH_TOKEN).
#[derive(Debug, Args)]
pub struct GithubApiArgs {
    /// The repository (default: $GITHUB_REPOSITORY)
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// The REST API (default: $GITHUB_API_URL, else https://api.github.com)
    #[arg(long = "api-url", value_name = "URL")]
    pub api_url: Option<String>,
    /// Tries per request, on a 5xx, a rate limit or a broken connection
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub attempts: u32,
    /// The first retry's delay, doubled for each next one (unless GitHub
    /// says how long to wait)
    #[arg(long = "retry-delay-ms", value_name = "MS", default_value_t = 1000)]
    pub retry_delay_ms: u64,
}

#[derive(Debug, Args)]
pub struct GithubCommentArgs {
    /// The report directory `vetto ci` wrote (its summary.md is posted)
    #[arg(
        long = "report-dir",
        value_name = "DIR",
        default_value = "vetto-report"
    )]
    pub report_dir: PathBuf,
    /// The pull request (default: from $GITHUB_EVENT_PATH, else $GITHUB_REF)
    #[arg(long, value_name = "N")]
    pub pr: Option<u64>,
    /// Only a marked comment by this login is updated (default in GitHub
    /// Actions: github-actions[bot]; `*`: any author)
    #[arg(long, value_name = "LOGIN")]
    pub author: Option<String>,
    #[command(flatten)]
    pub api: GithubApiArgs,
}

#[derive(Debug, Args)]
pub struct GithubSarifArgs {
    /// The SARIF file (e.g. vetto-report/vetto.sarif)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The analysed commit (default: $GITHUB_SHA)
    #[arg(long, value_name = "SHA")]
    pub sha: Option<String>,
    /// The full git ref: refs/heads/BRANCH, refs/pull/N/merge (default: $GITHUB_REF)
    #[arg(long = "ref", value_name = "REF")]
    pub git_ref: Option<String>,
    /// Set every run's category (automationDetails.id), replacing the file's
    #[arg(long, value_name = "NAME")]
    pub category: Option<String>,
    /// The tool name code scanning shows
    #[arg(long = "tool-name", value_name = "NAME", default_value = "vetto")]
    pub tool_name: String,
    #[command(flatten)]
    pub api: GithubApiArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// auto (default): the tier `vetto run` would take; a named tier runs exactly that tier or refuses
    #[arg(long, value_name = "auto|full|fs-only|seccomp", default_value = "auto")]
    pub tier: crate::plan::TierRequest,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
    /// Verify with the network `off` (default) or `host` (the network probes then escape)
    #[arg(long, value_name = "off|host", value_parser = ["off", "host"])]
    pub net: Option<String>,
    /// Accept a tier that cannot enforce every rule (the probes show what is lost)
    #[arg(long = "allow-degraded")]
    pub allow_degraded: bool,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate policy files; errors name file:line:col
    Check {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// The smallest change to the default policy that allows what audited sessions did
    Suggest {
        #[arg(required = true, value_name = "SESSION.jsonl")]
        sessions: Vec<PathBuf>,
    },
    /// Print the resolved policy and, for each PATH or HOST, the rule that decides it
    Explain(Box<ExplainArgs>),
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
    /// With PATH|HOST: the whole policy too, not only the answers
    #[arg(long)]
    pub all: bool,
    /// Paths or host names to decide
    #[arg(value_name = "PATH|HOST")]
    pub queries: Vec<String>,
}

/// Options that shape the policy (shared by `run`, `ci`, `policy explain`).
#[derive(Debug, Args, Clone, Default)]
pub struct PolicyArgs {
    /// TOML policy (default: vetto.toml at the project root, else the built-in default)
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Read the policy file from this git ref (`git show REF:vetto.toml`,
    /// no checkout), so the change under test cannot widen its own policy
    #[arg(long = "policy-ref", value_name = "REF")]
    pub policy_ref: Option<String>,
    /// Project root (default: the git top-level of the working directory)
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Add a readable path
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<String>,
    /// Add a writable path
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<String>,
    /// Make a path unreadable and unwritable, even under an allowed root
    #[arg(long, value_name = "PATH")]
    pub deny: Vec<String>,
    /// Network: `off` (default) or `host` (unrestricted)
    #[arg(long, value_name = "off|host", value_parser = ["off", "host"])]
    pub net: Option<String>,
    /// Filtered egress: allow only these hosts (`*.example.com` wildcards)
    /// or address ranges (`10.1.2.0/24:5432`), through vetto's proxy
    #[arg(long = "allow-domain", value_name = "HOST[:PORT]")]
    pub allow_domain: Vec<String>,
    /// Pin a host name to an address for the proxy (a loopback pin is
    /// reachable; an internal one also needs an address range)
    #[arg(long, value_name = "HOST:IP")]
    pub resolve: Vec<String>,
    /// Allow connecting to this pathname unix socket (an ssh-agent, a
    /// podman socket): the socket found there at start, at every tier
    #[arg(long = "allow-unix", value_name = "PATH")]
    pub allow_unix: Vec<String>,
    /// Make a listener of the job (its loopback port JOB_PORT, default
    /// HOST_PORT) reachable on the host at HOST_PORT, on loopback unless
    /// HOST_ADDR is named
    #[arg(long, value_name = "[HOST_ADDR:]HOST_PORT[:JOB_PORT]")]
    pub publish: Vec<String>,
    /// Give the job a placeholder for the variable NAME of vetto's
    /// environment; vetto's proxy puts the value in the job's HTTPS
    /// requests to these hosts only (implies --allow-domain HOST)
    #[arg(long, value_name = "NAME@HOST[,HOST…]")]
    pub secret: Vec<String>,
    /// Allow only these requests to the rule's host (implies
    /// --allow-domain HOST:443): vetto's proxy reads each one and refuses
    /// (403) what no rule of the host allows
    #[arg(long, value_name = "METHOD[,METHOD…] HOST/PATH")]
    pub rule: Vec<String>,
    /// Kill the whole process tree after this long (e.g. 90s, 10m)
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Process/thread limit for the sandbox
    #[arg(long = "max-procs", value_name = "N")]
    pub max_procs: Option<u32>,
    /// Memory limit for the process tree (e.g. 2GiB)
    #[arg(long = "max-memory", value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// Pass an environment variable that scrubbing withholds
    #[arg(long = "env-pass", value_name = "NAME")]
    pub env_pass: Vec<String>,
    /// Add a built-in preset (same as `extends`)
    #[arg(long, value_name = "NAME")]
    pub preset: Vec<String>,
    /// Apply no preset chosen from the command and the project's marker
    /// file (`npm` with `package.json` → `--preset npm`)
    #[arg(long = "no-auto-preset")]
    pub no_auto_preset: bool,
    /// When new entries (a nested `.git`, a protected name) are looked at:
    /// `live` (default) refuses them as they are made; `after` (FULL only)
    /// leaves creations to the kernel and reports them after the session,
    /// at no cost per file
    #[arg(long = "check-creations", value_name = "live|after", value_parser = ["live", "after"])]
    pub check_creations: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// auto (default): the strongest tier the host offers; a named tier runs exactly that tier or refuses (appcontainer: experimental, Windows, `vetto run` only)
    #[arg(
        long,
        value_name = "auto|full|fs-only|seccomp|appcontainer",
        default_value = "auto"
    )]
    pub tier: crate::plan::TierRequest,
    /// Accept a tier that cannot enforce every rule of the policy
    #[arg(long = "allow-degraded")]
    pub allow_degraded: bool,
    /// Observe and record, block nothing (for learning a policy)
    #[arg(long)]
    pub audit: bool,
    /// Where reports are written (`run` writes them only when given)
    #[arg(long = "report-dir", value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// Name every distinct denial at the end (default: the first few)
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct CiArgs {
    #[command(flatten)]
    pub run: Box<RunArgs>,
    /// Also fail (exit 3) when the command passed but violations were
    /// recorded (default: violation; with --audit: never, unless given)
    #[arg(long = "fail-on", value_name = "violation|never")]
    pub fail_on: Option<crate::session::FailOn>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The session log (session.jsonl) to render
    #[arg(long, value_name = "FILE")]
    pub session: PathBuf,
    /// Write SARIF here
    #[arg(long, value_name = "F")]
    pub sarif: Option<PathBuf>,
    /// Write the HTML report here
    #[arg(long, value_name = "F")]
    pub html: Option<PathBuf>,
    /// Write the Markdown summary here
    #[arg(long, value_name = "F")]
    pub summary: Option<PathBuf>,
    /// SARIF automationDetails category (default: vetto/<job>)
    #[arg(long, value_name = "NAME")]
    pub category: Option<String>,
}

/// Parse `std::env::args_os`, run, and turn the result into an exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // `vetto github` never runs a command: a usage error is 2 there.
            let github = std::env::args_os().nth(1).is_some_and(|a| a == "github");
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ if github => ExitCode::from(exit::USAGE),
                _ => ExitCode::from(exit::REFUSED),
            };
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Ci(args) => ci::ci(*args),
        Command::Report(args) => report::report(args),
        Command::Doctor(args) => doctor::doctor(args),
        Command::Policy(PolicyCommand::Check { files }) => policy::check(&files),
        Command::Policy(PolicyCommand::Suggest { sessions }) => policy::suggest(&sessions),
        Command::Policy(PolicyCommand::Explain(args)) => policy::explain(*args),
        Command::Verify(args) => verify::verify(args),
        Command::Github(cmd) => github::github(cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // The chain can quote what a file or a session log held.
            eprintln!(
                "vetto: error: {}",
                crate::text::escape_lines(&format!("{e:#}"))
            );
            ExitCode::from(exit::REFUSED)
        }
    }
}
