//! `vetto run`: the session, with the job's output inherited, reports only
//! when `--report-dir` is given, and the command's own status.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::{PolicyArgs, RunArgs};
use crate::policy::{LoadRequest, Overrides};
use crate::session::{self, Output, ReportOptions};

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let options = session::Options {
        output: Output::Direct,
        reports: args.report_dir.clone().map(ReportOptions::files_only),
        verbose: args.verbose,
    };
    session::run(args.request()?, &options)
}

impl RunArgs {
    /// The session request for this command line, from the process
    /// environment.
    pub fn request(&self) -> anyhow::Result<session::Request> {
        Ok(session::Request {
            // The session names its own directories.
            policy: LoadRequest {
                job: (!self.policy.no_auto_preset).then(|| {
                    self.command
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect()
                }),
                ..self.policy.load_request(Path::new(""), None)?
            },
            tier: self.tier,
            allow_degraded: self.allow_degraded,
            audit: self.audit,
            command: self.command.clone(),
        })
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
            policy_ref: self.policy_ref.clone(),
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
                allow_unix: self.allow_unix.clone(),
                publish: self.publish.clone(),
                secrets: self.secret.clone(),
                rules: self.rule.clone(),
                timeout: self.timeout.clone(),
                max_procs: self.max_procs,
                max_memory: self.max_memory.clone(),
                env_pass: self.env_pass.clone(),
                presets: self.preset.clone(),
                check_creations: self.check_creations.clone(),
            },
            job: None,
        })
    }
}
