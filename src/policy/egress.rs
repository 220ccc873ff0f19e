//! The egress rules as data and the decisions made from them. Pure: no
//! sockets, no clock; every function here is total over its input, so a
//! fuzzer can call it with anything. It lives with the policy, like the
//! path decision (`paths`), so that the proxy (what is enforced) and
//! `policy explain` (what the user is told) decide with one function and
//! the data flow keeps pointing one way: policy → proxy.
//!
//! - A name is allowed when an allow pattern matches it and no deny
//!   pattern does (deny wins). An allow pattern without a port allows 80
//!   and 443; a deny pattern without a port denies every port.
//! - A bare address (no name) is allowed only by an IP rule — a pin lets a
//!   *name* resolve to an internal address, it never allows connecting to
//!   that address by number.
//! - After resolution, an internal address (see [`super::addr`]) is refused
//!   unless an IP rule covers it, or it is a loopback address that came
//!   from a pin for that name (a pin to `10.0.0.1` or `169.254.169.254`
//!   still needs an IP rule).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::policy::{HostPattern, Origin, PinnedHost};

use super::addr::{AddrClass, classify};

/// Why, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnReason {
    /// An allow rule (name or IP rule) matched.
    AllowedByRule,
    /// No allow rule matched.
    NotAllowed,
    /// A deny rule matched (deny wins over allow).
    DeniedByRule,
    /// The address is loopback, private, link-local, CGNAT, multicast,
    /// unspecified, broadcast, reserved or a metadata address, and neither
    /// a pin nor an IP rule names it.
    PrivateAddress,
    /// The TLS ClientHello named another host than the one allowed.
    SniMismatch,
    /// A TLS ClientHello without a server name, for a name rule.
    SniMissing,
    /// The explicit proxy was used without the session's credential.
    NoCredential,
    /// The request was not one the proxy understands.
    Malformed,
    /// A bound was reached (header size, connections, idle time, bytes).
    Limit,
    /// A DNS query refused (FS-ONLY) or answered NXDOMAIN (FULL stub).
    DnsRefused,
    /// The name did not resolve on the host.
    ResolveFailed,
    /// Connecting to the destination or the upstream proxy failed.
    UpstreamFailed,
    /// A request on a connection the proxy reads (a secret's host) was
    /// refused: its `Host` or target named another server (domain
    /// fronting), or it was not HTTP/1.1 the proxy could frame.
    RequestRefused,
}

impl ConnReason {
    pub fn describe(self) -> &'static str {
        match self {
            ConnReason::AllowedByRule => "allowed by a rule",
            ConnReason::NotAllowed => "no allow rule names this destination",
            ConnReason::DeniedByRule => "a deny rule names this destination",
            ConnReason::PrivateAddress => {
                "the address is internal (loopback, private, link-local, metadata …) and no pin or IP rule names it"
            }
            ConnReason::SniMismatch => "the TLS server name differs from the allowed host",
            ConnReason::SniMissing => "the TLS handshake names no server",
            ConnReason::NoCredential => "the proxy was used without the session credential",
            ConnReason::Malformed => "malformed request",
            ConnReason::Limit => "a limit was reached",
            ConnReason::DnsRefused => "DNS query refused",
            ConnReason::ResolveFailed => "the name did not resolve",
            ConnReason::UpstreamFailed => "the destination could not be reached",
            ConnReason::RequestRefused => {
                "a request to a secret's host named another server, or could not be read"
            }
        }
    }
}

/// The ports a name rule without a port allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// `10.1.2.0/24`, `fd00::/8`, `192.0.2.7` (a /32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `None` when the prefix is longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Cidr> {
        let bits = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        (prefix <= bits).then(|| Cidr {
            net: mask(addr, prefix),
            prefix,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        matches!(
            (self.net, ip),
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_))
        ) && mask(ip, self.prefix) == self.net
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = RuleParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || RuleParseError(s.to_string());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => {
                let addr: IpAddr = a.parse().map_err(|_| bad())?;
                let p: u8 = p.parse().map_err(|_| bad())?;
                (addr, p)
            }
            None => {
                let addr: IpAddr = s.parse().map_err(|_| bad())?;
                (addr, if addr.is_ipv4() { 32 } else { 128 })
            }
        };
        Cidr::new(canonical(addr), prefix).ok_or_else(bad)
    }
}

/// Not an IP rule: `what` is the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an IP rule: expected ADDR[/PREFIX][:PORT], e.g. 10.1.2.0/24:5432 or [fd00::/8]:443"
)]
pub struct RuleParseError(pub String);

/// `10.1.2.0/24:5432`: addresses allowed directly, also internal ones.
/// Without a port, every port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpRule {
    pub net: Cidr,
    pub port: Option<u16>,
    pub origin: Origin,
}

impl IpRule {
    /// Parse `ADDR[/PREFIX][:PORT]`; IPv6 with a port is bracketed:
    /// `[fd00::/8]:443`.
    pub fn parse(text: &str, origin: Origin) -> Result<IpRule, RuleParseError> {
        let bad = || RuleParseError(text.to_string());
        let (net, port) = if let Some(rest) = text.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(bad)?),
            };
            (inside, port)
        } else if text.matches(':').count() == 1 {
            let (a, p) = text.split_once(':').ok_or_else(bad)?;
            (a, Some(p))
        } else {
            (text, None)
        };
        let port = match port {
            Some(p) => Some(p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(bad)?),
            None => None,
        };
        Ok(IpRule {
            net: net.parse().map_err(|_| bad())?,
            port,
            origin,
        })
    }

    pub fn matches(&self, ip: IpAddr, port: u16) -> bool {
        self.net.contains(ip) && self.port.is_none_or(|p| p == port)
    }

    /// The policy's address rules as the proxy and `policy explain` decide
    /// with them (validation guarantees each prefix fits its address).
    pub fn from_policy(ips: &[super::IpRule]) -> Vec<IpRule> {
        ips.iter()
            .filter_map(|r| {
                Some(IpRule {
                    net: Cidr::new(r.net, r.prefix)?,
                    port: r.port,
                    origin: r.origin.clone(),
                })
            })
            .collect()
    }

    fn describe(&self) -> String {
        let at = where_from(&self.origin);
        match self.port {
            Some(p) if self.net.net.is_ipv6() => format!("allow [{}]:{p} ({at})", self.net),
            Some(p) => format!("allow {}:{p} ({at})", self.net),
            None => format!("allow {} ({at})", self.net),
        }
    }
}

/// A decision and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: ConnReason,
    /// The deciding rule in words, when one decided.
    pub rule: Option<String>,
}

impl Decision {
    fn allow(rule: String) -> Decision {
        Decision {
            allowed: true,
            reason: ConnReason::AllowedByRule,
            rule: Some(rule),
        }
    }

    fn deny(reason: ConnReason, rule: Option<String>) -> Decision {
        Decision {
            allowed: false,
            reason,
            rule,
        }
    }
}

/// The rules of one session.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub allow: Vec<HostPattern>,
    pub deny: Vec<HostPattern>,
    pub ip_rules: Vec<IpRule>,
    pub pins: Vec<PinnedHost>,
    /// `[network] expected`: refusals of these names are recorded as
    /// expected (they are refused all the same).
    pub expected: Vec<HostPattern>,
}

/// `vetto.toml:3:9`, or the option's name (`--allow-domain`) for a rule
/// from the command line.
fn where_from(o: &Origin) -> String {
    if o.line == 0 {
        o.source.clone()
    } else {
        format!("{}:{}:{}", o.source, o.line, o.col)
    }
}

fn describe_pattern(verb: &str, p: &HostPattern) -> String {
    let at = where_from(&p.origin);
    match p.port {
        Some(port) => format!("{verb} \"{}:{port}\" ({at})", p.host),
        None => format!("{verb} \"{}\" ({at})", p.host),
    }
}

/// A host name as the rules see it: lower case, no trailing dot. `None`
/// for anything that is not a plain DNS name (an IP literal, empty, too
/// long, or with characters outside `[a-z0-9._-]`).
pub fn normalise_name(host: &str) -> Option<String> {
    let h = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| !l.is_empty() && l.len() <= 63)
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        && h.parse::<IpAddr>().is_err();
    ok.then_some(h)
}

impl Rules {
    /// May the job connect to `host:port` (before resolution)?
    pub fn decide_name(&self, host: &str, port: u16) -> Decision {
        let Some(host) = normalise_name(host) else {
            return Decision::deny(ConnReason::Malformed, None);
        };
        if let Some(d) = self.deny.iter().find(|p| p.matches(&host, Some(port))) {
            return Decision::deny(ConnReason::DeniedByRule, Some(describe_pattern("deny", d)));
        }
        let allowed = self.allow.iter().find(|p| {
            p.matches(&host, Some(port)) && (p.port.is_some() || DEFAULT_PORTS.contains(&port))
        });
        match allowed {
            Some(p) => Decision::allow(describe_pattern("allow", p)),
            None => Decision::deny(ConnReason::NotAllowed, None),
        }
    }

    /// May the job connect to this bare address (no name)? Only an IP rule
    /// allows it.
    pub fn decide_addr(&self, ip: IpAddr, port: u16) -> Decision {
        match self.ip_rules.iter().find(|r| r.matches(ip, port)) {
            Some(r) => Decision::allow(r.describe()),
            None if !classify(ip).is_public() => Decision::deny(ConnReason::PrivateAddress, None),
            None => Decision::deny(ConnReason::NotAllowed, None),
        }
    }

    /// The pinned addresses for a (normalised) name, in the order given.
    pub fn pinned(&self, host: &str) -> Vec<IpAddr> {
        self.pins
            .iter()
            .filter(|p| {
                p.host
                    .eq_ignore_ascii_case(host.strip_suffix('.').unwrap_or(host))
            })
            .map(|p| p.addr)
            .collect()
    }

    /// May an allowed name's resolved address `ip` be connected to?
    /// `pinned`: the address came from a `--resolve` pin for the name. A
    /// pin says "this name is at this address": it makes that address
    /// usable for that name alone — a local server, a corporate mirror at
    /// 10.x, a registry gateway in a reserved range — still decided by the
    /// name and checked against the TLS server name, while the address by
    /// number stays closed. Only the metadata service (which hands out the
    /// machine's credentials) and what is no destination (unspecified,
    /// multicast, broadcast) stay refused even when pinned. Unpinned, an
    /// internal address needs an IP rule.
    pub fn check_resolved(&self, ip: IpAddr, port: u16, pinned: bool) -> Result<(), AddrClass> {
        let class = classify(ip);
        if class.is_public()
            || (pinned && pin_opens(class))
            || self.ip_rules.iter().any(|r| r.matches(ip, port))
        {
            Ok(())
        } else {
            Err(class)
        }
    }
}

/// Whether a pin of a name to an address of `class` lets that name reach it.
fn pin_opens(class: AddrClass) -> bool {
    !matches!(
        class,
        AddrClass::Metadata | AddrClass::Unspecified | AddrClass::Multicast | AddrClass::Broadcast
    )
}

/// What would let an allowed name that resolved to the internal address
/// `ip` be reached, if that is intended — exactly what
/// [`Rules::check_resolved`] lets through, so that advice given for such a
/// refusal never leads to the same refusal again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InternalReach {
    /// A pin of the name to that address (`HOST:IP`, as `--resolve` and
    /// `[network] resolve` take it): that name alone reaches it, still
    /// checked by name and TLS server name. Never an address rule, which
    /// would drop both checks and open every host behind the address.
    Pin(String),
    /// Nothing is proposed: why.
    Never(&'static str),
}

pub fn internal_reach(host: &str, ip: IpAddr) -> InternalReach {
    let class = classify(ip);
    if class == AddrClass::Metadata {
        InternalReach::Never(
            "the cloud metadata address, which hands out the machine's credentials",
        )
    } else if !pin_opens(class) {
        InternalReach::Never(
            "an address that is no destination (a name blocked by its DNS, or misconfigured)",
        )
    } else if host.is_empty() || host.parse::<IpAddr>().is_ok() {
        InternalReach::Never("an address, not a name: only a name can be pinned")
    } else {
        InternalReach::Pin(format!("{host}:{ip}"))
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            source: "vetto.toml".into(),
            line: 3,
            col: 9,
            written: String::new(),
        }
    }

    fn pat(s: &str) -> HostPattern {
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.parse().unwrap())),
            None => (s, None),
        };
        HostPattern {
            host: host.into(),
            port,
            origin: origin(),
        }
    }

    fn rules(allow: &[&str], deny: &[&str], ip: &[&str]) -> Rules {
        Rules {
            allow: allow.iter().map(|s| pat(s)).collect(),
            deny: deny.iter().map(|s| pat(s)).collect(),
            ip_rules: ip
                .iter()
                .map(|s| IpRule::parse(s, origin()).unwrap())
                .collect(),
            pins: vec![PinnedHost {
                host: "allowed.test".into(),
                addr: "127.0.0.1".parse().unwrap(),
                origin: origin(),
            }],
            expected: Vec::new(),
        }
    }

    #[test]
    fn exact_names_default_to_ports_80_and_443() {
        let r = rules(&["registry.npmjs.org"], &[], &[]);
        assert!(r.decide_name("registry.npmjs.org", 443).allowed);
        assert!(r.decide_name("REGISTRY.npmjs.org.", 80).allowed);
        assert!(!r.decide_name("registry.npmjs.org", 22).allowed);
        assert!(!r.decide_name("npmjs.org", 443).allowed);
        assert!(!r.decide_name("evil-registry.npmjs.org", 443).allowed);
        assert_eq!(
            r.decide_name("registry.npmjs.org", 443).rule.as_deref(),
            Some("allow \"registry.npmjs.org\" (vetto.toml:3:9)")
        );
    }

    #[test]
    fn explicit_port_allows_only_that_port() {
        let r = rules(&["github.com:22"], &[], &[]);
        assert!(r.decide_name("github.com", 22).allowed);
        assert!(!r.decide_name("github.com", 443).allowed);
    }

    #[test]
    fn suffix_patterns_match_subdomains_not_the_apex_or_lookalikes() {
        let r = rules(&["*.example.com"], &[], &[]);
        assert!(r.decide_name("a.example.com", 443).allowed);
        assert!(r.decide_name("a.b.example.com", 80).allowed);
        assert!(!r.decide_name("example.com", 443).allowed);
        assert!(!r.decide_name("badexample.com", 443).allowed);
        assert!(!r.decide_name("example.com.evil.net", 443).allowed);
    }

    #[test]
    fn deny_wins_over_allow_on_every_port() {
        let r = rules(&["*.example.com"], &["secret.example.com"], &[]);
        let d = r.decide_name("secret.example.com", 443);
        assert_eq!(d.reason, ConnReason::DeniedByRule);
        assert!(!d.allowed);
        assert!(r.decide_name("open.example.com", 443).allowed);
    }

    #[test]
    fn hostile_names_are_malformed_not_allowed() {
        let r = rules(&["*.example.com", "example.com"], &[], &[]);
        for h in [
            "",
            ".",
            "a..example.com",
            "a.example.com\0",
            "a.example.com/x",
            "a.example.com:443",
            "a example.com",
            "*.example.com",
            "127.0.0.1",
            "::1",
            &"a".repeat(300),
        ] {
            let d = r.decide_name(h, 443);
            assert!(!d.allowed, "{h:?}");
        }
        assert_eq!(
            r.decide_name("127.0.0.1", 443).reason,
            ConnReason::Malformed
        );
    }

    #[test]
    fn bare_addresses_need_an_ip_rule_even_when_pinned() {
        let r = rules(
            &["allowed.test"],
            &[],
            &["10.1.2.0/24:5432", "[fd00::/8]:443"],
        );
        assert!(r.decide_addr("10.1.2.7".parse().unwrap(), 5432).allowed);
        assert!(!r.decide_addr("10.1.2.7".parse().unwrap(), 5433).allowed);
        assert!(!r.decide_addr("10.1.3.7".parse().unwrap(), 5432).allowed);
        assert!(
            r.decide_addr("::ffff:10.1.2.9".parse().unwrap(), 5432)
                .allowed
        );
        assert!(r.decide_addr("fd00::5".parse().unwrap(), 443).allowed);
        let d = r.decide_addr("127.0.0.1".parse().unwrap(), 443);
        assert_eq!(d.reason, ConnReason::PrivateAddress);
        assert_eq!(
            r.decide_addr("8.8.8.8".parse().unwrap(), 443).reason,
            ConnReason::NotAllowed
        );
    }

    #[test]
    fn resolved_internal_addresses_need_a_pin_or_ip_rule() {
        let r = rules(&["allowed.test"], &[], &["10.9.0.0/16"]);
        let lo = "127.0.0.1".parse().unwrap();
        assert_eq!(r.check_resolved(lo, 443, false), Err(AddrClass::Loopback));
        assert_eq!(r.check_resolved(lo, 443, true), Ok(()));
        assert_eq!(
            r.check_resolved("10.9.1.1".parse().unwrap(), 443, false),
            Ok(())
        );
        assert_eq!(
            r.check_resolved("169.254.169.254".parse().unwrap(), 80, false),
            Err(AddrClass::Metadata)
        );
        assert_eq!(
            r.check_resolved("1.1.1.1".parse().unwrap(), 80, false),
            Ok(())
        );
        assert_eq!(r.pinned("Allowed.Test."), vec![lo]);
        // What the advice for each refusal proposes lets that name through
        // and nothing else.
        for (ip, port) in [
            ("127.0.0.1", 443),
            ("10.0.0.1", 443),
            ("203.0.113.80", 443),
            ("198.18.0.7", 443),
            ("fd00::5", 8443),
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(r.check_resolved(ip, port, false).is_err(), "{ip}");
            let InternalReach::Pin(p) = internal_reach("allowed.test", ip) else {
                panic!("{ip}");
            };
            let (host, addr) = crate::policy::validate::parse_resolve(&p).unwrap();
            assert_eq!((host.as_str(), addr), ("allowed.test", ip));
            assert_eq!(r.check_resolved(ip, port, true), Ok(()), "{p}");
            // The address by number stays closed.
            assert!(!r.decide_addr(ip, port).allowed, "{ip}");
        }
        for never in [
            "169.254.169.254",
            "fd00:ec2::254",
            "100.100.100.200",
            "0.0.0.0",
            "224.0.0.1",
        ] {
            let ip: IpAddr = never.parse().unwrap();
            assert!(
                matches!(internal_reach("x.test", ip), InternalReach::Never(_)),
                "{never}"
            );
            assert!(r.check_resolved(ip, 443, true).is_err(), "{never}");
        }
        // No name, no pin (`--resolve :127.0.0.1` was once proposed).
        assert!(matches!(
            internal_reach("", "127.0.0.1".parse().unwrap()),
            InternalReach::Never(_)
        ));
    }

    #[test]
    fn ip_rule_syntax() {
        let o = origin;
        assert!(IpRule::parse("10.1.2.0/24:5432", o()).is_ok());
        assert!(IpRule::parse("10.1.2.3", o()).is_ok());
        assert!(IpRule::parse("fd00::/8", o()).is_ok());
        assert!(IpRule::parse("[fd00::1]:22", o()).is_ok());
        for bad in [
            "10.1.2.0/33",
            "10.1.2.0/24:0",
            "10.1.2.0/24:99999",
            "host:22",
            "[fd00::",
            "",
            "/8",
        ] {
            assert!(IpRule::parse(bad, o()).is_err(), "{bad}");
        }
        let r = IpRule::parse("10.1.2.9/24", o()).unwrap();
        assert_eq!(r.net.to_string(), "10.1.2.0/24");
        assert!(
            IpRule::parse("0.0.0.0/0", o())
                .unwrap()
                .matches("1.2.3.4".parse().unwrap(), 1)
        );
    }
}
