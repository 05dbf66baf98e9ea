use serde_json::{json, Value};

use super::*;
use crate::card::canonical::tests::tiny_card;
use crate::card::jws::{sign_card, SignOptions};
use crate::card::keys::tests::generated_pem;
use crate::card::keys::SigningKey;

pub(super) fn hs(kid: &str, secret: &[u8]) -> SigningKey {
    SigningKey::hs256(kid, secret).unwrap()
}

pub(super) fn pem_key(kid: &str, alg: SigningAlg) -> SigningKey {
    SigningKey::from_private_pem(kid, alg, &generated_pem(alg)).unwrap()
}

pub(super) fn signed(mut card: Value, keys: &[&SigningKey]) -> Value {
    for key in keys {
        sign_card(&mut card, key, &SignOptions::default()).unwrap();
    }
    card
}

pub(super) fn secrets(list: &[(&str, &[u8])]) -> VerifyKeys {
    let mut keys = VerifyKeys::new();
    for (kid, secret) in list {
        keys.add_secret(kid, secret);
    }
    keys
}

pub(super) fn jwks_of(keys: &[&SigningKey]) -> VerifyKeys {
    let mut trusted = VerifyKeys::new();
    let list: Vec<Value> = keys.iter().map(|k| k.public_jwk().unwrap()).collect();
    trusted.add_jwks(&json!({ "keys": list })).unwrap();
    trusted
}

/// A signature entry with an arbitrary protected header, HMAC'd with `secret`.
pub(super) fn hmac_entry(card: &Value, header: &Value, secret: &[u8]) -> Value {
    let protected = b64url(header.to_string().as_bytes());
    let input = format!("{protected}.{}", b64url(&canonical_card(card).unwrap()));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let sig = b64url(ring::hmac::sign(&key, input.as_bytes()).as_ref());
    json!({"protected": protected, "signature": sig})
}

pub(super) fn with_signatures(card: &Value, entries: Vec<Value>) -> Value {
    let mut card = card.clone();
    card["signatures"] = Value::Array(entries);
    card
}

pub(super) fn valid(kid: &str) -> Verdict {
    Verdict::Valid { kid: kid.into() }
}

/// A card with every part the tamper test touches.
pub(super) fn full_card() -> Value {
    let mut card = tiny_card();
    card["skills"] =
        json!([{"id": "iac_generation", "name": "IaC", "description": "d", "tags": ["iac"]}]);
    card["securitySchemes"] =
        json!({"bearerAuth": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}});
    card["provider"] = json!({"organization": "o", "url": "https://o.example"});
    card
}

#[test]
fn worked_example_verdicts_mirror_iac_code() {
    let mut card = tiny_card();
    sign_card(
        &mut card,
        &hs("k1", b"k"),
        &SignOptions {
            jku: None,
            jku_null: true,
        },
    )
    .unwrap();
    let keys = secrets(&[("k1", b"k")]);
    assert_eq!(verify_card(&card, &keys), valid("k1"));

    let mut tampered = card.clone();
    tampered["description"] = json!("Tiny card!");
    assert_eq!(verify_card(&tampered, &keys), Verdict::SignatureMismatch);

    // `url` is a legacy field: not signed (iac-code: "url changed -> valid (not signed)").
    let mut legacy = card.clone();
    legacy["url"] = json!("http://evil.example/");
    assert_eq!(verify_card(&legacy, &keys), valid("k1"));

    // An empty-scope requirement prunes away: "securityRequirements added -> valid".
    let mut reqs = card.clone();
    reqs["securityRequirements"] = json!([{"schemes": {"bearerAuth": {"list": [""]}}}]);
    assert_eq!(verify_card(&reqs, &keys), valid("k1"));

    // The served form carries "header": {} (iac-code); it is not signed either.
    let mut served = card.clone();
    served["signatures"][0]["header"] = json!({});
    assert_eq!(verify_card(&served, &keys), valid("k1"));
}

#[test]
fn round_trips_for_every_algorithm() {
    let card = full_card();
    let h = hs("h", b"0123456789abcdef0123456789abcdef");
    let hs_card = signed(card.clone(), &[&h]);
    assert_eq!(
        verify_card(
            &hs_card,
            &secrets(&[("h", b"0123456789abcdef0123456789abcdef")])
        ),
        valid("h")
    );
    // An `oct` JWK carries an HS256 secret too.
    let mut oct = VerifyKeys::new();
    oct.add_jwks(&json!({"keys": [{"kty": "oct", "kid": "h", "k": b64url(b"0123456789abcdef0123456789abcdef")}]}))
        .unwrap();
    assert_eq!(verify_card(&hs_card, &oct), valid("h"));

    for alg in [SigningAlg::RS256, SigningAlg::ES256, SigningAlg::EdDSA] {
        let key = pem_key(alg.as_str(), alg);
        let card = signed(card.clone(), &[&key]);
        assert_eq!(
            verify_card(&card, &jwks_of(&[&key])),
            valid(alg.as_str()),
            "{alg}"
        );
        let other = pem_key(alg.as_str(), alg);
        assert_eq!(
            verify_card(&card, &jwks_of(&[&other])),
            Verdict::SignatureMismatch,
            "{alg}: same kid, another key"
        );
    }
}

#[test]
fn every_card_field_is_covered() {
    type Edit = fn(&mut Value);
    let edits: &[(&str, Edit)] = &[
        ("name", |c| c["name"] = json!("tiny2")),
        ("description", |c| c["description"] = json!("other")),
        ("version", |c| c["version"] = json!("1.0.1")),
        ("interface url", |c| {
            c["supportedInterfaces"][0]["url"] = json!("https://evil.example/")
        }),
        ("streaming", |c| {
            c["capabilities"]["streaming"] = json!(false)
        }),
        ("skill id", |c| c["skills"][0]["id"] = json!("other")),
        ("security scheme", |c| {
            c["securitySchemes"]["bearerAuth"]["httpAuthSecurityScheme"]["scheme"] = json!("Basic")
        }),
        (
            "scheme added",
            |c| {
                c["securitySchemes"]["apiKey"] =
                    json!({"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}})
            },
        ),
        ("provider", |c| c["provider"]["organization"] = json!("p")),
        ("input modes", |c| {
            c["defaultInputModes"] = json!(["image/png"])
        }),
    ];
    for alg in [SigningAlg::ES256, SigningAlg::EdDSA, SigningAlg::RS256] {
        let key = pem_key("k", alg);
        let keys = jwks_of(&[&key]);
        let card = signed(full_card(), &[&key]);
        assert!(verify_card(&card, &keys).is_valid());
        for (what, edit) in edits {
            let mut tampered = card.clone();
            edit(&mut tampered);
            assert_eq!(
                verify_card(&tampered, &keys),
                Verdict::SignatureMismatch,
                "{alg}: {what}"
            );
        }
    }
    let key = hs("k", b"k");
    let keys = secrets(&[("k", b"k")]);
    let card = signed(full_card(), &[&key]);
    for (what, edit) in edits {
        let mut tampered = card.clone();
        edit(&mut tampered);
        assert_eq!(
            verify_card(&tampered, &keys),
            Verdict::SignatureMismatch,
            "HS256: {what}"
        );
    }
}

#[test]
fn key_rotation_any_signature_verifies() {
    let old = pem_key("old", SigningAlg::ES256);
    let new = pem_key("new", SigningAlg::EdDSA);
    let card = signed(full_card(), &[&old, &new]);
    assert_eq!(card["signatures"].as_array().unwrap().len(), 2);
    assert_eq!(verify_card(&card, &jwks_of(&[&new])), valid("new"));
    assert_eq!(verify_card(&card, &jwks_of(&[&old])), valid("old"));
    let mut both = jwks_of(&[&new]);
    both.add_secret("hs", b"secret");
    assert_eq!(verify_card(&card, &both), valid("new"));
    let stranger = pem_key("stranger", SigningAlg::EdDSA);
    assert_eq!(
        verify_card(&card, &jwks_of(&[&stranger])),
        Verdict::UnknownKey
    );
}

#[test]
fn algorithm_confusion_is_refused() {
    // An ES256 public key (published in the JWKS) used as an HMAC secret under an HS256
    // header naming the EC key's kid.
    let es = pem_key("ec-key", SigningAlg::ES256);
    let card = signed(full_card(), &[&es]);
    let jwk = es.public_jwk().unwrap();
    let mut forged = card.clone();
    let header = json!({"alg": "HS256", "kid": "ec-key", "typ": "JOSE"});
    let mut entries = Vec::new();
    for secret in [
        jwk.to_string().into_bytes(),
        URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap(),
        jwk["x"].as_str().unwrap().as_bytes().to_vec(),
    ] {
        entries.push(hmac_entry(&card, &header, &secret));
    }
    forged["signatures"] = Value::Array(entries.clone());
    let keys = jwks_of(&[&es]);
    assert_eq!(verify_card(&forged, &keys), Verdict::MissingKey);
    let mut keys_and_secret = jwks_of(&[&es]);
    keys_and_secret.add_secret("other", b"other");
    assert_eq!(verify_card(&forged, &keys_and_secret), Verdict::UnknownKey);
    // The real ES256 signature next to the forged ones still verifies.
    entries.push(card["signatures"][0].clone());
    forged["signatures"] = Value::Array(entries);
    assert_eq!(verify_card(&forged, &keys), valid("ec-key"));

    // An ES256 header over an Ed25519 key (same kid) is not tried with the wrong key type.
    let ed = pem_key("shared", SigningAlg::EdDSA);
    let ec = pem_key("shared", SigningAlg::ES256);
    let card = signed(full_card(), &[&ec]);
    assert_eq!(verify_card(&card, &jwks_of(&[&ed])), Verdict::MissingKey);
    assert_eq!(verify_card(&card, &jwks_of(&[&ed, &ec])), valid("shared"));
}

#[test]
fn jwks_loading_skips_unusable_keys() {
    let es = pem_key("es", SigningAlg::ES256);
    let good = es.public_jwk().unwrap();
    let mut enc = good.clone();
    enc["use"] = json!("enc");
    let mut wrong_alg = good.clone();
    wrong_alg["alg"] = json!("RS256");
    let mut no_kid = good.clone();
    no_kid.as_object_mut().unwrap().remove("kid");
    let mut ops = good.clone();
    ops["key_ops"] = json!(["sign"]);
    let mut p384 = good.clone();
    p384["crv"] = json!("P-384");
    let small_rsa = {
        let pair = josekit::jws::RS256.generate_key_pair(2048).unwrap();
        let mut j: Value = serde_json::from_str(&pair.to_jwk_public_key().to_string()).unwrap();
        // Truncate the modulus to 1024 bits.
        let n = URL_SAFE_NO_PAD.decode(j["n"].as_str().unwrap()).unwrap();
        j["n"] = json!(b64url(&n[..128]));
        j["kid"] = json!("small");
        j
    };
    let mut keys = VerifyKeys::new();
    keys.add_jwks(
        &json!({"keys": [enc, wrong_alg, no_kid, ops, p384, small_rsa, "junk",
        {"kty": "oct", "kid": "empty", "k": ""}, {"kty": "X", "kid": "x"}]}),
    )
    .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    keys.add_jwks(&json!({"keys": [good]})).unwrap();
    assert_eq!(keys.len(), 1);
    for bad in [json!([]), json!({}), json!({"keys": {}}), json!("x")] {
        assert!(VerifyKeys::new().add_jwks(&bad).is_err());
    }
    // Empty secrets are never trusted; a later secret for a kid replaces the earlier one.
    let mut s = VerifyKeys::new();
    s.add_secret("a", b"");
    assert!(s.is_empty());
    s.add_secret("a", b"one");
    s.add_secret("a", b"two");
    assert_eq!(s.len(), 1);
    let card = signed(tiny_card(), &[&hs("a", b"two")]);
    assert_eq!(verify_card(&card, &s), valid("a"));
    assert!(!format!("{s:?}").contains("two"));
}

/// A card's signatures are checked only up to `MAX_SIGNATURES`: one more is malformed, even
/// with a valid one last (each costs a pass over the card).
#[test]
fn more_signatures_than_the_cap_are_refused_unchecked() {
    let card = tiny_card();
    let keys = secrets(&[("k1", b"k")]);
    let good = hmac_entry(&card, &json!({"alg": "HS256", "kid": "k1"}), b"k");
    let bad = hmac_entry(&card, &json!({"alg": "HS256", "kid": "k1"}), b"wrong");
    for (n, want) in [
        (MAX_SIGNATURES, valid("k1")),
        (MAX_SIGNATURES + 1, Verdict::MalformedSignature),
        (7_500, Verdict::MalformedSignature),
    ] {
        let mut entries = vec![bad.clone(); n - 1];
        entries.push(good.clone());
        assert_eq!(
            verify_card(&with_signatures(&card, entries), &keys),
            want,
            "{n}"
        );
    }
}
