//! What the "runs later" snapshot costs a session (issue P9): resolving
//! the places that run later from the project's configuration and keeping
//! what each holds, right before the job starts (`Snapshot::take`), and
//! comparing after it (`Snapshot::compare`).
//!
//! The project is a real `git init` (its sample hooks), a `core.hooksPath`
//! directory of 10 hooks, an included config, `.vscode/` and
//! `.devcontainer/`, agent project settings naming a hook script; the home
//! has a `~/.claude/settings.json` and a 2 MiB `~/.claude.json` (a heavy
//! agent user's), both made writable as `--preset claude-code` does.
//! Run: `cargo bench --bench autorun_snapshot` (figures in
//! docs/benchmarks.md).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use vetto::policy::autorun::{Compare, Roots};
use vetto::supervisor::snapshot::Snapshot;

const ROUNDS: usize = 60;

fn write(path: &Path, body: &str) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, body);
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let root = std::env::temp_dir().join(format!("vetto-bench-autorun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (project, home) = (root.join("project"), root.join("home"));
    let _ = std::fs::create_dir_all(&project);
    let _ = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .status();
    let _ = Command::new("git")
        .args(["config", "core.hooksPath", ".githooks"])
        .current_dir(&project)
        .status();
    let _ = Command::new("git")
        .args(["config", "include.path", "../.gitconfig-project"])
        .current_dir(&project)
        .status();
    write(
        &project.join(".gitconfig-project"),
        "[filter \"lfs\"]\n\tprocess = ./tools/filter\n",
    );
    for i in 0..10 {
        write(
            &project.join(format!(".githooks/hook-{i}")),
            "#!/bin/sh\nexit 0\n",
        );
    }
    for f in ["tasks.json", "launch.json", "settings.json"] {
        write(&project.join(".vscode").join(f), "{}\n");
    }
    write(&project.join(".devcontainer/devcontainer.json"), "{}\n");
    write(
        &project.join(".claude/settings.json"),
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"./tools/stop.sh"}]}]}}"#,
    );
    write(&project.join("tools/stop.sh"), "#!/bin/sh\n");
    write(&home.join(".claude/settings.json"), r#"{"model":"m"}"#);
    let mut big = String::from("{\"numStartups\":1,\"projects\":{");
    for i in 0..4000 {
        big.push_str(&format!(
            "\"/p/{i}\":{{\"history\":[\"{}\"],\"allowedTools\":[]}},",
            "x".repeat(400)
        ));
    }
    big.push_str("\"/last\":{}}}");
    write(&home.join(".claude.json"), &big);

    let roots = || Roots {
        project: project.clone(),
        home: Some(home.clone()),
        agent_files: vec![
            (home.join(".claude/settings.json"), Compare::AgentJson),
            (home.join(".claude.json"), Compare::AgentJson),
        ],
        agent_trees: vec![home.join(".codex/packages")],
        nested_git_dirs: Vec::new(),
    };
    let project_only = || Roots {
        agent_files: Vec::new(),
        agent_trees: Vec::new(),
        ..roots()
    };
    let measure = |label: &str, make: &dyn Fn() -> Roots| {
        let (mut takes, mut compares) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let snap = Snapshot::take(make());
            takes.push(t.elapsed());
            let t = Instant::now();
            let (changes, unchecked) = snap.compare();
            compares.push(t.elapsed());
            assert!(changes.is_empty() && unchecked.is_empty());
        }
        println!(
            "{label:<44} take {:>8.3} ms   compare {:>8.3} ms   (median of {ROUNDS})",
            median(takes).as_secs_f64() * 1e3,
            median(compares).as_secs_f64() * 1e3
        );
    };
    println!(
        "~/.claude.json: {:.1} MiB",
        big.len() as f64 / (1 << 20) as f64
    );
    measure("project (git, hooksPath, editors, agents)", &project_only);
    measure("project + agent settings (preset)", &roots);
    let _ = std::fs::remove_dir_all(PathBuf::from(&root));
}
