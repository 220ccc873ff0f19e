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
//! reads it at every start) and `~/.netrc` (Python's requests, and so pip,
//! read it at every request): [`MIXED`] is the table.

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

/// A variable of the caller's environment, as a path (`None`: unset or empty).
type Var<'a> = dyn Fn(&str) -> Option<PathBuf> + 'a;

/// One configuration file that mixes settings and credentials, read by a
/// tool at every start, and how the tool is pointed at a copy.
struct Mixed {
    /// Who reads it, for the terminal line.
    tool: &'static str,
    /// The copy's name in the session's temporary directory.
    copy: &'static str,
    /// The variables set to the copy's path; the first is named.
    vars: &'static [&'static str],
    /// The user's file, from the caller's environment and home.
    user: fn(&Var<'_>, &Path) -> PathBuf,
    /// The copy's text and how many credentials were removed.
    redact: fn(&str) -> (String, usize),
    /// What starts a comment line in the file's syntax.
    comment: &'static str,
}

const MIXED: &[Mixed] = &[
    // npm: `npm_config_userconfig` replaces the user file.
    Mixed {
        tool: "npm",
        copy: "vetto-npmrc",
        vars: &["npm_config_userconfig", "NPM_CONFIG_USERCONFIG"],
        user: |var, home| var("NPM_CONFIG_USERCONFIG").unwrap_or_else(|| home.join(".npmrc")),
        redact: without_credentials,
        comment: ";",
    },
    // pip: a `PIP_CONFIG_FILE` that exists replaces the user files (pip's
    // `Configuration.iter_config_files`); the site-wide ones still load.
    // Its credentials are URLs' user parts (`index-url =
    // https://user:token@host/simple`).
    Mixed {
        tool: "pip",
        copy: "vetto-pip.conf",
        vars: &["PIP_CONFIG_FILE"],
        user: |var, home| {
            var("PIP_CONFIG_FILE").unwrap_or_else(|| {
                var("XDG_CONFIG_HOME")
                    .filter(|d| d.is_absolute())
                    .unwrap_or_else(|| home.join(".config"))
                    .join("pip/pip.conf")
            })
        },
        redact: without_userinfo_anywhere,
        comment: "#",
    },
    // `~/.netrc`: every entry is a credential (Python's requests, and so
    // pip, read it on every request unless `$NETRC` names another file).
    // The copy names no host: an entry without its login would make
    // requests send an empty one.
    Mixed {
        tool: "Python's requests (pip, …)",
        copy: "vetto-netrc",
        vars: &["NETRC"],
        user: |var, home| var("NETRC").unwrap_or_else(|| home.join(".netrc")),
        redact: no_machines,
        comment: "#",
    },
];

/// A copy to write once the session's temporary directory exists.
#[derive(Debug)]
pub struct Copy {
    dir: PathBuf,
    name: &'static str,
    text: String,
    /// The user's file, as the terminal shows it.
    shown: String,
    /// What the terminal is told.
    pub line: String,
}

impl Copy {
    /// Write it (the directory is the session's own, made by vetto; a
    /// planted link there is replaced, never followed).
    pub fn write(&self) -> Result<(), crate::sandbox::safe_fs::SafeFsError> {
        use crate::sandbox::safe_fs::{Dir, Parents};
        Dir::open(&self.dir, Parents::AsNamed)?.write_file(self.name, self.text.as_bytes(), 0o600)
    }

    /// The warning when [`Copy::write`] failed.
    pub fn unwritten(&self, e: &crate::sandbox::safe_fs::SafeFsError) -> String {
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
    let masked = crate::policy::paths::decide(
        policy.fs.iter().map(|r| (r.path.as_path(), r.access)),
        &user,
    )
    .is_some_and(|(access, _)| access == Access::Deny);
    if !masked {
        return None;
    }
    let text = read_small(&user)?;
    let (copy, removed) = (m.redact)(&text);
    let dir = policy.session_tmp.clone();
    let value = dir.join(m.copy).to_string_lossy().into_owned();
    // Every spelling the tool takes: the caller's own may be passed through.
    for name in m.vars {
        policy.env.set.retain(|(k, _)| k != name);
        policy.env.set.push((name.to_string(), value.clone()));
    }
    let shown = crate::text::path_name(&user);
    Some(Copy {
        dir,
        name: m.copy,
        shown: shown.clone(),
        text: format!(
            "{} {shown} as vetto hands it to the job: {removed} credential(s) removed\n{copy}",
            m.comment
        ),
        line: format!(
            "{} reads {shown} without its credentials ({removed} removed; {} set for the job)",
            m.tool, m.vars[0]
        ),
    })
}

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = crate::sandbox::safe_fs::open_regular(path).ok()?;
    let mut text = String::new();
    f.take(MAX_CONFIG + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= MAX_CONFIG).then_some(text)
}

/// An npmrc without its credential settings, and how many were removed.
/// A credential in a URL's user part (`registry=https://u:p@host/`) is
/// removed from the URL, the setting kept.
pub fn without_credentials(text: &str) -> (String, usize) {
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
        out.push_str(&clean);
        out.push('\n');
    }
    (out, removed)
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
mod tests {
    use super::*;

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
        let (out, removed) = without_credentials(npmrc);
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
    fn a_user_part_only_in_the_path_is_no_credential() {
        assert_eq!(without_userinfo("https://host/a@b"), None);
        assert_eq!(
            without_userinfo("https://u:p@host/a@b").as_deref(),
            Some("https://host/a@b")
        );
    }
}
