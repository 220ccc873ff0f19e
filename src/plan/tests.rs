//! The plan as a specification: carving, the tier ladder, refusals.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::fs::{EntryKind, FsView, carve, rights};
use super::syscalls::Action;
use super::*;
use crate::host::{Availability, HostCaps};
use crate::policy::{Access, FsRule, NetPolicy, Origin, Policy};

/// An in-memory directory tree.
#[derive(Default)]
struct FakeFs(BTreeMap<PathBuf, EntryKind>);

impl FakeFs {
    fn with(entries: &[(&str, EntryKind)]) -> Self {
        let mut fs = FakeFs::default();
        for (p, k) in entries {
            let path = PathBuf::from(p);
            for a in path.ancestors().skip(1) {
                fs.0.entry(a.to_path_buf()).or_insert(EntryKind::Dir);
            }
            fs.0.insert(path, *k);
        }
        fs
    }
}

impl FsView for FakeFs {
    fn kind(&self, path: &Path) -> Option<EntryKind> {
        self.0.get(path).copied()
    }
    fn children(&self, dir: &Path) -> Vec<OsString> {
        self.0
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_os_string()))
            .collect()
    }
    fn read_link(&self, _path: &Path) -> Option<PathBuf> {
        Some("usr/lib".into())
    }
    fn socket_at(&self, path: &Path) -> Option<PathBuf> {
        (self.kind(path) == Some(EntryKind::Other)).then(|| path.to_path_buf())
    }
}

const FILE: EntryKind = EntryKind::File { nlink: 1 };

fn rule(path: &str, access: Access) -> FsRule {
    FsRule {
        path: path.into(),
        access,
        origin: Origin {
            source: "test.toml".into(),
            line: 1,
            col: 1,
            written: path.into(),
        },
    }
}

fn project_fs() -> FakeFs {
    FakeFs::with(&[
        ("/p/src/main.rs", FILE),
        ("/p/README.md", FILE),
        ("/p/Cargo.toml", FILE),
        ("/p/.env", FILE),
        ("/p/.git/HEAD", FILE),
        ("/p/.git/config", FILE),
        ("/p/.git/hooks/pre-commit.sample", FILE),
        ("/p/.git/objects/ab/cdef", FILE),
        ("/p/link", EntryKind::Symlink),
        ("/p/hardlink", EntryKind::File { nlink: 2 }),
        ("/usr/bin/sh", FILE),
    ])
}

fn project_rules() -> Vec<FsRule> {
    vec![
        rule("/usr", Access::Read),
        rule("/p", Access::Write),
        rule("/p/.env", Access::Deny),
        rule("/p/.git/hooks", Access::Protect),
        rule("/p/.git/config", Access::Protect),
    ]
}

const ALL: u64 = (1 << 16) - 1;

fn access_of(carved: &fs::Carved, path: &str) -> Option<u64> {
    carved
        .rules
        .iter()
        .find(|r| r.path == Path::new(path))
        .map(|r| r.access)
}

#[test]
fn masked_env_file_gets_no_grant_and_its_parent_only_lists() {
    let c = carve(&project_rules(), ALL, &project_fs());
    assert_eq!(access_of(&c, "/p/.env"), None);
    // READ_DIR only: a READ_FILE on /p would reach /p/.env.
    assert_eq!(access_of(&c, "/p"), Some(rights::READ_DIR));
}

#[test]
fn siblings_of_carved_paths_keep_full_rights() {
    let c = carve(&project_rules(), ALL, &project_fs());
    assert_eq!(access_of(&c, "/p/src"), Some(ALL));
    assert_eq!(access_of(&c, "/p/README.md"), Some(ALL & rights::FILE));
    assert_eq!(access_of(&c, "/p/.git/objects"), Some(ALL));
    assert_eq!(access_of(&c, "/p/.git/HEAD"), Some(ALL & rights::FILE));
    assert_eq!(access_of(&c, "/usr"), Some(rights::READ));
}

#[test]
fn git_hooks_and_config_are_never_granted_write() {
    let c = carve(&project_rules(), ALL, &project_fs());
    assert_eq!(access_of(&c, "/p/.git/hooks"), Some(rights::READ));
    assert_eq!(
        access_of(&c, "/p/.git/config"),
        Some(rights::READ & rights::FILE)
    );
    // .git itself may be read, not changed: no create/remove rights.
    assert_eq!(access_of(&c, "/p/.git"), Some(rights::READ));
}

#[test]
fn symlink_in_project_is_not_granted_because_it_would_grant_its_target() {
    let c = carve(&project_rules(), ALL, &project_fs());
    assert_eq!(access_of(&c, "/p/link"), None);
}

#[test]
fn hardlink_at_a_carved_level_is_not_granted_because_it_may_alias_a_protected_file() {
    let c = carve(&project_rules(), ALL, &project_fs());
    assert_eq!(access_of(&c, "/p/hardlink"), None);
}

#[test]
fn carved_dirs_list_protected_names_for_the_supervisor() {
    let c = carve(&project_rules(), ALL, &project_fs());
    let dirs: Vec<(&Path, Vec<&str>)> = c
        .carved_dirs
        .iter()
        .map(|d| {
            (
                d.path.as_path(),
                d.protected_names.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        dirs,
        [
            (Path::new("/p"), vec![".env", ".git"]),
            (Path::new("/p/.git"), vec!["config", "hooks"]),
        ]
    );
}

#[test]
fn protecting_a_missing_git_dir_still_carves_so_it_cannot_be_created() {
    let fs = FakeFs::with(&[("/p/src/a.rs", FILE)]);
    let rules = vec![
        rule("/p", Access::Write),
        rule("/p/.git/hooks", Access::Protect),
    ];
    let c = carve(&rules, ALL, &fs);
    assert_eq!(access_of(&c, "/p"), Some(rights::READ));
    assert_eq!(c.carved_dirs[0].protected_names, [".git"]);
}

#[test]
fn missing_masked_path_needs_no_carving() {
    let fs = FakeFs::with(&[("/p/src/a.rs", FILE)]);
    let rules = vec![rule("/p", Access::Write), rule("/p/.env", Access::Deny)];
    let c = carve(&rules, ALL, &fs);
    assert_eq!(access_of(&c, "/p"), Some(ALL));
    assert!(c.carved_dirs.is_empty());
}

#[test]
fn masked_secret_under_readable_home_is_carved_out() {
    let fs = FakeFs::with(&[
        ("/home/u/.ssh/id_rsa", FILE),
        ("/home/u/.cargo/bin/cargo", FILE),
        ("/home/u/notes.txt", FILE),
    ]);
    let rules = vec![
        rule("/home/u", Access::Read),
        rule("/home/u/.ssh", Access::Deny),
    ];
    let c = carve(&rules, ALL, &fs);
    assert_eq!(access_of(&c, "/home/u/.ssh"), None);
    assert_eq!(access_of(&c, "/home/u"), Some(rights::READ_DIR));
    assert_eq!(access_of(&c, "/home/u/.cargo"), Some(rights::READ));
    // A read-only root has nothing to emulate.
    assert!(c.carved_dirs.is_empty());
}

#[test]
fn equal_paths_take_the_strongest_restriction() {
    let fs = project_fs();
    let rules = vec![rule("/p/src", Access::Write), rule("/p/src", Access::Deny)];
    let c = carve(&rules, ALL, &fs);
    assert_eq!(access_of(&c, "/p/src"), None);
}

#[test]
fn decide_takes_the_longest_match() {
    let rules = project_rules();
    let d = |p: &str| fs::decide_rule(&rules, Path::new(p)).map(|r| r.access);
    assert_eq!(d("/p/src/main.rs"), Some(Access::Write));
    assert_eq!(d("/p/.git/hooks/pre-commit"), Some(Access::Protect));
    assert_eq!(d("/p/.env"), Some(Access::Deny));
    assert_eq!(d("/p/.envrc"), Some(Access::Write));
    assert_eq!(d("/home"), None);
}

fn policy(fs: Vec<FsRule>) -> Policy {
    Policy {
        fs,
        outputs: vec!["target".into(), "node_modules".into()],
        ..Policy::empty("/p", "/tmp/vetto-test")
    }
}

fn options() -> BuildOptions {
    BuildOptions {
        allow_degraded: false,
        audit: false,
        env: vec![],
        cwd: "/p/src".into(),
        terminals: vec![],
    }
}

fn build_on(host: &HostCaps, request: TierRequest) -> Result<Plan, Refusal> {
    build::build_with_view(
        &policy(project_rules()),
        host,
        request,
        &options(),
        &project_fs(),
    )
}

#[test]
fn auto_takes_full_when_the_host_has_user_namespaces() -> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Auto)?;
    assert_eq!(plan.tier, Tier::Full);
    assert!(plan.degraded.is_empty());
    assert_eq!(plan.cwd, Path::new("/p/src"));
    let ns = plan.namespaces.as_ref();
    assert!(
        ns.is_some_and(|n| n.net),
        "network off means an own network namespace"
    );
    Ok(())
}

fn without_userns() -> HostCaps {
    let mut host = HostCaps::everything();
    host.userns = Availability::Missing(
        "kernel.apparmor_restrict_unprivileged_userns = 1 (sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)".into(),
    );
    host
}

#[test]
fn auto_falls_back_to_fs_only_when_user_namespaces_are_blocked() -> Result<(), Refusal> {
    let plan = build_on(&without_userns(), TierRequest::Auto)?;
    assert_eq!(plan.tier, Tier::FsOnly);
    assert!(plan.namespaces.is_none());
    Ok(())
}

#[test]
fn full_request_without_user_namespaces_is_refused_with_the_fix() {
    let r = build_on(&without_userns(), TierRequest::Exactly(Tier::Full));
    let text = r.as_ref().err().map(|r| r.to_string()).unwrap_or_default();
    assert_eq!(
        r.err().map(|r| r.missing),
        Some(KernelFeature::UserNamespaces)
    );
    assert!(
        text.contains("apparmor_restrict_unprivileged_userns"),
        "{text}"
    );
    assert!(text.contains("--tier fs-only"), "{text}");
}

#[test]
fn full_tier_keeps_loopback_usable_instead_of_filtering_sockets() -> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::Full))?;
    assert!(
        !plan
            .seccomp
            .rules
            .iter()
            .any(|r| r.name == "socket" && r.why.contains("network is off"))
    );
    assert!(plan.landlock.as_ref().is_some_and(|l| !l.deny_tcp));
    Ok(())
}

#[test]
fn full_tier_mounts_only_what_the_policy_allows() -> Result<(), Refusal> {
    use super::mounts::Mount;
    let plan = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::Full))?;
    let mounts = plan.namespaces.map(|n| n.mounts).unwrap_or_default();
    let paths: Vec<String> = mounts
        .iter()
        .map(|m| format!("{:?} {}", std::mem::discriminant(m), m.path().display()))
        .collect();
    assert!(
        mounts.contains(&Mount::Bind {
            path: "/p".into(),
            writable: true
        }),
        "{paths:?}"
    );
    assert!(mounts.contains(&Mount::Bind {
        path: "/usr".into(),
        writable: false
    }));
    assert!(mounts.contains(&Mount::MaskFile {
        path: "/p/.env".into()
    }));
    assert!(mounts.contains(&Mount::Bind {
        path: "/p/.git/hooks".into(),
        writable: false
    }));
    assert!(mounts.contains(&Mount::Proc {
        path: "/proc".into()
    }));
    // Parents before children.
    let pos = |p: &str| mounts.iter().position(|m| m.path() == Path::new(p));
    assert!(pos("/p") < pos("/p/.env"));
    Ok(())
}

#[test]
fn old_landlock_without_scoping_is_refused_unless_degraded() {
    let mut host = without_userns();
    host.landlock_abi = 5;
    let r = build_on(&host, TierRequest::Auto);
    let refusal = r.err();
    assert_eq!(
        refusal.as_ref().map(|r| r.missing),
        Some(KernelFeature::LandlockAbi(6))
    );
    assert!(
        refusal
            .map(|r| r.to_string())
            .unwrap_or_default()
            .contains("--allow-degraded")
    );

    let mut opts = options();
    opts.allow_degraded = true;
    let plan = build::build_with_view(
        &policy(project_rules()),
        &host,
        TierRequest::Auto,
        &opts,
        &project_fs(),
    );
    let plan = plan.ok();
    assert_eq!(plan.as_ref().map(|p| p.tier), Some(Tier::FsOnly));
    assert_eq!(plan.map(|p| p.degraded.len()), Some(1));
}

#[test]
fn no_landlock_is_refused_rather_than_silently_taking_seccomp() {
    let mut host = HostCaps::everything();
    host.landlock_abi = 0;
    host.landlock_missing = Some("Landlock is not enabled at boot".into());
    let r = build_on(&host, TierRequest::Auto);
    assert!(r.is_err(), "auto must not drop filesystem rules silently");
}

#[test]
fn seccomp_tier_named_explicitly_runs_and_says_what_it_drops() -> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::Seccomp))?;
    assert_eq!(plan.tier, Tier::Seccomp);
    assert!(plan.landlock.is_none());
    assert_eq!(plan.degraded.len(), 1, "one clear warning line");
    assert!(
        plan.degraded[0].contains("no filesystem isolation"),
        "{:?}",
        plan.degraded
    );
    Ok(())
}

#[test]
fn auto_never_takes_seccomp_for_a_policy_with_filesystem_rules() {
    let mut host = HostCaps::everything();
    host.landlock_abi = 0;
    host.userns = Availability::Missing("no".into());
    assert!(build_on(&host, TierRequest::Auto).is_err());
}

#[test]
fn missing_output_dir_is_prepared_and_granted_when_the_project_is_carved() -> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Auto)?;
    // Cargo.toml announces target/; nothing announces node_modules/ here.
    assert_eq!(plan.prepare_dirs, [PathBuf::from("/p/target")]);
    let ll = plan.landlock.as_ref().map(|l| &l.rules);
    assert!(ll.is_some_and(|rules| rules.iter().any(|r| r.path == Path::new("/p/target"))));
    Ok(())
}

#[test]
fn network_off_blocks_inet_sockets_and_brokers_unix_connects() -> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::FsOnly))?;
    let socket_denials = plan
        .seccomp
        .rules
        .iter()
        .filter(|r| r.name == "socket" && r.action == Action::Deny)
        .count();
    assert!(socket_denials >= 2);
    assert!(
        plan.seccomp
            .rules
            .iter()
            .any(|r| r.name == "connect" && r.action == Action::Notify)
    );
    assert!(
        plan.landlock
            .as_ref()
            .is_some_and(|l| l.deny_tcp && l.scope)
    );
    Ok(())
}

#[test]
fn without_seccomp_notify_the_socket_broker_gap_is_a_refusal() {
    let mut host = without_userns();
    host.seccomp_notify = Availability::Missing("kernel 5.4".into());
    let r = build_on(&host, TierRequest::Auto);
    assert_eq!(
        r.err().map(|r| r.missing),
        Some(KernelFeature::SeccompUserNotify)
    );
}

#[test]
fn plan_is_serializable_for_the_stage() -> Result<(), Box<dyn std::error::Error>> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Auto)?;
    let json = serde_json::to_string(&plan)?;
    let back: Plan = serde_json::from_str(&json)?;
    assert_eq!(back, plan);
    Ok(())
}

#[test]
fn beneath_respects_component_boundaries() {
    use super::fs::beneath;
    assert!(beneath(Path::new("/p/src"), Path::new("/p")));
    assert!(beneath(Path::new("/p"), Path::new("/p")));
    assert!(!beneath(Path::new("/p-other"), Path::new("/p")));
    assert!(!beneath(Path::new("/pp"), Path::new("/p")));
    assert!(beneath(Path::new("/anything"), Path::new("/")));
    assert!(!beneath(Path::new("/p"), Path::new("/p/src")));
}

#[test]
fn full_tier_keeps_project_readable_next_to_a_masked_file_because_a_mount_masks_it()
-> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::Full))?;
    let p = plan
        .landlock
        .as_ref()
        .and_then(|l| l.rules.iter().find(|r| r.path == Path::new("/p")))
        .map(|r| r.access);
    assert_eq!(p, Some(rights::READ));
    Ok(())
}

#[test]
fn project_under_tmp_keeps_git_protected_at_full() -> Result<(), Refusal> {
    let fs = FakeFs::with(&[
        ("/tmp/p/.git/hooks/x.sample", FILE),
        ("/tmp/p/.git/config", FILE),
        ("/tmp/p/src/a.rs", FILE),
    ]);
    let mut policy = policy(vec![
        rule("/tmp/p", Access::Write),
        rule("/tmp/p/.git/hooks", Access::Protect),
    ]);
    policy.project = "/tmp/p".into();
    let plan = build::build_with_view(
        &policy,
        &HostCaps::everything(),
        TierRequest::Exactly(Tier::Full),
        &options(),
        &fs,
    )?;
    let rules = plan.landlock.map(|l| l.rules).unwrap_or_default();
    let tmp = rules
        .iter()
        .find(|r| r.path == Path::new("/tmp"))
        .map(|r| r.access);
    // Not a full grant: it would cover the project's .git/hooks beneath.
    assert_eq!(tmp, Some(rights::READ));
    // So TMPDIR is a per-session directory instead of /tmp itself.
    assert_eq!(plan.session_tmp, Some(PathBuf::from("/tmp/vetto-test")));
    Ok(())
}

#[test]
fn writable_dev_shm_is_scrubbed_below_full_so_nothing_planted_there_persists() -> Result<(), Refusal>
{
    let mut rules = project_rules();
    rules.push(rule("/dev/shm", Access::Write));
    let plan = |tier| {
        build::build_with_view(
            &policy(rules.clone()),
            &HostCaps::everything(),
            TierRequest::Exactly(tier),
            &options(),
            &project_fs(),
        )
    };
    let fs_only = plan(Tier::FsOnly)?;
    assert_eq!(fs_only.scrub_dirs, [PathBuf::from("/dev/shm")]);
    // Only what the supervisor sees the job create there is removed: it
    // watches the directory, and creations are notified.
    assert_eq!(fs_only.notify.shared_dirs, fs_only.scrub_dirs);
    assert!(
        fs_only
            .seccomp
            .rules
            .iter()
            .any(|r| r.name == "mkdir" && r.action == syscalls::Action::Notify)
    );
    // At FULL /dev/shm is the sandbox's own tmpfs.
    let full = plan(Tier::Full)?;
    assert!(full.scrub_dirs.is_empty() && full.notify.shared_dirs.is_empty());
    Ok(())
}

#[test]
fn carved_project_gets_spare_dirs_and_spare_files_only_where_list_only() -> Result<(), Refusal> {
    let plan = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::FsOnly))?;
    let pool = plan.notify.spares.as_ref();
    assert_eq!(pool.map(|p| p.dirs.len()), Some(fs::SparePool::DIRS));
    // /p holds a masked .env: it can only be listed, so files need spares.
    assert_eq!(pool.map(|p| p.files.len()), Some(fs::SparePool::FILES));
    assert_eq!(
        pool.map(|p| p.file_dirs.clone()),
        Some(vec![PathBuf::from("/p")])
    );
    let pool_dir = pool.map(|p| p.dir.clone()).unwrap_or_default();
    assert!(pool_dir.starts_with("/p/.git"), "{}", pool_dir.display());
    // Every spare is granted by its own rule; none of them is the pool.
    let ll = plan.landlock.map(|l| l.rules).unwrap_or_default();
    assert!(
        ll.iter()
            .any(|r| r.path == pool_dir.join("d0") && r.access == ALL)
    );
    assert!(
        ll.iter()
            .any(|r| r.path == pool_dir.join("f0") && r.access == ALL & rights::FILE)
    );
    assert!(!ll.iter().any(|r| r.path == pool_dir));
    Ok(())
}

#[test]
fn full_tier_carves_its_private_tmp_as_the_sandbox_sees_it() -> Result<(), Refusal> {
    // The host's /tmp holds unrelated entries; the sandbox's /tmp only
    // what the policy binds there, so only those are granted.
    let fs = FakeFs::with(&[
        ("/tmp/p/.git/hooks/x.sample", FILE),
        ("/tmp/p/src/a.rs", FILE),
        ("/tmp/someone-elses-dir/file", FILE),
    ]);
    let mut policy = policy(vec![
        rule("/tmp/p", Access::Write),
        rule("/tmp/p/.git/hooks", Access::Protect),
    ]);
    policy.project = "/tmp/p".into();
    let plan = build::build_with_view(
        &policy,
        &HostCaps::everything(),
        TierRequest::Exactly(Tier::Full),
        &options(),
        &fs,
    )?;
    let rules = plan.landlock.map(|l| l.rules).unwrap_or_default();
    assert!(
        !rules
            .iter()
            .any(|r| r.path.starts_with("/tmp/someone-elses-dir"))
    );
    Ok(())
}

#[test]
fn full_tier_grants_its_private_tmp_whole_unless_a_carved_path_lies_beneath() -> Result<(), Refusal>
{
    let fs = FakeFs::with(&[
        ("/p/.git/hooks/x.sample", FILE),
        ("/tmp/agent/bin/agent", FILE),
        ("/tmp/q/.git/hooks/x.sample", FILE),
    ]);
    let tmp_rule = |policy: &Policy| -> Result<Option<u64>, Refusal> {
        let plan = build::build_with_view(
            policy,
            &HostCaps::everything(),
            TierRequest::Exactly(Tier::Full),
            &options(),
            &fs,
        )?;
        let rules = plan.landlock.map(|l| l.rules).unwrap_or_default();
        Ok(rules
            .iter()
            .filter(|r| r.path == Path::new("/tmp"))
            .map(|r| r.access)
            .max())
    };
    // An agent installed in /tmp, read-only (kept by its own read-only
    // mount): the job's /tmp stays writable whole.
    let mut policy = policy(vec![
        rule("/p", Access::Write),
        rule("/p/.git/hooks", Access::Protect),
        rule("/tmp/agent", Access::Read),
    ]);
    policy.project = "/p".into();
    let whole = tmp_rule(&policy)?;
    assert!(
        whole.is_some_and(|a| a & rights::MAKE_DIR != 0),
        "{whole:?}"
    );
    // A project under /tmp: its carve is Landlock's, so /tmp stays carved.
    policy.fs = vec![
        rule("/tmp/q", Access::Write),
        rule("/tmp/q/.git/hooks", Access::Protect),
    ];
    policy.project = "/tmp/q".into();
    let carved = tmp_rule(&policy)?;
    assert!(
        carved.is_none_or(|a| a & rights::MAKE_DIR == 0),
        "{carved:?}"
    );
    Ok(())
}

#[test]
fn audit_enforces_nothing_but_notifies_everything_it_would_refuse() -> Result<(), Refusal> {
    let mut opts = options();
    opts.audit = true;
    let plan = build::build_with_view(
        &policy(project_rules()),
        &HostCaps::everything(),
        TierRequest::Auto,
        &opts,
        &project_fs(),
    )?;
    assert!(plan.landlock.is_none() && plan.namespaces.is_none());
    assert!(plan.seccomp.record_denials && plan.notify.audit);
    assert!(plan.notify.denied_calls.iter().any(|c| c == "ptrace"));
    assert!(
        plan.seccomp
            .rules
            .iter()
            .any(|r| r.name == "mkdir" && r.action == Action::Notify)
    );
    assert_eq!(plan.degraded.len(), 1, "one line says nothing is enforced");
    Ok(())
}

#[test]
fn audit_without_user_notification_is_refused_because_nothing_could_be_observed() {
    let mut host = HostCaps::everything();
    host.seccomp_notify = Availability::Missing("kernel 5.4".into());
    let mut opts = options();
    opts.audit = true;
    let r = build::build_with_view(
        &policy(project_rules()),
        &host,
        TierRequest::Auto,
        &opts,
        &project_fs(),
    );
    assert_eq!(
        r.err().map(|r| r.missing),
        Some(KernelFeature::SeccompUserNotify)
    );
}

/// Counts the `lstat`s a plan makes.
struct CountingFs {
    inner: FakeFs,
    asked: std::cell::Cell<usize>,
}

impl FsView for CountingFs {
    fn kind(&self, path: &Path) -> Option<EntryKind> {
        self.asked.set(self.asked.get() + 1);
        self.inner.kind(path)
    }
    fn children(&self, dir: &Path) -> Vec<OsString> {
        self.inner.children(dir)
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        self.inner.read_link(path)
    }
    fn socket_at(&self, path: &Path) -> Option<PathBuf> {
        self.inner.socket_at(path)
    }
}

#[test]
fn a_remembered_view_asks_once_per_path_and_answers_the_same() {
    let counting = CountingFs {
        inner: FakeFs::with(&[("/p/.env", FILE), ("/p/src", EntryKind::Dir)]),
        asked: std::cell::Cell::new(0),
    };
    let view = fs::Remembered::new(&counting);
    for _ in 0..3 {
        assert_eq!(view.kind(Path::new("/p/.env")), Some(FILE));
        assert_eq!(view.kind(Path::new("/p/missing")), None);
    }
    assert_eq!(
        counting.asked.get(),
        2,
        "one lstat per path, absent ones too"
    );
}

#[test]
fn full_with_the_host_network_needs_socket_scoping_or_the_broker() {
    let mut host = HostCaps::everything();
    host.landlock_abi = 5;
    host.seccomp_notify = Availability::Missing("kernel 5.4".into());
    let mut host_net = policy(project_rules());
    host_net.net = NetPolicy::Host;
    let build = |p: &Policy, opts: &BuildOptions| {
        build::build_with_view(
            p,
            &host,
            TierRequest::Exactly(Tier::Full),
            opts,
            &project_fs(),
        )
    };
    let refusal = build(&host_net, &options()).err();
    assert_eq!(
        refusal.map(|r| r.missing),
        Some(KernelFeature::LandlockAbi(6)),
        "abstract sockets of the host would be reachable unsaid"
    );
    let mut degraded = options();
    degraded.allow_degraded = true;
    let plan = build(&host_net, &degraded);
    assert!(plan.is_ok_and(|p| {
        p.degraded
            .iter()
            .any(|d| d.contains("abstract unix sockets"))
    }));
    // The network off: FULL's own namespace keeps them apart.
    assert!(build(&policy(project_rules()), &options()).is_ok());
}

fn egress_policy() -> Policy {
    let mut p = policy(project_rules());
    p.net = NetPolicy::Allow {
        hosts: vec![crate::policy::HostPattern {
            host: "registry.npmjs.org".into(),
            port: None,
            origin: rule("/", Access::Read).origin,
        }],
        deny: vec![],
        ips: vec![],
        resolve: vec![],
    };
    p
}

fn build_egress(host: &HostCaps, request: TierRequest) -> Result<Plan, Refusal> {
    build::build_with_view(&egress_policy(), host, request, &options(), &project_fs())
}

#[test]
fn filtered_egress_at_full_is_the_own_namespace_with_the_proxy_inside() -> Result<(), Refusal> {
    let plan = build_egress(&HostCaps::everything(), TierRequest::Auto)?;
    assert_eq!(plan.tier, Tier::Full);
    assert_eq!(plan.egress, Some(net::EgressPlan::Netns));
    assert!(plan.namespaces.as_ref().is_some_and(|n| n.net));
    assert_eq!(plan.notify.net_connect, fs::NetConnect::LoopbackOnly);
    Ok(())
}

#[test]
fn full_with_the_network_off_has_a_dns_stub_that_answers_no_name() -> Result<(), Refusal> {
    let plan = build::build_with_view(
        &policy(project_rules()),
        &HostCaps::everything(),
        TierRequest::Exactly(Tier::Full),
        &options(),
        &project_fs(),
    )?;
    assert_eq!(plan.egress, None);
    let stub = plan.namespaces.as_ref().and_then(|n| n.dns_stub.clone());
    assert_eq!(stub, Some(net::DnsStub { ports: Vec::new() }));
    let below = build::build_with_view(
        &policy(project_rules()),
        &HostCaps::everything(),
        TierRequest::Exactly(Tier::FsOnly),
        &options(),
        &project_fs(),
    )?;
    assert!(below.namespaces.is_none());
    Ok(())
}

#[test]
fn fs_only_with_the_network_off_makes_udp_and_tcp_sockets_where_they_lead_nowhere()
-> Result<(), Refusal> {
    let build = |host: &HostCaps| {
        build::build_with_view(
            &policy(project_rules()),
            host,
            TierRequest::Exactly(Tier::FsOnly),
            &options(),
            &project_fs(),
        )
    };
    let socket_rule = |plan: &Plan, action: Action, family: u64, kind: u64| {
        plan.seccomp.rules.iter().any(|r| {
            r.name == "socket"
                && r.action == action
                && r.when.contains(&syscalls::ArgCheck::Eq {
                    index: 0,
                    value: family,
                })
                && r.when.contains(&syscalls::ArgCheck::MaskedEq {
                    index: 1,
                    mask: 0xf,
                    value: kind,
                })
        })
    };
    let plan = build(&HostCaps::everything())?;
    assert!(plan.notify.udp_dead_net);
    assert!(plan.notify.tcp_dead_net);
    assert_eq!(plan.notify.net_connect, fs::NetConnect::Closed);
    for family in [2, 10] {
        // UDP and TCP notified (made by vetto in its namespace); raw
        // refused.
        assert!(socket_rule(&plan, Action::Notify, family, 2));
        assert!(socket_rule(&plan, Action::Notify, family, 1));
        assert!(socket_rule(&plan, Action::Deny, family, 3));
    }
    // The job's binds are the supervisor's to perform.
    assert!(
        plan.seccomp
            .rules
            .iter()
            .any(|r| r.name == "bind" && r.action == Action::Notify)
    );
    // Decided as the filter decides (the strongest matching rule), over
    // every type value and a few protocols: only UDP and TCP are notified,
    // nothing internet passes unasked (SOCK_PACKET, 10, is a packet
    // socket; 132 is SCTP, 262 MPTCP).
    let verdict = |plan: &Plan, args: [u64; 3]| {
        plan.seccomp
            .rules
            .iter()
            .filter(|r| r.name == "socket")
            .filter(|r| {
                r.when.iter().all(|c| match *c {
                    syscalls::ArgCheck::Eq { index, value } => args[usize::from(index)] == value,
                    syscalls::ArgCheck::Ne { index, value } => args[usize::from(index)] != value,
                    syscalls::ArgCheck::AnyBits { index, mask } => {
                        args[usize::from(index)] & mask != 0
                    }
                    syscalls::ArgCheck::MaskedEq { index, mask, value } => {
                        args[usize::from(index)] & mask == value
                    }
                })
            })
            .map(|r| r.action)
            .min_by_key(|a| match a {
                Action::Deny => 0,
                Action::Unsupported => 1,
                Action::Notify => 2,
            })
    };
    for family in [2, 10] {
        for kind in 0..16u64 {
            for flags in [0, 0o4000, 0o2_000_000] {
                for protocol in [0, 1, 6, 17, 132, 136, 262] {
                    let got = verdict(&plan, [family, kind | flags, protocol]);
                    let want = if (kind == 2 && (protocol == 0 || protocol == 17))
                        || (kind == 1 && (protocol == 0 || protocol == 6))
                    {
                        Action::Notify
                    } else {
                        Action::Deny
                    };
                    assert_eq!(
                        got,
                        Some(want),
                        "socket({family}, {kind:#x}|{flags:#o}, {protocol})"
                    );
                }
            }
        }
    }
    // Without user namespaces: every internet socket refused, as before.
    let plan = build(&without_userns())?;
    assert!(!plan.notify.udp_dead_net);
    assert!(!plan.notify.tcp_dead_net);
    assert!(plan.seccomp.rules.iter().any(|r| {
        r.name == "socket"
            && r.action == Action::Deny
            && r.when
                .contains(&syscalls::ArgCheck::Ne { index: 0, value: 1 })
            && !r
                .when
                .contains(&syscalls::ArgCheck::Ne { index: 0, value: 2 })
    }));
    Ok(())
}

#[test]
fn filtered_egress_at_fs_only_redirects_notified_connects_and_allows_only_tcp()
-> Result<(), Refusal> {
    let plan = build_egress(&without_userns(), TierRequest::Auto)?;
    assert_eq!(plan.tier, Tier::FsOnly);
    assert_eq!(plan.egress, Some(net::EgressPlan::Redirect));
    assert_eq!(plan.notify.net_connect, fs::NetConnect::Proxy);
    assert!(plan.landlock.as_ref().is_some_and(|l| l.deny_tcp));
    let rules = &plan.seccomp.rules;
    assert!(
        rules
            .iter()
            .any(|r| r.name == "connect" && r.action == Action::Notify)
    );
    // UDP (DNS) refused at socket() for both families, TCP fast open too.
    for family in [2, 10] {
        assert!(rules.iter().any(|r| r.name == "socket"
            && r.action == Action::Deny
            && r.when.contains(&syscalls::ArgCheck::Eq {
                index: 0,
                value: family
            })
            && r.when.contains(&syscalls::ArgCheck::MaskedEq {
                index: 1,
                mask: 0xf,
                value: 2
            })));
    }
    assert!(
        rules
            .iter()
            .any(|r| r.name == "sendto" && r.action == Action::Deny)
    );
    Ok(())
}

#[test]
fn filtered_egress_without_user_notification_below_full_is_refused_with_the_truth() {
    let mut host = without_userns();
    host.seccomp_notify = Availability::Missing("kernel 5.4".into());
    let r = build_egress(&host, TierRequest::Exactly(Tier::FsOnly));
    let text = r
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert_eq!(
        r.err().map(|r| r.missing),
        Some(KernelFeature::SeccompUserNotify)
    );
    assert!(
        text.contains("filtered egress (allow registry.npmjs.org"),
        "{text}"
    );
    assert!(text.contains("--tier full"), "{text}");
    assert!(!text.contains("Landlock"), "{text}");
}

#[test]
fn filtered_egress_is_not_offered_at_the_seccomp_tier() {
    let r = build_egress(&HostCaps::everything(), TierRequest::Exactly(Tier::Seccomp));
    let text = r
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(text.contains("FULL and FS-ONLY tiers only"), "{text}");
    assert!(text.contains("--tier fs-only or --tier full"), "{text}");
}

fn unix_rule(path: &str) -> crate::policy::UnixSocket {
    crate::policy::UnixSocket {
        path: path.into(),
        origin: Origin {
            source: "test.toml".into(),
            line: 7,
            col: 9,
            written: path.into(),
        },
    }
}

#[test]
fn a_named_unix_socket_is_bound_alone_at_full_and_listed_for_the_broker() -> Result<(), Refusal> {
    use super::mounts::Mount;
    let mut p = policy(project_rules());
    p.unix = vec![unix_rule("/run/podman/podman.sock")];
    let mut view = project_fs();
    view.0
        .insert("/run/podman/podman.sock".into(), EntryKind::Other);
    for tier in [Tier::Full, Tier::FsOnly] {
        let plan = build::build_with_view(
            &p,
            &HostCaps::everything(),
            TierRequest::Exactly(tier),
            &options(),
            &view,
        )?;
        assert_eq!(
            plan.notify.unix_sockets,
            vec![PathBuf::from("/run/podman/podman.sock")]
        );
        let bound = plan.namespaces.is_some_and(|n| {
            n.mounts.contains(&Mount::Bind {
                path: "/run/podman/podman.sock".into(),
                writable: false,
            })
        });
        assert_eq!(bound, tier == Tier::Full);
    }
    Ok(())
}

#[test]
fn a_unix_rule_without_a_socket_or_in_a_denied_path_is_refused_with_its_origin() {
    let mut p = policy(project_rules());
    let mut view = project_fs();
    view.0.insert("/p/.env".into(), EntryKind::Other);
    for (path, why) in [
        ("/run/missing.sock", "nothing is there"),
        ("/p/README.md", "not a socket"),
        ("/p/.env", "denied path"),
    ] {
        p.unix = vec![unix_rule(path)];
        let Err(e) = build::build_with_view(
            &p,
            &HostCaps::everything(),
            TierRequest::Auto,
            &options(),
            &view,
        ) else {
            panic!("{path}: not refused");
        };
        assert_eq!(e.missing, KernelFeature::UnixSocket);
        let text = e.to_string();
        assert!(text.contains("test.toml:7:9"), "{text}");
        assert!(text.contains(why), "{text}");
    }
}

/// A macOS host: Seatbelt, and none of Linux's kernel features.
fn macos_host() -> HostCaps {
    let missing = || crate::host::Availability::Missing("not Linux".into());
    HostCaps {
        landlock_abi: 0,
        landlock_missing: Some("not Linux".into()),
        userns: missing(),
        seccomp: missing(),
        seccomp_notify: missing(),
        fuse: missing(),
        seatbelt: crate::host::Availability::Available,
        ..HostCaps::everything()
    }
}

#[test]
fn auto_takes_seatbelt_on_macos_with_a_profile_over_real_paths() -> Result<(), Refusal> {
    let plan = build_on(&macos_host(), TierRequest::Auto)?;
    assert_eq!(plan.tier, Tier::Seatbelt);
    assert!(plan.landlock.is_none() && plan.namespaces.is_none());
    assert!(plan.seatbelt.as_ref().is_some_and(|p| !p.params.is_empty()));
    Ok(())
}

/// Filtered egress on macOS is planned, not refused: the proxy on the
/// host's loopback, and a profile with no network until its port is in.
#[test]
fn filtered_egress_on_macos_is_the_proxy_on_loopback_and_no_other_network() -> Result<(), Refusal> {
    let plan = build_egress(&macos_host(), TierRequest::Auto)?;
    assert_eq!(plan.tier, Tier::Seatbelt);
    assert_eq!(plan.egress, Some(net::EgressPlan::Loopback));
    let profile = plan
        .seatbelt
        .as_ref()
        .map(|p| (p.needs_proxy_port, p.text.clone()));
    let Some((true, text)) = profile else {
        panic!("a profile waiting for the proxy's port: {profile:?}");
    };
    assert!(text.contains("(deny network*)"));
    assert!(!text.contains("(remote tcp") && !text.contains("com.apple.dnssd.service"));
    Ok(())
}

#[test]
fn linux_tiers_are_refused_on_macos_and_seatbelt_on_linux() {
    for tier in Tier::ALL {
        let r = build_on(&macos_host(), TierRequest::Exactly(tier));
        assert!(
            r.as_ref()
                .is_err_and(|e| e.hint.contains("--tier seatbelt")),
            "{tier}: {r:?}"
        );
    }
    let r = build_on(
        &HostCaps::everything(),
        TierRequest::Exactly(Tier::Seatbelt),
    );
    assert!(r.is_err_and(|e| e.missing == KernelFeature::Seatbelt));
    // Linux's auto never considers it.
    assert!(
        build_on(&HostCaps::everything(), TierRequest::Auto)
            .is_ok_and(|p| p.tier == Tier::Full && p.seatbelt.is_none())
    );
}

#[test]
fn appcontainer_parses_and_is_refused_off_windows_in_true_words() {
    assert_eq!(
        "appcontainer".parse::<TierRequest>(),
        Ok(TierRequest::AppContainer)
    );
    let r = build::appcontainer_refusal(&policy(project_rules()), "linux", &fs::RealFs);
    assert_eq!(r.missing, KernelFeature::AppContainer);
    assert_eq!(r.tier, None);
    let text = r.to_string();
    assert!(
        text.contains("AppContainer exists only on Windows; this is linux"),
        "{text}"
    );
    assert!(text.contains("hint: pass --tier auto"), "{text}");
    // Through the planner on this host, too: nothing runs.
    let on_host = build_on(&HostCaps::everything(), TierRequest::AppContainer);
    assert!(on_host.is_err());
}

#[test]
fn appcontainer_on_windows_outside_run_refuses_in_true_words() {
    let r = build::appcontainer_refusal(&policy(project_rules()), "windows", &fs::RealFs);
    assert_eq!(r.missing, KernelFeature::NotImplemented);
    let text = r.to_string();
    assert!(
        text.contains("runs `vetto run` only") || text.contains("never runs it unsandboxed"),
        "{text}"
    );
}

/// Landlock does not restrict chmod, chown or utime: at FS-ONLY each is
/// notified and decided by the supervisor; at FULL the read-only mounts
/// refuse them and nothing is notified; without user notification FS-ONLY
/// says it is weaker instead of running silently.
#[test]
fn mode_owner_and_time_changes_are_decided_at_fs_only_only() -> Result<(), Refusal> {
    let notified = |plan: &Plan| {
        let names: Vec<&str> = plan
            .seccomp
            .rules
            .iter()
            .filter(|r| r.action == syscalls::Action::Notify)
            .map(|r| r.name.as_str())
            .collect();
        syscalls::METADATA.iter().all(|m| names.contains(m))
    };
    let fs_only = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::FsOnly))?;
    assert!(fs_only.notify.metadata && notified(&fs_only));
    let full = build_on(&HostCaps::everything(), TierRequest::Exactly(Tier::Full))?;
    assert!(!full.notify.metadata && !notified(&full));

    let mut host = HostCaps::everything();
    host.seccomp_notify = Availability::Missing("no SECCOMP_FILTER_FLAG_NEW_LISTENER".into());
    let refused = build_on(&host, TierRequest::Exactly(Tier::FsOnly));
    assert!(
        refused.is_err(),
        "FS-ONLY without notification ran silently"
    );
    let plan = build::build_with_view(
        &policy(project_rules()),
        &host,
        TierRequest::Exactly(Tier::FsOnly),
        &BuildOptions {
            allow_degraded: true,
            ..options()
        },
        &project_fs(),
    )?;
    assert!(!plan.notify.metadata && !notified(&plan));
    assert!(
        plan.degraded
            .iter()
            .any(|d| d.contains("mode, owner and times of read-only files")),
        "{:?}",
        plan.degraded
    );
    Ok(())
}

#[test]
fn a_filter_that_notifies_creations_notifies_every_entry_change() {
    assert!(syscalls::plan(true, true, true).notifies_every_entry_change());
    assert!(syscalls::plan(false, true, false).notifies_every_entry_change());
    // Without creation notification nothing can be said of the job's
    // entries.
    assert!(!syscalls::plan(true, false, true).notifies_every_entry_change());
}

#[test]
fn a_creation_left_to_the_kernel_breaks_the_entry_promise() {
    for dropped in [
        "linkat",
        "renameat2",
        "mknodat",
        "openat2",
        "io_uring_setup",
        "ioctl",
    ] {
        let mut plan = syscalls::plan(true, true, true);
        plan.rules.retain(|r| r.name != dropped);
        assert!(!plan.notifies_every_entry_change(), "{dropped}");
    }
    // `openat` notified only for another flag is no promise either.
    let mut plan = syscalls::plan(true, true, true);
    for r in plan.rules.iter_mut().filter(|r| r.name == "openat") {
        r.when = vec![syscalls::ArgCheck::AnyBits {
            index: 2,
            mask: 0o1000,
        }];
    }
    assert!(!plan.notifies_every_entry_change());
}

/// btrfs's snapshot and subvolume ioctls make and remove directory entries
/// with no Landlock check and no notification: refused at every tier, by
/// type and number whatever the size bits say; a reflink clone (FICLONE,
/// the same type) is not.
#[test]
fn snapshot_ioctls_are_refused_and_reflinks_are_not() {
    let plan = syscalls::plan(false, false, false);
    let refused = |cmd: u64| {
        plan.rules.iter().any(|r| {
            r.name == "ioctl"
                && r.action == syscalls::Action::Deny
                && r.when.iter().all(|c| match *c {
                    syscalls::ArgCheck::MaskedEq {
                        index: 1,
                        mask,
                        value,
                    } => cmd & mask == value,
                    syscalls::ArgCheck::Eq { index: 1, value } => cmd == value,
                    _ => false,
                })
        })
    };
    // SNAP_CREATE, SUBVOL_CREATE_V2, SNAP_DESTROY_V2; a bcachefs command.
    for cmd in [0x5000_9401, 0x5000_9418, 0x5000_943f, 0x4020_bc10] {
        assert!(refused(cmd), "{cmd:#x}");
    }
    // FICLONE, TCGETS.
    for cmd in [0x4004_9409, 0x5401] {
        assert!(!refused(cmd), "{cmd:#x}");
    }
}

/// `check_creations = "after"` at FULL: the read-only mounts keep what
/// exists (and the directories on the way to it cannot be moved away), so
/// nothing is carved and no creation is notified; what no mount keeps (a
/// protected name not there yet) is left to the check after the session.
/// Below FULL nothing changes: only the carve keeps `.git/hooks` there.
#[test]
fn creations_checked_after_notify_no_creation_at_full_and_keep_every_protection_by_mounts()
-> Result<(), Refusal> {
    use super::mounts::Mount;
    let mut rules = project_rules();
    rules.push(rule("/p/.husky", Access::Protect));
    rules.push(rule("/p/src/main.rs", Access::Deny));
    // A mask not there yet: what the job creates there is its own file,
    // never set aside after the session.
    rules.push(rule("/p/.env.local", Access::Deny));
    let after = Policy {
        check_creations: crate::policy::CheckCreations::After,
        ..policy(rules.clone())
    };
    let build = |p: &Policy, tier| {
        build::build_with_view(
            p,
            &HostCaps::everything(),
            TierRequest::Exactly(tier),
            &options(),
            &project_fs(),
        )
    };
    let creations_notified = |plan: &Plan| {
        plan.seccomp
            .rules
            .iter()
            .any(|r| r.name == "mkdir" && r.action == Action::Notify)
    };

    let live = build(&policy(rules.clone()), Tier::Full)?;
    assert!(creations_notified(&live) && !live.notify.carved_dirs.is_empty());
    assert_eq!(live.checked_after, None);

    let plan = build(&after, Tier::Full)?;
    assert!(plan.notify.carved_dirs.is_empty(), "{:?}", plan.notify);
    assert!(!creations_notified(&plan));
    assert!(!plan.seccomp.notifies_every_entry_change());
    let landlock = plan
        .landlock
        .as_ref()
        .map(|l| l.rules.clone())
        .unwrap_or_default();
    assert!(
        landlock
            .iter()
            .any(|r| r.path == Path::new("/p") && r.access & rights::MAKE_REG != 0),
        "{landlock:?}"
    );
    let mounts = plan.namespaces.map(|n| n.mounts).unwrap_or_default();
    for (path, writable) in [
        ("/p/.git/hooks", false),
        ("/p/.git/config", false),
        ("/p/.git", true),
    ] {
        assert!(
            mounts.contains(&Mount::Bind {
                path: path.into(),
                writable
            }),
            "{path}: {mounts:?}"
        );
    }
    assert!(mounts.contains(&Mount::MaskFile {
        path: "/p/.env".into()
    }));
    // A masked file's directory stays free to move: its mask goes with it.
    assert!(
        !mounts.iter().any(|m| m.path() == Path::new("/p/src")),
        "{mounts:?}"
    );
    assert_eq!(plan.checked_after, Some(vec![PathBuf::from("/p/.husky")]));

    let below = build(&after, Tier::FsOnly)?;
    assert_eq!(
        below.notify.carved_dirs,
        build(&policy(rules), Tier::FsOnly)?.notify.carved_dirs
    );
    assert!(creations_notified(&below));
    assert_eq!(below.checked_after, None);
    Ok(())
}

/// A published port needs the job's listeners in a namespace vetto
/// reaches into: FULL, and FS-ONLY where user namespaces exist; refused at
/// SECCOMP, without user namespaces at FS-ONLY, and with the host's
/// network at every tier (before any tier is tried, so no hint leads to
/// another refusal).
#[test]
fn a_published_port_is_planned_where_the_jobs_servers_have_a_namespace() {
    let published = Policy {
        publish: vec![crate::policy::Publish {
            host: "127.0.0.1:8080".parse().unwrap_or_else(|_| unreachable!()),
            port: 3000,
            origin: rule("8080:3000", Access::Read).origin,
        }],
        ..policy(project_rules())
    };
    let at = |p: &Policy, host: &HostCaps, tier| {
        build::build_with_view(
            p,
            host,
            TierRequest::Exactly(tier),
            &BuildOptions {
                allow_degraded: true,
                ..options()
            },
            &project_fs(),
        )
    };
    for tier in [Tier::Full, Tier::FsOnly] {
        let plan = at(&published, &HostCaps::everything(), tier);
        assert_eq!(plan.map(|p| p.publish.len()).ok(), Some(1), "{tier}");
    }
    let e = at(&published, &HostCaps::everything(), Tier::Seccomp).err();
    assert!(
        e.as_ref()
            .is_some_and(|e| e.rule.contains("[network] publish")),
        "{e:?}"
    );
    let no_userns = HostCaps {
        userns: crate::host::Availability::Missing("off".into()),
        ..HostCaps::everything()
    };
    let e = at(&published, &no_userns, Tier::FsOnly).err();
    assert_eq!(e.map(|e| e.missing), Some(KernelFeature::UserNamespaces));
    let host_net = Policy {
        net: NetPolicy::Host,
        ..published.clone()
    };
    let e = at(&host_net, &HostCaps::everything(), Tier::Full).err();
    assert_eq!(e.as_ref().and_then(|e| e.tier), None, "{e:?}");
}
