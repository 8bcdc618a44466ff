//! Inbound connections without the network (`network = false` or an egress allowlist): a
//! command may listen on loopback only, and its clients may reach its own listeners.
//!
//! The broker performs `bind` and `listen` of Internet sockets itself (see the `broker` module):
//! - a bind to a loopback address is done as asked; to the wildcard address (`0.0.0.0`, `::`)
//!   it is done to the loopback address of the same form ([`bind_target`]: a server started
//!   on "all interfaces" lands on 127.0.0.1 or ::1); to any other address it is refused;
//! - a `listen` on an unbound socket (which the kernel would bind to the wildcard address)
//!   binds it to loopback first, and a `listen` on a socket bound elsewhere (a bind that
//!   bypassed the broker) is refused. Without `listen` a TCP socket accepts nothing, so every
//!   listener of the command's tree is on loopback;
//! - the broker remembers the inode of every socket it made listen; a `connect` to a loopback
//!   address goes through only when a listener of that address and port is one of them
//!   ([`listeners`], read from `/proc/net/tcp` and `tcp6` at that moment, so a port the
//!   command once had and another process holds now is not reachable). A loopback port where
//!   nothing listens gets `ECONNREFUSED`, as from the kernel (a client waiting for its own
//!   server to come up keeps retrying); a port where another process listens is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Where a bind to `requested` goes: the address itself when it is loopback, the loopback
/// address of the same form for the wildcard address (`::ffff:0.0.0.0` gives
/// `::ffff:127.0.0.1`), `None` (refused) for any other.
pub(super) fn bind_target(requested: SocketAddr) -> Option<SocketAddr> {
    let ip = requested.ip();
    if ip.to_canonical().is_loopback() {
        return Some(requested);
    }
    let loopback = match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_unspecified()) => IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
        _ => return None,
    };
    Some(SocketAddr::new(loopback, requested.port()))
}

/// The loopback address (port 0) of socket family `family`, for a socket that listens unbound.
pub(super) fn loopback_of(family: libc::c_int) -> SocketAddr {
    if family == libc::AF_INET6 { SocketAddr::from((Ipv6Addr::LOCALHOST, 0)) } else { SocketAddr::from((Ipv4Addr::LOCALHOST, 0)) }
}

/// The lowest port an unprivileged process may bind (the command has no capabilities, but
/// the broker that binds for it may).
pub(super) fn unprivileged_port_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start").ok().and_then(|text| text.trim().parse().ok()).unwrap_or(1024)
}

/// The TCP sockets listening on `port` now, of every address family: (address, in its
/// canonical form, and socket inode).
pub(super) fn listeners(port: u16) -> Vec<(IpAddr, u64)> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| text.lines().skip(1).filter_map(|line| listening_row(line, port)).collect::<Vec<_>>())
        .collect()
}

/// The address and inode of one row of `/proc/net/tcp{,6}` when it is a listener on `port`.
fn listening_row(line: &str, port: u16) -> Option<(IpAddr, u64)> {
    const LISTEN: &str = "0A";
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 10 || fields[3] != LISTEN {
        return None;
    }
    let (address, row_port) = fields[1].split_once(':')?;
    if u16::from_str_radix(row_port, 16).ok()? != port {
        return None;
    }
    Some((hex_address(address)?.to_canonical(), fields[9].parse().ok()?))
}

/// An address as `/proc/net/tcp` prints it: 32-bit words in hex, each in the machine's order.
fn hex_address(hex: &str) -> Option<IpAddr> {
    if !hex.is_ascii() || !hex.len().is_multiple_of(8) {
        return None;
    }
    let words = (0..hex.len() / 8).map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok());
    let bytes: Vec<u8> = words.collect::<Option<Vec<u32>>>()?.into_iter().flat_map(u32::to_ne_bytes).collect();
    match bytes.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

/// `address` as a `sockaddr_in`/`sockaddr_in6`, the bytes `bind` takes.
pub(super) fn socket_address(address: SocketAddr) -> Vec<u8> {
    let port = address.port().to_be_bytes();
    match address.ip() {
        IpAddr::V4(ip) => {
            let mut bytes = vec![0u8; std::mem::size_of::<libc::sockaddr_in>()];
            bytes[..2].copy_from_slice(&(libc::AF_INET as libc::sa_family_t).to_ne_bytes());
            bytes[2..4].copy_from_slice(&port);
            bytes[4..8].copy_from_slice(&ip.octets());
            bytes
        }
        IpAddr::V6(ip) => {
            let mut bytes = vec![0u8; std::mem::size_of::<libc::sockaddr_in6>()];
            bytes[..2].copy_from_slice(&(libc::AF_INET6 as libc::sa_family_t).to_ne_bytes());
            bytes[2..4].copy_from_slice(&port);
            bytes[8..24].copy_from_slice(&ip.octets());
            bytes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_land_on_loopback_or_are_refused() {
        let cases = [
            ("0.0.0.0:8000", Some("127.0.0.1:8000")),
            ("127.0.0.2:0", Some("127.0.0.2:0")),
            ("[::]:0", Some("[::1]:0")),
            ("[::1]:9", Some("[::1]:9")),
            ("[::ffff:0.0.0.0]:5", Some("[::ffff:127.0.0.1]:5")),
            ("[::ffff:127.0.0.1]:5", Some("[::ffff:127.0.0.1]:5")),
            ("192.0.2.1:80", None),
            ("[2001:db8::1]:80", None),
        ];
        for (requested, expected) in cases {
            let got = bind_target(requested.parse().unwrap());
            assert_eq!(got, expected.map(|e| e.parse().unwrap()), "{requested}");
        }
    }

    #[test]
    fn proc_net_tcp_rows_are_read_as_the_kernel_prints_them() {
        let v4 = "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0";
        assert_eq!(listening_row(v4, 8000), Some((IpAddr::from([127, 0, 0, 1]), 4242)));
        assert_eq!(listening_row(v4, 8001), None);
        assert_eq!(listening_row(&v4.replace(" 0A ", " 01 "), 8000), None, "an established connection");
        let v6 = "   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1";
        assert_eq!(listening_row(v6, 80), Some((IpAddr::from(Ipv6Addr::LOCALHOST), 77)));
        let mapped = "   0: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 78 1";
        assert_eq!(listening_row(mapped, 80), Some((IpAddr::from([127, 0, 0, 1]), 78)));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listeners(port).iter().any(|(ip, _)| *ip == IpAddr::from([127, 0, 0, 1])), "{:?}", listeners(port));
    }

    #[test]
    fn socket_addresses_are_laid_out_as_the_kernel_reads_them() {
        let v4 = socket_address("127.0.0.1:8080".parse().unwrap());
        assert_eq!(v4.len(), 16);
        assert_eq!(&v4[2..8], &[0x1f, 0x90, 127, 0, 0, 1]);
        let v6 = socket_address("[::1]:80".parse().unwrap());
        assert_eq!((v6.len(), v6[23]), (28, 1));
    }
}
