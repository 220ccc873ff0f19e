//! The Sandbox's denials as the macOS unified log reports them:
//! `log stream --style ndjson --predicate 'sender == "Sandbox"'` prints one
//! JSON object per line whose `eventMessage` reads
//! `Sandbox: NAME(PID) deny(COUNT) OPERATION TARGET`. Pure, so it is tested
//! on every OS; the supervisor keeps only the lines of the session's pids.

use serde::Deserialize;

use crate::events::{Action, ProcessInfo, Provenance, RuleId, Target, Timestamp, Violation};

/// The longest line read (the log's own lines are far shorter).
pub const MAX_LINE: usize = 16 * 1024;

/// One denial, as the kernel's Sandbox extension logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub pid: u32,
    /// The process name as the log gives it (job-controlled: escape it).
    pub process: String,
    /// The SBPL operation denied (`file-read-data`, `network-outbound`, …).
    pub operation: String,
    /// The path or address (job-controlled: escape it).
    pub target: String,
}

impl Denial {
    /// The vetto rule this denial is a violation of.
    pub fn rule(&self) -> Option<RuleId> {
        let op = self.operation.as_str();
        if op.starts_with("file-read") {
            Some(RuleId::FsReadDenied)
        } else if op.starts_with("file-write") {
            Some(RuleId::FsWriteDenied)
        } else if op.starts_with("network") {
            Some(RuleId::NetEgressBlocked)
        } else {
            None
        }
    }
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "eventMessage", borrow)]
    event_message: std::borrow::Cow<'a, str>,
}

/// Parse one ndjson line; `None` for anything that is not a denial (the
/// stream's header, other Sandbox messages, an oversized line).
pub fn parse_line(line: &str) -> Option<Denial> {
    if line.len() > MAX_LINE {
        return None;
    }
    let parsed: Line<'_> = serde_json::from_str(line).ok()?;
    parse_message(&parsed.event_message)
}

/// `Sandbox: NAME(PID) deny(COUNT) OPERATION TARGET`.
pub fn parse_message(msg: &str) -> Option<Denial> {
    let rest = msg.strip_prefix("Sandbox: ")?;
    // The name may hold parentheses: the last ") deny(" ends it.
    let split = rest.rfind(") deny(")?;
    let (head, tail) = (&rest[..split], &rest[split + ") deny(".len()..]);
    let open = head.rfind('(')?;
    let process = head[..open].to_string();
    let pid: u32 = head[open + 1..].parse().ok()?;
    let close = tail.find(") ")?;
    tail[..close].parse::<u32>().ok()?;
    let after = &tail[close + 2..];
    let (operation, target) = match after.split_once(' ') {
        Some((op, t)) => (op, t),
        None => (after, ""),
    };
    if operation.is_empty() {
        return None;
    }
    Some(Denial {
        pid,
        process,
        operation: operation.to_string(),
        target: target.to_string(),
    })
}

/// The denial as the violation the session log records, with the process
/// as the supervisor could read it (`None`: it was gone; then the log's
/// pid and name are all there is). `None` for operations no vetto rule
/// covers (Mach lookups, sysctl writes…).
pub fn violation(d: &Denial, time: Timestamp, process: Option<ProcessInfo>) -> Option<Violation> {
    let rule = d.rule()?;
    let target = match rule {
        RuleId::NetEgressBlocked => network_target(&d.target),
        _ => Target::Path {
            path: d.target.clone().into(),
        },
    };
    let process = process.unwrap_or_else(|| ProcessInfo {
        pid: d.pid,
        exe: d.process.clone().into(),
        argv: Vec::new(),
        cwd: Default::default(),
        parent_chain: Vec::new(),
    });
    Some(Violation {
        rule,
        time,
        action: Action::Blocked,
        process,
        target,
        attribution: None,
        policy_rule: None,
        detail: format!("Seatbelt denied {}", d.operation),
        provenance: Provenance::SandboxLog,
    })
}

/// `93.184.216.34:443`, `[::1]:80`, `localhost:443`, or a unix socket's path.
fn network_target(t: &str) -> Target {
    if t.starts_with('/') {
        return Target::Socket { path: t.into() };
    }
    let (addr, port) = match t.rsplit_once(':') {
        Some((a, p)) => match p.parse::<u16>() {
            Ok(port) => (a, Some(port)),
            Err(_) => (t, None),
        },
        None => (t, None),
    };
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    if addr.parse::<std::net::IpAddr>().is_ok() {
        Target::Address {
            addr: addr.to_string(),
            port,
        }
    } else {
        Target::Host {
            host: addr.to_string(),
            port,
        }
    }
}

/// Only the session's processes.
pub fn of_session<'a, I>(
    lines: I,
    pids: &'a std::collections::HashSet<u32>,
) -> impl Iterator<Item = Denial> + 'a
where
    I: Iterator<Item = &'a str> + 'a,
{
    lines
        .filter_map(parse_line)
        .filter(move |d| pids.contains(&d.pid))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]
    use super::*;

    // Written from the documented ndjson shape of `log stream` and the
    // Sandbox's message format.
    const SAMPLE: &str = r#"Filtering the log data using "sender == \"Sandbox\""
{"traceID":1234,"eventMessage":"Sandbox: cat(4242) deny(1) file-read-data \/Users\/dev\/.ssh\/id_ed25519","eventType":"logEvent","processID":0,"senderImagePath":"\/System\/Library\/Extensions\/Sandbox.kext\/Contents\/MacOS\/Sandbox","timestamp":"2025-01-02 10:11:12.131415+0100"}
{"traceID":1235,"eventMessage":"Sandbox: node (x)(4243) deny(2) file-write-create \/Users\/dev\/proj\/.git\/hooks\/pre-commit","eventType":"logEvent","processID":0,"timestamp":"2025-01-02 10:11:12.2+0100"}
{"traceID":1236,"eventMessage":"Sandbox: curl(4244) deny(1) network-outbound 93.184.216.34:443","eventType":"logEvent","processID":0,"timestamp":"2025-01-02 10:11:12.3+0100"}
{"traceID":1237,"eventMessage":"Sandbox: other(999) deny(1) file-read-data \/etc\/passwd","eventType":"logEvent","processID":0,"timestamp":"2025-01-02 10:11:12.4+0100"}
{"traceID":1238,"eventMessage":"Sandbox: mdworker(77) allow file-read-data \/x","eventType":"logEvent","processID":0,"timestamp":"2025-01-02 10:11:12.5+0100"}
"#;

    #[test]
    fn denials_of_the_session_are_parsed_with_their_process_and_rule() {
        let pids = [4242, 4243, 4244].into_iter().collect();
        let got: Vec<Denial> = of_session(SAMPLE.lines(), &pids).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].process, "cat");
        assert_eq!(got[0].target, "/Users/dev/.ssh/id_ed25519");
        assert_eq!(got[0].rule(), Some(RuleId::FsReadDenied));
        assert_eq!(got[1].process, "node (x)");
        assert_eq!(got[1].pid, 4243);
        assert_eq!(got[1].rule(), Some(RuleId::FsWriteDenied));
        assert_eq!(got[2].operation, "network-outbound");
        assert_eq!(got[2].rule(), Some(RuleId::NetEgressBlocked));
    }

    #[test]
    fn malformed_and_oversized_lines_are_ignored() {
        assert_eq!(parse_line("{"), None);
        assert_eq!(
            parse_line(r#"{"eventMessage":"Sandbox: x(abc) deny(1) file-read-data /"}"#),
            None
        );
        let big = format!(
            r#"{{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /{}"}}"#,
            "a".repeat(MAX_LINE)
        );
        assert_eq!(parse_line(&big), None);
        assert!(
            parse_line(r#"{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /"}"#).is_some()
        );
    }

    #[test]
    fn denials_become_the_violations_reports_read() {
        let pids = [4242, 4243, 4244].into_iter().collect();
        let got: Vec<Violation> = of_session(SAMPLE.lines(), &pids)
            .filter_map(|d| violation(&d, Timestamp::now(), None))
            .collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].rule, RuleId::FsReadDenied);
        assert_eq!(
            got[0].target,
            Target::Path {
                path: "/Users/dev/.ssh/id_ed25519".into()
            }
        );
        assert_eq!(got[0].process.pid, 4242);
        assert_eq!(got[0].process.exe, std::path::PathBuf::from("cat"));
        assert_eq!(got[0].provenance, Provenance::SandboxLog);
        assert_eq!(got[0].action, Action::Blocked);
        assert_eq!(got[1].rule, RuleId::FsWriteDenied);
        assert_eq!(
            got[2].target,
            Target::Address {
                addr: "93.184.216.34".into(),
                port: Some(443)
            }
        );
        // The process as the supervisor read it wins over the log's name.
        let known = ProcessInfo {
            pid: 4242,
            exe: "/bin/cat".into(),
            argv: vec!["cat".into()],
            cwd: "/Users/dev/proj".into(),
            parent_chain: Vec::new(),
        };
        let d = parse_message("Sandbox: cat(4242) deny(1) file-read-data /x").unwrap();
        let v = violation(&d, Timestamp::now(), Some(known.clone())).unwrap();
        assert_eq!(v.process, known);
    }

    #[test]
    fn network_and_unhandled_denials_are_mapped_or_left_out() {
        assert_eq!(
            network_target("[::1]:8080"),
            Target::Address {
                addr: "::1".into(),
                port: Some(8080)
            }
        );
        assert_eq!(
            network_target("localhost:443"),
            Target::Host {
                host: "localhost".into(),
                port: Some(443)
            }
        );
        assert_eq!(
            network_target("/private/var/run/docker.sock"),
            Target::Socket {
                path: "/private/var/run/docker.sock".into()
            }
        );
        let d = parse_message("Sandbox: x(1) deny(1) mach-lookup com.apple.pasteboard.1").unwrap();
        assert_eq!(violation(&d, Timestamp::now(), None), None);
    }
}
