//! What the proxy tells the agent about a request: forwarding headers from what it knows,
//! and the principal as a header value.

use super::*;

/// What the proxy knows about the request, never what the caller claimed: the caller's
/// forwarding headers were dropped by the allow-list.
pub(super) fn forwarding_headers(headers: &mut HeaderMap, client: IpAddr, request_id: &str) {
    // Written on the stack, copied once into each value; RFC 7239 quotes an IPv6 address in
    // brackets.
    let (mut address, mut forwarded) = ([0u8; 64], [0u8; 96]);
    let address = on_stack(&mut address, format_args!("{client}"));
    let forwarded = match client {
        IpAddr::V4(_) => on_stack(&mut forwarded, format_args!("for={client};proto=https")),
        IpAddr::V6(_) => on_stack(
            &mut forwarded,
            format_args!("for=\"[{client}]\";proto=https"),
        ),
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

/// The text of `args` in `buf`, no allocation. The callers' buffers hold their longest text
/// (an IPv6 address is at most 45 bytes, its `Forwarded` value 65).
fn on_stack<'b>(buf: &'b mut [u8], args: std::fmt::Arguments) -> &'b [u8] {
    use std::io::Write;
    let mut w = std::io::Cursor::new(&mut *buf);
    let _ = w.write_fmt(args);
    let n = usize::try_from(w.position()).unwrap_or(0);
    &buf[..n]
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
        const LONGEST: &str = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        let longest = format!("for=\"[{LONGEST}]\";proto=https");
        let cases: [(&str, &str, &str); 6] = [
            ("127.0.0.1", "127.0.0.1", "for=127.0.0.1;proto=https"),
            (
                "255.255.255.255",
                "255.255.255.255",
                "for=255.255.255.255;proto=https",
            ),
            (LONGEST, LONGEST, longest.as_str()),
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
