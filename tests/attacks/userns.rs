//! Creating a user namespace inside the sandbox: it hands the job full
//! capabilities over new mount and network namespaces, the kernel attack
//! surface behind most container escapes.

use crate::util::{Feature, Tier, World, violation_lines};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: `unshare -Ur` and a raw
/// `unshare(CLONE_NEWUSER)`. Evidence: bare, `unshare -Ur id -u` prints 0;
/// sandboxed, it fails and the probe gets EPERM.
fn unshare_user_namespace_is_blocked(tier: Tier) {
    require!(tier.feature());
    require!(Feature::Userns);
    let w = World::at(tier);
    w.run_bare(&["unshare", "-Ur", "id", "-u"])
        .assert_success()
        .assert_stdout_contains("0");
    w.probe_bare(&["unshare-user"]).assert_ok();

    let out = w.sh_sandboxed("unshare -Ur id -u && echo ESCAPED; echo script-finished");
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks("ESCAPED");
    w.probe_sandboxed(&["unshare-user"]).assert_blocked();
}
at_every_tier!(unshare_user_namespace_is_blocked);

/// Runs as an unprivileged user: `clone3` with `CLONE_NEWUSER`. Its flags
/// are in memory, out of the filter's sight, so a filter that only checked
/// `clone`'s flags would let it make the namespace. Evidence: bare, the
/// child is made in a new user namespace; sandboxed, `clone3` answers
/// `ENOSYS` (libc then falls back to `clone`, whose flags are checked).
fn clone3_hides_new_namespace_flags_from_the_filter_in_vain(tier: Tier) {
    require!(tier.feature());
    require!(Feature::Userns);
    let w = World::at(tier);
    w.probe_bare(&["clone3-newuser"]).assert_ok();
    w.probe_sandboxed(&["clone3-newuser"])
        .assert_blocked_with(&["ENOSYS"]);
}
at_every_tier!(clone3_hides_new_namespace_flags_from_the_filter_in_vain);

/// Issue P10, item 3. An agent's nested sandbox probes for namespaces at
/// its start (Codex runs `bwrap --unshare-user --unshare-net …`; here
/// `unshare -Ur`, the same call). Evidence: bare, the namespace is made;
/// sandboxed, it is refused at every tier whatever the policy says.
/// Without `[syscalls] expected` the refusal is a finding (`vetto ci`
/// exits 3); with `expected = ["namespaces"]` it is still refused, kept
/// in the session log as `"action":"expected"`, named on the terminal,
/// and no finding: exit 0, CLEAN, no SARIF result.
fn a_nested_sandboxs_probe_the_policy_expects_is_refused_and_no_finding(tier: Tier) {
    require!(tier.feature());
    require!(Feature::Userns);
    let w = World::at(tier);
    let script = "unshare -Ur id -u && echo ESCAPED; echo script-finished";
    w.sh_bare(script).assert_stdout_contains("ESCAPED");

    let (out, log) = w.ci_sh(script);
    out.assert_stdout_contains("script-finished")
        .assert_stdout_lacks("ESCAPED");
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        violation_lines(&log)
            .iter()
            .any(|l| l.contains("\"syscall-denied\"") && l.contains("\"blocked\"")),
        "{log}"
    );

    w.write(
        &w.project.join("vetto.toml"),
        "[syscalls]\nexpected = [\"namespaces\"]\n",
    );
    let (out, log) = w.ci_sh(script);
    out.assert_stdout_contains("script-finished")
        .assert_stdout_lacks("ESCAPED");
    assert_eq!(out.code(), 0, "{}", out.dump());
    assert!(out.stderr().contains("CLEAN"), "{}", out.dump());
    assert!(
        out.stderr().contains("expected by the policy") && out.stderr().contains("unshare"),
        "{}",
        out.dump()
    );
    let lines = violation_lines(&log);
    assert!(
        !lines.is_empty()
            && lines
                .iter()
                .all(|l| l.contains("\"syscall-denied\"") && l.contains("\"expected\"")),
        "{log}"
    );
    let sarif =
        std::fs::read_to_string(w.project.join("vetto-report/vetto.sarif")).unwrap_or_default();
    let sarif: serde_json::Value = serde_json::from_str(&sarif).unwrap_or_default();
    assert_eq!(
        sarif["runs"][0]["results"].as_array().map(Vec::len),
        Some(0),
        "{sarif}"
    );
}
at_every_tier!(a_nested_sandboxs_probe_the_policy_expects_is_refused_and_no_finding);
