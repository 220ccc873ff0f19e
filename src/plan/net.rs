//! Filtered egress (`[network] mode = "allow"`): how each tier makes every
//! TCP connection of the job pass vetto's egress proxy, which decides by
//! name and port (see docs/network.md).
//!
//! - **FULL**: the job's network namespace has only loopback. The stage
//!   creates the proxy's listeners inside it, on loopback, and hands them
//!   to the supervisor; the proxy variables point at them. Nothing else
//!   leaves the namespace: there is no route.
//! - **FS-ONLY**: no namespace. Every `connect()` is notified; the
//!   supervisor connects the job's socket (its own copy) to the proxy —
//!   the explicit listener for a connect to its address, the redirected
//!   one for an address an IP rule or a pin allows — or refuses it. Only
//!   TCP internet sockets can be created; UDP, raw, packet and the rest
//!   stay refused at `socket()`.
//! - **SECCOMP**: not offered (see `build::gaps`).
//! - **SEATBELT** (macOS): the proxy listens on the host's loopback and the
//!   Seatbelt profile allows outbound connections to its port and nowhere
//!   else, not even the system resolver: only programs that use the proxy
//!   variables reach the network (no DNS stub, no transparent capture).

use serde::{Deserialize, Serialize};

/// The port of the proxy's explicit listener inside the FULL tier's
/// network namespace (127.0.0.1 and ::1). The namespace is the job's own,
/// so the number is free there whatever the host uses.
pub const NETNS_PROXY_PORT: u16 = 3128;

/// The port of the proxy's redirected listener inside the FULL tier's
/// namespace: a connect to an address an IP rule allows is sent there by
/// the supervisor (as at FS-ONLY, but inside the namespace).
pub const NETNS_REDIRECT_PORT: u16 = 3129;

/// Where the FULL tier's DNS stub listens inside the namespace (UDP).
pub const DNS_STUB_ADDR: std::net::SocketAddrV4 =
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(127, 0, 0, 53), 53);

/// The most transparent listeners one session makes.
pub const MAX_TRANSPARENT_PORTS: usize = 14;

/// FULL with filtered egress: a DNS stub inside the namespace answers an
/// allowed name with a synthetic loopback address that stands for it, and
/// transparent listeners on these ports (80, 443 and the ports the allow
/// rules name) take connections to such addresses to the proxy — so a
/// program that ignores the proxy variables reaches allowed names too.
/// FULL with the network off: the same stub with no ports, answering
/// every name NXDOMAIN, so a lookup is recorded by the name asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsStub {
    pub ports: Vec<u16>,
}

impl DnsStub {
    pub fn for_policy(net: &crate::policy::NetPolicy) -> DnsStub {
        let mut ports = vec![80, 443];
        if let crate::policy::NetPolicy::Allow { hosts, .. } = net {
            for p in hosts.iter().filter_map(|h| h.port) {
                if !ports.contains(&p)
                    && p != NETNS_PROXY_PORT
                    && p != NETNS_REDIRECT_PORT
                    && ports.len() < MAX_TRANSPARENT_PORTS
                {
                    ports.push(p);
                }
            }
        }
        DnsStub { ports }
    }
}

/// What the proxy needs to be reachable, per tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EgressPlan {
    /// FULL: listeners created in the job's namespace on loopback port
    /// [`NETNS_PROXY_PORT`] by the stage, served by the supervisor's proxy.
    Netns,
    /// FS-ONLY: notified connects are redirected to the proxy on the
    /// host's loopback, or refused.
    Redirect,
    /// SEATBELT: the proxy listens on the host's loopback (127.0.0.1 and
    /// ::1, one port); the profile allows outbound connections to that
    /// port only.
    Loopback,
}

impl EgressPlan {
    /// The line `session start` and `policy explain` show.
    pub fn describe(&self) -> &'static str {
        match self {
            EgressPlan::Netns => {
                "through vetto's proxy only: the network namespace has only loopback, where the proxy listens"
            }
            EgressPlan::Redirect => {
                "through vetto's proxy only: every connect() is decided by the supervisor and redirected to the proxy or refused"
            }
            EgressPlan::Loopback => {
                "through vetto's proxy only: the Seatbelt profile allows connections to the proxy's loopback port and nothing else (programs that ignore the proxy variables have no network)"
            }
        }
    }
}

/// The proxy variables a job gets, both cases, for a proxy URL carrying
/// the session's credential (`http://vetto:SECRET@127.0.0.1:PORT`).
/// `ALL_PROXY` is SOCKS5 with names resolved by the proxy (`socks5h`).
pub fn proxy_vars(http_url: &str, socks_url: &str) -> Vec<(String, String)> {
    // `[::1]` as well: Python's urllib compares the host of a URL with
    // its brackets (`http://[::1]:8000/`), so a test suite's own IPv6
    // server would otherwise be asked of the proxy.
    let no_proxy = "localhost,127.0.0.1,::1,[::1]";
    let mut vars = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", http_url),
        ("HTTPS_PROXY", http_url),
        ("ALL_PROXY", socks_url),
        ("NO_PROXY", no_proxy),
    ] {
        vars.push((name.to_string(), value.to_string()));
        vars.push((name.to_ascii_lowercase(), value.to_string()));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_vars_are_set_in_both_cases_with_socks5h_for_all_proxy() {
        let vars = proxy_vars(
            "http://vetto:s@127.0.0.1:1",
            "socks5h://vetto:s@127.0.0.1:1",
        );
        let names: Vec<&str> = vars.iter().map(|(n, _)| n.as_str()).collect();
        let expected = [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ];
        assert_eq!(names.len(), expected.len());
        for n in expected {
            assert!(names.contains(&n), "{n}");
        }
        assert!(vars.contains(&("all_proxy".into(), "socks5h://vetto:s@127.0.0.1:1".into())));
        assert!(vars.contains(&("NO_PROXY".into(), "localhost,127.0.0.1,::1,[::1]".into())));
    }
}
