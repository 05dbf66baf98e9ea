//! Service parameters (A2A spec §3.2.6, §3.6): `A2A-Version`, `A2A-Extensions`, and the
//! request's `Content-Type`. Each check also yields the normalized value to forward.
//!
//! | reason | code | when |
//! |---|---|---|
//! | `content_type.unsupported` | -32005 | `Content-Type` missing, not `application/json`, or a charset other than UTF-8 |
//! | `version.unsupported` | -32009 | `A2A-Version` missing or empty (means 0.3), malformed, or a major other than 1 |
//! | `version.ambiguous` | -32009 | more than one `A2A-Version` header |
//! | `extensions.malformed` | -32600 | an `A2A-Extensions` entry that is not a plausible URI, or too many |
//! | `extensions.missing_required` | -32008 | a URI of `a2a.required_extensions` was not requested |

use std::collections::BTreeSet;

use http::header::{HeaderMap, CONTENT_TYPE};
use http::HeaderValue;

use crate::a2a::RpcError;
use crate::reason;

pub const VERSION_HEADER: &str = "a2a-version";
pub const EXTENSIONS_HEADER: &str = "a2a-extensions";
const MAX_EXTENSIONS: usize = 32;
const MAX_EXTENSION_URI: usize = 512;

/// Only `application/json`, optionally with `charset=utf-8` (any case, quoted or not).
pub fn check_content_type(headers: &HeaderMap) -> Result<(), RpcError> {
    let refuse = || {
        RpcError::new(
            crate::a2a::code::CONTENT_TYPE_NOT_SUPPORTED,
            "Content-Type must be application/json",
            reason::CONTENT_TYPE_UNSUPPORTED,
        )
    };
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(refuse());
    };
    let text = value.to_str().map_err(|_| refuse())?.to_ascii_lowercase();
    let mut parts = text.split(';').map(str::trim);
    if parts.next() != Some("application/json") {
        return Err(refuse());
    }
    for param in parts {
        match param.split_once('=') {
            Some(("charset", v)) if matches!(v.trim_matches('"'), "utf-8" | "utf8") => {}
            _ if param.is_empty() => {}
            _ => return Err(refuse()),
        }
    }
    Ok(())
}

/// Checks `A2A-Version` and returns the value to forward. Missing or empty means 0.3, which
/// this proxy does not speak; only major version 1 is accepted (`1`, `1.0`, `1.1`, `1.0.7`,
/// at most three numbers of up to 9 digits), and forwarded as `1.0`.
pub fn check_version(headers: &HeaderMap) -> Result<HeaderValue, RpcError> {
    let mut values = headers.get_all(VERSION_HEADER).iter();
    let value = match (values.next(), values.next()) {
        (_, Some(_)) => {
            return Err(RpcError::new(
                crate::a2a::code::VERSION_NOT_SUPPORTED,
                "A2A-Version must be sent once",
                reason::VERSION_AMBIGUOUS,
            ))
        }
        (None, None) => None,
        (Some(v), None) => Some(v),
    };
    let text = value
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("");
    // The caller's value never appears in the answer: an empty one is the spec's 0.3.
    let unsupported = || {
        let message = if text.is_empty() {
            "A2A version '0.3' is not supported. Expected version '1.0'."
        } else {
            "The requested A2A version is not supported. Expected version '1.0'."
        };
        RpcError::new(
            crate::a2a::code::VERSION_NOT_SUPPORTED,
            message,
            reason::VERSION_UNSUPPORTED,
        )
    };
    let parts: Vec<&str> = text.split('.').collect();
    let well_formed = text.len() <= 16
        && parts.len() <= 3
        && parts
            .iter()
            .all(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()));
    if !well_formed || parts[0].parse::<u32>().ok() != Some(1) {
        return Err(unsupported());
    }
    // Any 1.x spelling means A2A 1; the agent gets the version the edge checked against.
    Ok(HeaderValue::from_static(FORWARDED_VERSION))
}

/// The `A2A-Version` every forwarded request carries: the version whose rules the edge
/// validated the request against, whatever 1.x spelling the caller used.
pub const FORWARDED_VERSION: &str = "1.0";

/// The requested extensions (all `A2A-Extensions` lines, split on commas, trimmed, empty
/// items dropped), after checking that every required URI is among them. Returns the
/// normalized header to forward, if any were requested.
pub fn check_extensions(
    headers: &HeaderMap,
    required: &[String],
) -> Result<Option<HeaderValue>, RpcError> {
    let malformed =
        || RpcError::invalid_request("A2A-Extensions is malformed", reason::EXTENSIONS_MALFORMED);
    let mut requested = Vec::new();
    for value in headers.get_all(EXTENSIONS_HEADER) {
        let text = value.to_str().map_err(|_| malformed())?;
        for uri in text.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            if uri.len() > MAX_EXTENSION_URI
                || !uri.bytes().all(|b| b.is_ascii_graphic())
                || !uri.contains(':')
            {
                return Err(malformed());
            }
            // At most MAX_EXTENSIONS distinct ones, refused at the first past it: each item
            // is compared with what came before, so the work stays linear in the header.
            if !requested.contains(&uri) {
                if requested.len() == MAX_EXTENSIONS {
                    return Err(malformed());
                }
                requested.push(uri);
            }
        }
    }
    let missing: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| !requested.contains(r))
        .collect();
    if !missing.is_empty() {
        let list: Vec<&str> = missing.into_iter().collect();
        return Err(RpcError::new(
            crate::a2a::code::EXTENSION_SUPPORT_REQUIRED,
            format!(
                "Required A2A extensions were not requested: {}",
                list.join(", ")
            ),
            reason::EXTENSIONS_MISSING_REQUIRED,
        ));
    }
    if requested.is_empty() {
        return Ok(None);
    }
    HeaderValue::from_str(&requested.join(", "))
        .map(Some)
        .map_err(|_| malformed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn content_type_table() {
        type Case<'a> = (&'a [(&'a str, &'a [u8])], bool);
        let cases: &[Case] = &[
            (&[("content-type", b"application/json")], true),
            (
                &[("content-type", b"Application/JSON; charset=UTF-8")],
                true,
            ),
            (
                &[("content-type", b"application/json;charset=\"utf-8\"")],
                true,
            ),
            (
                &[("content-type", b"application/json; charset=latin1")],
                false,
            ),
            (&[("content-type", b"application/json; boundary=x")], false),
            (&[("content-type", b"text/plain")], false),
            (&[("content-type", b"application/jsonx")], false),
            (&[("content-type", b"application/a2a+json")], false),
            (
                &[("content-type", b"application/x-www-form-urlencoded")],
                false,
            ),
            (&[], false),
            (
                &[
                    ("content-type", b"application/json"),
                    ("content-type", b"application/json"),
                ],
                false,
            ),
        ];
        for (h, ok) in cases {
            let got = check_content_type(&headers(h));
            assert_eq!(got.is_ok(), *ok, "{h:?}");
            if let Err(e) = got {
                assert_eq!(e.code, -32005);
            }
        }
    }

    #[test]
    fn version_table() {
        type Case<'a> = (&'a [&'a [u8]], Result<&'a str, &'a str>);
        let cases: &[Case] = &[
            (&[b"1.0"], Ok("1.0")),
            (&[b"1"], Ok("1.0")),
            (&[b"1.1"], Ok("1.0")),
            (&[b"1.0.7"], Ok("1.0")),
            (&[b" 1.0 "], Ok("1.0")),
            (&[b"01.0"], Ok("1.0")),
            (&[b"1.99999"], Ok("1.0")),
            (&[b"1.0.0.0"], Err("version.unsupported")),
            (&[b"1.0000000000"], Err("version.unsupported")),
            (&[b"+1.0"], Err("version.unsupported")),
            (&[b"v1.0"], Err("version.unsupported")),
            (&[], Err("version.unsupported")),
            (&[b""], Err("version.unsupported")),
            (&[b"0.3"], Err("version.unsupported")),
            (&[b"2.0"], Err("version.unsupported")),
            (&[b"1.0, 0.3"], Err("version.unsupported")),
            (&[b"1..0"], Err("version.unsupported")),
            (&[b"1.0-beta"], Err("version.unsupported")),
            (&[b"abc"], Err("version.unsupported")),
            (&[b"99999999999999999999"], Err("version.unsupported")),
            (&[b"1.0", b"0.3"], Err("version.ambiguous")),
            (&[b"1.0", b"1.0"], Err("version.ambiguous")),
        ];
        for (values, want) in cases {
            let pairs: Vec<(&str, &[u8])> = values.iter().map(|v| ("a2a-version", *v)).collect();
            match (check_version(&headers(&pairs)), want) {
                (Ok(v), Ok(w)) => assert_eq!(v, *w),
                (Err(e), Err(r)) => {
                    assert_eq!(e.code, -32009, "{values:?}");
                    assert_eq!(e.reason, *r, "{values:?}");
                }
                (got, want) => panic!("{values:?}: {got:?} vs {want:?}"),
            }
        }
        // The message never shows what was sent; a missing version is the spec's 0.3.
        let e = check_version(&headers(&[])).unwrap_err();
        assert!(e.message.contains("'0.3'"), "{}", e.message);
        for sent in [&b"0.3"[..], b"2.0", b"<script>alert(1)</script>", b"9.9"] {
            let e = check_version(&headers(&[("a2a-version", sent)])).unwrap_err();
            let shown = String::from_utf8_lossy(sent);
            assert!(!e.message.contains(&*shown), "{}", e.message);
        }
    }

    #[test]
    fn extensions_table() {
        let req = vec!["urn:x:a".to_string(), "urn:x:b".to_string()];
        let long = format!("urn:{}", "a".repeat(MAX_EXTENSION_URI));
        let many: String = (0..=MAX_EXTENSIONS)
            .map(|i| format!("urn:e:{i},"))
            .collect();
        // A header of 200,000 distinct items (about 2 MB): refused at the 33rd, not compared
        // each with every other (quadratic: 2 * 10^10 comparisons).
        let flood: String = (0..200_000).map(|i| format!("u:{i},")).collect();
        let repeated = "urn:x:a,".repeat(100_000);
        let exactly: String = (0..MAX_EXTENSIONS).map(|i| format!("urn:e:{i},")).collect();
        type Case<'a> = (
            Vec<&'a [u8]>,
            &'a [String],
            Result<Option<&'a str>, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (vec![], &[], Ok(None)),
            (
                vec![b"urn:x:a, urn:x:b"],
                &req,
                Ok(Some("urn:x:a, urn:x:b")),
            ),
            (
                vec![b"urn:x:a", b" urn:x:b ,,"],
                &req,
                Ok(Some("urn:x:a, urn:x:b")),
            ),
            (
                vec![b"urn:x:b,urn:x:a,urn:x:a"],
                &req,
                Ok(Some("urn:x:b, urn:x:a")),
            ),
            (vec![b"urn:x:a"], &req, Err("extensions.missing_required")),
            (vec![], &req, Err("extensions.missing_required")),
            (
                vec![b"URN:X:A, urn:x:b"],
                &req,
                Err("extensions.missing_required"),
            ),
            (vec![b"urn:x:a urn:x:b"], &req, Err("extensions.malformed")),
            (vec![b"not-a-uri"], &[], Err("extensions.malformed")),
            (vec![long.as_bytes()], &[], Err("extensions.malformed")),
            (vec![many.as_bytes()], &[], Err("extensions.malformed")),
            (vec![flood.as_bytes()], &[], Err("extensions.malformed")),
            (vec![repeated.as_bytes()], &[], Ok(Some("urn:x:a"))),
        ];
        let joined = check_extensions(&headers(&[("a2a-extensions", exactly.as_bytes())]), &[])
            .unwrap()
            .unwrap();
        assert_eq!(joined.to_str().unwrap().split(", ").count(), MAX_EXTENSIONS);
        for (values, required, want) in cases {
            let pairs: Vec<(&str, &[u8])> = values.iter().map(|v| ("a2a-extensions", *v)).collect();
            match (check_extensions(&headers(&pairs), required), want) {
                (Ok(v), Ok(w)) => assert_eq!(v.as_ref().map(|v| v.to_str().unwrap()), w),
                (Err(e), Err(r)) => assert_eq!(e.reason, r, "{values:?}"),
                (got, want) => panic!("{values:?}: {got:?} vs {want:?}"),
            }
        }
        let e = check_extensions(&HeaderMap::new(), &req).unwrap_err();
        assert_eq!(e.code, -32008);
        assert_eq!(
            e.message,
            "Required A2A extensions were not requested: urn:x:a, urn:x:b"
        );
    }
}
