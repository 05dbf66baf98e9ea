//! One row per verdict, and the precedence between signatures that fail differently.

use serde_json::{json, Value};

use super::tests::{hmac_entry, jwks_of, pem_key, secrets, valid, with_signatures};
use super::*;
use crate::card::canonical::tests::tiny_card;

#[test]
fn every_verdict_is_reachable() {
    let card = tiny_card();
    let k = secrets(&[("k1", b"k")]);
    let two = secrets(&[("k1", b"k"), ("k2", b"k2")]);
    let good = |header: Value| hmac_entry(&card, &header, b"k");
    let hdr = json!({"alg": "HS256", "kid": "k1", "typ": "JOSE"});
    let signed_good = with_signatures(&card, vec![good(hdr.clone())]);
    let mut unparsable = signed_good.clone();
    unparsable["name"] = json!(7);
    let es = pem_key("e", SigningAlg::ES256);
    let no_keys = VerifyKeys::new();
    let es_only = jwks_of(&[&es]);

    let rows: Vec<(&str, Value, &VerifyKeys, Verdict)> = vec![
        ("valid", signed_good.clone(), &k, valid("k1")),
        (
            "no kid, one key",
            with_signatures(&card, vec![good(json!({"alg": "HS256"}))]),
            &k,
            valid("k1"),
        ),
        (
            "empty kid is no kid",
            with_signatures(&card, vec![good(json!({"alg": "HS256", "kid": ""}))]),
            &k,
            valid("k1"),
        ),
        ("unsigned", card.clone(), &k, Verdict::Unsigned),
        (
            "signatures null",
            with_null_signatures(&card),
            &k,
            Verdict::Unsigned,
        ),
        (
            "missing-signature",
            with_signatures(&card, vec![]),
            &k,
            Verdict::MissingSignature,
        ),
        (
            "signatures not a list",
            {
                let mut c = card.clone();
                c["signatures"] = json!({});
                c
            },
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "entry not an object",
            with_signatures(&card, vec![json!("x")]),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "no protected",
            with_signatures(&card, vec![json!({"signature": "AA"})]),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "no signature",
            with_signatures(
                &card,
                vec![json!({"protected": b64url(hdr.to_string().as_bytes())})],
            ),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "protected not base64url",
            with_signatures(&card, vec![json!({"protected": "e30=", "signature": "AA"})]),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "protected not JSON",
            with_signatures(
                &card,
                vec![json!({"protected": b64url(b"alg"), "signature": "AA"})],
            ),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "protected not an object",
            with_signatures(
                &card,
                vec![json!({"protected": b64url(b"[]"), "signature": "AA"})],
            ),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "signature padded",
            with_signatures(
                &card,
                vec![{
                    let mut e = good(hdr.clone());
                    e["signature"] = json!(format!("{}=", e["signature"].as_str().unwrap()));
                    e
                }],
            ),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "crit",
            with_signatures(
                &card,
                vec![good(
                    json!({"alg": "HS256", "kid": "k1", "crit": ["exp"], "exp": 1}),
                )],
            ),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "b64 false",
            with_signatures(
                &card,
                vec![good(json!({"alg": "HS256", "kid": "k1", "b64": false}))],
            ),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "kid not a string",
            with_signatures(&card, vec![good(json!({"alg": "HS256", "kid": 1}))]),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "card without canonical form",
            unparsable,
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "card not an object",
            json!([1]),
            &k,
            Verdict::MalformedSignature,
        ),
        (
            "alg none",
            with_signatures(
                &card,
                vec![
                    json!({"protected": b64url(br#"{"alg":"none","kid":"k1"}"#), "signature": ""}),
                ],
            ),
            &k,
            Verdict::UnsupportedAlgorithm,
        ),
        (
            "alg missing",
            with_signatures(&card, vec![good(json!({"kid": "k1"}))]),
            &k,
            Verdict::UnsupportedAlgorithm,
        ),
        (
            "alg HS512",
            with_signatures(&card, vec![good(json!({"alg": "HS512", "kid": "k1"}))]),
            &k,
            Verdict::UnsupportedAlgorithm,
        ),
        (
            "alg lowercase",
            with_signatures(&card, vec![good(json!({"alg": "hs256", "kid": "k1"}))]),
            &k,
            Verdict::UnsupportedAlgorithm,
        ),
        (
            "no keys at all",
            signed_good.clone(),
            &no_keys,
            Verdict::MissingKey,
        ),
        (
            "no key for the alg",
            signed_good.clone(),
            &es_only,
            Verdict::MissingKey,
        ),
        (
            "unknown kid",
            with_signatures(&card, vec![good(json!({"alg": "HS256", "kid": "k9"}))]),
            &k,
            Verdict::UnknownKey,
        ),
        (
            "ambiguous",
            with_signatures(&card, vec![good(json!({"alg": "HS256"}))]),
            &two,
            Verdict::AmbiguousKey,
        ),
        (
            "mismatch",
            with_signatures(&card, vec![hmac_entry(&card, &hdr, b"wrong")]),
            &k,
            Verdict::SignatureMismatch,
        ),
    ];
    for (what, card, keys, want) in rows {
        assert_eq!(verify_card(&card, keys), want, "{what}");
    }
}

fn with_null_signatures(card: &Value) -> Value {
    let mut card = card.clone();
    card["signatures"] = Value::Null;
    card
}

#[test]
fn verdict_strings() {
    let rows = [
        (valid("x"), "valid"),
        (Verdict::Unsigned, "unsigned"),
        (Verdict::MissingSignature, "missing-signature"),
        (Verdict::MalformedSignature, "malformed-signature"),
        (Verdict::UnsupportedAlgorithm, "unsupported-algorithm"),
        (Verdict::MissingKey, "missing-key"),
        (Verdict::UnknownKey, "unknown-key"),
        (Verdict::AmbiguousKey, "ambiguous-key"),
        (Verdict::SignatureMismatch, "signature-mismatch"),
    ];
    for (v, s) in rows {
        assert_eq!(v.as_str(), s);
        assert_eq!(v.to_string(), s);
        assert_eq!(v.is_valid(), s == "valid");
    }
}

#[test]
fn precedence_is_the_furthest_failure() {
    let card = tiny_card();
    let k = secrets(&[("k1", b"k")]);
    let malformed = json!("x");
    let unsupported = hmac_entry(&card, &json!({"alg": "none", "kid": "k1"}), b"k");
    let unknown = hmac_entry(&card, &json!({"alg": "HS256", "kid": "zz"}), b"k");
    let mismatch = hmac_entry(&card, &json!({"alg": "HS256", "kid": "k1"}), b"bad");
    let good = hmac_entry(&card, &json!({"alg": "HS256", "kid": "k1"}), b"k");
    let rows = [
        (
            vec![malformed.clone(), unsupported.clone()],
            Verdict::UnsupportedAlgorithm,
        ),
        (
            vec![unsupported.clone(), malformed.clone()],
            Verdict::UnsupportedAlgorithm,
        ),
        (
            vec![unknown.clone(), unsupported.clone()],
            Verdict::UnknownKey,
        ),
        (
            vec![mismatch.clone(), unknown.clone()],
            Verdict::SignatureMismatch,
        ),
        (
            vec![unknown.clone(), mismatch.clone()],
            Verdict::SignatureMismatch,
        ),
        (
            vec![mismatch.clone(), malformed.clone(), good.clone()],
            valid("k1"),
        ),
        (vec![good, mismatch], valid("k1")),
    ];
    for (entries, want) in rows {
        assert_eq!(verify_card(&with_signatures(&card, entries), &k), want);
    }
    let mut no_keys_first = with_signatures(&card, vec![unsupported]);
    no_keys_first["signatures"]
        .as_array_mut()
        .unwrap()
        .push(hmac_entry(&card, &json!({"alg": "HS256"}), b"k"));
    assert_eq!(
        verify_card(&no_keys_first, &VerifyKeys::new()),
        Verdict::MissingKey
    );
}
