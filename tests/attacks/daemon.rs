//! Leaving a daemon behind: a job that double-forks and `setsid`s outlives
//! the session and keeps running unsupervised (a miner, a reverse shell, a
//! process that waits for the next job's secrets).

use std::time::Duration;

use crate::require;
use crate::util::{Feature, World, alive_with, eventually, unique_sleep_arg};

/// Runs as an unprivileged user: `setsid sh -c "sleep & echo $! > P/daemon.pid" &`
/// (its stdio detached, as daemons do) and the job exits at once. Evidence: bare, the daemon is alive after the
/// command returned; sandboxed, it is gone once vetto has exited.
#[test]
fn daemon_does_not_survive_the_session() {
    require!(Feature::FsOnly);
    let w = World::new();
    let marker = unique_sleep_arg();
    let pidfile = w.project.join("src/daemon.pid");
    let script = format!(
        "setsid sh -c 'sleep {marker} </dev/null >/dev/null 2>&1 & echo $! > \"{}\"' & wait; echo started",
        pidfile.display()
    );
    let read_pid = || -> i32 {
        assert!(
            eventually(Duration::from_secs(5), || std::fs::read_to_string(&pidfile)
                .is_ok_and(|s| s.ends_with('\n'))),
            "no pid file"
        );
        std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };

    w.sh_bare(&script).assert_success();
    let bare_pid = read_pid();
    assert!(
        alive_with(bare_pid, &marker),
        "control: the bare daemon is not running"
    );
    crate::util::send_signal(bare_pid, libc::SIGKILL);
    std::fs::remove_file(&pidfile).unwrap();

    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("started");
    let pid = read_pid();
    assert!(
        eventually(Duration::from_secs(5), || !alive_with(pid, &marker)),
        "the daemon {pid} survived the session\n{}",
        out.dump()
    );
    assert!(
        crate::util::pids_with(&marker).is_empty(),
        "a process of the session survived\n{}",
        out.dump()
    );
}
