//! Policy loading end to end: fixtures, presets, merge precedence, globs,
//! built-in rules and explain decisions. Named after what they stop.
#![expect(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::explain::{self, Decision, PathVerdict};
use super::paths::{GlobError, GlobWalker};
use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policy")
}

fn req(cwd: &Path, project: &Path, home: &Path, policy_file: Option<&str>) -> LoadRequest {
    LoadRequest {
        cwd: cwd.to_path_buf(),
        project: Some(project.to_path_buf()),
        policy_file: policy_file.map(PathBuf::from),
        policy_ref: None,
        home: home.to_path_buf(),
        session_tmp: PathBuf::from("/tmp/vetto-test-session"),
        report_dir: None,
        env: Vec::new(),
        overrides: Overrides::default(),
        job: None,
    }
}

fn fixture_req(file: Option<&str>) -> LoadRequest {
    let f = fixtures();
    req(&f, &f.join("project"), Path::new("/home/user"), file)
}

/// A scratch project (with `.git`) and home directory.
struct Scratch {
    _dir: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let project = root.join("project");
    let home = root.join("home");
    fs::create_dir_all(project.join(".git/hooks")).unwrap();
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    Scratch {
        _dir: dir,
        project,
        home,
    }
}

impl Scratch {
    fn req(&self, file: Option<&str>) -> LoadRequest {
        req(&self.project, &self.project, &self.home, file)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.project.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }
}

fn verdict(policy: &Policy, path: &Path) -> PathVerdict {
    explain::decide_path(policy, "", path).verdict
}

fn sorted_tomls(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_bad_fixture_is_refused_with_located_diagnostics() {
    for path in sorted_tomls(&fixtures().join("bad")) {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let rel = format!("bad/{name}.toml");
        let err = load(&fixture_req(Some(&rel))).expect_err(&rel);
        assert!(
            err.diagnostics.iter().all(|d| d.location.is_some()),
            "{rel}: every diagnostic names file:line:col"
        );
        insta::assert_snapshot!(format!("bad_{name}"), err.rendered);
    }
}

#[test]
fn every_good_fixture_loads() {
    for path in sorted_tomls(&fixtures().join("good")) {
        let rel = format!("good/{}", path.file_name().unwrap().to_string_lossy());
        if let Err(e) = load(&fixture_req(Some(&rel))) {
            panic!("{rel}:\n{e}");
        }
    }
}

#[test]
fn every_preset_file_is_registered_and_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let files = sorted_tomls(&dir);
    assert_eq!(
        files.len(),
        presets::PRESETS.len(),
        "policies/ vs presets.rs"
    );
    for f in files {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        let text = presets::get(&name).unwrap_or_else(|| panic!("{name} not registered"));
        assert_eq!(text, fs::read_to_string(&f).unwrap());
        let mut r = fixture_req(None);
        r.overrides.presets = vec![name.clone()];
        if let Err(e) = load(&r) {
            panic!("preset {name}:\n{e}");
        }
    }
}

#[test]
fn default_preset_masks_credentials_and_keeps_toolchains_working() {
    let s = scratch();
    s.write(".env", "SECRET=1");
    s.write("api/.env.local", "SECRET=1");
    s.write("certs/server-key.pem", "k");
    s.write("certs/ca.pem", "public cert");
    s.write("src/main.rs", "fn main() {}");
    let p = load(&s.req(None)).unwrap();
    let h = &s.home;
    let pr = &s.project;
    for (path, want) in [
        (h.join(".ssh/id_rsa"), PathVerdict::Masked),
        (h.join(".aws/credentials"), PathVerdict::Masked),
        (h.join(".npmrc"), PathVerdict::Masked),
        (h.join(".cargo/credentials.toml"), PathVerdict::Masked),
        (h.join(".cargo/bin/cargo"), PathVerdict::Readable),
        (h.join(".rustup/toolchains"), PathVerdict::Readable),
        (h.clone(), PathVerdict::NoRule),
        (h.join(".bashrc"), PathVerdict::NoRule),
        (PathBuf::from("/usr/bin/env"), PathVerdict::Readable),
        (PathBuf::from("/dev/null"), PathVerdict::Writable),
        (
            PathBuf::from("/tmp/vetto-test-session/x"),
            PathVerdict::Writable,
        ),
        (PathBuf::from("/tmp/other"), PathVerdict::NoRule),
        (pr.join("src/main.rs"), PathVerdict::Writable),
        (pr.join("target/debug"), PathVerdict::Writable),
        (pr.join(".git/hooks/pre-commit"), PathVerdict::Protected),
        (pr.join(".git/config"), PathVerdict::Protected),
        (pr.join(".git/HEAD"), PathVerdict::Writable),
        (pr.join(".env"), PathVerdict::Masked),
        (pr.join("api/.env.local"), PathVerdict::Masked),
        (pr.join("certs/server-key.pem"), PathVerdict::Masked),
        (pr.join("certs/ca.pem"), PathVerdict::Writable),
    ] {
        assert_eq!(verdict(&p, &path), want, "{}", path.display());
    }
    assert_eq!(p.net, NetPolicy::Off);
    assert_eq!(p.limits, Limits::default());
    assert_eq!(p.min_tier, None);
    assert!(p.outputs.contains(&"target".to_string()));
    assert!(p.env.withhold.contains(&"*TOKEN".to_string()));
}

#[test]
fn secrets_inside_dependency_trees_are_not_walked() {
    let s = scratch();
    s.write("node_modules/pkg/test/key.key", "k");
    s.write(".git/objects/x.key", "k");
    let p = load(&s.req(None)).unwrap();
    assert!(
        !p.fs
            .iter()
            .any(|r| r.path.starts_with(s.project.join("node_modules")))
    );
    assert!(
        !p.fs
            .iter()
            .any(|r| r.path.starts_with(s.project.join(".git/objects")))
    );
}

#[test]
fn no_policy_file_means_the_default_preset_only() {
    let s = scratch();
    let p = load(&s.req(None)).unwrap();
    let names: Vec<_> = p.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["preset:default"]);
    assert_eq!(p.sources[0].digest.len(), 64);
    assert_eq!(p.policy_file, None);
    assert_eq!(p.provenance.digest, p.sources[0].digest);
}

#[test]
fn vetto_toml_at_the_project_root_is_used_and_protected() {
    let s = scratch();
    let file = s.write("vetto.toml", "extends = [\"default\"]\n");
    let p = load(&s.req(None)).unwrap();
    assert_eq!(p.policy_file.as_deref(), Some(file.as_path()));
    assert_eq!(verdict(&p, &file), PathVerdict::Protected);
    let rule = crate::policy::paths::decide_rule(&p.fs, &file).unwrap();
    assert_eq!(rule.origin.source, merge::BUILT_IN);
}

#[test]
fn extends_empty_is_the_blank_slate() {
    let s = scratch();
    s.write("p.toml", "extends = []\n[filesystem]\nread = [\"/usr\"]\n");
    let p = load(&s.req(Some("p.toml"))).unwrap();
    assert_eq!(p.sources.len(), 1);
    assert_eq!(verdict(&p, &s.home.join(".ssh")), PathVerdict::NoRule);
    assert_eq!(verdict(&p, &s.project), PathVerdict::NoRule);
    assert!(p.env.pass.is_empty());
    // The CI control variables are withheld whatever the policy says.
    assert!(p.env.withhold.contains(&"GITHUB_ENV".to_string()));
    let at = p.provenance.blank_slate.as_ref().map(|o| (o.line, o.col));
    assert_eq!(at, Some((1, 1)));
    assert!(p.provenance.extends.is_empty());
}

#[test]
fn a_policy_without_extends_extends_the_default() {
    let s = scratch();
    s.write("p.toml", "[filesystem]\nread = [\"/srv\"]\n");
    let p = load(&s.req(Some("p.toml"))).unwrap();
    let names: Vec<_> = p.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["preset:default", "p.toml"]);
    assert_eq!(verdict(&p, &s.home.join(".ssh")), PathVerdict::Masked);
    assert_eq!(verdict(&p, Path::new("/srv/x")), PathVerdict::Readable);
    assert!(p.provenance.extends_implicit);
    assert_eq!(p.provenance.blank_slate, None);
}

#[test]
fn a_comment_only_policy_behaves_like_the_default() {
    let s = scratch();
    s.write("vetto.toml", "# nothing to say yet\n");
    let with_file = load(&s.req(None)).unwrap();
    std::fs::remove_file(s.project.join("vetto.toml")).unwrap();
    let without = load(&s.req(None)).unwrap();
    assert_eq!(with_file.fs.len(), without.fs.len());
    for (a, b) in with_file.fs.iter().zip(&without.fs) {
        assert_eq!((&a.path, a.access), (&b.path, b.access));
    }
    assert_eq!(with_file.env, without.env);
    assert_eq!(with_file.net, without.net);
}

#[test]
fn a_project_policy_that_does_not_exist_is_protected_by_name() {
    let s = scratch();
    let p = load(&s.req(None)).unwrap();
    let planted = s.project.join("vetto.toml");
    assert!(!planted.exists());
    assert_eq!(verdict(&p, &planted), PathVerdict::Protected);
    let rule = crate::policy::paths::decide_rule(&p.fs, &planted).unwrap();
    assert_eq!(rule.origin.source, merge::BUILT_IN);
    assert_eq!(p.provenance.origin, PolicyOrigin::BuiltIn);
    // With another policy file, vetto.toml stays protected, and so does it.
    let other = s.write("ci/policy.toml", "extends = [\"default\"]\n");
    let p = load(&s.req(Some("ci/policy.toml"))).unwrap();
    assert_eq!(verdict(&p, &planted), PathVerdict::Protected);
    assert_eq!(verdict(&p, &other), PathVerdict::Protected);
}

#[test]
fn the_report_directory_is_protected_before_it_exists() {
    let s = scratch();
    let mut req = s.req(None);
    req.report_dir = Some(s.project.join("vetto-report"));
    let p = load(&req).unwrap();
    assert_eq!(
        verdict(&p, &s.project.join("vetto-report/summary.md.tmp")),
        PathVerdict::Protected
    );
}

#[test]
fn later_sources_override_scalars_and_extend_lists() {
    let s = scratch();
    s.write(
        "p.toml",
        r#"extends = ["node"]
min_tier = "full"
[filesystem]
read = ["/srv/data"]
[limits]
timeout = "10m"
max_procs = 100
[env]
set = { CI = "true", A = "1" }
"#,
    );
    let mut r = s.req(Some("p.toml"));
    r.overrides.presets = vec!["ci-cache".into()];
    r.overrides.timeout = Some("5m".into());
    r.overrides.allow_read = vec!["docs".into()];
    r.overrides.env_pass = vec!["NPM_TOKEN".into()];
    let p = load(&r).unwrap();
    let names: Vec<_> = p.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "preset:default",
            "preset:npm",
            "preset:node",
            "preset:ci-cache",
            "p.toml",
            "command line"
        ]
    );
    assert_eq!(p.limits.timeout, Some(Duration::from_secs(300)));
    assert_eq!(p.limits.max_procs, Some(100));
    assert_eq!(p.min_tier, Some(crate::tier::Tier::Full));
    assert_eq!(verdict(&p, Path::new("/srv/data/x")), PathVerdict::Readable);
    assert_eq!(verdict(&p, Path::new("/usr/lib")), PathVerdict::Readable);
    let docs = crate::policy::paths::decide_rule(&p.fs, &s.project.join("docs")).unwrap();
    assert_eq!(docs.access, Access::Read);
    assert_eq!(
        (docs.origin.source.as_str(), docs.origin.line),
        ("--allow-read", 0)
    );
    assert_eq!(
        verdict(&p, &s.home.join(".cargo/registry/x")),
        PathVerdict::Readable,
        "ci-cache never makes the host's cargo registry writable"
    );
    assert!(
        p.caches
            .iter()
            .any(|c| c.cache == crate::policy::tools::Cache::Cargo),
        "ci-cache gives cargo a vetto-owned cache instead"
    );
    assert_eq!(p.env.pass_exact, ["NPM_TOKEN"]);
    assert_eq!(
        p.env.set,
        [("A".into(), "1".into()), ("CI".into(), "true".into())]
    );
    match &p.net {
        NetPolicy::Allow { .. } => {
            assert_eq!(p.discover[0].registry, crate::policy::tools::Registry::Npm);
        }
        other => panic!("node preset (discover) implies allow, got {other:?}"),
    }
}

#[test]
fn an_explicit_mode_off_overrides_a_presets_allow_list() {
    let s = scratch();
    s.write(
        "p.toml",
        "extends = [\"node\"]\n[network]\nmode = \"off\"\n",
    );
    assert_eq!(load(&s.req(Some("p.toml"))).unwrap().net, NetPolicy::Off);
    let mut r = s.req(Some("p.toml"));
    r.overrides.allow_domain = vec!["*.github.com:443".into()];
    let p = load(&r).unwrap();
    let NetPolicy::Allow { hosts, .. } = &p.net else {
        panic!("--allow-domain implies allow")
    };
    assert_eq!(hosts.len(), 1);
    assert_eq!(
        p.discover.len(),
        1,
        "lists accumulate even across a mode change"
    );
    let mut r = s.req(None);
    r.overrides.net = Some("host".into());
    r.overrides.allow_domain = vec!["x.org".into()];
    let e = load(&r).unwrap_err();
    assert!(
        e.rendered.contains("--net host contradicts --allow-domain"),
        "{e}"
    );
}

#[test]
fn command_line_errors_name_the_option() {
    let s = scratch();
    let mut r = s.req(None);
    r.overrides.timeout = Some("soon".into());
    r.overrides.max_memory = Some("lots".into());
    r.overrides.presets = vec!["nod".into()];
    r.overrides.deny = vec!["${NOPE}/x".into()];
    let e = load(&r).unwrap_err();
    for needle in [
        "--timeout: error: invalid duration `soon`",
        "--max-memory: error: invalid size `lots`",
        "--preset: error: unknown preset `nod`",
        "help: did you mean `node`?",
        "--deny: error: ${NOPE}/x: unknown variable `${NOPE}`",
    ] {
        assert!(e.rendered.contains(needle), "{needle} in\n{e}");
    }
}

#[test]
fn ci_control_files_are_masked_and_their_variables_withheld() {
    let s = scratch();
    let mut r = s.req(None);
    r.env = vec![
        (
            "GITHUB_ENV".into(),
            "/runner/_temp/_runner_file_commands/set_env_1".into(),
        ),
        (
            "GITHUB_PATH".into(),
            "/runner/_temp/_runner_file_commands/add_path_1".into(),
        ),
        ("GITHUB_OUTPUT".into(), String::new()),
    ];
    r.overrides.env_pass = vec!["GITHUB_ENV".into()];
    let p = load(&r).unwrap();
    let env_file = Path::new("/runner/_temp/_runner_file_commands/set_env_1");
    assert_eq!(verdict(&p, env_file), PathVerdict::Masked);
    assert_eq!(
        verdict(
            &p,
            Path::new("/runner/_temp/_runner_file_commands/add_path_1")
        ),
        PathVerdict::Masked
    );
    for var in merge::CI_CONTROL_VARS {
        assert!(p.env.withhold.iter().any(|w| w == var), "{var}");
    }
    assert!(
        p.env.pass_exact.is_empty(),
        "--env-pass cannot hand out GITHUB_ENV"
    );
}

#[test]
fn report_dir_inside_the_project_is_protected_outside_it_gains_nothing() {
    let s = scratch();
    let mut r = s.req(None);
    r.report_dir = Some(PathBuf::from("vetto-report"));
    let p = load(&r).unwrap();
    assert_eq!(
        verdict(&p, &s.project.join("vetto-report/x")),
        PathVerdict::Protected
    );
    let mut r = s.req(None);
    r.report_dir = Some(PathBuf::from("/var/reports"));
    let p = load(&r).unwrap();
    assert_eq!(verdict(&p, Path::new("/var/reports")), PathVerdict::NoRule);
}

#[test]
fn project_root_is_the_nearest_git_ancestor() {
    let s = scratch();
    let sub = s.project.join("a/b");
    fs::create_dir_all(&sub).unwrap();
    assert_eq!(project_root(&sub, None).unwrap(), s.project);
    assert_eq!(
        project_root(&sub, Some(Path::new(".."))).unwrap(),
        s.project.join("a")
    );
}

#[test]
fn globs_match_without_following_symlinks_and_keep_the_pattern() {
    let s = scratch();
    s.write("a/x.pem", "");
    s.write("a/b/y.pem", "");
    s.write("a/b/y.txt", "");
    s.write("build/z.pem", "");
    crate::sys::os::symlink(&s.project.join("a"), &s.project.join("link")).unwrap();
    s.write(
        "p.toml",
        "extends = []\n[filesystem]\noutputs = [\"build\"]\ndeny = [\"${PROJECT}/**/*.pem\", \"${PROJECT}/a/?/y.*\", \"${PROJECT}/missing/literal\"]\n",
    );
    let p = load(&s.req(Some("p.toml"))).unwrap();
    let denied: Vec<_> =
        p.fs.iter()
            .filter(|r| r.access == Access::Deny)
            .map(|r| {
                r.path
                    .strip_prefix(&s.project)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
    assert_eq!(
        denied,
        [
            "a/b/y.pem",
            "a/x.pem",
            "a/b/y.pem",
            "a/b/y.txt",
            "missing/literal"
        ]
    );
    let r = &p.fs[0];
    assert_eq!(r.origin.written, "${PROJECT}/**/*.pem");
    assert_eq!(
        (r.origin.source.as_str(), r.origin.line, r.origin.col),
        ("p.toml", 4, 9)
    );
}

#[test]
fn a_glob_walk_beyond_the_cap_fails_closed() {
    let s = scratch();
    for i in 0..20 {
        s.write(&format!("d/f{i}"), "");
    }
    let mut w = GlobWalker::with_cap(vec![], 10);
    let e = w.expand(&s.project.join("**/*.pem")).unwrap_err();
    assert!(matches!(e, GlobError::TooLarge { cap: 10, .. }), "{e}");
    let mut w = GlobWalker::with_cap(vec![], 1000);
    assert!(w.expand(&s.project.join("**/*.pem")).unwrap().is_empty());
}

/// The threads of a first walk read what the serial walk reads: every
/// directory, links not followed, skipped names not entered; answers in
/// order, whatever thread read what.
#[test]
fn a_first_walk_read_by_threads_finds_what_the_serial_walk_finds() {
    let s = scratch();
    for a in 0..6 {
        for b in 0..5 {
            s.write(&format!("t{a}/u{b}/f.txt"), "");
            s.write(&format!("t{a}/u{b}/k{a}{b}.pem"), "");
        }
    }
    s.write("out/deep/skipped.pem", "");
    s.write("top.pem", "");
    crate::sys::os::symlink(&s.project.join("t0"), &s.project.join("link")).unwrap_or_default();
    let pattern = s.project.join("**/*.pem");
    let mut threaded = GlobWalker::new(vec!["out".into()]);
    let found = threaded.expand(&pattern).unwrap();
    assert_eq!(found.len(), 31, "{found:?}");
    assert!(found.windows(2).all(|w| w[0] < w[1]));
    assert!(!found.iter().any(|p| p.starts_with(s.project.join("out"))));
    assert!(!found.iter().any(|p| p.starts_with(s.project.join("link"))));
    // The serial walk (something remembered: no read-ahead) agrees.
    let mut prior = super::walk_cache::WalkCache::default();
    prior.dirs.insert(
        std::path::Path::new("/nowhere").into(),
        super::walk_cache::CachedDir {
            stamp: super::walk_cache::DirStamp {
                dev: 0,
                ino: 0,
                mtime: (0, 0),
                ctime: (0, 0),
            },
            set: Default::default(),
            entries: Default::default(),
            index: super::walk_cache::NOT_READ,
        },
    );
    let mut serial = GlobWalker::new(vec!["out".into()]);
    serial.remember(prior.clone(), |_| false, &[]);
    assert_eq!(serial.expand(&pattern).unwrap(), found);
    assert_eq!(serial.visited(), threaded.visited());
    // The default preset lists the root first (`${PROJECT}/.env.*`): the
    // threads still read the rest, and the root counts once.
    let at_root = s.project.join(".env.*");
    let mut threaded = GlobWalker::new(vec!["out".into()]);
    threaded.expand(&at_root).unwrap();
    assert_eq!(threaded.expand(&pattern).unwrap(), found);
    let mut serial = GlobWalker::new(vec!["out".into()]);
    serial.remember(prior, |_| false, &[]);
    serial.expand(&at_root).unwrap();
    assert_eq!(serial.expand(&pattern).unwrap(), found);
    assert_eq!(serial.visited(), threaded.visited());
}

#[test]
fn many_patterns_over_one_tree_cost_one_walk() {
    let s = scratch();
    for i in 0..30 {
        s.write(&format!("d/f{i}"), "");
    }
    let mut w = GlobWalker::with_cap(vec![], 40);
    for pat in [
        "*.pem", "*.key", ".env", "id_rsa", "f1*", "f2?", "x", "y", "z", "f3",
    ] {
        w.expand(&s.project.join("**").join(pat)).unwrap();
    }
    assert!(w.visited() <= 40, "{}", w.visited());
}

/// `policy explain` of a path in a tool's host cache says it is one: never
/// made writable, and the preset that gives the tool a vetto-owned cache —
/// or, with that cache in force, that the tool uses it instead.
#[test]
fn explain_says_a_host_cache_is_never_made_writable() {
    let s = scratch();
    s.write("plain.toml", "extends = [\"default\"]\n");
    s.write("npm.toml", "extends = [\"npm\"]\n");
    let explain = |file: &str, q: &str| {
        let p = load(&s.req(Some(file))).unwrap();
        let d = explain::decide(&p, q, &s.project, &s.home, &[]);
        (d.clone(), explain::render_text(&p, &[d]))
    };
    let (d, text) = explain("plain.toml", "~/.npm/_cacache/index-v5/aa");
    let Decision::Path(d) = d else { panic!() };
    assert_eq!(
        d.host_cache,
        Some(explain::HostCache {
            cache: tools::Cache::Npm,
            vetto_owned: false
        })
    );
    assert!(
        text.contains("npm's host cache: never made writable (a build outside the sandbox trusts it); --preset npm gives npm a vetto-owned cache"),
        "{text}"
    );
    let (_, text) = explain("npm.toml", "~/.npm/_cacache/index-v5/aa");
    assert!(
        text.contains("npm's host cache: the job's npm uses its vetto-owned cache instead"),
        "{text}"
    );
    let (d, _) = explain("plain.toml", "~/.cargo/bin/cargo");
    let Decision::Path(d) = d else { panic!() };
    assert_eq!(d.host_cache, None);
}

#[test]
fn explain_names_the_deciding_rule_for_paths_and_hosts() {
    let s = scratch();
    s.write(
        "p.toml",
        "extends = [\"default\"]\n[network]\nallow = [\"*.github.com:443\", \"registry.npmjs.org\"]\n",
    );
    let p = load(&s.req(Some("p.toml"))).unwrap();
    let d = explain::decide(&p, "~/.ssh/id_rsa", &s.project, &s.home, &[]);
    let Decision::Path(d) = d else { panic!() };
    assert_eq!(d.verdict, PathVerdict::Masked);
    let rule = d.rule.unwrap();
    assert_eq!(rule.origin.source, "policies/default.toml");
    assert_eq!(rule.origin.written, "~/.ssh");
    let Decision::Path(d) = explain::decide(&p, "./.git/hooks/x", &s.project, &s.home, &[]) else {
        panic!()
    };
    assert_eq!(d.verdict, PathVerdict::Protected);
    let host = |q: &str| match explain::decide(&p, q, &s.project, &s.home, &[]) {
        Decision::Host(h) => h,
        Decision::Path(_) => panic!("{q} is a host"),
    };
    assert!(host("api.github.com:443").allowed);
    assert!(host("API.GitHub.com").allowed);
    assert!(host("API.GitHub.com").reason.contains("port 443 only"));
    assert!(!host("api.github.com:80").allowed);
    assert!(
        !host("github.com:443").allowed,
        "*.x does not match the apex"
    );
    assert!(!host("evilgithub.com:443").allowed);
    assert!(!host("*.github.com:443").allowed, "a pattern is not a host");
    let pattern = HostPattern {
        host: "*.github.com".into(),
        port: None,
        origin: p.fs[0].origin.clone(),
    };
    for not_a_host in ["*.github.com", "x/.github.com", "a b.github.com", ""] {
        assert!(!pattern.matches(not_a_host, None), "{not_a_host:?}");
    }
    assert!(pattern.matches("codeload.github.com.", Some(443)));
    assert!(
        !host("registry.npmjs.org:8443").allowed,
        "no port: 80 and 443 only"
    );
    assert!(host("registry.npmjs.org:80").allowed);
    assert!(!host("example.com").allowed);
    let off = load(&s.req(None)).unwrap();
    assert_eq!(
        explain::decide_host(&off, "github.com").reason,
        "the network is off"
    );
}

#[test]
fn explain_text_snapshot() {
    let p = load(&fixture_req(Some("good/full.toml"))).unwrap();
    let queries = [
        "~/.ssh/id_rsa",
        "/usr/bin/cc",
        "~/.bashrc",
        "api.github.com:443",
        "example.com",
    ];
    let home = Path::new("/home/user");
    let decisions: Vec<_> = queries
        .iter()
        .map(|q| explain::decide(&p, q, &fixtures(), home, &[]))
        .collect();
    let text = explain::render_text(&p, &decisions);
    let text = text.replace(&fixtures().display().to_string(), "[FIXTURES]");
    insta::assert_snapshot!("explain_full", text);
}

/// A tiny deterministic generator: no extra dependency for the test.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    "\"\"\"",
    ",",
    ".",
    "\n",
    "#",
    "\\",
    "\\u{0}",
    "${",
    "${PROJECT}",
    "${HOME}",
    "~",
    "**",
    "*",
    "?",
    "/..",
    "//",
    "é",
    "\u{0}",
    "\r",
    "extends",
    "[filesystem]",
    "[network]",
    "[limits]",
    "[env]",
    "read",
    "write",
    "deny",
    "protect",
    "outputs",
    "mode",
    "allow",
    "resolve",
    "timeout",
    "max_procs",
    "max_memory",
    "pass",
    "set",
    "1979-05-27",
    "9999999999999999999999",
    "-1",
    "0x7f",
    "1e99",
    "true",
    "inf",
    "nan",
    "\"10m\"",
    "\"4GiB\"",
];

fn mutate(rng: &mut XorShift, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..=rng.below(8) {
        let at = rng.below(b.len() + 1);
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                b.splice(at..at, t.bytes());
            }
            2 if !b.is_empty() => {
                let end = (at + rng.below(16)).min(b.len());
                b.drain(at.min(end)..end);
            }
            3 => b.truncate(at),
            4 if !b.is_empty() => {
                let from = rng.below(b.len());
                let end = (from + rng.below(64)).min(b.len());
                let chunk = b[from..end].to_vec();
                b.splice(at..at, chunk);
            }
            _ => {
                let t = (rng.next() & 0x7f) as u8;
                b.insert(at, t);
            }
        }
    }
    b
}

/// Random and mutated inputs never panic the parser. `VETTO_FUZZ_ITERS`
/// makes it a longer fuzz run (docs/policy.md records one).
#[test]
fn random_inputs_never_panic() {
    let iters: u64 = std::env::var("VETTO_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for dir in ["good", "bad"] {
        for f in sorted_tomls(&fixtures().join(dir)) {
            seeds.push(fs::read(f).unwrap());
        }
    }
    seeds.extend(presets::PRESETS.iter().map(|(_, t)| t.as_bytes().to_vec()));
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ iters);
    let start = std::time::Instant::now();
    for i in 0..iters {
        let seed = &seeds[rng.below(seeds.len())];
        let input = if i % 10 == 0 {
            (0..rng.below(256)).map(|_| rng.next() as u8).collect()
        } else {
            mutate(&mut rng, seed)
        };
        let text = String::from_utf8_lossy(&input);
        let _ = check_text(&text).map_err(|e| e.to_string());
    }
    eprintln!(
        "random_inputs_never_panic: {iters} inputs in {:?}",
        start.elapsed()
    );
}

#[test]
fn preset_cycles_are_reported_not_followed_forever() {
    const CATALOG: &[(&str, &str)] = &[
        ("a", "extends = [\"b\"]\n"),
        ("b", "extends = [\"c\"]\n"),
        ("c", "extends = [\"a\"]\n"),
    ];
    let mut diags = diag::Diags::default();
    let mut order = Vec::new();
    merge::add_preset(
        CATALOG,
        "a",
        merge::Asker::Option,
        &mut Vec::new(),
        &mut order,
        &mut diags,
    );
    let text = diags.render();
    assert!(text.contains("preset cycle: a → b → c → a"), "{text}");
    assert!(text.contains("policies/c.toml:1:12"), "{text}");

    // Shared ancestors (a diamond) are applied once, before their users.
    const DIAMOND: &[(&str, &str)] = &[
        ("base", ""),
        ("x", "extends = [\"base\"]\n"),
        ("y", "extends = [\"base\", \"x\"]\n"),
    ];
    let mut diags = diag::Diags::default();
    let mut order = Vec::new();
    merge::add_preset(
        DIAMOND,
        "y",
        merge::Asker::Option,
        &mut Vec::new(),
        &mut order,
        &mut diags,
    );
    assert!(diags.is_empty(), "{}", diags.render());
    let names: Vec<_> = order.iter().map(|p| p.name).collect();
    assert_eq!(names, ["base", "x", "y"]);
}

#[test]
fn explain_json_shape_is_stable() {
    let p = load(&fixture_req(Some("good/full.toml"))).unwrap();
    let home = Path::new("/home/user");
    let decisions: Vec<_> = [
        "~/.ssh/id_rsa",
        "/usr/bin/cc",
        "/home",
        "*.github.com",
        "api.github.com:443",
    ]
    .iter()
    .map(|q| explain::decide(&p, q, Path::new("/"), home, &[]))
    .collect();
    insta::assert_json_snapshot!("explain_decisions_json", decisions);
}

#[test]
fn check_file_validates_against_the_files_own_project() {
    let s = scratch();
    s.write("keys/deploy.key", "k");
    let good = s.write(
        "ci/vetto.toml",
        "extends = [\"default\"]\n[filesystem]\ndeny = [\"${PROJECT}/keys/*.key\"]\n",
    );
    assert!(check_file(&good).is_ok());
    let bad = s.write("ci/bad.toml", "[filesystem]\nread = [\"keys\"]\n");
    let e = check_file(&bad).unwrap_err();
    assert!(
        e.rendered
            .starts_with(&format!("{}:2:9: error: relative path", bad.display())),
        "{e}"
    );
    let e = check_file(&s.project.join("missing.toml")).unwrap_err();
    assert!(e.rendered.contains("cannot read the policy file"), "{e}");
}

#[test]
fn a_policy_that_leaves_the_project_unreadable_names_the_rule() {
    use super::reach::{Target, check};
    let s = scratch();
    s.write("p.toml", "extends = []\n[filesystem]\nread = [\"/usr\"]\n");
    let p = load(&s.req(Some("p.toml"))).unwrap();
    let err = check(&p, &[Target::Project(s.project.clone())]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "the policy leaves the project {} unreadable: no rule allows it (extends = [] at p.toml:1:1 removed the default's read rules); add read = [\"${{PROJECT}}\"] or drop extends = []",
            s.project.display()
        )),
        "{msg}"
    );

    s.write("d.toml", "[filesystem]\ndeny = [\"${PROJECT}\"]\n");
    let p = load(&s.req(Some("d.toml"))).unwrap();
    let msg = check(&p, &[Target::Project(s.project.clone())])
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("deny = [\"${PROJECT}\"] at d.toml:2:9 masks it"),
        "{msg}"
    );
}

#[test]
fn a_command_no_rule_lets_the_job_run_is_refused_by_name() {
    use super::reach::{Target, candidates, check};
    let s = scratch();
    s.write(
        "p.toml",
        "extends = []\n[filesystem]\nread = [\"${PROJECT}\", \"/usr\"]\n",
    );
    let p = load(&s.req(Some("p.toml"))).unwrap();
    let cmd = |found: &str, real: Option<&str>| Target::Command {
        name: "tool".into(),
        found: found.into(),
        real: real.map(PathBuf::from),
    };
    let msg = check(&p, &[cmd("/opt/tool/bin/tool", None)])
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("the policy leaves the command tool (/opt/tool/bin/tool) unreadable: no rule allows it (extends = [] at p.toml:1:1"),
        "{msg}"
    );
    assert!(msg.contains("add read = [\"/opt/tool/bin\"]"), "{msg}");
    // A link into an unreadable place is as unreachable as the place.
    let msg = check(&p, &[cmd("/usr/bin/tool", Some("/opt/tool/bin/tool"))])
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("(/usr/bin/tool → /opt/tool/bin/tool)"),
        "{msg}"
    );
    // One reachable candidate on PATH is enough (the sandbox skips the
    // others), said when it is not the first: another program runs than
    // outside.
    let passed_over = check(
        &p,
        &[cmd("/opt/tool/bin/tool", None), cmd("/usr/bin/tool", None)],
    )
    .unwrap()
    .unwrap()
    .to_string();
    assert!(
        passed_over.starts_with("the job runs /usr/bin/tool, the next on PATH: the policy leaves the command tool (/opt/tool/bin/tool) unreadable"),
        "{passed_over}"
    );
    assert_eq!(
        check(
            &p,
            &[cmd("/usr/bin/tool", None), cmd("/opt/tool/bin/tool", None)]
        ),
        Ok(None)
    );
    // PATH order, relative names against the working directory.
    let exists = |p: &Path| p == Path::new("/b/tool") || p == Path::new("/w/x/tool");
    assert_eq!(
        candidates("tool", Some("/a::/b"), Path::new("/w"), exists),
        [PathBuf::from("/b/tool")]
    );
    assert_eq!(
        candidates("./x/tool", None, Path::new("/w"), exists),
        [PathBuf::from("/w/x/tool")]
    );
    assert!(candidates("", None, Path::new("/w"), exists).is_empty());
}

#[test]
fn policy_ref_reads_the_committed_file_not_the_working_tree() {
    let s = scratch();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&s.project)
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    s.write("vetto.toml", "extends = [\"default\"]\n");
    git(&["add", "vetto.toml"]);
    git(&["commit", "-q", "-m", "policy"]);
    // The change under test widens the policy.
    s.write("vetto.toml", "extends = []\n[filesystem]\nread = [\"/\"]\n");
    // A hostile repository configuration: plain git runs it…
    let marker = s.project.join("fsmonitor-ran");
    let hook = format!("touch {}; false", marker.display());
    git(&["config", "core.fsmonitor", &hook]);
    git(&["status", "--short"]);
    assert!(
        marker.exists(),
        "control: git status did not run the fsmonitor"
    );
    fs::remove_file(&marker).unwrap();

    let mut req = s.req(None);
    req.policy_ref = Some("main".into());
    let p = load(&req).unwrap();
    let names: Vec<_> = p.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["preset:default", "main:vetto.toml"]);
    assert_eq!(verdict(&p, &s.home.join(".ssh")), PathVerdict::Masked);
    assert!(matches!(
        &p.provenance.origin,
        PolicyOrigin::GitRef { reference, found: true, path, .. }
            if reference == "main" && path == "vetto.toml"
    ));
    assert_eq!(p.provenance.working_tree_differs, Some(true));
    assert!(p.provenance.line().contains("from git ref main ("));
    // … vetto's git does not.
    assert!(
        !marker.exists(),
        "--policy-ref ran the repository's fsmonitor"
    );
    // The working tree's file stays protected.
    assert_eq!(
        verdict(&p, &s.project.join("vetto.toml")),
        PathVerdict::Protected
    );

    // Diagnostics name the file at the ref.
    s.write("vetto.toml", "[filesystem]\nwirte = []\n");
    git(&["commit", "-q", "-am", "typo"]);
    let err = load(&req).unwrap_err().to_string();
    assert!(err.contains("main:vetto.toml:2:1: error"), "{err}");

    // A ref without the file: the built-in default, said so.
    git(&["rm", "-q", "vetto.toml"]);
    git(&["commit", "-q", "-m", "no policy"]);
    let p = load(&req).unwrap();
    let names: Vec<_> = p.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["preset:default"]);
    assert!(
        p.provenance
            .line()
            .ends_with("(git ref main has no vetto.toml)"),
        "{}",
        p.provenance.line()
    );

    for bad in ["--output=/tmp/x", "no-such-branch", "main..x"] {
        req.policy_ref = Some(bad.into());
        let err = load(&req).unwrap_err().to_string();
        assert!(err.starts_with("--policy-ref: error:"), "{bad}: {err}");
    }
}

/// What `discover = ["go"]` reads with `go env` (the proxy, the checksum
/// database, the flags, the env file) and Go's routing exceptions reach the
/// job, so the job's `go` asks the hosts that were allowed: a scrubbed
/// `GOSUMDB=off` made the job's `go` ask the default checksum database,
/// which no rule allowed (tests/controls/go.rs).
#[test]
fn go_routing_variables_reach_the_job() {
    let s = scratch();
    let p = load(&s.req(None)).unwrap();
    let vars = [
        ("GOPROXY", "https://goproxy.corp.example"),
        ("GOSUMDB", "off"),
        ("GOFLAGS", "-mod=mod"),
        ("GOENV", "/home/u/.config/go/env"),
        ("GOPRIVATE", "corp.example/*"),
        ("GONOPROXY", "corp.example/*"),
        ("GONOSUMDB", "corp.example/*"),
        ("GOINSECURE", "legacy.corp.example"),
    ];
    let env: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let plan = crate::plan::env::plan(&p.env, &env, &[]);
    for (name, value) in vars {
        assert!(
            plan.vars.iter().any(|(n, v)| n == name && v == value),
            "{name} must reach the job"
        );
    }
}

/// `XDG_CONFIG_HOME` stays with the caller (discovery's questions see it):
/// the default's grants and masks are written against `~/.config`, which
/// policy paths cannot spell as `$XDG_CONFIG_HOME`, so the job's tools must
/// look there (docs/presets.md, the Go paragraph).
#[test]
fn xdg_config_home_does_not_reach_the_job() {
    let s = scratch();
    let p = load(&s.req(None)).unwrap();
    let env = vec![("XDG_CONFIG_HOME".to_string(), "/opt/cfg".to_string())];
    let plan = crate::plan::env::plan(&p.env, &env, &[]);
    assert!(!plan.vars.iter().any(|(n, _)| n == "XDG_CONFIG_HOME"));
}

/// The default policy's scrubbing is precise: ordinary variables — paths,
/// regions, profiles, names that merely contain the letters of a credential
/// word — reach the job; credentials are withheld and named.
#[test]
fn default_env_passes_ordinary_variables_and_withholds_credentials() {
    let s = scratch();
    let p = load(&s.req(None)).unwrap();
    let pass = [
        ("AWS_CA_BUNDLE", "/etc/ssl/certs/corp.pem"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_DEFAULT_REGION", "eu-west-1"),
        ("AWS_PROFILE", "ci"),
        ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
        ("SSL_CERT_DIR", "/etc/ssl/certs"),
        ("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"),
        ("NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/corp.pem"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("TERM", "xterm"),
        ("CARGO_HOME", "/home/u/.cargo"),
        ("PIP_INDEX_URL", "https://pypi.org/simple"),
        ("GITHUB_ACTIONS", "true"),
    ];
    let withheld = [
        ("AWS_ACCESS_KEY_ID", "AKIA"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("AWS_SESSION_TOKEN", "x"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
        ("GITHUB_TOKEN", "ghs_x"),
        ("GH_TOKEN", "x"),
        ("NPM_TOKEN", "x"),
        ("NODE_AUTH_TOKEN", "x"),
        ("CARGO_REGISTRY_TOKEN", "x"),
        ("OPENAI_API_KEY", "x"),
        ("STRIPE_APIKEY", "x"),
        ("DB_PASSWORD", "x"),
        ("SMTP_PASS", "x"),
        ("AZURE_CLIENT_SECRET", "x"),
        ("AZURE_STORAGE_CONNECTION_STRING", "x"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
        ("ACTIONS_ID_TOKEN_REQUEST_URL", "https://x"),
        ("SSH_AUTH_SOCK", "/tmp/ssh/agent"),
        ("NPM_CONFIG__AUTH", "x"),
        (
            "PIP_EXTRA_INDEX_URL",
            "https://ci:hunter2@pypi.corp.example/simple",
        ),
        ("DATABASE_URL", "postgres://app:pw@db/app"),
        ("GITHUB_ENV", "/runner/_temp/set_env"),
    ];
    // Not credential-like, and not in `pass`: dropped without a word.
    let dropped = [
        ("KEYBOARD", "us"),
        ("GIT_AUTHOR_NAME", "A"),
        ("GIT_SSH_COMMAND", "ssh -i key"),
        ("MAX_TOKENS", "100"),
    ];
    let env: Vec<(String, String)> = pass
        .iter()
        .chain(&withheld)
        .chain(&dropped)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let plan = crate::plan::env::plan(&p.env, &env, &[]);
    let reached: Vec<&str> = plan.vars.iter().map(|(n, _)| n.as_str()).collect();
    for (name, _) in pass {
        assert!(reached.contains(&name), "{name} must reach the job");
    }
    for (name, _) in withheld {
        assert!(!reached.contains(&name), "{name} reached the job");
        assert!(
            plan.withheld.iter().any(|w| w == name),
            "{name} not named as withheld"
        );
    }
    for (name, _) in dropped {
        assert!(
            !plan.withheld.iter().any(|w| w == name),
            "{name} called a credential"
        );
    }
}

#[test]
fn network_allow_takes_address_ranges_and_a_deny_list_that_wins() {
    let s = scratch();
    s.write(
        "p.toml",
        "extends = []\n[network]\nallow = [\"*.example.com\", \"10.1.2.0/24:5432\", \"192.0.2.7\", \"[2001:db8::/32]:443\"]\ndeny = [\"evil.example.com\"]\n",
    );
    let p = load(&s.req(Some("p.toml"))).unwrap();
    let NetPolicy::Allow {
        hosts, deny, ips, ..
    } = &p.net
    else {
        panic!("allow implies mode allow, got {:?}", p.net)
    };
    assert_eq!(hosts.len(), 1);
    assert_eq!(deny[0].host, "evil.example.com");
    let shown: Vec<String> = ips.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        ["10.1.2.0/24:5432", "192.0.2.7", "[2001:db8::/32]:443"]
    );
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    assert!(egress_rule(&ips[0]).matches(ip("10.1.2.200"), 5432));
    assert!(!egress_rule(&ips[0]).matches(ip("10.1.2.200"), 5433));
    assert!(!egress_rule(&ips[0]).matches(ip("10.1.3.1"), 5432));
    assert!(
        egress_rule(&ips[0]).matches(ip("::ffff:10.1.2.9"), 5432),
        "IPv4-mapped"
    );
    assert!(egress_rule(&ips[1]).matches(ip("192.0.2.7"), 1));
    assert!(egress_rule(&ips[2]).matches(ip("2001:db8:1::5"), 443));
    assert!(!egress_rule(&ips[2]).matches(ip("2001:db9::5"), 443));

    let mut r = s.req(None);
    r.overrides.allow_domain = vec!["10.0.0.1:22".into(), "1password.com:443".into()];
    let p = load(&r).unwrap();
    let NetPolicy::Allow { hosts, ips, .. } = &p.net else {
        panic!("--allow-domain implies allow")
    };
    assert_eq!(ips[0].to_string(), "10.0.0.1:22");
    assert!(
        hosts.iter().any(|h| h.host == "1password.com"),
        "a name that starts with a digit"
    );
}

#[test]
fn bad_ranges_and_mistaken_modes_are_explained() {
    let s = scratch();
    for (entry, want) in [
        (
            "10.1.2.3/24",
            "bits are set beyond the /24 prefix (the network is 10.1.2.0/24)",
        ),
        ("10.1.2.0/33", "the prefix length must be from 0 to 32"),
        ("0.0.0.0/0", "would allow every address"),
        ("999.1.1.1", "`999.1.1.1` is not an IP address"),
        ("[::1]443", "the port must follow `]:`"),
    ] {
        s.write(
            "p.toml",
            &format!("extends = []\n[network]\nallow = [\"{entry}\"]\n"),
        );
        let e = load(&s.req(Some("p.toml"))).unwrap_err();
        assert!(e.rendered.contains(want), "{entry}: {e}");
    }
    s.write("p.toml", "extends = []\n[network]\ndeny = [\"10.0.0.1\"]\n");
    let e = load(&s.req(Some("p.toml"))).unwrap_err();
    assert!(
        e.rendered.contains("an address; expected a host name"),
        "{e}"
    );
    for (mode, meant) in [
        ("filtered", "allow"),
        ("proxy", "allow"),
        ("none", "off"),
        ("hots", "host"),
    ] {
        s.write(
            "p.toml",
            &format!("extends = []\n[network]\nmode = \"{mode}\"\n"),
        );
        let e = load(&s.req(Some("p.toml"))).unwrap_err();
        assert!(
            e.rendered.contains(&format!("(did you mean `{meant}`?)")),
            "{mode}: {e}"
        );
    }
}

/// `policy explain HOST[:PORT]` against a policy with every kind of
/// network rule: names (default ports 80 and 443), an ip rule, a deny rule
/// that wins, and `--resolve` pins — each decision with the rule's
/// `file:line:col`, and internal addresses named.
#[test]
fn explain_hosts_against_deny_ip_rules_and_pins() {
    let s = scratch();
    s.write(
        "p.toml",
        "extends = []\n[network]\nallow = [\"allowed.test\", \"*.example.com\", \"10.1.2.0/24:5432\"]\ndeny = [\"evil.example.com\"]\n",
    );
    let mut r = s.req(Some("p.toml"));
    r.overrides.resolve = vec!["allowed.test:127.0.0.1".into()];
    let p = load(&r).unwrap();
    let queries = [
        "allowed.test",
        "allowed.test:8443",
        "ok.example.com:443",
        "evil.example.com:443",
        "evil.example.com:22",
        "10.1.2.7:5432",
        "10.1.2.7:22",
        "127.0.0.1:443",
        "169.254.169.254",
        "[fd00:ec2::254]:80",
    ];
    let decisions: Vec<Decision> = queries
        .iter()
        .map(|q| explain::decide(&p, q, &s.project, &s.home, &[]))
        .collect();
    let host = |i: usize| match &decisions[i] {
        Decision::Host(h) => h.clone(),
        Decision::Path(_) => panic!("{} is a host", queries[i]),
    };
    let allowed: Vec<bool> = (0..queries.len()).map(|i| host(i).allowed).collect();
    assert_eq!(
        allowed,
        [
            true, false, true, false, false, true, false, false, false, false
        ],
        "{decisions:#?}"
    );
    assert_eq!(
        host(3).rule.map(|r| (r.origin.line, r.origin.col)),
        Some((4, 9))
    );
    assert!(host(5).reason.contains("p.toml:3:"), "{}", host(5).reason);
    assert_eq!(host(5).address, Some("private"));
    assert_eq!(host(8).address, Some("metadata"));
    assert_eq!(host(9).address, Some("metadata"));
    let text = explain::render_text(&p, &decisions);
    let text = text[text.find("network:").unwrap_or(0)..]
        .replace(&s.project.display().to_string(), "[PROJECT]");
    let network = text.split("\nlimits:").next().unwrap_or_default();
    let decided = &text[text.find("decisions:").unwrap_or(0)..];
    insta::assert_snapshot!(format!("{network}\n{decided}"));
}

/// A policy's address rule as the proxy decides with it.
fn egress_rule(r: &super::IpRule) -> super::egress::IpRule {
    super::egress::IpRule::from_policy(std::slice::from_ref(r))
        .pop()
        .unwrap()
}

#[test]
fn unix_sockets_are_listed_with_their_origin_and_explained() {
    let s = scratch();
    s.write(
        "p.toml",
        "[network]\nunix = [\"~/.podman/podman.sock\", \"${PROJECT}/../agent.sock\"]\n",
    );
    let mut r = s.req(Some("p.toml"));
    r.overrides.allow_unix = vec!["run/agent.sock".into()];
    let p = load(&r).unwrap();
    let paths: Vec<_> = p.unix.iter().map(|u| u.path.clone()).collect();
    let root = s.project.parent().unwrap();
    assert_eq!(
        paths,
        vec![
            s.home.join(".podman/podman.sock"),
            root.join("agent.sock"),
            s.project.join("run/agent.sock"),
        ]
    );
    assert_eq!((p.unix[0].origin.line, p.unix[0].origin.col), (2, 9));
    assert_eq!(p.unix[2].origin.source, "--allow-unix");
    assert_eq!(
        p.net,
        NetPolicy::Off,
        "unix sockets leave the network mode alone"
    );
    let d = explain::decide_path(&p, "q", &s.home.join(".podman/podman.sock"));
    assert_eq!(d.unix.map(|u| u.origin.line), Some(2));
    assert!(
        explain::decide_path(&p, "q", &s.home.join("other.sock"))
            .unix
            .is_none()
    );
}

#[test]
fn a_misspelt_unix_key_gets_a_did_you_mean() {
    let s = scratch();
    s.write("p.toml", "[network]\nunx = [\"/run/podman/podman.sock\"]\n");
    let e = load(&s.req(Some("p.toml"))).unwrap_err();
    assert!(e.rendered.contains("`unix`"), "{e}");
    s.write("p.toml", "[network]\nunix = [\"relative.sock\"]\n");
    let e = load(&s.req(Some("p.toml"))).unwrap_err();
    assert!(e.rendered.contains("p.toml:2:9"), "{e}");
}

/// `policy explain` of issue 12: an argument with a slash or an existing
/// file is a path, never a host; a masked pattern shows a path as masked
/// before the file exists; the patterns are listed.
#[test]
fn explain_treats_slashes_and_existing_files_as_paths_and_matches_masked_patterns() {
    let s = scratch();
    s.write("example.com", "a file named like a host");
    s.write(
        "vetto.toml",
        "extends = [\"default\"]\n[filesystem]\ndeny = [\"${PROJECT}/**/*.pem\"]\n",
    );
    let p = load(&s.req(Some("vetto.toml"))).unwrap();
    let home = s.home.clone();
    let decide = |q: &str| explain::decide(&p, q, &s.project, &home, &[]);
    let path = |q: &str| match decide(q) {
        explain::Decision::Path(d) => d,
        explain::Decision::Host(h) => panic!("{q} taken for a host: {h:?}"),
    };
    // Not yet there: masked by the patterns all the same.
    let pem = path("certs/server.pem");
    assert_eq!(pem.verdict, PathVerdict::Masked, "{pem:?}");
    assert_eq!(
        pem.glob.as_ref().map(|g| g.origin.written.as_str()),
        Some("${PROJECT}/**/*.pem")
    );
    assert_eq!(path(".env.production").verdict, PathVerdict::Masked);
    assert_eq!(path("sub/dir/.env").verdict, PathVerdict::Masked);
    // `**` does not enter an output directory or .git, as the walk does not.
    assert_eq!(path("node_modules/x/a.pem").verdict, PathVerdict::Writable);
    assert_eq!(path("src/main.rs").verdict, PathVerdict::Writable);
    assert!(path("src/main.rs").glob.is_none());
    // An existing file named like a host is that file.
    assert_eq!(path("example.com").verdict, PathVerdict::Writable);
    assert!(matches!(
        decide("registry.example.test"),
        explain::Decision::Host(_)
    ));
    let text = explain::render_text(&p, &[decide("certs/server.pem")]);
    assert!(text.contains("patterns (matched at start"), "{text}");
    assert!(text.contains("deny    "), "{text}");
    assert!(
        text.contains("matches the pattern deny ") && text.contains("does not exist yet"),
        "{text}"
    );
}

#[test]
fn glob_patterns_match_as_the_walk_finds_them() {
    let m = |pat: &str, path: &str| {
        explain::glob_matches(Path::new(pat), Path::new(path), &["target".to_string()])
    };
    assert!(m("/p/**/*.pem", "/p/a.pem"));
    assert!(m("/p/**/*.pem", "/p/a/b/c.pem"));
    assert!(!m("/p/**/*.pem", "/p/a/b/c.pem.txt"));
    assert!(!m("/p/**/*.pem", "/p/target/c.pem"));
    assert!(!m("/p/**/*.pem", "/p/.git/c.pem"));
    assert!(m("/p/.env.*", "/p/.env.local"));
    assert!(!m("/p/.env.*", "/p/sub/.env.local"));
    assert!(!m("/p/**/.env", "/q/.env"));
}

/// Every filesystem is trusted in these tests (tmpfs or ext4 here).
fn trust_all(_: &Path) -> bool {
    true
}

fn walk_pem(project: &Path, prior: super::walk_cache::WalkCache) -> (Vec<PathBuf>, GlobWalker) {
    let mut w = GlobWalker::new(vec![]);
    w.remember(prior, trust_all, &[]);
    let found = w.expand(&project.join("**/*.pem")).unwrap();
    (found, w)
}

/// A listing remembered by one load answers the next while its directory
/// is unchanged; a name created afterwards is found even when the
/// directory's mtime is set back to what was remembered (its ctime moves:
/// no process can set that back).
#[test]
fn a_remembered_walk_is_used_only_while_the_directory_is_unchanged() {
    let s = scratch();
    s.write("src/deep/old.pem", "k");
    let deep = s.project.join("src/deep");
    // Listings are kept once their directory has settled.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let (found, w) = walk_pem(&s.project, Default::default());
    assert_eq!(found, [deep.join("old.pem")]);
    let first = w.into_cache().expect("a settled walk is remembered");
    assert!(first.dirs.contains_key(deep.as_os_str()));

    // Warm: the same answer, and nothing new to remember.
    let (found, w) = walk_pem(&s.project, first.clone());
    assert_eq!(found, [deep.join("old.pem")]);
    assert!(w.into_cache().is_none(), "every listing came from memory");

    // A forged remembered listing for an unchanged directory is believed:
    // what makes the cache safe is where it lives, not what it says.
    // (Without the remembered answer, which would be believed the same.)
    let mut forged = first.clone();
    forged.answers.clear();
    if let Some(d) = forged.dirs.get_mut(deep.as_os_str()) {
        d.entries = std::rc::Rc::new(Vec::new());
    }
    assert!(walk_pem(&s.project, forged).0.is_empty());

    // A new secret, and the directory's mtime forged back.
    let mtime = fs::metadata(&deep).unwrap().modified().unwrap();
    s.write("src/deep/new.pem", "k");
    fs::File::open(&deep).unwrap().set_modified(mtime).unwrap();
    assert_eq!(fs::metadata(&deep).unwrap().modified().unwrap(), mtime);
    let (found, _) = walk_pem(&s.project, first);
    assert_eq!(found, [deep.join("new.pem"), deep.join("old.pem")]);
}

/// A directory changed within the settling time of the walk is read again
/// at every load until it has settled: a change in the same clock tick as
/// the read could otherwise leave its ctime as remembered.
#[test]
fn a_directory_changed_just_before_the_walk_is_not_remembered() {
    let s = scratch();
    s.write("fresh/a.pem", "k");
    let (_, w) = walk_pem(&s.project, Default::default());
    let cache = w.into_cache().unwrap_or_default();
    assert!(!cache.dirs.contains_key(s.project.join("fresh").as_os_str()));
}

/// A filesystem that is not trusted is always read.
#[test]
fn an_untrusted_filesystem_is_never_remembered() {
    fn trust_none(_: &Path) -> bool {
        false
    }
    let s = scratch();
    s.write("a/x.pem", "k");
    let mut w = GlobWalker::new(vec![]);
    w.remember(Default::default(), trust_none, &[]);
    w.expand(&s.project.join("**/*.pem")).unwrap();
    assert!(w.into_cache().is_none());
}

/// Stamps begun from the cache file's bytes, before it is decoded, are
/// each directory's own (none for one gone since), and a walk that takes
/// them still sees a secret made since the walk was remembered.
#[test]
fn stamps_begun_before_the_load_still_find_a_new_secret() {
    let s = scratch();
    for d in ["a/x", "a/y", "b"] {
        s.write(&format!("{d}/f"), "");
    }
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let (found, w) = walk_pem(&s.project, Default::default());
    assert!(found.is_empty());
    let bytes = w
        .into_cache()
        .expect("a settled walk is remembered")
        .encode();
    let decoded = super::walk_cache::WalkCache::decode(&bytes).unwrap();
    let begun = super::walk_parallel::StampsAhead::start(std::sync::Arc::new(bytes.clone()), 2)
        .expect("two threads");
    let stamps = begun.finish();
    assert_eq!(stamps.len(), decoded.dirs.len());
    for (d, c) in &decoded.dirs {
        let m = std::fs::symlink_metadata(&**d).unwrap();
        assert_eq!(stamps[c.index], Some(crate::sys::os::lstat_of(&m)), "{d:?}");
    }
    // A directory gone since has no stamp: the walk asks again.
    std::fs::remove_dir_all(s.project.join("b")).unwrap();
    let stamps = super::walk_parallel::StampsAhead::start(std::sync::Arc::new(bytes.clone()), 2)
        .unwrap()
        .finish();
    for (d, c) in &decoded.dirs {
        assert_eq!(stamps[c.index].is_none(), d.ends_with("b"), "{d:?}");
    }
    // A secret planted in a remembered directory, then a warm load that
    // takes stamps begun before it.
    s.write("a/y/new.pem", "k");
    let begun = super::walk_parallel::StampsAhead::start(std::sync::Arc::new(bytes), 2).unwrap();
    let mut w = GlobWalker::new(vec![]);
    w.remember(decoded, trust_all, &[]);
    w.stamps_begun(begun, super::paths::now_ns());
    let found = w.expand(&s.project.join("**/*.pem")).unwrap();
    assert_eq!(found, [s.project.join("a/y/new.pem")]);
}

/// A `**/LAST` pattern's answer is remembered with a digest of its tree
/// and taken, without a walk, while every directory of the tree is as
/// remembered; a secret created anywhere in the tree afterwards — even in
/// a directory whose mtime is forged back — is found by the next load.
#[test]
fn a_remembered_answer_holds_only_while_its_whole_tree_is_unchanged() {
    let s = scratch();
    s.write("src/deep/old.pem", "k");
    s.write("src/other/lib.rs", "");
    s.write("docs/a.md", "");
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let (found, w) = walk_pem(&s.project, Default::default());
    let deep = s.project.join("src/deep");
    assert_eq!(found, [deep.join("old.pem")]);
    let first = w.into_cache().expect("a settled walk is remembered");
    let pattern = s.project.join("**/*.pem");
    assert!(first.answers.iter().any(|a| a.pattern == pattern));

    // Warm: the answer, and not one listing read or counted.
    let (found, w) = walk_pem(&s.project, first.clone());
    assert_eq!(found, [deep.join("old.pem")]);
    assert_eq!(w.visited(), 0, "the answer was remembered, not walked");
    let (listings, learnt) = w.into_listings().expect("remembering");
    assert!(!learnt);
    assert!(
        listings.dirs.contains_key(deep.as_os_str()),
        "the check after the session gets them"
    );

    // A secret in any directory of the tree: a deep one, a new directory,
    // one whose mtime is set back.
    let other = s.project.join("src/other");
    let mtime = fs::metadata(&other).unwrap().modified().unwrap();
    s.write("src/other/new.pem", "k");
    fs::File::open(&other).unwrap().set_modified(mtime).unwrap();
    let (found, _) = walk_pem(&s.project, first.clone());
    assert_eq!(found, [deep.join("old.pem"), other.join("new.pem")]);

    // A remembered directory gone from the tree also ends the answer.
    let s2 = scratch();
    s2.write("a/b/k.pem", "k");
    s2.write("c/x", "");
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let (_, w) = walk_pem(&s2.project, Default::default());
    let cache = w.into_cache().expect("remembered");
    fs::remove_dir_all(s2.project.join("c")).unwrap();
    fs::create_dir_all(s2.project.join("a/b2")).unwrap();
    fs::write(s2.project.join("a/b2/n.pem"), "k").unwrap();
    let (found, _) = walk_pem(&s2.project, cache);
    assert_eq!(
        found,
        [s2.project.join("a/b/k.pem"), s2.project.join("a/b2/n.pem")]
    );
}

/// A tree with a directory changed within the settling time is answered
/// by walking, and its answer is not remembered until every directory of
/// it has settled.
#[test]
fn an_answer_over_an_unsettled_directory_is_not_remembered() {
    let s = scratch();
    s.write("old/a.pem", "k");
    std::thread::sleep(std::time::Duration::from_millis(2200));
    s.write("fresh/b.pem", "k");
    let (found, w) = walk_pem(&s.project, Default::default());
    assert_eq!(found.len(), 2);
    let cache = w.into_cache().unwrap_or_default();
    assert!(cache.answers.is_empty(), "{:?}", cache.answers);
}

/// Another pattern, or another list of skipped directories, is another
/// question: the remembered answer is not taken for it.
#[test]
fn a_remembered_answer_is_only_for_its_own_pattern_and_skips() {
    let s = scratch();
    s.write("a/k.pem", "k");
    s.write("target/t.pem", "k");
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let (_, w) = walk_pem(&s.project, Default::default());
    let cache = w.into_cache().expect("remembered");
    let mut w = GlobWalker::new(vec!["a".into()]);
    w.remember(cache.clone(), trust_all, &[]);
    assert_eq!(
        w.expand(&s.project.join("**/*.pem")).unwrap(),
        [s.project.join("target/t.pem")]
    );
    let mut w = GlobWalker::new(vec![]);
    w.remember(cache, trust_all, &[]);
    assert_eq!(
        w.expand(&s.project.join("**/k.pem")).unwrap(),
        [s.project.join("a/k.pem")]
    );
}

/// Zero flags for an ordinary job: the preset whose marker the project has
/// and whose command runs is applied, and named where it came from.
#[test]
fn an_npm_job_in_an_npm_project_gets_the_npm_preset_by_itself() {
    let s = scratch();
    s.write("package.json", "{}");
    let job = |argv: &[&str]| Some(argv.iter().map(|a| a.to_string()).collect());
    let load_for = |argv: &[&str], file: Option<&str>, presets: &[&str]| {
        let mut r = s.req(file);
        r.job = job(argv);
        r.overrides.presets = presets.iter().map(|p| p.to_string()).collect();
        load(&r).unwrap()
    };
    let p = load_for(&["sh", "-c", "npm install && npm test"], None, &[]);
    let auto = p.provenance.auto_preset.clone().expect("npm is applied");
    assert_eq!(
        (
            auto.preset.as_str(),
            auto.marker.as_str(),
            auto.command.as_str()
        ),
        ("npm", "package.json", "npm")
    );
    assert!(p.sources.iter().any(|s| s.name == "preset:npm"));
    assert!(p.provenance.line().contains(
        "plus preset npm (the project has package.json and the command is npm; \
         --no-auto-preset or `auto_preset = false` leaves it out)"
    ));
    // The user chose: a preset named, a file naming its presets or saying
    // no, no job (`policy explain`), an agent, a command of another toolchain.
    assert_eq!(
        load_for(&["npm", "test"], None, &["node"])
            .provenance
            .auto_preset,
        None
    );
    s.write("a.toml", "extends = [\"default\"]\n");
    assert_eq!(
        load_for(&["npm", "test"], Some("a.toml"), &[])
            .provenance
            .auto_preset,
        None
    );
    s.write("b.toml", "auto_preset = false\n");
    assert_eq!(
        load_for(&["npm", "test"], Some("b.toml"), &[])
            .provenance
            .auto_preset,
        None
    );
    s.write("c.toml", "auto_preset = true\n");
    assert!(
        load_for(&["npm", "test"], Some("c.toml"), &[])
            .provenance
            .auto_preset
            .is_some()
    );
    assert_eq!(load(&s.req(None)).unwrap().provenance.auto_preset, None);
    assert_eq!(
        load_for(&["claude"], None, &[]).provenance.auto_preset,
        None
    );
    assert_eq!(
        load_for(&["cargo", "build"], None, &[])
            .provenance
            .auto_preset,
        None
    );
}

#[test]
fn auto_preset_written_as_a_string_is_refused_with_the_spelling_that_works() {
    let s = scratch();
    s.write("vetto.toml", "auto_preset = \"false\"\n");
    let err = load(&s.req(None)).expect_err("a string is not a boolean");
    assert!(err.rendered.contains("vetto.toml:1:15"), "{}", err.rendered);
    assert!(
        err.rendered.contains("write it without quotes: false"),
        "{}",
        err.rendered
    );
}

/// A CI `services:` database on the host's loopback: `localhost:PORT`
/// stands for the name and for both loopback addresses at that port (a
/// client that ignores the proxy variables connects by address), and for
/// nothing else.
#[test]
fn localhost_with_a_port_allows_the_host_loopback_addresses_at_that_port() {
    let s = scratch();
    let mut r = s.req(None);
    r.overrides.allow_domain = vec!["localhost:5432".into(), "db.test:5432".into()];
    let p = load(&r).unwrap();
    let NetPolicy::Allow { hosts, ips, .. } = &p.net else {
        panic!("{:?}", p.net);
    };
    assert!(hosts.iter().any(|h| h.host == "localhost"));
    let rules: Vec<String> = ips.iter().map(ToString::to_string).collect();
    assert_eq!(rules.len(), 2, "{rules:?}");
    for ip in ["127.0.0.1", "::1"] {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        assert!(
            ips.iter().any(|r| r.net == ip && r.port == Some(5432)),
            "{rules:?}"
        );
    }
}

#[test]
fn published_ports_are_read_from_the_file_and_the_command_line() {
    let s = scratch();
    s.write(
        "p.toml",
        "[network]\npublish = [\"8080:3000\", \"[::1]:9000:9001\", \"0.0.0.0:5173\"]\n",
    );
    let mut r = s.req(Some("p.toml"));
    r.overrides.publish = vec!["3000".into(), "7000:7001".into()];
    let p = load(&r).unwrap();
    let got: Vec<(String, u16)> = p
        .publish
        .iter()
        .map(|x| (x.host.to_string(), x.port))
        .collect();
    // The command line's 127.0.0.1:… rules come after the file's; one
    // listener per host address.
    assert_eq!(
        got,
        vec![
            ("127.0.0.1:8080".to_string(), 3000),
            ("[::1]:9000".to_string(), 9001),
            ("0.0.0.0:5173".to_string(), 5173),
            ("127.0.0.1:3000".to_string(), 3000),
            ("127.0.0.1:7000".to_string(), 7001),
        ]
    );
    assert_eq!((p.publish[0].origin.line, p.publish[0].origin.col), (2, 12));
    assert_eq!(p.publish[3].origin.source, "--publish");

    s.write(
        "bad.toml",
        "[network]\npublish = [\"0\", \"80:x\", \"1:2:3:4\", \"host:1:2\"]\n",
    );
    let e = load(&s.req(Some("bad.toml"))).unwrap_err();
    for needle in [
        "bad.toml:2:12",
        "port 0 names no port",
        "`x` is not a port number",
        "too many `:` (an IPv6 address goes in brackets)",
        "`host` is not an IP address",
    ] {
        assert!(e.rendered.contains(needle), "{needle} in\n{e}");
    }
}

#[test]
fn secrets_and_request_rules_are_read_from_the_file_and_the_command_line() {
    let s = scratch();
    s.write(
        "p.toml",
        "[secrets]\nNPM_TOKEN = [\"registry.npmjs.org\"]\nGH_TOKEN = [\"api.github.com\"]\n\
         [network]\nrules = [\"get,HEAD api.github.com/repos/acme/*\"]\n",
    );
    let mut r = s.req(Some("p.toml"));
    r.overrides.secrets = vec!["GH_TOKEN".into(), "X_KEY@a.test:8443,*.b.test".into()];
    r.overrides.rules = vec!["* uploads.test/v1/*".into()];
    let p = load(&r).unwrap();
    let secrets: Vec<(String, Vec<String>)> = p
        .secrets
        .iter()
        .map(|s| {
            let hosts = s
                .hosts
                .iter()
                .map(|h| format!("{}:{:?}", h.host, h.port))
                .collect();
            (s.name.clone(), hosts)
        })
        .collect();
    // The command line's GH_TOKEN (a recipe) replaces the file's.
    assert_eq!(
        secrets,
        vec![
            ("NPM_TOKEN".into(), vec!["registry.npmjs.org:None".into()]),
            (
                "GH_TOKEN".into(),
                vec![
                    "api.github.com:None".into(),
                    "github.com:None".into(),
                    "uploads.github.com:None".into()
                ]
            ),
            (
                "X_KEY".into(),
                vec!["a.test:Some(8443)".into(), "*.b.test:None".into()]
            ),
        ]
    );
    let rules: Vec<String> = p.request_rules.iter().map(|r| r.describe()).collect();
    assert_eq!(
        rules,
        [
            "GET,HEAD api.github.com:443/repos/acme/*",
            "* uploads.test:443/v1/*"
        ]
    );
    // Every secret's and rule's host is allowed (a rule's on its port only).
    let crate::policy::NetPolicy::Allow { hosts, .. } = &p.net else {
        panic!("{:?}", p.net);
    };
    for (h, port) in [
        ("registry.npmjs.org", 443),
        ("a.test", 8443),
        ("x.b.test", 443),
        ("uploads.test", 443),
    ] {
        assert!(hosts.iter().any(|p| p.matches(h, Some(port))), "{h}:{port}");
    }
    assert!(!hosts.iter().any(|p| p.matches("uploads.test", Some(80))));

    s.write(
        "bad.toml",
        "[network]\nmode = \"off\"\nrules = [\"GET\", \"G3T a.test/x\", \"GET https://a.test/x\"]\n\
         [secrets]\n\"bad-name\" = [\"a.test\"]\nEMPTY = []\nHOSTS = [\"bad host\"]\n",
    );
    let e = load(&s.req(Some("bad.toml"))).unwrap_err();
    for needle in [
        "bad.toml:2:8: error: network mode `off` contradicts",
        "invalid request rule `GET`: no space between the methods and HOST/PATH",
        "`G3T` is not a method",
        "invalid request rule `GET https://a.test/x`: a URL",
        "invalid secret name `bad-name`",
        "secret `EMPTY` names no host",
        "invalid host `bad host`",
    ] {
        assert!(e.rendered.contains(needle), "{needle} in\n{e}");
    }
    let mut r = s.req(None);
    r.overrides.secrets = vec!["MY_TOKEN".into()];
    let e = load(&r).unwrap_err();
    assert!(
        e.rendered.contains("no `@` and no recipe for MY_TOKEN")
            && e.rendered
                .contains("recipes name their hosts themselves: GITHUB_TOKEN"),
        "{e}"
    );
}

/// `[process] daemons` (`~` expanded, `*` within a component) matches the
/// program the kernel names, and nothing beside it; the codex preset's
/// matches Codex's daemon wherever the release directory is; `[syscalls]
/// expected` is read, and both merge from the preset.
#[test]
fn expected_daemons_and_refusals_are_read_and_match_the_program_only() {
    let s = scratch();
    s.write(
        "vetto.toml",
        "extends = [\"default\", \"codex\"]\n[process]\ndaemons = [\"~/bin/agentd\"]\n",
    );
    let p = load(&s.req(Some("vetto.toml"))).unwrap();
    let matches = |exe: &Path| p.expected_daemons.iter().any(|d| d.matches(exe));
    assert!(matches(&s.home.join("bin/agentd")));
    assert!(!matches(&s.home.join("bin/agentd2")));
    assert!(!matches(&s.home.join("bin/agentd/x")));
    let daemon = s.home.join(
        ".codex/packages/app-server-daemon/releases/0.171.0-x86_64-unknown-linux-musl/bin/codex",
    );
    assert!(matches(&daemon));
    assert!(!matches(
        &s.home
            .join(".codex/packages/app-server-daemon/releases/bin/codex")
    ));
    assert_eq!(
        p.expected_denials
            .iter()
            .map(|e| e.class)
            .collect::<Vec<_>>(),
        [DenialClass::Namespaces]
    );
    // `policy explain --all` shows all three, with where each was written.
    let text = explain::render_text(&p, &[]);
    for needle in [
        "refused calls: namespaces (clone, clone3, unshare, setns)",
        "/bin/agentd  ← vetto.toml:3:12",
        "    github.com  ← policies/codex.toml:",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }

    s.write(
        "bad.toml",
        "[process]\ndaemons = [\"bin/agentd\"]\n[network]\nexpected = [\"10.0.0.1\"]\n",
    );
    let e = load(&s.req(Some("bad.toml"))).unwrap_err();
    assert!(
        e.rendered
            .contains("bad.toml:4:13: error: invalid expected entry `10.0.0.1`: an address"),
        "{e}"
    );
    assert!(
        e.rendered
            .contains("bad.toml:2:12: error: invalid program path"),
        "{e}"
    );
}
