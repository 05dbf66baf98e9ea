//! The Agent Card through the proxy over real TLS: caching and conditional requests, stable
//! bytes, signatures that verify with the published JWKS (and HS256 secrets), the agent's own
//! signature checked first, the extended card, and key rotation by reload without a failed
//! request.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use a2a_edge::card::jws::{sign_card, SignOptions};
use a2a_edge::card::keys::SigningKey;
use a2a_edge::card::verify::{verify_card, Verdict, VerifyKeys};
use common::*;
use http::StatusCode;
use serde_json::{json, Value};

const CARD: &str = "/.well-known/agent-card.json";
const HS_SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!!";

fn es256_key(dir: &Path, name: &str) -> String {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, pair.serialize_pem()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

fn card_policy(e1: &str, e2: &str, active: &str, extra: &str) -> String {
    format!(
        r#"[card]
refresh_interval_ms = 1000
active_kid = "{active}"
{extra}
[[card.signing_keys]]
kid = "e1"
alg = "ES256"
private_key_file = "{e1}"
[[card.signing_keys]]
kid = "e2"
alg = "ES256"
private_key_file = "{e2}"
[[card.signing_keys]]
kid = "h1"
alg = "HS256"
secret_env = "A2A_EDGE_TEST_CARD_SECRET"
"#
    )
}

struct Setup {
    proxy: Proxy,
    up: RecordingUpstream,
    dir: TempDir,
    e1: String,
    e2: String,
}

impl Setup {
    /// Reloads the proxy with the same keys, `active` the signing one (as SIGHUP would).
    async fn reload_with_active(&self, active: &str) {
        let text = policy_text(
            self.dir.path(),
            &ProxyOpts {
                upstream_url: self.up.url.clone(),
                extra_policy: card_policy(&self.e1, &self.e2, active, ""),
                ..Default::default()
            },
        );
        self.proxy.reload(&text).await;
    }
}

async fn setup(active: &str, extra: &str) -> Setup {
    std::env::set_var("A2A_EDGE_TEST_CARD_SECRET", HS_SECRET);
    let dir = TempDir::new("card");
    let e1 = es256_key(dir.path(), "e1");
    let e2 = es256_key(dir.path(), "e2");
    let (up, proxy) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: card_policy(&e1, &e2, active, extra),
            ..Default::default()
        },
    )
    .await;
    Setup {
        proxy,
        up,
        dir,
        e1,
        e2,
    }
}

/// The served card holds only what its schema knows, so every member of it is covered by
/// its signature: an agent's own members (here an internal admin address, at the top and in
/// a skill) are not published.
#[tokio::test]
async fn the_served_card_holds_only_what_its_signature_covers() {
    let up = RecordingUpstream::start(Reply::Echo).await;
    {
        let mut card = up.card.lock().unwrap();
        card["adminEndpoint"] = json!("http://10.9.8.7:8000/admin");
        card["skills"] = json!([{"id": "s", "name": "s", "description": "d", "tags": [],
            "endpoint": "http://10.9.8.7:9000/"}]);
    }
    let p = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H2).await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8_lossy(&body);
    assert!(!text.contains("10.9.8.7"), "{text}");
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(card["skills"][0]["id"], "s", "{card}");
    assert!(card.get("adminEndpoint").is_none(), "{card}");
}

/// With `a2a.redact_paths`, the public card (anyone may read it) is cleaned as the extended
/// card and every answer are: an agent's local paths are hidden (before, only the extended
/// card was cleaned). Its links stay.
#[tokio::test]
async fn with_redact_paths_the_public_card_holds_no_local_path() {
    let up = RecordingUpstream::start(Reply::Echo).await;
    {
        let mut card = up.card.lock().unwrap();
        card["description"] = json!("works in /srv/workspaces/team-a/x");
        card["skills"] = json!([{"id": "s", "name": "s", "tags": [],
            "description": "reads /etc/iac/config.yaml"}]);
    }
    for (redact, hidden) in [(false, false), (true, true)] {
        let p = Proxy::start(ProxyOpts {
            upstream_url: up.url.clone(),
            extra_policy: format!("[a2a]\nredact_paths = {redact}\n"),
            ..Default::default()
        })
        .await;
        let mut c = p.client(Proto::H1).await;
        let (status, _, body) = fetch(&mut c, &[]).await;
        assert_eq!(status, StatusCode::OK);
        let card: Value = serde_json::from_slice(&body).unwrap();
        let text = card.to_string();
        for path in ["/srv/workspaces", "/etc/iac"] {
            assert_eq!(
                !text.contains(path),
                hidden,
                "redact_paths = {redact}: {text}"
            );
        }
        if hidden {
            assert_eq!(card["description"], "works in [PATH]", "{card}");
        }
        assert!(
            card["supportedInterfaces"][0]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://")),
            "{card}"
        );
    }
}

async fn fetch(
    c: &mut Client,
    headers: &[(&str, &str)],
) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
    c.request("GET", CARD, headers, "").await
}

async fn jwks_keys(c: &mut Client) -> VerifyKeys {
    let (status, headers, body) = c.request("GET", "/.well-known/jwks.json", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age"));
    let jwks: Value = serde_json::from_slice(&body).unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, ["e1", "e2"], "HS256 secrets are never published");
    for k in jwks["keys"].as_array().unwrap() {
        assert!(k.get("d").is_none(), "a private key part was published");
    }
    let mut keys = VerifyKeys::new();
    keys.add_jwks(&jwks).unwrap();
    keys
}

#[tokio::test]
async fn conditional_requests_follow_rfc_9110() {
    let s = setup("e1", "").await;
    let mut c = s.proxy.client(Proto::H1).await;
    let (status, h, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let etag = h["etag"].to_str().unwrap().to_string();
    let lm = h["last-modified"].to_str().unwrap().to_string();
    assert_eq!(h["cache-control"], "public, max-age=60");
    assert!(etag.starts_with("\"sha256-") && !etag.starts_with("W/"));
    let secs = a2a_edge::time::parse_http_date(&lm).unwrap();
    let before = a2a_edge::time::format_http_date(secs - 10);
    let after = a2a_edge::time::format_http_date(secs + 10);
    let weak = format!("W/{etag}");
    let list = format!("\"nope\", {etag}");
    let cases: Vec<(Vec<(&str, &str)>, StatusCode)> = vec![
        (
            vec![("if-none-match", etag.as_str())],
            StatusCode::NOT_MODIFIED,
        ),
        (
            vec![("if-none-match", weak.as_str())],
            StatusCode::NOT_MODIFIED,
        ),
        (
            vec![("if-none-match", list.as_str())],
            StatusCode::NOT_MODIFIED,
        ),
        (vec![("if-none-match", "*")], StatusCode::NOT_MODIFIED),
        (vec![("if-none-match", "\"other\"")], StatusCode::OK),
        (
            vec![("if-modified-since", lm.as_str())],
            StatusCode::NOT_MODIFIED,
        ),
        (
            vec![("if-modified-since", after.as_str())],
            StatusCode::NOT_MODIFIED,
        ),
        (vec![("if-modified-since", before.as_str())], StatusCode::OK),
        (vec![("if-modified-since", "not a date")], StatusCode::OK),
        (
            vec![
                ("if-none-match", "\"other\""),
                ("if-modified-since", after.as_str()),
            ],
            StatusCode::OK,
        ),
    ];
    for proto in PROTOS {
        let mut c = s.proxy.client(proto).await;
        for (headers, want) in &cases {
            let (status, h, b) = fetch(&mut c, headers).await;
            assert_eq!(status, *want, "{headers:?}");
            assert_eq!(h["etag"].to_str().unwrap(), etag, "{headers:?}");
            assert_eq!(h["last-modified"].to_str().unwrap(), lm);
            if status == StatusCode::NOT_MODIFIED {
                assert!(b.is_empty());
            } else {
                assert_eq!(b, body, "stable bytes");
            }
        }
        let (status, h, b) = c.request("HEAD", CARD, &[], "").await;
        assert_eq!(status, StatusCode::OK);
        assert!(b.is_empty());
        assert_eq!(
            h["content-length"].to_str().unwrap(),
            body.len().to_string()
        );
        assert_eq!(h["etag"].to_str().unwrap(), etag);
    }
}

#[tokio::test]
async fn the_served_card_is_signed_after_every_rewrite_and_stays_stable() {
    let s = setup("e1", "").await;
    let mut c = s.proxy.client(Proto::H2).await;
    let (_, h1, body) = fetch(&mut c, &[]).await;
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        s.proxy.public_url.as_str()
    );
    let keys = jwks_keys(&mut c).await;
    assert_eq!(
        verify_card(&card, &keys),
        Verdict::Valid { kid: "e1".into() }
    );
    // Every field a caller acts on is covered.
    for (path, value) in [
        ("/name", json!("evil")),
        ("/supportedInterfaces/0/url", json!("https://evil.example/")),
        ("/capabilities/streaming", json!(false)),
        ("/description", json!("x")),
    ] {
        let mut t = card.clone();
        *t.pointer_mut(path).unwrap() = value;
        assert_eq!(verify_card(&t, &keys), Verdict::SignatureMismatch, "{path}");
    }
    // The card is refreshed every second; ES256 signatures are randomized, yet an unchanged
    // card keeps its bytes and validators.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (_, h2, again) = fetch(&mut c, &[]).await;
    assert_eq!(again, body);
    assert_eq!(h2["etag"], h1["etag"]);
    assert_eq!(h2["last-modified"], h1["last-modified"]);
    // A real change is picked up by the periodic refresh, with a new ETag, and signed again.
    s.up.card.lock().unwrap()["description"] = json!("changed");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (h3, card) = loop {
        let (_, h3, changed) = fetch(&mut c, &[]).await;
        let card: Value = serde_json::from_slice(&changed).unwrap();
        if card["description"] == "changed" {
            break (h3, card);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the changed card was not served within 10 s: {card}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(h3["etag"], h1["etag"]);
    assert_eq!(card["description"], "changed");
    assert!(verify_card(&card, &keys).is_valid());
}

#[tokio::test]
async fn hs256_signatures_verify_with_the_shared_secret() {
    let s = setup("h1", "").await;
    let mut c = s.proxy.client(Proto::H1).await;
    let (_, _, body) = fetch(&mut c, &[]).await;
    let card: Value = serde_json::from_slice(&body).unwrap();
    let mut keys = VerifyKeys::new();
    keys.add_secret("h1", HS_SECRET.as_bytes());
    assert_eq!(
        verify_card(&card, &keys),
        Verdict::Valid { kid: "h1".into() }
    );
    let mut wrong = VerifyKeys::new();
    wrong.add_secret("h1", b"not-the-secret-not-the-secret-xx");
    assert_eq!(verify_card(&card, &wrong), Verdict::SignatureMismatch);
}

/// `[card]` lines that trust the agent's own card signature (HS256 key `agent`), then `more`.
fn trusting_the_agent(more: &str) -> String {
    std::env::set_var("A2A_EDGE_TEST_UPSTREAM_CARD_SECRET", "agent-card-secret");
    format!("[card.upstream_keys]\nsecrets_env = {{ agent = \"A2A_EDGE_TEST_UPSTREAM_CARD_SECRET\" }}{more}")
}

/// `card` signed by the agent with the key [`trusting_the_agent`] trusts.
fn signed_by_the_agent(mut card: Value) -> Value {
    let key = SigningKey::hs256("agent", b"agent-card-secret").unwrap();
    sign_card(&mut card, &key, &SignOptions::default()).unwrap();
    card
}

#[tokio::test]
async fn the_agents_signature_is_checked_before_the_card_is_trusted() {
    let s = setup("e1", &trusting_the_agent("")).await;
    let mut c = s.proxy.client(Proto::H1).await;
    // The recorder's card is unsigned: refused, nothing is served.
    let (status, _, _) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // Signed by the agent with the expected key: verified, rewritten, re-signed by the edge.
    let mut signed = signed_by_the_agent(recorder_card());
    *s.up.card.lock().unwrap() = signed.clone();
    // (After the failed fetch, public requests wait out a 1 s backoff before fetching again.)
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert!(verify_card(&card, &jwks_keys(&mut c).await).is_valid());
    // Tampered after the agent signed it: the last good card stays served.
    signed["name"] = json!("tampered");
    *s.up.card.lock().unwrap() = signed;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, _, again) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, body);
}

/// With `a2a.redact_paths` and `card.upstream_keys`, an agent's signed card with a path in it
/// is verified as the agent signed it, then cleaned: served with `[PATH]` and the edge's own
/// signature (cleaned first, it failed the agent's signature and was never served).
#[tokio::test]
async fn a_signed_agent_card_is_cleaned_after_its_signature_is_verified() {
    let s = setup("e1", &trusting_the_agent("\n[a2a]\nredact_paths = true")).await;
    let mut card = recorder_card();
    card["description"] = json!("works in /srv/ws/team-a/x");
    *s.up.card.lock().unwrap() = signed_by_the_agent(card);
    let mut c = s.proxy.client(Proto::H1).await;
    // (the recorder's first card, unsigned, was refused: a 1 s backoff before the next fetch)
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(card["description"], "works in [PATH]", "{card}");
    assert!(verify_card(&card, &jwks_keys(&mut c).await).is_valid());
}

#[tokio::test]
async fn the_extended_card_is_rewritten_and_signed_too() {
    let s = setup("e2", "").await;
    let mut c = s.proxy.client(Proto::H1).await;
    let v = c.rpc("GetExtendedAgentCard", json!({})).await;
    let card = &v["result"];
    assert_eq!(card["skills"][0]["id"], "secret-skill");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        s.proxy.public_url.as_str()
    );
    assert!(!v.to_string().contains("10.1.2.3"));
    let keys = jwks_keys(&mut c).await;
    assert_eq!(
        verify_card(card, &keys),
        Verdict::Valid { kid: "e2".into() }
    );
    // Its signature is its own: the public card's does not carry over.
    let (_, _, public) = fetch(&mut c, &[]).await;
    let public: Value = serde_json::from_slice(&public).unwrap();
    assert_ne!(public["signatures"], card["signatures"]);
}

#[tokio::test]
async fn keys_rotate_by_reload_without_a_failed_request() {
    let s = setup("e1", "").await;
    let addr = s.proxy.addr;
    let ca = s.proxy.ca.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checks = Arc::new(AtomicUsize::new(0));
    let (stop2, checks2) = (stop.clone(), checks.clone());
    // A client that keeps fetching the JWKS and the card and verifying, across the reload.
    let watcher = tokio::spawn(async move {
        let mut c = Client::connect(addr, &ca, Proto::H2).await;
        let mut kids = Vec::new();
        while !stop2.load(Ordering::SeqCst) {
            let keys = jwks_keys(&mut c).await;
            let (status, _, body) = fetch(&mut c, &[]).await;
            assert_eq!(status, StatusCode::OK);
            let card: Value = serde_json::from_slice(&body).unwrap();
            match verify_card(&card, &keys) {
                Verdict::Valid { kid } => kids.push(kid),
                other => panic!("verification failed during rotation: {other:?}"),
            }
            checks2.fetch_add(1, Ordering::SeqCst);
        }
        kids
    });
    while checks.load(Ordering::SeqCst) < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Switch the active key and reload, as an operator would with SIGHUP.
    s.reload_with_active("e2").await;
    let after = checks.load(Ordering::SeqCst);
    while checks.load(Ordering::SeqCst) < after + 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let kids = watcher.await.unwrap();
    assert_eq!(kids.first().map(String::as_str), Some("e1"));
    assert_eq!(kids.last().map(String::as_str), Some("e2"));
}

#[tokio::test]
async fn a_static_card_from_the_policy_is_served_rewritten_and_signed() {
    std::env::set_var("A2A_EDGE_TEST_CARD_SECRET", HS_SECRET);
    // The agent is down: a static card does not need it.
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: closed_port_url().await,
        extra_policy: r#"[card]
source = "static"
[[card.signing_keys]]
kid = "h1"
alg = "HS256"
secret_env = "A2A_EDGE_TEST_CARD_SECRET"
[card.static]
name = "fleet front door"
description = "one card for the fleet"
version = "2.0.0"
defaultInputModes = ["text/plain"]
defaultOutputModes = ["text/plain"]
skills = []
supportedInterfaces = [{ url = "http://internal:1/", protocolBinding = "JSONRPC", protocolVersion = "1.0" }]
[card.static.capabilities]
streaming = true
"#
        .into(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H1).await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(card["name"], "fleet front door");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        proxy.public_url.as_str()
    );
    assert!(!body.windows(8).any(|w| w == b"internal"));
    let mut keys = VerifyKeys::new();
    keys.add_secret("h1", HS_SECRET.as_bytes());
    assert_eq!(
        verify_card(&card, &keys),
        Verdict::Valid { kid: "h1".into() }
    );
    // No asymmetric key: nothing to publish.
    let (status, _, _) = c.request("GET", "/.well-known/jwks.json", &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn card_upstream_pins_the_card_to_one_agent_of_a_mixed_fleet() {
    let first = RecordingUpstream::start(Reply::Echo).await;
    let second = RecordingUpstream::start(Reply::Echo).await;
    second.card.lock().unwrap()["name"] = json!("second-agent");
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: first.url.clone(),
        extra_upstream: format!(
            "\n[[upstreams]]\nname = \"agent-2\"\nurl = \"{}\"\n",
            second.url
        ),
        extra_policy: "[card]\nupstream = \"agent-2\"\nrefresh_interval_ms = 1000\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H1).await;
    // Whichever agent is least busy, the card is agent-2's, on every fetch and refresh.
    for _ in 0..5 {
        let (status, _, body) = c.request("GET", CARD, &[], "").await;
        assert_eq!(status, StatusCode::OK);
        let card: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(card["name"], "second-agent", "{card}");
        let v = c.rpc("GetExtendedAgentCard", json!({})).await;
        assert_eq!(v["result"]["name"], "second-agent", "{v}");
    }
    let asked_first = first
        .requests()
        .iter()
        .filter(|r| {
            r.path == CARD || String::from_utf8_lossy(&r.body).contains("GetExtendedAgentCard")
        })
        .count();
    assert_eq!(asked_first, 0, "the card was read from the other agent");
}

/// With no card to serve (the agent's card is broken), public card requests do not each
/// make the edge fetch from the agent: one fetch at a time, then a backoff with 503 at once;
/// the public routes spend the client address's rate.
#[tokio::test]
async fn public_card_requests_do_not_hammer_the_agent() {
    let up = RecordingUpstream::start(Reply::Echo).await;
    *up.card.lock().unwrap() = json!("not a card");
    let p = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        extra_policy: "[limits]\nclient_ip_requests_per_second = 1\nclient_ip_burst = 150\n".into(),
        ..Default::default()
    })
    .await;
    let card_fetches = || {
        up.requests()
            .iter()
            .filter(|r| r.path == "/.well-known/agent-card.json")
            .count()
    };
    let before = card_fetches();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let mut handles = Vec::new();
        for _ in 0..50 {
            let (addr, ca) = (p.addr, p.ca.clone());
            handles.push(tokio::spawn(async move {
                let mut c = Client::connect(addr, &ca, Proto::H1).await;
                c.request("GET", "/.well-known/agent-card.json", &[], String::new())
                    .await
                    .0
            }));
        }
        for h in handles {
            statuses.push(h.await.unwrap());
        }
    }
    let fetched = card_fetches() - before;
    assert!(fetched <= 2, "{fetched} fetches for 200 public requests");
    assert!(
        statuses.iter().all(|s| *s == 503 || *s == 429),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().any(|s| *s == 429),
        "the address's rate applies to public routes"
    );
    // Once the agent's card is good again, the backoff passes and the card is served. The
    // backoff doubles after each failed fetch (there may have been two), and the address's
    // rate refills at one request a second, so the card is asked for a little more slowly
    // than that until it is served.
    *up.card.lock().unwrap() = recorder_card();
    let mut c = p.client(Proto::H2).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (status, _, _) = c
            .request("GET", "/.well-known/agent-card.json", &[], String::new())
            .await;
        if status == 200 || std::time::Instant::now() >= deadline {
            break status;
        }
    };
    assert_eq!(
        status, 200,
        "the card was not served within 10 s of the agent's card being good again"
    );
}

/// The protected header of the card's signature by `kid`.
fn protected_of(card: &Value, kid: &str) -> Value {
    use base64::Engine as _;
    for sig in card["signatures"].as_array().unwrap() {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig["protected"].as_str().unwrap())
            .unwrap();
        let h: Value = serde_json::from_slice(&raw).unwrap();
        if h["kid"] == kid {
            return h;
        }
    }
    panic!("no signature by {kid}: {card}");
}

#[tokio::test]
async fn asymmetric_signatures_say_where_the_keys_are() {
    // Default: the edge's own JWKS URL in the protected header of an ES256 signature.
    let s = setup("e1", "").await;
    let mut c = s.proxy.client(Proto::H1).await;
    let (_, _, body) = fetch(&mut c, &[]).await;
    let card: Value = serde_json::from_slice(&body).unwrap();
    let jku = format!("{}.well-known/jwks.json", s.proxy.public_url);
    assert_eq!(protected_of(&card, "e1")["jku"], jku.as_str());
    // ... which is where the key is, and its signature verifies with it.
    let (status, _, _) = c.request("GET", "/.well-known/jwks.json", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(verify_card(&card, &jwks_keys(&mut c).await).is_valid());
    // HS256: no JWKS to point at.
    let h = setup("h1", "").await;
    let mut c = h.proxy.client(Proto::H2).await;
    let (_, _, body) = fetch(&mut c, &[]).await;
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert!(protected_of(&card, "h1").get("jku").is_none());
    // Off, or another URL, by policy.
    let off = setup("e1", "jku = false").await;
    let mut c = off.proxy.client(Proto::H1).await;
    let (_, _, body) = fetch(&mut c, &[]).await;
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert!(protected_of(&card, "e1").get("jku").is_none());
    let there = setup("e1", "jku = \"https://keys.example/jwks.json\"").await;
    let mut c = there.proxy.client(Proto::H1).await;
    let (_, _, body) = fetch(&mut c, &[]).await;
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        protected_of(&card, "e1")["jku"],
        "https://keys.example/jwks.json"
    );
}

/// Security review: an agent whose SDK prints proto field names (`supported_interfaces`,
/// `documentation_url`, ...) had its card never published (both spellings of the interfaces
/// after the rewrite), or published with its internal address and its own schemes; its
/// `extended_agent_card` was not read, nor its `default_input_modes` learned. Through the
/// proxy it is the same card as by JSON names.
#[tokio::test]
async fn an_agent_card_by_proto_names_is_served_by_json_names() {
    let up = RecordingUpstream::start(Reply::Echo).await;
    *up.card.lock().unwrap() = json!({
        "name": "recorder", "version": "1", "description": "records",
        "supported_interfaces": [{"url": "http://10.1.2.3:9/", "protocol_binding": "JSONRPC",
                                  "protocol_version": "1.0"}],
        "additional_interfaces": [{"url": "http://10.1.2.4:9", "transport": "GRPC"}],
        "documentation_url": "http://10.1.2.3:9/docs",
        "icon_url": "http://10.1.2.4:9/icon.png",
        "capabilities": {"streaming": true, "extended_agent_card": true},
        "security_schemes": {"agent_key": {"api_key_security_scheme": {"location": "header",
                                                                      "name": "X-Agent-Key"}}},
        "security_requirements": [{"schemes": {"agent_key": {"list": []}}}],
        "default_input_modes": ["text/plain", "text/csv"], "default_output_modes": ["text/plain"],
        "skills": []
    });
    let p = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        extra_policy: "[a2a]\ninput_media_types = \"card\"\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H1).await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body).to_string();
    for leak in [
        "10.1.2.",
        "agent_key",
        "X-Agent-Key",
        "supported_interfaces",
        "additional_interfaces",
        "additionalInterfaces",
        "documentation",
        "icon",
        "security_",
        "default_input_modes",
    ] {
        assert!(!text.contains(leak), "{leak}: {text}");
    }
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": p.public_url.as_str(), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(card["defaultInputModes"], json!(["text/plain", "text/csv"]));
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    // The card offers an extended card: asked of the agent (not -32007), rewritten the same.
    let v = rpc_as(&mut c, ALICE, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(v["result"]["skills"][0]["id"], "secret-skill", "{v}");
    assert!(!v.to_string().contains("10.1.2."), "{v}");
    assert!(v["result"].get("supported_interfaces").is_none(), "{v}");
    // `a2a.input_media_types = "card"` learned the modes.
    let part = |media: &str| {
        json!({"message": {"messageId": a2a_edge::crypto::random_token(), "role": "ROLE_USER",
                           "parts": [{"text": "a,b", "mediaType": media}]}})
    };
    let v = rpc_as(&mut c, ALICE, "SendMessage", part("text/csv")).await;
    assert!(v.get("result").is_some(), "{v}");
    let v = rpc_as(&mut c, ALICE, "SendMessage", part("text/markdown")).await;
    assert_eq!(v["error"]["code"], -32005, "{v}");
}

/// A reload while the agent's card cannot be had (here: the agent now serves one that is
/// no A2A 1.0 AgentCard; a down agent is the same) keeps the card the edge served: the new
/// policy publishes the agent's last good card again, signed with the new active key, as a
/// running policy keeps its last good card when a refresh fails. Before, the reload threw
/// it away: 503 `card.unavailable` until the agent's card was good again.
#[tokio::test]
async fn a_reload_while_the_agents_card_is_bad_keeps_the_last_good_one() {
    let s = setup("e1", "").await;
    let mut c = s.proxy.client(Proto::H2).await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let before: Value = serde_json::from_slice(&body).unwrap();
    *s.up.card.lock().unwrap() = json!({"name": 7, "description": ["not a card"]});
    s.reload_with_active("e2").await;
    let (status, _, body) = fetch(&mut c, &[]).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let after: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(after["name"], before["name"]);
    assert_eq!(after["description"], before["description"]);
    let keys = jwks_keys(&mut c).await;
    match verify_card(&after, &keys) {
        Verdict::Valid { kid } => assert_eq!(kid, "e2"),
        other => panic!("the kept card is not signed under the new policy: {other:?}"),
    }
}
