//! Which preset fits a command in a project: a small table from the files
//! that mark a project's toolchain (`package.json`, `Cargo.toml`, …) and the
//! commands that toolchain runs to the presets made for it. Pure: the
//! caller says which marker files exist.
//!
//! Each entry lists its presets most specific first (`npm`, then `node`):
//! the first that is built in ([`super::presets::get`]) is the one named.

use super::presets;

/// One toolchain: what marks it, what runs it, which presets fit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// Files at the project root that mark it; empty: the command alone
    /// decides (a coding agent works in any project).
    pub markers: &'static [&'static str],
    /// Command names (the program's file name) that belong to it.
    pub commands: &'static [&'static str],
    /// Presets, most specific first.
    pub presets: &'static [&'static str],
}

/// The table. More specific markers (a lock file) come before the general
/// one (`package.json`), so `pnpm install` in a pnpm project names pnpm.
pub const TABLE: &[Fit] = &[
    Fit {
        markers: &["pnpm-lock.yaml", "package.json"],
        commands: &["pnpm", "pnpx"],
        presets: &["pnpm", "node"],
    },
    Fit {
        markers: &["yarn.lock", "package.json"],
        commands: &["yarn", "yarnpkg"],
        presets: &["yarn", "node"],
    },
    Fit {
        markers: &["package.json"],
        commands: &["npm", "npx", "node", "corepack"],
        presets: &["npm", "node"],
    },
    Fit {
        markers: &["Cargo.toml"],
        commands: &["cargo", "rustc", "rustup", "cargo-nextest"],
        presets: &["cargo", "rust"],
    },
    Fit {
        markers: &["uv.lock", "pyproject.toml"],
        commands: &["uv", "uvx"],
        presets: &["uv", "python"],
    },
    Fit {
        markers: &["poetry.lock", "pyproject.toml"],
        commands: &["poetry"],
        presets: &["poetry", "python"],
    },
    Fit {
        markers: &[
            "pyproject.toml",
            "requirements.txt",
            "setup.py",
            "setup.cfg",
            "Pipfile",
        ],
        commands: &[
            "pip", "pip3", "python", "python3", "pytest", "py.test", "tox", "nox",
        ],
        presets: &["pip", "python"],
    },
    Fit {
        markers: &["go.mod", "go.work"],
        commands: &["go", "gofmt"],
        presets: &["go"],
    },
    Fit {
        markers: &["pom.xml"],
        commands: &["mvn", "mvnw"],
        presets: &["maven"],
    },
    Fit {
        markers: &[
            "build.gradle",
            "build.gradle.kts",
            "settings.gradle",
            "settings.gradle.kts",
        ],
        commands: &["gradle", "gradlew"],
        presets: &["gradle"],
    },
    Fit {
        markers: &[],
        commands: &["claude"],
        presets: &["claude-code"],
    },
    Fit {
        markers: &[],
        commands: &["codex"],
        presets: &["codex"],
    },
    Fit {
        markers: &[],
        commands: &["gemini"],
        presets: &["gemini-cli"],
    },
    Fit {
        markers: &[],
        commands: &["aider"],
        presets: &["aider"],
    },
    Fit {
        markers: &[],
        commands: &["opencode"],
        presets: &["opencode"],
    },
];

/// A preset that fits, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    pub preset: &'static str,
    /// The marker file that was found, when one decided.
    pub marker: Option<&'static str>,
    /// The command's name as it matched.
    pub command: &'static str,
}

impl Suggestion {
    /// `did you mean `--preset npm`? (package.json here, and the command is npm)`
    pub fn line(&self) -> String {
        match self.marker {
            Some(m) => format!(
                "did you mean `--preset {}`? (the project has {m} and the command is {})",
                self.preset, self.command
            ),
            None => format!(
                "did you mean `--preset {}`? (the command is {})",
                self.preset, self.command
            ),
        }
    }
}

/// The program's name: the file name of `argv[0]`, through `env` and
/// `sh -c "…"` / `bash -c "…"` wrappers (one level), and `python -m
/// pytest` as `pytest` stays `python` (both fit the same preset).
pub fn program(argv: &[String]) -> Option<String> {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    let first = argv.first()?;
    let name = base(first);
    match name.as_str() {
        "env" => argv
            .iter()
            .skip(1)
            .find(|a| !a.starts_with('-') && !a.contains('='))
            .map(|a| base(a)),
        "sh" | "bash" | "dash" | "zsh" if argv.get(1).is_some_and(|a| a == "-c") => argv
            .get(2)
            .and_then(|script| script.split_whitespace().next())
            .map(base),
        _ => Some(name),
    }
}

/// The preset that fits `argv` run in a project where `has(marker)` says
/// which marker files exist — unless one of its presets is in force
/// already (`in_force`: the names of the presets the policy extends).
pub fn suggest(
    argv: &[String],
    has: impl Fn(&str) -> bool,
    in_force: &[&str],
) -> Option<Suggestion> {
    suggest_from(TABLE, argv, has, in_force, |p| presets::get(p).is_some())
}

fn suggest_from(
    table: &'static [Fit],
    argv: &[String],
    has: impl Fn(&str) -> bool,
    in_force: &[&str],
    built_in: impl Fn(&str) -> bool,
) -> Option<Suggestion> {
    let program = program(argv)?;
    let fit = table.iter().find_map(|fit| {
        let command = fit.commands.iter().find(|c| **c == program)?;
        let marker = match fit.markers {
            [] => None,
            markers => Some(*markers.iter().find(|m| has(m))?),
        };
        Some((fit, *command, marker))
    })?;
    let (fit, command, marker) = fit;
    if fit.presets.iter().any(|p| in_force.contains(p)) {
        return None;
    }
    let preset = *fit.presets.iter().find(|p| built_in(p))?;
    Some(Suggestion {
        preset,
        marker,
        command,
    })
}

/// The presets a policy's sources name (`preset:node` → `node`).
pub fn in_force<'a>(sources: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    sources
        .into_iter()
        .filter_map(|s| s.strip_prefix("preset:"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    fn only<'a>(files: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
        move |f| files.contains(&f)
    }

    /// The names the presets of issue 12 are given; the table names no
    /// other.
    const PLANNED: &[&str] = &[
        "npm",
        "pnpm",
        "yarn",
        "pip",
        "uv",
        "poetry",
        "cargo",
        "go",
        "maven",
        "gradle",
        "claude-code",
        "codex",
        "gemini-cli",
        "aider",
        "opencode",
    ];

    #[test]
    fn every_preset_the_table_names_is_planned_or_built_in() {
        for fit in TABLE {
            assert!(!fit.commands.is_empty() && !fit.presets.is_empty());
            for p in fit.presets {
                assert!(
                    PLANNED.contains(p) || presets::get(p).is_some(),
                    "{p} is neither built in nor planned"
                );
            }
        }
    }

    #[test]
    fn the_built_in_presets_fit_their_projects_today() {
        let s = suggest(&argv("npm install"), only(&["package.json"]), &["default"]);
        let want = if presets::get("npm").is_some() {
            "npm"
        } else {
            "node"
        };
        assert_eq!(s.as_ref().map(|s| s.preset), Some(want));
        assert_eq!(s.as_ref().and_then(|s| s.marker), Some("package.json"));
        let cargo = suggest(&argv("cargo build"), only(&["Cargo.toml"]), &[]);
        assert!(matches!(cargo.map(|s| s.preset), Some("cargo" | "rust")));
        let py = suggest(&argv("python3 -m pytest"), only(&["requirements.txt"]), &[]);
        assert!(matches!(py.map(|s| s.preset), Some("pip" | "python")));
    }

    #[test]
    fn the_most_specific_built_in_preset_is_named() {
        let all = |_: &str| true;
        let s = suggest_from(TABLE, &argv("npm ci"), only(&["package.json"]), &[], all);
        assert_eq!(s.map(|s| s.preset), Some("npm"));
        let pnpm = suggest_from(
            TABLE,
            &argv("/usr/local/bin/pnpm install"),
            only(&["pnpm-lock.yaml", "package.json"]),
            &[],
            all,
        );
        assert_eq!(
            pnpm.as_ref().map(|s| (s.preset, s.marker)),
            Some(("pnpm", Some("pnpm-lock.yaml")))
        );
        let agent = suggest_from(TABLE, &argv("claude"), only(&[]), &[], all);
        assert_eq!(
            agent.map(|s| s.line()),
            Some("did you mean `--preset claude-code`? (the command is claude)".into())
        );
    }

    #[test]
    fn nothing_is_suggested_without_the_marker_or_with_the_preset_in_force() {
        assert_eq!(suggest(&argv("npm install"), only(&[]), &[]), None);
        assert_eq!(
            suggest(&argv("make"), only(&["package.json", "Cargo.toml"]), &[]),
            None
        );
        assert_eq!(
            suggest(&argv("npm install"), only(&["package.json"]), &["node"]),
            None
        );
        assert_eq!(
            suggest_from(
                TABLE,
                &argv("npm install"),
                only(&["package.json"]),
                &["npm"],
                |_| true
            ),
            None
        );
    }

    #[test]
    fn wrappers_name_the_program_they_run() {
        assert_eq!(program(&argv("env FOO=1 npm test")).as_deref(), Some("npm"));
        assert_eq!(
            program(&["sh".into(), "-c".into(), "cargo build --release".into()]).as_deref(),
            Some("cargo")
        );
        assert_eq!(
            program(&argv("./gradlew build")).as_deref(),
            Some("gradlew")
        );
        assert_eq!(program(&[]), None);
        assert_eq!(
            in_force(["preset:default", "vetto.toml", "preset:node"]),
            ["default", "node"]
        );
    }
}
