//! What users copy must work as it is: the example policies pass `vetto
//! policy check`; every workflow (`examples/workflows/`, `.github/workflows/`)
//! and `action.yml` is YAML that a real parser reads, passes `zizmor
//! --offline` and GitHub's JSON schemas (`check-jsonschema
//! --builtin-schema vendor.github-workflows` / `vendor.github-actions`);
//! every action is pinned by commit with its version in a comment; every
//! `with:` key given to vetto's action is one of its inputs, so renaming an
//! input breaks this test; and every address of vetto's repository — in the
//! docs, the examples, the packaging and the SARIF vetto writes — is the one
//! in `src/events/rule_id.rs`.
//!
//! zizmor and check-jsonschema come from PyPI (`.ci/run` installs them in
//! `/opt/vetto-ci/py`; `VETTO_ZIZMOR` / `VETTO_CHECK_JSONSCHEMA` name other
//! binaries, else `PATH` is searched). When one is missing its tests print
//! `SKIP` — and fail when `VETTO_TEST_REQUIRE` lists it, as CI does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

#[path = "util/skip.rs"]
mod skip;

/// Where `.ci/run` installs the PyPI tools.
const CI_TOOLS: &str = "/opt/vetto-ci/py/bin";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The tool `name`, or `None` after saying `SKIP` (a failure when
/// `VETTO_TEST_REQUIRE` lists it).
fn tool(name: &str, test: &str) -> Option<PathBuf> {
    let var = format!("VETTO_{}", name.to_uppercase().replace('-', "_"));
    let named = std::env::var_os(&var).map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let found = named
        .into_iter()
        .chain([Path::new(CI_TOOLS).join(name)])
        .chain(on_path)
        .find(|p| p.is_file());
    if found.is_none() {
        let reason = format!(
            "{name} is not installed (${var}, {CI_TOOLS}/{name}, PATH); .ci/run installs it with pip"
        );
        assert!(
            !skip::listed(name),
            "{test}: VETTO_TEST_REQUIRE lists {name}, but {reason}"
        );
        skip::say(test, &reason);
    }
    found
}

fn yml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no workflow in {}", dir.display());
    files
}

/// Every workflow the project ships: the examples and its own.
fn workflows() -> Vec<PathBuf> {
    let mut all = yml_files(&root().join("examples/workflows"));
    all.extend(yml_files(&root().join(".github/workflows")));
    all
}

fn action_yml() -> PathBuf {
    root().join("action.yml")
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

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Run `cmd`, and fail with everything it printed unless it succeeded.
fn assert_tool_passes(mut cmd: Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every step of every job of a workflow.
fn steps(doc: &Yaml) -> Vec<&Yaml> {
    let Some(jobs) = doc["jobs"].as_hash() else {
        return Vec::new();
    };
    jobs.values()
        .filter_map(|job| job["steps"].as_vec())
        .flatten()
        .collect()
}

/// Is this `uses:` vetto's action (published, or this checkout's)?
fn is_vetto_action(uses: &str) -> bool {
    uses == "./" || uses.starts_with("vetto/action@")
}

#[test]
fn every_example_policy_passes_policy_check() {
    let dir = root().join("examples/policies");
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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vetto"));
    cmd.args(["policy", "check"]).args(&files);
    assert_tool_passes(cmd, "vetto policy check examples/policies/*.toml");
}

#[test]
fn the_action_is_valid_yaml_and_passes_inputs_through_the_environment_only() {
    let action = yaml(&action_yml());
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
fn every_workflow_is_valid_yaml_with_minimal_permissions() {
    for path in workflows() {
        let doc = yaml(&path);
        let name = rel(&path);
        assert!(doc["jobs"].as_hash().is_some(), "{name}: no jobs");
        // Least privilege: nothing at the top (`permissions: {}`), and
        // each job asks for exactly what it uses.
        assert!(
            doc["permissions"].as_hash().is_some_and(|p| p.is_empty()),
            "{name}: the workflow must start from `permissions: {{}}`"
        );
        for (job, body) in doc["jobs"].as_hash().into_iter().flatten() {
            let Some(perms) = body["permissions"].as_hash() else {
                panic!("{name}: job {job:?} declares no permissions");
            };
            for (scope, level) in perms {
                let (Some(scope), Some(level)) = (scope.as_str(), level.as_str()) else {
                    panic!("{name}: job {job:?}: permissions must be `scope: level`");
                };
                let allowed = match level {
                    "read" => true,
                    "write" => ["security-events", "contents"].contains(&scope),
                    _ => false,
                };
                assert!(
                    allowed,
                    "{name}: job {job:?}: `{scope}: {level}` is more than the examples need"
                );
            }
        }
    }
}

#[test]
fn every_workflow_passes_zizmor_offline() {
    let Some(zizmor) = tool("zizmor", "every_workflow_passes_zizmor_offline") else {
        return;
    };
    let mut cmd = Command::new(zizmor);
    cmd.arg("--offline").args(workflows());
    assert_tool_passes(cmd, "zizmor --offline on the workflows");
}

#[test]
fn the_action_passes_zizmor_offline() {
    let Some(zizmor) = tool("zizmor", "the_action_passes_zizmor_offline") else {
        return;
    };
    let mut cmd = Command::new(zizmor);
    cmd.arg("--offline").arg(action_yml());
    assert_tool_passes(cmd, "zizmor --offline action.yml");
}

#[test]
fn every_workflow_matches_the_github_workflow_schema() {
    let test = "every_workflow_matches_the_github_workflow_schema";
    let Some(check) = tool("check-jsonschema", test) else {
        return;
    };
    let mut cmd = Command::new(check);
    cmd.args(["--builtin-schema", "vendor.github-workflows"])
        .args(workflows());
    assert_tool_passes(cmd, "check-jsonschema vendor.github-workflows");
}

#[test]
fn the_action_matches_the_github_action_schema() {
    let test = "the_action_matches_the_github_action_schema";
    let Some(check) = tool("check-jsonschema", test) else {
        return;
    };
    let mut cmd = Command::new(check);
    cmd.args(["--builtin-schema", "vendor.github-actions"])
        .arg(action_yml());
    assert_tool_passes(cmd, "check-jsonschema vendor.github-actions action.yml");
}

/// `owner/repo[/path]@<40 hex> # v…` (or `# <branch>` for an action that
/// publishes no version tags): the commit cannot move under the workflow,
/// and the comment says what it is for the next update.
#[test]
fn every_action_is_pinned_by_commit_with_its_version_in_a_comment() {
    let mut vetto_pins = BTreeSet::new();
    for path in workflows() {
        let name = rel(&path);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let Some(rest) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses:")
            else {
                continue;
            };
            let (uses, comment) = match rest.split_once('#') {
                Some((u, c)) => (u.trim(), c.trim()),
                None => (rest.trim(), ""),
            };
            if uses.starts_with("./") {
                continue;
            }
            let at = format!("{name}:{}: `{uses}`", n + 1);
            let Some((action, sha)) = uses.split_once('@') else {
                panic!("{at} names no version");
            };
            assert!(
                sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                "{at} is not pinned by a full commit SHA"
            );
            assert!(
                !comment.is_empty() && !comment.contains(' '),
                "{at}: the version goes in a comment after the SHA (`# v1.2.3`)"
            );
            if action == "vetto/action" {
                assert_eq!(comment, "v1", "{at}: vetto's action is pinned at v1");
                vetto_pins.insert(sha.to_owned());
            }
        }
    }
    // One commit for the release process to bump.
    assert_eq!(
        vetto_pins.len(),
        1,
        "the examples pin vetto/action at different commits: {vetto_pins:?}"
    );
}

#[test]
fn every_checkout_keeps_the_token_out_of_git_config() {
    for path in workflows() {
        let doc = yaml(&path);
        for step in steps(&doc) {
            let uses = step["uses"].as_str().unwrap_or_default();
            if uses.starts_with("actions/checkout@") {
                assert_eq!(
                    step["with"]["persist-credentials"].as_bool(),
                    Some(false),
                    "{}: checkout without `persist-credentials: false` leaves the job token in .git/config",
                    rel(&path)
                );
            }
        }
    }
}

/// The action's declared inputs and outputs, as action.yml has them now.
fn action_interface() -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let action = yaml(&action_yml());
    let keys = |y: &Yaml| -> BTreeSet<String> {
        y.as_hash()
            .into_iter()
            .flatten()
            .filter_map(|(k, _)| k.as_str().map(str::to_owned))
            .collect()
    };
    let required = action["inputs"]
        .as_hash()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v["required"].as_bool() == Some(true))
        .filter_map(|(k, _)| k.as_str().map(str::to_owned))
        .collect();
    (keys(&action["inputs"]), required, keys(&action["outputs"]))
}

#[test]
fn every_input_and_output_the_workflows_use_exists_in_the_action() {
    let (inputs, required, outputs) = action_interface();
    let mut used = 0;
    for path in workflows() {
        let name = rel(&path);
        let doc = yaml(&path);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for step in steps(&doc) {
            let uses = step["uses"].as_str().unwrap_or_default();
            if !is_vetto_action(uses) {
                continue;
            }
            used += 1;
            let given: BTreeSet<String> = step["with"]
                .as_hash()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.as_str().map(str::to_owned))
                .collect();
            let unknown: Vec<_> = given.difference(&inputs).collect();
            assert!(
                unknown.is_empty(),
                "{name}: vetto's action has no input {unknown:?} (action.yml has {inputs:?})"
            );
            let missing: Vec<_> = required.difference(&given).collect();
            assert!(
                missing.is_empty(),
                "{name}: required input {missing:?} not given"
            );
            // `steps.<id>.outputs.<name>` of this step anywhere in the file.
            if let Some(id) = step["id"].as_str() {
                let prefix = format!("steps.{id}.outputs.");
                for (at, _) in text.match_indices(&prefix) {
                    let out: String = text[at + prefix.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                        .collect();
                    assert!(
                        outputs.contains(&out),
                        "{name}: vetto's action has no output {out:?} (action.yml has {outputs:?})"
                    );
                }
            }
            // A policy the example names is one of the checked examples.
            if let Some(policy) = step["with"]["policy"].as_str() {
                assert!(
                    policy.starts_with("examples/policies/") && root().join(policy).is_file(),
                    "{name}: policy {policy:?} is not one of examples/policies/"
                );
            }
        }
    }
    assert!(used >= 6, "only {used} uses of vetto's action were checked");
}

#[test]
fn there_is_an_example_for_each_kind_of_job() {
    let names: BTreeSet<String> = yml_files(&root().join("examples/workflows"))
        .iter()
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_owned))
        .collect();
    for kind in [
        "npm", "cargo", "pytest", "agent", "matrix", "audit", "services",
    ] {
        assert!(
            names.contains(kind),
            "examples/workflows/{kind}.yml is missing"
        );
    }
    // The audit example feeds its session log to `vetto policy suggest`
    // and uploads what came out.
    let audit =
        std::fs::read_to_string(root().join("examples/workflows/audit.yml")).unwrap_or_default();
    for needle in [
        "vetto ci --audit",
        "vetto policy suggest",
        "actions/upload-artifact@",
    ] {
        assert!(audit.contains(needle), "audit.yml does not use {needle:?}");
    }
}

// ─────────────────────────── one name everywhere ───────────────────────────

/// Every text file under `dir` (recursively) with one of `exts`.
fn texts(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            texts(&path, exts, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.contains(&e))
            || exts.contains(
                &path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default(),
            )
        {
            out.push(path);
        }
    }
}

/// `owner/repo` of every `github.com/<owner>/<repo>` in `text`.
fn github_repos(text: &str) -> Vec<String> {
    text.match_indices("github.com/")
        .map(|(at, m)| {
            let seg = |s: &str| -> String {
                s.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                    .collect()
            };
            let rest = &text[at + m.len()..];
            let owner = seg(rest);
            let repo = seg(rest[owner.len()..].strip_prefix('/').unwrap_or(""));
            format!("{owner}/{}", repo.trim_end_matches(".git"))
        })
        .collect()
}

#[test]
fn docs_examples_packaging_and_sarif_name_one_repository() {
    let home = vetto::events::rule_id::HOMEPAGE;
    let Some(ours) = home.strip_prefix("https://github.com/") else {
        panic!("HOMEPAGE {home} is not a GitHub repository");
    };
    // The action is published from the same repository (`uses: owner/repo@`).
    assert_eq!(ours, "vetto/action");
    let mut files = vec![root().join("README.md"), action_yml()];
    texts(&root().join("docs"), &["md"], &mut files);
    texts(&root().join("examples"), &["yml", "toml", "md"], &mut files);
    texts(&root().join(".github"), &["yml"], &mut files);
    texts(
        &root().join("packaging"),
        &["json", "js", "md", "rb", "render", "vetto"],
        &mut files,
    );
    texts(&root().join("src"), &["rs"], &mut files);
    let mut checked = BTreeMap::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            !text.contains("vetto-sandbox"),
            "{} names the old repository vetto-sandbox",
            rel(path)
        );
        for repo in github_repos(&text) {
            if repo
                .split('/')
                .next()
                .is_some_and(|o| o.starts_with("vetto"))
            {
                assert_eq!(repo, ours, "{} links another vetto repository", rel(path));
                *checked.entry(rel(path)).or_insert(0) += 1;
            }
        }
    }
    for must in [
        "packaging/npm/package.json",
        "packaging/homebrew/vetto.rb",
        "docs/install.md",
    ] {
        assert!(
            checked.contains_key(must),
            "{must} does not name the repository"
        );
    }

    // The SARIF vetto writes: its home, and each rule's help page — which
    // exists in this repository's docs/rules/.
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let log = tmp.path().join("session.jsonl");
    let text = vetto::report::fixture::to_jsonl(&vetto::report::fixture::attack_session());
    std::fs::write(&log, text).unwrap_or_else(|e| panic!("{e}"));
    let sarif = tmp.path().join("vetto.sarif");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vetto"));
    cmd.args(["report", "--session"])
        .arg(&log)
        .arg("--sarif")
        .arg(&sarif);
    assert_tool_passes(cmd, "vetto report --sarif");
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
    let driver = &sarif["runs"][0]["tool"]["driver"];
    assert_eq!(driver["informationUri"].as_str(), Some(home));
    let rules = driver["rules"].as_array().cloned().unwrap_or_default();
    assert!(!rules.is_empty(), "the SARIF has no rules");
    for rule in rules {
        let id = rule["id"].as_str().unwrap_or_default();
        let help = rule["helpUri"].as_str().unwrap_or_default();
        assert_eq!(help, format!("{home}/blob/main/docs/rules/{id}.md"));
        assert!(
            root().join(format!("docs/rules/{id}.md")).is_file(),
            "{help} points at a page docs/rules/ does not have"
        );
    }
}

/// The digests the docs show for the built-in default policy are the
/// digest the policy line prints today (the first 16 hex digits of
/// `policies/default.toml`'s SHA-256): a stale one tells a reader the
/// policy changed when it did not, or the reverse.
#[test]
fn the_default_policy_digest_in_the_docs_is_todays() {
    let text = std::fs::read(root().join("policies/default.toml")).unwrap_or_default();
    let today = vetto::hash::sha256_hex(&[&text]);
    let shown = &today[..16];
    let mut seen = 0;
    for doc in ["README.md", "docs/policy.md"] {
        let body = std::fs::read_to_string(root().join(doc)).unwrap_or_default();
        for (at, _) in body.match_indices("the built-in default sha256:") {
            let digest: String = body[at + "the built-in default sha256:".len()..]
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect();
            // (`sha256:…`: a placeholder, shown as one.)
            if digest.is_empty() {
                continue;
            }
            assert_eq!(digest, shown, "{doc} shows a stale default-policy digest");
            seen += 1;
        }
    }
    assert!(
        seen >= 2,
        "the docs no longer show the default policy's digest"
    );
}
