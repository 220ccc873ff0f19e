//! Hidden `vetto __probe ACTION [ARGS]`: perform ONE action that a sandbox
//! should stop and print one JSON line saying what the kernel answered.
//!
//! ```text
//! {"action":"io-uring","ok":false,"errno":1,"error":"EPERM"}
//! ```
//!
//! `ok` means the attempt succeeded (the attack worked). `errno`/`error`
//! let a test tell *blocked* (`EPERM`, `EACCES`) from *allowed but failed*
//! (`ENOENT`, `ECONNREFUSED`, `EBADF`, …), so a missing tool or a typo can
//! never be mistaken for containment. The integration tests run it inside
//! and outside the sandbox; `vetto verify` will reuse it. The attempts
//! themselves (raw syscalls) live in `sandbox::try_syscall`.
//!
//! Exit status: 0 when the attempt succeeded, 1 when it failed, 2 on a
//! usage error.

use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::sandbox::try_syscall as sys;

/// The argv[1] that selects the probe.
pub const COMMAND: &str = crate::hidden::Hidden::Probe.arg();

const USAGE: &str = "usage: vetto __probe ACTION [ARGS]
actions:
  io-uring | socket-inet | unshare-user | bpf | perf-event-open | keyctl
  tiocsti | x32-syscall | i386-syscall | landlock-abi | seccomp-notify
  clone3-newuser | openat2-create   (flags in memory, out of a filter's sight)
  mount-tmpfs [TARGET]          (default target: a path that does not exist)
  ptrace-attach PID | process-vm-read PID
  signal PID SIG                (SIG: a number or a name such as TERM)
  connect-tcp ADDR:PORT | udp-send ADDR:PORT
  connect-unix PATH | abstract-connect NAME
  read-environ PID|all MARKER   (does another process's environment hold MARKER?)";

/// Where the side-effect-free mount attempt aims.
const NO_SUCH_MOUNTPOINT: &str = "/nonexistent/vetto-probe";

/// The line sent to listeners, so they can tell a probe from a stray peer.
const HELLO: &[u8] = b"vetto-probe hello\n";

/// One probe action with its parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    IoUring,
    PtraceAttach(i32),
    ProcessVmRead(i32),
    SocketInet,
    ConnectTcp(SocketAddr),
    UdpSend(SocketAddr),
    ConnectUnix(PathBuf),
    Signal { pid: i32, sig: i32 },
    UnshareUser,
    Clone3NewUser,
    Openat2Create,
    MountTmpfs(PathBuf),
    Bpf,
    PerfEventOpen,
    Keyctl,
    Tiocsti,
    ReadEnviron { pid: Option<i32>, marker: String },
    X32Syscall,
    I386Syscall,
    AbstractConnect(String),
    LandlockAbi,
    SeccompNotify,
}

/// What one attempt did, as printed.
#[derive(Debug, Serialize)]
pub struct Report {
    pub action: &'static str,
    pub ok: bool,
    pub errno: Option<i32>,
    pub error: Option<String>,
    #[serde(flatten)]
    pub detail: Map<String, Value>,
}

impl Report {
    fn new(action: &'static str) -> Self {
        Report {
            action,
            ok: false,
            errno: None,
            error: None,
            detail: Map::new(),
        }
    }

    fn with<T>(
        mut self,
        result: io::Result<T>,
        detail: impl FnOnce(T, &mut Map<String, Value>),
    ) -> Self {
        match result {
            Ok(v) => {
                self.ok = true;
                detail(v, &mut self.detail);
            }
            Err(e) => self.fail(&e),
        }
        self
    }

    fn fail(&mut self, e: &io::Error) {
        self.ok = false;
        match e.raw_os_error() {
            Some(n) => {
                self.errno = Some(n);
                self.error = Some(sys::errno_name(n));
            }
            None => self.error = Some(e.to_string()),
        }
    }
}

/// If argv[1] is `__probe`, run the probe and return its exit status.
pub fn entry() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != COMMAND {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(main(&rest))
}

fn main(args: &[OsString]) -> ExitCode {
    let action = match parse(args) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("vetto __probe: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let report = perform(&action);
    match serde_json::to_string(&report) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("vetto __probe: {e}");
            return ExitCode::from(2);
        }
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Parse `ACTION [ARGS]`.
pub fn parse(args: &[OsString]) -> Result<Action, String> {
    let args: Vec<&str> = args
        .iter()
        .map(|a| {
            a.to_str()
                .ok_or_else(|| format!("argument {a:?} is not UTF-8"))
        })
        .collect::<Result<_, _>>()?;
    let (name, rest) = args.split_first().ok_or("missing ACTION")?;
    let arg = |i: usize, what: &str| -> Result<&str, String> {
        rest.get(i)
            .copied()
            .ok_or_else(|| format!("{name}: missing {what}"))
    };
    let pid = |i: usize| -> Result<i32, String> {
        let s = arg(i, "PID")?;
        s.parse().map_err(|_| format!("{name}: {s:?} is not a PID"))
    };
    let addr = |i: usize| -> Result<SocketAddr, String> {
        let s = arg(i, "ADDR:PORT")?;
        s.parse()
            .map_err(|_| format!("{name}: {s:?} is not ADDR:PORT"))
    };
    let wanted = match *name {
        "io-uring" | "socket-inet" | "unshare-user" | "bpf" | "perf-event-open" | "keyctl"
        | "tiocsti" | "x32-syscall" | "i386-syscall" | "landlock-abi" | "seccomp-notify"
        | "clone3-newuser" | "openat2-create" => 0,
        "mount-tmpfs" => rest.len().min(1),
        "ptrace-attach" | "process-vm-read" | "connect-tcp" | "udp-send" | "connect-unix"
        | "abstract-connect" => 1,
        "signal" | "read-environ" => 2,
        other => return Err(format!("unknown action {other:?}")),
    };
    if rest.len() > wanted {
        return Err(format!("{name}: unexpected argument {:?}", rest[wanted]));
    }
    Ok(match *name {
        "io-uring" => Action::IoUring,
        "socket-inet" => Action::SocketInet,
        "unshare-user" => Action::UnshareUser,
        "clone3-newuser" => Action::Clone3NewUser,
        "openat2-create" => Action::Openat2Create,
        "bpf" => Action::Bpf,
        "perf-event-open" => Action::PerfEventOpen,
        "keyctl" => Action::Keyctl,
        "tiocsti" => Action::Tiocsti,
        "x32-syscall" => Action::X32Syscall,
        "i386-syscall" => Action::I386Syscall,
        "landlock-abi" => Action::LandlockAbi,
        "seccomp-notify" => Action::SeccompNotify,
        "mount-tmpfs" => Action::MountTmpfs(PathBuf::from(
            rest.first().copied().unwrap_or(NO_SUCH_MOUNTPOINT),
        )),
        "ptrace-attach" => Action::PtraceAttach(pid(0)?),
        "process-vm-read" => Action::ProcessVmRead(pid(0)?),
        "connect-tcp" => Action::ConnectTcp(addr(0)?),
        "udp-send" => Action::UdpSend(addr(0)?),
        "connect-unix" => Action::ConnectUnix(PathBuf::from(arg(0, "PATH")?)),
        "abstract-connect" => Action::AbstractConnect(arg(0, "NAME")?.to_owned()),
        "signal" => Action::Signal {
            pid: pid(0)?,
            sig: parse_signal(arg(1, "SIG")?)
                .ok_or_else(|| format!("signal: unknown signal {:?}", rest[1]))?,
        },
        "read-environ" => Action::ReadEnviron {
            pid: match arg(0, "PID|all")? {
                "all" => None,
                _ => Some(pid(0)?),
            },
            marker: arg(1, "MARKER")?.to_owned(),
        },
        _ => return Err(format!("unknown action {name:?}")),
    })
}

/// `0`, `15`, `TERM`, `SIGTERM` (the common ones by name).
fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse() {
        return Some(n);
    }
    let name = s.strip_prefix("SIG").unwrap_or(s);
    // Linux numbers, identical on every architecture vetto supports.
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "CONT" => 18,
        "STOP" => 19,
        _ => return None,
    })
}

/// Make the attempt and describe the outcome.
pub fn perform(action: &Action) -> Report {
    match action {
        Action::IoUring => Report::new("io-uring").with(sys::io_uring_setup(), |(), _| {}),
        Action::PtraceAttach(pid) => {
            Report::new("ptrace-attach").with(sys::ptrace_seize(*pid), |(), _| {})
        }
        Action::ProcessVmRead(pid) => {
            // Aim at a mapped address when /proc tells us one; otherwise an
            // allowed read fails with EFAULT/ESRCH, still not EPERM.
            let addr = sys::first_readable_mapping(*pid).unwrap_or(0x1000);
            Report::new("process-vm-read").with(sys::process_vm_read(*pid, addr, 64), |n, d| {
                d.insert("bytes".into(), n.into());
            })
        }
        Action::SocketInet => Report::new("socket-inet").with(sys::socket_inet(), |(), _| {}),
        Action::ConnectTcp(addr) => {
            Report::new("connect-tcp").with(sys::connect_tcp(*addr, HELLO), |(), _| {})
        }
        Action::UdpSend(addr) => {
            Report::new("udp-send").with(sys::udp_send(*addr, HELLO), |(), _| {})
        }
        Action::ConnectUnix(path) => {
            Report::new("connect-unix").with(sys::connect_unix(path, HELLO), |reply, d| {
                d.insert("reply".into(), String::from_utf8_lossy(&reply).into());
            })
        }
        Action::AbstractConnect(name) => Report::new("abstract-connect").with(
            sys::connect_abstract(name.as_bytes(), HELLO),
            |reply, d| {
                d.insert("reply".into(), String::from_utf8_lossy(&reply).into());
            },
        ),
        Action::Signal { pid, sig } => {
            Report::new("signal").with(sys::signal(*pid, *sig), |(), _| {})
        }
        Action::UnshareUser => Report::new("unshare-user").with(sys::unshare_user(), |(), _| {}),
        Action::Clone3NewUser => {
            Report::new("clone3-newuser").with(sys::clone3_new_user(), |(), _| {})
        }
        Action::Openat2Create => {
            Report::new("openat2-create").with(sys::openat2_create(), |(), _| {})
        }
        Action::MountTmpfs(target) => {
            let mut r = Report::new("mount-tmpfs").with(sys::mount_tmpfs(target), |(), _| {});
            r.detail
                .insert("target".into(), target.display().to_string().into());
            r
        }
        Action::Bpf => Report::new("bpf").with(sys::bpf(), |(), _| {}),
        Action::PerfEventOpen => {
            Report::new("perf-event-open").with(sys::perf_event_open(), |(), _| {})
        }
        Action::Keyctl => Report::new("keyctl").with(sys::keyctl(), |serial, d| {
            d.insert("serial".into(), serial.into());
        }),
        Action::Tiocsti => Report::new("tiocsti").with(sys::tiocsti(), |(), _| {}),
        Action::ReadEnviron {
            pid: Some(pid),
            marker,
        } => Report::new("read-environ").with(sys::read_environ(*pid), |env, d| {
            d.insert("found".into(), contains(&env, marker.as_bytes()).into());
        }),
        Action::ReadEnviron { pid: None, marker } => scan_environ(marker),
        Action::X32Syscall => Report::new("x32-syscall").with(sys::x32_socket(), |(), _| {}),
        Action::I386Syscall => Report::new("i386-syscall").with(sys::i386_socket(), |(), _| {}),
        Action::LandlockAbi => Report::new("landlock-abi").with(sys::landlock_abi(), |abi, d| {
            d.insert("abi".into(), abi.into());
        }),
        Action::SeccompNotify => {
            Report::new("seccomp-notify").with(sys::seccomp_notify(), |(), _| {})
        }
    }
}

/// Read every other process's environment; `ok` when MARKER was found in
/// any (the attack worked), with the counts of readable and refused reads.
fn scan_environ(marker: &str) -> Report {
    let mut report = Report::new("read-environ");
    let pids = match sys::list_pids() {
        Ok(p) => p,
        Err(e) => {
            report.fail(&e);
            return report;
        }
    };
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let (mut found, mut readable, mut refused) = (Vec::new(), 0u32, 0u32);
    let mut last_err = None;
    for pid in pids.into_iter().filter(|&p| p != me) {
        match sys::read_environ(pid) {
            Ok(env) => {
                readable += 1;
                if contains(&env, marker.as_bytes()) {
                    found.push(Value::from(pid));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                refused += 1;
                last_err = Some(e);
            }
        }
    }
    report.ok = !found.is_empty();
    if !report.ok {
        if let Some(e) = &last_err {
            report.fail(e);
        }
    }
    report.detail.insert("found_in".into(), found.into());
    report.detail.insert("readable".into(), readable.into());
    report.detail.insert("refused".into(), refused.into());
    report
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Action, String> {
        let v: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse(&v)
    }

    #[test]
    fn parses_every_documented_action() {
        assert_eq!(p(&["io-uring"]), Ok(Action::IoUring));
        assert_eq!(p(&["clone3-newuser"]), Ok(Action::Clone3NewUser));
        assert_eq!(p(&["openat2-create"]), Ok(Action::Openat2Create));
        assert_eq!(
            p(&["signal", "12", "TERM"]),
            Ok(Action::Signal { pid: 12, sig: 15 })
        );
        assert_eq!(
            p(&["signal", "12", "0"]),
            Ok(Action::Signal { pid: 12, sig: 0 })
        );
        assert_eq!(
            p(&["read-environ", "all", "X"]),
            Ok(Action::ReadEnviron {
                pid: None,
                marker: "X".into()
            })
        );
        assert_eq!(
            p(&["mount-tmpfs"]),
            Ok(Action::MountTmpfs(PathBuf::from(NO_SUCH_MOUNTPOINT)))
        );
        assert!(matches!(
            p(&["connect-tcp", "127.0.0.1:9"]),
            Ok(Action::ConnectTcp(_))
        ));
    }

    #[test]
    fn rejects_bad_usage() {
        assert!(p(&[]).is_err());
        assert!(p(&["nope"]).is_err());
        assert!(p(&["ptrace-attach"]).is_err());
        assert!(p(&["ptrace-attach", "x"]).is_err());
        assert!(p(&["io-uring", "extra"]).is_err());
        assert!(p(&["signal", "1", "BOGUS"]).is_err());
    }

    #[test]
    fn report_is_one_json_object_with_the_documented_keys() {
        let mut r = Report::new("io-uring");
        r.errno = Some(1);
        r.error = Some("EPERM".into());
        let line = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            line,
            r#"{"action":"io-uring","ok":false,"errno":1,"error":"EPERM"}"#
        );

        let mut r = Report::new("read-environ");
        r.ok = true;
        r.detail.insert("found".into(), true.into());
        let line = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            line,
            r#"{"action":"read-environ","ok":true,"errno":null,"error":null,"found":true}"#
        );
    }

    #[test]
    fn marker_search() {
        assert!(contains(b"A=1\0TOKEN=abc\0", b"abc"));
        assert!(!contains(b"A=1\0", b"abc"));
        assert!(!contains(b"A=1\0", b""));
    }
}
