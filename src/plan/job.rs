//! What the job gets at every tier, whichever backend starts it: its
//! session variables, its working directory, and the output directories
//! prepared for it. Shared by `build` and the AppContainer plan, which
//! otherwise would reach into each other.

use std::path::{Path, PathBuf};

use super::fs::FsView;
use crate::policy::Policy;

/// Whether the project announces that a build will create this output
/// directory (a `target/` only where there is a `Cargo.toml`, …), so that
/// vetto does not litter other projects with empty directories a script
/// might take for an installed dependency tree. Names vetto does not know
/// are the policy author's explicit choice and always prepared.
pub(super) fn announced(name: &str, project: &std::path::Path, view: &dyn FsView) -> bool {
    let markers: &[&str] = match name {
        "target" => &["Cargo.toml"],
        "node_modules" => &["package.json"],
        "dist" | "build" => &[
            "package.json",
            "pyproject.toml",
            "setup.py",
            "build.gradle",
            "build.gradle.kts",
            "CMakeLists.txt",
        ],
        ".venv" => &[
            "pyproject.toml",
            "requirements.txt",
            "setup.py",
            "Pipfile",
            "uv.lock",
        ],
        _ => return true,
    };
    markers
        .iter()
        .any(|m| view.kind(&project.join(m)).is_some())
}

/// The variables every session sets: its temporary directory and the tier.
pub(super) fn session_env(tmp: &str, tier: &str) -> [(String, String); 4] {
    [
        ("TMPDIR".to_string(), tmp.to_string()),
        ("TMP".to_string(), tmp.to_string()),
        ("TEMP".to_string(), tmp.to_string()),
        ("VETTO_TIER".to_string(), tier.to_string()),
    ]
}

/// [`job_cwd`] from vetto's own working directory.
pub(super) fn job_cwd_in(policy: &Policy, cwd: &Path) -> PathBuf {
    if cwd.starts_with(&policy.project) {
        cwd.to_path_buf()
    } else {
        policy.project.clone()
    }
}
