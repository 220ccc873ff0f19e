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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantPlan {
    pub grants: Vec<AclGrant>,
    pub capabilities: Vec<Capability>,
    /// Filtered egress: the container may reach loopback (a loopback
    /// exemption, removed at the end) — where only the egress proxy listens
    /// for it, at `proxy_port`.
    pub loopback_exemption: bool,
    pub proxy_port: Option<u16>,
    /// The Job Object's limits.
    pub max_processes: Option<u32>,
    pub max_memory_bytes: Option<u64>,
}

/// What the Windows backend cannot enforce yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[non_exhaustive]
pub enum GrantRefusal {
    #[error(
        "`{rule}` masks {path:?} beneath the granted {granted:?}; the AppContainer backend does not place deny ACEs yet"
    )]
    MaskInsideGrant {
        rule: &'static str,
        path: PathBuf,
        granted: PathBuf,
    },
    #[error("unix socket {path:?}: the AppContainer backend does not grant AF_UNIX sockets yet")]
    UnixSocket { path: PathBuf },
    #[error("filtered egress needs the egress proxy's port before the grants are planned")]
    NoProxyPort,
}

/// Plan the grants. Every refusal is listed, not just the first.
pub fn plan(policy: &Policy, proxy_port: Option<u16>) -> Result<GrantPlan, Vec<GrantRefusal>> {
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

    let mut refusals = Vec::new();
    // A mask (or a read-only carve-out) beneath a grant would be reachable
    // through the inherited ACE: refused until deny ACEs are placed.
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
        let covering = grants.iter().find(|g| {
            beneath(&path, &g.path) && (access == Access::Deny || g.access == GrantAccess::Write)
        });
        if let Some(g) = covering {
            refusals.push(GrantRefusal::MaskInsideGrant {
                rule: access.as_str(),
                path,
                granted: g.path.clone(),
            });
        }
    }
    for u in &policy.unix {
        refusals.push(GrantRefusal::UnixSocket {
            path: u.path.clone(),
        });
    }
    let (capabilities, loopback_exemption) = match &policy.net {
        NetPolicy::Off => (Vec::new(), false),
        NetPolicy::Host => (
            vec![
                Capability::InternetClient,
                Capability::PrivateNetworkClientServer,
            ],
            false,
        ),
        NetPolicy::Allow { .. } => {
            if proxy_port.is_none() {
                refusals.push(GrantRefusal::NoProxyPort);
            }
            (Vec::new(), true)
        }
    };
    if !refusals.is_empty() {
        return Err(refusals);
    }
    Ok(GrantPlan {
        grants,
        capabilities,
        loopback_exemption,
        proxy_port: proxy_port.filter(|_| loopback_exemption),
        max_processes: policy.limits.max_procs,
        max_memory_bytes: policy.limits.max_memory,
    })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::policy::{EnvPolicy, FsRule, Limits, Origin};

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
            project: project.into(),
            session_tmp: "C:/Users/dev/AppData/Local/Temp/vetto-s1".into(),
            policy_file: None,
            sources: vec![],
            fs,
            outputs: vec![],
            net,
            unix: vec![],
            limits: Limits::default(),
            env: EnvPolicy::default(),
            min_tier: None,
            provenance: Default::default(),
            globs: vec![],
            discover: vec![],
            caches: vec![],
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
        let plan = plan(&p, None).unwrap();
        insta::assert_yaml_snapshot!("appcontainer_net_off", plan);
        assert!(plan.capabilities.is_empty());
        assert!(!plan.loopback_exemption);
    }

    #[test]
    fn filtered_egress_gets_the_loopback_exemption_and_no_capability() {
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
        let plan = plan(&p, Some(50000)).unwrap();
        assert!(plan.capabilities.is_empty());
        assert!(plan.loopback_exemption);
        assert_eq!(plan.proxy_port, Some(50000));
        let p2 = p.clone();
        assert_eq!(super::plan(&p2, None), Err(vec![GrantRefusal::NoProxyPort]));
    }

    #[test]
    fn a_mask_inside_the_project_is_refused_not_ignored() {
        let p = policy(
            "C:/src/proj",
            vec![
                rule("C:/src/proj", Access::Write),
                rule("C:/src/proj/.env", Access::Deny),
                rule("C:/src/proj/.git/hooks", Access::Protect),
            ],
            NetPolicy::Off,
        );
        let refusals = plan(&p, None).unwrap_err();
        assert_eq!(refusals.len(), 2, "{refusals:?}");
        assert!(
            refusals
                .iter()
                .all(|r| r.to_string().contains("C:/src/proj"))
        );
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
            let plan = plan(&p, None).unwrap();
            assert_eq!(plan.grants.len(), 2, "{name:?}");
            assert_eq!(plan.grants[0].path, Path::new(name));
            assert_eq!(plan.grants[0].access, GrantAccess::Write);
        }
    }
}
