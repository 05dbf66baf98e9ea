use super::*;
use crate::policy::{
    sha256, ApiKeyPolicy, BasicCredential, BasicSecret, BearerCredential, ClientAuth,
    ThrottlePolicy,
};
use base64::Engine as _;

fn attrs(tenant: Option<&str>, groups: &[&str]) -> Attributes {
    Attributes {
        tenant: tenant.map(str::to_string),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn policy(anonymous: bool) -> AuthPolicy {
    AuthPolicy {
        from_environment: vec![],
        allow_anonymous: anonymous,
        bearer: vec![
            BearerCredential {
                principal: "ci".into(),
                attributes: attrs(Some("team-a"), &["deployers"]),
                token_sha256: sha256(b"tok-1"),
                generated: None,
            },
            BearerCredential {
                principal: "ops".into(),
                attributes: Attributes::default(),
                token_sha256: sha256(b"tok-2"),
                generated: None,
            },
        ],
        basic: vec![BasicCredential {
            username: "alice".into(),
            attributes: attrs(None, &["auditors"]),
            secret: BasicSecret::Plain("s3cret:x".into()),
        }],
        api_key: Some(ApiKeyPolicy {
            header: "X-My-Key".into(),
            keys: vec![
                ("robot".into(), sha256(b"key-abc")),
                ("ci".into(), sha256(b"key-ci")),
            ],
            attributes: [("robot".to_string(), attrs(Some("team-b"), &[]))]
                .into_iter()
                .collect(),
        }),
        mtls_identities: vec![attributes::IdentityPattern {
            text: "spiffe://example.org/team-c/*".into(),
            attributes: attrs(Some("team-c"), &["workloads"]),
        }],
        identity_assertion: None,
        jwt: None,
        client_auth: ClientAuth::Optional,
        principal_header: "x-a2a-edge-principal".into(),
        throttle: ThrottlePolicy {
            failures_per_minute: 30,
            failures_burst: 10,
        },
    }
}

fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_bytes(v).unwrap());
    }
    h
}

fn basic(user_pass: &str) -> Vec<u8> {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_pass)
    )
    .into_bytes()
}

#[tokio::test]
async fn credential_table() {
    let a = Authenticator::new(&policy(false), None).await.unwrap();
    let long = format!("Bearer {}", "a".repeat(MAX_AUTHORIZATION_BYTES));
    let good_basic = basic("alice:s3cret:x");
    let wrong_basic = basic("alice:nope");
    let unknown_basic = basic("mallory:s3cret:x");
    // Ok: the principal, and the credential beside it that failed (for the throttle).
    type Case<'a> = (
        Vec<(&'static str, &'a [u8])>,
        Result<(&'a str, Option<&'a str>), &'a str>,
    );
    let cases: Vec<Case> = vec![
        (vec![("authorization", b"Bearer tok-1")], Ok(("ci", None))),
        (vec![("authorization", b"bearer tok-2")], Ok(("ops", None))),
        (vec![("authorization", b"BEARER tok-1")], Ok(("ci", None))),
        (vec![("authorization", &good_basic)], Ok(("alice", None))),
        (vec![("x-my-key", b"key-abc")], Ok(("robot", None))),
        (vec![("X-MY-KEY", b"key-abc")], Ok(("robot", None))),
        // Any one valid credential is enough (as iac-code), but a wrong one beside it is
        // reported, for the failure throttle (a password guess beside a valid key).
        (
            vec![("authorization", b"Bearer wrong"), ("x-my-key", b"key-abc")],
            Ok(("robot", Some("auth.invalid"))),
        ),
        (
            vec![("authorization", &wrong_basic), ("x-my-key", b"key-abc")],
            Ok(("robot", Some("auth.invalid"))),
        ),
        (
            vec![("authorization", b"Basic !!!"), ("x-my-key", b"key-abc")],
            Ok(("robot", Some("auth.malformed"))),
        ),
        (
            vec![("authorization", &good_basic), ("x-my-key", b"key-abc")],
            Ok(("alice", None)),
        ),
        (
            vec![("authorization", b"Bearer tok-1"), ("x-my-key", b"wrong")],
            Ok(("ci", None)),
        ),
        (vec![], Err("auth.missing")),
        (vec![("authorization", b"")], Err("auth.malformed")),
        (vec![("authorization", b"Bearer")], Err("auth.malformed")),
        (
            vec![("authorization", b"Bearer tok-1 extra")],
            Err("auth.malformed"),
        ),
        (
            vec![("authorization", b"Bearer tok\xc3\xa9")],
            Err("auth.malformed"),
        ),
        (
            vec![("authorization", long.as_bytes())],
            Err("auth.malformed"),
        ),
        (
            vec![("authorization", b"Bearer tok-3")],
            Err("auth.invalid"),
        ),
        (vec![("authorization", &wrong_basic)], Err("auth.invalid")),
        (vec![("authorization", &unknown_basic)], Err("auth.invalid")),
        (
            vec![("authorization", b"Basic YWxpY2U=")],
            Err("auth.malformed"),
        ),
        (vec![("authorization", b"Basic !!!")], Err("auth.malformed")),
        (
            vec![("authorization", b"Digest x")],
            Err("auth.unsupported_scheme"),
        ),
        (
            vec![
                ("authorization", b"Bearer tok-1"),
                ("authorization", b"Bearer tok-1"),
            ],
            Err("auth.multiple_headers"),
        ),
        (vec![("x-api-key", b"key-abc")], Err("auth.missing")),
        (vec![("x-my-key", b"key-\xff")], Err("auth.malformed")),
    ];
    for (h, want) in cases {
        let got = a
            .authenticate(&headers(&h), ConnCredentials::default())
            .await;
        match (got, want) {
            (Ok(a), Ok((name, failed))) => {
                assert_eq!(a.principal.name, name, "{h:?}");
                assert_eq!(a.failed.map(|f| <&str>::from(f.reason)), failed, "{h:?}");
            }
            (Err(r), Err(reason)) => assert_eq!(r.reason, reason, "{h:?}"),
            (got, want) => panic!("{h:?}: got {got:?}, want {want:?}"),
        }
    }
}

/// A Basic credential that could not be checked (every password check slot busy for the
/// whole wait) is `auth.overloaded`, and no failure: beside a valid API key the caller is in
/// with nothing failed; beside a wrong key, the key's refusal counts (a wrong password beside
/// a valid key is a failure too).
#[tokio::test(start_paused = true)]
async fn a_password_never_checked_is_not_a_failed_credential() {
    let a = Authenticator::new(&policy(false), None).await.unwrap();
    let good_basic = basic("alice:s3cret:x");
    let wrong_basic = basic("alice:nope");
    let busy = a.hold_password_checks().await;
    let alone = headers(&[("authorization", &good_basic)]);
    let r = a.authenticate(&alone, ConnCredentials::default()).await;
    let r = r.unwrap_err();
    assert_eq!(r.reason, "auth.overloaded");
    assert!(r.unchecked());
    // Beside a client certificate without a usable identity (no credential, no guess): the
    // password that could not be checked decides (come back), not the certificate (401).
    let nameless = ConnCredentials {
        client_cert: true,
        ..ConnCredentials::default()
    };
    let r = a.authenticate(&alone, nameless).await.unwrap_err();
    assert_eq!(r.reason, "auth.overloaded");
    assert!(r.unchecked());
    let beside = headers(&[("authorization", &good_basic), ("x-my-key", b"key-abc")]);
    let ok = a.authenticate(&beside, ConnCredentials::default()).await;
    let ok = ok.unwrap();
    assert_eq!((ok.principal.name.as_str(), ok.failed), ("robot", None));
    // ... but a wrong key beside it was checked: a failed credential.
    let guess = headers(&[("authorization", &good_basic), ("x-my-key", b"key-guess")]);
    let r = a.authenticate(&guess, ConnCredentials::default()).await;
    let r = r.unwrap_err();
    assert_eq!(r.reason, "auth.invalid");
    assert!(!r.unchecked());
    drop(busy);
    let wrong = headers(&[("authorization", &wrong_basic), ("x-my-key", b"key-abc")]);
    let ok = a.authenticate(&wrong, ConnCredentials::default()).await;
    let failed = ok.unwrap().failed.map(|f| <&str>::from(f.reason));
    assert_eq!(failed, Some("auth.invalid"));
}

#[tokio::test]
async fn client_certificates_and_anonymous() {
    let a = Authenticator::new(&policy(true), None).await.unwrap();
    let none = headers(&[]);
    let anon = a
        .authenticate(&none, ConnCredentials::default())
        .await
        .unwrap()
        .principal;
    assert_eq!(anon.scheme, Scheme::Anonymous);
    assert!(!anon.is_authenticated());
    // A wrong credential never degrades to anonymous.
    let wrong = headers(&[("authorization", b"Bearer wrong")]);
    let r = a.authenticate(&wrong, ConnCredentials::default()).await;
    assert_eq!(r.unwrap_err().reason, "auth.invalid");
    let cert = ConnCredentials {
        client_cert: true,
        identity: Some("spiffe://example.org/ci"),
        admitted: None,
    };
    let p = a.authenticate(&none, cert).await.unwrap().principal;
    assert_eq!(p.name, "mtls:spiffe://example.org/ci");
    assert_eq!(p.scheme, Scheme::Mtls);
    // A certificate without a usable identity is refused, unless another credential is valid.
    let nameless = ConnCredentials {
        client_cert: true,
        identity: None,
        admitted: None,
    };
    let r = a.authenticate(&none, nameless.clone()).await;
    assert_eq!(r.unwrap_err().reason, "auth.mtls_no_identity");
    let ok = headers(&[("authorization", b"Bearer tok-1")]);
    // (a nameless certificate is no guess: not reported as a failure beside it)
    let p = a.authenticate(&ok, nameless).await.unwrap();
    assert_eq!((p.principal.name.as_str(), p.failed), ("ci", None));
}

#[tokio::test]
async fn attributes_follow_the_scheme_and_name() {
    let a = Authenticator::new(&policy(false), None).await.unwrap();
    let none = ConnCredentials::default();
    let cert = |id: &'static str| ConnCredentials {
        client_cert: true,
        identity: Some(id),
        admitted: None,
    };
    let alice = basic("alice:s3cret:x");
    let rows: Vec<(HeaderMap, ConnCredentials, &str, Attributes)> = vec![
        (
            headers(&[("authorization", b"Bearer tok-1")]),
            none.clone(),
            "ci",
            attrs(Some("team-a"), &["deployers"]),
        ),
        (
            headers(&[("authorization", b"Bearer tok-2")]),
            none.clone(),
            "ops",
            Attributes::default(),
        ),
        (
            headers(&[("authorization", &alice)]),
            none.clone(),
            "alice",
            attrs(None, &["auditors"]),
        ),
        (
            headers(&[("x-my-key", b"key-abc")]),
            none.clone(),
            "robot",
            attrs(Some("team-b"), &[]),
        ),
        // The same name under another scheme does not take the bearer entry's attributes.
        (
            headers(&[("x-my-key", b"key-ci")]),
            none.clone(),
            "ci",
            Attributes::default(),
        ),
        (
            HeaderMap::new(),
            cert("spiffe://example.org/team-c/ci"),
            "mtls:spiffe://example.org/team-c/ci",
            attrs(Some("team-c"), &["workloads"]),
        ),
        (
            HeaderMap::new(),
            cert("spiffe://example.org/team-cx/ci"),
            "mtls:spiffe://example.org/team-cx/ci",
            Attributes::default(),
        ),
    ];
    for (h, conn, name, want) in rows {
        let p = a.authenticate(&h, conn).await.unwrap().principal;
        assert_eq!(p.name, name);
        assert_eq!(p.tenant, want.tenant, "{name}");
        assert_eq!(p.groups, want.groups, "{name}");
    }
}

#[tokio::test]
async fn challenges_and_card_schemes_name_exactly_the_enabled_schemes() {
    let a = Authenticator::new(&policy(false), None).await.unwrap();
    let challenges: Vec<&str> = a.challenges().iter().map(|c| c.to_str().unwrap()).collect();
    assert_eq!(challenges.len(), 3, "{challenges:?}");
    assert!(challenges[0].starts_with("Bearer "));
    assert!(challenges[1].starts_with("Basic "));
    assert!(challenges[2].contains("X-My-Key"));
    let names: Vec<&String> = a.security_schemes().keys().collect();
    assert_eq!(names, ["bearerAuth", "basicAuth", "apiKeyAuth", "mtls"]);
    assert_eq!(
        a.security_schemes()["apiKeyAuth"]["apiKeySecurityScheme"]["name"],
        "X-My-Key"
    );
    let mut only_bearer = policy(false);
    only_bearer.basic.clear();
    only_bearer.api_key = None;
    only_bearer.client_auth = ClientAuth::Off;
    let b = Authenticator::new(&only_bearer, None).await.unwrap();
    assert_eq!(b.security_schemes().len(), 1);
    assert_eq!(b.challenges().len(), 1);
}

/// `presents_credential` is false exactly where `authenticate` finds nothing to check (the
/// catalog's public case), and true for every credential, valid or not, without verifying it.
#[tokio::test]
async fn presents_credential_matches_what_authenticate_would_check() {
    let cert = ConnCredentials {
        client_cert: true,
        identity: Some("spiffe://example.org/ci"),
        admitted: None,
    };
    let nameless = ConnCredentials {
        client_cert: true,
        identity: None,
        admitted: None,
    };
    let cases: Vec<(HeaderMap, ConnCredentials<'_>, bool)> = vec![
        (headers(&[]), ConnCredentials::default(), false),
        (
            headers(&[("x-other", b"1")]),
            ConnCredentials::default(),
            false,
        ),
        (
            headers(&[("authorization", b"Bearer tok-1")]),
            ConnCredentials::default(),
            true,
        ),
        (
            headers(&[("authorization", b"Bearer wrong")]),
            ConnCredentials::default(),
            true,
        ),
        (
            headers(&[("authorization", b"")]),
            ConnCredentials::default(),
            true,
        ),
        (
            headers(&[("authorization", &basic("alice:nope"))]),
            ConnCredentials::default(),
            true,
        ),
        (
            headers(&[("x-my-key", b"key-abc")]),
            ConnCredentials::default(),
            true,
        ),
        (
            headers(&[("X-MY-KEY", b"wrong")]),
            ConnCredentials::default(),
            true,
        ),
        (headers(&[]), cert.clone(), true),
        (headers(&[]), nameless, true),
    ];
    for anonymous in [false, true] {
        let a = Authenticator::new(&policy(anonymous), None).await.unwrap();
        for (h, conn, presents) in &cases {
            assert_eq!(a.presents_credential(h, conn.clone()), *presents, "{h:?}");
            let r = a.authenticate(h, conn.clone()).await;
            let nothing = match &r {
                Err(e) => e.reason == "auth.missing",
                Ok(a) => !a.principal.is_authenticated(),
            };
            assert_eq!(
                nothing,
                !presents,
                "{h:?}: {:?}",
                r.map(|a| a.principal.name)
            );
        }
    }
    // With mTLS off, a certificate is no credential.
    let mut off = policy(false);
    off.client_auth = ClientAuth::Off;
    let a = Authenticator::new(&off, None).await.unwrap();
    assert!(!a.presents_credential(&headers(&[]), cert));
}

/// What a stream keeps of other callers: a JWT caller its `Authorization` header alone (not
/// a static API key sent beside it), a client certificate's caller and an anonymous one
/// nothing.
#[tokio::test]
async fn a_streams_proof_keeps_no_secret_it_does_not_need() {
    let a = Authenticator::new(&policy(true), None).await.unwrap();
    let h = headers(&[("authorization", b"Bearer a.b.c"), ("x-my-key", b"key-abc")]);
    let jwt = Principal::new("jwt:dora", Scheme::Jwt);
    let Proof::Headers(kept) = a.proof(&jwt, &h) else {
        panic!("a JWT's proof is its header");
    };
    assert_eq!(kept.len(), 1);
    assert_eq!(kept["authorization"], "Bearer a.b.c");
    for p in [
        Principal::new("mtls:spiffe://example.org/team-c/ci", Scheme::Mtls),
        Principal::new("anonymous", Scheme::Anonymous),
    ] {
        let Proof::Headers(kept) = a.proof(&p, &h) else {
            panic!("{}: not headers", p.name);
        };
        assert!(kept.is_empty(), "{}: {kept:?}", p.name);
    }
    // Proven again by the connection alone.
    let cert = ConnCredentials {
        client_cert: true,
        identity: Some("spiffe://example.org/team-c/ci"),
        admitted: None,
    };
    let mtls = Principal::new("mtls:spiffe://example.org/team-c/ci", Scheme::Mtls);
    match a.proves_again(&a.proof(&mtls, &h), &mtls.name, cert).await {
        ProvesAgain::Yes(p) => assert_eq!(p.name, mtls.name),
        other => panic!("{other:?}"),
    }
}

/// A stream of a static bearer or API key caller keeps the credential's digest, never the
/// credential, and a reload proves it again from that digest alone: the same principal
/// while the policy keeps that digest for it, no one once the token is rotated, removed or
/// given to another principal.
#[tokio::test]
async fn a_streams_proof_of_a_static_credential_is_its_digest() {
    let a = Authenticator::new(&policy(false), None).await.unwrap();
    let none = ConnCredentials::default();
    let rows = [
        (
            headers(&[("authorization", b"Bearer tok-1")]),
            "ci",
            Scheme::Bearer,
            "tok-1",
        ),
        (
            headers(&[("x-my-key", b"key-abc")]),
            "robot",
            Scheme::ApiKey,
            "key-abc",
        ),
    ];
    for (h, name, scheme, secret) in rows {
        let p = a.authenticate(&h, none.clone()).await.unwrap().principal;
        assert_eq!(p.name, name);
        let proof = a.proof(&p, &h);
        let digest = sha256(secret.as_bytes());
        match (&proof, scheme) {
            (Proof::Bearer(d), Scheme::Bearer) => assert_eq!(*d, digest),
            (Proof::ApiKey(h, d), Scheme::ApiKey) => {
                assert_eq!((h.as_str(), *d), ("x-my-key", digest))
            }
            (other, _) => panic!("{name}: {other:?}"),
        }
        assert!(!format!("{proof:?}").contains(secret));
        // The same policy proves the same caller, with its tenant.
        match a.proves_again(&proof, name, none.clone()).await {
            ProvesAgain::Yes(again) => {
                assert_eq!(
                    (again.name.as_str(), again.tenant.clone()),
                    (name, p.tenant)
                );
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // Reloads: ci's token rotated; tok-1 now ops'; bearer off. robot's key removed.
    let mut rotated = policy(false);
    rotated.bearer[0].token_sha256 = sha256(b"tok-1-new");
    let mut swapped = policy(false);
    swapped.bearer[0].token_sha256 = sha256(b"tok-2");
    swapped.bearer[1].token_sha256 = sha256(b"tok-1");
    let mut no_bearer = policy(false);
    no_bearer.bearer.clear();
    let mut key_gone = policy(false);
    if let Some(k) = key_gone.api_key.as_mut() {
        k.keys.remove(0);
    }
    let mut header_moved = policy(false);
    if let Some(k) = header_moved.api_key.as_mut() {
        k.header = "X-Other-Key".into();
    }
    let ci = Proof::Bearer(sha256(b"tok-1"));
    let robot = Proof::ApiKey(HeaderName::from_static("x-my-key"), sha256(b"key-abc"));
    for (why, policy, proof, name) in [
        ("rotated", rotated, &ci, "ci"),
        ("swapped", swapped, &ci, "ci"),
        ("bearer off", no_bearer, &ci, "ci"),
        ("key removed", key_gone, &robot, "robot"),
        ("another key header", header_moved, &robot, "robot"),
    ] {
        let b = Authenticator::new(&policy, None).await.unwrap();
        let got = b.proves_again(proof, name, none.clone()).await;
        assert!(matches!(got, ProvesAgain::No), "{why}: {got:?}");
    }
}
