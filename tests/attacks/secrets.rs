//! Reading credentials: SSH keys, cloud credentials, the project's `.env`.

use crate::require;
use crate::util::{AWS_CANARY, DOTENV_CANARY, Feature, SSH_CANARY, World};

/// Bare, `script` prints `canary`; sandboxed it runs to the end but the
/// canary appears nowhere.
fn assert_secret_unreadable(script: &str, canary: &str) {
    let w = World::new();
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
#[test]
fn reading_ssh_private_key_is_blocked() {
    require!(Feature::FsOnly);
    assert_secret_unreadable("cat ~/.ssh/id_rsa", SSH_CANARY);
    assert_secret_unreadable("cp ~/.ssh/id_rsa stolen && cat stolen", SSH_CANARY);
    assert_secret_unreadable("cat \"$HOME/.ssh/../.ssh/./id_rsa\"", SSH_CANARY);
}

/// Runs as an unprivileged user: `cat ~/.aws/credentials`.
#[test]
fn reading_aws_credentials_is_blocked() {
    require!(Feature::FsOnly);
    assert_secret_unreadable("cat ~/.aws/credentials", AWS_CANARY);
}

/// Runs as an unprivileged user: `cat P/.env` and `P/.env.production`, and
/// a private key checked into the project.
#[test]
fn reading_project_dotenv_and_keys_is_blocked() {
    require!(Feature::FsOnly);
    assert_secret_unreadable("cat .env", DOTENV_CANARY);
    assert_secret_unreadable("cat \"$PWD/.env\"", DOTENV_CANARY);

    for (rel, canary) in [
        (".env.production", "CANARY-env-production-1"),
        ("deploy/id_ed25519", "CANARY-deploy-key-2"),
        ("config/.env", "CANARY-nested-dotenv-3"),
        ("certs/server.key", "CANARY-tls-key-4"),
    ] {
        let w = World::new();
        w.write(&w.project.join(rel), &format!("{canary}\n"));
        let script = format!("cat '{rel}'");
        w.sh_bare(&script).assert_stdout_contains(canary);
        let out = w.sh_sandboxed(&format!("{script}; echo script-finished"));
        out.assert_ran()
            .assert_stdout_contains("script-finished")
            .assert_no_leak(canary);
    }
}
