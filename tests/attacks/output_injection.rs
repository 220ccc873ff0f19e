//! Driving the CI log and the terminal through vetto's own output: vetto
//! prints names the job chose — the argv[0] of a process it left running,
//! a file it left in `/dev/shm`, a masked path it tried to read, the
//! targets in `ci`'s summary and annotations. A name with `\n::warning …`
//! starts a line that the runner executes as a workflow command; one with
//! `\r::…` too (the runner's `ReadLine` splits at CR); an ESC or C1 byte
//! sequence (`ESC ] 0;…BEL`, U+009B) rewrites the reader's terminal.

use std::time::Duration;

use crate::util::{Out, Tier, World, eventually, pids_with, send_signal, unique_sleep_arg};
use crate::{at_every_tier, require};

/// The argv[0] the left-over process takes (`exec -a`).
const ARGV0: &str = "x\n::warning title=vetto-argv::pwned\x1b]0;pwned\x07\u{9b}2JZ";
/// The same, as vetto must show it.
const ARGV0_SHOWN: &str = "x\\n::warning title=vetto-argv::pwned\\x1b]0;pwned\\x07\\u{9b}2JZ";
/// The tail of the file name the job leaves in `/dev/shm`.
const SHM: &str = "\x1b]0;pwned\x07\r::error title=vetto-shm::pwned\n::add-mask::Xz";
const SHM_SHOWN: &str = "\\x1b]0;pwned\\x07\\r::error title=vetto-shm::pwned\\n::add-mask::Xz";
/// The name under `~/.ssh` (masked) the job tries to read.
const MASKED: &str = "k\n::warning title=vetto-masked::pwned\x1b]0;pwned\x07z";
const MASKED_SHOWN: &str = "k\\n::warning title=vetto-masked::pwned\\x1b]0;pwned\\x07z";

/// The job: leave a daemon named [`ARGV0`] (and wait until it has that
/// name: its argv[0] starts with `x` once `exec -a` is done), leave `/dev/shm/vetto-MARK-`[`SHM`], try to read
/// `~/.ssh/`[`MASKED`]. The hostile bytes are made by `printf` inside the
/// job, as a hostile dependency would.
fn job(marker: &str) -> String {
    // printf's octal escapes: ESC \033, BEL \007, U+009B \302\233, CR \r.
    format!(
        r#"a=$(printf 'x\n::warning title=vetto-argv::pwned\033]0;pwned\007\302\2332JZ')
setsid bash -c 'exec -a "$0" sleep {marker}' "$a" </dev/null >/dev/null 2>&1 &
d=$!
for i in $(seq 600); do [ "$(head -c 1 /proc/$d/cmdline 2>/dev/null)" = x ] && break; sleep 0.05; done
: > "/dev/shm/vetto-{marker}-$(printf '\033]0;pwned\007\r::error title=vetto-shm::pwned\n::add-mask::Xz')"
cat ~/.ssh/"$(printf 'k\n::warning title=vetto-masked::pwned\033]0;pwned\007z')" 2>/dev/null
echo job-done"#
    )
}

/// The lines as the runner reads them (it splits at LF, CR and CRLF).
fn runner_lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .split(['\n', '\r'])
        .map(str::to_owned)
        .collect()
}

/// Does `text`, printed raw on a line of vetto's, give the runner a
/// workflow command?
fn forms_a_command(text: &str) -> bool {
    runner_lines(format!("vetto: {text}").as_bytes())
        .iter()
        .any(|l| l.trim_start().starts_with("::"))
}

/// vetto's own annotations: `::error file=…,line=N,title=vetto%3A RULE::…`.
fn is_vettos_annotation(line: &str) -> bool {
    ["::error file=", "::warning file=", "::notice file="]
        .iter()
        .any(|p| line.starts_with(p))
        && line.contains(",title=vetto%3A ")
}

/// Nothing in `bytes` drives a terminal, and no line of it is a workflow
/// command but vetto's own annotations.
fn assert_clean(what: &str, bytes: &[u8], dump: &str) {
    let text = String::from_utf8_lossy(bytes);
    for c in text.chars() {
        assert!(
            c == '\n' || !c.is_control(),
            "{what} carries a raw control character {c:?}\n{dump}"
        );
    }
    for b in [0x1b_u8, 0x07, b'\r', 0x9b] {
        assert!(!bytes.contains(&b), "{what} carries byte {b:#04x}\n{dump}");
    }
    for line in runner_lines(bytes) {
        let l = line.trim_start();
        assert!(
            !l.starts_with("::") || is_vettos_annotation(l),
            "{what}: the runner would execute {l:?}\n{dump}"
        );
        assert!(
            !l.contains("##["),
            "{what}: legacy command in {l:?}\n{dump}"
        );
    }
}

fn shm_left(marker: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("vetto-{marker}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn cleanup(marker: &str) {
    for pid in pids_with(marker) {
        send_signal(pid, libc::SIGKILL);
    }
    for p in shm_left(marker) {
        let _ = std::fs::remove_file(p);
    }
}

/// The attack works bare: the job really gives its process, its file and
/// its lookup these names, and each, printed raw in one of vetto's lines,
/// is a workflow command (and carries ESC to the terminal). The job itself
/// prints what it made (the daemon's `/proc/PID/cmdline`, `ls` of the
/// file): a concurrent session of another test, run as the same user, may
/// remove or kill them as soon as the job is done.
fn names_are_hostile_bare(w: &World, marker: &str) {
    let script = format!(
        "{}\nhead -c 300 /proc/$d/cmdline; echo; ls -d /dev/shm/vetto-{marker}-*",
        job(marker)
    );
    let bare = w.bare(&["bash", "-c", &script]).run();
    cleanup(marker);
    bare.assert_success().assert_stdout_contains("job-done");
    let has = |needle: &[u8]| bare.stdout.windows(needle.len()).any(|w| w == needle);
    // `exec -a NAME sleep MARK`: argv is NAME, MARK.
    let argv0 = [ARGV0.as_bytes(), b"\0", marker.as_bytes(), b"\0"].concat();
    assert!(
        has(&argv0),
        "control: exec -a did not name it\n{}",
        bare.dump()
    );
    let shm = format!("/dev/shm/vetto-{marker}-{SHM}");
    assert!(
        has(shm.as_bytes()),
        "control: nothing left in /dev/shm\n{}",
        bare.dump()
    );
    assert!(forms_a_command(&format!(
        "killed 1 process(es) the command left running: 4 ({ARGV0})"
    )));
    assert!(forms_a_command(&format!(
        "removed what the command left in shared directories: {shm}"
    )));
    assert!(forms_a_command(&format!(
        "the command tried to read masked secrets: {}/.ssh/{MASKED}",
        w.home.display()
    )));
    assert!(ARGV0.contains('\x1b') && SHM.contains('\x1b') && MASKED.contains('\x1b'));
}

/// What the sandboxed half must show of the names, escaped.
fn assert_names_shown_escaped(tier: Tier, out: &Out) {
    let stderr = out.stderr();
    assert!(
        stderr.contains(&format!("({ARGV0_SHOWN})")),
        "the left-over process is not named, escaped\n{}",
        out.dump()
    );
    // FULL's /dev/shm is the sandbox's own: nothing is left to remove. At
    // FS-ONLY the line names the file (the scrub removes only what this
    // session's job created, so no concurrent session takes it first).
    let removed = "removed what the command left in shared directories:";
    if tier == Tier::FsOnly {
        assert!(
            stderr.contains(removed) && stderr.contains(SHM_SHOWN),
            "the /dev/shm file is not named, escaped\n{}",
            out.dump()
        );
    }
    if tier == Tier::Full {
        // Only FULL's traps see reads beneath a masked directory.
        assert!(
            stderr.contains(MASKED_SHOWN),
            "the masked read is not named, escaped\n{}",
            out.dump()
        );
    }
}

/// Runs as an unprivileged user: the job names a left-over process, a
/// `/dev/shm` file and a masked lookup with `\n::warning …`, `\r::error …`,
/// OSC and C1 bytes. Evidence: bare, those names printed raw form workflow
/// commands; under `vetto run`, vetto's output names each of them escaped,
/// with no raw control byte and no line the runner would execute.
fn hostile_names_in_vetto_run_output_are_escaped(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let marker = unique_sleep_arg();
    names_are_hostile_bare(&w, &marker);

    let out = w
        .sandboxed(&["bash", "-c", &job(&marker)])
        .timeout(Duration::from_secs(120))
        .run();
    cleanup(&marker);
    out.assert_ran().assert_stdout_contains("job-done");
    assert_clean("vetto run's stderr", &out.stderr, &out.dump());
    assert_names_shown_escaped(tier, &out);
}

/// Runs as an unprivileged user: the same job under `vetto ci` inside
/// GitHub Actions (annotations on). Evidence: the names printed raw form
/// workflow commands (bare half); vetto's stdout and stderr carry no raw
/// control byte and no workflow command but vetto's own annotations, and
/// `summary.md` and `report.html` none either.
fn hostile_names_in_vetto_ci_output_are_escaped(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let marker = unique_sleep_arg();
    names_are_hostile_bare(&w, &marker);

    let report = w.root.join("report");
    let project = w.project.to_str().unwrap().to_owned();
    let out = w
        .vetto(&[
            "ci",
            "--tier",
            tier.name(),
            "--project",
            &project,
            "--report-dir",
            report.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            &job(&marker),
        ])
        .env("GITHUB_ACTIONS", "true")
        .timeout(Duration::from_secs(120))
        .run();
    cleanup(&marker);
    out.assert_ran().assert_stdout_contains("job-done");
    assert_clean("vetto ci's stdout", &out.stdout, &out.dump());
    assert_clean("vetto ci's stderr", &out.stderr, &out.dump());
    assert_names_shown_escaped(tier, &out);
    // The annotations are there, and they are vetto's.
    assert!(
        runner_lines(&out.stdout)
            .iter()
            .any(|l| is_vettos_annotation(l)),
        "no annotation\n{}",
        out.dump()
    );
    for f in ["summary.md", "report.html"] {
        let body = std::fs::read(report.join(f)).unwrap();
        for b in [0x1b_u8, 0x07, b'\r'] {
            assert!(!body.contains(&b), "{f} carries byte {b:#04x}");
        }
        assert!(
            !String::from_utf8_lossy(&body).contains('\u{9b}'),
            "{f} carries U+009B"
        );
    }
    assert!(
        eventually(Duration::from_secs(5), || pids_with(&marker).is_empty()),
        "the daemon survived"
    );
}

at_every_tier!(
    hostile_names_in_vetto_run_output_are_escaped,
    hostile_names_in_vetto_ci_output_are_escaped
);
