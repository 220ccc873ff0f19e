//! Nothing the job writes runs later (issue P14): what the session changed
//! where a tool runs it later is put back, not only named. Each attack is
//! shown working bare — the later step (`git commit`, `cargo build`, `npm
//! test`) run by the test outside the sandbox, as the user or CI would —
//! and, after a sandboxed session (`vetto ci` and `vetto run`), the same
//! later step runs nothing of the job's. The mechanism is tested on every
//! place the tools declare (`vetto::policy::tool_files::PROJECT`), not on
//! a list of examples; harmless edits in the same files, and outputs
//! built from scratch, are no finding and are left as the job made them.

use std::path::{Path, PathBuf};

use vetto::policy::tool_files::{Declared, Format, PROJECT, Shape};

use crate::util::{self, Out, Tier, World, marker_of, planted_lines};
use crate::{at_every_tier, require};

fn put(w: &World, rel: &str, body: &str) {
    let path = w.project.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&path, body).unwrap();
    util::chown_tree(&w.project);
}

/// The control of each test: in a fresh world, `setup`, then the job's
/// `attack` (given the marker), then the `later` step, all bare: the
/// planted program runs (the marker appears).
fn runs_later_bare(
    tier: Tier,
    setup: &dyn Fn(&World),
    attack: &dyn Fn(&World, &Path) -> String,
    later: &dyn Fn(&World),
) {
    let bare = World::at(tier);
    setup(&bare);
    let marker = marker_of(&bare);
    bare.sh_bare(&attack(&bare, &marker)).assert_success();
    later(&bare);
    assert!(
        marker.exists(),
        "control: the planted program did not run bare"
    );
}

const COMMIT: &str =
    "git -c user.name=t -c user.email=t@vetto.invalid commit -q --allow-empty -m later";

const HOOKS_PATH_SETUP: &str = "set -e; mkdir .githooks; \
    printf '#!/bin/sh\\nexit 0\\n' > .githooks/pre-commit; chmod +x .githooks/pre-commit; \
    git config core.hooksPath .githooks; git add -A; git commit -qm hooks";

fn rewrite_hook(marker: &Path) -> String {
    format!(
        "printf '#!/bin/sh\\necho pwned > {}\\n' > .githooks/pre-commit",
        marker.display()
    )
}

/// `vetto run` (no report directory): the session's versions go to the
/// state directory.
fn run_sh(w: &World, script: &str) -> Out {
    w.sh_sandboxed(script)
}

/// Runs as an unprivileged user. The project's hooks live in `.githooks`
/// (`core.hooksPath`); the job rewrites the pre-commit hook. Bare, the
/// next `git commit` outside runs it. After `vetto ci` and after `vetto
/// run`, the hook is the user's again, the next commit runs nothing, and
/// the job's version is in the archive with the command that takes it
/// back — which, run, brings exactly the job's version.
fn a_rewritten_hook_does_not_run_at_the_next_commit(tier: Tier) {
    require!(tier.feature());
    runs_later_bare(
        tier,
        &|w| {
            w.sh_bare(HOOKS_PATH_SETUP).assert_success();
        },
        &|_, m| rewrite_hook(m),
        &|w| {
            w.sh_bare(COMMIT);
        },
    );

    let w = World::at(tier);
    w.sh_bare(HOOKS_PATH_SETUP).assert_success();
    let user_hook = std::fs::read(w.project.join(".githooks/pre-commit")).unwrap();
    let marker = marker_of(&w);
    let (out, log) = w.ci_sh(&format!("{}; echo script-finished", rewrite_hook(&marker)));
    out.assert_stdout_contains("script-finished");
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        planted_lines(&log)
            .iter()
            .any(|l| l.contains(".githooks/pre-commit") && l.contains("put back")),
        "{log}"
    );
    assert_eq!(
        std::fs::read(w.project.join(".githooks/pre-commit")).unwrap(),
        user_hook,
        "the user's hook is not back"
    );
    w.sh_bare(COMMIT).assert_success();
    assert!(!marker.exists(), "the job's hook ran at the next commit");

    // The command the finding gives takes the job's version back.
    let accept = out
        .stderr()
        .lines()
        .find_map(|l| l.split("to keep the session's version: ").nth(1))
        .map(|c| c.trim_end_matches(')').to_string())
        .unwrap_or_else(|| panic!("no command to keep it\n{}", out.dump()));
    w.sh_bare(&accept).assert_success();
    let kept = std::fs::read_to_string(w.project.join(".githooks/pre-commit")).unwrap();
    assert!(kept.contains("pwned"), "{kept}");

    // `vetto run` puts back the same way, into vetto's state directory.
    let w = World::at(tier);
    w.sh_bare(HOOKS_PATH_SETUP).assert_success();
    let marker = marker_of(&w);
    let out = run_sh(&w, &rewrite_hook(&marker));
    out.assert_success()
        .assert_stderr_contains("persistence planted")
        .assert_stderr_contains(".local/state/vetto/put-back");
    w.sh_bare(COMMIT).assert_success();
    assert!(!marker.exists(), "the job's hook ran after `vetto run`");
}
at_every_tier!(a_rewritten_hook_does_not_run_at_the_next_commit);

/// What a file of `format` holds that makes its tool run the job's
/// program; every format is here (a new one fails to compile until it is).
fn program_in(format: Format) -> &'static str {
    match format {
        Format::Bytes => "#!/bin/sh\nid\n",
        Format::AgentJson => {
            "{\"hooks\":{\"SessionStart\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"id\"}]}]}}\n"
        }
        Format::AgentToml => "notify = [\"sh\", \"-c\", \"id\"]\n",
        Format::CargoConfig => "[build]\nrustc-wrapper = \"./tools/w.sh\"\n",
        Format::RustToolchain => "[toolchain]\npath = \"./tools/tc\"\n",
        Format::Npmrc => "script-shell=./tools/sh\n",
        Format::Yarnrc => "yarn-path \"./tools/yarn.js\"\n",
        Format::YarnrcYml => "yarnPath: ./tools/yarn.cjs\n",
        Format::GradleProperties => "org.gradle.jvmargs=-javaagent:./tools/a.jar\n",
        Format::VscodeSettings => "{\"terminal.integrated.env.linux\": {\"PATH\": \"./tools\"}}\n",
        Format::CodeWorkspace => {
            "{\"folders\": [{\"path\": \".\"}], \"tasks\": {\"version\": \"2.0.0\", \"tasks\": [{\"label\": \"t\", \"command\": \"id\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}}\n"
        }
    }
}

/// Where the job plants for a declared place, relative to the project.
fn planted_at(d: &Declared) -> String {
    match d.shape {
        Shape::File => d.path.to_string(),
        Shape::Tree => format!("{}/planted-by-the-job", d.path),
        Shape::Ending(e) => format!("planted{e}"),
    }
}

/// One shell line that writes `body` to `rel` (quoted for `sh`).
fn write_line(rel: &str, body: &str) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let dir = Path::new(rel)
        .parent()
        .map(|p| p.display().to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".into());
    format!("mkdir -p {} && printf %s {} > {}", q(&dir), q(body), q(rel))
}

/// Runs as an unprivileged user. The mechanism, not the examples: for
/// every place a tool declares it reads at start, the job plants what
/// makes that tool run a program (one session plants them all). Each is
/// recorded — as `persistence-planted`, or as the refused write where the
/// policy keeps the place read-only (`.husky`, `lefthook.yml`) — and after
/// the session each is gone again (none was there at the start), so no
/// tool runs any of them.
fn every_place_a_tool_reads_planted_is_put_back(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let plants: Vec<(String, &Declared)> = PROJECT.iter().map(|d| (planted_at(d), d)).collect();
    // Several sessions, each making at most four new directories at the
    // project's top (the carve's spare directories, `plan::fs::SparePool`).
    for chunk in plants.chunks(4) {
        let script: Vec<String> = chunk
            .iter()
            .map(|(rel, d)| write_line(rel, program_in(d.format)))
            .collect();
        let (out, log) = w.ci_sh(&format!("{}; echo planted", script.join("; ")));
        out.assert_stdout_contains("planted");
        assert_eq!(out.code(), 3, "{}", out.dump());
        let recorded = util::violation_lines(&log);
        for (rel, d) in chunk {
            let path = w.project.join(rel);
            assert!(
                std::fs::symlink_metadata(&path).is_err(),
                "{rel} ({}) is still there after the session\n{}",
                d.tool,
                out.dump()
            );
            // Planted and put back (its path), or refused where the
            // policy keeps the place read-only (the place, as the job
            // named it).
            let place = match d.shape {
                Shape::Ending(_) => rel.as_str(),
                _ => d.path,
            };
            assert!(
                recorded
                    .iter()
                    .any(|l| l.contains(&format!("/{rel}\"")) || l.contains(&format!("{place}\""))),
                "{rel} ({}) not recorded: {recorded:#?}\n{}",
                d.tool,
                out.dump()
            );
        }
    }
}
at_every_tier!(every_place_a_tool_reads_planted_is_put_back);

/// Runs as an unprivileged user. A job that edits harmless settings in
/// the very files a tool reads (an `.npmrc` registry line, a cargo
/// profile, a VS Code font size, a toolchain channel, Gradle's parallel
/// builds) and builds a venv, `node_modules` and `target` from scratch
/// ends CLEAN with exit 0, and every edit is left as the job made it.
fn harmless_edits_and_fresh_outputs_are_clean_and_kept(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    put(&w, ".npmrc", "registry=https://registry.npmjs.org/\n");
    put(&w, ".cargo/config.toml", "[profile.dev]\nopt-level = 0\n");
    put(
        &w,
        ".vscode/settings.json",
        "{\n  // mine\n  \"editor.fontSize\": 12,\n}\n",
    );
    put(
        &w,
        "rust-toolchain.toml",
        "[toolchain]\nchannel = \"stable\"\n",
    );
    put(&w, "gradle.properties", "org.gradle.caching=true\n");
    w.sh_bare("git add -A && git -c user.name=t -c user.email=t@vetto.invalid commit -qm settings")
        .assert_success();
    let edits = [
        (
            ".npmrc",
            "registry=https://registry.example.invalid/\nsave-exact=true\n",
        ),
        (
            ".cargo/config.toml",
            "[profile.dev]\nopt-level = 1\n\n[term]\ncolor = \"never\"\n",
        ),
        (
            ".vscode/settings.json",
            "{\n  // mine\n  \"editor.fontSize\": 14,\n  \"files.trimTrailingWhitespace\": true\n}\n",
        ),
        (
            "rust-toolchain.toml",
            "[toolchain]\nchannel = \"1.85\"\ncomponents = [\"clippy\"]\n",
        ),
        (
            "gradle.properties",
            "org.gradle.caching=true\norg.gradle.parallel=true\nversion=2.0\n",
        ),
        (".yarnrc", "lastUpdateCheck 1700000000000\n"),
        (
            "app.code-workspace",
            "{\"folders\": [{\"path\": \".\"}], \"settings\": {\"editor.tabSize\": 2}}\n",
        ),
        ("node_modules/.bin/tool", "#!/bin/sh\n"),
        ("node_modules/pkg/index.js", "module.exports = 1\n"),
        ("target/debug/app", "binary\n"),
    ];
    let mut script: Vec<String> = edits
        .iter()
        .map(|(rel, body)| write_line(rel, body))
        .collect();
    script.push("python3 -m venv --without-pip .venv".into());
    let (out, log) = w.ci_sh(&script.join(" && "));
    assert_eq!(out.code(), 0, "{}", out.dump());
    out.assert_stderr_contains("CLEAN");
    assert!(planted_lines(&log).is_empty(), "{log}");
    for (rel, body) in edits {
        assert_eq!(
            std::fs::read_to_string(w.project.join(rel)).unwrap_or_default(),
            body,
            "{rel} was not left as the job made it"
        );
    }
    assert!(w.project.join(".venv/pyvenv.cfg").exists());
    assert!(!w.project.join("vetto-report/put-back.tar").exists());
}
at_every_tier!(harmless_edits_and_fresh_outputs_are_clean_and_kept);

/// Runs as an unprivileged user. A change the policy keeps
/// (`[persistence] keep`) is left as the job made it, recorded as
/// expected, and is no finding (exit 0); the same change elsewhere is
/// still put back.
fn a_change_the_policy_keeps_is_left_and_no_finding(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare(HOOKS_PATH_SETUP).assert_success();
    put(
        &w,
        "vetto.toml",
        "extends = [\"default\"]\n[persistence]\nkeep = [\"${PROJECT}/.githooks/pre-commit\"]\n",
    );
    w.sh_bare("git add -A && git -c user.name=t -c user.email=t@vetto.invalid commit -qm policy")
        .assert_success();
    let script = "printf '#!/bin/sh\\necho new-hook\\n' > .githooks/pre-commit; \
                  mkdir -p .cargo && printf '[build]\\nrustc-wrapper = \"./w\"\\n' > .cargo/config.toml";
    let (out, log) = w.ci_sh(script);
    assert_eq!(
        out.code(),
        3,
        "the cargo config is still a finding\n{}",
        out.dump()
    );
    let kept = std::fs::read_to_string(w.project.join(".githooks/pre-commit")).unwrap();
    assert!(
        kept.contains("new-hook"),
        "the kept change was undone: {kept}"
    );
    assert!(!w.project.join(".cargo/config.toml").exists());
    let expected: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"expected\"") && l.contains(".githooks/pre-commit"))
        .collect();
    assert_eq!(expected.len(), 1, "{log}");
    assert!(
        !planted_lines(&log)
            .iter()
            .any(|l| l.contains(".githooks/pre-commit") && !l.contains("\"expected\"")),
        "{log}"
    );
}
at_every_tier!(a_change_the_policy_keeps_is_left_and_no_finding);

/// Runs as an unprivileged user. npm reads the project's `.npmrc` at
/// every start: a `script-shell` planted there runs the job's program
/// for the next `npm test` outside. Bare it does; after the session the
/// `.npmrc` is the user's (a registry line) and `npm test` runs the test
/// with the ordinary shell.
fn an_npmrc_script_shell_does_not_run_at_the_next_npm_test(tier: Tier) {
    require!(tier.feature());
    crate::require_tool!("npm", "npm");
    let setup = |w: &World| {
        put(
            w,
            "package.json",
            "{\"name\":\"demo\",\"version\":\"1.0.0\",\"scripts\":{\"test\":\"echo tested\"}}\n",
        );
        put(w, ".npmrc", "registry=https://registry.npmjs.org/\n");
    };
    let attack = |m: &Path| {
        format!(
            "printf '#!/bin/sh\\necho pwned > {}\\nexec /bin/sh \"$@\"\\n' > evil-sh && chmod +x evil-sh && \
             printf 'registry=https://registry.npmjs.org/\\nscript-shell=./evil-sh\\n' > .npmrc",
            m.display()
        )
    };
    let npm_test = "npm test --offline --no-update-notifier 2>&1";
    runs_later_bare(tier, &setup, &|_, m| attack(m), &|w| {
        w.sh_bare(npm_test).assert_stdout_contains("tested");
    });

    let w = World::at(tier);
    setup(&w);
    let marker = marker_of(&w);
    let (out, log) = w.ci_sh(&attack(&marker));
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        planted_lines(&log)
            .iter()
            .any(|l| l.contains(".npmrc") && l.contains("script-shell")),
        "{log}"
    );
    w.sh_bare(npm_test).assert_stdout_contains("tested");
    assert!(
        !marker.exists(),
        "npm ran the job's shell after the session"
    );
}
at_every_tier!(an_npmrc_script_shell_does_not_run_at_the_next_npm_test);

/// A virtualenv at the project's top that exists before the session.
const VENV: &str = "/usr/bin/python3 -m venv --system-site-packages .venv";

/// Runs as an unprivileged user. Python runs every `import` line of every
/// `*.pth` in a virtualenv's `site-packages` at each start of its
/// interpreter. Bare, a `.pth` the job adds there runs its code at the
/// next `python` outside; after the session it is gone and the next
/// `python` runs nothing of the job's. What pip installs there as asked —
/// an editable install, whose `__editable__…pth` its `RECORD` lists — is
/// no finding and stays.
fn a_pth_planted_in_an_existing_virtualenv_does_not_run_at_the_next_python(tier: Tier) {
    require!(tier.feature());
    let plant = |m: &Path| {
        format!(
            "echo \"import os; open('{}', 'w').write('x')\" > \"$(echo .venv/lib/python3*/site-packages)/zz-evil.pth\"",
            m.display()
        )
    };
    let later = ".venv/bin/python -c pass";
    runs_later_bare(
        tier,
        &|w| {
            w.sh_bare(VENV).assert_success();
        },
        &|_, m| plant(m),
        &|w| {
            w.sh_bare(later).assert_success();
        },
    );

    let w = World::at(tier);
    w.sh_bare(VENV).assert_success();
    put(
        &w,
        "demo/pyproject.toml",
        "[build-system]\nrequires = [\"setuptools>=64\"]\nbuild-backend = \"setuptools.build_meta\"\n\n\
         [project]\nname = \"demo\"\nversion = \"0.1\"\n",
    );
    put(&w, "demo/demo/__init__.py", "");
    let marker = marker_of(&w);
    let install = ".venv/bin/pip install -q --no-index --no-build-isolation --no-cache-dir \
                   --disable-pip-version-check -e ./demo 2>&1";
    // The package manager's install alone: no finding, and its .pth stays.
    let (out, log) = w.ci_sh(install);
    assert_eq!(out.code(), 0, "{}", out.dump());
    assert!(planted_lines(&log).is_empty(), "{log}");
    let editable = std::fs::read_dir(glob_one(&w.project.join(".venv/lib"), "site-packages"))
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("__editable__"));
    assert!(editable, "control: pip made no editable .pth");

    let (out, log) = w.ci_sh(&plant(&marker));
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        planted_lines(&log)
            .iter()
            .any(|l| l.contains("zz-evil.pth")),
        "{log}"
    );
    w.sh_bare(later).assert_success();
    assert!(
        !marker.exists(),
        "python ran the job's .pth after the session"
    );
}
at_every_tier!(a_pth_planted_in_an_existing_virtualenv_does_not_run_at_the_next_python);

/// `DIR/python3.*/NAME`: the one site-packages of a virtualenv's `lib`.
fn glob_one(lib: &Path, name: &str) -> PathBuf {
    std::fs::read_dir(lib)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join(name))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no {name} in {}", lib.display()))
}

/// Runs as an unprivileged user. The repository's pre-commit hook is a
/// link into the tree (`.git/hooks/pre-commit -> ../../scripts/pre-commit`,
/// as many projects install their tracked hooks); the hooks directory is
/// read-only to the job, the script is not. Bare, the job's line appended
/// to the script runs at the next `git commit`; after the session the
/// script is the user's again and the commit runs nothing of the job's.
fn a_script_a_hook_links_to_does_not_run_the_jobs_line_at_the_next_commit(tier: Tier) {
    require!(tier.feature());
    let setup = "set -e; mkdir -p scripts; printf '#!/bin/sh\\ntrue\\n' > scripts/pre-commit; \
                 chmod +x scripts/pre-commit; ln -s ../../scripts/pre-commit .git/hooks/pre-commit; \
                 git add -A; git -c user.name=t -c user.email=t@vetto.invalid commit -qm hooks";
    let attack = |m: &Path| format!("echo 'echo pwned > {}' >> scripts/pre-commit", m.display());
    runs_later_bare(
        tier,
        &|w| {
            w.sh_bare(setup).assert_success();
        },
        &|_, m| attack(m),
        &|w| {
            w.sh_bare(COMMIT);
        },
    );

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    let marker = marker_of(&w);
    let (out, log) = w.ci_sh(&attack(&marker));
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        planted_lines(&log)
            .iter()
            .any(|l| l.contains("scripts/pre-commit") && l.contains("put back")),
        "{log}"
    );
    w.sh_bare(COMMIT).assert_success();
    assert!(!marker.exists(), "the job's line ran at the next commit");
}
at_every_tier!(a_script_a_hook_links_to_does_not_run_the_jobs_line_at_the_next_commit);

/// Runs as an unprivileged user, with the test runner's Rust toolchain
/// lent to it. cargo reads the project's `.cargo/config.toml` at every
/// start: a `build.rustc-wrapper` planted there runs the job's program at
/// the next `cargo build` outside (cargo asks the wrapper for rustc's
/// version first). Bare it does; after the session the config holds the
/// user's `[profile]` again and `cargo build` runs only the compiler.
fn a_cargo_rustc_wrapper_does_not_run_at_the_next_cargo_build(tier: Tier) {
    require!(tier.feature());
    let tc = crate::controls::toolchains::toolchain()
        .unwrap_or_else(|| panic!("no Rust toolchain to lend the test user"));
    let path = crate::controls::toolchains::path_with(tc);
    let setup = |w: &World| {
        put(
            w,
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        put(w, "src/lib.rs", "pub fn one() -> u8 { 1 }\n");
        put(w, ".cargo/config.toml", "[profile.dev]\ndebug = false\n");
    };
    let attack = |w: &World, m: &Path| {
        let wrapper = w.project.join("tools/wrap.sh");
        format!(
            "mkdir -p tools && printf '#!/bin/sh\\necho pwned > {}\\nexec \"$@\"\\n' > tools/wrap.sh && \
             chmod +x tools/wrap.sh && \
             printf '[profile.dev]\\ndebug = false\\n[build]\\nrustc-wrapper = \"{}\"\\n' > .cargo/config.toml",
            m.display(),
            wrapper.display()
        )
    };
    let build = |w: &World| {
        w.bare(&["sh", "-c", "cargo build --offline -q 2>&1"])
            .env("PATH", &path)
            .timeout(std::time::Duration::from_secs(300))
            .run()
    };
    runs_later_bare(tier, &setup, &attack, &|w| {
        build(w).assert_success();
    });

    let w = World::at(tier);
    setup(&w);
    let marker = marker_of(&w);
    let (out, log) = w.ci_sh(&attack(&w, &marker));
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        planted_lines(&log)
            .iter()
            .any(|l| l.contains(".cargo/config.toml") && l.contains("build.rustc-wrapper")),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(w.project.join(".cargo/config.toml")).unwrap_or_default(),
        "[profile.dev]\ndebug = false\n"
    );
    build(&w).assert_success();
    assert!(
        !marker.exists(),
        "cargo ran the job's wrapper after the session"
    );
}
at_every_tier!(a_cargo_rustc_wrapper_does_not_run_at_the_next_cargo_build);

/// Runs as an unprivileged user. `git update-index --skip-worktree` (or
/// `--assume-unchanged`) on a file the job edited hides the edit from
/// `git status` and `git diff` — bare, the edit is invisible to a
/// reviewer and rides along with the next commit. After the session the
/// flag the session set is cleared, so `git status` shows the edit, and
/// it is recorded. A flag set on a file the job left as the index has it
/// (what a sparse checkout does) is no finding and stays.
fn an_edit_hidden_by_an_index_flag_shows_again_after_the_session(tier: Tier) {
    require!(tier.feature());
    let setup = "set -e; printf 'a\\n' > shown.txt; printf 'b\\n' > hidden.txt; printf 'c\\n' > kept.txt; \
                 printf 'd\\n' > sparse.txt; git add -A; \
                 git -c user.name=t -c user.email=t@vetto.invalid commit -qm files";
    let attack = "set -e; echo evil >> hidden.txt; git update-index --skip-worktree hidden.txt; \
                  echo evil >> kept.txt; git update-index --assume-unchanged kept.txt; \
                  git update-index --skip-worktree sparse.txt; echo done";
    let status = "git status --porcelain --untracked-files=no";
    let bare = World::at(tier);
    bare.sh_bare(setup).assert_success();
    bare.sh_bare(attack).assert_success();
    let shown = bare.sh_bare(status);
    shown.assert_success();
    assert_eq!(
        shown.stdout().trim(),
        "",
        "control: git status showed the hidden edits"
    );

    let w = World::at(tier);
    w.sh_bare(setup).assert_success();
    let (out, log) = w.ci_sh(attack);
    out.assert_stdout_contains("done");
    assert_eq!(out.code(), 3, "{}", out.dump());
    let planted = planted_lines(&log);
    for name in ["hidden.txt", "kept.txt"] {
        assert!(
            planted
                .iter()
                .any(|l| l.contains(&format!("/{name}\"")) && l.contains("flag")),
            "{name} not recorded: {planted:#?}"
        );
    }
    assert!(
        !planted.iter().any(|l| l.contains("sparse.txt")),
        "{planted:#?}"
    );
    let shown = w.sh_bare(status);
    shown
        .assert_stdout_contains("M hidden.txt")
        .assert_stdout_contains("M kept.txt");
    let flags = w.sh_bare("git ls-files -v");
    flags.assert_stdout_contains("S sparse.txt");
}
at_every_tier!(an_edit_hidden_by_an_index_flag_shows_again_after_the_session);
