//! Platforms without a backend yet (macOS Seatbelt and Windows AppContainer
//! are planned): every entry refuses in words, so the crate still builds.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::plan::Plan;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("vetto has no sandbox backend for this operating system yet")]
    Unsupported,
}

#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
}

pub fn spawn_plan(_plan: &Plan, _command: &[OsString]) -> Result<Spawned, SetupError> {
    Err(SetupError::Unsupported)
}

pub fn stage_entry() -> Option<ExitCode> {
    None
}
