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

use std::path::{Path, PathBuf};

use crate::policy::{Access, Policy};

/// The copy's name in the session's temporary directory.
const NPMRC_COPY: &str = "vetto-npmrc";
/// A user config larger than this is not copied (npm then reads none).
const MAX_NPMRC: u64 = 1 << 20;

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

/// A copy to write once the session's temporary directory exists.
#[derive(Debug)]
pub struct Copy {
    dir: PathBuf,
    name: &'static str,
    text: String,
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
}

/// Where the policy masks npm's user configuration and it exists: point
/// the job's npm at a copy without the credentials (`policy.env.set`),
/// and the copy to write. `None` when the file is readable by the policy,
/// absent, unreadable or too large (npm then reads what the policy gives).
pub fn npmrc(policy: &mut Policy, env: &[(String, String)], home: &Path) -> Option<Copy> {
    let var = |name: &str| {
        env.iter()
            .find(|(k, v)| k.eq_ignore_ascii_case(name) && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    let user = var("NPM_CONFIG_USERCONFIG").unwrap_or_else(|| home.join(".npmrc"));
    let masked = crate::policy::paths::decide(
        policy.fs.iter().map(|r| (r.path.as_path(), r.access)),
        &user,
    )
    .is_some_and(|(access, _)| access == Access::Deny);
    if !masked {
        return None;
    }
    let text = read_small(&user)?;
    let (copy, removed) = without_credentials(&text);
    let dir = policy.session_tmp.clone();
    let path = dir.join(NPMRC_COPY);
    let value = path.to_string_lossy().into_owned();
    // Both spellings: the caller's own may be passed through, and npm
    // takes either.
    for name in ["npm_config_userconfig", "NPM_CONFIG_USERCONFIG"] {
        policy.env.set.retain(|(k, _)| k != name);
        policy.env.set.push((name.to_string(), value.clone()));
    }
    let shown = crate::text::path_name(&user);
    Some(Copy {
        dir,
        name: NPMRC_COPY,
        text: format!(
            "; {shown} as vetto hands it to the job: {removed} credential setting(s) removed\n{copy}"
        ),
        line: format!(
            "npm reads {shown} without its credentials ({removed} setting(s) removed; npm_config_userconfig set for the job)"
        ),
    })
}

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = crate::sandbox::safe_fs::open_regular(path).ok()?;
    let mut text = String::new();
    f.take(MAX_NPMRC + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= MAX_NPMRC).then_some(text)
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
    fn a_user_part_only_in_the_path_is_no_credential() {
        assert_eq!(without_userinfo("https://host/a@b"), None);
        assert_eq!(
            without_userinfo("https://u:p@host/a@b").as_deref(),
            Some("https://host/a@b")
        );
    }
}
