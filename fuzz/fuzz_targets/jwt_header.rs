//! `auth::jwt::JwtScheme::looks_like_jwt` and `JwtScheme::authenticate`, with a `JwksCache`
//! loaded once from a JWKS file holding an Ed25519 key made from a fixed seed (`fuzz-ed`)
//! and the a2a-sdk test vector's P-256 public key (`sdk-es`).
//!
//! Inputs are either any string, or a token assembled from a generated header (algorithm,
//! kid, `crit`, `jwk`/`jku`, duplicate members, junk), generated claims (iss/aud/sub/exp/nbf/
//! iat as strings, numbers, arrays or junk, times relative to now) and a signature that is
//! empty, arbitrary bytes, or a real Ed25519 signature with the fixture key.
//!
//! Properties: never panics; a string that does not look like a JWT is `jwt.malformed`; no
//! token succeeds without the real signature; a success needs `alg` EdDSA, kid `fuzz-ed`, no
//! `crit`, `iss` exactly the issuer, the audience in `aud`, a future `exp`, and names
//! `jwt:<sub>`; a plainly good token (exact header, good claims) succeeds.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use a2a_edge::auth::jwks::{JwksCache, JwksSource};
use a2a_edge::auth::jwt::{JwtConfig, JwtScheme};
use a2a_edge::auth::Scheme;
use a2a_edge_fuzz::{fixture, runtime, ArbJson, Key};
use arbitrary::Arbitrary;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde_json::{json, Map, Value};

const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "a2a-edge";
const LEEWAY: u64 = 60;
const SEED: [u8; 32] = *b"a2a-edge fuzz ed25519 fixed seed";

fn key() -> &'static Ed25519KeyPair {
    static K: OnceLock<Ed25519KeyPair> = OnceLock::new();
    K.get_or_init(|| Ed25519KeyPair::from_seed_unchecked(&SEED).expect("ed25519 seed"))
}

fn scheme() -> &'static JwtScheme {
    static S: OnceLock<JwtScheme> = OnceLock::new();
    S.get_or_init(|| {
        let jwks = json!({"keys": [
            {"kty": "OKP", "crv": "Ed25519", "kid": "fuzz-ed", "use": "sig", "alg": "EdDSA",
             "x": URL_SAFE_NO_PAD.encode(key().public_key().as_ref())},
            {"kty": "EC", "crv": "P-256", "kid": "sdk-es",
             "x": "8XixMzhzJ0h-RPNq_rUqgbig0x84ZBNJzviAHVcL2eM",
             "y": "vmlo2ni7Vt0NprJ9If8clDdZZhS1gTOs_MeYRdkJf9U"}
        ]});
        let path = fixture()
            .base
            .join(format!("jwks-{}.json", std::process::id()));
        std::fs::write(&path, jwks.to_string()).expect("jwks file");
        let day = Duration::from_secs(86_400);
        let cache = runtime()
            .block_on(JwksCache::load(JwksSource::File(path.clone()), day, day))
            .expect("jwks");
        let _ = std::fs::remove_file(&path);
        let config = JwtConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            algorithms: vec![
                jsonwebtoken::Algorithm::EdDSA,
                jsonwebtoken::Algorithm::ES256,
                jsonwebtoken::Algorithm::RS256,
            ],
            principal_claim: "sub".into(),
            tenant_claim: Some("org.tenant".into()),
            groups_claim: Some("groups".into()),
            leeway: Duration::from_secs(LEEWAY),
        };
        JwtScheme::new(config, cache).expect("jwt scheme")
    })
}

#[derive(Arbitrary, Debug)]
enum Input {
    Raw(String),
    Token(Token),
    Good(u8),
}

/// Input starting with `>`: the token itself (seed files); otherwise a generated input.
fn input(data: &[u8]) -> Option<Input> {
    match data.strip_prefix(b">") {
        Some(raw) => Some(Input::Raw(String::from_utf8_lossy(raw).into_owned())),
        None => Input::arbitrary_take_rest(arbitrary::Unstructured::new(data)).ok(),
    }
}

#[derive(Arbitrary, Debug)]
struct Token {
    header: Header,
    claims: Claims,
    signature: Signature,
    /// A fourth segment, or segments that are not base64url.
    tail: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Header {
    alg: Option<Choice>,
    kid: Option<Choice>,
    typ: Option<ArbJson>,
    crit: Option<ArbJson>,
    jwk: bool,
    jku: bool,
    duplicate_alg: Option<Choice>,
    extra: Vec<(Key, ArbJson)>,
    raw: Option<String>,
}

#[derive(Arbitrary, Debug)]
enum Choice {
    Known(u8),
    Raw(String),
    NotString(ArbJson),
}

const ALGS: &[&str] = &[
    "EdDSA", "ES256", "RS256", "HS256", "none", "NONE", "nOnE", "PS256", "ES384", "Ed25519", "",
];
const KIDS: &[&str] = &[
    "fuzz-ed", "sdk-es", "", "unknown", "fuzz-ed ", "FUZZ-ED", "../jwks",
];

impl Choice {
    fn value(&self, list: &[&str]) -> Value {
        match self {
            Choice::Known(i) => Value::from(list[*i as usize % list.len()]),
            Choice::Raw(s) => Value::String(s.clone()),
            Choice::NotString(v) => v.to_value(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Claims {
    iss: Option<Claim>,
    aud: Option<Claim>,
    sub: Option<Claim>,
    exp: Option<Time>,
    nbf: Option<Time>,
    iat: Option<Time>,
    extra: Vec<(Key, ArbJson)>,
    raw: Option<String>,
}

#[derive(Arbitrary, Debug)]
enum Claim {
    Good,
    List(Vec<Claim>),
    Text(String),
    Other(ArbJson),
}

#[derive(Arbitrary, Debug)]
enum Time {
    FromNow(i32),
    FromNowFloat(i32, u16),
    Other(ArbJson),
}

#[derive(Arbitrary, Debug)]
enum Signature {
    Real,
    Empty,
    Bytes(Vec<u8>),
    Raw(String),
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Claim {
    fn value(&self, good: &str, depth: usize) -> Value {
        match self {
            Claim::Good => Value::from(good),
            Claim::List(items) if depth < 2 => {
                Value::Array(items.iter().map(|c| c.value(good, depth + 1)).collect())
            }
            Claim::List(_) => Value::Null,
            Claim::Text(s) => Value::String(s.clone()),
            Claim::Other(v) => v.to_value(),
        }
    }
}

impl Time {
    fn value(&self) -> Value {
        match self {
            Time::FromNow(d) => Value::from(now() + *d as i64),
            Time::FromNowFloat(d, frac) => {
                json!((now() + *d as i64) as f64 + f64::from(*frac) / 65536.0)
            }
            Time::Other(v) => v.to_value(),
        }
    }
}

fn b64(s: &str) -> String {
    URL_SAFE_NO_PAD.encode(s.as_bytes())
}

impl Token {
    fn header_json(&self) -> String {
        let h = &self.header;
        if let Some(raw) = &h.raw {
            return raw.clone();
        }
        let mut m = Map::new();
        if let Some(a) = &h.alg {
            m.insert("alg".into(), a.value(ALGS));
        }
        if let Some(k) = &h.kid {
            m.insert("kid".into(), k.value(KIDS));
        }
        if let Some(t) = &h.typ {
            m.insert("typ".into(), t.to_value());
        }
        if let Some(c) = &h.crit {
            m.insert("crit".into(), c.to_value());
        }
        if h.jwk {
            m.insert("jwk".into(), json!({"kty": "oct", "k": "AAAA"}));
        }
        if h.jku {
            m.insert("jku".into(), json!("https://attacker.example/jwks.json"));
        }
        for (k, v) in &h.extra {
            m.entry(k.as_string()).or_insert_with(|| v.to_value());
        }
        let mut text = Value::Object(m).to_string();
        if let Some(dup) = &h.duplicate_alg {
            text.pop();
            if text.len() > 1 {
                text.push(',');
            }
            text.push_str(&format!("\"alg\":{}}}", dup.value(ALGS)));
        }
        text
    }

    fn claims_json(&self) -> String {
        let c = &self.claims;
        if let Some(raw) = &c.raw {
            return raw.clone();
        }
        let mut m = Map::new();
        for (name, claim, good) in [
            ("iss", &c.iss, ISSUER),
            ("aud", &c.aud, AUDIENCE),
            ("sub", &c.sub, "alice"),
        ] {
            if let Some(v) = claim {
                m.insert(name.into(), v.value(good, 0));
            }
        }
        for (name, t) in [("exp", &c.exp), ("nbf", &c.nbf), ("iat", &c.iat)] {
            if let Some(t) = t {
                m.insert(name.into(), t.value());
            }
        }
        for (k, v) in &c.extra {
            m.entry(k.as_string()).or_insert_with(|| v.to_value());
        }
        Value::Object(m).to_string()
    }

    fn build(&self) -> String {
        let input = format!("{}.{}", b64(&self.header_json()), b64(&self.claims_json()));
        let sig = match &self.signature {
            Signature::Real => URL_SAFE_NO_PAD.encode(key().sign(input.as_bytes()).as_ref()),
            Signature::Empty => String::new(),
            Signature::Bytes(b) => URL_SAFE_NO_PAD.encode(b),
            Signature::Raw(s) => s.clone(),
        };
        let mut token = format!("{input}.{sig}");
        if let Some(tail) = &self.tail {
            token.push_str(tail);
        }
        token
    }
}

fn good_token(sub: &str) -> String {
    let header = json!({"alg": "EdDSA", "kid": "fuzz-ed", "typ": "JWT"}).to_string();
    let claims =
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 3600, "iat": now() - 10})
            .to_string();
    let input = format!("{}.{}", b64(&header), b64(&claims));
    format!(
        "{input}.{}",
        URL_SAFE_NO_PAD.encode(key().sign(input.as_bytes()).as_ref())
    )
}

fn segment_json(token: &str, i: usize) -> Option<Map<String, Value>> {
    let seg = token.split('.').nth(i)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(seg).ok()?).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input(data) else {
        return;
    };
    let s = scheme();
    let (token, signed) = match &input {
        Input::Raw(t) => (t.clone(), false),
        Input::Token(t) => (t.build(), matches!(t.signature, Signature::Real)),
        Input::Good(i) => {
            let sub = ["alice", "bob@example.com", "svc:deploy"][*i as usize % 3];
            let token = good_token(sub);
            let p = runtime()
                .block_on(s.authenticate(&token))
                .unwrap_or_else(|e| panic!("a good token was refused: {e:?}"));
            assert_eq!(p.name, format!("jwt:{sub}"));
            return;
        }
    };
    let looks = JwtScheme::looks_like_jwt(&token);
    let got = runtime().block_on(s.authenticate(&token));
    let Ok(p) = got else {
        let e = got.unwrap_err();
        assert!(e.reason.as_str().starts_with("jwt."), "{e:?}");
        if !looks {
            assert_eq!(e.reason, "jwt.malformed", "{token:?}");
        }
        return;
    };
    assert!(
        looks,
        "accepted a token that does not look like a JWT: {token:?}"
    );
    assert!(
        signed,
        "accepted a token without the real signature: {token:?}"
    );
    assert_eq!(p.scheme, Scheme::Jwt);
    let header = segment_json(&token, 0).expect("accepted header is a JSON object");
    assert_eq!(header.get("alg"), Some(&json!("EdDSA")), "{header:?}");
    assert_eq!(header.get("kid"), Some(&json!("fuzz-ed")), "{header:?}");
    assert!(!header.contains_key("crit"), "{header:?}");
    let claims = segment_json(&token, 1).expect("accepted claims are a JSON object");
    assert_eq!(claims.get("iss"), Some(&json!(ISSUER)), "{claims:?}");
    let aud_ok = match claims.get("aud") {
        Some(Value::String(a)) => a == AUDIENCE,
        Some(Value::Array(list)) => list.iter().any(|a| a == AUDIENCE),
        _ => false,
    };
    assert!(aud_ok, "{claims:?}");
    let exp = claims.get("exp").and_then(Value::as_f64).expect("exp");
    assert!(
        exp + LEEWAY as f64 + 5.0 >= now() as f64,
        "expired token accepted: {claims:?}"
    );
    for name in ["nbf", "iat"] {
        if let Some(v) = claims.get(name) {
            let t = v.as_f64().expect("numeric nbf/iat");
            assert!(
                t <= (now() as u64 + LEEWAY) as f64,
                "future {name} accepted: {claims:?}"
            );
        }
    }
    let sub = claims.get("sub").and_then(Value::as_str).expect("sub");
    assert_eq!(p.name, format!("jwt:{sub}"));
});
