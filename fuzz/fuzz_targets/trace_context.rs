//! `trace_context::forwardable` on arbitrary `traceparent` / `tracestate` header values (the
//! input is split at the first NUL byte: traceparent, then tracestate).
//!
//! Properties: never panics; what is forwarded is exactly what the caller sent (no rewriting);
//! a forwarded traceparent is `00-<32 lowercase hex>-<16 lowercase hex>-<2 lowercase hex>` with
//! non-zero ids, and the logged trace id is its second field; a tracestate is forwarded only
//! with such a traceparent, and has at most 512 bytes and 32 `key=value` members, none with a
//! control character; the answer is the same when asked twice.
#![no_main]

use a2a_edge::upstream::trace_context::forwardable;
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

fn lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let parent = parts.next().unwrap_or_default();
    let state = parts.next();
    let mut h = HeaderMap::new();
    let Ok(p) = HeaderValue::from_bytes(parent) else {
        return;
    };
    h.insert("traceparent", p.clone());
    if let Some(s) = state.and_then(|s| HeaderValue::from_bytes(s).ok()) {
        h.insert("tracestate", s);
    }
    let got = forwardable(&h);
    assert_eq!(
        got.as_ref().map(|(v, id)| (v.clone(), id.clone())),
        forwardable(&h).map(|(v, id)| (v, id)),
        "not deterministic"
    );
    let Some((out, trace_id)) = got else {
        return;
    };
    let text = p.to_str().expect("a forwarded traceparent is ASCII");
    let fields: Vec<&str> = text.split('-').collect();
    assert_eq!(fields.len(), 4, "{text}");
    assert_eq!(fields[0], "00");
    assert!(fields[1].len() == 32 && lower_hex(fields[1]) && fields[1].bytes().any(|b| b != b'0'));
    assert!(fields[2].len() == 16 && lower_hex(fields[2]) && fields[2].bytes().any(|b| b != b'0'));
    assert!(fields[3].len() == 2 && lower_hex(fields[3]));
    assert_eq!(trace_id, fields[1]);
    for (name, value) in &out {
        assert_eq!(Some(value), h.get(name), "{name} was rewritten");
        if name == "tracestate" {
            let v = value.as_bytes();
            assert!(v.len() <= 512);
            assert!(v.iter().all(|&b| (0x20..=0x7e).contains(&b)));
            let members = v
                .split(|&b| b == b',')
                .filter(|m| !m.trim_ascii().is_empty())
                .count();
            assert!((1..=32).contains(&members));
        }
    }
    assert!(out.iter().any(|(n, _)| n == "traceparent"));
});
