//! HTTP caching of the card (RFC 9110 §8.8, §13; A2A spec §8.6): a strong `ETag` of the bytes
//! served, `Last-Modified` when they last changed, `Cache-Control`, and the conditional
//! requests `If-None-Match` (lists, `W/`, `*`) and `If-Modified-Since` answered with 304.

use http::header::{HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH};

use crate::time::parse_http_date;

/// The validators of a representation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    /// A strong entity tag, with its quotes: `"sha256-<hex>"`.
    pub etag: String,
    /// When the representation last changed, in seconds since the epoch.
    pub last_modified: u64,
}

/// Whether a GET/HEAD with these request headers is answered 304 Not Modified (§13.2.2):
/// `If-None-Match` is evaluated first and, when present, `If-Modified-Since` is ignored.
pub fn not_modified(headers: &HeaderMap, current: &Validators) -> bool {
    let mut inm = headers.get_all(IF_NONE_MATCH).iter().peekable();
    if inm.peek().is_some() {
        return inm.any(|v| match v.to_str() {
            Ok(list) => etag_list_matches(list, &current.etag),
            // A field we cannot read cannot match.
            Err(_) => false,
        });
    }
    match headers.get(IF_MODIFIED_SINCE).and_then(|v| v.to_str().ok()) {
        // An invalid date is ignored (§13.1.3).
        Some(text) => parse_http_date(text).is_some_and(|since| current.last_modified <= since),
        None => false,
    }
}

/// Weak comparison (§8.8.3.2) of `etag` with each member of an `If-None-Match` list.
fn etag_list_matches(list: &str, etag: &str) -> bool {
    let ours = opaque(etag);
    list.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .any(|t| t == "*" || (ours.is_some() && opaque(t) == ours))
}

/// The quoted opaque part of an entity tag, without a `W/` prefix; None if malformed.
fn opaque(tag: &str) -> Option<&str> {
    let t = tag.strip_prefix("W/").unwrap_or(tag);
    let inner = t.strip_prefix('"')?.strip_suffix('"')?;
    if inner
        .bytes()
        .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
    {
        Some(inner)
    } else {
        None
    }
}

/// The strong entity tag of `bytes`.
pub fn strong_etag(bytes: &[u8]) -> String {
    let digest = crate::crypto::sha256(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("\"sha256-{hex}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::format_http_date;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn conditional_table() {
        let cur = Validators {
            etag: "\"sha256-abc\"".into(),
            last_modified: 1_000_000,
        };
        let at = format_http_date(1_000_000);
        let before = format_http_date(999_999);
        let after = format_http_date(1_000_001);
        let cases: Vec<(Vec<(&'static str, &str)>, bool)> = vec![
            (vec![], false),
            (vec![("if-none-match", "\"sha256-abc\"")], true),
            (vec![("if-none-match", "W/\"sha256-abc\"")], true),
            (vec![("if-none-match", "*")], true),
            (vec![("if-none-match", "\"x\", \"sha256-abc\"")], true),
            (
                vec![
                    ("if-none-match", "\"x\""),
                    ("if-none-match", "\"sha256-abc\""),
                ],
                true,
            ),
            (vec![("if-none-match", "\"x\", W/\"y\"")], false),
            (vec![("if-none-match", "sha256-abc")], false),
            (vec![("if-none-match", "\"sha256-ABC\"")], false),
            (vec![("if-none-match", "")], false),
            (vec![("if-modified-since", at.as_str())], true),
            (vec![("if-modified-since", after.as_str())], true),
            (vec![("if-modified-since", before.as_str())], false),
            (vec![("if-modified-since", "garbage")], false),
            // If-None-Match wins over If-Modified-Since, either way.
            (
                vec![
                    ("if-none-match", "\"x\""),
                    ("if-modified-since", after.as_str()),
                ],
                false,
            ),
            (
                vec![
                    ("if-none-match", "\"sha256-abc\""),
                    ("if-modified-since", before.as_str()),
                ],
                true,
            ),
        ];
        for (h, want) in cases {
            assert_eq!(not_modified(&headers(&h), &cur), want, "{h:?}");
        }
    }

    #[test]
    fn etags_are_strong_and_stable() {
        let a = strong_etag(b"{}");
        assert_eq!(a, strong_etag(b"{}"));
        assert_ne!(a, strong_etag(b"{ }"));
        assert!(a.starts_with("\"sha256-") && a.ends_with('"') && !a.starts_with("W/"));
    }
}
