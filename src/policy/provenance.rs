//! The one line a session starts with: which policy is in force, from
//! where, and its digest (`vetto: policy vetto.toml (extends default)
//! sha256:1a2b3c4d5e6f7a8b from the working tree`).

use super::{PolicyOrigin, Provenance};

/// Hex digits of the digest shown on the line (the session log has all).
const SHOWN_DIGEST: usize = 16;

impl Default for Provenance {
    fn default() -> Self {
        Provenance {
            origin: PolicyOrigin::BuiltIn,
            file: None,
            digest: String::new(),
            extends: vec!["default".into()],
            extends_implicit: true,
            blank_slate: None,
            presets: Vec::new(),
            auto_preset: None,
            command_line: false,
            working_tree_differs: None,
        }
    }
}

impl Provenance {
    /// The session-start line, without the `vetto: ` prefix.
    pub fn line(&self) -> String {
        let digest = format!(
            "sha256:{}",
            self.digest.get(..SHOWN_DIGEST).unwrap_or(&self.digest)
        );
        let mut extra = Vec::new();
        if let Some(a) = &self.auto_preset {
            extra.push(format!(
                "preset {} (the project has {} and the command is {}; \
                 --no-auto-preset or `auto_preset = false` leaves it out)",
                a.preset, a.marker, a.command
            ));
        }
        if !self.presets.is_empty() {
            extra.push(format!("--preset {}", self.presets.join(", ")));
        }
        if self.command_line {
            extra.push("command-line options".to_string());
        }
        let plus = if extra.is_empty() {
            String::new()
        } else {
            format!(" plus {}", extra.join(" and "))
        };
        let Some(file) = &self.file else {
            let why = match &self.origin {
                PolicyOrigin::GitRef {
                    reference, path, ..
                } => format!(" (git ref {reference} has no {path})"),
                _ => String::new(),
            };
            return format!("policy: the built-in default {digest}{why}{plus}");
        };
        let extends = if self.extends.is_empty() {
            "extends = [], no preset".to_string()
        } else {
            format!("extends {}", self.extends.join(", "))
        };
        let from = match &self.origin {
            PolicyOrigin::GitRef {
                reference, commit, ..
            } => format!(
                "from git ref {reference} ({})",
                commit.get(..12).unwrap_or(commit)
            ),
            _ => "from the working tree".to_string(),
        };
        format!("policy {file} ({extends}){plus} {digest} {from}")
    }

    /// With `--policy-ref`: the line saying the working tree's copy is not
    /// the one in force, when it differs.
    pub fn differs_line(&self) -> Option<String> {
        let PolicyOrigin::GitRef {
            reference, path, ..
        } = &self.origin
        else {
            return None;
        };
        (self.working_tree_differs == Some(true)).then(|| {
            format!(
                "the working tree's {path} differs from the policy in force (git ref {reference}); it was not used"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> String {
        "1a2b3c4d5e6f7a8b9c0d".repeat(3)
    }

    #[test]
    fn the_policy_line_names_file_extends_digest_and_origin() {
        let p = Provenance {
            origin: PolicyOrigin::WorkingTree {
                path: "/p/vetto.toml".into(),
            },
            file: Some("vetto.toml".into()),
            digest: digest(),
            ..Provenance::default()
        };
        assert_eq!(
            p.line(),
            "policy vetto.toml (extends default) sha256:1a2b3c4d5e6f7a8b from the working tree"
        );
        let blank = Provenance {
            extends: Vec::new(),
            extends_implicit: false,
            presets: vec!["rust".into()],
            command_line: true,
            ..p.clone()
        };
        assert_eq!(
            blank.line(),
            "policy vetto.toml (extends = [], no preset) plus --preset rust and command-line options sha256:1a2b3c4d5e6f7a8b from the working tree"
        );
        let at_ref = Provenance {
            origin: PolicyOrigin::GitRef {
                reference: "origin/main".into(),
                commit: "0123456789abcdef0123456789abcdef01234567".into(),
                path: "vetto.toml".into(),
                found: true,
            },
            file: Some("origin/main:vetto.toml".into()),
            working_tree_differs: Some(true),
            ..p.clone()
        };
        assert_eq!(
            at_ref.line(),
            "policy origin/main:vetto.toml (extends default) sha256:1a2b3c4d5e6f7a8b from git ref origin/main (0123456789ab)"
        );
        assert_eq!(
            at_ref.differs_line().as_deref(),
            Some(
                "the working tree's vetto.toml differs from the policy in force (git ref origin/main); it was not used"
            )
        );
        assert_eq!(p.differs_line(), None);
    }

    #[test]
    fn the_built_in_default_says_so_and_why() {
        let p = Provenance {
            digest: digest(),
            ..Provenance::default()
        };
        assert_eq!(
            p.line(),
            "policy: the built-in default sha256:1a2b3c4d5e6f7a8b"
        );
        let missing = Provenance {
            origin: PolicyOrigin::GitRef {
                reference: "origin/main".into(),
                commit: "0".repeat(40),
                path: "vetto.toml".into(),
                found: false,
            },
            ..p
        };
        assert_eq!(
            missing.line(),
            "policy: the built-in default sha256:1a2b3c4d5e6f7a8b (git ref origin/main has no vetto.toml)"
        );
    }
}
