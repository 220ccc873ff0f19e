//! Where a job's `connect()` to an internet address goes: one pure
//! decision over the plan's network mode, the egress rules' answers and
//! facts the notification server read from the kernel — its own copy of
//! the job's address (read once) and of the job's socket (so the job
//! cannot swap either after the check). The server reads the facts and
//! performs the verdict; nothing here touches the job or the kernel, so
//! every case is a row of data in the tests below.
//!
//! Two steps, because the address alone already refuses most attempts
//! and that refusal must not wait for (or depend on) taking the job's
//! socket: [`by_address`] on the copied address, then [`by_socket`] once
//! the socket's family and kind are known. [`decide`] is both.

use std::net::SocketAddr;

use super::{EgressBroker, Reason};
use crate::plan::fs::NetConnect;

/// What the plan says about the job's connects.
#[derive(Debug, Clone, Copy)]
pub struct ConnectPlan<'a> {
    pub mode: NetConnect,
    /// Record, do not refuse (`--audit`): the job's loopback stays its own.
    pub audit: bool,
    /// FS-ONLY: UDP sockets are made in vetto's namespace that leads
    /// nowhere, so a refusal waits to see whether the socket is one.
    pub udp_dead_net: bool,
    /// FS-ONLY: so are TCP sockets (the job's own servers live there).
    pub tcp_dead_net: bool,
    /// The egress proxy's rules, when the network is filtered.
    pub egress: Option<&'a dyn EgressBroker>,
}

/// The job's socket, as the server's own copy of it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketFacts {
    pub domain: Domain,
    /// `SOCK_STREAM`.
    pub stream: bool,
    /// Made in vetto's namespace that leads nowhere (FS-ONLY): whatever it
    /// connects to is in that namespace.
    pub dead_net: bool,
}

/// A socket's address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    Unix,
    Inet,
    Inet6,
    /// Netlink, vsock and the rest.
    Other,
}

/// Which network's socket tables a look at listeners reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// FULL: the job's own namespace (that of the calling thread).
    Job,
    /// FS-ONLY: vetto's namespace that leads nowhere.
    DeadNet,
}

/// Facts that cost a read of the kernel's socket tables: asked only when
/// the decision turns on them.
pub trait Listeners {
    /// At loopback address `to`, none of the job's servers listens in
    /// `network`, and a service of the host's does.
    fn host_service_only(&self, network: Network, to: SocketAddr) -> bool;
}

/// Where the connect goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Refused with `ECONNREFUSED`, as a closed port answers (filtered
    /// egress, or the host's service the job reached for).
    Refused(SocketAddr),
    /// Refused with `ENETUNREACH`, as the missing route would (network
    /// off).
    Unreachable(SocketAddr),
    /// Another family with the network not the host's: the supervisor's
    /// credentials would decide for the job's socket. `EACCES`.
    Forbidden,
    /// To the proxy's (or the DNS stub's) listener `via`, told first that
    /// the socket stands for `to`.
    Redirect { to: SocketAddr, via: SocketAddr },
    /// As asked, to the proxy's own listener at `to`, told first which
    /// process this is.
    Named(SocketAddr),
    /// As asked, with the job's address.
    AsAsked(Reason),
    /// A unix socket: its path or abstract name decides.
    Unix,
}

/// What the address alone settled, for [`by_socket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ByAddress {
    /// To the proxy (`false`) or the DNS stub (`true`), standing for this
    /// address.
    redirect: Option<(SocketAddr, bool)>,
    /// As asked, the proxy told the process.
    named: Option<SocketAddr>,
    /// Refused unless the socket turns out to be of the dead namespace.
    refused: Option<Verdict>,
}

/// The first step, on the copied address (`None`: not an internet
/// address): `Err` is the refusal, decided before the job's socket is
/// taken.
pub fn by_address(plan: &ConnectPlan<'_>, to: Option<SocketAddr>) -> Result<ByAddress, Verdict> {
    let mut by = ByAddress::default();
    let Some(to) = to else {
        return Ok(by);
    };
    let egress = plan.egress;
    match plan.mode {
        NetConnect::Proxy => match route(egress, to) {
            Route::AsAsked => {}
            Route::Redirect => by.redirect = Some((to, false)),
            Route::Dns => by.redirect = Some((to, true)),
            Route::Refuse if plan.udp_dead_net => by.refused = Some(Verdict::Refused(to)),
            Route::Refuse => return Err(Verdict::Refused(to)),
        },
        // FULL with an IP rule for a loopback address: the host's service
        // there (a CI `services:` database), through the proxy, for
        // programs that ignore the proxy variables too.
        NetConnect::LoopbackOnly if egress.is_some_and(|e| e.allows_host_loopback(to)) => {
            by.redirect = Some((to, false));
        }
        mode if refuses(mode, to) => {
            // FULL with filtered egress: an address an IP rule allows goes
            // to the proxy's redirected listener in the namespace.
            if mode == NetConnect::LoopbackOnly && egress.is_some_and(|e| e.allows(to)) {
                by.redirect = Some((to, false));
            } else if plan.udp_dead_net {
                by.refused = Some(Verdict::Unreachable(to));
            } else {
                return Err(Verdict::Unreachable(to));
            }
        }
        _ => {}
    }
    if by.redirect.is_none() && egress.is_some_and(|e| e.names_process(to)) {
        by.named = Some(to);
    }
    Ok(by)
}

/// The second step, once the job's socket is known.
pub fn by_socket(
    plan: &ConnectPlan<'_>,
    to: Option<SocketAddr>,
    by: ByAddress,
    socket: SocketFacts,
    listeners: &dyn Listeners,
) -> Verdict {
    let via = |to: SocketAddr, dns: bool| {
        let v6 = socket.domain == Domain::Inet6;
        let via = plan.egress.and_then(|e| {
            if dns {
                e.dns_via(v6)
            } else {
                e.redirect_to(v6)
            }
        });
        match via {
            Some(via) => Verdict::Redirect { to, via },
            None => Verdict::Refused(to),
        }
    };
    let host_service =
        |network, to| reaches_loopback(plan, to) && listeners.host_service_only(network, to);
    if socket.dead_net {
        // Decided on the socket itself (our copy of it), not on a number
        // the job can re-point: it can only reach the namespace it was
        // made in. Performed as asked — but a TCP connect to anything but
        // loopback (the job's own servers) is an attempt to leave, refused
        // and recorded, as at FULL; and one to port 53 is DNS over TCP to
        // a resolver, never the job's own: refused (no stub serves TCP
        // there) and recorded.
        let Some(to) = to.filter(|_| plan.tcp_dead_net && socket.stream) else {
            return Verdict::AsAsked(Reason::DeadNet);
        };
        let local = is_local(to);
        if plan.mode != NetConnect::Proxy {
            return if !local {
                Verdict::Unreachable(to)
            } else if to.port() == 53 || host_service(Network::DeadNet, to) {
                Verdict::Refused(to)
            } else {
                Verdict::AsAsked(Reason::DeadNet)
            };
        }
        // Filtered egress: decided as for any socket (`route`), then sent
        // to the proxy's listeners, which are in this namespace too.
        // Loopback is the job's own unless an IP rule names the host's
        // service there (`--audit` allows every address: its loopback
        // stays the job's).
        return match (by.redirect, by.named) {
            (Some((to, true)), _) => via(to, true),
            (Some((to, false)), _) if !local || !plan.audit => via(to, false),
            (_, Some(to)) => Verdict::Named(to),
            _ if local && host_service(Network::DeadNet, to) => Verdict::Refused(to),
            _ if local => Verdict::AsAsked(Reason::DeadNet),
            _ => by.refused.unwrap_or(Verdict::Refused(to)),
        };
    }
    if let Some(refused) = by.refused {
        return refused;
    }
    if socket.domain == Domain::Other && plan.mode != NetConnect::Open {
        return Verdict::Forbidden;
    }
    if let Some((to, dns)) = by.redirect {
        // Allowed by address: to the proxy, never to `to` itself. Only a
        // TCP internet socket can be handed over.
        return match via(to, dns) {
            redirect @ Verdict::Redirect { .. }
                if socket.stream && socket.domain != Domain::Unix =>
            {
                redirect
            }
            _ => Verdict::Refused(to),
        };
    }
    if socket.domain == Domain::Unix {
        return Verdict::Unix;
    }
    if let Some(to) = by.named {
        return Verdict::Named(to);
    }
    // An internet socket the network mode lets through (host network, or
    // the job's own loopback at FULL; the address was checked above) —
    // unless it reaches for a host's service the job's namespace hides.
    match to {
        Some(to)
            if plan.mode == NetConnect::LoopbackOnly
                && socket.stream
                && host_service(Network::Job, to) =>
        {
            Verdict::Refused(to)
        }
        _ => Verdict::AsAsked(Reason::SocketNoName),
    }
}

/// Both steps: what the server does, for the tests.
pub fn decide(
    plan: &ConnectPlan<'_>,
    to: Option<SocketAddr>,
    socket: SocketFacts,
    listeners: &dyn Listeners,
) -> Verdict {
    match by_address(plan, to) {
        Err(refused) => refused,
        Ok(by) => by_socket(plan, to, by, socket, listeners),
    }
}

/// Loopback or the unspecified address (which the kernel takes for
/// loopback when connecting).
fn is_local(to: SocketAddr) -> bool {
    let ip = to.ip().to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

/// Whether a loopback connect can be the job reaching for the host's
/// service (issue P10, item 6): never under `--audit`, never off
/// loopback.
fn reaches_loopback(plan: &ConnectPlan<'_>, to: SocketAddr) -> bool {
    !plan.audit && is_local(to)
}

/// Whether a connect to `to` is refused by the network mode alone: with
/// the network off, anything at FS-ONLY (the job cannot create such a
/// socket: one it holds was smuggled in, or made in vetto's namespace
/// that leads nowhere, which [`by_socket`] tells apart by the socket
/// itself), and at FULL anything but the job's own loopback.
fn refuses(mode: NetConnect, to: SocketAddr) -> bool {
    match mode {
        NetConnect::Open => false,
        NetConnect::LoopbackOnly => !is_local(to),
        NetConnect::Closed | NetConnect::Proxy => true,
    }
}

/// Where filtered egress sends a connect to an internet address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// To the proxy's explicit listener: performed as asked.
    AsAsked,
    /// Allowed by address: redirected to the proxy.
    Redirect,
    /// To port 53 (any address): redirected to the supervisor's DNS stub.
    Dns,
    Refuse,
}

/// Filtered egress (FS-ONLY): the proxy's own explicit listener is reached
/// as asked (and nothing else on the host's loopback: other local ports
/// stay refused), a DNS query (port 53, any address) goes to the DNS stub,
/// an address the proxy allows (an IP rule, or a synthetic address
/// standing for a name) is redirected to it, everything else refused. No
/// proxy: refused.
fn route(egress: Option<&dyn EgressBroker>, to: SocketAddr) -> Route {
    let Some(egress) = egress else {
        return Route::Refuse;
    };
    let to = SocketAddr::new(to.ip().to_canonical(), to.port());
    if egress.explicit().contains(&to) {
        Route::AsAsked
    } else if to.port() == 53 && egress.dns_via(false).is_some() {
        Route::Dns
    } else if egress.allows(to) {
        Route::Redirect
    } else {
        Route::Refuse
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::notify::ProcessFacts;
    use std::path::PathBuf;

    /// The proxy's rules: `allows` IP rules, its explicit listener at
    /// 127.0.0.1:3128, a DNS stub and redirected listeners when present.
    #[derive(Debug, Default)]
    struct Rules {
        allows: Vec<SocketAddr>,
        host_loopback: Vec<SocketAddr>,
        stub: bool,
        redirect: bool,
    }

    const EXPLICIT: &str = "127.0.0.1:3128";
    const VIA: &str = "127.0.0.1:40000";
    const VIA6: &str = "[::1]:40000";
    const STUB: &str = "127.0.0.1:40053";

    #[expect(clippy::unwrap_used, reason = "tests: the addresses are constants")]
    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    impl EgressBroker for Rules {
        fn explicit(&self) -> Vec<SocketAddr> {
            vec![at(EXPLICIT)]
        }
        fn redirect_to(&self, v6: bool) -> Option<SocketAddr> {
            self.redirect.then(|| at(if v6 { VIA6 } else { VIA }))
        }
        fn dns_via(&self, _: bool) -> Option<SocketAddr> {
            self.stub.then(|| at(STUB))
        }
        fn allows(&self, to: SocketAddr) -> bool {
            self.allows.contains(&to)
        }
        fn allows_host_loopback(&self, to: SocketAddr) -> bool {
            self.host_loopback.contains(&to)
        }
        fn names_process(&self, to: SocketAddr) -> bool {
            to == at(EXPLICIT)
        }
        fn expect(&self, _: SocketAddr, _: SocketAddr, _: Option<ProcessFacts>) {}
        fn dead_net_socket(
            &self,
            _: bool,
            _: bool,
            _: ProcessFacts,
        ) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
            None
        }
        fn is_dead_net(&self, _: crate::sys::os::BorrowedFd<'_>) -> bool {
            false
        }
        fn dead_net_proc(&self) -> Option<PathBuf> {
            None
        }
        fn dead_net_stream(&self, _: bool) -> Option<std::io::Result<crate::sys::os::OwnedFd>> {
            None
        }
    }

    /// Which loopback ports a host's service listens on with no server of
    /// the job's there.
    struct HostServices(Vec<(Network, u16)>);

    impl Listeners for HostServices {
        fn host_service_only(&self, network: Network, to: SocketAddr) -> bool {
            self.0.contains(&(network, to.port()))
        }
    }

    const TCP: SocketFacts = SocketFacts {
        domain: Domain::Inet,
        stream: true,
        dead_net: false,
    };
    const UDP: SocketFacts = SocketFacts {
        domain: Domain::Inet,
        stream: false,
        dead_net: false,
    };
    const TCP6: SocketFacts = SocketFacts {
        domain: Domain::Inet6,
        stream: true,
        dead_net: false,
    };
    const DEAD_TCP: SocketFacts = SocketFacts {
        domain: Domain::Inet,
        stream: true,
        dead_net: true,
    };
    const DEAD_UDP: SocketFacts = SocketFacts {
        domain: Domain::Inet,
        stream: false,
        dead_net: true,
    };
    const UNIX: SocketFacts = SocketFacts {
        domain: Domain::Unix,
        stream: true,
        dead_net: false,
    };
    const VSOCK: SocketFacts = SocketFacts {
        domain: Domain::Other,
        stream: true,
        dead_net: false,
    };

    fn plan(mode: NetConnect, egress: Option<&dyn EgressBroker>) -> ConnectPlan<'_> {
        ConnectPlan {
            mode,
            audit: false,
            udp_dead_net: false,
            tcp_dead_net: false,
            egress,
        }
    }

    fn fs_only<'a>(mode: NetConnect, egress: Option<&'a dyn EgressBroker>) -> ConnectPlan<'a> {
        ConnectPlan {
            udp_dead_net: true,
            tcp_dead_net: true,
            ..plan(mode, egress)
        }
    }

    /// A name, the plan, the address, the socket, the host's services, and
    /// where the connect goes.
    type Row<'a> = (
        &'a str,
        ConnectPlan<'a>,
        Option<&'a str>,
        SocketFacts,
        &'a HostServices,
        Verdict,
    );

    #[test]
    fn every_connect_goes_where_the_table_says() {
        let rules = Rules {
            allows: vec![at("203.0.113.80:443")],
            host_loopback: vec![at("127.0.0.1:5432")],
            stub: true,
            redirect: true,
        };
        let egress: Option<&dyn EgressBroker> = Some(&rules);
        let none = HostServices(vec![]);
        let host_pg = HostServices(vec![(Network::Job, 5433), (Network::DeadNet, 5433)]);
        let audit = ConnectPlan {
            audit: true,
            ..fs_only(NetConnect::Proxy, egress)
        };
        use NetConnect::*;
        use Verdict::*;
        #[rustfmt::skip]
        let rows: Vec<Row<'_>> = vec![
            // The host's network: everything as asked; vsock too.
            ("open", plan(Open, None), Some("198.51.100.1:80"), TCP, &none, AsAsked(Reason::SocketNoName)),
            ("open vsock", plan(Open, None), None, VSOCK, &none, AsAsked(Reason::SocketNoName)),
            // FULL, network off: out is unreachable, loopback the job's.
            ("full out", plan(LoopbackOnly, None), Some("198.51.100.1:80"), TCP, &none, Unreachable(at("198.51.100.1:80"))),
            ("full own loopback", plan(LoopbackOnly, None), Some("127.0.0.1:8080"), TCP, &none, AsAsked(Reason::SocketNoName)),
            ("full host's service", plan(LoopbackOnly, None), Some("127.0.0.1:5433"), TCP, &host_pg, Refused(at("127.0.0.1:5433"))),
            ("full host's service, udp", plan(LoopbackOnly, None), Some("127.0.0.1:5433"), UDP, &host_pg, AsAsked(Reason::SocketNoName)),
            ("full vsock", plan(LoopbackOnly, None), None, VSOCK, &none, Forbidden),
            ("full unix", plan(LoopbackOnly, None), None, UNIX, &none, Unix),
            // FULL, filtered: an IP rule's address and the host's allowed
            // service go to the proxy.
            ("full ip rule", plan(LoopbackOnly, egress), Some("203.0.113.80:443"), TCP, &none, Redirect { to: at("203.0.113.80:443"), via: at(VIA) }),
            ("full ip rule v6 socket", plan(LoopbackOnly, egress), Some("203.0.113.80:443"), TCP6, &none, Redirect { to: at("203.0.113.80:443"), via: at(VIA6) }),
            ("full ip rule udp", plan(LoopbackOnly, egress), Some("203.0.113.80:443"), UDP, &none, Refused(at("203.0.113.80:443"))),
            ("full host loopback rule", plan(LoopbackOnly, egress), Some("127.0.0.1:5432"), TCP, &none, Redirect { to: at("127.0.0.1:5432"), via: at(VIA) }),
            // FS-ONLY, network off: nothing leaves; the dead namespace's
            // loopback is the job's, its port 53 no resolver.
            ("fs closed out", fs_only(Closed, None), Some("198.51.100.1:80"), DEAD_TCP, &none, Unreachable(at("198.51.100.1:80"))),
            ("fs closed own loopback", fs_only(Closed, None), Some("127.0.0.1:8080"), DEAD_TCP, &none, AsAsked(Reason::DeadNet)),
            ("fs closed tcp dns", fs_only(Closed, None), Some("127.0.0.1:53"), DEAD_TCP, &none, Refused(at("127.0.0.1:53"))),
            ("fs closed host's service", fs_only(Closed, None), Some("127.0.0.1:5433"), DEAD_TCP, &host_pg, Refused(at("127.0.0.1:5433"))),
            ("fs closed udp out", fs_only(Closed, None), Some("198.51.100.1:53"), DEAD_UDP, &none, AsAsked(Reason::DeadNet)),
            ("fs closed smuggled socket", fs_only(Closed, None), Some("198.51.100.1:80"), TCP, &none, Unreachable(at("198.51.100.1:80"))),
            ("fs closed smuggled loopback", fs_only(Closed, None), Some("127.0.0.1:8080"), TCP, &none, Unreachable(at("127.0.0.1:8080"))),
            // FS-ONLY, filtered: the explicit listener as asked and named,
            // DNS to the stub, IP rules redirected, the rest refused.
            ("fs proxy explicit", fs_only(Proxy, egress), Some(EXPLICIT), TCP, &none, Named(at(EXPLICIT))),
            ("fs proxy dns", fs_only(Proxy, egress), Some("198.51.100.1:53"), DEAD_TCP, &none, Redirect { to: at("198.51.100.1:53"), via: at(STUB) }),
            ("fs proxy ip rule", fs_only(Proxy, egress), Some("203.0.113.80:443"), DEAD_TCP, &none, Redirect { to: at("203.0.113.80:443"), via: at(VIA) }),
            ("fs proxy refused", fs_only(Proxy, egress), Some("198.51.100.1:443"), DEAD_TCP, &none, Refused(at("198.51.100.1:443"))),
            ("fs proxy own loopback", fs_only(Proxy, egress), Some("127.0.0.1:8080"), DEAD_TCP, &none, AsAsked(Reason::DeadNet)),
            ("fs proxy host's service", fs_only(Proxy, egress), Some("127.0.0.1:5433"), DEAD_TCP, &host_pg, Refused(at("127.0.0.1:5433"))),
            ("fs proxy udp refused", fs_only(Proxy, egress), Some("198.51.100.1:443"), DEAD_UDP, &none, AsAsked(Reason::DeadNet)),
            ("fs proxy smuggled refused", fs_only(Proxy, egress), Some("198.51.100.1:443"), TCP, &none, Refused(at("198.51.100.1:443"))),
            ("fs proxy no proxy", fs_only(Proxy, None), Some("198.51.100.1:443"), DEAD_TCP, &none, Refused(at("198.51.100.1:443"))),
            // Audit: loopback stays the job's; no host's service refused.
            ("audit host's service", audit, Some("127.0.0.1:5433"), DEAD_TCP, &host_pg, AsAsked(Reason::DeadNet)),
        ];
        for (name, plan, to, socket, listeners, expected) in rows {
            let got = decide(&plan, to.map(at), socket, listeners);
            assert_eq!(got, expected, "{name}");
        }
    }

    /// The address alone refuses before the job's socket is taken, except
    /// where the socket may be of the namespace that leads nowhere.
    #[test]
    fn a_refusal_by_address_does_not_wait_for_the_socket_unless_it_may_be_the_dead_namespaces() {
        let to = at("198.51.100.1:443");
        assert_eq!(
            by_address(&plan(NetConnect::LoopbackOnly, None), Some(to)),
            Err(Verdict::Unreachable(to))
        );
        assert_eq!(
            by_address(&plan(NetConnect::Proxy, None), Some(to)),
            Err(Verdict::Refused(to))
        );
        assert!(by_address(&fs_only(NetConnect::Proxy, None), Some(to)).is_ok());
        assert!(by_address(&fs_only(NetConnect::Closed, None), Some(to)).is_ok());
        assert_eq!(
            by_address(&plan(NetConnect::Closed, None), None),
            Ok(ByAddress::default())
        );
    }
}
