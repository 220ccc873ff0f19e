//! The seccomp-notify supervisor against real jobs: a child process gets a
//! hand-built notify filter (and, for the carve tests, a Landlock ruleset
//! like the FS-ONLY tier's carve), the supervisor answers, and the tests
//! check both the decisions and what actually happened on disk or on the
//! socket.
//!
//! Children that need more than `sh` re-execute this test binary into
//! [`zz_child_helper`] with `VETTO_NOTIFY_HELPER` set.
// Seccomp user notification and Landlock are Linux kernel interfaces.
#![cfg(target_os = "linux")]
#![expect(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vetto::plan::fs::{CarvedDir, NotifyPlan};
use vetto::policy::Access;
use vetto::sandbox::notify::Call;
use vetto::sandbox::notify::testing::{
    landlock_pre_exec, race_connect, race_rename, spawn_notified,
};
use vetto::supervisor::notify::{Decision, NotifyEvent, Reason, serve};

#[path = "util/skip.rs"]
mod skip;

const CREATION: &[Call] = &[
    Call::Open,
    Call::Openat,
    Call::Creat,
    Call::Mkdir,
    Call::Mkdirat,
    Call::Rename,
    Call::Renameat,
    Call::Renameat2,
    Call::Unlink,
    Call::Unlinkat,
    Call::Rmdir,
    Call::Symlink,
    Call::Symlinkat,
];

const EACCES: i32 = 13;
const EPERM: i32 = 1;

/// Print `SKIP`, or fail when CI says the feature must be there
/// (`VETTO_TEST_REQUIRE=landlock-abi>=6,seccomp-notify`, or `all`; as in
/// `tests/util`, an empty value requires nothing).
fn skip_feature(test: &str, feature: &str, reason: &str) {
    assert!(
        !skip::listed(feature),
        "{test}: required feature {feature} missing: {reason}"
    );
    skip::say(test, reason);
}

fn skip(test: &str, reason: &str) {
    skip_feature(test, "seccomp-notify", reason);
}

struct Job {
    output: Output,
    events: Vec<NotifyEvent>,
}

impl Job {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn result_line(&self) -> String {
        self.stdout()
            .lines()
            .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r.to_string()))
            .unwrap_or_else(|| {
                panic!(
                    "no RESULT line in {:?} / {:?}",
                    self.stdout(),
                    String::from_utf8_lossy(&self.output.stderr)
                )
            })
    }

    fn events_for(&self, path_suffix: &str) -> Vec<&NotifyEvent> {
        self.events
            .iter()
            .filter(|e| {
                e.path
                    .as_ref()
                    .is_some_and(|p| p.to_string_lossy().ends_with(path_suffix))
            })
            .collect()
    }
}

/// Run `command` under a notify filter for `calls`, answered by the
/// supervisor with `plan`. `None` when the kernel lacks a feature (skipped).
fn run(test: &str, mut command: Command, calls: &[Call], plan: &NotifyPlan) -> Option<Job> {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (child, listener) = match spawn_notified(&mut command, calls) {
        Ok(pair) => pair,
        Err(e) => {
            skip(
                test,
                &format!("cannot install a seccomp notify filter: {e}"),
            );
            return None;
        }
    };
    let (tx, rx) = mpsc::channel();
    let server = serve(listener, plan, None, None, tx).expect("serve");
    let output = child.wait_with_output().expect("wait");
    server.join().expect("workers end when the job is gone");
    Some(Job {
        output,
        events: rx.try_iter().collect(),
    })
}

/// A project with `.git/{hooks/pre-commit,config,HEAD}` and `src/`.
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("proj");
    std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::write(p.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(p.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(p.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
    (dir, p)
}

fn carve_plan(p: &Path) -> NotifyPlan {
    NotifyPlan {
        carved_dirs: vec![
            CarvedDir {
                path: p.to_path_buf(),
                protected_names: vec![".git".into()],
            },
            CarvedDir {
                path: p.join(".git"),
                protected_names: vec!["hooks".into(), "config".into()],
            },
        ],
        broker_unix_connect: false,
        rules: vec![],
        ..NotifyPlan::default()
    }
}

/// `sh -c script` in `p`, with Landlock carving like the FS-ONLY tier:
/// everything readable, `p` and `p/.git` read-only, `p/src` writable.
fn carved_sh(p: &Path, script: &str) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script).current_dir(p);
    landlock_pre_exec(
        &mut cmd,
        &[Path::new("/")],
        &[&p.join("src"), Path::new("/dev/null")],
    )
    .expect("landlock ruleset");
    cmd
}

fn landlock_works(test: &str) -> bool {
    let mut cmd = Command::new("/bin/true");
    if landlock_pre_exec(&mut cmd, &[Path::new("/")], &[]).is_err()
        || !cmd.status().is_ok_and(|s| s.success())
    {
        skip_feature(test, "landlock", "Landlock is not available");
        return false;
    }
    true
}

/// The project of [`project`] when Landlock can carve it; `None` (skipped)
/// when it cannot.
fn carved_project(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    landlock_works(test).then(project)
}

/// `script` under [`carved_sh`]'s carve, its creations answered with `plan`.
fn run_carved(test: &str, p: &Path, script: &str, plan: &NotifyPlan) -> Option<Job> {
    run(test, carved_sh(p, script), CREATION, plan)
}

/// [`helper`] `action` in `p` with nothing but `/dev/null` writable to
/// Landlock: every write in `p` is the supervisor's.
fn carved_helper(action: &str, p: &Path) -> Command {
    let mut cmd = helper(action, &[]);
    cmd.current_dir(p);
    landlock_pre_exec(&mut cmd, &[Path::new("/")], &[Path::new("/dev/null")]).unwrap();
    cmd
}

/// The permission bits of `path`.
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn carve_alone_denies_new_top_level_entries() {
    let test = "carve_alone_denies_new_top_level_entries";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    let out = carved_sh(&p, "mkdir newdir; touch newfile; echo src > src/ok")
        .output()
        .unwrap();
    assert!(
        !p.join("newdir").exists(),
        "Landlock carve let mkdir through"
    );
    assert!(
        !p.join("newfile").exists(),
        "Landlock carve let touch through"
    );
    assert!(
        p.join("src/ok").exists(),
        "the writable subdir must stay writable: {out:?}"
    );
}

/// The carve plan with `p` writable and `p/src/ro` read-only: creations
/// in `p/src/ro` are refusals vetto names.
fn plan_with_read_only_below(p: &Path) -> NotifyPlan {
    let mut plan = carve_plan(p);
    plan.rules = vec![
        (p.to_path_buf(), Access::Write),
        (p.join("src/ro"), Access::Read),
    ];
    plan
}

fn outside_policy(job: &Job, suffix: &str) -> usize {
    job.events_for(suffix)
        .iter()
        .filter(|e| e.reason == Reason::OutsidePolicy)
        .count()
}

#[test]
fn refused_writes_are_named_after_many_writes_around_them() {
    let test = "refused_writes_are_named_after_many_writes_around_them";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    std::fs::create_dir_all(p.join("src/ro")).unwrap();
    std::fs::create_dir_all(p.join("src/w")).unwrap();
    // Writable directories are remembered after their first creation; a
    // directory with a read-only rule below it never is, and the rule's
    // own directory refuses every name in it.
    let script = "for i in 1 2 3 4 5 6; do : > src/w/f$i; : > src/g$i; done; \
                  : > src/ro/first; : > src/w/f7; : > src/ro/second; cd src && : > ro/third";
    let Some(job) = run_carved(test, &p, script, &plan_with_read_only_below(&p)) else {
        return;
    };
    for name in ["src/ro/first", "src/ro/second", "src/ro/third"] {
        assert_eq!(
            outside_policy(&job, name),
            1,
            "{name} is named as refused: {:?}",
            job.events
        );
    }
    assert_eq!(
        job.events
            .iter()
            .filter(|e| e.reason == Reason::OutsidePolicy)
            .count(),
        3,
        "no write the policy allows is named: {:?}",
        job.events
    );
}

#[test]
fn creation_in_a_missing_directory_is_not_named_as_refused() {
    let test = "creation_in_a_missing_directory_is_not_named_as_refused";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    std::fs::create_dir_all(p.join("src/ro")).unwrap();
    // The kernel answers ENOENT before any permission is checked: nothing
    // was refused. The same name once the directory exists is.
    let script = "touch src/ro/missing/x; mkdir src/ro/missing";
    let Some(job) = run_carved(test, &p, script, &plan_with_read_only_below(&p)) else {
        return;
    };
    assert_eq!(
        outside_policy(&job, "src/ro/missing/x"),
        0,
        "{:?}",
        job.events
    );
    assert_eq!(
        outside_policy(&job, "src/ro/missing"),
        1,
        "the mkdir in the read-only directory is named: {:?}",
        job.events
    );
}

#[test]
fn mkdir_touch_mv_rm_in_carved_dir_are_performed_by_the_supervisor() {
    let test = "mkdir_touch_mv_rm_in_carved_dir_are_performed_by_the_supervisor";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    let script = "set -e; umask 027; mkdir newdir; touch newfile; echo hi > data; mv newfile renamed; \
                  ln -s data link; rm link renamed; rmdir newdir/; mkdir keep; \
                  mkdir d1 && mv d1/ d2/ && rmdir d2 && ! mv data/ data2 2>/dev/null; \
                  echo more >> data; echo again > data; \
                  cd .git && touch index.lock && mv index.lock index && echo RESULT ok";
    let Some(job) = run_carved(test, &p, script, &carve_plan(&p)) else {
        return;
    };
    assert_eq!(
        job.result_line(),
        "ok",
        "stderr: {}",
        String::from_utf8_lossy(&job.output.stderr)
    );
    for (suffix, call_prefix) in [
        ("newdir", "mkdir"),
        ("newfile", "open"),
        ("data", "open"),
        ("link", "symlink"),
        ("renamed", "unlink"),
        ("index.lock", "open"),
    ] {
        let events = job.events_for(suffix);
        assert!(
            events
                .iter()
                .any(|e| e.decision == Decision::Emulated && e.syscall.starts_with(call_prefix)),
            "{suffix}: expected an emulated {call_prefix}*, got {events:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(p.join("data")).unwrap(), "again\n");
    assert!(!p.join("renamed").exists() && !p.join("newdir").exists() && !p.join("link").exists());
    assert!(p.join(".git/index").exists());
    assert!(!p.join("data2").exists() && !p.join("d2").exists() && !p.join("d1").exists());
    let mode = mode_of(&p.join("keep"));
    assert_eq!(mode, 0o750, "the job's umask (027) decides the mode");
}

#[test]
fn renaming_or_shadowing_dot_git_is_left_to_landlock_and_fails() {
    let test = "renaming_or_shadowing_dot_git_is_left_to_landlock_and_fails";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    std::fs::hard_link(p.join(".git/config"), p.join("cfglink")).unwrap();
    let script = "echo x >> cfglink; echo x > cfglink; mv cfglink .git/config; \
                  mv .git .git-old; mkdir .GIT; touch .Git.; rm -rf .git; \
                  cd .git; mv hooks h2; mv config c2; mkdir HOOKS; ln -s /tmp config; \
                  touch hooks/post-checkout; echo x >> config; echo RESULT done";
    let Some(job) = run_carved(test, &p, script, &carve_plan(&p)) else {
        return;
    };
    assert_eq!(job.result_line(), "done");
    assert!(p.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!p.join(".git-old").exists() && !p.join(".GIT").exists() && !p.join(".Git.").exists());
    assert!(!p.join(".git/hooks/post-checkout").exists() && !p.join(".git/HOOKS").exists());
    assert!(!p.join(".git/h2").exists() && !p.join(".git/c2").exists());
    for name in [".git", ".GIT", ".Git.", "hooks", "config", "HOOKS"] {
        let protected_hit = job.events.iter().any(|e| {
            e.reason == Reason::Protected && e.path.as_ref().is_some_and(|p| p.ends_with(name))
        });
        assert!(
            protected_hit,
            "no protected-name event for {name}: {:?}",
            job.events
        );
    }
    // `rm -rf .git` may empty unprotected entries of .git (HEAD here):
    // that is the carve's design; what matters is above.
}

#[test]
fn emulated_open_keeps_the_jobs_flags() {
    let test = "emulated_open_keeps_the_jobs_flags";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    let Some(job) = run(
        test,
        carved_helper("open-flags", &p),
        CREATION,
        &carve_plan(&p),
    ) else {
        return;
    };
    // std opens with O_CLOEXEC: it must arrive as the descriptor flag.
    assert_eq!(
        job.result_line(),
        "append=true nonblock=true wronly=true cloexec=true"
    );
    assert!(
        job.events_for("flags-file")
            .iter()
            .any(|e| e.decision == Decision::Emulated)
    );
    let mode = mode_of(&p.join("flags-file"));
    assert_eq!(mode, 0o600, "0o640 under the job's umask 077");
}

#[test]
fn move_out_of_carved_dir_gets_exdev_and_mv_falls_back() {
    let test = "move_out_of_carved_dir_gets_exdev_and_mv_falls_back";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    std::fs::write(p.join("src/f"), "content").unwrap();
    let script = "set -e; mv src/f moved; echo RESULT ok";
    let Some(job) = run_carved(test, &p, script, &carve_plan(&p)) else {
        return;
    };
    assert_eq!(
        job.result_line(),
        "ok",
        "{}",
        String::from_utf8_lossy(&job.output.stderr)
    );
    assert_eq!(std::fs::read_to_string(p.join("moved")).unwrap(), "content");
    assert!(!p.join("src/f").exists());
    assert!(job.events.iter().any(|e| e.reason == Reason::CrossCarve));
}

#[test]
fn racing_thread_flipping_rename_source_never_moves_dot_git() {
    let test = "racing_thread_flipping_rename_source_never_moves_dot_git";
    let Some((_tmp, p)) = carved_project(test) else {
        return;
    };
    std::fs::write(p.join("plain"), "x").unwrap();
    let Some(job) = run(
        test,
        carved_helper("race-rename", &p),
        CREATION,
        &carve_plan(&p),
    ) else {
        return;
    };
    let line = job.result_line();
    eprintln!("race-rename: {line}");
    assert!(
        p.join(".git/config").exists() && p.join(".git/hooks/pre-commit").exists(),
        "{line}"
    );
    assert!(
        !p.join("parked/config").exists(),
        ".git was renamed ({line})"
    );
    assert!(
        job.events.iter().any(|e| e.reason == Reason::Protected),
        "the race never tried .git"
    );
    assert!(
        job.events.iter().any(|e| e.decision == Decision::Emulated),
        "the race never renamed plain"
    );
}

// ----- unix sockets -------------------------------------------------------

fn helper(action: &str, args: &[&Path]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "zz_child_helper",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("VETTO_NOTIFY_HELPER", action);
    for (i, a) in args.iter().enumerate() {
        cmd.env(format!("VETTO_NOTIFY_ARG{i}"), a);
    }
    cmd
}

fn socket_plan(allowed_dir: &Path) -> NotifyPlan {
    NotifyPlan {
        carved_dirs: vec![],
        broker_unix_connect: true,
        rules: vec![
            (PathBuf::from("/"), Access::Read),
            (allowed_dir.to_path_buf(), Access::Write),
        ],
        ..NotifyPlan::default()
    }
}

/// Accept one connection within `wait`, answer "pong" to what it sends.
fn serve_once(listener: UnixListener, wait: Duration) -> std::thread::JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let mut buf = [0u8; 4];
                    s.read_exact(&mut buf).unwrap();
                    s.write_all(b"pong").unwrap();
                    return Some(String::from_utf8_lossy(&buf).into_owned());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        None
    })
}

/// Counts connections that reach `listener` until `stop` is set.
fn count_connections(
    listener: UnixListener,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let mut n = 0;
        loop {
            match listener.accept() {
                Ok(_) => n += 1,
                Err(_) if s.load(Ordering::Relaxed) => return n,
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    (stop, handle)
}

#[test]
fn connect_to_socket_in_writable_dir_is_brokered_and_carries_data() {
    let test = "connect_to_socket_in_writable_dir_is_brokered_and_carries_data";
    let allowed = tempfile::tempdir().unwrap();
    let sock = allowed.path().join("app.sock");
    let server = serve_once(UnixListener::bind(&sock).unwrap(), Duration::from_secs(20));
    let Some(job) = run(
        test,
        helper("connect", &[&sock]),
        &[Call::Connect],
        &socket_plan(allowed.path()),
    ) else {
        return;
    };
    assert_eq!(job.result_line(), "ok pong");
    assert_eq!(server.join().unwrap().as_deref(), Some("ping"));
    assert!(
        job.events
            .iter()
            .any(|e| e.reason == Reason::SocketAllowed && e.decision == Decision::Emulated)
    );
}

#[test]
fn relative_socket_path_is_resolved_from_the_jobs_cwd() {
    let test = "relative_socket_path_is_resolved_from_the_jobs_cwd";
    let allowed = tempfile::tempdir().unwrap();
    let sock = allowed.path().join("rel.sock");
    let server = serve_once(UnixListener::bind(&sock).unwrap(), Duration::from_secs(20));
    let mut cmd = helper("connect", &[Path::new("rel.sock")]);
    cmd.current_dir(allowed.path());
    let Some(job) = run(test, cmd, &[Call::Connect], &socket_plan(allowed.path())) else {
        return;
    };
    assert_eq!(job.result_line(), "ok pong");
    assert_eq!(server.join().unwrap().as_deref(), Some("ping"));
}

#[test]
fn ssh_agent_socket_outside_policy_gets_eacces_and_sees_no_connection() {
    let test = "ssh_agent_socket_outside_policy_gets_eacces_and_sees_no_connection";
    let allowed = tempfile::tempdir().unwrap();
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_dir.path().join("agent.sock");
    let (stop, counter) = count_connections(UnixListener::bind(&agent).unwrap());
    // A symlink inside the writable dir must not help either.
    let link = allowed.path().join("innocent.sock");
    std::os::unix::fs::symlink(&agent, &link).unwrap();
    let plan = socket_plan(allowed.path());
    let Some(direct) = run(test, helper("connect", &[&agent]), &[Call::Connect], &plan) else {
        return;
    };
    let via_link = run(test, helper("connect", &[&link]), &[Call::Connect], &plan).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(direct.result_line(), format!("errno {EACCES}"));
    assert_eq!(via_link.result_line(), format!("errno {EACCES}"));
    assert_eq!(counter.join().unwrap(), 0, "the agent saw a connection");
    assert!(
        direct
            .events
            .iter()
            .any(|e| e.decision == Decision::Denied(EACCES) && e.reason == Reason::SocketOutside)
    );
}

/// A listener outside the job, as a host's D-Bus or X11 abstract socket is:
/// held by a process that is no descendant of this one. (Held by this test
/// process, any child another test forks in parallel holds it too until it
/// execs, and the supervisor rightly takes that child for the job's own.)
/// Started as a helper that starts the listening helper and exits, leaving
/// it to init; it prints `READY` once listening, `COUNT n` when `stop`
/// exists.
struct OutsideListener {
    out: std::io::BufReader<std::process::ChildStdout>,
    stop: PathBuf,
}

impl OutsideListener {
    fn start(name: &str, dir: &Path) -> OutsideListener {
        let stop = dir.join("stop");
        let mut starter = helper("abstract-outsider", &[Path::new(name), &stop])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(starter.stdout.take().unwrap());
        // The starter is gone (its child re-parented away from us) …
        assert!(starter.wait().unwrap().success());
        // … and the listener listens (the lines before are libtest's).
        loop {
            let mut line = String::new();
            let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
            assert!(n > 0, "the listener ended before listening");
            // libtest's `test zz_child_helper ... ` shares the line.
            if line.trim_end().ends_with("READY") {
                break;
            }
        }
        OutsideListener { out, stop }
    }

    /// Stop it and return how many connections it accepted.
    fn connections(&mut self) -> u64 {
        std::fs::write(&self.stop, "").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
        rest.lines()
            .find_map(|l| l.split_once("COUNT ").map(|(_, n)| n))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count from the listener: {rest:?}"))
    }
}

impl Drop for OutsideListener {
    /// A failed test does not leave the listener running.
    fn drop(&mut self) {
        let _ = std::fs::write(&self.stop, "");
    }
}

#[test]
fn abstract_socket_connect_is_refused_not_continued() {
    let test = "abstract_socket_connect_is_refused_not_continued";
    let allowed = tempfile::tempdir().unwrap();
    let name = format!("vetto-test-{}", std::process::id());
    if std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).is_err() {
        skip(test, "abstract socket addresses unsupported");
        return;
    }
    let mut listener = OutsideListener::start(&name, allowed.path());
    let Some(job) = run(
        test,
        helper("connect-abstract", &[Path::new(&name)]),
        &[Call::Connect],
        &socket_plan(allowed.path()),
    ) else {
        return;
    };
    assert_eq!(
        listener.connections(),
        0,
        "the outside listener saw a connection"
    );
    assert_eq!(job.result_line(), format!("errno {EACCES}"));
}

#[test]
fn jobs_own_abstract_socket_still_works() {
    let test = "jobs_own_abstract_socket_still_works";
    let allowed = tempfile::tempdir().unwrap();
    let Some(job) = run(
        test,
        helper("abstract-self", &[]),
        &[Call::Connect],
        &socket_plan(allowed.path()),
    ) else {
        return;
    };
    assert_eq!(job.result_line(), "ok pong");
    assert!(
        job.events
            .iter()
            .any(|e| e.reason == Reason::SocketAbstract && e.decision == Decision::Emulated)
    );
}

#[test]
fn blocked_connects_to_a_full_backlog_do_not_stall_other_calls() {
    let test = "blocked_connects_to_a_full_backlog_do_not_stall_other_calls";
    let (_tmp, p) = project();
    let sock = p.join("src/full.sock");
    // Never accepts: after the backlog fills, blocking connects wait.
    let listener = UnixListener::bind(&sock).unwrap();
    let mut plan = carve_plan(&p);
    plan.broker_unix_connect = true;
    plan.rules = vec![(p.clone(), Access::Write)];
    let mut calls = CREATION.to_vec();
    calls.push(Call::Connect);
    let mut cmd = helper("stall", &[&sock]);
    cmd.current_dir(&p);
    let Some(job) = run(test, cmd, &calls, &plan) else {
        return;
    };
    drop(listener);
    assert_eq!(job.result_line(), "ok");
    assert!(p.join("after-stall").is_dir());
}

#[test]
fn non_dumpable_job_fails_closed_with_eperm() {
    let test = "non_dumpable_job_fails_closed_with_eperm";
    if nix::unistd::geteuid().is_root() {
        // CAP_SYS_PTRACE reads non-dumpable processes: nothing to fail
        // closed on in-process. As root (CI), the same protection runs end
        // to end as `tester` in tests/cli.rs.
        skip::say(
            test,
            "the supervisor runs as root; covered as tester by \
             attacks::egress::a_non_dumpable_job_cannot_connect_past_the_supervisor_at_fs_only",
        );
        return;
    }
    let allowed = tempfile::tempdir().unwrap();
    let sock = allowed.path().join("app.sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    let Some(job) = run(
        test,
        helper("connect-nondumpable", &[&sock]),
        &[Call::Connect],
        &socket_plan(allowed.path()),
    ) else {
        return;
    };
    assert_eq!(job.result_line(), format!("errno {EPERM}"));
    assert!(
        job.events
            .iter()
            .any(|e| e.decision == Decision::Denied(EPERM) && e.reason == Reason::Unreadable)
    );
}

#[test]
fn racing_thread_flipping_sockaddr_never_reaches_denied_socket() {
    let test = "racing_thread_flipping_sockaddr_never_reaches_denied_socket";
    let allowed = tempfile::tempdir().unwrap();
    let agent_dir = tempfile::tempdir().unwrap();
    let good = allowed.path().join("ok.sock");
    let bad = agent_dir.path().join("agent.sock");
    let (stop_good, good_count) = count_connections(UnixListener::bind(&good).unwrap());
    let (stop_bad, bad_count) = count_connections(UnixListener::bind(&bad).unwrap());
    let Some(job) = run(
        test,
        helper("race", &[&good, &bad]),
        &[Call::Connect],
        &socket_plan(allowed.path()),
    ) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(200));
    stop_good.store(true, std::sync::atomic::Ordering::Relaxed);
    stop_bad.store(true, std::sync::atomic::Ordering::Relaxed);
    let line = job.result_line();
    eprintln!("race: {line}");
    assert_eq!(
        bad_count.join().unwrap(),
        0,
        "a flipped address reached the denied socket ({line})"
    );
    // Control: without the supervisor the same child does reach it, so the
    // zero above is evidence, not a race that never happened.
    let control = agent_dir.path().join("b2.sock");
    let (stop_ctl, ctl_count) = count_connections(UnixListener::bind(&control).unwrap());
    let out = helper("race", &[&good, &control]).output().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    stop_ctl.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(out.status.success());
    assert!(
        ctl_count.join().unwrap() > 0,
        "control: the unsupervised race never reached the socket"
    );
    let _ = good_count.join().unwrap();
    assert!(
        job.events
            .iter()
            .any(|e| e.decision == Decision::Denied(EACCES)),
        "the race never tried the denied path"
    );
}

#[test]
fn racing_symlink_swap_never_reaches_denied_socket() {
    let test = "racing_symlink_swap_never_reaches_denied_socket";
    let allowed = tempfile::tempdir().unwrap();
    let agent_dir = tempfile::tempdir().unwrap();
    let good = allowed.path().join("ok.sock");
    let bad = agent_dir.path().join("agent.sock");
    let link = allowed.path().join("link.sock");
    let (stop_good, good_count) = count_connections(UnixListener::bind(&good).unwrap());
    let (stop_bad, bad_count) = count_connections(UnixListener::bind(&bad).unwrap());
    let Some(job) = run(
        test,
        helper("race-symlink", &[&link, &good, &bad]),
        &[Call::Connect],
        &socket_plan(allowed.path()),
    ) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(200));
    stop_good.store(true, std::sync::atomic::Ordering::Relaxed);
    stop_bad.store(true, std::sync::atomic::Ordering::Relaxed);
    let line = job.result_line();
    eprintln!("race-symlink: {line}");
    assert_eq!(
        bad_count.join().unwrap(),
        0,
        "a swapped symlink reached the denied socket ({line})"
    );
    assert!(
        good_count.join().unwrap() > 0,
        "the race never connected through the link ({line})"
    );
    assert!(
        job.events
            .iter()
            .any(|e| e.decision == Decision::Denied(EACCES)),
        "the race never hit the denied target"
    );
}

/// Not a test: the body of the child processes above (re-executed with
/// `VETTO_NOTIFY_HELPER`); without it, it does nothing.
#[test]
fn zz_child_helper() {
    let Some(action) = std::env::var_os("VETTO_NOTIFY_HELPER") else {
        return;
    };
    let arg = |i: usize| PathBuf::from(std::env::var_os(format!("VETTO_NOTIFY_ARG{i}")).unwrap());
    let ping = |s: std::io::Result<std::os::unix::net::UnixStream>| match s {
        Ok(mut s) => {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"ping").unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).unwrap();
            println!("RESULT ok {}", String::from_utf8_lossy(&buf));
        }
        Err(e) => println!("RESULT errno {}", e.raw_os_error().unwrap_or(-1)),
    };
    match action.to_str().unwrap() {
        "connect" => ping(std::os::unix::net::UnixStream::connect(arg(0))),
        "connect-nondumpable" => {
            nix::sys::prctl::set_dumpable(false).unwrap();
            ping(std::os::unix::net::UnixStream::connect(arg(0)));
        }
        "abstract-outsider" => {
            // Start the listener and leave it behind (to init).
            let mut cmd = helper("abstract-listen", &[&arg(0), &arg(1)]);
            cmd.stdin(std::process::Stdio::null());
            // Left to init on purpose: this process exits at once, so the
            // listener is re-parented away from the test's process tree
            // (and reaped there).
            #[expect(clippy::zombie_processes, reason = "re-parented and reaped by init")]
            let _ = cmd.spawn().unwrap();
        }
        "abstract-listen" => {
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(
                arg(0).as_os_str().as_encoded_bytes(),
            )
            .unwrap();
            let listener = UnixListener::bind_addr(&addr).unwrap();
            listener.set_nonblocking(true).unwrap();
            println!("READY");
            std::io::stdout().flush().unwrap();
            let stop = arg(1);
            // A hang guard only: the test stops it long before.
            let deadline = std::time::Instant::now() + Duration::from_secs(300);
            let mut n = 0u64;
            while !stop.exists() && std::time::Instant::now() < deadline {
                match listener.accept() {
                    Ok(_) => n += 1,
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            // Whatever came in before the stop.
            while listener.accept().is_ok() {
                n += 1;
            }
            println!("COUNT {n}");
        }
        "connect-abstract" => {
            let name = arg(0);
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(
                name.as_os_str().as_encoded_bytes(),
            )
            .unwrap();
            ping(std::os::unix::net::UnixStream::connect_addr(&addr));
        }
        "bench-mkdir" => {
            let n: usize = std::env::var("VETTO_NOTIFY_N").unwrap().parse().unwrap();
            let times = timed(n, || {
                std::fs::create_dir("bench-d").unwrap();
                std::fs::remove_dir("bench-d").unwrap();
            });
            println!("RESULT {}", summary(times));
        }
        "bench-connect" => {
            let n: usize = std::env::var("VETTO_NOTIFY_N").unwrap().parse().unwrap();
            let path = arg(0);
            let times = timed(n, || {
                let _ = std::os::unix::net::UnixStream::connect(&path);
            });
            println!("RESULT {}", summary(times));
        }
        "abstract-self" => {
            let name = format!("vetto-self-{}", std::process::id());
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
            let listener = UnixListener::bind_addr(&addr).unwrap();
            let server = serve_once(listener, Duration::from_secs(10));
            ping(std::os::unix::net::UnixStream::connect_addr(&addr));
            let _ = server.join();
        }
        "stall" => {
            let path = arg(0);
            for _ in 0..5 {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut keep = Vec::new();
                    while let Ok(s) = std::os::unix::net::UnixStream::connect(&path) {
                        keep.push(s);
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(500));
            std::fs::create_dir("after-stall").unwrap();
            println!("RESULT ok");
            std::process::exit(0);
        }
        "open-flags" => {
            use std::os::unix::fs::OpenOptionsExt;
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
            let f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .mode(0o640)
                .open("flags-file")
                .unwrap();
            let fl = nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETFL).unwrap();
            let fd = nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETFD).unwrap();
            let append = fl & nix::libc::O_APPEND != 0;
            let nonblock = fl & nix::libc::O_NONBLOCK != 0;
            let wronly = fl & nix::libc::O_ACCMODE == nix::libc::O_WRONLY;
            let cloexec = fd & nix::libc::FD_CLOEXEC != 0;
            println!(
                "RESULT append={append} nonblock={nonblock} wronly={wronly} cloexec={cloexec}"
            );
        }
        "race-symlink" => {
            // arg0: the link to connect through, arg1/arg2: its two targets.
            let (link, good, bad) = (arg(0), arg(1), arg(2));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = stop.clone();
            let flipper = std::thread::spawn(move || {
                let tmp = link.with_extension("tmp");
                let mut flip = false;
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::remove_file(&tmp);
                    let target = if flip { &good } else { &bad };
                    if std::os::unix::fs::symlink(target, &tmp).is_ok() {
                        let _ = std::fs::rename(&tmp, &link);
                    }
                    flip = !flip;
                }
            });
            let deadline = Instant::now() + Duration::from_secs(2);
            let (mut tries, mut ok) = (0u64, 0u64);
            while Instant::now() < deadline {
                tries += 1;
                if std::os::unix::net::UnixStream::connect(arg(0)).is_ok() {
                    ok += 1;
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = flipper.join();
            println!("RESULT tries {tries} connected {ok}");
        }
        "race-rename" => {
            let tries = race_rename("plain", ".git", "parked", 2.0).unwrap();
            println!("RESULT tries {tries}");
        }
        "race" => {
            let r = race_connect(&arg(0), &arg(1), 2.0).unwrap();
            println!("RESULT tries {} connected {}", r.tries, r.connected);
        }
        other => panic!("unknown helper action {other}"),
    }
}

fn timed(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let total: Duration = times.iter().sum();
    format!(
        "median {:.1} us, p90 {:.1} us, total {:.0} ms",
        us(times[times.len() / 2]),
        us(times[times.len() * 9 / 10]),
        total.as_secs_f64() * 1e3
    )
}

/// Costs for docs/notify.md: `cargo test --release --test notify
/// bench_notify_costs -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark (it asserts nothing: figures for docs/notify.md), run by hand with --release"]
fn bench_notify_costs() {
    let test = "bench_notify_costs";
    let n = std::env::var("VETTO_NOTIFY_N").unwrap_or_else(|_| "10000".into());
    // tmpfs when there is one, like the figures in the design notes.
    let base = std::env::var_os("VETTO_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"));
    let tmp = tempfile::tempdir_in(&base).unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let p = tmp.path().join("proj");
    std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(p.join("src")).unwrap();
    println!("bench dir: {}", p.display());
    let report = |what: &str, job: Option<Job>| {
        if let Some(job) = job {
            println!("{what:<44} {}", job.result_line());
        }
    };
    let bare = || {
        let mut cmd = helper("bench-mkdir", &[]);
        cmd.current_dir(&p).env("VETTO_NOTIFY_N", &n);
        cmd
    };
    let out = bare().output().unwrap();
    let job = Job {
        output: out,
        events: vec![],
    };
    println!(
        "{:<44} {}",
        "mkdir+rmdir bare (project root)",
        job.result_line()
    );
    let mut cmd = bare();
    landlock_pre_exec(&mut cmd, &[Path::new("/")], &[&p.join("src")]).unwrap();
    report(
        "mkdir+rmdir emulated (carved project root)",
        run(test, cmd, CREATION, &carve_plan(&p)),
    );
    let mut cmd = bare();
    cmd.current_dir(p.join("src"));
    landlock_pre_exec(&mut cmd, &[Path::new("/")], &[&p.join("src")]).unwrap();
    report(
        "mkdir+rmdir notified+continued (subdir)",
        run(test, cmd, CREATION, &carve_plan(&p)),
    );

    let allowed = tempfile::tempdir_in(&base).unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let sock = allowed.path().join("b.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            drop(s);
        }
    });
    let connect = || {
        let mut cmd = helper("bench-connect", &[&sock]);
        cmd.env("VETTO_NOTIFY_N", &n);
        cmd
    };
    let job = Job {
        output: connect().output().unwrap(),
        events: vec![],
    };
    println!("{:<44} {}", "unix connect bare", job.result_line());
    report(
        "unix connect brokered (allowed)",
        run(
            test,
            connect(),
            &[Call::Connect],
            &socket_plan(allowed.path()),
        ),
    );
    let outside = tempfile::tempdir().unwrap();
    report(
        "unix connect refused (outside policy)",
        run(
            test,
            connect(),
            &[Call::Connect],
            &socket_plan(outside.path()),
        ),
    );
}
