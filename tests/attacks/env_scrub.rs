//! Credentials in the environment: CI secrets and cloud keys exported to a
//! step are the easiest thing for a malicious build script to take.

use crate::require;
use crate::util::{Feature, World};

const SECRETS: [(&str, &str); 8] = [
    ("GITHUB_TOKEN", "CANARY-ghs-1"),
    ("AWS_SECRET_ACCESS_KEY", "CANARY-aws-2"),
    ("AWS_ACCESS_KEY_ID", "CANARY-aws-3"),
    ("NPM_TOKEN", "CANARY-npm-4"),
    ("ACTIONS_RUNTIME_TOKEN", "CANARY-actions-5"),
    ("ACTIONS_ID_TOKEN_REQUEST_URL", "CANARY-oidc-6"),
    ("OPENAI_API_KEY", "CANARY-openai-7"),
    ("DB_PASSWORD", "CANARY-db-8"),
];

/// Runs as an unprivileged user: vetto is started with eight
/// credential-like variables; the job prints its whole environment.
/// Evidence: bare, every value is printed; sandboxed, no name or value
/// appears, and vetto's stderr names each withheld variable with the count.
#[test]
fn credential_variables_are_withheld() {
    require!(Feature::FsOnly);
    let w = World::new();
    let mut bare = w.bare(&["env"]);
    let mut sandboxed = w.sandboxed(&["sh", "-c", "env; echo script-finished"]);
    for (k, v) in SECRETS {
        bare = bare.env(k, v);
        sandboxed = sandboxed.env(k, v);
    }
    let bare = bare.run();
    for (_, v) in SECRETS {
        bare.assert_stdout_contains(v);
    }

    let out = sandboxed.run();
    out.assert_ran().assert_stdout_contains("script-finished");
    for (k, v) in SECRETS {
        out.assert_stdout_lacks(&format!("{k}=")).assert_no_leak(v);
        out.assert_stderr_contains(k);
    }
    let line = out
        .stderr()
        .lines()
        .find(|l| l.contains("GITHUB_TOKEN"))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        line.split(|c: char| !c.is_ascii_digit())
            .any(|n| n == SECRETS.len().to_string()),
        "the withheld notice does not give the count {}: {line:?}\n{}",
        SECRETS.len(),
        out.dump()
    );
}

/// Runs as an unprivileged user: `--env-pass NPM_TOKEN` passes exactly that
/// one (the user said so by name) and nothing else.
#[test]
fn env_pass_passes_exactly_the_named_variable() {
    require!(Feature::FsOnly);
    let w = World::new();
    let out = w
        .sandboxed_with(&["--env-pass", "NPM_TOKEN"], &["env"])
        .env("NPM_TOKEN", "CANARY-npm-passed")
        .env("GITHUB_TOKEN", "CANARY-ghs-withheld")
        .run();
    out.assert_success()
        .assert_stdout_contains("NPM_TOKEN=CANARY-npm-passed")
        .assert_no_leak("CANARY-ghs-withheld");
}
