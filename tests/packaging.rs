//! The npm package (`packaging/npm/`) installs the binary of this build and
//! nothing else: packed as the release workflow packs it — with a
//! `SHA256SUMS` inside — and installed with `npm install -g` into a
//! throwaway prefix, its install script fetches the binary from a local
//! stand-in for the release (over HTTP with a redirect, as GitHub's release
//! downloads are), checks it, and `<prefix>/bin/vetto --version` runs it. A
//! checksum that does not match fails the install and leaves no `vetto`.
//!
//! Needs npm (`.ci/run` installs it; without it these tests print `SKIP`,
//! and fail when `VETTO_TEST_REQUIRE` lists `npm`). Nothing leaves the
//! machine: the package has no dependencies and npm runs `--offline`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

#[path = "util/skip.rs"]
mod skip;

/// A hang guard only: npm on a loaded machine is slow, never this slow.
const DEADLINE: Duration = Duration::from_secs(600);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn npm(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("npm"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            !skip::listed("npm"),
            "{test}: VETTO_TEST_REQUIRE lists npm, but npm is not on PATH"
        );
        skip::say(test, "npm is not on PATH");
    }
    found
}

/// The release asset name install.js picks on this machine.
fn asset() -> String {
    let target = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "x86_64-unknown-linux-musl",
        ("linux", "aarch64") => "aarch64-unknown-linux-musl",
        ("macos", "x86_64") => "x86_64-apple-darwin",
        ("macos", "aarch64") => "aarch64-apple-darwin",
        other => panic!("the npm package has no binary for {other:?}"),
    };
    format!("vetto-{target}")
}

/// Run `cmd` to the end (killed at the hang guard).
fn run(mut cmd: Command) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("{what} hung past {DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(50));
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn dump(out: &Output) -> String {
    format!(
        "status {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A copy of packaging/npm with `sums` as its SHA256SUMS, packed by `npm
/// pack`: the tarball's path.
fn pack(npm: &Path, tmp: &Path, sums: &str) -> PathBuf {
    let pkg = tmp.join("pkg");
    let src = root().join("packaging/npm");
    for rel in ["package.json", "install.js", "README.md", "bin/vetto"] {
        let to = pkg.join(rel);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::copy(src.join(rel), &to).unwrap_or_else(|e| panic!("{rel}: {e}"));
    }
    std::fs::write(pkg.join("SHA256SUMS"), sums).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(npm);
    cmd.args(["pack", "--pack-destination"])
        .arg(tmp)
        .current_dir(&pkg)
        .env("npm_config_cache", tmp.join("cache"))
        .env("npm_config_update_notifier", "false");
    let out = run(cmd);
    assert!(out.status.success(), "npm pack: {}", dump(&out));
    let name = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let tarball = tmp.join(&name);
    assert!(tarball.is_file(), "npm pack made no {}", tarball.display());
    tarball
}

/// `npm install -g TARBALL` into `<tmp>/prefix`, downloading from `base`.
fn install(npm: &Path, tmp: &Path, tarball: &Path, base: &str) -> Output {
    let mut cmd = Command::new(npm);
    cmd.args(["install", "-g", "--offline", "--no-audit", "--no-fund"])
        .arg(tarball)
        .current_dir(tmp)
        .env("npm_config_prefix", tmp.join("prefix"))
        .env("npm_config_cache", tmp.join("cache"))
        .env("npm_config_update_notifier", "false")
        .env("VETTO_NPM_DOWNLOAD_BASE", base);
    run(cmd)
}

/// Serve `body` as `/download/<asset>` by way of a redirect to
/// `/objects/<asset>` (GitHub answers release downloads with a 302), on
/// 127.0.0.1; the base URL. The thread ends with the test binary.
fn serve_release(asset: String, body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // The request's headers, up to the blank line.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let mut out = &stream;
            let _ = if path == format!("/download/{asset}") {
                write!(
                    out,
                    "HTTP/1.1 302 Found\r\nLocation: /objects/{asset}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            } else if path == format!("/objects/{asset}") {
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .and_then(|()| out.write_all(&body))
            } else {
                write!(
                    out,
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            };
        }
    });
    format!("http://127.0.0.1:{port}/download")
}

fn this_binary() -> Vec<u8> {
    std::fs::read(env!("CARGO_BIN_EXE_vetto")).unwrap_or_else(|e| panic!("the vetto binary: {e}"))
}

#[test]
fn npm_package_installs_the_checked_release_binary_and_vetto_runs() {
    let Some(npm) = npm("npm_package_installs_the_checked_release_binary_and_vetto_runs") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let binary = this_binary();
    let sums = format!("{}  {}\n", vetto::hash::sha256_hex(&[&binary]), asset());
    let tarball = pack(&npm, tmp.path(), &sums);
    let base = serve_release(asset(), binary.clone());

    let out = install(&npm, tmp.path(), &tarball, &base);
    assert!(out.status.success(), "npm install -g: {}", dump(&out));

    let bin = tmp.path().join("prefix/bin/vetto");
    let installed = std::fs::read(&bin).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        installed == binary,
        "{} is not the checked binary",
        bin.display()
    );
    let mut cmd = Command::new(&bin);
    cmd.arg("--version");
    let out = run(cmd);
    assert!(out.status.success(), "vetto --version: {}", dump(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("vetto {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn npm_package_refuses_a_binary_whose_checksum_differs() {
    let Some(npm) = npm("npm_package_refuses_a_binary_whose_checksum_differs") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The release directory as file:// (the package's other source), with
    // a binary that is not the one SHA256SUMS names.
    let release = tmp.path().join("release");
    std::fs::create_dir_all(&release).unwrap_or_else(|e| panic!("{e}"));
    let mut tampered = this_binary();
    tampered.extend_from_slice(b"appended by a compromised mirror");
    std::fs::write(release.join(asset()), &tampered).unwrap_or_else(|e| panic!("{e}"));
    let sums = format!(
        "{}  {}\n",
        vetto::hash::sha256_hex(&[&this_binary()]),
        asset()
    );
    let tarball = pack(&npm, tmp.path(), &sums);

    let out = install(
        &npm,
        tmp.path(),
        &tarball,
        &format!("file://{}", release.display()),
    );
    assert!(
        !out.status.success(),
        "npm install -g took a tampered binary: {}",
        dump(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"),
        "the failure does not say why: {}",
        dump(&out)
    );
    let bin = tmp.path().join("prefix/bin/vetto");
    let left = std::fs::read(&bin).unwrap_or_default();
    assert!(
        left != tampered,
        "the tampered binary was installed at {}",
        bin.display()
    );
}

#[test]
fn npm_package_without_checksums_installs_nothing() {
    let Some(npm) = npm("npm_package_without_checksums_installs_nothing") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tarball = pack(&npm, tmp.path(), "");
    let out = install(&npm, tmp.path(), &tarball, "file:///nonexistent");
    assert!(
        !out.status.success(),
        "installed without checksums: {}",
        dump(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SHA256SUMS lists no"),
        "{}",
        dump(&out)
    );
}

/// The npm package downloads the release of its own version, and the
/// Homebrew formula names the same one: both are this crate's.
#[test]
fn packages_carry_the_crate_version() {
    let pkg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("packaging/npm/package.json"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("package.json: {e}"));
    assert_eq!(pkg["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
    assert_eq!(pkg["bin"]["vetto"].as_str(), Some("bin/vetto"));
    assert!(
        pkg["dependencies"].is_null(),
        "the npm package must have no dependencies"
    );
    let formula = std::fs::read_to_string(root().join("packaging/homebrew/vetto.rb"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        formula.contains(&format!("  version \"{}\"\n", env!("CARGO_PKG_VERSION"))),
        "vetto.rb's version is not the crate's"
    );
}
