//! Real package managers under their presets, as the unprivileged test
//! user at both tiers: each fetches one small real dependency from the
//! registry the tool is configured for, through the egress proxy, into
//! the vetto-owned cache; a second run finds the cache warm (offline), and
//! the host's own cache is untouched.
//!
//! These need the network: when the registry is unreachable they SKIP
//! with `SKIP <test>: …` (`VETTO_TEST_REQUIRE=registry` turns that into a
//! failure). The registry hosts are never written here: they are the ones
//! `vetto policy explain --preset NAME` discovers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::util::{self, Tier, World, skip};
use crate::{at_every_tier, require};

/// The `VETTO_TEST_REQUIRE` item that makes an unreachable registry fail.
const REGISTRY: &str = "registry";

/// The hosts `--preset NAME` discovers on this host, each reachable bare
/// (any HTTP answer counts), or why not.
fn registry_reachable(w: &World, preset: &str) -> Result<Vec<String>, String> {
    let out = w.vetto(&["policy", "explain", "--preset", preset]).run();
    let err = out.stderr();
    let line = err
        .lines()
        .find(|l| l.contains("discovered registries: "))
        .ok_or_else(|| format!("--preset {preset} discovers no registry here:\n{err}"))?;
    let mut rules = Vec::new();
    for item in line.split(", ") {
        let Some(hostport) = item
            .split_whitespace()
            .nth(if item.contains("registries:") { 4 } else { 1 })
        else {
            continue;
        };
        let url = format!("https://{hostport}/");
        let ok = w
            .bare(&["curl", "-sS", "-m", "20", "-o", "/dev/null", &url])
            .run()
            .code()
            == 0;
        if !ok {
            return Err(format!("{url} is unreachable"));
        }
        // Where this host's resolver answers with an address the proxy
        // treats as internal (a registry mirror in a reserved range), the
        // test pins the name there — the rule vetto's advice names, which
        // keeps the name and TLS checks — never an address rule; elsewhere
        // the pin is the address the name has anyway.
        let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
        let addrs = w.bare(&["getent", "ahostsv4", host]).run().stdout();
        for addr in addrs.lines().filter_map(|l| l.split_whitespace().next()) {
            let rule = format!("{host}:{addr}");
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    Ok(rules
        .into_iter()
        .flat_map(|r| ["--resolve".to_string(), r])
        .collect())
}

macro_rules! require_registry {
    ($w:expr, $preset:expr) => {
        match registry_reachable(&$w, $preset) {
            Ok(rules) => rules,
            Err(reason) => {
                if util::required_by_name(REGISTRY) {
                    panic!(
                        "{}: VETTO_TEST_REQUIRE lists {REGISTRY}, but {reason}",
                        util::test_name()
                    );
                }
                skip::say(&util::test_name(), &reason);
                return;
            }
        }
    };
}

/// The Rust toolchain of the user running the tests, hard-linked where
/// the test user can reach it (bin/ and lib/ of `rustc --print sysroot`).
pub(crate) fn toolchain() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .ok()?;
        let sysroot = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        let dir = PathBuf::from(format!("/tmp/vetto-test-rust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok()?;
        for sub in ["bin", "lib"] {
            let ok = Command::new("cp")
                .arg("-al")
                .arg(sysroot.join(sub))
                .arg(&dir)
                .status()
                .ok()?
                .success();
            if !ok {
                return None;
            }
        }
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&dir)
            .status()
            .ok()?;
        Some(dir)
    })
    .as_deref()
}

/// The lent toolchain ([`toolchain`]), or a visible SKIP.
macro_rules! require_toolchain {
    () => {
        match toolchain() {
            Some(tc) => tc,
            None => {
                skip::say(
                    &util::test_name(),
                    "no Rust toolchain to lend the test user",
                );
                return;
            }
        }
    };
}

/// Write `path` as the test user.
fn put(w: &World, path: &Path, body: &str) {
    let path = path.to_str().unwrap_or_default();
    w.bare(&[
        "sh",
        "-c",
        "mkdir -p \"$(dirname \"$1\")\" && cat > \"$1\"",
        "sh",
        path,
    ])
    .stdin(body.as_bytes().to_vec())
    .run()
    .assert_success();
}

pub(crate) fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.join("bin").display(), util::PATH)
}

/// `cargo build` and `cargo test` (a unit test that calls the
/// dependency) of a crate with one real dependency under `--preset
/// cargo`, then both again `--offline` from the warm vetto-owned cache.
fn cargo_build_fetches_through_the_proxy_into_a_warm_vetto_cache(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let ips = require_registry!(w, "cargo");
    let ips_s: Vec<&str> = ips.iter().map(String::as_str).collect();
    let tc = require_toolchain!();
    put(
        &w,
        &w.project.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
    );
    put(
        &w,
        &w.project.join("src/main.rs"),
        "fn main() { println!(\"{}\", itoa::Buffer::new().format(42)); }\n\n\
         #[test]\nfn formats_with_the_dependency() { assert_eq!(itoa::Buffer::new().format(7), \"7\"); }\n",
    );
    let tc_s = tc.to_str().unwrap_or_default();
    let run = |args: &str| {
        w.sandboxed_with(
            &[&["--preset", "cargo", "--allow-read", tc_s][..], &ips_s].concat(),
            &[
                "sh",
                "-c",
                &format!(
                    "cargo build {args} -q && ./target/debug/demo && cargo test {args} -q 2>&1"
                ),
            ],
        )
        .env("PATH", path_with(tc))
        .timeout(std::time::Duration::from_secs(300))
        .run()
    };
    let first = run("");
    first
        .assert_success()
        .assert_stdout_contains("42")
        .assert_stdout_contains("test result: ok. 1 passed");
    let _ = std::fs::remove_dir_all(w.project.join("target"));
    let warm = run("--offline");
    warm.assert_success()
        .assert_stdout_contains("42")
        .assert_stdout_contains("test result: ok. 1 passed");
    let cached = w.vetto_cache("cargo").join("registry/cache");
    assert!(
        cached.is_dir(),
        "the vetto cache holds the crate\n{}",
        first.dump()
    );
    assert!(
        !w.home.join(".cargo/registry/cache").exists(),
        "the host's cargo cache stayed untouched"
    );
}

/// A package with one dependency (`is-odd`) and a test script that
/// requires it, printing `npm-test-pass`.
fn npm_demo(w: &World) {
    put(
        w,
        &w.project.join("package.json"),
        "{\"name\":\"demo\",\"version\":\"1.0.0\",\"private\":true,\"dependencies\":{\"is-odd\":\"3.0.1\"},\
         \"scripts\":{\"test\":\"node test.js\"}}\n",
    );
    put(
        w,
        &w.project.join("test.js"),
        "const isOdd = require('is-odd');\nif (!isOdd(3) || isOdd(4)) { process.exit(1); }\nconsole.log('npm-test-pass');\n",
    );
}

/// `npm install` and `npm test` (a test script that requires the
/// dependency) of a package with one dependency under `--preset npm`,
/// then both again `--offline` from the warm vetto-owned cache.
fn npm_install_fetches_through_the_proxy_into_a_warm_vetto_cache(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let ips = require_registry!(w, "npm");
    let ips_s: Vec<&str> = ips.iter().map(String::as_str).collect();
    npm_demo(&w);
    let run = |args: &str| {
        w.sandboxed_with(
            &[&["--preset", "npm"][..], &ips_s].concat(),
            &["sh", "-c", &format!("npm install --no-audit --no-fund {args} && node -e 'console.log(require(\"is-odd\")(3))' && npm test")],
        )
        .timeout(std::time::Duration::from_secs(300))
        .run()
    };
    run("")
        .assert_success()
        .assert_stdout_contains("true")
        .assert_stdout_contains("npm-test-pass");
    let _ = std::fs::remove_dir_all(w.project.join("node_modules"));
    let _ = std::fs::remove_file(w.project.join("package-lock.json"));
    run("--offline")
        .assert_success()
        .assert_stdout_contains("true")
        .assert_stdout_contains("npm-test-pass");
    assert!(w.vetto_cache("npm").join("_cacache").is_dir());
    assert!(
        !w.home.join(".npm/_cacache").exists(),
        "the host's npm cache stayed untouched"
    );
}

/// `pip install` of a dependency and pytest into a virtual environment
/// under `--preset pip`, and `python -m pytest` of a test that imports the
/// dependency; then
/// again with the index unreachable (`--no-index` is not used: pip must
/// find the wheel in the warm vetto-owned cache… it re-asks the index, so
/// the warm run checks the cache's files instead).
fn pip_install_into_a_venv_fetches_through_the_proxy_into_a_vetto_cache(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let ips = require_registry!(w, "pip");
    let ips_s: Vec<&str> = ips.iter().map(String::as_str).collect();
    let run = |script: &str| {
        w.sandboxed_with(
            &[&["--preset", "pip"][..], &ips_s].concat(),
            &["sh", "-c", script],
        )
        .timeout(std::time::Duration::from_secs(300))
        .run()
    };
    let script = "set -e; rm -rf .venv; python3 -m venv .venv; .venv/bin/pip cache dir; \
                  .venv/bin/pip install -q --disable-pip-version-check six==1.16.0 pytest==8.3.3; \
                  .venv/bin/python -c 'import six; print(six.__version__)'; \
                  .venv/bin/python -m pytest -q -p no:cacheprovider test_six.py";
    put(
        &w,
        &w.project.join("test_six.py"),
        "import six\n\ndef test_six_is_the_pinned_one():\n    assert six.__version__ == '1.16.0'\n",
    );
    let cache = w.vetto_cache("pip");
    let cache_s = cache.to_str().unwrap_or("?");
    // Twice, a fresh venv each time, the same vetto-owned cache. (Whether
    // pip keeps an index response there depends on the index's cache
    // headers; a wheel pip built is always kept.)
    for _ in 0..2 {
        run(script)
            .assert_success()
            .assert_stdout_contains(cache_s)
            .assert_stdout_contains("1.16.0")
            .assert_stdout_contains("1 passed");
    }
    assert!(cache.is_dir());
    assert!(
        !w.home.join(".cache/pip").exists(),
        "the host's pip cache stayed untouched"
    );
}

/// `--preset npm` asks `npm config get registry` once: a second session
/// with the same configuration answers from vetto's memo without running
/// the tool, and a changed `~/.npmrc` is asked again and its new registry
/// allowed (a stand-in `npm` that counts its runs; no network needed).
fn a_changed_npmrc_registry_is_discovered_again(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let path = counting_npm(&w);
    let session = |registry: &str| {
        let out = w
            .sandboxed_with(&["--preset", "npm"], &["true"])
            .env("PATH", &path)
            .run();
        out.assert_success().assert_stderr_contains(&format!(
            "discovered registries: npm {registry}:443 (npm config get registry)"
        ));
        std::fs::read_to_string(w.home.join("npm-runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    put(
        &w,
        &w.home.join(".npmrc"),
        "registry=https://one.registry.test/\n",
    );
    // vetto remembers only what changed more than two seconds ago (a
    // change in the same clock tick could keep the old stamps).
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(session("one.registry.test"), 1);
    assert_eq!(
        session("one.registry.test"),
        1,
        "the unchanged configuration was asked again"
    );
    put(
        &w,
        &w.home.join(".npmrc"),
        "registry=https://the-second.registry.test/\n",
    );
    assert_eq!(session("the-second.registry.test"), 2);
}

/// A stand-in `npm` that prints the `registry=` of `~/.npmrc` and counts
/// its runs in `~/npm-runs`; the `PATH` that finds it first.
fn counting_npm(w: &World) -> String {
    let bin = w.home.join("bin");
    put(
        w,
        &bin.join("npm"),
        "#!/bin/sh\necho ran >> \"$HOME/npm-runs\"\nsed -n 's/^registry *= *//p' \"$HOME/.npmrc\"\n",
    );
    w.bare(&["chmod", "755", bin.join("npm").to_str().unwrap_or_default()])
        .run()
        .assert_success();
    format!("{}:{}", bin.display(), util::PATH)
}

/// A registry token in the masked `~/.npmrc` (in the URL's query, where
/// some registries take it) is not copied into vetto's memo of answers,
/// which would be one more file to steal it from; the remembered answer
/// still allows the registry's host, and the token never reaches the
/// terminal or the job.
fn a_registry_token_is_not_copied_into_vettos_memo(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let path = counting_npm(&w);
    let token = "npm_T0kenNotForTheMemo";
    put(
        &w,
        &w.home.join(".npmrc"),
        &format!("registry=https://tok.registry.test/?token={token}\n"),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    for runs in [1, 1] {
        let out = w
            .sandboxed_with(&["--preset", "npm"], &["sh", "-c", "env"])
            .env("PATH", &path)
            .run();
        out.assert_success().assert_stderr_contains(
            "discovered registries: npm tok.registry.test:443 (npm config get registry)",
        );
        assert!(!out.stderr().contains(token), "{}", out.stderr());
        assert!(!out.stdout().contains(token), "the job was told the token");
        let asked = std::fs::read_to_string(w.home.join("npm-runs")).unwrap_or_default();
        assert_eq!(
            asked.lines().count(),
            runs,
            "the second answer is the memo's"
        );
    }
    let memo = memo_files(&w.home);
    assert_eq!(memo.len(), 1, "{memo:?}");
    for (name, _, _) in memo {
        let kept = std::fs::read(w.home.join(".cache/vetto/walk").join(&name)).unwrap_or_default();
        let kept = String::from_utf8_lossy(&kept);
        assert!(kept.contains("https://tok.registry.test/?-"), "{kept}");
        assert!(!kept.contains(token), "the memo keeps the token: {kept}");
    }
}

/// The `VETTO_TEST_REQUIRE` item that makes a `python3` without pip fail.
const PIP: &str = "pip";

/// The remembered discovery answers in vetto's directory (name, inode,
/// modification time): a question asked again is written again.
pub fn memo_files(home: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let mut out: Vec<_> = std::fs::read_dir(home.join(".cache/vetto/walk"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("discover-"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                m.ino(),
                m.modified().ok()?,
            ))
        })
        .collect();
    out.sort();
    out
}

/// `--preset pip` asks the real `python3 -m pip config list` once: a
/// second session with the same configuration answers from vetto's memo
/// (the remembered answer is not learnt and written again), and a
/// changed `~/.config/pip/pip.conf` is asked again and its new index
/// allowed (no network needed: pip only reads its configuration).
fn a_changed_pip_conf_index_is_discovered_again(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    if w.bare(&["python3", "-m", "pip", "--version"]).run().code() != 0 {
        let reason = "python3 has no pip";
        assert!(
            !util::required_by_name(PIP),
            "{}: VETTO_TEST_REQUIRE lists {PIP}, but {reason}",
            util::test_name()
        );
        skip::say(&util::test_name(), reason);
        return;
    }
    let conf = w.home.join(".config/pip/pip.conf");
    let session = |index: &str| {
        w.sandboxed_with(&["--preset", "pip"], &["true"])
            .run()
            .assert_success()
            .assert_stderr_contains("discovered registries: ")
            .assert_stderr_contains(&format!("pip {index}:443 (python3 -m pip config list)"));
        memo_files(&w.home)
    };
    put(
        &w,
        &conf,
        "[global]\nindex-url = https://one.index.test/simple\n",
    );
    // `-m pip` runs in the home directory, which is watched too: vetto's
    // own directory is made before the clock settles.
    put(&w, &w.home.join(".cache/vetto/.keep"), "");
    // vetto remembers only what changed more than two seconds ago (a
    // change in the same clock tick could keep the old stamps).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let first = session("one.index.test");
    assert_eq!(first.len(), 1, "one answer remembered: {first:?}");
    assert_eq!(
        session("one.index.test"),
        first,
        "the unchanged configuration was asked again"
    );
    put(
        &w,
        &conf,
        "[global]\nindex-url = https://the-second.index.test/simple\n",
    );
    session("the-second.index.test");
}

/// `vetto ci --tier T --project P [OPTIONS] -- sh -c SCRIPT`, the
/// session log beside.
fn ci(w: &World, options: &[&str], script: &str, path: Option<String>) -> (util::Out, String) {
    let project = w.project.to_str().unwrap_or_default();
    let mut args = vec!["ci", "--tier", w.tier.name(), "--project", project];
    args.extend_from_slice(w.tier.options());
    args.extend_from_slice(options);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut run = w.vetto(&args).timeout(std::time::Duration::from_secs(300));
    if let Some(p) = path {
        run = run.env("PATH", p);
    }
    let out = run.run();
    let log =
        std::fs::read_to_string(w.project.join("vetto-report/session.jsonl")).unwrap_or_default();
    (out, log)
}

/// The violations a session log holds, one line each.
fn violations(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("\"type\":\"violation\""))
        .collect()
}

/// Zero flags for an ordinary job (issue P10 item 2): `vetto ci -- npm
/// install && npm test` in a project with `package.json` applies the npm
/// preset by itself, says so in one line, and ends `CLEAN` — where without
/// it (`--no-auto-preset`, the old behaviour) npm's own housekeeping
/// (`~/.npm/_logs`) and its registry were violations. The only options are
/// this machine's registry pins (`--resolve`, see `registry_reachable`).
fn an_ordinary_npm_job_needs_no_flags(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let pins = require_registry!(w, "npm");
    let pins: Vec<&str> = pins.iter().map(String::as_str).collect();
    npm_demo(&w);
    let script = "npm install --no-audit --no-fund && npm test";
    // (npm's retries are turned off where the network is: they only wait.)
    let before = "npm install --no-audit --no-fund --fetch-retries=0 && npm test";
    let (out, log) = ci(
        &w,
        &[&["--no-auto-preset"][..], &pins].concat(),
        before,
        None,
    );
    assert!(
        out.code() != 0 && !violations(&log).is_empty(),
        "without the preset the job is expected to fail as before\n{}",
        out.dump()
    );
    let (out, log) = ci(&w, &pins, script, None);
    out.assert_success()
        .assert_stdout_contains("npm-test-pass")
        .assert_stderr_contains(
            "plus preset npm (the project has package.json and the command is npm;",
        )
        .assert_stderr_contains("CLEAN");
    assert_eq!(violations(&log), Vec::<&str>::new(), "{}", out.dump());
}

/// The same for cargo: `vetto ci -- cargo test` in a crate (no
/// dependencies) applies the cargo preset, so cargo's package-cache lock
/// in `~/.cargo` is no violation. The one option lends the test user the
/// test runner's toolchain (on a developer's machine it is in `~/.rustup`,
/// which the preset reads).
fn an_ordinary_cargo_job_needs_no_flags(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let tc = require_toolchain!();
    put(
        &w,
        &w.project.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    put(
        &w,
        &w.project.join("src/lib.rs"),
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    );
    let tc_s = tc.to_str().unwrap_or_default();
    let script = "cargo test -q 2>&1";
    let (out, log) = ci(
        &w,
        &["--no-auto-preset", "--allow-read", tc_s],
        script,
        Some(path_with(tc)),
    );
    assert!(
        out.code() != 0 && !violations(&log).is_empty(),
        "without the preset the job is expected to fail as before\n{}",
        out.dump()
    );
    let _ = std::fs::remove_dir_all(w.project.join("target"));
    let (out, log) = ci(&w, &["--allow-read", tc_s], script, Some(path_with(tc)));
    out.assert_success()
        .assert_stdout_contains("test result: ok. 1 passed")
        .assert_stderr_contains("plus preset cargo (the project has Cargo.toml")
        .assert_stderr_contains("CLEAN");
    assert_eq!(violations(&log), Vec::<&str>::new(), "{}", out.dump());
}

at_every_tier!(
    an_ordinary_cargo_job_needs_no_flags,
    an_ordinary_npm_job_needs_no_flags,
    a_changed_npmrc_registry_is_discovered_again,
    a_registry_token_is_not_copied_into_vettos_memo,
    a_changed_pip_conf_index_is_discovered_again,
    cargo_build_fetches_through_the_proxy_into_a_warm_vetto_cache,
    npm_install_fetches_through_the_proxy_into_a_warm_vetto_cache,
    pip_install_into_a_venv_fetches_through_the_proxy_into_a_vetto_cache
);
