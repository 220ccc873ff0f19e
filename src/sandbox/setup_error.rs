//! Why a Unix sandbox stage (Linux, macOS) could not start the job, and
//! the exit status the contract gives each reason.

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("cannot start the sandbox stage: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("cannot pass the plan to the sandbox stage: {0}")]
    Handover(#[source] std::io::Error),
    #[error("{0}")]
    Stage(String),
    /// macOS: kqueue could not follow the job's processes.
    #[error("cannot follow the job's processes (kqueue): {0}")]
    Track(#[source] std::io::Error),
    /// The job's program could not be executed (not a setup failure):
    /// the error, and the path it concerns when one was tried.
    #[error("cannot execute the command: {}{}", .path.as_deref().map(|p| format!("{}: ", crate::text::path_name(std::path::Path::new(p)))).unwrap_or_default(), nix::errno::Errno::from_raw(*.errno))]
    Exec { errno: i32, path: Option<String> },
}

impl SetupError {
    /// The exit status the contract gives this failure.
    pub fn exit_status(&self) -> u8 {
        match self {
            SetupError::Exec { errno, .. } if *errno == libc::ENOENT => crate::exit::NOT_FOUND,
            SetupError::Exec { .. } => crate::exit::NOT_EXECUTABLE,
            _ => crate::exit::REFUSED,
        }
    }
}
