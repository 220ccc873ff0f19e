//! `vetto verify` end to end: its own test binary (`cargo test --test verify`).
//!
//! Every test runs `vetto verify` as an unprivileged user: when the test
//! process is root, the shared harness (`tests/util`) drops to the user
//! `tester`, creating it if it is missing. A test whose kernel feature is
//! missing prints `SKIP <test>: <reason>`, and fails instead when
//! `VETTO_TEST_REQUIRE` lists the feature.
//!
//! Besides "verify passes here", these tests prove that the probes CAN
//! fail: with `--net host` the network probes report NOT CONTAINED, and at
//! the SECCOMP tier (no filesystem isolation, `--allow-degraded`) the
//! filesystem probes do — so a pass is not vacuous.

// `vetto verify` probes Unix kernels; tests/util is Unix-only.
#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

#[path = "util/mod.rs"]
mod util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use util::{Feature, as_user, vetto_bin};

/// What one `vetto verify` printed.
struct Verified {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Verified {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.dump()))
    }

    /// probe id → result, from the JSON document.
    fn results(&self) -> BTreeMap<String, String> {
        self.json()["probes"]
            .as_array()
            .expect("probes is an array")
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_owned(),
                    p["result"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn dump(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `vetto verify ARGS` as the unprivileged test user.
fn verify(args: &[&str]) -> Verified {
    verify_in(args, Path::new("/tmp"))
}

/// The same, with `TMPDIR` (where verify builds its world) set to `tmp`.
fn verify_in(args: &[&str], tmp: &Path) -> Verified {
    let mut c = Command::new(vetto_bin());
    c.arg("verify")
        .args(args)
        .current_dir("/")
        .env("TMPDIR", tmp)
        .env_clear()
        .env("PATH", util::PATH)
        .env("USER", &util::user().name)
        .env("LC_ALL", "C");
    as_user(&mut c);
    let out = c.output().expect("run vetto verify");
    Verified {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An empty directory the test user owns.
fn private_tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!(
        "/tmp/vetto-verify-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let u = util::user();
    if u.drop_from_root {
        std::os::unix::fs::chown(&dir, Some(u.uid), Some(u.gid)).unwrap();
    }
    dir
}

/// Probes that may be "not applicable" on a healthy host, and why.
const MAY_NOT_APPLY: &[&str] = &[
    "x32-syscall",             // kernels without CONFIG_X86_X32_ABI
    "i386-syscall",            // kernels without IA32 emulation
    "io-uring",                // kernel.io_uring_disabled
    "mount",                   // the host refuses it to everyone
    "bpf",                     // kernel.unprivileged_bpf_disabled
    "perf-event-open",         // kernel.perf_event_paranoid
    "keyctl",                  // kernels without keys
    "dev-shm-drop",            // hosts without /dev/shm
    "ptrace-host-process",     // Yama ptrace_scope
    "user-namespace",          // hosts without unprivileged user namespaces
    "setuid-gains-nothing",    // no setuid-root binary installed
    "control-git-status",      // git not installed
    "host-processes-visible",  // FULL only
    "control-loopback-server", // FULL or --net host only
];

/// Every attack contained (or allowed to be n/a), every control works.
fn assert_all_contained(v: &Verified, tier: &str) {
    assert_eq!(v.code, 0, "verify failed at {tier}\n{}", v.dump());
    let doc = v.json();
    assert_eq!(doc["schema"], 1);
    assert_eq!(doc["tier"], tier);
    assert_eq!(doc["passed"], true);
    for (id, result) in v.results() {
        let fine = matches!(result.as_str(), "contained" | "works")
            || (result == "not-applicable" && MAY_NOT_APPLY.contains(&id.as_str()));
        assert!(fine, "{id}: {result} at {tier}\n{}", v.dump());
    }
}

/// The JSON document keeps the fields docs/verify.md promises.
fn assert_document_shape(v: &Verified) {
    let doc = v.json();
    for key in [
        "schema",
        "tier",
        "requested",
        "net",
        "allow_degraded",
        "degraded",
        "passed",
        "escaped",
        "failed_controls",
        "inconclusive",
        "counts",
        "millis",
        "probes",
    ] {
        assert!(doc.get(key).is_some(), "missing `{key}`\n{}", v.dump());
    }
    for p in doc["probes"].as_array().unwrap() {
        for key in ["id", "kind", "technique", "result", "evidence", "millis"] {
            assert!(p.get(key).is_some(), "probe lacks `{key}`: {p}");
        }
        assert!(
            !p["evidence"].as_str().unwrap().is_empty(),
            "a result without evidence: {p}"
        );
    }
}

/// Runs as an unprivileged user. FULL: every FS-ONLY probe plus the
/// FULL-only ones (host processes invisible, loopback server works).
#[test]
fn verify_passes_at_full_tier() {
    require!(Feature::FsOnly);
    require!(Feature::Userns);
    let v = verify(&["--tier", "full", "--json"]);
    assert_all_contained(&v, "full");
    assert_document_shape(&v);
    let r = v.results();
    for id in [
        "host-processes-visible",
        "tcp-connect-host",
        "abstract-socket-host",
        "ssh-agent-socket",
        "signal-host-process",
        "daemon-survives",
        "read-ssh-key",
        "replace-git-dir",
    ] {
        assert_eq!(r[id], "contained", "{id}\n{}", v.dump());
    }
    assert_eq!(r["control-loopback-server"], "works", "{}", v.dump());
}

/// Runs as an unprivileged user. FS-ONLY: Landlock carving, seccomp and
/// the notification supervisor contain every attack; the table says so.
#[test]
fn verify_passes_at_fs_only_tier() {
    require!(Feature::FsOnly);
    let tmp = private_tmp("fs_only");
    let v = verify_in(&["--tier", "fs-only", "--json"], &tmp);
    assert_all_contained(&v, "fs-only");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "verify left its world behind: {left:?}");
    std::fs::remove_dir(&tmp).unwrap();
    assert_document_shape(&v);
    let r = v.results();
    assert_eq!(r["host-processes-visible"], "not-applicable");
    assert_eq!(r["control-top-level-create"], "works");

    let text = verify(&["--tier", "fs-only"]);
    assert_eq!(text.code, 0, "{}", text.dump());
    assert!(text.stdout.contains("RESULT"), "{}", text.dump());
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("verdict: CONTAINED at tier fs-only")),
        "{}",
        text.dump()
    );
}

fn assert_network_escapes(v: &Verified, tier: &str) {
    assert_eq!(v.code, 1, "an escape must fail verify\n{}", v.dump());
    let doc = v.json();
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["net"], "host");
    let r = v.results();
    for id in ["tcp-connect-host", "udp-send-host"] {
        assert_eq!(r[id], "not-contained", "{id} at {tier}\n{}", v.dump());
    }
    let escaped: Vec<&str> = doc["escaped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        escaped,
        ["tcp-connect-host", "udp-send-host"],
        "only the network is open\n{}",
        v.dump()
    );
    let evidence = doc["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "tcp-connect-host")
        .unwrap()["evidence"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        evidence.contains("listener received"),
        "escape decided by evidence, not an error code: {evidence}"
    );
}

/// Runs as an unprivileged user. The probes can fail: with `--net host` at
/// FS-ONLY the host listeners receive the TCP connection and the datagram.
#[test]
fn net_host_makes_network_probes_not_contained_at_fs_only() {
    require!(Feature::FsOnly);
    let v = verify(&["--tier", "fs-only", "--net", "host", "--json"]);
    assert_network_escapes(&v, "fs-only");
}

/// Runs as an unprivileged user. Same at FULL: `--net host` shares the
/// host's network namespace, so 127.0.0.1 is the host's.
#[test]
fn net_host_makes_network_probes_not_contained_at_full() {
    require!(Feature::FsOnly);
    require!(Feature::Userns);
    let v = verify(&["--tier", "full", "--net", "host", "--json"]);
    assert_network_escapes(&v, "full");
    assert_eq!(v.results()["control-loopback-server"], "works");
}

/// Runs as an unprivileged user. The probes can fail: the SECCOMP tier has
/// no filesystem isolation, so with `--allow-degraded` the filesystem
/// probes report NOT CONTAINED (canaries read, files written) — but for a
/// hook and git's config, which the session's end puts back.
#[test]
fn degraded_seccomp_tier_makes_filesystem_probes_not_contained() {
    require!(Feature::SeccompNotify);
    let v = verify(&["--tier", "seccomp", "--allow-degraded", "--json"]);
    assert_eq!(v.code, 1, "{}", v.dump());
    let doc = v.json();
    assert_eq!(doc["tier"], "seccomp");
    assert!(
        !doc["degraded"].as_array().unwrap().is_empty(),
        "the degradation is reported\n{}",
        v.dump()
    );
    let r = v.results();
    for id in [
        "read-ssh-key",
        "read-aws-credentials",
        "read-npmrc-token",
        "read-project-dotenv",
        "symlink-to-secret",
        "write-outside-project",
        "replace-git-dir",
        "write-github-env",
    ] {
        assert_eq!(r[id], "not-contained", "{id}\n{}", v.dump());
    }
    // A hook or config written during the session is put back after it
    // at every tier (what runs later is undone), so the evidence, read
    // after the session, finds them as they were.
    for id in ["plant-git-hook", "modify-git-config"] {
        assert_eq!(r[id], "contained", "{id}\n{}", v.dump());
    }
    // What seccomp alone still stops stays contained.
    for id in ["env-token", "tcp-connect-host", "udp-send-host", "io-uring"] {
        assert!(
            matches!(r[id].as_str(), "contained" | "not-applicable"),
            "{id}: {}\n{}",
            r[id],
            v.dump()
        );
    }
    // The controls still work: the sandbox is weak, not broken.
    for id in ["control-project-write", "control-top-level-create"] {
        assert_eq!(r[id], "works", "{id}\n{}", v.dump());
    }
}

/// Runs as an unprivileged user. A tier the host cannot offer is refused
/// with exit 125 and the refusal's words, before any probe runs. The host
/// is made to lack user namespaces by running `vetto verify --tier full`
/// inside an FS-ONLY sandbox, whose seccomp filter refuses `unshare`.
#[test]
fn full_tier_without_user_namespaces_is_refused_with_125() {
    require!(Feature::FsOnly);
    let bin = vetto_bin().to_str().unwrap();
    let dir = util::vetto_bin_dir().to_str().unwrap();
    let mut c = Command::new(bin);
    c.args([
        "run",
        "--tier",
        "fs-only",
        "--project",
        dir,
        "--allow-read",
        dir,
    ])
    .args(["--", bin, "verify", "--tier", "full", "--json"])
    .current_dir("/")
    .env_clear()
    .env("PATH", util::PATH)
    // Not the project: vetto refuses a project that is the home directory.
    .env("HOME", "/nonexistent")
    .env("LC_ALL", "C");
    as_user(&mut c);
    let out = c.output().expect("run vetto");
    let v = Verified {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(v.code, 125, "{}", v.dump());
    assert!(v.stderr.contains("cannot run at tier full"), "{}", v.dump());
    assert!(v.stderr.contains("user namespaces"), "{}", v.dump());
    let doc = v.json();
    assert_eq!(doc["passed"], false);
    assert!(doc["refused"].as_str().unwrap().contains("tier full"));
}
