//! The tier ladder: choose a tier and translate the policy for it.

use std::path::{Path, PathBuf};

use super::fs::{self, FsView, LandlockPlan, LandlockRule, NotifyPlan, RealFs, rights};
use super::job::{announced, job_cwd_in, session_env};
use super::{KernelFeature, Plan, Refusal, Tier, TierRequest, env, memory, mounts, syscalls};
use crate::host::HostCaps;
use crate::policy::{Access, CheckCreations, FsRule, NetPolicy, Origin, Policy};

/// The newest Landlock ABI vetto knows how to use.
pub const MAX_LANDLOCK_ABI: u8 = 7;

/// World-writable host directories every process shares.
const SHARED_DIRS: [&str; 2] = ["/dev/shm", "/dev/mqueue"];

/// The FULL tier's private /tmp, which is also its `TMPDIR`.
const PRIVATE_TMP: &str = "/tmp";

/// Inputs to planning that come from the invocation rather than the policy.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    pub allow_degraded: bool,
    /// The caller's environment, scrubbed into the job's.
    pub env: Vec<(String, String)>,
    /// Where vetto was started; the job starts there when it is inside the
    /// project, else at the project root.
    pub cwd: PathBuf,
    /// `--audit`: enforce nothing, record what the policy would refuse.
    pub audit: bool,
    /// The terminals vetto runs on (its standard streams'), the job's own:
    /// the only host terminals a grant of `/dev/pts` reaches (see
    /// [`super::terminal`]).
    pub terminals: Vec<PathBuf>,
}

/// Choose the tier and translate the policy for it, against the real filesystem.
pub fn build(
    policy: &Policy,
    host: &HostCaps,
    request: TierRequest,
    options: &BuildOptions,
) -> Result<Plan, Refusal> {
    build_with_view(
        policy,
        host,
        request,
        options,
        &fs::Remembered::new(&RealFs),
    )
}

/// `--tier appcontainer` through this plan: nothing runs. Off Windows the
/// platform has no AppContainer; on Windows the grant plan's own refusals
/// come first, and a policy it could grant runs only through `vetto run`
/// (`session::appcontainer`, the launcher), never through this plan.
pub(super) fn appcontainer_refusal(policy: &Policy, os: &str, view: &dyn FsView) -> Refusal {
    let rule = "--tier appcontainer".to_owned();
    if os != "windows" {
        return Refusal {
            tier: None,
            rule,
            missing: KernelFeature::AppContainer,
            detail: format!("AppContainer exists only on Windows; this is {os}"),
            hint: "pass --tier auto (or full, fs-only, seccomp) for this platform's sandbox".into(),
        };
    }
    match super::appcontainer::plan(policy, view) {
        Err(refusals) => super::appcontainer::refusal(&refusals),
        Ok(_) => Refusal {
            tier: None,
            rule,
            missing: KernelFeature::NotImplemented,
            detail: "the AppContainer launcher runs `vetto run` only; this command's sandbox \
                     is the Linux or macOS one"
                .into(),
            hint: "use `vetto run --tier appcontainer`".into(),
        },
    }
}

/// A shortfall of one tier for this policy: what it cannot enforce and why.
#[derive(Debug, Clone)]
struct Gap {
    rule: String,
    missing: KernelFeature,
    detail: String,
    /// Whether `--allow-degraded` may accept it (a missing feature the tier
    /// cannot work without at all is never acceptable).
    degradable: bool,
    /// Accepted by naming the tier (`--tier seccomp` says "no filesystem
    /// isolation" as plainly as `--allow-degraded` does).
    accepted_by_naming: bool,
    /// What to do instead, where the generic advice would be wrong.
    hint: Option<String>,
}

/// The filtered-egress rule, as written: its first entry and where.
fn egress_rule(policy: &Policy) -> String {
    let NetPolicy::Allow {
        hosts, ips, deny, ..
    } = &policy.net
    else {
        return "filtered egress".into();
    };
    let first = hosts
        .first()
        .map(|h| (h.host.clone(), &h.origin))
        .or_else(|| ips.first().map(|r| (r.to_string(), &r.origin)))
        .or_else(|| deny.first().map(|h| (h.host.clone(), &h.origin)));
    match first {
        Some((what, origin)) => format!("filtered egress (allow {what}, {origin})"),
        None => "filtered egress ([network] mode = \"allow\")".into(),
    }
}

pub fn build_with_view(
    policy: &Policy,
    host: &HostCaps,
    request: TierRequest,
    options: &BuildOptions,
    view: &dyn FsView,
) -> Result<Plan, Refusal> {
    if request == TierRequest::AppContainer {
        return Err(appcontainer_refusal(policy, std::env::consts::OS, view));
    }
    check_unix_sockets(policy, view)?;
    // No tier publishes from the host's own network: said before any tier
    // is tried, so that no hint leads to another refusal.
    if let (Some(first), NetPolicy::Host) = (policy.publish.first(), &policy.net) {
        return Err(Refusal {
            tier: None,
            rule: format!(
                "[network] publish {} → the job's port {} ({})",
                first.host, first.port, first.origin
            ),
            missing: KernelFeature::NotImplemented,
            detail: "with the host's network the job's listeners are the host's own already".into(),
            hint: "remove the publish rule (with --net host the job's servers face the host directly), or use --net off or --allow-domain".into(),
        });
    }
    if options.audit {
        return audit_plan(policy, host, options);
    }
    let floor = policy.min_tier.unwrap_or(Tier::Seccomp);
    let candidates: Vec<Tier> = match request {
        TierRequest::Exactly(t) => vec![t],
        // macOS has one tier of its own.
        TierRequest::Auto if host.seatbelt.is_available() => [Tier::Seatbelt]
            .into_iter()
            .filter(|t| *t >= floor)
            .collect(),
        TierRequest::Auto => Tier::ALL.into_iter().filter(|t| *t >= floor).collect(),
        TierRequest::AppContainer => Vec::new(),
    };
    if let TierRequest::Exactly(t) = request
        && t < floor
    {
        return Err(Refusal {
            tier: Some(t),
            rule: format!("min_tier = \"{floor}\""),
            missing: KernelFeature::NotImplemented,
            detail: format!("the policy accepts no tier below {floor}"),
            hint: format!("use --tier {floor} or lower min_tier in the policy"),
        });
    }
    let mut first_refusal: Option<Refusal> = None;
    for tier in candidates {
        let gaps = gaps(policy, host, tier);
        let blocking: Vec<&Gap> = gaps
            .iter()
            .filter(|g| {
                let named = request == TierRequest::Exactly(tier) && g.accepted_by_naming;
                !(g.degradable && (options.allow_degraded || named))
            })
            .collect();
        if let Some(gap) = blocking.first() {
            // `auto` keeps looking only past tiers the host lacks outright;
            // a tier that runs but would leave a rule unenforced is refused.
            let refusal = refusal_for(tier, gap, request);
            if request == TierRequest::Auto && !gap.degradable {
                first_refusal.get_or_insert(refusal);
                continue;
            }
            return Err(refusal);
        }
        let degraded = gaps
            .iter()
            .map(|g| {
                format!(
                    "tier {tier}: {} not enforced ({}; needs {})",
                    g.rule, g.detail, g.missing
                )
            })
            .collect();
        if tier == Tier::Seatbelt {
            return seatbelt_plan(policy, options, view);
        }
        return Ok(plan_for(policy, host, tier, options, view, degraded));
    }
    Err(first_refusal.unwrap_or_else(|| Refusal {
        tier: None,
        rule: format!("min_tier = \"{floor}\""),
        missing: KernelFeature::NotImplemented,
        detail: "no tier satisfies the policy on this host".into(),
        hint: "run `vetto doctor` to see what this host can enforce".into(),
    }))
}

fn refusal_for(tier: Tier, gap: &Gap, request: TierRequest) -> Refusal {
    let hint = if let Some(hint) = &gap.hint {
        hint.clone()
    } else if gap.degradable {
        format!(
            "pass --allow-degraded to run at tier {tier} without this rule, or fix the host (see `vetto doctor`)"
        )
    } else if request == TierRequest::Auto {
        "no weaker tier can enforce this policy; run `vetto doctor` for what the host lacks".into()
    } else {
        match tier {
            Tier::Full => {
                "use --tier fs-only, or --tier auto to take the strongest available tier".into()
            }
            _ => "run `vetto doctor` for what the host lacks".into(),
        }
    };
    Refusal {
        tier: Some(tier),
        rule: gap.rule.clone(),
        missing: gap.missing,
        detail: gap.detail.clone(),
        hint,
    }
}

fn hard(rule: &str, missing: KernelFeature, detail: &str) -> Gap {
    Gap {
        rule: rule.into(),
        missing,
        detail: detail.into(),
        degradable: false,
        accepted_by_naming: false,
        hint: None,
    }
}

/// What the SEATBELT tier cannot enforce of `policy` on `host`.
fn seatbelt_gaps(host: &HostCaps) -> Vec<Gap> {
    let mut gaps = Vec::new();
    if let crate::host::Availability::Missing(why) = &host.seatbelt {
        gaps.push(Gap {
            hint: Some("the SEATBELT tier is macOS's; use --tier auto".into()),
            ..hard("the SEATBELT tier", KernelFeature::Seatbelt, why)
        });
    }
    gaps
}

/// What `tier` cannot enforce of `policy` on `host`.
fn gaps(policy: &Policy, host: &HostCaps, tier: Tier) -> Vec<Gap> {
    if tier == Tier::Seatbelt {
        let mut gaps = seatbelt_gaps(host);
        gaps.extend(publish_gaps(policy, host, tier));
        return gaps;
    }
    let mut gaps = Vec::new();
    // On macOS Linux's tiers are named, not offered.
    if host.seatbelt.is_available() {
        gaps.push(Gap {
            hint: Some("use --tier seatbelt, or --tier auto".into()),
            ..hard(
                &format!("the {tier} tier"),
                KernelFeature::Seccomp,
                "Landlock, namespaces and seccomp are Linux's; this host is macOS, whose tier is seatbelt",
            )
        });
        return gaps;
    }
    if let crate::host::Availability::Missing(why) = &host.seccomp {
        gaps.push(hard("the syscall filter", KernelFeature::Seccomp, why));
    }
    let has_fs_rules = !policy.fs.is_empty();
    let landlock_why = host.landlock_missing.clone().unwrap_or_default();
    match tier {
        Tier::Full => {
            if let crate::host::Availability::Missing(why) = &host.userns {
                gaps.push(hard(
                    "the FULL tier's namespaces",
                    KernelFeature::UserNamespaces,
                    why,
                ));
            }
            if host.landlock_abi == 0 {
                gaps.push(hard(
                    "filesystem rules",
                    KernelFeature::LandlockAbi(1),
                    &landlock_why,
                ));
            } else if host.landlock_abi < 3 {
                gaps.push(Gap {
                    rule: "read-only and protected paths (Landlock layer)".into(),
                    missing: KernelFeature::LandlockAbi(3),
                    detail: format!(
                        "this kernel has ABI {}: truncate(2) is not restricted by Landlock",
                        host.landlock_abi
                    ),
                    degradable: true,
                    accepted_by_naming: false,
                    hint: None,
                });
            }
        }
        Tier::FsOnly => {
            if host.landlock_abi == 0 {
                gaps.push(hard(
                    "filesystem rules",
                    KernelFeature::LandlockAbi(1),
                    &landlock_why,
                ));
            } else {
                let abi = host.landlock_abi;
                if abi < 3 {
                    gaps.push(Gap {
                        rule: "read-only and protected paths".into(),
                        missing: KernelFeature::LandlockAbi(3),
                        detail: format!("this kernel has ABI {abi}: truncate(2) is not restricted"),
                        degradable: true,
                        accepted_by_naming: false,
                        hint: None,
                    });
                }
                if abi < 6 {
                    gaps.push(Gap {
                        rule: "isolation of signals and abstract unix sockets".into(),
                        missing: KernelFeature::LandlockAbi(6),
                        detail: format!(
                            "this kernel has ABI {abi}: the job can signal host processes"
                        ),
                        degradable: true,
                        accepted_by_naming: false,
                        hint: None,
                    });
                }
            }
        }
        Tier::Seatbelt => {}
        Tier::Seccomp => {
            if has_fs_rules {
                gaps.push(Gap {
                    rule: "filesystem rules".into(),
                    missing: KernelFeature::LandlockAbi(1),
                    detail: "the SECCOMP tier has no filesystem isolation".into(),
                    degradable: true,
                    accepted_by_naming: true,
                    hint: None,
                });
            }
        }
    }
    // Filtered egress: every TCP connection through the proxy. FULL needs
    // nothing more than its namespace; FS-ONLY decides each notified
    // connect; the SECCOMP tier is not offered it.
    if let NetPolicy::Allow { .. } = &policy.net {
        let rule = egress_rule(policy);
        match tier {
            Tier::Full | Tier::Seatbelt => {}
            Tier::FsOnly => {
                if let crate::host::Availability::Missing(why) = &host.seccomp_notify {
                    gaps.push(Gap {
                        hint: Some(
                            "use --tier full (needs unprivileged user namespaces), or --net off, or say --net host for unrestricted network".into(),
                        ),
                        ..hard(
                            &rule,
                            KernelFeature::SeccompUserNotify,
                            &format!(
                                "without a network namespace, filtered egress redirects each notified connect() to the proxy: {why}"
                            ),
                        )
                    });
                }
            }
            Tier::Seccomp => gaps.push(Gap {
                hint: Some(
                    "use --tier fs-only or --tier full, or --net off, or say --net host for unrestricted network".into(),
                ),
                ..hard(
                    &rule,
                    KernelFeature::NotImplemented,
                    "vetto filters egress at the FULL and FS-ONLY tiers only",
                )
            }),
        }
    }
    // At FULL with the host's network there is no network namespace to
    // keep the host's abstract unix sockets apart: Landlock's scoping
    // (ABI 6) or the supervisor's reproduction of it (user notification)
    // must, or the tier enforces less than it says.
    if tier == Tier::Full
        && policy.net == NetPolicy::Host
        && host.landlock_abi >= 1
        && host.landlock_abi < 6
        && !host.seccomp_notify.is_available()
    {
        gaps.push(Gap {
            rule: "isolation of abstract unix sockets with the host network".into(),
            missing: KernelFeature::LandlockAbi(6),
            detail: format!(
                "this kernel has Landlock ABI {} and no seccomp user notification: with \
                 --net host the job can reach the host's abstract unix sockets",
                host.landlock_abi
            ),
            degradable: true,
            accepted_by_naming: false,
            hint: None,
        });
    }
    // At FULL read-only paths are read-only mounts; at FS-ONLY Landlock
    // leaves mode, owner and time changes to the supervisor.
    if let crate::host::Availability::Missing(why) = &host.seccomp_notify
        && tier == Tier::FsOnly
    {
        gaps.push(Gap {
            rule: "keeping the mode, owner and times of read-only files (chmod, chown, touch)"
                .into(),
            missing: KernelFeature::SeccompUserNotify,
            detail: format!("Landlock does not restrict them: {why}"),
            degradable: true,
            accepted_by_naming: false,
            hint: None,
        });
    }
    // At FULL the host's sockets are simply absent from the view.
    if let crate::host::Availability::Missing(why) = &host.seccomp_notify
        && tier == Tier::FsOnly
    {
        gaps.push(Gap {
            rule: "blocking connections to host unix sockets (ssh-agent, docker)".into(),
            missing: KernelFeature::SeccompUserNotify,
            detail: why.clone(),
            degradable: true,
            accepted_by_naming: false,
            hint: None,
        });
    }
    gaps.extend(publish_gaps(policy, host, tier));
    gaps
}

/// `[network] publish` needs the job's listeners in a network namespace
/// of their own, which vetto reaches into: FULL's, or at FS-ONLY the one
/// the job's sockets are made in (user namespaces and user notification).
fn publish_gaps(policy: &Policy, host: &HostCaps, tier: Tier) -> Option<Gap> {
    let first = policy.publish.first()?;
    let rule = format!(
        "[network] publish {} → the job's port {} ({})",
        first.host, first.port, first.origin
    );
    let gap = |missing, detail: &str, hint: &str| Gap {
        hint: Some(hint.into()),
        ..hard(&rule, missing, detail)
    };
    match tier {
        Tier::Full => None,
        Tier::FsOnly => {
            let missing = [
                (&host.userns, KernelFeature::UserNamespaces),
                (&host.seccomp_notify, KernelFeature::SeccompUserNotify),
            ]
            .into_iter()
            .find_map(|(a, f)| match a {
                crate::host::Availability::Missing(why) => Some((f, why.clone())),
                _ => None,
            });
            missing.map(|(f, why)| {
                gap(
                    f,
                    &format!("the job's servers live in a network namespace vetto makes: {why}"),
                    "remove the publish rule, or run on a host with unprivileged user namespaces",
                )
            })
        }
        Tier::Seccomp | Tier::Seatbelt => Some(gap(
            KernelFeature::NotImplemented,
            "this tier gives the job no network namespace of its own to publish from",
            "use --tier full or --tier fs-only, or remove the publish rule",
        )),
    }
}

/// `[network] unix`: each entry must be a socket when the session starts
/// (the supervisor allows the inode found then, never a path alone), and
/// not in a path the policy denies (FULL could not show it there).
fn check_unix_sockets(policy: &Policy, view: &dyn FsView) -> Result<(), Refusal> {
    for u in &policy.unix {
        let rule = format!("[network] unix {} ({})", u.path.display(), u.origin);
        let real = view.socket_at(&u.path);
        let denied = |p: &Path| fs::decide_rule(&policy.fs, p).filter(|r| r.access == Access::Deny);
        if let Some(deny) = denied(&u.path).or_else(|| real.as_deref().and_then(denied)) {
            return Err(Refusal {
                tier: None,
                rule,
                missing: KernelFeature::UnixSocket,
                detail: format!("it lies in a denied path ({})", deny.origin),
                hint: "move the socket out of the denied path, or remove the entry".into(),
            });
        }
        if real.is_none() {
            let found = if view.kind(&u.path).is_some() {
                "what is there is not a socket"
            } else {
                "nothing is there"
            };
            return Err(Refusal {
                tier: None,
                rule,
                missing: KernelFeature::UnixSocket,
                detail: found.into(),
                hint: "start the service that listens there first, or remove the entry \
                       (vetto allows the socket found when the session starts)"
                    .into(),
            });
        }
    }
    Ok(())
}

/// The sockets `[network] unix` names, for the supervisor.
fn unix_sockets(policy: &Policy) -> Vec<PathBuf> {
    policy.unix.iter().map(|u| u.path.clone()).collect()
}

/// What the supervisor does with a `connect()` other than to a unix socket.
fn net_connect(net: &NetPolicy, own_netns: bool) -> fs::NetConnect {
    match (net, own_netns) {
        (NetPolicy::Host, _) => fs::NetConnect::Open,
        (_, true) => fs::NetConnect::LoopbackOnly,
        (NetPolicy::Off, false) => fs::NetConnect::Closed,
        (NetPolicy::Allow { .. }, false) => fs::NetConnect::Proxy,
    }
}

fn plan_for(
    policy: &Policy,
    host: &HostCaps,
    tier: Tier,
    options: &BuildOptions,
    view: &dyn FsView,
    degraded: Vec<String>,
) -> Plan {
    let notify_available = host.seccomp_notify.is_available();
    let net_off = policy.net == NetPolicy::Off;
    // At FULL the network namespace is the wall (loopback stays usable);
    // below it, seccomp and Landlock refuse the sockets themselves.
    let own_netns = tier == Tier::Full && policy.net != NetPolicy::Host;
    let filter_net = net_off && !own_netns;
    // Filtered egress below FULL: only TCP internet sockets, each connect
    // decided by the supervisor (`NetConnect::Proxy`).
    let egress = match (&policy.net, own_netns) {
        (NetPolicy::Allow { .. }, true) => Some(super::net::EgressPlan::Netns),
        (NetPolicy::Allow { .. }, false) => Some(super::net::EgressPlan::Redirect),
        _ => None,
    };
    let tcp_only = egress == Some(super::net::EgressPlan::Redirect);
    // Its UDP sockets come from a network namespace of vetto's own that
    // leads nowhere (`NotifyPlan::udp_dead_net`), where one can be made.
    // So do they at FS-ONLY with the network off, where that namespace's
    // DNS stub refuses every name (and so records the name asked), and
    // there its TCP sockets too: the job's own loopback servers work, as
    // in FULL's namespace of its own (issue P11).
    let off_dead_net = filter_net && tier == Tier::FsOnly;
    let udp_dead_net = (tcp_only || off_dead_net) && notify_available && host.userns.is_available();
    // At FULL, /tmp is the sandbox's own tmpfs: writable, but carved like
    // any other root around what the policy binds beneath it (a project
    // under /tmp keeps its protected .git).
    let mut rules = policy.fs.clone();
    if tier == Tier::Full {
        rules.push(FsRule {
            path: PRIVATE_TMP.into(),
            access: Access::Write,
            origin: Origin {
                source: "built-in".into(),
                line: 0,
                col: 0,
                written: "the FULL tier's private /tmp".into(),
            },
        });
    }
    // Where the job's TMPDIR lives: the private /tmp when it is wholly
    // writable, else a per-session directory vetto creates on the host
    // (granted explicitly: it does not exist yet while planning).
    let mut session_tmp = Some(policy.session_tmp.clone());
    // Below FULL the host's /dev/pts is shared by every terminal of the
    // user: a grant of it means the job's own terminal only, and the
    // slaves of ptys the job creates are opened by the supervisor.
    let shared_pts = if tier == Tier::FsOnly {
        super::terminal::shared_pts_rules(&rules, &options.terminals)
    } else {
        Vec::new()
    };
    let pty_peer = !shared_pts.is_empty() && notify_available;
    rules.extend(shared_pts);
    let console = (tier == Tier::Full)
        .then(|| super::terminal::console(&rules, &options.terminals))
        .flatten();
    // Only FULL has mounts to keep what exists read-only; below it
    // creations are checked live whatever the policy says.
    let creations_after = tier == Tier::Full && policy.check_creations == CheckCreations::After;
    let mut checked_after = None;
    // The directories between a writable path and what the mounts keep
    // beneath it, bound onto themselves so that none can be renamed or
    // removed (a mount point cannot): else `mv .git .git2` would carry the
    // read-only `hooks` away and leave a fresh `.git` to fill.
    let mut pinned = Vec::new();
    let (landlock, notify, prepare_dirs) = if tier >= Tier::FsOnly && host.landlock_abi > 0 {
        let abi = host.landlock_abi.min(MAX_LANDLOCK_ABI);
        let handled = rights::all_for_abi(abi);
        // At FULL a masked path is covered by an empty mount, so Landlock
        // treats it as read-only rather than carving its parent down to
        // listing only: files the job creates next to a masked `.env`
        // then stay readable to it (see docs/tiers.md).
        let landlock_rules: Vec<FsRule> = if tier == Tier::Full {
            rules
                .iter()
                .map(|r| FsRule {
                    access: if r.access == Access::Deny {
                        Access::Protect
                    } else {
                        r.access
                    },
                    ..r.clone()
                })
                .collect()
        } else {
            rules.clone()
        };
        // At FULL the private /tmp holds only what the policy binds beneath
        // it: carve it as the sandbox sees it, not as the host's /tmp.
        let sandbox_view = PrivateTmpView {
            host: view,
            beneath: rules
                .iter()
                .filter(|r| r.path.as_path() != Path::new(PRIVATE_TMP))
                .filter_map(|r| r.path.strip_prefix(PRIVATE_TMP).ok())
                .filter_map(|rest| rest.components().next())
                .map(|c| c.as_os_str().to_os_string())
                .collect(),
        };
        let carve_view: &dyn FsView = if tier == Tier::Full {
            &sandbox_view
        } else {
            view
        };
        // `check_creations = "after"`: a path kept read-only (or masked)
        // beneath a writable one is a mount of its own at FULL, which the
        // kernel keeps whatever Landlock grants; so Landlock grants the
        // writable path whole, nothing is carved, and no creation needs the
        // supervisor. What no mount keeps is checked after the session.
        let landlock_rules = if creations_after {
            let (kept_by_mounts, rest) = beneath_writable(landlock_rules);
            // A masked path needs neither: its mount goes wherever its
            // directory is moved, still masking, and one not there yet
            // only ever holds the job's own file.
            // (Here a mask reads `Protect`, as Landlock treats it at FULL:
            // told apart by the policy's own rules.)
            let masked = |p: &Path| {
                rules
                    .iter()
                    .any(|r| r.path == p && r.access == Access::Deny)
            };
            let read_only: Vec<FsRule> = kept_by_mounts
                .into_iter()
                .filter(|r| matches!(r.access, Access::Read | Access::Protect) && !masked(&r.path))
                .collect();
            pinned = pinned_ancestors(&read_only, &rest, view);
            checked_after = Some(
                read_only
                    .into_iter()
                    .filter(
                        |r| !matches!(view.kind(&r.path), Some(k) if k != fs::EntryKind::Symlink),
                    )
                    .map(|r| r.path)
                    .collect(),
            );
            rest
        } else {
            landlock_rules
        };
        let mut carved = fs::carve(&landlock_rules, handled, carve_view);
        // At FULL /tmp is the sandbox's own tmpfs. What the policy binds
        // beneath it read-only (an agent installed there, a masked path)
        // is kept by a read-only mount of its own, which the kernel
        // enforces whatever Landlock grants and which cannot be renamed or
        // removed: the carve of /tmp around it protects nothing, and left
        // /tmp a skeleton where `mkdir /tmp/x` failed. So /tmp is granted
        // whole then. Not when a writable path beneath it is carved (a
        // project under /tmp, whose protected names Landlock keeps):
        // rights granted on /tmp would reach into it.
        if tier == Tier::Full && tmp_kept_by_mounts(&rules) {
            carved
                .carved_dirs
                .retain(|d| !fs::beneath(&d.path, Path::new(PRIVATE_TMP)));
            carved
                .list_only_dirs
                .retain(|d| !fs::beneath(d, Path::new(PRIVATE_TMP)));
            carved.rules.push(LandlockRule {
                path: PRIVATE_TMP.into(),
                access: handled,
            });
        }
        if tier == Tier::Full
            && carved
                .rules
                .iter()
                .any(|r| r.path == Path::new(PRIVATE_TMP) && r.access == handled)
        {
            session_tmp = None;
        }
        // The private /tmp's inode is the sandbox's, never the one the
        // supervisor could open: nothing to emulate there.
        carved
            .carved_dirs
            .retain(|d| tier < Tier::Full || d.path != Path::new(PRIVATE_TMP));
        let mut prepare = Vec::new();
        // Output directories the build will create at the project root:
        // a directory created later could never be granted, so create the
        // missing ones first and grant them like any other child.
        if carved.carved_dirs.iter().any(|d| d.path == policy.project) {
            for name in &policy.outputs {
                let dir = policy.project.join(name);
                if view.kind(&dir).is_none()
                    && announced(name, &policy.project, view)
                    && fs::decide_rule(&policy.fs, &dir).map(|r| r.access) == Some(Access::Write)
                {
                    carved.rules.push(LandlockRule {
                        path: dir.clone(),
                        access: handled,
                    });
                    prepare.push(dir);
                }
            }
        }
        if let Some(dir) = &session_tmp
            && fs::decide_rule(&policy.fs, dir).map(|r| r.access) == Some(Access::Write)
        {
            carved.rules.push(LandlockRule {
                path: dir.clone(),
                access: handled,
            });
        }
        // /dev lists its names, nothing more: glibc's ttyname() scans it
        // for the terminal's inode, and `ls /dev` works; no device in it
        // opens unless a rule grants that device (the default grants the
        // FULL tier's minimal set, not the host's every terminal and disk).
        if view.kind(Path::new("/dev")) == Some(fs::EntryKind::Dir) {
            carved.rules.push(LandlockRule {
                path: "/dev".into(),
                access: rights::READ_DIR & handled,
            });
        }
        // FULL: the view's directories list their names. The view holds
        // only what the policy binds (and the directories leading to it),
        // masked paths covered by empty mounts: listing it names nothing
        // the job could not reach by path. A directory handle on an
        // ancestor of a readable path (`opendir("/")`, a walker's loop
        // check that opens each directory it passes) then works. Below
        // FULL the view is the host's, whose every name this would list.
        if tier == Tier::Full {
            carved.rules.push(LandlockRule {
                path: "/".into(),
                access: rights::READ_DIR & handled,
            });
        }
        // FULL binds the job's terminal at /dev/console: as reachable as
        // /dev/pts is.
        if let Some((_, access)) = &console {
            carved.rules.push(LandlockRule {
                path: super::terminal::CONSOLE.into(),
                access: fs::rights_for(*access, handled) & rights::FILE,
            });
        }
        // New entries in carved directories are made from spares granted
        // by inode before the domain existed (see `SparePool`).
        let spares = (notify_available
            && carved.carved_dirs.iter().any(|d| d.path == policy.project))
        .then(|| spare_pool(policy, &carved.list_only_dirs, view))
        .flatten();
        if let Some(pool) = &spares {
            for name in &pool.files {
                carved.rules.push(LandlockRule {
                    path: pool.dir.join(name),
                    access: handled & rights::FILE,
                });
            }
            for name in &pool.dirs {
                carved.rules.push(LandlockRule {
                    path: pool.dir.join(name),
                    access: handled,
                });
            }
            if let Some(git) = carved
                .carved_dirs
                .iter_mut()
                .find(|d| Some(d.path.as_path()) == pool.dir.parent())
                && let Some(name) = pool.dir.file_name()
            {
                git.protected_names
                    .push(name.to_string_lossy().into_owned());
            }
        }
        let notify = NotifyPlan {
            carved_dirs: if notify_available {
                carved.carved_dirs
            } else {
                Vec::new()
            },
            broker_unix_connect: notify_available,
            // The job's own private /tmp counts as writable for sockets.
            // (Where a project under it keeps it carved, a creation at its
            // top is refused unrecorded: a JVM's `/tmp/hsperfdata_USER`,
            // which it does without, would be a finding every run.)
            rules: rules.iter().map(|r| (r.path.clone(), r.access)).collect(),
            unix_sockets: unix_sockets(policy),
            spares,
            denied_calls: Vec::new(),
            audit: false,
            net_connect: net_connect(&policy.net, own_netns),
            pty_peer,
            project: Some(policy.project.clone()),
            shared_dirs: Vec::new(),
            udp_dead_net: false,
            unix_bind: false,
            tcp_dead_net: false,
            listen: false,
            metadata: false,
            own_view: false,
            expected_calls: expected_calls(policy),
        };
        let landlock = LandlockPlan {
            abi,
            handled_fs: handled,
            // With egress redirected, Landlock refuses the job's own TCP
            // connects and binds as well: only the supervisor's connects
            // (outside the domain) reach anything.
            deny_tcp: (filter_net || tcp_only) && abi >= 4,
            scope: abi >= 6,
            rules: carved.rules,
        };
        (Some(landlock), notify, prepare)
    } else {
        // No filesystem isolation, but host sockets (ssh-agent, docker)
        // stay brokered by the policy's writable paths.
        let notify = NotifyPlan {
            carved_dirs: Vec::new(),
            broker_unix_connect: notify_available,
            rules: rules.iter().map(|r| (r.path.clone(), r.access)).collect(),
            unix_sockets: unix_sockets(policy),
            spares: None,
            denied_calls: Vec::new(),
            audit: false,
            net_connect: net_connect(&policy.net, own_netns),
            pty_peer: false,
            project: None,
            shared_dirs: Vec::new(),
            udp_dead_net: false,
            unix_bind: false,
            tcp_dead_net: false,
            listen: false,
            metadata: false,
            own_view: false,
            expected_calls: expected_calls(policy),
        };
        (None, notify, Vec::new())
    };
    let namespaces = (tier == Tier::Full).then(|| {
        let console = console.as_ref().map(|(tty, _)| tty.clone());
        let mut mounts = mounts::plan(&policy.fs, view, console);
        for dir in &pinned {
            if !mounts.iter().any(|m| m.path() == dir.as_path()) {
                mounts.push(mounts::Mount::Bind {
                    path: dir.clone(),
                    writable: true,
                });
            }
        }
        if let Some(dir) = &session_tmp {
            mounts.push(mounts::Mount::Bind {
                path: dir.clone(),
                writable: true,
            });
        }
        // A socket the policy names is shown in the new root, bound alone
        // at its real path (read-only: `connect()` needs no writable
        // mount); a symlink to it works where the policy shows the link.
        mounts.extend(policy.unix.iter().filter_map(|u| {
            Some(mounts::Mount::Bind {
                path: view.socket_at(&u.path)?,
                writable: false,
            })
        }));
        mounts.sort_by(|a, b| a.path().cmp(b.path()));
        mounts::NamespacePlan {
            net: own_netns,
            hostname: "vetto".into(),
            mounts,
            // Filtered egress: the stub answers allowed names. Network
            // off: the same stub refuses every name, so a lookup is
            // recorded by the name asked, not the host's resolver address.
            dns_stub: match egress {
                Some(super::net::EgressPlan::Netns) => {
                    Some(super::net::DnsStub::for_policy(&policy.net))
                }
                _ if net_off => Some(super::net::DnsStub { ports: Vec::new() }),
                _ => None,
            },
        }
    });
    // At FULL /dev/shm is the sandbox's own tmpfs; below it the host's.
    let scrub_dirs: Vec<PathBuf> = if tier < Tier::Full {
        SHARED_DIRS
            .iter()
            .map(PathBuf::from)
            .filter(|d| fs::decide_rule(&policy.fs, d).map(|r| r.access) == Some(Access::Write))
            .collect()
    } else {
        Vec::new()
    };
    // The scrub removes only names the supervisor saw the job create:
    // creations are notified wherever there is a shared directory to scrub.
    let mut notify = notify;
    if notify_available {
        notify.shared_dirs = scrub_dirs.clone();
    }
    let mut seccomp = syscalls::plan(
        filter_net && !udp_dead_net,
        !notify.carved_dirs.is_empty() || !notify.shared_dirs.is_empty(),
        notify.broker_unix_connect,
    );
    if own_netns {
        seccomp.rules.extend(syscalls::vsock_off());
    }
    if tcp_only {
        seccomp.rules.extend(syscalls::tcp_only(udp_dead_net));
        notify.listen = true;
    } else if udp_dead_net {
        seccomp.rules.extend(syscalls::off_but_dead_net());
    }
    notify.udp_dead_net = udp_dead_net;
    notify.tcp_dead_net = udp_dead_net;
    // A pathname unix socket's bind() makes an entry as mknod does, but
    // Landlock refuses it silently: notified so that one where the policy
    // allows no writing (a test server's fixed path in the shared /tmp)
    // is recorded with what works. The kernel still decides.
    if landlock.is_some()
        && notify.broker_unix_connect
        && !seccomp
            .rules
            .iter()
            .any(|r| r.name == "bind" && r.when.is_empty())
    {
        seccomp.rules.push(syscalls::unix_bind_rule());
    }
    notify.unix_bind = landlock.is_some() && notify.broker_unix_connect;
    if notify.pty_peer {
        seccomp.rules.extend(syscalls::pty_rules());
    }
    // Below FULL no read-only mount refuses a chmod, chown or utime of a
    // file the job may only read, and Landlock does not restrict them: the
    // supervisor decides each (without notification: a gap, see `gaps`).
    notify.metadata = tier == Tier::FsOnly && landlock.is_some() && notify_available;
    notify.own_view = tier == Tier::Full;
    if notify.metadata {
        seccomp.rules.extend(syscalls::metadata_rules());
    }
    let memory = memory::decide(policy.limits.max_memory, host);
    if let Some(memory::MemoryPlan {
        tree: memory::TreeBound::Shares { .. },
        ..
    }) = &memory
    {
        seccomp.rules.extend(syscalls::memory_shares());
    }
    seccomp.record_denials = notify_available;
    if seccomp.record_denials {
        notify.denied_calls = seccomp
            .rules
            .iter()
            .filter(|r| r.action == syscalls::Action::Deny)
            .map(|r| r.name.clone())
            .collect();
        notify.denied_calls.sort();
        notify.denied_calls.dedup();
    }
    let tmp = match &session_tmp {
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => PRIVATE_TMP.to_string(),
    };
    let env = env::plan(&policy.env, &options.env, &session_env(&tmp, tier.as_str()));
    Plan {
        tier,
        session_tmp,
        scrub_dirs,
        namespaces,
        landlock,
        seccomp,
        notify,
        prepare_dirs,
        env,
        net: policy.net.clone(),
        egress,
        limits: policy.limits.clone(),
        memory,
        cwd: job_cwd(policy, options),
        degraded,
        seatbelt: None,
        checked_after,
        publish: policy.publish.clone(),
        expected_daemons: policy.expected_daemons.clone(),
    }
}

/// The existing directories strictly between each of `kept` and the
/// writable rule of `rest` it lies beneath (see `plan_for`'s `pinned`).
fn pinned_ancestors(kept: &[FsRule], rest: &[FsRule], view: &dyn FsView) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for k in kept {
        let Some(w) = rest
            .iter()
            .filter(|w| w.access == Access::Write && fs::beneath(&k.path, &w.path))
            .max_by_key(|w| w.path.as_os_str().len())
        else {
            continue;
        };
        for a in k.path.ancestors().skip(1) {
            if a == w.path.as_path() || !fs::beneath(a, &w.path) {
                break;
            }
            if view.kind(a) == Some(fs::EntryKind::Dir) {
                dirs.push(a.to_path_buf());
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// `rules` split into those beneath a writable rule that grant less than
/// it (what carving would carve around), and the rest.
fn beneath_writable(rules: Vec<FsRule>) -> (Vec<FsRule>, Vec<FsRule>) {
    let writable: Vec<PathBuf> = rules
        .iter()
        .filter(|r| r.access == Access::Write)
        .map(|r| r.path.clone())
        .collect();
    rules.into_iter().partition(|r| {
        r.access != Access::Write
            && writable
                .iter()
                .any(|w| w.as_os_str() != r.path.as_os_str() && fs::beneath(&r.path, w))
    })
}

/// At FULL: nothing beneath the private /tmp needs Landlock's carving
/// there — every rule strictly beneath it is kept by a mount (read-only,
/// or masked), or is writable with nothing weaker beneath it.
fn tmp_kept_by_mounts(rules: &[FsRule]) -> bool {
    let tmp = Path::new(PRIVATE_TMP);
    let under = |p: &Path| p != tmp && fs::beneath(p, tmp);
    !rules.iter().any(|w| {
        under(&w.path)
            && w.access == Access::Write
            && rules.iter().any(|r| {
                r.path != w.path && fs::beneath(&r.path, &w.path) && r.access != Access::Write
            })
    })
}

/// The spare pool for a carved project: inside its `.git` directory (same
/// filesystem, and invisible to `git status` and to builds), named after
/// the session. Without a `.git` directory there is no pool. Spare files
/// only where a directory is list-only.
fn spare_pool(policy: &Policy, list_only: &[PathBuf], view: &dyn FsView) -> Option<fs::SparePool> {
    let git = policy.project.join(".git");
    if view.kind(&git) != Some(fs::EntryKind::Dir) {
        return None;
    }
    let session = policy.session_tmp.file_name()?.to_string_lossy();
    let files = if list_only.is_empty() {
        0
    } else {
        fs::SparePool::FILES
    };
    Some(fs::SparePool {
        dir: git.join(format!("{session}-spares")),
        files: (0..files).map(|i| format!("f{i}")).collect(),
        dirs: (0..fs::SparePool::DIRS).map(|i| format!("d{i}")).collect(),
        file_dirs: list_only.to_vec(),
    })
}

/// The FULL tier's view for carving: the host's filesystem, except that
/// the private /tmp lists only the entries the policy binds into it.
struct PrivateTmpView<'a> {
    host: &'a dyn FsView,
    beneath: Vec<std::ffi::OsString>,
}

impl FsView for PrivateTmpView<'_> {
    fn kind(&self, path: &Path) -> Option<fs::EntryKind> {
        self.host.kind(path)
    }

    fn children(&self, dir: &Path) -> Vec<std::ffi::OsString> {
        if dir == Path::new(PRIVATE_TMP) {
            let mut names = self.beneath.clone();
            names.sort();
            names.dedup();
            names
        } else {
            self.host.children(dir)
        }
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        self.host.read_link(path)
    }

    fn socket_at(&self, path: &Path) -> Option<PathBuf> {
        self.host.socket_at(path)
    }
}

/// The calls whose refusal `[syscalls] expected` makes no finding.
fn expected_calls(policy: &Policy) -> Vec<String> {
    policy
        .expected_denials
        .iter()
        .flat_map(|e| e.class.calls())
        .map(|c| (*c).to_string())
        .collect()
}

/// `--audit`: no Landlock, no namespaces, nothing refused. Every call the
/// policy would refuse is still notified, allowed (CONTINUE: there is no
/// decision to protect) and recorded as observed, so a session can teach a
/// policy. Credential-like variables stay withheld. Needs user notification:
/// without it nothing could be observed.
fn audit_plan(policy: &Policy, host: &HostCaps, options: &BuildOptions) -> Result<Plan, Refusal> {
    for (available, feature) in [
        (&host.seccomp, KernelFeature::Seccomp),
        (&host.seccomp_notify, KernelFeature::SeccompUserNotify),
    ] {
        if let crate::host::Availability::Missing(why) = available {
            return Err(Refusal {
                tier: None,
                rule: "--audit".into(),
                missing: feature,
                detail: why.clone(),
                hint: "audit mode observes through seccomp user notification; run `vetto doctor`"
                    .into(),
            });
        }
    }
    // Audit learns the network by name (issue P10 item 4): unless the
    // policy gives the job the host's network, every connection goes
    // through the proxy, which lets it through and records its name —
    // also where the policy has no network at all, so `policy suggest`
    // proposes the names, not `mode = "host"`.
    let audit_egress = !matches!(policy.net, NetPolicy::Host);
    if let Some(first) = policy.publish.first() {
        return Err(Refusal {
            tier: None,
            rule: format!("[network] publish {} ({})", first.host, first.origin),
            missing: KernelFeature::NotImplemented,
            detail: "--audit makes no network namespace for the job: its servers are the host's"
                .into(),
            hint:
                "run the audit without the publish rule (the job's servers face the host directly)"
                    .into(),
        });
    }
    let mut seccomp = syscalls::plan(false, true, true);
    seccomp.record_denials = true;
    let notify = NotifyPlan {
        carved_dirs: Vec::new(),
        broker_unix_connect: true,
        rules: policy
            .fs
            .iter()
            .map(|r| (r.path.clone(), r.access))
            .collect(),
        unix_sockets: unix_sockets(policy),
        spares: None,
        denied_calls: seccomp
            .rules
            .iter()
            .filter(|r| r.action == syscalls::Action::Deny)
            .map(|r| r.name.clone())
            .collect(),
        audit: true,
        // Audit performs what the policy would refuse, and records it;
        // with filtered egress every connection goes through the proxy,
        // which lets it through and records it (`policy suggest` learns
        // the names from there).
        net_connect: if audit_egress {
            fs::NetConnect::Proxy
        } else {
            fs::NetConnect::Open
        },
        pty_peer: false,
        project: Some(policy.project.clone()),
        shared_dirs: Vec::new(),
        udp_dead_net: false,
        unix_bind: false,
        tcp_dead_net: false,
        listen: false,
        metadata: false,
        own_view: false,
        expected_calls: expected_calls(policy),
    };
    let tmp = policy.session_tmp.to_string_lossy().into_owned();
    Ok(Plan {
        tier: Tier::Seccomp,
        session_tmp: Some(policy.session_tmp.clone()),
        scrub_dirs: Vec::new(),
        namespaces: None,
        landlock: None,
        seccomp,
        notify,
        prepare_dirs: Vec::new(),
        env: env::plan(&policy.env, &options.env, &session_env(&tmp, "audit")),
        net: policy.net.clone(),
        egress: audit_egress.then_some(super::net::EgressPlan::Redirect),
        limits: policy.limits.clone(),
        // Audit changes nothing the job does: no shares, only the
        // per-process limit and the sampler.
        memory: memory::decide(policy.limits.max_memory, host).map(|m| memory::MemoryPlan {
            tree: match m.tree {
                memory::TreeBound::Shares { .. } => memory::TreeBound::Sampled,
                other => other,
            },
            ..m
        }),
        cwd: job_cwd(policy, options),
        degraded: vec![
            "--audit: nothing is enforced; what the policy would refuse is recorded as observed"
                .into(),
        ],
        seatbelt: None,
        checked_after: None,
        publish: Vec::new(),
        expected_daemons: policy.expected_daemons.clone(),
    })
}

/// The SEATBELT tier (macOS): the policy as a Seatbelt profile over real
/// paths; the supervisor kills the job's process group and samples its
/// memory (`RLIMIT_DATA` per process besides).
fn seatbelt_plan(
    policy: &Policy,
    options: &BuildOptions,
    view: &dyn FsView,
) -> Result<Plan, Refusal> {
    let real = super::seatbelt::with_real_paths(policy, view);
    let home = options
        .env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| super::seatbelt::real_path(view, Path::new(v)));
    let ctx = super::seatbelt::SeatbeltContext {
        home,
        // The report directory is protected by the policy's own rule
        // where the job could otherwise write it (inside the project).
        report_dir: None,
    };
    let profile = super::seatbelt::profile(&real, &ctx).map_err(|e| Refusal {
        tier: Some(Tier::Seatbelt),
        rule: "the Seatbelt profile".into(),
        missing: KernelFeature::Seatbelt,
        detail: e.to_string(),
        hint: "rename the path, or remove the rule that names it".into(),
    })?;
    let tmp = real.session_tmp.to_string_lossy().into_owned();
    Ok(Plan {
        tier: Tier::Seatbelt,
        session_tmp: Some(policy.session_tmp.clone()),
        namespaces: None,
        landlock: None,
        seccomp: syscalls::SeccompPlan::default(),
        notify: NotifyPlan::default(),
        prepare_dirs: Vec::new(),
        scrub_dirs: Vec::new(),
        env: env::plan(&policy.env, &options.env, &session_env(&tmp, "seatbelt")),
        net: policy.net.clone(),
        // Filtered egress: the proxy on the host's loopback, its port
        // added to the profile once it listens (`session::egress`).
        egress: matches!(policy.net, NetPolicy::Allow { .. })
            .then_some(super::net::EgressPlan::Loopback),
        limits: policy.limits.clone(),
        // No cgroup and no seccomp on macOS: sampled.
        memory: policy.limits.max_memory.map(|limit| memory::MemoryPlan {
            limit,
            tree: memory::TreeBound::Sampled,
        }),
        cwd: super::seatbelt::real_path(view, &job_cwd(policy, options)),
        degraded: Vec::new(),
        seatbelt: Some(profile),
        checked_after: None,
        publish: Vec::new(),
        expected_daemons: policy.expected_daemons.clone(),
    })
}

/// The job starts where vetto was started when that is inside the project,
/// else at the project root.
fn job_cwd(policy: &Policy, options: &BuildOptions) -> PathBuf {
    job_cwd_in(policy, &options.cwd)
}
