//! What an agent sees of a caller's headers: an allow-list, after hop-by-hop removal, and a
//! well-formed W3C trace context.

use std::borrow::Cow;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Headers that are meaningful for one connection only (RFC 9110 §7.6.1), plus the
/// non-standard ones proxies commonly treat so.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Caller headers an agent may receive as sent. Everything else (credentials, cookies,
/// forwarding headers, hop-by-hop headers) stays at the edge; the A2A service parameters are
/// forwarded as the edge validated and normalized them.
const FORWARDED: [HeaderName; 1] = [header::ACCEPT];

/// Removes the hop-by-hop headers and every header that `Connection` names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// The headers to send upstream for a caller's request: the allow-listed caller headers, a
/// well-formed trace context, and the validated `A2A-Version` and `A2A-Extensions`; and the
/// trace id of that context (for the log). The upstream credential is added by the forwarder.
pub fn forwarded_headers(
    caller: &HeaderMap,
    version: HeaderValue,
    extensions: Option<HeaderValue>,
) -> (HeaderMap, Option<String>) {
    // Hop-by-hop removal matters here only for what `Connection` names (the fixed hop-by-hop
    // names are neither allow-listed nor trace context): without it, nothing is copied.
    let h = if caller.contains_key(header::CONNECTION) {
        let mut h = caller.clone();
        strip_hop_by_hop(&mut h);
        Cow::Owned(h)
    } else {
        Cow::Borrowed(caller)
    };
    // Room for what the edge adds after (its forwarding headers, the principal, the agent's
    // credential, the trace context): the map does not grow on the way.
    let mut out = HeaderMap::with_capacity(16);
    for name in FORWARDED {
        for v in h.get_all(&name) {
            out.append(name.clone(), v.clone());
        }
    }
    // A well-formed W3C trace context joins the caller's trace; a malformed one is dropped.
    let trace_id = super::trace_context::forwardable(&h).map(|(trace, id)| {
        for (name, value) in trace {
            out.insert(name, value);
        }
        id
    });
    out.insert(HeaderName::from_static("a2a-version"), version);
    if let Some(ext) = extensions {
        out.insert(HeaderName::from_static("a2a-extensions"), ext);
    }
    (out, trace_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_headers_survive() {
        let mut h = HeaderMap::new();
        let add = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
            h.append(k, HeaderValue::from_static(v));
        };
        add(&mut h, "authorization", "Bearer caller-secret");
        add(&mut h, "x-api-key", "k");
        add(&mut h, "cookie", "c=1");
        add(&mut h, "x-forwarded-for", "1.2.3.4");
        add(&mut h, "x-a2a-edge-principal", "forged");
        add(&mut h, "a2a-version", "1.0");
        add(&mut h, "a2a-extensions", "urn:a");
        add(&mut h, "a2a-extensions", "urn:b, urn:c");
        add(&mut h, "accept", "text/event-stream");
        add(&mut h, "te", "trailers");
        add(&mut h, "upgrade", "h2c");
        let (out, _) = forwarded_headers(
            &h,
            HeaderValue::from_static("1.0"),
            Some(HeaderValue::from_static("urn:a, urn:b, urn:c")),
        );
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out["a2a-extensions"], "urn:a, urn:b, urn:c");
        assert_eq!(out["a2a-version"], "1.0");
        assert_eq!(out["accept"], "text/event-stream");
        assert!(out.get("authorization").is_none());
    }

    #[test]
    fn connection_named_headers_are_hop_by_hop() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, Accept"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        let (out, _) = forwarded_headers(&h, HeaderValue::from_static("1.0"), None);
        assert!(out.get("accept").is_none());
        assert!(out.get("connection").is_none());
        assert_eq!(out["a2a-version"], "1.0");
    }

    /// The trace context and `Accept` go on unless `Connection` names them (in any case, in
    /// any of its values); a `Connection` that names neither changes nothing; the fixed
    /// hop-by-hop headers never go, with or without `Connection`.
    #[test]
    fn what_connection_names_never_goes_on() {
        const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        // (Connection values, accept forwarded, trace context forwarded)
        let cases: [(&[&str], bool, bool); 7] = [
            (&[], true, true),
            (&["keep-alive"], true, true),
            (&["close, Upgrade"], true, true),
            (&["traceparent"], true, false),
            (&["close", "TraceParent"], true, false),
            (&["accept,traceparent"], false, false),
            (&[" Accept "], false, true),
        ];
        for (connection, accept, trace) in cases {
            let mut h = HeaderMap::new();
            for c in connection {
                h.append("connection", HeaderValue::from_static(c));
            }
            h.insert("accept", HeaderValue::from_static("*/*"));
            h.insert("traceparent", HeaderValue::from_static(TP));
            h.insert("tracestate", HeaderValue::from_static("k=v"));
            h.insert("te", HeaderValue::from_static("trailers"));
            h.insert("upgrade", HeaderValue::from_static("h2c"));
            h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
            let (out, id) = forwarded_headers(&h, HeaderValue::from_static("1.0"), None);
            assert_eq!(out.contains_key("accept"), accept, "{connection:?}");
            assert_eq!(out.contains_key("traceparent"), trace, "{connection:?}");
            assert_eq!(id.is_some(), trace, "{connection:?}");
            for gone in ["connection", "te", "upgrade", "keep-alive"] {
                assert!(!out.contains_key(gone), "{gone} with {connection:?}");
            }
        }
    }
}
