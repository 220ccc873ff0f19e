//! Kernel capability questions: on this platform every answer is "not supported".

use super::os::Errno;

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
pub fn fuse_device() -> Result<(), Errno> {
    Err(Errno::ENOSYS)
}
pub fn effective_uid() -> u32 {
    crate::sys::os::effective_uid()
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
