//! The egress allowlist of a task (`network = [...]`): host patterns, parsed and checked once
//! at planning, and the one decision "may a command reach this host and port?".
//!
//! # Syntax
//! A pattern is `HOST` or `HOST:PORT` (no port: every port):
//! - `registry.example` — exactly that name;
//! - `*.example.org` — every name below `example.org` (`a.example.org`, `a.b.example.org`),
//!   not `example.org` itself (list it too for both);
//! - `*` — every host (useful with `deny`, and with a port: `*:443`);
//! - `127.0.0.1`, `[::1]:8080`, `::1` — an IP address, written literally. A loopback, private,
//!   link-local or metadata address (see [`super::address`]) is reachable only this way: listed
//!   literally, and asked for by that address; a name that resolves to one is refused.
//!
//! Names are compared in lowercase, without a trailing dot. `deny` patterns use the same syntax
//! and win over `allow`; they are checked against the name asked for and every address it
//! resolves to.

use super::address::special_use;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// What a pattern's host part matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// Every host.
    Any,
    /// Exactly this (lowercase) name.
    Name(String),
    /// Every name ending in `.` + this suffix.
    Below(String),
    /// This address (canonical: an IPv4-mapped IPv6 address is stored as IPv4).
    Ip(IpAddr),
}

/// One entry of an allow or deny list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: HostMatch,
    port: Option<u16>,
    /// As the user wrote it, for messages.
    text: String,
}

/// A host a command asked for: a name, or an address written literally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// An address (canonical).
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl Host {
    /// Parses the host part of a request (`example.org`, `10.0.0.1`, `::1`, `[::1]`); `None`
    /// for anything that is neither an address nor a plausible DNS name.
    pub fn parse(text: &str) -> Option<Host> {
        let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Host::Ip(ip.to_canonical()));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        valid_name(&name).then_some(Host::Name(name))
    }
}

/// Whether `name` is a DNS name made of letters, digits, `-` and `_`, and not something that
/// only looks like an address (`127.1`, `0x7f.1`: resolvers read those as addresses).
fn valid_name(name: &str) -> bool {
    let labels_ok = !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    let last = name.rsplit('.').next().unwrap_or_default();
    let numeric_tail = last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x");
    labels_ok && !numeric_tail
}

/// Why a host pattern was refused, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Nothing but blanks.
    #[error("an empty host pattern")]
    Empty,
    /// A URL (a scheme or a path) rather than a host.
    #[error("{0:?} is not a host pattern: write the host (and :port) only, without a scheme or path")]
    NotHostOnly(String),
    /// A pattern whose port or host part is wrong.
    #[error("{text:?}: {problem}")]
    Invalid {
        /// The pattern as written.
        text: String,
        /// What is wrong with it.
        problem: PatternProblem,
    },
}

/// What is wrong with the port or the host of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternProblem {
    /// A port that is not 1 to 65535.
    #[error("the port {0:?} is not a number from 1 to 65535")]
    BadPort(String),
    /// `[` without `]`.
    #[error("a '[' without its ']'")]
    UnclosedBracket,
    /// Something other than `:PORT` after `]`.
    #[error("expected :PORT after the ']'")]
    NoPortAfterBracket,
    /// An IPv6 address and a port without brackets.
    #[error("write an IPv6 address with a port in brackets, e.g. [::1]:8080")]
    UnbracketedIpv6,
    /// A `*` that is not the whole first label.
    #[error("a wildcard may only be the whole first label, as in *.example.org")]
    Wildcard,
    /// Neither a valid host name nor an IP address.
    #[error("{0:?} is neither a host name nor an IP address")]
    NotAHost(String),
}

impl HostPattern {
    /// Parses one pattern; the error says what is wrong, in words.
    pub fn parse(text: &str) -> Result<HostPattern, PatternError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(PatternError::Empty);
        }
        if trimmed.contains("://") || trimmed.contains('/') {
            return Err(PatternError::NotHostOnly(text.to_string()));
        }
        let (host, port) = split_port(trimmed).map_err(|problem| PatternError::Invalid { text: trimmed.to_string(), problem })?;
        let host = parse_host_part(host).map_err(|problem| PatternError::Invalid { text: text.to_string(), problem })?;
        Ok(HostPattern { host, port, text: trimmed.to_string() })
    }

    /// Whether this pattern matches `host` on `port`.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        let host_ok = match (&self.host, host) {
            (HostMatch::Any, _) => true,
            (HostMatch::Name(want), Host::Name(name)) => want == name,
            (HostMatch::Below(suffix), Host::Name(name)) => {
                name.len() > suffix.len() + 1 && name.ends_with(suffix.as_str()) && name[..name.len() - suffix.len()].ends_with('.')
            }
            (HostMatch::Ip(want), Host::Ip(ip)) => want == ip,
            _ => false,
        };
        host_ok && self.port.is_none_or(|p| p == port)
    }

    /// Whether this pattern names `ip` literally (not through `*`).
    fn names_address(&self, ip: IpAddr, port: u16) -> bool {
        matches!(self.host, HostMatch::Ip(want) if want == ip) && self.port.is_none_or(|p| p == port)
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `host[:port]`, `[v6]:port`, or a bare IPv6 address.
fn split_port(text: &str) -> Result<(&str, Option<u16>), PatternProblem> {
    let port = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
        _ => Err(PatternProblem::BadPort(p.to_string())),
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or(PatternProblem::UnclosedBracket)?;
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((inside, port(p)?)),
                None => Err(PatternProblem::NoPortAfterBracket),
            },
        };
    }
    if text.parse::<Ipv6Addr>().is_ok() {
        return Ok((text, None));
    }
    match text.split_once(':') {
        None => Ok((text, None)),
        Some((host, p)) if !p.contains(':') => Ok((host, port(p)?)),
        Some(_) => Err(PatternProblem::UnbracketedIpv6),
    }
}

/// The host part of a pattern.
fn parse_host_part(host: &str) -> Result<HostMatch, PatternProblem> {
    if host == "*" {
        return Ok(HostMatch::Any);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(HostMatch::Ip(ip.to_canonical()));
    }
    let lower = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let (below, name) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest.to_string()),
        None => (false, lower),
    };
    if name.contains('*') {
        return Err(PatternProblem::Wildcard);
    }
    if name.bytes().all(|b| b.is_ascii_digit() || b == b'.') || !valid_name(&name) {
        return Err(PatternProblem::NotAHost(name));
    }
    Ok(if below { HostMatch::Below(name) } else { HostMatch::Name(name) })
}

/// The task's `allow` and `deny` patterns, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allowlist {
    allow: Vec<HostPattern>,
    deny: Vec<HostPattern>,
}

/// Why a connection was refused, in words fit for a 403 body and an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Allowlist {
    /// Parses `allow` and `deny`; every bad pattern is reported as `(field path, message)`,
    /// e.g. `("network[2]", "…")` or `("network.deny[0]", "…")`.
    pub fn parse(allow: &[String], deny: &[String], allow_path: &str, deny_path: &str) -> Result<Allowlist, Vec<(String, PatternError)>> {
        let mut errors = Vec::new();
        let mut parse_all = |texts: &[String], path: &str| -> Vec<HostPattern> {
            let mut parsed = Vec::new();
            for (i, text) in texts.iter().enumerate() {
                match HostPattern::parse(text) {
                    Ok(p) => parsed.push(p),
                    Err(e) => errors.push((format!("{path}[{i}]"), e)),
                }
            }
            parsed
        };
        let allow = parse_all(allow, allow_path);
        let deny = parse_all(deny, deny_path);
        if errors.is_empty() { Ok(Allowlist { allow, deny }) } else { Err(errors) }
    }

    /// The allow patterns, as written.
    pub fn allowed(&self) -> Vec<String> {
        self.allow.iter().map(|p| p.text.clone()).collect()
    }

    /// The deny patterns, as written.
    pub fn denied(&self) -> Vec<String> {
        self.deny.iter().map(|p| p.text.clone()).collect()
    }

    /// Whether a command may ask for `host` on `port` at all (before any name is resolved).
    pub fn check_host(&self, host: &Host, port: u16) -> Result<(), Refusal> {
        if let Some(rule) = self.deny.iter().find(|p| p.matches(host, port)) {
            return Err(Refusal(format!("{}: denied by the task's network deny pattern {rule:?}", endpoint(host, port), rule = rule.text)));
        }
        if !self.allow.iter().any(|p| p.matches(host, port)) {
            return Err(Refusal(format!("{} is not in the task's network allowlist", endpoint(host, port))));
        }
        Ok(())
    }

    /// Whether a connection to `ip` on `port` is allowed: not denied, and not a special-use
    /// address unless the command asked for it `literally` (not by a name) and the allowlist
    /// names it literally too — a name never leads to a loopback, private or metadata address.
    pub fn check_address(&self, ip: IpAddr, port: u16, literally: bool) -> Result<(), Refusal> {
        let ip = ip.to_canonical();
        let host = Host::Ip(ip);
        if let Some(rule) = self.deny.iter().find(|p| matches!(p.host, HostMatch::Ip(_)) && p.matches(&host, port)) {
            return Err(Refusal(format!("{}: denied by the task's network deny pattern {:?}", endpoint(&host, port), rule.text)));
        }
        match special_use(ip) {
            Some(kind) if !(literally && self.allow.iter().any(|p| p.names_address(ip, port))) => Err(Refusal(format!(
                "{ip} is a {kind} address; only an address asked for and listed literally in the task's network allowlist may be reached"
            ))),
            _ => Ok(()),
        }
    }
}

/// `host:port`, with brackets around an IPv6 address.
pub fn endpoint(host: &Host, port: u16) -> String {
    match host {
        Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        other => format!("{other}:{port}"),
    }
}

/// The `network` field as a manifest writes it: `true` (everything), `false` (nothing), a list
/// of host patterns, or `{ allow = [...], deny = [...] }` (deny wins).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum NetworkField {
    /// `true`: every host, directly; `false`: no network.
    All(bool),
    /// Only these hosts, through dracode's egress proxy.
    Hosts(Vec<String>),
    /// These hosts but not those.
    Rules {
        /// Host patterns commands may reach.
        #[serde(default)]
        allow: Vec<String>,
        /// Host patterns refused even when `allow` matches them.
        #[serde(default)]
        deny: Vec<String>,
    },
}

impl<'de> Deserialize<'de> for NetworkField {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NetworkVisitor)
    }
}

struct NetworkVisitor;

impl<'de> serde::de::Visitor<'de> for NetworkVisitor {
    type Value = NetworkField;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("true, false, a list of host patterns, or a table { allow = [...], deny = [...] }")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<NetworkField, E> {
        Ok(NetworkField::All(v))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<NetworkField, A::Error> {
        let mut hosts = Vec::new();
        while let Some(host) = seq.next_element::<String>()? {
            hosts.push(host);
        }
        Ok(NetworkField::Hosts(hosts))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<NetworkField, A::Error> {
        let (mut allow, mut deny) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            let slot = match key.as_str() {
                "allow" => &mut allow,
                "deny" => &mut deny,
                other => return Err(serde::de::Error::unknown_field(other, &["allow", "deny"])),
            };
            if slot.is_some() {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            *slot = Some(map.next_value::<Vec<String>>()?);
        }
        Ok(NetworkField::Rules { allow: allow.unwrap_or_default(), deny: deny.unwrap_or_default() })
    }
}

/// A task's network, resolved: none, all of it, or the hosts of an [`Allowlist`] through the
/// egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// No network (`false`, the default).
    #[default]
    Off,
    /// Every host, directly (`true`).
    All,
    /// Only what the allowlist permits, through dracode's proxy.
    Allow(std::sync::Arc<Allowlist>),
}

impl Network {
    /// Resolves a manifest's `network` value; bad patterns come back as `(field path, message)`.
    pub fn from_field(field: Option<&NetworkField>) -> Result<Network, Vec<(String, PatternError)>> {
        let list = match field {
            None | Some(NetworkField::All(false)) => return Ok(Network::Off),
            Some(NetworkField::All(true)) => return Ok(Network::All),
            Some(NetworkField::Hosts(hosts)) => Allowlist::parse(hosts, &[], "network", "network.deny")?,
            Some(NetworkField::Rules { allow, deny }) => Allowlist::parse(allow, deny, "network.allow", "network.deny")?,
        };
        Ok(Network::Allow(std::sync::Arc::new(list)))
    }

    /// True for `network = true`.
    pub fn is_all(&self) -> bool {
        matches!(self, Network::All)
    }

    /// True unless the network is off: everything, or an allowlist.
    pub fn is_on(&self) -> bool {
        !matches!(self, Network::Off)
    }

    /// The allowlist, when the network is one.
    pub fn allowlist(&self) -> Option<&std::sync::Arc<Allowlist>> {
        match self {
            Network::Allow(list) => Some(list),
            _ => None,
        }
    }
}

impl Serialize for Network {
    /// As a manifest would write it: `false`, `true` or `{ "allow": [...], "deny": [...] }`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Network::Off => serializer.serialize_bool(false),
            Network::All => serializer.serialize_bool(true),
            Network::Allow(list) => NetworkField::Rules { allow: list.allowed(), deny: list.denied() }.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(allow: &[&str], deny: &[&str]) -> Allowlist {
        let s = |v: &[&str]| v.iter().map(|t| (*t).to_string()).collect::<Vec<_>>();
        Allowlist::parse(&s(allow), &s(deny), "network", "network.deny").unwrap()
    }

    fn host(text: &str) -> Host {
        Host::parse(text).unwrap()
    }

    #[test]
    fn exact_wildcard_port_and_address_patterns_match_as_documented() {
        let l = list(&["registry.example", "*.example.org", "api.example:8443", "127.0.0.1:4000", "[::1]:8080", "10.1.2.3"], &[]);
        let table = [
            ("registry.example", 443, true),
            ("REGISTRY.example.", 80, true),
            ("sub.registry.example", 443, false),
            ("a.example.org", 443, true),
            ("a.b.example.org", 1, true),
            ("example.org", 443, false),
            ("badexample.org", 443, false),
            ("api.example", 8443, true),
            ("api.example", 443, false),
            ("127.0.0.1", 4000, true),
            ("127.0.0.1", 4001, false),
            ("::ffff:127.0.0.1", 4000, true),
            ("[::1]", 8080, true),
            ("::1", 8081, false),
            ("10.1.2.3", 22, true),
            ("localhost", 4000, false),
            ("evil.example", 443, false),
        ];
        for (h, port, want) in table {
            assert_eq!(l.check_host(&host(h), port).is_ok(), want, "{h}:{port}");
        }
    }

    #[test]
    fn deny_wins_over_allow_for_names_and_resolved_addresses() {
        let l = list(&["*", "*.example.org"], &["secret.example.org", "*.evil.example", "203.0.113.9", "*:25"]);
        assert!(l.check_host(&host("docs.example.org"), 443).is_ok());
        let refused = l.check_host(&host("secret.example.org"), 443).unwrap_err();
        assert!(refused.0.contains("deny pattern \"secret.example.org\""), "{refused}");
        assert!(l.check_host(&host("x.evil.example"), 443).is_err());
        assert!(l.check_host(&host("mail.example.org"), 25).is_err());
        assert!(l.check_address("203.0.113.9".parse().unwrap(), 443, true).is_err(), "a resolved address is checked against deny too");
        assert!(l.check_address("203.0.113.10".parse().unwrap(), 443, false).is_ok());
    }

    #[test]
    fn special_addresses_need_a_literal_listing() {
        let l = list(&["*", "127.0.0.1:4000", "fd00::1"], &[]);
        let check = |ip: &str, port, literally| l.check_address(ip.parse().unwrap(), port, literally);
        assert!(check("127.0.0.1", 4000, true).is_ok(), "asked for and listed literally");
        assert!(check("127.0.0.1", 4000, false).is_err(), "a name that resolves to it");
        assert!(check("::ffff:127.0.0.1", 4000, true).is_ok(), "its mapped form too");
        assert!(check("127.0.0.1", 4001, true).is_err(), "another port");
        assert!(check("127.0.0.2", 4000, true).is_err());
        assert!(check("fd00::1", 1, true).is_ok());
        let metadata = check("169.254.169.254", 80, true).unwrap_err();
        assert!(metadata.0.contains("169.254.169.254 is a cloud metadata address"), "{metadata}");
        assert!(check("93.184.215.14", 443, false).is_ok(), "a public address");
        assert!(check("0.0.0.0", 443, true).is_err());
    }

    #[test]
    fn bad_patterns_are_reported_with_their_position() {
        let s = |v: &[&str]| v.iter().map(|t| (*t).to_string()).collect::<Vec<_>>();
        let errors = Allowlist::parse(
            &s(&["ok.example", "https://x.example/", "a.*.example", "host:0", "host:http", "a.example:80:90", "", "127.1", "[::1"]),
            &s(&["fine", "bad host"]),
            "network.allow",
            "network.deny",
        )
        .unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "network.allow[1]",
                "network.allow[2]",
                "network.allow[3]",
                "network.allow[4]",
                "network.allow[5]",
                "network.allow[6]",
                "network.allow[7]",
                "network.allow[8]",
                "network.deny[1]"
            ]
        );
        let shown: Vec<String> = errors.iter().map(|(_, e)| e.to_string()).collect();
        assert_eq!(shown[0], "\"https://x.example/\" is not a host pattern: write the host (and :port) only, without a scheme or path");
        assert_eq!(shown[1], "\"a.*.example\": a wildcard may only be the whole first label, as in *.example.org");
        assert_eq!(shown[2], "\"host:0\": the port \"0\" is not a number from 1 to 65535");
        assert_eq!(shown[4], "\"a.example:80:90\": write an IPv6 address with a port in brackets, e.g. [::1]:8080");
        assert_eq!(shown[5], "an empty host pattern");
        assert_eq!(shown[6], "\"127.1\": \"127.1\" is neither a host name nor an IP address");
        assert_eq!(shown[7], "\"[::1\": a '[' without its ']'");
    }

    #[test]
    fn the_field_takes_a_bool_a_list_or_allow_and_deny() {
        let parse = |text: &str| toml::from_str::<Doc>(text).map(|f| f.network);
        assert_eq!(parse("network = true").unwrap(), NetworkField::All(true));
        assert_eq!(parse("network = [\"a.example\"]").unwrap(), NetworkField::Hosts(vec!["a.example".into()]));
        assert_eq!(
            parse("network = { allow = [\"*\"], deny = [\"b.example\"] }").unwrap(),
            NetworkField::Rules { allow: vec!["*".into()], deny: vec!["b.example".into()] }
        );
        let wrong = parse("network = 3").unwrap_err().to_string();
        assert!(wrong.contains("true, false, a list of host patterns"), "{wrong}");
        let unknown = parse("network = { allw = [] }").unwrap_err().to_string();
        assert!(unknown.contains("allw"), "{unknown}");
        let net = Network::from_field(Some(&NetworkField::Rules { allow: vec!["a.example".into()], deny: vec!["b.example".into()] }));
        assert_eq!(serde_json::to_value(net.unwrap()).unwrap(), serde_json::json!({"allow": ["a.example"], "deny": ["b.example"]}));
    }

    #[derive(Deserialize)]
    struct Doc {
        network: NetworkField,
    }

    #[test]
    fn request_hosts_are_parsed_strictly() {
        assert_eq!(Host::parse("[::1]"), Some(Host::Ip("::1".parse().unwrap())));
        assert_eq!(Host::parse("Example.ORG."), Some(Host::Name("example.org".into())));
        for bad in ["", "a b", "a/b", "127.1", "0x7f.1", "a..b", "é.example", "2130706433"] {
            assert_eq!(Host::parse(bad), None, "{bad}");
        }
    }
}
