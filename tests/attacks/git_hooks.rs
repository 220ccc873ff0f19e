//! Persistence through git: a hook or a `.git/config` entry written by a
//! build runs later, unsandboxed, on the developer's machine or in the
//! next CI step. Renaming, replacing or deleting `.git` must not open a way
//! around the protection.

use std::path::Path;

use crate::require;
use crate::util::{Feature, Out, World};

const HOOK: &str = "#!/bin/sh\\necho PWNED-by-hook\\n";

/// Run `script` bare in one world and sandboxed in another; return the
/// worlds and the sandboxed output (the bare one must succeed).
fn attack(script: &str) -> (World, World, Out) {
    let bare_world = World::new();
    bare_world.sh_bare(script);
    let sandbox_world = World::new();
    let out = sandbox_world.sh_sandboxed(&format!("{script}; echo script-finished"));
    out.assert_ran().assert_stdout_contains("script-finished");
    (bare_world, sandbox_world, out)
}

fn config_of(p: &Path) -> Option<String> {
    std::fs::read_to_string(p.join(".git/config")).ok()
}

/// Evidence in the sandboxed world: no pre-commit hook (at `.git/hooks`,
/// wherever `.git` ended up, or via `core.hooksPath`), `.git/config` byte
/// for byte what it was, and git still works.
fn assert_git_intact(w: &World, original_config: &str, out: &Out) {
    let hook = w.project.join(".git/hooks/pre-commit");
    assert!(
        !hook.exists(),
        "a pre-commit hook exists after the job\n{}",
        out.dump()
    );
    assert!(
        w.project.join(".git").is_dir() && !w.project.join(".git").is_symlink(),
        ".git is no longer the original directory\n{}",
        out.dump()
    );
    assert_eq!(
        config_of(&w.project).as_deref(),
        Some(original_config),
        ".git/config changed\n{}",
        out.dump()
    );
    let status = w.run_bare(&["git", "rev-parse", "--git-dir", "HEAD"]);
    status.assert_success();
    let run_hook = w.sh_bare("git commit -q --allow-empty -m after-job && echo committed");
    run_hook.assert_stdout_contains("committed");
    assert!(
        !run_hook.stdout().contains("PWNED"),
        "a planted hook ran at the next commit\n{}",
        run_hook.dump()
    );
}

/// Runs as an unprivileged user: the job writes `.git/hooks/pre-commit`.
#[test]
fn writing_git_hook_is_blocked() {
    require!(Feature::FsOnly);
    let script = format!("printf '{HOOK}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit");
    let (bare, w, out) = attack(&script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare hook write failed"
    );
    let original = config_of(&bare.project).unwrap();
    assert_git_intact(&w, &original, &out);
}

/// Runs as an unprivileged user: the job edits `.git/config` (a
/// `core.hooksPath` and an `fsmonitor` command both run code later).
#[test]
fn writing_git_config_is_blocked() {
    require!(Feature::FsOnly);
    let w0 = World::new();
    let original = config_of(&w0.project).unwrap();
    drop(w0);
    let script = "git config core.hooksPath /tmp/evil-hooks; printf '[core]\\n\\tfsmonitor = echo PWNED\\n' >> .git/config";
    let (bare, w, out) = attack(script);
    assert_ne!(
        config_of(&bare.project).unwrap(),
        original,
        "control: bare config write failed"
    );
    assert_git_intact(&w, &original, &out);
}

/// Runs as an unprivileged user: `mv .git .git2`, then build a fresh `.git`
/// with a hook (and move the config back).
#[test]
fn renaming_git_dir_to_plant_hook_is_blocked() {
    require!(Feature::FsOnly);
    let script = format!(
        "mv .git .git2; mkdir -p .git/hooks; cp -r .git2/. .git/; printf '{HOOK}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo '[core] hooksPath = .git/hooks' >> .git/config"
    );
    let (bare, w, out) = attack(&script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare rename trick failed"
    );
    let original = config_of(&World::new().project).unwrap();
    assert_git_intact(&w, &original, &out);
}

/// Runs as an unprivileged user: replace `.git` with a symlink to a
/// directory the job controls, which holds a hook.
#[test]
fn replacing_git_dir_with_symlink_is_blocked() {
    require!(Feature::FsOnly);
    let script = format!(
        "cp -r .git evil; printf '{HOOK}' > evil/hooks/pre-commit; chmod +x evil/hooks/pre-commit; mv .git .git-old || rm -rf .git; ln -s evil .git"
    );
    let (bare, w, out) = attack(&script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare symlink trick failed"
    );
    let original = config_of(&World::new().project).unwrap();
    assert_git_intact(&w, &original, &out);
}

/// Runs as an unprivileged user: `rm -rf .git`, then recreate it with a hook.
#[test]
fn deleting_and_recreating_git_dir_is_blocked() {
    require!(Feature::FsOnly);
    let script = format!(
        "rm -rf .git; mkdir -p .git/hooks; printf '{HOOK}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit"
    );
    let (bare, w, out) = attack(&script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare delete trick failed"
    );
    let original = config_of(&World::new().project).unwrap();
    assert_git_intact(&w, &original, &out);
}

/// Runs as an unprivileged user: hard-link `.git/config` into the project
/// and write through the link (same inode, writable name).
#[test]
fn hardlinking_git_config_is_blocked() {
    require!(Feature::FsOnly);
    let script = "ln .git/config cfg-link; echo '[core] fsmonitor = echo PWNED' >> cfg-link; ln .git/hooks/pre-commit.sample hook-link; echo 'echo PWNED' >> hook-link";
    let (bare, w, out) = attack(script);
    let original = config_of(&World::new().project).unwrap();
    assert_ne!(
        config_of(&bare.project).unwrap(),
        original,
        "control: bare hardlink write failed"
    );
    assert_git_intact(&w, &original, &out);
    let sample =
        std::fs::read_to_string(w.project.join(".git/hooks/pre-commit.sample")).unwrap_or_default();
    assert!(
        !sample.contains("PWNED"),
        "a hook sample was modified through a hard link\n{}",
        out.dump()
    );
}
