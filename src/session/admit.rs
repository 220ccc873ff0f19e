//! What is checked before the command starts, beyond the policy's own
//! diagnostics and the plan's refusals: the project is never the home
//! directory or above it, and the policy leaves the job a project, a
//! working directory and a command it can reach.

use std::path::Path;

use crate::plan::Plan;
use crate::policy::reach::{self, Target};
use crate::policy::{LoadRequest, Policy, paths, project};

/// `Err`: the refusal. `Ok(Some(line))`: a line to say (the working
/// directory became the project).
pub fn project(request: &LoadRequest) -> Result<Option<String>, String> {
    // A project that cannot be located is `policy::load`'s to report.
    let Ok((root, from)) = project::locate(&request.cwd, request.project.as_deref()) else {
        return Ok(None);
    };
    let home = std::fs::canonicalize(&request.home)
        .unwrap_or_else(|_| paths::normalise_abs(&request.cwd.join(&request.home)));
    if let Some(refusal) = project::home_refusal(&root, &home, from) {
        return Err(refusal);
    }
    Ok((from == project::ProjectFrom::WorkingDir).then(|| project::no_checkout_line(&root)))
}

/// The project, the working directory and the command's executable are
/// readable under the policy — at the tiers that isolate the filesystem
/// (and not under `--audit`, which enforces nothing). `Ok(Some)`: the
/// command's first candidate on `PATH` is not, a later one runs.
pub fn reachable(
    plan: &Plan,
    policy: &Policy,
    command: &[std::ffi::OsString],
) -> Result<Option<reach::PassedOver>, Box<reach::Unreachable>> {
    if plan.landlock.is_none() && plan.namespaces.is_none() {
        return Ok(None);
    }
    let mut targets = vec![
        Target::Project(policy.project.clone()),
        Target::WorkingDir(plan.cwd.clone()),
    ];
    if let Some(name) = command.first().and_then(|n| n.to_str()) {
        let path_var = plan
            .env
            .vars
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str());
        let found = reach::candidates(name, path_var, &plan.cwd, is_executable);
        targets.extend(found.into_iter().map(|found| Target::Command {
            name: name.to_string(),
            real: std::fs::canonicalize(&found).ok(),
            found,
        }));
    }
    reach::check(policy, &targets)
}

/// A regular file with an execute bit (what `execvp` would try).
fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| crate::sys::os::is_executable(&m))
}
