//! Test support: start `command` with a seccomp filter that notifies the
//! given calls (opens only with `O_CREAT`) and allows everything else, and
//! return the listener. Test-only in spirit; public so integration tests
//! and benchmarks can use it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use super::{Call, NATIVE_ARCH};

const fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The BPF program: native arch only, notify `calls`, allow the rest.
pub fn filter(calls: &[Call]) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let mut prog = vec![
        stmt(LD_W_ABS, 4),
        jump(JEQ, NATIVE_ARCH, 1, 0),
        stmt(RET, libc::SECCOMP_RET_KILL_PROCESS),
    ];
    for &call in calls {
        let Some(nr) = call.nr() else { continue };
        let flags_arg = match call {
            Call::Open => Some(1u32),
            Call::Openat => Some(2),
            _ => None,
        };
        prog.push(stmt(LD_W_ABS, 0));
        match flags_arg {
            None => {
                prog.push(jump(JEQ, nr as u32, 0, 1));
                prog.push(stmt(RET, libc::SECCOMP_RET_USER_NOTIF));
            }
            Some(index) => {
                prog.push(jump(JEQ, nr as u32, 0, 4));
                // Low 32 bits of args[index] (little-endian layout).
                prog.push(stmt(LD_W_ABS, 16 + 8 * index));
                prog.push(jump(JSET, libc::O_CREAT as u32, 0, 1));
                prog.push(stmt(RET, libc::SECCOMP_RET_USER_NOTIF));
                prog.push(stmt(RET, libc::SECCOMP_RET_ALLOW));
            }
        }
    }
    prog.push(stmt(RET, libc::SECCOMP_RET_ALLOW));
    prog
}

/// Spawn `command` under a notify filter for `calls`; return the child
/// and the listener.
pub fn spawn_notified(command: &mut Command, calls: &[Call]) -> io::Result<(Child, OwnedFd)> {
    let prog = filter(calls);
    let mut pair = [0; 2];
    // SAFETY: out-array of two ints.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors that we now own.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    let theirs_raw = theirs.as_raw_fd();
    // SAFETY: the closure only makes async-signal-safe system calls on
    // data prepared before fork; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let listener = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
                    | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
                &fprog as *const libc::sock_fprog,
            );
            if listener < 0 {
                return Err(io::Error::last_os_error());
            }
            let listener = listener as libc::c_int;
            let mut space = [0u64; 4];
            let mut byte = 0u8;
            let mut iov = libc::iovec {
                iov_base: (&mut byte as *mut u8).cast(),
                iov_len: 1,
            };
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = space.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(size_of_int()) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of_int()) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), listener);
            if libc::sendmsg(theirs_raw, &msg, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            libc::close(listener);
            Ok(())
        });
    }
    let child = command.spawn()?;
    drop(theirs);
    let listener = recv_fd(&ours)?;
    Ok((child, listener))
}

/// Restrict the child with Landlock before its filter is installed:
/// everything under `read` readable, everything under `full` writable,
/// nothing else. Built before fork; the child only calls restrict_self.
pub fn landlock_pre_exec(
    command: &mut Command,
    read: &[&std::path::Path],
    full: &[&std::path::Path],
) -> io::Result<()> {
    use landlock::{
        ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, path_beneath_rules,
    };
    let abi = ABI::V5;
    let to_io = |e: landlock::RulesetError| io::Error::other(e.to_string());
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(to_io)?
        .create()
        .map_err(to_io)?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(abi)))
        .map_err(to_io)?
        .add_rules(path_beneath_rules(full, AccessFs::from_all(abi)))
        .map_err(to_io)?;
    let mut slot = Some(ruleset);
    // SAFETY: the closure takes a prepared ruleset and makes two system
    // calls (no_new_privs, landlock_restrict_self); it allocates nothing.
    unsafe {
        command.pre_exec(move || match slot.take() {
            Some(ruleset) => match ruleset.restrict_self() {
                Ok(_) => Ok(()),
                Err(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
            },
            None => Ok(()),
        });
    }
    Ok(())
}

/// What [`race_connect`] saw.
#[derive(Debug, Clone, Copy)]
pub struct RaceReport {
    pub tries: u64,
    pub connected: u64,
}

/// `raw` as the native-endian words of a racing buffer (`raw` is
/// `8 * N` bytes).
fn words<const N: usize>(raw: &[u8]) -> [u64; N] {
    std::array::from_fn(|i| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&raw[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    })
}

/// A buffer the kernel reads while another thread flips it between two
/// contents, until dropped. Leaked: a call still in the kernel may read
/// it after the race.
struct Flipping<const N: usize> {
    /// The kernel and the flipper see the same words; atomics make the
    /// flipping well-defined on our side.
    shared: &'static [std::sync::atomic::AtomicU64; N],
    stop: &'static std::sync::atomic::AtomicBool,
    flipper: Option<std::thread::JoinHandle<()>>,
}

impl<const N: usize> Flipping<N> {
    fn start(first: [u64; N], second: [u64; N]) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let shared: &'static [AtomicU64; N] =
            Box::leak(Box::new(std::array::from_fn(|i| AtomicU64::new(first[i]))));
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let flipper = std::thread::spawn(move || {
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                let src = if flip { &first } else { &second };
                for (w, v) in shared.iter().zip(src.iter()) {
                    w.store(*v, Ordering::Relaxed);
                }
                flip = !flip;
            }
        });
        Flipping {
            shared,
            stop,
            flipper: Some(flipper),
        }
    }

    fn as_ptr(&self) -> *const libc::c_void {
        self.shared.as_ptr().cast()
    }
}

impl<const N: usize> Drop for Flipping<N> {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(flipper) = self.flipper.take() {
            let _ = flipper.join();
        }
    }
}

/// Connect again and again to the address in one shared buffer while
/// another thread flips it between `allowed` and `denied`, for `secs`.
/// Run inside a notified job; the denied listener must see nothing.
pub fn race_connect(
    allowed: &std::path::Path,
    denied: &std::path::Path,
    secs: f64,
) -> io::Result<RaceReport> {
    use std::os::unix::ffi::OsStrExt;
    use std::time::{Duration, Instant};

    fn encode(path: &std::path::Path) -> io::Result<[u64; 14]> {
        let bytes = path.as_os_str().as_bytes();
        let mut raw = [0u8; 112];
        if bytes.len() + 3 > raw.len() {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        raw[..2].copy_from_slice(&(libc::AF_UNIX as libc::sa_family_t).to_ne_bytes());
        raw[2..2 + bytes.len()].copy_from_slice(bytes);
        Ok(words(&raw))
    }

    let buffer = Flipping::start(encode(allowed)?, encode(denied)?);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut report = RaceReport {
        tries: 0,
        connected: 0,
    };
    while Instant::now() < deadline {
        // SAFETY: a fresh socket; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and ours.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the buffer is 112 valid bytes for the program's life;
        // the kernel only reads them.
        let ret = unsafe {
            libc::connect(
                sock.as_raw_fd(),
                buffer.as_ptr().cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        report.tries += 1;
        if ret == 0 {
            report.connected += 1;
        }
    }
    Ok(report)
}

/// Rename the name in a shared buffer (flipped by another thread
/// between `plain` and `protected`) to `parking` and back, for `secs`.
/// Run inside a notified job whose cwd holds `plain`: `protected` must
/// never move.
pub fn race_rename(plain: &str, protected: &str, parking: &str, secs: f64) -> io::Result<u64> {
    use std::time::{Duration, Instant};

    fn encode(name: &str) -> io::Result<[u64; 8]> {
        let mut raw = [0u8; 64];
        if name.len() + 1 > raw.len() {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        raw[..name.len()].copy_from_slice(name.as_bytes());
        Ok(words(&raw))
    }
    let parking_c =
        std::ffi::CString::new(parking).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let plain_c =
        std::ffi::CString::new(plain).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let buffer = Flipping::start(encode(plain)?, encode(protected)?);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tries = 0;
    while Instant::now() < deadline {
        // SAFETY: the buffer holds a NUL-terminated name (each variant
        // ends in zero words) for the program's life; the kernel reads it.
        unsafe {
            if libc::rename(buffer.as_ptr().cast(), parking_c.as_ptr()) == 0 {
                libc::rename(parking_c.as_ptr(), plain_c.as_ptr());
            }
        }
        tries += 1;
    }
    Ok(tries)
}

const fn size_of_int() -> u32 {
    std::mem::size_of::<libc::c_int>() as u32
}

fn recv_fd(sock: &OwnedFd) -> io::Result<OwnedFd> {
    let mut space = [0u64; 4];
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: an all-zero msghdr is valid; pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of_int()) } as _;
    // SAFETY: msg points at live buffers.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: msg was filled by the kernel; CMSG_FIRSTHDR checks bounds.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null() {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    // SAFETY: non-null header inside our control buffer.
    let fd = unsafe {
        if (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>())
    };
    // SAFETY: the kernel installed this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
