//! `card::verify::verify_card` on cards with arbitrary `signatures` arrays (entries that are
//! junk, or detached JWS whose protected header has any `alg`/`kid`/`crit`/`b64`/`jku` and
//! whose signature is any bytes or text), optionally signed for real with `card::jws::sign_card`
//! (HS256, kid `k1`, the worked example's secret `k`) and then possibly tampered with.
//! Trusted keys: the `k1` secret and/or the a2a-sdk test JWKS (P-256 `sdk-es`, Ed25519
//! `sdk-ed`) and an `oct` JWK.
//!
//! Properties: never panics; `Valid` exactly when the card carries our real signature, was not
//! tampered with after signing, and `k1` is trusted; then with kid `k1`. Without our
//! signature no arbitrary array verifies. Served cards (seed files): a card verifies only if
//! its canonical form is that of a card the known signatures were made over.
#![no_main]

use a2a_edge::card::canonical::canonical_card;
use a2a_edge::card::jws::{sign_card, SignOptions};
use a2a_edge::card::keys::SigningKey;
use a2a_edge::card::verify::{verify_card, Verdict, VerifyKeys, MAX_SIGNATURES};
use a2a_edge_fuzz::{ArbJson, Key};
use arbitrary::Arbitrary;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

const TINY: &str = r#"{"name":"tiny","description":"Tiny card","version":"1.0.0","supportedInterfaces":[{"url":"http://127.0.0.1:1/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}"#;
const SDK_JWKS: &str = r#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "8XixMzhzJ0h-RPNq_rUqgbig0x84ZBNJzviAHVcL2eM", "y": "vmlo2ni7Vt0NprJ9If8clDdZZhS1gTOs_MeYRdkJf9U", "kid": "sdk-es"}, {"x": "Kh2G_SSH2Te2hXuSS7SIt-v9H2famvRArPBET3t5Oho", "kty": "OKP", "crv": "Ed25519", "kid": "sdk-ed"}, {"kty": "oct", "kid": "oct-1", "k": "c2VjcmV0"}]}"#;

/// The canonical form of the a2a-sdk 1.3.0 test vector's tricky card (signed with `sdk-ed`).
const TRICKY_SDK_CANONICAL: &str = r###"{"capabilities":{"extendedAgentCard":true,"extensions":[{"params":{"\r":2,"1":5,"10":6,"big":1e+21,"f":1048576,"ff":false,"huge":12345678901234567000,"int":1024,"l":[1],"neg0":0,"s":" é","small":1e-7,"t":true,"tenth":0.1,"€":1,"😀":3,"דּ":4},"uri":"urn:a"},{"description":"d","required":true,"uri":"urn:b"}],"pushNotifications":false,"streaming":false},"defaultInputModes":["text/plain"],"name":"trïcky € 😀 \"q\" \\ \n\t\u0001","provider":{"organization":"o"},"securityRequirements":[{"schemes":{"oauth":{"list":["r"]}}}],"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"scheme":"bearer"}},"dev":{"oauth2SecurityScheme":{"flows":{"deviceCode":{"deviceAuthorizationUrl":"https://d","tokenUrl":"https://t"}}}},"key":{"apiKeySecurityScheme":{"location":"header","name":"X-Key"}},"oauth":{"oauth2SecurityScheme":{"flows":{"authorizationCode":{"authorizationUrl":"https://a","scopes":{"r":"read"},"tokenUrl":"https://t"}},"oauth2MetadataUrl":"https://m"}},"oidc":{"openIdConnectSecurityScheme":{"description":"x","openIdConnectUrl":"https://o/.well-known/openid-configuration"}}},"skills":[{"id":"s","inputModes":["a"],"name":"S","securityRequirements":[{"schemes":{"key":{"list":["x"]}}}]}],"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"https://x/"}],"version":"2"}"###;

#[derive(Arbitrary, Debug)]
struct Input {
    card: Card,
    signatures: Option<Signatures>,
    sign: bool,
    tamper: bool,
    trust_k1: bool,
    trust_jwks: bool,
}

#[derive(Arbitrary, Debug)]
enum Card {
    Tiny,
    TinyWith(Vec<(Key, ArbJson)>),
    Json(String),
    Any(ArbJson),
}

#[derive(Arbitrary, Debug)]
enum Signatures {
    List(Vec<Entry>),
    Other(ArbJson),
}

#[derive(Arbitrary, Debug)]
enum Entry {
    Junk(ArbJson),
    Jws {
        protected: Protected,
        signature: Sig,
        extra: Vec<(Key, ArbJson)>,
    },
}

#[derive(Arbitrary, Debug)]
enum Protected {
    Header(Header),
    Raw(String),
    Base64(String),
    Missing,
    NotString(ArbJson),
}

#[derive(Arbitrary, Debug)]
struct Header {
    alg: Option<Choice>,
    kid: Option<Choice>,
    crit: Option<ArbJson>,
    b64: Option<ArbJson>,
    jku: Option<String>,
    extra: Vec<(Key, ArbJson)>,
}

#[derive(Arbitrary, Debug)]
enum Choice {
    Known(u8),
    Raw(String),
    Other(ArbJson),
}

const ALGS: &[&str] = &[
    "HS256", "RS256", "ES256", "EdDSA", "none", "HS512", "hs256", "",
];
const KIDS: &[&str] = &["k1", "sdk-es", "sdk-ed", "oct-1", "", "default", "K1"];

impl Choice {
    fn value(&self, list: &[&str]) -> Value {
        match self {
            Choice::Known(i) => Value::from(list[*i as usize % list.len()]),
            Choice::Raw(s) => Value::String(s.clone()),
            Choice::Other(v) => v.to_value(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Sig {
    Bytes(Vec<u8>),
    Sized(u8, u8),
    Raw(String),
    Missing,
    NotString(ArbJson),
}

impl Entry {
    fn value(&self) -> Value {
        let (protected, signature, extra) = match self {
            Entry::Junk(v) => return v.to_value(),
            Entry::Jws {
                protected,
                signature,
                extra,
            } => (protected, signature, extra),
        };
        let mut m = Map::new();
        let p = match protected {
            Protected::Header(h) => {
                let mut hm = Map::new();
                if let Some(a) = &h.alg {
                    hm.insert("alg".into(), a.value(ALGS));
                }
                if let Some(k) = &h.kid {
                    hm.insert("kid".into(), k.value(KIDS));
                }
                if let Some(c) = &h.crit {
                    hm.insert("crit".into(), c.to_value());
                }
                if let Some(b) = &h.b64 {
                    hm.insert("b64".into(), b.to_value());
                }
                if let Some(j) = &h.jku {
                    hm.insert("jku".into(), Value::String(j.clone()));
                }
                for (k, v) in extra.iter().chain(&h.extra) {
                    hm.entry(k.as_string()).or_insert_with(|| v.to_value());
                }
                Some(Value::String(
                    URL_SAFE_NO_PAD.encode(Value::Object(hm).to_string()),
                ))
            }
            Protected::Raw(s) => Some(Value::String(s.clone())),
            Protected::Base64(s) => Some(Value::String(URL_SAFE_NO_PAD.encode(s))),
            Protected::Missing => None,
            Protected::NotString(v) => Some(v.to_value()),
        };
        if let Some(p) = p {
            m.insert("protected".into(), p);
        }
        let s = match signature {
            // Right-sized signatures for each algorithm: 32 (HS256), 64 (ES256/EdDSA), 256.
            Sig::Sized(n, fill) => {
                let len = [32, 64, 256, 0][*n as usize % 4];
                Some(Value::String(URL_SAFE_NO_PAD.encode(vec![*fill; len])))
            }
            Sig::Bytes(b) => Some(Value::String(URL_SAFE_NO_PAD.encode(b))),
            Sig::Raw(s) => Some(Value::String(s.clone())),
            Sig::Missing => None,
            Sig::NotString(v) => Some(v.to_value()),
        };
        if let Some(s) = s {
            m.insert("signature".into(), s);
        }
        for (k, v) in extra {
            m.entry(k.as_string()).or_insert_with(|| v.to_value());
        }
        Value::Object(m)
    }
}

/// A served card (seed files: the worked example signed with `k1`, the SDK's signed cards):
/// it may verify only if its canonical form is one that the known signatures cover.
fn check_served(text: &[u8]) {
    let Ok(card) = serde_json::from_slice::<Value>(text) else {
        return;
    };
    let mut keys = VerifyKeys::new();
    keys.add_secret("k1", b"k");
    keys.add_jwks(&serde_json::from_str(SDK_JWKS).unwrap())
        .unwrap();
    let verdict = verify_card(&card, &keys);
    if verdict.is_valid() {
        let canonical = canonical_card(&card).expect("a valid card has a canonical form");
        let tiny = canonical_card(&serde_json::from_str(TINY).unwrap()).unwrap();
        assert!(
            canonical == tiny || canonical == TRICKY_SDK_CANONICAL.as_bytes(),
            "a signature verified over content nobody signed: {}",
            String::from_utf8_lossy(&canonical)
        );
    }
}

// Input starting with `>`: a served card as JSON; otherwise a generated card and signatures.
fuzz_target!(|data: &[u8]| {
    if let Some(card) = data.strip_prefix(b">") {
        check_served(card);
        return;
    }
    let Ok(input) = Input::arbitrary_take_rest(arbitrary::Unstructured::new(data)) else {
        return;
    };
    let mut card: Value = match &input.card {
        Card::Tiny => serde_json::from_str(TINY).unwrap(),
        Card::TinyWith(extra) => {
            let mut c: Value = serde_json::from_str(TINY).unwrap();
            for (k, v) in extra {
                c[k.as_string()] = v.to_value();
            }
            c
        }
        Card::Json(s) => match serde_json::from_str(s) {
            Ok(v) => v,
            Err(_) => return,
        },
        Card::Any(v) => v.to_value(),
    };
    if let (Some(sigs), Value::Object(obj)) = (&input.signatures, &mut card) {
        let v = match sigs {
            Signatures::List(list) => Value::Array(list.iter().map(Entry::value).collect()),
            Signatures::Other(v) => v.to_value(),
        };
        obj.insert("signatures".into(), v);
    }

    let mut keys = VerifyKeys::new();
    if input.trust_k1 {
        keys.add_secret("k1", b"k");
    }
    if input.trust_jwks {
        keys.add_jwks(&serde_json::from_str(SDK_JWKS).unwrap())
            .unwrap();
    }

    let mut signed = false;
    if input.sign {
        let key = SigningKey::hs256("k1", b"k").unwrap();
        signed = sign_card(&mut card, &key, &SignOptions::default()).is_ok();
    }
    let mut tampered = false;
    if signed && input.tamper {
        let name = card
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        card["name"] = json!(format!("{name}\u{1}tampered"));
        tampered = true;
    }

    let verdict = verify_card(&card, &keys);
    let _ = verdict.as_str();
    // A card with more signatures than the cap is malformed, checked or not.
    let within_cap = card
        .get("signatures")
        .and_then(Value::as_array)
        .is_some_and(|s| s.len() <= MAX_SIGNATURES);
    let expect_valid = signed && !tampered && input.trust_k1 && within_cap;
    match &verdict {
        Verdict::Valid { kid } => {
            assert!(expect_valid, "an arbitrary signature verified: {card}");
            assert_eq!(kid, "k1");
        }
        other => assert!(
            !expect_valid,
            "our own signature did not verify: {other:?} {card}"
        ),
    }
    if tampered && input.trust_k1 {
        assert!(!verdict.is_valid());
    }
});
