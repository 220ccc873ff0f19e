//! `go build`, `go vet` and `go test` of a module with one dependency
//! under `--preset go`, as the unprivileged test user at both tiers.
//!
//! The dependency (`example.test/greet v1.0.0`) comes from a GOPROXY
//! stand-in: the module proxy protocol is static files
//! (`<module>/@v/list`, `<version>.info`, `.mod`, `.zip`), served here by
//! a small server on the host's loopback that keeps the path of every
//! request. The job's `GOPROXY` names it as `goproxy.test`, pinned to the
//! loopback with `--resolve`: the preset discovers that host from `go env
//! GOPROXY` and allows it alone, so the module is fetched through vetto's
//! egress proxy like a real mirror (the session log shows the
//! connection). `GOSUMDB=off` (there is no checksum database for a
//! module that exists only here) and `GOFLAGS=-mod=mod` (go.sum is
//! written by the first build) are the caller's, passed to the job as Go
//! itself would see them.
//!
//! Needs `go` on `PATH`: without it the tests SKIP, and
//! `VETTO_TEST_REQUIRE=go` turns that into a failure.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::util::{self, Out, Run, Tier, World, skip};
use crate::{at_every_tier, require};

/// The `VETTO_TEST_REQUIRE` item that makes a missing `go` fail.
pub const GO: &str = "go";
/// The name the job's `GOPROXY` uses, pinned to the loopback.
pub const PROXY_HOST: &str = "goproxy.test";
/// The dependency, and where Go keeps its extracted source.
pub const MODULE: &str = "example.test/greet";
pub const MODULE_DIR: &str = "example.test/greet@v1.0.0";
/// What the dependency's `Hello` says.
pub const GREETING: &str = "hello from greet 5e0c";
/// Generous: a cold `go build` on a loaded machine; a guard, not a measure.
pub const HANG_GUARD: Duration = Duration::from_secs(300);

/// True (after saying SKIP) when `go` is missing; a failure instead when
/// `VETTO_TEST_REQUIRE` lists [`GO`].
/// A world with the module written and the GOPROXY stand-in serving it;
/// `None` (a visible SKIP, or a failure where Go is required) without Go.
pub fn module_world(tier: Tier) -> Option<(World, GoProxy)> {
    if go_missing() {
        return None;
    }
    let w = World::at(tier);
    let proxy = GoProxy::start(&w.root.join("goproxy"));
    write_module(&w);
    Some((w, proxy))
}

pub fn go_missing() -> bool {
    let Some(reason) = skip::tool_missing("go") else {
        return false;
    };
    assert!(
        !util::required_by_name(GO),
        "{}: VETTO_TEST_REQUIRE lists {GO}, but {reason}",
        util::test_name()
    );
    skip::say(&util::test_name(), &reason);
    true
}

/// The GOPROXY stand-in: serves `root` (the protocol's static files),
/// keeps every request's path.
pub struct GoProxy {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl GoProxy {
    /// Write [`MODULE`] v1.0.0 under `root` and serve it.
    pub fn start(root: &Path) -> GoProxy {
        let v = root.join(MODULE).join("@v");
        std::fs::create_dir_all(&v).unwrap();
        let go_mod = format!("module {MODULE}\n\ngo 1.18\n");
        std::fs::write(v.join("list"), "v1.0.0\n").unwrap();
        std::fs::write(
            v.join("v1.0.0.info"),
            "{\"Version\":\"v1.0.0\",\"Time\":\"2024-01-01T00:00:00Z\"}",
        )
        .unwrap();
        std::fs::write(v.join("v1.0.0.mod"), &go_mod).unwrap();
        // The zip's entries are prefixed `<module>@<version>/`.
        util::cmd_output(
            std::process::Command::new("python3")
                .args([
                    "-c",
                    "import zipfile, sys\n\
                     with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
                     \x20   z.writestr(sys.argv[2] + '/go.mod', sys.argv[3])\n\
                     \x20   z.writestr(sys.argv[2] + '/greet.go', sys.argv[4])\n",
                ])
                .arg(v.join("v1.0.0.zip"))
                .arg(MODULE_DIR)
                .arg(&go_mod)
                .arg(format!(
                    "package greet\n\nfunc Hello() string {{ return \"{GREETING}\" }}\n"
                )),
        );
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let kept = kept.clone();
                let root = root.clone();
                std::thread::spawn(move || serve(&s, &root, &kept));
            }
        });
        GoProxy { port, seen }
    }

    /// The paths requested so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests asked for the module's zip.
    pub fn zip_fetches(&self) -> usize {
        self.requests()
            .iter()
            .filter(|p| p.ends_with(".zip"))
            .count()
    }
}

/// One request on `s`: the file under `root` its path names, or 404.
fn serve(s: &std::net::TcpStream, root: &Path, seen: &Mutex<Vec<String>>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut r = BufReader::new(s);
    let mut first = String::new();
    if r.read_line(&mut first).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    let target = first.split_whitespace().nth(1).unwrap_or("");
    // Origin form, or the absolute form a forward proxy may pass on.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = path.split('?').next().unwrap_or("").to_string();
    if path.is_empty() {
        return;
    }
    seen.lock().unwrap().push(path.clone());
    let file: PathBuf = root.join(path.trim_start_matches('/'));
    let body = (!path.contains(".."))
        .then(|| std::fs::read(&file).ok())
        .flatten();
    let mut w = s;
    let _ = match body {
        Some(b) => w
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    b.len()
                )
                .as_bytes(),
            )
            .and_then(|()| w.write_all(&b)),
        None => {
            w.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
    };
}

/// The project: a main package and a test, both calling the dependency.
pub fn write_module(w: &World) {
    w.write(
        &w.project.join("go.mod"),
        &format!("module example.test/demo\n\ngo 1.18\n\nrequire {MODULE} v1.0.0\n"),
    );
    w.write(
        &w.project.join("main.go"),
        &format!(
            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"{MODULE}\"\n)\n\nfunc main() {{ fmt.Println(greet.Hello()) }}\n"
        ),
    );
    w.write(
        &w.project.join("main_test.go"),
        &format!(
            "package main\n\nimport (\n\t\"testing\"\n\n\t\"{MODULE}\"\n)\n\n\
             func TestHelloIsTheDependencys(t *testing.T) {{\n\
             \tif greet.Hello() != \"{GREETING}\" {{\n\t\tt.Fatal(greet.Hello())\n\t}}\n}}\n"
        ),
    );
}

/// The caller's Go settings for a run whose proxy is at `url`.
pub fn go_env(run: Run, url: &str) -> Run {
    run.env("GOPROXY", url)
        .env("GOSUMDB", "off")
        .env("GOFLAGS", "-mod=mod")
        .timeout(HANG_GUARD)
}

/// `sh -c SCRIPT` under `--preset go` with the stand-in as `GOPROXY`,
/// reports in `reports`.
pub fn sandboxed_go(w: &World, proxy: &GoProxy, reports: &Path, script: &str) -> Out {
    let resolve = format!("{PROXY_HOST}:127.0.0.1");
    let run = w.sandboxed_with(
        &[
            "--preset",
            "go",
            "--resolve",
            &resolve,
            "--report-dir",
            reports.to_str().unwrap(),
        ],
        &["sh", "-c", script],
    );
    go_env(run, &format!("http://{PROXY_HOST}:{}", proxy.port)).run()
}

/// `sh -c SCRIPT` bare, the stand-in as `GOPROXY` at its loopback address.
pub fn bare_go(w: &World, proxy: &GoProxy, script: &str) -> Out {
    let run = w.bare(&["sh", "-c", script]);
    go_env(run, &format!("http://127.0.0.1:{}", proxy.port)).run()
}

/// The session log's allowed connections to the stand-in.
fn proxy_connections(reports: &Path) -> Vec<Value> {
    std::fs::read_to_string(reports.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "connection" && v["host"] == PROXY_HOST)
        .collect()
}

/// Build (listing what it compiles), run, vet and test.
const BUILD_VET_TEST: &str = "set -e; rm -f demo; go build -v -o demo . 2>\"$TMPDIR/built\"; \
     sed 's/^/compiled: /' \"$TMPDIR/built\"; ./demo; go vet ./...; go test ./...";

/// Runs as an unprivileged user: the first run fetches the dependency
/// through the egress proxy into the vetto-owned module cache and builds,
/// vets and tests; the second finds both caches warm — the stand-in sees
/// no second request for the zip, and `go build -v` compiles no package
/// (GOCACHE hit) — and the host's own Go caches were never written.
fn go_build_fetches_through_the_proxy_into_a_warm_vetto_cache(tier: Tier) {
    require!(tier.feature());
    let Some((w, proxy)) = module_world(tier) else {
        return;
    };
    let first_reports = w.root.join("reports-1");
    let first = sandboxed_go(&w, &proxy, &first_reports, BUILD_VET_TEST);
    first
        .assert_success()
        .assert_stdout_contains(GREETING)
        .assert_stdout_contains(&format!("compiled: {MODULE}"))
        .assert_stdout_contains("ok  \texample.test/demo");
    assert_eq!(proxy.zip_fetches(), 1, "{:?}", proxy.requests());
    let conns = proxy_connections(&first_reports);
    assert!(
        conns.iter().any(|c| c["decision"] == "allowed"
            && c["rule"].to_string().contains("discovered")
            && c["process"]["exe"].to_string().contains("go")),
        "the session log shows go's connection to {PROXY_HOST}, allowed by the discovered rule: {conns:?}\n{}",
        first.dump()
    );
    let cache = w.vetto_cache("go");
    assert!(
        cache
            .join("mod")
            .join(MODULE_DIR)
            .join("greet.go")
            .is_file(),
        "the vetto module cache holds the dependency's source\n{}",
        first.dump()
    );

    let warm = sandboxed_go(&w, &proxy, &w.root.join("reports-2"), BUILD_VET_TEST);
    warm.assert_success()
        .assert_stdout_contains(GREETING)
        .assert_stdout_lacks("compiled: ")
        .assert_stdout_contains("ok  \texample.test/demo");
    assert_eq!(
        proxy.zip_fetches(),
        1,
        "the warm run fetched the module again: {:?}\n{}",
        proxy.requests(),
        warm.dump()
    );
    for host_cache in ["go", ".cache/go-build"] {
        assert!(
            !w.home.join(host_cache).exists(),
            "the host's Go cache ~/{host_cache} was written"
        );
    }
}

/// `go env -w GOPROXY=…` writes the user's env file: here
/// `~/.config/go/env`, written directly, with no `GOENV` set.
fn write_env_file(w: &World, proxy: &str) {
    w.write(
        &w.home.join(".config/go/env"),
        &format!("GOPROXY={proxy}\nGOSUMDB=off\n"),
    );
}

/// `vetto run --preset go -- true` with `path` as `PATH`; asserts that
/// `host` was discovered from `go env GOPROXY`.
fn go_session(w: &World, path: &str, host: &str) {
    w.sandboxed_with(&["--preset", "go"], &["true"])
        .env("PATH", path)
        .run()
        .assert_success()
        .assert_stderr_contains(&format!(
            "discovered registries: go {host}:443 (go env GOPROXY)"
        ));
}

/// Runs as an unprivileged user: the proxy of the user's Go env file is
/// discovered by the real `go env GOPROXY GOSUMDB …`; a second session
/// with the file unchanged answers from vetto's memo (the remembered
/// answer is not learnt and written again), and a changed file is asked
/// again and its new proxy allowed (no network needed).
fn a_changed_go_env_proxy_is_discovered_again(tier: Tier) {
    require!(tier.feature());
    if go_missing() {
        return;
    }
    let w = World::at(tier);
    write_env_file(&w, "https://one.proxy.test");
    // vetto remembers only what changed more than two seconds ago.
    std::thread::sleep(Duration::from_secs(3));
    go_session(&w, util::PATH, "one.proxy.test");
    let first = super::toolchains::memo_files(&w.home);
    assert_eq!(first.len(), 1, "one answer remembered: {first:?}");
    go_session(&w, util::PATH, "one.proxy.test");
    assert_eq!(
        super::toolchains::memo_files(&w.home),
        first,
        "the unchanged configuration was asked again"
    );
    write_env_file(&w, "https://the-second.proxy.test");
    go_session(&w, util::PATH, "the-second.proxy.test");
}

/// Runs as an unprivileged user: an unchanged Go configuration costs no
/// process. A stand-in `go` first on `PATH` (in a directory shaped like a
/// GOROOT: `bin/go` and `pkg/tool`) counts its runs and answers from the
/// env file: the second session does not run it, a changed env file does.
fn an_unchanged_go_configuration_is_answered_without_running_go(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let root = w.home.join("sdk/go");
    w.write(
        &root.join("bin/go"),
        "#!/bin/sh\necho ran >> \"$HOME/go-runs\"\nsed -n 's/^GOPROXY=//p' \"$HOME/.config/go/env\"\necho off\n",
    );
    w.write(&root.join("pkg/tool/.keep"), "");
    std::fs::set_permissions(
        root.join("bin/go"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{}", root.join("bin").display(), util::PATH);
    let runs = || {
        std::fs::read_to_string(w.home.join("go-runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    write_env_file(&w, "https://one.proxy.test");
    std::thread::sleep(Duration::from_secs(3));
    go_session(&w, &path, "one.proxy.test");
    assert_eq!(runs(), 1);
    go_session(&w, &path, "one.proxy.test");
    assert_eq!(runs(), 1, "the unchanged configuration was asked again");
    write_env_file(&w, "https://the-second.proxy.test");
    go_session(&w, &path, "the-second.proxy.test");
    assert_eq!(runs(), 2);
}

at_every_tier!(
    go_build_fetches_through_the_proxy_into_a_warm_vetto_cache,
    a_changed_go_env_proxy_is_discovered_again,
    an_unchanged_go_configuration_is_answered_without_running_go
);

/// A Go test of an HTTP handler through `net/http/httptest`, whose server
/// listens on `127.0.0.1:0`: the commonest Go test of all.
const HTTPTEST: &str = "package web\n\nimport (\n\t\"io\"\n\t\"net/http\"\n\t\"net/http/httptest\"\n\t\"testing\"\n)\n\n\
func TestTheHandlerAnswers(t *testing.T) {\n\
\tsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {\n\
\t\tio.WriteString(w, \"httptest-answered\")\n\
\t}))\n\
\tdefer srv.Close()\n\
\tresp, err := http.Get(srv.URL)\n\
\tif err != nil {\n\t\tt.Fatal(err)\n\t}\n\
\tdefer resp.Body.Close()\n\
\tb, _ := io.ReadAll(resp.Body)\n\
\tt.Log(string(b))\n\
\tif string(b) != \"httptest-answered\" {\n\t\tt.Fatal(string(b))\n\t}\n}\n";

/// Runs as an unprivileged user, `vetto ci -- go test -v ./...` with no
/// flags (the preset the project's `go.mod` names is applied, and with it
/// filtered egress), and with the network off: a test whose `httptest`
/// server listens on loopback passes, `CLEAN`, 0 violations. Evidence: bare the same; before issue
/// P11, at FS-ONLY with filtered egress the server's `bind()` was refused.
fn go_httptest_servers_work_with_no_flags(tier: Tier) {
    require!(tier.feature());
    if go_missing() {
        return;
    }
    let w = World::at(tier);
    w.write(
        &w.project.join("go.mod"),
        "module example.test/web\n\ngo 1.18\n",
    );
    w.write(&w.project.join("web_test.go"), HTTPTEST);
    let script = "go test -count=1 -v ./... 2>&1";
    w.sh_bare(script)
        .assert_success()
        .assert_stdout_contains("httptest-answered");
    // No flags (the preset `go.mod` names, with filtered egress), and the
    // preset with the network off.
    for options in [&[][..], &["--preset", "go", "--net", "off"][..]] {
        let (out, log) = w.ci_sh_with(options, script);
        out.assert_stdout_contains("httptest-answered")
            .assert_stdout_contains("--- PASS: TestTheHandlerAnswers")
            .assert_stderr_contains("CLEAN");
        assert_eq!(out.code(), 0, "{options:?}\n{}", out.dump());
        let violations: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"type\":\"violation\""))
            .collect();
        assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
    }
}
at_every_tier!(go_httptest_servers_work_with_no_flags);
