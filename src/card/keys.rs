//! Keys that sign the edge's Agent Card, and the public JWK published for each.
//!
//! HS256 and EdDSA are computed with `ring` (HS256 takes secrets of any length, as iac-code's
//! often are; ring reads Ed25519 PKCS#8 v1 and v2, josekit only v1). RS256 and ES256 go
//! through josekit (OpenSSL), which reads PKCS#8 and the traditional `RSA PRIVATE KEY` /
//! `EC PRIVATE KEY` PEM forms and enforces RSA >= 2048 bits.

use std::fmt;

use josekit::jwk::{Jwk, KeyPair};
use josekit::jws::{JwsSigner, ES256, RS256};
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use serde_json::{Map, Value};

use super::canonical::{err, CardError};
use crate::crypto::b64url;

/// The signature algorithms the edge signs and verifies cards with. Anything else (`none`,
/// `HS384`, `PS256`, ...) is refused on both sides.
#[allow(clippy::upper_case_acronyms)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SigningAlg {
    HS256,
    RS256,
    ES256,
    EdDSA,
}

impl SigningAlg {
    /// The JWS `alg` value.
    pub fn as_str(&self) -> &'static str {
        match self {
            SigningAlg::HS256 => "HS256",
            SigningAlg::RS256 => "RS256",
            SigningAlg::ES256 => "ES256",
            SigningAlg::EdDSA => "EdDSA",
        }
    }

    /// Parses a JWS `alg` value (exact, case-sensitive, as RFC 7515 compares them).
    pub fn parse(alg: &str) -> Option<SigningAlg> {
        match alg {
            "HS256" => Some(SigningAlg::HS256),
            "RS256" => Some(SigningAlg::RS256),
            "ES256" => Some(SigningAlg::ES256),
            "EdDSA" => Some(SigningAlg::EdDSA),
            _ => None,
        }
    }

    /// The JWK `kty` a key for this algorithm has.
    pub(crate) fn key_type(&self) -> &'static str {
        match self {
            SigningAlg::HS256 => "oct",
            SigningAlg::RS256 => "RSA",
            SigningAlg::ES256 => "EC",
            SigningAlg::EdDSA => "OKP",
        }
    }
}

impl fmt::Display for SigningAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A card signing key: an HS256 secret or an asymmetric private key, with its key id.
pub struct SigningKey {
    pub kid: String,
    pub alg: SigningAlg,
    material: Material,
    /// The public half as a JWK (`kty` and its key parameters only); `None` for HS256.
    public: Option<Map<String, Value>>,
}

enum Material {
    Secret(Vec<u8>),
    Ed25519(Ed25519KeyPair),
    Jose(Box<dyn JwsSigner>),
}

// Never prints key material.
impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

fn check_kid(kid: &str) -> Result<(), CardError> {
    if kid.is_empty() || kid.len() > 256 || kid.chars().any(char::is_control) {
        return Err(err(
            "a key id must be 1 to 256 characters without control characters",
        ));
    }
    Ok(())
}

impl SigningKey {
    /// An HS256 key. Any non-empty secret is accepted, because interop with iac-code needs
    /// its secrets as they are (its worked example signs with `k`). RFC 7518 §3.2 wants at
    /// least 32 bytes; enforcing that for the edge's own keys is the policy layer's job.
    pub fn hs256(kid: &str, secret: &[u8]) -> Result<SigningKey, CardError> {
        check_kid(kid)?;
        if secret.is_empty() {
            return Err(err("an HS256 secret must not be empty"));
        }
        Ok(SigningKey {
            kid: kid.to_string(),
            alg: SigningAlg::HS256,
            material: Material::Secret(secret.to_vec()),
            public: None,
        })
    }

    /// An asymmetric key from a PEM private key (PKCS#8 `PRIVATE KEY`, or the traditional
    /// `RSA PRIVATE KEY` / `EC PRIVATE KEY`): RS256 needs RSA >= 2048 bits, ES256 a P-256
    /// key, EdDSA an Ed25519 key.
    pub fn from_private_pem(
        kid: &str,
        alg: SigningAlg,
        pem: &[u8],
    ) -> Result<SigningKey, CardError> {
        check_kid(kid)?;
        // josekit's messages name the problem, never the key.
        let bad = |e: josekit::JoseError| err(format!("not a usable {alg} private key: {e}"));
        let (signer, jwk, params): (Box<dyn JwsSigner>, Jwk, &[&str]) = match alg {
            SigningAlg::RS256 => (
                Box::new(RS256.signer_from_pem(pem).map_err(bad)?),
                RS256
                    .key_pair_from_pem(pem)
                    .map_err(bad)?
                    .to_jwk_public_key(),
                &["n", "e"],
            ),
            SigningAlg::ES256 => (
                Box::new(ES256.signer_from_pem(pem).map_err(bad)?),
                ES256
                    .key_pair_from_pem(pem)
                    .map_err(bad)?
                    .to_jwk_public_key(),
                &["crv", "x", "y"],
            ),
            SigningAlg::EdDSA => return Self::ed25519(kid, pem),
            SigningAlg::HS256 => return Err(err("HS256 takes a secret, not a PEM key")),
        };
        let mut public = Map::new();
        public.insert("kty".into(), Value::from(alg.key_type()));
        for p in params {
            let v = jwk
                .parameter(p)
                .ok_or_else(|| err(format!("the {alg} key has no public {p}")))?;
            public.insert((*p).to_string(), v.clone());
        }
        Ok(SigningKey {
            kid: kid.to_string(),
            alg,
            material: Material::Jose(signer),
            public: Some(public),
        })
    }

    fn ed25519(kid: &str, pem: &[u8]) -> Result<SigningKey, CardError> {
        let not_ed25519 = || err("not a usable EdDSA private key: PKCS#8 Ed25519 expected");
        let PrivateKeyDer::Pkcs8(der) =
            PrivateKeyDer::from_pem_slice(pem).map_err(|_| not_ed25519())?
        else {
            return Err(not_ed25519());
        };
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der.secret_pkcs8_der())
            .map_err(|_| not_ed25519())?;
        let mut public = Map::new();
        public.insert("kty".into(), Value::from("OKP"));
        public.insert("crv".into(), Value::from("Ed25519"));
        public.insert("x".into(), Value::from(b64url(pair.public_key().as_ref())));
        Ok(SigningKey {
            kid: kid.to_string(),
            alg: SigningAlg::EdDSA,
            material: Material::Ed25519(pair),
            public: Some(public),
        })
    }

    /// The public JWK for `/.well-known/jwks.json`: `kty`, `crv`/`x`/`y` or `n`/`e`, `kid`,
    /// `alg` and `use: "sig"`. `None` for HS256: secrets are never published.
    pub fn public_jwk(&self) -> Option<Value> {
        let mut jwk = self.public.clone()?;
        jwk.insert("kid".into(), Value::from(self.kid.as_str()));
        jwk.insert("alg".into(), Value::from(self.alg.as_str()));
        jwk.insert("use".into(), Value::from("sig"));
        Some(Value::Object(jwk))
    }

    /// The raw JWS signature over `signing_input` (for ES256 the 64-byte `R || S` form).
    pub(crate) fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, CardError> {
        match &self.material {
            Material::Secret(secret) => {
                let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
                Ok(ring::hmac::sign(&key, signing_input).as_ref().to_vec())
            }
            Material::Ed25519(pair) => Ok(pair.sign(signing_input).as_ref().to_vec()),
            Material::Jose(signer) => signer
                .sign(signing_input)
                .map_err(|e| err(format!("signing failed: {e}"))),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Test keys as PEM: (alg, PKCS#8 PEM).
    pub(crate) fn generated_pem(alg: SigningAlg) -> Vec<u8> {
        match alg {
            SigningAlg::ES256 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                .unwrap()
                .serialize_pem()
                .into_bytes(),
            SigningAlg::EdDSA => rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
                .unwrap()
                .serialize_pem()
                .into_bytes(),
            // ring and rcgen cannot generate RSA keys; OpenSSL (through josekit) can.
            SigningAlg::RS256 => RS256.generate_key_pair(2048).unwrap().to_pem_private_key(),
            SigningAlg::HS256 => unreachable!("HS256 has no PEM"),
        }
    }

    #[test]
    fn public_jwks_have_the_published_shape() {
        for (alg, kty, members) in [
            (SigningAlg::ES256, "EC", &["crv", "x", "y"][..]),
            (SigningAlg::EdDSA, "OKP", &["crv", "x"][..]),
            (SigningAlg::RS256, "RSA", &["e", "n"][..]),
        ] {
            let key = SigningKey::from_private_pem("k1", alg, &generated_pem(alg)).unwrap();
            let jwk = key.public_jwk().unwrap();
            assert_eq!(jwk["kty"], kty);
            assert_eq!(jwk["kid"], "k1");
            assert_eq!(jwk["alg"], alg.as_str());
            assert_eq!(jwk["use"], "sig");
            for m in members {
                assert!(jwk[m].is_string(), "{alg} {m}");
            }
            let mut names: Vec<&String> = jwk.as_object().unwrap().keys().collect();
            names.sort();
            let mut want: Vec<&str> = ["kty", "kid", "alg", "use"].to_vec();
            want.extend_from_slice(members);
            want.sort();
            assert_eq!(names, want, "{alg}: no private member is published");
        }
        let es =
            SigningKey::from_private_pem("k", SigningAlg::ES256, &generated_pem(SigningAlg::ES256))
                .unwrap()
                .public_jwk()
                .unwrap();
        assert_eq!(es["crv"], "P-256");
        let ed =
            SigningKey::from_private_pem("k", SigningAlg::EdDSA, &generated_pem(SigningAlg::EdDSA))
                .unwrap()
                .public_jwk()
                .unwrap();
        assert_eq!(ed["crv"], "Ed25519");
    }

    #[test]
    fn reads_pkcs8_v1_and_traditional_pem_forms() {
        // RFC 8410 §10.3: an Ed25519 PKCS#8 v1 key (as `openssl genpkey` writes) and its public key.
        let v1 = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n";
        let key = SigningKey::from_private_pem("rfc", SigningAlg::EdDSA, v1.as_bytes()).unwrap();
        assert_eq!(
            key.public_jwk().unwrap()["x"],
            "Gb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE"
        );
        // SEC1 `EC PRIVATE KEY` and PKCS#1 `RSA PRIVATE KEY`.
        let ec = ES256.generate_key_pair().unwrap();
        let sec1 = ec.to_traditional_pem_private_key();
        assert!(String::from_utf8_lossy(&sec1).contains("BEGIN EC PRIVATE KEY"));
        let key = SigningKey::from_private_pem("ec", SigningAlg::ES256, &sec1).unwrap();
        assert_eq!(
            key.public_jwk().unwrap()["x"],
            ec.to_jwk_public_key().parameter("x").unwrap().clone()
        );
        let rsa = RS256.generate_key_pair(2048).unwrap();
        let pkcs1 = rsa.to_traditional_pem_private_key();
        assert!(String::from_utf8_lossy(&pkcs1).contains("BEGIN RSA PRIVATE KEY"));
        assert!(SigningKey::from_private_pem("rsa", SigningAlg::RS256, &pkcs1).is_ok());
    }

    #[test]
    fn secrets_are_never_published_or_printed() {
        let key = SigningKey::hs256("k1", b"k").unwrap();
        assert!(key.public_jwk().is_none());
        let shown = format!("{key:?}");
        assert!(shown.contains("k1") && shown.contains("HS256"));
        let key = SigningKey::hs256("kid", b"super-secret-value").unwrap();
        assert!(!format!("{key:?}").contains("super-secret"));
    }

    #[test]
    fn refuses_wrong_or_weak_keys() {
        assert!(SigningKey::hs256("k1", b"").is_err());
        assert!(SigningKey::hs256("", b"k").is_err());
        assert!(SigningKey::hs256("a\nb", b"k").is_err());
        let es = generated_pem(SigningAlg::ES256);
        let ed = generated_pem(SigningAlg::EdDSA);
        assert!(SigningKey::from_private_pem("k", SigningAlg::RS256, &es).is_err());
        assert!(SigningKey::from_private_pem("k", SigningAlg::EdDSA, &es).is_err());
        assert!(SigningKey::from_private_pem("k", SigningAlg::ES256, &ed).is_err());
        assert!(SigningKey::from_private_pem("k", SigningAlg::HS256, &es).is_err());
        assert!(SigningKey::from_private_pem("k", SigningAlg::ES256, b"not a pem").is_err());
        // P-384 is not ES256.
        let p384 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384)
            .unwrap()
            .serialize_pem();
        assert!(SigningKey::from_private_pem("k", SigningAlg::ES256, p384.as_bytes()).is_err());
        // RSA below 2048 bits.
        let small = josekit::jwk::alg::rsa::RsaKeyPair::generate(1024)
            .unwrap()
            .to_pem_private_key();
        assert!(SigningKey::from_private_pem("k", SigningAlg::RS256, &small).is_err());
    }

    #[test]
    fn alg_names_round_trip_exactly() {
        for alg in [
            SigningAlg::HS256,
            SigningAlg::RS256,
            SigningAlg::ES256,
            SigningAlg::EdDSA,
        ] {
            assert_eq!(SigningAlg::parse(alg.as_str()), Some(alg));
        }
        for bad in ["none", "hs256", "HS384", "PS256", "EDDSA", ""] {
            assert_eq!(SigningAlg::parse(bad), None);
        }
    }
}
