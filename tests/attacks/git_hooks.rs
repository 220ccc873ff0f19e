//! Persistence through git: a hook or a `.git/config` entry written by a
//! build runs later, unsandboxed, on the developer's machine or in the
//! next CI step. Renaming, replacing or deleting `.git` must not open a way
//! around the protection.

use std::path::Path;

use crate::util::{Out, Tier, World};
use crate::{at_every_tier_and_creations_after, require};

const HOOK: &str = "#!/bin/sh\\necho PWNED-by-hook\\n";

/// Run `script` bare in one world and sandboxed in another; return the
/// worlds and the sandboxed output (the bare one must succeed).
fn attack(tier: Tier, script: &str) -> (World, World, Out) {
    let bare_world = World::at(tier);
    bare_world.sh_bare(script);
    let sandbox_world = World::at(tier);
    let out = sandbox_world.sh_sandboxed(&format!("{script}; echo script-finished"));
    out.assert_ran().assert_stdout_contains("script-finished");
    (bare_world, sandbox_world, out)
}

fn config_of(p: &Path) -> Option<String> {
    std::fs::read_to_string(p.join(".git/config")).ok()
}

/// Evidence in the sandboxed world: no pre-commit hook (at `.git/hooks`,
/// wherever `.git` ended up, or via `core.hooksPath`), `.git/config` byte
/// for byte what it was, and the next commit runs no planted hook.
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
    // The next commit, outside the sandbox, runs no planted hook. (A job
    // may delete what git lets it write — objects, refs, HEAD — as it may
    // delete any project file; that loses data but plants nothing, so the
    // commit is only required to succeed while the repository is whole.)
    let whole = w
        .run_bare(&["git", "rev-parse", "--git-dir", "HEAD"])
        .code()
        == 0;
    let next = w.sh_bare("git commit -q --allow-empty -m after-job && echo committed");
    if whole {
        next.assert_stdout_contains("committed");
    }
    next.assert_no_leak("PWNED");
}

/// Runs as an unprivileged user: the job writes `.git/hooks/pre-commit`,
/// directly and through a symlink it makes in `src/`.
fn writing_git_hook_is_blocked(tier: Tier) {
    require!(tier.feature());
    let script = format!(
        "printf '{HOOK}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
         ln -s ../.git/hooks src/hooks-link; printf '{HOOK}' > src/hooks-link/pre-push"
    );
    let (bare, w, out) = attack(tier, &script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare hook write failed"
    );
    assert!(
        bare.project.join(".git/hooks/pre-push").exists(),
        "control: bare hook write through the link failed"
    );
    let original = config_of(&bare.project).unwrap();
    assert_git_intact(&w, &original, &out);
    assert!(
        !w.project.join(".git/hooks/pre-push").exists(),
        "a hook was written through a symlink\n{}",
        out.dump()
    );
}
at_every_tier_and_creations_after!(writing_git_hook_is_blocked);

/// Runs as an unprivileged user: the job edits `.git/config` (a
/// `core.hooksPath` and an `fsmonitor` command both run code later).
fn writing_git_config_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w0 = World::at(tier);
    let original = config_of(&w0.project).unwrap();
    drop(w0);
    let script = "git config core.hooksPath /tmp/evil-hooks; printf '[core]\\n\\tfsmonitor = echo PWNED\\n' >> .git/config";
    let (bare, w, out) = attack(tier, script);
    assert_ne!(
        config_of(&bare.project).unwrap(),
        original,
        "control: bare config write failed"
    );
    assert_git_intact(&w, &original, &out);
}
at_every_tier_and_creations_after!(writing_git_config_is_blocked);

/// Runs as an unprivileged user: `mv .git .git2`, then build a fresh `.git`
/// with a hook (and move the config back).
fn renaming_git_dir_to_plant_hook_is_blocked(tier: Tier) {
    require!(tier.feature());
    let script = format!(
        "mv .git .git2; mkdir -p .git/hooks; cp -r .git2/. .git/; printf '{HOOK}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo '[core] hooksPath = .git/hooks' >> .git/config"
    );
    let (bare, w, out) = attack(tier, &script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare rename trick failed"
    );
    let original = config_of(&World::at(tier).project).unwrap();
    assert_git_intact(&w, &original, &out);
}
at_every_tier_and_creations_after!(renaming_git_dir_to_plant_hook_is_blocked);

/// Runs as an unprivileged user: replace `.git` with a symlink to a
/// directory the job controls, which holds a hook.
fn replacing_git_dir_with_symlink_is_blocked(tier: Tier) {
    require!(tier.feature());
    let script = format!(
        "cp -r .git evil; printf '{HOOK}' > evil/hooks/pre-commit; chmod +x evil/hooks/pre-commit; mv .git .git-old || rm -rf .git; ln -s evil .git"
    );
    let (bare, w, out) = attack(tier, &script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare symlink trick failed"
    );
    let original = config_of(&World::at(tier).project).unwrap();
    assert_git_intact(&w, &original, &out);
}
at_every_tier_and_creations_after!(replacing_git_dir_with_symlink_is_blocked);

/// Runs as an unprivileged user: `rm -rf .git`, then recreate it with a hook.
fn deleting_and_recreating_git_dir_is_blocked(tier: Tier) {
    require!(tier.feature());
    let script = format!(
        "rm -rf .git; mkdir -p .git/hooks; printf '{HOOK}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit"
    );
    let (bare, w, out) = attack(tier, &script);
    assert!(
        bare.project.join(".git/hooks/pre-commit").exists(),
        "control: bare delete trick failed"
    );
    let original = config_of(&World::at(tier).project).unwrap();
    assert_git_intact(&w, &original, &out);
}
at_every_tier_and_creations_after!(deleting_and_recreating_git_dir_is_blocked);

/// Runs as an unprivileged user: hard-link `.git/config` and a hook into
/// the project root and into `src/` (fully writable), and write through
/// the links (same inode, writable name).
fn hardlinking_git_config_is_blocked(tier: Tier) {
    require!(tier.feature());
    let script = "ln .git/config cfg-link; echo '[core] fsmonitor = echo PWNED' >> cfg-link; \
                  ln .git/config src/cfg-link; echo '[core] fsmonitor = echo PWNED' >> src/cfg-link; \
                  ln .git/hooks/pre-commit.sample hook-link; echo 'echo PWNED' >> hook-link; \
                  ln .git/hooks/pre-commit.sample src/hook-link; echo 'echo PWNED' >> src/hook-link";
    let (bare, w, out) = attack(tier, script);
    let original = config_of(&World::at(tier).project).unwrap();
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
at_every_tier_and_creations_after!(hardlinking_git_config_is_blocked);

/// Runs as an unprivileged user: the repository uses husky
/// (`core.hooksPath = .husky`, hooks committed in `.husky/`); the job
/// edits `.husky/pre-commit` and adds `.husky/pre-push`. Evidence: bare,
/// the next commit runs the planted line; sandboxed, the hooks are
/// unchanged and the next commit runs nothing planted.
fn writing_husky_hooks_is_blocked(tier: Tier) {
    require!(tier.feature());
    let setup = "set -e; mkdir -p .husky; printf '#!/bin/sh\\necho husky-ok\\n' > .husky/pre-commit; \
                 chmod +x .husky/pre-commit; git config core.hooksPath .husky; git add .husky; git commit -q -m husky";
    let script = "echo 'echo PWNED-by-husky' >> .husky/pre-commit; printf '#!/bin/sh\\necho PWNED\\n' > .husky/pre-push";

    let bare = World::at(tier);
    bare.sh_bare(setup).assert_success();
    bare.sh_bare(script);
    // Git runs hooks with their output on stderr.
    bare.sh_bare("echo x >> README.md; git commit -qam next")
        .assert_stderr_contains("PWNED-by-husky");

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    let before = std::fs::read_to_string(w.project.join(".husky/pre-commit")).unwrap();
    let out = w.sh_sandboxed(&format!("{script}; echo script-finished"));
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        std::fs::read_to_string(w.project.join(".husky/pre-commit")).unwrap(),
        before,
        ".husky/pre-commit changed\n{}",
        out.dump()
    );
    assert!(
        !w.project.join(".husky/pre-push").exists(),
        "a husky hook was added\n{}",
        out.dump()
    );
    let next = w.sh_bare("echo x >> README.md; git commit -qam next");
    next.assert_stderr_contains("husky-ok")
        .assert_no_leak("PWNED");
}
at_every_tier_and_creations_after!(writing_husky_hooks_is_blocked);
