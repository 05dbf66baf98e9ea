//! W3C Trace Context (`traceparent`, `tracestate`): a caller's trace reaches the agent only
//! when its headers are exactly well-formed (version 00, lowercase hex, non-zero ids, one
//! header line each). Anything else is dropped, never refused: per the recommendation, a
//! malformed trace context restarts the trace, and it must not cost the caller its request.

use http::{HeaderMap, HeaderName, HeaderValue};

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Most list members and bytes a `tracestate` may have (W3C Trace Context §3.3.1).
const MAX_TRACESTATE_MEMBERS: usize = 32;
const MAX_TRACESTATE_BYTES: usize = 512;

/// The trace context to forward from the caller's headers, and its trace id (for the log).
pub fn forwardable(caller: &HeaderMap) -> Option<(Vec<(HeaderName, HeaderValue)>, String)> {
    let parent = single(caller, &TRACEPARENT)?;
    let trace_id = trace_id(parent.as_bytes())?;
    let mut out = vec![(TRACEPARENT, parent.clone())];
    if let Some(state) = single(caller, &TRACESTATE) {
        if valid_tracestate(state.as_bytes()) {
            out.push((TRACESTATE, state.clone()));
        }
    }
    Some((out, trace_id))
}

/// The one value of `name`; `None` when absent or sent more than once.
fn single<'a>(h: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    let mut all = h.get_all(name).iter();
    let first = all.next()?;
    all.next().is_none().then_some(first)
}

fn lower_hex(s: &[u8]) -> bool {
    s.iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, ids not all zero: the trace id.
fn trace_id(v: &[u8]) -> Option<String> {
    if v.len() != 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' || &v[..2] != b"00" {
        return None;
    }
    let (trace, parent, flags) = (&v[3..35], &v[36..52], &v[53..55]);
    let ok = lower_hex(trace)
        && lower_hex(parent)
        && lower_hex(flags)
        && trace.iter().any(|&b| b != b'0')
        && parent.iter().any(|&b| b != b'0');
    ok.then(|| String::from_utf8_lossy(trace).into_owned())
}

/// `key=value` list members separated by commas (optional spaces around, no tabs), at most 32 and
/// 512 bytes; keys `[a-z0-9][a-z0-9_*/@-]*` (256 at most), values printable ASCII without
/// `,` and `=` (256 at most; spaces inside only, as those around a member are trimmed).
fn valid_tracestate(v: &[u8]) -> bool {
    // Printable ASCII only, spaces included: the recommendation also allows tabs around
    // members, but a tab is dropped here (found by the trace_context fuzz target: a forwarded
    // value must be plain text end to end).
    if v.is_empty()
        || v.len() > MAX_TRACESTATE_BYTES
        || !v.iter().all(|b| (0x20..=0x7e).contains(b))
    {
        return false;
    }
    let mut members = 0;
    for member in v.split(|&b| b == b',') {
        let member = member.trim_ascii();
        if member.is_empty() {
            continue; // empty list members are allowed
        }
        members += 1;
        let Some(eq) = member.iter().position(|&b| b == b'=') else {
            return false;
        };
        let (key, value) = (&member[..eq], &member[eq + 1..]);
        let key_ok = !key.is_empty()
            && key.len() <= 256
            && (key[0].is_ascii_lowercase() || key[0].is_ascii_digit())
            && key
                .iter()
                .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/@".contains(&b));
        let value_ok = !value.is_empty()
            && value.len() <= 256
            && value.last() != Some(&b' ')
            && value
                .iter()
                .all(|&b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=');
        if !key_ok || !value_ok {
            return false;
        }
    }
    members > 0 && members <= MAX_TRACESTATE_MEMBERS
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn traceparent_table() {
        let rows: &[(&str, bool)] = &[
            (GOOD, true),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
                true,
            ),
            // upper-case hex, all-zero ids, unknown or invalid versions, wrong lengths
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                false,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
                false,
            ),
            (
                " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
                false,
            ),
            ("", false),
        ];
        for (v, ok) in rows {
            let got = forwardable(&headers(&[("traceparent", v)]));
            assert_eq!(got.is_some(), *ok, "{v:?}");
            if *ok {
                assert_eq!(got.unwrap().1, &v[3..35]);
            }
        }
        // Two lines: which one would the agent read? Neither.
        assert!(forwardable(&headers(&[("traceparent", GOOD), ("traceparent", GOOD)])).is_none());
        assert!(forwardable(&HeaderMap::new()).is_none());
    }

    #[test]
    fn tracestate_only_with_a_valid_parent_and_only_when_well_formed() {
        let long = format!("k={}", "v".repeat(600));
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        let rows: &[(&str, bool)] = &[
            ("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true),
            ("rojo=00f067aa0ba902b7 , congo=t61rcWkgMzE,", true),
            ("tenant@vendor=x, a/b*c_d-e=1", true),
            ("Rojo=1", false),
            ("rojo", false),
            ("rojo=a=b", false),
            ("rojo=", false),
            ("rojo=x y", true),
            ("rojo=x\ty", false),
            ("rojo=1 \t", false),
            ("\trojo=1", false),
            ("=x", false),
            (&long, false),
            (&many, false),
        ];
        for (state, ok) in rows {
            let h = headers(&[("traceparent", GOOD), ("tracestate", state)]);
            let (out, _) = forwardable(&h).unwrap();
            let forwarded = out.iter().any(|(n, _)| n == "tracestate");
            assert_eq!(forwarded, *ok, "{state:?}");
        }
        assert!(forwardable(&headers(&[("tracestate", "rojo=1")])).is_none());
    }
}
