//! Reports written through the job's links: vetto writes its reports
//! unsandboxed, with all of the user's rights, into a directory inside
//! the project that an earlier job could fill. A link planted at a report
//! name or at a temporary name (`vetto-report/summary.md.tmp -> ~/.bashrc`)
//! made the next `vetto ci` overwrite the victim.
//!
//! The plants are made by the unprivileged test user, the user every job
//! runs as (an earlier `vetto run` can make the same entries in its
//! project); the bare half shows that each one turns a naive write into a
//! write on the victim.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::util::{Out, Tier, World, read};
use crate::{at_every_tier, require};

const VICTIM: &str = "the victim's own contents\n";
/// Every file vetto writes in a report directory.
const REPORTS: [&str; 4] = ["session.jsonl", "vetto.sarif", "report.html", "summary.md"];
/// The temporary names vetto used before it made them unpredictable.
const OLD_TEMPS: [&str; 3] = ["vetto.sarif.tmp", "report.html.tmp", "summary.md.tmp"];

#[derive(Debug, Clone, Copy)]
enum Plant {
    Symlink,
    HardLink,
    Fifo,
}

const PLANTS: [Plant; 3] = [Plant::Symlink, Plant::HardLink, Plant::Fifo];

fn victim(w: &World, tag: &str) -> PathBuf {
    let v = w.outside.join(format!("victim-{tag}"));
    w.write(&v, VICTIM);
    v
}

/// Plant `at` as `plant`, pointing at (or sharing) `victim`, as the user.
fn plant(w: &World, plant: Plant, at: &Path, victim: &Path) {
    let (at, victim) = (at.to_str().unwrap(), victim.to_str().unwrap());
    let script = match plant {
        Plant::Symlink => format!("ln -sfn '{victim}' '{at}'"),
        Plant::HardLink => format!("rm -f '{at}' && ln '{victim}' '{at}'"),
        Plant::Fifo => format!("rm -f '{at}' && mkfifo '{at}'"),
    };
    w.sh_bare(&script).assert_success();
}

fn assert_victims_intact(victims: &[PathBuf], out: &Out) {
    for v in victims {
        assert_eq!(
            read(v).as_deref(),
            Some(VICTIM),
            "{} was written through a planted entry\n{}",
            v.display(),
            out.dump()
        );
    }
}

/// Each report is vetto's own new regular file, with its content.
fn assert_reports_written(dir: &Path, out: &Out) {
    for name in REPORTS {
        let p = dir.join(name);
        let md = std::fs::symlink_metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", p.display(), out.dump()));
        assert!(
            md.is_file(),
            "{} is not a regular file\n{}",
            p.display(),
            out.dump()
        );
        assert_eq!(md.nlink(), 1, "{}", p.display());
    }
    let log = read(&dir.join("session.jsonl")).unwrap();
    assert!(log.contains("\"session-start\""), "{log}");
    assert!(read(&dir.join("summary.md")).unwrap().contains("vetto"));
}

/// The bare half: a naive writer (the shell's `>`, like `File::create`)
/// on a planted link or second name writes the victim.
fn naive_write_reaches_the_victim(w: &World, kind: Plant) {
    let v = victim(w, "bare");
    let at = w.project.join("bare-plant");
    plant(w, kind, &at, &v);
    w.sh_bare(&format!("printf 'report' > '{}'", at.display()))
        .assert_success();
    assert_eq!(
        read(&v).as_deref(),
        Some("report"),
        "control: {kind:?} did not reach the victim"
    );
    let _ = std::fs::remove_file(&at);
}

/// `vetto ci` (or `run --report-dir`) with the report names planted,
/// round by round so that every name is planted as every kind.
fn reports_through_planted_entries(w: &World, command: &str) {
    naive_write_reaches_the_victim(w, Plant::Symlink);
    naive_write_reaches_the_victim(w, Plant::HardLink);
    let dir = w.project.join("vetto-report");
    w.sh_bare("mkdir -m 0755 vetto-report").assert_success();
    let project = w.project.to_str().unwrap().to_owned();
    for round in 0..PLANTS.len() {
        let mut victims = Vec::new();
        for (i, name) in REPORTS.iter().chain(OLD_TEMPS.iter()).enumerate() {
            let kind = PLANTS[(i + round) % PLANTS.len()];
            let v = victim(w, &format!("{round}-{i}"));
            plant(w, kind, &dir.join(name), &v);
            victims.push(v);
        }
        // The runner's step summary, planted too (`ci` only appends to it).
        let step = w.outside.join(format!("step-summary-{round}"));
        let step_victim = victim(w, &format!("{round}-step"));
        plant(w, PLANTS[round], &step, &step_victim);
        victims.push(step_victim);

        let mut args = vec![command, "--tier", w.tier.name(), "--project", &project];
        if command == "ci" {
            args.extend(["--fail-on", "never"]);
        }
        args.extend([
            "--report-dir",
            "vetto-report",
            "--",
            "sh",
            "-c",
            "echo job-ran",
        ]);
        let out = w.vetto(&args).env("GITHUB_STEP_SUMMARY", &step).run();
        out.assert_success().assert_stdout_contains("job-ran");
        assert_victims_intact(&victims, &out);
        assert_reports_written(&dir, &out);
        if command == "ci" {
            out.assert_stderr_contains("cannot append to $GITHUB_STEP_SUMMARY: refusing");
        }
        // No temporary file is left behind, whatever was planted.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            // `.gitignore` is vetto's mark that git ignores the directory.
            .filter(|n| n.starts_with('.') && n != ".gitignore")
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}\n{}", out.dump());
        for n in OLD_TEMPS {
            let _ = std::fs::remove_file(dir.join(n));
        }
    }
}

/// Runs as an unprivileged user: every report name, and the temporary
/// names vetto used to write through, planted as a symlink, a hard link
/// and a FIFO to a victim outside the project; `$GITHUB_STEP_SUMMARY`
/// planted the same way. Evidence: bare, a write through the plant
/// changes the victim; `vetto ci` leaves every victim byte for byte as it
/// was, still writes its four reports, and says it refused the summary.
fn ci_reports_never_follow_planted_links(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    reports_through_planted_entries(&w, "ci");
}

/// The same for `vetto run --report-dir`.
fn run_report_dir_never_follows_planted_links(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    reports_through_planted_entries(&w, "run");
}

/// Runs as an unprivileged user: the report directory itself (and, for a
/// deeper `--report-dir`, a parent of it) is a link an earlier job planted
/// to a directory outside. Evidence: bare, a write into it lands outside;
/// `vetto ci` writes nothing there, says what it refused, and keeps the
/// command's exit status.
fn a_planted_report_directory_link_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let target = w.outside.join("reports-here");
    w.sh_bare(&format!(
        "mkdir '{t}' && ln -s '{t}' vetto-report && ln -s '{t}' build",
        t = target.display()
    ))
    .assert_success();
    w.sh_bare("printf x > vetto-report/probe && rm vetto-report/probe")
        .assert_success();
    let project = w.project.to_str().unwrap().to_owned();
    for (report_dir, refused) in [("vetto-report", "vetto-report"), ("build/reports", "build")] {
        let out = w
            .vetto(&[
                "ci",
                "--tier",
                w.tier.name(),
                "--fail-on",
                "never",
                "--project",
                &project,
                "--report-dir",
                report_dir,
                "--",
                "sh",
                "-c",
                "echo job-ran; exit 7",
            ])
            .run();
        out.assert_code(7).assert_stdout_contains("job-ran");
        out.assert_stderr_contains(&format!("refusing to use {refused}: it is a symbolic link"));
        let made: Vec<_> = std::fs::read_dir(&target).unwrap().collect();
        assert!(
            made.is_empty(),
            "vetto wrote through the link: {made:?}\n{}",
            out.dump()
        );
        // The log went to a private file with a fresh name instead.
        let fallback: Vec<_> = std::fs::read_dir(&w.tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("vetto-session-") && n.ends_with(".jsonl"))
            })
            .collect();
        assert!(!fallback.is_empty(), "no fallback log\n{}", out.dump());
        for f in fallback {
            let md = std::fs::symlink_metadata(&f).unwrap();
            assert!(
                md.is_file() && md.mode() & 0o777 == 0o600,
                "{}",
                f.display()
            );
            std::fs::remove_file(&f).unwrap();
        }
    }
}

at_every_tier!(
    ci_reports_never_follow_planted_links,
    run_report_dir_never_follows_planted_links,
    a_planted_report_directory_link_is_refused
);

/// Runs as an unprivileged user: `vetto report --session F` with the
/// outputs next to the log, and with `--sarif/--html/--summary` naming
/// files, each planted as a link or a second name of a victim. Evidence:
/// bare, writing the planted name changes the victim; `vetto report`
/// writes every output as its own file and leaves the victims alone. A
/// named output whose parent is the user's own link is still written.
#[test]
fn report_outputs_never_follow_planted_links() {
    let w = World::new();
    naive_write_reaches_the_victim(&w, Plant::Symlink);
    naive_write_reaches_the_victim(&w, Plant::HardLink);
    // A session log to render, from a real session.
    let dir = w.project.join("vetto-report");
    let out = w
        .vetto(&[
            "run",
            "--tier",
            "seccomp",
            "--allow-degraded",
            "--report-dir",
            "vetto-report",
            "--",
            "true",
        ])
        .run();
    out.assert_success();
    let log = dir.join("session.jsonl");
    assert!(log.is_file(), "{}", out.dump());
    let log_arg = log.to_str().unwrap().to_owned();

    // 1. Everything next to the log.
    let mut victims = Vec::new();
    for (i, name) in ["vetto.sarif", "report.html", "summary.md"]
        .iter()
        .chain(OLD_TEMPS.iter())
        .enumerate()
    {
        let v = victim(&w, &format!("next-{i}"));
        plant(&w, PLANTS[i % 2], &dir.join(name), &v);
        victims.push(v);
    }
    let out = w.vetto(&["report", "--session", &log_arg]).run();
    out.assert_success();
    assert_victims_intact(&victims, &out);
    for name in ["vetto.sarif", "report.html", "summary.md"] {
        assert!(std::fs::symlink_metadata(dir.join(name)).unwrap().is_file());
    }

    // 2. Named outputs, in a directory reached through the user's own link.
    let own = w.outside.join("mine");
    w.sh_bare(&format!(
        "mkdir '{}' && ln -s '{}' mine",
        own.display(),
        own.display()
    ))
    .assert_success();
    let named = ["mine/x.sarif", "mine/x.html", "mine/x.md"];
    let mut victims = Vec::new();
    for (i, name) in named.iter().enumerate() {
        let v = victim(&w, &format!("named-{i}"));
        plant(&w, PLANTS[i], &w.project.join(name), &v);
        victims.push(v);
    }
    let out = w
        .vetto(&[
            "report",
            "--session",
            &log_arg,
            "--sarif",
            named[0],
            "--html",
            named[1],
            "--summary",
            named[2],
        ])
        .run();
    out.assert_success();
    assert_victims_intact(&victims, &out);
    for name in ["x.sarif", "x.html", "x.md"] {
        let md = std::fs::symlink_metadata(own.join(name)).unwrap();
        assert!(
            md.is_file() && !md.file_type().is_fifo(),
            "{name}\n{}",
            out.dump()
        );
    }
}

/// Runs as an unprivileged user: the session directory vetto makes in
/// `$TMPDIR` (FS-ONLY: FULL gives the job its own `/tmp` and makes none)
/// has a name nobody can plant in advance: 80 random bits, new each
/// session. (That a directory made under such a name must be new, and is
/// checked once made, is `safe_fs`'s unit tests.)
#[test]
fn the_session_directory_name_cannot_be_guessed() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let name = || {
        let out = w.sh_sandboxed("echo \"tmp=$TMPDIR\"");
        out.assert_success();
        let dir = out
            .stdout()
            .lines()
            .find_map(|l| l.strip_prefix("tmp=").map(str::to_owned))
            .unwrap_or_else(|| panic!("no TMPDIR\n{}", out.dump()));
        let name = Path::new(&dir)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let random = name.rsplit('-').next().unwrap().to_owned();
        assert!(
            name.starts_with("vetto-")
                && random.len() == 20
                && random.chars().all(|c| c.is_ascii_hexdigit()),
            "{name}"
        );
        random
    };
    assert_ne!(name(), name());
}
