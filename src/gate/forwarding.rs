//! What the proxy tells the agent about a request: forwarding headers from what it knows,
//! and the principal as a header value.

use super::*;

/// What the proxy knows about the request, never what the caller claimed: the caller's
/// forwarding headers were dropped by the allow-list.
pub(super) fn forwarding_headers(headers: &mut HeaderMap, client: IpAddr, request_id: &str) {
    use std::io::Write;
    // Written on the stack (the longest IPv6 text is 45 bytes), copied once into each value;
    // RFC 7239 quotes an IPv6 address in brackets.
    let mut address = [0u8; 64];
    let mut forwarded = [0u8; 96];
    let address = {
        let mut w = &mut address[..];
        let _ = write!(w, "{client}");
        let n = 64 - w.len();
        &address[..n]
    };
    let forwarded = {
        let mut w = &mut forwarded[..];
        let _ = match client {
            IpAddr::V4(_) => w.write_all(b"for="),
            IpAddr::V6(_) => w.write_all(b"for=\"["),
        };
        let _ = w.write_all(address);
        let _ = match client {
            IpAddr::V4(_) => w.write_all(b";proto=https"),
            IpAddr::V6(_) => w.write_all(b"]\";proto=https"),
        };
        let n = 96 - w.len();
        &forwarded[..n]
    };
    headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static("https"),
    );
    for (name, value) in [
        ("x-forwarded-for", address),
        ("forwarded", forwarded),
        ("x-request-id", request_id.as_bytes()),
    ] {
        if let Ok(v) = HeaderValue::from_bytes(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
}

/// The principal as a header value: printable ASCII as is, anything else percent-encoded.
pub(super) fn principal_header_value(name: &str) -> HeaderValue {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&out).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_headers_name_the_peer_as_the_proxy_saw_it() {
        let cases: [(&str, &str, &str); 4] = [
            ("127.0.0.1", "127.0.0.1", "for=127.0.0.1;proto=https"),
            ("::1", "::1", "for=\"[::1]\";proto=https"),
            (
                "::ffff:10.0.0.1",
                "::ffff:10.0.0.1",
                "for=\"[::ffff:10.0.0.1]\";proto=https",
            ),
            (
                "2001:db8::0:1",
                "2001:db8::1",
                "for=\"[2001:db8::1]\";proto=https",
            ),
        ];
        for (peer, xff, forwarded) in cases {
            let mut h = HeaderMap::new();
            h.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
            forwarding_headers(&mut h, peer.parse().unwrap(), "req-1");
            assert_eq!(h["x-forwarded-for"], xff, "{peer}");
            assert_eq!(h["forwarded"], forwarded, "{peer}");
            assert_eq!(h["x-forwarded-proto"], "https", "{peer}");
            assert_eq!(h["x-request-id"], "req-1", "{peer}");
            assert_eq!(h.get_all("x-forwarded-for").iter().count(), 1, "{peer}");
        }
    }
}
