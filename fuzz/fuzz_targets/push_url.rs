//! `validate::push_url::check_push_url` on arbitrary strings, with https only and with http
//! allowed.
//!
//! Properties: never panics; an accepted URL is http(s) (http only when allowed), has no
//! credentials, has a host; a host that is an IP literal is public for `special_purpose` AND
//! for an independent table of the IANA special-purpose registries written here; a host
//! that is a name is never `localhost`/`*.localhost`, has a dot, does not read as an IP
//! address (the way a lax resolver or Python's `ipaddress` would); the forwarded form
//! (`as_str`) is at most 2048 bytes and is accepted again, to the same URL (a fixed point).
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use a2a_edge::validate::push_url::{check_push_url, special_purpose, PushUrlPolicy};
use libfuzzer_sys::fuzz_target;
use url::Host;

fn in_v4(ip: Ipv4Addr, net: [u8; 4], len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], len: u32) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

/// The blocks of the IANA IPv4 and IPv6 special-purpose registries that are not globally
/// reachable (and all IPv6 outside global unicast), written independently of the crate's
/// table. The globally reachable anycast /24s (AS112, AMT) are left out: public for both.
fn oracle_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            const V4: &[([u8; 4], u32)] = &[
                ([0, 0, 0, 0], 8),
                ([10, 0, 0, 0], 8),
                ([100, 64, 0, 0], 10),
                ([127, 0, 0, 0], 8),
                ([169, 254, 0, 0], 16),
                ([172, 16, 0, 0], 12),
                ([192, 0, 0, 0], 24),
                ([192, 0, 2, 0], 24),
                ([192, 88, 99, 0], 24),
                ([192, 168, 0, 0], 16),
                ([198, 18, 0, 0], 15),
                ([198, 51, 100, 0], 24),
                ([203, 0, 113, 0], 24),
                ([224, 0, 0, 0], 4),
                ([240, 0, 0, 0], 4),
            ];
            V4.iter().any(|(net, len)| in_v4(v4, *net, *len))
        }
        IpAddr::V6(v6) => {
            // The well-known NAT64 prefix carries an IPv4 address: judged by it.
            if in_v6(v6, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
                let o = v6.octets();
                return oracle_special(IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15])));
            }
            // Only 2000::/3 is global unicast.
            if !in_v6(v6, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
                return true;
            }
            const V6: &[([u16; 8], u32)] = &[
                ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
                ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
                ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16),
                ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
            ];
            V6.iter().any(|(net, len)| in_v6(v6, *net, *len))
        }
    }
}

fn check(raw: &str, policy: &PushUrlPolicy) {
    let url = match check_push_url(raw, policy) {
        Ok(url) => url,
        Err(e) => {
            assert_eq!(e.code, -32602);
            assert!(e.reason.as_str().starts_with("push."), "{e:?}");
            return;
        }
    };
    match url.scheme() {
        "https" => {}
        "http" => assert!(policy.allow_http, "http accepted: {url}"),
        other => panic!("scheme {other} accepted: {url}"),
    }
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{url}"
    );
    match url.host().expect("an accepted URL has a host") {
        Host::Ipv4(ip) => {
            assert_eq!(special_purpose(IpAddr::V4(ip)), None, "{url}");
            assert!(
                !oracle_special(IpAddr::V4(ip)),
                "special IPv4 accepted: {url}"
            );
        }
        Host::Ipv6(ip) => {
            assert_eq!(special_purpose(IpAddr::V6(ip)), None, "{url}");
            assert!(
                !oracle_special(IpAddr::V6(ip)),
                "special IPv6 accepted: {url}"
            );
        }
        Host::Domain(d) => {
            let name = d.strip_suffix('.').unwrap_or(d).to_ascii_lowercase();
            assert!(
                name != "localhost" && !name.ends_with(".localhost"),
                "{url}"
            );
            assert!(name.contains('.'), "single-label name accepted: {url}");
            assert!(
                name.parse::<IpAddr>().is_err(),
                "a name that reads as an IP address accepted: {url}"
            );
        }
    }
    let forwarded = url.as_str();
    assert!(forwarded.len() <= 2048);
    let again = check_push_url(forwarded, policy)
        .unwrap_or_else(|e| panic!("forwarded URL refused: {e:?} {forwarded}"));
    assert_eq!(again, url, "forwarded URL parses differently");
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    check(raw, &PushUrlPolicy::default());
    check(
        raw,
        &PushUrlPolicy {
            allow_http: true,
            resolve_names: false,
            ..Default::default()
        },
    );
});
