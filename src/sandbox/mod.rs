//! THE platform boundary: every `cfg(target_os)`, every `unsafe` block and
//! every raw syscall of vetto lives beneath this module.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::plan::Plan;

#[cfg(target_os = "linux")]
#[path = "linux/mod.rs"]
mod imp;

#[cfg(not(target_os = "linux"))]
#[path = "unsupported.rs"]
mod imp;

pub use imp::{SetupError, Spawned, caps, notify, process, try_syscall, verify_host};

/// Start `command` inside the sandbox described by `plan`.
pub fn spawn(plan: &Plan, command: &[OsString]) -> Result<Spawned, SetupError> {
    imp::spawn_plan(plan, command)
}

/// If this process was started as the hidden sandbox stage, run it and
/// return its exit status; otherwise `None`.
pub fn stage_entry() -> Option<ExitCode> {
    imp::stage_entry()
}
