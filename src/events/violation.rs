//! One thing the job tried that the policy does not allow, as vetto observed
//! it — never guessed from the job's output.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Timestamp;
use super::rule_id::RuleId;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub rule: RuleId,
    /// When vetto first observed it.
    pub time: Timestamp,
    pub action: Action,
    pub process: ProcessInfo,
    pub target: Target,
    /// The dependency responsible, when the process runs code from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Package>,
    /// The policy rule that decided it, when one did (deny-by-default has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_rule: Option<PolicyRef>,
    /// Extra facts (flags of the call, errno answered …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Which mechanism observed it.
    pub provenance: Provenance,
}

/// Blocked (enforced), put back after the session, or only observed
/// (`--audit`, or found after the session where nothing could be undone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Blocked,
    Observed,
    /// Blocked, as the policy expects (`[syscalls] expected`: a nested
    /// sandbox's namespace probe): recorded, and no finding — it counts
    /// toward no verdict, exit status or SARIF alert.
    Expected,
    /// Found after the session where a tool runs it later, and undone
    /// (`supervisor::put_back`): a finding, the planted program gone.
    PutBack,
}

impl Violation {
    /// Whether it counts toward the verdict (everything but what the
    /// policy expects).
    pub fn is_finding(&self) -> bool {
        self.action != Action::Expected
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub exe: PathBuf,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Parents from the nearest up to the job's command: (pid, exe).
    #[serde(default)]
    pub parent_chain: Vec<(u32, PathBuf)>,
}

/// What the job reached for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Target {
    Path { path: PathBuf },
    Socket { path: PathBuf },
    Host { host: String, port: Option<u16> },
    Address { addr: String, port: Option<u16> },
    Syscall { name: String },
    EnvVar { name: String },
    Process { pid: u32, exe: PathBuf },
    Limit { limit: String },
}

impl Target {
    /// The filesystem path, for targets that are one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Target::Path { path } | Target::Socket { path } => Some(path),
            Target::Process { exe, .. } => Some(exe),
            _ => None,
        }
    }

    /// Human text, as reports show it.
    pub fn display(&self) -> String {
        match self {
            Target::Path { path } | Target::Socket { path } => path.display().to_string(),
            Target::Host { host, port } | Target::Address { addr: host, port } => match port {
                Some(p) => format!("{host}:{p}"),
                None => host.clone(),
            },
            Target::Syscall { name } => format!("{name}()"),
            Target::EnvVar { name } => format!("${name}"),
            Target::Process { pid, exe } => format!("{} (pid {pid})", exe.display()),
            Target::Limit { limit } => limit.clone(),
        }
    }

    /// The target with machine-specific parts removed: stable across runs
    /// and runners (for aggregation keys and SARIF fingerprints).
    pub fn normalised(&self, roots: &Roots) -> String {
        match self {
            Target::Path { path } => format!("path:{}", roots.normalise(path)),
            Target::Socket { path } => format!("socket:{}", roots.normalise(path)),
            Target::Host { host, port } => {
                format!("host:{}:{}", host.to_ascii_lowercase(), port.unwrap_or(0))
            }
            Target::Address { addr, port } => format!("addr:{addr}:{}", port.unwrap_or(0)),
            Target::Syscall { name } => format!("syscall:{name}"),
            Target::EnvVar { name } => format!("env:{name}"),
            // The pid changes every run; the program does not.
            Target::Process { exe, .. } => format!("process:{}", roots.normalise(exe)),
            Target::Limit { limit } => format!("limit:{limit}"),
        }
    }
}

/// The machine-specific prefixes replaced by placeholders when normalising.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots {
    pub project: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub session_tmp: Option<PathBuf>,
}

impl Roots {
    pub fn normalise(&self, path: &Path) -> String {
        let subs = [
            (&self.session_tmp, "$TMP"),
            (&self.project, "$PROJECT"),
            (&self.home, "~"),
        ];
        for (root, name) in subs {
            if let Some(root) = root
                && let Ok(rest) = path.strip_prefix(root)
            {
                return if rest.as_os_str().is_empty() {
                    name.to_string()
                } else {
                    format!("{name}/{}", rest.display())
                };
            }
        }
        path.display().to_string()
    }
}

/// A dependency that a process's code belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Package {
    pub ecosystem: Ecosystem,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The package's manifest (package.json, METADATA, Cargo.toml …) or its
    /// directory when no manifest is known.
    pub manifest: PathBuf,
}

impl Package {
    /// `npm:left-pad@1.3.0`.
    pub fn display(&self) -> String {
        match &self.version {
            Some(v) => format!("{}:{}@{v}", self.ecosystem.as_str(), self.name),
            None => format!("{}:{}", self.ecosystem.as_str(), self.name),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ecosystem {
    Npm,
    Pypi,
    Cargo,
    Go,
}

impl Ecosystem {
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
            Ecosystem::Cargo => "cargo",
            Ecosystem::Go => "go",
        }
    }
}

/// The policy line that decided a violation (mirrors `policy::Origin`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRef {
    /// The policy file (or `<cli>`, `<builtin>`).
    pub source: String,
    pub line: u32,
    /// The rule as written.
    #[serde(default)]
    pub written: String,
}

/// The mechanism that observed a violation. Anything inferred says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    /// A seccomp user notification decided by the supervisor.
    SeccompNotify,
    /// A seccomp filter return (no notification: counted, not attributed).
    SeccompFilter,
    /// Landlock's audit records.
    LandlockAudit,
    /// The FUSE trap over a masked path (FULL tier): it names the process.
    MaskTrap,
    /// The egress proxy's decision.
    Proxy,
    /// The supervisor's own accounting (limits, leftover processes).
    Supervisor,
    /// The plan (decided before the job started, e.g. withheld variables).
    Plan,
    /// The macOS Sandbox's denials in the unified log (`log stream`).
    SandboxLog,
}

/// Map a process to the dependency whose code it runs, from its executable,
/// the script in its argv and its working directory, in that order.
/// `read` returns a file's contents (package.json for npm versions); tests
/// pass a fake.
pub fn attribute(process: &ProcessInfo, read: &dyn Fn(&Path) -> Option<String>) -> Option<Package> {
    let argv_paths = process
        .argv
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(|a| {
            let p = Path::new(a);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                process.cwd.join(p)
            }
        });
    let paths: Vec<PathBuf> = std::iter::once(process.exe.clone())
        .chain(argv_paths)
        .chain(std::iter::once(process.cwd.clone()))
        .map(|p| lexical_normalise(&p))
        .collect();
    paths
        .iter()
        .find_map(|p| attribute_path(p, read))
        .or_else(|| {
            // A Python source distribution being built: pip runs its
            // `setup.py` (or the PEP 517 backend that runs it) in the
            // unpacked sdist, whose `PKG-INFO` names it. The working
            // directory, or the directory of a script in argv.
            std::iter::once(process.cwd.as_path())
                .chain(paths.iter().skip(1).filter_map(|p| p.parent()))
                .find_map(|dir| sdist(dir, read))
        })
}

/// The sdist unpacked at `dir`, from its `PKG-INFO` (core metadata: the
/// `Name:` and `Version:` of the header); `None` without one.
fn sdist(dir: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Option<Package> {
    let manifest = dir.join("PKG-INFO");
    let text = read(&manifest)?;
    let mut header = text.lines().take_while(|l| !l.trim().is_empty());
    let mut field = |name: &str| {
        header
            .by_ref()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
            .filter(|v| !v.is_empty())
    };
    // Core metadata orders them: Metadata-Version, Name, Version.
    field("Metadata-Version")?;
    let name = field("Name")?;
    let version = field("Version");
    Some(Package {
        ecosystem: Ecosystem::Pypi,
        name,
        version,
        manifest,
    })
}

/// The package a single path lies in, if any.
pub fn attribute_path(path: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Option<Package> {
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let prefix = |n: usize| -> PathBuf {
        let mut p = PathBuf::from("/");
        p.extend(&parts[..n]);
        p
    };
    // The innermost match wins: node_modules/a/node_modules/b is b's code.
    for i in (0..parts.len()).rev() {
        match parts[i] {
            "node_modules" if i + 1 < parts.len() => {
                let (name, end) = if parts[i + 1].starts_with('@') && i + 2 < parts.len() {
                    (format!("{}/{}", parts[i + 1], parts[i + 2]), i + 3)
                } else if parts[i + 1].starts_with('.') || parts[i + 1].starts_with('@') {
                    continue;
                } else {
                    (parts[i + 1].to_string(), i + 2)
                };
                let manifest = prefix(end).join("package.json");
                let version = read(&manifest).and_then(|text| {
                    serde_json::from_str::<serde_json::Value>(&text)
                        .ok()?
                        .get("version")?
                        .as_str()
                        .map(str::to_string)
                });
                return Some(Package {
                    ecosystem: Ecosystem::Npm,
                    name,
                    version,
                    manifest,
                });
            }
            "site-packages" | "dist-packages" if i + 1 < parts.len() => {
                let entry = parts[i + 1];
                let name = entry.strip_suffix(".py").unwrap_or(entry);
                if name.ends_with(".dist-info") || name.starts_with('_') || name == "__pycache__" {
                    continue;
                }
                return Some(Package {
                    ecosystem: Ecosystem::Pypi,
                    name: name.to_string(),
                    version: None,
                    manifest: prefix(i + 2),
                });
            }
            "build" if i >= 2 && i + 1 < parts.len() && parts[..i].contains(&"target") => {
                // target/<profile>/build/<crate>-<16 hex>/ (build script out dir or binary)
                let dir = parts[i + 1];
                let (name, hash) = dir.rsplit_once('-')?;
                if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Some(Package {
                        ecosystem: Ecosystem::Cargo,
                        name: name.to_string(),
                        version: None,
                        manifest: prefix(i + 2),
                    });
                }
            }
            "mod" if i >= 1 && parts[i - 1] == "pkg" => {
                // pkg/mod/<module path segments>@<version>/…; capitals are
                // escaped as !x in the cache.
                let at = parts[i + 1..].iter().position(|s| s.contains('@'))?;
                let last = parts[i + 1 + at];
                let (tail, version) = last.split_once('@')?;
                let mut segs: Vec<&str> = parts[i + 1..i + 1 + at].to_vec();
                segs.push(tail);
                return Some(Package {
                    ecosystem: Ecosystem::Go,
                    name: unescape_go(&segs.join("/")),
                    version: Some(version.to_string()),
                    manifest: prefix(i + 2 + at).join("go.mod"),
                });
            }
            _ => {}
        }
    }
    None
}

fn unescape_go(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut bang = false;
    for c in s.chars() {
        if c == '!' {
            bang = true;
        } else if bang {
            out.extend(c.to_uppercase());
            bang = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn lexical_normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What makes two violations "the same": rule, normalised target, and who
/// did it (the attributed package, else the executable's normalised path).
/// Times, pids, argv and parent chains are deliberately not part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AggregationKey {
    pub rule: RuleId,
    pub target: String,
    pub actor: String,
}

impl AggregationKey {
    pub fn of(v: &Violation, roots: &Roots) -> Self {
        AggregationKey {
            rule: v.rule,
            target: v.target.normalised(roots),
            actor: match &v.attribution {
                Some(p) => format!("{}:{}", p.ecosystem.as_str(), p.name),
                None => roots.normalise(&v.process.exe),
            },
        }
    }

    /// Stable across runs and machines: sha256 of the key, hex. The SARIF
    /// `partialFingerprints` value.
    pub fn fingerprint(&self) -> String {
        crate::hash::sha256_hex(&[
            self.rule.as_str().as_bytes(),
            &[0],
            self.target.as_bytes(),
            &[0],
            self.actor.as_bytes(),
        ])
    }

    /// Compact id used in `repeated` events: the fingerprint's first 16 hex digits.
    pub fn id(&self) -> String {
        let mut f = self.fingerprint();
        f.truncate(16);
        f
    }
}

/// Bounds memory when a job produces a storm of distinct violations.
pub const MAX_DISTINCT: usize = 50_000;

/// Folds identical violations into one (first time + count). The supervisor
/// feeds every observed violation; only the first of each key is logged at
/// once, repeats are logged as `repeated` events when [`Aggregator::flush`]
/// is called (periodically and at the end).
#[derive(Debug, Default)]
pub struct Aggregator {
    roots: Roots,
    seen: HashMap<AggregationKey, Seen>,
    by_rule: BTreeMap<RuleId, u64>,
    /// Distinct violations not recorded because [`MAX_DISTINCT`] was reached.
    pub dropped_distinct: u64,
}

#[derive(Debug, Default)]
struct Seen {
    id: String,
    count: u64,
    flushed: u64,
    last: Timestamp,
}

/// A pending update: this key was seen `count` times in total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeated {
    pub key: String,
    pub count: u64,
    pub last: Timestamp,
}

impl Aggregator {
    pub fn new(roots: Roots) -> Self {
        Aggregator {
            roots,
            ..Default::default()
        }
    }

    /// Count `v`; return it when it is the first of its kind (to be logged now).
    pub fn observe(&mut self, v: Violation) -> Option<Violation> {
        if v.is_finding() {
            *self.by_rule.entry(v.rule).or_default() += 1;
        }
        let key = AggregationKey::of(&v, &self.roots);
        if let Some(seen) = self.seen.get_mut(&key) {
            seen.count += 1;
            // Events of several threads arrive out of order.
            seen.last = seen.last.max(v.time);
            return None;
        }
        if self.seen.len() >= MAX_DISTINCT {
            self.dropped_distinct += 1;
            return None;
        }
        let id = key.id();
        self.seen.insert(
            key,
            Seen {
                id,
                count: 1,
                flushed: 1,
                last: v.time,
            },
        );
        Some(v)
    }

    /// Repeats seen since the last flush, in a stable order.
    pub fn flush(&mut self) -> Vec<Repeated> {
        let mut out: Vec<Repeated> = self
            .seen
            .values_mut()
            .filter(|s| s.count != s.flushed)
            .map(|s| {
                s.flushed = s.count;
                Repeated {
                    key: s.id.clone(),
                    count: s.count,
                    last: s.last,
                }
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Every observed violation counted by rule (repeats included).
    pub fn counts_by_rule(&self) -> BTreeMap<RuleId, u64> {
        self.by_rule.clone()
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_(exe: &str, argv: &[&str], cwd: &str) -> ProcessInfo {
        ProcessInfo {
            pid: 42,
            exe: exe.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.into(),
            parent_chain: vec![],
        }
    }

    fn fake_fs(path: &Path) -> Option<String> {
        match path.to_str()? {
            "/repo/node_modules/evil/package.json" => {
                Some(r#"{"name":"evil","version":"6.6.6"}"#.into())
            }
            "/repo/node_modules/@scope/pkg/package.json" => Some(r#"{"version":"1.2.3"}"#.into()),
            _ => None,
        }
    }

    #[test]
    fn npm_postinstall_script_is_attributed_to_its_package() {
        let p = proc_(
            "/usr/bin/node",
            &["node", "node_modules/evil/install.js"],
            "/repo",
        );
        let pkg = attribute(&p, &fake_fs).unwrap_or_else(|| panic!("not attributed"));
        assert_eq!(pkg.name, "evil");
        assert_eq!(pkg.version.as_deref(), Some("6.6.6"));
        assert_eq!(
            pkg.manifest,
            Path::new("/repo/node_modules/evil/package.json")
        );
        assert_eq!(pkg.display(), "npm:evil@6.6.6");
    }

    #[test]
    fn scoped_npm_package_via_cwd() {
        let p = proc_(
            "/bin/sh",
            &["sh", "-c", "curl x"],
            "/repo/node_modules/@scope/pkg/lib",
        );
        let pkg = attribute(&p, &fake_fs).unwrap_or_else(|| panic!("not attributed"));
        assert_eq!(pkg.name, "@scope/pkg");
        assert_eq!(pkg.version.as_deref(), Some("1.2.3"));
    }

    #[test]
    fn a_setup_py_in_an_unpacked_sdist_is_attributed_to_its_distribution() {
        let read = |p: &Path| {
            (p == Path::new("/tmp/pip-install-x/evil_1a2b/PKG-INFO")).then(|| {
                "Metadata-Version: 2.1\nName: evil-pkg\nVersion: 6.6.6\nSummary: x\n\nName: not-me\n"
                    .to_string()
            })
        };
        // setup.py run by pip (cwd: the sdist), and a shell it starts.
        for p in [
            proc_(
                "/usr/bin/python3.11",
                &["python3", "-c", "exec(open('setup.py').read())", "egg_info"],
                "/tmp/pip-install-x/evil_1a2b",
            ),
            proc_(
                "/usr/bin/python3.11",
                &["python3", "/tmp/pip-install-x/evil_1a2b/setup.py"],
                "/",
            ),
        ] {
            let pkg = attribute(&p, &read).unwrap_or_else(|| panic!("not attributed"));
            assert_eq!(pkg.display(), "pypi:evil-pkg@6.6.6");
        }
        // A PKG-INFO without core metadata's first field is not one.
        let bad = |_: &Path| Some("Name: x\n".to_string());
        assert_eq!(attribute(&proc_("/bin/sh", &["sh"], "/w"), &bad), None);
    }

    #[test]
    fn nested_node_modules_blames_the_innermost_package() {
        let pkg = attribute_path(Path::new("/r/node_modules/a/node_modules/b/x.js"), &|_| {
            None
        });
        assert_eq!(pkg.map(|p| p.name), Some("b".into()));
    }

    #[test]
    fn python_site_packages() {
        let p = proc_(
            "/usr/bin/python3",
            &[
                "python3",
                "/venv/lib/python3.12/site-packages/badpkg/__init__.py",
            ],
            "/repo",
        );
        let pkg = attribute(&p, &|_| None).unwrap_or_else(|| panic!("not attributed"));
        assert_eq!(
            (pkg.ecosystem, pkg.name.as_str()),
            (Ecosystem::Pypi, "badpkg")
        );
    }

    #[test]
    fn cargo_build_script() {
        let p = proc_(
            "/repo/target/debug/build/openssl-sys-0123456789abcdef/build-script-build",
            &["build-script-build"],
            "/repo",
        );
        let pkg = attribute(&p, &|_| None).unwrap_or_else(|| panic!("not attributed"));
        assert_eq!(
            (pkg.ecosystem, pkg.name.as_str()),
            (Ecosystem::Cargo, "openssl-sys")
        );
    }

    #[test]
    fn go_module_cache() {
        let pkg = attribute_path(
            Path::new("/home/u/go/pkg/mod/github.com/!burnt!sushi/toml@v1.3.2/cmd/x"),
            &|_| None,
        )
        .unwrap_or_else(|| panic!("not attributed"));
        assert_eq!(pkg.name, "github.com/BurntSushi/toml");
        assert_eq!(pkg.version.as_deref(), Some("v1.3.2"));
    }

    #[test]
    fn plain_job_command_is_not_attributed() {
        let p = proc_("/usr/bin/make", &["make", "-j4"], "/repo");
        assert_eq!(attribute(&p, &|_| None), None);
    }

    fn violation(n: u32, path: &str) -> Violation {
        Violation {
            rule: RuleId::FsWriteDenied,
            time: Timestamp(1_700_000_000_000 + u64::from(n)),
            action: Action::Blocked,
            process: ProcessInfo {
                pid: n,
                exe: "/usr/bin/touch".into(),
                ..Default::default()
            },
            target: Target::Path { path: path.into() },
            attribution: None,
            policy_rule: None,
            detail: String::new(),
            provenance: Provenance::SeccompNotify,
        }
    }

    #[test]
    fn a_storm_of_identical_denials_is_logged_once() {
        let mut agg = Aggregator::new(Roots::default());
        let logged = (0..100_000)
            .filter_map(|n| agg.observe(violation(n, "/etc/passwd")))
            .count();
        assert_eq!(logged, 1);
        let reps = agg.flush();
        assert_eq!(reps.len(), 1);
        assert_eq!(reps[0].count, 100_000);
        assert_eq!(agg.flush(), vec![], "flushed repeats are not repeated");
        assert_eq!(agg.counts_by_rule()[&RuleId::FsWriteDenied], 100_000);
    }

    #[test]
    fn distinct_violations_beyond_the_cap_are_counted_not_kept() {
        let mut agg = Aggregator::new(Roots::default());
        let n = MAX_DISTINCT as u32 + 10;
        let logged = (0..n)
            .filter_map(|i| agg.observe(violation(i, &format!("/f{i}"))))
            .count();
        assert_eq!(logged, MAX_DISTINCT);
        assert_eq!(agg.dropped_distinct, 10);
        assert_eq!(agg.counts_by_rule()[&RuleId::FsWriteDenied], u64::from(n));
    }

    #[test]
    fn distinct_targets_are_kept_apart_and_pids_do_not_matter() {
        let mut agg = Aggregator::new(Roots::default());
        assert!(agg.observe(violation(1, "/a")).is_some());
        assert!(agg.observe(violation(2, "/b")).is_some());
        assert!(agg.observe(violation(3, "/a")).is_none());
    }

    #[test]
    fn normalisation_hides_machine_specific_roots() {
        let roots = Roots {
            project: Some("/home/u/repo".into()),
            home: Some("/home/u".into()),
            session_tmp: Some("/tmp/vetto-1-2".into()),
        };
        assert_eq!(
            roots.normalise(Path::new("/home/u/repo/.git/hooks/x")),
            "$PROJECT/.git/hooks/x"
        );
        assert_eq!(
            roots.normalise(Path::new("/home/u/.ssh/id_rsa")),
            "~/.ssh/id_rsa"
        );
        assert_eq!(roots.normalise(Path::new("/tmp/vetto-1-2/f")), "$TMP/f");
        assert_eq!(roots.normalise(Path::new("/etc/shadow")), "/etc/shadow");
    }
}
