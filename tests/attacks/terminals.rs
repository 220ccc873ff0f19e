//! Another terminal of the same user: the job opens `/dev/pts/N` of a
//! terminal it was not started on, reads what is typed there (a sudo
//! password) and writes escape sequences onto it. And the controls: the
//! job's own terminal and the pseudo-terminals it creates keep working.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use crate::util::{Tier, World, user, vetto_bin};
use crate::{at_every_tier, require};

const TYPED: &str = "sudo-pw-CANARY-4711";
const MARK: &str = "PWNED-MARK-0815";
const SYNC: &str = "SYNC-AFTER-JOB";

/// A terminal outside the sandbox: the test holds its master (what a
/// terminal emulator holds) and types into it; the slave belongs to the
/// test user, like another terminal of the same user.
struct Victim {
    master: std::fs::File,
    slave: OwnedFd,
    path: PathBuf,
}

impl Victim {
    fn open() -> Victim {
        let pty = nix::pty::openpty(None, None).unwrap();
        let path = std::fs::read_link(format!("/proc/self/fd/{}", pty.slave.as_raw_fd())).unwrap();
        let u = user();
        if u.drop_from_root {
            std::os::unix::fs::chown(&path, Some(u.uid), Some(u.gid)).unwrap();
        }
        Victim {
            master: std::fs::File::from(pty.master),
            slave: pty.slave,
            path,
        }
    }

    /// A terminal whose number the job's first own pty cannot have (at
    /// FULL that is `pts/0` of the private instance, the same name):
    /// `pts/0`, if it comes, is kept open and another one taken.
    fn open_beside_own() -> (Victim, Option<Victim>) {
        let first = Victim::open();
        if first.path != std::path::Path::new("/dev/pts/0") {
            return (first, None);
        }
        (Victim::open(), Some(first))
    }

    /// Type a line at the terminal, as its user would.
    fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    /// Everything written onto the terminal up to now: the test writes a
    /// marker through its own slave and reads the master up to it (output
    /// keeps its order), so nothing that arrived before is missed and no
    /// time has to pass.
    fn screen(&mut self) -> String {
        let mut slave = std::fs::File::from(self.slave.try_clone().unwrap());
        slave.write_all(SYNC.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(SYNC) {
            let n = self.master.read(&mut buf).unwrap();
            assert!(n > 0, "the victim terminal closed");
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    }
}

/// Open the other terminal read-only and read-write, read what was typed,
/// write an OSC title sequence onto it.
fn attack_script(path: &str) -> String {
    format!(
        r#"
import os, select
for name, mode in (("rdonly", os.O_RDONLY), ("rdwr", os.O_RDWR)):
    try:
        fd = os.open("{path}", mode | os.O_NOCTTY)
    except OSError as e:
        print(name, "open-failed", e.errno)
        continue
    print(name, "opened")
    if mode == os.O_RDWR:
        os.write(fd, b"\x1b]0;{MARK}\x07")
        continue
    r, _, _ = select.select([fd], [], [], 60)
    if r:
        print(name, "read", os.read(fd, 200))
"#
    )
}

/// Runs as an unprivileged user: a second terminal of the same user
/// (held by the test), with a password typed into it. Evidence: bare, the
/// job reads the password and its escape sequence reaches the terminal;
/// sandboxed, both opens fail and nothing arrives on the terminal.
fn another_terminal_cannot_be_read_or_written(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);

    let mut bare_victim = Victim::open();
    bare_victim.type_line(TYPED);
    let _ = bare_victim.screen(); // the echo of what was typed
    let path = bare_victim.path.to_str().unwrap().to_owned();
    let bare = w.run_bare(&["python3", "-c", &attack_script(&path)]);
    bare.assert_success().assert_stdout_contains(TYPED);
    assert!(
        bare_victim.screen().contains(MARK),
        "control: the bare escape sequence never reached the terminal\n{}",
        bare.dump()
    );

    let mut victim = Victim::open();
    victim.type_line(TYPED);
    let _ = victim.screen();
    let path = victim.path.to_str().unwrap().to_owned();
    let out = w.run_sandboxed(&["python3", "-c", &attack_script(&path)]);
    out.assert_ran()
        .assert_stdout_contains("rdonly open-failed")
        .assert_stdout_contains("rdwr open-failed")
        .assert_stdout_lacks("opened")
        .assert_no_leak(TYPED);
    let screen = victim.screen();
    assert!(
        !screen.contains(MARK),
        "the job wrote onto another terminal: {screen:?}\n{}",
        out.dump()
    );
}
at_every_tier!(another_terminal_cannot_be_read_or_written);

/// `vetto run --tier T -- sh -c SCRIPT` on a terminal of its own
/// (`script(1)` gives vetto a pseudo-terminal, as a terminal emulator would).
fn on_a_terminal(w: &World, tier: Tier, script: &str) -> crate::util::Out {
    let cmd = format!(
        "echo \"outside=$(tty)\"; {} run --tier {} --project {} -- sh -c '{script}'",
        vetto_bin().display(),
        tier.name(),
        w.project.display()
    );
    w.bare(&["script", "-qec", &cmd, "/dev/null"]).run()
}

/// Runs as an unprivileged user, with vetto on a terminal: the job's own
/// terminal has its own name (`tty`, `ttyname()` say what `tty` says
/// outside), can be reopened by it and
/// written to, and pseudo-terminals the job creates work (glibc's
/// `openpty`, python's `pty.spawn`, `script`).
fn own_terminal_and_own_ptys_work(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = r#"
echo "tty=$(tty)"
python3 -c "import os; print(\"ttyname=\" + os.ttyname(0))"
echo OWN-TTY-REOPENED > "$(tty)"
python3 -c "import pty, os; m, s = pty.openpty(); os.write(s, b\"x\"); print(\"openpty\", os.read(m, 1))"
script -qec "echo INNER-SCRIPT-RAN" /dev/null
python3 -c "import pty; pty.spawn([\"sh\", \"-c\", \"echo SPAWNED-ON-\$(tty)\"])"
"#;
    let out = on_a_terminal(&w, tier, script);
    out.assert_success()
        .assert_stdout_lacks("not a tty")
        .assert_stdout_contains("OWN-TTY-REOPENED")
        .assert_stdout_contains("openpty b'x'")
        .assert_stdout_contains("INNER-SCRIPT-RAN")
        .assert_stdout_contains("SPAWNED-ON-/dev/pts/");
    let stdout = out.stdout();
    let named = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.trim_end().strip_prefix(key).map(str::to_owned))
            .unwrap_or_default()
    };
    // The terminal by its own name, as outside (at FULL too, where the
    // private devpts holds only the job's own terminals besides it).
    let outside = named("outside=");
    assert!(outside.starts_with("/dev/pts/"), "{}", out.dump());
    for key in ["tty=", "ttyname="] {
        assert_eq!(
            named(key),
            outside,
            "{key} names another terminal than outside\n{}",
            out.dump()
        );
    }
}
at_every_tier!(own_terminal_and_own_ptys_work);

/// Python (3.11: no `os.posix_openpt` yet) making a pty as Go's
/// `creack/pty` and `expect` do: `posix_openpt`, `grantpt`, `unlockpt`,
/// `ptsname`; binds `m` (the master) and `name` (the slave's path).
const SELF_MADE_PTY: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptsname.restype = ctypes.c_char_p
m = libc.posix_openpt(os.O_RDWR | os.O_NOCTTY)
assert m >= 0, ctypes.get_errno()
assert libc.grantpt(m) == 0 and libc.unlockpt(m) == 0, ctypes.get_errno()
name = libc.ptsname(m).decode()
"#;

/// Runs as an unprivileged user: the slave of a pty the job made itself,
/// opened by the name `ptsname()` gives (`open("/dev/pts/N", O_RDWR |
/// O_NOCTTY)`), is that terminal, both ways.
fn own_pty_slave_opens_by_path(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = format!(
        r#"{SELF_MADE_PTY}
s = os.open(name, os.O_RDWR | os.O_NOCTTY)
print("slave", name, "is", os.ttyname(s))
import termios
a = termios.tcgetattr(s)
a[3] &= ~termios.ECHO
termios.tcsetattr(s, termios.TCSANOW, a)
os.write(m, b"typed-at-master\n")
print("slave-read", os.read(s, 100))
os.write(s, b"from-slave\n")
print("master-read", os.read(m, 100))
"#
    );
    let out = w.run_sandboxed(&["python3", "-c", &script]);
    out.assert_success()
        .assert_stdout_contains("slave-read b'typed-at-master\\n'")
        .assert_stdout_contains("master-read b'from-slave\\r\\n'");
    let line = out
        .stdout()
        .lines()
        .find(|l| l.starts_with("slave "))
        .unwrap_or_default()
        .to_owned();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(
        words.len() == 4 && words[1].starts_with("/dev/pts/") && words[1] == words[3],
        "the slave opened is not the pty's own\n{}",
        out.dump()
    );
}
at_every_tier!(own_pty_slave_opens_by_path);

/// Open another terminal by path as a pty slave is opened (`O_RDWR |
/// O_NOCTTY`), while holding a pty master of its own, and by the other
/// spellings of that path (relative to `/dev`, through `..`).
fn by_path_attack_script(path: &str) -> String {
    let n = path.rsplit('/').next().unwrap_or_default();
    format!(
        r#"{SELF_MADE_PTY}
d = os.open("/dev", os.O_RDONLY | os.O_DIRECTORY)
for name, p, dirfd in (("abs", "{path}", None), ("rel", "pts/{n}", d), ("dotdot", "/dev/pts/../pts/{n}", None)):
    try:
        fd = os.open(p, os.O_RDWR | os.O_NOCTTY, dir_fd=dirfd)
    except OSError as e:
        print(name, "open-failed", e.errno)
        continue
    print(name, "opened")
    os.write(fd, b"\x1b]0;{MARK}\x07")
    os.set_blocking(fd, False)
    try:
        print(name, "read", os.read(fd, 200))
    except BlockingIOError:
        pass
"#
    )
}

/// Runs as an unprivileged user: a job that made a pty of its own (so the
/// supervisor is asked about its slave opens) opens another terminal of
/// the same user read-write by path. Evidence: bare, its escape sequence
/// reaches that terminal and it reads what was typed; sandboxed, every
/// open fails and nothing arrives.
fn another_terminal_cannot_be_opened_as_an_own_pty_slave(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);

    let (mut bare_victim, _kept) = Victim::open_beside_own();
    bare_victim.type_line(TYPED);
    let _ = bare_victim.screen();
    let path = bare_victim.path.to_str().unwrap().to_owned();
    let bare = w.run_bare(&["python3", "-c", &by_path_attack_script(&path)]);
    bare.assert_success()
        .assert_stdout_contains("abs opened")
        .assert_stdout_contains(TYPED);
    assert!(
        bare_victim.screen().contains(MARK),
        "control: the bare escape sequence never reached the terminal\n{}",
        bare.dump()
    );

    let (mut victim, _kept) = Victim::open_beside_own();
    victim.type_line(TYPED);
    let _ = victim.screen();
    let path = victim.path.to_str().unwrap().to_owned();
    let out = w.run_sandboxed(&["python3", "-c", &by_path_attack_script(&path)]);
    out.assert_success()
        .assert_stdout_contains("abs open-failed")
        .assert_stdout_contains("rel open-failed")
        .assert_stdout_contains("dotdot open-failed")
        .assert_stdout_lacks("opened")
        .assert_no_leak(TYPED);
    let screen = victim.screen();
    assert!(
        !screen.contains(MARK),
        "the job wrote onto another terminal: {screen:?}\n{}",
        out.dump()
    );
}
at_every_tier!(another_terminal_cannot_be_opened_as_an_own_pty_slave);
