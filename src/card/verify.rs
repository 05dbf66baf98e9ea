//! Verifying an Agent Card's signatures (spec §8.4.3) with keys the verifier already trusts.
//!
//! A card is valid if ANY of its signatures verifies (key rotation, spec §8.4.3) with a key
//! chosen by the signature's `kid` among the keys usable with its `alg`. Only HS256, RS256,
//! ES256 and EdDSA are accepted; `none` and everything else is `unsupported-algorithm`.
//! Verification itself is done by `ring` (constant-time HMAC comparison, RSA 2048–8192 bits).
//!
//! The header's `jku` is never followed: a card naming the URL of the key that verifies it
//! proves nothing. Keys come from the caller (secrets, a JWKS it chose to trust).
//!
//! Verdicts and precedence. With one signature the verdict is iac-code's
//! (`verify_agent_card_dict`, reference/iac-code-upstream.md §4), step by step:
//! 1. `signatures` absent (or null) → `unsigned`; `[]` → `missing-signature`;
//!    not an array, an entry that is not `{"protected": b64url(JSON object), "signature":
//!    b64url}`, a header with `crit` or `b64`, or a non-string `kid` → `malformed-signature`;
//! 2. `alg` missing or outside the allow-list → `unsupported-algorithm`;
//! 3. no key usable with that `alg` (in particular no key at all) → `missing-key`; a `kid`
//!    that no usable key has → `unknown-key`; no `kid` (or `""`) and more than one usable key
//!    → `ambiguous-key`;
//! 4. a card with no canonical form (the protobuf parser would refuse it) →
//!    `malformed-signature`; otherwise `valid` or `signature-mismatch`.
//!
//! With several signatures, the first valid one wins; if none is, the verdict is that of the
//! signature that got furthest, in this order (furthest first):
//! `signature-mismatch`, `malformed-signature` (the card has no canonical form),
//! `ambiguous-key`, `unknown-key`, `missing-key`, `unsupported-algorithm`,
//! `malformed-signature` (the entry itself); on a tie, the first signature's. So a card signed
//! by a retired key and by the current one, checked with the current key only, is `valid`;
//! and `signature-mismatch` always means some trusted key was tried and failed.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::signature::{self, UnparsedPublicKey};
use serde_json::{Map, Value};

use super::canonical::{canonical_card, err, CardError};
use super::jws::decode_protected;
use super::keys::SigningAlg;
use crate::crypto::b64url;

/// The outcome of [`verify_card`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A signature verified with the key `kid`.
    Valid { kid: String },
    /// The card has no `signatures` member.
    Unsigned,
    /// `signatures` is an empty array.
    MissingSignature,
    /// A signature entry (or the card) cannot be decoded.
    MalformedSignature,
    /// `alg` is missing or not one of HS256, RS256, ES256, EdDSA.
    UnsupportedAlgorithm,
    /// No key usable with the signature's algorithm.
    MissingKey,
    /// The signature's `kid` names no usable key.
    UnknownKey,
    /// No `kid`, and more than one usable key.
    AmbiguousKey,
    /// A key was tried and the signature does not match the card.
    SignatureMismatch,
}

impl Verdict {
    /// The reason string (iac-code's names).
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Valid { .. } => "valid",
            Verdict::Unsigned => "unsigned",
            Verdict::MissingSignature => "missing-signature",
            Verdict::MalformedSignature => "malformed-signature",
            Verdict::UnsupportedAlgorithm => "unsupported-algorithm",
            Verdict::MissingKey => "missing-key",
            Verdict::UnknownKey => "unknown-key",
            Verdict::AmbiguousKey => "ambiguous-key",
            Verdict::SignatureMismatch => "signature-mismatch",
        }
    }

    pub fn is_valid(&self) -> bool {
        matches!(self, Verdict::Valid { .. })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys a verifier trusts: HS256 secrets and public keys (from JWKS documents), by kid.
#[derive(Default)]
pub struct VerifyKeys {
    keys: Vec<TrustedKey>,
}

struct TrustedKey {
    kid: String,
    alg: SigningAlg,
    material: KeyMaterial,
}

enum KeyMaterial {
    Secret(ring::hmac::Key),
    Public(Vec<u8>),
    Rsa { n: Vec<u8>, e: Vec<u8> },
}

// Never prints key material.
impl fmt::Debug for VerifyKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|k| (k.kid.as_str(), k.alg.as_str())))
            .finish()
    }
}

impl VerifyKeys {
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts an HS256 secret for `kid`, replacing an earlier secret for the same kid.
    /// An empty secret is ignored: it would let anyone sign.
    pub fn add_secret(&mut self, kid: &str, secret: &[u8]) {
        if secret.is_empty() {
            return;
        }
        self.keys
            .retain(|k| !(k.kid == kid && k.alg == SigningAlg::HS256));
        self.keys.push(TrustedKey {
            kid: kid.to_string(),
            alg: SigningAlg::HS256,
            material: KeyMaterial::Secret(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)),
        });
    }

    /// Trusts the usable keys of a JWKS document (`{"keys": [...]}`). A key is usable if it
    /// has a non-empty string `kid`, `use` absent or `"sig"`, `key_ops` absent or containing
    /// `"verify"`, an `alg` absent or matching its type, and is one of: `RSA` (>= 2048 bits,
    /// RS256), `EC` P-256 (ES256), `OKP` Ed25519 (EdDSA), `oct` (HS256, `k` as raw bytes).
    /// Other keys (encryption keys, other curves) are skipped, as iac-code skips them; only a
    /// document that is not a JWKS is an error.
    pub fn add_jwks(&mut self, jwks: &Value) -> Result<(), CardError> {
        let keys = jwks
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| err("not a JWKS: no \"keys\" array"))?;
        for jwk in keys.iter().filter_map(Value::as_object) {
            if let Some(key) = trusted_key(jwk) {
                self.keys.push(key);
            }
        }
        Ok(())
    }

    /// How many keys are trusted.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn trusted_key(jwk: &Map<String, Value>) -> Option<TrustedKey> {
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    let bytes = |name: &str| text(name).and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
    let kid = text("kid").filter(|k| !k.is_empty())?;
    if jwk.get("use").is_some_and(|u| u != "sig") {
        return None;
    }
    if let Some(ops) = jwk.get("key_ops") {
        if !ops.as_array()?.iter().any(|op| op == "verify") {
            return None;
        }
    }
    let (alg, material) = match (text("kty")?, text("crv")) {
        ("oct", _) => {
            let k = bytes("k").filter(|k| !k.is_empty())?;
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &k);
            (SigningAlg::HS256, KeyMaterial::Secret(key))
        }
        ("RSA", _) => {
            let n = bytes("n")?;
            let e = bytes("e")?;
            let bits = n.iter().skip_while(|b| **b == 0).count() * 8;
            if !(2048..=8192).contains(&bits) || e.is_empty() {
                return None;
            }
            (SigningAlg::RS256, KeyMaterial::Rsa { n, e })
        }
        ("EC", Some("P-256")) => {
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != 32 || y.len() != 32 {
                return None;
            }
            let point = [&[0x04][..], &x, &y].concat();
            (SigningAlg::ES256, KeyMaterial::Public(point))
        }
        ("OKP", Some("Ed25519")) => {
            let x = bytes("x").filter(|x| x.len() == 32)?;
            (SigningAlg::EdDSA, KeyMaterial::Public(x))
        }
        _ => return None,
    };
    if jwk.get("alg").is_some_and(|a| a != alg.as_str()) {
        return None;
    }
    Some(TrustedKey {
        kid: kid.to_string(),
        alg,
        material,
    })
}

impl TrustedKey {
    fn verifies(&self, signing_input: &[u8], sig: &[u8]) -> bool {
        match (&self.material, self.alg) {
            (KeyMaterial::Secret(key), _) => ring::hmac::verify(key, signing_input, sig).is_ok(),
            (KeyMaterial::Rsa { n, e }, _) => signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, signing_input, sig)
                .is_ok(),
            (KeyMaterial::Public(point), SigningAlg::ES256) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(signing_input, sig)
                    .is_ok()
            }
            (KeyMaterial::Public(x), SigningAlg::EdDSA) => {
                UnparsedPublicKey::new(&signature::ED25519, x)
                    .verify(signing_input, sig)
                    .is_ok()
            }
            (KeyMaterial::Public(_), _) => false,
        }
    }
}

/// The most signatures a card may carry to be checked at all.
pub const MAX_SIGNATURES: usize = 16;

/// Valid if any signature of `card` verifies with a trusted key; see the module doc for the
/// verdicts and their precedence. A card with more than [`MAX_SIGNATURES`] is malformed.
pub fn verify_card(card: &Value, keys: &VerifyKeys) -> Verdict {
    let Value::Object(obj) = card else {
        return Verdict::MalformedSignature;
    };
    let signatures = match obj.get("signatures") {
        None | Some(Value::Null) => return Verdict::Unsigned,
        Some(Value::Array(list)) if list.is_empty() => return Verdict::MissingSignature,
        // Each signature naming a trusted key costs a pass over the whole card: a handful
        // covers any key rotation, and more is refused rather than checked.
        Some(Value::Array(list)) if list.len() > MAX_SIGNATURES => {
            return Verdict::MalformedSignature
        }
        Some(Value::Array(list)) => list,
        Some(_) => return Verdict::MalformedSignature,
    };
    // The payload is computed once, and only if some signature gets that far.
    let mut payload: Option<Result<String, CardError>> = None;
    let mut best: Option<(u8, Verdict)> = None;
    for entry in signatures {
        let (rank, verdict) = check_signature(entry, keys, &mut || {
            payload
                .get_or_insert_with(|| canonical_card(card).map(|p| b64url(&p)))
                .clone()
        });
        if verdict.is_valid() {
            return verdict;
        }
        let better = match &best {
            Some((r, _)) => rank > *r,
            None => true,
        };
        if better {
            best = Some((rank, verdict));
        }
    }
    best.map_or(Verdict::MalformedSignature, |(_, v)| v)
}

/// One signature's verdict and how far it got (higher wins, see the module doc).
fn check_signature(
    entry: &Value,
    keys: &VerifyKeys,
    payload: &mut dyn FnMut() -> Result<String, CardError>,
) -> (u8, Verdict) {
    let Some(parsed) = parse_entry(entry) else {
        return (0, Verdict::MalformedSignature);
    };
    let Some(alg) = parsed.alg else {
        return (1, Verdict::UnsupportedAlgorithm);
    };
    let usable: Vec<&TrustedKey> = keys.keys.iter().filter(|k| k.alg == alg).collect();
    let chosen: Vec<&TrustedKey> = match parsed.kid {
        _ if usable.is_empty() => return (2, Verdict::MissingKey),
        Some(kid) => {
            let named: Vec<&TrustedKey> = usable.into_iter().filter(|k| k.kid == kid).collect();
            if named.is_empty() {
                return (3, Verdict::UnknownKey);
            }
            named
        }
        None if usable.len() > 1 => return (4, Verdict::AmbiguousKey),
        None => usable,
    };
    let Ok(payload) = payload() else {
        return (5, Verdict::MalformedSignature);
    };
    let signing_input = format!("{}.{payload}", parsed.protected);
    for key in chosen {
        if key.verifies(signing_input.as_bytes(), &parsed.signature) {
            return (
                7,
                Verdict::Valid {
                    kid: key.kid.clone(),
                },
            );
        }
    }
    (6, Verdict::SignatureMismatch)
}

struct Entry<'a> {
    protected: &'a str,
    signature: Vec<u8>,
    /// `None`: missing or not allowed.
    alg: Option<SigningAlg>,
    /// `None`: absent, null or empty.
    kid: Option<String>,
}

/// Decodes one `signatures[]` entry; `None` if it is malformed.
fn parse_entry(entry: &Value) -> Option<Entry<'_>> {
    let protected = entry.get("protected")?.as_str()?;
    let signature = URL_SAFE_NO_PAD
        .decode(entry.get("signature")?.as_str()?)
        .ok()?;
    let header = decode_protected(protected)?;
    // No extension is understood, so a critical one cannot be honoured (RFC 7515 §4.1.11);
    // `b64: false` (RFC 7797) would change what the signature covers.
    if header.contains_key("crit") || header.contains_key("b64") {
        return None;
    }
    let kid = match header.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) if k.is_empty() => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => return None,
    };
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .and_then(SigningAlg::parse);
    Some(Entry {
        protected,
        signature,
        alg,
        kid,
    })
}

#[cfg(test)]
mod sdk_vectors;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod verdict_tests;
