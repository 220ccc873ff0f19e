//! Reading tokens from other processes' environments through
//! `/proc/PID/environ` — another job step, the developer's shell, or vetto
//! itself (which holds the variables it withheld from the job).

use crate::util::{ENV_CANARY, Tier, World, vetto_bin, vetto_bin_dir};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: a `sleep` started by the test (same user)
/// carries a token in its environment; the job reads `/proc/PID/environ`.
/// Evidence: bare, the token is found; sandboxed, the read is refused.
fn reading_outside_process_environ_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let victim = w.outside_sleep(&[("DEPLOY_TOKEN", ENV_CANARY)]);
    let pid = victim.pid().to_string();
    let bare = w.probe_bare(&["read-environ", &pid, ENV_CANARY]);
    bare.assert_ok();
    assert_eq!(
        bare.json["found"], true,
        "control: the token was not in the bare read: {}",
        bare.json
    );
    // At FULL the process is not even in the sandbox's /proc.
    let p = w.probe_sandboxed(&["read-environ", &pid, ENV_CANARY]);
    match tier {
        Tier::FsOnly => p.assert_blocked(),
        Tier::Full | Tier::FullCreationsAfter => p.assert_blocked_with(&["ENOENT"]),
    };

    let out = w.sh_sandboxed(&format!(
        "cat /proc/{pid}/environ | tr '\\0' '\\n'; echo script-finished"
    ));
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_no_leak(ENV_CANARY);
}
at_every_tier!(reading_outside_process_environ_is_blocked);

/// Runs as an unprivileged user: vetto is started with a token in ITS
/// environment (withheld from the job); the job scans every
/// `/proc/*/environ` for it — vetto's supervisor included. A process
/// outside holds it too, for the control. Evidence: bare, the scan finds it;
/// sandboxed, it finds it nowhere.
fn reading_vetto_supervisor_environ_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let _victim = w.outside_sleep(&[("DEPLOY_TOKEN", ENV_CANARY)]);
    let bare = w.probe_bare(&["read-environ", "all", ENV_CANARY]);
    bare.assert_ok();

    let bin_dir = vetto_bin_dir().to_str().unwrap();
    let probe = vetto_bin().to_str().unwrap();
    let out = w
        .sandboxed_with(
            &["--allow-read", bin_dir],
            &["sh", "-c", &format!("{probe} __probe read-environ all {ENV_CANARY}; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; echo script-finished")],
        )
        .env("DEPLOY_TOKEN", ENV_CANARY)
        .env("VETTO_TEST_PLAIN", ENV_CANARY)
        .run();
    out.assert_ran().assert_stdout_contains("script-finished");
    let report = out
        .stdout()
        .lines()
        .find(|l| l.contains("\"read-environ\""))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        report.contains("\"found_in\":[]"),
        "the job found the token in some process's environment: {report}\n{}",
        out.dump()
    );
    // Only the report line may name the canary (it is the search argument).
    let leaks = out
        .stdout()
        .lines()
        .filter(|l| l.contains(ENV_CANARY) && !l.contains("\"read-environ\""))
        .count();
    assert_eq!(leaks, 0, "the token leaked\n{}", out.dump());
}
at_every_tier!(reading_vetto_supervisor_environ_is_blocked);
