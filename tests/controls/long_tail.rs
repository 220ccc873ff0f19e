//! The long tail of real jobs (issue P16): what everyday tools do that a
//! sandbox must neither break nor record as an attack.

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Name lookups the way tools make them: glibc's resolver (`getent`,
/// python's `getaddrinfo`, over TCP with `use-vc`) and Node's c-ares (`dns.resolve4`, its own UDP
/// socket), many at once, and a name that is allowed beside names that
/// are not.
const LOOKUPS: &str = r#"for i in 1 2 3 4 5 6 7 8; do (getent hosts "h$i.example" >/dev/null &); done;
getent hosts example.com >/dev/null; getent ahosts allowed.example >/dev/null;
RES_OPTIONS=use-vc getent hosts tcp.example >/dev/null;
python3 -c 'import socket
for n in ("a.example", "allowed.example"):
    try: socket.getaddrinfo(n, 443)
    except OSError: pass';
command -v node >/dev/null && node -e 'require("dns").resolve4("b.example", () => {}); require("dns").lookup("allowed.example", () => {})';
wait; echo lookups-done"#;

/// Runs as an unprivileged user: every kind of session (`run`, `ci`,
/// `ci --audit`, with the network off and with an allowed name) whose job
/// looks names up. Evidence: each ends as its job did, with the job's
/// output, and vetto's stderr holds no panic (the FULL DNS stub's thread
/// panicked in std's `recv_from` on a short sender address and ended the
/// session).
fn name_lookups_end_every_session_without_a_panic(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let project = w.project.to_str().unwrap();
    let sessions: [&[&str]; 5] = [
        &["run"],
        &["run", "--allow-domain", "allowed.example"],
        &["ci"],
        &["ci", "--audit"],
        &["ci", "--allow-domain", "allowed.example"],
    ];
    for session in sessions {
        let mut args = session.to_vec();
        args.extend_from_slice(&["--tier", tier.name(), "--project", project]);
        args.extend_from_slice(tier.options());
        args.extend_from_slice(&["--", "sh", "-c", LOOKUPS]);
        let out = w.vetto(&args).run();
        out.assert_stdout_contains("lookups-done");
        assert!(
            !out.stderr().contains("panicked"),
            "vetto {session:?} panicked at tier {tier}\n{}",
            out.dump()
        );
        assert!(
            [0, 3].contains(&out.code()),
            "vetto {session:?} did not end as its job did at tier {tier}\n{}",
            out.dump()
        );
    }
}
at_every_tier!(name_lookups_end_every_session_without_a_panic);

/// A test suite's scratch file at the top of its working directory:
/// made, then opened again without `O_CREAT` to append and to rewrite
/// (`open(O_WRONLY|O_APPEND)`, `open(O_RDWR|O_NOCTTY)` as GNU tools
/// pass it, `open(O_WRONLY|O_TRUNC)`), as loggers and
/// fixtures do; and a file renamed into place at the top, opened again.
const REOPEN_TOP_FILE: &str = r#"python3 - <<'PY'
import os
with open("scratch.log", "w") as f:
    f.write("one\n")
fd = os.open("scratch.log", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"two\n"); os.close(fd)
fd = os.open("scratch.log", os.O_RDWR | os.O_NOCTTY)
os.lseek(fd, 0, os.SEEK_END); os.write(fd, b"three\n"); os.close(fd)
with open("saved.tmp", "w") as f:
    f.write("draft\n")
os.rename("saved.tmp", "saved.txt")
fd = os.open("saved.txt", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"final\n"); os.close(fd)
print("reopened")
PY"#;

/// Runs as an unprivileged user: a file the job makes at the top of the
/// project is opened for writing again. Evidence: bare it works; before
/// the fix the sandboxed reopen failed `EACCES` at both tiers (the
/// project's top is carved: its Landlock rules name the entries that were
/// there, and a file made later has none), with nothing recorded. Now
/// the supervisor opens it, as it made it; the file that was there before
/// and the protected policy file are the kernel's to decide as before.
fn a_file_made_at_the_project_top_can_be_opened_for_writing_again(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    // No masked file at the top (most projects have no `.env`): where
    // one is, FS-ONLY makes the first new files there from spares.
    w.sh_bare("rm .env").assert_success();
    w.sh_bare(REOPEN_TOP_FILE)
        .assert_success()
        .assert_stdout_contains("reopened");
    w.sh_bare("rm scratch.log saved.txt").assert_success();

    let (out, log) = w.ci_sh(REOPEN_TOP_FILE);
    out.assert_success().assert_stdout_contains("reopened");
    assert_eq!(
        crate::util::read(&w.project.join("scratch.log")).as_deref(),
        Some("one\ntwo\nthree\n"),
        "{}",
        out.dump()
    );
    assert_eq!(
        crate::util::read(&w.project.join("saved.txt")).as_deref(),
        Some("final\n")
    );
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "a scratch file was recorded at tier {tier}\n{log}"
    );

    // Opening for writing is notified now, but makes no entry: thousands
    // of them (`/dev/null`) are no "many creations" tip at FULL.
    let (out, _) = w.ci_sh(
        "python3 -c 'import os\nfor i in range(2500): os.close(os.open(\"/dev/null\", os.O_WRONLY))' && echo opened-many",
    );
    out.assert_stdout_contains("opened-many");
    assert!(
        !out.stderr().contains("--check-creations after"),
        "write-opens were counted as creations\n{}",
        out.dump()
    );

    // The policy file at the top is still refused, made or reopened.
    w.write(&w.project.join("vetto.toml"), "");
    let out = w.sh_sandboxed(
        "python3 -c 'import os; os.open(\"vetto.toml\", os.O_WRONLY | os.O_APPEND)' && echo opened",
    );
    out.assert_stdout_lacks("opened");
    assert_eq!(
        crate::util::read(&w.project.join("vetto.toml")).as_deref(),
        Some("")
    );
}
at_every_tier!(a_file_made_at_the_project_top_can_be_opened_for_writing_again);

/// A file walker's handles on the directories above what it reads
/// (walkdir's and same-file's loop checks, `opendir("/")`): each opened
/// `O_RDONLY|O_DIRECTORY`, looked at with `fstat` and listed.
const ANCESTOR_HANDLES: &str = r#"python3 - "$PWD" <<'PY'
import os, sys
project = sys.argv[1]
for d in ("/", os.path.dirname(project)):
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        print("refused", d, e.errno)
        continue
    os.fstat(fd)
    print("listed", d, os.path.basename(project) in os.listdir(fd) or "/" == d)
    os.close(fd)
PY"#;

/// Runs as an unprivileged user: directory handles on `/` and on the
/// project's parent. Evidence: bare both open and list (the parent lists
/// the project); at FULL they did not (`EACCES`, unrecorded) and now do,
/// the view listing only what it binds; at FS-ONLY the host's `/` stays
/// refused as docs/tiers.md says (its every name would list).
fn a_directory_handle_on_an_ancestor_of_the_project_opens_at_full(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let parent = w.project.parent().unwrap().display().to_string();
    w.sh_bare(ANCESTOR_HANDLES)
        .assert_success()
        .assert_stdout_contains("listed / True")
        .assert_stdout_contains(&format!("listed {parent} True"));
    let out = w.sh_sandboxed(ANCESTOR_HANDLES);
    out.assert_success();
    match tier {
        Tier::Full => {
            out.assert_stdout_contains("listed / True")
                .assert_stdout_contains(&format!("listed {parent} True"));
        }
        _ => {
            out.assert_stdout_contains("refused / 13");
        }
    }
}
at_every_tier!(a_directory_handle_on_an_ancestor_of_the_project_opens_at_full);

/// Two loose objects in `.git/objects/17` (the directory git samples to
/// estimate how many loose objects there are), so that with `gc.auto=1`
/// a commit starts `git maintenance run --auto --detach`, as it does on
/// a repository with ~6,700 loose objects; then that commit, and a
/// background child that ends a moment after the command.
const DETACHED_MAINTENANCE: &str = r#"python3 - <<'PY'
import hashlib, subprocess
found, i = [], 0
while len(found) < 2:
    body = b"loose %d\n" % i
    if hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest().startswith("17"):
        found.append(body)
    i += 1
for body in found:
    subprocess.run(["git", "hash-object", "-w", "--stdin"], input=body, check=True, capture_output=True)
PY
echo change >> README.md; git add README.md
GIT_TRACE=2 git -c gc.auto=1 -c gc.autoDetach=true commit -q -m 'commit that starts maintenance' 2>trace.log
grep -q 'maintenance run --auto' trace.log && echo maintenance-started; rm trace.log
(sleep 0.3 &)
echo committed"#;

/// Runs as an unprivileged user: a `git commit` that starts git's
/// detached maintenance (which outlives the commit), and a background
/// child that ends 0.3 s after the command. Evidence: bare, the commit
/// starts `git maintenance run --auto --detach`; sandboxed, before the
/// fix both were killed when the command ended and recorded as
/// `process-escaped` (exit 3, and the repository never packed); now what
/// ends within the grace is no finding, the maintenance ran to its end
/// (the repository holds a pack), and the session is CLEAN. A daemon
/// still running after the grace stays a violation
/// (attacks::daemon).
fn what_tools_leave_running_and_end_by_themselves_is_no_finding(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare("git gc -q --prune=now").assert_success();
    let packs = |w: &World| {
        std::fs::read_dir(w.project.join(".git/objects/pack")).map_or(0, |d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".pack"))
            })
            .count()
        })
    };
    let before = packs(&w);
    w.sh_bare(DETACHED_MAINTENANCE)
        .assert_success()
        .assert_stdout_contains("maintenance-started\ncommitted");
    assert!(
        crate::util::eventually(std::time::Duration::from_secs(30), || packs(&w) > before),
        "control: the bare maintenance did not pack"
    );

    let w = World::at(tier);
    w.sh_bare("git gc -q --prune=now").assert_success();
    let before = packs(&w);
    let (out, log) = w.ci_sh(DETACHED_MAINTENANCE);
    out.assert_stdout_contains("maintenance-started\ncommitted");
    let escaped: Vec<_> = crate::util::violation_lines(&log)
        .into_iter()
        .filter(|l| l.contains("\"process-escaped\""))
        .collect();
    assert!(
        escaped.is_empty(),
        "what ended by itself was recorded at tier {tier}\n{}",
        out.dump()
    );
    assert!(
        packs(&w) > before,
        "the maintenance did not run to its end at tier {tier}\n{}",
        out.dump()
    );
}
at_every_tier!(what_tools_leave_running_and_end_by_themselves_is_no_finding);

/// What Claude Code and nyc's spawn-wrap write in the home at every
/// start: a file and a directory named after the process and a random
/// part (`~/.claude.json.tmp.PID.TIME`, `~/.node-spawn-wrap-PID-HEX`).
const RANDOM_HOME_NAMES: &str = r#"python3 - <<'PY'
import os, secrets, time
home = os.path.expanduser("~")
for make in (
    lambda: open(f"{home}/.claude.json.tmp.{os.getpid()}.{time.time_ns()}", "w").close(),
    lambda: os.mkdir(f"{home}/.node-spawn-wrap-{os.getpid()}-{secrets.token_hex(6)}"),
):
    try:
        make()
        print("made")
    except OSError as e:
        print("refused", e.errno)
PY"#;

/// Runs as an unprivileged user: writes to names with a random part in
/// the home. Evidence: bare both are made; sandboxed they are refused
/// (the home is not writable) and, where recorded (FS-ONLY; FULL's view
/// has no such path), the hint named that run's random path (`--allow-write
/// ~/.claude.json.tmp.4242.17…`), which the next run never uses, so
/// following the hints never converged. Now no hint and no suggested
/// policy names such a path, and the line says why.
fn no_hint_names_a_path_with_a_random_part(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare(RANDOM_HOME_NAMES)
        .assert_success()
        .assert_stdout_contains("made\nmade");
    w.sh_bare("rm -rf ~/.claude.json.tmp.* ~/.node-spawn-wrap-*")
        .assert_success();

    let (out, _) = w.ci_sh(RANDOM_HOME_NAMES);
    out.assert_stdout_contains("refused 13\nrefused 13");
    let said = out.stderr();
    for random in ["~/.claude.json.tmp.", "~/.node-spawn-wrap-"] {
        assert!(
            !said.contains(&format!("--allow-write {random}")),
            "a hint names the random path {random}… at tier {tier}\n{said}"
        );
    }
    if tier == Tier::FsOnly {
        assert!(
            said.contains("the name holds a random part"),
            "the refusal does not say why no flag allows it\n{said}"
        );
    }
    let log = w.project.join("vetto-report/session.jsonl");
    let suggested = w.vetto(&["policy", "suggest", log.to_str().unwrap()]).run();
    suggested.assert_success();
    for random in [".claude.json.tmp", ".node-spawn-wrap"] {
        suggested.assert_stdout_lacks(random);
    }
}
at_every_tier!(no_hint_names_a_path_with_a_random_part);

/// Runs as an unprivileged user: a job that looks at and cleans the
/// working tree, as CI steps do (`git status`, `git add -A`, `git clean`).
/// Evidence: before, `vetto-report/` showed up untracked to the job and
/// after the session (`?? vetto-report/`: `git add -A` took it in) and
/// `git clean -fd` tried to remove it; now vetto marks its report
/// directory ignored (`.gitignore` holding `*`), so `git status` is clean
/// and `git clean -fd` leaves it. `git clean -fdx` (which ignores
/// `.gitignore`) is still refused on the live log, and the hint names
/// what keeps it, which then works.
fn the_report_directory_is_ignored_by_git_and_git_clean_is_told_how_to_keep_it(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    // No masked `.env` left untracked (`git clean -fdx` would remove it).
    w.sh_bare("rm .env").assert_success();
    let (out, _) = w.ci_sh("git status --porcelain; git clean -fd; echo clean=$?");
    out.assert_stdout_lacks("vetto-report")
        .assert_stdout_contains("clean=0");
    w.sh_bare("git status --porcelain --untracked-files=all; echo listed")
        .assert_stdout_lacks("vetto-report")
        .assert_stdout_contains("listed");
    assert!(w.project.join("vetto-report/session.jsonl").is_file());

    let (out, _) = w.ci_sh("git clean -fdx; echo clean=$?");
    out.assert_stdout_contains("clean=1");
    let hint = "git clean -fdx -e /vetto-report";
    assert!(
        out.stderr().contains(hint),
        "the refusal does not say how to keep the reports\n{}",
        out.dump()
    );
    w.write(&w.project.join("build.o"), "object");
    let (out, log) = w.ci_sh(&format!("{hint}; echo clean=$?"));
    out.assert_stdout_contains("clean=0");
    assert!(!w.project.join("build.o").exists(), "{}", out.dump());
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "the hint's command was refused at tier {tier}\n{log}"
    );
}
at_every_tier!(the_report_directory_is_ignored_by_git_and_git_clean_is_told_how_to_keep_it);

/// New directories at the top of the project, each filled at once, as a
/// Python test run with coverage and packaging makes them.
const TOP_DIRS: &str = "for d in build dist .tox .venv htmlcov .pytest_cache; do mkdir $d && echo x > $d/f || exit 1; done; echo filled";

/// More new directories at the top than a session has spares (16), made
/// with `mkdir -p` so that a second run over the first one's works.
const PAST_SPARE_DIRS: &str =
    "for i in $(seq 1 17); do mkdir -p n$i && echo x > n$i/f || exit 1; done; echo filled";

/// More new files at the top than a session has spares where a masked
/// `.env` sits (64), each read back.
const PAST_SPARE_FILES: &str =
    "for i in $(seq 1 65); do echo x > t$i && cat t$i >/dev/null || exit 1; done; echo read-back";

/// Runs as an unprivileged user: new directories and files at the top of
/// the project. Evidence: bare all work. Before, the fifth new directory
/// at the top could not be filled (`EACCES` on `e/f`, at both tiers) and,
/// at FS-ONLY with a masked `.env` there, the seventeenth new file could
/// not be read back, with nothing recorded: the carve grants new entries
/// there from spares made before the sandbox starts, 4 directories and
/// 16 files, and made the rest plainly, unusable. Now a session has 16
/// and 64, and past them the new entry is refused and recorded with a
/// hint that works: making it before the session, or (files) FULL.
fn new_entries_at_the_project_top_are_usable_or_refused_and_told(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare(TOP_DIRS)
        .assert_success()
        .assert_stdout_contains("filled");
    w.sh_bare("rm -rf build dist .tox .venv htmlcov .pytest_cache")
        .assert_success();
    let (out, log) = w.ci_sh(TOP_DIRS);
    out.assert_success().assert_stdout_contains("filled");
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "a new directory at the top was recorded at tier {tier}\n{log}"
    );
    assert_eq!(
        crate::util::read(&w.project.join(".pytest_cache/f")).as_deref(),
        Some("x\n")
    );

    // Past the spares: refused, recorded, and told what works.
    let (out, log) = w.ci_sh(PAST_SPARE_DIRS);
    out.assert_stdout_lacks("filled");
    assert!(w.project.join("n16/f").is_file(), "{}", out.dump());
    assert!(!w.project.join("n17").exists(), "{}", out.dump());
    assert!(
        log.contains("fs-write-denied") && log.contains("SparesSpent"),
        "the 17th new directory was not recorded at tier {tier}\n{log}"
    );
    out.assert_stderr_contains("make it before the session");
    w.sh_bare("mkdir n17").assert_success();
    let (out, log) = w.ci_sh(PAST_SPARE_DIRS);
    out.assert_success().assert_stdout_contains("filled");
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "the hint did not work at tier {tier}\n{log}"
    );

    // Files where the masked `.env` sits: FULL masks it by a mount, so
    // files there need no spare; FS-ONLY refuses the 65th and says so.
    w.sh_bare(PAST_SPARE_FILES)
        .assert_success()
        .assert_stdout_contains("read-back");
    w.sh_bare("rm t*").assert_success();
    let (out, log) = w.ci_sh(PAST_SPARE_FILES);
    if tier == Tier::FsOnly {
        out.assert_stdout_lacks("read-back");
        assert!(w.project.join("t64").is_file(), "{}", out.dump());
        assert!(
            log.contains("SparesSpent"),
            "the 65th new file was not recorded\n{log}"
        );
        out.assert_stderr_contains("--tier full");
    } else {
        out.assert_success().assert_stdout_contains("read-back");
        assert!(
            crate::util::violation_lines(&log).is_empty(),
            "a new file at the top was recorded at tier {tier}\n{log}"
        );
    }
}
at_every_tier!(new_entries_at_the_project_top_are_usable_or_refused_and_told);

/// A directory under `/tmp` (an agent installed there), removed when the
/// test ends.
struct InTmp(std::path::PathBuf);

impl Drop for InTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs as an unprivileged user, at FULL (where `/tmp` is the job's own;
/// below it the shared `/tmp` is not the job's by design): a program
/// installed under `/tmp` and allowed read-only (`--allow-read`), run
/// while the job makes its own directory and file in `/tmp` at a fixed
/// name, as agents do when they start. Evidence: bare it works; before,
/// the allowed path beneath `/tmp` made the carve leave `/tmp` a skeleton
/// (`mkdir /tmp/…` `EACCES`, nothing recorded). Now `/tmp` is granted
/// whole, as what the policy binds there read-only is kept by a read-only
/// mount: the installed program still cannot be written, removed or moved.
/// (A project under `/tmp` still keeps `/tmp` carved: docs/tiers.md.)
fn an_allowed_path_under_tmp_leaves_the_jobs_tmp_writable(tier: Tier) {
    use std::os::unix::fs::PermissionsExt;
    require!(tier.feature());
    // The project outside /tmp (a project under /tmp is carved there).
    let w = World::at_in(tier, std::path::Path::new("/var/tmp"));
    let agent = InTmp(std::path::PathBuf::from(format!(
        "/tmp/{}-agent",
        w.root.file_name().unwrap().to_string_lossy()
    )));
    std::fs::create_dir_all(agent.0.join("bin")).unwrap();
    std::fs::write(agent.0.join("bin/agent"), "echo agent-ran\n").unwrap();
    for (p, mode) in [(agent.0.clone(), 0o755), (agent.0.join("bin"), 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let a = agent.0.to_str().unwrap();
    let job = format!(
        "d=/tmp/agent-state-$$; mkdir $d && echo x > $d/f && cat $d/f && rm -r $d && sh {a}/bin/agent"
    );
    w.sh_bare(&job)
        .assert_success()
        .assert_stdout_contains("x\nagent-ran");

    let (out, log) = w.ci_sh_with(&["--allow-read", a], &job);
    out.assert_success().assert_stdout_contains("x\nagent-ran");
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "the job's own /tmp was recorded\n{log}"
    );
    let (out, _) = w.ci_sh_with(
        &["--allow-read", a],
        &format!("echo planted > {a}/bin/agent; rm -rf {a}; mv {a} /tmp/moved; cat {a}/bin/agent"),
    );
    out.assert_stdout_contains("agent-ran");
    assert_eq!(
        crate::util::read(&agent.0.join("bin/agent")).as_deref(),
        Some("echo agent-ran\n")
    );
}
crate::at_tiers!([at_full = Full] an_allowed_path_under_tmp_leaves_the_jobs_tmp_writable);

/// A test suite's server on a unix socket at the path given as `$1`,
/// with a client of its own.
const UNIX_SERVER: &str = r#"python3 - "$SOCK" <<'PY'
import os, socket, sys
p = sys.argv[1]
s = socket.socket(socket.AF_UNIX)
try:
    s.bind(p)
except OSError as e:
    print("bind refused", e.errno)
    sys.exit(1)
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect(p)
a, _ = s.accept()
c.sendall(b"ping")
print("served", a.recv(4).decode())
os.unlink(p)
PY"#;

/// Runs as an unprivileged user: a test server bound to a unix socket at
/// a fixed path in `/tmp`. Evidence: bare it serves. At FULL `/tmp` is
/// the job's own and it serves. At FS-ONLY `/tmp` is the host's shared
/// one (a socket planted there is one host programs would trust): the
/// bind stays refused, but before it was `EACCES` with nothing recorded
/// (servers waited out their timeouts); now it is recorded with what
/// works — `$TMPDIR`, where the same server serves, or FULL.
fn a_unix_socket_at_a_fixed_path_in_tmp_serves_or_is_told(tier: Tier) {
    require!(tier.feature());
    let w = World::at_in(tier, std::path::Path::new("/var/tmp"));
    let sock = format!(
        "/tmp/{}.sock",
        w.root.file_name().unwrap().to_string_lossy()
    );
    let at_fixed = format!("SOCK={sock}; {UNIX_SERVER}");
    w.sh_bare(&at_fixed)
        .assert_success()
        .assert_stdout_contains("served ping");

    let (out, log) = w.ci_sh(&at_fixed);
    if tier == Tier::Full {
        out.assert_success().assert_stdout_contains("served ping");
        assert!(
            crate::util::violation_lines(&log).is_empty(),
            "the job's own socket was recorded\n{log}"
        );
        return;
    }
    out.assert_stdout_contains("bind refused 13");
    assert!(
        log.contains(&sock) && log.contains("bind"),
        "the refused bind was not recorded\n{log}"
    );
    out.assert_stderr_contains("$TMPDIR")
        .assert_stderr_contains("at FULL /tmp is the job's own");
    let (out, log) = w.ci_sh(&format!("SOCK=$TMPDIR/s; {UNIX_SERVER}"));
    out.assert_success().assert_stdout_contains("served ping");
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "a socket in $TMPDIR was recorded\n{log}"
    );
}
at_every_tier!(a_unix_socket_at_a_fixed_path_in_tmp_serves_or_is_told);

/// Runs as an unprivileged user: everyday jobs that never run npm (`git`,
/// `cargo`), ending clean. Evidence: before, every session printed that
/// npm reads `~/.npmrc` without its credentials, and a clean one the
/// whole paragraph of what the tier does not observe. Now the npm line
/// is printed where the command names npm (the copy is made all the
/// same), and a clean session says what is not observed in one line.
fn clean_everyday_jobs_print_nothing_that_does_not_concern_them(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let (out, log) =
        w.ci_sh("git status --short >/dev/null && env | grep -c '_userconfig=.*vetto-npmrc'");
    out.assert_success().assert_stdout_contains("1");
    assert!(
        crate::util::violation_lines(&log).is_empty(),
        "the everyday job was recorded\n{log}"
    );
    let said = out.stderr();
    assert!(
        !said.contains(".npmrc") && !said.contains("refused, but not recorded"),
        "a clean git job was told about npm or the whole list\n{said}"
    );
    out.assert_stderr_contains("CLEAN")
        .assert_stderr_contains("not observed at this tier: ");

    let (out, _) = w.ci_sh("command -v npm >/dev/null; echo npm-or-not");
    out.assert_success()
        .assert_stderr_contains(".npmrc without its credentials");
}
at_every_tier!(clean_everyday_jobs_print_nothing_that_does_not_concern_them);

/// An install that makes the project's first `package-lock.json` (not yet
/// committed) and runs a dependency's script that writes a shell start-up
/// file.
const FIRST_LOCKFILE: &str = r#"mkdir -p node_modules/evil
printf '{"name": "evil", "version": "1.0.0"}\n' > node_modules/evil/package.json
printf 'echo planted >> "$HOME/.bashrc"\n' > node_modules/evil/install.sh
printf '{\n  "packages": {\n    "node_modules/evil": {"version": "1.0.0"}\n  }\n}\n' > package-lock.json
sh node_modules/evil/install.sh; echo installed"#;

/// Runs as an unprivileged user: the SARIF location of an alert a
/// dependency caused. Evidence: `git ls-files` does not list the
/// `package-lock.json` the job made; before, code scanning's location was
/// its line all the same (the locator read the working tree, not what
/// git tracks), a file the repository does not have. Now the alert is at
/// the line of the tracked `package.json` that names the package.
fn a_sarif_alert_is_placed_on_a_tracked_file_only(tier: Tier) {
    require!(tier.feature());
    // Outside /tmp: at FULL a home under a carved /tmp is refused
    // unrecorded (docs/tiers.md).
    let w = World::at_in(tier, std::path::Path::new("/var/tmp"));
    w.write(
        &w.project.join("package.json"),
        "{\n  \"name\": \"demo\",\n  \"dependencies\": {\n    \"evil\": \"1.0.0\"\n  }\n}\n",
    );
    w.sh_bare("git add package.json && git commit -q -m deps")
        .assert_success();
    let (out, log) = w.ci_sh(FIRST_LOCKFILE);
    out.assert_stdout_contains("installed");
    assert!(
        log.contains("\"name\":\"evil\""),
        "the write was not attributed to the package\n{log}"
    );
    w.sh_bare("git ls-files --error-unmatch package-lock.json 2>/dev/null || echo untracked")
        .assert_stdout_contains("untracked");
    let sarif: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.project.join("vetto-report/vetto.sarif")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let results = sarif["runs"][0]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours = results
        .iter()
        .find(|r| r["message"]["text"].to_string().contains("evil"));
    let Some(ours) = ours else {
        panic!("no result for the package in the SARIF: {sarif}");
    };
    let at = &ours["locations"][0]["physicalLocation"];
    assert_eq!(at["artifactLocation"]["uri"], "package.json", "{ours}");
    assert_eq!(at["region"]["startLine"], 4, "{ours}");
}
at_every_tier!(a_sarif_alert_is_placed_on_a_tracked_file_only);
