//! Which addresses are internal: the classes the proxy refuses to connect
//! to unless a pin or an IP rule names them. Pure; IPv4-mapped,
//! IPv4-compatible, NAT64 and 6to4 IPv6 addresses are judged by the IPv4
//! address they carry, so `::ffff:127.0.0.1` is loopback.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address an IP is, as far as egress is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddrClass {
    /// Routable on the internet.
    Public,
    Loopback,
    /// RFC 1918, `fc00::/7` (unique local), `192.0.0.0/24`.
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `100.64.0.0/10` (carrier-grade NAT; also where some clouds put
    /// their metadata service).
    Cgnat,
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `255.255.255.255`.
    Broadcast,
    /// A cloud metadata service: `169.254.169.254`, `fd00:ec2::254`,
    /// `100.100.100.200`, `192.0.0.192`.
    Metadata,
    /// Reserved, documentation and benchmarking ranges (`240.0.0.0/4`,
    /// `198.18.0.0/15`, `2001:db8::/32` …): nothing a job needs.
    Reserved,
}

impl AddrClass {
    pub fn is_public(self) -> bool {
        self == AddrClass::Public
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AddrClass::Public => "public",
            AddrClass::Loopback => "loopback",
            AddrClass::Private => "private",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Cgnat => "CGNAT",
            AddrClass::Multicast => "multicast",
            AddrClass::Unspecified => "unspecified",
            AddrClass::Broadcast => "broadcast",
            AddrClass::Metadata => "metadata",
            AddrClass::Reserved => "reserved",
        }
    }
}

pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let o = ip.octets();
    const METADATA: [[u8; 4]; 3] = [[169, 254, 169, 254], [100, 100, 100, 200], [192, 0, 0, 192]];
    if METADATA.contains(&o) {
        return AddrClass::Metadata;
    }
    match o {
        [0, ..] => AddrClass::Unspecified,
        [127, ..] => AddrClass::Loopback,
        [10, ..] | [172, 16..=31, ..] | [192, 168, ..] | [192, 0, 0, _] => AddrClass::Private,
        [169, 254, ..] => AddrClass::LinkLocal,
        [100, 64..=127, ..] => AddrClass::Cgnat,
        [255, 255, 255, 255] => AddrClass::Broadcast,
        [224..=239, ..] => AddrClass::Multicast,
        [240..=255, ..]
        | [192, 0, 2, _]
        | [198, 51, 100, _]
        | [203, 0, 113, _]
        | [198, 18..=19, ..]
        | [192, 88, 99, _] => AddrClass::Reserved,
        _ => AddrClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return AddrClass::Metadata;
    }
    if ip.is_unspecified() {
        return AddrClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddrClass::Loopback;
    }
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (the deprecated compatible form).
        [0, 0, 0, 0, 0, 0xffff | 0, hi, lo] => classify_v4(embedded(hi, lo)),
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48).
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] | [0x64, 0xff9b, 1, _, _, _, hi, lo] => {
            classify_v4(embedded(hi, lo))
        }
        // 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
        [0x2002, hi, lo, ..] => classify_v4(embedded(hi, lo)),
        [a, ..] if a & 0xfe00 == 0xfc00 => AddrClass::Private,
        [a, ..] if a & 0xffc0 == 0xfe80 => AddrClass::LinkLocal,
        // Site-local (deprecated, still routed internally by some).
        [a, ..] if a & 0xffc0 == 0xfec0 => AddrClass::Private,
        [a, ..] if a & 0xff00 == 0xff00 => AddrClass::Multicast,
        [0x2001, 0xdb8, ..] | [0x100, 0, 0, 0, ..] | [0x2001, 0x2, 0, ..] => AddrClass::Reserved,
        // Teredo tunnels and ORCHID: not a destination a job needs.
        [0x2001, 0, ..] | [0x2001, 0x10..=0x2f, ..] => AddrClass::Reserved,
        // Everything outside 2000::/3 is unassigned or special.
        [a, ..] if a & 0xe000 != 0x2000 => AddrClass::Reserved,
        _ => AddrClass::Public,
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn c(s: &str) -> AddrClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn internal_ipv4_ranges_are_not_public() {
        for (ip, class) in [
            ("127.0.0.1", AddrClass::Loopback),
            ("127.255.1.2", AddrClass::Loopback),
            ("10.0.0.1", AddrClass::Private),
            ("172.16.0.1", AddrClass::Private),
            ("172.31.255.255", AddrClass::Private),
            ("192.168.1.1", AddrClass::Private),
            ("169.254.1.1", AddrClass::LinkLocal),
            ("169.254.169.254", AddrClass::Metadata),
            ("100.100.100.200", AddrClass::Metadata),
            ("100.64.0.1", AddrClass::Cgnat),
            ("100.127.255.255", AddrClass::Cgnat),
            ("224.0.0.1", AddrClass::Multicast),
            ("0.0.0.0", AddrClass::Unspecified),
            ("0.1.2.3", AddrClass::Unspecified),
            ("255.255.255.255", AddrClass::Broadcast),
            ("240.0.0.1", AddrClass::Reserved),
            ("198.18.0.1", AddrClass::Reserved),
        ] {
            assert_eq!(c(ip), class, "{ip}");
        }
    }

    #[test]
    fn public_ipv4_neighbours_of_internal_ranges_are_public() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "169.253.255.255",
            "11.0.0.0",
            "126.255.255.255",
            "223.255.255.255",
        ] {
            assert_eq!(c(ip), AddrClass::Public, "{ip}");
        }
    }

    #[test]
    fn ipv6_internal_and_embedded_ipv4_forms() {
        for (ip, class) in [
            ("::1", AddrClass::Loopback),
            ("::", AddrClass::Unspecified),
            ("fd00:ec2::254", AddrClass::Metadata),
            ("fd12::1", AddrClass::Private),
            ("fc00::1", AddrClass::Private),
            ("fe80::1", AddrClass::LinkLocal),
            ("ff02::1", AddrClass::Multicast),
            ("::ffff:127.0.0.1", AddrClass::Loopback),
            ("::ffff:169.254.169.254", AddrClass::Metadata),
            ("::ffff:10.0.0.1", AddrClass::Private),
            ("::10.0.0.1", AddrClass::Private),
            ("64:ff9b::7f00:1", AddrClass::Loopback),
            ("2002:a00:1::", AddrClass::Private),
            ("2001:db8::1", AddrClass::Reserved),
            ("::ffff:8.8.8.8", AddrClass::Public),
            ("2606:4700::1111", AddrClass::Public),
        ] {
            assert_eq!(c(ip), class, "{ip}");
        }
    }

    /// Every address classifies without panicking (a cheap stand-in for a
    /// fuzz target: a sweep over the first octets and segments).
    #[test]
    fn classification_is_total() {
        for a in 0..=255u8 {
            for b in [0u8, 1, 63, 64, 127, 128, 254, 255] {
                let _ = classify_v4(Ipv4Addr::new(a, b, 0, 1));
            }
        }
        for a in (0..=0xffffu16).step_by(97) {
            let _ = classify_v6(Ipv6Addr::new(a, 0xffff, 0, 0, 0, 0xffff, 0x7f00, 1));
        }
    }
}
