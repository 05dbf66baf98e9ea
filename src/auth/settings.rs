//! What the `[auth]` table compiles to (built by `crate::policy`, read by the authenticator):
//! the schemes that prove a caller and the secrets they compare against.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::attributes::{Attributes, IdentityPattern};

#[derive(Debug, Clone)]
pub struct AuthPolicy {
    pub allow_anonymous: bool,
    pub bearer: Vec<BearerCredential>,
    pub basic: Vec<BasicCredential>,
    pub api_key: Option<ApiKeyPolicy>,
    pub jwt: Option<JwtPolicy>,
    /// Client certificates (from `[tls]`).
    pub client_auth: ClientAuth,
    /// The header that carries the principal to the agents (always stripped from callers).
    pub principal_header: String,
    pub throttle: ThrottlePolicy,
    /// Tenants and groups of client-certificate identities (`[[auth.mtls.identities]]`).
    pub mtls_identities: Vec<IdentityPattern>,
    /// `[auth.identity_assertion]`: a signed statement of the caller on every forwarded request.
    pub identity_assertion: Option<IdentityAssertionPolicy>,
    /// The iac-code environment variables that configured a scheme the policy left unset
    /// (`IACCODE_A2A_HTTP_TOKEN`, ...): shown by `check` and logged by `serve`, so that
    /// credentials nobody wrote into the policy never go unnoticed.
    pub from_environment: Vec<&'static str>,
}

/// The signed identity the agents receive (a compact JWS in `header`).
#[derive(Debug, Clone)]
pub struct IdentityAssertionPolicy {
    pub key: std::sync::Arc<crate::card::keys::SigningKey>,
    /// Lower-case header name.
    pub header: String,
    pub ttl: Duration,
}

impl AuthPolicy {
    /// The tenant and groups the policy gives a static principal (bearer, basic, API key;
    /// the first entry by that name), for `check --explain`.
    pub fn attributes_of(&self, name: &str) -> Option<&Attributes> {
        self.bearer
            .iter()
            .find(|b| b.principal == name)
            .map(|b| &b.attributes)
            .or_else(|| {
                self.basic
                    .iter()
                    .find(|b| b.username == name)
                    .map(|b| &b.attributes)
            })
            .or_else(|| self.api_key.as_ref().and_then(|a| a.attributes.get(name)))
    }

    /// Whether any scheme can prove a caller.
    pub fn any_scheme(&self) -> bool {
        !self.bearer.is_empty()
            || !self.basic.is_empty()
            || self.api_key.is_some()
            || self.jwt.is_some()
            || self.client_auth != ClientAuth::Off
    }
}

/// `tls.client_auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    Off,
    Optional,
    Required,
}

/// A bearer token known by its SHA-256 digest only.
#[derive(Clone)]
pub struct BearerCredential {
    pub principal: String,
    pub attributes: Attributes,
    pub token_sha256: [u8; 32],
    /// Set only when the token came from a `token_file` (printed once for the operator).
    pub generated: Option<GeneratedToken>,
}

impl fmt::Debug for BearerCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerCredential")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

/// A dev token read from or written to a `token_file`, shown to the operator at start-up.
#[derive(Clone)]
pub struct GeneratedToken {
    pub token: String,
    pub file: PathBuf,
    pub created: bool,
}

#[derive(Clone)]
pub struct BasicCredential {
    pub username: String,
    pub attributes: Attributes,
    pub secret: BasicSecret,
}

#[derive(Clone)]
pub enum BasicSecret {
    /// An argon2id PHC string (`password_hash`).
    Phc(String),
    /// A password from the environment (`password_env`).
    Plain(String),
}

impl fmt::Debug for BasicCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicCredential")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
pub struct ApiKeyPolicy {
    pub header: String,
    pub keys: Vec<(String, [u8; 32])>,
    /// Tenants and groups by principal.
    pub attributes: std::collections::BTreeMap<String, Attributes>,
}

impl fmt::Debug for ApiKeyPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let principals: Vec<&str> = self.keys.iter().map(|(p, _)| p.as_str()).collect();
        f.debug_struct("ApiKeyPolicy")
            .field("header", &self.header)
            .field("principals", &principals)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub enum JwksLocation {
    File(PathBuf),
    Url {
        url: url::Url,
        ca_file: Option<PathBuf>,
    },
}

#[derive(Debug, Clone)]
pub struct JwtPolicy {
    pub issuer: String,
    pub audience: String,
    pub jwks: JwksLocation,
    /// Asymmetric algorithms only (`RS256`, `ES256`, `EdDSA`, ...).
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    pub principal_claim: String,
    pub tenant_claim: Option<String>,
    pub groups_claim: Option<String>,
    pub leeway: Duration,
    pub min_refresh: Duration,
    pub max_age: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct ThrottlePolicy {
    pub failures_per_minute: u32,
    pub failures_burst: u32,
}
