//! `vetto github comment` and `vetto github upload-sarif` against a local
//! stand-in for the REST API (a std `TcpListener` answering scripted
//! replies in order), which records every request so each test can check
//! exactly what was sent: method, path, `Authorization`, JSON body.

#![expect(
    clippy::unwrap_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use base64::Engine;

const TOKEN: &str = "ghs_CANARYtok3n0123456789";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const MARKER: &str = "<!-- vetto:report -->";

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn reply(status: u16, body: serde_json::Value) -> Reply {
    Reply {
        status,
        headers: vec![],
        body: body.to_string(),
    }
}

/// The API stand-in: answers `replies` in order (then 599), one request
/// per connection.
struct Api {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Api {
    fn start(replies: Vec<Reply>) -> Api {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut replies = replies.into_iter();
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let Some(req) = read_request(&mut conn) else {
                    continue;
                };
                log.lock().unwrap().push(req);
                let r = replies.next().unwrap_or_else(|| Reply {
                    status: 599,
                    headers: vec![],
                    body: r#"{"message":"unexpected request"}"#.into(),
                });
                let mut head = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    r.status,
                    r.body.len()
                );
                for (k, v) in &r.headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(r.body.as_bytes());
            }
        });
        Api { url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn read_request(conn: &mut std::net::TcpStream) -> Option<Seen> {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Seen {
        method,
        target,
        headers,
        body,
    })
}

/// `vetto ARGS` with only the environment given (plus the API URL).
fn vetto(api: &Api, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_vetto"))
        .args(args)
        .args(["--api-url", &api.url, "--retry-delay-ms", "1"])
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("CANARY"), "the token was printed:\n{all}");
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn report_dir(root: &Path, summary: &str) -> String {
    let dir = root.join("vetto-report");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("summary.md"), summary).unwrap();
    dir.to_str().unwrap().to_owned()
}

fn comment(id: u64, login: &str, body: &str) -> serde_json::Value {
    serde_json::json!({ "id": id, "user": { "login": login }, "body": body, "html_url": format!("https://github.test/c/{id}") })
}

fn assert_authorized(seen: &[Seen]) {
    for s in seen {
        assert_eq!(
            s.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{} {}",
            s.method,
            s.target
        );
        assert_eq!(s.header("x-github-api-version"), Some("2022-11-28"));
    }
}

#[test]
fn comment_updates_the_marked_comment_found_on_page_two() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = report_dir(tmp.path(), "### vetto: clean\n");
    let event = tmp.path().join("event.json");
    std::fs::write(&event, r#"{"pull_request":{"number":42}}"#).unwrap();
    // Page 1: 100 comments, one of them planted by the pull request's
    // author with vetto's marker; page 2: vetto's own.
    let mut page1: Vec<_> = (1..=99).map(|i| comment(i, "alice", "lgtm")).collect();
    page1.push(comment(
        100,
        "mallory",
        &format!("{MARKER}\n✅ vetto: clean (honest)"),
    ));
    let mut first = reply(200, serde_json::Value::Array(page1));
    first.headers.push((
        "link",
        "<https://api.github.com/repositories/1/issues/42/comments?per_page=100&page=2>; rel=\"next\", <https://api.github.com/repositories/1/issues/42/comments?per_page=100&page=2>; rel=\"last\"".into(),
    ));
    let api = Api::start(vec![
        first,
        reply(
            200,
            serde_json::json!([comment(
                777,
                "github-actions[bot]",
                &format!("{MARKER}\nold")
            )]),
        ),
        reply(200, comment(777, "github-actions[bot]", "new")),
    ]);
    let out = vetto(
        &api,
        &["github", "comment", "--report-dir", &dir],
        &[
            ("GITHUB_TOKEN", TOKEN),
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_REPOSITORY", "octo/app"),
            ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(
            "updated the comment on pull request #42 of octo/app: https://github.test/c/777"
        ),
        "{}",
        stdout(&out)
    );
    let seen = api.seen();
    let calls: Vec<_> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    assert_eq!(
        calls,
        [
            "GET /repos/octo/app/issues/42/comments?per_page=100&page=1",
            "GET /repos/octo/app/issues/42/comments?per_page=100&page=2",
            "PATCH /repos/octo/app/issues/comments/777",
        ]
    );
    assert_authorized(&seen);
    assert_eq!(
        seen[2].json(),
        serde_json::json!({ "body": format!("{MARKER}\n### vetto: clean\n") })
    );
}

#[test]
fn comment_is_created_when_no_comment_is_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = report_dir(tmp.path(), "### vetto: violations\n");
    let api = Api::start(vec![
        reply(200, serde_json::json!([comment(1, "alice", "hello")])),
        reply(201, comment(900, "someone", "x")),
    ]);
    let out = vetto(
        &api,
        &[
            "github",
            "comment",
            "--report-dir",
            &dir,
            "--repo",
            "octo/app",
            "--pr",
            "5",
        ],
        &[("GH_TOKEN", TOKEN)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("created the comment on pull request #5"));
    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        (seen[1].method.as_str(), seen[1].target.as_str()),
        ("POST", "/repos/octo/app/issues/5/comments")
    );
    assert_eq!(seen[1].header("content-type"), Some("application/json"));
    assert_eq!(
        seen[1].json()["body"],
        format!("{MARKER}\n### vetto: violations\n")
    );
    assert_authorized(&seen);
}

fn write_sarif(root: &Path) -> (String, Vec<u8>) {
    let sarif = br#"{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"vetto"}},"results":[],"automationDetails":{"id":"vetto/job/"}}]}"#.to_vec();
    let path = root.join("vetto.sarif");
    std::fs::write(&path, &sarif).unwrap();
    (path.to_str().unwrap().to_owned(), sarif)
}

fn gunzip_base64(s: &str) -> Vec<u8> {
    let gz = base64::engine::general_purpose::STANDARD.decode(s).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut out)
        .unwrap();
    out
}

const RECEIPT: &str = r#"{"id":"47177e22-5596-11eb-80a1-c1e54ef945c6","url":"https://api.github.com/repos/octo/app/code-scanning/sarifs/47177e22"}"#;

#[test]
fn upload_sarif_retries_a_502_and_sends_the_file_gzipped_and_base64() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, sarif) = write_sarif(tmp.path());
    let api = Api::start(vec![
        reply(502, serde_json::json!({ "message": "Bad Gateway" })),
        Reply {
            status: 202,
            headers: vec![],
            body: RECEIPT.into(),
        },
    ]);
    let out = vetto(
        &api,
        &["github", "upload-sarif", &file],
        &[
            ("GITHUB_TOKEN", TOKEN),
            ("GITHUB_REPOSITORY", "octo/app"),
            ("GITHUB_SHA", SHA),
            ("GITHUB_REF", "refs/heads/main"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("GitHub answered 502; retrying in 1ms (attempt 2 of 5)"));
    assert!(stdout(&out).contains("id: 47177e22-5596-11eb-80a1-c1e54ef945c6"));
    assert!(
        stdout(&out).contains(
            "status: https://api.github.com/repos/octo/app/code-scanning/sarifs/47177e22"
        )
    );
    let seen = api.seen();
    assert_eq!(seen.len(), 2, "one retry");
    assert_authorized(&seen);
    for s in &seen {
        assert_eq!(
            (s.method.as_str(), s.target.as_str()),
            ("POST", "/repos/octo/app/code-scanning/sarifs")
        );
        let body = s.json();
        let keys: Vec<_> = body.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["commit_sha", "ref", "sarif", "tool_name"]);
        assert_eq!(body["commit_sha"], SHA);
        assert_eq!(body["ref"], "refs/heads/main");
        assert_eq!(body["tool_name"], "vetto");
        assert_eq!(gunzip_base64(body["sarif"].as_str().unwrap()), sarif);
    }
}

#[test]
fn upload_sarif_waits_out_a_secondary_rate_limit_and_sets_the_category() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _) = write_sarif(tmp.path());
    let mut limited = reply(
        403,
        serde_json::json!({ "message": "You have exceeded a secondary rate limit." }),
    );
    limited.headers.push(("retry-after", "1".into()));
    let api = Api::start(vec![
        limited,
        Reply {
            status: 202,
            headers: vec![],
            body: RECEIPT.into(),
        },
    ]);
    let out = vetto(
        &api,
        &[
            "github",
            "upload-sarif",
            &file,
            "--repo",
            "octo/app",
            "--sha",
            SHA,
            "--ref",
            "refs/pull/7/merge",
            "--category",
            "vetto/unit",
        ],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rate limited (403, retry-after 1s); retrying in 1s"),
        "{}",
        stderr(&out)
    );
    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    let doc: serde_json::Value =
        serde_json::from_slice(&gunzip_base64(seen[1].json()["sarif"].as_str().unwrap())).unwrap();
    assert_eq!(doc["runs"][0]["automationDetails"]["id"], "vetto/unit/");
    assert_eq!(seen[1].json()["ref"], "refs/pull/7/merge");
}

#[test]
fn persistent_server_errors_give_up_after_the_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _) = write_sarif(tmp.path());
    let api = Api::start(
        (0..3)
            .map(|_| reply(503, serde_json::json!({ "message": "Service Unavailable" })))
            .collect(),
    );
    let out = vetto(
        &api,
        &[
            "github",
            "upload-sarif",
            &file,
            "--repo",
            "o/r",
            "--sha",
            SHA,
            "--ref",
            "refs/heads/main",
            "--attempts",
            "3",
        ],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("GitHub answered 503 3 time(s): Service Unavailable"));
    assert_eq!(api.seen().len(), 3);
}

/// One failing answer to the first request and what vetto says about it.
fn refused(status: u16, message: &str, upload: bool) -> (Output, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let api = Api::start(vec![reply(
        status,
        serde_json::json!({ "message": message }),
    )]);
    let env = [("GITHUB_TOKEN", TOKEN), ("GITHUB_REPOSITORY", "octo/app")];
    let out = if upload {
        let (file, _) = write_sarif(tmp.path());
        vetto(
            &api,
            &[
                "github",
                "upload-sarif",
                &file,
                "--sha",
                SHA,
                "--ref",
                "refs/heads/main",
            ],
            &env,
        )
    } else {
        let dir = report_dir(tmp.path(), "### vetto\n");
        vetto(
            &api,
            &["github", "comment", "--report-dir", &dir, "--pr", "3"],
            &env,
        )
    };
    (out, api.seen().len())
}

#[test]
fn a_bad_token_is_named_and_not_retried() {
    let (out, requests) = refused(401, "Bad credentials", false);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(requests, 1);
    let e = stderr(&out);
    assert!(
        e.contains(
            "GitHub rejected the token (401: Bad credentials): set GITHUB_TOKEN or GH_TOKEN"
        ),
        "{e}"
    );
}

#[test]
fn a_forbidden_request_names_the_missing_permission() {
    let (out, requests) = refused(403, "Resource not accessible by integration", false);
    assert_eq!((out.status.code(), requests), (Some(1), 1));
    assert!(
        stderr(&out).contains("the token needs `pull-requests: write`"),
        "{}",
        stderr(&out)
    );
    let (out, requests) = refused(403, "Resource not accessible by integration", true);
    assert_eq!((out.status.code(), requests), (Some(1), 1));
    assert!(
        stderr(&out).contains("the token needs `security-events: write`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_missing_repository_or_pull_request_says_the_token_may_not_see_it() {
    let (out, _) = refused(404, "Not Found", false);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(
        e.contains("GitHub found no pull request #3 in octo/app (404: Not Found)"),
        "{e}"
    );
    assert!(e.contains("that the token can see the repository"), "{e}");
    let (out, _) = refused(404, "Not Found", true);
    assert!(stderr(&out).contains("GitHub found no repository octo/app"));
}

#[test]
fn usage_errors_exit_2_and_send_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _) = write_sarif(tmp.path());
    let notjson = tmp.path().join("bad.sarif");
    std::fs::write(&notjson, "not json").unwrap();
    let dir = report_dir(tmp.path(), "x");
    let api = Api::start(vec![]);
    let upload = [
        "github",
        "upload-sarif",
        file.as_str(),
        "--sha",
        SHA,
        "--ref",
        "refs/heads/main",
    ];
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            upload.to_vec(),
            vec![("GITHUB_REPOSITORY", "o/r")],
            "no token",
        ),
        (
            upload.to_vec(),
            vec![("GITHUB_TOKEN", TOKEN)],
            "no repository",
        ),
        (
            vec![
                "github",
                "upload-sarif",
                notjson.to_str().unwrap(),
                "--repo",
                "o/r",
                "--sha",
                SHA,
                "--ref",
                "refs/heads/main",
            ],
            vec![("GITHUB_TOKEN", TOKEN)],
            "not JSON",
        ),
        (
            vec![
                "github",
                "upload-sarif",
                &file,
                "--repo",
                "o/r",
                "--ref",
                "refs/heads/main",
            ],
            vec![("GITHUB_TOKEN", TOKEN)],
            "no commit",
        ),
        (
            vec!["github", "comment", "--report-dir", &dir, "--repo", "o/r"],
            vec![("GITHUB_TOKEN", TOKEN)],
            "no pull request",
        ),
        (
            vec!["github", "comment", "--bogus"],
            vec![],
            "unexpected argument",
        ),
    ];
    for (args, env, says) in cases {
        let out = vetto(&api, &args, &env);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert!(api.seen().is_empty(), "nothing is sent on a usage error");
}

/// A job can leave `vetto-report/summary.md` as a link to a file of the
/// user's; posted, its contents would be public on the pull request.
#[test]
fn a_summary_planted_as_a_link_is_never_posted() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("id_ed25519");
    std::fs::write(&secret, "PRIVATE KEY MATERIAL").unwrap();
    let dir = tmp.path().join("vetto-report");
    std::fs::create_dir(&dir).unwrap();
    vetto::sandbox::os::symlink(&secret, &dir.join("summary.md")).unwrap();
    // Followed, the read returns the secret.
    assert_eq!(
        std::fs::read_to_string(dir.join("summary.md")).unwrap(),
        "PRIVATE KEY MATERIAL"
    );
    let api = Api::start(vec![]);
    let out = vetto(
        &api,
        &[
            "github",
            "comment",
            "--report-dir",
            dir.to_str().unwrap(),
            "--repo",
            "o/r",
            "--pr",
            "1",
        ],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("PRIVATE"));
    assert!(api.seen().is_empty());
}
