//! Detached JWS signatures over the card's canonical form (spec §8.4.2), serialized so that
//! the a2a-sdk and a2a-js verifiers accept them and iac-code's own signatures reproduce.
//!
//! Each `signatures[]` entry is `{"protected": b64url(header), "signature": b64url(sig)}`; the
//! payload is never transmitted. The signing input is `protected + "." + b64url(payload)`
//! with `payload = canonical_card(card)`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use super::canonical::{canonical_card, err, CardError};
use super::keys::SigningKey;
use crate::crypto::b64url;

/// How the protected header is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignOptions {
    /// `jku`: where verifiers may fetch the JWKS. Must be `https://` (or `http://` to
    /// 127.0.0.1/localhost, for tests).
    pub jku: Option<String>,
    /// iac-code compatibility: write `"jku":null` as iac-code (PyJWT with `jku: None`) does.
    /// Only needed to reproduce iac-code's signatures byte for byte; ignored with `jku`.
    pub jku_null: bool,
}

/// Appends a detached JWS signature over `canonical_card(card)` to `card.signatures`,
/// replacing any earlier signature whose protected header carries the same `kid` (so
/// re-signing is idempotent and rotation keeps the other keys' signatures).
///
/// The protected header is exactly `{"alg","kid","typ":"JOSE"}` plus `jku` when given,
/// serialized as PyJWT does for the SDK: sorted keys, compact separators, non-ASCII escaped.
pub fn sign_card(
    card: &mut Value,
    key: &SigningKey,
    options: &SignOptions,
) -> Result<(), CardError> {
    let payload = canonical_card(card)?;
    sign_payload(card, &payload, key, options)
}

/// Signs any JSON object the way a card is signed, over RFC 8785 of the object without its
/// `signatures` member (not filtered by the AgentCard schema): the agents catalog.
pub fn sign_document(
    doc: &mut Value,
    key: &SigningKey,
    options: &SignOptions,
) -> Result<(), CardError> {
    let Value::Object(obj) = doc else {
        return Err(err("the document is not a JSON object"));
    };
    let mut unsigned = obj.clone();
    unsigned.remove("signatures");
    let payload = super::canonical::jcs(&Value::Object(unsigned))?;
    sign_payload(doc, &payload, key, options)
}

/// Appends (or replaces, by kid) the detached signature over `payload` to `card.signatures`.
fn sign_payload(
    card: &mut Value,
    payload: &[u8],
    key: &SigningKey,
    options: &SignOptions,
) -> Result<(), CardError> {
    if let Some(jku) = &options.jku {
        check_jku(jku)?;
    }
    let protected = b64url(protected_header(key, options).as_bytes());
    let signing_input = format!("{protected}.{}", b64url(payload));
    let signature = b64url(&key.sign(signing_input.as_bytes())?);

    let Value::Object(obj) = card else {
        return Err(err("the card is not a JSON object"));
    };
    let mut kept = match obj.remove("signatures") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(err("the card's signatures member is not an array")),
    };
    kept.retain(|entry| {
        let kid = entry
            .get("protected")
            .and_then(Value::as_str)
            .and_then(decode_protected)
            .and_then(|h| h.get("kid").and_then(Value::as_str).map(str::to_string));
        kid.as_deref() != Some(key.kid.as_str())
    });
    let mut entry = Map::new();
    entry.insert("protected".into(), Value::String(protected));
    entry.insert("signature".into(), Value::String(signature));
    kept.push(Value::Object(entry));
    obj.insert("signatures".into(), Value::Array(kept));
    Ok(())
}

/// The protected header JSON: keys sorted (`alg` < `jku` < `kid` < `typ`), compact, and
/// strings escaped as Python's `json.dumps` (ensure_ascii) does.
pub(crate) fn protected_header(key: &SigningKey, options: &SignOptions) -> String {
    let mut out = format!("{{\"alg\":{}", py_json_string(key.alg.as_str()));
    match &options.jku {
        Some(jku) => out.push_str(&format!(",\"jku\":{}", py_json_string(jku))),
        None if options.jku_null => out.push_str(",\"jku\":null"),
        None => {}
    }
    out.push_str(&format!(
        ",\"kid\":{},\"typ\":\"JOSE\"}}",
        py_json_string(&key.kid)
    ));
    out
}

/// Decodes a `protected` member into its JSON object; `None` if it is not unpadded base64url
/// of a UTF-8 JSON object.
pub(crate) fn decode_protected(protected: &str) -> Option<Map<String, Value>> {
    let bytes = URL_SAFE_NO_PAD.decode(protected).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(obj) => Some(obj),
        _ => None,
    }
}

fn check_jku(jku: &str) -> Result<(), CardError> {
    let url = url::Url::parse(jku).map_err(|_| err("jku is not a URL"))?;
    let local = matches!(
        url.host_str(),
        Some("127.0.0.1") | Some("localhost") | Some("[::1]")
    );
    match url.scheme() {
        "https" => Ok(()),
        "http" if local => Ok(()),
        _ => Err(err("jku must be an https:// URL")),
    }
}

/// A JSON string as Python's `json.dumps(ensure_ascii=True)` writes it: `\"`, `\\`, the short
/// control escapes, and `\uXXXX` (lowercase, UTF-16) for everything outside printable ASCII.
fn py_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::canonical::tests::tiny_card;
    use crate::card::keys::SigningAlg;
    use serde_json::json;

    fn iac_compat() -> SignOptions {
        SignOptions {
            jku: None,
            jku_null: true,
        }
    }

    #[test]
    fn worked_example_reproduces_byte_for_byte() {
        // reference/iac-code-upstream.md §4: sign_agent_card_dict(tiny, secret="k", key_id="k1").
        let mut card = tiny_card();
        let key = SigningKey::hs256("k1", b"k").unwrap();
        sign_card(&mut card, &key, &iac_compat()).unwrap();
        assert_eq!(
            card["signatures"],
            json!([{
                "protected": "eyJhbGciOiJIUzI1NiIsImprdSI6bnVsbCwia2lkIjoiazEiLCJ0eXAiOiJKT1NFIn0",
                "signature": "hTbnUvSkAFFQ2NTkMszqR_H7E8iwhpybvt5_P4NaTAg"
            }])
        );
        assert_eq!(
            protected_header(&key, &iac_compat()),
            r#"{"alg":"HS256","jku":null,"kid":"k1","typ":"JOSE"}"#
        );
        // The served iac-code card with kid "default" carries this protected header.
        let default = SigningKey::hs256("default", b"k").unwrap();
        assert_eq!(
            b64url(protected_header(&default, &iac_compat()).as_bytes()),
            "eyJhbGciOiJIUzI1NiIsImprdSI6bnVsbCwia2lkIjoiZGVmYXVsdCIsInR5cCI6IkpPU0UifQ"
        );
    }

    #[test]
    fn header_is_sorted_compact_and_ascii() {
        let key = SigningKey::hs256("k\u{e9}y\"\u{1f600}", b"secret").unwrap();
        assert_eq!(
            protected_header(&key, &SignOptions::default()),
            r#"{"alg":"HS256","kid":"k\u00e9y\"\ud83d\ude00","typ":"JOSE"}"#
        );
        let options = SignOptions {
            jku: Some("https://edge.example/.well-known/jwks.json".into()),
            jku_null: true,
        };
        assert_eq!(
            protected_header(&key, &options),
            r#"{"alg":"HS256","jku":"https://edge.example/.well-known/jwks.json","kid":"k\u00e9y\"\ud83d\ude00","typ":"JOSE"}"#
        );
    }

    #[test]
    fn resigning_replaces_the_same_kid_and_keeps_others() {
        let mut card = tiny_card();
        let a = SigningKey::hs256("a", b"secret-a").unwrap();
        let b = SigningKey::hs256("b", b"secret-b").unwrap();
        sign_card(&mut card, &a, &SignOptions::default()).unwrap();
        sign_card(&mut card, &b, &SignOptions::default()).unwrap();
        let first = card["signatures"].clone();
        sign_card(&mut card, &a, &SignOptions::default()).unwrap();
        let sigs = card["signatures"].as_array().unwrap();
        assert_eq!(sigs.len(), 2);
        // b first now, a re-appended; HS256 is deterministic, so the entries are identical.
        assert_eq!(sigs[0], first[1]);
        assert_eq!(sigs[1], first[0]);
    }

    #[test]
    fn refuses_what_cannot_be_signed() {
        let key = SigningKey::hs256("k", b"k").unwrap();
        let mut bad = json!([]);
        assert!(sign_card(&mut bad, &key, &SignOptions::default()).is_err());
        let mut card = tiny_card();
        card["signatures"] = json!("x");
        assert!(sign_card(&mut card, &key, &SignOptions::default()).is_err());
        for jku in [
            "http://example.com/jwks.json",
            "file:///etc/passwd",
            "not a url",
        ] {
            let mut card = tiny_card();
            let options = SignOptions {
                jku: Some(jku.into()),
                jku_null: false,
            };
            assert!(sign_card(&mut card, &key, &options).is_err(), "{jku}");
        }
        let mut card = tiny_card();
        let options = SignOptions {
            jku: Some("http://127.0.0.1:9/jwks.json".into()),
            jku_null: false,
        };
        assert!(sign_card(&mut card, &key, &options).is_ok());
    }

    #[test]
    fn es256_signatures_are_64_raw_bytes() {
        let pem = crate::card::keys::tests::generated_pem(SigningAlg::ES256);
        let key = SigningKey::from_private_pem("e", SigningAlg::ES256, &pem).unwrap();
        let mut card = tiny_card();
        sign_card(&mut card, &key, &SignOptions::default()).unwrap();
        let sig = card["signatures"][0]["signature"].as_str().unwrap();
        assert_eq!(URL_SAFE_NO_PAD.decode(sig).unwrap().len(), 64);
        assert_eq!(
            decode_protected(card["signatures"][0]["protected"].as_str().unwrap()).unwrap(),
            *json!({"alg": "ES256", "kid": "e", "typ": "JOSE"})
                .as_object()
                .unwrap()
        );
    }
}
