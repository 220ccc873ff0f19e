//! The throwaway world the probes attack: a fake home with canary secrets,
//! a git project, a copy of vetto, and outside-world stand-ins that vetto
//! runs itself (listeners, host processes, CI control files). Nothing of
//! the user's own is read or touched; everything lives in one temporary
//! directory removed when the world is dropped.

use crate::sys::os::{UnixListener, symlink};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::catalogue::{Canary, Listener, Target};
use crate::sandbox::{safe_fs, verify_host};

/// Setting up the world failed (the probes never ran).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    #[error("cannot create {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the {what} stand-in")]
    StandIn {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("cannot find vetto's own executable")]
    OwnExe(#[source] io::Error),
    #[error("cannot create the verify world")]
    Root(#[source] crate::sys::safe_fs::SafeFsError),
}

fn create(path: &Path) -> impl FnOnce(io::Error) -> WorldError + '_ {
    move |source| WorldError::Create {
        path: path.to_path_buf(),
        source,
    }
}

/// The commit subject of the project (the git control looks for it).
pub const COMMIT_SUBJECT: &str = "vetto verify world";

/// Setuid-root programs a probe can start and observe (first one present).
const SETUID_CANDIDATES: &[&str] = &[
    "/usr/bin/passwd",
    "/usr/bin/chsh",
    "/usr/bin/chfn",
    "/usr/bin/gpasswd",
    "/usr/bin/su",
    "/bin/su",
    "/usr/bin/newgrp",
];

/// Counters of the host listeners, bumped by one serving thread.
#[derive(Debug, Default)]
struct Counters {
    tcp: AtomicUsize,
    udp: AtomicUsize,
    agent: AtomicUsize,
    abstract_: AtomicUsize,
    /// Completed polling rounds, so a check can wait for a fresh round.
    rounds: AtomicU64,
}

pub struct World {
    pub root: PathBuf,
    pub home: PathBuf,
    pub outside: PathBuf,
    /// `TMPDIR` for vetto (it makes the session directory inside).
    pub tmp: PathBuf,
    /// vetto's copy; hard-linked into each project as `tools/vetto`.
    bin: PathBuf,
    template: PathBuf,
    projects: PathBuf,
    github_env: PathBuf,
    github_path: PathBuf,
    pub agent: PathBuf,
    /// Random per run; every canary and marker derives from it.
    pub nonce: String,
    /// `sleep` argument of the quiet host process (its cmdline marker).
    host_marker: String,
    victim_marker: String,
    /// `sleep` argument of the daemon the job tries to leave behind.
    pub daemon_marker: String,
    pub git: bool,
    pub setuid: Option<PathBuf>,
    /// Listeners and host processes, once [`World::start`] ran.
    stand_ins: Option<StandIns>,
}

/// The outside world's running parts: started only once the tier is known
/// (a refusal starts nothing), stopped when dropped.
struct StandIns {
    abstract_name: String,
    tcp_port: u16,
    udp_port: u16,
    host: Mutex<Child>,
    victim: Mutex<Child>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

impl Drop for StandIns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
        for c in [&self.host, &self.victim] {
            if let Ok(mut c) = c.lock() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl World {
    /// Lay out the world's files under `base` (the caller's temporary
    /// directory); nothing runs yet.
    pub fn new(base: &Path) -> Result<World, WorldError> {
        // Names others could plant beforehand (the world, its /dev/shm
        // file) come from the kernel's randomness, and the world is new.
        let nonce = safe_fs::random_hex(8).map_err(WorldError::Root)?;
        let root = base.join(format!(
            "vetto-verify-{}-{}",
            std::process::id(),
            &nonce[..8]
        ));
        safe_fs::create_private_dir(&root, safe_fs::Parents::Followed).map_err(WorldError::Root)?;
        let digits = random() % 100_000;
        // From here on, dropping `w` removes everything made so far.
        let mut w = World {
            home: root.join("home"),
            outside: root.join("outside"),
            tmp: root.join("tmp"),
            bin: root.join("bin/vetto"),
            template: root.join("template"),
            projects: root.join("projects"),
            github_env: root.join("runner/github_env"),
            github_path: root.join("runner/github_path"),
            agent: root.join("agent/agent.sock"),
            host_marker: format!("86{digits:05}"),
            victim_marker: format!("85{digits:05}"),
            daemon_marker: format!("87{digits:05}"),
            nonce,
            git: false,
            setuid: find_setuid(),
            stand_ins: None,
            root,
        };
        w.populate()?;
        Ok(w)
    }

    fn populate(&mut self) -> Result<(), WorldError> {
        for d in [
            &self.home,
            &self.outside,
            &self.tmp,
            &self.projects,
            &self.root.join("runner"),
            &self.root.join("agent"),
            &self.root.join("bin"),
        ] {
            fs::create_dir_all(d).map_err(create(d))?;
        }
        let home = &self.home;
        write(
            &home.join(".ssh/id_rsa"),
            &format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                self.canary(Canary::SshKey)
            ),
        )?;
        write(
            &home.join(".aws/credentials"),
            &format!(
                "[default]\naws_access_key_id = AKIAVETTOVERIFY\naws_secret_access_key = {}\n",
                self.canary(Canary::AwsFile)
            ),
        )?;
        write(
            &home.join(".npmrc"),
            &format!(
                "//registry.npmjs.org/:_authToken={}\n",
                self.canary(Canary::NpmToken)
            ),
        )?;
        write(&home.join(".bashrc"), "# the user's .bashrc\n")?;
        write(&self.github_env, "")?;
        write(&self.github_path, "")?;

        // The vetto binary, so the probe can be executed inside every tier.
        let exe = std::env::current_exe().map_err(WorldError::OwnExe)?;
        fs::copy(&exe, &self.bin).map_err(create(&self.bin))?;
        crate::sys::os::set_mode(&self.bin, 0o755).map_err(create(&self.bin))?;

        self.git = make_project(&self.template, home, &self.canary(Canary::DotEnv))?;
        Ok(())
    }

    /// Start the stand-ins: listeners on 127.0.0.1 (TCP, UDP), an
    /// ssh-agent-like pathname socket, an abstract socket, and two host
    /// processes (one holding a secret in its environment, one to signal).
    pub fn start(&mut self) -> Result<(), WorldError> {
        let stand_in = |what| move |source| WorldError::StandIn { what, source };
        let host = spawn_sleep(&self.host_marker, Some(self.canary(Canary::HostEnv)))
            .map_err(stand_in("host process"))?;
        let victim = match spawn_sleep(&self.victim_marker, None) {
            Ok(v) => v,
            Err(e) => {
                kill_child(host);
                return Err(stand_in("host process")(e));
            }
        };
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut ins = StandIns {
            abstract_name: format!("vetto-verify-{}", self.nonce),
            tcp_port: 0,
            udp_port: 0,
            host: Mutex::new(host),
            victim: Mutex::new(victim),
            counters: counters.clone(),
            stop: stop.clone(),
            server: None,
        };
        // `ins` is dropped (children killed) on any error below.
        // Addresses, not text: text would link the resolver into vetto,
        // which a static build cannot carry.
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(stand_in("TCP listener"))?;
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(stand_in("UDP socket"))?;
        let agent = UnixListener::bind(&self.agent).map_err(stand_in("ssh-agent socket"))?;
        let abstract_l = verify_host::bind_abstract(ins.abstract_name.as_bytes())
            .map_err(stand_in("abstract socket"))?;
        ins.tcp_port = tcp.local_addr().map_err(stand_in("TCP listener"))?.port();
        ins.udp_port = udp.local_addr().map_err(stand_in("UDP socket"))?.port();
        tcp.set_nonblocking(true)
            .map_err(stand_in("TCP listener"))?;
        udp.set_nonblocking(true).map_err(stand_in("UDP socket"))?;
        agent
            .set_nonblocking(true)
            .map_err(stand_in("ssh-agent socket"))?;
        abstract_l
            .set_nonblocking(true)
            .map_err(stand_in("abstract socket"))?;
        ins.server = Some(
            std::thread::Builder::new()
                .name("verify-listeners".into())
                .spawn(move || serve(&tcp, &udp, &agent, &abstract_l, &counters, &stop))
                .map_err(stand_in("listener thread"))?,
        );
        self.stand_ins = Some(ins);
        Ok(())
    }

    pub fn canary(&self, c: Canary) -> String {
        canary_value(&self.nonce, c)
    }

    /// A fresh project for one probe (so an escaped write cannot spoil
    /// another probe's evidence): a copy of the template plus `tools/vetto`.
    pub fn project_for(&self, id: &str) -> Result<PathBuf, WorldError> {
        let p = self.projects.join(id);
        copy_tree(&self.template, &p).map_err(create(&p))?;
        let tools = p.join("tools");
        fs::create_dir_all(&tools).map_err(create(&tools))?;
        let dst = tools.join("vetto");
        if fs::hard_link(&self.bin, &dst).is_err() {
            fs::copy(&self.bin, &dst).map_err(create(&dst))?;
        }
        Ok(p)
    }

    /// The probe binary as seen from inside project `p`.
    pub fn probe_bin(p: &Path) -> PathBuf {
        p.join("tools/vetto")
    }

    /// vetto's copy outside any project (for unsandboxed reference runs).
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Fill in the placeholders of a script or argument.
    pub fn expand(&self, template: &str, project: &Path) -> String {
        let (env_addr, env_len) = verify_host::environ_range(self.host_pid()).unwrap_or((0, 0));
        let vars: [(&str, String); 20] = [
            ("{HOSTENVADDR}", env_addr.to_string()),
            ("{HOSTENVLEN}", env_len.to_string()),
            ("{HOME}", self.home.display().to_string()),
            ("{P}", project.display().to_string()),
            ("{OUTSIDE}", self.outside.display().to_string()),
            ("{PROBE}", Self::probe_bin(project).display().to_string()),
            ("{GITHUB_ENV}", self.github_env.display().to_string()),
            ("{GITHUB_PATH}", self.github_path.display().to_string()),
            ("{AGENT}", self.agent.display().to_string()),
            (
                "{ABSTRACT}",
                self.stand_ins
                    .as_ref()
                    .map_or_else(String::new, |s| s.abstract_name.clone()),
            ),
            (
                "{TCPPORT}",
                self.stand_ins
                    .as_ref()
                    .map_or(0, |s| s.tcp_port)
                    .to_string(),
            ),
            (
                "{UDPPORT}",
                self.stand_ins
                    .as_ref()
                    .map_or(0, |s| s.udp_port)
                    .to_string(),
            ),
            ("{HOSTPID}", self.host_pid().to_string()),
            ("{VICTIMPID}", self.victim_pid().to_string()),
            ("{DAEMON}", self.daemon_marker.clone()),
            ("{NONCE}", self.nonce.clone()),
            (
                "{SETUID}",
                self.setuid
                    .as_ref()
                    .map_or_else(|| "/nonexistent".into(), |p| p.display().to_string()),
            ),
            ("{HOOK}", r"printf '#!/bin/sh\necho pwned\n'".to_owned()),
            ("{SETUIDNAME}", self.setuid_name()),
            ("{SHMFILE}", self.shm_file().display().to_string()),
        ];
        vars.iter()
            .fold(template.to_owned(), |s, (k, v)| s.replace(k, v))
    }

    /// The file the `/dev/shm` probe tries to leave behind.
    pub fn shm_file(&self) -> PathBuf {
        PathBuf::from(format!("/dev/shm/vetto-verify-{}", self.nonce))
    }

    /// Shorten the world's paths in a message: the probe's project reads
    /// `P`, the fake home `~`, the rest of the world `$WORLD`.
    pub fn abbreviate(&self, text: &str, project: &Path) -> String {
        [
            (project.display().to_string(), "P"),
            (self.home.display().to_string(), "~"),
            (self.root.display().to_string(), "$WORLD"),
        ]
        .iter()
        .fold(text.to_owned(), |s, (long, short)| s.replace(long, short))
    }

    /// The environment `vetto run` gets: controlled, with the secrets an
    /// ordinary CI job or developer shell has.
    pub fn env(&self) -> BTreeMap<String, String> {
        let path = std::env::var("PATH")
            .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into());
        let user = std::env::var("USER").unwrap_or_else(|_| "vetto".into());
        [
            ("PATH", path),
            ("HOME", self.home.display().to_string()),
            ("TMPDIR", self.tmp.display().to_string()),
            ("USER", user.clone()),
            ("LOGNAME", user),
            ("LANG", "C".into()),
            ("LC_ALL", "C".into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
            ("GITHUB_TOKEN", self.canary(Canary::GithubToken)),
            ("AWS_SECRET_ACCESS_KEY", self.canary(Canary::AwsEnv)),
            ("GITHUB_ENV", self.github_env.display().to_string()),
            ("GITHUB_PATH", self.github_path.display().to_string()),
            ("SSH_AUTH_SOCK", self.agent.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The setuid program's name as `/proc/PID/status` shows it (at most
    /// 15 bytes, the kernel's `comm`).
    pub fn setuid_name(&self) -> String {
        self.setuid
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().chars().take(15).collect())
            .unwrap_or_default()
    }

    pub fn host_pid(&self) -> u32 {
        self.stand_ins
            .as_ref()
            .and_then(|s| s.host.lock().ok().map(|c| c.id()))
            .unwrap_or(0)
    }

    pub fn victim_pid(&self) -> u32 {
        self.stand_ins
            .as_ref()
            .and_then(|s| s.victim.lock().ok().map(|c| c.id()))
            .unwrap_or(0)
    }

    pub fn host_marker(&self) -> &str {
        &self.host_marker
    }

    /// The file behind a [`Target`] in project `p`.
    pub fn target_path(&self, t: Target, p: &Path) -> PathBuf {
        match t {
            Target::HomeBashrc => self.home.join(".bashrc"),
            Target::OutsidePlanted => self.outside.join("planted"),
            Target::PreCommitHook => p.join(".git/hooks/pre-commit"),
            Target::GitConfig => p.join(".git/config"),
            Target::GithubEnv => self.github_env.clone(),
            Target::GithubPath => self.github_path.clone(),
            Target::DevShmDrop => self.shm_file(),
        }
    }

    /// How many connections/datagrams a listener got, after the serving
    /// thread has completed a fresh round (so nothing queued is missed).
    pub fn received(&self, l: Listener) -> usize {
        let Some(ins) = &self.stand_ins else {
            return 0;
        };
        let counters = &ins.counters;
        let start = counters.rounds.load(Ordering::Acquire);
        let deadline = Instant::now() + Duration::from_millis(500);
        while counters.rounds.load(Ordering::Acquire) < start + 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let c = match l {
            Listener::Tcp => &counters.tcp,
            Listener::Udp => &counters.udp,
            Listener::SshAgent => &counters.agent,
            Listener::Abstract => &counters.abstract_,
        };
        c.load(Ordering::Acquire)
    }

    /// Is the signalled host process still running and not stopped?
    pub fn victim_state(&self) -> Result<(), String> {
        let Some(Ok(mut v)) = self.stand_ins.as_ref().map(|s| s.victim.lock()) else {
            return Err("lost track of the host process".into());
        };
        match v.try_wait() {
            Ok(Some(status)) => Err(format!("the host process ended: {status}")),
            Ok(None) => match proc_state(v.id()) {
                Some('T' | 't') => Err("the host process was stopped".into()),
                _ => Ok(()),
            },
            Err(e) => Err(format!("cannot wait for the host process: {e}")),
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stand_ins = None;
        let _ = fs::remove_file(self.shm_file());
        for pid in pids_with_cmdline(&["sleep", &self.daemon_marker]) {
            let _ = verify_host::kill_process(pid);
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn kill_child(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

pub fn canary_value(nonce: &str, c: Canary) -> String {
    let what = match c {
        Canary::SshKey => "ssh-key",
        Canary::AwsFile => "aws-file",
        Canary::NpmToken => "npm-token",
        Canary::DotEnv => "dotenv",
        Canary::GithubToken => "github-token",
        Canary::AwsEnv => "aws-env",
        Canary::HostEnv => "host-env",
    };
    format!("VETTO-CANARY-{what}-{nonce}")
}

fn random() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one((
        std::time::SystemTime::now(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    ))
}

fn write(path: &Path, body: &str) -> Result<(), WorldError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(create(parent))?;
    }
    let mut f = fs::File::create(path).map_err(create(path))?;
    f.write_all(body.as_bytes()).map_err(create(path))
}

/// The project template: sources, a `.env` secret, symlinks to a secret,
/// and a git repository with one commit (or, without git, the `.git`
/// layout the git probes attack). Returns whether git is installed.
fn make_project(p: &Path, home: &Path, dotenv: &str) -> Result<bool, WorldError> {
    fs::create_dir_all(p.join("src")).map_err(create(p))?;
    write(&p.join("README.md"), "# a project\n")?;
    write(
        &p.join("src/main.rs"),
        "fn main() { println!(\"hello\"); }\n",
    )?;
    write(&p.join(".env"), &format!("DATABASE_PASSWORD={dotenv}\n"))?;
    write(
        &p.join(".gitignore"),
        ".env\ntools/\nkey-link\nsrc/key-link\n",
    )?;
    let key = home.join(".ssh/id_rsa");
    for link in [p.join("key-link"), p.join("src/key-link")] {
        symlink(&key, &link).map_err(create(&link))?;
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(p)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let have_git = git(&["init", "-q"])
        && git(&["add", "-A"])
        && git(&[
            "-c",
            "user.name=vetto",
            "-c",
            "user.email=verify@vetto.invalid",
            "commit",
            "-q",
            "-m",
            COMMIT_SUBJECT,
        ]);
    if !have_git {
        let _ = fs::remove_dir_all(p.join(".git"));
        for d in ["hooks", "objects", "refs/heads"] {
            let d = p.join(".git").join(d);
            fs::create_dir_all(&d).map_err(create(&d))?;
        }
        write(&p.join(".git/HEAD"), "ref: refs/heads/main\n")?;
        write(
            &p.join(".git/config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
        )?;
    }
    Ok(have_git)
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let ty = entry.file_type()?;
        if ty.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ty.is_symlink() {
            symlink(&fs::read_link(&src)?, &dst)?;
        } else {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn spawn_sleep(arg: &str, secret: Option<String>) -> io::Result<Child> {
    let mut c = Command::new("sleep");
    c.arg(arg)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(s) = secret {
        c.env("DEPLOY_SECRET", s);
    }
    c.spawn()
}

fn find_setuid() -> Option<PathBuf> {
    if crate::sys::os::is_root() {
        return None;
    }
    SETUID_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| fs::metadata(p).is_ok_and(|m| crate::sys::os::is_setuid_root(&m)))
}

/// The one-letter state of a process (`R`, `S`, `T`, `Z`, …).
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: the state is
    // the first field after the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Live (non-zombie) processes whose command line is exactly `argv`.
pub fn pids_with_cmdline(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| a.bytes().chain(std::iter::once(0)))
        .collect();
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
                && !matches!(proc_state(*pid), Some('Z' | 'X') | None)
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

fn serve(
    tcp: &TcpListener,
    udp: &UdpSocket,
    agent: &UnixListener,
    abstract_: &UnixListener,
    c: &Counters,
    stop: &AtomicBool,
) {
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Acquire) {
        while tcp.accept().is_ok() {
            c.tcp.fetch_add(1, Ordering::AcqRel);
        }
        while udp.recv_from(&mut buf).is_ok() {
            c.udp.fetch_add(1, Ordering::AcqRel);
        }
        for (l, n) in [(agent, &c.agent), (abstract_, &c.abstract_)] {
            while let Ok((mut s, _)) = l.accept() {
                n.fetch_add(1, Ordering::AcqRel);
                // Answer like an agent would, so the client sees a peer.
                let _ = s.write_all(b"host-socket-reply\n");
            }
        }
        c.rounds.fetch_add(1, Ordering::AcqRel);
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::unwrap_used, reason = "test")]
    fn a_surviving_daemon_is_found_by_its_command_line_and_a_dead_one_is_not() {
        let marker = format!("88{:05}", random() % 100_000);
        let child = spawn_sleep(&marker, None).unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // Until the child has exec'ed, its command line is still ours.
        let deadline = Instant::now() + Duration::from_secs(2);
        while pids_with_cmdline(&["sleep", &marker]).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(pids_with_cmdline(&["sleep", &marker]), vec![pid]);
        kill_child(child);
        assert!(pids_with_cmdline(&["sleep", &marker]).is_empty());
    }

    #[test]
    #[expect(clippy::unwrap_used, reason = "test")]
    fn proc_state_reads_a_sleeping_process_and_nothing_for_a_missing_one() {
        let child = spawn_sleep("5", None).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while proc_state(child.id()) != Some('S') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(proc_state(child.id()), Some('S'));
        kill_child(child);
        assert_eq!(proc_state(u32::MAX), None);
    }
}
