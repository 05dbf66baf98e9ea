//! What the proxy tells the agent about a request: forwarding headers from what it knows,
//! and the principal as a header value.

use super::*;

/// What the proxy knows about the request, never what the caller claimed: the caller's
/// forwarding headers were dropped by the allow-list.
pub(super) fn forwarding_headers(headers: &mut HeaderMap, client: IpAddr, request_id: &str) {
    let for_value = match client {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("\"[{v6}]\""),
    };
    let pairs = [
        ("x-forwarded-for", client.to_string()),
        ("x-forwarded-proto", "https".to_string()),
        ("forwarded", format!("for={for_value};proto=https")),
        ("x-request-id", request_id.to_string()),
    ];
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
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
