//! TOML policy → validated, resolved [`Policy`]. No kernel calls here: only
//! parsing, preset merging, variable and path resolution.

mod model;

use std::path::PathBuf;

pub use model::*;

/// Command-line options that override or extend the policy files.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub allow_read: Vec<String>,
    pub allow_write: Vec<String>,
    pub deny: Vec<String>,
    /// `--net off|host`.
    pub net: Option<String>,
    pub allow_domain: Vec<String>,
    pub resolve: Vec<String>,
    pub timeout: Option<String>,
    pub max_procs: Option<u32>,
    pub max_memory: Option<String>,
    pub env_pass: Vec<String>,
    pub presets: Vec<String>,
}

/// Everything `load` needs to know about the invocation.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    /// The working directory vetto was started in.
    pub cwd: PathBuf,
    /// `--project`, else the git top-level of `cwd`, else `cwd`.
    pub project: Option<PathBuf>,
    /// `--policy`, else `vetto.toml` at the project root if present.
    pub policy_file: Option<PathBuf>,
    /// The caller's home directory (`$HOME`).
    pub home: PathBuf,
    /// The per-session temporary directory (already created).
    pub session_tmp: PathBuf,
    /// The report directory, protected from the job when inside the project.
    pub report_dir: Option<PathBuf>,
    /// The caller's environment (names and values), for `GITHUB_ENV` & co.
    pub env: Vec<(String, String)>,
    pub overrides: Overrides,
}

/// A policy that could not be loaded; `Display` renders every diagnostic
/// as `file:line:col: error: …`.
#[derive(Debug, thiserror::Error)]
#[error("{rendered}")]
pub struct PolicyError {
    pub rendered: String,
}

/// Parse, merge and resolve the policy for one invocation.
pub fn load(_req: &LoadRequest) -> Result<Policy, PolicyError> {
    Err(PolicyError {
        rendered: "policy loading is not implemented yet".into(),
    })
}
