//! Every SARIF the tests produce, checked as GitHub code scanning checks it:
//! the SARIF 2.1.0 schema, and Microsoft's `sarif-multitool validate
//! --rule-kind "Gh;Sarif"` (the SARIF spec's rules and GitHub's ingestion
//! rules). The multitool's exit status is 0 whatever it finds: its output
//! file is read and its `error` results counted.
//!
//! The multitool is an npm package (`@microsoft/sarif-multitool`, a .NET
//! single-file binary). `.ci/run` installs it under `/opt/vetto-ci`;
//! `VETTO_SARIF_MULTITOOL` names another binary. When it is missing the
//! check SKIPs, saying so — unless `VETTO_TEST_REQUIRE` lists
//! `sarif-multitool` (as CI does), then it fails.

#![allow(dead_code, reason = "each test binary uses a different part")]
#![expect(clippy::expect_used, reason = "test helpers")]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Where `.ci/run` installs the multitool's platform binary.
pub const CI_MULTITOOL: &str =
    "/opt/vetto-ci/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool";

/// The multitool binary, when there is one.
pub fn multitool() -> Option<PathBuf> {
    let named = std::env::var_os("VETTO_SARIF_MULTITOOL").map(PathBuf::from);
    let found = named
        .into_iter()
        .chain([PathBuf::from(CI_MULTITOOL)])
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            !super::skip::listed("sarif-multitool"),
            "VETTO_TEST_REQUIRE lists sarif-multitool, but neither $VETTO_SARIF_MULTITOOL nor {CI_MULTITOOL} exists (npm install --prefix /opt/vetto-ci @microsoft/sarif-multitool)"
        );
    }
    found
}

/// The SARIF 2.1.0 schema's complaints about `sarif`.
pub fn schema_errors(sarif: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(include_str!("../fixtures/sarif-schema-2.1.0.json"))
        .expect("the schema parses");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the schema compiles");
    validator
        .iter_errors(sarif)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// The multitool's `error` results for the SARIF file at `path`
/// (`ruleId: message arguments`), or `None` when the tool is missing.
pub fn multitool_errors(path: &Path) -> Option<Vec<String>> {
    let tool = multitool()?;
    let out = path.with_extension("multitool.sarif");
    let _ = std::fs::remove_file(&out);
    let ran = Command::new(&tool)
        .arg("validate")
        .args(["--rule-kind", "Gh;Sarif"])
        .arg("-o")
        .arg(&out)
        .arg(path)
        // A .NET binary on a host without ICU.
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .output()
        .expect("the multitool starts");
    let text = std::fs::read_to_string(&out).unwrap_or_else(|e| {
        panic!(
            "the multitool wrote no {}: {e}\n{}{}",
            out.display(),
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr)
        )
    });
    let log: Value = serde_json::from_str(&text).expect("the multitool's output is JSON");
    let results = log["runs"][0]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Some(
        results
            .iter()
            .filter(|r| r["level"] == "error")
            .map(|r| format!("{}: {}", r["ruleId"], r["message"]["arguments"]))
            .collect(),
    )
}

/// `path` is SARIF that GitHub accepts: schema-valid, and 0 multitool
/// errors (skipped, saying so, without the multitool).
pub fn assert_github_accepts(test: &str, path: &Path) {
    let text = std::fs::read_to_string(path).expect("the SARIF file is there");
    let sarif: Value = serde_json::from_str(&text).expect("SARIF is JSON");
    let errors = schema_errors(&sarif);
    assert!(
        errors.is_empty(),
        "{}: schema errors: {errors:#?}",
        path.display()
    );
    match multitool_errors(path) {
        Some(errors) => assert!(
            errors.is_empty(),
            "{}: sarif-multitool errors: {errors:#?}",
            path.display()
        ),
        None => super::skip::say(
            test,
            &format!(
                "sarif-multitool missing: {} checked against the schema only",
                path.display()
            ),
        ),
    }
}
