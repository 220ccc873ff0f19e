//! The example policies shipped in `examples/policies/` are valid: users
//! copy them, so they must pass `vetto policy check` as they are.

use std::path::Path;
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

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

/// A file as the runner reads it: YAML, parsed by a real parser.
fn yaml(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut docs = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    assert_eq!(docs.len(), 1, "{}: one document", path.display());
    docs.remove(0)
}

#[test]
fn the_action_is_valid_yaml_and_passes_inputs_through_the_environment_only() {
    let action = yaml(&Path::new(env!("CARGO_MANIFEST_DIR")).join("action.yml"));
    for key in ["name", "description"] {
        assert!(action[key].as_str().is_some(), "action.yml has no {key}");
    }
    assert_eq!(
        action["runs"]["using"].as_str(),
        Some("composite"),
        "a composite action runs on the runner's own toolchain"
    );
    let Some(inputs) = action["inputs"].as_hash() else {
        panic!("action.yml declares no inputs");
    };
    for (name, input) in inputs {
        assert!(
            input["description"].as_str().is_some(),
            "input {name:?} has no description string"
        );
    }
    let Some(steps) = action["runs"]["steps"].as_vec() else {
        panic!("action.yml has no steps");
    };
    // A `${{ inputs.* }}` expanded inside a `run:` script is a command
    // injection (a crafted input becomes shell code); the action must
    // only map inputs to environment variables.
    let mut scripts = 0;
    for step in steps {
        if let Some(run) = step["run"].as_str() {
            scripts += 1;
            assert!(
                !run.contains("${{"),
                "template expansion inside a run script:\n{run}"
            );
        }
    }
    assert!(scripts > 0, "no run step was checked");
}

#[test]
fn every_example_workflow_is_valid_yaml() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.map(|e| e.path()).unwrap_or_default();
        if path.extension().is_some_and(|x| x == "yml" || x == "yaml") {
            let doc = yaml(&path);
            assert!(!doc["jobs"].is_badvalue(), "{}: no jobs", path.display());
            seen += 1;
        }
    }
    assert!(seen > 0, "no example workflow found in {}", dir.display());
}
