//! Which IP addresses are not "the internet": loopback, private, shared (CGNAT), link-local,
//! unique-local, unspecified, multicast, broadcast and reserved ranges, and the cloud metadata
//! endpoints — also when written as IPv4-mapped, IPv4-compatible, NAT64 or 6to4 IPv6
//! addresses. The egress proxy refuses them unless a task lists the address literally: an
//! allowed name that resolves to one (DNS rebinding, a hostile registry record, `localhost`) must
//! not reach the runner's own services or its cloud's metadata.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of special-use address `ip` is (`"loopback"`, `"private"`, `"cloud metadata"`, …),
/// or `None` for an ordinary public address.
pub fn special_use(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

/// `a.b.c.d` in `net/len`.
fn in_v4(ip: Ipv4Addr, net: [u8; 4], len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: [([u8; 4], u32, &str); 12] = [
        ([169, 254, 169, 254], 32, "cloud metadata"),
        ([100, 100, 100, 200], 32, "cloud metadata"),
        ([0, 0, 0, 0], 8, "unspecified (0.0.0.0/8)"),
        ([127, 0, 0, 0], 8, "loopback"),
        ([10, 0, 0, 0], 8, "private"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 168, 0, 0], 16, "private"),
        ([100, 64, 0, 0], 10, "shared (CGNAT)"),
        ([169, 254, 0, 0], 16, "link-local"),
        ([192, 0, 0, 0], 24, "IETF protocol assignment"),
        ([198, 18, 0, 0], 15, "benchmarking"),
        ([224, 0, 0, 0], 4, "multicast"),
    ];
    if in_v4(ip, [240, 0, 0, 0], 4) {
        return Some(if ip == Ipv4Addr::BROADCAST { "broadcast" } else { "reserved" });
    }
    RANGES.iter().find(|(net, len, _)| in_v4(ip, *net, *len)).map(|(_, _, kind)| *kind)
}

/// `ip` in `net/len`.
fn in_v6(ip: Ipv6Addr, net: u128, len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
    u128::from(ip) & mask == net & mask
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = embedded_v4(ip) {
        return special_v4(v4);
    }
    const METADATA: u128 = 0xfd00_0ec2_0000_0000_0000_0000_0000_0254;
    const RANGES: [(u128, u32, &str); 7] = [
        (METADATA, 128, "cloud metadata"),
        (0, 128, "unspecified"),
        (1, 128, "loopback"),
        (0xfe80 << 112, 10, "link-local"),
        (0xfec0 << 112, 10, "site-local"),
        (0xfc00 << 112, 7, "unique-local"),
        (0xff00 << 112, 8, "multicast"),
    ];
    RANGES.iter().find(|(net, len, _)| in_v6(ip, *net, *len)).map(|(_, _, kind)| *kind)
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`),
/// NAT64 (`64:ff9b::a.b.c.d`, `64:ff9b:1::/48`) or 6to4 (`2002:AABB:CCDD::`) address: where it
/// leads is where the IPv4 address leads.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    // `::` and `::1` are IPv6's own unspecified and loopback addresses, not IPv4-compatible ones.
    if bits >> 32 == 0 && bits > 1 {
        return Some(low32);
    }
    if in_v6(ip, 0x0064_ff9b << 96, 96) || in_v6(ip, 0x0064_ff9b_0001 << 80, 48) {
        return Some(low32);
    }
    if in_v6(ip, 0x2002 << 112, 16) {
        return Some(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_use_ranges_are_classified() {
        let table = [
            ("127.0.0.1", Some("loopback")),
            ("127.255.1.2", Some("loopback")),
            ("10.0.0.1", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("192.168.1.1", Some("private")),
            ("100.64.0.1", Some("shared (CGNAT)")),
            ("100.127.255.255", Some("shared (CGNAT)")),
            ("100.128.0.1", None),
            ("169.254.1.1", Some("link-local")),
            ("169.254.169.254", Some("cloud metadata")),
            ("100.100.100.200", Some("cloud metadata")),
            ("0.0.0.0", Some("unspecified (0.0.0.0/8)")),
            ("0.1.2.3", Some("unspecified (0.0.0.0/8)")),
            ("224.0.0.1", Some("multicast")),
            ("255.255.255.255", Some("broadcast")),
            ("240.0.0.1", Some("reserved")),
            ("8.8.8.8", None),
            ("93.184.215.14", None),
            ("::", Some("unspecified")),
            ("::1", Some("loopback")),
            ("fe80::1", Some("link-local")),
            ("fec0::1", Some("site-local")),
            ("fc00::1", Some("unique-local")),
            ("fd12:3456::1", Some("unique-local")),
            ("fd00:ec2::254", Some("cloud metadata")),
            ("ff02::1", Some("multicast")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("cloud metadata")),
            ("::ffff:10.1.1.1", Some("private")),
            ("::127.0.0.1", Some("loopback")),
            ("64:ff9b::10.0.0.1", Some("private")),
            ("64:ff9b:1::a00:1", Some("private")),
            ("2002:7f00:1::", Some("loopback")),
            ("2002:0808:0808::", None),
            ("::ffff:8.8.8.8", None),
            ("2606:4700::1111", None),
        ];
        for (text, want) in table {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(special_use(ip), want, "{text}");
        }
    }
}
