//! Variables in policy paths: a leading `~`, `${HOME}`, `${PROJECT}`,
//! `${TMPDIR}`. Anything else that looks like a variable is an error, so a
//! typo never silently becomes a literal path.

use std::path::Path;

/// The values variables expand to, for one invocation.
#[derive(Debug, Clone, Copy)]
pub struct Vars<'a> {
    pub home: &'a Path,
    pub project: &'a Path,
    /// The per-session temporary directory.
    pub tmpdir: &'a Path,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    #[error(
        "unknown variable `${{{0}}}`; expected one of `${{HOME}}`, `${{PROJECT}}`, `${{TMPDIR}}` (or a leading `~`)"
    )]
    Unknown(String),
    #[error("unterminated variable `${{…`; expected `${{NAME}}`")]
    Unterminated,
    #[error(
        "a `$` must start a variable written `${{NAME}}`; expected one of `${{HOME}}`, `${{PROJECT}}`, `${{TMPDIR}}`"
    )]
    Bare,
    #[error("`~{0}` (another user's home) is not supported; expected `~` or `~/…`")]
    OtherUser(String),
}

impl Vars<'_> {
    fn value(&self, name: &str) -> Option<String> {
        let p = match name {
            "HOME" => self.home,
            "PROJECT" => self.project,
            "TMPDIR" => self.tmpdir,
            _ => return None,
        };
        Some(p.to_string_lossy().into_owned())
    }

    /// Expand every variable in `written`.
    pub fn expand(&self, written: &str) -> Result<String, VarError> {
        let mut out = String::with_capacity(written.len() + 32);
        let mut rest = written;
        if let Some(after) = rest.strip_prefix('~') {
            let user_end = after.find('/').unwrap_or(after.len());
            if user_end > 0 {
                return Err(VarError::OtherUser(after[..user_end].to_string()));
            }
            out.push_str(&self.home.to_string_lossy());
            rest = after;
        }
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let Some(body) = after.strip_prefix('{') else {
                return Err(VarError::Bare);
            };
            let Some(end) = body.find('}') else {
                return Err(VarError::Unterminated);
            };
            let name = &body[..end];
            match self.value(name) {
                Some(v) => out.push_str(&v),
                None => return Err(VarError::Unknown(name.to_string())),
            }
            rest = &body[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars<'static> {
        Vars {
            home: Path::new("/home/u"),
            project: Path::new("/src/p"),
            tmpdir: Path::new("/tmp/vetto-1"),
        }
    }

    #[test]
    fn expands_known_variables() {
        let v = vars();
        assert_eq!(v.expand("~").as_deref(), Ok("/home/u"));
        assert_eq!(v.expand("~/.ssh").as_deref(), Ok("/home/u/.ssh"));
        assert_eq!(
            v.expand("${HOME}/.rustup").as_deref(),
            Ok("/home/u/.rustup")
        );
        assert_eq!(
            v.expand("${PROJECT}/.env.${TMPDIR}").as_deref(),
            Ok("/src/p/.env./tmp/vetto-1")
        );
        assert_eq!(v.expand("/usr/a~b").as_deref(), Ok("/usr/a~b"));
    }

    #[test]
    fn typoed_variable_is_an_error_not_a_literal_path() {
        let v = vars();
        assert_eq!(
            v.expand("${PROJCT}/x"),
            Err(VarError::Unknown("PROJCT".into()))
        );
        assert_eq!(v.expand("$HOME/x"), Err(VarError::Bare));
        assert_eq!(v.expand("${HOME"), Err(VarError::Unterminated));
        assert_eq!(v.expand("~root/x"), Err(VarError::OtherUser("root".into())));
    }
}
