//! API keys in one configured request header (never the query string), known to the proxy by
//! their SHA-256 digests only.
//!
//! The header value must be exactly one value of 1 to [`MAX_KEY_BYTES`] visible ASCII bytes
//! (0x21–0x7e). Anything else, non-ASCII bytes included, is `auth.malformed` (the real agent
//! answers a non-ASCII key with a 500); two values are `auth.multiple_headers`; a well-formed
//! unknown key is `auth.invalid`. The digest of the presented key is compared with every
//! configured digest in constant time, without stopping at a match.

use std::fmt;

use http::{HeaderMap, HeaderName};

use super::{AuthRejection, Principal, Scheme, MAX_AUTHORIZATION_BYTES};
use crate::crypto::sha256;
use crate::reason;

/// The header read when the policy names none.
pub const DEFAULT_HEADER: &str = "X-API-Key";
/// Upper bound on an API key header value.
pub const MAX_KEY_BYTES: usize = MAX_AUTHORIZATION_BYTES;
/// Upper bound on a principal name (bytes), as for bearer principals.
const MAX_PRINCIPAL_BYTES: usize = 128;

/// Headers that cannot carry an API key: credentials and cookies of other schemes, routing,
/// framing and content negotiation headers, hop-by-hop headers, headers the edge forwards
/// upstream or sets itself, and forwarding headers.
const REFUSED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "cookie",
    "set-cookie",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-type",
    "content-encoding",
    "expect",
    "accept",
    "accept-encoding",
    "forwarded",
    "via",
    "x-real-ip",
    "origin",
    "referer",
];

/// Prefixes of refused header names: the A2A service parameters (`A2A-Version`,
/// `A2A-Extensions`), the edge's own headers and the de-facto forwarding headers.
const REFUSED_PREFIXES: &[&str] = &["a2a-", "x-a2a-edge-", "x-forwarded-", "sec-"];

pub struct ApiKeyScheme {
    header: HeaderName,
    keys: Vec<(String, [u8; 32])>,
}

impl fmt::Debug for ApiKeyScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyScheme")
            .field("header", &self.header)
            .field(
                "principals",
                &self.keys.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl ApiKeyScheme {
    /// `header` (case-insensitive; [`DEFAULT_HEADER`] by default) must be a valid header name
    /// outside the refused set. `keys` are (principal, SHA-256 of the key): at least one;
    /// principals 1 to 128 bytes without control characters (one principal may hold several keys,
    /// for rotation); no digest twice (one key, two principals would be ambiguous).
    pub fn new(header: &str, keys: Vec<(String, [u8; 32])>) -> Result<ApiKeyScheme, String> {
        let name = HeaderName::from_bytes(header.as_bytes())
            .map_err(|_| format!("API key header {header:?} is not a valid header name"))?;
        let lower = name.as_str();
        if REFUSED_HEADERS.contains(&lower) || REFUSED_PREFIXES.iter().any(|p| lower.starts_with(p))
        {
            return Err(format!(
                "API key header {header:?} is reserved (credentials, cookies, routing, \
                 hop-by-hop, forwarded or A2A headers cannot carry an API key)"
            ));
        }
        if keys.is_empty() {
            return Err("API key authentication needs at least one key".into());
        }
        for (i, (principal, digest)) in keys.iter().enumerate() {
            if principal.is_empty()
                || principal.len() > MAX_PRINCIPAL_BYTES
                || principal.chars().any(char::is_control)
            {
                return Err(format!(
                    "API key principal {principal:?} must be 1 to {MAX_PRINCIPAL_BYTES} bytes \
                     without control characters"
                ));
            }
            if keys[..i].iter().any(|(_, d)| d == digest) {
                return Err(format!(
                    "API key of principal {principal:?} is configured twice"
                ));
            }
        }
        Ok(ApiKeyScheme { header: name, keys })
    }

    pub fn header_name(&self) -> &HeaderName {
        &self.header
    }

    /// `None` when the request has no such header; otherwise the principal or a rejection.
    /// Whether the request carries this scheme's header at all (nothing verified).
    pub fn presented(&self, headers: &HeaderMap) -> bool {
        headers.contains_key(&self.header)
    }

    /// The principal whose key `key` is (no format check: a key that proved a caller
    /// passed it).
    pub fn proves(&self, key: &[u8]) -> Option<&str> {
        self.principal_of(&sha256(key))
    }

    /// The principal whose key has this SHA-256 digest, compared with every key in constant
    /// time.
    pub fn principal_of(&self, digest: &[u8; 32]) -> Option<&str> {
        super::hash::principal_by_digest(&self.keys, digest)
    }

    pub fn authenticate(&self, headers: &HeaderMap) -> Option<Result<Principal, AuthRejection>> {
        let mut values = headers.get_all(&self.header).iter();
        let value = match (values.next(), values.next()) {
            (None, _) => return None,
            (Some(_), Some(_)) => {
                return Some(Err(AuthRejection {
                    reason: reason::AUTH_MULTIPLE_HEADERS,
                }))
            }
            (Some(v), None) => v,
        };
        let key = value.as_bytes();
        if key.is_empty()
            || key.len() > MAX_KEY_BYTES
            || !key.iter().all(|b| (0x21..0x7f).contains(b))
        {
            return Some(Err(AuthRejection {
                reason: reason::AUTH_MALFORMED,
            }));
        }
        Some(match self.proves(key) {
            Some(p) => Ok(Principal::new(p, Scheme::ApiKey)),
            None => Err(AuthRejection {
                reason: reason::AUTH_INVALID,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn scheme() -> ApiKeyScheme {
        ApiKeyScheme::new(
            DEFAULT_HEADER,
            vec![
                ("ops".into(), sha256(b"key-ops-1")),
                ("ops".into(), sha256(b"key-ops-2")),
                ("ci".into(), sha256(b"key-ci")),
            ],
        )
        .unwrap()
    }

    fn headers(name: &str, values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        for v in values {
            h.append(name.clone(), HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn api_key_table() {
        let at_limit = "k".repeat(MAX_KEY_BYTES);
        let over_limit = "k".repeat(MAX_KEY_BYTES + 1);
        // (header name, values, expected: None, principal or rejection reason)
        type Case<'a> = (&'a str, Vec<&'a [u8]>, Option<Result<&'a str, &'a str>>);
        let cases: Vec<Case> = vec![
            ("x-api-key", vec![b"key-ops-1"], Some(Ok("ops"))),
            ("X-API-Key", vec![b"key-ops-2"], Some(Ok("ops"))),
            ("X-Api-Key", vec![b"key-ci"], Some(Ok("ci"))),
            ("x-api-key", vec![b"key-ci2"], Some(Err("auth.invalid"))),
            ("x-api-key", vec![b"KEY-CI"], Some(Err("auth.invalid"))),
            (
                "x-api-key",
                vec![at_limit.as_bytes()],
                Some(Err("auth.invalid")),
            ),
            ("x-api-key", vec![], None),
            ("authorization", vec![b"key-ci"], None),
            ("x-api-key2", vec![b"key-ci"], None),
            (
                "x-api-key",
                vec![b"key-ci", b"key-ci"],
                Some(Err("auth.multiple_headers")),
            ),
            (
                "x-api-key",
                vec![b"key-ci", b""],
                Some(Err("auth.multiple_headers")),
            ),
            ("x-api-key", vec![b""], Some(Err("auth.malformed"))),
            (
                "x-api-key",
                vec![over_limit.as_bytes()],
                Some(Err("auth.malformed")),
            ),
            ("x-api-key", vec![b"key\x80ci"], Some(Err("auth.malformed"))),
            (
                "x-api-key",
                vec![b"key-\xc3\xa9"],
                Some(Err("auth.malformed")),
            ),
            ("x-api-key", vec![b"\xff"], Some(Err("auth.malformed"))),
            ("x-api-key", vec![b"key ci"], Some(Err("auth.malformed"))),
            ("x-api-key", vec![b"key\tci"], Some(Err("auth.malformed"))),
        ];
        let s = scheme();
        for (name, values, want) in &cases {
            let got = s.authenticate(&headers(name, values));
            match (got, want) {
                (None, None) => {}
                (Some(Ok(p)), Some(Ok(principal))) => {
                    assert_eq!(p.name, *principal, "{name} {values:?}");
                    assert_eq!(p.scheme, Scheme::ApiKey);
                }
                (Some(Err(r)), Some(Err(reason))) => {
                    assert_eq!(r.reason, *reason, "{name} {values:?}")
                }
                (got, want) => panic!("{name} {values:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn custom_header() {
        let s = ApiKeyScheme::new("X-Service-Token", vec![("svc".into(), sha256(b"t"))]).unwrap();
        assert_eq!(s.header_name().as_str(), "x-service-token");
        let got = s.authenticate(&headers("x-service-token", &[b"t"]));
        assert_eq!(got.unwrap().unwrap().name, "svc");
        assert!(s.authenticate(&headers("x-api-key", &[b"t"])).is_none());
        assert_eq!(scheme().header_name().as_str(), "x-api-key");
    }

    #[test]
    fn new_rules() {
        let key = || vec![("ops".to_string(), sha256(b"k"))];
        for ok in [
            "X-API-Key",
            "x-api-key",
            "Api-Key",
            "X-Auth-Token",
            "apikey",
        ] {
            assert!(ApiKeyScheme::new(ok, key()).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "X API Key",
            "X-API-Key:",
            "x-ápi-key",
            "X-API-Key\n",
            "Authorization",
            "authorization",
            "Proxy-Authorization",
            "Cookie",
            "Set-Cookie",
            "Host",
            "Connection",
            "Keep-Alive",
            "TE",
            "Trailer",
            "Transfer-Encoding",
            "Upgrade",
            "Proxy-Connection",
            "Content-Length",
            "Content-Type",
            "Accept",
            "Forwarded",
            "X-Forwarded-For",
            "A2A-Version",
            "A2A-Extensions",
            "X-A2A-Edge-Principal",
        ] {
            assert!(ApiKeyScheme::new(bad, key()).is_err(), "accepted {bad:?}");
        }
        assert!(ApiKeyScheme::new(DEFAULT_HEADER, vec![]).is_err());
        assert!(ApiKeyScheme::new(DEFAULT_HEADER, vec![(String::new(), sha256(b"k"))]).is_err());
        assert!(ApiKeyScheme::new(DEFAULT_HEADER, vec![("o\np".into(), sha256(b"k"))]).is_err());
        assert!(ApiKeyScheme::new(DEFAULT_HEADER, vec![("o".repeat(129), sha256(b"k"))]).is_err());
        assert!(ApiKeyScheme::new(
            DEFAULT_HEADER,
            vec![("a".into(), sha256(b"k")), ("b".into(), sha256(b"k"))]
        )
        .is_err());
        // Debug shows principals, never digests.
        let shown = format!("{:?}", scheme());
        let first_byte = sha256(b"key-ops-1")[0].to_string();
        assert!(shown.contains("\"ops\""), "{shown}");
        assert!(!shown.contains(&format!("[{first_byte},")), "{shown}");
    }
}
