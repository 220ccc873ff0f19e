//! Before the plan: the registries a preset's `[network] discover` names,
//! learned from the tools' own configuration on the host, and the
//! vetto-owned caches of `[filesystem] caches` (see docs/caches.md).
//!
//! Asking a host tool is itself a surface, so each question runs with no
//! shell, a scrubbed environment (`PATH`'s absolute entries, `HOME`, the
//! locale, and the tool's own configuration variables), the home
//! directory as its working directory (never the project: the project's
//! `.npmrc` is the job's to write), stdin closed, stderr dropped, at most
//! [`OUTPUT_CAP`] bytes of output read, and a [`RUN_TIMEOUT`] after which
//! its process group is killed. What it says is parsed strictly
//! (`policy::tools::url_host`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::policy::tools::{self, Found, HostView};
use crate::policy::walk_cache::SETTLE_SECS;
use crate::policy::{Access, FsRule, HostPattern, NetPolicy, Origin, Policy};
use crate::sandbox::safe_fs;

/// How long one discovery command may take (a cold `npm` or `python3`
/// on a loaded machine takes well under a second).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a discovery command's output is read.
pub const OUTPUT_CAP: u64 = 64 * 1024;
/// How much of a configuration file is read.
const FILE_CAP: u64 = 1024 * 1024;

/// The source name discovered hosts carry in their origin.
pub const DISCOVERED: &str = "discovered";

/// The host as discovery sees it: the caller's environment and home,
/// and where answers are remembered between sessions (see [`Memo`]).
struct RealHost<'a> {
    env: &'a [(String, String)],
    home: &'a Path,
    memo: Option<&'a safe_fs::Dir>,
    learnt: Vec<(String, Vec<u8>)>,
}

impl RealHost<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `program` on `PATH`'s absolute entries (a relative entry would
    /// find the project's `node_modules/.bin`).
    fn which(&self, program: &str) -> Option<PathBuf> {
        self.get("PATH")?
            .split(':')
            .filter(|d| d.starts_with('/'))
            .map(|d| Path::new(d).join(program))
            .find(|p| std::fs::metadata(p).is_ok_and(|m| crate::sandbox::os::is_executable(&m)))
    }
}

impl HostView for RealHost<'_> {
    fn env(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_string)
    }

    fn env_names(&self) -> Vec<String> {
        self.env.iter().map(|(k, _)| k.clone()).collect()
    }

    fn run(&mut self, program: &str, args: &[&str], pass: &[&str]) -> Option<String> {
        let path = self.which(program)?;
        let search: Vec<&str> = self
            .get("PATH")
            .unwrap_or_default()
            .split(':')
            .filter(|d| d.starts_with('/'))
            .collect();
        let cwd = if self.home.is_dir() {
            self.home
        } else {
            Path::new("/")
        };
        let mut vars = vec![
            ("PATH", search.join(":")),
            ("HOME", self.home.to_string_lossy().into_owned()),
            ("LC_ALL", "C".to_string()),
        ];
        for name in ["USER", "LOGNAME"].iter().chain(pass) {
            if let Some(v) = self.get(name) {
                vars.push((name, v.to_string()));
            }
        }
        let memo = self.memo_key(program, &path, args, &vars, cwd);
        if let (Some(dir), Some((name, identity, _))) = (self.memo, &memo) {
            if let Some(out) = Memo::recall(dir, name, identity) {
                return Some(out);
            }
        }
        let out = self.spawn(&path, args, &vars, cwd)?;
        if let Some((name, identity, true)) = memo {
            self.learnt.push((name, Memo::encode(&identity, &out)));
        }
        Some(out)
    }

    fn read(&mut self, path: &Path) -> Option<String> {
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
        let mut child = crate::sandbox::os::spawn_own_group(&mut cmd).ok()?;
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
            crate::sandbox::os::kill_group(&mut child);
            let _ = child.wait();
        }
        // The group is gone on a timeout; otherwise a grandchild holding
        // the pipe could keep the reader: it reads at most OUTPUT_CAP.
        crate::sandbox::os::kill_group(&mut child);
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
        program: &str,
        path: &Path,
        args: &[&str],
        vars: &[(&str, String)],
        cwd: &Path,
    ) -> Option<(String, String, bool)> {
        self.memo?;
        let watched = self.watched(program, path)?;
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
                settled &= crate::sandbox::os::change_time(m)
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

    /// Every file whose content can change what `program` answers, as
    /// far as vetto knows the tool (`None`: it does not, and the tool is
    /// asked every time): the program and what it links to, and the
    /// npm-style configuration files — builtin (beside the real
    /// program), global (`<prefix>/etc/npmrc` for node's and the
    /// program's prefix, a `prefix` or `globalconfig` the user file
    /// names, `$NPM_CONFIG_GLOBALCONFIG`), user (`$NPM_CONFIG_USERCONFIG`,
    /// else `~/.npmrc`), project (`.npmrc` in the home directory, where
    /// the question runs, and each of its parents), pnpm's and yarn's own.
    fn watched(&self, program: &str, path: &Path) -> Option<Vec<PathBuf>> {
        if !matches!(program, "npm" | "pnpm" | "yarn") {
            return None;
        }
        let mut w = vec![path.to_path_buf()];
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
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(&user) {
            let _ = f.take(FILE_CAP).read_to_string(&mut text);
        }
        for line in text.lines() {
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
        let config = self
            .get("XDG_CONFIG_HOME")
            .filter(|v| v.starts_with('/'))
            .map_or_else(|| self.home.join(".config"), PathBuf::from);
        w.push(config.join("pnpm/rc"));
        w.push(self.home.join(".yarnrc"));
        w.push(self.home.join(".yarnrc.yml"));
        Some(w)
    }
}

/// How a file is now: its identity and change times, its size and mode;
/// `-` when it does not exist.
fn file_identity(m: Option<std::fs::Metadata>) -> String {
    let Some(m) = m else { return "-".into() };
    let os = crate::sandbox::os::file_id(&m);
    format!(
        "{os:?} {:?} {:?} {} {}",
        crate::sandbox::os::modify_time(&m),
        crate::sandbox::os::change_time(&m),
        m.len(),
        crate::sandbox::os::mode(&m)
    )
}

/// The names of remembered discovery answers in vetto's own directory.
const MEMO_PREFIX: &str = "discover-";
const MEMO_MAGIC: &str = "vetto-discover1\n";

/// Discovery answers remembered between sessions, so that an unchanged
/// configuration costs no process (`npm config get registry` takes a
/// fifth of a second). One file per question in vetto's directory of
/// remembered walks (`session::walk`), which is masked from every job
/// and forgotten whole after a session whose job could have written it:
/// it holds the identity (device, inode, change times, size, mode) of
/// every file the answer depends on, and the answer. A file that changed
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
    let NetPolicy::Allow { hosts, .. } = &mut policy.net else {
        return (Vec::new(), Learnt::default());
    };
    if policy.discover.is_empty() {
        return (Vec::new(), Learnt::default());
    }
    let mut host = RealHost {
        env,
        home,
        memo,
        learnt: Vec::new(),
    };
    let mut found: Vec<Found> = Vec::new();
    let mut notes = Vec::new();
    for rule in &policy.discover {
        let d = tools::discover(rule.registry, &mut host);
        notes.extend(d.notes);
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
        lines.push(format!(
            "discovered registries: {}",
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

/// `$XDG_CACHE_HOME/vetto/caches` (when absolute), else
/// `~/.cache/vetto/caches`: the root of the vetto-owned caches.
pub fn cache_root(env: &[(String, String)], home: &Path) -> PathBuf {
    env.iter()
        .find(|(k, v)| k == "XDG_CACHE_HOME" && v.starts_with('/'))
        .map_or_else(|| home.join(".cache"), |(_, v)| PathBuf::from(v))
        .join("vetto/caches")
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
    let view = RealHost {
        env,
        home,
        memo: None,
        learnt: Vec::new(),
    };
    let mut shown = Vec::new();
    for rule in policy.caches.clone() {
        let name = rule.cache.to_string();
        let dir = root.join(&name);
        if create {
            let d = safe_fs::Dir::create(&root, safe_fs::Parents::Followed, 0o700)
                .and_then(|r| match r.create_dir_new(&name, 0o700) {
                    Ok(d) => Ok(d),
                    Err(e) if e.is_exists() => safe_fs::Dir::open(&dir, safe_fs::Parents::AsNamed),
                    Err(e) => Err(e),
                })
                .map_err(|source| CacheError::Dir {
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
