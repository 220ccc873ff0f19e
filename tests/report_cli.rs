//! `vetto report --session FILE` re-renders every output from a log.

use std::process::Command;

#[path = "util/sarif.rs"]
mod sarif;
#[path = "util/skip.rs"]
mod skip;

#[test]
#[expect(clippy::unwrap_used, reason = "test")]
fn report_rerenders_sarif_html_and_summary_from_a_session_log() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("session.jsonl");
    let text = vetto::report::fixture::to_jsonl(&vetto::report::fixture::attack_session());
    // A session killed mid-write: the last line is torn.
    std::fs::write(&log, format!("{text}{{\"schema\":1,\"type\":\"resou")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vetto"))
        .arg("report")
        .arg("--session")
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each report written is said, where it went.
    let said = String::from_utf8_lossy(&out.stderr);
    for f in ["vetto.sarif", "report.html", "summary.md"] {
        assert!(tmp.path().join(f).is_file(), "{f} missing");
        let line = format!("vetto: wrote {}", tmp.path().join(f).display());
        assert!(said.contains(&line), "{line} not said:\n{said}");
    }
    let sarif = tmp.path().join("only.sarif");
    let out = Command::new(env!("CARGO_BIN_EXE_vetto"))
        .args(["report", "--session"])
        .arg(&log)
        .arg("--sarif")
        .arg(&sarif)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(sarif.is_file());
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        said.matches("vetto: wrote ").count(),
        1,
        "only the report asked for is written:\n{said}"
    );
}

#[test]
#[expect(clippy::unwrap_used, reason = "test")]
fn report_into_an_unwritable_place_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("session.jsonl");
    std::fs::write(
        &log,
        vetto::report::fixture::to_jsonl(&vetto::report::fixture::attack_session()),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vetto"))
        .args(["report", "--session"])
        .arg(&log)
        .arg("--html")
        .arg(tmp.path().join("no/such/dir/report.html"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot write") && stderr.contains("report.html"),
        "{stderr}"
    );
}

/// Renders the attack report and the filtered-egress report (its network
/// destinations table) in headless Chromium at desktop and phone
/// widths: no console errors (a blocked external request or script would
/// show as a CSP violation there) and screenshots under
/// `target/tmp/report-screenshots/`, next to the session and report.html,
/// for a human to look at. Skips (saying so) when Chromium is missing,
/// unless `VETTO_TEST_REQUIRE` names `chromium`.
#[test]
#[expect(clippy::unwrap_used, reason = "test")]
fn report_renders_in_headless_chromium_without_console_errors() {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(chromium) = chromium else {
        assert!(
            !skip::listed("chromium"),
            "VETTO_TEST_REQUIRE lists chromium, but it is missing"
        );
        skip::say(
            "report_renders_in_headless_chromium_without_console_errors",
            "chromium not installed",
        );
        return;
    };
    let out_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&out_dir).unwrap();
    // The attack session, and one with filtered egress (its destinations table).
    for (session, events) in [
        ("", vetto::report::fixture::attack_session()),
        ("egress-", vetto::report::fixture::egress_session()),
    ] {
        let log = out_dir.join(format!("{session}session.jsonl"));
        std::fs::write(&log, vetto::report::fixture::to_jsonl(&events)).unwrap();
        let html = out_dir.join(format!("{session}report.html"));
        let st = Command::new(env!("CARGO_BIN_EXE_vetto"))
            .args(["report", "--session"])
            .arg(&log)
            .arg("--html")
            .arg(&html)
            .status()
            .unwrap();
        assert!(st.success());
        for (name, size) in [("desktop", "1280,2000"), ("phone", "390,2000")] {
            let profile = tempfile::tempdir().unwrap();
            let shot = out_dir.join(format!("{session}report-{name}.png"));
            let out = Command::new(chromium)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--enable-logging=stderr",
                    "--v=0",
                ])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .arg(format!("--screenshot={}", shot.display()))
                .arg(format!("--window-size={size}"))
                .arg(format!("file://{}", html.display()))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(shot.is_file(), "no screenshot: {stderr}");
            for bad in ["CONSOLE", "Refused to", "Content Security Policy"] {
                assert!(
                    !stderr.contains(bad),
                    "{session}{name}: {bad} in chromium's log:\n{stderr}"
                );
            }
        }
    }
}

/// The SARIF of `events`, rendered by `vetto report` into `dir/NAME.sarif`.
#[expect(clippy::unwrap_used, reason = "test")]
fn rendered(
    dir: &std::path::Path,
    name: &str,
    events: &[vetto::events::Event],
) -> std::path::PathBuf {
    let log = dir.join(format!("{name}.jsonl"));
    std::fs::write(&log, vetto::report::fixture::to_jsonl(events)).unwrap();
    let out = dir.join(format!("{name}.sarif"));
    let st = Command::new(env!("CARGO_BIN_EXE_vetto"))
        .args(["report", "--session"])
        .arg(&log)
        .arg("--sarif")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

/// GitHub accepts every SARIF vetto renders, by the schema and by
/// `sarif-multitool validate --rule-kind "Gh;Sarif"` (0 errors): the attack
/// session; the same outside CI under the built-in policy only (where
/// results used to be located at `preset:default` under `%SRCROOT%`,
/// SARIF1004); a session with allowed and denied connections (one result
/// per denied destination); and a clean session. The multitool is not vacuous: the old
/// location is an error to it.
#[test]
#[expect(clippy::unwrap_used, reason = "test")]
fn sarif_multitool_finds_no_errors_in_any_rendered_sarif() {
    use vetto::events::Event;
    let test = "sarif_multitool_finds_no_errors_in_any_rendered_sarif";
    let tmp = tempfile::tempdir().unwrap();
    let attack = vetto::report::fixture::attack_session();
    let mut preset_only = attack.clone();
    if let Some(Event::SessionStart(start)) = preset_only.first_mut() {
        start.ci = None;
        start
            .policy
            .sources
            .retain(|s| s.name.starts_with("preset:"));
    }
    let clean: Vec<Event> = attack
        .iter()
        .filter(|e| {
            !matches!(
                e,
                Event::Violation(_) | Event::Repeated(_) | Event::Limit(_)
            )
        })
        .cloned()
        .map(|e| match e {
            Event::SessionEnd(mut end) => {
                end.violations_by_rule.clear();
                Event::SessionEnd(end)
            }
            e => e,
        })
        .collect();
    let egress = vetto::report::fixture::egress_session();
    for (name, events) in [
        ("attack", &attack),
        ("egress", &egress),
        ("preset-only", &preset_only),
        ("clean", &clean),
    ] {
        sarif::assert_github_accepts(test, &rendered(tmp.path(), name, events));
    }
    // What vetto used to write: a result at `preset:default`.
    let path = rendered(tmp.path(), "old", &preset_only);
    let mut old: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    old["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] =
        "preset:default".into();
    std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    if let Some(errors) = sarif::multitool_errors(&path) {
        assert!(
            errors.iter().any(|e| e.contains("SARIF1004")),
            "the multitool missed SARIF1004: {errors:?}"
        );
    }
}
