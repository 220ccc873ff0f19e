//! Signalling processes outside the sandbox: killing the developer's editor,
//! an agent, or the CI runner's other steps (same uid, so the kernel allows
//! it unless the sandbox scopes signals).

use crate::require;
use crate::util::{Feature, World};

/// Runs as an unprivileged user: `kill -0` and `kill -TERM` a `sleep` the
/// test started as the same user, from the shell and from the probe.
/// Evidence: bare, the signal is delivered (the sleep dies); sandboxed,
/// EPERM, and the sleep is still alive afterwards.
#[test]
fn signalling_outside_process_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
    let control = w.outside_sleep(&[]);
    w.probe_bare(&["signal", &control.pid().to_string(), "TERM"])
        .assert_ok();
    assert!(
        crate::util::eventually(std::time::Duration::from_secs(5), || !control.alive()),
        "control: the bare SIGTERM did not kill the sleep"
    );

    let victim = w.outside_sleep(&[]);
    let pid = victim.pid().to_string();
    let p = w.probe_sandboxed(&["signal", &pid, "TERM"]);
    p.assert_blocked();
    w.probe_sandboxed(&["signal", &pid, "0"]).assert_blocked();
    let out = w.sh_sandboxed(&format!("kill -0 {pid} && echo ALIVE-VISIBLE; kill -TERM {pid} && echo SENT; kill -KILL {pid} && echo SENT; echo script-finished"));
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks("SENT");
    assert!(victim.alive(), "the outside process died\n{}", out.dump());
}

/// Runs as an unprivileged user: signals within the job's own tree still
/// work (a build tool stopping its workers).
#[test]
fn signalling_own_children_still_works() {
    require!(Feature::FsOnly);
    let w = World::new();
    let out = w.sh_sandboxed("sleep 30 & pid=$!; kill -TERM $pid && wait $pid; echo \"status=$?\"");
    out.assert_success().assert_stdout_contains("status=143");
}
