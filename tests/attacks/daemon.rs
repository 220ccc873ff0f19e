//! Leaving a daemon behind: a job that double-forks and `setsid`s outlives
//! the session and keeps running unsupervised (a miner, a reverse shell, a
//! process that waits for the next job's secrets).

use std::time::Duration;

use crate::util::{Tier, World, alive_with, eventually, unique_sleep_arg, violation_lines};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: `setsid sh -c "sleep & echo $! > P/daemon.pid" &`
/// (its stdio detached, as daemons do) and the job exits at once. Evidence: bare, the daemon is alive after the
/// command returned; sandboxed, it is gone once vetto has exited.
fn daemon_does_not_survive_the_session(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
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
    // At FULL `$!` is a pid of the sandbox's PID namespace; `alive_with`
    // then checks a host pid with the marker (false), and the marker scan
    // below is the evidence.
    let pid = read_pid();
    assert!(
        eventually(Duration::from_secs(5), || !alive_with(pid, &marker)),
        "the daemon {pid} survived the session\n{}",
        out.dump()
    );
    assert!(
        eventually(Duration::from_secs(5), || crate::util::pids_with(&marker)
            .is_empty()),
        "a process of the session survived\n{}",
        out.dump()
    );
}
at_every_tier!(daemon_does_not_survive_the_session);

/// Issue P10, item 3: an agent's own daemon (Codex's app-server, which
/// its TUI starts and its next start reuses) outlives the command as a
/// matter of course. Runs as an unprivileged user: the job leaves `sleep`
/// running. Without `[process] daemons` it is a `process-escaped` finding
/// (`vetto ci` exits 3); with `daemons = ["/usr/bin/sleep"]` it is killed
/// all the same, recorded as expected, and the session is CLEAN.
fn a_daemon_the_policy_expects_is_killed_and_no_finding(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let marker = unique_sleep_arg();
    let sleep = std::fs::canonicalize("/usr/bin/sleep").unwrap();
    // The job ends once its child is `sleep` (not the shell it forked
    // before the exec); the guard (1000 × 10 ms) only bounds a broken run.
    let script = format!(
        "sleep {marker} </dev/null >/dev/null 2>&1 & p=$!; n=0; \
         until [ \"$(readlink /proc/$p/exe)\" = '{}' ] || [ $n -ge 1000 ]; do sleep 0.01; n=$((n+1)); done; \
         echo started",
        sleep.display()
    );

    let (out, log) = w.ci_sh(&script);
    out.assert_stdout_contains("started");
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        violation_lines(&log)
            .iter()
            .any(|l| l.contains("\"process-escaped\"") && l.contains("\"blocked\"")),
        "{log}"
    );

    w.write(
        &w.project.join("vetto.toml"),
        &format!("[process]\ndaemons = [\"{}\"]\n", sleep.display()),
    );
    let (out, log) = w.ci_sh(&script);
    out.assert_stdout_contains("started");
    assert_eq!(out.code(), 0, "{}", out.dump());
    assert!(out.stderr().contains("CLEAN"), "{}", out.dump());
    assert!(
        out.stderr().contains("expected by the policy"),
        "{}",
        out.dump()
    );
    let escaped: Vec<_> = violation_lines(&log)
        .into_iter()
        .filter(|l| l.contains("\"process-escaped\""))
        .collect();
    assert!(
        !escaped.is_empty() && escaped.iter().all(|l| l.contains("\"expected\"")),
        "{log}"
    );
    assert!(
        eventually(Duration::from_secs(5), || crate::util::pids_with(&marker)
            .is_empty()),
        "the expected daemon survived the session\n{}",
        out.dump()
    );
}
at_every_tier!(a_daemon_the_policy_expects_is_killed_and_no_finding);
