//! The example policies shipped in `examples/policies/` are valid: users
//! copy them, so they must pass `vetto policy check` as they are.

use std::path::Path;
use std::process::Command;

#[test]
fn every_example_policy_passes_policy_check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no example policies in {}",
        dir.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_vetto"))
        .args(["policy", "check"])
        .args(&files)
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!("cannot run vetto: {e}"),
    };
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_action_passes_inputs_through_the_environment_only() {
    // A `${{ inputs.* }}` expanded inside a `run:` script is a command
    // injection (a crafted input becomes shell code); the action must
    // only map inputs to environment variables.
    let action = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("action.yml"));
    let action = match action {
        Ok(a) => a,
        Err(e) => panic!("cannot read action.yml: {e}"),
    };
    let mut in_run = false;
    for line in action.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("run: |") {
            in_run = true;
            continue;
        }
        if in_run && !line.starts_with("        ") && !trimmed.is_empty() {
            in_run = false;
        }
        assert!(
            !(in_run && line.contains("${{")),
            "template expansion inside a run script: {line}"
        );
    }
}
