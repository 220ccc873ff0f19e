//! THE platform boundary: every `cfg(target_os)`, every `unsafe` block and
//! every raw syscall of vetto lives beneath this module.

use std::process::ExitCode;

#[cfg(target_os = "linux")]
#[path = "linux/mod.rs"]
mod imp;

#[cfg(not(target_os = "linux"))]
#[path = "unsupported.rs"]
mod imp;

pub use imp::{SetupError, Spawned, Stage, caps, notify, process};
// The probe's raw attempts (`vetto __probe`, `vetto verify`).
pub use imp::try_syscall;
// `vetto verify`'s host-side stand-ins.
pub use imp::verify_host;

/// A process the job left running when it ended; the sandbox's init
/// reports it, then kills it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EscapedProcess {
    /// As the sandbox saw it (its own PID namespace at FULL).
    pub pid: i32,
    pub exe: String,
    pub argv: Vec<String>,
}

/// Start the sandbox stage ahead of the plan (see [`Stage::launch`]), so
/// its start-up overlaps policy loading and planning.
pub fn start_stage() -> Result<Stage, SetupError> {
    imp::start_stage()
}

/// If this process was started as the hidden sandbox stage, run it and
/// return its exit status; otherwise `None`.
pub fn stage_entry() -> Option<ExitCode> {
    imp::stage_entry()
}
