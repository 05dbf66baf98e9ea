//! The identity assertion: a short-lived compact JWS the edge puts on every forwarded request
//! (`[auth.identity_assertion]`), so an agent can verify who the caller is with the edge's
//! published keys (`/.well-known/jwks.json`) instead of trusting a header because of where it
//! came from.
//!
//! Protected header `{"alg", "kid", "typ": "JWT"}`; claims `iss` (the edge's public URL),
//! `aud` (the agent's name in the policy), `sub` (the principal), `tenant` (when the caller has
//! one), `groups`, `scheme`, `jti` (the request id, also the `X-Request-Id` the agent gets),
//! `iat` and `exp` (seconds since the epoch).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Serialize;

use super::Principal;
use crate::card::keys::SigningKey;

#[derive(Serialize)]
struct Header<'a> {
    alg: &'a str,
    kid: &'a str,
    typ: &'static str,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    aud: &'a str,
    sub: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    groups: &'a [String],
    scheme: &'static str,
    jti: &'a str,
    iat: u64,
    exp: u64,
}

/// What one assertion states.
pub struct Statement<'a> {
    pub issuer: &'a str,
    pub audience: &'a str,
    pub principal: &'a Principal,
    pub request_id: &'a str,
    /// Seconds since the Unix epoch.
    pub issued_at: u64,
    pub ttl_secs: u64,
}

/// Signs `s` with `key` (an asymmetric card key) as a compact JWS.
pub fn sign(key: &SigningKey, s: &Statement) -> Result<String, String> {
    let header = serde_json::to_vec(&Header {
        alg: key.alg.as_str(),
        kid: &key.kid,
        typ: "JWT",
    })
    .map_err(|e| e.to_string())?;
    let claims = serde_json::to_vec(&Claims {
        iss: s.issuer,
        aud: s.audience,
        sub: &s.principal.name,
        tenant: s.principal.tenant.as_deref(),
        groups: &s.principal.groups,
        scheme: s.principal.scheme.as_str(),
        jti: s.request_id,
        iat: s.issued_at,
        exp: s.issued_at + s.ttl_secs,
    })
    .map_err(|e| e.to_string())?;
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let signature = key.sign(input.as_bytes()).map_err(|e| e.to_string())?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scheme;
    use crate::card::keys::SigningAlg;
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};

    #[test]
    fn verifies_with_the_published_key_and_expires() {
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let key =
            SigningKey::from_private_pem("e1", SigningAlg::ES256, kp.serialize_pem().as_bytes())
                .unwrap();
        let mut p = Principal::new("alice", Scheme::Bearer);
        p.tenant = Some("team-a".into());
        p.groups = vec!["deployers".into()];
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let statement = |iat| Statement {
            issuer: "https://edge.example/",
            audience: "agent-1",
            principal: &p,
            request_id: "edge-1",
            issued_at: iat,
            ttl_secs: 60,
        };
        let jwk: jsonwebtoken::jwk::Jwk =
            serde_json::from_value(key.public_jwk().unwrap()).unwrap();
        let decoding = DecodingKey::from_jwk(&jwk).unwrap();
        let mut v = Validation::new(Algorithm::ES256);
        v.leeway = 0;
        v.set_audience(&["agent-1"]);
        v.set_issuer(&["https://edge.example/"]);
        let token = sign(&key, &statement(now)).unwrap();
        let claims = jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &v)
            .unwrap()
            .claims;
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["tenant"], "team-a");
        assert_eq!(claims["groups"], serde_json::json!(["deployers"]));
        assert_eq!(claims["scheme"], "bearer");
        assert_eq!(claims["jti"], "edge-1");
        assert_eq!(claims["exp"].as_u64(), Some(now + 60));
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.kid.as_deref(), Some("e1"));
        // Issued two minutes ago with 60 s to live: expired.
        let old = sign(&key, &statement(now - 120)).unwrap();
        let err = jsonwebtoken::decode::<serde_json::Value>(&old, &decoding, &v).unwrap_err();
        assert_eq!(
            err.kind(),
            &jsonwebtoken::errors::ErrorKind::ExpiredSignature
        );
        // Another agent's assertion does not verify for this one.
        let mut other = v.clone();
        other.set_audience(&["agent-2"]);
        assert!(jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &other).is_err());
    }
}
