//! The built-in presets, embedded from `policies/`. A test checks that
//! every file in `policies/` is registered here and parses.
//!
//! Presets are discoverable by what they fit: [`for_program`] names the
//! preset for a command (`npm install` → `npm`), for guidance such as
//! "did you mean `--preset npm`"; docs/presets.md says what each allows.

/// (name, text) for every preset; `extends = ["NAME"]` and `--preset NAME`
/// refer to these names.
pub const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.toml")),
    ("ci-cache", include_str!("../../policies/ci-cache.toml")),
    // Package managers.
    ("npm", include_str!("../../policies/npm.toml")),
    ("pnpm", include_str!("../../policies/pnpm.toml")),
    ("yarn", include_str!("../../policies/yarn.toml")),
    ("pip", include_str!("../../policies/pip.toml")),
    ("uv", include_str!("../../policies/uv.toml")),
    ("poetry", include_str!("../../policies/poetry.toml")),
    ("cargo", include_str!("../../policies/cargo.toml")),
    ("go", include_str!("../../policies/go.toml")),
    ("maven", include_str!("../../policies/maven.toml")),
    ("gradle", include_str!("../../policies/gradle.toml")),
    // Coding agents.
    (
        "claude-code",
        include_str!("../../policies/claude-code.toml"),
    ),
    ("codex", include_str!("../../policies/codex.toml")),
    ("gemini-cli", include_str!("../../policies/gemini-cli.toml")),
    ("aider", include_str!("../../policies/aider.toml")),
    ("opencode", include_str!("../../policies/opencode.toml")),
    // Kept names: aliases of the package-manager presets.
    ("rust", include_str!("../../policies/rust.toml")),
    ("node", include_str!("../../policies/node.toml")),
    ("python", include_str!("../../policies/python.toml")),
];

/// (program, preset): the preset that fits a command run by that name.
const FITS: &[(&str, &str)] = &[
    ("npm", "npm"),
    ("npx", "npm"),
    ("pnpm", "pnpm"),
    ("pnpx", "pnpm"),
    ("yarn", "yarn"),
    ("pip", "pip"),
    ("pip3", "pip"),
    ("uv", "uv"),
    ("uvx", "uv"),
    ("poetry", "poetry"),
    ("cargo", "cargo"),
    ("go", "go"),
    ("mvn", "maven"),
    ("mvnw", "maven"),
    ("gradle", "gradle"),
    ("gradlew", "gradle"),
    ("claude", "claude-code"),
    ("codex", "codex"),
    ("gemini", "gemini-cli"),
    ("aider", "aider"),
    ("opencode", "opencode"),
];

pub fn get(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The preset for a command whose program is `program` (a path or a bare
/// name: `/usr/bin/npm`, `./gradlew`), if one fits.
pub fn for_program(program: &str) -> Option<&'static str> {
    let base = program.rsplit('/').next().unwrap_or(program);
    FITS.iter().find(|(p, _)| *p == base).map(|(_, n)| *n)
}

/// The preset's first comment paragraph: what it is for, in one line.
pub fn summary(name: &str) -> Option<String> {
    let text = get(name)?;
    let lines: Vec<&str> = text
        .lines()
        .map_while(|l| l.strip_prefix('#'))
        .map(str::trim)
        .collect();
    Some(lines.join(" "))
}

/// How rules from a preset name their source in origins and diagnostics.
pub fn source_name(name: &str) -> String {
    format!("policies/{name}.toml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fitting_preset_exists_and_says_what_it_is() {
        for (_, preset) in FITS {
            assert!(get(preset).is_some(), "{preset}");
            assert!(summary(preset).is_some_and(|s| s.len() > 20), "{preset}");
        }
        assert_eq!(for_program("/usr/bin/npm"), Some("npm"));
        assert_eq!(for_program("./gradlew"), Some("gradle"));
        assert_eq!(for_program("make"), None);
    }

    /// No public registry host is written in a preset: each is
    /// discovered from the tool's own configuration at run time.
    #[test]
    fn presets_name_no_registry_host() {
        for (name, text) in PRESETS {
            for needle in [
                "npmjs.org",
                "pypi.org",
                "pythonhosted",
                "crates.io",
                "golang.org",
                "maven.org",
                "yarnpkg",
            ] {
                assert!(!text.contains(needle), "{name} names {needle}");
            }
        }
    }
}
