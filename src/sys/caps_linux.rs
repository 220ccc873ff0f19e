//! Raw questions to the kernel about what it supports, as safe functions.
//!
//! `host::probe` is the only caller; it interprets the answers. Nothing here
//! changes the state of the calling process: every call either only reads,
//! or runs in a forked child that exits right after.

use std::ffi::CStr;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork, pipe};

/// `LANDLOCK_CREATE_RULESET_VERSION` (Linux 5.13+).
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;
/// `LANDLOCK_CREATE_RULESET_ERRATA` (Linux 6.15+).
const LANDLOCK_CREATE_RULESET_ERRATA: libc::c_uint = 1 << 1;

/// `uname(2)`: kernel release and machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uname {
    pub release: String,
    pub machine: String,
}

pub fn uname() -> Result<Uname, Errno> {
    // SAFETY: `utsname` is plain old data; all-zero bytes are a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel fills the live, correctly typed local.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Err(Errno::last());
    }
    Ok(Uname {
        release: c_chars_to_string(&u.release),
        machine: c_chars_to_string(&u.machine),
    })
}

/// A NUL-terminated `c_char` array (as in `utsname`) as text.
fn c_chars_to_string(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn landlock_create_ruleset_flags(flags: libc::c_uint) -> Result<u32, Errno> {
    // SAFETY: with a NULL attribute pointer and size 0 the kernel reads no
    // memory; the VERSION/ERRATA flags only return a number, no fd is made.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            flags,
        )
    };
    if ret < 0 {
        Err(Errno::last())
    } else {
        u32::try_from(ret).map_err(|_| Errno::ERANGE)
    }
}

/// The Landlock ABI version. ENOSYS: built without Landlock (or a filter
/// hides it); EOPNOTSUPP: built in but not enabled at boot.
pub fn landlock_abi() -> Result<u32, Errno> {
    landlock_create_ruleset_flags(LANDLOCK_CREATE_RULESET_VERSION)
}

/// The Landlock errata bitmask (fixes this kernel carries); EINVAL before 6.15.
pub fn landlock_errata() -> Result<u32, Errno> {
    landlock_create_ruleset_flags(LANDLOCK_CREATE_RULESET_ERRATA)
}

/// `prctl(PR_GET_SECCOMP)`: 0 none, 2 filtered. EINVAL: kernel without
/// `CONFIG_SECCOMP`. (Mode 1, strict, would kill the caller: such a process
/// could not be running vetto.)
pub fn seccomp_mode() -> Result<u32, Errno> {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments and changes nothing.
    let ret = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    if ret < 0 {
        Err(Errno::last())
    } else {
        u32::try_from(ret).map_err(|_| Errno::ERANGE)
    }
}

/// `prctl(PR_GET_NO_NEW_PRIVS)`.
pub fn no_new_privs() -> Result<bool, Errno> {
    // SAFETY: PR_GET_NO_NEW_PRIVS takes no pointer arguments and changes nothing.
    let ret = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret == 1)
    }
}

/// A seccomp filter return action vetto relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeccompAction {
    /// `SECCOMP_RET_ERRNO`: how vetto blocks calls.
    Errno,
    /// `SECCOMP_RET_USER_NOTIF`: how the supervisor decides calls (5.0+).
    UserNotif,
}

/// `seccomp(SECCOMP_GET_ACTION_AVAIL)`: whether the kernel knows the action.
pub fn seccomp_action_available(action: SeccompAction) -> Result<(), Errno> {
    let value: u32 = match action {
        SeccompAction::Errno => libc::SECCOMP_RET_ERRNO,
        SeccompAction::UserNotif => libc::SECCOMP_RET_USER_NOTIF,
    };
    // SAFETY: the kernel reads one u32 through the pointer, which points at
    // a live local of that type.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &value as *const u32,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Sizes of the seccomp user-notification structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifSizes {
    pub notif: u16,
    pub resp: u16,
    pub data: u16,
}

/// `seccomp(SECCOMP_GET_NOTIF_SIZES)` (5.0+).
pub fn seccomp_notif_sizes() -> Result<NotifSizes, Errno> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: the kernel writes one `struct seccomp_notif_sizes` through the
    // pointer, which points at a live, correctly typed local.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0u32,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if ret < 0 {
        return Err(Errno::last());
    }
    Ok(NotifSizes {
        notif: sizes.seccomp_notif,
        resp: sizes.seccomp_notif_resp,
        data: sizes.seccomp_data,
    })
}

/// Whether a seccomp filter around this process lets `unshare(CLONE_NEWUSER)`
/// through, without creating anything: the call carries an invalid flag
/// (`CLONE_PTRACE`), which the kernel rejects with EINVAL before it looks at
/// any namespace — but only after seccomp has seen the call. Ok means the
/// kernel, not a filter, answered. LSM hooks (AppArmor's userns restriction)
/// run later and are not seen here.
pub fn userns_syscall_unfiltered() -> Result<(), Errno> {
    let flags = libc::CLONE_NEWUSER | libc::CLONE_PTRACE;
    // SAFETY: no pointer arguments; the invalid flag makes the kernel return
    // before any namespace is created or the caller is changed.
    let ret = unsafe { libc::unshare(flags) };
    match (ret, Errno::last()) {
        (0, _) => Ok(()),
        (_, Errno::EINVAL) => Ok(()),
        (_, e) => Err(e),
    }
}

/// Whether this user can open `/dev/fuse` (the secret traps' device).
pub fn fuse_device() -> Result<(), Errno> {
    nix::fcntl::open(
        "/dev/fuse",
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map(drop)
}

pub fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Why a test run in a child process did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildTestError {
    #[error("cannot fork a test child: {0}")]
    Fork(Errno),
    #[error("{step} failed: {errno}")]
    Step { step: &'static str, errno: Errno },
    #[error("the test child ended abnormally: {0}")]
    Abnormal(String),
}

/// Fork a child that creates a user namespace the way the FULL tier does
/// (map its uid, then mount/net/pid namespaces, then a private mount
/// tree) and exits. Catches what sysctls cannot show: a seccomp filter of
/// a container runtime, an LSM policy, AppArmor's capability-less
/// `unprivileged_userns` profile.
pub fn try_user_namespace_in_child() -> Result<(), ChildTestError> {
    // Everything the child needs is prepared here: after fork it may only
    // make raw syscalls (the parent may have other threads).
    let uid_map = format!("{0} {0} 1\n", effective_uid());
    let uid_map_path: &CStr = c"/proc/self/uid_map";
    let root: &CStr = c"/";
    let steps = UsernsSteps {
        uid_map: uid_map.as_bytes(),
        uid_map_path,
        root,
    };
    run_in_child(&USERNS_STEP_NAMES, || steps.run())
}

const USERNS_STEP_NAMES: [&str; 4] = [
    "unshare(CLONE_NEWUSER)",
    "writing /proc/self/uid_map",
    "unshare(CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWPID)",
    "mount(/, MS_REC|MS_PRIVATE) in the new namespace",
];

struct UsernsSteps<'a> {
    uid_map: &'a [u8],
    uid_map_path: &'a CStr,
    root: &'a CStr,
}

impl UsernsSteps<'_> {
    /// Runs in the forked child: raw syscalls only.
    fn run(&self) -> Result<(), StepFailed> {
        // SAFETY: no pointer arguments; affects only this short-lived child.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
            return Err(StepFailed::at(0));
        }
        // SAFETY: the path is a valid NUL-terminated string from the parent.
        let fd =
            unsafe { libc::open(self.uid_map_path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(StepFailed::at(1));
        }
        // SAFETY: the buffer and its length come from a live byte slice.
        let n = unsafe { libc::write(fd, self.uid_map.as_ptr().cast(), self.uid_map.len()) };
        let failed = if n < 0 {
            Some(StepFailed::at(1))
        } else if n.unsigned_abs() != self.uid_map.len() {
            Some(StepFailed {
                step: 1,
                errno: libc::EIO,
            })
        } else {
            None
        };
        // SAFETY: `fd` was opened above and is closed once.
        unsafe { libc::close(fd) };
        if let Some(failed) = failed {
            return Err(failed);
        }
        // SAFETY: no pointer arguments; affects only this short-lived child.
        if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWNET | libc::CLONE_NEWPID) }
            != 0
        {
            return Err(StepFailed::at(2));
        }
        // SAFETY: `root` is a valid NUL-terminated path; NULL source, type and
        // data are allowed for a propagation change; this child's own mount
        // namespace is the only one affected.
        let ret = unsafe {
            libc::mount(
                std::ptr::null(),
                self.root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        };
        if ret != 0 {
            return Err(StepFailed::at(3));
        }
        Ok(())
    }
}

/// Which step of a child test failed, and its errno.
#[derive(Debug, Clone, Copy)]
struct StepFailed {
    step: u32,
    errno: i32,
}

impl StepFailed {
    /// Step `step` failed with the current errno.
    fn at(step: u32) -> Self {
        StepFailed {
            step,
            errno: Errno::last_raw(),
        }
    }
}

const LISTENER_STEP_NAMES: [&str; 2] = [
    "prctl(PR_SET_NO_NEW_PRIVS)",
    "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER|WAIT_KILLABLE_RECV)",
];

/// Fork a child that installs an allow-all filter with a notification
/// listener and `WAIT_KILLABLE_RECV`, as the FS-ONLY tier does, and exits.
/// Catches an older kernel and an existing listener in the filter chain
/// (EBUSY: vetto runs inside a sandbox that already uses one).
pub fn try_seccomp_listener_in_child() -> Result<(), ChildTestError> {
    let allow = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    run_in_child(&LISTENER_STEP_NAMES, || {
        // SAFETY: integer arguments only; affects only this short-lived child.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(StepFailed::at(0));
        }
        // The filter applies to this child only; the listener it returns
        // is closed as the child leaves.
        match seccomp_set_filter(&allow, flags) {
            Ok(_) => Ok(()),
            Err(e) => Err(StepFailed {
                step: 1,
                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
            }),
        }
    })
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`; with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER` the kernel returns the listener fd.
pub fn seccomp_set_filter(
    program: &[libc::sock_filter],
    flags: libc::c_ulong,
) -> io::Result<Option<OwnedFd>> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER != 0 {
        let fd = RawFd::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        // SAFETY: with NEW_LISTENER the kernel returned a fresh fd that we now own.
        Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
    } else {
        Ok(None)
    }
}

/// Fork, run `body` in the child (raw syscalls only), and bring its
/// outcome back through a pipe.
fn run_in_child(
    step_names: &[&'static str],
    body: impl Fn() -> Result<(), StepFailed>,
) -> Result<(), ChildTestError> {
    let (read_end, write_end): (OwnedFd, OwnedFd) = pipe().map_err(ChildTestError::Fork)?;
    // SAFETY: the child only makes raw syscalls (in `body`, `write`,
    // `_exit`): nothing that could deadlock on a lock held by another thread
    // of the parent at fork time.
    match unsafe { fork() }.map_err(ChildTestError::Fork)? {
        ForkResult::Child => {
            let code = match body() {
                Ok(()) => 0,
                Err(failed) => {
                    let mut msg = [0u8; 8];
                    msg[..4].copy_from_slice(&failed.step.to_le_bytes());
                    msg[4..].copy_from_slice(&failed.errno.to_le_bytes());
                    // SAFETY: the buffer is a live local array of 8 bytes.
                    unsafe { libc::write(write_end.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
                    1
                }
            };
            // SAFETY: ends the child at once, without running the parent's
            // atexit handlers or destructors.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(write_end);
            let mut msg = Vec::with_capacity(8);
            let read = std::fs::File::from(read_end).read_to_end(&mut msg);
            let status = loop {
                match waitpid(child, None) {
                    Err(Errno::EINTR) => continue,
                    other => break other,
                }
            };
            let status = status.map_err(|e| ChildTestError::Abnormal(format!("waitpid: {e}")))?;
            match status {
                WaitStatus::Exited(_, 0) => Ok(()),
                WaitStatus::Exited(_, _) => {
                    if read.is_err() || msg.len() != 8 {
                        return Err(ChildTestError::Abnormal(
                            "the child reported no result".into(),
                        ));
                    }
                    let step = u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]);
                    let errno = i32::from_le_bytes([msg[4], msg[5], msg[6], msg[7]]);
                    Err(ChildTestError::Step {
                        step: usize::try_from(step)
                            .ok()
                            .and_then(|i| step_names.get(i).copied())
                            .unwrap_or("an unknown step"),
                        errno: Errno::from_raw(errno),
                    })
                }
                WaitStatus::Signaled(_, sig, _) => Err(ChildTestError::Abnormal(format!(
                    "killed by {sig} (a seccomp filter that kills?)"
                ))),
                other => Err(ChildTestError::Abnormal(format!("{other:?}"))),
            }
        }
    }
}
