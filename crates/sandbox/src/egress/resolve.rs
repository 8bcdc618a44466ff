//! Where a permitted host leads: the one decision shared by the egress proxy and `web_fetch`.
//! The host is checked against the allowlist before any lookup (an unlisted name is never even
//! resolved, so a lookup cannot carry data out), then resolved by dracode — never by the
//! command — and every address it resolves to is checked again ([`Allowlist::check_address`]).

use super::allowlist::{Allowlist, Host, Refusal};
use std::net::SocketAddr;
use std::time::Duration;

/// Time allowed for one name lookup.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why no address may be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// The allowlist refuses the host or every address it resolves to (reported as a refused
    /// connection).
    Refused(Refusal),
    /// The name does not resolve (not a refusal: the host is allowed).
    Unresolved(String),
}

/// The addresses a connection to `host`:`port` may use, in the resolver's order: only those the
/// allowlist accepts. A refusal names the first reason found.
pub async fn permitted_addresses(list: &Allowlist, host: &Host, port: u16) -> Result<Vec<SocketAddr>, Blocked> {
    list.check_host(host, port).map_err(Blocked::Refused)?;
    let resolved: Vec<SocketAddr> = match host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
        Host::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), port));
            match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => return Err(Blocked::Unresolved(format!("cannot resolve {name}: {e}"))),
                Err(_) => return Err(Blocked::Unresolved(format!("resolving {name} took longer than {}s", LOOKUP_TIMEOUT.as_secs()))),
            }
        }
    };
    let mut first_refusal = None;
    let mut permitted = Vec::new();
    for addr in resolved {
        match list.check_address(addr.ip(), port, matches!(host, Host::Ip(_))) {
            Ok(()) => permitted.push(SocketAddr::new(addr.ip().to_canonical(), port)),
            Err(refusal) => {
                first_refusal.get_or_insert(refusal);
            }
        }
    }
    match (permitted.is_empty(), first_refusal) {
        (false, _) => Ok(permitted),
        (true, Some(refusal)) => Err(Blocked::Refused(Refusal(format!("{host}: {refusal}")))),
        (true, None) => Err(Blocked::Unresolved(format!("{host} has no address"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(allow: &[&str]) -> Allowlist {
        let allow: Vec<String> = allow.iter().map(|t| (*t).to_string()).collect();
        Allowlist::parse(&allow, &[], "network", "network.deny").unwrap()
    }

    #[tokio::test]
    async fn a_listed_name_that_resolves_to_loopback_is_refused_but_a_literal_address_is_not() {
        let by_name = list(&["localhost:4000"]);
        let refused = permitted_addresses(&by_name, &Host::parse("localhost").unwrap(), 4000).await.unwrap_err();
        let Blocked::Refused(why) = refused else { panic!("{refused:?}") };
        assert!(why.0.starts_with("localhost: ") && why.0.contains("loopback"), "{why}");
        let literal = list(&["127.0.0.1:4000"]);
        let addrs = permitted_addresses(&literal, &Host::parse("127.0.0.1").unwrap(), 4000).await.unwrap();
        assert_eq!(addrs, ["127.0.0.1:4000".parse::<SocketAddr>().unwrap()]);
        let unlisted = permitted_addresses(&literal, &Host::parse("127.0.0.1").unwrap(), 4001).await.unwrap_err();
        assert!(matches!(unlisted, Blocked::Refused(_)), "{unlisted:?}");
    }
}
