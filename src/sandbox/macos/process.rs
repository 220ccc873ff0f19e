//! Process control the supervisor needs, from libproc (`proc_listallpids`,
//! `proc_listchildpids`, `proc_pidinfo`, `proc_pidpath`): macOS has no
//! /proc and no subreaper. The job is its own process group (the stage's
//! pid); the end of a session kills that group, every descendant of vetto
//! and every process kqueue saw the tree fork ([`super::tree`]), until
//! none is left.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

pub use crate::sandbox::ProcessFacts;

/// The job's process group (0: none yet).
static JOB_GROUP: AtomicI32 = AtomicI32::new(0);
/// What the end-of-session kill found still running.
static ESCAPED: Mutex<Vec<crate::sandbox::EscapedProcess>> = Mutex::new(Vec::new());
/// Most processes listed at once.
const MAX_PIDS: usize = 1 << 16;
/// Rounds of the end-of-session kill (each kills what the last missed).
const KILL_ROUNDS: usize = 50;

pub(super) fn set_job_group(pgid: i32) {
    JOB_GROUP.store(pgid, Ordering::SeqCst);
}

pub(super) fn take_escaped() -> Vec<crate::sandbox::EscapedProcess> {
    ESCAPED
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default()
}

pub(super) fn set_cloexec(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map(|_| ())
        .map_err(std::io::Error::from)
}

/// A signal taken from the pending set.
#[derive(Debug, Clone, Copy)]
pub struct Caught {
    pub signo: i32,
}

impl Caught {
    /// The job is in a process group of its own, so the terminal's signals
    /// reach vetto alone: every one is passed on.
    pub fn from_user(&self) -> bool {
        true
    }
}

/// macOS has no `sigtimedwait`: the blocked signals are polled with
/// `sigpending` and taken with `sigwait` once pending (it does not block
/// then).
#[derive(Debug)]
pub struct SignalWaiter {
    set: SigSet,
}

/// How often pending signals are looked for.
const POLL: Duration = Duration::from_millis(10);

impl SignalWaiter {
    pub fn block(signals: &[Signal]) -> nix::Result<Self> {
        let mut set = SigSet::empty();
        for s in signals {
            set.add(*s);
        }
        set.thread_block()?;
        Ok(SignalWaiter { set })
    }

    pub fn wait(&self, timeout: Duration) -> Option<Caught> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(sig) = pending().and_then(|p| {
                self.set
                    .iter()
                    // SAFETY: `p` is a valid sigset_t; sigismember only reads it.
                    .find(|s| unsafe { libc::sigismember(&p, *s as libc::c_int) } == 1)
            }) {
                let mut one = SigSet::empty();
                one.add(sig);
                return one.wait().ok().map(|s| Caught { signo: s as i32 });
            }
            let left = until.checked_duration_since(Instant::now())?;
            std::thread::sleep(left.min(POLL));
        }
    }
}

/// The signals pending for this process (blocked ones wait there).
fn pending() -> Option<libc::sigset_t> {
    let mut raw = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `raw` is a writable sigset_t; sigpending fills it on success,
    // and it is read only then.
    let ok = unsafe { libc::sigpending(raw.as_mut_ptr()) } == 0;
    // SAFETY: initialised by the successful call above.
    ok.then(|| unsafe { raw.assume_init() })
}

/// Nothing to harden that macOS offers without privileges (no subreaper,
/// no `PR_SET_DUMPABLE`).
pub fn harden_supervisor() -> nix::Result<()> {
    Ok(())
}

pub fn try_wait(pid: i32) -> Option<WaitStatus> {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) | Err(_) => None,
        Ok(ws) => Some(ws),
    }
}

/// Children of vetto other than the job (none are made on macOS) are
/// reaped as they end; orphans of the job go to launchd, not vetto.
pub fn reap_orphans(keep: i32) {
    let _ = keep;
}

/// To the job's whole process group, as a terminal would send it.
pub fn send(pid: i32, sig: Signal) {
    let _ = nix::sys::signal::killpg(Pid::from_raw(pid), sig);
}

/// The end of the session: SIGKILL the job's group and every descendant
/// of vetto, round after round until none is left (a process forking as
/// it dies is caught by the next round). What was still running is kept
/// for [`take_escaped`].
pub fn kill_all_descendants() {
    let group = JOB_GROUP.load(Ordering::SeqCst);
    let me = std::process::id();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..KILL_ROUNDS {
        let table = table();
        let mut alive: Vec<i32> = descendants_in(&table, me);
        // What left the group and lost its parent: kqueue saw it forked.
        alive.extend(super::tree::live());
        alive.sort_unstable();
        alive.dedup();
        if group > 0 {
            alive.extend(
                table
                    .iter()
                    .filter(|p| p.pgid == group as u32)
                    .map(|p| p.pid as i32),
            );
        }
        alive.retain(|p| *p > 1 && *p as u32 != me);
        // Zombies of our own (the job) are reaped, not killed.
        while let Ok(ws) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if ws == WaitStatus::StillAlive {
                break;
            }
        }
        if alive.is_empty() {
            break;
        }
        for pid in &alive {
            if seen.insert(*pid)
                && let Ok(mut e) = ESCAPED.lock()
            {
                e.push(crate::sandbox::EscapedProcess {
                    pid: *pid,
                    exe: exe_of(*pid).to_string_lossy().into_owned(),
                    argv: Vec::new(),
                });
            }
            let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        if group > 0 {
            let _ = nix::sys::signal::killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    super::tree::stop();
}

/// One row of the process table.
#[derive(Debug, Clone, Copy)]
struct Row {
    pid: u32,
    ppid: u32,
    pgid: u32,
    uid: u32,
}

fn bsdinfo(pid: i32) -> Option<libc::proc_bsdinfo> {
    let mut info: libc::proc_bsdinfo = unsafe_zeroed_bsdinfo();
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: `info` is a writable proc_bsdinfo of exactly `size` bytes;
    // proc_pidinfo writes at most that many and returns how many.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast(),
            size,
        )
    };
    (n == size).then_some(info)
}

/// When `pid` started (it stays across `exec`): with the pid, which
/// process it is.
pub(super) fn started(pid: i32) -> Option<(u64, u64)> {
    bsdinfo(pid).map(|i| (i.pbi_start_tvsec, i.pbi_start_tvusec))
}

/// `PROC_PIDUNIQIDENTIFIERINFO`: the process's unique ids (XNU's
/// `sys/proc_info.h`, not in the SDK's public headers nor in libc).
const PROC_PIDUNIQIDENTIFIERINFO: libc::c_int = 17;

/// `struct proc_uniqidentifierinfo`, 56 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
struct UniqIdentifierInfo {
    _uuid: [u8; 16],
    unique_id: u64,
    /// The original parent's unique id: re-parenting leaves it.
    parent_unique_id: u64,
    _id_version: i32,
    _orig_ppid_version: i32,
    _reserved: [u64; 2],
}

const _: () = assert!(std::mem::size_of::<UniqIdentifierInfo>() == 56);

/// `pid`'s unique id (never reused while the machine runs) and its
/// original parent's.
pub(super) fn unique_ids(pid: i32) -> Option<(u64, u64)> {
    let mut info = UniqIdentifierInfo {
        _uuid: [0; 16],
        unique_id: 0,
        parent_unique_id: 0,
        _id_version: 0,
        _orig_ppid_version: 0,
        _reserved: [0; 2],
    };
    let size = std::mem::size_of::<UniqIdentifierInfo>() as libc::c_int;
    // SAFETY: `info` is a writable, properly aligned 56-byte
    // proc_uniqidentifierinfo; proc_pidinfo writes at most `size` bytes
    // and returns how many.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            PROC_PIDUNIQIDENTIFIERINFO,
            0,
            (&mut info as *mut UniqIdentifierInfo).cast(),
            size,
        )
    };
    (n == size && info.unique_id != 0).then_some((info.unique_id, info.parent_unique_id))
}

/// Every process with its unique id and its original parent's.
pub(super) fn all_unique_ids() -> Vec<(i32, u64, u64)> {
    all_pids()
        .into_iter()
        .filter(|p| *p > 1)
        .filter_map(|p| unique_ids(p).map(|(id, parent)| (p, id, parent)))
        .collect()
}

/// The children of `pid` now (each checked: its parent is `pid`).
pub(super) fn child_pids(pid: i32) -> Vec<i32> {
    let mut buf = vec![0 as libc::pid_t; 1024];
    loop {
        let bytes = libc::c_int::try_from(buf.len() * std::mem::size_of::<libc::pid_t>())
            .unwrap_or(libc::c_int::MAX);
        // SAFETY: `buf` is writable for `bytes` bytes; the call fills at
        // most that many and returns how many pids it wrote.
        let n = unsafe { libc::proc_listchildpids(pid, buf.as_mut_ptr().cast(), bytes) };
        let Ok(n) = usize::try_from(n) else {
            return Vec::new();
        };
        if n < buf.len() || buf.len() >= MAX_PIDS {
            buf.truncate(n.min(buf.len()));
            break;
        }
        buf.resize(buf.len() * 2, 0);
    }
    let parent = u32::try_from(pid).unwrap_or(0);
    buf.retain(|c| *c > 1 && bsdinfo(*c).is_some_and(|i| i.pbi_ppid == parent));
    buf
}

fn unsafe_zeroed_bsdinfo() -> libc::proc_bsdinfo {
    // SAFETY: proc_bsdinfo is plain C data (integers and char arrays), for
    // which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

fn taskinfo(pid: i32) -> Option<libc::proc_taskinfo> {
    // SAFETY: proc_taskinfo is plain C data (integers), valid all-zero.
    let mut info: libc::proc_taskinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
    // SAFETY: as in `bsdinfo`: a writable buffer of exactly `size` bytes.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTASKINFO,
            0,
            (&mut info as *mut libc::proc_taskinfo).cast(),
            size,
        )
    };
    (n == size).then_some(info)
}

fn all_pids() -> Vec<i32> {
    let mut buf = vec![0 as libc::pid_t; 4096];
    loop {
        let bytes = libc::c_int::try_from(buf.len() * std::mem::size_of::<libc::pid_t>())
            .unwrap_or(libc::c_int::MAX);
        // SAFETY: `buf` is writable for `bytes` bytes; the call fills at
        // most that many and returns the number of pids written.
        let n = unsafe { libc::proc_listallpids(buf.as_mut_ptr().cast(), bytes) };
        let Ok(n) = usize::try_from(n) else {
            return Vec::new();
        };
        if n < buf.len() || buf.len() >= MAX_PIDS {
            buf.truncate(n.min(buf.len()));
            return buf;
        }
        buf.resize(buf.len() * 2, 0);
    }
}

fn table() -> Vec<Row> {
    all_pids()
        .into_iter()
        .filter_map(|pid| {
            let i = bsdinfo(pid)?;
            Some(Row {
                pid: u32::try_from(pid).ok()?,
                ppid: i.pbi_ppid,
                pgid: i.pbi_pgid,
                uid: i.pbi_uid,
            })
        })
        .collect()
}

fn descendants_in(table: &[Row], root: u32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for r in table.iter().filter(|r| r.ppid == p && r.pid != root) {
            if !out.contains(&(r.pid as i32)) {
                out.push(r.pid as i32);
                frontier.push(r.pid);
            }
        }
    }
    out
}

fn exe_of(pid: i32) -> std::path::PathBuf {
    let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    // SAFETY: `buf` is writable for its length, which is passed; the call
    // writes a NUL-terminated path of at most that many bytes.
    let n = unsafe { libc::proc_pidpath(pid, buf.as_mut_ptr().cast(), buf.len() as u32) };
    match usize::try_from(n) {
        Ok(n) if n > 0 => {
            buf.truncate(n.min(buf.len()));
            std::path::PathBuf::from(std::ffi::OsString::from(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&buf),
            ))
        }
        _ => std::path::PathBuf::new(),
    }
}

/// The process and its parents up to (not including) vetto.
pub fn describe(pid: i32) -> ProcessFacts {
    let Some(info) = bsdinfo(pid) else {
        return ProcessFacts::default();
    };
    let me = std::process::id();
    let mut parents = Vec::new();
    let mut ppid = info.pbi_ppid;
    while ppid > 1 && ppid != me && parents.len() < 64 {
        let p = ppid as i32;
        parents.push((ppid, exe_of(p)));
        ppid = bsdinfo(p).map_or(0, |i| i.pbi_ppid);
    }
    ProcessFacts {
        pid: u32::try_from(pid).unwrap_or(0),
        exe: exe_of(pid),
        argv: Vec::new(),
        cwd: std::path::PathBuf::new(),
        parent_commands: parents
            .iter()
            .map(|_| (Vec::new(), std::path::PathBuf::new()))
            .collect(),
        parents,
    }
}

/// The descendants of `pid`; for vetto itself, also the processes of the
/// job's tree that kqueue saw forked and that were re-parented away (and
/// their descendants).
pub fn descendants(pid: u32) -> Vec<i32> {
    let table = table();
    let mut out = descendants_in(&table, pid);
    if pid == std::process::id() {
        for p in super::tree::watched() {
            if !out.contains(&p) {
                out.push(p);
            }
            if let Ok(p) = u32::try_from(p) {
                for d in descendants_in(&table, p) {
                    if !out.contains(&d) {
                        out.push(d);
                    }
                }
            }
        }
    }
    out
}

/// The descendants of `pid` by parent links alone (no kqueue): what the
/// tree tracking adds to, for its test.
#[cfg(test)]
pub(super) fn descendants_of_in_table(pid: u32) -> Vec<i32> {
    descendants_in(&table(), pid)
}

pub fn rss_bytes(pid: i32) -> u64 {
    taskinfo(pid).map_or(0, |t| t.pti_resident_size)
}

/// `mach_timebase_info_data_t` (libc's binding is deprecated for the
/// mach2 crate; this one call does not warrant it).
#[repr(C)]
struct Timebase {
    numer: u32,
    denom: u32,
}

unsafe extern "C" {
    fn mach_timebase_info(info: *mut Timebase) -> libc::c_int;
}

/// Mach absolute time units to milliseconds (they are nanoseconds on
/// Intel, 125/3 ns on Apple silicon).
fn mach_to_ms(t: u64) -> u64 {
    let mut tb = Timebase { numer: 1, denom: 1 };
    // SAFETY: `tb` is a valid, writable mach_timebase_info_data_t (two
    // u32s, as `Timebase` lays them out).
    unsafe { mach_timebase_info(&mut tb) };
    let ns = u128::from(t) * u128::from(tb.numer) / u128::from(tb.denom.max(1));
    u64::try_from(ns / 1_000_000).unwrap_or(u64::MAX)
}

pub fn cpu_ms(pid: i32) -> (u64, u64) {
    taskinfo(pid).map_or((0, 0), |t| {
        (mach_to_ms(t.pti_total_user), mach_to_ms(t.pti_total_system))
    })
}

pub fn reaped_children_cpu_ms() -> (u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or((0, 0), |u| {
        let ms = |t: nix::sys::time::TimeVal| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1000
                + u64::try_from(t.tv_usec()).unwrap_or(0) / 1000
        };
        (ms(u.user_time()), ms(u.system_time()))
    })
}

pub fn tasks_of_descendants() -> u64 {
    descendants(std::process::id()).len() as u64
}

/// What `RLIMIT_NPROC` counts on macOS: the user's processes.
pub fn tasks_of_uid(uid: u32) -> u64 {
    table().iter().filter(|r| r.uid == uid).count() as u64
}

pub fn cmdline(_pid: i32) -> Vec<String> {
    Vec::new()
}
