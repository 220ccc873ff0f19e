//! `vetto report --session FILE` re-renders every output from a log.

use std::process::Command;

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
    for f in ["vetto.sarif", "report.html", "summary.md"] {
        assert!(tmp.path().join(f).is_file(), "{f} missing");
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
