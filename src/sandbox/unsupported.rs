//! The Linux-and-macOS entries on every other system: Windows, whose
//! AppContainer launch is not a stage (`sandbox::windows`,
//! `session::appcontainer`), and systems with no backend. Every entry
//! refuses in words, so the crate builds and `vetto policy`, `vetto
//! report` and `vetto doctor` work there.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::sys::os::OwnedFd;

use crate::plan::Plan;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("vetto has no sandbox backend for this operating system yet")]
    Unsupported,
}

impl SetupError {
    /// The exit status the contract gives this failure: a refusal.
    pub fn exit_status(&self) -> u8 {
        crate::exit::REFUSED
    }
}

/// Never constructed here: no sandbox can be started.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
    pub listener: Option<OwnedFd>,
    pub secrets: Option<crate::sandbox::SecretFeed>,
    pub nproc_limit: Option<crate::sandbox::NprocLimit>,
    pub egress: crate::sandbox::EgressSockets,
}

impl Spawned {
    pub fn ended(&mut self) -> Option<crate::sandbox::JobEnd> {
        None
    }

    pub fn escaped(&mut self) -> Vec<crate::sandbox::EscapedProcess> {
        Vec::new()
    }

    pub fn memory_oom_killed(&self) -> bool {
        false
    }
}

/// Never constructed here: [`start_stage`] refuses.
#[derive(Debug)]
pub struct Stage {
    _never: (),
}

impl Stage {
    pub fn take_output(&mut self) -> Option<crate::sandbox::JobOutput> {
        None
    }

    pub fn fits(&self, _plan: &Plan) -> bool {
        true
    }

    pub fn respawn(self) -> Result<Stage, SetupError> {
        Err(SetupError::Unsupported)
    }

    pub fn launch(self, _plan: &Plan, _command: &[OsString]) -> Result<Spawned, SetupError> {
        Err(SetupError::Unsupported)
    }
}

pub fn start_stage(
    _output: crate::sandbox::StageOutput,
    _early: Option<crate::sandbox::EarlyNamespaces>,
) -> Result<Stage, SetupError> {
    Err(SetupError::Unsupported)
}

/// Seccomp user notification does not exist here.
pub mod notify {
    /// The sockets it would name are never handed out here.
    pub fn local_inet_addr(
        _sock: crate::sys::os::BorrowedFd<'_>,
    ) -> std::io::Result<std::net::SocketAddr> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

pub mod dead_net {
    /// No network namespaces here: UDP sockets stay refused.
    #[derive(Debug)]
    pub struct DeadNet {
        // Never made here; the Linux one owns its helper's channel.
        _channel: crate::sys::os::OwnedFd,
    }
    pub type Started = (DeadNet, Vec<std::net::UdpSocket>);
    impl DeadNet {
        pub fn start() -> std::io::Result<Started> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }
        pub fn socket(&self, _v6: bool, _stream: bool) -> std::io::Result<crate::sys::os::OwnedFd> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }
        pub fn identity(&self) -> Identity {
            Identity
        }
        pub fn listener(&self, _ip: std::net::IpAddr) -> std::io::Result<std::net::TcpListener> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }
        pub fn join(_pid: u32) -> std::io::Result<DeadNet> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }
    }
    pub fn host_stream_socket(_v6: bool) -> std::io::Result<crate::sys::os::OwnedFd> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
    pub fn connect_stream(
        _sock: crate::sys::os::OwnedFd,
        _to: std::net::SocketAddr,
    ) -> std::io::Result<std::net::TcpStream> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
    /// No namespace, so no socket is of one.
    #[derive(Debug, Clone, Copy)]
    pub struct Identity;
    impl Identity {
        pub fn holds(&self, _sock: crate::sys::os::BorrowedFd<'_>) -> bool {
            false
        }
        pub fn proc_net(&self) -> Option<std::path::PathBuf> {
            None
        }
    }
    pub fn entry() -> Option<std::process::ExitCode> {
        None
    }
    pub fn want_destinations(_: &std::net::UdpSocket) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
    pub fn wake_receivers(_: &std::net::UdpSocket) {}
    /// A connect wakes the blocking accept (the listener is on a local
    /// address here).
    pub fn wake_acceptor(listener: &std::net::TcpListener) {
        if let Ok(at) = listener.local_addr() {
            let _ = std::net::TcpStream::connect_timeout(&at, std::time::Duration::from_secs(1));
        }
    }
    pub fn recv_query(
        _: &std::net::UdpSocket,
        _: &mut [u8],
    ) -> std::io::Result<(usize, std::net::SocketAddr, Option<std::net::IpAddr>)> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
    pub fn send_answer(
        _: &std::net::UdpSocket,
        _: &[u8],
        _: std::net::SocketAddr,
        _: Option<std::net::IpAddr>,
    ) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

/// No filesystem is trusted to keep change times honest here.
pub mod fs_kind {
    pub fn honest_change_times(_path: &std::path::Path) -> bool {
        false
    }
}

/// No terminal is granted to a job that cannot run here.
pub mod terminal {
    pub fn own_terminals() -> Vec<std::path::PathBuf> {
        Vec::new()
    }
}

/// No notification server: nothing to answer.
pub mod notify_server {
    use crate::sys::os::OwnedFd;
    use std::io;
    use std::sync::mpsc::Sender;

    use crate::plan::fs::NotifyPlan;
    use crate::plan::notify::NotifyEvent;

    #[derive(Debug)]
    pub struct NotifyServer {
        _never: (),
    }

    /// What the job created in shared directories: nothing, here.
    #[derive(Debug, Clone, Default)]
    pub struct SharedCreations {
        pub dirs: Vec<(
            std::path::PathBuf,
            std::collections::HashSet<std::ffi::OsString>,
        )>,
        pub unkept: u64,
    }

    /// Whether the job changed a directory entry: never known here.
    #[derive(Debug, Clone, Default)]
    pub struct EntryChanges;

    impl EntryChanges {
        pub fn none(&self) -> bool {
            false
        }

        pub fn checked(&self) -> u64 {
            0
        }
    }

    impl NotifyServer {
        pub fn shared_creations(&self) -> std::sync::Arc<std::sync::Mutex<SharedCreations>> {
            std::sync::Arc::default()
        }

        pub fn entry_changes(&self) -> EntryChanges {
            EntryChanges
        }

        pub fn join(self) -> io::Result<()> {
            Ok(())
        }
    }

    pub fn serve(
        _listener: OwnedFd,
        _plan: &NotifyPlan,
        _shares: Option<std::sync::Arc<super::memory::Shares>>,
        _egress: Option<std::sync::Arc<dyn crate::plan::notify::EgressBroker>>,
        _events: Sender<NotifyEvent>,
    ) -> io::Result<NotifyServer> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no seccomp user notification on this operating system",
        ))
    }
}

/// `--max-memory` shares: there is never a sandbox here to share among.
/// No `splice(2)`: the proxy copies through user space.
pub mod splice {
    use crate::sys::os::BorrowedFd;
    use std::io;

    #[derive(Debug)]
    pub struct Pipe {
        _never: (),
    }

    impl Pipe {
        pub fn new() -> io::Result<Pipe> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn fill_from(&self, _src: BorrowedFd<'_>, _max: usize) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn drain_to(&self, _dst: BorrowedFd<'_>, _len: usize) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    pub fn shutdown_write(_fd: BorrowedFd<'_>) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

pub mod memory {
    #[derive(Debug)]
    pub struct Shares {
        _never: (),
    }

    impl Shares {
        pub fn new(_limit: u64, _fork_floor: u64) -> Shares {
            Shares { _never: () }
        }
        pub fn rebalance(&self, _pids: &[i32]) {}
    }

    pub fn job_processes(_stage: i32, _full: bool) -> Vec<i32> {
        Vec::new()
    }

    pub fn held_bytes(_pid: i32) -> u64 {
        0
    }
}

/// Process control the supervisor needs; here there is never a sandbox to
/// control, so these answer "nothing".
pub mod process {
    use std::time::Duration;

    pub use crate::sandbox::ProcessFacts;

    /// A signal taken from the pending set.
    #[derive(Debug, Clone, Copy)]
    pub struct Caught {
        pub signo: i32,
    }

    impl Caught {
        pub fn from_user(&self) -> bool {
            false
        }
    }

    #[derive(Debug)]
    pub struct SignalWaiter;

    impl SignalWaiter {
        pub fn block(_signals: &[crate::sys::os::Signal]) -> crate::sys::os::Result<Self> {
            Ok(SignalWaiter)
        }

        pub fn wait(&self, timeout: Duration) -> Option<Caught> {
            std::thread::sleep(timeout);
            None
        }
    }

    pub fn harden_supervisor() -> crate::sys::os::Result<()> {
        Ok(())
    }

    pub fn try_wait(_pid: i32) -> Option<crate::sys::os::WaitStatus> {
        None
    }

    pub fn reap_orphans(_keep: i32) {}

    pub fn send(_pid: i32, _sig: crate::sys::os::Signal) {}

    pub fn kill_all_descendants() {}

    pub fn describe(_tid: i32) -> ProcessFacts {
        ProcessFacts::default()
    }

    pub fn descendants(_pid: u32) -> Vec<i32> {
        Vec::new()
    }

    pub fn rss_bytes(_pid: i32) -> u64 {
        0
    }

    pub fn cpu_ms(_pid: i32) -> (u64, u64) {
        (0, 0)
    }

    pub fn reaped_children_cpu_ms() -> (u64, u64) {
        (0, 0)
    }

    pub fn tasks_of_descendants() -> u64 {
        0
    }

    pub fn tasks_of_uid(_uid: u32) -> u64 {
        0
    }

    pub fn cmdline(_pid: i32) -> Vec<String> {
        Vec::new()
    }
}

pub fn stage_entry() -> Option<ExitCode> {
    None
}

/// The clock file change times are stamped from: the ordinary realtime
/// clock (no coarse variant here), as (seconds, nanoseconds).
pub fn ctime_clock_now() -> (i64, i64) {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        ),
        Err(_) => (0, 0),
    }
}

/// `vetto verify`'s host-side helpers: nothing to build without a backend.
pub mod verify_host {
    use crate::sys::os::UnixListener;
    use std::io;

    pub fn bind_abstract(_name: &[u8]) -> io::Result<UnixListener> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    pub fn kill_process(_pid: i32) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    pub fn environ_range(_pid: u32) -> io::Result<(usize, usize)> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    pub fn read_remote(_pid: i32, _addr: usize, _len: usize) -> io::Result<Vec<u8>> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// The probe's attempts: nothing to attempt without a backend.
pub mod try_syscall {
    use std::io;
    use std::net::SocketAddr;
    use std::path::Path;

    fn unsupported<T>() -> io::Result<T> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    pub fn errno_name(errno: i32) -> String {
        format!("errno {errno}")
    }
    pub fn io_uring_setup() -> io::Result<()> {
        unsupported()
    }
    pub fn ptrace_seize(_pid: i32) -> io::Result<()> {
        unsupported()
    }
    pub fn process_vm_read(_pid: i32, _addr: usize, _len: usize) -> io::Result<usize> {
        unsupported()
    }
    pub fn socket_inet() -> io::Result<()> {
        unsupported()
    }
    pub fn connect_tcp(_addr: SocketAddr, _line: &[u8]) -> io::Result<()> {
        unsupported()
    }
    pub fn udp_send(_addr: SocketAddr, _payload: &[u8]) -> io::Result<()> {
        unsupported()
    }
    pub fn connect_unix(_path: &Path, _line: &[u8]) -> io::Result<Vec<u8>> {
        unsupported()
    }
    pub fn connect_abstract(_name: &[u8], _line: &[u8]) -> io::Result<Vec<u8>> {
        unsupported()
    }
    pub fn signal(_pid: i32, _sig: i32) -> io::Result<()> {
        unsupported()
    }
    pub fn unshare_user() -> io::Result<()> {
        unsupported()
    }
    pub fn clone3_new_user() -> io::Result<()> {
        unsupported()
    }
    pub fn openat2_create() -> io::Result<()> {
        unsupported()
    }
    pub fn mount_tmpfs(_target: &Path) -> io::Result<()> {
        unsupported()
    }
    pub fn bpf() -> io::Result<()> {
        unsupported()
    }
    pub fn perf_event_open() -> io::Result<()> {
        unsupported()
    }
    pub fn keyctl() -> io::Result<i64> {
        unsupported()
    }
    pub fn tiocsti() -> io::Result<()> {
        unsupported()
    }
    pub fn read_environ(_pid: i32) -> io::Result<Vec<u8>> {
        unsupported()
    }
    pub fn list_pids() -> io::Result<Vec<i32>> {
        unsupported()
    }
    pub fn first_readable_mapping(_pid: i32) -> io::Result<usize> {
        unsupported()
    }
    pub fn x32_socket() -> io::Result<()> {
        unsupported()
    }
    pub fn i386_socket() -> io::Result<()> {
        unsupported()
    }
    pub fn landlock_abi() -> io::Result<i64> {
        unsupported()
    }
    pub fn seccomp_notify() -> io::Result<()> {
        unsupported()
    }
}
