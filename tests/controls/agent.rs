//! An agent preset with a stand-in agent, driven in a real terminal
//! (tmux) as the unprivileged test user: `vetto run --preset claude-code
//! -- claude`, where `claude` is a python script on `PATH` that reads its
//! config (`~/.claude/settings.json`), calls its API host (at
//! `$ANTHROPIC_BASE_URL`, a stand-in on the host's loopback pinned with
//! `--resolve`, which the preset discovers and sends through the egress
//! proxy), edits a project file, runs a test command, and then takes
//! commands typed at its terminal.
//!
//! What must work: keystrokes reach it, a resize reaches it (SIGWINCH and
//! the new size), Ctrl-C stops it and vetto ends with the same status.
//! What must not: reading `~/.ssh/id_ed25519`, and pushing input into the
//! terminal with `TIOCSTI` — both shown working bare first.
//!
//! The host is loaded: every wait polls the pane with a generous deadline
//! that only guards against a hang; nothing asserts how long anything took.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::util::{self, Tier, World, skip};
use crate::{at_every_tier, require};

const KEY_CANARY: &str = "CANARY-agent-ssh-key-91c4";
const API_REPLY: &str = "API-REPLY-stand-in-4242";
/// What the stand-in pushes with TIOCSTI: seen as a command only if it
/// reached the terminal's input.
const INJECTED: &str = "got INJECTED";
/// A hang guard, never a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// The agent's API host: answers every POST with [`API_REPLY`], counts them.
struct Api {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Api {
    fn start() -> Api {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                if util::read_http_request(&s).is_none() {
                    continue;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                util::reply_http_ok(&s, API_REPLY);
            }
        });
        Api { port, hits }
    }
}

/// A tmux server of the test user, on its own socket; killed when dropped.
struct Tmux<'w> {
    w: &'w World,
    socket: PathBuf,
    env: Vec<(String, String)>,
}

impl Tmux<'_> {
    fn tmux(&self, args: &[&str]) -> util::Out {
        let mut argv = vec!["tmux", "-S", self.socket.to_str().unwrap()];
        argv.extend_from_slice(args);
        let mut run = self.w.bare(&argv);
        for (k, v) in &self.env {
            run = run.env(k, v);
        }
        run.run()
    }

    /// A detached 100x30 session running `argv` under a shell that writes
    /// its exit status to [`Self::status_file`] (128+N when a signal N
    /// ended it). The pane's own status is not used: under load tmux 3.3
    /// was seen marking the pane dead without ever reporting a status.
    /// The shell's `INT` trap is a handler, not an ignore, so the command
    /// gets Ctrl-C as it would at a prompt.
    fn start(&self, argv: &[&str]) {
        let status = self.status_file();
        let _ = std::fs::remove_file(&status);
        let mut args = vec![
            "new-session",
            "-d",
            "-s",
            "a",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            "-c",
            "f=$1; shift; trap : INT; \"$@\"; echo $? > \"$f.tmp\"; mv \"$f.tmp\" \"$f\"",
            "sh",
            status.to_str().unwrap(),
        ];
        args.extend_from_slice(argv);
        // Kept after it exits, so the screen can still be read.
        args.extend_from_slice(&[";", "set-option", "-t", "a", "remain-on-exit", "on"]);
        self.tmux(&args).assert_success();
    }

    fn status_file(&self) -> PathBuf {
        self.socket.with_extension("status")
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "a"];
        args.extend_from_slice(keys);
        self.tmux(&args).assert_success();
    }

    /// The pane's whole history, wrapped lines joined.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "a"])
            .stdout()
    }

    /// Poll until the pane shows `needle` (the hang guard fails the test).
    fn wait_for(&self, needle: &str) -> String {
        let until = Instant::now() + HANG_GUARD;
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                Instant::now() < until,
                "{needle:?} never appeared in the pane:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Poll until the pane's command has ended: its exit status, or
    /// 128+N when a signal N ended it.
    fn wait_dead(&self) -> i32 {
        let until = Instant::now() + HANG_GUARD;
        loop {
            if let Some(code) =
                util::read(&self.status_file()).and_then(|s| s.trim().parse::<i32>().ok())
            {
                return code;
            }
            assert!(
                Instant::now() < until,
                "the pane's command never ended:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// What one session of the stand-in showed.
struct Session {
    screen: String,
    status: i32,
}

/// Drive the stand-in (bare, or under vetto when `vetto` is given) in a
/// fresh tmux server: the start-up work, a typed line, a resize, the
/// `~/.ssh` read, the injection, another typed line, Ctrl-C.
fn drive(w: &World, name: &str, base_url: &str, argv: &[&str]) -> Session {
    std::fs::write(w.project.join("notes.txt"), "notes\n").unwrap();
    let path = format!("{}:{}", w.home.join(".local/bin").display(), util::PATH);
    let t = Tmux {
        w,
        socket: w.root.join(format!("tmux-{name}")),
        env: vec![
            ("PATH".into(), path),
            ("ANTHROPIC_BASE_URL".into(), base_url.into()),
            ("TERM".into(), "xterm".into()),
        ],
    };
    t.start(argv);
    t.wait_for("tests: tests-pass");
    t.wait_for("size=30x100");
    t.keys(&["echo hello", "Enter"]);
    t.wait_for("got hello");
    t.tmux(&["resize-window", "-t", "a", "-x", "120", "-y", "40"])
        .assert_success();
    t.wait_for("winch size=40x120");
    t.keys(&["ssh", "Enter"]);
    t.wait_for("ssh: ");
    t.keys(&["inject", "Enter"]);
    t.wait_for("tiocsti: ");
    // Typed after the injection: what was injected comes before it.
    t.keys(&["echo after", "Enter"]);
    t.wait_for("got after");
    t.keys(&["C-c"]);
    let status = t.wait_dead();
    Session {
        screen: t.screen(),
        status,
    }
}

/// Runs as an unprivileged user, in tmux: the stand-in agent under
/// `--preset claude-code` does its work (config, API host through the
/// proxy, an edit, a test run), takes keystrokes and a resize, stops on
/// Ctrl-C with vetto ending the same way; its `~/.ssh` read and its
/// `TIOCSTI` injection, which work bare, are refused.
fn a_stand_in_agent_works_in_a_terminal_and_cannot_read_ssh_or_inject_input(tier: Tier) {
    require!(tier.feature());
    if let Some(reason) = skip::tool_missing("tmux") {
        assert!(
            !util::required_by_name("tmux"),
            "{}: VETTO_TEST_REQUIRE lists tmux, but {reason}",
            util::test_name()
        );
        skip::say(&util::test_name(), &reason);
        return;
    }
    let w = World::at(tier);
    let api = Api::start();
    let agent = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/controls/agent/stand_in_agent.py"),
    )
    .unwrap();
    w.write(&w.home.join(".local/bin/claude"), &agent);
    std::fs::set_permissions(
        w.home.join(".local/bin/claude"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    w.write(
        &w.home.join(".claude/settings.json"),
        "{\"model\": \"stand-in-1\"}\n",
    );
    w.write(
        &w.home.join(".ssh/id_ed25519"),
        &format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_CANARY}\n-----END OPENSSH PRIVATE KEY-----\n"
        ),
    );
    w.write(&w.project.join("notes.txt"), "notes\n");

    // Bare: everything works, the attacks included.
    let bare = drive(
        &w,
        "bare",
        &format!("http://127.0.0.1:{}", api.port),
        &["claude"],
    );
    for seen in [
        "config: model=stand-in-1",
        API_REPLY,
        "edited notes.txt",
        "ssh: read",
        KEY_CANARY,
    ] {
        assert!(
            bare.screen.contains(seen),
            "bare, {seen:?} missing:\n{}",
            bare.screen
        );
    }
    assert_eq!(bare.status, 128 + libc::SIGINT, "bare:\n{}", bare.screen);
    let tiocsti_works = bare.screen.contains("tiocsti: ok") && bare.screen.contains(INJECTED);
    if !tiocsti_works {
        assert!(
            !util::required_by_name("tiocsti"),
            "{}: VETTO_TEST_REQUIRE lists tiocsti, but the host refuses it bare:\n{}",
            util::test_name(),
            bare.screen
        );
        skip::say(
            &util::test_name(),
            "the host refuses TIOCSTI to unsandboxed processes (dev.tty.legacy_tiocsti = 0): the injection part proves nothing here",
        );
    }
    let hits = api.hits.load(Ordering::SeqCst);

    // Sandboxed: the same session.
    let project = w.project.to_str().unwrap();
    let vetto = util::vetto_bin().to_str().unwrap();
    let boxed = drive(
        &w,
        "boxed",
        &format!("http://api.test:{}", api.port),
        &[
            vetto,
            "run",
            "--tier",
            tier.name(),
            "--project",
            project,
            "--preset",
            "claude-code",
            "--resolve",
            "api.test:127.0.0.1",
            "--",
            "claude",
        ],
    );
    let s = &boxed.screen;
    for seen in [
        "config: model=stand-in-1",
        API_REPLY,
        "edited notes.txt",
        "tests: tests-pass",
        "got hello",
        "winch size=40x120",
        "got after",
    ] {
        assert!(s.contains(seen), "sandboxed, {seen:?} missing:\n{s}");
    }
    assert_eq!(api.hits.load(Ordering::SeqCst), hits + 1, "{s}");
    assert_eq!(
        util::read(&w.project.join("notes.txt")).as_deref(),
        Some("notes\nagent-edit\n")
    );
    assert!(!s.contains(KEY_CANARY), "the key leaked:\n{s}");
    assert!(!s.contains("ssh: read -"), "the key file was read:\n{s}");
    if tiocsti_works {
        assert!(s.contains("tiocsti: refused"), "{s}");
        assert!(
            !s.contains(INJECTED),
            "the injection reached the terminal:\n{s}"
        );
    }
    assert_eq!(
        boxed.status,
        128 + libc::SIGINT,
        "Ctrl-C: vetto ends as the agent did\n{s}"
    );
}
at_every_tier!(a_stand_in_agent_works_in_a_terminal_and_cannot_read_ssh_or_inject_input);
