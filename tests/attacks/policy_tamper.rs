//! Rewriting the sandbox's own policy: a job that edits `vetto.toml` in the
//! project widens every later run (and the next CI job) without review.

use crate::util::{Tier, World, read};
use crate::{at_every_tier, at_every_tier_and_creations_after, require};

const POLICY: &str = "extends = [\"default\"]\n";

/// Runs as an unprivileged user: the project's `vetto.toml` (picked up by
/// default) is appended to, replaced by rename, and deleted. Evidence:
/// bare, it changes; sandboxed, it is byte for byte what it was.
fn project_policy_file_is_not_writable(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let policy = w.project.join("vetto.toml");
    w.write(&policy, POLICY);
    let script = "echo '[filesystem]' >> vetto.toml; echo 'write = [\"/\"]' >> vetto.toml; \
                  printf 'write = [\"/\"]\\n' > evil.toml; mv -f evil.toml vetto.toml; rm -f vetto.toml";

    w.sh_bare(script);
    assert_ne!(
        read(&policy).as_deref(),
        Some(POLICY),
        "control: bare tampering failed"
    );
    w.write(&policy, POLICY);

    let out = w.sh_sandboxed(&format!("{script}; echo script-finished"));
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        read(&policy).as_deref(),
        Some(POLICY),
        "vetto.toml changed\n{}",
        out.dump()
    );
}
at_every_tier_and_creations_after!(project_policy_file_is_not_writable);

/// The policy a job plants to widen every later session: the blank slate
/// (no default denies), everything readable (the home named too: at FULL
/// the world's `/tmp` is the sandbox's own) and writable, the host
/// network, every variable passed.
const PLANTED: &str = "extends = []\n[filesystem]\nread = [\"/\", \"~\"]\nwrite = [\"/\"]\n\
                       [network]\nmode = \"host\"\n[env]\npass = [\"*\"]\n";

/// Every way a job could put a `vetto.toml` where none was: create it,
/// rename one into place (from a subdirectory, so `mv` falls back to a
/// copy when the rename is refused), link it, and make a directory of that
/// name (then put the file inside… nothing loads that, but it must not be
/// there either).
fn plant_script(target: &str) -> String {
    format!(
        "mkdir -p src; printf '{body}' > src/evil.toml; \
         printf '{body}' > {target}; \
         mv -f src/evil.toml {target} 2>/dev/null || cp src/evil.toml {target}; \
         ln -s src/evil.toml {target} 2>/dev/null; ln src/evil.toml {target} 2>/dev/null; \
         echo planted",
        body = PLANTED.replace('\n', "\\n")
    )
}

/// Runs as an unprivileged user: the project has no `vetto.toml`; the job
/// writes one (the planted-policy attack). Evidence: bare, it appears and
/// the next `vetto run` in the project loads it and prints the SSH key;
/// sandboxed, it never appears, and the next run still masks the key.
fn planted_project_policy_never_appears(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let policy = w.project.join("vetto.toml");
    assert!(!policy.exists());
    let script = plant_script("vetto.toml");
    let next_run = |w: &World| w.sandboxed(&["sh", "-c", "cat ~/.ssh/id_rsa; true"]).run();

    w.sh_bare(&script).assert_success();
    assert!(policy.exists(), "control: bare planting failed");
    let later = next_run(&w);
    later.assert_stdout_contains(crate::util::SSH_CANARY);
    later.assert_stderr_contains("policy vetto.toml (extends = [], no preset)");
    std::fs::remove_file(&policy).unwrap();
    let _ = std::fs::remove_file(w.project.join("src/evil.toml"));

    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("planted");
    assert!(
        std::fs::symlink_metadata(&policy).is_err(),
        "the job planted vetto.toml\n{}",
        out.dump()
    );
    next_run(&w)
        .assert_no_leak(crate::util::SSH_CANARY)
        .assert_stderr_contains("policy: the built-in default");
}

/// Runs as an unprivileged user: `--policy ci/policy.toml`, a file inside
/// the project, is appended to, replaced by rename, deleted, and its
/// directory renamed away and recreated with a planted copy. Evidence:
/// bare, the file changes; sandboxed, it is what it was.
fn policy_file_inside_the_project_is_not_writable(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let policy = w.project.join("ci/policy.toml");
    w.write(&policy, POLICY);
    let script = format!(
        "echo 'write = [\"/\"]' >> ci/policy.toml; \
         printf 'x' > evil.toml; mv -f evil.toml ci/policy.toml; rm -f ci/policy.toml; \
         mv ci ci.old && mkdir ci && {plant}",
        plant = plant_script("ci/policy.toml")
    );
    w.sh_bare(&script);
    assert_ne!(
        read(&policy).as_deref(),
        Some(POLICY),
        "control: bare tampering failed"
    );
    let _ = std::fs::remove_dir_all(w.project.join("ci"));
    let _ = std::fs::remove_dir_all(w.project.join("ci.old"));
    w.write(&policy, POLICY);

    let out = w
        .sandboxed_with(
            &["--policy", "ci/policy.toml"],
            &["sh", "-c", &format!("{script}; echo script-finished")],
        )
        .run();
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        read(&policy).as_deref(),
        Some(POLICY),
        "ci/policy.toml changed\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `vetto ci` (report directory
/// `vetto-report/` in the project, made before the job) while the job
/// plants a file and a link in it, renames it away and replaces it, and
/// removes it. Evidence: bare, each works; sandboxed, nothing the job
/// made is there and the reports are vetto's.
fn report_directory_is_not_writable(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reports = w.project.join("vetto-report");
    let victim = w.outside.join("victim");
    w.write(&victim, "victim\n");
    let script = format!(
        "printf planted > vetto-report/summary.md.tmp; \
         ln -s {victim} vetto-report/vetto.sarif.tmp; \
         mkdir vetto-report/sub; \
         mv vetto-report gone && mkdir vetto-report && printf planted > vetto-report/report.html; \
         rm -rf vetto-report; echo script-finished",
        victim = victim.display()
    );

    // Bare, the directory is there as `vetto ci` leaves it.
    w.sh_bare(&format!("mkdir vetto-report; {script}"))
        .assert_success();
    assert!(
        w.project.join("gone/summary.md.tmp").exists() && !reports.exists(),
        "control: bare tampering failed"
    );
    let _ = std::fs::remove_dir_all(w.project.join("gone"));

    let project = w.project.to_str().unwrap();
    let out = w
        .vetto(&[
            "ci",
            "--tier",
            tier.name(),
            "--project",
            project,
            "--fail-on",
            "never",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .run();
    out.assert_ran().assert_stdout_contains("script-finished");
    assert!(
        !w.project.join("gone").exists(),
        "the job renamed the report directory away\n{}",
        out.dump()
    );
    for planted in ["summary.md.tmp", "vetto.sarif.tmp", "sub"] {
        assert!(
            std::fs::symlink_metadata(reports.join(planted)).is_err(),
            "the job planted {planted} in the report directory\n{}",
            out.dump()
        );
    }
    assert!(
        reports.join("session.jsonl").is_file() && reports.join("summary.md").is_file(),
        "the reports are missing\n{}",
        out.dump()
    );
    let html = read(&reports.join("report.html")).unwrap_or_default();
    assert!(!html.starts_with("planted"), "report.html is the job's");
    assert_eq!(read(&victim).as_deref(), Some("victim\n"));
}

at_every_tier_and_creations_after!(
    planted_project_policy_never_appears,
    policy_file_inside_the_project_is_not_writable,
    report_directory_is_not_writable
);

/// Runs as an unprivileged user: a pull request commits the planted
/// policy as its `vetto.toml`; the base branch (`main`) has none. Evidence:
/// bare (`vetto run` in the checkout, the working tree's policy), the job
/// prints the SSH key; under `vetto ci --policy-ref main`, the built-in
/// default is in force (said on stderr, in the session log and the
/// summary, with the working tree's copy named as different) and the key
/// stays masked.
fn pull_request_policy_cannot_widen_itself_under_policy_ref(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare(&format!(
        "set -e; git checkout -q -b pr; printf '{}' > vetto.toml; git add vetto.toml; \
         git commit -q -m 'widen the policy'",
        PLANTED.replace('\n', "\\n")
    ))
    .assert_success();
    let job = ["sh", "-c", "cat ~/.ssh/id_rsa; true"];

    w.sandboxed(&job)
        .run()
        .assert_stdout_contains(crate::util::SSH_CANARY);

    let project = w.project.to_str().unwrap();
    let mut args = vec![
        "ci",
        "--tier",
        tier.name(),
        "--project",
        project,
        "--policy-ref",
        "main",
        "--fail-on",
        "never",
        "--",
    ];
    args.extend_from_slice(&job);
    let out = w.vetto(&args).run();
    out.assert_ran()
        .assert_no_leak(crate::util::SSH_CANARY)
        .assert_stderr_contains(
            "vetto: policy: the built-in default sha256:",
        )
        .assert_stderr_contains("(git ref main has no vetto.toml)")
        .assert_stderr_contains(
            "vetto: the working tree's vetto.toml differs from the policy in force (git ref main); it was not used",
        );
    let log = read(&w.project.join("vetto-report/session.jsonl")).unwrap_or_default();
    let start: serde_json::Value = log
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    assert_eq!(start["policy"]["origin"]["kind"], "git-ref", "{log}");
    assert_eq!(start["policy"]["origin"]["ref"], "main", "{log}");
    assert_eq!(start["policy"]["origin"]["found"], false, "{log}");
    assert_eq!(start["policy"]["working_tree_differs"], true, "{log}");
    let summary = read(&w.project.join("vetto-report/summary.md")).unwrap_or_default();
    assert!(
        summary.contains("differs from the one in force"),
        "{summary}"
    );
}
at_every_tier!(pull_request_policy_cannot_widen_itself_under_policy_ref);
