//! What runs later, outside the sandbox: the files whose content makes git,
//! an editor, a shell or a coding agent run a program without anyone
//! asking (issue P9). A job may write its project; a write here is a
//! program planted for the next `git commit`, the next folder open, the
//! next agent start.
//!
//! The set is resolved from what the tools' own configuration **names**,
//! not only from well-known names: every repository the project holds at
//! its root or belongs to (a linked worktree's `gitdir:`, its common
//! directory, submodules' git directories), each config file followed
//! through its `include.path` and `includeIf.*.path`, `core.hooksPath`
//! wherever it points, and every program a config value or an agent's
//! settings name by path (`core.fsmonitor = .tools/watch`, an MCP server's
//! `./server.js`). The well-known project files (editor tasks, dev
//! containers, direnv, hook managers, agents' project settings) are added
//! to that.
//!
//! How a change is judged ([`Compare`]): a file that is nothing but a
//! program or its configuration by its bytes; an agent's settings, which
//! mix the agent's own state (history, trust, tips) with what it runs, by
//! the values of [`RUNS_KEYS`] alone ([`runs`]), so that the agent's own
//! bookkeeping is no finding and a new hook or MCP server is.
//!
//! Pure: everything is read through [`Files`]; the snapshot that compares
//! start and end is `supervisor::snapshot`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::tool_files::{self, Shape};

/// Config and settings files are read up to this size; a larger one is
/// compared by its size and stamps only (`supervisor::snapshot`).
pub const MAX_CONFIG: u64 = 4 << 20;
/// Nested includes followed (git's own limit is 10).
const MAX_INCLUDE_DEPTH: usize = 10;
/// Locations resolved in all: the rest is reported as not checked.
pub const MAX_LOCATIONS: usize = 512;
/// Entries of the project's top looked at for virtualenvs, and how many
/// virtualenvs are watched.
const MAX_TOP_ENTRIES: usize = 4096;
const MAX_VENVS: usize = 16;
/// Nested repositories kept by content.
pub const MAX_NESTED: usize = 32;
/// Submodule git directories looked for below `modules/`, and how deep.
const MAX_MODULES: usize = 64;
const MODULES_DEPTH: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// What resolution reads (faked in tests). Neither call follows a link in
/// the last component.
pub trait Files {
    /// `lstat`: `None` when nothing is there.
    fn kind(&self, path: &Path) -> Option<Kind>;
    /// A regular file, whole, when it is at most `max` bytes.
    fn read(&self, path: &Path, max: u64) -> Option<Vec<u8>>;
    /// Up to `max` entries of a directory.
    fn list(&self, dir: &Path, max: usize) -> Option<Vec<(OsString, Kind)>>;
    /// A symbolic link's target (never followed).
    fn read_link(&self, path: &Path) -> Option<OsString>;
    /// The permission bits (`lstat`), to put a file back as it was.
    fn mode(&self, path: &Path) -> Option<u32> {
        let _ = path;
        None
    }
}

/// How a change at a location is judged: by the format the tool reads
/// it in ([`tool_files::runs`]).
pub use super::tool_files::Format as Compare;

/// One place something runs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    /// A directory whose every entry runs or configures (hooks, a dev
    /// container): each entry is compared.
    pub tree: bool,
    /// Not the directory itself but its entries whose names end so (a
    /// `*.code-workspace`), found again at the end.
    pub ending: Option<&'static str>,
    /// A virtualenv's `site-packages`: what an installed package's
    /// `*.dist-info/RECORD` lists there is the package manager's install,
    /// not a planting.
    pub installed: Option<PathBuf>,
    pub compare: Compare,
    /// Why it is watched, for the finding ("core.hooksPath in …/.git/config").
    pub why: String,
}

/// Where to look.
#[derive(Debug, Clone)]
pub struct Roots {
    pub project: PathBuf,
    pub home: Option<PathBuf>,
    /// Agent settings outside the project that the job may write (a
    /// preset's grant): [`agent_home_files`] filtered by the policy.
    pub agent_files: Vec<(PathBuf, Compare)>,
    /// Directories of programs an agent installs in its own home and runs
    /// at its next start, that the job may write: [`agent_home_trees`]
    /// filtered by the policy. Any change in one is reported.
    pub agent_trees: Vec<PathBuf>,
    /// The `.git` directories below the project's top that the start's
    /// walk listed: nested repositories, whose config and hooks are kept
    /// by content too (at most [`MAX_NESTED`]; the rest are judged by
    /// change times alone).
    pub nested_git_dirs: Vec<PathBuf>,
}

/// What was resolved.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub locations: Vec<Location>,
    /// More than [`MAX_LOCATIONS`] were named: the rest is not checked.
    pub truncated: bool,
    /// The agents' settings as resolving read them, each read and parsed
    /// once: what they run ([`runs`]) is what a snapshot keeps of them.
    pub settings: BTreeMap<PathBuf, Settings>,
}

/// An agent's settings file as read.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bytes: Vec<u8>,
    /// [`runs`] of `bytes`.
    pub runs: String,
}

/// Keys whose values make an agent run a program, change what its
/// commands run with, or let them run unasked (Claude Code, Codex, Gemini
/// CLI, Cursor, OpenCode): at any depth of its settings, so that
/// per-project tables (`projects.<dir>.mcpServers`) count too.
pub const RUNS_KEYS: [&str; 28] = [
    "hooks",
    "mcpServers",
    "mcp_servers",
    "mcp",
    "enabledMcpjsonServers",
    "enableAllProjectMcpServers",
    "statusLine",
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "env",
    "notify",
    "shell_environment_policy",
    "model_providers",
    "approval_policy",
    "sandbox_mode",
    "toolDiscoveryCommand",
    "toolCallCommand",
    "defaultMode",
    "command",
    "plugin",
    // What widens what the agent does unasked: Claude Code's permission
    // rules (`permissions.allow: ["Bash(*)"]`), the plugins it enables and
    // the marketplaces it trusts, its older per-project `allowedTools`;
    // Codex's trust in a directory; Gemini CLI's allowed and core tools.
    "permissions",
    "enabledPlugins",
    "extraKnownMarketplaces",
    "allowedTools",
    "trust_level",
    "tools",
];

/// Claude Code's and Codex's directories in the home, where
/// `CLAUDE_CONFIG_DIR` and `CODEX_HOME` move them.
fn agent_dirs(home: &Path, env: &[(String, String)]) -> (PathBuf, PathBuf) {
    let var = |name: &str| {
        env.iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    (
        var("CLAUDE_CONFIG_DIR").unwrap_or_else(|| home.join(".claude")),
        var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
    )
}

/// An agent's settings in the home directory, which it reads at every
/// start (`CLAUDE_CONFIG_DIR` and `CODEX_HOME` move two of them); the
/// caller keeps those the job may write.
pub fn agent_home_files(home: &Path, env: &[(String, String)]) -> Vec<(PathBuf, Compare)> {
    let (claude, codex) = agent_dirs(home, env);
    let mut files = vec![
        (claude.join("settings.json"), Compare::AgentJson),
        (claude.join("settings.local.json"), Compare::AgentJson),
        (home.join(".claude.json"), Compare::AgentJson),
        (claude.join(".claude.json"), Compare::AgentJson),
        (codex.join("config.toml"), Compare::AgentToml),
        (home.join(".gemini/settings.json"), Compare::AgentJson),
        (home.join(".cursor/mcp.json"), Compare::AgentJson),
        (
            home.join(".config/opencode/opencode.json"),
            Compare::AgentJson,
        ),
        (home.join(".aider.conf.yml"), Compare::Bytes),
        // Instructions each agent follows at every start, and the
        // directories Gemini CLI trusts.
        (claude.join("CLAUDE.md"), Compare::Bytes),
        (home.join(".gemini/GEMINI.md"), Compare::Bytes),
        (home.join(".gemini/trustedFolders.json"), Compare::Bytes),
        (codex.join("AGENTS.md"), Compare::Bytes),
    ];
    // Shells' and git's own start-up files, should a policy make them
    // writable.
    for rc in [
        ".bashrc",
        ".bash_profile",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".gitconfig",
        ".config/git/config",
        ".npmrc",
        ".cargo/config.toml",
    ] {
        files.push((home.join(rc), Compare::Bytes));
    }
    files
}

/// Directories where an agent keeps programs it runs at its next start,
/// outside any sandbox: Codex copies its app-server daemon into
/// `packages/` (`packages/app-server-daemon/releases/VERSION/bin/codex`)
/// and starts it from there. A program the sandboxed agent writes there
/// runs the next time Codex starts, wherever it starts.
///
/// The same for what an agent loads at its start from its home by
/// directory, each entry an instruction it follows or a program it runs:
/// Claude Code's `skills/`, `commands/` and `agents/`, Gemini CLI's
/// `extensions/` (each with a manifest that can start an MCP server) and
/// `commands/` (`!{…}` runs a shell), Codex's `rules/` (commands it runs
/// without asking). Claude Code's `plugins/` cache, which it updates
/// itself, is not one: what enables a plugin (`enabledPlugins`) is watched
/// in its settings.
pub fn agent_home_trees(home: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
    let (claude, codex) = agent_dirs(home, env);
    vec![
        codex.join("packages"),
        codex.join("rules"),
        claude.join("skills"),
        claude.join("commands"),
        claude.join("agents"),
        home.join(".gemini/extensions"),
        home.join(".gemini/commands"),
    ]
}

/// A Codex trust level for the session's own project is the user's
/// answer to the question Codex asks at its first start there; trust in
/// any other directory widens what Codex does unasked and stays in what
/// its settings run. `runs` text with that one line taken out.
pub fn without_own_trust(runs: &str, project: &Path) -> String {
    let own = format!(
        "/projects/{}/trust_level=",
        project
            .to_string_lossy()
            .replace('~', "~0")
            .replace('/', "~1")
    );
    runs.lines()
        .filter(|l| !l.starts_with(&own))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Everything that runs later from `roots`, as the files say now.
pub fn resolve(roots: &Roots, files: &dyn Files) -> Resolved {
    let mut r = Resolver {
        roots,
        files,
        out: Vec::new(),
        seen: BTreeSet::new(),
        truncated: false,
        configs: BTreeSet::new(),
        settings: BTreeMap::new(),
        endings: Vec::new(),
    };
    r.project_files(&roots.project, "");
    r.virtualenvs(&roots.project);
    for repo in repositories(&roots.project, files) {
        r.repository(&repo);
    }
    for g in roots.nested_git_dirs.iter().take(MAX_NESTED) {
        r.nested(g);
    }
    for (path, compare) in &roots.agent_files {
        r.add(path.clone(), false, *compare, "an agent's settings".into());
        if matches!(compare, Compare::AgentJson | Compare::AgentToml) {
            r.agent_programs(path, *compare);
        }
    }
    for dir in &roots.agent_trees {
        r.add(
            dir.clone(),
            true,
            Compare::Bytes,
            "what an agent loads at its next start (programs, rules, skills, extensions)".into(),
        );
    }
    let mut locations = r.out;
    locations.append(&mut r.endings);
    if locations.len() > MAX_LOCATIONS {
        locations.truncate(MAX_LOCATIONS);
        r.truncated = true;
    }
    Resolved {
        locations,
        truncated: r.truncated,
        settings: r.settings,
    }
}

/// A repository: where git keeps it and the tree it checks out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Repo {
    /// The `.git` entry as found in the worktree (a directory or a
    /// `gitdir:` file); `None` for a submodule's git directory.
    entry: Option<PathBuf>,
    gitdir: PathBuf,
    /// `commondir`'s target (a linked worktree's main git directory).
    common: PathBuf,
    worktree: Option<PathBuf>,
}

/// The repository the project is or belongs to: its git directory and
/// the worktree its index describes (a linked worktree's own git
/// directory, which holds its own index).
pub fn repository_of(project: &Path, files: &dyn Files) -> Option<(PathBuf, PathBuf)> {
    let repo = repositories(project, files).into_iter().next()?;
    Some((repo.gitdir, repo.worktree?))
}

/// The repositories the project is or belongs to: its own `.git`, else
/// the nearest one above it; then that repository's submodules.
fn repositories(project: &Path, files: &dyn Files) -> Vec<Repo> {
    let mut repos = Vec::new();
    let found = project.ancestors().find_map(|dir| {
        let entry = dir.join(".git");
        let gitdir = match files.kind(&entry)? {
            Kind::Dir => entry.clone(),
            Kind::File => gitdir_of_file(&entry, dir, files)?,
            _ => return None,
        };
        Some((entry, gitdir, dir.to_path_buf()))
    });
    let Some((entry, gitdir, worktree)) = found else {
        return repos;
    };
    let common = common_of(&gitdir, files);
    repos.push(Repo {
        entry: Some(entry),
        gitdir,
        common: common.clone(),
        worktree: Some(worktree),
    });
    // Submodules' git directories: `modules/<name>/…`, nested.
    let mut stack = vec![(common.join("modules"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        if repos.len() > MAX_MODULES || depth > MODULES_DEPTH {
            break;
        }
        for (name, kind) in files.list(&dir, 256).unwrap_or_default() {
            if kind != Kind::Dir {
                continue;
            }
            let child = dir.join(name);
            if files.kind(&child.join("config")) == Some(Kind::File) {
                let worktree = files
                    .read(&child.join("config"), MAX_CONFIG)
                    .and_then(|b| config_value(&b, "core", "worktree"))
                    .map(|w| normalize(&child.join(w)));
                repos.push(Repo {
                    entry: None,
                    gitdir: child.clone(),
                    common: child.clone(),
                    worktree,
                });
                stack.push((child.join("modules"), depth + 1));
            } else {
                stack.push((child, depth + 1));
            }
        }
    }
    repos
}

/// A `.git` file's `gitdir:` target, relative to the worktree `dir`.
fn gitdir_of_file(entry: &Path, dir: &Path, files: &dyn Files) -> Option<PathBuf> {
    let bytes = files.read(entry, 4096)?;
    let text = String::from_utf8(bytes).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!target.is_empty()).then(|| normalize(&dir.join(target)))
}

/// `commondir`'s target, relative to the git directory, else itself.
fn common_of(gitdir: &Path, files: &dyn Files) -> PathBuf {
    files
        .read(&gitdir.join("commondir"), 4096)
        .and_then(|b| String::from_utf8(b).ok())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .map_or_else(|| gitdir.to_path_buf(), |t| normalize(&gitdir.join(t)))
}

/// The first value of `section.key` in one config file (no includes).
fn config_value(bytes: &[u8], section: &str, key: &str) -> Option<String> {
    let file = parse_config(bytes)?;
    file.sections()
        .filter(|s| s.header().name().eq_ignore_ascii_case(section.as_bytes()))
        .flat_map(|s| s.values(key))
        .last()
        .map(|v| String::from_utf8_lossy(v.as_ref()).into_owned())
}

fn parse_config(bytes: &[u8]) -> Option<gix_config::File> {
    gix_config::File::from_bytes_no_includes(
        bytes,
        gix_config::file::Metadata::api(),
        Default::default(),
    )
    .ok()
}

/// Config keys whose value is a program or a command line git runs
/// (`section`, `key`; `*` for any key of the section). A leading `!`
/// (aliases) is a shell command line.
const PROGRAM_KEYS: [(&str, &str); 20] = [
    ("core", "fsmonitor"),
    ("core", "sshcommand"),
    ("core", "editor"),
    ("core", "pager"),
    ("core", "askpass"),
    ("credential", "helper"),
    ("filter", "clean"),
    ("filter", "smudge"),
    ("filter", "process"),
    ("diff", "textconv"),
    ("diff", "command"),
    ("merge", "driver"),
    ("sequence", "editor"),
    ("gpg", "program"),
    ("alias", "*"),
    ("remote", "uploadpack"),
    ("remote", "receivepack"),
    ("pager", "*"),
    ("difftool", "cmd"),
    ("mergetool", "cmd"),
];

struct Resolver<'a> {
    roots: &'a Roots,
    files: &'a dyn Files,
    out: Vec<Location>,
    seen: BTreeSet<PathBuf>,
    truncated: bool,
    /// Config files already followed (an include cycle ends here).
    configs: BTreeSet<PathBuf>,
    settings: BTreeMap<PathBuf, Settings>,
    /// [`Shape::Ending`] places, added after the rest.
    endings: Vec<Location>,
}

impl Resolver<'_> {
    fn add(&mut self, path: PathBuf, tree: bool, compare: Compare, why: String) {
        self.add_with(path, tree, None, compare, why);
    }

    fn add_with(
        &mut self,
        path: PathBuf,
        tree: bool,
        ending: Option<&'static str>,
        compare: Compare,
        why: String,
    ) {
        if self.seen.contains(&path) {
            return;
        }
        if self.out.len() >= MAX_LOCATIONS {
            self.truncated = true;
            return;
        }
        self.seen.insert(path.clone());
        self.out.push(Location {
            path,
            tree,
            ending,
            installed: None,
            compare,
            why,
        });
    }

    /// What the tools read at worktree `root` ([`tool_files::PROJECT`]);
    /// `whose` says which worktree when it is not the project's.
    fn project_files(&mut self, root: &Path, whose: &str) {
        for d in tool_files::PROJECT {
            let path = normalize(&root.join(d.path));
            let (tree, ending) = match d.shape {
                Shape::File => (false, None),
                Shape::Tree => (true, None),
                Shape::Ending(e) => (false, Some(e)),
            };
            let rel = match d.shape {
                Shape::Ending(e) => format!("*{e}"),
                _ => d.path.to_string(),
            };
            let why = format!("{rel}, read by {}{whose}", d.tool);
            // A directory's ending-matches share its path: keyed apart.
            if ending.is_some() {
                self.endings.push(Location {
                    path,
                    tree,
                    ending,
                    installed: None,
                    compare: d.format,
                    why,
                });
                continue;
            }
            self.add(path.clone(), tree, d.format, why);
            if matches!(d.format, Compare::AgentJson | Compare::AgentToml) {
                self.agent_programs(&path, d.format);
            }
        }
    }

    /// The virtualenvs at the project's top that exist before the
    /// session (a directory holding `pyvenv.cfg`): what Python runs at
    /// every start of its interpreter — a `*.pth` in `site-packages` (a
    /// line starting `import` is executed), `sitecustomize.py`,
    /// `usercustomize.py` — and what `source bin/activate` runs. One the
    /// job creates is its output: nothing is watched there.
    fn virtualenvs(&mut self, project: &Path) {
        let Some(entries) = self.files.list(project, MAX_TOP_ENTRIES) else {
            return;
        };
        let mut found = 0;
        for (name, kind) in entries {
            let venv = project.join(&name);
            if kind != Kind::Dir || self.files.kind(&venv.join("pyvenv.cfg")) != Some(Kind::File) {
                continue;
            }
            found += 1;
            if found > MAX_VENVS {
                self.truncated = true;
                return;
            }
            let shown = venv.display().to_string();
            let why = |what: &str| format!("{what} of the virtualenv at {shown}, run by python");
            self.add(
                venv.join("pyvenv.cfg"),
                false,
                Compare::Bytes,
                why("pyvenv.cfg"),
            );
            for a in ["activate", "activate.csh", "activate.fish", "Activate.ps1"] {
                let w = format!("bin/{a} of the virtualenv at {shown}, run by `source`");
                self.add(venv.join("bin").join(a), false, Compare::Bytes, w);
            }
            for (lib, kind) in self.files.list(&venv.join("lib"), 16).unwrap_or_default() {
                if kind != Kind::Dir || !lib.to_string_lossy().starts_with("python") {
                    continue;
                }
                let sp = venv.join("lib").join(lib).join("site-packages");
                if self.files.kind(&sp) != Some(Kind::Dir) {
                    continue;
                }
                self.endings.push(Location {
                    path: sp.clone(),
                    tree: false,
                    ending: Some(".pth"),
                    installed: Some(sp.clone()),
                    compare: Compare::Bytes,
                    why: why("a *.pth in site-packages"),
                });
                for f in ["sitecustomize.py", "usercustomize.py"] {
                    self.add(sp.join(f), false, Compare::Bytes, why(f));
                    if let Some(l) = self.out.last_mut().filter(|l| l.path == sp.join(f)) {
                        l.installed = Some(sp.clone());
                    }
                }
            }
        }
    }

    /// A repository nested in the project (`g`, its `.git` directory):
    /// what its own git reads — config (and what it includes and names),
    /// hooks, info — that a `git status` in it runs. Its worktree's editor
    /// and tool files are not followed: it is somebody else's checkout.
    fn nested(&mut self, g: &Path) {
        if self.files.kind(g) != Some(Kind::Dir) {
            return;
        }
        let shown = g.display().to_string();
        for (name, tree) in [
            ("config", false),
            ("config.worktree", false),
            ("commondir", false),
            ("hooks", true),
            ("info", true),
        ] {
            self.add(
                g.join(name),
                tree,
                Compare::Bytes,
                format!("{name} of the nested repository at {shown}"),
            );
        }
        let worktree = g.parent().map(Path::to_path_buf);
        self.config(&g.join("config"), worktree.as_deref(), 0);
    }

    fn repository(&mut self, repo: &Repo) {
        let shown = repo.gitdir.display().to_string();
        if let Some(entry) = &repo.entry {
            if entry.parent() != Some(self.roots.project.as_path()) {
                // The repository the project belongs to, above it.
                let whose = format!(" of the repository at {}", shown);
                if let Some(w) = &repo.worktree {
                    self.project_files(w, &whose);
                }
            }
            if self.files.kind(entry) != Some(Kind::Dir) {
                self.add(
                    entry.clone(),
                    false,
                    Compare::Bytes,
                    "a gitdir: file".into(),
                );
            }
        }
        let add = |r: &mut Self, dir: &Path, name: &str, tree: bool| {
            r.add(
                dir.join(name),
                tree,
                Compare::Bytes,
                format!("git's own {name}"),
            );
        };
        for dir in [&repo.gitdir, &repo.common] {
            add(self, dir, "config", false);
            add(self, dir, "config.worktree", false);
            add(self, dir, "commondir", false);
            add(self, dir, "hooks", true);
            add(self, dir, "info", true);
        }
        // Linked worktrees keep a config of their own.
        for (name, kind) in self
            .files
            .list(&repo.common.join("worktrees"), 256)
            .unwrap_or_default()
        {
            if kind == Kind::Dir {
                let w = repo.common.join("worktrees").join(name);
                add(self, &w, "config.worktree", false);
                add(self, &w, "commondir", false);
            }
        }
        let mut configs = vec![
            repo.common.join("config"),
            repo.gitdir.join("config.worktree"),
        ];
        if let Some(home) = &self.roots.home {
            // The user's own, for what they include or name in the project.
            configs.push(home.join(".gitconfig"));
            configs.push(home.join(".config/git/config"));
        }
        for config in configs {
            self.config(&config, repo.worktree.as_deref(), 0);
        }
    }

    /// One config file: what it includes (followed) and what it names.
    fn config(&mut self, path: &Path, worktree: Option<&Path>, depth: usize) {
        if depth > MAX_INCLUDE_DEPTH || !self.configs.insert(path.to_path_buf()) {
            return;
        }
        let Some(bytes) = self.files.read(path, MAX_CONFIG) else {
            return;
        };
        let Some(file) = parse_config(&bytes) else {
            return;
        };
        let base = path.parent().unwrap_or(Path::new("/"));
        let shown = path.display().to_string();
        let mut includes = Vec::new();
        for section in file.sections() {
            let name = section.header().name().to_string().to_ascii_lowercase();
            let sub = section.header().subsection_name().is_some();
            for key in section.value_names() {
                let key = key.to_string().to_ascii_lowercase();
                for value in section.values(&key) {
                    let value = String::from_utf8_lossy(&value).into_owned();
                    let at = format!("{name}.{key} in {shown}");
                    match (name.as_str(), key.as_str()) {
                        ("include", "path") | ("includeif", "path") => {
                            if let Some(p) = self.expand(&value, base) {
                                self.add(p.clone(), false, Compare::Bytes, at);
                                includes.push(p);
                            }
                        }
                        ("core", "hookspath") => {
                            if let Some(p) =
                                worktree.or(Some(base)).and_then(|w| self.expand(&value, w))
                            {
                                self.add(p, true, Compare::Bytes, at);
                            }
                        }
                        _ if runs_program(&name, sub, &key) => {
                            for p in worktree
                                .map(|w| self.program_paths(&value, w))
                                .unwrap_or_default()
                            {
                                self.add(p, false, Compare::Bytes, at.clone());
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        for include in includes {
            self.config(&include, worktree, depth + 1);
        }
    }

    /// A path-typed value: `~/` is the home directory, a relative path is
    /// taken from `base`.
    fn expand(&self, value: &str, base: &Path) -> Option<PathBuf> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        let path = if let Some(rest) = value.strip_prefix("~/") {
            self.roots.home.as_ref()?.join(rest)
        } else {
            base.join(value)
        };
        Some(normalize(&path))
    }

    /// The programs a command line runs by path (`./tools/x`, `/abs/x`,
    /// `~/x`, `$CLAUDE_PROJECT_DIR/x`): every word that is a path, quotes
    /// removed, `!` of an alias dropped, the value of a `--flag=PATH` too —
    /// the program itself, and the script an interpreter runs (`bash
    /// ~/.claude/hooks/x.sh`, `node ./srv/index.js`: the program that runs
    /// later is the script, not `bash`). Only what lies in the project or
    /// the home directory: a system program is not the job's to change.
    fn program_paths(&self, command: &str, base: &Path) -> Vec<PathBuf> {
        let command = command.trim_start().trim_start_matches('!').trim_start();
        let project = self.roots.project.to_string_lossy();
        words(command)
            .into_iter()
            .take(MAX_WORDS)
            .filter_map(|word| {
                let word = word.rsplit_once('=').map_or(word.as_str(), |(_, v)| v);
                let word = word
                    .replace("${CLAUDE_PROJECT_DIR}", &project)
                    .replace("$CLAUDE_PROJECT_DIR", &project);
                if !word.contains('/') || word.contains("://") {
                    return None;
                }
                self.expand(&word, base)
            })
            .filter(|p| {
                p.starts_with(&self.roots.project)
                    || self.roots.home.as_ref().is_some_and(|h| p.starts_with(h))
            })
            .collect()
    }

    /// The programs an agent's settings name by path, among the values of
    /// [`RUNS_KEYS`] (an MCP server's `./server.js` in its `args` too).
    fn agent_programs(&mut self, path: &Path, compare: Compare) {
        let Some(bytes) = self.files.read(path, MAX_CONFIG) else {
            return;
        };
        let value = parse_settings(&bytes, compare);
        let runs = match &value {
            Some(value) => runs_of(value),
            None => unparsed(&bytes),
        };
        self.settings
            .insert(path.to_path_buf(), Settings { bytes, runs });
        let Some(value) = value else {
            return;
        };
        let mut strings = Vec::new();
        collect_runs(&value, false, &mut |s| strings.push(s.to_string()));
        let shown = path.display().to_string();
        for s in strings {
            for p in self.program_paths(&s, &self.roots.project.clone()) {
                self.add(
                    p,
                    false,
                    Compare::Bytes,
                    format!("a program named in {shown}"),
                );
            }
        }
    }
}

/// Whether `section.key` runs a program ([`PROGRAM_KEYS`]); `sub`: the
/// section has a subsection (`filter "lfs"`), as the driver keys need.
fn runs_program(section: &str, sub: bool, key: &str) -> bool {
    PROGRAM_KEYS.iter().any(|(s, k)| {
        *s == section
            && (*k == "*" || *k == key)
            && (sub || !matches!(section, "filter" | "diff" | "merge"))
    })
}

/// Words of one command line looked at for programs.
const MAX_WORDS: usize = 64;

/// The shell words of `s`, single and double quotes removed; `;`, `&`,
/// `|` and parentheses end a word (`a.sh && ./b.sh`).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    for c in s.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')') => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            (_, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// `.` and `..` taken out lexically (what git does with a relative
/// include before it opens it).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// An agent's settings as a tree of values: JSON, or TOML turned into the
/// same.
fn parse_settings(bytes: &[u8], compare: Compare) -> Option<serde_json::Value> {
    match compare {
        Compare::AgentJson => serde_json::from_slice(bytes).ok(),
        Compare::AgentToml => {
            let text = std::str::from_utf8(bytes).ok()?;
            let value: toml::Table = toml::from_str(text).ok()?;
            serde_json::to_value(value).ok()
        }
        _ => None,
    }
}

/// Every string under a key of [`RUNS_KEYS`], at any depth.
fn collect_runs(value: &serde_json::Value, inside: bool, found: &mut dyn FnMut(&str)) {
    match value {
        serde_json::Value::String(s) if inside => found(s),
        serde_json::Value::Array(items) => {
            for item in items {
                collect_runs(item, inside, found);
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                collect_runs(item, inside || RUNS_KEYS.contains(&key.as_str()), found);
            }
        }
        _ => {}
    }
}

/// What an agent's settings make it run, as one canonical text: each
/// value under a key of [`RUNS_KEYS`] with the path of keys that leads to
/// it, in order. Equal texts, equal behaviour; the agent's own state
/// (history, trust, counters) is not in it. Settings that do not parse are
/// their bytes: a change to them is a change (fail closed).
///
/// The tools' own formats are read by [`tool_files::runs`] (the keys
/// that are not harmless); a plain file is its SHA-256.
pub fn runs(bytes: &[u8], compare: Compare) -> String {
    match compare {
        Compare::Bytes => crate::hash::sha256_hex(&[bytes]),
        Compare::AgentJson | Compare::AgentToml => match parse_settings(bytes, compare) {
            Some(value) => runs_of(&value),
            None => unparsed(bytes),
        },
        format => tool_files::runs(bytes, format).unwrap_or_else(|| unparsed(bytes)),
    }
}

/// The keys whose values differ between two [`runs`] texts of a file of
/// `compare`'s format, for the finding; none for a plain file.
pub fn keys_changed(compare: Compare, before: &str, after: &str) -> Vec<String> {
    match compare {
        Compare::Bytes => Vec::new(),
        Compare::AgentJson | Compare::AgentToml => runs_changed(before, after),
        _ => tool_files::keys_changed(before, after),
    }
}

fn runs_of(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    kept(value, &mut String::new(), &mut out);
    out.sort();
    out.join("\n")
}

fn unparsed(bytes: &[u8]) -> String {
    format!("unparsed:{}", crate::hash::sha256_hex(&[bytes]))
}

fn kept(value: &serde_json::Value, at: &mut String, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                if RUNS_KEYS.contains(&key.as_str()) {
                    out.push(format!("{at}={item}"));
                } else {
                    kept(item, at, out);
                }
                at.truncate(len);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                kept(item, at, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// Which of [`RUNS_KEYS`]' values differ between two versions of an agent's
/// settings, for the finding ("hooks, mcpServers").
pub fn runs_changed(before: &str, after: &str) -> Vec<String> {
    let keys = |text: &str| -> BTreeSet<(String, String)> {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (b, a) = (keys(before), keys(after));
    let mut names: BTreeSet<String> = BTreeSet::new();
    for (k, _) in b.symmetric_difference(&a) {
        let last = k.rsplit('/').next().unwrap_or(k);
        names.insert(last.replace("~1", "/").replace("~0", "~"));
    }
    names.into_iter().collect()
}

/// Whether an installed package owns `name` in `site_packages`: a
/// `*.dist-info/RECORD` there lists it (the first field of a line, as pip
/// writes it). What pip installs as asked — an editable install's
/// `__editable__*.pth`, a package's own `.pth` — is owned; a `.pth` the
/// job wrote by itself is not.
pub fn installed_by_a_package(site_packages: &Path, name: &str, files: &dyn Files) -> bool {
    let Some(entries) = files.list(site_packages, MAX_TOP_ENTRIES) else {
        return false;
    };
    entries.iter().any(|(dir, kind)| {
        *kind == Kind::Dir
            && dir.to_string_lossy().ends_with(".dist-info")
            && files
                .read(&site_packages.join(dir).join("RECORD"), MAX_CONFIG)
                .is_some_and(|record| {
                    String::from_utf8_lossy(&record).lines().any(|line| {
                        line.split(',').next().map(|f| f.trim_matches('"')) == Some(name)
                    })
                })
    })
}

/// An in-memory tree for the tests of resolution and of the snapshot.
#[cfg(test)]
pub(crate) mod testing {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use super::{Files, Kind};

    /// Paths to contents (`None`: a directory); changed between calls.
    /// A content starting with [`LINK`] is a symbolic link to the rest.
    #[derive(Default)]
    pub(crate) struct Fake(pub(crate) RefCell<BTreeMap<PathBuf, Option<Vec<u8>>>>);

    /// What a link's content starts with in a [`Fake`].
    const LINK: &[u8] = b"\0link:";

    impl Fake {
        pub(crate) fn file(&self, path: &str, content: &str) -> &Self {
            let p = PathBuf::from(path);
            let mut m = self.0.borrow_mut();
            for a in p.ancestors().skip(1) {
                m.entry(a.to_path_buf()).or_insert(None);
            }
            m.insert(p, Some(content.as_bytes().to_vec()));
            self
        }

        pub(crate) fn dir(&self, path: &str) -> &Self {
            let mut m = self.0.borrow_mut();
            for a in Path::new(path).ancestors() {
                m.entry(a.to_path_buf()).or_insert(None);
            }
            self
        }

        /// `ln -sf to path`.
        pub(crate) fn link(&self, path: &str, to: &str) -> &Self {
            let mut target = LINK.to_vec();
            target.extend_from_slice(to.as_bytes());
            self.file(path, "");
            self.0
                .borrow_mut()
                .insert(PathBuf::from(path), Some(target));
            self
        }

        /// `mv from to`, with everything below.
        pub(crate) fn rename(&self, from: &str, to: &str) {
            let mut m = self.0.borrow_mut();
            let moved: Vec<_> = m.keys().filter(|p| p.starts_with(from)).cloned().collect();
            for p in moved {
                let v = m.remove(&p).unwrap_or(None);
                let rel = p.strip_prefix(from).unwrap_or(Path::new(""));
                m.insert(Path::new(to).join(rel), v);
            }
        }
    }

    fn kind(content: &Option<Vec<u8>>) -> Kind {
        match content {
            Some(c) if c.starts_with(LINK) => Kind::Symlink,
            Some(_) => Kind::File,
            None => Kind::Dir,
        }
    }

    impl Files for Fake {
        fn kind(&self, path: &Path) -> Option<Kind> {
            self.0.borrow().get(path).map(kind)
        }
        fn read(&self, path: &Path, _: u64) -> Option<Vec<u8>> {
            self.0
                .borrow()
                .get(path)
                .cloned()
                .flatten()
                .filter(|c| !c.starts_with(LINK))
        }
        fn read_link(&self, path: &Path) -> Option<OsString> {
            let content = self.0.borrow().get(path).cloned().flatten()?;
            let to = content.strip_prefix(LINK)?;
            Some(OsString::from(String::from_utf8_lossy(to).into_owned()))
        }
        fn list(&self, dir: &Path, _: usize) -> Option<Vec<(OsString, Kind)>> {
            Some(
                self.0
                    .borrow()
                    .iter()
                    .filter(|(p, _)| p.parent() == Some(dir))
                    .map(|(p, c)| (p.file_name().unwrap_or_default().to_os_string(), kind(c)))
                    .collect(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Fake;
    use super::*;

    fn roots() -> Roots {
        Roots {
            project: PathBuf::from("/p"),
            home: Some(PathBuf::from("/h")),
            agent_files: Vec::new(),
            agent_trees: Vec::new(),
            nested_git_dirs: Vec::new(),
        }
    }

    fn paths(r: &Resolved) -> Vec<String> {
        r.locations
            .iter()
            .map(|l| l.path.display().to_string())
            .collect()
    }

    fn find<'a>(r: &'a Resolved, path: &str) -> Option<&'a Location> {
        r.locations.iter().find(|l| l.path == Path::new(path))
    }

    #[test]
    fn hooks_path_in_the_repository_config_is_watched_as_a_tree() {
        let f = Fake::default();
        f.file("/p/.git/config", "[core]\n\thooksPath = .githooks\n");
        let r = resolve(&roots(), &f);
        let Some(l) = find(&r, "/p/.githooks") else {
            panic!("hooksPath not resolved: {:?}", paths(&r));
        };
        assert!(l.tree);
        assert!(l.why.contains("core.hookspath"), "{}", l.why);
    }

    #[test]
    fn includes_are_followed_relative_to_the_including_file_and_what_they_name_is_watched() {
        let f = Fake::default();
        f.file(
            "/p/.git/config",
            "[include]\n\tpath = ../.gitconfig-project\n[includeIf \"gitdir:/p/\"]\n\tpath = ~/work.inc\n",
        )
        .file("/p/.gitconfig-project", "[core]\n\tfsmonitor = tools/monitor.sh --fast\n")
        .file("/h/work.inc", "[include]\n\tpath = /p/deeper.inc\n")
        .file("/p/deeper.inc", "[filter \"x\"]\n\tclean = ./bin/clean\n");
        let r = resolve(&roots(), &f);
        for p in [
            "/p/.gitconfig-project",
            "/h/work.inc",
            "/p/deeper.inc",
            "/p/tools/monitor.sh",
            "/p/bin/clean",
        ] {
            assert!(find(&r, p).is_some(), "{p} not in {:?}", paths(&r));
        }
    }

    #[test]
    fn an_include_cycle_ends() {
        let f = Fake::default();
        f.file("/p/.git/config", "[include]\npath = ../a\n")
            .file("/p/a", "[include]\npath = b\n")
            .file("/p/b", "[include]\npath = a\n");
        let r = resolve(&roots(), &f);
        assert!(find(&r, "/p/a").is_some() && find(&r, "/p/b").is_some());
    }

    #[test]
    fn a_linked_worktree_is_followed_to_its_git_and_common_directories() {
        let f = Fake::default();
        f.file("/p/.git", "gitdir: /main/.git/worktrees/p\n")
            .file("/main/.git/worktrees/p/commondir", "../..\n")
            .file("/main/.git/config", "[core]\nhooksPath = /main/hooks\n");
        let r = resolve(&roots(), &f);
        for p in [
            "/p/.git",
            "/main/.git/worktrees/p/config.worktree",
            "/main/.git/config",
            "/main/.git/hooks",
            "/main/hooks",
        ] {
            assert!(find(&r, p).is_some(), "{p} not in {:?}", paths(&r));
        }
    }

    #[test]
    fn a_project_inside_a_repository_watches_that_repository() {
        let f = Fake::default();
        f.dir("/r/.git").dir("/r/p");
        let mut roots = roots();
        roots.project = PathBuf::from("/r/p");
        let r = resolve(&roots, &f);
        for p in ["/r/.git/hooks", "/r/.vscode", "/r/p/.vscode"] {
            assert!(find(&r, p).is_some(), "{p} not in {:?}", paths(&r));
        }
    }

    #[test]
    fn submodules_are_repositories_with_their_worktrees() {
        let f = Fake::default();
        f.file(
            "/p/.git/modules/lib/config",
            "[core]\n\tworktree = ../../../lib\n\tfsmonitor = ./watch\n",
        );
        let r = resolve(&roots(), &f);
        for p in ["/p/.git/modules/lib/hooks", "/p/lib/watch"] {
            assert!(find(&r, p).is_some(), "{p} not in {:?}", paths(&r));
        }
    }

    #[test]
    fn program_values_that_are_not_paths_name_nothing() {
        let f = Fake::default();
        f.file(
            "/p/.git/config",
            "[core]\n\tfsmonitor = true\n\tpager = less -R\n[alias]\n\tx = !git log\n\ty = \"!./run.sh arg\"\n[credential]\n\thelper = https://x/y\n",
        );
        let r = resolve(&roots(), &f);
        assert!(find(&r, "/p/run.sh").is_some(), "{:?}", paths(&r));
        assert!(
            !paths(&r)
                .iter()
                .any(|p| p.contains("less") || p.contains("true"))
        );
    }

    #[test]
    fn an_agents_settings_name_their_programs() {
        let f = Fake::default();
        f.file(
            "/p/.mcp.json",
            r#"{"mcpServers":{"s":{"command":"node","args":["./srv/index.js"]}}}"#,
        )
        .file(
            "/p/.claude/settings.json",
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"$CLAUDE_PROJECT_DIR/.claude/hooks/stop.sh"}]}]}}"#,
        );
        let r = resolve(&roots(), &f);
        for p in ["/p/srv/index.js", "/p/.claude/hooks/stop.sh"] {
            assert!(find(&r, p).is_some(), "{p} not in {:?}", paths(&r));
        }
    }

    #[test]
    fn the_agents_own_state_is_not_what_it_runs() {
        let before = r#"{"numStartups":3,"projects":{"/p":{"allowedTools":[]}}}"#;
        let after = r#"{"numStartups":4,"tipsHistory":{"a":1},"projects":{"/p":{"allowedTools":[],"history":["x"]}}}"#;
        assert_eq!(
            runs(before.as_bytes(), Compare::AgentJson),
            runs(after.as_bytes(), Compare::AgentJson)
        );
        let planted = r#"{"numStartups":4,"projects":{"/p":{"allowedTools":[],"mcpServers":{"x":{"command":"sh"}}}}}"#;
        let (b, a) = (
            runs(before.as_bytes(), Compare::AgentJson),
            runs(planted.as_bytes(), Compare::AgentJson),
        );
        assert_ne!(b, a);
        assert_eq!(runs_changed(&b, &a), ["mcpServers"]);
    }

    #[test]
    fn codex_notify_and_trust_elsewhere_are_what_it_runs_and_its_own_projects_trust_is_not() {
        let p = Path::new("/p");
        let read = |t: &str| without_own_trust(&runs(t.as_bytes(), Compare::AgentToml), p);
        let before = "model = \"o3\"\n";
        let own = "model = \"o4\"\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n";
        let elsewhere = "model = \"o3\"\n[projects.\"/\"]\ntrust_level = \"trusted\"\n";
        let notify = "notify = [\"sh\", \"-c\", \"id\"]\nmodel = \"o3\"\n";
        assert_eq!(read(before), read(own));
        assert_ne!(read(before), read(elsewhere));
        assert_ne!(read(before), read(notify));
    }

    #[test]
    fn a_script_an_interpreter_runs_is_a_program_named_by_the_settings() {
        let f = Fake::default();
        f.file(
            "/p/.claude/settings.json",
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"bash ~/.claude/hooks/x.sh && node ./tools/y.js --config=./c.json"}]}]}}"#,
        );
        let r = resolve(&roots(), &f);
        for p in ["/h/.claude/hooks/x.sh", "/p/tools/y.js", "/p/c.json"] {
            assert!(find(&r, p).is_some(), "{p} not in {:?}", paths(&r));
        }
        assert!(find(&r, "/bin/bash").is_none());
    }

    #[test]
    fn widening_what_an_agent_does_unasked_is_what_it_runs() {
        let before = r#"{"model":"a","permissions":{"allow":["Bash(ls)"]}}"#;
        for after in [
            r#"{"model":"a","permissions":{"allow":["Bash(*)"]}}"#,
            r#"{"model":"a","permissions":{"allow":["Bash(ls)"]},"enabledPlugins":{"x@m":true}}"#,
        ] {
            assert_ne!(
                runs(before.as_bytes(), Compare::AgentJson),
                runs(after.as_bytes(), Compare::AgentJson),
                "{after}"
            );
        }
    }

    #[test]
    fn settings_that_do_not_parse_are_compared_by_bytes() {
        assert_ne!(
            runs(b"{not json", Compare::AgentJson),
            runs(b"{not json!", Compare::AgentJson)
        );
        assert_eq!(
            runs(b"{not json", Compare::AgentJson),
            runs(b"{not json", Compare::AgentJson)
        );
    }

    #[test]
    fn agent_files_in_the_home_follow_the_variables_that_move_them() {
        let files = agent_home_files(Path::new("/h"), &[("CODEX_HOME".into(), "/c".into())]);
        assert!(
            files
                .iter()
                .any(|(p, c)| p == Path::new("/c/config.toml") && *c == Compare::AgentToml)
        );
        assert!(
            files
                .iter()
                .any(|(p, _)| p == Path::new("/h/.claude/settings.json"))
        );
        let trees = agent_home_trees(Path::new("/h"), &[("CODEX_HOME".into(), "/c".into())]);
        for t in [
            "/c/packages",
            "/c/rules",
            "/h/.claude/skills",
            "/h/.gemini/extensions",
        ] {
            assert!(trees.contains(&PathBuf::from(t)), "{t} not in {trees:?}");
        }
        assert!(
            agent_home_trees(Path::new("/h"), &[]).contains(&PathBuf::from("/h/.codex/packages"))
        );
    }

    #[test]
    fn locations_are_bounded() {
        let f = Fake::default();
        let mut config = String::from("[alias]\n");
        for i in 0..(MAX_LOCATIONS + 10) {
            config.push_str(&format!("\ta{i} = !./bin/{i}\n"));
        }
        f.file("/p/.git/config", &config);
        let r = resolve(&roots(), &f);
        assert!(r.truncated);
        assert_eq!(r.locations.len(), MAX_LOCATIONS);
    }
}
