//! `auth::Authenticator::authenticate` with bearer tokens, Basic (a `password_env`-style plain
//! secret) and an API key; no JWT. Headers are arbitrary: `Authorization` and `X-API-Key`
//! (repeated or not), other names, values from the configured secrets with odd spacing and
//! case, Basic encodings of arbitrary user/password pairs, or any bytes.
//!
//! Properties: never panics; the outcome equals an oracle written here from the policy:
//! one `Authorization` header exactly `<bearer|BEARER|...> +tok-1` (or `tok-2`), or
//! `<basic> +base64("alice:s3cret:x")`, wins; else (and only if the Authorization header is
//! not repeated) exactly one `X-API-Key: key-abc`; nothing else ever succeeds.
#![no_main]

use std::sync::OnceLock;

use a2a_edge::auth::{Authenticator, ConnCredentials, Scheme};
use a2a_edge::policy::{
    sha256, ApiKeyPolicy, AuthPolicy, BasicCredential, BasicSecret, BearerCredential, ClientAuth,
    ThrottlePolicy,
};
use a2a_edge_fuzz::runtime;
use arbitrary::Arbitrary;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const BASIC_USER: &str = "alice";
const BASIC_PASSWORD: &str = "s3cret:x";

fn authenticator() -> &'static Authenticator {
    static A: OnceLock<Authenticator> = OnceLock::new();
    A.get_or_init(|| {
        let policy = AuthPolicy {
            from_environment: vec![],
            allow_anonymous: false,
            bearer: vec![
                BearerCredential {
                    principal: "ci".into(),
                    attributes: Default::default(),
                    token_sha256: sha256(b"tok-1"),
                    generated: None,
                },
                BearerCredential {
                    principal: "ops".into(),
                    attributes: Default::default(),
                    token_sha256: sha256(b"tok-2"),
                    generated: None,
                },
            ],
            basic: vec![BasicCredential {
                username: BASIC_USER.into(),
                attributes: Default::default(),
                secret: BasicSecret::Plain(BASIC_PASSWORD.into()),
            }],
            api_key: Some(ApiKeyPolicy {
                header: "X-API-Key".into(),
                keys: vec![("robot".into(), sha256(b"key-abc"))],
                attributes: Default::default(),
            }),
            mtls_identities: Vec::new(),
            identity_assertion: None,
            jwt: None,
            client_auth: ClientAuth::Off,
            principal_header: "x-a2a-edge-principal".into(),
            throttle: ThrottlePolicy {
                failures_per_minute: 30,
                failures_burst: 10,
            },
        };
        runtime()
            .block_on(Authenticator::new(&policy, None))
            .expect("authenticator")
    })
}

#[derive(Arbitrary, Debug)]
enum Name {
    Authorization,
    ApiKey,
    ApiKeyLower,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Val {
    Bearer(u8, u8, u8),
    Basic(u8, u8, String, String),
    BasicKnown(u8, u8),
    Key(u8),
    Scheme(u8, u8, String),
    Bytes(Vec<u8>),
}

const SCHEMES: &[&str] = &[
    "Bearer", "bearer", "BEARER", "BeArEr", "Basic", "basic", "Digest", "", "Bearer:",
];
const SECRETS: &[&str] = &[
    "tok-1", "tok-2", "tok-1=", "tok-1 ", " tok-1", "tok-3", "TOK-1", "tok-1\t", "tok-", "key-abc",
    "",
];
const SPACES: &[&str] = &[" ", "  ", "\t", "", " \t", "   "];

impl Val {
    fn bytes(&self) -> Vec<u8> {
        let scheme = |i: &u8| SCHEMES[*i as usize % SCHEMES.len()];
        let space = |i: &u8| SPACES[*i as usize % SPACES.len()];
        match self {
            Val::Bearer(s, sp, t) => format!(
                "{}{}{}",
                scheme(s),
                space(sp),
                SECRETS[*t as usize % SECRETS.len()]
            )
            .into_bytes(),
            Val::Basic(s, sp, user, pass) => format!(
                "{}{}{}",
                scheme(s),
                space(sp),
                STANDARD.encode(format!("{user}:{pass}"))
            )
            .into_bytes(),
            Val::BasicKnown(s, sp) => {
                let pairs = [
                    format!("{BASIC_USER}:{BASIC_PASSWORD}"),
                    format!("{BASIC_USER}:s3cret"),
                    format!("{BASIC_USER}:{BASIC_PASSWORD} "),
                    format!("Alice:{BASIC_PASSWORD}"),
                    format!("{BASIC_USER}{BASIC_PASSWORD}"),
                ];
                let pair = &pairs[*sp as usize % pairs.len()];
                let enc = match s % 3 {
                    0 => STANDARD.encode(pair),
                    1 => base64::engine::general_purpose::STANDARD_NO_PAD.encode(pair),
                    _ => base64::engine::general_purpose::URL_SAFE.encode(pair),
                };
                format!("Basic {enc}").into_bytes()
            }
            Val::Key(i) => SECRETS[*i as usize % SECRETS.len()].as_bytes().to_vec(),
            Val::Scheme(s, sp, rest) => format!("{}{}{rest}", scheme(s), space(sp)).into_bytes(),
            Val::Bytes(b) => b.clone(),
        }
    }
}

/// `<scheme, any case> SP+ <credentials>` with exactly these bytes.
fn authorization_is(value: &[u8], scheme: &str, credentials: &str) -> bool {
    let Some(rest) = value.get(scheme.len()..) else {
        return false;
    };
    if !value[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes()) {
        return false;
    }
    let trimmed = rest.iter().position(|b| *b != b' ').map(|i| &rest[i..]);
    rest.first() == Some(&b' ') && trimmed == Some(credentials.as_bytes())
}

fn oracle(headers: &HeaderMap) -> Option<&'static str> {
    let auth: Vec<&HeaderValue> = headers.get_all("authorization").iter().collect();
    if auth.len() > 1 {
        return None;
    }
    if let Some(v) = auth.first() {
        let v = v.as_bytes();
        let basic = STANDARD.encode(format!("{BASIC_USER}:{BASIC_PASSWORD}"));
        if authorization_is(v, "bearer", "tok-1") {
            return Some("ci");
        }
        if authorization_is(v, "bearer", "tok-2") {
            return Some("ops");
        }
        if authorization_is(v, "basic", &basic) {
            return Some(BASIC_USER);
        }
    }
    let keys: Vec<&HeaderValue> = headers.get_all("x-api-key").iter().collect();
    (keys.len() == 1 && keys[0].as_bytes() == b"key-abc").then_some("robot")
}

fn from_lines(text: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in text.split(|b| *b == b'\n').take(16) {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = &line[colon + 1..];
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(n, v);
        }
    }
    headers
}

// Input starting with `>`: header lines (`Name: value`, one per line, as the seed files
// hold them); otherwise generated headers.
fuzz_target!(|data: &[u8]| {
    if let Some(lines) = data.strip_prefix(b">") {
        check(from_lines(lines));
        return;
    }
    let Ok(built) = Vec::<(Name, Val)>::arbitrary_take_rest(arbitrary::Unstructured::new(data))
    else {
        return;
    };
    let mut headers = HeaderMap::new();
    for (name, value) in built.iter().take(16) {
        let name = match name {
            Name::Authorization => HeaderName::from_static("authorization"),
            Name::ApiKey => HeaderName::from_static("x-api-key"),
            Name::ApiKeyLower => HeaderName::from_static("x-api-key"),
            Name::Other(s) => match HeaderName::from_bytes(s.as_bytes()) {
                Ok(n) => n,
                Err(_) => continue,
            },
        };
        let Ok(value) = HeaderValue::from_bytes(&value.bytes()) else {
            continue;
        };
        headers.append(name, value);
    }
    check(headers);
});

fn check(headers: HeaderMap) {
    let a = authenticator();
    let got = runtime().block_on(a.authenticate(&headers, ConnCredentials::default()));
    let want = oracle(&headers);
    match (&got, want) {
        (Ok(a), Some(name)) => {
            assert_eq!(a.principal.name, name, "{headers:?}");
            assert_ne!(a.principal.scheme, Scheme::Anonymous);
            // A failure reported beside the principal is an auth.* refusal of a credential
            // the request also presented (for the failure throttle).
            if let Some(f) = a.failed {
                assert!(f.reason.as_str().starts_with("auth."), "{f:?}");
            }
        }
        (Err(r), None) => assert!(r.reason.as_str().starts_with("auth."), "{r:?}"),
        _ => panic!("authenticate gave {got:?}, the oracle {want:?}, for {headers:?}"),
    }
}
