//! ListTasks page tokens: opaque, tamper-proof, bound to one caller and one query.
//!
//! Wire form: base64url (no padding) of `version ‖ timestamp (u64 BE) ‖ task id ‖ tag`, where the
//! tag is HMAC-SHA256 under a random per-registry key over a domain label, the principal, the
//! normalized filters, and the cursor. The principal and the filters are MACed but not carried,
//! so a token says nothing about its owner and does not verify for anyone else or for another
//! query. A restart (new key) invalidates every token, which is the intended failure mode.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

const VERSION: u8 = 1;
const DOMAIN: &[u8] = b"a2a-edge/list-page-token/v1";
const TAG_LEN: usize = 32;
/// Longer tokens are refused before decoding: 1 + 8 + 256-byte id + 32, in base64, is < 400.
const MAX_TOKEN_CHARS: usize = 512;

/// The cursor a token carries: the last task of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cursor {
    pub timestamp: u64,
    pub task_id: String,
}

/// What a token is bound to besides the cursor.
pub(super) struct Query<'a> {
    pub principal: &'a str,
    /// Normalized: `""` when no filter.
    pub context: &'a str,
    /// Normalized: `""` when no filter.
    pub status: &'a str,
    /// `statusTimestampAfter` in microseconds; 0 when no filter.
    pub after: u64,
}

pub(super) struct TokenKey(hmac::Key);

impl TokenKey {
    pub fn generate() -> TokenKey {
        let mut bytes = [0u8; 32];
        if SystemRandom::new().fill(&mut bytes).is_err() {
            fallback_key(&mut bytes);
            tracing::warn!(event = "registry_weak_token_key");
        }
        TokenKey(hmac::Key::new(hmac::HMAC_SHA256, &bytes))
    }

    /// A key derived from an operator's secret (HMAC-SHA256 keyed by its SHA-256).
    pub fn from_secret(secret: &[u8]) -> TokenKey {
        let digest = crate::crypto::sha256(secret);
        TokenKey(hmac::Key::new(hmac::HMAC_SHA256, &digest))
    }

    pub fn mint(&self, query: &Query<'_>, cursor: &Cursor) -> String {
        let mut body = Vec::with_capacity(1 + 8 + cursor.task_id.len() + TAG_LEN);
        body.push(VERSION);
        body.extend_from_slice(&cursor.timestamp.to_be_bytes());
        body.extend_from_slice(cursor.task_id.as_bytes());
        let tag = hmac::sign(&self.0, &signed_bytes(query, &body));
        body.extend_from_slice(tag.as_ref());
        URL_SAFE_NO_PAD.encode(body)
    }

    /// The id the agents see for a context id `principal` chose: `c-` and 32 hex digits of
    /// an HMAC of both (unguessable without the key; the same for the same pair).
    pub fn context_alias(&self, principal: &str, client_id: &str) -> String {
        let mut m = Vec::with_capacity(16 + principal.len() + client_id.len());
        m.extend_from_slice(b"a2a-edge context\0");
        m.extend_from_slice(&(principal.len() as u64).to_be_bytes());
        m.extend_from_slice(principal.as_bytes());
        m.extend_from_slice(client_id.as_bytes());
        let tag = hmac::sign(&self.0, &m);
        let mut out = String::with_capacity(34);
        out.push_str("c-");
        for b in &tag.as_ref()[..16] {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }

    /// The cursor, or `None` for anything not minted by this key for this query.
    pub fn open(&self, query: &Query<'_>, token: &str) -> Option<Cursor> {
        if token.len() > MAX_TOKEN_CHARS {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
        if raw.len() < 1 + 8 + 1 + TAG_LEN || raw[0] != VERSION {
            return None;
        }
        let (body, tag) = raw.split_at(raw.len() - TAG_LEN);
        hmac::verify(&self.0, &signed_bytes(query, body), tag).ok()?;
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&body[1..9]);
        let task_id = std::str::from_utf8(&body[9..]).ok()?.to_owned();
        Some(Cursor {
            timestamp: u64::from_be_bytes(ts),
            task_id,
        })
    }
}

/// Domain ‖ len-prefixed principal, context, status ‖ body: no two queries share an input.
fn signed_bytes(query: &Query<'_>, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(
        DOMAIN.len() + 24 + query.principal.len() + query.context.len() + query.status.len(),
    );
    m.extend_from_slice(DOMAIN);
    for field in [query.principal, query.context, query.status] {
        m.extend_from_slice(&(field.len() as u64).to_be_bytes());
        m.extend_from_slice(field.as_bytes());
    }
    m.extend_from_slice(&query.after.to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Only if the OS random source fails: std's randomly keyed SipHash (seeded from the OS at
/// start-up) mixed with the time and the process id, then hashed. Logged as weak.
fn fallback_key(out: &mut [u8; 32]) {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&crate::time::now_micros().to_be_bytes());
    ctx.update(&std::process::id().to_be_bytes());
    for i in 0u64..4 {
        ctx.update(&state.hash_one(i).to_be_bytes());
    }
    out.copy_from_slice(ctx.finish().as_ref());
}
