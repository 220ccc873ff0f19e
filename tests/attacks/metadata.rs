//! Mode, owner and time changes of files the job may only read. Landlock
//! does not restrict `chmod`, `chown` or `utime*`, so at FS-ONLY (no
//! read-only mount) a job could `chmod 0666 ~/.bashrc` — any other local
//! user could then put commands into the user's next shell — or open
//! `~/.ssh` to everyone. The supervisor decides each such call on its own
//! descriptor of the target; at FULL the home is a read-only mount.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::util::{Out, Tier, World};
use crate::{at_every_tier, require};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0)
}

fn mtime(path: &Path) -> i64 {
    std::fs::metadata(path).map(|m| m.mtime()).unwrap_or(0)
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The control: bare, `script` prints `changed` and leaves `file` 0666
/// (`call` names what failed otherwise); `file` is 0644 again after.
fn assert_bare_chmod_works(w: &World, script: &str, file: &Path, call: &str) {
    w.sh_bare(script).assert_stdout_contains("changed");
    assert_eq!(mode(file), 0o666, "control: the bare {call} failed");
    set_mode(file, 0o644);
}

/// Sandboxed, `file` (`shown` in the message) is 0644 still.
fn assert_mode_kept(file: &Path, shown: &str, out: &Out) {
    assert_eq!(mode(file), 0o644, "{shown}'s mode changed\n{}", out.dump());
}

/// A `~/.bashrc` of the test user, mode 0644.
fn bashrc(w: &World) -> std::path::PathBuf {
    let bashrc = w.home.join(".bashrc");
    w.write(&bashrc, "# the user's bashrc\n");
    set_mode(&bashrc, 0o644);
    bashrc
}

/// At FS-ONLY the refusal is the supervisor's and is recorded with the
/// process and the path; at FULL the read-only mount refuses (`EROFS`).
fn assert_recorded(w: &World, log: &str, call: &str, name: &str, out: &Out) {
    if w.tier != Tier::FsOnly {
        return;
    }
    assert!(
        log.lines().any(|l| l.contains("\"fs-write-denied\"")
            && l.contains(name)
            && l.contains(&format!("\"detail\":\"{call} "))
            && l.contains("\"pid\"")),
        "no fs-write-denied violation naming {name} and {call}\n{log}\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `chmod 0666 ~/.bashrc`, a file the job
/// may read. Evidence: bare, the mode changes; sandboxed, `chmod` fails,
/// the mode is 0644 still, and (FS-ONLY) a violation names the file.
fn chmod_of_a_readable_home_file_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bashrc = bashrc(&w);
    let script = format!(
        "chmod 0666 '{}' && echo changed; echo script-finished",
        bashrc.display()
    );
    assert_bare_chmod_works(&w, &script, &bashrc, "chmod");

    let (out, log) = w.ci_sh(&script);
    out.assert_stdout_contains("script-finished")
        .assert_stdout_lacks("changed");
    assert_mode_kept(&bashrc, "~/.bashrc", &out);
    assert_recorded(&w, &log, "fchmodat", ".bashrc", &out);

    // `~/.ssh` opened to everyone, or closed to the user.
    let ssh = w.home.join(".ssh");
    w.write(&ssh.join("authorized_keys"), "ssh-ed25519 AAAA user\n");
    set_mode(&ssh, 0o700);
    let out = w.sh_sandboxed(&format!(
        "chmod 0777 '{0}' '{0}/authorized_keys'; chmod 000 '{0}'; echo script-finished",
        ssh.display()
    ));
    out.assert_stdout_contains("script-finished");
    assert_eq!(mode(&ssh), 0o700, "~/.ssh's mode changed\n{}", out.dump());
}

/// Runs as an unprivileged user: `touch -d 2001-01-01 ~/.bashrc` (and a
/// `chown` to the user's own ids, which the kernel allows an owner).
/// Evidence: bare, both work; sandboxed, the time is unchanged and both fail.
fn touch_of_a_readable_home_file_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bashrc = bashrc(&w);
    let before = mtime(&bashrc);
    let script = format!(
        "touch -d 2001-01-01 '{0}' && echo touched; chown \"$(id -u):$(id -g)\" '{0}' && echo chowned; echo script-finished",
        bashrc.display()
    );
    w.sh_bare(&script)
        .assert_stdout_contains("touched")
        .assert_stdout_contains("chowned");
    assert_ne!(mtime(&bashrc), before, "control: the bare touch failed");
    let bashrc = self::bashrc(&w);
    let before = mtime(&bashrc);

    let (out, log) = w.ci_sh(&script);
    out.assert_stdout_contains("script-finished")
        .assert_stdout_lacks("touched")
        .assert_stdout_lacks("chowned");
    assert_eq!(
        mtime(&bashrc),
        before,
        "~/.bashrc's time changed\n{}",
        out.dump()
    );
    // touch opens the file first (refused by Landlock, recorded), then
    // falls back to utimensat; chown is the supervisor's refusal.
    assert_recorded(&w, &log, "fchownat", ".bashrc", &out);
}

/// Runs as an unprivileged user: python opens `~/.gitconfig` read-only
/// (the default policy lets the job read it) and calls `os.fchmod` on that
/// descriptor: made world-writable, any local user could add a
/// `core.pager` that runs in the user's next `git log`. Evidence: bare,
/// the mode changes; sandboxed, `PermissionError` (FULL: read-only file
/// system) and the mode is unchanged.
fn fchmod_through_a_read_only_descriptor_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let gitconfig = w.home.join(".gitconfig");
    w.write(&gitconfig, "[user]\n\tname = u\n");
    set_mode(&gitconfig, 0o644);
    let script = format!(
        "python3 -c \"import os\nfd = os.open('{}', os.O_RDONLY)\ntry:\n    os.fchmod(fd, 0o666)\n    print('changed')\nexcept OSError as e:\n    print('refused', e.errno)\n\"",
        gitconfig.display()
    );
    assert_bare_chmod_works(&w, &script, &gitconfig, "fchmod");

    let (out, log) = w.ci_sh(&script);
    out.assert_stdout_contains("refused")
        .assert_stdout_lacks("changed");
    assert_mode_kept(&gitconfig, "~/.gitconfig", &out);
    assert_recorded(&w, &log, "fchmod", ".gitconfig", &out);
}

/// Runs as an unprivileged user: a symlink in the project points at
/// `~/.bashrc`; `chmod` follows it. Evidence: bare, `~/.bashrc` becomes
/// 0666; sandboxed, it stays 0644, while changing the link itself
/// (`chown -h`, `touch -h`: the link lies in the project) works.
fn chmod_through_a_project_symlink_is_refused(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bashrc = bashrc(&w);
    w.sh_bare(&format!(
        "mkdir -p src && ln -s '{}' src/rc",
        bashrc.display()
    ))
    .assert_success();
    let script = "chmod 0666 src/rc && echo changed; \
                  chown -h \"$(id -u):$(id -g)\" src/rc && echo link-chowned; \
                  touch -h -d 2002-02-02 src/rc && echo link-touched; echo script-finished";
    assert_bare_chmod_works(&w, script, &bashrc, "chmod");

    let (out, log) = w.ci_sh(script);
    out.assert_stdout_contains("script-finished")
        .assert_stdout_lacks("changed")
        .assert_stdout_contains("link-chowned")
        .assert_stdout_contains("link-touched");
    assert_mode_kept(&bashrc, "~/.bashrc", &out);
    assert_recorded(&w, &log, "fchmodat", ".bashrc", &out);
}

/// Runs as an unprivileged user: what builds do with modes and times in
/// the project. `chmod +x` of a script (at the root and in a directory),
/// `touch` and `touch -d`, `tar xf` of an archive that carries modes and
/// times, and a freshly created file `fchmod`ed (npm, cargo, pip).
/// Evidence: all of it works sandboxed, with the modes and times asked.
fn mode_and_time_changes_in_the_project_still_work(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(&w.project.join("run.sh"), "#!/bin/sh\necho ran\n");
    w.write(&w.project.join("src/tool.sh"), "#!/bin/sh\necho tool\n");
    // An archive with a 0755 file, a 0600 file and a 2001 mtime.
    let staging = w.outside.join("staging");
    w.write(&staging.join("pkg/bin/cli"), "#!/bin/sh\n");
    w.write(&staging.join("pkg/secret"), "s\n");
    let archive = w.project.join("pkg.tar");
    w.sh_bare(&format!(
        "cd '{0}' && chmod 0755 pkg/bin/cli && chmod 0600 pkg/secret && \
         touch -d 2001-01-01 pkg/secret && tar cf '{1}' pkg",
        staging.display(),
        archive.display()
    ))
    .assert_success();
    let script = format!(
        "set -e; chmod +x run.sh src/tool.sh; ./run.sh; src/tool.sh; \
         touch src/new; touch -d 2003-03-03 src/tool.sh; \
         mkdir -p out; tar xf '{}' -C out; \
         python3 -c \"import os\nfd = os.open('src/made', os.O_WRONLY | os.O_CREAT, 0o600)\nos.fchmod(fd, 0o751)\nos.close(fd)\"; \
         echo all-done",
        archive.display()
    );
    let out = w.sh_sandboxed(&script);
    out.assert_success()
        .assert_stdout_contains("ran")
        .assert_stdout_contains("tool")
        .assert_stdout_contains("all-done");
    let p = &w.project;
    assert_eq!(mode(&p.join("run.sh")) & 0o111, 0o111, "{}", out.dump());
    assert_eq!(mode(&p.join("out/pkg/bin/cli")), 0o755, "{}", out.dump());
    assert_eq!(mode(&p.join("out/pkg/secret")), 0o600, "{}", out.dump());
    assert_eq!(mode(&p.join("src/made")), 0o751, "{}", out.dump());
    let y2001 = 978_307_200;
    assert!(
        (mtime(&p.join("out/pkg/secret")) - y2001).abs() < 2 * 86_400,
        "tar did not restore the mtime\n{}",
        out.dump()
    );
    assert!(
        mtime(&p.join("src/tool.sh")) < 1_100_000_000,
        "touch -d did not set the time\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: a job makes itself non-dumpable
/// (`PR_SET_DUMPABLE 0`, as ssh does), so that a same-uid supervisor can
/// read neither its memory nor its descriptors, then `chmod`s `~/.bashrc`.
/// Evidence: bare, the mode changes; sandboxed, the call fails (FS-ONLY:
/// `EPERM`, closed; FULL: read-only) and the mode is unchanged.
fn non_dumpable_job_cannot_chmod_a_home_file(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bashrc = bashrc(&w);
    let script = format!(
        "python3 -c \"import ctypes, os\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\ntry:\n    os.chmod('{}', 0o666)\n    print('changed')\nexcept OSError as e:\n    print('refused', e.errno)\n\"",
        bashrc.display()
    );
    assert_bare_chmod_works(&w, &script, &bashrc, "chmod");

    let out = w.sh_sandboxed(&script);
    out.assert_stdout_contains("refused")
        .assert_stdout_lacks("changed");
    assert_mode_kept(&bashrc, "~/.bashrc", &out);
}

/// The racing job: one thread flips a path buffer between a project file
/// and `~/.bashrc` while another calls `chmod(buffer, 0666)` for 3 s.
const RACE: &str = r#"python3 - "$1" "$2" <<'PY'
import ctypes, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
a = sys.argv[1].encode() + b"\0"
b = sys.argv[2].encode() + b"\0"
n = max(len(a), len(b))
a, b = a.ljust(n, b"\0"), b.ljust(n, b"\0")
buf = ctypes.create_string_buffer(a, n)
stop = time.time() + 3
def flip():
    while time.time() < stop:
        ctypes.memmove(buf, b, n)
        ctypes.memmove(buf, a, n)
t = threading.Thread(target=flip)
t.start()
tries = ok = 0
while time.time() < stop:
    tries += 1
    if libc.chmod(buf, 0o666) == 0:
        ok += 1
t.join()
print("tries", tries, "ok", ok)
PY"#;

/// Runs as an unprivileged user: the race above. Evidence: bare, the
/// flips reach `~/.bashrc` (0666); sandboxed, chmods of the project file
/// succeed and `~/.bashrc` is 0644 after thousands of tries.
fn racing_chmod_never_reaches_a_readable_home_file(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bashrc = bashrc(&w);
    let mine = w.project.join("src/mine");
    w.write(&mine, "x\n");
    let run = |sandboxed: bool| {
        let argv = [
            "sh",
            "-c",
            RACE,
            "race",
            mine.to_str().unwrap_or_default(),
            bashrc.to_str().unwrap_or_default(),
        ];
        if sandboxed {
            w.run_sandboxed(&argv)
        } else {
            w.run_bare(&argv)
        }
    };
    run(false).assert_success();
    assert_eq!(
        mode(&bashrc),
        0o666,
        "control: the bare race never reached ~/.bashrc"
    );
    set_mode(&bashrc, 0o644);
    set_mode(&mine, 0o644);

    let out = run(true);
    out.assert_success().assert_stdout_contains("tries");
    assert_mode_kept(&bashrc, "~/.bashrc", &out);
    assert_eq!(
        mode(&mine),
        0o666,
        "no chmod of the project file succeeded\n{}",
        out.dump()
    );
}

at_every_tier!(
    chmod_of_a_readable_home_file_is_refused,
    touch_of_a_readable_home_file_is_refused,
    fchmod_through_a_read_only_descriptor_is_refused,
    chmod_through_a_project_symlink_is_refused,
    non_dumpable_job_cannot_chmod_a_home_file,
    mode_and_time_changes_in_the_project_still_work,
    racing_chmod_never_reaches_a_readable_home_file
);
