//! Network policy (which addresses may connect) and the real client address behind trusted
//! proxies.
//!
//! Addresses are judged in canonical form: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
//! dual-stack socket reports for an IPv4 client) is its IPv4 address, and a configured network
//! inside `::ffff:0:0/96` is stored as the IPv4 network it maps. So `10.0.0.0/8` also matches
//! `::ffff:10.1.2.3`, and an IPv6 network such as `::/0` does not cover IPv4 clients.
//!
//! # The client address
//!
//! Forwarding headers are believed only from a trusted proxy, and only as far as the chain of
//! trusted proxies goes: the list is walked from the right (the entry the nearest proxy appended)
//! over trusted hops, and the first untrusted address is the client. Everything to its left was
//! written by the client itself and is never read, so spoofed entries prepended by an attacker
//! (and garbage there) change nothing. Whenever the walk cannot name a client with certainty,
//! the answer is the TCP peer (fail closed: at worst all clients of a proxy share its address,
//! never does a header choose an address):
//!
//! - an entry that is not an address (`unknown`, an RFC 7239 obfuscated identifier, garbage, an
//!   element without `for=`), reached before an untrusted address;
//! - a `Forwarded` header line that does not parse (RFC 7239 grammar, strict), when the walk
//!   needs an element from it;
//! - more than [`MAX_HOPS`] entries considered, or more than [`MAX_HEADER_BYTES`] of the
//!   header walked (from the right: the bytes a client wrote to the left of its own hop are
//!   never read, so a client cannot make its header too long to be read; a `Forwarded` line is
//!   parsed whole, so one line over the bound is unusable);
//! - every hop trusted (the request came from inside).
//!
//! `X-Forwarded-For` entries are bare addresses; an entry with a port is accepted when the port is
//! unambiguous (`192.0.2.1:8080`, `[2001:db8::1]:8080`, `[2001:db8::1]`) since some proxies
//! write it that way and the port does not change the address; `2001:db8::1` is an address, never
//! an address and a port. `Forwarded` follows RFC 7239: IPv6 in brackets and quotes, optional
//! (possibly obfuscated) port, `unknown` and `_obfuscated` nodes (which end the walk).
//!
//! Which header the trusted proxies write is `network.client_address_header`
//! ([`ClientAddressHeader`]): with one named, only that header is read and the other is
//! ignored, whatever it says. Unnamed, both are read, and when both are present `Forwarded` is
//! believed only if `X-Forwarded-For` names the same client; if they disagree, or either
//! cannot name one, the peer is the answer. A proxy that appends to one of them usually passes
//! the other through from the client untouched (nginx's `$proxy_add_x_forwarded_for` does not
//! touch `Forwarded`), so believing either one alone, unnamed, would let a client behind such a
//! proxy choose its own address; but then a client can make itself counted as its proxy (a
//! `Forwarded` header of its own that disagrees), spending the budgets of everyone behind that
//! proxy: name the header where the proxies are known.
//!
//! A trusted proxy must append to (or overwrite) the header it forwards; one that passes a
//! client's header through unchanged makes that header the client's word, and no parsing here
//! can tell.

use std::net::{IpAddr, Ipv6Addr};

use http::header::{HeaderMap, HeaderName, FORWARDED};
use ipnet::{IpNet, Ipv4Net};

/// The most entries of a forwarding header walked before giving up (→ the peer).
pub const MAX_HOPS: usize = 64;
/// The most bytes of a forwarding header walked from the right (the entries of
/// `X-Forwarded-For`, the whole lines of `Forwarded`) before giving up (→ the peer).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Which forwarding header the trusted proxies write (`network.client_address_header`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientAddressHeader {
    /// Unnamed: both are read, and must agree when both are present.
    #[default]
    Both,
    /// Only `X-Forwarded-For` (`"x-forwarded-for"`).
    XForwardedFor,
    /// Only RFC 7239 `Forwarded` (`"forwarded"`).
    Forwarded,
}

impl ClientAddressHeader {
    /// The setting's value, or None when it names no header the edge reads.
    pub fn from_setting(name: &str) -> Option<ClientAddressHeader> {
        match name.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Some(ClientAddressHeader::XForwardedFor),
            "forwarded" => Some(ClientAddressHeader::Forwarded),
            _ => None,
        }
    }
}

/// Allowed and denied networks, and the proxies whose forwarding headers are believed.
/// Lists are scanned linearly: they are meant to hold tens of entries, not thousands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    trusted_proxies: Vec<IpNet>,
    header: ClientAddressHeader,
}

/// What walking one forwarding header found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// The first untrusted hop from the right.
    Client(IpAddr),
    /// Every hop is a trusted proxy (or the header holds no entry).
    AllTrusted,
    /// Malformed, overlong, too many hops, or an unknown/obfuscated hop reached first.
    Unusable,
}

impl NetworkPolicy {
    /// allow: if non-empty, only these networks may connect; deny: always refused (deny wins
    /// over allow). trusted_proxies: peers whose forwarding headers are believed. Networks as
    /// strings ("10.0.0.0/8", "192.0.2.7", "::1", "fd00::/8"); an address without a prefix is a
    /// /32 or /128. A network with bits set past its prefix ("10.0.0.1/8") is refused as a
    /// likely typo rather than silently widened. Invalid → Err naming the list, index and entry.
    pub fn new(
        allow: &[String],
        deny: &[String],
        trusted_proxies: &[String],
    ) -> Result<NetworkPolicy, String> {
        Ok(NetworkPolicy {
            allow: parse_networks("allow", allow)?,
            deny: parse_networks("deny", deny)?,
            trusted_proxies: parse_networks("trusted_proxies", trusted_proxies)?,
            header: ClientAddressHeader::Both,
        })
    }

    /// The same policy, reading only `header` from trusted proxies.
    pub fn reading(self, header: ClientAddressHeader) -> NetworkPolicy {
        NetworkPolicy { header, ..self }
    }

    /// Whether a connection from this address may proceed (IPv4-mapped IPv6 addresses
    /// `::ffff:a.b.c.d` are judged as their IPv4 address).
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        !contains(&self.deny, ip) && (self.allow.is_empty() || contains(&self.allow, ip))
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        contains(&self.trusted_proxies, ip.to_canonical())
    }

    /// The client address of a request, in canonical form (see the module note): the TCP peer,
    /// unless the peer is a trusted proxy, in which case the rightmost untrusted hop of
    /// `Forwarded` / `X-Forwarded-For`, or the peer when that cannot be told with certainty.
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.is_trusted_proxy(peer) {
            return peer;
        }
        let has_forwarded =
            self.header != ClientAddressHeader::XForwardedFor && headers.contains_key(FORWARDED);
        let has_xff =
            self.header != ClientAddressHeader::Forwarded && headers.contains_key(&X_FORWARDED_FOR);
        let walk = match (has_forwarded, has_xff) {
            (false, false) => return peer,
            (true, false) => self.walk_forwarded(headers),
            (false, true) => self.walk_xff(headers),
            (true, true) => match (self.walk_forwarded(headers), self.walk_xff(headers)) {
                (Walk::Client(f), Walk::Client(x)) if f == x => Walk::Client(f),
                _ => Walk::Unusable,
            },
        };
        match walk {
            Walk::Client(ip) => ip,
            Walk::AllTrusted | Walk::Unusable => peer,
        }
    }

    fn walk_xff(&self, headers: &HeaderMap) -> Walk {
        let (mut hops, mut walked) = (0, 0usize);
        for line in headers.get_all(&X_FORWARDED_FOR).iter().rev() {
            for entry in line.as_bytes().rsplit(|b| *b == b',') {
                // Each entry and its comma (a line its end): many empty entries count too.
                walked = walked.saturating_add(entry.len() + 1);
                if walked > MAX_HEADER_BYTES + 1 {
                    return Walk::Unusable;
                }
                let entry = trim_ows(entry);
                // Empty list elements are no hop (RFC 9110, 5.6.1).
                if entry.is_empty() {
                    continue;
                }
                hops += 1;
                if hops > MAX_HOPS {
                    return Walk::Unusable;
                }
                match parse_xff_entry(entry) {
                    Some(ip) if self.is_trusted_proxy(ip) => {}
                    Some(ip) => return Walk::Client(ip),
                    None => return Walk::Unusable,
                }
            }
        }
        Walk::AllTrusted
    }

    fn walk_forwarded(&self, headers: &HeaderMap) -> Walk {
        let (mut hops, mut walked) = (0, 0usize);
        // A line is parsed only when the walk reaches it: a broken (or long) line to the left
        // of the client's hop was written by the client and does not matter.
        for line in headers.get_all(FORWARDED).iter().rev() {
            let line = line.as_bytes();
            walked = walked.saturating_add(line.len() + 1);
            if walked > MAX_HEADER_BYTES + 1 {
                return Walk::Unusable;
            }
            let Some(elements) = parse_forwarded(line) else {
                return Walk::Unusable;
            };
            for node in elements.iter().rev() {
                hops += 1;
                if hops > MAX_HOPS {
                    return Walk::Unusable;
                }
                // An element without `for=` is a hop whose client is not said: unknown.
                match node.as_deref().and_then(parse_forwarded_node) {
                    Some(ip) if self.is_trusted_proxy(ip) => {}
                    Some(ip) => return Walk::Client(ip),
                    None => return Walk::Unusable,
                }
            }
        }
        Walk::AllTrusted
    }
}

fn contains(nets: &[IpNet], ip: IpAddr) -> bool {
    nets.iter().any(|net| net.contains(&ip))
}

fn parse_networks(list: &str, entries: &[String]) -> Result<Vec<IpNet>, String> {
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            parse_network(entry).map_err(|why| format!("{list}[{i}] = {entry:?}: {why}"))
        })
        .collect()
}

fn parse_network(entry: &str) -> Result<IpNet, &'static str> {
    let s = entry.trim();
    let net = if s.contains('/') {
        let net: IpNet = s
            .parse()
            .map_err(|_| "not a network (like 10.0.0.0/8 or fd00::/8)")?;
        if net.trunc() != net {
            return Err(
                "bits set past the prefix length (write the network address, e.g. 10.0.0.0/8)",
            );
        }
        net
    } else {
        let ip: IpAddr = s
            .parse()
            .map_err(|_| "not an IP address or network (like 192.0.2.7, ::1, 10.0.0.0/8)")?;
        IpNet::from(ip)
    };
    Ok(canonical_network(net))
}

/// A network inside `::ffff:0:0/96` as the IPv4 network it maps (addresses are canonical too).
fn canonical_network(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net {
        if let (Some(prefix), Some(v4)) = (
            v6.prefix_len().checked_sub(96),
            v6.network().to_ipv4_mapped(),
        ) {
            if let Ok(v4net) = Ipv4Net::new(v4, prefix) {
                return IpNet::V4(v4net);
            }
        }
    }
    net
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_ows(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_ows(*last) {
            break;
        }
        s = rest;
    }
    s
}

/// An `X-Forwarded-For` entry: `a.b.c.d`, an IPv6 address, `a.b.c.d:port`, `[v6]`, `[v6]:port`.
fn parse_xff_entry(entry: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(entry).ok()?;
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    parse_host_port(s, false)
}

/// A `Forwarded` `for=` node (RFC 7239, 6): `a.b.c.d`, `[v6]`, either with `:port`; `unknown` and
/// obfuscated (`_…`) nodes, like anything else, name no address.
fn parse_forwarded_node(node: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(node).ok()?;
    if s.eq_ignore_ascii_case("unknown") || s.starts_with('_') {
        return None;
    }
    if let Ok(ip) = s.parse::<std::net::Ipv4Addr>() {
        return Some(IpAddr::V4(ip));
    }
    parse_host_port(s, true)
}

/// `[v6]`, `[v6]:port` or `a.b.c.d:port`. An RFC 7239 obfuscated port (`_…`) only in
/// `Forwarded`.
fn parse_host_port(s: &str, obfuscated_port: bool) -> Option<IpAddr> {
    let (ip, port) = if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let ip: Ipv6Addr = inside.parse().ok()?;
        if after.is_empty() {
            return Some(IpAddr::V6(ip).to_canonical());
        }
        (IpAddr::V6(ip), after.strip_prefix(':')?)
    } else {
        let (host, port) = s.split_once(':')?;
        (IpAddr::V4(host.parse().ok()?), port)
    };
    let port_ok = if obfuscated_port && port.starts_with('_') {
        port.len() > 1
            && port[1..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    } else {
        (1..=5).contains(&port.len())
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok()
    };
    port_ok.then(|| ip.to_canonical())
}

/// tchar (RFC 9110, 5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// One `Forwarded` line (RFC 7239, 4) → the `for=` value of each non-empty element, unquoted
/// (None for an element without one). Strict: a bad token, a `=` missing or surrounded by space,
/// an unterminated quote, text after a value, or a second `for` in one element fail the line.
fn parse_forwarded(line: &[u8]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut elements = Vec::new();
    let mut i = 0;
    let mut element_has_pair = false;
    let mut for_value: Option<Vec<u8>> = None;
    loop {
        while line.get(i).copied().is_some_and(is_ows) {
            i += 1;
        }
        match line.get(i) {
            None => {
                if element_has_pair {
                    elements.push(for_value.take());
                }
                return Some(elements);
            }
            Some(b',') => {
                if element_has_pair {
                    elements.push(for_value.take());
                }
                element_has_pair = false;
                i += 1;
                continue;
            }
            Some(b';') => {
                i += 1;
                continue;
            }
            Some(_) => {}
        }
        let name_start = i;
        while line.get(i).copied().is_some_and(is_tchar) {
            i += 1;
        }
        let name = &line[name_start..i];
        if name.is_empty() || line.get(i) != Some(&b'=') {
            return None;
        }
        i += 1;
        let mut value = Vec::new();
        if line.get(i) == Some(&b'"') {
            i += 1;
            loop {
                match line.get(i).copied() {
                    None => return None,
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') => match line.get(i + 1).copied() {
                        Some(c)
                            if c == b'\t'
                                || c == b' '
                                || (0x21..=0x7e).contains(&c)
                                || c >= 0x80 =>
                        {
                            value.push(c);
                            i += 2;
                        }
                        _ => return None,
                    },
                    Some(c)
                        if c == b'\t'
                            || c == b' '
                            || c == 0x21
                            || (0x23..=0x7e).contains(&c)
                            || c >= 0x80 =>
                    {
                        value.push(c);
                        i += 1;
                    }
                    Some(_) => return None,
                }
            }
        } else {
            let start = i;
            while line.get(i).copied().is_some_and(is_tchar) {
                i += 1;
            }
            if i == start {
                return None;
            }
            value.extend_from_slice(&line[start..i]);
        }
        if name.eq_ignore_ascii_case(b"for") {
            if for_value.is_some() {
                return None;
            }
            for_value = Some(value);
        }
        element_has_pair = true;
        while line.get(i).copied().is_some_and(is_ows) {
            i += 1;
        }
        if !matches!(line.get(i), None | Some(b',') | Some(b';')) {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn allow_and_deny_lists() {
        let policy = NetworkPolicy::new(
            &strings(&["10.0.0.0/8", "2001:db8::/32", "192.0.2.7", "::1"]),
            &strings(&["10.66.0.0/16", "2001:db8:bad::/48", "::ffff:10.99.0.0/112"]),
            &[],
        )
        .unwrap();
        // (address, permitted, why)
        let cases = [
            ("10.1.2.3", true, "inside an allowed /8"),
            ("10.66.1.1", false, "deny wins over allow"),
            (
                "10.99.0.5",
                false,
                "denied by a mapped network, judged as IPv4",
            ),
            ("::ffff:10.99.0.5", false, "mapped address in a mapped deny"),
            ("192.0.2.7", true, "a single allowed address"),
            ("192.0.2.8", false, "next to it"),
            ("::ffff:10.1.2.3", true, "IPv4-mapped, judged as IPv4"),
            ("::ffff:10.66.0.1", false, "IPv4-mapped, denied as IPv4"),
            ("::ffff:192.0.2.8", false, "IPv4-mapped, not allowed"),
            ("2001:db8::1", true, "inside an allowed IPv6 /32"),
            ("2001:db8:bad::1", false, "denied IPv6 /48"),
            ("2001:db9::1", false, "outside"),
            ("::1", true, "allowed IPv6 loopback"),
            ("127.0.0.1", false, "IPv4 loopback was not listed"),
            ("::ffff:127.0.0.1", false, "nor mapped"),
            ("11.0.0.1", false, "outside"),
        ];
        for (addr, permitted, why) in cases {
            assert_eq!(policy.permits(ip(addr)), permitted, "{addr}: {why}");
        }
    }

    #[test]
    fn an_empty_allow_list_permits_all_but_the_denied() {
        let policy = NetworkPolicy::new(
            &[],
            &strings(&["198.51.100.0/24", "fd00::/8", "::ffff:203.0.113.0/120"]),
            &[],
        )
        .unwrap();
        let cases = [
            ("198.51.100.9", false),
            ("::ffff:198.51.100.9", false),
            ("203.0.113.5", false),
            ("fd12::1", false),
            ("198.51.101.1", true),
            ("2001:db8::1", true),
            ("0.0.0.0", true),
        ];
        for (addr, permitted) in cases {
            assert_eq!(policy.permits(ip(addr)), permitted, "{addr}");
        }
        let open = NetworkPolicy::new(&[], &[], &[]).unwrap();
        assert!(open.permits(ip("203.0.113.1")));
        assert!(open.permits(ip("::1")));
        // `::/0` does not reach IPv4 clients, mapped or not.
        let no_v6 = NetworkPolicy::new(&[], &strings(&["::/0"]), &[]).unwrap();
        assert!(!no_v6.permits(ip("2001:db8::1")));
        assert!(no_v6.permits(ip("192.0.2.1")));
        assert!(no_v6.permits(ip("::ffff:192.0.2.1")));
    }

    #[test]
    fn invalid_networks_are_refused_naming_the_entry() {
        // (entry, message part)
        let cases = [
            ("10.0.0.0/33", "not a network"),
            ("fd00::/129", "not a network"),
            ("10.0.0.1/8", "bits set past the prefix"),
            ("2001:db8::1/32", "bits set past the prefix"),
            ("not-an-ip", "not an IP address"),
            ("", "not an IP address"),
            ("1.2.3.4/", "not a network"),
            ("10.0.0.0/8 junk", "not a network"),
            ("010.0.0.1", "not an IP address"),
            ("fe80::1%eth0", "not an IP address"),
            ("*", "not an IP address"),
        ];
        for (entry, want) in cases {
            for (list, args) in [("allow", 0), ("deny", 1), ("trusted_proxies", 2)] {
                let mut lists = [strings(&["10.0.0.0/8"]), vec![], vec![]];
                lists[args].push(entry.to_owned());
                let err = NetworkPolicy::new(&lists[0], &lists[1], &lists[2]).unwrap_err();
                let index = if args == 0 { 1 } else { 0 };
                let named = format!("{list}[{index}] = {entry:?}");
                assert!(err.contains(&named), "{err:?} should name {named}");
                assert!(err.contains(want), "{err:?} should say {want:?}");
            }
        }
        // Accepted spellings.
        let ok = strings(&[
            " 10.0.0.0/8 ",
            "192.0.2.7",
            "::1",
            "fd00::/8",
            "0.0.0.0/0",
            "::/0",
        ]);
        assert!(NetworkPolicy::new(&ok, &ok, &ok).is_ok());
    }

    /// Trusted: 10/8, fd00::/8 and 192.0.2.7.
    fn proxied() -> NetworkPolicy {
        NetworkPolicy::new(&[], &[], &strings(&["10.0.0.0/8", "fd00::/8", "192.0.2.7"])).unwrap()
    }

    fn headers(lines: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in lines {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    /// Header lines: (name, value).
    type Lines<'a> = Vec<(&'a str, &'a [u8])>;
    /// The `for=` value of one element, if any.
    type ForValue<'a> = Option<&'a [u8]>;

    const XFF: &str = "x-forwarded-for";
    const FWD: &str = "forwarded";
    const PROXY: &str = "10.0.0.1";
    const STRANGER: &str = "203.0.113.9";

    #[test]
    fn client_address_table() {
        let long_xff = format!("{}1.2.3.4", "10.0.0.3, ".repeat(900));
        let half_long = "9.9.9.9, ".repeat(500);
        let many_trusted = |n: usize| format!("6.6.6.6, 1.2.3.4{}", ", 10.0.0.3".repeat(n));
        let (hops_64, hops_65) = (many_trusted(63), many_trusted(64));
        let long_fwd = format!("for=1.2.3.4{}", ", for=10.0.0.3".repeat(600));
        // What a client wrote to the left of its own hop is never read, however long.
        let long_left = format!("{}1.2.3.4, 10.0.0.2", "9.9.9.9, ".repeat(1000));
        let long_garbage = "x".repeat(9000);
        let empties_right = format!("1.2.3.4{}", ",".repeat(9000));
        let long_hop = format!("1.2.3.4, {long_garbage}");
        let long_fwd_line = format!("for={long_garbage}, for=1.2.3.4");
        // (why, peer, header lines, expected client)
        #[rustfmt::skip]
        let cases: Vec<(&str, &str, Lines, &str)> = vec![
            ("untrusted peer, no header", STRANGER, vec![], STRANGER),
            ("untrusted peer, forged XFF", STRANGER, vec![(XFF, b"1.2.3.4")], STRANGER),
            ("untrusted peer, forged Forwarded", STRANGER, vec![(FWD, b"for=1.2.3.4")], STRANGER),
            ("untrusted mapped peer is canonical", "::ffff:203.0.113.9", vec![(XFF, b"1.2.3.4")], STRANGER),
            ("trusted peer, no header", PROXY, vec![], PROXY),
            ("trusted chain", PROXY, vec![(XFF, b"1.2.3.4, 10.0.0.2")], "1.2.3.4"),
            ("one hop", PROXY, vec![(XFF, b"1.2.3.4")], "1.2.3.4"),
            ("spoofed entries on the left", PROXY, vec![(XFF, b"6.6.6.6, 7.7.7.7, 1.2.3.4, 10.0.0.2")], "1.2.3.4"),
            ("garbage on the left is never read", PROXY, vec![(XFF, b"<script>, unknown, 1.2.3.4")], "1.2.3.4"),
            ("trusted mapped peer", "::ffff:10.0.0.1", vec![(XFF, b"1.2.3.4")], "1.2.3.4"),
            ("trusted IPv6 peer", "fd00::1", vec![(XFF, b"1.2.3.4, fd00::2")], "1.2.3.4"),
            ("single trusted address", "192.0.2.7", vec![(XFF, b"1.2.3.4")], "1.2.3.4"),
            ("multiple XFF lines", PROXY, vec![(XFF, b"6.6.6.6"), (XFF, b"1.2.3.4"), (XFF, b"10.0.0.2")], "1.2.3.4"),
            ("lines and lists", PROXY, vec![(XFF, b"6.6.6.6, 1.2.3.4"), (XFF, b"10.0.0.2, 10.0.0.3")], "1.2.3.4"),
            ("spaces and tabs", PROXY, vec![(XFF, b"  1.2.3.4 ,\t10.0.0.2\t")], "1.2.3.4"),
            ("no spaces", PROXY, vec![(XFF, b"6.6.6.6,1.2.3.4,10.0.0.2")], "1.2.3.4"),
            ("empty elements", PROXY, vec![(XFF, b"1.2.3.4,, 10.0.0.2, ,")], "1.2.3.4"),
            ("IPv4 with a port", PROXY, vec![(XFF, b"1.2.3.4:80, 10.0.0.2:4431")], "1.2.3.4"),
            ("bracketed IPv6 with a port", PROXY, vec![(XFF, b"[2001:db8::1]:443")], "2001:db8::1"),
            ("bracketed IPv6", PROXY, vec![(XFF, b"[2001:db8::1]")], "2001:db8::1"),
            ("bare IPv6", PROXY, vec![(XFF, b"2001:db8::1, fd00::7")], "2001:db8::1"),
            ("IPv6 with a :80 tail is an address", PROXY, vec![(XFF, b"2001:db8::1:80")], "2001:db8::1:80"),
            ("IPv4-mapped in XFF", PROXY, vec![(XFF, b"::ffff:1.2.3.4, ::ffff:10.0.0.2")], "1.2.3.4"),
            ("port out of range", PROXY, vec![(XFF, b"1.2.3.4:99999")], PROXY),
            ("empty port", PROXY, vec![(XFF, b"1.2.3.4:")], PROXY),
            ("port not digits", PROXY, vec![(XFF, b"1.2.3.4:http")], PROXY),
            ("obfuscated port only in Forwarded", PROXY, vec![(XFF, b"1.2.3.4:_p")], PROXY),
            ("unknown at the right", PROXY, vec![(XFF, b"1.2.3.4, unknown, 10.0.0.2")], PROXY),
            ("garbage at the right", PROXY, vec![(XFF, b"1.2.3.4, garbage")], PROXY),
            ("only garbage", PROXY, vec![(XFF, b"not-an-ip")], PROXY),
            ("octal-looking IPv4", PROXY, vec![(XFF, b"010.0.0.1")], PROXY),
            ("five octets", PROXY, vec![(XFF, b"1.2.3.4.5")], PROXY),
            ("IPv6 zone", PROXY, vec![(XFF, b"fe80::1%eth0")], PROXY),
            ("IPv4 in brackets", PROXY, vec![(XFF, b"[1.2.3.4]")], PROXY),
            ("quoted XFF entry", PROXY, vec![(XFF, b"\"1.2.3.4\"")], PROXY),
            ("two addresses in one entry", PROXY, vec![(XFF, b"1.2.3.4 5.6.7.8")], PROXY),
            ("not UTF-8", PROXY, vec![(XFF, b"1.2.3.4\xff")], PROXY),
            ("empty header", PROXY, vec![(XFF, b"")], PROXY),
            ("every hop trusted", PROXY, vec![(XFF, b"10.0.0.5, 192.0.2.7, fd00::3")], PROXY),
            ("64 hops considered", PROXY, vec![(XFF, hops_64.as_bytes())], "1.2.3.4"),
            ("65 hops needed", PROXY, vec![(XFF, hops_65.as_bytes())], PROXY),
            ("long on the left of the nearest hop", PROXY, vec![(XFF, long_xff.as_bytes())], "1.2.3.4"),
            ("long over lines on the left", PROXY, vec![(XFF, half_long.as_bytes()), (XFF, half_long.as_bytes()), (XFF, b"1.2.3.4")], "1.2.3.4"),
            ("long on the left of one line", PROXY, vec![(XFF, long_left.as_bytes())], "1.2.3.4"),
            ("long garbage line on the left", PROXY, vec![(XFF, long_garbage.as_bytes()), (XFF, b"1.2.3.4, 10.0.0.2")], "1.2.3.4"),
            ("empty elements past the bytes walked", PROXY, vec![(XFF, empties_right.as_bytes())], PROXY),
            ("a long hop past the bytes walked", PROXY, vec![(XFF, long_hop.as_bytes())], PROXY),
            // RFC 7239
            ("Forwarded", PROXY, vec![(FWD, b"for=1.2.3.4")], "1.2.3.4"),
            ("Forwarded, quoted IPv6 with port", PROXY, vec![(FWD, b"for=\"[2001:db8::1]:4711\"")], "2001:db8::1"),
            ("Forwarded, quoted IPv6", PROXY, vec![(FWD, b"For=\"[2001:db8:cafe::17]\"")], "2001:db8:cafe::17"),
            ("Forwarded, quoted IPv4 with port", PROXY, vec![(FWD, b"for=\"1.2.3.4:8080\"")], "1.2.3.4"),
            ("Forwarded, obfuscated port", PROXY, vec![(FWD, b"for=\"1.2.3.4:_gazonk\"")], "1.2.3.4"),
            ("Forwarded, other parameters", PROXY, vec![(FWD, b"proto=https;for=1.2.3.4;by=10.0.0.1;host=\"a.example, b\"")], "1.2.3.4"),
            ("Forwarded, spaces around ;", PROXY, vec![(FWD, b"for=1.2.3.4 ; proto=http")], "1.2.3.4"),
            ("Forwarded chain", PROXY, vec![(FWD, b"for=6.6.6.6, for=1.2.3.4;proto=http, for=\"[fd00::2]\"")], "1.2.3.4"),
            ("Forwarded lines", PROXY, vec![(FWD, b"for=6.6.6.6"), (FWD, b"for=1.2.3.4, for=10.0.0.2")], "1.2.3.4"),
            ("Forwarded, broken line on the left", PROXY, vec![(FWD, b"for=\"broken"), (FWD, b"for=1.2.3.4")], "1.2.3.4"),
            ("Forwarded, quoted-pair", PROXY, vec![(FWD, b"for=\"1.2.3.\\4\"")], "1.2.3.4"),
            ("Forwarded, mapped", PROXY, vec![(FWD, b"for=\"[::ffff:1.2.3.4]\"")], "1.2.3.4"),
            ("Forwarded, unknown at the right", PROXY, vec![(FWD, b"for=1.2.3.4, for=unknown")], PROXY),
            ("Forwarded, unknown on the left", PROXY, vec![(FWD, b"for=unknown, for=1.2.3.4")], "1.2.3.4"),
            ("Forwarded, only unknown", PROXY, vec![(FWD, b"for=unknown")], PROXY),
            ("Forwarded, obfuscated", PROXY, vec![(FWD, b"for=_hidden, for=10.0.0.2")], PROXY),
            ("Forwarded, element without for", PROXY, vec![(FWD, b"for=1.2.3.4, proto=https")], PROXY),
            ("Forwarded, unquoted port", PROXY, vec![(FWD, b"for=1.2.3.4:8080")], PROXY),
            ("Forwarded, unquoted IPv6", PROXY, vec![(FWD, b"for=[2001:db8::1]")], PROXY),
            ("Forwarded, IPv6 without brackets", PROXY, vec![(FWD, b"for=\"2001:db8::1\"")], PROXY),
            ("Forwarded, unterminated quote", PROXY, vec![(FWD, b"for=\"1.2.3.4")], PROXY),
            ("Forwarded, quote swallowing the proxy's entry", PROXY, vec![(FWD, b"for=\", for=\"[2001:db8::1]:4711\"")], PROXY),
            ("Forwarded, duplicate for", PROXY, vec![(FWD, b"for=6.6.6.6;for=1.2.3.4")], PROXY),
            ("Forwarded, text after the value", PROXY, vec![(FWD, b"for=1.2.3.4 x")], PROXY),
            ("Forwarded, space around =", PROXY, vec![(FWD, b"for = 1.2.3.4")], PROXY),
            ("Forwarded, missing value", PROXY, vec![(FWD, b"for=")], PROXY),
            ("Forwarded, no pair", PROXY, vec![(FWD, b"1.2.3.4")], PROXY),
            ("Forwarded, every hop trusted", PROXY, vec![(FWD, b"for=10.0.0.9, for=\"[fd00::1]:80\"")], PROXY),
            ("Forwarded, overlong", PROXY, vec![(FWD, long_fwd.as_bytes())], PROXY),
            ("Forwarded, long line on the left", PROXY, vec![(FWD, long_garbage.as_bytes()), (FWD, b"for=1.2.3.4")], "1.2.3.4"),
            ("Forwarded, long line the client's hop is in", PROXY, vec![(FWD, long_fwd_line.as_bytes())], PROXY),
            // Both headers
            ("both agree", PROXY, vec![(FWD, b"for=1.2.3.4"), (XFF, b"1.2.3.4")], "1.2.3.4"),
            ("both agree after trusted hops", PROXY, vec![(FWD, b"for=1.2.3.4, for=10.0.0.2"), (XFF, b"6.6.6.6, 1.2.3.4, 10.0.0.2")], "1.2.3.4"),
            ("forged Forwarded behind an XFF proxy", PROXY, vec![(FWD, b"for=6.6.6.6"), (XFF, b"1.2.3.4")], PROXY),
            ("forged XFF behind a Forwarded proxy", PROXY, vec![(FWD, b"for=1.2.3.4"), (XFF, b"6.6.6.6")], PROXY),
            ("Forwarded with an overlong XFF", PROXY, vec![(FWD, b"for=6.6.6.6"), (XFF, long_xff.as_bytes())], PROXY),
            ("Forwarded with garbage XFF", PROXY, vec![(FWD, b"for=1.2.3.4"), (XFF, b"garbage")], PROXY),
        ];
        let policy = proxied();
        for (why, peer, lines, want) in cases {
            let got = policy.client_address(ip(peer), &headers(&lines));
            assert_eq!(got, ip(want), "{why}");
        }
    }

    /// `network.client_address_header` names the one header the proxies write: the other is
    /// never read, so a client cannot make itself counted as its proxy with a header of its own
    /// that disagrees; unnamed, both are read and must agree.
    #[test]
    fn the_header_the_proxies_write() {
        use ClientAddressHeader::{Both, Forwarded, XForwardedFor};
        let nines = "9".repeat(9000);
        // (why, which header, header lines, expected client)
        #[rustfmt::skip]
        let cases: Vec<(&str, ClientAddressHeader, Lines, &str)> = vec![
            ("XFF, a forged Forwarded ignored", XForwardedFor, vec![(FWD, b"for=6.6.6.6"), (XFF, b"1.2.3.4")], "1.2.3.4"),
            ("XFF, Forwarded unknown ignored", XForwardedFor, vec![(FWD, b"for=unknown"), (XFF, b"1.2.3.4")], "1.2.3.4"),
            ("XFF, a broken Forwarded ignored", XForwardedFor, vec![(FWD, b"for=\"broken"), (XFF, b"1.2.3.4")], "1.2.3.4"),
            ("XFF, Forwarded alone is not read", XForwardedFor, vec![(FWD, b"for=1.2.3.4")], PROXY),
            ("XFF, its own chain", XForwardedFor, vec![(XFF, b"6.6.6.6, 1.2.3.4, 10.0.0.2")], "1.2.3.4"),
            ("XFF, its own unknown hop", XForwardedFor, vec![(XFF, b"1.2.3.4, unknown")], PROXY),
            ("Forwarded, a forged XFF ignored", Forwarded, vec![(FWD, b"for=1.2.3.4"), (XFF, b"6.6.6.6")], "1.2.3.4"),
            ("Forwarded, an overlong XFF ignored", Forwarded, vec![(FWD, b"for=1.2.3.4"), (XFF, nines.as_bytes())], "1.2.3.4"),
            ("Forwarded, XFF alone is not read", Forwarded, vec![(XFF, b"1.2.3.4")], PROXY),
            ("Forwarded, its own chain", Forwarded, vec![(FWD, b"for=6.6.6.6, for=1.2.3.4, for=10.0.0.2")], "1.2.3.4"),
            ("both: disagreeing headers name the peer", Both, vec![(FWD, b"for=unknown"), (XFF, b"1.2.3.4")], PROXY),
            ("both: either alone", Both, vec![(XFF, b"1.2.3.4")], "1.2.3.4"),
        ];
        for (why, header, lines, want) in cases {
            let policy = proxied().reading(header);
            let got = policy.client_address(ip(PROXY), &headers(&lines));
            assert_eq!(got, ip(want), "{why}");
            // An untrusted peer is itself, whichever header is named.
            assert_eq!(
                policy.client_address(ip(STRANGER), &headers(&lines)),
                ip(STRANGER)
            );
        }
        // The setting's spellings.
        for (name, want) in [
            ("x-forwarded-for", Some(XForwardedFor)),
            ("X-Forwarded-For", Some(XForwardedFor)),
            ("forwarded", Some(Forwarded)),
            ("x-real-ip", None),
            ("both", None),
            ("", None),
        ] {
            assert_eq!(ClientAddressHeader::from_setting(name), want, "{name}");
        }
    }

    #[test]
    fn without_trusted_proxies_headers_are_never_read() {
        let policy = NetworkPolicy::new(&[], &[], &[]).unwrap();
        let h = headers(&[(XFF, b"1.2.3.4"), (FWD, b"for=1.2.3.4")]);
        for peer in ["127.0.0.1", "10.0.0.1", "::1"] {
            assert_eq!(policy.client_address(ip(peer), &h), ip(peer));
        }
    }

    #[test]
    fn forwarded_parser_shapes() {
        // (line, for values of the non-empty elements; None = the line is refused)
        let cases: Vec<(&[u8], Option<Vec<ForValue>>)> = vec![
            (b"", Some(vec![])),
            (b" , ,", Some(vec![])),
            (b"for=a", Some(vec![Some(b"a")])),
            (b"FOR=a;by=b, proto=http", Some(vec![Some(b"a"), None])),
            (b";;for=a;;", Some(vec![Some(b"a")])),
            (b"for=\"a,b;c\"", Some(vec![Some(b"a,b;c")])),
            (b"for=\"\\\"x\"", Some(vec![Some(b"\"x")])),
            (b"for=\"\"", Some(vec![Some(b"")])),
            (b"for=a=b", None),
            (b"=a", None),
            (b"for", None),
            (b"for=\"a\"b", None),
            (b"for=\"a\x01\"", None),
            (b"for=\"a\\", None),
            (b"for=a;for=b", None),
            (b"f@r=a", None),
        ];
        for (line, want) in cases {
            let got = parse_forwarded(line);
            let want: Option<Vec<Option<Vec<u8>>>> =
                want.map(|v| v.into_iter().map(|e| e.map(<[u8]>::to_vec)).collect());
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(line));
        }
    }
}
