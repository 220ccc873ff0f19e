//! Reading credentials: SSH keys, cloud credentials, the project's `.env`.

use crate::util::{AWS_CANARY, DOTENV_CANARY, SSH_CANARY, Tier, World};
use crate::{at_every_tier, require};

/// Bare, `script` prints `canary`; sandboxed it runs to the end but the
/// canary appears nowhere.
fn assert_secret_unreadable(tier: Tier, script: &str, canary: &str) {
    let w = World::at(tier);
    w.sh_bare(script).assert_stdout_contains(canary);
    let script = format!("{script}; echo script-finished");
    let out = w.sh_sandboxed(&script);
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_no_leak(canary);
}

/// Runs as an unprivileged user: `cat ~/.ssh/id_rsa`, `cp` it into the
/// project, and a path with `..` and `.` in it. (Names in `~/.ssh` stay
/// listable by design: docs/tiers.md, "What remains visible".)
fn reading_ssh_private_key_is_blocked(tier: Tier) {
    require!(tier.feature());
    assert_secret_unreadable(tier, "cat ~/.ssh/id_rsa", SSH_CANARY);
    assert_secret_unreadable(tier, "cp ~/.ssh/id_rsa stolen && cat stolen", SSH_CANARY);
    assert_secret_unreadable(tier, "cat \"$HOME/.ssh/../.ssh/./id_rsa\"", SSH_CANARY);
}
at_every_tier!(reading_ssh_private_key_is_blocked);

/// Runs as an unprivileged user: `cat ~/.aws/credentials`.
fn reading_aws_credentials_is_blocked(tier: Tier) {
    require!(tier.feature());
    assert_secret_unreadable(tier, "cat ~/.aws/credentials", AWS_CANARY);
}
at_every_tier!(reading_aws_credentials_is_blocked);

/// Runs as an unprivileged user: `cat P/.env` and `P/.env.production`, and
/// a private key checked into the project.
fn reading_project_dotenv_and_keys_is_blocked(tier: Tier) {
    require!(tier.feature());
    assert_secret_unreadable(tier, "cat .env", DOTENV_CANARY);
    assert_secret_unreadable(tier, "cat \"$PWD/.env\"", DOTENV_CANARY);

    for (rel, canary) in [
        (".env.production", "CANARY-env-production-1"),
        ("deploy/id_ed25519", "CANARY-deploy-key-2"),
        ("config/.env", "CANARY-nested-dotenv-3"),
        ("certs/server.key", "CANARY-tls-key-4"),
    ] {
        let w = World::at(tier);
        w.write(&w.project.join(rel), &format!("{canary}\n"));
        let script = format!("cat '{rel}'");
        w.sh_bare(&script).assert_stdout_contains(canary);
        let out = w.sh_sandboxed(&format!("{script}; echo script-finished"));
        out.assert_ran()
            .assert_stdout_contains("script-finished")
            .assert_no_leak(canary);
    }
}
at_every_tier!(reading_project_dotenv_and_keys_is_blocked);

/// Runs as an unprivileged user: overwrite, truncate, or delete and
/// recreate the project's masked `.env` (a job planting its own database
/// URL or cloud credentials for the next step to use). Evidence: bare, the
/// file changes; sandboxed, it still holds the original secret afterwards
/// (at FULL the job only ever sees an empty read-only stand-in).
fn overwriting_masked_dotenv_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let dotenv = w.project.join(".env");
    let original = std::fs::read_to_string(&dotenv).unwrap();
    let script = "(echo PLANTED=1 > .env); (true > .env); rm -f .env; (echo PLANTED=2 > .env); echo script-finished";

    w.sh_bare(script).assert_success();
    assert_ne!(
        std::fs::read_to_string(&dotenv).ok().as_deref(),
        Some(original.as_str()),
        "control: bare overwrite of .env failed"
    );
    w.write(&dotenv, &original);

    let out = w.sh_sandboxed(script);
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        std::fs::read_to_string(&dotenv).ok().as_deref(),
        Some(original.as_str()),
        ".env was changed at tier {tier}\n{}",
        out.dump()
    );
}
at_every_tier!(overwriting_masked_dotenv_is_blocked);

/// Runs as an unprivileged user: a job reads `~/.ssh/id_rsa`. Bare it
/// gets the key. Sandboxed it gets nothing at both tiers; FULL records the
/// read (`secret-read-denied`), FS-ONLY cannot see it (Landlock refuses
/// unseen) — so there the terminal, `summary.md` and `report.html` say
/// that such reads are not observed at this tier, and a clean verdict is
/// never read as "none attempted".
fn every_report_names_what_the_tier_cannot_observe(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare("cat ~/.ssh/id_rsa")
        .assert_stdout_contains(SSH_CANARY);
    let (out, log) = w.ci_sh("cat ~/.ssh/id_rsa; echo script-finished");
    out.assert_stdout_contains("script-finished")
        .assert_no_leak(SSH_CANARY)
        .assert_stderr_contains("not observed at this tier");
    let recorded = log
        .lines()
        .any(|l| l.contains("\"type\":\"violation\"") && l.contains("secret-read-denied"));
    let reports = w.project.join("vetto-report");
    let summary = std::fs::read_to_string(reports.join("summary.md")).unwrap_or_default();
    let html = std::fs::read_to_string(reports.join("report.html")).unwrap_or_default();
    match tier {
        Tier::Full => assert!(recorded, "{log}"),
        _ => {
            assert!(!recorded, "{log}");
            for (what, text) in [
                ("terminal", out.stderr()),
                ("summary.md", summary.clone()),
                ("report.html", html.clone()),
            ] {
                assert!(
                    text.contains("masked secrets included"),
                    "{what} does not say secret reads go unseen:\n{text}"
                );
            }
        }
    }
    assert!(summary.contains("not observed at this tier"), "{summary}");
    assert!(html.contains("not observed at this tier"), "{html}");
}
at_every_tier!(every_report_names_what_the_tier_cannot_observe);
