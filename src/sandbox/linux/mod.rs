//! Linux backend.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::plan::Plan;

pub mod try_syscall;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("not implemented")]
    NotImplemented,
}

/// A started sandbox.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
}

pub fn spawn_plan(_plan: &Plan, _command: &[OsString]) -> Result<Spawned, SetupError> {
    Err(SetupError::NotImplemented)
}

pub fn stage_entry() -> Option<ExitCode> {
    None
}
