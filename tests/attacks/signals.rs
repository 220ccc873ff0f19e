//! Signalling processes outside the sandbox: killing the developer's editor,
//! an agent, or the CI runner's other steps (same uid, so the kernel allows
//! it unless the sandbox scopes signals).

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: `kill -0` and `kill -TERM` a `sleep` the
/// test started as the same user, from the shell and from the probe.
/// Evidence: bare, the signal is delivered (the sleep dies); sandboxed,
/// EPERM, and the sleep is still alive afterwards.
fn signalling_outside_process_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let control = w.outside_sleep(&[]);
    w.probe_bare(&["signal", &control.pid().to_string(), "TERM"])
        .assert_ok();
    assert!(
        crate::util::eventually(std::time::Duration::from_secs(5), || !control.alive()),
        "control: the bare SIGTERM did not kill the sleep"
    );

    let victim = w.outside_sleep(&[]);
    let pid = victim.pid().to_string();
    // At FULL the pid names no process of the sandbox's PID namespace.
    let blocked = match tier {
        Tier::FsOnly => ["EPERM", "EACCES"].as_slice(),
        Tier::Full | Tier::FullCreationsAfter => ["ESRCH"].as_slice(),
    };
    let p = w.probe_sandboxed(&["signal", &pid, "TERM"]);
    p.assert_blocked_with(blocked);
    w.probe_sandboxed(&["signal", &pid, "0"])
        .assert_blocked_with(blocked);
    let out = w.sh_sandboxed(&format!("kill -0 {pid} && echo ALIVE-VISIBLE; kill -TERM {pid} && echo SENT; kill -KILL {pid} && echo SENT; echo script-finished"));
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks("SENT");
    assert!(victim.alive(), "the outside process died\n{}", out.dump());
}
at_every_tier!(signalling_outside_process_is_blocked);

/// Runs as an unprivileged user: signals within the job's own tree still
/// work (a build tool stopping its workers).
fn signalling_own_children_still_works(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let out = w.sh_sandboxed("sleep 30 & pid=$!; kill -TERM $pid && wait $pid; echo \"status=$?\"");
    out.assert_success().assert_stdout_contains("status=143");
}
at_every_tier!(signalling_own_children_still_works);
