//! What the toolchain and agent presets ask for by name: registries found
//! from a tool's own configuration (`[network] discover`) and vetto-owned
//! caches (`[filesystem] caches`). Pure: what to ask the host and how to
//! read the answer. The asking (running a tool, reading a file, the
//! environment) is behind [`HostView`]; `session::tools` is the real one.
//!
//! No public package registry's host name is written here: each is
//! learned from the tool (`npm config get registry` prints npm's default,
//! pip's own definition of PyPI names PyPI's hosts, `go env GOPROXY` …),
//! with ONE exception, crates.io, whose hosts cargo prints nowhere
//! ([`CRATES_IO_DEFAULT`], see docs/presets.md). The agents' API hosts are
//! vendor endpoints, not registries: their defaults are named here
//! ([`Registry::default_api_host`]), an environment variable overrides.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::Origin;
use super::diag::list;

/// A source of registry (or API) hosts, named in `[network] discover`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Registry {
    Npm,
    Pnpm,
    Yarn,
    Pip,
    Uv,
    Poetry,
    Cargo,
    Go,
    Maven,
    Anthropic,
    Openai,
    Gemini,
}

/// A vetto-owned cache, named in `[filesystem] caches`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cache {
    Npm,
    Pnpm,
    Yarn,
    Pip,
    Uv,
    Poetry,
    Cargo,
    Go,
    Maven,
    Gradle,
}

const REGISTRIES: &[(Registry, &str)] = &[
    (Registry::Npm, "npm"),
    (Registry::Pnpm, "pnpm"),
    (Registry::Yarn, "yarn"),
    (Registry::Pip, "pip"),
    (Registry::Uv, "uv"),
    (Registry::Poetry, "poetry"),
    (Registry::Cargo, "cargo"),
    (Registry::Go, "go"),
    (Registry::Maven, "maven"),
    (Registry::Anthropic, "anthropic"),
    (Registry::Openai, "openai"),
    (Registry::Gemini, "gemini"),
];

const CACHES: &[(Cache, &str)] = &[
    (Cache::Npm, "npm"),
    (Cache::Pnpm, "pnpm"),
    (Cache::Yarn, "yarn"),
    (Cache::Pip, "pip"),
    (Cache::Uv, "uv"),
    (Cache::Poetry, "poetry"),
    (Cache::Cargo, "cargo"),
    (Cache::Go, "go"),
    (Cache::Maven, "maven"),
    (Cache::Gradle, "gradle"),
];

fn by_name<T: Copy>(table: &[(T, &'static str)], s: &str, what: &str) -> Result<T, String> {
    table
        .iter()
        .find(|(_, n)| *n == s)
        .map(|(t, _)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(_, n)| *n).collect();
            format!("unknown {what} `{s}`; expected one of {}", list(&names))
        })
}

fn name_of<T: PartialEq>(table: &[(T, &'static str)], t: &T) -> &'static str {
    table.iter().find(|(u, _)| u == t).map_or("?", |(_, n)| *n)
}

impl FromStr for Registry {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(REGISTRIES, s, "registry source")
    }
}
impl FromStr for Cache {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(CACHES, s, "cache")
    }
}
impl fmt::Display for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name_of(REGISTRIES, self))
    }
}
impl fmt::Display for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name_of(CACHES, self))
    }
}

/// `[network] discover = ["npm"]`, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoverRule {
    pub registry: Registry,
    pub origin: Origin,
}

/// `[filesystem] caches = ["cargo"]`, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheRule {
    pub cache: Cache,
    pub origin: Origin,
}

/// What discovery may ask of the host. Every answer is the user's own
/// configuration (their environment, their home directory), never the
/// project's: a project's `.npmrc` or `pyproject.toml` is the job's to
/// write, and must not choose where the job may connect.
pub trait HostView {
    /// A variable of the caller's environment.
    fn env(&self, name: &str) -> Option<String>;
    /// The names of the caller's variables.
    fn env_names(&self) -> Vec<String>;
    /// Run `program args…` (no shell, scrubbed environment with `pass`
    /// added, bounded output, a timeout); its stdout when it succeeded.
    fn run(&mut self, program: &str, args: &[&str], pass: &[&str]) -> Option<String>;
    /// A small regular file of the user's (bounded), if it exists.
    fn read(&mut self, path: &Path) -> Option<String>;
    /// The caller's home directory.
    fn home(&self) -> PathBuf;
}

/// One host discovery found, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    pub registry: Registry,
    pub host: String,
    pub port: u16,
    /// How it was learned: `npm config get registry`, `$PIP_INDEX_URL`, …
    pub how: String,
}

/// Everything one source yielded, with notes for what it could not learn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    pub found: Vec<Found>,
    /// What the job's own tool is told, in its own variables: the setting
    /// discovery read from a file the job cannot read (a masked `~/.npmrc`
    /// or `pip.conf`, Go's env file), so that the job's tool uses the
    /// registry that was allowed and not its public default. Derived from
    /// the parsed answer only (a remembered answer tells the same), and
    /// only when every URL in the value passed [`url_host`] (no user part,
    /// so no credential).
    pub env: Vec<(String, String)>,
    pub notes: Vec<String>,
}

impl Discovery {
    /// Tell the job's tool `name=value`, unless a URL in it has a query
    /// or a fragment (where tokens travel: `?token=…`); its host may still
    /// be allowed. A token in a URL's path is told as it is (see
    /// docs/presets.md, "What the job's tool is told").
    fn tell(&mut self, name: &str, value: &str) {
        if !told_safely(value) {
            self.notes.push(format!(
                "${name} is not set for the job: a URL in the setting has a query or a fragment (which may carry a token)"
            ));
            return;
        }
        if !self.env.iter().any(|(n, _)| n == name) {
            self.env.push((name.to_string(), value.to_string()));
        }
    }

    fn url(&mut self, registry: Registry, url: &str, how: &str) -> bool {
        match url_host(url) {
            Some((host, port)) => {
                if !self
                    .found
                    .iter()
                    .any(|f| f.host == host && f.port == port && f.registry == registry)
                {
                    self.found.push(Found {
                        registry,
                        host,
                        port,
                        how: how.to_string(),
                    });
                }
                true
            }
            None => {
                self.notes.push(format!(
                    "{registry}: {how} gave {}; nothing allowed for it",
                    rejected(url)
                ));
                false
            }
        }
    }
}

/// What may be said of a URL [`url_host`] rejected: its scheme and host
/// at most, never its user part, path, query or fragment (a credential
/// printed here would land in CI logs).
fn rejected(url: &str) -> String {
    let url = url.trim().trim_matches(|c| c == '"' || c == '\'');
    let Some((scheme, rest)) = url.split_once("://") else {
        return "no URL".into();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return "a URL with a user part (a credential), which was ignored".into();
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let short = |s: &str| crate::text::escape(&s.chars().take(64).collect::<String>()).into_owned();
    format!(
        "no usable http(s) URL ({}://{}/…)",
        short(scheme),
        short(host)
    )
}

/// A tool's output as discovery reads it and may remember it (the
/// the session's memo of answers): every URL's user part and its
/// query and fragment replaced by `-`, and the values of credential keys
/// (poetry's `config --list` merges `auth.toml` in: `http-basic.*`,
/// `pypi-token.*`) replaced by `-`. What discovery derives is the same
/// either way: a URL with a user part is still refused (its `@` is kept),
/// one with a query or fragment still not told (its `?` or `#` is kept),
/// and no parser reads a credential key. A URL ends at whatever any
/// parser splits on (white space, quotes, `,`, `|`, pip's `\n` escape),
/// so its authority here is never longer than the one [`url_host`]
/// judges, nor cut short at a character no parser splits on.
pub fn without_credentials(out: &str) -> String {
    let mut kept = String::with_capacity(out.len());
    for line in out.split_inclusive('\n') {
        if let Some((key, _)) = line.split_once('=')
            && is_credential_key(key)
        {
            kept.push_str(key);
            kept.push_str("= -");
            if line.ends_with('\n') {
                kept.push('\n');
            }
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("://") {
            let (before, after) = rest.split_at(at + 3);
            kept.push_str(before);
            let end = after
                .find(|c: char| c.is_whitespace() || "'\",|\\".contains(c))
                .unwrap_or(after.len());
            let (url, tail) = after.split_at(end);
            let (authority, path) = url.split_at(url.find(['/', '?', '#']).unwrap_or(url.len()));
            match authority.rfind('@') {
                Some(i) => {
                    kept.push('-');
                    kept.push_str(&authority[i..]);
                }
                None => kept.push_str(authority),
            }
            match path.find(['?', '#']) {
                Some(i) => {
                    kept.push_str(&path[..=i]);
                    kept.push('-');
                }
                None => kept.push_str(path),
            }
            rest = tail;
        }
        kept.push_str(rest);
    }
    kept
}

/// `http-basic.<name>.password`, `pypi-token.<name>`, npm's `_authToken`
/// and the like; never a URL with a `=` in it (`https://host/token=…/`,
/// a registry that takes its token in the path, is told as it is).
fn is_credential_key(key: &str) -> bool {
    if key.contains("://") {
        return false;
    }
    let key = key.trim().to_ascii_lowercase();
    let first = key.split('.').next().unwrap_or("");
    let last = key.rsplit(['.', ':', '/']).next().unwrap_or("");
    ["http-basic", "pypi-token"].contains(&first)
        || ["password", "token", "_auth", "_authtoken", "_password"].contains(&last)
}

/// Whether every URL in a setting's value (items split as the tools
/// split them: spaces, commas, `|`, `name=url`) has neither a query nor a
/// fragment.
fn told_safely(value: &str) -> bool {
    value
        .split([' ', ',', '|', '\n'])
        .filter(|item| item.contains("://"))
        .all(|item| {
            let (_, rest) = item.split_once("://").unwrap_or(("", item));
            !rest.contains(['?', '#'])
        })
}

/// The one public registry whose hosts vetto names itself: crates.io,
/// cargo's built-in default (a sparse index and a download host). Cargo
/// prints its default index nowhere on stable (`cargo config get` is
/// unstable), so this is written down; a source replacement in the user's
/// cargo configuration replaces it.
pub const CRATES_IO_DEFAULT: &[&str] = &["index.crates.io", "static.crates.io"];

/// The host (lower-case) and port of an `http(s)://` URL, strictly: a
/// name or address as `[network] allow` accepts, no user part.
pub fn url_host(url: &str) -> Option<(String, u16)> {
    let url = url.trim().trim_matches(|c| c == '"' || c == '\'');
    let url = url.strip_prefix("sparse+").unwrap_or(url);
    let url = url.strip_prefix("registry+").unwrap_or(url);
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.contains('@') || authority.is_empty() {
        return None;
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => (h, p.parse::<u16>().ok()?),
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let (host, _) = super::host_name::parse_host(host).ok()?;
    (!host.contains('*')).then_some((host, port))
}

/// The variables a discovery command may see besides `PATH`, `HOME` and
/// the locale: the tool's own configuration variables.
const NPM_VARS: &[&str] = &[
    "NPM_CONFIG_REGISTRY",
    "npm_config_registry",
    "NPM_CONFIG_USERCONFIG",
    "npm_config_userconfig",
    "NPM_CONFIG_GLOBALCONFIG",
    "npm_config_globalconfig",
    "XDG_CONFIG_HOME",
];
const PIP_VARS: &[&str] = &[
    "PIP_CONFIG_FILE",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "VIRTUAL_ENV",
];
const POETRY_VARS: &[&str] = &["POETRY_CONFIG_DIR", "XDG_CONFIG_HOME"];
const GO_VARS: &[&str] = &["GOPROXY", "GOSUMDB", "GOENV", "GOFLAGS", "XDG_CONFIG_HOME"];

/// Ask the host what `registry` is configured for.
pub fn discover(registry: Registry, host: &mut dyn HostView) -> Discovery {
    let mut d = Discovery::default();
    match registry {
        Registry::Npm => npm_like(
            &mut d,
            registry,
            host,
            "npm",
            &[(&["config", "get", "registry"], Some(NPM_REGISTRY_VAR))],
        ),
        // pnpm reads npm's `npm_config_*` variables.
        Registry::Pnpm => npm_like(
            &mut d,
            registry,
            host,
            "pnpm",
            &[(&["config", "get", "registry"], Some(NPM_REGISTRY_VAR))],
        ),
        // Berry's settings are `YARN_` + the setting in upper snake case.
        // Classic reads every `yarn_*` variable as a setting of its own
        // before its `.yarnrc` files (and a project's `.yarnrc` cannot
        // override it); berry has no `registry` setting, which is why the
        // variable is told only when classic answered.
        Registry::Yarn => npm_like(
            &mut d,
            registry,
            host,
            "yarn",
            &[
                (
                    &["config", "get", "npmRegistryServer"],
                    Some("YARN_NPM_REGISTRY_SERVER"),
                ),
                (&["config", "get", "registry"], Some("YARN_REGISTRY")),
            ],
        ),
        Registry::Pip => pip(&mut d, host),
        Registry::Uv => uv(&mut d, host),
        Registry::Poetry => poetry(&mut d, host),
        Registry::Cargo => cargo(&mut d, host),
        Registry::Go => go(&mut d, host),
        Registry::Maven => maven(&mut d, host),
        Registry::Anthropic | Registry::Openai | Registry::Gemini => api(&mut d, registry, host),
    }
    d
}

/// npm's (and pnpm's) variable for `registry`.
pub const NPM_REGISTRY_VAR: &str = "npm_config_registry";

/// Each question in turn (its arguments, and the variable that tells the
/// job's tool the answer); the first that prints a URL is the answer.
type Tries<'a> = &'a [(&'a [&'a str], Option<&'a str>)];

fn npm_like(
    d: &mut Discovery,
    registry: Registry,
    host: &mut dyn HostView,
    program: &str,
    tries: Tries<'_>,
) {
    for (args, var) in tries {
        if let Some(out) = host.run(program, args, NPM_VARS) {
            let line = out.lines().next().unwrap_or("").trim();
            if url_host(line).is_some() {
                d.url(registry, line, &format!("{program} {}", args.join(" ")));
                if let Some(var) = var {
                    d.tell(var, line);
                }
                return;
            }
        }
    }
    d.notes.push(format!(
        "{registry}: `{program}` gave no registry (is it installed?); nothing allowed for it"
    ));
}

/// PyPI's hosts as pip itself defines them (its index and the host the
/// index's files are served from).
fn pypi_from_pip(d: &mut Discovery, registry: Registry, host: &mut dyn HostView) {
    const CODE: &str = "from pip._internal.models.index import PyPI\nprint(PyPI.simple_url)\nprint('https://' + PyPI.file_storage_domain + '/')";
    match host.run("python3", &["-I", "-c", CODE], &[]) {
        Some(out) => {
            for line in out.lines().take(2) {
                d.url(registry, line, "pip's definition of PyPI (the default index)");
            }
        }
        None => d.notes.push(format!(
            "{registry}: no index configured and pip (python3 -m pip) cannot name its default; nothing allowed for it"
        )),
    }
}

/// Space- or comma-separated URLs of one variable (`PIP_EXTRA_INDEX_URL`,
/// `UV_INDEX="name=url …"`).
fn env_urls(d: &mut Discovery, registry: Registry, host: &dyn HostView, var: &str) -> bool {
    let Some(v) = host.env(var).filter(|v| !v.trim().is_empty()) else {
        return false;
    };
    for item in v.split([' ', ',', '\n']).filter(|s| !s.is_empty()) {
        let url = item.split_once('=').map_or(item, |(_, u)| u);
        d.url(registry, url, &format!("${var}"));
    }
    true
}

/// pip's keys that `pip config list` may print, and the variable that
/// carries each to the job's pip (`PIP_<KEY>`, space-separated lists as
/// pip reads them).
const PIP_KEYS: &[(&str, &str)] = &[
    ("index-url", "PIP_INDEX_URL"),
    ("extra-index-url", "PIP_EXTRA_INDEX_URL"),
    ("trusted-host", "PIP_TRUSTED_HOST"),
];

fn pip(d: &mut Discovery, host: &mut dyn HostView) {
    let r = Registry::Pip;
    let mut index = env_urls(d, r, host, "PIP_INDEX_URL");
    env_urls(d, r, host, "PIP_EXTRA_INDEX_URL");
    if !index && let Some(out) = host.run("python3", &["-m", "pip", "config", "list"], PIP_VARS) {
        // `global.index-url='https://…'`; each key's values, per section.
        let mut values: Vec<(&str, Vec<String>)> = Vec::new();
        for line in out.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let key = key.rsplit('.').next().unwrap_or("");
            // A multi-line value is printed with `\n` escapes.
            let items: Vec<String> = value
                .trim()
                .trim_matches('\'')
                .replace("\\n", " ")
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let Some((key, _)) = PIP_KEYS.iter().find(|(k, _)| *k == key) else {
                continue;
            };
            let mut clean = true;
            for item in &items {
                if *key == "trusted-host" {
                    clean &= url_host(&format!("http://{item}/")).is_some();
                } else {
                    let ok = d.url(r, item, "python3 -m pip config list");
                    index |= ok && *key == "index-url";
                    clean &= ok;
                }
            }
            if !clean || items.is_empty() {
                values.push((key, Vec::new()));
            } else {
                values.push((key, items));
            }
        }
        for (key, var) in PIP_KEYS {
            let mut seen: Vec<&Vec<String>> = values
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v)
                .collect();
            seen.dedup();
            match seen.as_slice() {
                [] => {}
                [one] if !one.is_empty() => d.tell(var, &one.join(" ")),
                _ => d.notes.push(format!(
                    "pip: the configuration's `{key}` is not one credential-free value for every command; ${var} not set for the job"
                )),
            }
        }
    }
    if !index {
        pypi_from_pip(d, r, host);
    }
}

fn uv(d: &mut Discovery, host: &mut dyn HostView) {
    let r = Registry::Uv;
    let mut index = false;
    for var in ["UV_DEFAULT_INDEX", "UV_INDEX_URL"] {
        index |= env_urls(d, r, host, var);
    }
    for var in ["UV_INDEX", "UV_EXTRA_INDEX_URL"] {
        env_urls(d, r, host, var);
    }
    // A default index of the environment outranks the file's, for the
    // host's uv and the job's alike: the file's is not told.
    let env_default = index;
    let config_home = host
        .env("XDG_CONFIG_HOME")
        .filter(|v| v.starts_with('/'))
        .map_or_else(|| host.home().join(".config"), PathBuf::from);
    let file = host
        .env("UV_CONFIG_FILE")
        .filter(|v| v.starts_with('/'))
        .map_or_else(|| config_home.join("uv/uv.toml"), PathBuf::from);
    if let Some(text) = host.read(&file)
        && let Ok(doc) = text.parse::<toml::Table>()
    {
        let how = file.display().to_string();
        let s = |v: &toml::Value| v.as_str().map(str::to_string);
        if let Some(u) = doc.get("index-url").and_then(s)
            && d.url(r, &u, &how)
        {
            index = true;
            if !env_default {
                d.tell("UV_INDEX_URL", &u);
            }
        }
        let extra: Vec<String> = doc
            .get("extra-index-url")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(s)
            .collect();
        let mut clean = true;
        for u in &extra {
            clean &= d.url(r, u, &how);
        }
        if clean && !extra.is_empty() {
            d.tell("UV_EXTRA_INDEX_URL", &extra.join(" "));
        }
        // `[[index]]` entries travel as `UV_DEFAULT_INDEX` and `UV_INDEX`
        // (`name=url …`) only when they say no more than a name, a URL
        // and `default` (`explicit`, `authenticate`, … have no variable).
        let (mut default_url, mut named, mut plain) = (None, Vec::new(), true);
        for entry in doc
            .get("index")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
        {
            plain &= entry.as_table().is_some_and(|t| {
                t.keys()
                    .all(|k| ["name", "url", "default"].contains(&k.as_str()))
            });
            let Some(u) = entry.get("url").and_then(s) else {
                plain = false;
                continue;
            };
            let default = entry.get("default").and_then(toml::Value::as_bool) == Some(true);
            let ok = d.url(r, &u, &how);
            index |= ok && default;
            plain &= ok;
            let name = entry.get("name").and_then(s);
            plain &= name
                .as_deref()
                .is_none_or(|n| !n.is_empty() && !n.contains(['=', ' ']));
            if default {
                default_url = Some(u);
            } else {
                named.push(name.map_or(u.clone(), |n| format!("{n}={u}")));
            }
        }
        if plain {
            if let Some(u) = default_url.filter(|_| !env_default) {
                d.tell("UV_DEFAULT_INDEX", &u);
            }
            if !named.is_empty() {
                d.tell("UV_INDEX", &named.join(" "));
            }
        } else {
            d.notes.push(format!(
                "uv: an `[[index]]` of {how} says more than a name, a URL and `default`; the job's uv is not told its indexes"
            ));
        }
    }
    if !index {
        pypi_from_pip(d, r, host);
    }
}

fn poetry(d: &mut Discovery, host: &mut dyn HostView) {
    let r = Registry::Poetry;
    if let Some(out) = host.run("poetry", &["config", "--list"], POETRY_VARS) {
        // `repositories.private.url = "https://…"`
        for line in out.lines() {
            if let Some((key, value)) = line.split_once('=')
                && key.trim().starts_with("repositories.")
                && key.trim().ends_with(".url")
            {
                d.url(r, value.trim(), "poetry config --list");
            }
        }
    }
    pypi_from_pip(d, r, host);
}

fn cargo(d: &mut Discovery, host: &mut dyn HostView) {
    let r = Registry::Cargo;
    let cargo_home = host
        .env("CARGO_HOME")
        .filter(|v| v.starts_with('/'))
        .map_or_else(|| host.home().join(".cargo"), PathBuf::from);
    let mut replaced = false;
    for name in ["config.toml", "config"] {
        let path = cargo_home.join(name);
        let Some(text) = host.read(&path) else {
            continue;
        };
        let Ok(doc) = text.parse::<toml::Table>() else {
            d.notes.push(format!(
                "cargo: {} is not valid TOML; not read",
                path.display()
            ));
            continue;
        };
        let how = path.display().to_string();
        let table = |v: Option<&toml::Value>| v.and_then(toml::Value::as_table).cloned();
        let sources = table(doc.get("source")).unwrap_or_default();
        if let Some(to) = sources
            .get("crates-io")
            .and_then(|s| s.get("replace-with"))
            .and_then(toml::Value::as_str)
        {
            replaced = true;
            match sources
                .get(to)
                .and_then(|s| s.get("registry"))
                .and_then(toml::Value::as_str)
            {
                Some(u) => {
                    d.url(r, u, &format!("{how} (crates-io replaced with `{to}`)"));
                }
                // A local registry or a vendored directory: no network.
                None => d.notes.push(format!(
                    "cargo: crates-io is replaced with `{}` (no registry URL: local or vendored)",
                    crate::text::escape(to)
                )),
            }
        }
        for (_, reg) in table(doc.get("registries")).unwrap_or_default() {
            if let Some(u) = reg.get("index").and_then(toml::Value::as_str) {
                d.url(r, u, &how);
            }
        }
        break;
    }
    // CARGO_REGISTRIES_<NAME>_INDEX: the environment's registries.
    for var in host_env_names(host, "CARGO_REGISTRIES_") {
        if var.ends_with("_INDEX") {
            env_urls(d, r, host, &var);
        }
    }
    if !replaced {
        for h in CRATES_IO_DEFAULT {
            d.url(
                r,
                &format!("https://{h}/"),
                "cargo's default registry (crates.io; see docs/presets.md)",
            );
        }
    }
}

/// The names of the caller's variables that start with `prefix`.
fn host_env_names(host: &dyn HostView, prefix: &str) -> Vec<String> {
    host.env_names()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// What `go env` is asked, in order: the proxy and checksum database
/// (their hosts are allowed), and the module routing that decides which
/// modules go where, so the job's `go` behaves as the host's would.
pub const GO_ASKED: &[&str] = &[
    "GOPROXY",
    "GOSUMDB",
    "GOPRIVATE",
    "GONOPROXY",
    "GONOSUMDB",
    "GOINSECURE",
];

fn go(d: &mut Discovery, host: &mut dyn HostView) {
    let r = Registry::Go;
    let args: Vec<&str> = std::iter::once("env")
        .chain(GO_ASKED.iter().copied())
        .collect();
    let Some(out) = host.run("go", &args, GO_VARS) else {
        d.notes
            .push("go: `go env` gave nothing (is Go installed?); nothing allowed for it".into());
        return;
    };
    let mut lines = out.lines().map(str::trim);
    let proxy = lines.next().unwrap_or("");
    let mut clean = true;
    for entry in proxy.split([',', '|']).map(str::trim) {
        match entry {
            "direct" => d.notes.push(
                "go: GOPROXY includes `direct` (modules from their own hosts): those hosts are not discovered; name them with --allow-domain".into(),
            ),
            "off" | "" => {}
            url => {
                clean &= d.url(r, url, "go env GOPROXY");
            }
        }
    }
    if clean && !proxy.is_empty() {
        d.tell("GOPROXY", proxy);
    }
    // `sum.golang.org`, or `name+key https://url`.
    let sumdb = lines.next().unwrap_or("");
    if sumdb == "off" {
        d.tell("GOSUMDB", sumdb);
    } else if !sumdb.is_empty() {
        let url = sumdb
            .split_whitespace()
            .nth(1)
            .map(str::to_string)
            .unwrap_or_else(|| format!("https://{}/", sumdb.split('+').next().unwrap_or("")));
        if d.url(r, &url, "go env GOSUMDB") {
            d.tell("GOSUMDB", sumdb);
        }
    }
    // Module path patterns (`*.corp.example,rsc.io/private`): no URL.
    for name in &GO_ASKED[2..] {
        let value = lines.next().unwrap_or("");
        if !value.is_empty() && !value.contains("://") && !value.contains('@') {
            d.tell(name, value);
        }
    }
}

/// Every `<url>` of the user's Maven settings (mirrors, repositories,
/// plugin repositories). The settings file itself stays masked from the
/// job (it holds server passwords); vetto reads it outside the sandbox.
fn maven(d: &mut Discovery, host: &mut dyn HostView) {
    let r = Registry::Maven;
    let path = host.home().join(".m2/settings.xml");
    let Some(text) = host.read(&path) else {
        d.notes.push(format!(
            "maven: no {} names a mirror or repository; Maven's built-in default is not discovered: name it with --allow-domain",
            path.display()
        ));
        return;
    };
    let how = path.display().to_string();
    let mut rest = text.as_str();
    let mut any = false;
    while let Some(at) = rest.find("<url>") {
        rest = &rest[at + 5..];
        let Some(end) = rest.find("</url>") else {
            break;
        };
        any |= d.url(r, &rest[..end], &how);
        rest = &rest[end..];
    }
    if !any {
        d.notes
            .push(format!("maven: {how} names no repository URL"));
    }
}

impl Registry {
    /// An agent's vendor API host when no variable overrides it, and the
    /// variables that do (the SDKs' own names).
    pub fn default_api_host(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            Registry::Anthropic => Some(("api.anthropic.com", &["ANTHROPIC_BASE_URL"])),
            Registry::Openai => Some(("api.openai.com", &["OPENAI_BASE_URL", "OPENAI_API_BASE"])),
            Registry::Gemini => Some((
                "generativelanguage.googleapis.com",
                &["GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL"],
            )),
            _ => None,
        }
    }
}

fn api(d: &mut Discovery, registry: Registry, host: &mut dyn HostView) {
    let Some((default, vars)) = registry.default_api_host() else {
        return;
    };
    for var in vars {
        if env_urls(d, registry, host, var) {
            return;
        }
    }
    d.url(
        registry,
        &format!("https://{default}/"),
        "the vendor's default API host",
    );
}

// ───────────────────────────── caches ─────────────────────────────

/// The host's own caches (relative to the home directory, at the tools'
/// default places) that a vetto-owned cache replaces: a denied write in
/// one is answered with the cache, never with the host's directory, which
/// a later build outside the sandbox would trust (docs/caches.md).
const HOST_CACHES: &[(&str, Cache)] = &[
    (".cargo/registry", Cache::Cargo),
    (".cargo/git", Cache::Cargo),
    (".npm", Cache::Npm),
    (".pnpm-store", Cache::Pnpm),
    (".local/share/pnpm", Cache::Pnpm),
    (".cache/pnpm", Cache::Pnpm),
    (".cache/yarn", Cache::Yarn),
    (".yarn/berry", Cache::Yarn),
    (".cache/pip", Cache::Pip),
    (".cache/uv", Cache::Uv),
    (".cache/pypoetry", Cache::Poetry),
    ("go/pkg/mod", Cache::Go),
    (".cache/go-build", Cache::Go),
    (".m2/repository", Cache::Maven),
    (".gradle", Cache::Gradle),
];

/// The vetto-owned cache that stands for the host cache `path` lies in,
/// if it lies in one ([`HOST_CACHES`]).
pub fn host_cache_of(path: &Path, home: &Path) -> Option<Cache> {
    let rel = path.strip_prefix(home).ok()?;
    HOST_CACHES
        .iter()
        .find(|(dir, _)| rel.starts_with(dir))
        .map(|(_, c)| *c)
}

/// How a sandboxed tool is pointed at its vetto-owned cache `dir`: the
/// variables to set (`None` value: cannot be expressed, with why). `env`
/// is the caller's environment (for `MAVEN_OPTS`, which is appended to).
pub fn cache_env(
    cache: Cache,
    dir: &Path,
    env: &dyn HostView,
) -> Result<Vec<(String, String)>, String> {
    let p = |sub: &str| {
        if sub.is_empty() {
            dir.display().to_string()
        } else {
            dir.join(sub).display().to_string()
        }
    };
    let pairs: Vec<(&str, String)> = match cache {
        // npm reads either spelling; both are set so a passed one of the
        // user's cannot win.
        Cache::Npm => vec![("npm_config_cache", p("")), ("NPM_CONFIG_CACHE", p(""))],
        Cache::Pnpm => vec![
            ("npm_config_store_dir", p("store")),
            ("NPM_CONFIG_STORE_DIR", p("store")),
            ("npm_config_cache_dir", p("cache")),
            ("NPM_CONFIG_CACHE_DIR", p("cache")),
        ],
        Cache::Yarn => vec![
            ("YARN_CACHE_FOLDER", p("cache")),
            ("YARN_GLOBAL_FOLDER", p("global")),
        ],
        Cache::Pip => vec![("PIP_CACHE_DIR", p(""))],
        Cache::Uv => vec![("UV_CACHE_DIR", p(""))],
        Cache::Poetry => vec![("POETRY_CACHE_DIR", p(""))],
        Cache::Cargo => vec![("CARGO_HOME", p(""))],
        Cache::Go => vec![("GOMODCACHE", p("mod")), ("GOCACHE", p("build"))],
        Cache::Gradle => vec![("GRADLE_USER_HOME", p(""))],
        Cache::Maven => {
            let repo = p("repository");
            if repo.contains(char::is_whitespace) {
                return Err(format!(
                    "the cache path {repo} has whitespace, which MAVEN_OPTS cannot carry"
                ));
            }
            let opts = match env.env("MAVEN_OPTS").filter(|o| !o.trim().is_empty()) {
                Some(o) => format!("{o} -Dmaven.repo.local={repo}"),
                None => format!("-Dmaven.repo.local={repo}"),
            };
            vec![("MAVEN_OPTS", opts)]
        }
    };
    Ok(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// Files of the user's own tool configuration copied into the cache at
/// each session start (the tool no longer reads them from its usual home):
/// (from, relative to the home; name in the cache). Credentials are never
/// among them (`~/.cargo/credentials.toml` stays behind, masked).
pub fn cache_config_files(cache: Cache) -> &'static [(&'static str, &'static str)] {
    match cache {
        Cache::Cargo => &[
            (".cargo/config.toml", "config.toml"),
            (".cargo/config", "config"),
        ],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Default)]
    struct Fake {
        env: BTreeMap<String, String>,
        runs: BTreeMap<String, String>,
        files: BTreeMap<PathBuf, String>,
        asked: Vec<String>,
    }

    impl HostView for Fake {
        fn env(&self, name: &str) -> Option<String> {
            self.env.get(name).cloned()
        }
        fn env_names(&self) -> Vec<String> {
            self.env.keys().cloned().collect()
        }
        fn run(&mut self, program: &str, args: &[&str], _pass: &[&str]) -> Option<String> {
            let line = format!("{program} {}", args.join(" "));
            self.asked.push(line.clone());
            self.runs.get(&line).cloned()
        }
        fn read(&mut self, path: &Path) -> Option<String> {
            self.files.get(path).cloned()
        }
        fn home(&self) -> PathBuf {
            PathBuf::from("/h")
        }
    }

    fn hosts(d: &Discovery) -> Vec<String> {
        d.found
            .iter()
            .map(|f| format!("{}:{}", f.host, f.port))
            .collect()
    }

    #[test]
    fn urls_are_read_strictly() {
        assert_eq!(
            url_host("https://r.example/"),
            Some(("r.example".into(), 443))
        );
        assert_eq!(
            url_host("http://R.Example:8081/x"),
            Some(("r.example".into(), 8081))
        );
        assert_eq!(
            url_host("sparse+https://idx.example/"),
            Some(("idx.example".into(), 443))
        );
        for bad in [
            "https://u:p@r.example/",
            "ftp://r.example/",
            "r.example",
            "https://*.example/",
            "https:///x",
            "https://r.example:99999/",
            "https://r ex/",
        ] {
            assert_eq!(url_host(bad), None, "{bad}");
        }
    }

    #[test]
    fn npm_registry_is_what_npm_says_and_the_project_is_never_asked() {
        let mut f = Fake::default();
        f.runs.insert(
            "npm config get registry".into(),
            "https://mirror.example/npm/\n".into(),
        );
        let d = discover(Registry::Npm, &mut f);
        assert_eq!(hosts(&d), ["mirror.example:443"]);
        assert_eq!(d.found[0].how, "npm config get registry");
        let mut missing = Fake::default();
        let d = discover(Registry::Npm, &mut missing);
        assert!(d.found.is_empty());
        assert!(d.notes[0].contains("nothing allowed"), "{:?}", d.notes);
    }

    #[test]
    fn pip_index_from_env_then_config_then_pips_own_default() {
        let mut f = Fake::default();
        f.env
            .insert("PIP_INDEX_URL".into(), "https://pi.example/simple".into());
        assert_eq!(hosts(&discover(Registry::Pip, &mut f)), ["pi.example:443"]);
        assert!(!f.asked.iter().any(|a| a.contains("PyPI")));

        let mut f = Fake::default();
        f.runs.insert(
            "python3 -m pip config list".into(),
            "global.index-url='https://cfg.example/simple'\n".into(),
        );
        assert_eq!(hosts(&discover(Registry::Pip, &mut f)), ["cfg.example:443"]);

        let mut f = Fake::default();
        let code = f.asked.len();
        f.runs.insert(
            format!(
                "python3 -I -c {}",
                "from pip._internal.models.index import PyPI\nprint(PyPI.simple_url)\nprint('https://' + PyPI.file_storage_domain + '/')"
            ),
            "https://idx.example/simple\nhttps://files.example/\n".into(),
        );
        assert_eq!(code, 0);
        assert_eq!(
            hosts(&discover(Registry::Pip, &mut f)),
            ["idx.example:443", "files.example:443"]
        );
    }

    #[test]
    fn cargo_source_replacement_replaces_the_default_registry() {
        let mut f = Fake::default();
        f.files.insert(
            PathBuf::from("/h/.cargo/config.toml"),
            "[source.crates-io]\nreplace-with = 'm'\n[source.m]\nregistry = 'sparse+https://crates.mirror.example/index/'\n".into(),
        );
        let d = discover(Registry::Cargo, &mut f);
        assert_eq!(hosts(&d), ["crates.mirror.example:443"]);
        let mut plain = Fake::default();
        plain.env.insert(
            "CARGO_REGISTRIES_CORP_INDEX".into(),
            "sparse+https://corp.example/".into(),
        );
        let d = discover(Registry::Cargo, &mut plain);
        assert_eq!(d.found.len(), 1 + CRATES_IO_DEFAULT.len());
        assert_eq!(d.found[0].host, "corp.example");
    }

    #[test]
    fn go_proxy_list_and_sumdb() {
        let mut f = Fake::default();
        f.runs.insert(
            "go env GOPROXY GOSUMDB GOPRIVATE GONOPROXY GONOSUMDB GOINSECURE".into(),
            "https://gp.example,direct\nsum.example\n".into(),
        );
        let d = discover(Registry::Go, &mut f);
        assert_eq!(hosts(&d), ["gp.example:443", "sum.example:443"]);
        assert!(d.notes[0].contains("direct"));
    }

    fn told(d: &Discovery) -> Vec<String> {
        d.env.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    /// The job cannot read the file the setting came from (a masked
    /// `~/.npmrc` or `pip.conf`, Go's env file): it is told in its tool's
    /// own variables, as the tool printed it.
    #[test]
    fn the_jobs_tool_is_told_what_was_discovered() {
        let mut f = Fake::default();
        f.runs.insert(
            "npm config get registry".into(),
            "http://mirror.example:4873/\n".into(),
        );
        let d = discover(Registry::Npm, &mut f);
        assert_eq!(
            told(&d),
            ["npm_config_registry=http://mirror.example:4873/"]
        );

        let mut f = Fake::default();
        f.runs.insert(
            "yarn config get npmRegistryServer".into(),
            "https://y.example/\n".into(),
        );
        assert_eq!(
            told(&discover(Registry::Yarn, &mut f)),
            ["YARN_NPM_REGISTRY_SERVER=https://y.example/"]
        );
        let mut classic = Fake::default();
        classic.runs.insert(
            "yarn config get registry".into(),
            "https://y.example/\n".into(),
        );
        let d = discover(Registry::Yarn, &mut classic);
        assert_eq!(hosts(&d), ["y.example:443"]);
        assert_eq!(told(&d), ["YARN_REGISTRY=https://y.example/"]);

        let mut f = Fake::default();
        f.runs.insert(
            "python3 -m pip config list".into(),
            "global.index-url='http://pi.example:8080/simple'\n\
             global.extra-index-url='\\nhttps://a.example/simple\\nhttps://b.example/simple'\n\
             global.trusted-host='pi.example'\n"
                .into(),
        );
        let d = discover(Registry::Pip, &mut f);
        assert_eq!(
            told(&d),
            [
                "PIP_INDEX_URL=http://pi.example:8080/simple",
                "PIP_EXTRA_INDEX_URL=https://a.example/simple https://b.example/simple",
                "PIP_TRUSTED_HOST=pi.example",
            ]
        );
        // One index for `install`, another for everything else: one
        // variable cannot say that.
        let mut f = Fake::default();
        f.runs.insert(
            "python3 -m pip config list".into(),
            "global.index-url='https://a.example/simple'\ninstall.index-url='https://b.example/simple'\n".into(),
        );
        let d = discover(Registry::Pip, &mut f);
        assert!(d.env.is_empty(), "{:?}", d.env);
        assert!(
            d.notes.iter().any(|n| n.contains("PIP_INDEX_URL")),
            "{:?}",
            d.notes
        );

        let mut f = Fake::default();
        f.runs.insert(
            "go env GOPROXY GOSUMDB GOPRIVATE GONOPROXY GONOSUMDB GOINSECURE".into(),
            "http://gp.example:3000,direct\noff\n*.corp.example\n\n\nold.corp.example\n".into(),
        );
        let d = discover(Registry::Go, &mut f);
        assert_eq!(
            told(&d),
            [
                "GOPROXY=http://gp.example:3000,direct",
                "GOSUMDB=off",
                "GOPRIVATE=*.corp.example",
                "GOINSECURE=old.corp.example",
            ]
        );

        let mut f = Fake::default();
        f.files.insert(
            PathBuf::from("/h/.config/uv/uv.toml"),
            "extra-index-url = ['https://x.example/simple']\n\
             [[index]]\nname = 'corp'\nurl = 'https://corp.example/simple'\n\
             [[index]]\nurl = 'https://d.example/simple'\ndefault = true\n"
                .into(),
        );
        let d = discover(Registry::Uv, &mut f);
        assert_eq!(
            told(&d),
            [
                "UV_EXTRA_INDEX_URL=https://x.example/simple",
                "UV_DEFAULT_INDEX=https://d.example/simple",
                "UV_INDEX=corp=https://corp.example/simple",
            ]
        );
        f.env
            .insert("UV_DEFAULT_INDEX".into(), "https://e.example/simple".into());
        let d = discover(Registry::Uv, &mut f);
        assert!(
            !d.env.iter().any(|(k, _)| k == "UV_DEFAULT_INDEX"),
            "{:?}",
            d.env
        );
    }

    /// A remembered answer is the tool's output without its credentials
    /// (a token copied out of a masked `~/.npmrc` or poetry's `auth.toml`
    /// into vetto's memo would be one more copy to steal), and discovery
    /// finds and tells from it exactly what it does from the output itself.
    #[test]
    fn a_remembered_answer_keeps_no_credential_and_means_the_same() {
        let s = "hunter2";
        let cases: Vec<(Registry, &str, String)> = vec![
            (
                Registry::Npm,
                "npm config get registry",
                format!("https://u:{s}@npm.example/\n"),
            ),
            (
                Registry::Npm,
                "npm config get registry",
                format!("https://npm.example/?token={s}\n"),
            ),
            (
                Registry::Npm,
                "npm config get registry",
                format!("https://u;{s}<>@npm.example/\n"),
            ),
            (
                Registry::Npm,
                "npm config get registry",
                "https://npm.example/token=T0KEN/\n".into(),
            ),
            (
                Registry::Npm,
                "npm config get registry",
                "https://npm.example:4873/\n".into(),
            ),
            (
                Registry::Yarn,
                "yarn config get registry",
                format!("https://y.example/#{s}\n"),
            ),
            (
                Registry::Pip,
                "python3 -m pip config list",
                format!(
                    "global.index-url='https://u:{s}@pi.example/simple'\n\
                     install.index-url='https://pi.example/simple?k={s}'\n\
                     global.extra-index-url='\\nhttps://a.example/simple\\nhttps://{s}@b.example/simple'\n\
                     global.trusted-host='pi.example'\n"
                ),
            ),
            (
                Registry::Pip,
                "python3 -m pip config list",
                "global.index-url='https://pi.example/simple'\nglobal.trusted-host='pi.example'\n"
                    .into(),
            ),
            (
                Registry::Go,
                "go env GOPROXY GOSUMDB GOPRIVATE GONOPROXY GONOSUMDB GOINSECURE",
                format!(
                    "https://ok.example,https://u:{s}@gp.example|direct\nsum.example+k https://s.example/?{s}\n\n\n\n\n"
                ),
            ),
            (
                Registry::Poetry,
                "poetry config --list",
                format!(
                    "cache-dir = \"/h/.cache/pypoetry\"\n\
                     http-basic.private.username = \"u\"\n\
                     http-basic.private.password = \"{s}\"\n\
                     pypi-token.pypi = \"pypi-{s}\"\n\
                     repositories.private.url = \"https://p.example/simple/\"\n\
                     repositories.token.url = \"https://u:{s}@t.example/\"\n"
                ),
            ),
        ];
        for (registry, asked, out) in cases {
            let kept = without_credentials(&out);
            assert!(!kept.contains(s), "{kept}");
            let run = |text: &str| {
                let mut f = Fake::default();
                f.runs.insert(asked.into(), text.into());
                f.runs.insert(
                    "python3 -I -c from pip._internal.models.index import PyPI\nprint(PyPI.simple_url)\nprint('https://' + PyPI.file_storage_domain + '/')".into(),
                    "https://pypi.example/simple/\nhttps://files.example/\n".into(),
                );
                let d = discover(registry, &mut f);
                (hosts(&d), told(&d))
            };
            assert_eq!(run(&out), run(&kept), "{out}");
            assert_eq!(without_credentials(&kept), kept, "not settled: {kept}");
        }
        // A registry's token in the path cannot be told from a path: it is
        // kept, as it is told (docs/presets.md).
        let path = "https://dl.example/T0KEN/org/repo/\n";
        assert_eq!(without_credentials(path), path);
    }

    /// A URL with a user part (a token, `user:password`) is never allowed
    /// and never put into the job's environment, nor is a list that holds
    /// one among clean URLs.
    #[test]
    fn a_url_with_credentials_never_reaches_the_jobs_environment() {
        let secret = "hunter2";
        let mut all = Vec::new();
        let mut f = Fake::default();
        f.runs.insert(
            "npm config get registry".into(),
            format!("https://u:{secret}@npm.example/\n"),
        );
        all.push(discover(Registry::Npm, &mut f));
        let mut f = Fake::default();
        f.runs.insert(
            "python3 -m pip config list".into(),
            format!(
                "global.index-url='https://u:{secret}@pi.example/simple'\n\
                 global.extra-index-url='https://ok.example/simple https://{secret}@pi.example/simple'\n"
            ),
        );
        all.push(discover(Registry::Pip, &mut f));
        let mut f = Fake::default();
        f.runs.insert(
            "go env GOPROXY GOSUMDB GOPRIVATE GONOPROXY GONOSUMDB GOINSECURE".into(),
            format!(
                "https://ok.example,https://u:{secret}@gp.example,direct\nsum.example+k https://{secret}@s.example/\nhttps://u:{secret}@x.example\n"
            ),
        );
        all.push(discover(Registry::Go, &mut f));
        let mut f = Fake::default();
        f.files.insert(
            PathBuf::from("/h/.config/uv/uv.toml"),
            format!(
                "index-url = 'https://u:{secret}@uv.example/simple'\n\
                 extra-index-url = ['https://ok.example/', 'https://{secret}@uv.example/']\n\
                 [[index]]\nurl = 'https://u:{secret}@i.example/'\n"
            ),
        );
        all.push(discover(Registry::Uv, &mut f));
        let mut f = Fake::default();
        f.env.insert(
            "PIP_INDEX_URL".into(),
            format!("https://__token__:{secret}@pi.example/simple"),
        );
        all.push(discover(Registry::Pip, &mut f));
        for d in &all {
            for (k, v) in &d.env {
                assert!(!v.contains(secret), "{k}={v}");
            }
            for f in &d.found {
                assert!(!f.host.contains(secret), "{f:?}");
            }
            // Nor is it printed: a note names no rejected URL's user part.
            for n in &d.notes {
                assert!(!n.contains(secret), "{n}");
            }
        }
        assert!(
            all.iter().all(|d| d.env.is_empty()),
            "{:?}",
            all.iter().map(|d| &d.env).collect::<Vec<_>>()
        );
        assert!(
            all.last().is_some_and(|d| d
                .notes
                .iter()
                .any(|n| n.contains("a user part (a credential)"))),
            "{:?}",
            all.last().map(|d| &d.notes)
        );
    }

    /// A token in a URL's query or fragment (`?token=…`, `#…`) never
    /// reaches the job's environment, though the URL's host is allowed;
    /// a setting without one is told as before.
    #[test]
    fn a_token_in_a_urls_query_is_never_told_to_the_job() {
        let secret = "s3cr3t";
        let mut f = Fake::default();
        f.runs.insert(
            "npm config get registry".into(),
            format!("https://npm.example/?token={secret}\n"),
        );
        let npm = discover(Registry::Npm, &mut f);
        let mut f = Fake::default();
        f.runs.insert(
            "go env GOPROXY GOSUMDB GOPRIVATE GONOPROXY GONOSUMDB GOINSECURE".into(),
            format!("https://gp.example/#{secret}\noff\n\n\n\n\n"),
        );
        let go = discover(Registry::Go, &mut f);
        let mut f = Fake::default();
        f.files.insert(
            PathBuf::from("/h/.config/uv/uv.toml"),
            format!("index-url = 'https://uv.example/simple?t={secret}'\n"),
        );
        let uv = discover(Registry::Uv, &mut f);
        for (d, host) in [
            (&npm, "npm.example"),
            (&go, "gp.example"),
            (&uv, "uv.example"),
        ] {
            assert!(
                hosts(d).iter().any(|h| h.starts_with(host)),
                "{:?}",
                hosts(d)
            );
            assert!(
                d.env.iter().all(|(_, v)| !v.contains(secret)),
                "{:?}",
                d.env
            );
            assert!(
                d.notes.iter().any(|n| n.contains("query or a fragment")),
                "{:?}",
                d.notes
            );
            assert!(d.notes.iter().all(|n| !n.contains(secret)), "{:?}", d.notes);
        }
        assert_eq!(told(&go), vec!["GOSUMDB=off".to_string()]);
        let mut f = Fake::default();
        f.runs.insert(
            "npm config get registry".into(),
            "https://npm.example/path/\n".into(),
        );
        assert_eq!(
            told(&discover(Registry::Npm, &mut f)),
            vec![format!("{NPM_REGISTRY_VAR}=https://npm.example/path/")]
        );
    }

    #[test]
    fn maven_mirrors_from_settings() {
        let mut f = Fake::default();
        f.files.insert(
            PathBuf::from("/h/.m2/settings.xml"),
            "<settings><mirrors><mirror><id>m</id><mirrorOf>*</mirrorOf><url> https://mvn.example/repo </url></mirror></mirrors></settings>".into(),
        );
        assert_eq!(
            hosts(&discover(Registry::Maven, &mut f)),
            ["mvn.example:443"]
        );
    }

    #[test]
    fn agent_api_host_is_the_base_url_or_the_vendor_default() {
        let mut f = Fake::default();
        f.env
            .insert("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:8080".into());
        assert_eq!(
            hosts(&discover(Registry::Anthropic, &mut f)),
            ["127.0.0.1:8080"]
        );
        let mut f = Fake::default();
        assert_eq!(
            hosts(&discover(Registry::Openai, &mut f)),
            ["api.openai.com:443"]
        );
    }

    #[test]
    fn caches_point_tools_at_the_vetto_dir() {
        let mut f = Fake::default();
        f.env.insert("MAVEN_OPTS".into(), "-Xmx1g".into());
        let dir = Path::new("/c/maven");
        assert_eq!(
            cache_env(Cache::Maven, dir, &f),
            Ok(vec![(
                "MAVEN_OPTS".to_string(),
                "-Xmx1g -Dmaven.repo.local=/c/maven/repository".to_string()
            )])
        );
        assert!(cache_env(Cache::Maven, Path::new("/c d/maven"), &f).is_err());
        let cargo = cache_env(Cache::Cargo, Path::new("/c/cargo"), &f).unwrap_or_default();
        assert_eq!(cargo, [("CARGO_HOME".to_string(), "/c/cargo".to_string())]);
        for (from, _) in cache_config_files(Cache::Cargo) {
            assert!(!from.contains("credentials"));
        }
        let _ = &mut f;
    }

    #[test]
    fn every_name_round_trips() {
        for (r, n) in REGISTRIES {
            assert_eq!(n.parse::<Registry>(), Ok(*r));
            assert_eq!(r.to_string(), *n);
        }
        for (c, n) in CACHES {
            assert_eq!(n.parse::<Cache>(), Ok(*c));
            assert_eq!(c.to_string(), *n);
        }
        assert!(
            "nmp"
                .parse::<Cache>()
                .err()
                .unwrap_or_default()
                .contains("expected one of")
        );
    }
}
