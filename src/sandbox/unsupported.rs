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

/// Kernel capability questions: on this platform every answer is "not supported".
pub mod caps {
    use nix::errno::Errno;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Uname {
        pub release: String,
        pub machine: String,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SeccompAction {
        Errno,
        UserNotif,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct NotifSizes {
        pub notif: u16,
        pub resp: u16,
        pub data: u16,
    }

    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum ChildTestError {
        #[error("cannot fork a test child: {0}")]
        Fork(Errno),
        #[error("{step} failed: {errno}")]
        Step { step: &'static str, errno: Errno },
        #[error("the test child ended abnormally: {0}")]
        Abnormal(String),
    }

    pub fn uname() -> Result<Uname, Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn landlock_abi() -> Result<u32, Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn landlock_errata() -> Result<u32, Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn seccomp_mode() -> Result<u32, Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn no_new_privs() -> Result<bool, Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn seccomp_action_available(_action: SeccompAction) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn seccomp_notif_sizes() -> Result<NotifSizes, Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn userns_syscall_unfiltered() -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    pub fn effective_uid() -> u32 {
        nix::unistd::geteuid().as_raw()
    }
    pub fn try_user_namespace_in_child() -> Result<(), ChildTestError> {
        Err(ChildTestError::Abnormal(
            "not supported on this platform".into(),
        ))
    }
    pub fn try_seccomp_listener_in_child() -> Result<(), ChildTestError> {
        Err(ChildTestError::Abnormal(
            "not supported on this platform".into(),
        ))
    }
}
