//! Where in the repository a finding is shown (SARIF results, workflow
//! annotations): a line of a file code scanning can open, never a path it
//! cannot (a gitignored `node_modules/…/package.json`, a directory under
//! `target/`, a `README.md` that does not exist).
//!
//! In this order:
//!
//! 1. a package is responsible: the line of the project's lockfile or
//!    manifest that brings it in (`"node_modules/NAME"` in
//!    `package-lock.json`, `name = "NAME"` in `Cargo.lock`, `NAME==…` in
//!    `requirements.txt`, …); else its own manifest when that is a file of
//!    the repository outside the dependency trees (a path dependency);
//! 2. the target itself, when it is a file of the repository outside the
//!    dependency trees;
//! 3. the policy file line that decided it;
//! 4. the workflow file;
//! 5. the first policy file in the repository;
//! 6. `README.md` when there is one, else the first file at the root.
//!
//! A file is one of the repository when git tracks it (`git ls-files`:
//! the project's index, read as a file, never by running git): a
//! `package-lock.json` the job's `npm install` made, or any other
//! untracked file, is never a location. Without an index to read (no git
//! repository, or a report rendered where the checkout is gone) every
//! regular file counts, as before.
//!
//! The repository is read after the job, which could have written any of
//! it: files are opened without following a link in their last component,
//! only regular ones, at most [`MAX_FILE`] bytes of each, each once per
//! report. What is read only picks a line: a planted lockfile can move an
//! alert, not hide it. A report rendered where the checkout is gone (from
//! a session log elsewhere) falls through to the later steps.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::{Finding, Model};
use crate::events::{Ecosystem, Package, Target};

/// The most of one file read to find a line.
pub const MAX_FILE: u64 = 8 << 20;

/// Directories whose content is installed or built, not the repository's
/// own (gitignored by every project that has them).
const DEPENDENCY_TREES: [&str; 12] = [
    "node_modules",
    "target",
    ".venv",
    "venv",
    "site-packages",
    "__pycache__",
    ".tox",
    ".nox",
    "dist",
    "build",
    ".git",
    "vetto-report",
];

/// Where a finding is shown, and why there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoLocation {
    /// Relative to the repository root, `/`-separated, not yet URI-encoded.
    pub path: String,
    pub line: u32,
    pub why: &'static str,
}

/// What the choice reads of the repository (faked in tests).
pub trait RepoFiles {
    /// The lines of `rel` (relative to the project root), when it is a
    /// regular file.
    fn lines(&self, rel: &str) -> Option<Rc<Vec<String>>>;
    /// Whether `rel` is a regular file (never following a link).
    fn is_file(&self, rel: &str) -> bool;
    /// The regular files directly at the root, sorted.
    fn root_files(&self) -> Vec<String>;
}

/// The project on disk, each file read at most once.
pub struct OnDisk {
    root: PathBuf,
    read: RefCell<HashMap<String, Option<Rc<Vec<String>>>>>,
    /// The paths git tracks, when the index could be read.
    tracked: Option<HashSet<String>>,
}

impl OnDisk {
    pub fn new(root: &Path) -> OnDisk {
        OnDisk {
            root: root.to_path_buf(),
            read: RefCell::new(HashMap::new()),
            tracked: tracked(root),
        }
    }

    fn is_tracked(&self, rel: &str) -> bool {
        self.tracked.as_ref().is_none_or(|t| t.contains(rel))
    }
}

/// The largest index read for the tracked paths.
const MAX_INDEX: u64 = 64 << 20;

/// The paths git tracks in the project at `root` (`git ls-files`), from
/// its index read as a file with gitoxide's decoder (bounded); `None`
/// when there is none to read.
fn tracked(root: &Path) -> Option<HashSet<String>> {
    use std::io::Read;
    let index = git_dir(root)?.join("index");
    let mut bytes = Vec::new();
    crate::sys::safe_fs::open_regular(&index)
        .ok()?
        .take(MAX_INDEX + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_INDEX {
        return None;
    }
    let options = gix_index::decode::Options {
        thread_limit: Some(1),
        alloc_limit_bytes: Some(4 * MAX_INDEX as usize),
        ..Default::default()
    };
    let (state, _) = gix_index::State::from_bytes(
        &bytes,
        filetime::FileTime::now(),
        gix_index::hash::Kind::Sha1,
        options,
    )
    .ok()?;
    Some(
        state
            .entries()
            .iter()
            .map(|e| e.path(&state).to_string())
            .collect(),
    )
}

/// The project's git directory: `.git`, or where a worktree's or
/// submodule's `.git` file points (`gitdir: PATH`).
fn git_dir(root: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let dot = root.join(".git");
    let md = std::fs::symlink_metadata(&dot).ok()?;
    if md.is_dir() {
        return Some(dot);
    }
    let mut text = String::new();
    crate::sys::safe_fs::open_regular(&dot)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    let dir = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(root.join(dir))
}

impl RepoFiles for OnDisk {
    fn lines(&self, rel: &str) -> Option<Rc<Vec<String>>> {
        use std::io::Read;
        if !self.is_tracked(rel) {
            return None;
        }
        if let Some(known) = self.read.borrow().get(rel) {
            return known.clone();
        }
        let lines = crate::sys::safe_fs::open_regular(&self.root.join(rel))
            .ok()
            .and_then(|f| {
                let mut bytes = Vec::new();
                f.take(MAX_FILE).read_to_end(&mut bytes).ok()?;
                let text = String::from_utf8_lossy(&bytes);
                Some(Rc::new(text.lines().map(str::to_string).collect()))
            });
        self.read
            .borrow_mut()
            .insert(rel.to_string(), lines.clone());
        lines
    }

    fn is_file(&self, rel: &str) -> bool {
        self.is_tracked(rel)
            && std::fs::symlink_metadata(self.root.join(rel)).is_ok_and(|m| m.is_file())
    }

    fn root_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| self.is_tracked(n))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// Chooses locations for one model's findings.
pub struct Locator<'a> {
    model: &'a Model,
    files: Box<dyn RepoFiles + 'a>,
}

impl<'a> Locator<'a> {
    /// Reading the project the session ran in.
    pub fn new(model: &'a Model) -> Locator<'a> {
        Locator::with_files(model, Box::new(OnDisk::new(&model.start.project)))
    }

    pub fn with_files(model: &'a Model, files: Box<dyn RepoFiles + 'a>) -> Locator<'a> {
        Locator { model, files }
    }

    /// The location of `f` (see the module doc for the order).
    pub fn locate(&self, f: &Finding) -> RepoLocation {
        let model = self.model;
        let v = &f.violation;
        let at = |path: String, line: u32, why| RepoLocation { path, line, why };
        if let Some(p) = &v.attribution {
            if let Some((path, line)) = self.declaration(p) {
                return at(
                    path,
                    line,
                    "the line that brings in the package responsible",
                );
            }
            if let Some(rel) = model.repo_relative(&p.manifest)
                && self.shows(&rel)
            {
                return at(rel, 1, "the manifest of the package responsible");
            }
        }
        if let Some(path) = v.target.path()
            && !matches!(v.target, Target::Process { .. })
            && let Some(rel) = model.repo_relative(path)
            && self.shows(&rel)
        {
            return at(rel, 1, "the path the job reached for");
        }
        if let Some(pr) = &v.policy_rule
            && let Some(rel) = model.repo_relative(Path::new(&pr.source))
        {
            return at(rel, pr.line.max(1), "the policy rule that decided it");
        }
        if let Some(wf) = model.start.ci.as_ref().and_then(|c| c.workflow.clone()) {
            return at(wf, 1, "the workflow that ran the job");
        }
        if let Some(rel) = model
            .start
            .policy
            .sources
            .iter()
            .find_map(|src| repo_file(model, &src.name))
        {
            return at(rel, 1, "the policy file");
        }
        let why = "the repository (no closer location known)";
        if self.files.is_file("README.md") {
            return at("README.md".into(), 1, why);
        }
        let root = self.files.root_files();
        let first = root
            .iter()
            .find(|n| !n.starts_with('.'))
            .or(root.first())
            .cloned();
        at(first.unwrap_or_else(|| "README.md".into()), 1, why)
    }

    /// A regular file of the repository outside the dependency trees.
    fn shows(&self, rel: &str) -> bool {
        !rel.split('/').any(|c| DEPENDENCY_TREES.contains(&c)) && self.files.is_file(rel)
    }

    /// The first line of the project's lockfiles, then manifests, that
    /// names package `p`.
    fn declaration(&self, p: &Package) -> Option<(String, u32)> {
        let name = p.name.as_str();
        let files: &[(&str, Match)] = match p.ecosystem {
            Ecosystem::Npm => &[
                ("package-lock.json", Match::NpmLock),
                ("npm-shrinkwrap.json", Match::NpmLock),
                ("yarn.lock", Match::YarnLock),
                ("pnpm-lock.yaml", Match::PnpmLock),
                ("package.json", Match::JsonKey),
            ],
            Ecosystem::Cargo => &[
                ("Cargo.lock", Match::TomlName),
                ("Cargo.toml", Match::TomlKey),
            ],
            Ecosystem::Pypi => &[
                ("requirements.txt", Match::Requirement),
                ("requirements-dev.txt", Match::Requirement),
                ("poetry.lock", Match::TomlName),
                ("uv.lock", Match::TomlName),
                ("pdm.lock", Match::TomlName),
                ("pyproject.toml", Match::PyprojectDep),
                ("setup.cfg", Match::Requirement),
            ],
            Ecosystem::Go => &[("go.mod", Match::Contains), ("go.sum", Match::Contains)],
        };
        files.iter().find_map(|(file, how)| {
            let lines = self.files.lines(file)?;
            let at = lines.iter().position(|l| how.names(l, name))?;
            Some((file.to_string(), u32::try_from(at + 1).unwrap_or(u32::MAX)))
        })
    }
}

/// How a line of one kind of file names a package.
#[derive(Debug, Clone, Copy)]
enum Match {
    /// `"node_modules/NAME": {` (nested: `…/node_modules/NAME"`).
    NpmLock,
    /// `NAME@…:` or `"NAME@…", …:` at the start of an entry.
    YarnLock,
    /// `/NAME@…:`, `NAME@…:` or `'NAME@…':` (pnpm's keys).
    PnpmLock,
    /// `"NAME": "…"` (dependencies in package.json).
    JsonKey,
    /// `name = "NAME"` (Cargo.lock, poetry.lock, uv.lock).
    TomlName,
    /// `NAME = …` or `NAME.workspace = …` (Cargo.toml).
    TomlKey,
    /// `NAME`, `NAME==1`, `NAME[extra]>=2; marker` (requirements).
    Requirement,
    /// `"NAME…"` in a dependency list (pyproject.toml).
    PyprojectDep,
    /// The module path anywhere in the line (go.mod, go.sum).
    Contains,
}

impl Match {
    fn names(self, line: &str, name: &str) -> bool {
        let t = line.trim();
        match self {
            Match::NpmLock => t.contains(&format!("node_modules/{name}\"")),
            Match::YarnLock => t
                .trim_start_matches('"')
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('@')),
            Match::PnpmLock => t
                .trim_start_matches(['\'', '"', '/'])
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('@')),
            Match::JsonKey => t.starts_with(&format!("\"{name}\":")),
            Match::TomlName => t == format!("name = \"{name}\""),
            Match::TomlKey => t
                .strip_prefix(name)
                .is_some_and(|rest| rest.trim_start().starts_with(['=', '.'])),
            Match::Requirement => requirement_name(t).is_some_and(|n| same_dist(n, name)),
            Match::PyprojectDep => {
                t.trim_start_matches(['"', '\''])
                    .get(..name.len())
                    .is_some_and(|n| same_dist(n, name))
                    && t.trim_start_matches(['"', '\''])
                        .get(name.len()..)
                        .and_then(|r| r.chars().next())
                        .is_some_and(|c| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
            }
            Match::Contains => t.contains(name),
        }
    }
}

/// The distribution a requirement line names: up to the first character
/// that is no part of a name (`=<>!~[;@ `).
fn requirement_name(line: &str) -> Option<&str> {
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .unwrap_or(line.len());
    (end > 0).then(|| &line[..end])
}

/// PyPI names compare case-insensitively with `-`, `_` and `.` alike.
fn same_dist(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    norm(a) == norm(b)
}

/// A policy source that is a file of the repository, relative to its root:
/// an absolute path inside the project, or a `*.toml` named relative to the
/// working directory (`--policy ci/vetto.toml`). Built-in sources
/// (`preset:default`, `command line`) are no file: a result located there
/// would carry a URI with a scheme under `%SRCROOT%` (SARIF1004), and code
/// scanning could not show it.
fn repo_file(model: &Model, name: &str) -> Option<String> {
    let path = Path::new(name);
    if path.is_absolute() {
        return model.repo_relative(path);
    }
    let scheme = name
        .split_once(':')
        .is_some_and(|(s, _)| !s.is_empty() && !s.contains('/'));
    if scheme || name.starts_with('<') || !name.ends_with(".toml") {
        return None;
    }
    model.repo_relative(&model.start.cwd.join(path))
}

/// Where the code that did it lives, for the message: the package's
/// directory (its manifest's), as the reports show paths.
pub fn code_of(model: &Model, p: &Package) -> String {
    let dir = if p.manifest.extension().is_some() {
        p.manifest.parent().unwrap_or(&p.manifest)
    } else {
        &p.manifest
    };
    model.start.roots().normalise(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    /// Files given by name and content; nothing else exists.
    struct Fake(Vec<(&'static str, &'static str)>);

    impl RepoFiles for Fake {
        fn lines(&self, rel: &str) -> Option<Rc<Vec<String>>> {
            self.0
                .iter()
                .find(|(n, _)| *n == rel)
                .map(|(_, t)| Rc::new(t.lines().map(str::to_string).collect()))
        }
        fn is_file(&self, rel: &str) -> bool {
            self.0.iter().any(|(n, _)| *n == rel)
        }
        fn root_files(&self) -> Vec<String> {
            let mut v: Vec<String> = self
                .0
                .iter()
                .filter(|(n, _)| !n.contains('/'))
                .map(|(n, _)| n.to_string())
                .collect();
            v.sort();
            v
        }
    }

    fn package(ecosystem: Ecosystem, name: &str) -> Package {
        Package {
            ecosystem,
            name: name.into(),
            version: Some("6.6.6".into()),
            manifest: PathBuf::from(fixture::PROJECT)
                .join("node_modules")
                .join(name)
                .join("package.json"),
        }
    }

    fn located(files: Fake, p: Option<Package>) -> RepoLocation {
        let mut model = fixture::attack_model();
        model.start.ci = None;
        model.start.policy.sources.clear();
        let mut f = model.findings[0].clone();
        f.violation.attribution = p;
        f.violation.policy_rule = None;
        f.violation.target = Target::Address {
            addr: "192.0.2.1".into(),
            port: Some(443),
        };
        Locator::with_files(&model, Box::new(files)).locate(&f)
    }

    #[test]
    fn a_package_is_shown_at_the_lockfile_line_that_brings_it_in() {
        let lock = "{\n  \"packages\": {\n    \"\": {},\n    \"node_modules/evil\": {\n      \"version\": \"6.6.6\"\n    }\n  }\n}";
        let loc = located(
            Fake(vec![("package-lock.json", lock), ("package.json", "{}")]),
            Some(package(Ecosystem::Npm, "evil")),
        );
        assert_eq!((loc.path.as_str(), loc.line), ("package-lock.json", 4));

        let cargo =
            "[[package]]\nname = \"evil-sys\"\n\n[[package]]\nname = \"evil\"\nversion = \"6.6.6\"";
        let loc = located(
            Fake(vec![("Cargo.lock", cargo)]),
            Some(package(Ecosystem::Cargo, "evil")),
        );
        assert_eq!((loc.path.as_str(), loc.line), ("Cargo.lock", 5));

        let reqs = "requests>=2\n# evil\nEvil_Pkg[extra]==6.6.6 ; python_version > '3'\n";
        let loc = located(
            Fake(vec![("requirements.txt", reqs)]),
            Some(package(Ecosystem::Pypi, "evil-pkg")),
        );
        assert_eq!((loc.path.as_str(), loc.line), ("requirements.txt", 3));

        let pyproject = "[project]\ndependencies = [\n  \"evilish>=1\",\n  \"evil>=6\",\n]";
        let loc = located(
            Fake(vec![("pyproject.toml", pyproject)]),
            Some(package(Ecosystem::Pypi, "evil")),
        );
        assert_eq!((loc.path.as_str(), loc.line), ("pyproject.toml", 4));
    }

    /// The package's own manifest lies in `node_modules/` (gitignored):
    /// never shown there; nor a `README.md` that does not exist.
    #[test]
    fn a_gitignored_manifest_or_a_missing_readme_is_never_the_location() {
        let loc = located(
            Fake(vec![
                ("node_modules/evil/package.json", "{}"),
                ("Makefile", "all:"),
                (".gitignore", "node_modules"),
            ]),
            Some(package(Ecosystem::Npm, "evil")),
        );
        assert_eq!(loc.path, "Makefile");
        let loc = located(Fake(vec![("README.md", "# x")]), None);
        assert_eq!(loc.path, "README.md");
    }
}
