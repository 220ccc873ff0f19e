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

/// Runs as an unprivileged user. The first `tool` on the job's `PATH`
/// lies where the policy lets the job read nothing (a version manager's
/// shims in an unlisted directory), the next in `/usr/bin`'s stead.
/// Outside, the first runs. Sandboxed, `access(2)` says the first may run
/// (Landlock does not answer it) and `execve` refuses it: the search
/// passes over it as `execvp` does and the next runs, and vetto says so,
/// with the rule that would let the first run — not "cannot execute the
/// command: EACCES" (FS-ONLY's answer before).
fn a_command_first_on_path_the_policy_refuses_is_passed_over_for_the_next(tier: crate::util::Tier) {
    crate::require!(tier.feature());
    let w = World::at(tier);
    let shims = w.outside.join("shims");
    let next = w.project.join(".tools");
    for (dir, says) in [(&shims, "first"), (&next, "next")] {
        let tool = dir.join("tool");
        w.write(&tool, &format!("#!/bin/sh\necho {says}\n"));
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    crate::util::chown_tree(&w.outside);
    crate::util::chown_tree(&w.project);
    let path = format!("{}:{}:/usr/bin:/bin", shims.display(), next.display());
    w.bare(&["tool"])
        .env("PATH", &path)
        .run()
        .assert_success()
        .assert_stdout_contains("first");

    let out = w.sandboxed_with(&[], &["tool"]).env("PATH", &path).run();
    out.assert_success()
        .assert_stdout_contains("next")
        .assert_stderr_contains(&format!(
            "vetto: note: the job runs {}, the next on PATH: the policy leaves the command tool ({}) unreadable: no rule allows it; add read = [\"{}\"]",
            next.join("tool").display(),
            shims.join("tool").display(),
            shims.display()
        ));
}
crate::at_every_tier!(a_command_first_on_path_the_policy_refuses_is_passed_over_for_the_next);

/// Runs as an unprivileged user. The only `tool` on `PATH` is one nobody
/// may execute (mode 0644): the shell's "Permission denied", with the
/// path, exit 126 — not a bare errno.
fn a_command_nobody_may_execute_is_named_with_its_path(tier: crate::util::Tier) {
    crate::require!(tier.feature());
    let w = World::at(tier);
    let dir = w.project.join(".tools");
    let tool = dir.join("tool");
    w.write(&tool, "#!/bin/sh\necho ran\n");
    crate::util::chown_tree(&w.project);
    let path = format!("{}:/usr/bin:/bin", dir.display());
    let out = w.sandboxed_with(&[], &["tool"]).env("PATH", &path).run();
    out.assert_code(126).assert_stderr_contains(&format!(
        "vetto: cannot execute the command: {}: EACCES: Permission denied",
        tool.display()
    ));
}
crate::at_every_tier!(a_command_nobody_may_execute_is_named_with_its_path);

/// `vetto policy explain HOST[:PORT]` with the options a run would get:
/// the allowed name by its rule (ports 80 and 443), its pin, another port
/// refused with what to write, the metadata address refused as such — and
/// an allowed name pinned to it refused too (a pin is no ip rule).
#[test]
fn policy_explain_says_which_rule_decides_a_host() {
    let w = World::new();
    let out = w
        .vetto(&[
            "policy",
            "explain",
            "--allow-domain",
            "allowed.test",
            "--resolve",
            "allowed.test:127.0.0.1",
            "--allow-domain",
            "meta.test",
            "--resolve",
            "meta.test:169.254.169.254",
            "allowed.test:443",
            "meta.test:80",
            "allowed.test:8443",
            "169.254.169.254",
            "denied.test",
        ])
        .run();
    out.assert_success()
        .assert_stdout_contains("allowed.test:443: allowed — matches `allowed.test`  ← --allow-domain")
        .assert_stdout_contains("connects to 127.0.0.1 only: pinned by `allowed.test:127.0.0.1`")
        .assert_stdout_contains("allowed.test:8443: blocked — `allowed.test` names the host without a port, which allows ports 80 and 443 only")
        .assert_stdout_contains("169.254.169.254: blocked — no ip rule covers 169.254.169.254")
        .assert_stdout_contains("169.254.169.254 is a cloud metadata address: refused unless an ip rule names it")
        .assert_stdout_contains("denied.test: blocked — no `allow` entry matches")
        .assert_stdout_contains(
            "meta.test:80: blocked — matches `meta.test`, but its pinned address is internal and no ip rule names it",
        )
        .assert_stdout_contains(
            "pinned to 169.254.169.254 by `meta.test:169.254.169.254` (--resolve meta.test:169.254.169.254), which is a cloud metadata address",
        );
    // The answers first, and only they; the whole policy with --all.
    assert!(out.stdout().starts_with("decisions:\n"), "{}", out.dump());
    out.assert_stdout_lacks("filesystem (")
        .assert_stdout_contains("(the whole policy: --all)");
    w.vetto(&["policy", "explain", "--all", "denied.test"])
        .run()
        .assert_success()
        .assert_stdout_contains("filesystem (")
        .assert_stdout_contains("denied.test: blocked");
    let json = w
        .vetto(&[
            "policy",
            "explain",
            "--json",
            "--allow-domain",
            "allowed.test",
            "[fd00:ec2::254]:80",
        ])
        .run();
    json.assert_success();
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap_or_default();
    let d = &v["decisions"][0];
    assert_eq!(d["kind"], "host", "{}", json.dump());
    assert_eq!(d["allowed"], false);
    assert_eq!(d["address"], "metadata");
}

/// `vetto policy suggest` on an audited session with egress records
/// prints `[network] allow` entries by name that `policy check` accepts,
/// and never the deny-listed host or the metadata address.
#[test]
fn policy_suggest_names_the_hosts_an_audited_job_contacted() {
    use vetto::events::{Action, ConnDecision, Event};
    let w = World::new();
    let mut events = vetto::report::fixture::egress_session();
    for e in &mut events {
        match e {
            Event::SessionStart(s) => s.audit = true,
            Event::Connection(c) if c.decision == ConnDecision::Denied => {
                c.decision = ConnDecision::Observed;
            }
            Event::Violation(v) => v.action = Action::Observed,
            _ => {}
        }
    }
    let log = w.outside.join("session.jsonl");
    w.write(&log, &vetto::report::fixture::to_jsonl(&events));
    let out = w
        .vetto(&["policy", "suggest", log.to_str().unwrap_or_default()])
        .run();
    out.assert_success()
        .assert_stdout_contains("\"registry.npmjs.org:443\", # ×5, by /usr/bin/npm")
        .assert_stdout_contains("\"exfil.evil.test:443\", # ×2, by npm:evil@6.6.6");
    let policy = w.outside.join("suggested.toml");
    w.write(&policy, &out.stdout());
    let rules: String = out
        .stdout()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    for never in ["pastebin.com", "169.254.169.254", "canary"] {
        assert!(!rules.contains(never), "{never} suggested:\n{}", out.dump());
    }
    w.vetto(&["policy", "check", policy.to_str().unwrap_or_default()])
        .run()
        .assert_success();
}
