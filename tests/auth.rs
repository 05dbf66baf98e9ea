//! Authentication through the proxy over real TLS: every scheme, every attack shape, each
//! refused with 401 (or a failed handshake for client certificates) and never reaching the
//! agent; the failure throttle; and no secret in any log of a real child process.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use common::*;
use http::StatusCode;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};
use serde_json::{json, Value};

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#;

/// An ES256 signing key and its public JWK.
struct JwtKey {
    kid: String,
    pair: KeyPair,
}

impl JwtKey {
    fn new(kid: &str) -> JwtKey {
        JwtKey {
            kid: kid.into(),
            pair: KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
        }
    }
    fn jwk(&self) -> Value {
        let raw = self.pair.public_key_raw();
        json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "alg": "ES256", "use": "sig",
               "x": URL_SAFE_NO_PAD.encode(&raw[1..33]), "y": URL_SAFE_NO_PAD.encode(&raw[33..65])})
    }
    fn sign(&self, claims: &Value) -> String {
        let mut h = Header::new(Algorithm::ES256);
        h.kid = Some(self.kid.clone());
        encode(
            &h,
            claims,
            &EncodingKey::from_ec_der(&self.pair.serialize_der()),
        )
        .unwrap()
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(sub: &str) -> Value {
    json!({"iss": "https://issuer.test", "aud": "a2a-edge", "sub": sub, "exp": now() + 600, "iat": now()})
}

struct ClientPki {
    ca_file: std::path::PathBuf,
    /// The client CA (certificate and key), to sign CRLs with.
    ca: (rcgen::Certificate, KeyPair),
    good: (Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>),
    foreign: (Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>),
}

/// A PEM CRL by `ca` revoking the certificates with these serials, valid until `next_update`
/// (year).
fn crl(ca: &(rcgen::Certificate, KeyPair), serials: &[u64], next_update: i32) -> String {
    crl_until(ca, serials, rcgen::date_time_ymd(next_update, 1, 1))
}

fn crl_until(
    ca: &(rcgen::Certificate, KeyPair),
    serials: &[u64],
    next_update: time::OffsetDateTime,
) -> String {
    rcgen::CertificateRevocationListParams {
        this_update: rcgen::date_time_ymd(2020, 1, 1),
        next_update,
        crl_number: rcgen::SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: serials
            .iter()
            .map(|s| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(*s),
                revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect(),
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&ca.0, &ca.1)
    .unwrap()
    .pem()
    .unwrap()
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    (p.self_signed(&key).unwrap(), key)
}

/// A client certificate for `uri` by `ca`; its serial is [`GOOD_SERIAL`] (CRLs name it).
fn leaf(
    ca: &(rcgen::Certificate, KeyPair),
    uri: &str,
) -> (Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>) {
    leaf_with_serial(ca, uri, GOOD_SERIAL)
}

const GOOD_SERIAL: u64 = 0x5eed_0001;

fn leaf_with_serial(
    ca: &(rcgen::Certificate, KeyPair),
    uri: &str,
    serial: u64,
) -> (Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>) {
    leaf_until(ca, uri, serial, rcgen::date_time_ymd(4096, 1, 1))
}

/// A client certificate for `uri` by `ca` with `serial`, valid until `not_after`.
fn leaf_until(
    ca: &(rcgen::Certificate, KeyPair),
    uri: &str,
    serial: u64,
    not_after: time::OffsetDateTime,
) -> (Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.not_after = not_after;
    p.serial_number = Some(rcgen::SerialNumber::from(serial));
    p.subject_alt_names = vec![SanType::URI(uri.try_into().unwrap())];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = p.signed_by(&key, &ca.0, &ca.1).unwrap();
    (vec![cert.der().clone()], key.serialize_der())
}

fn client_pki(dir: &Path) -> ClientPki {
    let good_ca = ca("client CA");
    let other_ca = ca("someone else's CA");
    let ca_file = dir.join("client-ca.pem");
    std::fs::write(&ca_file, good_ca.0.pem()).unwrap();
    ClientPki {
        ca_file,
        good: leaf(&good_ca, "spiffe://example.org/ns/prod/sa/ci"),
        foreign: leaf(&other_ca, "spiffe://evil.example/sa/ci"),
        ca: good_ca,
    }
}

struct Setup {
    proxy: Proxy,
    up: RecordingUpstream,
    jwks_file: std::path::PathBuf,
    k1: JwtKey,
    pki: ClientPki,
    _dir: TempDir,
}

async fn setup(client_auth: &str, throttle: &str) -> Setup {
    let dir = TempDir::new("auth");
    let k1 = JwtKey::new("k1");
    let jwks_file = dir.path().join("jwks.json");
    std::fs::write(&jwks_file, json!({"keys": [k1.jwk()]}).to_string()).unwrap();
    let phc = a2a_edge::auth::hash::argon2id_phc(b"s3cret:pw").unwrap();
    let key_sha = hex(&a2a_edge::policy::sha256(b"key-abc-123"));
    let pki = client_pki(dir.path());
    let up = RecordingUpstream::start(Reply::Echo).await;
    let extra_policy = format!(
        r#"{throttle}
[[auth.basic]]
username = "alice"
password_hash = "{phc}"
[auth.api_key]
header = "X-My-Key"
[[auth.api_key.keys]]
principal = "robot"
key_sha256 = "{key_sha}"
[auth.jwt]
issuer = "https://issuer.test"
audience = "a2a-edge"
jwks_file = "{jwks}"
algorithms = ["ES256"]
jwks_min_refresh_ms = 1000
"#,
        jwks = jwks_file.display()
    );
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        extra_server: String::new(),
        extra_tls: format!(
            "client_auth = \"{client_auth}\"\nclient_ca_file = \"{}\"\n",
            pki.ca_file.display()
        ),
        extra_auth: extra_policy,
        ..Default::default()
    })
    .await;
    Setup {
        proxy,
        up,
        jwks_file,
        k1,
        pki,
        _dir: dir,
    }
}

/// Waits (5 s at most) for the edge to close `c`.
async fn wait_for_close(c: &Client) {
    let started = Instant::now();
    while !c.is_closed() && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts that `c` closes (within [`wait_for_close`]'s 5 s) and serves nothing more (a
/// request with `headers` fails); `why` names the case.
async fn assert_ended(c: &mut Client, headers: &[(&str, &str)], why: &str) {
    wait_for_close(c).await;
    assert!(c.is_closed(), "{why}: the connection stayed open");
    let sent = c.try_request("POST", "/", headers, BODY).await;
    assert!(sent.is_err(), "{why}: served: {sent:?}");
}

/// Whether a connection attempt was refused: its handshake failed, or its first request
/// (`headers`, [`BODY`]) did (TLS 1.3 reports a refused client certificate after the
/// handshake).
async fn refused<E>(connected: Result<Client, E>, headers: &[(&str, &str)]) -> bool {
    match connected {
        Err(_) => true,
        Ok(mut c) => c.try_request("POST", "/", headers, BODY).await.is_err(),
    }
}

fn h<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = vec![("content-type", "application/json"), ("a2a-version", "1.0")];
    v.extend_from_slice(pairs);
    v
}

#[tokio::test]
async fn every_scheme_admits_its_caller_and_the_agent_sees_the_principal() {
    let s = setup("optional", "").await;
    let basic = format!("Basic {}", STANDARD.encode("alice:s3cret:pw"));
    let jwt = format!("Bearer {}", s.k1.sign(&claims("user-7")));
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![("authorization", "Bearer test-token-0123456789")],
            "tester",
        ),
        (vec![("authorization", basic.as_str())], "alice"),
        (vec![("x-my-key", "key-abc-123")], "robot"),
        (vec![("authorization", jwt.as_str())], "jwt:user-7"),
    ];
    for proto in PROTOS {
        let mut c = s.proxy.client(proto).await;
        for (headers, principal) in &cases {
            let (status, _, body) = c.request("POST", "/", &h(headers), BODY).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "{headers:?}: {}",
                String::from_utf8_lossy(&body)
            );
            let last = s.up.rpc_requests().pop().unwrap();
            assert_eq!(last.headers["x-a2a-edge-principal"], *principal);
            assert!(last.headers.get("x-my-key").is_none());
            // The caller's credential never reaches the agent.
            let sent = format!("{:?}", last.headers);
            for (_, v) in headers.iter() {
                assert!(!sent.contains(v), "{v} reached the agent");
            }
        }
        // A client certificate alone is enough.
        let mut c = Client::try_connect(s.proxy.addr, &s.proxy.ca, proto, Some(s.pki.good.clone()))
            .await
            .unwrap();
        let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
        assert_eq!(status, StatusCode::OK);
        let last = s.up.rpc_requests().pop().unwrap();
        assert_eq!(
            last.headers["x-a2a-edge-principal"],
            "mtls:spiffe://example.org/ns/prod/sa/ci"
        );
    }
}

#[tokio::test]
async fn attacks_get_401_and_never_reach_the_agent() {
    let s = setup(
        "optional",
        "failures_per_minute = 100000\nfailures_burst = 100000\n",
    )
    .await;
    let big = format!("Bearer {}", "a".repeat(16 * 1024));
    let none_token = format!(
        "Bearer {}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"k1","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims("mallory").to_string())
    );
    let hs_with_public = {
        let mut hd = Header::new(Algorithm::HS256);
        hd.kid = Some("k1".into());
        let public = s.k1.pair.public_key_raw().to_vec();
        format!(
            "Bearer {}",
            encode(&hd, &claims("mallory"), &EncodingKey::from_secret(&public)).unwrap()
        )
    };
    let expired = format!("Bearer {}", s.k1.sign(&json!({"iss": "https://issuer.test", "aud": "a2a-edge", "sub": "x", "exp": now() - 3600})));
    let not_yet = format!("Bearer {}", s.k1.sign(&json!({"iss": "https://issuer.test", "aud": "a2a-edge", "sub": "x", "exp": now() + 7200, "nbf": now() + 3600})));
    let wrong_aud = format!("Bearer {}", s.k1.sign(&json!({"iss": "https://issuer.test", "aud": "someone-else", "sub": "x", "exp": now() + 600})));
    let wrong_iss = format!(
        "Bearer {}",
        s.k1.sign(
            &json!({"iss": "https://evil.test", "aud": "a2a-edge", "sub": "x", "exp": now() + 600})
        )
    );
    let no_kid = {
        let hd = Header::new(Algorithm::ES256);
        format!(
            "Bearer {}",
            encode(
                &hd,
                &claims("x"),
                &EncodingKey::from_ec_der(&s.k1.pair.serialize_der())
            )
            .unwrap()
        )
    };
    let unknown_kid = format!("Bearer {}", JwtKey::new("k9").sign(&claims("x")));
    let basic_no_colon = format!("Basic {}", STANDARD.encode("alice"));
    let basic_wrong = format!("Basic {}", STANDARD.encode("alice:wrong"));
    let basic_unknown = format!("Basic {}", STANDARD.encode("bob:s3cret:pw"));
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("missing", vec![]),
        ("empty", vec![("authorization", "")]),
        ("wrong scheme", vec![("authorization", "Digest username=x")]),
        (
            "two headers",
            vec![
                ("authorization", "Bearer test-token-0123456789"),
                ("authorization", "Bearer test-token-0123456789"),
            ],
        ),
        ("16 KiB", vec![("authorization", big.as_str())]),
        ("wrong token", vec![("authorization", "Bearer wrong-token")]),
        (
            "basic without colon",
            vec![("authorization", basic_no_colon.as_str())],
        ),
        (
            "basic bad base64",
            vec![("authorization", "Basic YWxpY2U6c3=")],
        ),
        (
            "basic wrong password",
            vec![("authorization", basic_wrong.as_str())],
        ),
        (
            "basic unknown user",
            vec![("authorization", basic_unknown.as_str())],
        ),
        ("api key wrong", vec![("x-my-key", "nope")]),
        ("api key in the query", vec![]),
        ("jwt alg none", vec![("authorization", none_token.as_str())]),
        (
            "jwt hs256 with the public key",
            vec![("authorization", hs_with_public.as_str())],
        ),
        ("jwt expired", vec![("authorization", expired.as_str())]),
        (
            "jwt not yet valid",
            vec![("authorization", not_yet.as_str())],
        ),
        (
            "jwt wrong audience",
            vec![("authorization", wrong_aud.as_str())],
        ),
        (
            "jwt wrong issuer",
            vec![("authorization", wrong_iss.as_str())],
        ),
        ("jwt without kid", vec![("authorization", no_kid.as_str())]),
        (
            "jwt unknown kid",
            vec![("authorization", unknown_kid.as_str())],
        ),
    ];
    for proto in PROTOS {
        let mut c = s.proxy.client(proto).await;
        for (name, headers) in &cases {
            let path = if *name == "api key in the query" {
                "/?api_key=key-abc-123&X-My-Key=key-abc-123"
            } else {
                "/"
            };
            let (status, rh, body) = c.request("POST", path, &h(headers), BODY).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
            assert_eq!(body, r#"{"error":"Unauthorized"}"#, "{name}");
            let challenges: Vec<&str> = rh
                .get_all("www-authenticate")
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect();
            assert!(
                challenges.iter().any(|c| c.starts_with("Bearer"))
                    && challenges.iter().any(|c| c.starts_with("Basic")),
                "{name}: {challenges:?}"
            );
        }
        // A non-ASCII token is refused with 401, never a 500 (iac-code crashes on it).
        let mut req_headers = h(&[]);
        req_headers.push(("x-ignored", "1"));
        let mut raw = http::Request::builder()
            .method("POST")
            .uri("https://localhost/");
        if proto == Proto::H1 {
            raw = raw.header("host", "localhost");
        }
        for (k, v) in req_headers {
            raw = raw.header(k, v);
        }
        raw = raw.header(
            "authorization",
            http::HeaderValue::from_bytes(b"Bearer t\xc3\xa9st").unwrap(),
        );
        let resp = c
            .send(
                raw.body(http_body_util::Full::new(bytes::Bytes::from(BODY)))
                    .unwrap(),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    assert!(
        s.up.rpc_requests().is_empty(),
        "{:?}",
        s.up.rpc_requests().len()
    );
}

#[tokio::test]
async fn a_new_jwt_key_is_found_after_the_jwks_rotates() {
    let s = setup("optional", "").await;
    let k2 = JwtKey::new("k2");
    let token = format!("Bearer {}", k2.sign(&claims("rotated")));
    let mut c = s.proxy.client(Proto::H2).await;
    let (status, _, _) = c
        .request("POST", "/", &h(&[("authorization", token.as_str())]), BODY)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The issuer publishes k2 next to k1 (atomically, as an operator would).
    let tmp = s.jwks_file.with_extension("tmp");
    std::fs::write(&tmp, json!({"keys": [s.k1.jwk(), k2.jwk()]}).to_string()).unwrap();
    std::fs::rename(&tmp, &s.jwks_file).unwrap();
    // The set is re-read at most once a second (`jwks_min_refresh_ms`, its least value):
    // the 401 above just re-read it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _, _) = c
        .request("POST", "/", &h(&[("authorization", token.as_str())]), BODY)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        s.up.rpc_requests().pop().unwrap().headers["x-a2a-edge-principal"],
        "jwt:rotated"
    );
}

#[tokio::test]
async fn client_certificates_when_required() {
    let s = setup("required", "").await;
    for proto in PROTOS {
        // No certificate: the handshake (or the first read after it) fails.
        let refused = match Client::try_connect(s.proxy.addr, &s.proxy.ca, proto, None).await {
            Err(_) => true,
            Ok(mut c) => c
                .try_request(
                    "POST",
                    "/",
                    &h(&[("authorization", "Bearer test-token-0123456789")]),
                    BODY,
                )
                .await
                .is_err(),
        };
        assert!(refused, "no certificate was accepted");
        // A certificate from another CA: refused the same way.
        let refused = match Client::try_connect(
            s.proxy.addr,
            &s.proxy.ca,
            proto,
            Some(s.pki.foreign.clone()),
        )
        .await
        {
            Err(_) => true,
            Ok(mut c) => c.try_request("POST", "/", &h(&[]), BODY).await.is_err(),
        };
        assert!(refused, "a foreign certificate was accepted");
        let mut c = Client::try_connect(s.proxy.addr, &s.proxy.ca, proto, Some(s.pki.good.clone()))
            .await
            .unwrap();
        let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(s.up.rpc_requests().len(), 2);
}

#[tokio::test]
async fn repeated_failures_are_throttled_with_429() {
    let s = setup("optional", "failures_per_minute = 1\nfailures_burst = 3\n").await;
    let mut c = s.proxy.client(Proto::H1).await;
    for _ in 0..3 {
        let (status, _, _) = c
            .request("POST", "/", &h(&[("authorization", "Bearer guess")]), BODY)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, headers, body) = c
        .request("POST", "/", &h(&[("authorization", "Bearer guess")]), BODY)
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry >= 1);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["reason"],
        "auth.throttled"
    );
    // Blocked before the credential is looked at: even the right token gets 429 now.
    let (status, _, _) = c
        .request(
            "POST",
            "/",
            &h(&[("authorization", "Bearer test-token-0123456789")]),
            BODY,
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(s.up.rpc_requests().is_empty());
}

/// A wave of password guesses sent at once, the right one last: each waits its turn for a
/// password check, and the wave's failures spend the address's budget while the right one
/// waits. It is refused like them (429), not let through past the spent budget, and never
/// reaches the agent.
#[tokio::test]
async fn a_wave_of_guesses_sent_at_once_is_throttled_right_one_included() {
    let s = setup("optional", "failures_per_minute = 1\nfailures_burst = 3\n").await;
    let wrong = format!("Basic {}", STANDARD.encode("alice:guess"));
    let right = format!("Basic {}", STANDARD.encode("alice:s3cret:pw"));
    let mut waves = Vec::new();
    // Two password checks' worth of wrong guesses (4 run at once), then the right one.
    for i in 0..9 {
        let auth = if i < 8 { wrong.clone() } else { right.clone() };
        let mut c = s.proxy.client(Proto::H1).await;
        waves.push(tokio::spawn(async move {
            let (status, _, _) = c
                .request("POST", "/", &h(&[("authorization", auth.as_str())]), BODY)
                .await;
            status
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut statuses = Vec::new();
    for w in waves {
        statuses.push(w.await.unwrap());
    }
    assert_eq!(statuses[8], StatusCode::TOO_MANY_REQUESTS, "{statuses:?}");
    // (the budget's three failures answered 401, every other guess 429)
    let unauthorized = statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED);
    assert_eq!(unauthorized.count(), 3, "{statuses:?}");
    assert!(s.up.rpc_requests().is_empty());
}

/// A policy that asks for client certificates (`optional`) under `pki`'s CA, for `up`.
fn optional_mtls_policy(dir: &Path, pki: &ClientPki, up: &RecordingUpstream) -> String {
    let o = ProxyOpts {
        upstream_url: up.url.clone(),
        extra_tls: format!(
            "client_auth = \"optional\"\nclient_ca_file = \"{}\"\n",
            pki.ca_file.display()
        ),
        ..Default::default()
    };
    policy_text(dir, &o)
}

/// `optional_mtls_policy`'s `base` with `crl_file` as the client CRLs, and an admin
/// listener (for the gauge).
fn crl_policy(base: &str, crl_file: &Path) -> String {
    let text = base
        .replace(
            "client_auth = \"optional\"\n",
            &format!(
                "client_auth = \"optional\"\nclient_crl_file = \"{}\"\n",
                crl_file.display()
            ),
        )
        .replace("[server]\n", "[server]\nadmin_listen = \"127.0.0.1:0\"\n");
    assert!(text.contains("client_crl_file") && text.contains("admin_listen"));
    text
}

/// A temp dir with a client PKI, and an echoing agent.
async fn mtls_setup(name: &str) -> (TempDir, ClientPki, RecordingUpstream) {
    let dir = TempDir::new(name);
    let pki = client_pki(dir.path());
    (dir, pki, RecordingUpstream::start(Reply::Echo).await)
}

/// A connection presenting `pki`'s good certificate, served one request.
async fn served_with_certificate(proxy: &Proxy, pki: &ClientPki, proto: Proto) -> Client {
    let mut c = Client::try_connect(proxy.addr, &proxy.ca, proto, Some(pki.good.clone()))
        .await
        .unwrap();
    let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
    assert_eq!(status, StatusCode::OK, "{proto:?}");
    c
}

/// A reload closes the connections open before it (gracefully: what runs finishes), so that
/// one whose client certificate was verified under the old client CAs serves no request
/// under the new ones; a new connection with that certificate fails its handshake.
#[tokio::test]
async fn a_reload_closes_connections_verified_under_the_old_client_cas() {
    let (dir, pki, up) = mtls_setup("reload-ca").await;
    let text = optional_mtls_policy(dir.path(), &pki, &up);
    let other_ca = dir.path().join("other-ca.pem");
    std::fs::write(&other_ca, ca("the new client CA").0.pem()).unwrap();
    let reloaded = text.replace(
        &pki.ca_file.display().to_string(),
        &other_ca.display().to_string(),
    );
    assert_ne!(text, reloaded);
    let proxy = Proxy::start_text(dir, &text).await;
    let connect = |proto| Client::try_connect(proxy.addr, &proxy.ca, proto, Some(pki.good.clone()));
    let mut open = Vec::new();
    for proto in PROTOS {
        open.push((proto, served_with_certificate(&proxy, &pki, proto).await));
    }
    proxy.reload(&reloaded).await;
    for (proto, mut c) in open {
        assert_ended(&mut c, &h(&[]), &format!("{proto:?}, after the reload")).await;
        let refused = refused(connect(proto).await, &h(&[])).await;
        assert!(refused, "{proto:?}: the old CA's certificate was accepted");
    }
    assert_eq!(up.rpc_requests().len(), 2);
}

/// A connection is as good as the client certificate chain it was admitted by: when its
/// leaf, or an intermediate it presented, expires, the connection closes (h1 and h2), so no
/// request is served under it past that notAfter, while a connection whose certificate is
/// still valid stays open and serving. A new handshake with the expired chain fails.
#[tokio::test]
async fn a_connection_closes_when_its_client_certificate_expires() {
    let (dir, pki, up) = mtls_setup("cert-expiry").await;
    let text = optional_mtls_policy(dir.path(), &pki, &up);
    let proxy = Proxy::start_text(dir, &text).await;
    let expires = time::OffsetDateTime::now_utc() + time::Duration::seconds(4);
    let short = leaf_until(
        &pki.ca,
        "spiffe://example.org/ns/prod/sa/short",
        0x5eed_0003,
        expires,
    );
    // A long-lived leaf under an intermediate that expires as soon, the chain presented.
    let intermediate_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name
        .push(DnType::CommonName, "short intermediate");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.not_after = expires;
    let intermediate = (
        p.signed_by(&intermediate_key, &pki.ca.0, &pki.ca.1)
            .unwrap(),
        intermediate_key,
    );
    let (mut under, under_key) = leaf_with_serial(
        &intermediate,
        "spiffe://example.org/ns/prod/sa/under",
        0x5eed_0004,
    );
    under.push(intermediate.0.der().clone());
    let under = (under, under_key);
    let mut open = Vec::new();
    for proto in PROTOS {
        for (what, cert) in [("leaf", &short), ("intermediate", &under)] {
            let mut c = Client::try_connect(proxy.addr, &proxy.ca, proto, Some(cert.clone()))
                .await
                .unwrap();
            let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
            assert_eq!(status, StatusCode::OK, "{proto:?} {what}");
            open.push((proto, what, cert, c));
        }
    }
    let mut long = Vec::new();
    for proto in PROTOS {
        long.push((proto, served_with_certificate(&proxy, &pki, proto).await));
    }
    let until_expiry = |margin: f64| {
        let left = (expires - time::OffsetDateTime::now_utc()).as_seconds_f64() + margin;
        Duration::from_secs_f64(left.max(0.0))
    };
    // Still valid a second before: open and serving.
    tokio::time::sleep(until_expiry(-1.5)).await;
    for (proto, what, _, conn) in &mut open {
        assert!(
            !conn.is_closed(),
            "{proto:?} {what}: closed before it expired"
        );
        let (status, _, _) = conn.request("POST", "/", &h(&[]), BODY).await;
        assert_eq!(status, StatusCode::OK, "{proto:?} {what}: before expiry");
    }
    tokio::time::sleep(until_expiry(0.0)).await;
    for (proto, what, cert, mut conn) in open {
        assert_ended(
            &mut conn,
            &h(&[]),
            &format!("{proto:?} {what}, past expiry"),
        )
        .await;
        let again = Client::try_connect(proxy.addr, &proxy.ca, proto, Some(cert.clone())).await;
        assert!(
            refused(again, &h(&[])).await,
            "{proto:?} {what}: an expired chain was accepted"
        );
    }
    for (proto, mut conn) in long {
        assert!(
            !conn.is_closed(),
            "{proto:?}: the valid certificate's connection closed"
        );
        let (status, _, _) = conn.request("POST", "/", &h(&[]), BODY).await;
        assert_eq!(status, StatusCode::OK, "{proto:?}");
    }
    // Per protocol: two under each expiring chain, two under the long one.
    assert_eq!(up.rpc_requests().len(), 12);
}

/// A reload that keeps what the client CAs admit (the same certificates, even re-encoded
/// in a rewritten file; another mode that still verifies them) leaves client-certificate
/// connections open and serving: each connection's certificate chain is verified again by
/// the new configuration, and only those a new handshake would refuse close. Before, every
/// reload closed every such connection; until stop 54, a change of mode alone did.
#[tokio::test]
async fn a_reload_keeping_the_client_cas_keeps_their_connections() {
    let (dir, pki, up) = mtls_setup("reload-same-ca").await;
    let text = optional_mtls_policy(dir.path(), &pki, &up);
    // The same certificates, written again with other line breaks.
    let same = dir.path().join("same-ca.pem");
    let pem = std::fs::read_to_string(&pki.ca_file).unwrap();
    std::fs::write(&same, format!("\n\n{}", pem.replace('\n', "\r\n"))).unwrap();
    let ca_path = pki.ca_file.display().to_string();
    let kept = text.replace(&ca_path, &same.display().to_string());
    let required = kept.replace("client_auth = \"optional\"", "client_auth = \"required\"");
    assert_ne!(text, kept);
    assert_ne!(kept, required);
    let proxy = Proxy::start_text(dir, &text).await;
    let mut open = Vec::new();
    for proto in PROTOS {
        open.push((proto, served_with_certificate(&proxy, &pki, proto).await));
    }
    // The same CAs; then the mode changes to required (the CAs do not): a new handshake
    // with the certificate would pass, so they stay.
    for (why, reloaded) in [("the same CAs", &kept), ("the mode change", &required)] {
        proxy.reload(reloaded).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        for (proto, c) in &mut open {
            assert!(!c.is_closed(), "{proto:?}: closed by {why}");
            let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
            assert_eq!(status, StatusCode::OK, "{proto:?}: after {why}");
        }
    }
    assert_eq!(up.rpc_requests().len(), 6);
}

/// The gauge's value for `certificate` (`server`, `client_ca`) in `metrics`, if any.
fn expiry_gauge(metrics: &str, certificate: &str) -> Option<u64> {
    let name = "a2a_edge_tls_certificate_expiry_timestamp_seconds";
    let prefix = format!("{name}{{certificate=\"{certificate}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap())
}

/// When the served certificate and the client CAs expire is gauged (and logged) at start and
/// at every reload, for operators to alert on. A reload that brings a certificate past its
/// `notAfter`, or before its `notBefore` (every client would refuse the handshake), is
/// refused while the one in force is good: it stays, served. A client CA past its
/// `notAfter` is taken, with a warning: it still admits its clients (rustls-webpki does not
/// check a trust anchor's validity), and the gauge says so.
#[tokio::test]
async fn certificate_deadlines_are_gauged_and_an_expired_certificate_is_not_reloaded() {
    let (dir, pki, up) = mtls_setup("cert-deadlines").await;
    let base = optional_mtls_policy(dir.path(), &pki, &up)
        .replace("[server]\n", "[server]\nadmin_listen = \"127.0.0.1:0\"\n");
    assert!(base.contains("admin_listen"));
    let served = dir.path().join("certs/server.pem");
    let expired_ca_file = dir.path().join("expired-ca.pem");
    let proxy = Proxy::start_text(dir, &base).await;
    let not_after = |path: &Path| {
        let certs = a2a_edge::tls::load_certs(path).unwrap();
        a2a_edge::tls::der::earliest_not_after(&certs).unwrap()
    };
    let (_, metrics) = admin_get(&proxy, "/metrics").await;
    assert_eq!(
        expiry_gauge(&metrics, "server"),
        Some(not_after(&served)),
        "{metrics}"
    );
    assert_eq!(
        expiry_gauge(&metrics, "client_ca"),
        Some(not_after(&pki.ca_file))
    );

    // A certificate (and its key) that expired in 2021.
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.not_before = rcgen::date_time_ymd(2020, 1, 1);
    p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let old = proxy.dir.path().join("expired.pem");
    let old_key = proxy.dir.path().join("expired.key");
    std::fs::write(&old, p.self_signed(&key).unwrap().pem()).unwrap();
    std::fs::write(&old_key, key.serialize_pem()).unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&old_key, private).unwrap();
    let expired = base.replace(
        "[tls]\n",
        &format!(
            "[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            old.display(),
            old_key.display()
        ),
    );
    assert_ne!(expired, base);
    let e = proxy.try_reload(&expired).await.unwrap_err();
    assert!(e.contains("expired at") && e.contains("notAfter"), "{e}");
    let mut c = served_with_certificate(&proxy, &pki, Proto::H2).await;
    let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
    assert_eq!(status, StatusCode::OK, "the certificate in force is served");
    // And one not valid before 2090 (every client would refuse it until then, too).
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.not_before = rcgen::date_time_ymd(2090, 1, 1);
    p.not_after = rcgen::date_time_ymd(2100, 1, 1);
    std::fs::write(&old, p.self_signed(&key).unwrap().pem()).unwrap();
    let e = proxy.try_reload(&expired).await.unwrap_err();
    assert!(
        e.contains("not valid before") && e.contains("notBefore"),
        "{e}"
    );
    let mut c = served_with_certificate(&proxy, &pki, Proto::H1).await;
    let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
    assert_eq!(status, StatusCode::OK, "the certificate in force is served");
    let (_, metrics) = admin_get(&proxy, "/metrics").await;
    assert_eq!(expiry_gauge(&metrics, "server"), Some(not_after(&served)));

    // A client CA that expired in 2022, and a client certificate of it valid until 4096.
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name
        .push(DnType::CommonName, "an expired client CA");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.not_before = rcgen::date_time_ymd(2020, 1, 1);
    p.not_after = rcgen::date_time_ymd(2022, 1, 1);
    let expired_ca = (p.self_signed(&ca_key).unwrap(), ca_key);
    std::fs::write(&expired_ca_file, expired_ca.0.pem()).unwrap();
    let client = leaf(&expired_ca, "spiffe://example.org/ns/prod/sa/old");
    let reloaded = base.replace(
        &pki.ca_file.display().to_string(),
        &expired_ca_file.display().to_string(),
    );
    assert_ne!(reloaded, base);
    proxy.reload(&reloaded).await;
    let (_, metrics) = admin_get(&proxy, "/metrics").await;
    assert_eq!(expiry_gauge(&metrics, "client_ca"), Some(1_640_995_200));
    let mut c = Client::try_connect(proxy.addr, &proxy.ca, Proto::H1, Some(client))
        .await
        .unwrap();
    let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
    assert_eq!(status, StatusCode::OK, "the expired CA's client");
}

/// `tls.client_crl_file`: a revoked client certificate fails its handshake (h1 and h2, in
/// both optional and required modes), so no request of its reaches the agent, while the same
/// CA's other certificates are served; a CRL that says nothing of the client CA (its
/// certificates' status unknown) fails every certificate of it; a CRL past its nextUpdate
/// refuses the reload while the CRLs in force are good, and so does a CRL forged in the
/// client CA's name. A reload that brings a CRL revoking
/// an open connection's certificate closes that connection and leaves the others (a padded
/// chain, not kept, closes too). With `client_auth = "off"` the CA and CRL files are
/// ignored, and said to be. The gauge gives the CRLs' nextUpdate.
#[tokio::test]
async fn client_certificates_are_checked_against_the_crl() {
    let (dir, pki, up) = mtls_setup("client-crl").await;
    let other = leaf_with_serial(
        &pki.ca,
        "spiffe://example.org/ns/prod/sa/other",
        0x5eed_0002,
    );
    let crl_file = dir.path().join("clients.crl.pem");
    let write_crl = |pem: String| std::fs::write(&crl_file, pem).unwrap();
    write_crl(crl(&pki.ca, &[], 2099));
    let base = optional_mtls_policy(dir.path(), &pki, &up);
    let text = crl_policy(&base, &crl_file);
    let proxy = Proxy::start_text(dir, &text).await;
    // When the CRLs run out (2099-01-01), for operators to alert on.
    let (_, metrics) = admin_get(&proxy, "/metrics").await;
    assert!(
        metrics.contains("a2a_edge_client_crl_next_update_timestamp_seconds 4070908800"),
        "{metrics}"
    );
    let served = |cert: &(Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>), proto| {
        let cert = cert.clone();
        let (addr, ca) = (proxy.addr, proxy.ca.clone());
        async move {
            match Client::try_connect(addr, &ca, proto, Some(cert)).await {
                Err(_) => false,
                Ok(mut c) => matches!(
                    c.try_request("POST", "/", &h(&[]), BODY).await,
                    Ok((StatusCode::OK, _, _))
                ),
            }
        }
    };
    // Nothing revoked: both certificates are served; a new connection per row.
    let mut open = Vec::new();
    for proto in PROTOS {
        assert!(served(&pki.good, proto).await, "{proto:?}");
        assert!(served(&other, proto).await, "{proto:?}");
        open.push((proto, served_with_certificate(&proxy, &pki, proto).await));
    }
    let before = up.rpc_requests().len();
    // The good certificate is revoked: its open connections close, other's are served.
    write_crl(crl(&pki.ca, &[GOOD_SERIAL], 2099));
    let mut others = Vec::new();
    // The other certificate once more, its chain padded past what a connection keeps
    // (80 certificates of an unrelated CA no path uses, about 28 KiB): served, but not kept to verify
    // again, so a change of trust ends it even though nothing revokes it.
    let filler = ca("filler").0.der().clone();
    let padded = (
        std::iter::once(other.0[0].clone())
            .chain(std::iter::repeat(filler).take(80))
            .collect::<Vec<_>>(),
        other.1.clone(),
    );
    let mut padded_open = Vec::new();
    for proto in PROTOS {
        for (cert, into) in [(&other, &mut others), (&padded, &mut padded_open)] {
            let mut c = Client::try_connect(proxy.addr, &proxy.ca, proto, Some(cert.clone()))
                .await
                .unwrap();
            let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
            assert_eq!(status, StatusCode::OK, "{proto:?}");
            into.push(c);
        }
    }
    proxy.reload(&text).await;
    for (proto, c) in open.into_iter().chain(PROTOS.into_iter().zip(padded_open)) {
        wait_for_close(&c).await;
        assert!(
            c.is_closed(),
            "{proto:?}: a revoked certificate's connection stayed"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for c in &mut others {
        assert!(
            !c.is_closed(),
            "an unrevoked certificate's connection closed"
        );
        let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
        assert_eq!(status, StatusCode::OK);
    }
    let after = up.rpc_requests().len();
    assert_eq!(after, before + 6);
    let required = text.replace("client_auth = \"optional\"", "client_auth = \"required\"");
    // Each row's CRL is the one in force: the other certificate (revoked by none) is served
    // under the revoking ones and refused under the foreign one. A CRL past its nextUpdate
    // (it would refuse every certificate) refuses the reload: the CRL before it stays.
    for (why, mode, pem, reloads, other_served) in [
        (
            "revoked, optional",
            &text,
            crl(&pki.ca, &[GOOD_SERIAL], 2099),
            true,
            true,
        ),
        (
            "revoked, required",
            &required,
            crl(&pki.ca, &[GOOD_SERIAL], 2099),
            true,
            true,
        ),
        ("expired CRL", &text, crl(&pki.ca, &[], 2021), false, true),
        // In the client CA's name, signed by another key: it would refuse every certificate
        // of that CA, so the reload is refused.
        (
            "a forged CRL",
            &text,
            crl(&ca("client CA"), &[], 2099),
            false,
            true,
        ),
        (
            "another CA's CRL",
            &text,
            crl(&ca("someone else"), &[], 2099),
            true,
            false,
        ),
    ] {
        write_crl(pem);
        let r = proxy.try_reload(mode).await;
        assert_eq!(r.is_ok(), reloads, "{why}: {r:?}");
        if let Err(e) = r {
            let said = match why {
                "a forged CRL" => "its signature does not verify",
                _ => "nextUpdate",
            };
            assert!(e.contains(said), "{why}: {e}");
        }
        for proto in PROTOS {
            assert!(!served(&pki.good, proto).await, "{why}, {proto:?}: served");
            assert_eq!(
                served(&other, proto).await,
                other_served,
                "{why}, {proto:?}"
            );
        }
    }
    // The good certificate's requests after the revocation never reached the agent (the
    // other's did, in the four rows that served it).
    assert_eq!(up.rpc_requests().len(), after + 8);
    // Without client certificates a CA or CRL file means nothing: ignored, and said so.
    let off = base.replace(
        "client_auth = \"optional\"\n",
        &format!(
            "client_auth = \"off\"\nclient_crl_file = \"{}\"\n",
            crl_file.display()
        ),
    );
    assert_ne!(off, base);
    let p = a2a_edge::policy::Policy::from_toml(
        Path::new("p.toml"),
        &off,
        a2a_edge::policy::LoadMode::Check,
    )
    .unwrap();
    assert_eq!(p.tls.ignored, ["tls.client_ca_file", "tls.client_crl_file"]);
    assert_eq!((p.tls.client_ca_file, p.tls.client_crl_file), (None, None));
}

/// A reload that makes client certificates required closes the connections that were
/// admitted without one (gracefully: what runs finishes), over both protocols: their
/// handshake would fail under the new policy, and a bearer token no longer stands in for
/// the certificate. A new connection without one fails its handshake; one with a good
/// certificate is served.
#[tokio::test]
async fn a_reload_requiring_client_certificates_closes_connections_without_one() {
    let (dir, pki, up) = mtls_setup("reload-required").await;
    let text = optional_mtls_policy(dir.path(), &pki, &up);
    let required = text.replace("client_auth = \"optional\"", "client_auth = \"required\"");
    assert_ne!(text, required);
    let proxy = Proxy::start_text(dir, &text).await;
    let bearer = h(&[("authorization", ALICE)]);
    let mut open = Vec::new();
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let (status, _, _) = c.request("POST", "/", &bearer, BODY).await;
        assert_eq!(status, StatusCode::OK, "{proto:?}: before the reload");
        open.push((proto, c));
    }
    proxy.reload(&required).await;
    for (proto, mut c) in open {
        let why = format!("{proto:?}, without a certificate after the reload");
        assert_ended(&mut c, &bearer, &why).await;
        let connected = Client::try_connect(proxy.addr, &proxy.ca, proto, None).await;
        let refused = refused(connected, &bearer).await;
        assert!(
            refused,
            "{proto:?}: a new connection without a certificate was served"
        );
        served_with_certificate(&proxy, &pki, proto).await;
    }
    assert_eq!(up.rpc_requests().len(), 4);
}

/// A valid API key beside a password guess in `Authorization` is served (any one valid
/// credential is enough), but the guess is counted: guesses behind a valid key are throttled
/// like any others, over both protocols.
#[tokio::test]
async fn a_guess_beside_a_valid_key_is_throttled_too() {
    let guess = format!("Basic {}", STANDARD.encode("alice:guess"));
    for proto in [Proto::H1, Proto::H2] {
        let s = setup("optional", "failures_per_minute = 1\nfailures_burst = 3\n").await;
        let mut c = s.proxy.client(proto).await;
        let both = h(&[("authorization", &guess), ("x-my-key", "key-abc-123")]);
        for _ in 0..3 {
            let (status, _, _) = c.request("POST", "/", &both, BODY).await;
            assert_eq!(status, StatusCode::OK, "{proto:?}");
        }
        // The burst is spent: the next guess is refused, and so is everything after it.
        let (status, _, body) = c.request("POST", "/", &both, BODY).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{proto:?}");
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["reason"],
            "auth.throttled"
        );
        let key_only = h(&[("x-my-key", "key-abc-123")]);
        let (status, _, _) = c.request("POST", "/", &key_only, BODY).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{proto:?}");
        assert_eq!(s.up.rpc_requests().len(), 3, "{proto:?}");
    }
}

#[tokio::test]
async fn the_extended_card_needs_an_authenticated_caller() {
    let proxy = Proxy::start(ProxyOpts {
        extra_auth: "allow_anonymous = true\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H1).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}"#;
    let (status, _, _) = c.request("POST", "/", &h(&[]), body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, rb) = c
        .request(
            "POST",
            "/",
            &h(&[("authorization", "Bearer test-token-0123456789")]),
            body,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(serde_json::from_slice::<Value>(&rb).unwrap()["result"]["name"].is_string());
    // Anonymous callers may use the other methods.
    let (status, _, _) = c.request("POST", "/", &h(&[]), BODY).await;
    assert_eq!(status, StatusCode::OK);
}

/// The real binary with every scheme configured from the environment: after requests with
/// right and wrong secrets, none of the secrets appears in its output or reached the agent.
#[tokio::test]
async fn no_secret_appears_in_any_log() {
    let dir = TempDir::new("auth-logs");
    let up = RecordingUpstream::start(Reply::Echo).await;
    let secrets = [
        ("T_BEARER", "bearer-secret-AAAA1111"),
        ("T_PASSWORD", "password-secret-BBBB2222"),
        ("T_APIKEY", "apikey-secret-CCCC3333"),
        ("T_UPSTREAM", "upstream-secret-DDDD4444"),
    ];
    let policy = format!(
        r#"[server]
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:0/"
[tls]
dev = true
dev_dir = "{d}/certs"
[[upstreams]]
name = "agent"
url = "{url}"
token_env = "T_UPSTREAM"
[auth]
[[auth.bearer]]
principal = "b"
token_env = "T_BEARER"
[[auth.basic]]
username = "alice"
password_env = "T_PASSWORD"
[auth.api_key]
[[auth.api_key.keys]]
principal = "k"
key_env = "T_APIKEY"
"#,
        d = dir.path().display(),
        url = up.url
    );
    let file = dir.path().join("p.toml");
    std::fs::write(&file, policy).unwrap();
    let ready = dir.path().join("ready.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-edge"));
    cmd.args(["serve", "--policy"])
        .arg(&file)
        .arg("--ready-file")
        .arg(&ready);
    for (k, v) in secrets {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    let mut c = Client::connect(
        info["listen"].as_str().unwrap().parse().unwrap(),
        &dir.path().join("certs/ca.pem"),
        Proto::H1,
    )
    .await;
    let good_basic = format!(
        "Basic {}",
        STANDARD.encode("alice:password-secret-BBBB2222")
    );
    let bad_basic = format!(
        "Basic {}",
        STANDARD.encode("alice:password-secret-BBBB2222x")
    );
    let attempts: Vec<Vec<(&str, &str)>> = vec![
        vec![("authorization", "Bearer bearer-secret-AAAA1111")],
        vec![("authorization", "Bearer bearer-secret-AAAA1111-wrong")],
        vec![("authorization", good_basic.as_str())],
        vec![("authorization", bad_basic.as_str())],
        vec![("x-api-key", "apikey-secret-CCCC3333")],
        vec![("x-api-key", "apikey-secret-CCCC3333-wrong")],
    ];
    let mut ok = 0;
    for a in &attempts {
        let (status, _, _) = c.request("POST", "/", &h(a), BODY).await;
        if status == StatusCode::OK {
            ok += 1;
        }
    }
    assert_eq!(ok, 3);
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(
        out.contains("\"principal\":\"alice\""),
        "the log has the decisions: {out}"
    );
    let mut agent_saw = String::new();
    for r in up.requests() {
        agent_saw.push_str(&format!(
            "{:?}{}",
            r.headers,
            String::from_utf8_lossy(&r.body)
        ));
    }
    for (_, secret) in secrets {
        let stem = &secret[..secret.len() - 4];
        assert!(!out.contains(stem), "{secret} in the proxy's output");
        if !secret.starts_with("upstream") {
            assert!(!agent_saw.contains(stem), "{secret} reached the agent");
        }
    }
    assert!(
        agent_saw.contains("upstream-secret-DDDD4444"),
        "the agent gets the proxy's own credential"
    );
}

/// A reload that takes a stream's caller's access away ends the stream (`auth.revoked`),
/// for SendStreamingMessage and SubscribeToTask, over HTTP/1.1 and HTTP/2: its token
/// rotated away, its grants no longer giving it the method, or its network denied. A reload that leaves the
/// caller as it was (another principal's change) leaves the stream running.
#[tokio::test]
async fn a_reload_that_revokes_a_caller_ends_its_streams() {
    let dir = TempDir::new("reload-revoke");
    let with = |extra: &str| {
        policy_text(
            dir.path(),
            &ProxyOpts {
                extra_policy: extra.into(),
                ..Default::default()
            },
        )
    };
    let base = with("");
    let other = hex(&a2a_edge::policy::sha256(b"another-token-0123456789"));
    let tester = hex(&a2a_edge::policy::sha256(b"test-token-0123456789"));
    let kept = with("[limits]\nmax_in_flight_per_principal = 50\n");
    let rotated = base.replace(&tester, &other);
    assert_ne!(rotated, base);
    let no_streams = with(
        "[authz]\n[[authz.rules]]\nname = \"no-streams\"\nprincipals = [\"tester\"]\nmethods = [\"SendMessage\", \"GetTask\", \"ListTasks\", \"CancelTask\"]\n",
    );
    let denied = with("[network]\ndeny = [\"127.0.0.0/8\"]\n");
    let proxy = Proxy::start_text(dir, &base).await;
    for (revoking, why) in [
        (&rotated, "token rotated"),
        (&no_streams, "method no longer granted"),
        (&denied, "network denied"),
    ] {
        for proto in PROTOS {
            proxy.reload(&base).await;
            let mut c = proxy.client(proto).await;
            let resp = c
                .rpc_stream(
                    "SendStreamingMessage",
                    message("[[wait]] long turn", json!({})),
                )
                .await;
            let mut send = EventReader::new(resp);
            let (_, first) = send.next().await.expect("the task");
            let task = first["result"]["task"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{first}"))
                .to_string();
            let mut c2 = proxy.client(proto).await;
            let resp = c2
                .rpc_stream("SubscribeToTask", json!({ "id": task }))
                .await;
            let mut sub = EventReader::new(resp);
            sub.next().await.expect("the subscription's first event");
            // Another principal's change: both streams go on.
            proxy.reload(&kept).await;
            for (name, s) in [("send", &mut send), ("subscribe", &mut sub)] {
                let next = tokio::time::timeout(Duration::from_millis(700), s.next()).await;
                if let Ok(Some((event, v))) = &next {
                    assert_ne!(event.as_deref(), Some("error"), "{name} {proto:?}: {v}");
                }
                assert!(!matches!(next, Ok(None)), "{name} {proto:?}: ended");
            }
            proxy.reload(revoking).await;
            for (name, s) in [("send", &mut send), ("subscribe", &mut sub)] {
                let started = Instant::now();
                let (event, v) = loop {
                    let next = tokio::time::timeout(Duration::from_secs(5), s.next())
                        .await
                        .unwrap_or_else(|_| panic!("{why}, {name} {proto:?}: still open"))
                        .unwrap_or_else(|| panic!("{why}, {name} {proto:?}: ended without a word"));
                    if next.0.as_deref() == Some("error") {
                        break next;
                    }
                };
                assert_eq!(event.as_deref(), Some("error"));
                assert_eq!(
                    v["error"]["data"][0]["reason"], "auth.revoked",
                    "{why}, {name} {proto:?}: {v}"
                );
                assert!(started.elapsed() < Duration::from_secs(5), "{why}, {name}");
            }
        }
    }
}

/// A connection a reload outlives (its network now denied) gets a bounded time for what
/// still runs on it: a request its agent never answers does not keep it, and the denied
/// peer with it, for the agent's whole response timeout.
#[tokio::test]
async fn a_connection_a_reload_outlives_is_dropped_after_its_grace() {
    let up = RecordingUpstream::start(Reply::Hang).await;
    let dir = TempDir::new("reload-outlived");
    let with = |extra: &str| {
        policy_text(
            dir.path(),
            &ProxyOpts {
                upstream_url: up.url.clone(),
                extra_policy: extra.into(),
                ..Default::default()
            },
        )
    };
    let (base, denied) = (with(""), with("[network]\ndeny = [\"127.0.0.0/8\"]\n"));
    let proxy = Proxy::start_text(dir, &base).await;
    for proto in PROTOS {
        proxy.reload(&base).await;
        let mut c = proxy.client(proto).await;
        let hanging = tokio::spawn(async move {
            let started = Instant::now();
            let auth = [("authorization", "Bearer test-token-0123456789")];
            let r = c.try_request("POST", "/", &h(&auth), BODY).await;
            (r, started.elapsed())
        });
        // The request is with the agent.
        let started = Instant::now();
        while up.rpc_requests().is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{proto:?}: never forwarded"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        proxy.reload(&denied).await;
        let (r, took) = tokio::time::timeout(Duration::from_secs(20), hanging)
            .await
            .unwrap_or_else(|_| panic!("{proto:?}: the outlived connection held on"))
            .unwrap();
        assert!(r.is_err(), "{proto:?}: answered: {r:?}");
        assert!(took < Duration::from_secs(15), "{proto:?}: {took:?}");
        up.seen.lock().unwrap().clear();
    }
}

/// A stream with `authorization` as its credential (a [[wait]] turn: it runs until ended).
async fn waiting_stream(proxy: &Proxy, proto: Proto, authorization: &str) -> EventReader {
    let mut c = proxy.client(proto).await;
    let body = json!({"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
        "params": message("[[wait]] long turn", json!({}))});
    let mut b = http::Request::builder()
        .method("POST")
        .uri("https://localhost/");
    if proto == Proto::H1 {
        b = b.header("host", "localhost");
    }
    let req = b
        .header("authorization", authorization)
        .header("a2a-version", "1.0")
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    let resp = c.send(req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut events = EventReader::new(resp);
    let (_, first) = events.next().await.expect("the task");
    assert!(first["result"]["task"]["id"].is_string(), "{first}");
    events
}

/// The stream's error event within `wait` (its other events passed over): `Ok(None)` when
/// none came and the stream is open, `Err` when it ended without one.
async fn error_within(s: &mut EventReader, wait: Duration) -> Result<Option<Value>, ()> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, s.next()).await {
            Err(_) => return Ok(None),
            Ok(None) => return Err(()),
            Ok(Some((Some(e), v))) if e == "error" => return Ok(Some(v)),
            Ok(Some(_)) => continue,
        }
    }
}

/// The error event `s` ends with within 5 s, `auth.revoked` (`why`: what should have ended it).
async fn revoked_within(s: &mut EventReader, why: &str) -> Value {
    let v = error_within(s, Duration::from_secs(5))
        .await
        .expect("ended without a word")
        .unwrap_or_else(|| panic!("{why}"));
    assert_eq!(v["error"]["data"][0]["reason"], "auth.revoked", "{v}");
    v
}

/// A stream's caller is proven again at a reload without spending the client's failure
/// budget (two revoked bearer streams from one address leave it unthrottled), and a Basic
/// user is proven by the secret its password was checked against (no password kept, no
/// argon2 run again): the same hash keeps the stream, a new hash ends it.
#[tokio::test]
async fn a_reload_proves_streams_again_without_the_throttle_or_the_password() {
    let dir = TempDir::new("reload-prove");
    let phc = a2a_edge::auth::hash::argon2id_phc(b"s3cret:pw").unwrap();
    let other_phc = a2a_edge::auth::hash::argon2id_phc(b"another-pw").unwrap();
    let with = |phc: &str, extra: &str| {
        policy_text(
            dir.path(),
            &ProxyOpts {
                extra_auth: format!(
                    "failures_per_minute = 1\nfailures_burst = 1\n[[auth.basic]]\nusername = \"alice\"\npassword_hash = \"{phc}\"\n"
                ),
                extra_policy: extra.into(),
                ..Default::default()
            },
        )
    };
    let base = with(&phc, "");
    let other = hex(&a2a_edge::policy::sha256(b"another-token-0123456789"));
    let tester = hex(&a2a_edge::policy::sha256(b"test-token-0123456789"));
    let rotated =
        with(&phc, "[limits]\nmax_in_flight_per_principal = 50\n").replace(&tester, &other);
    let new_password = rotated.replace(&phc, &other_phc);
    let proxy = Proxy::start_text(dir, &base).await;
    let basic = format!("Basic {}", STANDARD.encode("alice:s3cret:pw"));
    let bearer = "Bearer test-token-0123456789";
    let mut a1 = waiting_stream(&proxy, Proto::H2, bearer).await;
    let mut a2 = waiting_stream(&proxy, Proto::H1, bearer).await;
    let mut b = waiting_stream(&proxy, Proto::H2, &basic).await;
    proxy.reload(&rotated).await;
    for (name, s) in [("a1", &mut a1), ("a2", &mut a2)] {
        let v = error_within(s, Duration::from_secs(5))
            .await
            .unwrap_or_else(|_| panic!("{name}: ended without a word"))
            .unwrap_or_else(|| panic!("{name}: still open"));
        assert_eq!(
            v["error"]["data"][0]["reason"], "auth.revoked",
            "{name}: {v}"
        );
    }
    // Alice's secret is the same: her stream goes on.
    assert_eq!(
        error_within(&mut b, Duration::from_millis(700)).await,
        Ok(None)
    );
    // The two revoked streams spent nothing: alice is admitted from the same address.
    let mut c = proxy.client(Proto::H1).await;
    let (status, _, body) = c
        .request(
            "POST",
            "/",
            &h(&[("authorization", &basic)]),
            r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    // A new password hash for alice: her stream ends.
    proxy.reload(&new_password).await;
    let v = revoked_within(&mut b, "alice's stream still open").await;
    assert_eq!(v["error"]["code"], -32050, "{v}");
    assert_eq!(
        v["error"]["message"], "Access revoked by a policy reload",
        "{v}"
    );
}

/// A JWT stream whose token expired since it began is not ended for the expiry, but it is
/// held to each reload all the same: a reload that takes its method away ends it, and so
/// does one that changes the audience its token no longer fits (`auth.revoked`). Before, an
/// expired token's stream skipped the grant check, and the library's expiry error hid the
/// issuer and audience checks.
#[tokio::test]
async fn a_jwt_stream_past_its_expiry_is_held_to_the_new_grants() {
    let dir = TempDir::new("reload-jwt");
    let k1 = JwtKey::new("k1");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [k1.jwk()]}).to_string()).unwrap();
    let with = |audience: &str, extra: &str| {
        policy_text(
            dir.path(),
            &ProxyOpts {
                extra_auth: format!(
                    "[auth.jwt]\nissuer = \"https://issuer.test\"\naudience = \"{audience}\"\njwks_file = \"{}\"\nalgorithms = [\"ES256\"]\nleeway_ms = 0\n",
                    jwks.display()
                ),
                extra_policy: extra.into(),
                ..Default::default()
            },
        )
    };
    let base = with("a2a-edge", "");
    let kept = with("a2a-edge", "[limits]\nmax_in_flight_per_principal = 50\n");
    let rules = "[authz]\n[[authz.rules]]\nname = \"no-streams\"\nprincipals = [\"jwt:dora\"]\nmethods = [\"SendMessage\", \"GetTask\", \"ListTasks\"]\n[[authz.rules]]\nname = \"erin\"\nprincipals = [\"jwt:erin\"]\nmethods = [\"*\"]\n";
    let no_streams = with("a2a-edge", rules);
    let other_audience = with("another-audience", rules);
    let proxy = Proxy::start_text(dir, &base).await;
    let token = |sub: &str| {
        let mut c = claims(sub);
        c["exp"] = json!(now() + 2);
        format!("Bearer {}", k1.sign(&c))
    };
    let mut dora = waiting_stream(&proxy, Proto::H2, &token("dora")).await;
    let mut erin = waiting_stream(&proxy, Proto::H1, &token("erin")).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    // Expired now: a reload that changes nothing of theirs leaves both streams.
    proxy.reload(&kept).await;
    for s in [&mut dora, &mut erin] {
        assert_eq!(error_within(s, Duration::from_millis(500)).await, Ok(None));
    }
    // Dora's method goes: her stream ends; erin's grants stay: his goes on.
    proxy.reload(&no_streams).await;
    revoked_within(
        &mut dora,
        "the expired token's stream kept a method it lost",
    )
    .await;
    assert_eq!(
        error_within(&mut erin, Duration::from_millis(500)).await,
        Ok(None)
    );
    // The audience changes: erin's (expired) token no longer fits it.
    proxy.reload(&other_audience).await;
    revoked_within(
        &mut erin,
        "the expired token's stream outlived an audience change",
    )
    .await;
}

/// CRLs that run out while the edge serves: the open client-certificate connections close at
/// the next reload even though it changes nothing (the CRLs ran out since they were
/// verified), new handshakes are refused, the other credentials go on working, and the reload
/// is taken (the CRLs in force ran out too: refusing would only block it). An edge starts
/// with CRLs that already ran out, the same way, and the gauge says when they did.
#[tokio::test]
async fn client_crls_that_run_out_refuse_certificates_not_the_edge() {
    let (dir, pki, up) = mtls_setup("client-crl-runs-out").await;
    let crl_file = dir.path().join("clients.crl.pem");
    let soon = time::OffsetDateTime::now_utc() + time::Duration::seconds(3);
    std::fs::write(&crl_file, crl_until(&pki.ca, &[], soon)).unwrap();
    let text = crl_policy(&optional_mtls_policy(dir.path(), &pki, &up), &crl_file);
    let proxy = Proxy::start_text(dir, &text).await;
    let mut open = Vec::new();
    for proto in PROTOS {
        open.push((proto, served_with_certificate(&proxy, &pki, proto).await));
    }
    tokio::time::sleep_until(
        tokio::time::Instant::now()
            + Duration::from_secs_f64(
                (soon - time::OffsetDateTime::now_utc())
                    .as_seconds_f64()
                    .max(0.0)
                    + 0.3,
            ),
    )
    .await;
    proxy.reload(&text).await;
    for (proto, c) in open {
        wait_for_close(&c).await;
        assert!(c.is_closed(), "{proto:?}: open after its CRLs ran out");
    }
    for proto in PROTOS {
        let connected =
            Client::try_connect(proxy.addr, &proxy.ca, proto, Some(pki.good.clone())).await;
        let refused = refused(connected, &h(&[])).await;
        assert!(
            refused,
            "{proto:?}: a certificate was taken past its CRLs' nextUpdate"
        );
        let mut c = proxy.client(proto).await;
        let (status, _, _) = c
            .request("POST", "/", &h(&[("authorization", ALICE)]), BODY)
            .await;
        assert_eq!(status, StatusCode::OK, "{proto:?}: the bearer caller");
    }
    let (_, metrics) = admin_get(&proxy, "/metrics").await;
    let at = format!(
        "a2a_edge_client_crl_next_update_timestamp_seconds {}",
        soon.unix_timestamp()
    );
    assert!(metrics.contains(&at), "{at}\n{metrics}");
    // A new edge starts with them too.
    let policy = a2a_edge::policy::Policy::from_toml(
        Path::new("p.toml"),
        &text,
        a2a_edge::policy::LoadMode::Serve,
    )
    .unwrap();
    let again = a2a_edge::server::start(policy).await.unwrap();
    again.shutdown();
    again.wait().await;
}
