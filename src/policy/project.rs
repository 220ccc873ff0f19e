//! Which directory is the project — the job's writable root — and the
//! directories that must never be it: the home directory and everything
//! above it (a job there could append to `~/.bashrc`, fill
//! `~/.config/autostart`, rewrite `~/.ssh/config`).

use std::path::{Path, PathBuf};

/// How the project root was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectFrom {
    /// `--project DIR`.
    Option,
    /// The git top level of the working directory.
    GitTopLevel,
    /// The working directory: no git checkout here.
    WorkingDir,
}

/// The project root: `--project`, else the nearest ancestor of `cwd` that
/// contains `.git` (a directory or a worktree's file), else `cwd`;
/// canonicalised.
pub fn locate(cwd: &Path, project: Option<&Path>) -> std::io::Result<(PathBuf, ProjectFrom)> {
    let (chosen, from) = match project {
        Some(p) => (cwd.join(p), ProjectFrom::Option),
        None => match cwd
            .ancestors()
            .find(|d| d.join(".git").symlink_metadata().is_ok())
        {
            Some(top) => (top.to_path_buf(), ProjectFrom::GitTopLevel),
            None => (cwd.to_path_buf(), ProjectFrom::WorkingDir),
        },
    };
    Ok((std::fs::canonicalize(chosen)?, from))
}

/// The refusal when `project` is `home`, `/` or an ancestor of `home`
/// (both canonical, or as close as the caller could get).
pub fn home_refusal(project: &Path, home: &Path, from: ProjectFrom) -> Option<String> {
    let what = if project == home {
        "your home directory".to_string()
    } else if project == Path::new("/") {
        "the root directory".to_string()
    } else if home.starts_with(project) {
        format!("above your home directory {}", home.display())
    } else {
        return None;
    };
    let how = match from {
        ProjectFrom::Option => "--project",
        ProjectFrom::GitTopLevel => "the git checkout it is the top level of",
        ProjectFrom::WorkingDir => "the working directory; no git checkout here",
    };
    Some(format!(
        "the project would be {} ({how}), {what}: the job could write everything in it (~/.bashrc, ~/.config, …); name the project with --project DIR",
        project.display()
    ))
}

/// The line said when the working directory became the project.
pub fn no_checkout_line(project: &Path) -> String {
    format!(
        "no git checkout here: the project (writable) is {}; name another with --project DIR",
        project.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_root_and_ancestors_of_home_are_never_the_project() {
        let home = Path::new("/home/u");
        let from = ProjectFrom::WorkingDir;
        let r = home_refusal(home, home, from).unwrap_or_default();
        assert!(r.contains("your home directory"), "{r}");
        assert!(r.contains("--project DIR"), "{r}");
        assert!(r.contains("no git checkout here"), "{r}");
        let r = home_refusal(Path::new("/"), home, ProjectFrom::Option).unwrap_or_default();
        assert!(
            r.contains("the root directory") && r.contains("(--project)"),
            "{r}"
        );
        let r = home_refusal(Path::new("/home"), home, from).unwrap_or_default();
        assert!(r.contains("above your home directory /home/u"), "{r}");
        assert_eq!(home_refusal(Path::new("/home/u/src/p"), home, from), None);
        assert_eq!(home_refusal(Path::new("/home/uv"), home, from), None);
        assert_eq!(home_refusal(Path::new("/tmp/p"), home, from), None);
        // A home of `/` refuses only `/` itself.
        assert_eq!(home_refusal(Path::new("/srv"), Path::new("/"), from), None);
        assert!(home_refusal(Path::new("/"), Path::new("/"), from).is_some());
    }
}
