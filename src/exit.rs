//! The contract's exit statuses, in one place.

use std::process::ExitCode;

/// vetto failed or refused; the command never started.
pub const REFUSED: u8 = 125;
/// `--timeout` killed the command.
pub const TIMEOUT: u8 = 124;
/// `ci --fail-on violation`: the command passed but violations were recorded.
pub const VIOLATIONS: u8 = 3;
/// `vetto github`: GitHub refused the request or could not be reached.
pub const GITHUB: u8 = 1;
/// `vetto github`: a usage error (an option or a variable to set, a file
/// to fix); nothing was sent.
pub const USAGE: u8 = 2;
/// The command could not be executed (found but not executable).
pub const NOT_EXECUTABLE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// How a sandboxed session ended, before it becomes an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Outcome {
    /// The command exited with this status.
    Exited(i32),
    /// The command was killed by this signal.
    Signaled(i32),
    /// The time limit was reached and the tree was killed.
    TimedOut,
    /// A resource limit (memory) was exceeded and the tree was killed.
    LimitKilled,
    /// The command could not be started (not found / not executable).
    ExecFailed(u8),
}

impl Outcome {
    pub fn code(self) -> u8 {
        match self {
            // Exit statuses are 0..=255 by construction of wait(2).
            Outcome::Exited(c) => (c & 0xff) as u8,
            Outcome::Signaled(n) => 128u8.wrapping_add((n & 0x7f) as u8),
            Outcome::TimedOut => TIMEOUT,
            // Same convention as a SIGKILL from the kernel's OOM killer.
            Outcome::LimitKilled => 128 + 9,
            Outcome::ExecFailed(c) => c,
        }
    }

    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_to_128_plus_n() {
        assert_eq!(Outcome::Signaled(9).code(), 137);
        assert_eq!(Outcome::Signaled(15).code(), 143);
    }

    #[test]
    fn command_status_is_kept() {
        assert_eq!(Outcome::Exited(0).code(), 0);
        assert_eq!(Outcome::Exited(42).code(), 42);
        assert_eq!(Outcome::TimedOut.code(), 124);
    }
}
