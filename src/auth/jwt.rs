//! JWT bearer tokens (RFC 7519 over compact JWS), verified with a published JWK set.
//!
//! The algorithm is decided by the configuration and the key, never by the token alone: the
//! header's `alg` must be configured, must not be HMAC or `none`, and must fit the key its `kid`
//! names (key type, curve, the key's own `alg` and `use`). Keys never come from the token
//! (`jwk`, `jku`, `x5u`, `x5c` headers are ignored).

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde_json::{Map, Value};

use super::attributes::{claim_at, groups_from_claim, valid_tenant};
use super::jwks::JwksCache;
use super::{AuthRejection, Principal, Scheme};
use crate::reason::{self, Reason};

/// Upper bound on a token; larger ones are refused before any decoding.
pub const MAX_JWT_BYTES: usize = 8192;
/// Upper bound on the principal claim, in characters.
pub const MAX_PRINCIPAL_CHARS: usize = 256;
/// Upper bound on the configured clock leeway: more than this hides a broken clock.
pub const MAX_LEEWAY: Duration = Duration::from_secs(3600);

fn reject(reason: Reason) -> AuthRejection {
    AuthRejection { reason }
}

/// What a token must say to be accepted.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    /// The claim naming the caller (e.g. `sub`); the principal is `jwt:<value>`.
    pub principal_claim: String,
    /// Dotted claim paths of the caller's tenant and groups (optional).
    pub tenant_claim: Option<String>,
    pub groups_claim: Option<String>,
    /// Clock skew allowed on `exp`, `nbf` and `iat`.
    pub leeway: Duration,
}

/// Verifies JWT bearer tokens against a [`JwksCache`].
#[derive(Debug)]
pub struct JwtScheme {
    config: JwtConfig,
    keys: JwksCache,
    /// The claim checks for each configured algorithm, built once.
    validations: Vec<(Algorithm, Validation)>,
}

impl JwtScheme {
    /// The key set these tokens are verified with.
    pub fn keys(&self) -> &JwksCache {
        &self.keys
    }

    /// Refuses HMAC algorithms (HS256/384/512) and an empty list: JWT keys come from a published
    /// JWKS, so a shared secret never can. Also refuses an empty issuer, audience or principal
    /// claim, and a leeway over [`MAX_LEEWAY`].
    pub fn new(mut config: JwtConfig, keys: JwksCache) -> Result<JwtScheme, String> {
        if config.algorithms.is_empty() {
            return Err("JWT: at least one algorithm is required".into());
        }
        if let Some(alg) = config.algorithms.iter().find(|a| is_hmac(**a)) {
            return Err(format!(
                "JWT: algorithm {alg:?} is HMAC; only public-key algorithms verify keys from a JWKS"
            ));
        }
        let mut seen = Vec::with_capacity(config.algorithms.len());
        config.algorithms.retain(|a| {
            let first = !seen.contains(a);
            seen.push(*a);
            first
        });
        for (what, value) in [
            ("issuer", &config.issuer),
            ("audience", &config.audience),
            ("principal claim", &config.principal_claim),
        ] {
            if value.trim().is_empty() {
                return Err(format!("JWT: the {what} must not be empty"));
            }
        }
        if config.leeway > MAX_LEEWAY {
            return Err(format!(
                "JWT: leeway {}s is over the maximum of {}s",
                config.leeway.as_secs(),
                MAX_LEEWAY.as_secs()
            ));
        }
        let validations = config
            .algorithms
            .iter()
            .map(|&alg| (alg, validation(&config, alg)))
            .collect();
        Ok(JwtScheme {
            config,
            keys,
            validations,
        })
    }

    /// Cheap shape test: three base64url segments separated by dots (the signature may be
    /// empty, so an `alg: none` token is still routed here and refused by name), bounded length.
    pub fn looks_like_jwt(token: &str) -> bool {
        split_compact(token).is_some()
    }

    /// Verifies a compact JWS token and returns `jwt:<principal claim>`.
    pub async fn authenticate(&self, token: &str) -> Result<Principal, AuthRejection> {
        self.verify(token, true).await
    }

    /// [`JwtScheme::authenticate`] without the expiry check: for a stream admitted while its
    /// token was valid, proven again at a reload (its signature, issuer, audience and claims
    /// under the policy then in force; an expired token is no reason to end a stream).
    pub async fn authenticate_ignoring_expiry(
        &self,
        token: &str,
    ) -> Result<Principal, AuthRejection> {
        self.verify(token, false).await
    }

    async fn verify(&self, token: &str, check_expiry: bool) -> Result<Principal, AuthRejection> {
        // The header's scope ends before the key's lookup: what lives across an await is
        // carried by this future (the whole parsed header is ~1 KiB).
        let (kid, alg) = {
            let (header, alg) = parse_header(token)?;
            // The configuration decides; HMAC is refused again in case a config skipped `new`.
            if !self.config.algorithms.contains(&alg) || is_hmac(alg) {
                return Err(reject(reason::JWT_ALG));
            }
            match header.kid {
                Some(k) if !k.is_empty() => (k, alg),
                _ => return Err(reject(reason::JWT_KID_MISSING)),
            }
        };
        let jwk = self
            .keys
            .key(&kid)
            .await
            .ok_or(reject(reason::JWT_UNKNOWN_KID))?;
        if !key_fits(&jwk, alg) {
            return Err(reject(reason::JWT_KEY_MISMATCH));
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| reject(reason::JWT_KEY_MISMATCH))?;

        let leeway = self.config.leeway.as_secs();
        let validation = self
            .validations
            .iter()
            .find(|(a, _)| *a == alg)
            .map(|(_, v)| v)
            .ok_or(reject(reason::JWT_ALG))?;
        let lenient;
        let validation = if check_expiry {
            validation
        } else {
            let mut v = validation.clone();
            v.validate_exp = false;
            lenient = v;
            &lenient
        };
        // Signature first, then claims: nothing below is looked at for an unsigned token.
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, validation)
            .map_err(|e| reject(reason_for(e.kind())))?
            .claims;

        // The library also accepts an array `iss`; RFC 7519 says one string.
        if claims.get("iss").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
            return Err(reject(reason::JWT_ISSUER));
        }
        // The library ignores an `nbf` it cannot read and never looks at `iat`.
        let now = crate::time::now_secs();
        for name in ["nbf", "iat"] {
            if let Some(v) = claims.get(name) {
                let at = numeric_date(v).ok_or(reject(reason::JWT_MALFORMED))?;
                if at > (now + leeway) as f64 {
                    return Err(reject(reason::JWT_NOT_YET_VALID));
                }
            }
        }
        let name = match claims.get(&self.config.principal_claim) {
            Some(Value::String(s)) if valid_principal(s) => s,
            _ => return Err(reject(reason::JWT_CLAIM)),
        };
        let mut principal = Principal::new(format!("jwt:{name}"), Scheme::Jwt);
        // An absent (or null) attribute claim is no attribute; a malformed one is a refusal.
        if let Some(path) = &self.config.tenant_claim {
            match claim_at(&claims, path) {
                None | Some(Value::Null) => {}
                Some(Value::String(t)) if valid_tenant(t) => principal.tenant = Some(t.clone()),
                Some(_) => return Err(reject(reason::JWT_CLAIM)),
            }
        }
        if let Some(path) = &self.config.groups_claim {
            match claim_at(&claims, path) {
                None | Some(Value::Null) => {}
                Some(v) => {
                    principal.groups = groups_from_claim(v).ok_or(reject(reason::JWT_CLAIM))?
                }
            }
        }
        Ok(principal)
    }
}

/// The library's checks of a token signed with `alg`: expiry, not-before and audience with the
/// leeway, `exp`, `iss` and `aud` required, the one issuer and audience (its NumericDates may
/// hold a fraction, RFC 7519 §2: the library rounds them).
fn validation(config: &JwtConfig, alg: Algorithm) -> Validation {
    let mut validation = Validation::new(alg);
    validation.leeway = config.leeway.as_secs();
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&[&config.issuer]);
    validation.set_audience(&[&config.audience]);
    validation
}

fn is_hmac(alg: Algorithm) -> bool {
    matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

fn is_b64url(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `header.payload.signature`, each base64url without padding, header and payload non-empty.
fn split_compact(token: &str) -> Option<(&str, &str, &str)> {
    if token.is_empty() || token.len() > MAX_JWT_BYTES {
        return None;
    }
    let mut parts = token.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(p), Some(s), None)
            if !h.is_empty() && !p.is_empty() && is_b64url(h) && is_b64url(p) && is_b64url(s) =>
        {
            Some((h, p, s))
        }
        _ => None,
    }
}

/// The typed header and its algorithm, read from the raw JSON too: `none` (in any case) is
/// refused by name before the library, which has no `none`, could call it malformed.
fn parse_header(token: &str) -> Result<(Header, Algorithm), AuthRejection> {
    let malformed = reject(reason::JWT_MALFORMED);
    let (header, _, _) = split_compact(token).ok_or(malformed)?;
    let bytes = URL_SAFE_NO_PAD.decode(header).map_err(|_| malformed)?;
    let raw: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|_| malformed)?;
    let alg_name = raw.get("alg").and_then(Value::as_str).ok_or(malformed)?;
    if alg_name.eq_ignore_ascii_case("none") {
        return Err(reject(reason::JWT_ALG));
    }
    let alg: Algorithm = serde_json::from_value(Value::String(alg_name.to_string()))
        .map_err(|_| reject(reason::JWT_ALG))?;
    // RFC 7515 §4.1.11: critical extensions must be understood; none is.
    if raw.contains_key("crit") {
        return Err(malformed);
    }
    // Parsed from the bytes (not the map), so duplicate members are refused, not merged.
    let typed: Header = serde_json::from_slice(&bytes).map_err(|_| malformed)?;
    if typed.alg != alg {
        return Err(malformed);
    }
    Ok((typed, alg))
}

/// Whether this JWK may verify a signature made with `alg`. `oct` keys and HMAC never fit.
fn key_fits(jwk: &Jwk, alg: Algorithm) -> bool {
    if !matches!(
        jwk.common.public_key_use,
        None | Some(PublicKeyUse::Signature)
    ) {
        return false;
    }
    if let Some(ops) = &jwk.common.key_operations {
        if !ops.contains(&KeyOperations::Verify) {
            return false;
        }
    }
    if let Some(declared) = jwk.common.key_algorithm {
        if key_algorithm(declared) != Some(alg) {
            return false;
        }
    }
    match (&jwk.algorithm, alg) {
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512,
        ) => true,
        (AlgorithmParameters::EllipticCurve(p), Algorithm::ES256) => p.curve == EllipticCurve::P256,
        (AlgorithmParameters::EllipticCurve(p), Algorithm::ES384) => p.curve == EllipticCurve::P384,
        (AlgorithmParameters::OctetKeyPair(p), Algorithm::EdDSA) => {
            p.curve == EllipticCurve::Ed25519
        }
        _ => false,
    }
}

/// The signature algorithm a JWK `alg` names; `None` for encryption algorithms.
fn key_algorithm(k: KeyAlgorithm) -> Option<Algorithm> {
    Some(match k {
        KeyAlgorithm::HS256 => Algorithm::HS256,
        KeyAlgorithm::HS384 => Algorithm::HS384,
        KeyAlgorithm::HS512 => Algorithm::HS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        KeyAlgorithm::RSA1_5 | KeyAlgorithm::RSA_OAEP | KeyAlgorithm::RSA_OAEP_256 => return None,
    })
}

fn reason_for(kind: &ErrorKind) -> Reason {
    match kind {
        ErrorKind::InvalidSignature | ErrorKind::Crypto(_) => reason::JWT_SIGNATURE,
        ErrorKind::ExpiredSignature => reason::JWT_EXPIRED,
        ErrorKind::ImmatureSignature => reason::JWT_NOT_YET_VALID,
        ErrorKind::InvalidIssuer => reason::JWT_ISSUER,
        ErrorKind::InvalidAudience => reason::JWT_AUDIENCE,
        ErrorKind::MissingRequiredClaim(c) => match c.as_str() {
            "exp" => reason::JWT_EXPIRED,
            "iss" => reason::JWT_ISSUER,
            "aud" => reason::JWT_AUDIENCE,
            _ => reason::JWT_CLAIM,
        },
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => reason::JWT_ALG,
        ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidRsaKey(_) | ErrorKind::InvalidKeyFormat => {
            reason::JWT_KEY_MISMATCH
        }
        // Bad base64, JSON or UTF-8, and whatever a later version adds: fail closed.
        _ => reason::JWT_MALFORMED,
    }
}

/// A NumericDate (RFC 7519 §2): a non-negative number of seconds.
fn numeric_date(v: &Value) -> Option<f64> {
    v.as_f64().filter(|t| t.is_finite() && *t >= 0.0)
}

/// Non-empty, bounded, and free of control characters and of the invisible ones that can
/// make two principals look alike in a log (zero-width, bidi overrides, line separators).
fn valid_principal(s: &str) -> bool {
    !s.is_empty()
        && s.chars().count() <= MAX_PRINCIPAL_CHARS
        && !s.chars().any(|c| c.is_control() || is_invisible(c))
}

fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jwks::tests::TempDir;
    use crate::auth::jwks::JwksSource;
    use jsonwebtoken::EncodingKey;
    use rustls_pki_types::pem::PemObject;
    use serde_json::json;

    /// A 2048-bit RSA key for tests only (ring cannot generate RSA keys). Never used elsewhere.
    const TEST_RSA_KEY: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEogIBAAKCAQEA1ebU8c5Q6k7WMG/nnF28txVn6pFuJ1SemBz4b7aMTPl+TsYO
sA8GiI8/qoIKQQXZELeD9AoW3uPhCjG6FVj+s0FoYaJSmDUWVBlyHkXP3jopzSEF
wwH1HKHdeUogvqMM0c74GLTAl30N6qJdPaLf1f6MwA3drmaDJ52VZgG3IAJA6+KB
pFrGyMgXHPnXzqN1ubAAx4yYRqcMattH6mkeX/manmoB8iOvyaS15jjh3OzktYJN
7l3yg1wR7JiaO1s5D1NhMN8xwE2oFQUBh0GImnEjUL6XEifzreiwA7lzdXoug/z9
xV6I4V4qju7FicZ7/FgoCaKawFyxHGVJapR32wIDAQABAoIBABbtrGvTEsda9gix
JiGTxrPVXpM9TZJ3tpxVlqfa6IUjxU9KWa6znZ6rxEZRtCmuJ8tr8IALSNJRmQDP
vcOmC39JhpfYn4PjROZ058+o6hRHJc3wOT7jCdQs4aGruYDV13zx85QqY+6ZIBHD
n70IpXe51nqLwfR81pg7gxUxH+EVSn8SAmAxYaX0Y5qU8D2MHs9VFcO5vO+vFM8t
e9sRnJx2YlDQQLpvdPF5vf6r+SSoNaEB1zb9d6aWljrXHRO9nyHUUcQ8ZXBWIPXU
TgsBhEFgUYxCtRMTRQjTXsRiD2hy7l9Vy6kmhYb6/itUaA/l/d2nRhi0dvjdT8Lg
NSA/03kCgYEA+NbXpQTk4uRFnWjbxrBWMzf4GhfPugt9HxQBVt7uXEo7SaEWs958
P06OhmO+DUYh83NizVfhwySBZm7Qo4nPs4GVi0FIMAndgbEkeYtH8gpq+r+SnBQe
czJW3Rysh1d9gOrDk881lSIcU9IKcC+w8kS97thgNk4iwkZ57n5RpMUCgYEA3A6c
Pwsd7T7rS+80mBREbZBVzDNYaWvil/Kp39MNJ4jl5lGX53gwVeGSLZmDCVVCKvkv
2zk0/ertAajORWAlavi3eSLbWI/czprI0ARyBF00ORce4sRNNK5tSb8d/AX/DaXm
U/P3g1gJWXDkEGTVFPjmbmXAMw5nPjv+Ff7rtB8CgYAOjbo1C5E7d/BeYXihKUUR
X8+h7wyWK//YZnohk45LVYgcKVDDmlqX9Uc+suy1qAlqTLBVpDMvD56F2CtZtUCx
lf2iFGJddOZApJSmiy/dByD0o2m2uTKCuEn+SqQIkmRjutdPeMoAe+s+N8WmhBOM
R9r38i3GX1GHHUoaWcb6pQKBgFlwwsbI8O/1q9MgNWM+kZVqncSyddPbWqzhn3Pu
pyETfkW/khsteY/eb/iCtYS8l3k58N6MgOJXct9CyhveeTbiQkhFB5wWVOvQc6BA
vkrRyyENKauHl826u4bG3BwMH99fN5+VwFstFBe7T6buJMEybQ4f4x+dUg80eRBd
nVWHAoGAVqDGpF5Wmm1AHm7tiEbUXTtsb0K+ECv+5gAlAlmspiriTuor82ezrnaR
/cYA4I1Wfr21VPv88in3PQm5jKu7ja+GjdrO55qP/Bdh9MJm2qkoWL3XZjBM9CPD
pEs4p+wk+IRqKMcqU7I4T6b44w2EjLCyjOd+3E6YN4UY71EU3Ko=
-----END RSA PRIVATE KEY-----
";

    const ISS: &str = "https://issuer.example";
    const AUD: &str = "a2a-edge";
    const HOUR: Duration = Duration::from_secs(3600);

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Test keys: private halves to sign with, public halves in the JWKS.
    struct Keys {
        es: rcgen::KeyPair,
        es_other: rcgen::KeyPair,
        ed: rcgen::KeyPair,
        rsa_der: Vec<u8>,
        rsa_n: Vec<u8>,
        rsa_e: Vec<u8>,
    }

    impl Keys {
        fn new() -> Keys {
            let rsa_der =
                rustls_pki_types::PrivatePkcs1KeyDer::from_pem_slice(TEST_RSA_KEY.as_bytes())
                    .unwrap()
                    .secret_pkcs1_der()
                    .to_vec();
            let pair = ring::signature::RsaKeyPair::from_der(&rsa_der).unwrap();
            let public = ring::signature::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
            Keys {
                es: rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
                es_other: rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
                ed: rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
                rsa_der,
                rsa_n: public.n,
                rsa_e: public.e,
            }
        }

        fn es_key(&self) -> EncodingKey {
            EncodingKey::from_ec_der(&self.es.serialize_der())
        }

        fn rsa_jwk(&self, kid: &str) -> Value {
            json!({"kty": "RSA", "kid": kid, "n": b64(&self.rsa_n), "e": b64(&self.rsa_e)})
        }

        fn jwks(&self) -> Value {
            let raw = self.es.public_key_raw();
            let mut rsa_384 = self.rsa_jwk("rsa-384");
            rsa_384["alg"] = json!("RS384");
            let mut rsa_enc = self.rsa_jwk("rsa-enc");
            rsa_enc["use"] = json!("enc");
            let mut rsa_ops = self.rsa_jwk("rsa-ops");
            rsa_ops["key_ops"] = json!(["encrypt"]);
            let mut es_tagged = ec_public(&self.es, "es-tagged");
            es_tagged["alg"] = json!("ES256");
            es_tagged["use"] = json!("sig");
            json!({"keys": [
                {"kty": "EC", "crv": "P-256", "kid": "es",
                 "x": b64(&raw[1..33]), "y": b64(&raw[33..65])},
                es_tagged,
                {"kty": "OKP", "crv": "Ed25519", "kid": "ed",
                 "x": b64(self.ed.public_key_raw())},
                self.rsa_jwk("rsa"),
                rsa_384,
                rsa_enc,
                rsa_ops,
                {"kty": "oct", "kid": "oct", "k": b64(b"a shared secret that must never be used")},
            ]})
        }
    }

    fn ec_public(kp: &rcgen::KeyPair, kid: &str) -> Value {
        let raw = kp.public_key_raw();
        json!({"kty": "EC", "crv": "P-256", "kid": kid,
               "x": b64(&raw[1..33]), "y": b64(&raw[33..65])})
    }

    fn config() -> JwtConfig {
        JwtConfig {
            issuer: ISS.into(),
            audience: AUD.into(),
            algorithms: vec![
                Algorithm::ES256,
                Algorithm::ES384,
                Algorithm::EdDSA,
                Algorithm::RS256,
                Algorithm::PS256,
            ],
            principal_claim: "sub".into(),
            tenant_claim: Some("org.tenant".into()),
            groups_claim: Some("groups".into()),
            leeway: Duration::from_secs(60),
        }
    }

    async fn scheme(dir: &TempDir, jwks: &Value) -> JwtScheme {
        let path = dir.0.join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap();
        let cache = JwksCache::load(JwksSource::File(path), HOUR, HOUR)
            .await
            .unwrap();
        JwtScheme::new(config(), cache).unwrap()
    }

    fn now() -> i64 {
        crate::time::now_secs() as i64
    }

    fn claims() -> Value {
        json!({"iss": ISS, "aud": AUD, "sub": "alice", "iat": now(), "exp": now() + 600})
    }

    fn with(mut claims: Value, key: &str, value: Value) -> Value {
        claims[key] = value;
        claims
    }

    fn without(mut claims: Value, key: &str) -> Value {
        claims.as_object_mut().unwrap().remove(key);
        claims
    }

    fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_string);
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    /// A token assembled by hand, for headers the library would not write.
    fn raw(header: Value, claims: &Value, signature: &[u8]) -> String {
        format!(
            "{}.{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes()),
            b64(signature)
        )
    }

    fn hs256(kid: &str, claims: &Value, secret: &[u8]) -> String {
        sign(
            Algorithm::HS256,
            Some(kid),
            claims,
            &EncodingKey::from_secret(secret),
        )
    }

    #[tokio::test]
    async fn table_of_tokens() {
        let dir = TempDir::new("jwt");
        let k = Keys::new();
        let scheme = scheme(&dir, &k.jwks()).await;
        let es = k.es_key();
        let ed = EncodingKey::from_ed_der(&k.ed.serialize_der());
        let rsa = EncodingKey::from_rsa_der(&k.rsa_der);
        let es_other = EncodingKey::from_ec_der(&k.es_other.serialize_der());
        let c = claims();
        let ok = Ok("jwt:alice");
        let valid_es = sign(Algorithm::ES256, Some("es"), &c, &es);
        let tampered = {
            let parts: Vec<&str> = valid_es.split('.').collect();
            let evil = with(c.clone(), "sub", json!("admin"));
            format!(
                "{}.{}.{}",
                parts[0],
                b64(evil.to_string().as_bytes()),
                parts[2]
            )
        };

        // ES256 with kid "es" over the default claims with one claim set or removed.
        let es_with =
            |k: &str, v: Value| sign(Algorithm::ES256, Some("es"), &with(claims(), k, v), &es);
        let es_without = |k: &str| sign(Algorithm::ES256, Some("es"), &without(claims(), k), &es);
        let es_kid = |kid: Option<&str>| sign(Algorithm::ES256, kid, &c, &es);
        let rsa_kid = |alg: Algorithm, kid: &str| sign(alg, Some(kid), &c, &rsa);
        let hdr = |h: Value| raw(h, &c, b"sig");
        let long_sub = format!("jwt:{}", "é".repeat(256));
        let claims_not_object = {
            let key = ring::signature::EcdsaKeyPair::from_pkcs8(
                &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &k.es.serialize_der(),
                &ring::rand::SystemRandom::new(),
            )
            .unwrap();
            let msg = format!("{}.{}", b64(br#"{"alg":"ES256","kid":"es"}"#), b64(b"[1]"));
            let sig = key
                .sign(&ring::rand::SystemRandom::new(), msg.as_bytes())
                .unwrap();
            format!("{msg}.{}", b64(sig.as_ref()))
        };
        let no_signature = valid_es[..=valid_es.rfind('.').unwrap()].to_string();
        let duplicate_alg = format!(
            "{}.{}.AA",
            b64(br#"{"alg":"ES256","alg":"HS256","kid":"es"}"#),
            b64(c.to_string().as_bytes())
        );
        let oct_secret: &[u8] = b"a shared secret that must never be used";

        #[rustfmt::skip]
        let cases: Vec<(&str, String, Result<&str, &str>)> = vec![
            ("valid ES256", valid_es.clone(), ok),
            ("valid ES256, JWK with alg and use", sign(Algorithm::ES256, Some("es-tagged"), &c, &es), ok),
            ("valid EdDSA", sign(Algorithm::EdDSA, Some("ed"), &c, &ed), ok),
            ("valid RS256", rsa_kid(Algorithm::RS256, "rsa"), ok),
            ("valid PS256", rsa_kid(Algorithm::PS256, "rsa"), ok),
            // alg none, crafted by hand, in several spellings; other algorithms not configured.
            ("alg none", raw(json!({"alg": "none", "kid": "es"}), &c, b""), Err("jwt.alg")),
            ("alg None", raw(json!({"alg": "None", "kid": "es"}), &c, b""), Err("jwt.alg")),
            ("alg NONE, signed", hdr(json!({"alg": "NONE", "kid": "es"})), Err("jwt.alg")),
            ("alg unknown", hdr(json!({"alg": "ES512", "kid": "es"})), Err("jwt.alg")),
            ("alg lower case", hdr(json!({"alg": "es256", "kid": "es"})), Err("jwt.alg")),
            ("alg not configured", rsa_kid(Algorithm::RS512, "rsa"), Err("jwt.alg")),
            // The classic confusion: HMAC keyed with the public key.
            ("HS256, RSA modulus", hs256("rsa", &c, &k.rsa_n), Err("jwt.alg")),
            ("HS256, RSA JWK text", hs256("rsa", &c, k.rsa_jwk("rsa").to_string().as_bytes()), Err("jwt.alg")),
            ("HS256, EC SPKI", hs256("es", &c, &k.es.public_key_der()), Err("jwt.alg")),
            ("HS256, EC point", hs256("es", &c, k.es.public_key_raw()), Err("jwt.alg")),
            ("HS256, oct key of the set", hs256("oct", &c, oct_secret), Err("jwt.alg")),
            // Key selection.
            ("kid missing", es_kid(None), Err("jwt.kid_missing")),
            ("kid empty", es_kid(Some("")), Err("jwt.kid_missing")),
            ("kid unknown", es_kid(Some("nope")), Err("jwt.unknown_kid")),
            ("kid too long", es_kid(Some(&"k".repeat(300))), Err("jwt.unknown_kid")),
            ("ES256 with an RSA key", es_kid(Some("rsa")), Err("jwt.key_mismatch")),
            ("ES256 with the oct key", es_kid(Some("oct")), Err("jwt.key_mismatch")),
            ("RS256 with an EC key", rsa_kid(Algorithm::RS256, "es"), Err("jwt.key_mismatch")),
            ("EdDSA with an EC key", sign(Algorithm::EdDSA, Some("es"), &c, &ed), Err("jwt.key_mismatch")),
            ("ES384 with a P-256 key", raw(json!({"alg": "ES384", "kid": "es"}), &c, &[0; 96]), Err("jwt.key_mismatch")),
            ("RS256, JWK alg RS384", rsa_kid(Algorithm::RS256, "rsa-384"), Err("jwt.key_mismatch")),
            ("RS256, JWK use enc", rsa_kid(Algorithm::RS256, "rsa-enc"), Err("jwt.key_mismatch")),
            ("RS256, JWK key_ops encrypt", rsa_kid(Algorithm::RS256, "rsa-ops"), Err("jwt.key_mismatch")),
            // Signatures.
            ("signed by another key", sign(Algorithm::ES256, Some("es"), &c, &es_other), Err("jwt.signature")),
            ("payload tampered", tampered, Err("jwt.signature")),
            ("signature missing", no_signature, Err("jwt.signature")),
            // Time (leeway 60 s).
            ("expired", es_with("exp", json!(now() - 3600)), Err("jwt.expired")),
            ("exp missing", es_without("exp"), Err("jwt.expired")),
            ("exp not a number", es_with("exp", json!("tomorrow")), Err("jwt.expired")),
            ("expired within leeway", es_with("exp", json!(now() - 30)), ok),
            ("exp null", es_with("exp", json!(null)), Err("jwt.expired")),
            ("exp negative", es_with("exp", json!(-1)), Err("jwt.expired")),
            // RFC 7519 §2: a NumericDate may hold a fraction.
            ("exp with a fraction", es_with("exp", json!(now() as f64 + 600.5)), ok),
            ("exp with a fraction, expired", es_with("exp", json!(now() as f64 - 3600.5)), Err("jwt.expired")),
            ("nbf with a fraction", es_with("nbf", json!(now() as f64 - 0.5)), ok),
            ("nbf in the future", es_with("nbf", json!(now() + 3600)), Err("jwt.not_yet_valid")),
            ("nbf within leeway", es_with("nbf", json!(now() + 30)), ok),
            ("nbf not a number", es_with("nbf", json!("soon")), Err("jwt.malformed")),
            ("iat in the future", es_with("iat", json!(now() + 3600)), Err("jwt.not_yet_valid")),
            ("iat within leeway", es_with("iat", json!(now() + 30)), ok),
            ("iat negative", es_with("iat", json!(-1)), Err("jwt.malformed")),
            // Issuer and audience.
            ("wrong iss", es_with("iss", json!("https://evil.example")), Err("jwt.issuer")),
            ("iss missing", es_without("iss"), Err("jwt.issuer")),
            ("iss as an array", es_with("iss", json!([ISS])), Err("jwt.issuer")),
            ("wrong aud", es_with("aud", json!("other")), Err("jwt.audience")),
            ("aud missing", es_without("aud"), Err("jwt.audience")),
            ("aud array with ours", es_with("aud", json!(["other", AUD])), ok),
            ("aud array without ours", es_with("aud", json!(["other", "more"])), Err("jwt.audience")),
            ("aud array with a number", es_with("aud", json!([AUD, 7])), Err("jwt.audience")),
            // The principal claim.
            ("sub missing", es_without("sub"), Err("jwt.claim")),
            ("sub empty", es_with("sub", json!("")), Err("jwt.claim")),
            ("sub a number", es_with("sub", json!(42)), Err("jwt.claim")),
            ("sub with a newline", es_with("sub", json!("alice\nbob")), Err("jwt.claim")),
            ("sub with DEL", es_with("sub", json!("alice\u{7f}")), Err("jwt.claim")),
            ("sub with a bidi override", es_with("sub", json!("alice\u{202e}nimda")), Err("jwt.claim")),
            ("sub with a zero-width space", es_with("sub", json!("ali\u{200b}ce")), Err("jwt.claim")),
            ("sub of 256 characters", es_with("sub", json!("é".repeat(256))), Ok(long_sub.as_str())),
            ("sub of 257 characters", es_with("sub", json!("é".repeat(257))), Err("jwt.claim")),
            // Shape.
            ("oversize", es_with("pad", json!("x".repeat(MAX_JWT_BYTES))), Err("jwt.malformed")),
            ("garbage", "garbage".into(), Err("jwt.malformed")),
            ("empty", String::new(), Err("jwt.malformed")),
            ("two segments", "eyJhbGciOiJFUzI1NiJ9.e30".into(), Err("jwt.malformed")),
            ("four segments", format!("{valid_es}.e30"), Err("jwt.malformed")),
            ("padding", format!("{valid_es}="), Err("jwt.malformed")),
            ("header not base64url", format!("eyJ+{valid_es}"), Err("jwt.malformed")),
            ("header not JSON", format!("{}.e30.AA", b64(b"not json")), Err("jwt.malformed")),
            ("header an array", format!("{}.e30.AA", b64(b"[]")), Err("jwt.malformed")),
            ("header without alg", hdr(json!({"kid": "es"})), Err("jwt.malformed")),
            ("header with duplicate alg", duplicate_alg, Err("jwt.malformed")),
            ("header with crit", hdr(json!({"alg": "ES256", "kid": "es", "crit": ["b64"], "b64": false})), Err("jwt.malformed")),
            ("claims not an object", claims_not_object, Err("jwt.malformed")),
        ];

        let mut failures = Vec::new();
        for (name, token, expected) in &cases {
            let got = scheme.authenticate(token).await;
            let got = got
                .as_ref()
                .map(|p| p.name.as_str())
                .map_err(|r| r.reason.as_str());
            if got != *expected {
                failures.push(format!("{name}: expected {expected:?}, got {got:?}"));
            }
            if let Ok(p) = scheme.authenticate(token).await {
                assert_eq!(p.scheme, Scheme::Jwt);
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[tokio::test]
    async fn tenant_and_groups_from_claims() {
        let dir = TempDir::new("jwt-attrs");
        let k = Keys::new();
        let scheme = scheme(&dir, &k.jwks()).await;
        let es = k.es_key();
        type Want = Result<(Option<&'static str>, Vec<&'static str>), &'static str>;
        let cases: Vec<(&str, Value, Value, Want)> = vec![
            ("none", json!(null), json!(null), Ok((None, vec![]))),
            (
                "nested tenant, array groups",
                json!({"tenant": "team-a"}),
                json!(["ops", "auditors"]),
                Ok((Some("team-a"), vec!["auditors", "ops"])),
            ),
            (
                "space-separated groups",
                json!({"tenant": "team-b"}),
                json!("deployers ops ops"),
                Ok((Some("team-b"), vec!["deployers", "ops"])),
            ),
            (
                "tenant a number",
                json!({"tenant": 7}),
                json!(null),
                Err("jwt.claim"),
            ),
            (
                "tenant empty",
                json!({"tenant": ""}),
                json!(null),
                Err("jwt.claim"),
            ),
            (
                "tenant with a newline",
                json!({"tenant": "a\nb"}),
                json!(null),
                Err("jwt.claim"),
            ),
            (
                "tenant an array",
                json!({"tenant": ["a"]}),
                json!(null),
                Err("jwt.claim"),
            ),
            (
                "tenant too long",
                json!({"tenant": "t".repeat(129)}),
                json!(null),
                Err("jwt.claim"),
            ),
            (
                "org not an object",
                json!("team-a"),
                json!(null),
                Ok((None, vec![])),
            ),
            (
                "groups an object",
                json!(null),
                json!({"a": true}),
                Err("jwt.claim"),
            ),
            (
                "groups with a number",
                json!(null),
                json!(["a", 1]),
                Err("jwt.claim"),
            ),
            (
                "too many groups",
                json!(null),
                Value::Array((0..40).map(|i| json!(format!("g{i}"))).collect()),
                Err("jwt.claim"),
            ),
            (
                "group with a space",
                json!(null),
                json!(["a b"]),
                Err("jwt.claim"),
            ),
        ];
        for (name, org, groups, want) in cases {
            let mut c = claims();
            if !org.is_null() {
                c["org"] = org;
            }
            if !groups.is_null() {
                c["groups"] = groups;
            }
            let token = sign(Algorithm::ES256, Some("es"), &c, &es);
            let got = scheme.authenticate(&token).await;
            let got = got.as_ref().map_err(|r| r.reason.as_str()).map(|p| {
                (
                    p.tenant.as_deref(),
                    p.groups.iter().map(String::as_str).collect::<Vec<_>>(),
                )
            });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn key_type_decides_even_if_hmac_were_configured() {
        let k = Keys::new();
        let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(k.jwks()).unwrap();
        for jwk in &set.keys {
            for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
                assert!(!key_fits(jwk, alg), "{:?} with {alg:?}", jwk.common.key_id);
            }
        }
        let rsa = set.find("rsa").unwrap();
        assert!(key_fits(rsa, Algorithm::RS256));
        assert!(key_fits(rsa, Algorithm::PS512));
        assert!(!key_fits(rsa, Algorithm::ES256));
        assert!(key_fits(set.find("es").unwrap(), Algorithm::ES256));
        assert!(!key_fits(set.find("es").unwrap(), Algorithm::ES384));
        assert!(key_fits(set.find("ed").unwrap(), Algorithm::EdDSA));
    }

    #[tokio::test]
    async fn rotation_refreshes_once_then_rate_limits() {
        let dir = TempDir::new("jwt-rotation");
        let k = Keys::new();
        let scheme = scheme(&dir, &k.jwks()).await;
        let c = claims();

        let next = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut jwks = k.jwks();
        jwks["keys"]
            .as_array_mut()
            .unwrap()
            .push(ec_public(&next, "es-next"));
        std::fs::write(dir.0.join("jwks.json"), jwks.to_string()).unwrap();
        let token = sign(
            Algorithm::ES256,
            Some("es-next"),
            &c,
            &EncodingKey::from_ec_der(&next.serialize_der()),
        );
        assert_eq!(scheme.authenticate(&token).await.unwrap().name, "jwt:alice");
        assert_eq!(scheme.keys.refresh_count(), 1);

        // A second new key within the interval: not re-read, so unknown.
        let later = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        jwks["keys"]
            .as_array_mut()
            .unwrap()
            .push(ec_public(&later, "es-later"));
        std::fs::write(dir.0.join("jwks.json"), jwks.to_string()).unwrap();
        let token = sign(
            Algorithm::ES256,
            Some("es-later"),
            &c,
            &EncodingKey::from_ec_der(&later.serialize_der()),
        );
        assert_eq!(
            scheme.authenticate(&token).await.unwrap_err().reason,
            "jwt.unknown_kid"
        );
        assert_eq!(scheme.keys.refresh_count(), 1);
        // Known keys keep working without a re-read.
        let token = sign(Algorithm::ES256, Some("es"), &c, &k.es_key());
        assert!(scheme.authenticate(&token).await.is_ok());
        assert_eq!(scheme.keys.refresh_count(), 1);
    }

    #[tokio::test]
    async fn new_refuses_hmac_and_empty_settings() {
        let dir = TempDir::new("jwt-new");
        let k = Keys::new();
        let path = dir.0.join("jwks.json");
        std::fs::write(&path, k.jwks().to_string()).unwrap();
        let cache = JwksCache::load(JwksSource::File(path), HOUR, HOUR)
            .await
            .unwrap();
        let try_new = |f: &dyn Fn(&mut JwtConfig)| {
            let mut cfg = config();
            f(&mut cfg);
            JwtScheme::new(cfg, cache.clone())
        };
        for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            assert!(try_new(&|c| c.algorithms.push(alg)).is_err(), "{alg:?}");
        }
        assert!(try_new(&|c| c.algorithms.clear()).is_err());
        assert!(try_new(&|c| c.issuer.clear()).is_err());
        assert!(try_new(&|c| c.audience = " ".into()).is_err());
        assert!(try_new(&|c| c.principal_claim.clear()).is_err());
        assert!(try_new(&|c| c.leeway = Duration::from_secs(86_400)).is_err());
        let s = try_new(&|c| c.algorithms.push(Algorithm::ES256)).unwrap();
        assert_eq!(s.config.algorithms.len(), config().algorithms.len());

        // Shared by every request.
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: &T) {}
        send_sync(&s);
        send(&s.authenticate("x"));
        // A token's check sits inside every request's future: it does not carry the parsed
        // header across the key's lookup, nor a key set's fetch (rare; boxed where awaited).
        let size = std::mem::size_of_val(&s.authenticate("x"));
        assert!(size < 1024, "{size} bytes");
    }

    #[test]
    fn looks_like_jwt_is_a_shape_test() {
        assert!(JwtScheme::looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"));
        assert!(JwtScheme::looks_like_jwt("eyJhbGciOiJub25lIn0.e30."));
        for t in [
            "",
            "opaque-static-token",
            "a.b",
            "a.b.c.d",
            ".b.c",
            "a..c",
            "a.b.c=",
            "a+b.c.d",
            "a.b/c.d",
            "a.b. c",
        ] {
            assert!(!JwtScheme::looks_like_jwt(t), "{t:?}");
        }
        let long = format!("{}.e30.c2ln", "a".repeat(MAX_JWT_BYTES));
        assert!(!JwtScheme::looks_like_jwt(&long));
    }
}
