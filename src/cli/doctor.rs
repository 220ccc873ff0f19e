//! `vetto doctor`: what this host can enforce, as a table or as JSON.
//!
//! The JSON field names are a contract documented in docs/doctor.md.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;

use super::DoctorArgs;
use crate::host::{self, HostCaps, HostFeature, LandlockFeature, TierVerdict};
use crate::plan::Tier;

/// Version of the `--json` document; bumped on any incompatible change.
pub const DOCTOR_SCHEMA: u32 = 1;

/// Width the human output wraps at.
const WIDTH: usize = 100;
/// Indent of the text after a feature or tier name.
const TEXT_COL: usize = 26;

pub fn doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let fast = host::probe();
    let probe_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut report = DoctorReport::new(host::confirm(fast), probe_us);
    report.policy = policy_here(&report.host);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// Everything `vetto doctor` shows; `--json` prints it as is.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    pub schema: u32,
    pub host: HostCaps,
    /// How long the fast probe (the one `vetto run` makes) took, in µs.
    pub probe_us: u64,
    pub landlock_features: Vec<LandlockFeatureRow>,
    /// Strongest first.
    pub tiers: Vec<TierVerdict>,
    /// The strongest tier the host can run; `None`: no tier at all.
    pub auto: Option<Tier>,
    /// What would hold a `--max-memory` limit here.
    pub memory: &'static str,
    /// What each tier would do with the policy `vetto run` would use in
    /// the current directory: the same plan the sandbox applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyPlans>,
}

/// The policy of the current directory, planned at every tier.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyPlans {
    /// The policy's sources (`preset:default`, a file).
    pub sources: Vec<String>,
    /// Strongest first.
    pub tiers: Vec<TierPlan>,
    /// What `vetto run` (tier auto) would take here; `None`: it refuses.
    pub auto: Option<Tier>,
    /// macOS: what the policy compiles to under Seatbelt, and what that
    /// tier does less well than Linux.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seatbelt: Option<SeatbeltDoctor>,
    /// Windows: what `--tier appcontainer` would apply, or its refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub appcontainer: Option<AppContainerDoctor>,
}

/// `--tier appcontainer`'s part of `vetto doctor` (Windows).
#[derive(Debug, Clone, Serialize)]
pub struct AppContainerDoctor {
    /// The grant plan, or why it refuses the policy (exit 125).
    pub plan: Result<crate::plan::appcontainer::GrantPlan, String>,
    /// Where it is weaker than Linux's (docs/windows.md).
    pub weaker: &'static [&'static str],
}

/// docs/windows.md, "What is weaker", one line each.
pub const APPCONTAINER_WEAKER: &[&str] = &[
    "experimental: type-checked on Linux, run only by the windows-latest workflow",
    "LPAC (no access through ALL APPLICATION PACKAGES) is requested; Windows before 10 1703 refuses it, and the session with it",
    crate::sandbox::appcontainer::NOT_OBSERVED,
    "--max-memory is the Job Object's committed-memory limit: allocations beyond it fail, nothing is killed",
    "filtered egress (--allow-domain) is refused: the proxy's loopback needs an administrator's exemption",
    "--net host is internetClient + privateNetworkClientServer: loopback stays out of reach",
    "masks and protections beneath a grant are deny ACEs on what exists when the session starts; a masked path made later is the job's own file",
    "`vetto ci` and --report-dir are refused: no output filter and no session log yet",
];

/// The SEATBELT tier's part of `vetto doctor` (macOS).
#[derive(Debug, Clone, Serialize)]
pub struct SeatbeltDoctor {
    /// `sw_vers -productVersion`, when it answered.
    pub os_version: Option<String>,
    /// Each rule and the SBPL it became.
    pub compiled: Vec<crate::plan::seatbelt::CompiledRule>,
    /// Where this tier is weaker than Linux's (docs/macos.md).
    pub weaker: &'static [&'static str],
}

/// docs/macos.md, "What is weaker", one line each.
pub const SEATBELT_WEAKER: &[&str] = &[
    "reads are broad: everything not masked is readable (path-fragmented read rules make dyld abort)",
    "the set-id exec rule is unverified on current macOS",
    "no NOTE_TRACK: a process and its child that both fork and exit before vetto looks can leave an unseen grandchild outside the job's process group",
    "--max-memory: RLIMIT_DATA is loosely enforced; vetto's RSS sampler holds the tree's limit",
    "violations come from the unified log, which can drop lines under load; a process that ended before vetto saw it is not named",
    "filtered egress (--allow-domain) reaches the network only for programs that use the proxy variables: no DNS stub, no resolver, no process named in the records",
];

/// One tier's plan, summarised; or why it refuses the policy.
#[derive(Debug, Clone, Serialize)]
pub struct TierPlan {
    pub tier: Tier,
    /// The refusal (exit 125) text, when the tier cannot enforce the policy.
    pub refusal: Option<String>,
    pub landlock_rules: usize,
    pub mounts: usize,
    pub seccomp_rules: usize,
    /// Directories where the supervisor performs creation (carving).
    pub carved_dirs: usize,
    pub brokers_unix_sockets: bool,
    /// Mode, owner and time changes decided by the supervisor (FS-ONLY).
    pub decides_metadata: bool,
}

/// Plan the current directory's policy at every tier, as `vetto run` would.
fn policy_here(host: &HostCaps) -> Option<PolicyPlans> {
    use crate::plan::{self, BuildOptions, TierRequest};
    let args = super::PolicyArgs::default();
    let session = std::env::temp_dir().join("vetto-doctor");
    let request = args.load_request(&session, None).ok()?;
    let policy = crate::policy::load(&request).ok()?;
    let options = BuildOptions {
        allow_degraded: false,
        audit: false,
        env: request.env.clone(),
        cwd: request.cwd.clone(),
        terminals: crate::sandbox::terminal::own_terminals(),
    };
    let tiers = Tier::ALL
        .iter()
        .map(
            |&tier| match plan::build(&policy, host, TierRequest::Exactly(tier), &options) {
                Ok(p) => TierPlan {
                    tier,
                    refusal: None,
                    landlock_rules: p.landlock.as_ref().map_or(0, |l| l.rules.len()),
                    mounts: p.namespaces.as_ref().map_or(0, |n| n.mounts.len()),
                    seccomp_rules: p.seccomp.rules.len(),
                    carved_dirs: p.notify.carved_dirs.len(),
                    brokers_unix_sockets: p.notify.broker_unix_connect,
                    decides_metadata: p.notify.metadata,
                },
                Err(refusal) => TierPlan {
                    tier,
                    refusal: Some(refusal.to_string()),
                    landlock_rules: 0,
                    mounts: 0,
                    seccomp_rules: 0,
                    carved_dirs: 0,
                    brokers_unix_sockets: false,
                    decides_metadata: false,
                },
            },
        )
        .collect();
    let auto_plan = plan::build(&policy, host, TierRequest::Auto, &options).ok();
    let auto = auto_plan.as_ref().map(|p| p.tier);
    let seatbelt = auto_plan
        .and_then(|p| p.seatbelt)
        .map(|profile| SeatbeltDoctor {
            os_version: crate::sandbox::os_version(),
            compiled: profile.compiled,
            weaker: SEATBELT_WEAKER,
        });
    let appcontainer = crate::sandbox::appcontainer_host()
        .is_ok()
        .then(|| AppContainerDoctor {
            plan: crate::plan::appcontainer::plan(&policy, &crate::plan::fs::RealFs)
                .map_err(|r| crate::plan::appcontainer::refusal(&r).to_string()),
            weaker: APPCONTAINER_WEAKER,
        });
    Some(PolicyPlans {
        sources: policy.sources.iter().map(|s| s.name.clone()).collect(),
        tiers,
        auto,
        seatbelt,
        appcontainer,
    })
}

fn render_policy(out: &mut String, plans: &PolicyPlans) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "this directory's policy ({})",
        plans.sources.join(", ")
    );
    for t in &plans.tiers {
        let head = format!("  {} {}", mark(t.refusal.is_none()), t.tier);
        match &t.refusal {
            None => {
                let mut what = vec![format!("{} seccomp rules", t.seccomp_rules)];
                if t.landlock_rules > 0 {
                    what.push(format!("{} Landlock rules", t.landlock_rules));
                }
                if t.mounts > 0 {
                    what.push(format!("{} mounts", t.mounts));
                }
                if t.carved_dirs > 0 {
                    what.push(format!(
                        "creation emulated in {} carved dirs",
                        t.carved_dirs
                    ));
                }
                if t.brokers_unix_sockets {
                    what.push("unix sockets brokered".into());
                }
                if t.decides_metadata {
                    what.push("chmod/chown/utime decided".into());
                }
                row(out, &head, &what.join(", "));
            }
            Some(text) => {
                let mut lines = text.lines();
                row(
                    out,
                    &head,
                    &format!("refused: {}", lines.next().unwrap_or_default()),
                );
                for more in lines {
                    row(out, "", more);
                }
            }
        }
    }
    let auto = plans.auto.map_or_else(
        || "nothing: it refuses (exit 125)".to_owned(),
        |t| t.to_string(),
    );
    row(out, "`vetto run` here takes", &auto);
}

#[derive(Debug, Clone, Serialize)]
pub struct LandlockFeatureRow {
    pub abi: u8,
    pub name: LandlockFeature,
    pub available: bool,
    pub meaning: &'static str,
}

impl DoctorReport {
    pub fn new(host: HostCaps, probe_us: u64) -> Self {
        let landlock_features = LandlockFeature::ALL
            .iter()
            .map(|f| LandlockFeatureRow {
                abi: f.abi(),
                name: *f,
                available: f.available_at(host.landlock_abi),
                meaning: f.meaning(),
            })
            .collect();
        let memory = crate::plan::memory::decide(Some(1), &host)
            .map_or("", |m| crate::plan::memory::mechanism(&m.tree));
        DoctorReport {
            memory,
            schema: DOCTOR_SCHEMA,
            tiers: host.tier_verdicts(),
            auto: host.best_tier(),
            policy: None,
            landlock_features,
            probe_us,
            host,
        }
    }
}

fn mark(ok: bool) -> char {
    if ok { '✓' } else { '✗' }
}

/// The human table.
pub fn render(report: &DoctorReport) -> String {
    let host = &report.host;
    let mut out = String::new();
    let _ = writeln!(out, "vetto doctor: what this host can enforce\n");
    let _ = writeln!(
        out,
        "{:<10}{} ({})",
        "kernel",
        or_unknown(&host.kernel),
        host.arch
    );
    let _ = writeln!(
        out,
        "{:<10}{} µs (the check `vetto run` makes at every start)\n",
        "probe", report.probe_us
    );

    let _ = writeln!(out, "features");
    for feature in HostFeature::ALL {
        let avail = host.feature(feature);
        let head = format!("  {} {}", mark(avail.is_available()), feature);
        match avail.reason() {
            None => {
                let mut text = feature.meaning().to_owned();
                if feature == HostFeature::Landlock {
                    text = format!("ABI {}{}: {text}", host.landlock_abi, errata(host));
                }
                row(&mut out, &head, &text);
            }
            Some(why) => {
                let (why, fix) = split_fix(why);
                row(&mut out, &head, why);
                if let Some(fix) = fix {
                    row(&mut out, "", &format!("fix: {fix}"));
                }
                row(
                    &mut out,
                    "",
                    &format!("cost: {}", feature.cost_when_missing()),
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "  {}",
        if host.tested {
            "user namespaces and seccomp user notify were confirmed by test children"
        } else {
            "(not confirmed by test children)"
        }
    );

    if host.landlock_abi >= 1 {
        let _ = writeln!(out, "\nLandlock ABI {}", host.landlock_abi);
        for f in &report.landlock_features {
            let head = format!("  {} {} {}", mark(f.available), f.abi, f.name);
            if f.available {
                row(&mut out, &head, f.meaning);
            } else {
                row(
                    &mut out,
                    &head,
                    &format!("{}; cost: {}", f.meaning, f.name.cost_when_missing()),
                );
            }
        }
    }

    let c = &host.confinement;
    let _ = writeln!(out, "\nvetto itself");
    row(
        &mut out,
        "  user",
        if host.root { "root" } else { "unprivileged" },
    );
    row(
        &mut out,
        "  seccomp filter",
        if c.seccomp_filter {
            "yes: already filtered (nested sandbox or container)"
        } else {
            "none"
        },
    );
    row(
        &mut out,
        "  no_new_privs",
        if c.no_new_privs { "set" } else { "not set" },
    );
    row(
        &mut out,
        "  user namespace",
        if c.user_namespace {
            "not the initial one (container?)"
        } else {
            "initial"
        },
    );
    row(
        &mut out,
        "  container",
        c.container.as_deref().unwrap_or("none detected"),
    );

    let _ = writeln!(out, "\nlimits");
    row(&mut out, "  --max-memory", report.memory);
    if let crate::host::CgroupMemory::Unavailable(why) = &host.cgroup_memory {
        row(&mut out, "", &format!("no cgroup v2: {why}"));
    }

    let _ = writeln!(out, "\ntiers");
    for v in &report.tiers {
        let head = format!("  {} {}", mark(v.runnable), v.tier);
        if v.runnable {
            row(&mut out, &head, tier_makeup(v.tier));
        } else {
            let needs: Vec<&str> = v.missing.iter().map(|f| f.as_str()).collect();
            row(&mut out, &head, &format!("needs {}", needs.join(", ")));
        }
        for cost in &v.costs {
            row(&mut out, "", &format!("cost: {cost}"));
        }
    }

    let _ = writeln!(out);
    let auto = match report.auto {
        Some(Tier::Seccomp) => {
            "seccomp, and only with --allow-degraded: it has no filesystem isolation".to_owned()
        }
        Some(t) => t.to_string(),
        None => "nothing: this host can run no tier (vetto refuses with exit 125)".to_owned(),
    };
    row(&mut out, "auto would choose", &auto);
    row(
        &mut out,
        "",
        "a policy may still be refused at that tier for one of its rules; `vetto run` names it",
    );
    if let Some(plans) = &report.policy {
        render_policy(&mut out, plans);
        if let Some(sb) = &plans.seatbelt {
            render_seatbelt(&mut out, sb);
        }
        if let Some(ac) = &plans.appcontainer {
            render_appcontainer(&mut out, ac);
        }
    }
    out
}

/// The policy under Seatbelt: each rule, the SBPL it became (paths are
/// parameters, shown by name), and what is weaker than Linux.
fn render_seatbelt(out: &mut String, sb: &SeatbeltDoctor) {
    let _ = writeln!(out);
    let version = sb.os_version.as_deref().unwrap_or("version unknown");
    let _ = writeln!(
        out,
        "Seatbelt (macOS {}): what each rule compiles to",
        crate::text::escape(version)
    );
    for rule in &sb.compiled {
        let _ = writeln!(out, "  {}", crate::text::escape(&rule.rule));
        for line in &rule.sbpl {
            let _ = writeln!(out, "      {}", crate::text::escape(line));
        }
    }
    let _ = writeln!(out, "weaker than Linux here:");
    for w in sb.weaker {
        let _ = writeln!(out, "  - {w}");
    }
}

/// The policy under `--tier appcontainer`: the grants and denies it
/// becomes (or the refusal), and what is weaker than Linux.
fn render_appcontainer(out: &mut String, ac: &AppContainerDoctor) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "AppContainer (--tier appcontainer, experimental; LPAC, a Job Object that kills the tree):"
    );
    match &ac.plan {
        Ok(plan) => {
            for g in &plan.grants {
                let _ = writeln!(
                    out,
                    "  allow {:<6} {}",
                    format!("{:?}", g.access).to_lowercase(),
                    crate::text::escape_path(&g.path)
                );
            }
            for d in &plan.denies {
                let _ = writeln!(
                    out,
                    "  deny  {:<6} {}",
                    format!("{:?}", d.access).to_lowercase(),
                    crate::text::escape_path(&d.path)
                );
            }
            let caps: Vec<String> = plan.capabilities.iter().map(|c| format!("{c:?}")).collect();
            let caps = if caps.is_empty() {
                "none (no network)".to_owned()
            } else {
                caps.join(", ")
            };
            let _ = writeln!(out, "  capabilities: {caps}");
        }
        Err(refusal) => {
            let _ = writeln!(
                out,
                "  refused (exit 125): {}",
                crate::text::escape(refusal)
            );
        }
    }
    let _ = writeln!(out, "weaker than Linux here:");
    for w in ac.weaker {
        let _ = writeln!(out, "  - {w}");
    }
}

fn tier_makeup(tier: Tier) -> &'static str {
    match tier {
        Tier::Full => "Landlock + user namespaces + seccomp",
        Tier::FsOnly => "Landlock + seccomp, no namespaces",
        Tier::Seccomp => "seccomp only",
        Tier::Seatbelt => "macOS Seatbelt profile: writes scoped, reads broad",
    }
}

fn errata(host: &HostCaps) -> String {
    if host.landlock_errata == 0 {
        String::new()
    } else {
        format!(", errata {:#x}", host.landlock_errata)
    }
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

/// `reason; fix: how` → (`reason`, Some(`how`)).
fn split_fix(reason: &str) -> (&str, Option<&str>) {
    match reason.split_once("; fix: ") {
        Some((why, fix)) => (why, Some(fix)),
        None => (reason, None),
    }
}

/// One row: `head` padded to the text column, then `text` wrapped under it.
fn row(out: &mut String, head: &str, text: &str) {
    let pad = TEXT_COL.saturating_sub(head.chars().count()).max(1);
    let mut line = format!("{head}{}", " ".repeat(pad));
    let indent = line.chars().count();
    let mut first = true;
    for word in text.split(' ') {
        let len = line.chars().count();
        if !first && len + 1 + word.chars().count() > WIDTH {
            let _ = writeln!(out, "{}", line.trim_end());
            line = " ".repeat(indent);
            first = true;
        }
        if !first {
            line.push(' ');
        }
        line.push_str(word);
        first = false;
    }
    let _ = writeln!(out, "{}", line.trim_end());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Availability, Confinement};

    /// macOS: each rule and its SBPL, then what is weaker; a rule's text
    /// (a path the policy names) is printed escaped.
    #[test]
    fn doctor_names_what_each_rule_compiles_to_under_seatbelt() {
        use crate::plan::seatbelt::CompiledRule;
        let sb = SeatbeltDoctor {
            os_version: Some("15.1".into()),
            compiled: vec![
                CompiledRule {
                    rule: "write ${PROJECT} (built-in)".into(),
                    sbpl: vec!["(allow file-write* (subpath (param \"P3\")))".into()],
                },
                CompiledRule {
                    rule: "deny ~/secret\u{1b}[2Jx (vetto.toml:3:9)".into(),
                    sbpl: vec![
                        "(deny file-read* (subpath (param \"P7\")))".into(),
                        "(deny file-write* (subpath (param \"P7\")))".into(),
                    ],
                },
            ],
            weaker: SEATBELT_WEAKER,
        };
        let mut out = String::new();
        render_seatbelt(&mut out, &sb);
        assert!(!out.contains('\u{1b}'), "{out}");
        insta::assert_snapshot!("doctor_seatbelt_section", out);
    }

    /// Windows: the grants and denies the policy becomes, escaped, and
    /// that violations are not observed.
    #[test]
    fn doctor_names_the_appcontainer_grants_and_what_is_not_observed() {
        use crate::plan::appcontainer::{AclDeny, AclGrant, DenyAccess, GrantAccess, GrantPlan};
        let ac = AppContainerDoctor {
            plan: Ok(GrantPlan {
                grants: vec![AclGrant {
                    path: "C:/src/pro\u{1b}[2Jj".into(),
                    access: GrantAccess::Write,
                }],
                denies: vec![AclDeny {
                    path: "C:/src/proj/.env".into(),
                    access: DenyAccess::All,
                }],
                capabilities: vec![],
                max_processes: None,
                max_memory_bytes: None,
                timeout_ms: None,
            }),
            weaker: APPCONTAINER_WEAKER,
        };
        let mut out = String::new();
        render_appcontainer(&mut out, &ac);
        assert!(!out.contains('\u{1b}'), "{out}");
        assert!(out.contains("not observed"), "{out}");
        insta::assert_snapshot!("doctor_appcontainer_section", out);
    }

    fn complete_host() -> HostCaps {
        HostCaps {
            kernel: "6.18.44-fc-v595".into(),
            landlock_errata: 1,
            root: false,
            tested: true,
            ..HostCaps::everything()
        }
    }

    /// Ubuntu 24.04 on an older kernel, as on common CI runners.
    fn ubuntu_with_apparmor_userns_restriction() -> HostCaps {
        HostCaps {
            kernel: "6.8.0-45-generic".into(),
            landlock_abi: 4,
            userns: Availability::Missing(
                "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10+ AppArmor \
                 restriction); fix: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0, \
                 or an AppArmor profile for vetto that allows `userns,`"
                    .into(),
            ),
            confinement: Confinement {
                container: Some("docker".into()),
                seccomp_filter: true,
                ..Confinement::default()
            },
            tested: true,
            ..HostCaps::everything()
        }
    }

    #[test]
    fn doctor_table_for_a_complete_host() {
        insta::assert_snapshot!(render(&DoctorReport::new(complete_host(), 42)));
    }

    #[test]
    fn doctor_table_names_the_apparmor_userns_restriction_and_its_fix() {
        let out = render(&DoctorReport::new(
            ubuntu_with_apparmor_userns_restriction(),
            57,
        ));
        assert!(out.contains("fix: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"));
        assert!(out.contains("auto would choose         fs-only"));
        insta::assert_snapshot!(out);
    }

    #[test]
    fn doctor_table_without_landlock_or_notify() {
        let host = HostCaps {
            kernel: "5.10.0-30-amd64".into(),
            landlock_abi: 0,
            landlock_missing: Some(
                "EOPNOTSUPP: Landlock is built in but not enabled at boot (active LSMs: \
                 lockdown,capability,apparmor); fix: add landlock to the lsm= kernel parameter"
                    .into(),
            ),
            seccomp_notify: Availability::Missing(
                "Linux 5.10.0 lacks SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19+)".into(),
            ),
            ..HostCaps::everything()
        };
        insta::assert_snapshot!(render(&DoctorReport::new(host, 30)));
    }

    #[test]
    fn doctor_json_field_names_are_stable() {
        let report = DoctorReport::new(ubuntu_with_apparmor_userns_restriction(), 57);
        insta::assert_json_snapshot!(report);
    }

    #[test]
    fn rows_wrap_under_the_text_column() {
        let mut out = String::new();
        row(&mut out, "  x", &"word ".repeat(40));
        for line in out.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
        assert!(
            out.lines()
                .skip(1)
                .all(|l| l.starts_with(&" ".repeat(TEXT_COL)))
        );
    }
}
