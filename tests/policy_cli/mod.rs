//! vetto refuses, with exit 125 and a precise message, before the command
//! ever starts: bad policy, unknown option, a tier that cannot be given.

use crate::util::World;

/// Runs as an unprivileged user: a policy with an unknown key and one with
/// a TOML syntax error. Evidence: exit 125, `file:line:col` on stderr, a
/// "did you mean" for the typo, and the command never ran.
#[test]
fn bad_policy_is_refused_with_location() {
    let w = World::new();
    let cases = [
        (
            "typo.toml",
            "[filesystem]\nread = [\"/usr\"]\nwirte = [\"/tmp\"]\n",
            "typo.toml:3:1",
            Some("write"),
        ),
        (
            "syntax.toml",
            "[filesystem]\nread = [\"/usr\"\n",
            "syntax.toml:",
            None,
        ),
        (
            "type.toml",
            "[filesystem]\nread = 42\n",
            "type.toml:2:",
            None,
        ),
    ];
    for (name, body, location, suggestion) in cases {
        let policy = w.outside.join(name);
        w.write(&policy, body);
        let marker = w.project.join("command-ran");
        let out = w
            .sandboxed_with(
                &["--policy", policy.to_str().unwrap()],
                &["sh", "-c", "touch command-ran"],
            )
            .run();
        out.assert_code(125).assert_stderr_contains(location);
        if let Some(s) = suggestion {
            out.assert_stderr_contains(s);
        }
        assert!(
            !marker.exists(),
            "the command ran despite the bad policy\n{}",
            out.dump()
        );

        let check = w
            .vetto(&["policy", "check", policy.to_str().unwrap()])
            .run();
        assert_ne!(
            check.code(),
            0,
            "policy check accepted {name}\n{}",
            check.dump()
        );
        check.assert_stderr_contains(location);
    }
}

/// Runs as an unprivileged user: `--allow-raed` (typo). Evidence: exit 125
/// and clap's suggestion of `--allow-read`; the command never ran.
#[test]
fn unknown_option_is_refused_with_suggestion() {
    let w = World::new();
    let out = w
        .vetto(&[
            "run",
            "--allow-raed",
            "/usr",
            "--",
            "sh",
            "-c",
            "touch command-ran",
        ])
        .run();
    out.assert_code(125)
        .assert_stderr_contains("--allow-raed")
        .assert_stderr_contains("--allow-read");
    assert!(!w.project.join("command-ran").exists());

    let out = w.vetto(&["run", "--tier", "fs_only", "--", "true"]).run();
    out.assert_code(125).assert_stderr_contains("fs-only");
}

/// Runs as an unprivileged user: a policy that demands the FULL tier, run
/// with `--tier fs-only`. Evidence: exit 125, the message names the tier,
/// and the command never ran. vetto never silently downgrades.
#[test]
fn tier_below_policy_minimum_is_refused() {
    let w = World::new();
    let policy = w.outside.join("full.toml");
    w.write(&policy, "min_tier = \"full\"\n");
    let out = w
        .sandboxed_with(
            &["--policy", policy.to_str().unwrap()],
            &["sh", "-c", "touch command-ran"],
        )
        .run();
    out.assert_code(125).assert_stderr_contains("full");
    assert!(
        !w.project.join("command-ran").exists(),
        "the command ran\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `vetto doctor --json` is JSON and reports
/// the Landlock ABI the kernel gives (asked independently by the probe).
#[test]
fn doctor_json_reports_landlock_abi() {
    let w = World::new();
    let out = w.vetto(&["doctor", "--json"]).run();
    out.assert_success();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON: {e}\n{}", out.dump()));
    let probe = w.probe_bare(&["landlock-abi"]);
    let abi = probe.json["abi"].clone();
    let text = doc.to_string();
    assert!(
        doc.get("landlock_abi") == Some(&abi) || text.contains(&format!("\"abi\":{abi}")),
        "doctor does not report Landlock ABI {abi}: {text}"
    );
}

/// Runs as an unprivileged user: `--deny PATH` masks a file inside the
/// (readable, writable) project. Evidence: bare, it is read; with `--deny`
/// neither read nor overwritten.
#[test]
fn cli_deny_masks_a_project_file() {
    crate::require!(crate::util::Feature::FsOnly);
    let w = World::new();
    let secret = w.project.join("config/credentials.json");
    w.write(&secret, "CANARY-cli-deny-9\n");
    w.sh_bare("cat config/credentials.json")
        .assert_stdout_contains("CANARY-cli-deny-9");
    let out = w
        .sandboxed_with(
            &["--deny", secret.to_str().unwrap()],
            &["sh", "-c", "cat config/credentials.json; echo x > config/credentials.json; echo script-finished"],
        )
        .run();
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_no_leak("CANARY-cli-deny-9");
    assert_eq!(
        crate::util::read(&secret).as_deref(),
        Some("CANARY-cli-deny-9\n"),
        "the denied file was overwritten\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `extends = []` with only system reads
/// (the project unreadable), and a policy that reads the project but not
/// the directory the command lives in. Evidence: exit 125 with a message
/// naming the rule (and the way to fix it) instead of the kernel's
/// "cannot enter DIR", and the command never ran.
fn unreachable_project_or_command_is_refused_naming_the_rule(tier: crate::util::Tier) {
    crate::require!(tier.feature());
    let w = World::at(tier);
    let marker = w.outside.join("command-ran");
    let blank = w.outside.join("blank.toml");
    w.write(
        &blank,
        "extends = []\n[filesystem]\nread = [\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc\"]\n",
    );
    let out = w
        .sandboxed_with(
            &["--policy", blank.to_str().unwrap()],
            &["sh", "-c", &format!("touch {}", marker.display())],
        )
        .run();
    out.assert_code(125).assert_stderr_contains(&format!(
        "vetto: the policy leaves the project {} unreadable: no rule allows it (extends = [] at {}:1:1 removed the default's read rules); add read = [\"${{PROJECT}}\"] or drop extends = []",
        w.project.display(),
        blank.display()
    ));

    let tool = w.outside.join("bin/tool");
    w.write(&tool, &format!("#!/bin/sh\ntouch {}\n", marker.display()));
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = w.sandboxed_with(&[], &[tool.to_str().unwrap()]).run();
    out.assert_code(125).assert_stderr_contains(&format!(
        "vetto: the policy leaves the command {} unreadable: no rule allows it; add read = [\"{}\"]",
        tool.display(),
        tool.parent().unwrap().display()
    ));
    assert!(!marker.exists(), "the command ran\n{}", out.dump());
}
crate::at_every_tier!(unreachable_project_or_command_is_refused_naming_the_rule);
