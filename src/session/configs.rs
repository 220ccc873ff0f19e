//! Configuration that mixes settings and credentials, handed to the job
//! without the credentials (issue P10, item 1).
//!
//! `~/.npmrc` holds a registry token next to the settings npm needs
//! (registries, scopes, `strict-ssl`, …), and the default policy masks it
//! whole. So npm itself, reading its own configuration at every start,
//! hit the mask: a clean `npm test` was recorded as a severity-9 secret
//! read. Instead, where the policy masks the user file, vetto writes a
//! copy without its credential lines into the session's own `$TMPDIR` and
//! points npm at it (`npm_config_userconfig`): npm sees its settings and
//! never opens the masked file, so its start is no finding, while any
//! other program of the job that reads `~/.npmrc` (a package's
//! `postinstall`) still meets the mask, is recorded and gets nothing.
//! The copy never holds a credential, so reading it costs nothing.
//!
//! The same for pip's user `pip.conf` (credentials in index URLs; pip
//! reads it at every start), `~/.netrc` (Python's requests, and so pip,
//! read it at every request), docker's `config.json` (the CLI reads it at
//! every command; `docker/login-action` writes registry tokens into it) and
//! gh's `hosts.yml` (every `gh` command reads it): [`MIXED`] is the table.
//! Docker and gh are pointed at a directory, not a file, so theirs is a
//! directory standing in for the user's ([`Place::Dir`]).

use std::path::{Path, PathBuf};

use crate::policy::{Access, Policy};

/// A user config larger than this is not copied (the tool then reads
/// what the policy gives).
const MAX_CONFIG: u64 = 1 << 20;

/// npm's credential settings (`npm help config`: `_auth`, `_authToken`,
/// `_password`, `username`, `password`, `email`, and a client key given
/// inline as `key`), bare or scoped to a registry (`//host/:_authToken`).
const NPM_CREDENTIALS: [&str; 8] = [
    "_auth",
    "_authtoken",
    "_password",
    "username",
    "password",
    "email",
    "key",
    "otp",
];

/// docker's credential fields of an `auths` entry (its `serveraddress`
/// is kept): `auth` is base64 of `user:password`.
const DOCKER_CREDENTIALS: [&str; 6] = [
    "auth",
    "username",
    "password",
    "email",
    "identitytoken",
    "registrytoken",
];

/// What in a header's name marks one that carries a credential
/// (docker's `HttpHeaders`).
const CREDENTIAL_HEADER_WORDS: [&str; 6] = ["auth", "token", "key", "secret", "cookie", "password"];

/// A user directory with more entries than this gets no links in its
/// stand-in (each is a link made before the job starts).
const MAX_LINKED: usize = 256;

/// A copy's text and how many credentials were removed, from the user's
/// file's text and the names of the session's secrets.
type Redact = fn(&str, &[&str]) -> Option<(String, usize)>;

/// A variable of the caller's environment, as a path (`None`: unset or empty).
type Var<'a> = dyn Fn(&str) -> Option<PathBuf> + 'a;

/// Where a copy goes in the session's temporary directory, and what the
/// tool's variables name.
enum Place {
    /// A file of this name, standing in for the user's file.
    File(&'static str),
    /// A directory of this name standing in for the user's directory
    /// (the tool takes a directory, not a file): each of `redacted` (the
    /// first decides whether the policy masks it) copied without its
    /// credentials and, with `link_rest`, every other entry of the user's
    /// directory a link to it, so what the tool keeps there (docker's
    /// plugins, contexts, builders) is where it was.
    Dir {
        name: &'static str,
        redacted: &'static [&'static str],
        link_rest: bool,
    },
}

/// One configuration file that mixes settings and credentials, read by a
/// tool at every start, and how the tool is pointed at a copy.
struct Mixed {
    /// Who reads it, for the terminal line.
    tool: &'static str,
    /// Programs whose name in the command makes the line worth printing
    /// (a git or cargo job that never runs npm is not told about npm's
    /// configuration; the copy is made all the same).
    programs: &'static [&'static str],
    /// The copy, in the session's temporary directory.
    copy: Place,
    /// The variables set to the copy's path; the first is named.
    vars: &'static [&'static str],
    /// The user's file ([`Place::File`]) or directory ([`Place::Dir`]),
    /// from the caller's environment and home.
    user: fn(&Var<'_>, &Path) -> PathBuf,
    /// The copy's text and how many credentials were removed, given the
    /// names of the session's secrets (`--secret`); `None` for a file the
    /// tool could not read either (no copy is made: the tool meets the
    /// mask, as it would without vetto's help).
    redact: Redact,
    /// What starts a comment line in the file's syntax (JSON has none).
    comment: Option<&'static str>,
}

const MIXED: &[Mixed] = &[
    // npm: `npm_config_userconfig` replaces the user file.
    Mixed {
        tool: "npm",
        programs: &["npm", "npx", "node", "yarn", "pnpm", "corepack", "bun"],
        copy: Place::File("vetto-npmrc"),
        vars: &["npm_config_userconfig", "NPM_CONFIG_USERCONFIG"],
        user: |var, home| var("NPM_CONFIG_USERCONFIG").unwrap_or_else(|| home.join(".npmrc")),
        redact: |text, secrets| Some(without_credentials(text, secrets)),
        comment: Some(";"),
    },
    // pip: a `PIP_CONFIG_FILE` that exists replaces the user files (pip's
    // `Configuration.iter_config_files`); the site-wide ones still load.
    // Its credentials are URLs' user parts (`index-url =
    // https://user:token@host/simple`).
    Mixed {
        tool: "pip",
        programs: &[
            "pip", "pip3", "python", "python3", "uv", "poetry", "pipx", "tox", "nox", "pdm",
            "hatch",
        ],
        copy: Place::File("vetto-pip.conf"),
        vars: &["PIP_CONFIG_FILE"],
        user: |var, home| {
            var("PIP_CONFIG_FILE").unwrap_or_else(|| {
                var("XDG_CONFIG_HOME")
                    .filter(|d| d.is_absolute())
                    .unwrap_or_else(|| home.join(".config"))
                    .join("pip/pip.conf")
            })
        },
        redact: |text, _| Some(without_userinfo_anywhere(text)),
        comment: Some("#"),
    },
    // `~/.netrc`: every entry is a credential (Python's requests, and so
    // pip, read it on every request unless `$NETRC` names another file).
    // The copy names no host: an entry without its login would make
    // requests send an empty one.
    Mixed {
        tool: "Python's requests (pip, …)",
        programs: &[
            "pip", "pip3", "python", "python3", "uv", "poetry", "pipx", "tox", "nox", "pdm",
            "hatch", "curl",
        ],
        copy: Place::File("vetto-netrc"),
        vars: &["NETRC"],
        user: |var, home| var("NETRC").unwrap_or_else(|| home.join(".netrc")),
        redact: |text, _| Some(no_machines(text)),
        comment: Some("#"),
    },
    // docker: `DOCKER_CONFIG` names the directory that holds
    // `config.json` and, beside it, the CLI's plugins (where
    // `docker/setup-buildx-action` installs buildx), contexts and
    // builders: those stay reachable through links.
    Mixed {
        tool: "docker",
        programs: &["docker", "docker-compose", "podman", "buildx"],
        copy: Place::Dir {
            name: "vetto-docker",
            redacted: &["config.json"],
            link_rest: true,
        },
        vars: &["DOCKER_CONFIG"],
        user: |var, home| var("DOCKER_CONFIG").unwrap_or_else(|| home.join(".docker")),
        redact: |text, _| docker_without_credentials(text),
        comment: None,
    },
    // gh: `GH_CONFIG_DIR` names the directory of `hosts.yml` (a token per
    // host and account, unless gh keeps them in the keyring) and
    // `config.yml` (settings and aliases); the default policy masks the
    // directory whole, so both are copied.
    Mixed {
        tool: "gh",
        programs: &["gh"],
        copy: Place::Dir {
            name: "vetto-gh",
            redacted: &["hosts.yml", "config.yml"],
            link_rest: false,
        },
        vars: &["GH_CONFIG_DIR"],
        user: |var, home| {
            var("GH_CONFIG_DIR").unwrap_or_else(|| {
                var("XDG_CONFIG_HOME")
                    .filter(|d| d.is_absolute())
                    .unwrap_or_else(|| home.join(".config"))
                    .join("gh")
            })
        },
        redact: |text, _| gh_without_tokens(text),
        comment: Some("#"),
    },
];

/// A copy to write once the session's temporary directory exists.
#[derive(Debug)]
pub struct Copy {
    /// The session's temporary directory.
    dir: PathBuf,
    /// The stand-in directory made in it ([`Place::Dir`]).
    subdir: Option<&'static str>,
    /// Each file's name and text.
    files: Vec<(String, String)>,
    /// Each link's name and the user's entry it names.
    links: Vec<(String, PathBuf)>,
    /// The user's file, as the terminal shows it.
    shown: String,
    /// The tool's programs and variables (`Mixed::programs`, `vars`).
    programs: &'static [&'static str],
    vars: &'static [&'static str],
    /// What the terminal is told.
    pub line: String,
}

impl Copy {
    /// Write it (the directory is the session's own, made by vetto; a
    /// planted link there is replaced, never followed, and the stand-in
    /// directory must be new).
    pub fn write(&self) -> Result<(), crate::sys::safe_fs::SafeFsError> {
        use crate::sys::safe_fs::{Dir, Parents};
        let top = Dir::open(&self.dir, Parents::AsNamed)?;
        let dir = match self.subdir {
            Some(name) => top.create_dir_new(name, 0o700)?,
            None => top,
        };
        for (name, text) in &self.files {
            dir.write_file(name, text.as_bytes(), 0o600)?;
        }
        for (name, target) in &self.links {
            dir.link_new(name, target)?;
        }
        Ok(())
    }

    /// Whether the command names the tool: one of its programs as a word
    /// (of the command or of a script it runs: `sh -c 'npm ci'`), with
    /// any directory and version (`/usr/bin/python3.12`), or one of its
    /// variables. Only then is the terminal told about the copy.
    pub fn named_by(&self, command: &[std::ffi::OsString]) -> bool {
        command.iter().any(|arg| {
            let arg = arg.to_string_lossy();
            self.vars.iter().any(|v| arg.contains(v))
                || arg
                    .split(|c: char| !(c.is_ascii_alphanumeric() || "-_./".contains(c)))
                    .any(|word| {
                        let name = word.rsplit('/').next().unwrap_or(word);
                        let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
                        self.programs.iter().any(|p| name == *p || bare == *p)
                    })
        })
    }

    /// The warning when [`Copy::write`] failed.
    pub fn unwritten(&self, e: &crate::sys::safe_fs::SafeFsError) -> String {
        format!(
            "no copy of {} without its credentials for the job ({e}): the tool meets the mask",
            self.shown
        )
    }
}

/// For each mixed configuration file the policy masks and that exists:
/// point the job's tool at a copy without the credentials
/// (`policy.env.set`), and the copy to write. A file the policy lets the
/// job read, or one absent, unreadable or too large, gets none (the tool
/// then reads what the policy gives).
pub fn copies(policy: &mut Policy, env: &[(String, String)], home: &Path) -> Vec<Copy> {
    let var = |name: &str| {
        env.iter()
            .find(|(k, v)| k.eq_ignore_ascii_case(name) && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    MIXED
        .iter()
        .filter_map(|m| copy_of(m, policy, &var, home))
        .collect()
}

fn copy_of(m: &Mixed, policy: &mut Policy, var: &Var<'_>, home: &Path) -> Option<Copy> {
    let user = (m.user)(var, home);
    // Each redacted file: its name in the copy and the user's path.
    let (name, redacted, link_rest): (&str, Vec<(&str, PathBuf)>, bool) = match &m.copy {
        Place::File(name) => (name, vec![(*name, user.clone())], false),
        Place::Dir {
            name,
            redacted,
            link_rest,
        } => (
            name,
            redacted.iter().map(|f| (*f, user.join(f))).collect(),
            *link_rest,
        ),
    };
    let masked = crate::policy::paths::decide(
        policy.fs.iter().map(|r| (r.path.as_path(), r.access)),
        &redacted.first()?.1,
    )
    .is_some_and(|(access, _)| access == Access::Deny);
    if !masked {
        return None;
    }
    let mut files = Vec::new();
    let mut removed = 0;
    for (file, path) in &redacted {
        let Some(text) = read_small(path) else {
            continue;
        };
        let secrets: Vec<&str> = policy.secrets.iter().map(|s| s.name.as_str()).collect();
        let (copy, n) = (m.redact)(&text, &secrets)?;
        removed += n;
        let shown = crate::text::path_name(path);
        let text = match m.comment {
            Some(c) => format!(
                "{c} {shown} as vetto hands it to the job: {n} credential(s) removed\n{copy}"
            ),
            None => copy,
        };
        files.push((file.to_string(), text));
    }
    if files.is_empty() {
        return None;
    }
    let links = if link_rest {
        linked_entries(&user, &redacted)
    } else {
        Vec::new()
    };
    let dir = policy.session_tmp.clone();
    let value = dir.join(name).to_string_lossy().into_owned();
    // Every spelling the tool takes: the caller's own may be passed through.
    for var in m.vars {
        policy.env.set.retain(|(k, _)| k != var);
        policy.env.set.push((var.to_string(), value.clone()));
    }
    // The one file, or the directory when several are copied.
    let shown = match redacted.as_slice() {
        [(_, only)] => crate::text::path_name(only),
        _ => crate::text::path_name(&user),
    };
    let subdir = match m.copy {
        Place::File(_) => {
            // The one file is written under the copy's name.
            files = files
                .into_iter()
                .map(|(_, t)| (name.to_string(), t))
                .collect();
            None
        }
        Place::Dir { name, .. } => Some(name),
    };
    Some(Copy {
        dir,
        subdir,
        files,
        links,
        shown: shown.clone(),
        programs: m.programs,
        vars: m.vars,
        line: format!(
            "{} reads {shown} without its credentials ({removed} removed; {} set for the job)",
            m.tool, m.vars[0]
        ),
    })
}

/// Every entry of the user's directory but the redacted files, each with
/// the path a link to it names: none when the directory cannot be listed,
/// holds a name that is not UTF-8, or more than [`MAX_LINKED`] entries
/// (the tool then finds only the copies).
fn linked_entries(user: &Path, redacted: &[(&str, PathBuf)]) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(user) else {
        return Vec::new();
    };
    let mut links = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else {
            return Vec::new();
        };
        let Ok(name) = entry.file_name().into_string() else {
            return Vec::new();
        };
        if redacted.iter().any(|(f, _)| *f == name) {
            continue;
        }
        if links.len() == MAX_LINKED {
            return Vec::new();
        }
        links.push((name.clone(), user.join(name)));
    }
    links.sort();
    links
}

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = crate::sys::safe_fs::open_regular(path).ok()?;
    let mut text = String::new();
    f.take(MAX_CONFIG + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= MAX_CONFIG).then_some(text)
}

/// An npmrc without its credential settings, and how many were removed.
/// A credential in a URL's user part (`registry=https://u:p@host/`) is
/// removed from the URL, the setting kept. A credential written as a
/// reference to a variable that is one of `secrets` (`_authToken =
/// ${NODE_AUTH_TOKEN}`, as actions/setup-node writes it) is kept: it holds
/// no value, and the job's variable is the placeholder the proxy swaps.
/// Any other reference goes: npm refuses to start on a variable the job
/// does not have.
pub fn without_credentials(text: &str, secrets: &[&str]) -> (String, usize) {
    let mut out = String::new();
    let mut removed = 0;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let setting = (!trimmed.starts_with(['#', ';']))
            .then(|| trimmed.split_once('='))
            .flatten();
        let Some((key, value)) = setting else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        // `//registry.example/path/:_authToken`: the setting is after the
        // last `:` of a registry-scoped key.
        let key = key.trim();
        let name = if key.starts_with("//") {
            key.rsplit(':').next().unwrap_or(key)
        } else {
            key
        };
        if NPM_CREDENTIALS.contains(&name.to_ascii_lowercase().as_str()) {
            let reference = value
                .trim()
                .strip_prefix("${")
                .and_then(|v| v.strip_suffix('}'));
            if reference.is_some_and(|v| secrets.contains(&v)) {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            removed += 1;
            continue;
        }
        match without_userinfo(value.trim()) {
            Some(clean) => {
                removed += 1;
                out.push_str(&format!("{key}={clean}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    (out, removed)
}

/// docker's `config.json` without its credentials: each `auths` entry's
/// [`DOCKER_CREDENTIALS`], every `HttpHeaders` entry whose name holds one
/// of [`CREDENTIAL_HEADER_WORDS`], and the user part of any URL in any
/// string (`proxies`). `credsStore` and `credHelpers` are settings and
/// stay: a helper reads its own store, under the policy's rules.
/// `None`: not a JSON object (docker refuses such a file too).
pub fn docker_without_credentials(text: &str) -> Option<(String, usize)> {
    use serde_json::Value;
    let mut config: Value = serde_json::from_str(text).ok()?;
    let top = config.as_object_mut()?;
    let mut removed = 0;
    if let Some(auths) = top.get_mut("auths").and_then(Value::as_object_mut) {
        for entry in auths.values_mut().filter_map(Value::as_object_mut) {
            let before = entry.len();
            entry.retain(|k, _| !DOCKER_CREDENTIALS.contains(&k.to_ascii_lowercase().as_str()));
            removed += before - entry.len();
        }
    }
    if let Some(headers) = top.get_mut("HttpHeaders").and_then(Value::as_object_mut) {
        let before = headers.len();
        headers.retain(|k, _| {
            let k = k.to_ascii_lowercase();
            !CREDENTIAL_HEADER_WORDS.iter().any(|w| k.contains(w))
        });
        removed += before - headers.len();
    }
    removed += strings_without_userinfo(&mut config);
    let mut out = serde_json::to_string_pretty(&config).ok()?;
    out.push('\n');
    Some((out, removed))
}

/// Every string in `value` with each URL's user part removed; how many were.
fn strings_without_userinfo(value: &mut serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            let (clean, n) = line_without_userinfo(s);
            *s = clean;
            n
        }
        Value::Array(items) => items.iter_mut().map(strings_without_userinfo).sum(),
        Value::Object(map) => map.values_mut().map(strings_without_userinfo).sum(),
        _ => 0,
    }
}

/// gh's `hosts.yml` or `config.yml` without a token: any line that names
/// `oauth_token` (gh writes one per host and per account unless the
/// keyring holds them) is dropped with the lines that continue its value
/// (indented deeper, or blank), and any URL's user part is removed. Read
/// line by line, not parsed: a flow mapping (`{oauth_token: …}`) on one
/// line goes whole, and nothing a parser would skip is kept.
pub fn gh_without_tokens(text: &str) -> Option<(String, usize)> {
    let mut out = String::with_capacity(text.len());
    let mut removed = 0;
    // The indentation of the token's line while its value continues.
    let mut dropping: Option<usize> = None;
    for line in text.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if let Some(at) = dropping {
            if body.is_empty() || indent > at {
                continue;
            }
            dropping = None;
        }
        if body.to_ascii_lowercase().contains("oauth_token") {
            removed += 1;
            dropping = Some(indent);
            continue;
        }
        let (clean, n) = line_without_userinfo(line);
        removed += n;
        out.push_str(&clean);
        out.push('\n');
    }
    Some((out, removed))
}

/// `scheme://user:pass@host/…` without `user:pass@`; `None` when the value
/// has no user part.
fn without_userinfo(value: &str) -> Option<String> {
    let (scheme, rest) = value.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    Some(format!("{scheme}://{}", &rest[at + 1..]))
}

/// Any text with every URL's user part removed (`https://u:p@host/` →
/// `https://host/`), and how many were. Lines are kept as written
/// otherwise, comments included.
pub fn without_userinfo_anywhere(text: &str) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut removed = 0;
    for line in text.lines() {
        let (clean, n) = line_without_userinfo(line);
        removed += n;
        out.push_str(&clean);
        out.push('\n');
    }
    (out, removed)
}

/// One line (or string) with every URL's user part removed, and how many were.
fn line_without_userinfo(line: &str) -> (String, usize) {
    let mut removed = 0;
    let mut rest = line;
    let mut clean = String::with_capacity(line.len());
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        clean.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#' | '"' | '\''))
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(i) => {
                removed += 1;
                clean.push_str(&authority[i + 1..]);
            }
            None => clean.push_str(authority),
        }
        rest = &after[end..];
    }
    clean.push_str(rest);
    (clean, removed)
}

/// A netrc's copy: no entry at all (each `machine` or `default` is counted).
pub fn no_machines(text: &str) -> (String, usize) {
    let n = text
        .split_whitespace()
        .filter(|t| matches!(*t, "machine" | "default"))
        .count();
    (String::new(), n)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_for_commands_that_name_the_tool() {
        let npm = Copy {
            dir: PathBuf::new(),
            subdir: None,
            files: Vec::new(),
            links: Vec::new(),
            shown: "~/.npmrc".into(),
            programs: MIXED[0].programs,
            vars: MIXED[0].vars,
            line: String::new(),
        };
        let named = |args: &[&str]| {
            npm.named_by(
                &args
                    .iter()
                    .map(std::ffi::OsString::from)
                    .collect::<Vec<_>>(),
            )
        };
        assert!(named(&["npm", "ci"]));
        assert!(named(&["/usr/local/bin/node", "test.js"]));
        assert!(named(&["sh", "-c", "make && npx jest --ci"]));
        assert!(named(&["sh", "-c", "cat \"$npm_config_userconfig\""]));
        for other in [
            &["git", "status"][..],
            &["cargo", "test"],
            &["sh", "-c", "pip install -r requirements.txt && pytest"],
            &["sh", "-c", "pnpmx"],
        ] {
            assert!(!named(other), "{other:?}");
        }
    }

    #[test]
    fn credentials_are_removed_and_settings_kept() {
        let npmrc = "registry=https://npm.example.test/\n\
                     @corp:registry=https://npm.corp.test/\n\
                     //npm.corp.test/:_authToken=npm_SECRET1\n\
                     //npm.example.test/:_auth = c2VjcmV0\n\
                     _password=SECRET3\n\
                     ; a comment with password=x\n\
                     strict-ssl=true\n\
                     proxy=http://user:SECRET4@proxy.test:8080/\n";
        let (out, removed) = without_credentials(npmrc, &[]);
        assert_eq!(removed, 4);
        assert!(!out.contains("SECRET"), "{out}");
        for kept in [
            "registry=https://npm.example.test/",
            "@corp:registry=https://npm.corp.test/",
            "strict-ssl=true",
            "proxy=http://proxy.test:8080/",
            "; a comment with password=x",
        ] {
            assert!(out.contains(kept), "{kept} missing from {out}");
        }
    }

    #[test]
    fn a_token_named_by_a_secrets_variable_is_kept_and_any_other_goes() {
        let npmrc = "//npm.pkg.github.com/:_authToken=${NODE_AUTH_TOKEN}\n\
                     //registry.npmjs.org/:_authToken=${OTHER_TOKEN}\n";
        let (out, removed) = without_credentials(npmrc, &["NODE_AUTH_TOKEN"]);
        assert_eq!(removed, 1);
        assert_eq!(out, "//npm.pkg.github.com/:_authToken=${NODE_AUTH_TOKEN}\n");
    }

    #[test]
    fn every_urls_user_part_is_removed_from_a_pip_conf() {
        let conf = "[global]\n\
                    index-url = https://ci:SECRET1@pypi.corp.test/simple\n\
                    extra-index-url =\n    https://u:SECRET2@a.test/simple https://b.test/simple\n\
                    \x20   http://tok-SECRET3@c.test:8080\n\
                    # a comment: https://d.test/a@b\n\
                    timeout = 7\n";
        let (out, removed) = without_userinfo_anywhere(conf);
        assert_eq!(removed, 3);
        assert!(!out.contains("SECRET"), "{out}");
        for kept in [
            "index-url = https://pypi.corp.test/simple",
            "    https://a.test/simple https://b.test/simple",
            "http://c.test:8080",
            "# a comment: https://d.test/a@b",
            "timeout = 7",
        ] {
            assert!(out.contains(kept), "{kept} missing from {out}");
        }
    }

    #[test]
    fn a_netrc_copy_names_no_machine() {
        let (out, n) =
            no_machines("machine a.test login u password p\ndefault login x password y\n");
        assert_eq!((out.as_str(), n), ("", 2));
    }

    #[test]
    fn docker_config_keeps_its_settings_and_loses_every_credential() {
        let config = r#"{
            "auths": {
                "ghcr.io": {"auth": "Y2k6U0VDUkVUMQ=="},
                "https://index.docker.io/v1/": {"identitytoken": "SECRET2", "email": "a@b.test"},
                "reg.test": {"username": "ci", "password": "SECRET3", "serveraddress": "reg.test"}
            },
            "HttpHeaders": {"User-Agent": "ci", "X-Registry-Token": "SECRET4"},
            "proxies": {"default": {"httpsProxy": "http://u:SECRET5@proxy.test:3128"}},
            "credHelpers": {"gcr.io": "gcloud"},
            "psFormat": "table {{.ID}}",
            "currentContext": "ci"
        }"#;
        let (out, removed) = docker_without_credentials(config).unwrap();
        assert!(!out.contains("SECRET") && !out.contains("Y2k6"), "{out}");
        assert_eq!(removed, 7, "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["auths"]["ghcr.io"], serde_json::json!({}));
        assert_eq!(v["auths"]["reg.test"]["serveraddress"], "reg.test");
        assert_eq!(v["HttpHeaders"]["User-Agent"], "ci");
        assert_eq!(
            v["proxies"]["default"]["httpsProxy"],
            "http://proxy.test:3128"
        );
        assert_eq!(v["credHelpers"]["gcr.io"], "gcloud");
        assert_eq!(v["psFormat"], "table {{.ID}}");
        assert_eq!(v["currentContext"], "ci");
        assert_eq!(docker_without_credentials("[1]"), None);
        assert_eq!(docker_without_credentials("{\"auths\": "), None);
    }

    #[test]
    fn gh_hosts_lose_every_token_however_written() {
        let hosts = "github.com:\n                     \x20   oauth_token: gho_SECRET1\n                     \x20   users:\n                     \x20       ci:\n                     \x20           oauth_token: >-\n                     \x20               gho_SECRET2\n                     \x20               continued\n                     \x20   git_protocol: https\n                     \x20   user: ci\n                     ghe.test: {oauth_token: SECRET3, user: u}\n                     proxy.test:\n                     \x20   api: https://u:SECRET4@ghe.test/\n";
        let (out, removed) = gh_without_tokens(hosts).unwrap();
        assert!(
            !out.contains("SECRET") && !out.contains("continued"),
            "{out}"
        );
        assert_eq!(removed, 4, "{out}");
        for kept in [
            "github.com:",
            "    users:",
            "        ci:",
            "    git_protocol: https",
            "    user: ci",
            "    api: https://ghe.test/",
        ] {
            assert!(out.contains(kept), "{kept} missing from {out}");
        }
    }

    #[test]
    fn a_user_part_only_in_the_path_is_no_credential() {
        assert_eq!(without_userinfo("https://host/a@b"), None);
        assert_eq!(
            without_userinfo("https://u:p@host/a@b").as_deref(),
            Some("https://host/a@b")
        );
    }
}
