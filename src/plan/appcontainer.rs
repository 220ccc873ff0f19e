//! `Policy → AppContainer grant plan` for the experimental Windows backend.
//! Pure, and compiled on every OS, so it is unit- and snapshot-tested on
//! Linux; applying it (the container profile, ACL grants to its SID, the
//! Job Object) belongs under `src/sandbox/`.
//!
//! An AppContainer (LPAC: no `ALL APPLICATION PACKAGES` access) reaches
//! only what an ACE names its SID for. So writes are granted by ACL on the
//! project, the session temp dir and the policy's write paths (removed when
//! the session ends), reads on the read paths, and a mask *outside* every
//! grant holds by construction. What this plan cannot enforce yet is a
//! [`GrantRefusal`] (exit 125 with the reason), never a silent gap.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fs::FsView;
use crate::policy::paths::beneath;
use crate::policy::{Access, NetPolicy, Policy};

/// Rights one ACE gives the container's SID (inherited by everything
/// beneath the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GrantAccess {
    /// `FILE_GENERIC_READ | FILE_GENERIC_EXECUTE`.
    Read,
    /// `FILE_GENERIC_READ | FILE_GENERIC_WRITE | FILE_GENERIC_EXECUTE | DELETE`.
    Write,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AclGrant {
    pub path: PathBuf,
    pub access: GrantAccess,
}

/// A well-known AppContainer capability SID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Capability {
    InternetClient,
    PrivateNetworkClientServer,
}

/// What a deny ACE for the container's SID takes away. Explicit ACEs come
/// before inherited ones, so each beats the grant it sits beneath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DenyAccess {
    /// A masked path (`deny`): every right, inherited beneath.
    All,
    /// A protected path beneath a write grant: writing, deleting, renaming
    /// and changing its ACL, inherited beneath.
    Write,
    /// An ancestor of a protected path, beneath the write grant: deleting
    /// and renaming it (which would take the protected path along and
    /// leave its name free). This object only.
    Delete,
    /// The nearest existing ancestor of a protected path that does not
    /// exist: creating anything in it (so the path cannot be made). This
    /// object only.
    Create,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AclDeny {
    pub path: PathBuf,
    pub access: DenyAccess,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantPlan {
    pub grants: Vec<AclGrant>,
    /// Masks and protections beneath the grants, as deny ACEs.
    pub denies: Vec<AclDeny>,
    /// None for network `off`. For `host`, `internetClient` and
    /// `privateNetworkClientServer`: the host's network as the container
    /// may have it — loopback stays out of reach (its exemption needs an
    /// administrator), which is less than asked, never more.
    pub capabilities: Vec<Capability>,
    /// The Job Object's limits.
    pub max_processes: Option<u32>,
    pub max_memory_bytes: Option<u64>,
    /// `--timeout` in milliseconds: the job object is terminated when it
    /// passes.
    pub timeout_ms: Option<u64>,
}

/// Everything the Windows launcher applies, and nothing it decides: the
/// grants, the job's scrubbed environment and its working directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchPlan {
    pub grants: GrantPlan,
    /// Output directories the build will create at the project root,
    /// made before the grants when the root takes no new entries (as at
    /// FS-ONLY on Linux).
    pub prepare_dirs: Vec<PathBuf>,
    pub env: super::env::EnvPlan,
    pub cwd: PathBuf,
}

/// What the Windows backend cannot enforce yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[non_exhaustive]
pub enum GrantRefusal {
    #[error("unix socket {path:?}: the AppContainer backend does not grant AF_UNIX sockets yet")]
    UnixSocket { path: PathBuf },
    #[error(
        "filtered egress: the egress proxy listens on loopback, and an AppContainer reaches loopback only through a loopback exemption, which needs an administrator; the AppContainer backend does not make one"
    )]
    FilteredEgress,
}

/// Plan the launch: the grants, then the environment and working
/// directory the other tiers give the job.
pub fn launch_plan(
    policy: &Policy,
    env: &[(String, String)],
    cwd: &Path,
    view: &dyn FsView,
) -> Result<LaunchPlan, Vec<GrantRefusal>> {
    let grants = plan(policy, view)?;
    let root_closed = grants
        .denies
        .iter()
        .any(|d| d.path == policy.project && d.access == DenyAccess::Create);
    let prepare_dirs = policy
        .outputs
        .iter()
        .filter(|_| root_closed)
        .filter(|name| super::job::announced(name, &policy.project, view))
        .map(|name| policy.project.join(name))
        .filter(|dir| {
            view.kind(dir).is_none()
                && crate::policy::paths::decide_rule(&policy.fs, dir).map(|r| r.access)
                    == Some(Access::Write)
        })
        .collect();
    let tmp = policy.session_tmp.to_string_lossy().into_owned();
    Ok(LaunchPlan {
        grants,
        prepare_dirs,
        env: super::env::plan(
            &policy.env,
            env,
            &super::job::session_env(&tmp, "appcontainer"),
        ),
        cwd: super::job::job_cwd_in(policy, cwd),
    })
}

/// `--tier appcontainer` on Windows, when the grant plan cannot enforce
/// the policy: every reason at once.
pub fn refusal(refusals: &[GrantRefusal]) -> super::Refusal {
    super::Refusal {
        tier: None,
        rule: "--tier appcontainer".to_owned(),
        missing: super::KernelFeature::NotImplemented,
        detail: refusals
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        hint: "remove or move the rules named (see docs/windows.md), or run the job under vetto on Linux or macOS; vetto never runs it unsandboxed".into(),
    }
}

/// Plan the grants, looking at what exists through `view`. Every refusal
/// is listed, not just the first.
pub fn plan(policy: &Policy, view: &dyn FsView) -> Result<GrantPlan, Vec<GrantRefusal>> {
    let mut grants: Vec<AclGrant> = Vec::new();
    let mut add = |path: &Path, access: GrantAccess| {
        if !grants.iter().any(|g| g.path == path && g.access == access) {
            grants.push(AclGrant {
                path: path.to_path_buf(),
                access,
            });
        }
    };
    for r in &policy.fs {
        match r.access {
            Access::Read => add(&r.path, GrantAccess::Read),
            Access::Write => add(&r.path, GrantAccess::Write),
            Access::Protect | Access::Deny => {}
        }
    }
    add(&policy.session_tmp, GrantAccess::Write);

    let denies = denies(policy, &grants, view);
    let mut refusals = Vec::new();
    for u in &policy.unix {
        refusals.push(GrantRefusal::UnixSocket {
            path: u.path.clone(),
        });
    }
    let capabilities = match &policy.net {
        NetPolicy::Off => Vec::new(),
        NetPolicy::Host => vec![
            Capability::InternetClient,
            Capability::PrivateNetworkClientServer,
        ],
        NetPolicy::Allow { .. } => {
            refusals.push(GrantRefusal::FilteredEgress);
            Vec::new()
        }
    };
    if !refusals.is_empty() {
        return Err(refusals);
    }
    Ok(GrantPlan {
        grants,
        denies,
        capabilities,
        max_processes: policy.limits.max_procs,
        max_memory_bytes: policy.limits.max_memory,
        timeout_ms: policy
            .limits
            .timeout
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    })
}

/// The deny ACEs that keep masks and protections beneath the grants: a
/// masked path that exists loses every right (one that does not exist
/// needs none: creating it only creates the job's own file); a protected
/// path beneath a write grant loses the write rights, its ancestors up to
/// the grant cannot be renamed away, and where it does not exist, its
/// nearest existing ancestor takes no new entries.
fn denies(policy: &Policy, grants: &[AclGrant], view: &dyn FsView) -> Vec<AclDeny> {
    let mut out: Vec<AclDeny> = Vec::new();
    let restricted = policy
        .fs
        .iter()
        .filter(|r| matches!(r.access, Access::Deny | Access::Protect))
        .map(|r| (r.access, r.path.clone()))
        .chain(
            policy
                .policy_file
                .iter()
                .map(|f| (Access::Protect, f.clone())),
        );
    for (access, path) in restricted {
        let covering: Vec<&AclGrant> = grants.iter().filter(|g| beneath(&path, &g.path)).collect();
        if access == Access::Deny {
            if !covering.is_empty() && view.kind(&path).is_some() {
                out.push(AclDeny {
                    path,
                    access: DenyAccess::All,
                });
            }
            continue;
        }
        // Protect: only a write grant could change it.
        let Some(root) = covering
            .iter()
            .filter(|g| g.access == GrantAccess::Write)
            .map(|g| g.path.as_path())
            .min_by_key(|p| p.components().count())
        else {
            continue;
        };
        let exists = view.kind(&path).is_some();
        if exists {
            out.push(AclDeny {
                path: path.clone(),
                access: DenyAccess::Write,
            });
        }
        let mut nearest_existing = None;
        for a in path.ancestors().skip(1) {
            if !beneath(a, root) {
                break;
            }
            if view.kind(a).is_none() {
                continue;
            }
            nearest_existing.get_or_insert(a);
            out.push(AclDeny {
                path: a.to_path_buf(),
                access: DenyAccess::Delete,
            });
        }
        if let (false, Some(a)) = (exists, nearest_existing) {
            out.push(AclDeny {
                path: a.to_path_buf(),
                access: DenyAccess::Create,
            });
        }
    }
    // One entry per path and access; `Write` already denies what `Delete`
    // and `Create` would, and `All` everything.
    out.sort_by(|a, b| a.path.cmp(&b.path).then(a.access.cmp(&b.access)));
    out.dedup();
    let strongest: Vec<(PathBuf, DenyAccess)> = out
        .iter()
        .filter(|d| matches!(d.access, DenyAccess::All | DenyAccess::Write))
        .map(|d| (d.path.clone(), d.access))
        .collect();
    out.retain(|d| !strongest.iter().any(|(p, a)| p == &d.path && *a < d.access));
    out
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::plan::fs::EntryKind;
    use crate::policy::{FsRule, Origin};

    /// These paths exist (directories, or files when named `.env`).
    struct Exists(&'static [&'static str]);

    impl FsView for Exists {
        fn kind(&self, path: &Path) -> Option<EntryKind> {
            self.0.iter().find(|p| Path::new(p) == path).map(|p| {
                if p.ends_with(".env") {
                    EntryKind::File { nlink: 1 }
                } else {
                    EntryKind::Dir
                }
            })
        }
        fn children(&self, _dir: &Path) -> Vec<std::ffi::OsString> {
            Vec::new()
        }
        fn read_link(&self, _path: &Path) -> Option<PathBuf> {
            None
        }
        fn socket_at(&self, _path: &Path) -> Option<PathBuf> {
            None
        }
    }

    const NOTHING: Exists = Exists(&[]);

    fn rule(path: &str, access: Access) -> FsRule {
        FsRule {
            path: path.into(),
            access,
            origin: Origin {
                source: "vetto.toml".into(),
                line: 1,
                col: 1,
                written: path.into(),
            },
        }
    }

    fn policy(project: &str, fs: Vec<FsRule>, net: NetPolicy) -> Policy {
        Policy {
            fs,
            net,
            ..Policy::empty(project, "C:/Users/dev/AppData/Local/Temp/vetto-s1")
        }
    }

    #[test]
    fn net_off_grants_the_project_and_tmp_and_no_capability() {
        let p = policy(
            "C:/src/proj",
            vec![
                rule("C:/src/proj", Access::Write),
                rule("C:/Users/dev/.cargo", Access::Read),
                rule("C:/Users/dev/.ssh", Access::Deny),
            ],
            NetPolicy::Off,
        );
        let plan = plan(&p, &NOTHING).unwrap();
        insta::assert_yaml_snapshot!("appcontainer_net_off", plan);
        assert!(plan.capabilities.is_empty());
    }

    #[test]
    fn net_host_gets_the_internet_capabilities() {
        let p = policy(
            "C:/src/proj",
            vec![rule("C:/src/proj", Access::Write)],
            NetPolicy::Host,
        );
        assert_eq!(
            plan(&p, &NOTHING).unwrap().capabilities,
            [
                Capability::InternetClient,
                Capability::PrivateNetworkClientServer
            ]
        );
    }

    /// The proxy is on loopback, which a container reaches only through an
    /// administrator's exemption: refused, never opened instead.
    #[test]
    fn filtered_egress_is_refused_for_the_loopback_exemption() {
        let p = policy(
            "C:/src/proj",
            vec![rule("C:/src/proj", Access::Write)],
            NetPolicy::Allow {
                hosts: vec![],
                deny: vec![],
                ips: vec![],
                resolve: vec![],
            },
        );
        let refusals = plan(&p, &NOTHING).unwrap_err();
        assert_eq!(refusals, vec![GrantRefusal::FilteredEgress]);
        assert!(refusals[0].to_string().contains("administrator"));
    }

    #[test]
    fn the_launch_plan_scrubs_the_environment_and_starts_in_the_project() {
        let p = policy(
            "C:/src/proj",
            vec![rule("C:/src/proj", Access::Write)],
            NetPolicy::Off,
        );
        let env = [
            ("AWS_SECRET_ACCESS_KEY".to_string(), "x".to_string()),
            ("PATH".to_string(), "C:/bin".to_string()),
        ];
        let lp = launch_plan(&p, &env, Path::new("C:/elsewhere"), &NOTHING).unwrap();
        assert_eq!(lp.cwd, Path::new("C:/src/proj"));
        assert!(
            lp.env
                .vars
                .iter()
                .all(|(k, _)| k != "AWS_SECRET_ACCESS_KEY")
        );
        assert!(
            lp.env
                .vars
                .iter()
                .any(|(k, v)| k == "VETTO_TIER" && v == "appcontainer")
        );
    }

    /// A masked `.env` and a protected `.git/hooks` inside the writable
    /// project: deny ACEs, not a silent gap and not a refusal.
    #[test]
    fn masks_inside_the_project_become_deny_aces() {
        let p = policy(
            "C:/src/proj",
            vec![
                rule("C:/src/proj", Access::Write),
                rule("C:/src/proj/.env", Access::Deny),
                rule("C:/src/proj/sub/.env", Access::Deny),
                rule("C:/src/proj/.git/hooks", Access::Protect),
                rule("C:/src/proj/.git/config", Access::Protect),
                rule("C:/Users/dev/.ssh", Access::Deny),
            ],
            NetPolicy::Off,
        );
        // `.git/hooks` is there; `.git/config` and `sub/.env` are not.
        let view = Exists(&[
            "C:/src/proj",
            "C:/src/proj/.env",
            "C:/src/proj/.git",
            "C:/src/proj/.git/hooks",
            "C:/Users/dev/.ssh",
        ]);
        let plan = plan(&p, &view).unwrap();
        insta::assert_yaml_snapshot!("appcontainer_denies", plan.denies);
        let has = |path: &str, access| {
            plan.denies
                .iter()
                .any(|d| d.path == Path::new(path) && d.access == access)
        };
        assert!(has("C:/src/proj/.env", DenyAccess::All));
        assert!(has("C:/src/proj/.git/hooks", DenyAccess::Write));
        // `.git` cannot be renamed away, nor `config` created in it.
        assert!(has("C:/src/proj/.git", DenyAccess::Delete));
        assert!(has("C:/src/proj/.git", DenyAccess::Create));
        assert!(has("C:/src/proj", DenyAccess::Delete));
        // Outside every grant, and not there: nothing to deny.
        assert!(!plan.denies.iter().any(|d| d.path.starts_with("C:/Users")));
        assert!(!plan.denies.iter().any(|d| d.path.ends_with("sub/.env")));
    }

    #[test]
    fn a_protected_policy_file_at_the_root_is_denied_writes_and_the_root_its_rename() {
        let mut p = policy(
            "C:/src/proj",
            vec![rule("C:/src/proj", Access::Write)],
            NetPolicy::Off,
        );
        p.policy_file = Some("C:/src/proj/vetto.toml".into());
        let view = Exists(&["C:/src/proj", "C:/src/proj/vetto.toml"]);
        let plan = plan(&p, &view).unwrap();
        assert_eq!(
            plan.denies,
            vec![
                AclDeny {
                    path: "C:/src/proj".into(),
                    access: DenyAccess::Delete
                },
                AclDeny {
                    path: "C:/src/proj/vetto.toml".into(),
                    access: DenyAccess::Write
                },
            ]
        );
    }

    /// A protected name missing at the root closes the root to new
    /// entries: the outputs a build announces are made first.
    #[test]
    fn a_closed_root_gets_its_announced_outputs_made_first() {
        let mut p = policy(
            "C:/src/proj",
            vec![
                rule("C:/src/proj", Access::Write),
                rule("C:/src/proj/lefthook.yml", Access::Protect),
            ],
            NetPolicy::Off,
        );
        p.outputs = vec!["target".into(), "node_modules".into()];
        let view = Exists(&["C:/src/proj", "C:/src/proj/Cargo.toml"]);
        let lp = launch_plan(&p, &[], Path::new("C:/src/proj"), &view).unwrap();
        assert!(lp.grants.denies.contains(&AclDeny {
            path: "C:/src/proj".into(),
            access: DenyAccess::Create
        }));
        assert_eq!(lp.prepare_dirs, vec![PathBuf::from("C:/src/proj/target")]);
    }

    /// A grant names its path as data: a hostile name is one grant of its
    /// own exact bytes, and cannot widen another grant.
    #[test]
    fn hostile_path_names_are_granted_verbatim_and_nothing_else() {
        for name in [
            "C:/src/a\"b",
            "C:/src/x) (allow default",
            "C:/src/back\\slash",
            "C:/src/new\nline",
            "C:/src/..\\..\\Windows",
        ] {
            let p = policy(name, vec![rule(name, Access::Write)], NetPolicy::Off);
            let plan = plan(&p, &NOTHING).unwrap();
            assert_eq!(plan.grants.len(), 2, "{name:?}");
            assert_eq!(plan.grants[0].path, Path::new(name));
            assert_eq!(plan.grants[0].access, GrantAccess::Write);
        }
    }
}
