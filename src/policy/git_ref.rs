//! `--policy-ref REF`: the project's policy file as committed at a git ref,
//! read with `git` outside the sandbox, before the job, without a checkout
//! (so a pull request cannot widen the policy it is tested under).
//!
//! git runs with every setting that could make a hostile repository run
//! something turned off: no system config, no fsmonitor, no hooks, no
//! transport (a partial clone cannot fetch a missing object through a
//! configured command), no optional locks, no terminal prompt, no pager,
//! and an object is read with `cat-file`, which applies no filter or
//! textconv. The ref is validated first and passed after
//! `--end-of-options`, so it can never be taken for an option.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The longest ref accepted (git's own names are far shorter).
const MAX_REF: usize = 256;
/// The largest policy file read from a ref.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// A policy file read from a ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtRef {
    /// The commit `REF` names (full hex).
    pub commit: String,
    /// The file's text; `None` when the commit has no such file.
    pub text: Option<String>,
}

/// Why a ref could not give a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RefError {
    #[error("`{0}` is not a ref vetto accepts: {1}")]
    Invalid(String, &'static str),
    #[error("`{reference}` names no commit in {project}{detail}")]
    NoCommit {
        reference: String,
        project: String,
        detail: String,
    },
    #[error("{shown} is not a file at that ref (it is a {kind})")]
    NotAFile { shown: String, kind: String },
    #[error("{shown} is larger than {MAX_POLICY_BYTES} bytes")]
    TooLarge { shown: String },
    #[error("{shown} is not UTF-8 text")]
    NotText { shown: String },
    #[error("cannot run git: {0}")]
    Git(String),
}

/// Accept a revision that names a commit (`origin/main`, `v1.2`, `HEAD~1`,
/// a hex id) and nothing that could be read as something else: an option
/// (`-…`), a range (`a..b`), a path (`:`), whitespace or control
/// characters (the ref is also a line of `cat-file --batch` input).
pub fn validate_ref(reference: &str) -> Result<(), RefError> {
    let bad = |why| Err(RefError::Invalid(reference.to_string(), why));
    if reference.is_empty() {
        return bad("it is empty");
    }
    if reference.len() > MAX_REF {
        return bad("it is longer than 256 bytes");
    }
    if reference.starts_with('-') {
        return bad("it starts with `-`");
    }
    if reference.contains("..") {
        return bad("it contains `..` (a range, not one commit)");
    }
    if reference.contains(':') {
        return bad("it contains `:` (name the file with --policy, not in the ref)");
    }
    if reference
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return bad("it contains whitespace, a backslash or a control character");
    }
    Ok(())
}

/// `git` with the hardening above, in `project`.
fn git(project: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(project);
    for setting in [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "core.pager=cat",
        "core.untrackedCache=false",
        "protocol.allow=never",
        "credential.helper=",
    ] {
        c.arg("-c").arg(setting);
    }
    c.arg("--no-pager").arg("--no-optional-locks");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_EXTERNAL_DIFF")
        .env_remove("GIT_PAGER")
        .env_remove("GIT_ASKPASS")
        .env_remove("GIT_SSH")
        .env_remove("GIT_SSH_COMMAND")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_CONFIG_COUNT");
    c
}

/// The file `path` (relative to the project, `/`-separated) at `reference`.
pub fn read(project: &Path, reference: &str, path: &str) -> Result<AtRef, RefError> {
    validate_ref(reference)?;
    let shown = format!("{reference}:{path}");
    let out = git(project)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{reference}^{{commit}}"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| RefError::Git(e.to_string()))?;
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !is_hex_id(&commit) {
        let err = String::from_utf8_lossy(&out.stderr);
        let detail = err
            .lines()
            .next()
            .map(|l| format!(" ({})", l.trim()))
            .unwrap_or_default();
        return Err(RefError::NoCommit {
            reference: reference.to_string(),
            project: project.display().to_string(),
            detail,
        });
    }
    // One object, named by the commit just resolved (the ref cannot move
    // between the two calls), through `--batch`: it says `missing` for a
    // path the commit does not have instead of failing.
    let mut child = git(project)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| RefError::Git(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        writeln!(stdin, "{commit}:{path}").map_err(|e| RefError::Git(e.to_string()))?;
    }
    let mut raw = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        // The header, the content and its newline, and no more.
        stdout
            .take(MAX_POLICY_BYTES + 256)
            .read_to_end(&mut raw)
            .map_err(|e| RefError::Git(e.to_string()))?;
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = parse_batch(&raw, &shown)?;
    Ok(AtRef { commit, text })
}

fn is_hex_id(s: &str) -> bool {
    (40..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `cat-file --batch` output for one object: `<id> missing`, or
/// `<id> <type> <size>\n<content>\n`.
fn parse_batch(raw: &[u8], shown: &str) -> Result<Option<String>, RefError> {
    let nl = raw
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| RefError::Git(format!("no answer from git cat-file for {shown}")))?;
    let header = String::from_utf8_lossy(&raw[..nl]);
    // The input (`<commit>:<path>`) is echoed back for a missing object.
    if header.ends_with(" missing") || header.ends_with(" ambiguous") {
        return Ok(None);
    }
    let unexpected = || RefError::Git(format!("unexpected git cat-file header {header:?}"));
    let mut fields = header.rsplitn(3, ' ');
    let (size, kind) = (fields.next(), fields.next());
    let (Some(size), Some(kind), Some(_id)) = (size, kind, fields.next()) else {
        return Err(unexpected());
    };
    if kind != "blob" {
        return Err(RefError::NotAFile {
            shown: shown.to_string(),
            kind: kind.to_string(),
        });
    }
    let size: u64 = size.parse().map_err(|_| unexpected())?;
    if size > MAX_POLICY_BYTES {
        return Err(RefError::TooLarge {
            shown: shown.to_string(),
        });
    }
    let body = raw
        .get(nl + 1..nl + 1 + size as usize)
        .ok_or_else(|| RefError::Git(format!("git cat-file cut {shown} short")))?;
    String::from_utf8(body.to_vec())
        .map(Some)
        .map_err(|_| RefError::NotText {
            shown: shown.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_that_could_be_options_ranges_or_paths_are_refused() {
        for ok in [
            "origin/main",
            "main",
            "v1.2.3",
            "HEAD~1",
            "main^",
            "0123abcd",
        ] {
            assert_eq!(validate_ref(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "-c",
            "--output=/tmp/x",
            "main..evil",
            "main:vetto.toml",
            "main evil",
            "main\nHEAD:x",
            "a\\b",
            "\u{1b}[31m",
        ] {
            assert!(
                matches!(validate_ref(bad), Err(RefError::Invalid(..))),
                "{bad:?}"
            );
        }
        assert!(validate_ref(&"a".repeat(257)).is_err());
    }

    #[test]
    fn batch_answers_are_read_exactly() {
        let id = "a".repeat(40);
        assert_eq!(
            parse_batch(
                format!("{id}:vetto.toml missing\n").as_bytes(),
                "r:vetto.toml"
            ),
            Ok(None)
        );
        assert_eq!(
            parse_batch(format!("{id}:my policy.toml missing\n").as_bytes(), "r:x"),
            Ok(None)
        );
        assert_eq!(
            parse_batch(format!("{id} blob 3\nab\n\n").as_bytes(), "r:vetto.toml"),
            Ok(Some("ab\n".into()))
        );
        assert!(matches!(
            parse_batch(format!("{id} tree 30\n").as_bytes(), "r:vetto.toml"),
            Err(RefError::NotAFile { .. })
        ));
        assert!(matches!(
            parse_batch(format!("{id} blob 9999999999\n").as_bytes(), "r:x"),
            Err(RefError::TooLarge { .. })
        ));
        assert!(matches!(
            parse_batch(format!("{id} blob 10\nab\n").as_bytes(), "r:x"),
            Err(RefError::Git(_))
        ));
        assert!(parse_batch(b"", "r:x").is_err());
    }
}
