//! What the proxy tells the agent about a request: forwarding headers from what it knows,
//! and the principal as a header value.

use super::*;

/// What the proxy knows about the request, never what the caller claimed: the caller's
/// forwarding headers were dropped by the allow-list.
pub(super) fn forwarding_headers(headers: &mut HeaderMap, client: IpAddr, request_id: &str) {
    // Written on the stack once, copied into each value; RFC 7239 quotes an IPv6 address in
    // brackets.
    let (mut address, mut forwarded) = ([0u8; 64], [0u8; 96]);
    let address = on_stack(&mut address, format_args!("{client}"));
    let (open, close): (&[u8], &[u8]) = match client {
        IpAddr::V4(_) => (b"for=", b";proto=https"),
        IpAddr::V6(_) => (b"for=\"[", b"]\";proto=https"),
    };
    let forwarded = joined(&mut forwarded, [open, address, close]);
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

/// The text of `args` in `buf`, no allocation. The caller's buffer holds its longest text
/// (an IPv6 address is at most 45 bytes).
fn on_stack<'b>(buf: &'b mut [u8], args: std::fmt::Arguments) -> &'b [u8] {
    use std::io::Write;
    let mut w = std::io::Cursor::new(&mut *buf);
    let _ = w.write_fmt(args);
    let n = usize::try_from(w.position()).unwrap_or(0);
    &buf[..n]
}

/// `parts` one after the other in `buf`, no allocation (the caller's longest, an IPv6
/// address's `Forwarded` value, is 65 bytes).
fn joined<'b, const N: usize>(buf: &'b mut [u8], parts: [&[u8]; N]) -> &'b [u8] {
    let mut n = 0;
    for part in parts {
        let Some(to) = buf.get_mut(n..n + part.len()) else {
            break;
        };
        to.copy_from_slice(part);
        n += part.len();
    }
    &buf[..n]
}

/// The principal as a header value: printable ASCII as is, anything else percent-encoded.
pub(super) fn principal_header_value(name: &str) -> HeaderValue {
    use std::fmt::Write;
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
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
    #[test]
    fn a_principal_is_sent_as_printable_ascii_with_anything_else_percent_encoded() {
        let cases = [
            ("alice", "alice"),
            ("spiffe://a.example/ns/x", "spiffe://a.example/ns/x"),
            ("a b", "a%20b"),
            ("100%", "100%25"),
            ("%41", "%2541"),
            ("jos\u{e9}", "jos%C3%A9"),
            ("a\r\nx-evil: 1", "a%0D%0Ax-evil:%201"),
            ("tab\there\0", "tab%09here%00"),
            ("\u{7f}", "%7F"),
            ("", ""),
        ];
        for (name, sent) in cases {
            assert_eq!(principal_header_value(name), sent, "{name:?}");
        }
    }
}
