//! `vetto policy check` and `vetto policy explain`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::ExplainArgs;

pub fn check(_files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    anyhow::bail!("policy check is not implemented yet")
}

pub fn explain(_args: ExplainArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("policy explain is not implemented yet")
}
