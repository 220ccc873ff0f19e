//! A policy must leave the job somewhere to stand and something to run:
//! the project, the working directory and the command's executable must
//! be readable under it. Otherwise the sandbox would fail with the kernel's
//! words (`cannot enter DIR: No such file or directory`); this says which
//! rule did it, before anything starts.

use std::fmt;
use std::path::{Path, PathBuf};

use super::paths::decide_rule;
use super::{Access, Origin, Policy};

/// What must stay reachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The project root.
    Project(PathBuf),
    /// The job's working directory.
    WorkingDir(PathBuf),
    /// The command's executable as found (`name` as typed), and where its
    /// links lead (checked too: Landlock decides on the file itself).
    Command {
        name: String,
        found: PathBuf,
        real: Option<PathBuf>,
    },
}

/// Why a target is unreachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// No rule allows reading the path.
    NoRule,
    /// A `deny` rule masks it.
    Masked(Origin),
}

/// The refusal: which target, which path of it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    pub target: Target,
    /// The path that failed (the link's target when only that one fails).
    pub path: PathBuf,
    pub cause: Cause,
    /// Where `extends = []` was written, when the policy is a blank slate.
    pub blank_slate: Option<Origin>,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, fix) = match &self.target {
            Target::Project(p) => (
                format!("the project {}", p.display()),
                "read = [\"${PROJECT}\"]".to_string(),
            ),
            Target::WorkingDir(p) => (
                format!("the working directory {}", p.display()),
                format!("read = [{:?}]", p.display().to_string()),
            ),
            Target::Command { name, found, .. } => {
                let dir = self.path.parent().unwrap_or(Path::new("/"));
                let what = if self.path == *found && Path::new(name) == found.as_path() {
                    format!("the command {name}")
                } else if self.path == *found {
                    format!("the command {name} ({})", found.display())
                } else {
                    format!(
                        "the command {name} ({} → {})",
                        found.display(),
                        self.path.display()
                    )
                };
                (what, format!("read = [{:?}]", dir.display().to_string()))
            }
        };
        write!(f, "the policy leaves {what} unreadable: ")?;
        match &self.cause {
            Cause::NoRule => {
                write!(f, "no rule allows it")?;
                match &self.blank_slate {
                    Some(at) => write!(
                        f,
                        " (extends = [] at {}:{}:{} removed the default's read rules); add {fix} or drop extends = []",
                        at.source, at.line, at.col
                    ),
                    None => write!(f, "; add {fix}"),
                }
            }
            Cause::Masked(o) if o.line == 0 => {
                write!(f, "{} {} masks it; drop that rule", o.source, o.written)
            }
            Cause::Masked(o) => write!(
                f,
                "deny = [{:?}] at {}:{}:{} masks it; remove that rule or allow a path beneath it",
                o.written, o.source, o.line, o.col
            ),
        }
    }
}

/// Is `path` readable (and so executable, listable) under the policy?
fn readable(policy: &Policy, path: &Path) -> Result<(), Cause> {
    match decide_rule(&policy.fs, path) {
        Some(r) if r.access == Access::Deny => Err(Cause::Masked(r.origin.clone())),
        Some(_) => Ok(()),
        None => Err(Cause::NoRule),
    }
}

/// A command whose first candidate on `PATH` the policy leaves unreadable
/// while a later one is readable: the sandbox's search passes over the
/// first (as `execvp` does over a file it may not run), so the job runs
/// another program than the same command outside would — said, not
/// refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedOver {
    pub refused: Box<Unreachable>,
    /// The candidate that runs.
    pub runs: PathBuf,
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the job runs {}, the next on PATH: {}",
            crate::text::path_name(&self.runs),
            self.refused
        )
    }
}

/// Every target must be readable; the first that is not is the refusal.
/// A command with several candidates on `PATH` is reachable when one is
/// (the sandbox's own search skips the others); pass them in `PATH` order.
/// `Ok(Some)`: reachable, but not by its first candidate.
pub fn check(policy: &Policy, targets: &[Target]) -> Result<Option<PassedOver>, Box<Unreachable>> {
    let refuse = |target: &Target, path: &Path, cause| {
        Box::new(Unreachable {
            target: target.clone(),
            path: path.to_path_buf(),
            cause,
            blank_slate: policy.provenance.blank_slate.clone(),
        })
    };
    let mut first_command: Option<Box<Unreachable>> = None;
    let mut command_ok: Option<PathBuf> = None;
    for t in targets {
        match t {
            Target::Project(p) | Target::WorkingDir(p) => {
                readable(policy, p).map_err(|c| refuse(t, p, c))?;
            }
            Target::Command { found, real, .. } => {
                let verdict = readable(policy, found).map_err(|c| refuse(t, found, c));
                let verdict = verdict.and_then(|()| match real {
                    Some(r) if r != found => readable(policy, r).map_err(|c| refuse(t, r, c)),
                    _ => Ok(()),
                });
                match verdict {
                    Ok(()) => {
                        command_ok.get_or_insert_with(|| found.clone());
                    }
                    Err(e) if command_ok.is_none() => {
                        first_command.get_or_insert(e);
                    }
                    Err(_) => {}
                }
            }
        }
    }
    match (first_command, command_ok) {
        (Some(refused), Some(runs)) => Ok(Some(PassedOver { refused, runs })),
        (Some(e), None) => Err(e),
        (None, _) => Ok(None),
    }
}

/// The executables `execvp` would consider for `name` on `path_var`, in
/// order (`is_exec`: a regular file the caller may execute); a name with a
/// `/` is taken relative to `cwd`.
pub fn candidates(
    name: &str,
    path_var: Option<&str>,
    cwd: &Path,
    is_exec: impl Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    if name.is_empty() {
        return Vec::new();
    }
    if name.contains('/') {
        let p = super::paths::normalise_abs(&cwd.join(name));
        return if is_exec(&p) { vec![p] } else { Vec::new() };
    }
    path_var
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| super::paths::normalise_abs(&cwd.join(d).join(name)))
        .filter(|p| is_exec(p))
        .collect()
}
