//! The `$GITHUB_ENV` injection: a step appends `NODE_OPTIONS=--require …`
//! or a `PATH` entry to the runner's command files, and every later step
//! of the job runs the attacker's code outside the sandbox.

use std::path::PathBuf;

use crate::require;
use crate::util::{Feature, Run, World};

const FILES: [(&str, &str); 5] = [
    ("GITHUB_ENV", "set_env_1f2e"),
    ("GITHUB_PATH", "add_path_1f2e"),
    ("GITHUB_OUTPUT", "set_output_1f2e"),
    ("GITHUB_STATE", "save_state_1f2e"),
    ("GITHUB_STEP_SUMMARY", "step_summary_1f2e"),
];

/// Make the runner's command files under `dir` and point the variables at them.
fn with_runner_files(run: Run, dir: &std::path::Path) -> Run {
    let mut run = run;
    for (var, file) in FILES {
        run = run.env(var, dir.join(file));
    }
    run
}

fn runner_files(w: &World, dir: &std::path::Path) -> Vec<PathBuf> {
    FILES
        .iter()
        .map(|(_, f)| {
            let p = dir.join(f);
            w.write(&p, "");
            p
        })
        .collect()
}

/// The attack, by variable (empty inside when scrubbed) and by literal path
/// (an attacker can guess or list `_runner_file_commands`).
fn script(dir: &std::path::Path) -> String {
    let mut s = String::from("env | sed 's/^/ENV: /';\n");
    for (var, file) in FILES {
        s += &format!("echo 'NODE_OPTIONS=--require=/tmp/evil.js' >> \"${var}\";\n");
        s += &format!(
            "echo 'NODE_OPTIONS=--require=/tmp/evil.js' >> '{}';\n",
            dir.join(file).display()
        );
    }
    s + "echo script-finished"
}

fn check(w: &World, dir: &std::path::Path) {
    let files = runner_files(w, dir);
    let bare = with_runner_files(w.bare(&["sh", "-c", &script(dir)]), dir).run();
    bare.assert_stdout_contains("ENV: GITHUB_ENV=");
    for f in &files {
        assert!(
            std::fs::read_to_string(f).unwrap().contains("NODE_OPTIONS"),
            "control: bare write to {} failed",
            f.display()
        );
        std::fs::write(f, "").unwrap();
    }

    let out = with_runner_files(w.sandboxed(&["sh", "-c", &script(dir)]), dir).run();
    out.assert_ran().assert_stdout_contains("script-finished");
    for (var, _) in FILES {
        out.assert_stdout_lacks(&format!("ENV: {var}="));
    }
    for f in &files {
        assert_eq!(
            std::fs::read_to_string(f).unwrap(),
            "",
            "{} was written\n{}",
            f.display(),
            out.dump()
        );
    }
}

/// Runs as an unprivileged user: the runner's command files live in a temp
/// dir outside the project (as on GitHub-hosted runners). Evidence: bare,
/// the variables are visible and the files get the line; sandboxed, the
/// variables are absent from `env` and every file stays empty.
#[test]
fn github_env_injection_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
    let dir = w.outside.join("_temp/_runner_file_commands");
    check(&w, &dir);
}

/// Runs as an unprivileged user: the same, with the command files inside
/// the (writable) project, e.g. a self-hosted runner whose temp dir is in
/// the workspace. They must still not be writable.
#[test]
fn github_env_files_inside_project_are_not_writable() {
    require!(Feature::FsOnly);
    let w = World::new();
    let dir = w.project.join("_runner_temp");
    check(&w, &dir);
}
