//! The integration-test harness: a per-test world (fake HOME with secrets, a
//! git project), the unprivileged user every command runs as, the `require!`
//! guard, and runners for the sandboxed and the bare half of each test.
//!
//! Every command runs as an unprivileged user: when the test process is
//! root (CI), as `tester` (created when missing), dropped to with
//! `CommandExt::uid/gid`, which also clears supplementary groups; otherwise
//! as the current user. A test never gets more privilege than a CI job.

#![allow(
    dead_code,
    reason = "each test module uses a different part of the harness"
)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod sarif;
pub mod skip;

/// Upper bound for any single command; reaching it fails the test.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Secrets planted in the world; finding one in a job's output is the evidence of a leak.
pub const SSH_CANARY: &str = "CANARY-ssh-private-key-5f1c";
pub const AWS_CANARY: &str = "CANARY-aws-secret-9b2e";
pub const NPM_CANARY: &str = "CANARY-npm-authtoken-77d0";
pub const DOTENV_CANARY: &str = "CANARY-dotenv-db-password-31aa";
pub const ENV_CANARY: &str = "CANARY-env-token-c0ffee";

/// The hidden probe subcommand of the binary under test.
pub const PROBE: &str = "__probe";

// ───────────────────────────── the unprivileged user ─────────────────────────────

/// The user every command runs as.
#[derive(Debug)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// True when the test process is root and drops to `uid`/`gid`.
    pub drop_from_root: bool,
}

const TEST_USER: &str = "tester";

/// `--max-procs` is `RLIMIT_NPROC`, which the kernel counts over every
/// process of the user: tests that depend on that count (a fork bomb, a
/// budget of a few forks) hold this lock so that they do not run while
/// another fills the same user's count.
pub fn nproc_sensitive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn user() -> &'static User {
    static USER: OnceLock<User> = OnceLock::new();
    USER.get_or_init(|| {
        let uid = id_of(&["-u"], None);
        if uid != 0 {
            return User {
                name: String::from_utf8(cmd_output(Command::new("id").arg("-un")))
                    .unwrap()
                    .trim()
                    .to_owned(),
                uid,
                gid: id_of(&["-g"], None),
                drop_from_root: false,
            };
        }
        if Command::new("id")
            .arg(TEST_USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            let st = Command::new("useradd")
                .args(["--no-create-home", "--shell", "/bin/sh", TEST_USER])
                .status()
                .expect("useradd");
            assert!(
                st.success(),
                "cannot create the unprivileged user {TEST_USER}; create it (see .ci/run)"
            );
        }
        User {
            name: TEST_USER.into(),
            uid: id_of(&["-u"], Some(TEST_USER)),
            gid: id_of(&["-g"], Some(TEST_USER)),
            drop_from_root: true,
        }
    })
}

fn id_of(flag: &[&str], who: Option<&str>) -> u32 {
    let mut c = Command::new("id");
    c.args(flag);
    if let Some(w) = who {
        c.arg(w);
    }
    String::from_utf8(cmd_output(&mut c))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// One HTTP/1.1 request from a stand-in server's client: its head and
/// body as text (the body bounded to 64 KiB by its `Content-Length`), or
/// `None` when the client sent nothing.
pub fn read_http_request(s: &std::net::TcpStream) -> Option<String> {
    use std::io::BufRead;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut r = std::io::BufReader::new(s);
    let mut head = String::new();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0).min(64 * 1024);
                }
                head.push_str(&line);
            }
        }
    }
    if head.is_empty() {
        return None;
    }
    let mut body = vec![0u8; len];
    let _ = r.read_exact(&mut body);
    head.push_str(&String::from_utf8_lossy(&body));
    Some(head)
}

/// Answer a stand-in server's client `200 OK` with `body`, and close.
pub fn reply_http_ok(mut s: &std::net::TcpStream, body: &str) {
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(reply.as_bytes());
}

/// Run `c` (as it is: no user, no environment added) to its end; its
/// stdout, or a panic naming `c` with its stderr when it fails.
pub fn cmd_output(c: &mut Command) -> Vec<u8> {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Make `cmd` run as the test user (no-op when the tests are not root).
pub fn as_user(cmd: &mut Command) -> &mut Command {
    let u = user();
    if u.drop_from_root {
        cmd.uid(u.uid).gid(u.gid);
    }
    cmd
}

fn chown_to_user(path: &Path) {
    let u = user();
    if u.drop_from_root {
        chown(path, Some(u.uid), Some(u.gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

/// Give `path` and everything below it (links not followed) to the test user.
pub fn chown_tree(path: &Path) {
    chown_to_user(path);
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            let p = e.unwrap().path();
            if p.is_symlink() {
                let u = user();
                if u.drop_from_root {
                    std::os::unix::fs::lchown(&p, Some(u.uid), Some(u.gid)).unwrap();
                }
            } else {
                chown_tree(&p);
            }
        }
    }
}

// ───────────────────────────── the binary under test ─────────────────────────────

/// A world-readable copy of the vetto binary: the cargo target directory
/// may not be traversable by the unprivileged user.
pub fn vetto_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        remove_stale_bin_dirs();
        let dir = PathBuf::from(format!("/tmp/vetto-test-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dst = dir.join("vetto");
        let tmp = dir.join(".vetto.partial");
        std::fs::copy(env!("CARGO_BIN_EXE_vetto"), &tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &dst).unwrap();
        dst
    })
}

/// The directory holding [`vetto_bin`], granted readable to probe runs.
pub fn vetto_bin_dir() -> &'static Path {
    vetto_bin().parent().unwrap()
}

/// Copies left by earlier test runs whose process is gone.
fn remove_stale_bin_dirs() {
    let Ok(rd) = std::fs::read_dir("/tmp") else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("vetto-test-bin-"))
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

// ───────────────────────────── require! ─────────────────────────────

/// A host feature a test needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Landlock with at least this ABI version.
    LandlockAbi(u8),
    /// Unprivileged user namespaces (for the test user).
    Userns,
    /// Seccomp user notification with WAIT_KILLABLE_RECV.
    SeccompNotify,
    /// A seccomp filter (the SECCOMP tier; notification not needed).
    Seccomp,
    /// FUSE usable by the test user (FULL's secret traps).
    Fuse,
    /// The FS-ONLY tier: Landlock ABI ≥ 6 (signal and abstract-socket
    /// scoping) plus seccomp user notification.
    FsOnly,
    /// An x86_64 host (x32 and i386 syscall ABIs).
    X86_64,
    /// The FULL tier as these tests use it: the FS-ONLY parts (Landlock and
    /// the seccomp notifications still run on top) plus user namespaces.
    Full,
    /// A delegated cgroup v2 with the memory controller, as `vetto doctor`
    /// sees it (`VETTO_TEST_REQUIRE` item `cgroup-v2-memory`).
    CgroupV2Memory,
}

impl Feature {
    /// The features this one is made of, as named in `VETTO_TEST_REQUIRE`.
    fn parts(self) -> Vec<Feature> {
        match self {
            Feature::FsOnly => vec![Feature::LandlockAbi(6), Feature::SeccompNotify],
            Feature::Full => vec![
                Feature::LandlockAbi(6),
                Feature::SeccompNotify,
                Feature::Userns,
            ],
            f => vec![f],
        }
    }
}

/// What the host offers, asked with the probe as the test user.
#[derive(Debug)]
struct HostFacts {
    /// `host.cgroup_memory` of `vetto doctor --json`.
    cgroup_memory: Value,
    /// `host.seccomp` and `host.fuse` of `vetto doctor --json`.
    seccomp: Result<(), String>,
    fuse: Result<(), String>,
    landlock_abi: u8,
    userns: Result<(), String>,
    seccomp_notify: Result<(), String>,
}

fn host_facts() -> &'static HostFacts {
    static FACTS: OnceLock<HostFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let abi = probe_bare_anywhere(&["landlock-abi"]);
        let landlock_abi = abi.json.get("abi").and_then(Value::as_u64).unwrap_or(0) as u8;
        let as_result = |p: Probe| if p.ok() { Ok(()) } else { Err(p.describe()) };
        let doctor = Run {
            argv: vec![vetto_bin().into(), "doctor".into(), "--json".into()],
            env: [("PATH".to_owned(), OsString::from(PATH))]
                .into_iter()
                .collect(),
            cwd: PathBuf::from("/"),
            stdin: None,
            timeout: DEFAULT_TIMEOUT,
        }
        .run();
        let doctor = serde_json::from_slice::<Value>(&doctor.stdout).unwrap_or(Value::Null);
        let cgroup_memory = doctor
            .pointer("/host/cgroup_memory")
            .cloned()
            .unwrap_or(Value::Null);
        let state = |key: &str| match doctor.pointer(&format!("/host/{key}/state")) {
            Some(Value::String(s)) if s == "available" => Ok(()),
            other => Err(format!("vetto doctor says {key}: {other:?}")),
        };
        HostFacts {
            cgroup_memory,
            seccomp: state("seccomp"),
            fuse: state("fuse"),
            landlock_abi,
            userns: as_result(probe_bare_anywhere(&["unshare-user"])),
            seccomp_notify: as_result(probe_bare_anywhere(&["seccomp-notify"])),
        }
    })
}

/// `vetto __probe ARGS` bare as the test user, outside any world.
fn probe_bare_anywhere(args: &[&str]) -> Probe {
    let mut argv: Vec<OsString> = vec![vetto_bin().into(), PROBE.into()];
    argv.extend(args.iter().map(OsString::from));
    let run = Run {
        argv,
        env: [("PATH".to_owned(), OsString::from(PATH))]
            .into_iter()
            .collect(),
        cwd: PathBuf::from("/"),
        stdin: None,
        timeout: DEFAULT_TIMEOUT,
    };
    Probe::from_out(run.run())
}

/// Why `f` is missing on this host, or `Ok` when it is there.
pub fn check(f: Feature) -> Result<(), String> {
    let facts = host_facts();
    for part in f.parts() {
        match part {
            Feature::LandlockAbi(n) => {
                if facts.landlock_abi < n {
                    return Err(format!(
                        "needs Landlock ABI >= {n}, host has {}",
                        facts.landlock_abi
                    ));
                }
            }
            Feature::Userns => facts.userns.clone().map_err(|e| {
                format!(
                    "unprivileged user namespaces unavailable for {}: {e}",
                    user().name
                )
            })?,
            Feature::SeccompNotify => facts
                .seccomp_notify
                .clone()
                .map_err(|e| format!("seccomp user notification unavailable: {e}"))?,
            Feature::Seccomp => facts.seccomp.clone()?,
            Feature::Fuse => facts.fuse.clone()?,
            Feature::X86_64 => {
                if !cfg!(target_arch = "x86_64") {
                    return Err("needs an x86_64 host".into());
                }
            }
            Feature::CgroupV2Memory => {
                if facts.cgroup_memory.get("state").and_then(Value::as_str) != Some("delegated") {
                    return Err(format!(
                        "no delegated cgroup v2 with the memory controller: {}",
                        facts.cgroup_memory
                    ));
                }
            }
            Feature::FsOnly | Feature::Full => unreachable!("expanded by parts()"),
        }
    }
    Ok(())
}

/// Is `f` (or one of its parts) listed in `VETTO_TEST_REQUIRE`, so that its
/// absence must fail the test rather than skip it?
pub fn required(f: Feature) -> bool {
    std::env::var("VETTO_TEST_REQUIRE").is_ok_and(|list| required_in(&list, f))
}

/// [`required`] for a given `VETTO_TEST_REQUIRE` value (read by
/// [`skip::listed_in`], the one parser).
pub fn required_in(list: &str, f: Feature) -> bool {
    f.parts().into_iter().any(|part| {
        let name = match part {
            Feature::LandlockAbi(n) => format!("landlock-abi>={n}"),
            Feature::Userns => "userns".into(),
            Feature::SeccompNotify => "seccomp-notify".into(),
            Feature::Seccomp => "seccomp".into(),
            Feature::Fuse => "fuse".into(),
            Feature::X86_64 => "x86_64".into(),
            Feature::CgroupV2Memory => "cgroup-v2-memory".into(),
            Feature::FsOnly | Feature::Full => return false,
        };
        skip::listed_in(list, &name)
    })
}

#[test]
fn require_list_escalates_exactly_the_promised_features() {
    let ci = "landlock-abi>=6,userns,seccomp-notify";
    assert!(required_in(ci, Feature::LandlockAbi(6)));
    assert!(required_in(ci, Feature::LandlockAbi(4)));
    assert!(!required_in(ci, Feature::LandlockAbi(7)));
    assert!(required_in(ci, Feature::FsOnly));
    assert!(required_in(ci, Feature::Userns));
    assert!(!required_in(ci, Feature::X86_64));
    assert!(!required_in("", Feature::FsOnly));
    assert!(required_in("all", Feature::X86_64));
    assert!(required_in(ci, Feature::Full));
    assert!(!required_in("landlock-abi>=6", Feature::Userns));
    assert!(required_in(" seccomp-notify ,", Feature::Seccomp));
    assert!(!required_in("seccomp", Feature::SeccompNotify));
    assert!(required_in("userns,fuse", Feature::Fuse));
    assert!(!required_in("fuse-t", Feature::Fuse));
    assert!(skip::listed_in("landlock-abi>=6", "landlock"));
    assert!(!skip::listed_in("landlockish", "landlock"));
    assert!(!skip::listed_in(",,", "all"));
}

/// Not a test: the body of `skip_lines_are_visible_without_nocapture`'s
/// child (with `VETTO_SKIP_DEMO`); without it, it does nothing.
#[test]
fn zz_skip_demo() {
    if std::env::var_os("VETTO_SKIP_DEMO").is_none() {
        return;
    }
    eprintln!("CAPTURED-BY-LIBTEST");
    skip::say(&test_name(), "shown without --nocapture");
}

/// A skipped test says so in `cargo test`'s output, not only under
/// `--nocapture`: the child run captures output (no `--nocapture`), and
/// still the SKIP line is there while the `eprintln!` beside it is not.
#[test]
fn skip_lines_are_visible_without_nocapture() {
    let name = format!(
        "{}::zz_skip_demo",
        module_path!().split_once("::").map_or("util", |(_, m)| m)
    );
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--test-threads=1"])
        .env("VETTO_SKIP_DEMO", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains(&format!("SKIP {name}: shown without --nocapture")),
        "{all}"
    );
    assert!(!all.contains("CAPTURED-BY-LIBTEST"), "not captured: {all}");
}

// ───────────────────────────── tiers ─────────────────────────────

/// The tier a world's sandboxed runs ask for (`--tier NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Landlock + seccomp, no namespaces.
    FsOnly,
    /// Namespaces and a new root, with Landlock and seccomp on top.
    Full,
    /// FULL with `--check-creations after`: what exists kept by read-only
    /// mounts, no creation notified.
    FullCreationsAfter,
}

impl Tier {
    /// The name `--tier` takes.
    pub fn name(self) -> &'static str {
        match self {
            Tier::FsOnly => "fs-only",
            Tier::Full | Tier::FullCreationsAfter => "full",
        }
    }
    /// What the host must offer for this tier's tests to run.
    pub fn feature(self) -> Feature {
        match self {
            Tier::FsOnly => Feature::FsOnly,
            Tier::Full | Tier::FullCreationsAfter => Feature::Full,
        }
    }
    /// The options of `vetto run` and `vetto ci` this variant of its tier adds.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            Tier::FullCreationsAfter => &["--check-creations", "after"],
            Tier::FsOnly | Tier::Full => &[],
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Run each named `fn NAME(tier: Tier)` at every tier, as the tests
/// `NAME::at_fs_only` and `NAME::at_full` (a module and a function may
/// share a name). The tier is also in every failure's command line.
#[macro_export]
macro_rules! at_every_tier {
    ($($name:ident),+ $(,)?) => {
        $crate::at_tiers!([at_fs_only = FsOnly, at_full = Full] $($name),+);
    };
}

/// [`at_every_tier!`], and once more at FULL with `--check-creations
/// after` (`NAME::at_full_creations_checked_after`): for the protections
/// that read-only mounts keep alone there.
#[macro_export]
macro_rules! at_every_tier_and_creations_after {
    ($($name:ident),+ $(,)?) => {
        $crate::at_tiers!(
            [at_fs_only = FsOnly, at_full = Full, at_full_creations_checked_after = FullCreationsAfter]
            $($name),+
        );
    };
}

/// One module per `NAME`, with a test `TEST` calling `NAME(Tier::TIER)`
/// for each `TEST = TIER` of the list.
#[macro_export]
macro_rules! at_tiers {
    ($tiers:tt $($name:ident),+) => {
        $($crate::at_tiers!(@one $tiers $name);)+
    };
    (@one [$($test:ident = $tier:ident),+] $name:ident) => {
        mod $name {
            $(
                #[test]
                fn $test() {
                    super::$name($crate::util::Tier::$tier);
                }
            )+
        }
    };
}

/// The running test's name (libtest names each test's thread after it).
pub fn test_name() -> String {
    thread::current().name().unwrap_or("?").to_owned()
}

/// Skip the test (printing `SKIP <test>: <reason>`) when the host lacks a
/// feature; fail it instead when `VETTO_TEST_REQUIRE` promises the feature.
#[macro_export]
macro_rules! require {
    ($feature:expr) => {
        if let Err(reason) = $crate::util::check($feature) {
            if $crate::util::required($feature) {
                panic!(
                    "{}: VETTO_TEST_REQUIRE promises {:?}, but {reason}",
                    $crate::util::test_name(),
                    $feature
                );
            }
            $crate::util::skip::say(&$crate::util::test_name(), &reason);
            return;
        }
    };
}

/// Skip a test that needs the host tool `$tool` when it is not on `PATH`,
/// visibly; when `VETTO_TEST_REQUIRE` lists `$listed` (the name CI pins
/// the tool by), fail instead.
#[macro_export]
macro_rules! require_tool {
    ($tool:expr, $listed:expr) => {
        if let Some(reason) = $crate::util::skip::tool_missing($tool) {
            assert!(
                !$crate::util::required_by_name($listed),
                "VETTO_TEST_REQUIRE lists {}, but {reason}",
                $listed
            );
            $crate::util::skip::say(&$crate::util::test_name(), &reason);
            return;
        }
    };
}

/// Skip a test whose attack the host itself already refuses to
/// unsandboxed processes (e.g. `kernel.io_uring_disabled`): there is nothing
/// to contain, and claiming a pass would be vacuous. `VETTO_TEST_REQUIRE=all`
/// (or the action's name) turns it into a failure.
#[macro_export]
macro_rules! require_attack_possible {
    ($what:expr, $probe:expr) => {{
        let reason = format!(
            "the host refuses {} to unsandboxed processes too: {}",
            $what,
            $probe.describe()
        );
        if $crate::util::required_by_name($what) {
            panic!(
                "{}: VETTO_TEST_REQUIRE lists {}, but {reason}",
                $crate::util::test_name(),
                $what
            );
        }
        $crate::util::skip::say(&$crate::util::test_name(), &reason);
        return;
    }};
}

/// Is `name` (or `all`) listed in `VETTO_TEST_REQUIRE`?
/// The `violation` lines of a session log.
/// An ordinary `git status` in `dir`, unsandboxed, as a shell prompt runs it.
pub fn git_status_in(w: &World, dir: &Path) -> Out {
    w.bare(&["git", "status", "--short"]).cwd(dir).run()
}

/// The `persistence-planted` records of a session log.
pub fn planted_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("\"persistence-planted\""))
        .collect()
}

/// The outside marker a planted program leaves when it runs later.
pub fn marker_of(w: &World) -> PathBuf {
    w.outside.join("ran-later")
}

pub fn violation_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("\"type\":\"violation\""))
        .collect()
}

pub fn required_by_name(name: &str) -> bool {
    skip::listed(name)
}

// ───────────────────────────── running commands ─────────────────────────────

/// What a finished command did.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The command line, for messages.
    pub what: String,
}

impl Out {
    /// The exit code, or 128+N when killed by signal N (as a shell reports it).
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| 128 + self.status.signal().unwrap_or(0))
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    /// Everything, for assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "command: {}\nstatus: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n",
            self.what,
            self.status,
            truncate(&self.stdout()),
            truncate(&self.stderr())
        )
    }
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code(), code, "unexpected exit status\n{}", self.dump());
        self
    }
    pub fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stdout().contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.dump()
        );
        self
    }
    pub fn assert_stdout_lacks(&self, needle: &str) -> &Self {
        assert!(
            !self.stdout().contains(needle),
            "stdout contains {needle:?}\n{}",
            self.dump()
        );
        self
    }
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stderr().contains(needle),
            "stderr lacks {needle:?}\n{}",
            self.dump()
        );
        self
    }
    /// Neither output stream carries `needle`.
    pub fn assert_no_leak(&self, needle: &str) -> &Self {
        assert!(
            !self.stdout().contains(needle) && !self.stderr().contains(needle),
            "the secret {needle:?} leaked\n{}",
            self.dump()
        );
        self
    }
    /// The vetto run actually started the command (not a 125 refusal),
    /// so a blocked attack is not confused with a sandbox that never ran.
    pub fn assert_ran(&self) -> &Self {
        assert_ne!(
            self.code(),
            125,
            "vetto refused or failed to set up the sandbox\n{}",
            self.dump()
        );
        self
    }
}

fn truncate(s: &str) -> String {
    const MAX: usize = 8000;
    if s.len() <= MAX {
        s.to_owned()
    } else {
        let mut cut = MAX;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}… [{} bytes more]", &s[..cut], s.len() - cut)
    }
}

/// The result of one `vetto __probe` run.
#[derive(Debug)]
pub struct Probe {
    pub out: Out,
    pub json: Value,
}

impl Probe {
    fn from_out(out: Out) -> Probe {
        let line = out
            .stdout()
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .map(str::to_owned);
        let json = line
            .and_then(|l| serde_json::from_str(&l).ok())
            .unwrap_or(Value::Null);
        Probe { out, json }
    }
    /// The probe reported a result (it ran and was not killed).
    pub fn reported(&self) -> bool {
        self.json.is_object()
    }
    /// The attempt succeeded: the attack worked.
    pub fn ok(&self) -> bool {
        self.json.get("ok").and_then(Value::as_bool) == Some(true)
    }
    pub fn error(&self) -> String {
        self.json
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    }
    pub fn describe(&self) -> String {
        if self.reported() {
            self.json.to_string()
        } else {
            self.out.dump()
        }
    }
    /// Blocked by the sandbox: EPERM/EACCES from the kernel, or the probe
    /// killed by the seccomp filter (SIGSYS) — never "could not run".
    pub fn assert_blocked(&self) -> &Self {
        self.assert_blocked_with(&["EPERM", "EACCES"])
    }

    /// Blocked, answered with one of `errnos` (e.g. `ENOSYS` for a foreign
    /// syscall ABI, where the bare half proved the call exists), or SIGSYS.
    pub fn assert_blocked_with(&self, errnos: &[&str]) -> &Self {
        if self.reported() {
            assert!(
                !self.ok(),
                "the attack worked inside the sandbox: {}\n{}",
                self.json,
                self.out.dump()
            );
            let err = self.error();
            assert!(
                errnos.contains(&err.as_str()),
                "the attempt failed, but not because it was blocked (want {errnos:?}): {}\n{}",
                self.json,
                self.out.dump()
            );
        } else {
            assert_eq!(
                self.out
                    .status
                    .signal()
                    .or(self.out.status.code().map(|c| c - 128)),
                Some(libc::SIGSYS),
                "the probe did not report (want a JSON line, or death by SIGSYS)\n{}",
                self.out.dump()
            );
        }
        self
    }
    /// The attempt worked (the bare half: the attack is real on this host).
    pub fn assert_ok(&self) -> &Self {
        assert!(
            self.ok(),
            "the attempt failed: {}\n{}",
            self.describe(),
            self.out.dump()
        );
        self
    }
    /// Allowed by the kernel: succeeded, or failed for a reason other than a
    /// block (EBADF/EFAULT/ENOENT… — the argument trick of side-effect-free probes).
    pub fn assert_allowed(&self) -> &Self {
        assert!(
            self.reported(),
            "the probe did not report\n{}",
            self.out.dump()
        );
        let err = self.error();
        assert!(
            self.ok() || (err != "EPERM" && err != "EACCES"),
            "the attempt was blocked outside the sandbox: {}\n{}",
            self.json,
            self.out.dump()
        );
        self
    }
}

/// A command about to run; see [`World::sandboxed`] and [`World::bare`].
pub struct Run {
    argv: Vec<OsString>,
    env: BTreeMap<String, OsString>,
    cwd: PathBuf,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
}

impl Run {
    /// `program ARGS…` as the test user in `cwd`, with exactly `env`.
    pub fn new(
        program: impl AsRef<OsStr>,
        args: &[&str],
        cwd: &Path,
        env: &[(&str, &OsStr)],
    ) -> Run {
        let mut argv = vec![program.as_ref().to_owned()];
        argv.extend(args.iter().map(OsString::from));
        Run {
            argv,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: cwd.to_path_buf(),
            stdin: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
    pub fn env(mut self, k: &str, v: impl AsRef<OsStr>) -> Self {
        self.env.insert(k.to_owned(), v.as_ref().to_owned());
        self
    }
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(data.into());
        self
    }
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = dir.into();
        self
    }
    fn command(&self) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..])
            .env_clear()
            .envs(&self.env)
            .current_dir(&self.cwd);
        // Its own process group, so a timeout can kill whatever it left.
        c.process_group(0);
        as_user(&mut c);
        c
    }
    fn describe(&self) -> String {
        self.argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Run to the end (bounded by the timeout, which fails the test).
    pub fn run(self) -> Out {
        let mut r = self.spawn();
        r.wait()
    }

    /// Start without waiting; for tests that interact with a running job.
    pub fn spawn(self) -> Running {
        let mut c = self.command();
        c.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let what = self.describe();
        let mut child = c
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        if let Some(data) = self.stdin {
            let mut sin = child.stdin.take().unwrap();
            thread::spawn(move || {
                // The job may exit without reading everything: EPIPE is fine.
                let _ = sin.write_all(&data);
            });
        }
        let (tx, rx) = mpsc::channel();
        let mut so = child.stdout.take().unwrap();
        let tx2 = tx.clone();
        thread::spawn(move || pump(&mut so, &tx2, true));
        let mut se = child.stderr.take().unwrap();
        thread::spawn(move || pump(&mut se, &tx, false));
        Running {
            child,
            rx,
            stdout: Vec::new(),
            stderr: Vec::new(),
            open_streams: 2,
            deadline: Instant::now() + self.timeout,
            what,
        }
    }
}

enum Chunk {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Closed,
}

fn pump(r: &mut impl Read, tx: &mpsc::Sender<Chunk>, is_stdout: bool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = buf[..n].to_vec();
                let msg = if is_stdout {
                    Chunk::Stdout(chunk)
                } else {
                    Chunk::Stderr(chunk)
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        }
    }
    let _ = tx.send(Chunk::Closed);
}

/// A started command. Dropping it kills its process group.
pub struct Running {
    child: Child,
    rx: mpsc::Receiver<Chunk>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    open_streams: u8,
    deadline: Instant,
    what: String,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn take(&mut self, c: Chunk) {
        match c {
            Chunk::Stdout(b) => self.stdout.extend(b),
            Chunk::Stderr(b) => self.stderr.extend(b),
            Chunk::Closed => self.open_streams -= 1,
        }
    }

    /// Wait until stdout contains `needle` (fails the test at the deadline
    /// or when the streams close first).
    pub fn wait_for_stdout(&mut self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !String::from_utf8_lossy(&self.stdout).contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.open_streams == 0 {
                self.kill_group();
                let out = self.finish();
                panic!("{needle:?} never appeared on stdout\n{}", out.dump());
            }
            if let Ok(c) = self.rx.recv_timeout(left.min(Duration::from_millis(100))) {
                self.take(c);
            }
        }
    }

    /// What the command printed on stdout so far.
    pub fn stdout_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Send `sig` to the command itself (vetto, for a sandboxed run).
    pub fn signal(&self, sig: i32) {
        send_signal(self.pid(), sig);
    }

    fn kill_group(&self) {
        send_signal(-self.pid(), libc::SIGKILL);
    }

    /// Wait for the end (bounded by the run's timeout, which fails the test).
    pub fn wait(&mut self) -> Out {
        loop {
            if let Some(_st) = self.child.try_wait().unwrap() {
                return self.finish();
            }
            if Instant::now() >= self.deadline {
                self.kill_group();
                let out = self.finish();
                panic!("timed out; killed\n{}", out.dump());
            }
            if let Ok(c) = self.rx.recv_timeout(Duration::from_millis(20)) {
                self.take(c);
            }
        }
    }

    fn finish(&mut self) -> Out {
        let status = self.child.wait().unwrap();
        // Drain the pipes; a descendant that kept them open is given a
        // moment, then left behind (the test asserting on it will say so).
        let until = Instant::now() + Duration::from_secs(5);
        while self.open_streams > 0 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.rx.recv_timeout(left) {
                Ok(c) => self.take(c),
                Err(_) => break,
            }
        }
        Out {
            status,
            stdout: std::mem::take(&mut self.stdout),
            stderr: std::mem::take(&mut self.stderr),
            what: self.what.clone(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_group();
            let _ = self.child.wait();
        }
    }
}

/// `kill(pid, sig)` through the `kill` utility (tests hold no `unsafe`).
pub fn send_signal(pid: i32, sig: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Is `pid` alive (and not a zombie) and still the process whose command
/// line contains `marker`? (Guards against pid reuse.)
pub fn alive_with(pid: i32, marker: &str) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let Ok(cmdline) = std::fs::read(proc.join("cmdline")) else {
        return false;
    };
    if !String::from_utf8_lossy(&cmdline).contains(marker) {
        return false;
    }
    let stat = std::fs::read_to_string(proc.join("stat")).unwrap_or_default();
    // The state is the field after the parenthesised command name.
    let state = stat
        .rsplit_once(')')
        .map(|(_, r)| r.trim_start().chars().next())
        .unwrap_or(None);
    !matches!(state, Some('Z' | 'X') | None)
}

/// Every live process whose command line contains `marker`.
pub fn pids_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
            if pid != std::process::id() as i32 && alive_with(pid, marker) {
                found.push(pid);
            }
        }
    }
    found
}

/// Poll `cond` until it holds or `within` passes; returns whether it held.
pub fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A `sleep` whose command line is unique, so it can be found in /proc.
pub fn unique_sleep_arg() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    // `sleep 900.<pid><n>`: fractional seconds make the number unique.
    format!(
        "900.{}{:04}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A background process started by the test, outside any sandbox, as the
/// test user; killed when dropped.
pub struct Outside {
    pub child: Child,
    pub marker: String,
}

impl Outside {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    pub fn alive(&self) -> bool {
        alive_with(self.pid(), &self.marker)
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ───────────────────────────── the world ─────────────────────────────

/// A fresh world per test, owned by the test user:
///
/// ```text
/// ROOT/home/                 fake $HOME: .ssh/id_rsa, .aws/credentials, .npmrc, .cargo/…, .bashrc
/// ROOT/project/              P: a git repo with a commit; .env; src/main.c; hello.py
/// ROOT/tmp/                  $TMPDIR given to vetto (it creates the session dir inside)
/// ROOT/outside/              somewhere the job has no business writing
/// ```
pub struct World {
    pub root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
    pub tmp: PathBuf,
    pub outside: PathBuf,
    /// The tier [`World::sandboxed`] and friends run at.
    pub tier: Tier,
    name: String,
}

/// `PATH` for every command (the same inside and outside).
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

impl World {
    /// A world whose sandboxed runs use `--tier fs-only`.
    pub fn new() -> World {
        World::at(Tier::FsOnly)
    }

    /// A world whose sandboxed runs use `--tier TIER`.
    pub fn at(tier: Tier) -> World {
        World::at_in(tier, Path::new("/tmp"))
    }

    /// The same, built in `parent` instead of `/tmp` (for what depends
    /// on where the project lives, such as FULL's private `/tmp`).
    pub fn at_in(tier: Tier, parent: &Path) -> World {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = test_name();
        // The test's own name (short: unix socket paths in the world's
        // temp dirs must stay under 108 bytes) and, for a tiered test, its tier.
        let mut parts = name.rsplit("::");
        let last = parts.next().unwrap_or("t");
        let (test, tier_tag) = match last {
            "at_full" => (parts.next().unwrap_or("t"), "-full"),
            "at_fs_only" => (parts.next().unwrap_or("t"), "-fs"),
            _ => (last, ""),
        };
        let short: String = test
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(32)
            .chain(tier_tag.chars())
            .collect();
        let root = parent.join(format!(
            "vetto-test-{}-{}-{short}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let w = World {
            home: root.join("home"),
            project: root.join("project"),
            tmp: root.join("tmp"),
            outside: root.join("outside"),
            root,
            tier,
            name,
        };
        w.populate();
        chown_tree(&w.root);
        w.init_git();
        w
    }

    /// The project's vetto-owned cache of `tool` (docs/caches.md): one per
    /// project, named as vetto names it.
    pub fn vetto_cache(&self, tool: &str) -> PathBuf {
        self.home
            .join(".cache/vetto/caches")
            .join(vetto::session::tools::project_key(&self.project))
            .join(tool)
    }

    fn populate(&self) {
        let f = |rel: &str, body: &str| write_file(&self.root.join(rel), body);
        f(
            "home/.ssh/id_rsa",
            &format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_CANARY}\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
        );
        f("home/.ssh/config", "Host *\n  IdentityFile ~/.ssh/id_rsa\n");
        f(
            "home/.aws/credentials",
            &format!(
                "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {AWS_CANARY}\n"
            ),
        );
        f(
            "home/.npmrc",
            &format!("//registry.npmjs.org/:_authToken={NPM_CANARY}\n"),
        );
        f("home/.bashrc", "# original bashrc\n");
        f(
            "home/.cargo/config.toml",
            "[net]\ngit-fetch-with-cli = true\n",
        );
        f("home/.cargo/registry/.keep", "");
        f(
            "project/.env",
            &format!("DATABASE_PASSWORD={DOTENV_CANARY}\n"),
        );
        f("project/README.md", "# demo project\n");
        f(
            "project/src/main.c",
            "#include <stdio.h>\nint main(void) { puts(\"hello from c\"); return 0; }\n",
        );
        f("project/hello.py", "print('hello from python')\n");
        for d in [&self.tmp, &self.outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::set_permissions(
            self.home.join(".ssh"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::fs::set_permissions(
            self.home.join(".ssh/id_rsa"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }

    fn init_git(&self) {
        let script = "set -e
            git init -q -b main .
            git config user.name 'Vetto Test'
            git config user.email test@vetto.invalid
            printf '.env\\n' > .gitignore
            git add -A
            git commit -q -m initial";
        self.bare(&["sh", "-c", script]).run().assert_success();
        assert!(
            self.project.join(".git/hooks").is_dir(),
            "git init made no .git/hooks"
        );
    }

    /// The environment both halves of a test start from.
    fn base_env(&self) -> BTreeMap<String, OsString> {
        let u = user();
        [
            ("PATH", PATH.into()),
            ("HOME", self.home.clone().into_os_string()),
            ("TMPDIR", self.tmp.clone().into_os_string()),
            ("USER", u.name.clone().into()),
            ("LOGNAME", u.name.clone().into()),
            ("LC_ALL", "C".into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ]
        .into_iter()
        .map(|(k, v): (&str, OsString)| (k.to_owned(), v))
        .collect()
    }

    /// `vetto ARGS…` as the test user, cwd P, nothing added.
    pub fn vetto(&self, args: &[&str]) -> Run {
        let mut argv: Vec<OsString> = vec![vetto_bin().into()];
        argv.extend(args.iter().map(OsString::from));
        Run {
            argv,
            env: self.base_env(),
            cwd: self.project.clone(),
            stdin: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// `vetto run --tier TIER --project P [OPTIONS] -- ARGV` at the world's tier.
    pub fn sandboxed_with(&self, options: &[&str], argv: &[&str]) -> Run {
        self.sandboxed_at(self.tier.name(), options, argv)
    }

    /// `vetto run --tier TIER --project P [OPTIONS] -- ARGV`.
    pub fn sandboxed_at(&self, tier: &str, options: &[&str], argv: &[&str]) -> Run {
        self.sandboxed_in(&self.project, tier, options, argv)
    }

    /// The same for another project of this world's user, run from it.
    pub fn sandboxed_in(&self, project: &Path, tier: &str, options: &[&str], argv: &[&str]) -> Run {
        let dir = project.to_str().unwrap();
        let mut args = vec!["run", "--tier", tier, "--project", dir];
        if tier == self.tier.name() {
            args.extend_from_slice(self.tier.options());
        }
        args.extend_from_slice(options);
        args.push("--");
        args.extend_from_slice(argv);
        self.vetto(&args).cwd(project)
    }

    pub fn sandboxed(&self, argv: &[&str]) -> Run {
        self.sandboxed_with(&[], argv)
    }

    /// The same command, same user, same environment, same cwd, NO sandbox.
    pub fn bare(&self, argv: &[&str]) -> Run {
        Run {
            argv: argv.iter().map(OsString::from).collect(),
            env: self.base_env(),
            cwd: self.project.clone(),
            stdin: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    pub fn run_sandboxed(&self, argv: &[&str]) -> Out {
        self.sandboxed(argv).run()
    }

    pub fn run_bare(&self, argv: &[&str]) -> Out {
        self.bare(argv).run()
    }

    /// `sh -c SCRIPT` inside the sandbox.
    pub fn sh_sandboxed(&self, script: &str) -> Out {
        self.run_sandboxed(&["sh", "-c", script])
    }

    /// `sh -c SCRIPT` bare.
    pub fn sh_bare(&self, script: &str) -> Out {
        self.run_bare(&["sh", "-c", script])
    }

    /// `vetto ci --tier TIER --project P -- sh -c SCRIPT` at the world's
    /// tier, reports in the project's default place, and the session log
    /// there (empty when there is none).
    pub fn ci_sh(&self, script: &str) -> (Out, String) {
        self.ci_sh_with(&[], script)
    }

    /// The same with `options` before the command.
    pub fn ci_sh_with(&self, options: &[&str], script: &str) -> (Out, String) {
        let project = self.project.to_str().unwrap_or_default();
        let mut args = vec!["ci", "--tier", self.tier.name(), "--project", project];
        args.extend_from_slice(self.tier.options());
        args.extend_from_slice(options);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let out = self.vetto(&args).run();
        let log = std::fs::read_to_string(self.project.join("vetto-report/session.jsonl"))
            .unwrap_or_default();
        (out, log)
    }

    /// `vetto __probe ARGS` inside the sandbox (the probe binary's directory
    /// is granted readable, nothing else is added).
    pub fn probe_sandboxed_with(&self, options: &[&str], args: &[&str]) -> Probe {
        self.probe_sandboxed_at(self.tier.name(), options, args)
    }

    /// The same at another tier.
    pub fn probe_sandboxed_at(&self, tier: &str, options: &[&str], args: &[&str]) -> Probe {
        let bin_dir = vetto_bin_dir().to_str().unwrap();
        let mut opts = vec!["--allow-read", bin_dir];
        opts.extend_from_slice(options);
        let mut argv = vec![vetto_bin().to_str().unwrap(), PROBE];
        argv.extend_from_slice(args);
        Probe::from_out(self.sandboxed_at(tier, &opts, &argv).run())
    }

    pub fn probe_sandboxed(&self, args: &[&str]) -> Probe {
        self.probe_sandboxed_with(&[], args)
    }

    /// `vetto __probe ARGS` bare.
    pub fn probe_bare(&self, args: &[&str]) -> Probe {
        let mut argv = vec![vetto_bin().to_str().unwrap(), PROBE];
        argv.extend_from_slice(args);
        Probe::from_out(self.bare(&argv).run())
    }

    /// Start `sleep` outside the sandbox as the test user, with `env` added.
    pub fn outside_sleep(&self, env: &[(&str, &str)]) -> Outside {
        let marker = unique_sleep_arg();
        let mut c = Command::new("sleep");
        c.arg(&marker)
            .env_clear()
            .envs(self.base_env())
            .envs(env.iter().copied())
            .current_dir(&self.outside);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        as_user(&mut c);
        let child = c.spawn().unwrap();
        let o = Outside { child, marker };
        assert!(
            eventually(Duration::from_secs(5), || o.alive()),
            "the outside sleep did not start"
        );
        o
    }

    /// Create a file (and its parents) owned by the test user.
    pub fn write(&self, path: &Path, body: &str) {
        write_file(path, body);
        let mut p = path.to_path_buf();
        while p.starts_with(&self.root) {
            chown_to_user(&p);
            if !p.pop() {
                break;
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if std::env::var_os("VETTO_TEST_KEEP").is_some() {
            eprintln!("kept world of {}: {}", self.name, self.root.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn write_file(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

/// Read a file the test planted, or `None` if it is gone.
pub fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Deterministic pseudo-random bytes (xorshift), for binary-safe streaming.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
