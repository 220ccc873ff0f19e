//! TOML policy → validated, resolved [`Policy`]. No kernel calls here: only
//! parsing, preset merging, variable and path resolution (and the read-only
//! directory walk that expands globs).
//!
//! Stages: [`raw`] (TOML with spans, unknown keys rejected) → [`validate`]
//! (one [`validate::Layer`] per source) → [`merge`] (precedence) → `Policy`.
//! Every stage pushes into one [`diag::Diags`]; `load` fails only after all
//! sources were checked, with every problem listed.

pub mod addr;
pub mod autorun;
pub mod diag;
pub mod egress;
pub mod explain;
pub mod git_ref;
mod host_name;
pub mod markers;
pub(crate) mod merge;
mod model;
pub mod paths;
pub mod presets;
pub mod project;
mod provenance;
pub(crate) mod raw;
pub mod reach;
pub mod terminal;
pub mod tool_files;
pub mod tools;
pub(crate) mod validate;
pub(crate) mod vars;
pub mod walk_cache;
pub mod walk_parallel;

use std::path::{Path, PathBuf};

pub use merge::CI_CONTROL_VARS;
pub use model::*;

use self::diag::{Diags, SourceRef};
use self::merge::{Asker, PresetSource};
use self::paths::GlobWalker;
use self::validate::PathCtx;
use self::vars::Vars;

/// Command-line options that override or extend the policy files.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub allow_read: Vec<String>,
    pub allow_write: Vec<String>,
    pub deny: Vec<String>,
    /// `--net off|host`.
    pub net: Option<String>,
    pub allow_domain: Vec<String>,
    pub resolve: Vec<String>,
    /// `--allow-unix PATH`: a pathname unix socket the job may connect to.
    pub allow_unix: Vec<String>,
    /// `--publish [ADDR:]HOST_PORT:PORT`.
    pub publish: Vec<String>,
    /// `--secret NAME@HOST[,HOST…]`.
    pub secrets: Vec<String>,
    /// `--rule "METHOD HOST/PATH"`.
    pub rules: Vec<String>,
    pub timeout: Option<String>,
    pub max_procs: Option<u32>,
    pub max_memory: Option<String>,
    pub env_pass: Vec<String>,
    pub presets: Vec<String>,
    /// `--check-creations live|after`.
    pub check_creations: Option<String>,
}

impl Overrides {
    /// No option that shapes the policy itself (`--preset` adds presets,
    /// not a command-line source).
    pub fn is_empty(&self) -> bool {
        self.allow_read.is_empty()
            && self.allow_write.is_empty()
            && self.deny.is_empty()
            && self.net.is_none()
            && self.allow_domain.is_empty()
            && self.resolve.is_empty()
            && self.allow_unix.is_empty()
            && self.publish.is_empty()
            && self.secrets.is_empty()
            && self.rules.is_empty()
            && self.timeout.is_none()
            && self.max_procs.is_none()
            && self.max_memory.is_none()
            && self.env_pass.is_empty()
            && self.check_creations.is_none()
    }
}

/// Everything `load` needs to know about the invocation.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    /// The working directory vetto was started in.
    pub cwd: PathBuf,
    /// `--project`, else the git top-level of `cwd`, else `cwd`.
    pub project: Option<PathBuf>,
    /// `--policy`, else `vetto.toml` at the project root if present.
    pub policy_file: Option<PathBuf>,
    /// `--policy-ref`: read the policy file from this git ref instead of
    /// the working tree.
    pub policy_ref: Option<String>,
    /// The caller's home directory (`$HOME`).
    pub home: PathBuf,
    /// The per-session temporary directory (already created).
    pub session_tmp: PathBuf,
    /// The report directory, protected from the job when inside the project.
    pub report_dir: Option<PathBuf>,
    /// The caller's environment (names and values), for `GITHUB_ENV` & co.
    pub env: Vec<(String, String)>,
    pub overrides: Overrides,
    /// The job's command, when a preset may be chosen from it (`vetto run`
    /// and `vetto ci` without `--no-auto-preset`): see [`auto_preset`].
    pub job: Option<Vec<String>>,
}

/// A policy that could not be loaded; `Display` renders every diagnostic
/// as `file:line:col: error: …`.
#[derive(Debug, thiserror::Error)]
#[error("{rendered}")]
pub struct PolicyError {
    pub rendered: String,
    pub diagnostics: Vec<diag::Diagnostic>,
}

impl PolicyError {
    fn from_diags(mut diags: Diags) -> Self {
        diags.sort();
        PolicyError {
            rendered: diags.render(),
            diagnostics: diags.into_vec(),
        }
    }
}

/// The name of the policy file looked for at the project root.
pub const PROJECT_POLICY: &str = "vetto.toml";

/// The project root: `--project`, else the nearest ancestor of `cwd` that
/// contains `.git` (a directory or a worktree's file), else `cwd`;
/// canonicalised.
pub fn project_root(cwd: &Path, project: Option<&Path>) -> std::io::Result<PathBuf> {
    project::locate(cwd, project).map(|(p, _)| p)
}

fn digest(text: &str) -> String {
    crate::hash::sha256_hex(&[text.as_bytes()])
}

/// The `default` preset, asked for by no file (none given, or one without
/// `extends`).
fn add_default(stack: &mut Vec<&'static str>, order: &mut Vec<PresetSource>, diags: &mut Diags) {
    merge::add_preset(
        presets::PRESETS,
        "default",
        Asker::Option,
        stack,
        order,
        diags,
    );
}

/// The preset chosen for an ordinary job (issue P10: zero flags for `vetto
/// ci -- npm test`): the toolchain's preset when the project's marker file
/// and the command agree (`package.json` and `npm`), so the toolchain's own
/// housekeeping (`~/.npm/_logs`, cargo's package-cache lock) and its
/// registries are allowed. Never when the user chose: a `--preset`, a
/// policy file that names its presets (`extends`) or says `auto_preset =
/// false`, `--no-auto-preset`. Never an agent's preset (those grant the
/// agent's home and its model's hosts: a choice to make by name).
fn auto_preset(
    req: &LoadRequest,
    project: &Path,
    file: Option<&raw::RawPolicy>,
) -> Option<AutoPreset> {
    let argv = req.job.as_deref()?;
    if !req.overrides.presets.is_empty() {
        return None;
    }
    if let Some(raw) = file
        && (raw.extends_at.is_some() || raw.auto_preset.as_ref().is_some_and(|a| !a.value))
    {
        return None;
    }
    let fit = markers::suggest(argv, |m| project.join(m).is_file(), &[])?;
    Some(AutoPreset {
        preset: fit.preset.to_string(),
        marker: fit.marker?.to_string(),
        command: fit.command.to_string(),
    })
}

/// Parse, merge and resolve the policy for one invocation.
pub fn load(req: &LoadRequest) -> Result<Policy, PolicyError> {
    load_inner(req, None).0
}

/// The glob walk remembered between loads (see [`walk_cache`]): where it
/// lives, what the last load left there, and which filesystems are trusted.
#[derive(Debug)]
pub struct WalkMemory {
    /// vetto's own directory of remembered walks: masked from the job
    /// wherever a rule would let it see or change it.
    pub dir: PathBuf,
    pub prior: walk_cache::WalkCache,
    pub trust: paths::TrustFs,
    /// Components whose names every remembered listing keeps besides the
    /// policy's own (the end-of-session persistence check reads them).
    pub keep: &'static [&'static str],
    /// The remembered directories' stamps, begun before the load, and the
    /// time just before ([`walk_parallel::StampsAhead`]).
    pub begun: Option<(walk_parallel::StampsAhead, i128)>,
}

/// What a remembering load walked.
#[derive(Debug)]
pub struct Walked {
    /// Every listing held, read or recalled (see [`GlobWalker::into_listings`]).
    pub listings: walk_cache::WalkCache,
    /// Some listing was read anew: worth remembering for the next load.
    pub learnt: bool,
}

/// The walk a remembering load made, kept as the walker held it until
/// [`Walking::walked`]: turning it into one [`Walked`] is work the
/// session does once its job has started, not before.
#[derive(Debug)]
pub struct Walking(GlobWalker);

impl Walking {
    /// The `.git` directories the walk's listings hold
    /// ([`GlobWalker::git_dirs`]).
    pub fn git_dirs(&self) -> Vec<std::path::PathBuf> {
        self.0.git_dirs()
    }

    /// What was walked; `None` when nothing is remembered.
    pub fn walked(self) -> Option<Walked> {
        self.0
            .into_listings()
            .map(|(listings, learnt)| Walked { listings, learnt })
    }
}

/// [`load`] with a remembered walk; also returns what was walked.
pub fn load_remembering(
    req: &LoadRequest,
    memory: WalkMemory,
) -> (Result<Policy, PolicyError>, Option<Walking>) {
    load_inner(req, Some(memory))
}

fn load_inner(
    req: &LoadRequest,
    memory: Option<WalkMemory>,
) -> (Result<Policy, PolicyError>, Option<Walking>) {
    let mut walk_dir = None;
    let mut walker = None;
    let policy = load_walking(req, memory, &mut walk_dir, &mut walker);
    let learnt = walker.map(Walking);
    let policy = policy.map(|mut p| {
        if let Some(dir) = walk_dir {
            merge::mask_own_dir(
                &mut p,
                &dir,
                "vetto's remembered glob walks are not the job's",
            );
        }
        p
    });
    (policy, learnt)
}

fn load_walking(
    req: &LoadRequest,
    memory: Option<WalkMemory>,
    walk_dir: &mut Option<PathBuf>,
    walker_out: &mut Option<GlobWalker>,
) -> Result<Policy, PolicyError> {
    let mut diags = Diags::default();
    let project = match project_root(&req.cwd, req.project.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            let shown = req
                .project
                .as_deref()
                .unwrap_or(&req.cwd)
                .display()
                .to_string();
            diags.plain(
                "--project",
                format!("cannot use {shown} as the project root: {e}"),
                None,
            );
            return Err(PolicyError::from_diags(diags));
        }
    };
    let Some(chosen) = choose_file(req, &project, &mut diags) else {
        return Err(PolicyError::from_diags(diags));
    };
    let ChosenFile {
        file,
        text: file_text,
        origin,
        working_tree_differs,
    } = chosen;

    // Parse every source, presets in merge order first.
    let mut order: Vec<PresetSource> = Vec::new();
    let mut stack = Vec::new();
    let file_src = file
        .as_ref()
        .zip(file_text.as_deref())
        .map(|((_, shown), text)| SourceRef { name: shown, text });
    let file_raw = file_src.map(|src| {
        let raw = raw::parse(src, &mut diags);
        // No `extends` means the default; `extends = []` means nothing.
        if raw.extends_at.is_none() {
            add_default(&mut stack, &mut order, &mut diags);
        }
        for e in &raw.extends {
            merge::add_preset(
                presets::PRESETS,
                &e.value,
                Asker::Source(src, e.span.clone()),
                &mut stack,
                &mut order,
                &mut diags,
            );
        }
        raw
    });
    if file_raw.is_none() {
        add_default(&mut stack, &mut order, &mut diags);
    }
    let auto = auto_preset(req, &project, file_raw.as_ref());
    if let Some(a) = &auto {
        merge::add_preset(
            presets::PRESETS,
            &a.preset,
            Asker::Option,
            &mut stack,
            &mut order,
            &mut diags,
        );
    }
    for name in &req.overrides.presets {
        merge::add_preset(
            presets::PRESETS,
            name,
            Asker::Option,
            &mut stack,
            &mut order,
            &mut diags,
        );
    }

    // `**` never enters output directories, so collect them first.
    let mut outputs_per_source = Vec::new();
    for p in &order {
        let name = presets::source_name(p.name);
        let src = SourceRef {
            name: &name,
            text: p.text,
        };
        outputs_per_source.push(validate::outputs(&p.raw, src, &mut diags));
    }
    let file_outputs = file_raw
        .as_ref()
        .zip(file_src)
        .map(|(raw, src)| validate::outputs(raw, src, &mut diags))
        .unwrap_or_default();
    let mut skip: Vec<String> = outputs_per_source.iter().flatten().cloned().collect();
    skip.extend(file_outputs.iter().cloned());

    let mut walker = GlobWalker::new(skip);
    if let Some(m) = memory {
        walker.remember(m.prior, m.trust, m.keep);
        if let Some((begun, now)) = m.begun {
            walker.stamps_begun(begun, now);
        }
        *walk_dir = Some(m.dir);
    }
    let mut ctx = PathCtx {
        vars: Vars {
            home: &req.home,
            project: &project,
            tmpdir: &req.session_tmp,
        },
        walker,
    };
    let mut layers = Vec::new();
    // Each source is hashed once (the policy line shows one of these).
    let mut default_digest = None;
    for (p, outputs) in order.iter().zip(outputs_per_source) {
        let name = presets::source_name(p.name);
        let text = p.text;
        let src = SourceRef { name: &name, text };
        let info = SourceInfo {
            name: format!("preset:{}", p.name),
            digest: digest(text),
        };
        if p.name == "default" {
            default_digest = Some(info.digest.clone());
        }
        let mut layer = validate::validate(&p.raw, src, info, &mut ctx, &mut diags);
        layer.outputs = outputs;
        layers.push(layer);
    }
    let mut file_digest = None;
    if let (Some(raw), Some(src)) = (&file_raw, file_src) {
        let info = SourceInfo {
            name: src.name.to_string(),
            digest: digest(src.text),
        };
        file_digest = Some(info.digest.clone());
        let mut layer = validate::validate(raw, src, info, &mut ctx, &mut diags);
        layer.outputs = file_outputs;
        layers.push(layer);
    }
    if !req.overrides.is_empty() {
        layers.push(merge::cli_layer(
            &req.overrides,
            &req.cwd,
            &mut ctx,
            &mut diags,
        ));
    }
    *walker_out = Some(ctx.walker);
    if !diags.is_empty() {
        return Err(PolicyError::from_diags(diags));
    }

    // A file in the project is named as the project knows it.
    let shown_file = file_src.map(|src| match &origin {
        PolicyOrigin::WorkingTree { path } => path
            .strip_prefix(&project)
            .map_or_else(|_| src.name.to_string(), |r| r.display().to_string()),
        _ => src.name.to_string(),
    });
    let provenance = Provenance {
        origin,
        file: shown_file,
        digest: file_digest.or(default_digest).unwrap_or_default(),
        extends: match &file_raw {
            Some(raw) if raw.extends_at.is_none() => vec!["default".into()],
            Some(raw) => raw.extends.iter().map(|e| e.value.clone()).collect(),
            None => vec!["default".into()],
        },
        extends_implicit: file_raw.as_ref().is_none_or(|r| r.extends_at.is_none()),
        blank_slate: file_raw.as_ref().zip(file_src).and_then(|(raw, src)| {
            let at = raw.extends_at.as_ref()?;
            raw.extends.is_empty().then(|| {
                let loc = src.locate(at);
                Origin {
                    source: src.name.to_string(),
                    line: loc.line,
                    col: loc.col,
                    written: "extends = []".into(),
                }
            })
        }),
        presets: req.overrides.presets.clone(),
        auto_preset: auto,
        command_line: !req.overrides.is_empty(),
        working_tree_differs,
    };
    let mut policy = merge::fold(layers, project, req.session_tmp.clone());
    policy.provenance = provenance;
    // The files that decide the next session's policy, protected whether
    // or not they exist: the project's `vetto.toml` and the `--policy`
    // file (its working-tree path, also under `--policy-ref`).
    let project_policy = policy.project.join(PROJECT_POLICY);
    let given = req
        .policy_file
        .as_ref()
        .map(|p| paths::normalise_abs(&req.cwd.join(p)));
    let working_tree_file = match &policy.provenance.origin {
        PolicyOrigin::WorkingTree { path } => Some(path.clone()),
        _ => None,
    };
    merge::add_built_ins(
        &mut policy,
        &[Some(project_policy.as_path()), given.as_deref()],
        req.report_dir.as_deref(),
        &req.env,
        &req.cwd,
    );
    policy.policy_file = working_tree_file;
    Ok(policy)
}

/// The policy file of an invocation: where it is shown from, its text
/// (`None`: no file, the built-in default), and its origin.
struct ChosenFile {
    /// The path (working tree) and the name diagnostics give it.
    file: Option<(PathBuf, String)>,
    text: Option<String>,
    origin: PolicyOrigin,
    working_tree_differs: Option<bool>,
}

/// `--policy-ref REF` (the file at a git ref), else `--policy FILE`, else
/// the project's `vetto.toml` if present, else none. Problems go to
/// `diags` (and the answer is `None`).
fn choose_file(req: &LoadRequest, project: &Path, diags: &mut Diags) -> Option<ChosenFile> {
    if let Some(reference) = &req.policy_ref {
        return from_ref(req, project, reference, diags);
    }
    let file: Option<(PathBuf, String)> = match &req.policy_file {
        Some(p) => Some((p.clone(), p.display().to_string())),
        None => {
            let p = project.join(PROJECT_POLICY);
            p.exists().then(|| (p.clone(), p.display().to_string()))
        }
    };
    let text = match &file {
        Some((path, shown)) => match std::fs::read_to_string(req.cwd.join(path)) {
            Ok(t) => Some(t),
            Err(e) => {
                diags.plain(
                    shown.clone(),
                    format!("cannot read the policy file: {e}"),
                    None,
                );
                return None;
            }
        },
        None => None,
    };
    let origin = match &file {
        Some((path, _)) => PolicyOrigin::WorkingTree {
            path: paths::normalise_abs(&req.cwd.join(path)),
        },
        None => PolicyOrigin::BuiltIn,
    };
    Some(ChosenFile {
        file,
        text,
        origin,
        working_tree_differs: None,
    })
}

/// The file at `reference`: `--policy`'s path relative to the project, or
/// `vetto.toml`; named `REF:PATH` in diagnostics.
fn from_ref(
    req: &LoadRequest,
    project: &Path,
    reference: &str,
    diags: &mut Diags,
) -> Option<ChosenFile> {
    let in_tree = match &req.policy_file {
        Some(p) => paths::normalise_abs(&req.cwd.join(p)),
        None => project.join(PROJECT_POLICY),
    };
    let rel = match in_tree.strip_prefix(project).ok().and_then(Path::to_str) {
        Some(rel) if !rel.is_empty() && !rel.contains(|c: char| c.is_control()) => rel.to_string(),
        _ => {
            diags.plain(
                "--policy-ref",
                format!(
                    "the policy file {} is not a file inside the project {}; expected --policy to name one there",
                    in_tree.display(),
                    project.display()
                ),
                None,
            );
            return None;
        }
    };
    let at = match git_ref::read(project, reference, &rel) {
        Ok(at) => at,
        Err(e) => {
            diags.plain(
                "--policy-ref",
                e.to_string(),
                Some("name a branch, tag or commit of the project's repository".into()),
            );
            return None;
        }
    };
    let found = at.text.is_some();
    // What the working tree holds there, to say when it is not what runs.
    let tree_text = std::fs::read(&in_tree).ok();
    let working_tree_differs = Some(tree_text.as_deref() != at.text.as_deref().map(str::as_bytes));
    Some(ChosenFile {
        file: found.then(|| (in_tree.clone(), format!("{reference}:{rel}"))),
        text: at.text,
        origin: PolicyOrigin::GitRef {
            reference: reference.to_string(),
            commit: at.commit,
            path: rel,
            found,
        },
        working_tree_differs,
    })
}

/// Validate one policy file as `vetto run --policy FILE` would, from the
/// file's directory (so `${PROJECT}` is the file's project).
pub fn check_file(path: &Path) -> Result<(), PolicyError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let dir = cwd.join(path);
    let dir = dir.parent().unwrap_or(Path::new("/"));
    let req = LoadRequest {
        cwd: cwd.clone(),
        project: project_root(dir, None).ok(),
        policy_file: Some(path.to_path_buf()),
        policy_ref: None,
        home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
        session_tmp: explain::placeholder_tmp(),
        report_dir: None,
        env: Vec::new(),
        overrides: Overrides::default(),
        job: None,
    };
    load(&req).map(drop)
}

/// Parse and validate `text` as a policy file with fixed variables and a
/// tiny glob budget, rendering any diagnostics: the entry point of the
/// fuzz target and of the random-input test (it must never panic).
pub fn check_text(text: &str) -> Result<(), PolicyError> {
    let mut diags = Diags::default();
    let src = SourceRef {
        name: "fuzz.toml",
        text,
    };
    let raw = raw::parse(src, &mut diags);
    let mut order = Vec::new();
    for e in &raw.extends {
        merge::add_preset(
            presets::PRESETS,
            &e.value,
            Asker::Source(src, e.span.clone()),
            &mut Vec::new(),
            &mut order,
            &mut diags,
        );
    }
    let outputs = validate::outputs(&raw, src, &mut diags);
    let mut ctx = PathCtx {
        vars: Vars {
            home: Path::new("/nonexistent/home"),
            project: Path::new("/nonexistent/project"),
            tmpdir: Path::new("/nonexistent/tmp"),
        },
        walker: GlobWalker::with_cap(outputs, 64),
    };
    let info = SourceInfo {
        name: src.name.into(),
        digest: digest(text),
    };
    let layer = validate::validate(&raw, src, info, &mut ctx, &mut diags);
    if diags.is_empty() {
        let _ = merge::fold(vec![layer], PathBuf::from("/p"), PathBuf::from("/t"));
        Ok(())
    } else {
        Err(PolicyError::from_diags(diags))
    }
}

#[cfg(test)]
mod tests;
