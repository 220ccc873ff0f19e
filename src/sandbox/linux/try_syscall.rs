//! One attempt per function, for `vetto __probe` (and later `vetto verify`).
//!
//! Each function makes ONE kernel request that a sandbox should refuse and
//! returns its raw result. Where the action itself would have side effects
//! outside the probe, the arguments are chosen so that an *allowed* call fails
//! harmlessly with a distinctive errno (`EBADF`, `EFAULT`, `ENOENT`) while a
//! *blocked* call fails with `EPERM`/`EACCES` before the kernel looks at them
//! (the bubblewrap `try-syscall` technique). Nothing here decides anything.

use std::ffi::CString;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long a network attempt may wait; a blocked or refused attempt
/// answers at once, so this only bounds a misbehaving peer.
const NET_TIMEOUT: Duration = Duration::from_secs(5);

/// x32 syscalls are native x86_64 numbers with this bit set.
const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_int(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Take ownership of a descriptor a syscall just returned, so it is closed.
fn own_fd(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: `fd` was just returned by a successful syscall that creates a
    // new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The symbolic name of an errno value (`EPERM`), as the kernel headers spell it.
pub fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

/// `io_uring_setup(1, &params)`: io_uring submissions bypass seccomp entirely.
pub fn io_uring_setup() -> io::Result<()> {
    // struct io_uring_params is 120 bytes; u64 keeps it 8-aligned.
    let mut params = [0u64; 15];
    // SAFETY: `params` is a zeroed, writable buffer of the size of struct
    // io_uring_params; the kernel reads and writes at most that much.
    let fd = check(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) })?;
    drop(own_fd(fd)?);
    Ok(())
}

/// `ptrace(PTRACE_SEIZE, pid)`: attaches without stopping the tracee; the
/// kernel detaches when the probe exits.
pub fn ptrace_seize(pid: i32) -> io::Result<()> {
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_SEIZE takes no pointers (addr and data are 0).
    check(unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, null, null) })?;
    Ok(())
}

/// `process_vm_readv` of `len` bytes at `addr` in `pid`; the number of bytes read.
pub fn process_vm_read(pid: i32, addr: usize, len: usize) -> io::Result<usize> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` describes `buf`, which is writable and outlives the
    // call; `remote` is only interpreted in the other process.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let n = check(n as libc::c_long)?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// `socket(AF_INET, SOCK_STREAM, 0)`, closed at once.
pub fn socket_inet() -> io::Result<()> {
    // SAFETY: socket(2) takes no pointers.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
    })?;
    drop(own_fd(fd.into())?);
    Ok(())
}

/// TCP connect and send one line, so a listener sees evidence.
pub fn connect_tcp(addr: SocketAddr, line: &[u8]) -> io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, NET_TIMEOUT)?;
    s.write_all(line)?;
    Ok(())
}

/// One UDP datagram to `addr`.
pub fn udp_send(addr: SocketAddr, payload: &[u8]) -> io::Result<()> {
    let bind: SocketAddr = if addr.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let s = UdpSocket::bind(bind)?;
    s.send_to(payload, addr)?;
    Ok(())
}

/// Connect to a pathname unix socket, send a line and read what comes back
/// (an ssh-agent stand-in answers; a real agent would hand out signatures).
pub fn connect_unix(path: &Path, line: &[u8]) -> io::Result<Vec<u8>> {
    let mut s = UnixStream::connect(path)?;
    talk(&mut s, line)
}

/// Connect to an abstract unix socket (`@name`), send a line, read the reply.
pub fn connect_abstract(name: &[u8], line: &[u8]) -> io::Result<Vec<u8>> {
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    let mut s = UnixStream::connect_addr(&addr)?;
    talk(&mut s, line)
}

fn talk(s: &mut UnixStream, line: &[u8]) -> io::Result<Vec<u8>> {
    s.set_read_timeout(Some(NET_TIMEOUT))?;
    s.write_all(line)?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply)?;
    Ok(reply)
}

/// `kill(pid, sig)`.
pub fn signal(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) takes no pointers.
    check_int(unsafe { libc::kill(pid, sig) })?;
    Ok(())
}

/// `unshare(CLONE_NEWUSER)`: the probe process alone moves; it exits next.
pub fn unshare_user() -> io::Result<()> {
    // SAFETY: unshare(2) takes no pointers and only changes this process.
    check_int(unsafe { libc::unshare(libc::CLONE_NEWUSER) })?;
    Ok(())
}

/// `clone3` asking for a new user namespace. Its flags are in memory, where
/// a seccomp filter cannot read them, so the filter's check on `clone`'s
/// flags would not see `CLONE_NEWUSER` here. Allowed, the child exits at
/// once and is reaped; blocked, nothing is made.
pub fn clone3_new_user() -> io::Result<()> {
    /// `struct clone_args` (`CLONE_ARGS_SIZE_VER0`: the first eight fields).
    #[repr(C)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
    }
    let args = CloneArgs {
        flags: libc::CLONE_NEWUSER as u64,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
    };
    // SAFETY: `args` is a readable `clone_args` of the size passed. Without
    // CLONE_VM the child runs on a copy of this process and only calls
    // `_exit`, which is async-signal-safe.
    let pid = check(unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    })?;
    if pid == 0 {
        // SAFETY: the child ends here, running nothing of the parent's.
        unsafe { libc::_exit(0) }
    }
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    let mut status = 0;
    // SAFETY: `status` is a writable int; `pid` is our own child.
    check_int(unsafe { libc::waitpid(pid, &mut status, 0) })?;
    Ok(())
}

/// `openat2(AT_FDCWD, "/nonexistent/vetto-probe", {O_CREAT|O_WRONLY})`:
/// its flags are in memory too, where a filter that notifies `O_CREAT`
/// cannot see them. Allowed, it fails with `ENOENT` and makes nothing.
pub fn openat2_create() -> io::Result<()> {
    /// `struct open_how`.
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC) as u64,
        mode: 0o600,
        resolve: 0,
    };
    let path = c"/nonexistent/vetto-probe";
    // SAFETY: `path` is a NUL-terminated string and `how` a readable
    // `open_how` of the size passed; both outlive the call.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })?;
    drop(own_fd(fd)?);
    Ok(())
}

/// `mount("vetto-probe", target, "tmpfs")`. Aim it at a path that does not
/// exist: the kernel resolves the target before checking privileges, so an
/// allowed call fails with `ENOENT` and changes nothing, while a call that
/// seccomp blocks fails with `EPERM`.
pub fn mount_tmpfs(target: &Path) -> io::Result<()> {
    let source = c"vetto-probe";
    let fstype = c"tmpfs";
    let target = CString::new(target.as_os_str().as_bytes())?;
    // SAFETY: all three strings are NUL-terminated and live across the
    // call; `data` is NULL, which tmpfs accepts.
    check_int(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    })?;
    Ok(())
}

/// `bpf(BPF_OBJ_GET_INFO_BY_FD, {bpf_fd = -1})`: needs no capability, so
/// an allowed call fails with `EBADF`; a blocked one with `EPERM`.
pub fn bpf() -> io::Result<()> {
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    // union bpf_attr, info member: bpf_fd u32, info_len u32, info u64.
    let attr: [u32; 4] = [u32::MAX, 0, 0, 0];
    // SAFETY: `attr` is a readable 16-byte buffer and its size is passed.
    check(unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    })?;
    Ok(())
}

/// `perf_event_open(NULL, 0, -1, -1, 0)`: an allowed call fails with
/// `EFAULT` (the attribute pointer), a blocked one with `EPERM`.
pub fn perf_event_open() -> io::Result<()> {
    // SAFETY: a NULL attribute pointer is rejected by the kernel with EFAULT;
    // nothing is read from or written to this process.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::null::<libc::c_void>(),
            0,
            -1,
            -1,
            0,
        )
    })?;
    drop(own_fd(fd)?);
    Ok(())
}

/// `keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)`: read-only;
/// returns the keyring's serial.
pub fn keyctl() -> io::Result<i64> {
    const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
    const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;
    // SAFETY: this keyctl operation takes no pointers.
    let id = check(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_SESSION_KEYRING,
            0,
        )
    })?;
    Ok(id)
}

/// `ioctl(-1, TIOCSTI, "x")`: an allowed call fails with `EBADF` and pushes
/// nothing into any terminal; a blocked one fails with `EPERM`.
pub fn tiocsti() -> io::Result<()> {
    let byte: libc::c_char = b'x' as libc::c_char;
    // SAFETY: `byte` is a readable char that outlives the call; fd -1 is
    // never a terminal, so nothing is injected even when allowed.
    check_int(unsafe { libc::ioctl(-1, libc::TIOCSTI, &byte) })?;
    Ok(())
}

/// The environment block of `pid` (`/proc/PID/environ`).
pub fn read_environ(pid: i32) -> io::Result<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ"))
}

/// Every process id visible in `/proc`.
pub fn list_pids() -> io::Result<Vec<i32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        if let Some(pid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// The start address of the first readable mapping of `pid`.
pub fn first_readable_mapping(pid: i32) -> io::Result<usize> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    maps.lines()
        .find_map(|line| {
            let (range, rest) = line.split_once(' ')?;
            if !rest.starts_with('r') {
                return None;
            }
            usize::from_str_radix(range.split_once('-')?.0, 16).ok()
        })
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// `socket(AF_INET, SOCK_STREAM)` through the x32 syscall number: a filter
/// that matches native numbers only would let it through on kernels with x32.
pub fn x32_socket() -> io::Result<()> {
    if !cfg!(target_arch = "x86_64") {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    // SAFETY: socket(2) takes no pointers, whatever ABI the number selects.
    let fd = check(unsafe {
        libc::syscall(
            X32_SYSCALL_BIT | libc::SYS_socket,
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    drop(own_fd(fd)?);
    Ok(())
}

/// `socket(AF_INET, SOCK_STREAM)` through the i386 ABI (`int 0x80`, call 359):
/// seccomp sees `AUDIT_ARCH_I386` and i386 numbers.
#[cfg(target_arch = "x86_64")]
pub fn i386_socket() -> io::Result<()> {
    const I386_SOCKET: i32 = 359;
    let ret: i32;
    // SAFETY: `int 0x80` with eax=socket takes only integer arguments
    // (ebx, ecx, edx). rbx is reserved by LLVM, so the first argument is
    // swapped in and out around the trap. The kernel preserves every other
    // register except those declared clobbered (r8-r11 on old kernels).
    unsafe {
        std::arch::asm!(
            "xchg {a}, rbx",
            "int 0x80",
            "xchg {a}, rbx",
            a = inout(reg) libc::AF_INET as u64 => _,
            inlateout("eax") I386_SOCKET => ret,
            in("ecx") libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            in("edx") 0,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret));
    }
    drop(own_fd(ret.into())?);
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
pub fn i386_socket() -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// The Landlock ABI version the kernel offers (0 when unavailable).
pub fn landlock_abi() -> io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute (NULL, 0).
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    match check(r) {
        Ok(v) => Ok(v),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EOPNOTSUPP)) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Can this kernel give a seccomp user-notification listener with
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (5.19+)? Installs an allow-all
/// filter on the calling process to find out, so call it only in a process
/// that is about to exit (the probe).
pub fn seccomp_notify() -> io::Result<()> {
    const SECCOMP_SET_MODE_FILTER: libc::c_long = 1;
    const SECCOMP_FILTER_FLAG_NEW_LISTENER: libc::c_long = 1 << 3;
    const SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: libc::c_long = 1 << 5;
    const BPF_RET_K: u16 = 0x06;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    let filter = [libc::sock_filter {
        code: BPF_RET_K,
        jt: 0,
        jf: 0,
        k: SECCOMP_RET_ALLOW,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
    // SAFETY: `prog` points at `filter`, both alive across the call; the
    // kernel copies the program. The filter allows every syscall.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
            &prog,
        )
    })?;
    drop(own_fd(fd)?);
    Ok(())
}
