//! Registry discovery runs host programs outside the sandbox, before the
//! job: a program or configuration the job could have written (a project
//! venv's `python3` first on an activated `PATH`, its `pip.conf`) would run
//! unsandboxed, or choose where the next session's job may connect.
//! Discovery passes over whatever lies beneath what the policy lets the
//! job write, and says so.

use std::os::unix::fs::PermissionsExt;

use crate::util::{self, Tier, World, skip};
use crate::{at_every_tier, require};

/// What `python3 -m pip config list` would print for an index the
/// attacker chose.
const ATTACKER_INDEX: &str = "global.index-url='https://attacker.test/simple'";

/// A stand-in `python3` in the project's `.venv/bin` (which the job may
/// write), first on `PATH` as an activated venv puts it, that leaves a
/// marker and names the attacker's index. Evidence: bare, run as
/// discovery runs it (`python3 -m pip config list` found on that `PATH`),
/// it runs and names the index; under `--preset pip` the marker never
/// appears, the index is not discovered, and a note says what was ignored.
fn a_project_venv_python_is_never_run_by_discovery(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bin = w.project.join(".venv/bin");
    let marker = w.home.join("discovery-ran-the-projects-python3");
    w.write(
        &bin.join("python3"),
        &format!(
            "#!/bin/sh\n: > '{}'\necho \"{ATTACKER_INDEX}\"\n",
            marker.display()
        ),
    );
    std::fs::set_permissions(bin.join("python3"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), util::PATH);

    let bare = w
        .bare(&["python3", "-m", "pip", "config", "list"])
        .env("PATH", &path)
        .cwd(&w.home)
        .run();
    bare.assert_success()
        .assert_stdout_contains("attacker.test");
    assert!(marker.exists(), "control: the stand-in did not run bare");
    std::fs::remove_file(&marker).unwrap();

    let out = w
        .sandboxed_with(&["--preset", "pip"], &["true"])
        .env("PATH", &path)
        .run();
    out.assert_success()
        .assert_stderr_contains("note: discovery ignored the PATH entry");
    assert!(
        !marker.exists(),
        "discovery ran the project's python3\n{}",
        out.dump()
    );
    assert!(
        !out.stderr().contains("attacker.test"),
        "the attacker's index was discovered\n{}",
        out.dump()
    );
}

/// The project's `.venv` (a real one, seeing the host's pip) activated:
/// `VIRTUAL_ENV` names it and its `bin` is first on `PATH`; its
/// `pip.conf` (the job's to write) names the attacker's index. Evidence:
/// bare, pip as discovery asks it reads that file; under `--preset pip`
/// the session's discovered hosts do not include it, and the notes say
/// the venv's `PATH` entry and `$VIRTUAL_ENV` were ignored.
fn a_pip_conf_in_a_project_venv_allows_no_host(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    if w.bare(&["python3", "-m", "pip", "--version"]).run().code() != 0 {
        let reason = "python3 has no pip";
        assert!(
            !util::required_by_name("pip"),
            "{}: VETTO_TEST_REQUIRE lists pip, but {reason}",
            util::test_name()
        );
        skip::say(&util::test_name(), reason);
        return;
    }
    let venv = w.project.join(".venv");
    let venv_s = venv.to_str().unwrap_or_default();
    w.bare(&[
        "python3",
        "-m",
        "venv",
        "--without-pip",
        "--system-site-packages",
        venv_s,
    ])
    .run()
    .assert_success();
    w.write(
        &venv.join("pip.conf"),
        "[global]\nindex-url = https://attacker.test/simple\n",
    );
    let path = format!("{}:{}", venv.join("bin").display(), util::PATH);

    w.bare(&["python3", "-m", "pip", "config", "list"])
        .env("VIRTUAL_ENV", venv_s)
        .env("PATH", &path)
        .cwd(&w.home)
        .run()
        .assert_success()
        .assert_stdout_contains("attacker.test");

    let out = w
        .sandboxed_with(&["--preset", "pip"], &["true"])
        .env("VIRTUAL_ENV", venv_s)
        .env("PATH", &path)
        .run();
    out.assert_success()
        .assert_stderr_contains("discovered registries: ")
        .assert_stderr_contains("note: discovery ignored the PATH entry")
        .assert_stderr_contains("note: discovery ignored $VIRTUAL_ENV");
    assert!(
        !out.stderr().contains("attacker.test"),
        "the attacker's index was discovered\n{}",
        out.dump()
    );
}

at_every_tier!(
    a_project_venv_python_is_never_run_by_discovery,
    a_pip_conf_in_a_project_venv_allows_no_host
);
