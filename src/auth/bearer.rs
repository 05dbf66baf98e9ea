//! Bearer tokens (RFC 6750), known to the proxy by their SHA-256 digests only.

use super::settings::BearerCredential;
use super::{AuthRejection, Principal, Scheme};
use crate::crypto::sha256;
use crate::reason;

pub struct BearerScheme {
    entries: Vec<(String, [u8; 32])>,
}

impl BearerScheme {
    pub fn new(creds: &[BearerCredential]) -> Self {
        Self {
            entries: creds
                .iter()
                .map(|c| (c.principal.clone(), c.token_sha256))
                .collect(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Compares the digest of `token` with every configured digest in constant time, without
    /// stopping at a match, so timing says nothing about which entry (if any) matched.
    pub fn authenticate(&self, token: &str) -> Result<Principal, AuthRejection> {
        if !is_b64token(token) {
            return Err(AuthRejection {
                reason: reason::AUTH_MALFORMED,
            });
        }
        match self.principal_of(&sha256(token.as_bytes())) {
            Some(p) => Ok(Principal::new(p, Scheme::Bearer)),
            None => Err(AuthRejection {
                reason: reason::AUTH_INVALID,
            }),
        }
    }

    /// The principal whose token `token` is (no format check: a token that proved a
    /// caller passed it).
    pub fn proves(&self, token: &[u8]) -> Option<&str> {
        self.principal_of(&sha256(token))
    }

    /// The principal whose token has this SHA-256 digest, compared with every entry in
    /// constant time.
    pub fn principal_of(&self, digest: &[u8; 32]) -> Option<&str> {
        super::hash::principal_by_digest(&self.entries, digest)
    }
}

/// RFC 6750 `b64token`: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
fn is_b64token(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}
