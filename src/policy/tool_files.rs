//! The files each tool reads when it starts in a project, that can make it
//! run a program (issue P14): declared per tool, with the format each is
//! written in and, per format, which of its keys do.
//!
//! `policy::autorun` watches every declared place; a change is judged by
//! [`runs`], the canonical text of what the file makes its tool run, so
//! that a harmless edit in the same file (a cargo `[profile]`, an `.npmrc`
//! registry line, a VS Code font size) is no finding and is not put back,
//! while `build.rustc-wrapper` or `script-shell` is.
//!
//! **How the keys are chosen: by what is harmless, not by what runs.** A
//! tool grows new keys that run programs faster than a list of them can
//! follow (cargo's `[env]`, `paths`, `credential-provider`, `doc.browser`;
//! npm's `node-gyp`, `init-module`, `onload-script`); each format below
//! names the keys its tool's documentation gives as settings of output,
//! caching, registries or presentation, and every other key counts. A key
//! vetto does not know is a change to what runs (fail closed), and a file
//! that does not parse is compared by its bytes.

use std::collections::BTreeSet;

/// The format of a watched file, and so how a change to it is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// Any change of bytes, kind or link target (a hook, a task file, a
    /// program).
    Bytes,
    /// An agent's JSON settings: the values of `autorun::RUNS_KEYS`.
    AgentJson,
    /// An agent's TOML settings: the values of `autorun::RUNS_KEYS`.
    AgentToml,
    /// `.cargo/config.toml`, `.cargo/config` (TOML).
    CargoConfig,
    /// `rust-toolchain.toml`, or the legacy `rust-toolchain` (a channel
    /// name alone, else TOML).
    RustToolchain,
    /// `.npmrc` (ini: `key=value`).
    Npmrc,
    /// Yarn 1's `.yarnrc` (`key "value"` lines).
    Yarnrc,
    /// Yarn 2+'s `.yarnrc.yml`.
    YarnrcYml,
    /// `gradle.properties` (Java properties).
    GradleProperties,
    /// VS Code's `settings.json` (JSON with comments).
    VscodeSettings,
    /// A VS Code `*.code-workspace` (JSON with comments).
    CodeWorkspace,
}

/// What is declared at one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One file.
    File,
    /// A directory whose every entry counts (hooks, a dev container).
    Tree,
    /// The entries of the directory whose names end with the text (a
    /// `*.code-workspace` at the root): one level, found again at the end,
    /// so that one the session adds is compared too.
    Ending(&'static str),
}

/// One declared place, relative to a worktree's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared {
    /// The tool that reads it, for the finding ("cargo").
    pub tool: &'static str,
    pub path: &'static str,
    pub shape: Shape,
    pub format: Format,
}

const fn file(tool: &'static str, path: &'static str, format: Format) -> Declared {
    Declared {
        tool,
        path,
        shape: Shape::File,
        format,
    }
}

const fn tree(tool: &'static str, path: &'static str) -> Declared {
    Declared {
        tool,
        path,
        shape: Shape::Tree,
        format: Format::Bytes,
    }
}

/// What each tool reads from the project when it starts there, from the
/// tools' own documentation (see docs/tiers.md for the sources). A
/// toolchain, hook manager, editor or agent is declared here once, and
/// every session watches all of them: a `.cargo/config.toml` planted in a
/// JavaScript project runs at the next `cargo` there all the same.
pub const PROJECT: &[Declared] = &[
    // Shells and environment managers, on `cd`.
    file("direnv", ".envrc", Format::Bytes),
    file("mise", ".mise.toml", Format::Bytes),
    file("mise", "mise.toml", Format::Bytes),
    file("mise", "mise.local.toml", Format::Bytes),
    file("mise", ".mise.local.toml", Format::Bytes),
    file("mise", ".config/mise.toml", Format::Bytes),
    tree("mise", ".mise"),
    tree("mise", ".config/mise"),
    tree("mise", "mise"),
    file("asdf", ".tool-versions", Format::Bytes),
    // git's in-tree files.
    file("git", ".gitattributes", Format::Bytes),
    file("git", ".gitmodules", Format::Bytes),
    file("git-lfs", ".lfsconfig", Format::Bytes),
    file("git", ".gitconfig", Format::Bytes),
    // Editors, when the folder is opened.
    file("VS Code", ".vscode/settings.json", Format::VscodeSettings),
    tree("VS Code", ".vscode"),
    Declared {
        tool: "VS Code",
        path: "",
        shape: Shape::Ending(".code-workspace"),
        format: Format::CodeWorkspace,
    },
    tree("dev containers", ".devcontainer"),
    file("dev containers", ".devcontainer.json", Format::Bytes),
    tree("JetBrains", ".run"),
    tree("JetBrains", ".idea/runConfigurations"),
    // Hook managers: what the next `git commit` runs.
    tree("husky", ".husky"),
    file("pre-commit", ".pre-commit-config.yaml", Format::Bytes),
    file("lefthook", "lefthook.yml", Format::Bytes),
    file("lefthook", "lefthook.yaml", Format::Bytes),
    file("lefthook", "lefthook.json", Format::Bytes),
    file("lefthook", "lefthook.toml", Format::Bytes),
    file("lefthook", ".lefthook.yml", Format::Bytes),
    file("lefthook", ".lefthook.yaml", Format::Bytes),
    file("lefthook", "lefthook-local.yml", Format::Bytes),
    file("lefthook", "lefthook-local.yaml", Format::Bytes),
    file("lefthook", ".lefthook-local.yml", Format::Bytes),
    file("lefthook", ".lefthook-local.yaml", Format::Bytes),
    tree("lefthook", ".lefthook"),
    tree("lefthook", ".lefthook-local"),
    // Rust: every `cargo` in the project.
    file("cargo", ".cargo/config.toml", Format::CargoConfig),
    file("cargo", ".cargo/config", Format::CargoConfig),
    file("rustup", "rust-toolchain.toml", Format::RustToolchain),
    file("rustup", "rust-toolchain", Format::RustToolchain),
    // JavaScript: every `npm`, `yarn`, `pnpm` in the project.
    file("npm", ".npmrc", Format::Npmrc),
    file("yarn", ".yarnrc", Format::Yarnrc),
    file("yarn", ".yarnrc.yml", Format::YarnrcYml),
    file("pnpm", ".pnpmfile.cjs", Format::Bytes),
    file("pnpm", ".pnpmfile.mjs", Format::Bytes),
    // Java: the next `mvn`, `./mvnw`, `./gradlew`.
    file("maven", ".mvn/jvm.config", Format::Bytes),
    file("maven", ".mvn/maven.config", Format::Bytes),
    file("maven", ".mvn/extensions.xml", Format::Bytes),
    file(
        "maven",
        ".mvn/wrapper/maven-wrapper.properties",
        Format::Bytes,
    ),
    file("gradle", "gradle.properties", Format::GradleProperties),
    file(
        "gradle",
        "gradle/wrapper/gradle-wrapper.properties",
        Format::Bytes,
    ),
    // Coding agents: their project settings.
    file("Claude Code", ".claude/settings.json", Format::AgentJson),
    file(
        "Claude Code",
        ".claude/settings.local.json",
        Format::AgentJson,
    ),
    file("Claude Code", ".mcp.json", Format::AgentJson),
    file("Gemini CLI", ".gemini/settings.json", Format::AgentJson),
    file("Codex", ".codex/config.toml", Format::AgentToml),
    file("Cursor", ".cursor/mcp.json", Format::AgentJson),
    file("OpenCode", "opencode.json", Format::AgentJson),
    file("Aider", ".aider.conf.yml", Format::Bytes),
];

/// What a file of `format` makes its tool run, as one canonical text:
/// equal texts, equal behaviour. `None`: the format has no such reading
/// (bytes, agents' settings) or the file does not parse as it; the caller
/// compares its bytes then.
pub fn runs(bytes: &[u8], format: Format) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let entries = match format {
        Format::Bytes | Format::AgentJson | Format::AgentToml => return None,
        Format::CargoConfig => flatten_toml(text)?,
        Format::RustToolchain => match flatten_toml(text) {
            Some(e) => e,
            // The legacy file: a channel name alone. A name picks one of
            // rustup's toolchains; a path is a program of the job's.
            None if !text.contains(['/', '\\']) && text.lines().count() <= 1 => Vec::new(),
            None => return None,
        },
        Format::Npmrc => ini(text),
        Format::Yarnrc => yarnrc(text),
        Format::YarnrcYml => flatten_yaml(text)?,
        Format::GradleProperties => properties(text),
        Format::VscodeSettings | Format::CodeWorkspace => flatten_jsonc(text)?,
    };
    let kept: BTreeSet<String> = entries
        .into_iter()
        .filter(|(key, _)| !harmless(format, key))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    Some(kept.into_iter().collect::<Vec<_>>().join("\n"))
}

/// The keys of `runs`' text that differ between two of its texts, for the
/// finding ("build.rustc-wrapper").
pub fn keys_changed(before: &str, after: &str) -> Vec<String> {
    let lines = |t: &str| -> BTreeSet<String> { t.lines().map(str::to_string).collect() };
    let (b, a) = (lines(before), lines(after));
    let keys: BTreeSet<String> = b
        .symmetric_difference(&a)
        .map(|l| l.split_once('=').map_or(l.as_str(), |(k, _)| k).to_string())
        .collect();
    keys.into_iter().collect()
}

/// Keys that configure output, caching, registries or presentation, per
/// format, from each tool's documentation; `*` ends a prefix. Everything
/// else in the file is what it runs.
fn harmless(format: Format, key: &str) -> bool {
    let list: &[&str] = match format {
        // The Cargo Book, "Configuration": profiles, the terminal, `cargo
        // new`, jobs and output directories, retries and timeouts,
        // aliases (which expand to cargo's own commands).
        Format::CargoConfig => &[
            "profile.*",
            "term.*",
            "cargo-new.*",
            "future-incompat-report.*",
            "alias.*",
            "build.jobs",
            "build.incremental",
            "build.target",
            "build.target-dir",
            "build.pipelining",
            "net.retry",
            "net.offline",
            "http.timeout",
            "http.multiplexing",
            "http.low-speed-limit",
            "http.debug",
            "resolver.*",
        ],
        // rustup, "Overrides": a channel and what to install with it; a
        // `path` toolchain is a program.
        Format::RustToolchain => &[
            "toolchain.channel",
            "toolchain.components",
            "toolchain.targets",
            "toolchain.profile",
        ],
        // npm's config docs: registries and their credentials, saving,
        // audit and funding, output, lockfiles, peer dependencies,
        // retries.
        Format::Npmrc => &[
            "registry",
            "*:registry",
            "//*",
            "always-auth",
            "cache",
            "save",
            "save-exact",
            "save-prefix",
            "save-dev",
            "fund",
            "audit",
            "audit-level",
            "loglevel",
            "progress",
            "color",
            "unicode",
            "update-notifier",
            "engine-strict",
            "package-lock",
            "package-lock-only",
            "lockfile-version",
            "legacy-peer-deps",
            "strict-peer-deps",
            "auto-install-peers",
            "fetch-retries",
            "fetch-retry-*",
            "fetch-timeout",
            "maxsockets",
            "prefer-offline",
            "prefer-online",
            "offline",
            "init-*",
            "tag-version-prefix",
            "use-node-version",
            "shamefully-hoist",
            "link-workspace-packages",
        ],
        Format::Yarnrc => &[
            "registry",
            "*:registry",
            "lastUpdateCheck",
            "network-timeout",
            "save-prefix",
            "save-exact",
            "disable-self-update-check",
            "email",
            "username",
            "init-*",
            "version-*",
            "--frozen-lockfile",
            "--install.frozen-lockfile",
            "--network-timeout",
        ],
        // Yarn's `.yarnrc.yml` settings: registries, linker, cache,
        // telemetry, output, checksums; `yarnPath`, `plugins` and
        // `enableScripts` are programs.
        Format::YarnrcYml => &[
            "npmRegistryServer",
            "npmScopes.*",
            "npmAuthToken",
            "npmAlwaysAuth",
            "npmAuthIdent",
            "npmPublishRegistry",
            "nodeLinker",
            "enableTelemetry",
            "enableGlobalCache",
            "enableMirror",
            "enableImmutableInstalls",
            "enableProgressBars",
            "enableColors",
            "enableInlineBuilds",
            "compressionLevel",
            "checksumBehavior",
            "cacheFolder",
            "logFilters.*",
            "httpTimeout",
            "httpRetry",
            "networkConcurrency",
            "defaultSemverRangePrefix",
            "initScope",
            "initFields.*",
            "changesetBaseRefs.*",
            "tsEnableAutoTypes",
            "supportedArchitectures.*",
            "nmMode",
            "nmHoistingLimits",
            "pnpMode",
        ],
        // A project's own properties are read by its build script (the
        // project's code, reviewed as such); Gradle's own `org.gradle.*`
        // start the JVM (`jvmargs`, `java.home`) unless they only tune
        // the build; `systemProp.*` set the JVM's properties.
        Format::GradleProperties => {
            return !(key.starts_with("org.gradle.") || key.starts_with("systemProp."))
                || matches!(
                    key,
                    "org.gradle.parallel"
                        | "org.gradle.caching"
                        | "org.gradle.daemon"
                        | "org.gradle.configureondemand"
                        | "org.gradle.console"
                        | "org.gradle.logging.level"
                        | "org.gradle.warning.mode"
                        | "org.gradle.workers.max"
                        | "org.gradle.vfs.watch"
                        | "org.gradle.configuration-cache"
                        | "org.gradle.caching.debug"
                );
        }
        // VS Code: the editor's, the workbench's and the window's own
        // presentation, search and file-explorer settings, also inside a
        // `[language]` block; every extension's and every terminal,
        // task or tool-path setting counts.
        Format::VscodeSettings => return vscode_harmless(key),
        // A workspace's folders (each folder's own files are watched
        // where they are) and its settings as above; its `tasks`,
        // `launch` and `extensions` count.
        Format::CodeWorkspace => {
            return key == "folders" || key.strip_prefix("settings.").is_some_and(vscode_harmless);
        }
        Format::Bytes | Format::AgentJson | Format::AgentToml => &[],
    };
    list.iter().any(|pattern| glob_key(pattern, key))
}

fn vscode_harmless(key: &str) -> bool {
    // `[typescript].editor.tabSize`: the block's own settings.
    let key = match key.strip_prefix('[') {
        Some(rest) => rest.split_once("].").map_or(key, |(_, k)| k),
        None => key,
    };
    [
        "editor.",
        "workbench.",
        "window.",
        "explorer.",
        "search.",
        "diffEditor.",
        "breadcrumbs.",
        "zenMode.",
        "files.",
        "scm.",
        "outline.",
        "problems.",
        "telemetry.",
        "cSpell.",
    ]
    .iter()
    .any(|p| key.starts_with(p))
}

/// `*` at the start or the end of `pattern` stands for any text.
fn glob_key(pattern: &str, key: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        (Some(end), _) => key.ends_with(end),
        (None, Some(start)) => key.starts_with(start),
        (None, None) => key == pattern,
    }
}

/// Every leaf of a TOML document as `a.b.c` and its value.
fn flatten_toml(text: &str) -> Option<Vec<(String, String)>> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let value = serde_json::to_value(table).ok()?;
    let mut out = Vec::new();
    flatten_json(&value, &mut String::new(), &mut out);
    Some(out)
}

/// VS Code's JSON with comments and trailing commas, as VS Code reads it.
fn flatten_jsonc(text: &str) -> Option<Vec<(String, String)>> {
    let options = jsonc_parser::ParseOptions::default();
    let value: serde_json::Value =
        jsonc_parser::parse_to_serde_value::<serde_json::Value>(text, &options).ok()?;
    let mut out = Vec::new();
    flatten_json(&value, &mut String::new(), &mut out);
    Some(out)
}

/// Objects become `a.b` keys; arrays and scalars are values (an array of
/// plugins or arguments changes as a whole).
fn flatten_json(value: &serde_json::Value, at: &mut String, out: &mut Vec<(String, String)>) {
    match value {
        // An empty table is a value too (`[tasks]` alone is a change).
        serde_json::Value::Object(map) if !map.is_empty() || at.is_empty() => {
            for (key, item) in map {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(key);
                flatten_json(item, at, out);
                at.truncate(len);
            }
        }
        other => out.push((at.clone(), other.to_string())),
    }
}

fn flatten_yaml(text: &str) -> Option<Vec<(String, String)>> {
    use yaml_rust2::{Yaml, YamlLoader};
    fn walk(y: &Yaml, at: &mut String, out: &mut Vec<(String, String)>) {
        match y {
            Yaml::Hash(map) if !map.is_empty() || at.is_empty() => {
                for (k, v) in map {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    let len = at.len();
                    if !at.is_empty() {
                        at.push('.');
                    }
                    at.push_str(&key);
                    walk(v, at, out);
                    at.truncate(len);
                }
            }
            other => out.push((at.clone(), format!("{other:?}"))),
        }
    }
    let docs = YamlLoader::load_from_str(text).ok()?;
    let mut out = Vec::new();
    for doc in &docs {
        walk(doc, &mut String::new(), &mut out);
    }
    Some(out)
}

/// npm's ini: `key = value` lines, `;` and `#` comments, `[section]`
/// headers prefixing their keys.
fn ini(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with([';', '#']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = format!("{}.", name.trim());
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, "true"));
        out.push((format!("{section}{}", key.trim()), value.trim().to_string()));
    }
    out
}

/// Yarn 1's lockfile-like syntax: `key value` or `key "value"` lines.
fn yarnrc(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, value) = split_yarn_key(l);
            (key.trim_matches('"').to_string(), value.trim().to_string())
        })
        .collect()
}

fn split_yarn_key(line: &str) -> (&str, &str) {
    if let Some(rest) = line.strip_prefix('"')
        && let Some(end) = rest.find('"')
    {
        return (&line[..end + 2], &line[end + 2..]);
    }
    line.split_once(char::is_whitespace).unwrap_or((line, ""))
}

/// Java properties: `key=value`, `key: value` or `key value`; `#` and `!`
/// comments.
fn properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(['#', '!']))
        .map(|l| {
            let at = l.find(['=', ':', ' ', '\t']).unwrap_or(l.len());
            let (key, value) = l.split_at(at);
            let value = value.trim_start_matches(['=', ':', ' ', '\t']);
            (key.to_string(), value.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For each format: a harmless edit reads the same, a program does
    /// not, and a file that does not parse has no reading (bytes decide).
    #[test]
    fn each_format_tells_a_harmless_edit_from_a_program() {
        let cases: &[(Format, &str, &str, &str)] = &[
            (
                Format::CargoConfig,
                "[profile.dev]\nopt-level = 0\n",
                "[profile.dev]\nopt-level = 1\n[term]\ncolor = \"never\"\n[alias]\nb = \"build\"\n",
                "[build]\nrustc-wrapper = \"./w.sh\"\n",
            ),
            (
                Format::CargoConfig,
                "",
                "[build]\njobs = 2\n",
                "[target.x86_64-unknown-linux-gnu]\nrunner = \"./r\"\n",
            ),
            (
                Format::CargoConfig,
                "",
                "[net]\nretry = 5\n",
                "[env]\nLD_PRELOAD = \"/p/x.so\"\n",
            ),
            (
                Format::RustToolchain,
                "[toolchain]\nchannel = \"stable\"\n",
                "[toolchain]\nchannel = \"1.80\"\ncomponents = [\"clippy\"]\n",
                "[toolchain]\npath = \"/p/tc\"\n",
            ),
            (Format::RustToolchain, "stable\n", "nightly\n", "/p/tc\n"),
            (
                Format::Npmrc,
                "registry=https://r/\n",
                "registry=https://other/\n; comment\nsave-exact=true\n//r/:_authToken=x\n",
                "script-shell=/p/evil\n",
            ),
            (
                Format::Npmrc,
                "",
                "@s:registry=https://r/\ncache=/tmp/npm-cache\n",
                "node-options=--require /p/x.js\n",
            ),
            (
                Format::Yarnrc,
                "registry \"https://r/\"\n",
                "registry \"https://r/\"\nlastUpdateCheck 1700000000\n",
                "yarn-path \"./evil.js\"\n",
            ),
            (
                Format::YarnrcYml,
                "nodeLinker: node-modules\n",
                "nodeLinker: pnp\nenableTelemetry: false\nnpmScopes:\n  s:\n    npmRegistryServer: https://r\n",
                "yarnPath: ./evil.cjs\n",
            ),
            (
                Format::GradleProperties,
                "org.gradle.parallel=true\n",
                "org.gradle.caching=true\nversion=1.2\n",
                "org.gradle.jvmargs=-javaagent:/p/a.jar\n",
            ),
            (
                Format::VscodeSettings,
                "{\n  // mine\n  \"editor.fontSize\": 12,\n}\n",
                "{\"editor.fontSize\": 14, \"[rust]\": {\"editor.tabSize\": 2}}",
                "{\"terminal.integrated.env.linux\": {\"PATH\": \"/p/bin\"}}",
            ),
            (
                Format::CodeWorkspace,
                "{\"folders\": [{\"path\": \".\"}]}",
                "{\"folders\": [{\"path\": \".\"}], \"settings\": {\"editor.fontSize\": 3}}",
                "{\"folders\": [{\"path\": \".\"}], \"tasks\": {\"tasks\": [{\"command\": \"id\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}}",
            ),
        ];
        for (format, before, harmless_edit, planted) in cases {
            let b = runs(before.as_bytes(), *format);
            assert!(b.is_some(), "{format:?}: {before:?} does not parse");
            assert_eq!(
                b,
                runs(harmless_edit.as_bytes(), *format),
                "{format:?}: {harmless_edit:?} read as a change of what runs"
            );
            let p = runs(planted.as_bytes(), *format);
            assert_ne!(b, p, "{format:?}: {planted:?} not read as a change");
            // A planted file that does not parse is compared by its bytes.
            if let (Some(b), Some(p)) = (&b, &p) {
                assert!(!keys_changed(b, p).is_empty(), "{format:?}: no key named");
            }
        }
    }

    #[test]
    fn a_key_no_tool_documents_counts_and_a_file_that_does_not_parse_has_no_reading() {
        assert_ne!(
            runs(b"", Format::CargoConfig),
            runs(b"[some-new-table]\nx = 1\n", Format::CargoConfig)
        );
        assert_eq!(runs(b"[build\n", Format::CargoConfig), None);
        assert_eq!(runs(b"{\"a\": ", Format::VscodeSettings), None);
        assert_eq!(runs(b"\xff", Format::Npmrc), None);
        assert_eq!(runs(b"x", Format::Bytes), None);
    }

    #[test]
    fn every_declared_place_is_relative_and_named_once() {
        let mut seen = BTreeSet::new();
        for d in PROJECT {
            assert!(!d.path.starts_with('/'), "{}", d.path);
            assert!(
                seen.insert((d.path, d.shape == Shape::Tree)),
                "{} declared twice",
                d.path
            );
        }
    }
}
