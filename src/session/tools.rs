//! Before the plan: the registries a preset's `[network] discover` names,
//! learned from the tools' own configuration on the host, and the
//! vetto-owned caches of `[filesystem] caches` (see docs/caches.md).
//! What discovery read from a file the job cannot read (a masked
//! `~/.npmrc`, Go's env file) is also set in the job's environment, in
//! the tool's own variables, unless the user set them (`already_set`).
//!
//! Asking a host tool is itself a surface, so each question runs with no
//! shell, a scrubbed environment (`PATH`'s absolute entries, `HOME`, the
//! locale, and the tool's own configuration variables), the home
//! directory as its working directory (never the project: the project's
//! `.npmrc` is the job's to write), stdin closed, stderr dropped, at most
//! [`OUTPUT_CAP`] bytes of output read, and a [`RUN_TIMEOUT`] after which
//! its process group is killed. What it says is parsed strictly
//! (`policy::tools::url_host`). Nothing the job may write is run or read
//! ([`JobWritable`]): a `PATH` entry, a program, its interpreter, a
//! `pyvenv.cfg` or a configuration path there is passed over, with a note.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::policy::tools::{self, Found, HostView};
use crate::policy::walk_cache::SETTLE_SECS;
use crate::policy::{Access, FsRule, HostPattern, NetPolicy, Origin, Policy};
use crate::sys::safe_fs;

/// How long one discovery command may take (a cold `npm` or `python3`
/// on a loaded machine takes well under a second).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a discovery command's output is read.
pub const OUTPUT_CAP: u64 = 64 * 1024;
/// How much of a configuration file is read.
const FILE_CAP: u64 = 1024 * 1024;

/// The source name discovered hosts carry in their origin.
pub const DISCOVERED: &str = "discovered";

/// What the loaded policy lets the job write (its write rules and its
/// vetto-owned caches, the session's temporary directory): discovery runs
/// outside the sandbox, so it never runs a program, nor takes a
/// configuration file, from there (docs/presets.md, "Asking the host is a
/// surface").
#[derive(Default)]
pub struct JobWritable {
    rules: Vec<FsRule>,
}

impl JobWritable {
    /// What `policy` lets the job write, before the session starts.
    pub fn of(policy: &Policy, env: &[(String, String)], home: &Path) -> Self {
        let write = |path: PathBuf, written: &str| FsRule {
            path,
            access: Access::Write,
            origin: Origin {
                source: DISCOVERED.into(),
                line: 0,
                col: 0,
                written: written.into(),
            },
        };
        let mut rules = policy.fs.clone();
        if !policy.caches.is_empty() {
            rules.push(write(cache_root(env, home), "vetto-owned caches"));
        }
        if policy.session_tmp.is_absolute() {
            rules.push(write(policy.session_tmp.clone(), "the session's TMPDIR"));
        }
        JobWritable { rules }
    }

    /// The writable rule's path that covers `path` as named or as it
    /// resolves (links followed as far as the path exists), if any.
    fn covering(&self, path: &Path) -> Option<PathBuf> {
        if !path.is_absolute() {
            return None;
        }
        let named = crate::policy::paths::normalise_abs(path);
        [Some(named), resolved(path)]
            .into_iter()
            .flatten()
            .find_map(|p| {
                crate::policy::paths::decide_rule(&self.rules, &p)
                    .filter(|r| r.access == Access::Write)
                    .map(|r| r.path.clone())
            })
    }

    /// [`Self::covering`] `dir`, or the path of a writable rule beneath it.
    fn reaching(&self, dir: &Path) -> Option<PathBuf> {
        self.covering(dir).or_else(|| {
            let dirs = [
                Some(crate::policy::paths::normalise_abs(dir)),
                resolved(dir),
            ];
            self.rules
                .iter()
                .filter(|r| r.access == Access::Write)
                .find(|r| {
                    dirs.iter()
                        .flatten()
                        .any(|d| crate::policy::paths::beneath(&r.path, d))
                })
                .map(|r| r.path.clone())
        })
    }
}

/// `path` with links resolved: its longest existing ancestor made
/// canonical, the rest appended (a file the job could still create
/// resolves as the directory it would be created in).
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(c) = std::fs::canonicalize(at) {
            let mut out = c;
            out.extend(rest.iter().rev());
            return Some(out);
        }
        rest.push(at.file_name()?);
        at = at.parent()?;
    }
}

/// The variables that name a configuration file or directory a tool
/// reads: a value beneath what the job may write is not passed on.
const CONFIG_PATH_VARS: &[&str] = &[
    "VIRTUAL_ENV",
    "PIP_CONFIG_FILE",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "GOENV",
    "POETRY_CONFIG_DIR",
    "NPM_CONFIG_USERCONFIG",
    "npm_config_userconfig",
    "NPM_CONFIG_GLOBALCONFIG",
    "npm_config_globalconfig",
    "UV_CONFIG_FILE",
    "CARGO_HOME",
];

/// How deep a chain of `#!` interpreters is followed (Linux runs four).
const SHEBANG_DEPTH: usize = 4;

/// The host as discovery sees it: the caller's environment and home,
/// where answers are remembered between sessions (see [`Memo`]), and
/// what the job may write, which discovery never trusts (`ignored` says
/// what it passed over, and why).
struct RealHost<'a> {
    env: &'a [(String, String)],
    home: &'a Path,
    memo: Option<&'a safe_fs::Dir>,
    learnt: Vec<(String, Vec<u8>)>,
    writable: &'a JobWritable,
    ignored: std::cell::RefCell<Vec<String>>,
}

impl RealHost<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Say (once) that `what` was passed over because the job may write
    /// `root`.
    fn ignore(&self, what: String, root: &Path) {
        self.ignore_line(format!(
            "discovery ignored {what}: the job may write {} (nothing it could change runs or counts outside the sandbox)",
            root.display()
        ));
    }

    fn ignore_line(&self, line: String) {
        let mut ignored = self.ignored.borrow_mut();
        if !ignored.contains(&line) {
            ignored.push(line);
        }
    }

    /// `PATH`'s absolute entries (a relative entry would find the
    /// project's `node_modules/.bin`) that the job cannot write.
    fn search(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for d in self.get("PATH").unwrap_or_default().split(':') {
            if !d.starts_with('/') {
                continue;
            }
            match self.writable.covering(Path::new(d)) {
                Some(root) => self.ignore(format!("the PATH entry {d}"), &root),
                None => out.push(d),
            }
        }
        out
    }

    /// `program` on the [`Self::search`] path, passing over one the job
    /// could have written or that would run what the job wrote
    /// ([`Self::trusted`]); `None` when no other is there.
    fn which(&self, program: &str) -> Option<PathBuf> {
        self.search()
            .into_iter()
            .map(|d| Path::new(d).join(program))
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| crate::sys::os::is_executable(&m)))
            .find(|p| self.trusted(p, 0))
    }

    /// Whether running `path` runs nothing the job may write: the program
    /// (as named and resolved), the interpreters its `#!` line names, and
    /// a `pyvenv.cfg` beside it with its `home` (a Python's prefix).
    fn trusted(&self, path: &Path, depth: usize) -> bool {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        for p in [path, real.as_path()] {
            if let Some(root) = self.writable.covering(p) {
                self.ignore(format!("the program {}", p.display()), &root);
                return false;
            }
        }
        for dir in [path.parent(), path.parent().and_then(Path::parent)]
            .into_iter()
            .flatten()
        {
            let cfg = dir.join("pyvenv.cfg");
            let Some(text) = read_small(&cfg) else {
                continue;
            };
            if let Some(root) = self.writable.covering(&cfg) {
                self.ignore(format!("{} (for {})", cfg.display(), path.display()), &root);
                return false;
            }
            for line in text.lines() {
                if let Some((k, v)) = line.split_once('=')
                    && k.trim() == "home"
                    && let Some(root) = self.writable.covering(Path::new(v.trim()))
                {
                    self.ignore(
                        format!("{} (its `home` for {})", cfg.display(), path.display()),
                        &root,
                    );
                    return false;
                }
            }
        }
        if is_native_program(&real) {
            return true;
        }
        let Some(interpreter) = shebang_line(&real) else {
            return true;
        };
        let ok = depth < SHEBANG_DEPTH
            && match &interpreter {
                Interpreter::Path(i) => i.is_absolute() && self.trusted(i, depth + 1),
                // `env NAME`: NAME as the program's own `PATH` finds it,
                // the first there, whatever it is.
                Interpreter::Env(env, name) => {
                    self.trusted(env, depth + 1)
                        && self
                            .search()
                            .into_iter()
                            .map(|d| Path::new(d).join(name))
                            .find(|p| {
                                std::fs::metadata(p)
                                    .is_ok_and(|m| crate::sys::os::is_executable(&m))
                            })
                            .is_none_or(|i| self.trusted(&i, depth + 1))
                }
            };
        if !ok {
            self.ignore_line(format!(
                "discovery ignored the program {}: its `#!` interpreter is one it does not run",
                path.display()
            ));
        }
        ok
    }
}

/// What a `#!` line runs.
enum Interpreter {
    Path(PathBuf),
    /// `env` itself, and the name it looks up.
    Env(PathBuf, String),
}

/// The interpreter a script's `#!` line names (`/usr/bin/env NAME`:
/// NAME, to find on `PATH`); `None` for a file with no `#!` line.
fn shebang_line(script: &Path) -> Option<Interpreter> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = String::from_utf8_lossy(head.get(..n)?).into_owned();
    let line = line.strip_prefix("#!")?;
    let mut words = line.lines().next().unwrap_or("").split_whitespace();
    let first = PathBuf::from(words.next().unwrap_or(""));
    if first.file_name().is_some_and(|f| f == "env") {
        let mut name = words.next().unwrap_or("");
        if name == "-S" {
            name = words.next().unwrap_or("");
        }
        if !name.is_empty() && !name.starts_with('-') && !name.contains('=') {
            return Some(Interpreter::Env(first, name.to_string()));
        }
    }
    Some(Interpreter::Path(first))
}

impl HostView for RealHost<'_> {
    fn env(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_string)
    }

    fn env_names(&self) -> Vec<String> {
        self.env.iter().map(|(k, _)| k.clone()).collect()
    }

    fn run(&mut self, program: &str, args: &[&str], pass: &[&str]) -> Option<String> {
        let Some(path) = self.which(program) else {
            // Say so only where a copy was passed over.
            let passed_over = self
                .get("PATH")
                .unwrap_or_default()
                .split(':')
                .filter(|d| d.starts_with('/'))
                .any(|d| Path::new(d).join(program).is_file());
            if passed_over {
                self.ignore_line(format!(
                    "{program}: no copy on PATH that the job cannot write; it is not run"
                ));
            }
            return None;
        };
        let search = self.search();
        // The home directory is the working directory (never the
        // project) unless the job may write it: then `/`, where no
        // `.npmrc` or module of the job's is found first.
        let cwd = match self.writable.covering(self.home) {
            Some(root) => {
                self.ignore(
                    format!(
                        "the home directory {} as the working directory",
                        self.home.display()
                    ),
                    &root,
                );
                Path::new("/")
            }
            None if self.home.is_dir() => self.home,
            None => Path::new("/"),
        };
        let mut vars = vec![
            ("PATH", search.join(":")),
            ("HOME", self.home.to_string_lossy().into_owned()),
            ("LC_ALL", "C".to_string()),
        ];
        // Python's user site (`~/.local/lib/python3.N/site-packages`) runs
        // its `.pth` files at start.
        if let Some(root) = self.writable.reaching(&self.home.join(".local/lib")) {
            self.ignore(
                format!(
                    "Python's user site under {}",
                    self.home.join(".local/lib").display()
                ),
                &root,
            );
            vars.push(("PYTHONNOUSERSITE", "1".to_string()));
        }
        for name in ["USER", "LOGNAME"].iter().chain(pass) {
            if let Some(v) = self.get(name) {
                if CONFIG_PATH_VARS.contains(name)
                    && let Some(root) = self.config_in_reach(v)
                {
                    self.ignore(format!("${name} ({v})"), &root);
                    continue;
                }
                vars.push((name, v.to_string()));
            }
        }
        // Go may fetch and run another toolchain that its configuration
        // names: discovery asks the one found, never a download.
        if program == "go" {
            vars.push(("GOTOOLCHAIN", "local".to_string()));
        }
        // Every file the tool reads of itself to answer (its per-user
        // configuration under the home directory among them): one the job
        // may write would choose what the next session allows.
        let watched = self.watched(program, &path, args);
        if let Some(root) = watched
            .iter()
            .flatten()
            .find_map(|f| self.writable.covering(f).map(|r| (f, r)))
        {
            let (file, root) = root;
            self.ignore(
                format!("{program}'s configuration {}", file.display()),
                &root,
            );
            self.ignore_line(format!(
                "{program}: a file it reads to answer may be written by the job; it is not run"
            ));
            return None;
        }
        let memo = self.memo_key(&path, args, &vars, cwd, watched);
        if let (Some(dir), Some((name, identity, _))) = (self.memo, &memo) {
            if let Some(out) = Memo::recall(dir, name, identity) {
                return Some(out);
            }
        }
        // Read as it would be remembered, so that a remembered answer and
        // a fresh one mean the same.
        let out = tools::without_credentials(&self.spawn(&path, args, &vars, cwd)?);
        if let Some((name, identity, true)) = memo {
            self.learnt.push((name, Memo::encode(&identity, &out)));
        }
        Some(out)
    }

    fn read(&mut self, path: &Path) -> Option<String> {
        if let Some(root) = self.writable.covering(path) {
            self.ignore(format!("the configuration file {}", path.display()), &root);
            return None;
        }
        let file = std::fs::File::open(path).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        file.take(FILE_CAP).read_to_string(&mut text).ok()?;
        Some(text)
    }

    fn home(&self) -> PathBuf {
        self.home.to_path_buf()
    }
}

impl RealHost<'_> {
    /// The writable root a configuration variable's value lies beneath:
    /// any of its `:`-separated paths, a relative one taken from the home
    /// directory (where the question runs).
    fn config_in_reach(&self, value: &str) -> Option<PathBuf> {
        value
            .split(':')
            .filter(|p| !p.is_empty())
            .find_map(|p| self.writable.covering(&self.home.join(p)))
    }

    fn spawn(
        &self,
        path: &Path,
        args: &[&str],
        vars: &[(&str, String)],
        cwd: &Path,
    ) -> Option<String> {
        let mut cmd = Command::new(path);
        cmd.args(args)
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = crate::sys::os::spawn_own_group(&mut cmd).ok()?;
        let stdout = child.stdout.take()?;
        let reader = std::thread::Builder::new()
            .name("vetto-discover".into())
            .spawn(move || {
                let mut out = Vec::new();
                let mut limited = stdout.take(OUTPUT_CAP);
                let _ = limited.read_to_end(&mut out);
                out
            })
            .ok();
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => break None,
            }
        };
        if status.is_none() {
            crate::sys::os::kill_group(&mut child);
            let _ = child.wait();
        }
        // The group is gone on a timeout; otherwise a grandchild holding
        // the pipe could keep the reader: it reads at most OUTPUT_CAP.
        crate::sys::os::kill_group(&mut child);
        let out = reader.and_then(|r| r.join().ok())?;
        match status {
            Some(s) if s.success() => String::from_utf8(out).ok(),
            _ => None,
        }
    }

    /// The memo's file name for this question (the program, its
    /// arguments, its whole environment and working directory) and the
    /// identity of every file its answer depends on; `None` for a tool
    /// whose files [`Self::watched`] does not know. The answer may be
    /// remembered (the flag) only when every file's last change is more
    /// than [`SETTLE_SECS`] old: a change in the same clock tick as this
    /// look could leave the stamps as they were, a later one cannot.
    fn memo_key(
        &self,
        path: &Path,
        args: &[&str],
        vars: &[(&str, String)],
        cwd: &Path,
        watched: Option<Vec<PathBuf>>,
    ) -> Option<(String, String, bool)> {
        self.memo?;
        // What is watched is the home directory's, as the working directory.
        if cwd != self.home {
            return None;
        }
        let watched = watched?;
        let mut question = vec![path.as_os_str().as_encoded_bytes().to_vec()];
        question.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        question.extend(vars.iter().map(|(k, v)| format!("{k}={v}").into_bytes()));
        question.push(cwd.as_os_str().as_encoded_bytes().to_vec());
        let parts: Vec<&[u8]> = question
            .iter()
            .flat_map(|q| [q.as_slice(), b"\0"])
            .collect();
        let name = format!("{MEMO_PREFIX}{}", crate::hash::sha256_hex(&parts));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut identity = String::new();
        let mut settled = true;
        for p in &watched {
            let (link, target) = (std::fs::symlink_metadata(p).ok(), std::fs::metadata(p).ok());
            for m in [&link, &target].into_iter().flatten() {
                settled &= crate::sys::os::change_time(m)
                    .is_some_and(|(sec, _)| sec.saturating_add(SETTLE_SECS) < now);
            }
            identity.push_str(&format!(
                "{}\0{}\0{}\0",
                p.display(),
                file_identity(link),
                file_identity(target)
            ));
        }
        Some((
            name,
            crate::hash::sha256_hex(&[identity.as_bytes()]),
            settled,
        ))
    }

    /// Every file whose content can change what `program args…` answers,
    /// as far as vetto knows the tool (`None`: it does not, or cannot
    /// name them all here, and the tool is asked every time): always the
    /// program as `PATH` finds it and its real path (links resolved),
    /// then the tool's own configuration search as its documentation
    /// defines it (docs/presets.md, "Remembered answers").
    fn watched(&self, program: &str, path: &Path, args: &[&str]) -> Option<Vec<PathBuf>> {
        let real = std::fs::canonicalize(path).ok()?;
        let mut w = vec![path.to_path_buf(), real.clone()];
        match program {
            "npm" | "pnpm" | "yarn" => self.npm_watched(path, &mut w),
            // `python3 -m pip config list`, or pip's definition of PyPI
            // under `-I` (no working directory, no user site, no config).
            "python3" => {
                let module = match args.first() {
                    Some(&"-m") => true,
                    Some(&"-I") => false,
                    _ => return None,
                };
                let how = Python {
                    user_site: module,
                    pip_config: module,
                    cwd: module,
                };
                self.python_watched(path, &real, how, &mut w)?;
            }
            "poetry" => self.poetry_watched(&real, &mut w)?,
            "go" => self.go_watched(&real, &mut w)?,
            _ => return None,
        }
        Some(w)
    }

    /// npm-style configuration files — builtin (beside the real
    /// program), global (`<prefix>/etc/npmrc` for node's and the
    /// program's prefix, a `prefix` or `globalconfig` the user file
    /// names, `$NPM_CONFIG_GLOBALCONFIG`), user (`$NPM_CONFIG_USERCONFIG`,
    /// else `~/.npmrc`), project (`.npmrc` in the home directory, where
    /// the question runs, and each of its parents), pnpm's and yarn's own.
    fn npm_watched(&self, path: &Path, w: &mut Vec<PathBuf>) {
        let mut prefixes = Vec::new();
        for exe in [Some(path.to_path_buf()), self.which("node")]
            .into_iter()
            .flatten()
        {
            prefixes.extend(exe.parent().and_then(Path::parent).map(Path::to_path_buf));
            if let Ok(real) = std::fs::canonicalize(&exe) {
                if let Some(pkg) = real.parent().and_then(Path::parent) {
                    w.push(pkg.join("npmrc"));
                    prefixes.extend(pkg.parent().and_then(Path::parent).map(Path::to_path_buf));
                }
                prefixes.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
                w.push(exe);
                w.push(real);
            }
        }
        let var = |names: [&str; 2]| names.iter().find_map(|n| self.get(n)).map(PathBuf::from);
        let user = var(["NPM_CONFIG_USERCONFIG", "npm_config_userconfig"])
            .unwrap_or_else(|| self.home.join(".npmrc"));
        w.extend(var(["NPM_CONFIG_GLOBALCONFIG", "npm_config_globalconfig"]));
        for line in read_small(&user).unwrap_or_default().lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k.trim() {
                "prefix" => prefixes.push(PathBuf::from(v.trim())),
                "globalconfig" => w.push(PathBuf::from(v.trim())),
                _ => {}
            }
        }
        w.push(user);
        w.extend(prefixes.iter().map(|p| p.join("etc/npmrc")));
        w.extend(self.home.ancestors().map(|d| d.join(".npmrc")));
        w.extend(self.config_homes().iter().map(|c| c.join("pnpm/rc")));
        w.push(self.home.join(".yarnrc"));
        w.push(self.home.join(".yarnrc.yml"));
    }

    /// `$XDG_CONFIG_HOME` as a tool started in the home directory takes
    /// it, else `~/.config`. A relative value is relative to the home
    /// directory for pip (platformdirs) and an error for Go (which then
    /// reads no file): both are watched, and `~/.config`, which npm uses.
    fn config_homes(&self) -> Vec<PathBuf> {
        let dot = self.home.join(".config");
        match self.get("XDG_CONFIG_HOME").filter(|v| !v.trim().is_empty()) {
            Some(v) if v.starts_with('/') => vec![PathBuf::from(v)],
            Some(v) => vec![self.home.join(v), dot],
            None => vec![dot],
        }
    }

    /// A Python question's files: what picks the interpreter's prefixes
    /// (`pyvenv.cfg` beside the program or one level up, its `home`, the
    /// real program's `../..` where `lib/python3.N/os.py` is), the
    /// standard library's root and zip, each site directory (the
    /// directory itself, which changes when a package is installed or
    /// removed, its `.pth` files, `sitecustomize`/`usercustomize`, pip's
    /// version and the modules that define PyPI and the configuration
    /// search) and, as `how` says, the user site, pip's configuration
    /// files and the working directory (the home directory: `-m` puts it
    /// first on the import path, so a module there would shadow one of
    /// pip's). `None` for an interpreter that is not a native program
    /// named `python3.N` (a launcher such as pyenv's shim picks the
    /// interpreter from files of its own) or whose prefix has no
    /// standard library (Python would then search further).
    fn python_watched(
        &self,
        path: &Path,
        real: &Path,
        how: Python,
        w: &mut Vec<PathBuf>,
    ) -> Option<()> {
        let version = python_version(real)?;
        if !is_native_program(real) {
            return None;
        }
        let lib = format!("lib/python{version}");
        let base = real.parent()?.parent()?.to_path_buf();
        if !base.join(&lib).join("os.py").is_file() {
            return None;
        }
        let mut prefixes = vec![base];
        for dir in [path.parent(), path.parent().and_then(Path::parent)]
            .into_iter()
            .flatten()
        {
            let cfg = dir.join("pyvenv.cfg");
            if let Some(text) = read_small(&cfg) {
                prefixes.push(dir.to_path_buf());
                for line in text.lines() {
                    if let Some((k, v)) = line.split_once('=')
                        && k.trim() == "home"
                        && let Some(p) = Path::new(v.trim()).parent()
                    {
                        prefixes.push(p.to_path_buf());
                    }
                }
            }
            w.push(cfg);
        }
        let zip = format!("lib/python{}.zip", version.replace('.', ""));
        let mut sites = Vec::new();
        for p in &prefixes {
            w.extend([
                p.join(&zip),
                p.join(&lib),
                p.join(&lib).join("sitecustomize.py"),
            ]);
            for site in [
                format!("{lib}/site-packages"),
                format!("{lib}/dist-packages"),
                "lib/python3/dist-packages".to_string(),
                format!("local/{lib}/dist-packages"),
                format!("local/{lib}/site-packages"),
                format!("lib64/python{version}/site-packages"),
            ] {
                sites.push(p.join(site));
            }
        }
        if how.user_site {
            sites.push(self.home.join(".local").join(&lib).join("site-packages"));
            // macOS's user site.
            sites.push(
                self.home
                    .join(format!("Library/Python/{version}/lib/python/site-packages")),
            );
        }
        for site in &sites {
            watch_site(site, w)?;
        }
        if how.pip_config {
            self.pip_config_files(&prefixes, w);
        }
        if how.cwd {
            w.push(self.home.to_path_buf());
            for (name, is_dir) in entries(self.home)? {
                if is_dir {
                    w.push(self.home.join(&name).join("__init__.py"));
                } else if [".py", ".pyc", ".so"].iter().any(|e| name.ends_with(e)) {
                    w.push(self.home.join(&name));
                }
            }
        }
        Some(())
    }

    /// pip's configuration files as pip documents them: `$PIP_CONFIG_FILE`;
    /// site-wide each `$XDG_CONFIG_DIRS` entry's `pip/pip.conf` (default
    /// `/etc/xdg`) and `/etc/pip.conf`; the user's `~/.pip/pip.conf` and
    /// `$XDG_CONFIG_HOME/pip/pip.conf` (and macOS's `Library/Application
    /// Support/pip`, site-wide and the user's); `pip.conf` in the
    /// interpreter's prefix (`sys.prefix`: the virtual environment's) and
    /// `$VIRTUAL_ENV`.
    fn pip_config_files(&self, prefixes: &[PathBuf], w: &mut Vec<PathBuf>) {
        w.extend(self.get("PIP_CONFIG_FILE").map(|f| self.home.join(f)));
        match self.get("XDG_CONFIG_DIRS").filter(|v| !v.trim().is_empty()) {
            Some(dirs) => w.extend(
                dirs.split(':')
                    .filter(|d| !d.is_empty())
                    .map(|d| self.home.join(d).join("pip/pip.conf")),
            ),
            None => w.push(PathBuf::from("/etc/xdg/pip/pip.conf")),
        }
        w.push(PathBuf::from("/etc/pip.conf"));
        w.push(self.home.join(".pip/pip.conf"));
        w.extend(self.config_homes().iter().map(|c| c.join("pip/pip.conf")));
        // macOS's site-wide and user directories (watched everywhere:
        // a path that is not there costs one look).
        w.push(PathBuf::from("/Library/Application Support/pip/pip.conf"));
        w.push(self.home.join("Library/Application Support/pip/pip.conf"));
        w.extend(prefixes.iter().map(|p| p.join("pip.conf")));
        w.extend(
            self.get("VIRTUAL_ENV")
                .map(|v| self.home.join(v).join("pip.conf")),
        );
    }

    /// Poetry's: the interpreter its script names (and that Python's
    /// prefix, site directories — where its plugins are — and user site),
    /// its configuration directory (`$POETRY_CONFIG_DIR`, else
    /// `$XDG_CONFIG_HOME/pypoetry`, or `~/Library/Application
    /// Support/pypoetry` on macOS) with `config.toml` and `auth.toml`
    /// (merged into the configuration), and the `pyproject.toml` and
    /// `poetry.toml` (the local configuration) of the home directory,
    /// where the question runs, and each of its parents. `None` for a
    /// script whose interpreter vetto cannot follow.
    fn poetry_watched(&self, real: &Path, w: &mut Vec<PathBuf>) -> Option<()> {
        if !is_native_program(real) {
            let interpreter = self.shebang(real)?;
            let ireal = std::fs::canonicalize(&interpreter).ok()?;
            w.extend([interpreter.clone(), ireal.clone()]);
            let how = Python {
                user_site: true,
                pip_config: false,
                cwd: false,
            };
            self.python_watched(&interpreter, &ireal, how, w)?;
        }
        let dirs = match self.get("POETRY_CONFIG_DIR").filter(|v| !v.is_empty()) {
            Some(d) => vec![self.home.join(d)],
            None => {
                let mut d: Vec<PathBuf> = self
                    .config_homes()
                    .iter()
                    .map(|c| c.join("pypoetry"))
                    .collect();
                d.push(self.home.join("Library/Application Support/pypoetry"));
                d
            }
        };
        for d in &dirs {
            w.extend([d.join("config.toml"), d.join("auth.toml")]);
        }
        for d in self.home.ancestors() {
            w.extend([d.join("pyproject.toml"), d.join("poetry.toml")]);
        }
        Some(())
    }

    /// The interpreter a script's `#!` line names (`/usr/bin/env NAME`:
    /// NAME on `PATH`), read by the one parser [`Self::trusted`] judged
    /// the script with.
    fn shebang(&self, script: &Path) -> Option<PathBuf> {
        match shebang_line(script)? {
            Interpreter::Path(p) => p.is_absolute().then_some(p),
            Interpreter::Env(_, name) => self.which(&name),
        }
    }

    /// Go's: the landmark that makes the real program's `../..` its
    /// GOROOT (`pkg/tool`; without it Go uses the GOROOT built into it,
    /// which only `go` can tell, and the answer is not remembered),
    /// `$GOROOT/go.env`, the user's env file (`$GOENV`, else
    /// `$XDG_CONFIG_HOME/go/env`, else `~/.config/go/env`; macOS's
    /// `~/Library/Application Support/go/env`), and `go.mod`
    /// and `go.work` in the home directory and each of its parents
    /// (which can make Go 1.21+ switch toolchains). Not remembered when
    /// an env file names a toolchain to switch to, or one of those
    /// modules exists while `GOTOOLCHAIN` allows switching: that
    /// toolchain answers from files of its own.
    fn go_watched(&self, real: &Path, w: &mut Vec<PathBuf>) -> Option<()> {
        let root = real.parent()?.parent()?;
        let tool = root.join("pkg/tool");
        if !tool.is_dir() {
            return None;
        }
        let mut files = vec![root.join("go.env")];
        match self.get("GOENV") {
            Some("off") => {}
            Some(f) if !f.is_empty() => files.push(self.home.join(f)),
            _ => {
                files.extend(self.config_homes().iter().map(|c| c.join("go/env")));
                // Go's user configuration directory on macOS.
                files.push(self.home.join("Library/Application Support/go/env"));
            }
        }
        // The user's file wins over GOROOT's; Go before 1.21 has neither.
        let mut toolchain = "local".to_string();
        for f in &files {
            for line in read_small(f).unwrap_or_default().lines() {
                if let Some(v) = line.trim().strip_prefix("GOTOOLCHAIN=") {
                    toolchain = v.trim().to_string();
                }
            }
        }
        let modules: Vec<PathBuf> = self
            .home
            .ancestors()
            .flat_map(|d| [d.join("go.mod"), d.join("go.work")])
            .collect();
        let base = toolchain.split('+').next().unwrap_or("");
        match base {
            "local" if !toolchain.contains('+') => {}
            "local" | "auto" | "path" => {
                if modules.iter().any(|m| m.symlink_metadata().is_ok()) {
                    return None;
                }
            }
            _ => return None,
        }
        w.push(tool);
        w.extend(files);
        w.extend(modules);
        Some(())
    }
}

/// What of Python's search a question depends on.
#[derive(Clone, Copy)]
struct Python {
    /// `~/.local/lib/python3.N/site-packages` is on the import path.
    user_site: bool,
    /// pip reads its configuration files.
    pip_config: bool,
    /// The working directory is first on the import path (`-m`).
    cwd: bool,
}

/// A site directory's files that shape an import (see
/// `RealHost::python_watched`); `None` when it is too large to list.
fn watch_site(site: &Path, w: &mut Vec<PathBuf>) -> Option<()> {
    w.push(site.to_path_buf());
    if !site.is_dir() {
        return Some(());
    }
    for (name, _) in entries(site)? {
        if name.ends_with(".pth") {
            w.push(site.join(name));
        }
    }
    for f in [
        "sitecustomize.py",
        "usercustomize.py",
        "pip",
        "pip/__init__.py",
        "pip/_internal/models/index.py",
        "pip/_internal/configuration.py",
        "pip/_internal/utils/appdirs.py",
    ] {
        w.push(site.join(f));
    }
    Some(())
}

/// At most this many entries of a directory are listed for the memo.
const ENTRIES_CAP: usize = 20_000;

/// A directory's entries (name, is a directory, links not followed); an
/// unreadable directory has none, one with more than [`ENTRIES_CAP`] is
/// `None`.
fn entries(dir: &Path) -> Option<Vec<(String, bool)>> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return Some(Vec::new());
    };
    let mut out = Vec::new();
    for e in list.flatten() {
        if out.len() == ENTRIES_CAP {
            return None;
        }
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        out.push((e.file_name().to_string_lossy().into_owned(), is_dir));
    }
    Some(out)
}

/// `3.11` for a program named `python3.11`.
fn python_version(real: &Path) -> Option<String> {
    let name = real.file_name()?.to_str()?.strip_prefix("python3.")?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())).then(|| format!("3.{name}"))
}

/// A native executable (ELF, Mach-O), not a script or launcher.
fn is_native_program(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && matches!(
            magic,
            [0x7f, b'E', b'L', b'F']
                | [0xfe, 0xed, 0xfa, 0xce | 0xcf]
                | [0xce | 0xcf, 0xfa, 0xed, 0xfe]
                | [0xca, 0xfe, 0xba, 0xbe]
        )
}

/// A small file's text (at most [`FILE_CAP`] bytes), if it is there.
fn read_small(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(FILE_CAP)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// How a file is now: its identity and change times, its size and mode;
/// `-` when it does not exist.
fn file_identity(m: Option<std::fs::Metadata>) -> String {
    let Some(m) = m else { return "-".into() };
    let os = crate::sys::os::file_id(&m);
    format!(
        "{os:?} {:?} {:?} {} {}",
        crate::sys::os::modify_time(&m),
        crate::sys::os::change_time(&m),
        m.len(),
        crate::sys::os::mode(&m)
    )
}

/// The names of remembered discovery answers in vetto's own directory.
const MEMO_PREFIX: &str = "discover-";
const MEMO_MAGIC: &str = "vetto-discover2\n";

/// Discovery answers remembered between sessions, so that an unchanged
/// configuration costs no process (`npm config get registry` takes a
/// fifth of a second). One file per question in vetto's directory of
/// remembered walks (`session::walk`), which is masked from every job
/// and forgotten whole after a session whose job could have written it:
/// it holds the identity (device, inode, change times, size, mode) of
/// every file the answer depends on, and the answer without its
/// credentials ([`tools::without_credentials`]). A file that changed
/// since, appeared or went away asks the tool again.
pub struct Memo;

impl Memo {
    fn encode(identity: &str, out: &str) -> Vec<u8> {
        format!("{MEMO_MAGIC}{identity}\n{out}").into_bytes()
    }

    fn recall(dir: &safe_fs::Dir, name: &str, identity: &str) -> Option<String> {
        let file = safe_fs::open_regular(&dir.join(name)).ok()?;
        let mut bytes = Vec::new();
        file.take(OUTPUT_CAP + 256).read_to_end(&mut bytes).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let rest = text.strip_prefix(MEMO_MAGIC)?;
        let (id, out) = rest.split_once('\n')?;
        (id == identity).then(|| out.to_string())
    }
}

/// Answers learnt by one discovery, to remember once the session knows
/// its job cannot reach vetto's directory.
#[derive(Default)]
pub struct Learnt(Vec<(String, Vec<u8>)>);

impl Learnt {
    /// Write them (a failure only costs the next session a process).
    pub fn keep(&self, dir: &safe_fs::Dir) {
        for (name, bytes) in &self.0 {
            let _ = dir.write_file(name, bytes, 0o600);
        }
    }
}

/// Ask the host for every registry the policy names, and add what was
/// found to the allowed hosts (only when the network is `allow`: `off`
/// and `host` need no list). Returns the lines to show the user.
pub fn discover(policy: &mut Policy, env: &[(String, String)], home: &Path) -> Vec<String> {
    discover_remembering(policy, env, home, None).0
}

/// [`discover`], answering from (and learning for) the [`Memo`] in `memo`.
pub fn discover_remembering(
    policy: &mut Policy,
    env: &[(String, String)],
    home: &Path,
    memo: Option<&safe_fs::Dir>,
) -> (Vec<String>, Learnt) {
    if !matches!(policy.net, NetPolicy::Allow { .. }) || policy.discover.is_empty() {
        return (Vec::new(), Learnt::default());
    }
    let writable = JobWritable::of(policy, env, home);
    let NetPolicy::Allow { hosts, .. } = &mut policy.net else {
        return (Vec::new(), Learnt::default());
    };
    let mut host = RealHost {
        env,
        home,
        memo,
        learnt: Vec::new(),
        writable: &writable,
        ignored: Default::default(),
    };
    let mut found: Vec<Found> = Vec::new();
    let mut notes = Vec::new();
    let mut told: Vec<String> = Vec::new();
    for rule in &policy.discover {
        let d = tools::discover(rule.registry, &mut host);
        for line in host.ignored.take() {
            if !notes.contains(&line) {
                notes.push(line);
            }
        }
        notes.extend(d.notes);
        for (k, v) in d.env {
            if !already_set(&k, &policy.env.set, env) {
                policy.env.set.push((k.clone(), v));
                told.push(k);
            }
        }
        for f in d.found {
            hosts.push(HostPattern {
                host: f.host.clone(),
                port: Some(f.port),
                origin: Origin {
                    source: DISCOVERED.into(),
                    line: 0,
                    col: 0,
                    written: format!("{} ({}; `{}`)", f.registry, f.how, rule.origin.written),
                },
            });
            found.push(f);
        }
    }
    let mut lines = Vec::new();
    if !found.is_empty() {
        let shown: Vec<String> = found
            .iter()
            .map(|f| format!("{} {}:{} ({})", f.registry, f.host, f.port, f.how))
            .collect();
        let told = if told.is_empty() {
            String::new()
        } else {
            format!(" (set {} for the job)", told.join(" "))
        };
        lines.push(format!(
            "discovered registries: {}{told}",
            crate::text::escape(&shown.join(", "))
        ));
    }
    lines.extend(
        notes
            .iter()
            .map(|n| format!("note: {}", crate::text::escape(n))),
    );
    (lines, Learnt(host.learnt))
}

/// Whether the job's tool already gets `name` another way, so discovery
/// does not tell it: a policy's `[env] set` (the user's explicit choice,
/// or an earlier discovery's), or the caller's environment, which the
/// host's tool saw too (its value is what discovery found, or one that
/// overrides the file discovery read) and which `[env]` passes or
/// withholds as usual. npm reads `npm_config_*` and yarn `yarn_*` in any
/// case.
fn already_set(name: &str, set: &[(String, String)], env: &[(String, String)]) -> bool {
    let lower = name.to_ascii_lowercase();
    let any_case = lower.starts_with("npm_config_") || lower.starts_with("yarn_");
    let same = |other: &str| other == name || (any_case && other.eq_ignore_ascii_case(name));
    set.iter().chain(env).any(|(n, _)| same(n))
}

/// `$XDG_CACHE_HOME/vetto/caches` (when absolute), else
/// `~/.cache/vetto/caches`: the root of the vetto-owned caches.
pub fn cache_root(env: &[(String, String)], home: &Path) -> PathBuf {
    env.iter()
        .find(|(k, v)| k == "XDG_CACHE_HOME" && v.starts_with('/'))
        .map_or_else(|| home.join(".cache"), |(_, v)| PathBuf::from(v))
        .join("vetto/caches")
}

/// The vetto-owned cache of `cache` for `project`:
/// `<root>/<project key>/<tool>`. One per project: what a job plants in
/// its cache (a `build.rs` in an extracted crate, a built wheel) is
/// compiled or installed by that project's later sandboxed builds only,
/// never by another project's, whose sandbox may write that project's
/// sources and outputs.
pub fn cache_dir(root: &Path, project: &Path, cache: tools::Cache) -> PathBuf {
    root.join(project_key(project)).join(cache.to_string())
}

/// A project's directory name among the caches: its last component
/// (letters, digits, `-`, `_`, `.` kept, anything else `_`, at most 40
/// characters, never starting with `.`) and 16 hex digits of the SHA-256
/// of its whole path, so that two projects of the same name differ.
pub fn project_key(project: &Path) -> String {
    let name: String = project
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let name = name.trim_start_matches('.');
    let name = if name.is_empty() { "project" } else { name };
    let digest = crate::hash::sha256_hex(&[crate::sys::os::os_bytes(project.as_os_str())]);
    format!("{name}-{}", digest.get(..16).unwrap_or(&digest))
}

/// Why a cache could not be prepared (the session is refused: the tool
/// would otherwise fall back on the host's cache).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    #[error("cannot prepare the vetto cache {path}: {source}")]
    Dir {
        path: PathBuf,
        source: safe_fs::SafeFsError,
    },
    #[error("cannot use the vetto cache for {cache}: {why}")]
    Env { cache: tools::Cache, why: String },
}

/// Point each named tool at its vetto-owned cache: a writable rule for
/// the directory and the tool's cache variables. With `create`, the
/// directories are made (with [`safe_fs`], owned by the user, never
/// following a link) and the user's tool configuration is copied in;
/// `policy explain` passes `false` and touches nothing.
pub fn caches(
    policy: &mut Policy,
    env: &[(String, String)],
    home: &Path,
    create: bool,
) -> Result<Vec<String>, CacheError> {
    if policy.caches.is_empty() {
        return Ok(Vec::new());
    }
    let root = cache_root(env, home);
    let nothing = JobWritable::default();
    let view = RealHost {
        env,
        home,
        memo: None,
        learnt: Vec::new(),
        writable: &nothing,
        ignored: Default::default(),
    };
    let mut shown = Vec::new();
    // A directory below `parent`, made here or, when it exists, opened as
    // named (the last component never a link) and checked.
    let made_or_opened =
        |parent: &safe_fs::Dir, name: &str| match parent.create_dir_new(name, 0o700) {
            Ok(d) => Ok(d),
            Err(e) if e.is_exists() => {
                safe_fs::Dir::open(&parent.join(name), safe_fs::Parents::AsNamed)
            }
            Err(e) => Err(e),
        };
    // The project's directory among the caches, opened once for all its
    // tools.
    let project_dir = if create {
        let key = project_key(&policy.project);
        let dir = safe_fs::Dir::create(&root, safe_fs::Parents::Followed, 0o700)
            .and_then(|r| made_or_opened(&r, &key))
            .map_err(|source| CacheError::Dir {
                path: root.join(&key),
                source,
            })?;
        Some(dir)
    } else {
        None
    };
    for rule in policy.caches.clone() {
        let name = rule.cache.to_string();
        let dir = cache_dir(&root, &policy.project, rule.cache);
        if let Some(project_dir) = &project_dir {
            let d = made_or_opened(project_dir, &name).map_err(|source| CacheError::Dir {
                path: dir.clone(),
                source,
            })?;
            copy_config(&d, rule.cache, env, home).map_err(|source| CacheError::Dir {
                path: dir.clone(),
                source,
            })?;
        }
        let vars = tools::cache_env(rule.cache, &dir, &view).map_err(|why| CacheError::Env {
            cache: rule.cache,
            why,
        })?;
        for (k, v) in vars {
            policy.env.set.retain(|(n, _)| *n != k);
            policy.env.set.push((k, v));
        }
        policy.fs.push(FsRule {
            path: dir.clone(),
            access: Access::Write,
            origin: Origin {
                written: format!("caches = {:?} → {}", name, dir.display()),
                ..rule.origin.clone()
            },
        });
        shown.push(format!("{name} {}", crate::text::escape_path(&dir)));
    }
    Ok(vec![format!(
        "vetto-owned caches (sandboxed runs only; see docs/caches.md): {}",
        shown.join(", ")
    )])
}

/// The user's own configuration for the tool, as it is now, replacing
/// whatever the cache holds under that name (a job may have written
/// there); none when the user has none (cargo warns when it finds both
/// `config` and `config.toml`). Read from the user's
/// tool home (`$CARGO_HOME` when set), written without following links.
fn copy_config(
    dir: &safe_fs::Dir,
    cache: tools::Cache,
    env: &[(String, String)],
    home: &Path,
) -> Result<(), safe_fs::SafeFsError> {
    for (from, to) in tools::cache_config_files(cache) {
        let mut source = home.join(from);
        if cache == tools::Cache::Cargo
            && let Some((_, v)) = env
                .iter()
                .find(|(k, v)| k == "CARGO_HOME" && v.starts_with('/'))
            && let Some(name) = Path::new(from).file_name()
        {
            source = Path::new(v).join(name);
        }
        let Ok(f) = std::fs::File::open(&source) else {
            dir.remove_file(to)?;
            continue;
        };
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            dir.remove_file(to)?;
            continue;
        }
        let mut bytes = Vec::new();
        let _ = f.take(FILE_CAP).read_to_end(&mut bytes);
        dir.write_file(to, &bytes, 0o600)?;
    }
    Ok(())
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    static NOTHING: std::sync::LazyLock<JobWritable> =
        std::sync::LazyLock::new(JobWritable::default);

    fn host<'a>(env: &'a [(String, String)], home: &'a Path) -> RealHost<'a> {
        RealHost {
            env,
            home,
            memo: None,
            learnt: Vec::new(),
            writable: &NOTHING,
            ignored: Default::default(),
        }
    }

    fn vars(pairs: &[(&str, &Path)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string()))
            .collect()
    }

    fn put(path: &Path, body: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }

    /// A Python prefix under `root`: `bin/python3.11` (native), the
    /// `python3` link, the standard library's landmark, and a site
    /// directory with a `.pth` file and pip.
    fn python_prefix(root: &Path) -> PathBuf {
        put(&root.join("bin/python3.11"), b"\x7fELF\x02\x01\x01");
        crate::sys::os::symlink(Path::new("python3.11"), &root.join("bin/python3")).unwrap();
        put(&root.join("lib/python3.11/os.py"), b"");
        let site = root.join("lib/python3.11/site-packages");
        put(&site.join("editable.pth"), b"/src\n");
        put(&site.join("pip/__init__.py"), b"__version__ = '24.0'\n");
        root.join("bin/python3")
    }

    /// `python3 -m pip config list` depends on pip's configuration files
    /// (each place pip's documentation names, with the variables the
    /// question passes), the import path (`.pth` files, pip's own code,
    /// the user site) and the working directory's modules; pip's
    /// definition of PyPI under `-I` on the import path alone. A launcher
    /// script (pyenv's shim) is not followed: not remembered.
    #[test]
    fn pips_configuration_search_is_watched_as_pip_documents_it() {
        let t = tempfile::tempdir().unwrap();
        let (home, py) = (t.path().join("home"), t.path().join("py"));
        let python = python_prefix(&py);
        put(&home.join("logging.py"), b"");
        put(&home.join("pkg/mod.py"), b"");
        let env = vars(&[
            ("XDG_CONFIG_HOME", &t.path().join("xdg")),
            ("XDG_CONFIG_DIRS", Path::new("/sys-a:/sys-b")),
            ("PIP_CONFIG_FILE", Path::new("/c/pip.ini")),
            ("VIRTUAL_ENV", Path::new("/v")),
        ]);
        let h = host(&env, &home);
        let w = h
            .watched("python3", &python, &["-m", "pip", "config", "list"])
            .unwrap();
        let site = py.join("lib/python3.11/site-packages");
        for p in [
            python.clone(),
            std::fs::canonicalize(&python).unwrap(),
            PathBuf::from("/c/pip.ini"),
            PathBuf::from("/sys-a/pip/pip.conf"),
            PathBuf::from("/sys-b/pip/pip.conf"),
            PathBuf::from("/etc/pip.conf"),
            home.join(".pip/pip.conf"),
            t.path().join("xdg/pip/pip.conf"),
            py.join("pip.conf"),
            PathBuf::from("/v/pip.conf"),
            site.clone(),
            site.join("editable.pth"),
            site.join("pip/__init__.py"),
            home.join(".local/lib/python3.11/site-packages"),
            home.clone(),
            home.join("logging.py"),
            home.join("pkg/__init__.py"),
        ] {
            assert!(w.contains(&p), "{} is not watched", p.display());
        }
        assert!(!w.contains(&PathBuf::from("/etc/xdg/pip/pip.conf")));
        let isolated = h.watched("python3", &python, &["-I", "-c", "…"]).unwrap();
        assert!(isolated.contains(&site.join("pip/__init__.py")));
        for p in [
            home.clone(),
            py.join("pip.conf"),
            PathBuf::from("/etc/pip.conf"),
        ] {
            assert!(
                !isolated.contains(&p),
                "{} is watched under -I",
                p.display()
            );
        }

        // A virtual environment: its pyvenv.cfg, its prefix's pip.conf
        // and site directory, and the base's.
        let venv = t.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        crate::sys::os::symlink(&py.join("bin/python3.11"), &venv.join("bin/python3")).unwrap();
        put(
            &venv.join("pyvenv.cfg"),
            format!("home = {}\n", py.join("bin").display()).as_bytes(),
        );
        let w = h
            .watched("python3", &venv.join("bin/python3"), &["-m", "pip"])
            .unwrap();
        for p in [
            venv.join("pyvenv.cfg"),
            venv.join("pip.conf"),
            venv.join("lib/python3.11/site-packages"),
            site.join("editable.pth"),
        ] {
            assert!(w.contains(&p), "{} is not watched", p.display());
        }

        // pyenv's shim is a script that picks the interpreter itself.
        let shim = t.path().join("shims/python3");
        put(
            &shim,
            b"#!/usr/bin/env bash\nexec pyenv exec python3 \"$@\"\n",
        );
        assert_eq!(h.watched("python3", &shim, &["-m", "pip"]), None);
    }

    /// `go env GOPROXY GOSUMDB …` depends on GOROOT's `go.env` (GOROOT from
    /// the real program, when its landmark is there), the user's env
    /// file (`$GOENV`, else `$XDG_CONFIG_HOME/go/env`, else
    /// `~/.config/go/env`) and, where Go may switch toolchains, on the
    /// modules around the working directory; a toolchain switch is not
    /// followed: not remembered.
    #[test]
    fn gos_env_files_are_watched_and_a_toolchain_switch_is_not_remembered() {
        let t = tempfile::tempdir().unwrap();
        let (home, root) = (t.path().join("home"), t.path().join("goroot"));
        put(&root.join("bin/go"), b"\x7fELF");
        std::fs::create_dir_all(root.join("pkg/tool")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let go = root.join("bin/go");
        let none: Vec<(String, String)> = Vec::new();
        let w = host(&none, &home).watched("go", &go, &[]).unwrap();
        for p in [
            go.clone(),
            root.join("go.env"),
            root.join("pkg/tool"),
            home.join(".config/go/env"),
            home.join("go.mod"),
            home.join("go.work"),
            PathBuf::from("/go.mod"),
        ] {
            assert!(w.contains(&p), "{} is not watched", p.display());
        }
        let xdg = vars(&[("XDG_CONFIG_HOME", &t.path().join("xdg"))]);
        let w = host(&xdg, &home).watched("go", &go, &[]).unwrap();
        assert!(w.contains(&t.path().join("xdg/go/env")));
        assert!(!w.contains(&home.join(".config/go/env")));
        let goenv = vars(&[("GOENV", &t.path().join("e/env"))]);
        let w = host(&goenv, &home).watched("go", &go, &[]).unwrap();
        assert!(w.contains(&t.path().join("e/env")));

        // A module in the home directory while GOROOT's go.env says
        // `auto`: Go may run another toolchain.
        put(
            &root.join("go.env"),
            b"GOPROXY=https://p.example\nGOTOOLCHAIN=auto\n",
        );
        put(&home.join("go.mod"), b"module m\n\ngo 1.99\n");
        assert_eq!(host(&none, &home).watched("go", &go, &[]), None);
        // The user's env file keeps this toolchain: remembered.
        put(&home.join(".config/go/env"), b"GOTOOLCHAIN=local\n");
        assert!(host(&none, &home).watched("go", &go, &[]).is_some());
        // It names another toolchain: not remembered.
        put(&home.join(".config/go/env"), b"GOTOOLCHAIN=go1.99.0\n");
        assert_eq!(host(&none, &home).watched("go", &go, &[]), None);
        // No landmark: the GOROOT built into the program, which only go
        // can tell.
        std::fs::remove_dir(root.join("pkg/tool")).unwrap();
        std::fs::remove_file(home.join(".config/go/env")).unwrap();
        assert_eq!(host(&none, &home).watched("go", &go, &[]), None);
    }

    /// `poetry config --list` depends on the interpreter its script names
    /// (and that Python's site directories, where plugins are), the
    /// configuration directory's `config.toml` and `auth.toml`, and the
    /// local `poetry.toml` beside a `pyproject.toml` around the working
    /// directory.
    #[test]
    fn poetrys_interpreter_and_configuration_are_watched() {
        let t = tempfile::tempdir().unwrap();
        let (home, py) = (t.path().join("home"), t.path().join("py"));
        let python = python_prefix(&py);
        std::fs::create_dir_all(&home).unwrap();
        let poetry = t.path().join("bin/poetry");
        put(
            &poetry,
            format!("#!{}\nimport poetry\n", python.display()).as_bytes(),
        );
        let env = vars(&[("POETRY_CONFIG_DIR", &t.path().join("pc"))]);
        let w = host(&env, &home).watched("poetry", &poetry, &[]).unwrap();
        for p in [
            poetry.clone(),
            python.clone(),
            py.join("lib/python3.11/site-packages"),
            t.path().join("pc/config.toml"),
            t.path().join("pc/auth.toml"),
            home.join("poetry.toml"),
            home.join("pyproject.toml"),
            PathBuf::from("/poetry.toml"),
        ] {
            assert!(w.contains(&p), "{} is not watched", p.display());
        }
        let none: Vec<(String, String)> = Vec::new();
        let w = host(&none, &home).watched("poetry", &poetry, &[]).unwrap();
        assert!(w.contains(&home.join(".config/pypoetry/config.toml")));
        put(&poetry, b"#!/bin/sh\nexec something\n");
        assert_eq!(host(&none, &home).watched("poetry", &poetry, &[]), None);
    }

    /// A host that may not trust what the job may write beneath `root`.
    fn guarded<'a>(
        env: &'a [(String, String)],
        home: &'a Path,
        writable: &'a JobWritable,
    ) -> RealHost<'a> {
        RealHost {
            writable,
            ..host(env, home)
        }
    }

    fn job_writes(root: &Path) -> JobWritable {
        JobWritable {
            rules: vec![FsRule {
                path: std::fs::canonicalize(root).unwrap(),
                access: Access::Write,
                origin: Origin {
                    source: "test".into(),
                    line: 0,
                    col: 0,
                    written: "write = [\".\"]".into(),
                },
            }],
        }
    }

    /// A scratch host: its home (made), a project and a safe `bin`
    /// directory (paths only).
    fn scratch_host() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let (project, safe) = (t.path().join("project"), t.path().join("usr/bin"));
        (t, home, project, safe)
    }

    fn script(path: &Path, body: &str) {
        put(path, body.as_bytes());
        crate::sys::os::set_mode(path, 0o755).unwrap();
    }

    /// A stand-in `python3` in the project's `.venv/bin`, first on `PATH`:
    /// asked bare (nothing counted as the job's), discovery runs it; with
    /// the project writable it is passed over, with a note, for the
    /// host's own `python3`, and where there is no other it runs nothing.
    #[test]
    fn a_program_the_job_may_write_is_never_run_for_discovery() {
        let (t, home, project, safe) = scratch_host();
        let marker = t.path().join("ran");
        script(
            &project.join(".venv/bin/python3"),
            &format!(
                "#!/bin/sh\n: > {}\necho https://attacker.test/simple\n",
                marker.display()
            ),
        );
        let path = format!("{}:{}", project.join(".venv/bin").display(), safe.display());
        let env = vec![("PATH".to_string(), path)];
        let writable = job_writes(&project);

        // Bare: the project's program answers.
        let out = host(&env, &home).run("python3", &["-I", "-c", "x"], &[]);
        assert!(marker.exists() && out.is_some_and(|o| o.contains("attacker.test")));
        std::fs::remove_file(&marker).unwrap();

        // Guarded, no other python3: nothing runs, and it says so.
        let mut h = guarded(&env, &home, &writable);
        assert_eq!(h.run("python3", &["-I", "-c", "x"], &[]), None);
        assert!(!marker.exists());
        let notes = h.ignored.take();
        assert!(
            notes
                .iter()
                .any(|n| n.contains("ignored the PATH entry") && n.contains(".venv/bin")),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(|n| n.contains("it is not run")),
            "{notes:?}"
        );

        // The host's own python3 further on PATH answers instead.
        script(
            &safe.join("python3"),
            "#!/bin/sh\necho https://host.test/simple\n",
        );
        let mut h = guarded(&env, &home, &writable);
        let out = h.run("python3", &["-I", "-c", "x"], &[]).unwrap();
        assert!(out.contains("host.test") && !marker.exists());

        // A link from a trusted directory into the project, a script whose
        // `#!` names the project's interpreter (directly or through
        // `env`), a venv whose `pyvenv.cfg` `home` is the project's: all
        // passed over.
        crate::sys::os::symlink(&project.join(".venv/bin/python3"), &safe.join("npm")).unwrap();
        script(
            &safe.join("poetry"),
            &format!(
                "#!{}\nimport poetry\n",
                project.join(".venv/bin/python3").display()
            ),
        );
        script(&safe.join("go"), "#!/usr/bin/env python3\n");
        let venv = t.path().join("opt/venv");
        script(&venv.join("bin/yarn"), "#!/bin/sh\ntrue\n");
        put(
            &venv.join("pyvenv.cfg"),
            format!("home = {}\n", project.join(".venv/bin").display()).as_bytes(),
        );
        let env_go = vec![(
            "PATH".to_string(),
            format!("{}:{}", project.join(".venv/bin").display(), safe.display()),
        )];
        let h = guarded(&env_go, &home, &writable);
        assert_eq!(h.which("npm"), None);
        assert_eq!(h.which("poetry"), None);
        // `env python3` finds the host's python3 (the project's entry is
        // not on the program's PATH): trusted.
        assert_eq!(h.which("go"), Some(safe.join("go")));
        let env_venv = vec![("PATH".to_string(), venv.join("bin").display().to_string())];
        assert_eq!(guarded(&env_venv, &home, &writable).which("yarn"), None);
        assert!(!marker.exists());
    }

    /// npm reads `~/.npmrc` of itself: where the job may write it (here
    /// the whole home directory), the registry npm would name is the
    /// job's choice, so npm is not asked at all (bare, it runs).
    #[test]
    fn a_tool_whose_own_config_the_job_may_write_is_never_asked() {
        let (t, home, _project, safe) = scratch_host();
        let marker = t.path().join("npm-ran");
        script(
            &safe.join("npm"),
            &format!(
                "#!/bin/sh\n: > '{}'\necho https://registry.test/\n",
                marker.display()
            ),
        );
        let env = vec![("PATH".to_string(), safe.display().to_string())];
        assert!(
            host(&env, &home)
                .run("npm", &["config", "get", "registry"], &[])
                .is_some()
        );
        assert!(marker.exists(), "control: bare, npm was asked");
        std::fs::remove_file(&marker).unwrap();

        let writable = job_writes(&home);
        let mut h = guarded(&env, &home, &writable);
        assert_eq!(h.run("npm", &["config", "get", "registry"], &[]), None);
        assert!(!marker.exists(), "npm ran with a job-writable ~/.npmrc");
        let notes = h.ignored.take();
        assert!(notes.iter().any(|n| n.contains(".npmrc")), "{notes:?}");
    }

    /// A configuration file beneath what the job may write is neither
    /// read nor named to a tool: `$VIRTUAL_ENV` of a project venv is not
    /// passed to `python3 -m pip config list`, and its `pip.conf` is not
    /// read.
    #[test]
    fn a_configuration_the_job_may_write_is_never_taken() {
        let (_t, home, project, safe) = scratch_host();
        put(
            &project.join(".venv/pip.conf"),
            b"[global]\nindex-url = https://attacker.test/\n",
        );
        script(
            &safe.join("python3"),
            "#!/bin/sh\necho \"cwd=$(pwd)\"\nexec /usr/bin/env\n",
        );
        let env = vec![
            ("PATH".to_string(), safe.display().to_string()),
            (
                "VIRTUAL_ENV".to_string(),
                project.join(".venv").display().to_string(),
            ),
            (
                "XDG_CONFIG_HOME".to_string(),
                home.join(".config").display().to_string(),
            ),
        ];
        let writable = job_writes(&project);
        let mut bare = host(&env, &home);
        assert!(bare.read(&project.join(".venv/pip.conf")).is_some());
        let out = bare
            .run("python3", &["-m", "pip"], &["VIRTUAL_ENV"])
            .unwrap();
        assert!(out.contains("VIRTUAL_ENV="));

        let mut h = guarded(&env, &home, &writable);
        assert_eq!(h.read(&project.join(".venv/pip.conf")), None);
        let out = h
            .run(
                "python3",
                &["-m", "pip"],
                &["VIRTUAL_ENV", "XDG_CONFIG_HOME"],
            )
            .unwrap();
        assert!(
            !out.contains("VIRTUAL_ENV=") && out.contains("XDG_CONFIG_HOME="),
            "{out}"
        );
        let notes = h.ignored.take();
        assert!(
            notes.iter().any(|n| n.contains("$VIRTUAL_ENV")),
            "{notes:?}"
        );
        // A file the job could still create counts too.
        assert!(
            writable
                .covering(&project.join("new/dir/pip.conf"))
                .is_some()
        );
        assert!(writable.covering(&home.join("pip.conf")).is_none());
        let home_real = std::fs::canonicalize(&home).unwrap();
        assert!(
            out.contains(&format!("cwd={}", home_real.display())),
            "{out}"
        );
        assert!(!out.contains("PYTHONNOUSERSITE"), "{out}");

        // A job that may write the home directory (or Python's user
        // site in it): the question runs in `/`, without the user site.
        let site = home.join(".local/lib/python3.11/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        for writable in [job_writes(&home), job_writes(&site)] {
            let mut h = guarded(&env, &home, &writable);
            let out = h.run("python3", &["-m", "pip"], &[]).unwrap();
            assert!(out.contains("PYTHONNOUSERSITE=1"), "{out}");
            let in_root = out.contains("cwd=/\n");
            assert_eq!(in_root, writable.covering(&home).is_some(), "{out}");
            assert!(h.ignored.take().iter().any(|n| n.contains("user site")));
        }
    }

    /// What discovery tells the job's tool never replaces a variable the
    /// user chose: one a policy's `[env] set` names, or one of the
    /// caller's environment (any spelling of npm's `npm_config_*` and
    /// yarn's `yarn_*`).
    #[test]
    fn a_variable_the_user_set_is_not_replaced_by_discovery() {
        let pair = |k: &str| (k.to_string(), "x".to_string());
        assert!(already_set("GOPROXY", &[pair("GOPROXY")], &[]));
        assert!(already_set("GOPROXY", &[], &[pair("GOPROXY")]));
        assert!(already_set(
            "npm_config_registry",
            &[],
            &[pair("NPM_CONFIG_REGISTRY")]
        ));
        assert!(already_set("YARN_REGISTRY", &[], &[pair("yarn_registry")]));
        assert!(!already_set("GOPROXY", &[pair("goproxy")], &[]));
        assert!(!already_set(
            "PIP_INDEX_URL",
            &[pair("PIP_EXTRA_INDEX_URL")],
            &[pair("UV_INDEX_URL")]
        ));
    }

    /// Each project has caches of its own, named so that two projects of
    /// the same name differ and no name can climb, hide or be a path.
    #[test]
    fn each_project_has_its_own_cache_directory() {
        let root = Path::new("/h/.cache/vetto/caches");
        let a = cache_dir(root, Path::new("/w/one/app"), tools::Cache::Cargo);
        let b = cache_dir(root, Path::new("/w/two/app"), tools::Cache::Cargo);
        assert_ne!(a, b);
        assert_eq!(
            a.parent(),
            cache_dir(root, Path::new("/w/one/app"), tools::Cache::Npm).parent()
        );
        for key in [
            project_key(Path::new("/w/one/app")),
            project_key(Path::new("/w/two/app")),
        ] {
            assert!(key.starts_with("app-") && key.len() == 4 + 16, "{key}");
        }
        for odd in ["/", "/w/..", "/w/.hidden", "/w/a b\n\u{202e}c", "/w/...."] {
            let key = project_key(Path::new(odd));
            assert!(
                !key.starts_with('.') && !key.contains(['/', ' ', '\n']),
                "{odd}: {key}"
            );
            assert!(
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
                "{key}"
            );
        }
        assert!(project_key(Path::new(&"x".repeat(300))).len() <= 40 + 17);
    }

    /// A job planted `config` beside the user's `config.toml` in the
    /// vetto-owned cargo home: the next start takes the user's file and
    /// drops the planted one, and cargo sees one config, not two.
    #[test]
    fn a_config_the_user_does_not_have_is_dropped_from_the_cache() {
        let home = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".cargo")).unwrap();
        std::fs::write(home.path().join(".cargo/config.toml"), "[net]\n").unwrap();
        std::fs::write(cache.path().join("config"), "[build]\nrustc = \"/tmp/x\"\n").unwrap();
        let dir = safe_fs::Dir::open(cache.path(), safe_fs::Parents::Followed).unwrap();
        copy_config(&dir, tools::Cache::Cargo, &[], home.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(cache.path().join("config.toml")).unwrap(),
            "[net]\n"
        );
        assert!(!cache.path().join("config").exists());
    }
}
