//! Synthetic sessions for tests, snapshots and the render benchmark. Not
//! for production use; fixed times and paths so snapshots are stable.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::events::log::to_line;
use crate::events::{
    Action, Aggregator, CiInfo, ConnDecision, ConnReason, ConnVia, Connection, Ecosystem, Event,
    GitInfo, HostFacts, LimitEvent, LimitKind, Package, PolicyInfo, PolicyRef, PolicySource,
    ProcessEvent, ProcessInfo, ProcessKind, Provenance, ResourceSample, RuleId, SessionEnd,
    SessionStart, Target, Timestamp, Violation,
};
use crate::exit::Outcome;
use crate::tier::Tier;

pub const T0: u64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
pub const PROJECT: &str = "/home/runner/work/app/app";
pub const HOME: &str = "/home/runner";

pub fn start() -> SessionStart {
    SessionStart {
        vetto_version: "0.1.0".into(),
        started_at: Timestamp(T0),
        tier: Tier::Full,
        enforced: vec![
            "landlock-abi-6".into(),
            "seccomp".into(),
            "user+mount+pid+net namespaces".into(),
            "secret masking".into(),
        ],
        degraded: vec![],
        audit: false,
        host: HostFacts {
            kernel: "6.8.0-1017-azure".into(),
            arch: "x86_64".into(),
            landlock_abi: 6,
            userns: true,
            seccomp: true,
            seccomp_notify: true,
        },
        policy: PolicyInfo {
            sources: vec![
                PolicySource {
                    name: "vetto.toml".into(),
                    digest: "sha256:1111".into(),
                },
                PolicySource {
                    name: "preset:default".into(),
                    digest: "sha256:2222".into(),
                },
            ],
            digest: "sha256:3333".into(),
            rules: vec![
                "read  ${PROJECT}  (policies/default.toml:3)".into(),
                "write ${PROJECT}/node_modules  (vetto.toml:4)".into(),
                "deny  ~/.npmrc  (policies/default.toml:9)".into(),
                "net   off  (policies/default.toml:12)".into(),
            ],
            origin: Some(crate::policy::PolicyOrigin::GitRef {
                reference: "origin/main".into(),
                commit: "0123456789abcdef0123456789abcdef01234567".into(),
                path: "vetto.toml".into(),
                found: true,
            }),
            line: Some(
                "policy origin/main:vetto.toml (extends default) sha256:1111 from git ref origin/main (0123456789ab)"
                    .into(),
            ),
            working_tree_differs: true,
        },
        command: vec!["npm".into(), "ci".into()],
        cwd: PROJECT.into(),
        project: PROJECT.into(),
        home: Some(HOME.into()),
        session_tmp: Some("/tmp/vetto-77-abc".into()),
        git: Some(GitInfo {
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            branch: Some("main".into()),
            remote_url: Some("https://github.com/example/app".into()),
        }),
        ci: Some(CiInfo {
            workflow: Some(".github/workflows/ci.yml".into()),
            job: Some("test".into()),
            run_url: None,
        }),
        withheld_env: vec!["GITHUB_ENV".into(), "NPM_TOKEN".into()],
    }
}

fn evil() -> Package {
    Package {
        ecosystem: Ecosystem::Npm,
        name: "evil".into(),
        version: Some("6.6.6".into()),
        manifest: format!("{PROJECT}/node_modules/evil/package.json").into(),
    }
}

fn node_proc(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        exe: "/usr/bin/node".into(),
        argv: vec!["node".into(), "node_modules/evil/install.js".into()],
        cwd: PROJECT.into(),
        parent_chain: vec![(pid - 1, "/bin/sh".into()), (2, "/usr/bin/npm".into())],
    }
}

fn v(rule: RuleId, ms: u64, target: Target, pkg: Option<Package>, pid: u32) -> Violation {
    Violation {
        rule,
        time: Timestamp(T0 + ms),
        action: Action::Blocked,
        process: node_proc(pid),
        target,
        attribution: pkg,
        policy_rule: None,
        detail: String::new(),
        provenance: Provenance::SeccompNotify,
    }
}

fn path(p: &str) -> Target {
    Target::Path {
        path: PathBuf::from(p.replace("$P", PROJECT).replace('~', HOME)),
    }
}

/// The violations of the attack session, in the order they happen.
pub fn attack_violations() -> Vec<Violation> {
    let mut out = vec![
        v(
            RuleId::SecretReadDenied,
            1200,
            path("~/.npmrc"),
            Some(evil()),
            101,
        ),
        v(
            RuleId::GitPersistenceBlocked,
            1300,
            path("$P/.git/hooks/pre-commit"),
            Some(evil()),
            101,
        ),
        v(
            RuleId::CiControlFileBlocked,
            1400,
            path("/home/runner/work/_temp/_runner_file_commands/set_env_1234"),
            Some(evil()),
            101,
        ),
        v(
            RuleId::UnixSocketDenied,
            1500,
            Target::Socket {
                path: "/tmp/ssh-XXXX/agent.1".into(),
            },
            Some(evil()),
            101,
        ),
        v(
            RuleId::NetSocketDenied,
            1600,
            Target::Syscall {
                name: "socket".into(),
            },
            Some(evil()),
            101,
        ),
        v(
            RuleId::SyscallDenied,
            1700,
            Target::Syscall {
                name: "ptrace".into(),
            },
            None,
            130,
        ),
        v(
            RuleId::FsWriteDenied,
            1800,
            path("$P/../<img src=x onerror=alert(1)>"),
            None,
            131,
        ),
        v(
            RuleId::FsWriteDenied,
            1900,
            path("$P/src/<script>alert('x')</script>.js"),
            None,
            131,
        ),
    ];
    let mut fs_read = v(RuleId::FsReadDenied, 2000, path("/etc/shadow"), None, 140);
    fs_read.policy_rule = Some(PolicyRef {
        source: format!("{PROJECT}/vetto.toml"),
        line: 7,
        written: "deny = [\"/etc/shadow\"]".into(),
    });
    out.push(fs_read);
    let mut escaped = v(
        RuleId::ProcessEscaped,
        4000,
        Target::Process {
            pid: 200,
            exe: "/usr/bin/sleep".into(),
        },
        None,
        200,
    );
    escaped.provenance = Provenance::Supervisor;
    escaped.process = ProcessInfo {
        pid: 200,
        exe: "/usr/bin/sleep".into(),
        argv: vec!["sleep".into(), "3600".into()],
        cwd: PROJECT.into(),
        parent_chain: vec![(1, "/usr/bin/npm".into())],
    };
    out.push(escaped);
    for pid in 300..320 {
        // A storm of identical denials from different processes: one finding.
        out.push(v(
            RuleId::FsWriteDenied,
            2500 + u64::from(pid),
            path("~/.bashrc"),
            None,
            pid,
        ));
    }
    out
}

/// The whole attack session, as the writer would log it (aggregated).
pub fn attack_session() -> Vec<Event> {
    let start = start();
    let mut agg = Aggregator::new(start.roots());
    let mut events = vec![Event::SessionStart(Box::new(start))];
    events.push(Event::Process(ProcessEvent {
        time: Timestamp(T0 + 5),
        pid: 2,
        ppid: 1,
        kind: ProcessKind::Exec,
        exe: "/usr/bin/npm".into(),
        argv: vec!["npm".into(), "ci".into()],
    }));
    for (i, t) in (0..=40u64).map(|i| (i, i * 100)) {
        events.push(Event::Resource(ResourceSample {
            t,
            cpu_user_ms: i * 60,
            cpu_sys_ms: i * 15,
            rss_bytes: (20 + (i * 7) % 90) * 1024 * 1024,
            procs: 1 + (i % 9) as u32,
        }));
    }
    for viol in attack_violations() {
        if let Some(first) = agg.observe(viol) {
            events.push(Event::Violation(Box::new(first)));
        }
    }
    events.push(Event::Connection(Box::new(Connection {
        requests: Vec::new(),
        time: Timestamp(T0 + 1200),
        host: Some("registry.npmjs.org".into()),
        port: 443,
        addr: Some("104.16.1.35".into()),
        decision: ConnDecision::Allowed,
        reason: ConnReason::AllowedByRule,
        rule: Some("allow \"registry.npmjs.org\" (policies/node.toml:4:11)".into()),
        via: ConnVia::Connect,
        bytes_up: 2_310,
        bytes_down: 1_048_576,
        duration_ms: 840,
        process: None,
        attribution: None,
        detail: String::new(),
    })));
    events.push(Event::Limit(LimitEvent {
        time: Timestamp(T0 + 3900),
        limit: LimitKind::Procs,
        max: 512,
        observed: 512,
    }));
    events.push(Event::Process(ProcessEvent {
        time: Timestamp(T0 + 3990),
        pid: 2,
        ppid: 1,
        kind: ProcessKind::Exit { status: 0 },
        exe: "/usr/bin/npm".into(),
        argv: vec![],
    }));
    events.push(Event::Process(ProcessEvent {
        time: Timestamp(T0 + 4000),
        pid: 200,
        ppid: 1,
        kind: ProcessKind::Escaped,
        exe: "/usr/bin/sleep".into(),
        argv: vec!["sleep".into(), "3600".into()],
    }));
    events.extend(agg.flush().into_iter().map(Event::Repeated));
    events.push(Event::SessionEnd(Box::new(SessionEnd {
        ended_at: Timestamp(T0 + 4100),
        outcome: Outcome::Exited(0),
        exit_code: 0,
        duration_ms: 4100,
        cpu_user_ms: 2400,
        cpu_sys_ms: 600,
        peak_rss_bytes: 110 * 1024 * 1024,
        peak_procs: 9,
        proxy_bytes: 0,
        violations_by_rule: agg.counts_by_rule(),
        dropped_distinct: 0,
    })));
    events
}

/// A log of `total` write denials of which `distinct` are different files,
/// aggregated as the writer does (for the benchmark).
pub fn storm_session(total: u64, distinct: u64) -> Vec<Event> {
    let start = start();
    let mut agg = Aggregator::new(start.roots());
    let mut events = vec![Event::SessionStart(Box::new(start))];
    for n in 0..total {
        let k = n % distinct.max(1);
        let viol = v(
            RuleId::FsWriteDenied,
            n / 10,
            Target::Path {
                path: format!("{HOME}/.cache/storm/dir{}/file{k}.txt", k % 100).into(),
            },
            None,
            1000 + (n % 50) as u32,
        );
        if let Some(first) = agg.observe(viol) {
            events.push(Event::Violation(Box::new(first)));
        }
        if n % 10_000 == 9_999 {
            events.push(Event::Resource(ResourceSample {
                t: n / 10,
                cpu_user_ms: n / 20,
                cpu_sys_ms: n / 40,
                rss_bytes: 64 << 20,
                procs: 4,
            }));
        }
    }
    events.extend(agg.flush().into_iter().map(Event::Repeated));
    events.push(Event::SessionEnd(Box::new(SessionEnd {
        ended_at: Timestamp(T0 + total / 10),
        outcome: Outcome::Exited(0),
        exit_code: 0,
        duration_ms: total / 10,
        cpu_user_ms: 0,
        cpu_sys_ms: 0,
        peak_rss_bytes: 64 << 20,
        peak_procs: 4,
        proxy_bytes: 0,
        violations_by_rule: agg.counts_by_rule(),
        dropped_distinct: agg.dropped_distinct,
    })));
    events
}

/// Events as `session.jsonl` text.
pub fn to_jsonl(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| to_line(e).ok())
        .collect::<Vec<_>>()
        .concat()
}

/// Counts by rule as the end event carries them (for assertions).
pub fn counts(events: &[Event]) -> BTreeMap<RuleId, u64> {
    events
        .iter()
        .find_map(|e| match e {
            Event::SessionEnd(end) => Some(end.violations_by_rule.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The attack session folded into a report model.
pub fn attack_model() -> super::Model {
    let log = crate::events::log::SessionLog::parse(&to_jsonl(&attack_session()));
    super::Model::build(&log).unwrap_or_else(|| unreachable!("the fixture has a start"))
}

/// One connection record of the egress session.
#[allow(clippy::too_many_arguments)]
fn conn(
    ms: u64,
    host: Option<&str>,
    port: u16,
    addr: Option<&str>,
    decision: ConnDecision,
    reason: ConnReason,
    rule: Option<&str>,
    via: ConnVia,
    bytes: (u64, u64),
    process: Option<ProcessInfo>,
    attribution: Option<Package>,
) -> Connection {
    Connection {
        requests: Vec::new(),
        time: Timestamp(T0 + ms),
        host: host.map(str::to_string),
        port,
        addr: addr.map(str::to_string),
        decision,
        reason,
        rule: rule.map(str::to_string),
        via,
        bytes_up: bytes.0,
        bytes_down: bytes.1,
        duration_ms: 40,
        process,
        attribution,
        detail: String::new(),
    }
}

/// A connection the proxy refused for `reason`, made directly (`connect`),
/// by no known process: `addr` is what the name resolved to, if anything.
pub fn refused_connection(
    host: Option<&str>,
    port: u16,
    addr: Option<&str>,
    reason: ConnReason,
) -> Connection {
    let mut c = conn(
        1500,
        host,
        port,
        addr,
        ConnDecision::Denied,
        reason,
        None,
        ConnVia::Connect,
        (0, 0),
        None,
        None,
    );
    c.duration_ms = 0;
    c
}

fn curl_proc(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        exe: "/usr/bin/curl".into(),
        argv: vec!["curl".into(), "-s".into(), "http://169.254.169.254/".into()],
        cwd: PROJECT.into(),
        parent_chain: vec![(2, "/usr/bin/npm".into())],
    }
}

/// The connections of the egress session: `npm ci` fetching from the
/// allowed registry, a postinstall script of `evil` reaching for its own
/// host, a deny-listed host and the metadata address, a DNS query for a
/// canary name, and a name the job chose to be read as markup.
pub fn egress_connections() -> Vec<Connection> {
    use ConnDecision::{Allowed, Denied};
    let npm = || {
        Some(ProcessInfo {
            pid: 2,
            exe: "/usr/bin/npm".into(),
            argv: vec!["npm".into(), "ci".into()],
            cwd: PROJECT.into(),
            parent_chain: vec![],
        })
    };
    let allow_rule = Some("allow \"registry.npmjs.org\" (vetto.toml:3:10)");
    let mut out = Vec::new();
    for i in 0..5 {
        out.push(conn(
            300 + i * 10,
            Some("registry.npmjs.org"),
            443,
            Some("104.16.0.1"),
            Allowed,
            ConnReason::AllowedByRule,
            allow_rule,
            ConnVia::Connect,
            (2_000, 1_500_000 + i * 1000),
            npm(),
            None,
        ));
    }
    // The first connection carried `--secret NPM_TOKEN@registry.npmjs.org`.
    if let Some(first) = out.first_mut() {
        let request = |path: &str| crate::events::HttpRequest {
            method: "GET".into(),
            path: path.into(),
            status: Some(200),
            secrets: vec!["NPM_TOKEN".into()],
        };
        first.requests = vec![request("/@corp%2fui"), request("/@corp/ui/-/ui-2.1.0.tgz")];
    }
    out.push(conn(
        900,
        Some("github.com"),
        443,
        Some("140.82.112.3"),
        Allowed,
        ConnReason::AllowedByRule,
        Some("allow \"github.com\" (vetto.toml:3:32)"),
        ConnVia::Transparent,
        (4_000, 80_000),
        Some(ProcessInfo {
            pid: 150,
            exe: "/usr/bin/git".into(),
            argv: vec!["git".into(), "fetch".into()],
            cwd: PROJECT.into(),
            parent_chain: vec![(2, "/usr/bin/npm".into())],
        }),
        None,
    ));
    for pid in [101, 102] {
        out.push(conn(
            1250 + u64::from(pid),
            Some("exfil.evil.test"),
            443,
            None,
            Denied,
            ConnReason::NotAllowed,
            None,
            ConnVia::Connect,
            (0, 0),
            Some(node_proc(pid)),
            Some(evil()),
        ));
    }
    out.push(conn(
        1260,
        Some("pastebin.com"),
        443,
        None,
        Denied,
        ConnReason::DeniedByRule,
        Some("deny \"pastebin.com\" (vetto.toml:4:9)"),
        ConnVia::Http,
        (0, 0),
        Some(node_proc(101)),
        Some(evil()),
    ));
    let mut metadata = conn(
        1270,
        None,
        80,
        Some("169.254.169.254"),
        Denied,
        ConnReason::PrivateAddress,
        None,
        ConnVia::Redirect,
        (0, 0),
        Some(curl_proc(160)),
        None,
    );
    metadata.detail = "a direct connect() past the proxy, refused by the supervisor".into();
    out.push(metadata);
    out.push(conn(
        1280,
        Some("c2f1.canary.evil.test"),
        53,
        None,
        Denied,
        ConnReason::DnsRefused,
        None,
        ConnVia::Dns,
        (0, 0),
        Some(node_proc(101)),
        Some(evil()),
    ));
    out.push(conn(
        1290,
        Some("<img src=x onerror=alert(1)>.evil.test"),
        443,
        None,
        Denied,
        ConnReason::NotAllowed,
        None,
        ConnVia::Connect,
        (0, 0),
        None,
        None,
    ));
    out
}

/// A session with filtered egress: allowed and denied connections, each
/// denied one also a `net-egress-blocked` violation, as the writer logs
/// them.
pub fn egress_session() -> Vec<Event> {
    let mut start = start();
    start.policy.rules = vec![
        "read  ${PROJECT}  (policies/default.toml:3)".into(),
        "net   allow registry.npmjs.org github.com  (vetto.toml:3)".into(),
        "net   deny pastebin.com  (vetto.toml:4)".into(),
    ];
    let mut agg = Aggregator::new(start.roots());
    let mut events = vec![Event::SessionStart(Box::new(start))];
    for c in egress_connections() {
        let violation = c.violation(Provenance::Proxy);
        events.push(Event::Connection(Box::new(c)));
        if let Some(first) = violation.and_then(|v| agg.observe(v)) {
            events.push(Event::Violation(Box::new(first)));
        }
    }
    events.extend(agg.flush().into_iter().map(Event::Repeated));
    events.push(Event::SessionEnd(Box::new(SessionEnd {
        ended_at: Timestamp(T0 + 2000),
        outcome: Outcome::Exited(0),
        exit_code: 0,
        duration_ms: 2000,
        cpu_user_ms: 900,
        cpu_sys_ms: 200,
        peak_rss_bytes: 80 * 1024 * 1024,
        peak_procs: 6,
        proxy_bytes: 7_600_000,
        violations_by_rule: agg.counts_by_rule(),
        dropped_distinct: 0,
    })));
    events
}

/// The egress session folded into a report model.
pub fn egress_model() -> super::Model {
    let log = crate::events::log::SessionLog::parse(&to_jsonl(&egress_session()));
    super::Model::build(&log).unwrap_or_else(|| unreachable!("the fixture has a start"))
}
