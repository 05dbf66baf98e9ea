use super::*;
use crate::policy::{sha256, BearerCredential};

fn auth(anonymous: bool) -> Authenticator {
    Authenticator::from_policy(&AuthPolicy {
        allow_anonymous: anonymous,
        basic: vec![],
        api_key: None,
        jwt: None,
        client_auth: crate::policy::ClientAuth::Off,
        principal_header: "x-a2a-edge-principal".into(),
        throttle: crate::policy::ThrottlePolicy {
            failures_per_minute: 30,
            failures_burst: 10,
        },
        bearer: vec![
            BearerCredential {
                principal: "ci".into(),
                token_sha256: sha256(b"tok-1"),
                generated: None,
            },
            BearerCredential {
                principal: "ops".into(),
                token_sha256: sha256(b"tok-2"),
                generated: None,
            },
        ],
    })
}

fn headers(values: &[&[u8]]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for v in values {
        h.append(header::AUTHORIZATION, HeaderValue::from_bytes(v).unwrap());
    }
    h
}

#[test]
fn bearer_table() {
    let long = format!("Bearer {}", "a".repeat(MAX_AUTHORIZATION_BYTES));
    // (header values, expected principal or rejection reason)
    type Case<'a> = (&'a [&'a [u8]], Result<&'a str, &'a str>);
    let cases: &[Case] = &[
        (&[b"Bearer tok-1"], Ok("ci")),
        (&[b"bearer tok-2"], Ok("ops")),
        (&[b"BEARER tok-1"], Ok("ci")),
        (&[b"Bearer  tok-1"], Ok("ci")),
        (&[], Err("auth.missing")),
        (&[b""], Err("auth.malformed")),
        (&[b"Bearer"], Err("auth.malformed")),
        (&[b"Bearer "], Err("auth.malformed")),
        (&[b"Bearer tok-1 extra"], Err("auth.malformed")),
        (&[b"Bearer tok\xc3\xa9"], Err("auth.malformed")),
        (&[b"Bearer tok-1\t"], Err("auth.malformed")),
        (&[b"Bearer t{k"], Err("auth.malformed")),
        (&[long.as_bytes()], Err("auth.malformed")),
        (&[b"Bearer tok-3"], Err("auth.invalid")),
        (&[b"Bearer TOK-1"], Err("auth.invalid")),
        (&[b"Basic dG9rLTE="], Err("auth.unsupported_scheme")),
        (&[b"Token tok-1"], Err("auth.unsupported_scheme")),
        (
            &[b"Bearer tok-1", b"Bearer tok-1"],
            Err("auth.multiple_headers"),
        ),
    ];
    let a = auth(false);
    for (values, want) in cases {
        let got = a.authenticate(&headers(values));
        match (got, want) {
            (Ok(p), Ok(name)) => assert_eq!(p.name, *name, "{values:?}"),
            (Err(r), Err(reason)) => assert_eq!(r.reason, *reason, "{values:?}"),
            (got, want) => panic!("{values:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn anonymous_only_without_any_credential() {
    let a = auth(true);
    assert_eq!(
        a.authenticate(&headers(&[])).unwrap().scheme,
        Scheme::Anonymous
    );
    assert_eq!(
        a.authenticate(&headers(&[b"Bearer wrong"]))
            .unwrap_err()
            .reason,
        "auth.invalid"
    );
    assert_eq!(auth(false).challenge(), "Bearer realm=\"a2a-edge\"");
}
