//! The hidden first arguments vetto re-executes itself with (and that
//! `vetto verify` and the tests run it with): one name each, in one place.
//! Each selects an entry that `main` tries before the command line is
//! parsed, most of them before any thread starts (a process with threads
//! cannot unshare a user namespace, and the stage restricts itself).

use std::ffi::OsStr;

/// One hidden entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// The child that applies a plan and becomes the job
    /// (`sandbox::stage_entry`).
    Stage,
    /// The helper that makes sockets in a network namespace that leads
    /// nowhere, or in the job's (`sandbox::dead_net::entry`).
    DeadNet,
    /// One syscall attempt, one JSON line (`probe::entry`).
    Probe,
    /// `vetto verify`'s actions inside the sandbox
    /// (`verify::probe_entry`).
    VerifyProbe,
}

impl Hidden {
    pub const ALL: [Hidden; 4] = [
        Hidden::Stage,
        Hidden::DeadNet,
        Hidden::Probe,
        Hidden::VerifyProbe,
    ];

    /// The argument as written on the command line.
    pub const fn arg(self) -> &'static str {
        match self {
            Hidden::Stage => "__stage",
            Hidden::DeadNet => "__dead-net",
            Hidden::Probe => "__probe",
            Hidden::VerifyProbe => "__verify-probe",
        }
    }

    /// Whether `arg` (argv[1]) selects this entry.
    pub fn is(self, arg: &OsStr) -> bool {
        arg == self.arg()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// No two entries share a name, and none can be mistaken for a
    /// subcommand or an option a user types.
    #[test]
    fn hidden_arguments_are_distinct_and_no_subcommand() {
        let names: Vec<&str> = Hidden::ALL.iter().map(|h| h.arg()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        let cli = crate::cli::Cli::command();
        for n in names {
            assert!(n.starts_with("__"), "{n}");
            assert!(cli.find_subcommand(n).is_none(), "{n}");
        }
    }
}
