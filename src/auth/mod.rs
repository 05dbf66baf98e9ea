//! Authentication: every request but `/health` and the public card proves who the caller is
//! and gets a [`Principal`]. One file per scheme; this file decides which ones to try. Knows
//! nothing of JSON-RPC.
//!
//! Any one valid credential is enough (as iac-code): a client certificate, the
//! `Authorization` header (Bearer static token or JWT, or Basic), or the API-key header. A
//! presented credential that is wrong never degrades to anonymous access, and is reported
//! ([`Authenticated::failed`]) even when another one succeeds, so that the failure throttle
//! counts it: a valid API key does not buy unthrottled password guesses in `Authorization`.

pub mod api_key;
pub mod assertion;
pub mod attributes;
pub mod basic;
mod bearer;
pub mod hash;
pub mod jwks;
pub mod jwt;
pub mod mtls;
pub mod settings;

use std::fmt;
use std::sync::Arc;

use http::{header, HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use crate::reason::{self, Reason};
use settings::{AuthPolicy, BasicSecret, ClientAuth, JwksLocation};

/// Upper bound on the length of an `Authorization` header value.
pub const MAX_AUTHORIZATION_BYTES: usize = 8192;

/// Password checks (argon2id, ~19 MiB each) running at once; more wait up to 5 s.
const MAX_CONCURRENT_PASSWORD_CHECKS: usize = 4;

pub use attributes::Attributes;

/// Who the caller is, as proven by one credential, with its tenant and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub scheme: Scheme,
    pub tenant: Option<String>,
    /// Sorted, without duplicates.
    pub groups: Vec<String>,
}

impl Principal {
    /// A principal without tenant or groups.
    pub fn new(name: impl Into<String>, scheme: Scheme) -> Principal {
        Principal {
            name: name.into(),
            scheme,
            tenant: None,
            groups: Vec::new(),
        }
    }

    fn with(mut self, a: &Attributes) -> Principal {
        self.tenant = a.tenant.clone();
        self.groups = a.groups.clone();
        self
    }

    /// The caller as one caller: the owner of its tasks and contexts, the key of its rate
    /// budgets and concurrency slots, and the name grants by name match
    /// (`authz.rules.principals`, `a2a.metadata.allowed_for`, `limits.principals`). A JWT
    /// caller's tenant comes from each token's claim, so one subject may call as several
    /// tenants (an issuer whose subjects are unique per tenant only): it is the subject
    /// within the tenant (`jwt:<sub>` U+001E `<tenant>`), never one caller across tenants,
    /// and a grant to the bare `jwt:<sub>` is not its. Every other scheme's name fixes its
    /// tenant (the policy refuses one static name with two tenants; an mTLS identity's
    /// tenant is its first matching pattern's), so it is its name. Neither part ever holds
    /// a control character.
    pub fn owner_key(&self) -> std::borrow::Cow<'_, str> {
        match (&self.scheme, &self.tenant) {
            (Scheme::Jwt, Some(tenant)) => format!("{}\u{1e}{tenant}", self.name).into(),
            _ => self.name.as_str().into(),
        }
    }

    /// Whether the caller's name is one caller only within its tenant (a JWT subject whose
    /// token names a tenant): see [`Principal::owner_key`].
    pub fn is_named_within_tenant(&self) -> bool {
        matches!((&self.scheme, &self.tenant), (Scheme::Jwt, Some(_)))
    }

    /// Whether a credential proved this caller (not `allow_anonymous`).
    pub fn is_authenticated(&self) -> bool {
        self.scheme != Scheme::Anonymous
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Bearer,
    Basic,
    ApiKey,
    Jwt,
    Mtls,
    /// No credential, allowed only by an explicit `allow_anonymous = true`.
    Anonymous,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Bearer => "bearer",
            Scheme::Basic => "basic",
            Scheme::ApiKey => "api_key",
            Scheme::Jwt => "jwt",
            Scheme::Mtls => "mtls",
            Scheme::Anonymous => "anonymous",
        }
    }
}

/// Why a caller was refused; `reason` is the low-cardinality code for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthRejection {
    pub reason: Reason,
}

const fn reject(reason: Reason) -> AuthRejection {
    AuthRejection { reason }
}

impl AuthRejection {
    /// The credential could not be checked (`auth.overloaded`: no Basic password check slot
    /// free in time; `auth.internal`: the check's worker failed): no guess was made, so the
    /// failure throttle does not count it, and the caller is told to come back (503), not
    /// that its credential is wrong.
    pub fn unchecked(&self) -> bool {
        self.reason == reason::AUTH_OVERLOADED || self.reason == reason::AUTH_INTERNAL
    }
}

/// The principal behind a request, and what else the request presented that failed.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub principal: Principal,
    /// A credential the request presented that was refused, though another one succeeded
    /// (a wrong `Authorization` beside a valid API key): a failure all the same, for the
    /// failure throttle.
    pub failed: Option<AuthRejection>,
}

/// What the connection proved before any header was read.
#[derive(Debug, Clone, Default)]
pub struct ConnCredentials<'a> {
    /// A verified client certificate was presented.
    pub client_cert: bool,
    /// Its identity, if usable.
    pub identity: Option<&'a str>,
    /// Asked once a password check slot is taken, right before the check: whether the
    /// caller's address may still have it (not blocked by the failure throttle while it
    /// waited). `None`: always.
    pub admitted: Option<StillAdmitted<'a>>,
}

/// Whether a request waiting for a password check may still have it
/// ([`ConnCredentials::admitted`]).
#[derive(Clone, Copy)]
pub struct StillAdmitted<'a>(pub &'a (dyn Fn() -> bool + Sync));

impl std::fmt::Debug for StillAdmitted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StillAdmitted")
    }
}

/// Checks credentials against the policy.
pub struct Authenticator {
    bearer: bearer::BearerScheme,
    basic: Option<Arc<basic::BasicScheme>>,
    /// argon2 costs tens of MiB per check: at most this many run at once.
    basic_permits: Arc<tokio::sync::Semaphore>,
    api_key: Option<api_key::ApiKeyScheme>,
    jwt: Option<jwt::JwtScheme>,
    mtls: bool,
    /// Tenants and groups of the static schemes' principals, by scheme and name.
    attributes: std::collections::HashMap<(Scheme, String), Attributes>,
    /// mTLS identity patterns, first match wins.
    mtls_identities: Vec<attributes::IdentityPattern>,
    allow_anonymous: bool,
    challenges: Vec<HeaderValue>,
    schemes: Map<String, Value>,
}

/// What a stream keeps to prove its caller again at a reload: see [`Authenticator::proof`].
#[derive(Clone)]
pub enum Proof {
    /// A Basic user: the digest of the secret its password was checked against.
    Basic([u8; 32]),
    /// A static bearer token: its SHA-256 (as the policy keeps it), never the token.
    Bearer([u8; 32]),
    /// A static API key: the header it came in and its SHA-256, never the key.
    ApiKey(HeaderName, [u8; 32]),
    /// A JWT's caller: its `Authorization` header; a client certificate's or an anonymous
    /// caller: nothing (the connection proves the first).
    Headers(HeaderMap),
}

impl fmt::Debug for Proof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Proof::Basic(_) => "Proof::Basic(<digest>)",
            Proof::Bearer(_) => "Proof::Bearer(<digest>)",
            Proof::ApiKey(..) => "Proof::ApiKey(<digest>)",
            Proof::Headers(_) => "Proof::Headers(<redacted>)",
        })
    }
}

/// What [`Authenticator::proves_again`] found.
#[derive(Debug)]
pub enum ProvesAgain {
    Yes(Principal),
    No,
    Unsure,
}

impl Authenticator {
    /// Builds the configured schemes; a JWT key set is loaded now (start-up fails if it
    /// cannot be; a reload, given the running `previous`, may keep its key set: see
    /// [`jwks::JwksCache::reload`]).
    pub async fn new(
        policy: &AuthPolicy,
        previous: Option<&Authenticator>,
    ) -> Result<Authenticator, String> {
        let bearer = bearer::BearerScheme::new(&policy.bearer);
        let basic = if policy.basic.is_empty() {
            None
        } else {
            let mut users = Vec::new();
            for u in &policy.basic {
                let secret = match &u.secret {
                    BasicSecret::Phc(phc) => basic::PasswordSecret::Phc(
                        hash::PasswordHash::parse(phc)
                            .map_err(|e| format!("auth.basic {:?}: {e}", u.username))?,
                    ),
                    BasicSecret::Plain(p) => basic::PasswordSecret::Plain(p.clone()),
                };
                users.push(basic::BasicUser {
                    username: u.username.clone(),
                    secret,
                });
            }
            Some(Arc::new(basic::BasicScheme::new(users)?))
        };
        let api_key = match &policy.api_key {
            None => None,
            Some(a) => Some(api_key::ApiKeyScheme::new(&a.header, a.keys.clone())?),
        };
        let jwt = match &policy.jwt {
            None => None,
            Some(j) => {
                let source = match &j.jwks {
                    JwksLocation::File(p) => jwks::JwksSource::File(p.clone()),
                    JwksLocation::Url { url, ca_file } => jwks::JwksSource::Url {
                        url: url.clone(),
                        ca_file: ca_file.clone(),
                    },
                };
                let running = previous.and_then(|p| p.jwt.as_ref()).map(|j| j.keys());
                let keys =
                    jwks::JwksCache::reload(source, j.min_refresh, j.max_age, running).await?;
                let config = jwt::JwtConfig {
                    issuer: j.issuer.clone(),
                    audience: j.audience.clone(),
                    algorithms: j.algorithms.clone(),
                    principal_claim: j.principal_claim.clone(),
                    tenant_claim: j.tenant_claim.clone(),
                    groups_claim: j.groups_claim.clone(),
                    leeway: j.leeway,
                };
                Some(jwt::JwtScheme::new(config, keys)?)
            }
        };
        let mtls = policy.client_auth != ClientAuth::Off;

        // The card's securitySchemes and the 401 challenges name exactly what is enabled.
        let mut schemes = Map::new();
        let mut challenges = Vec::new();
        if bearer.is_enabled() {
            schemes.insert(
                "bearerAuth".into(),
                json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}}),
            );
        }
        if jwt.is_some() {
            schemes.insert(
                "jwtAuth".into(),
                json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}),
            );
        }
        if bearer.is_enabled() || jwt.is_some() {
            challenges.push(HeaderValue::from_static("Bearer realm=\"a2a-edge\""));
        }
        if basic.is_some() {
            schemes.insert(
                "basicAuth".into(),
                json!({"httpAuthSecurityScheme": {"scheme": "Basic"}}),
            );
            challenges.push(HeaderValue::from_static(
                "Basic realm=\"a2a-edge\", charset=\"UTF-8\"",
            ));
        }
        if let Some(a) = &policy.api_key {
            // As the operator spelled it (header names are case-insensitive on the wire).
            schemes.insert(
                "apiKeyAuth".into(),
                json!({"apiKeySecurityScheme": {"location": "header", "name": a.header}}),
            );
            let challenge = format!("ApiKey realm=\"a2a-edge\", header=\"{}\"", a.header);
            challenges.push(
                HeaderValue::from_str(&challenge)
                    .map_err(|_| "auth.api_key.header: not a valid header name".to_string())?,
            );
        }
        if mtls {
            schemes.insert("mtls".into(), json!({"mtlsSecurityScheme": {}}));
        }
        let mut attributes = std::collections::HashMap::new();
        for b in &policy.bearer {
            attributes.insert((Scheme::Bearer, b.principal.clone()), b.attributes.clone());
        }
        for b in &policy.basic {
            attributes.insert((Scheme::Basic, b.username.clone()), b.attributes.clone());
        }
        if let Some(a) = &policy.api_key {
            for (name, attrs) in &a.attributes {
                attributes.insert((Scheme::ApiKey, name.clone()), attrs.clone());
            }
        }
        Ok(Authenticator {
            attributes,
            mtls_identities: policy.mtls_identities.clone(),
            bearer,
            basic,
            basic_permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_PASSWORD_CHECKS)),
            api_key,
            jwt,
            mtls,
            allow_anonymous: policy.allow_anonymous,
            challenges,
            schemes,
        })
    }

    /// The principal behind the request's credentials.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        conn: ConnCredentials<'_>,
    ) -> Result<Authenticated, AuthRejection> {
        let (p, failed) = self.identify(headers, conn).await?;
        let principal = match p.scheme {
            Scheme::Bearer | Scheme::Basic | Scheme::ApiKey => self.with_static_attributes(p),
            _ => p,
        };
        Ok(Authenticated { principal, failed })
    }

    /// A static scheme's principal `name`, with the tenant and groups the policy gives it.
    fn static_principal(&self, name: &str, scheme: Scheme) -> Principal {
        self.with_static_attributes(Principal::new(name, scheme))
    }

    /// `p` (of a static scheme) with the tenant and groups the policy gives its name there.
    fn with_static_attributes(&self, p: Principal) -> Principal {
        match self.attributes.get(&(p.scheme, p.name.clone())) {
            Some(a) => p.with(a),
            None => p,
        }
    }

    /// Whether the request carries any credential `authenticate` would look at, without
    /// verifying it: a client certificate (mTLS on), an `Authorization` header, the API key
    /// header. `false` is exactly the case where `authenticate` finds nothing to check.
    pub fn presents_credential(&self, headers: &HeaderMap, conn: ConnCredentials<'_>) -> bool {
        (self.mtls && conn.client_cert)
            || headers.contains_key(header::AUTHORIZATION)
            || self.api_key.as_ref().is_some_and(|a| a.presented(headers))
    }

    /// The principal's name and scheme (JWT and mTLS with their attributes already), and an
    /// `Authorization` credential that failed before the API key succeeded.
    async fn identify(
        &self,
        headers: &HeaderMap,
        conn: ConnCredentials<'_>,
    ) -> Result<(Principal, Option<AuthRejection>), AuthRejection> {
        // The first refusal is reported if no credential succeeds.
        let mut refusal: Option<AuthRejection> = None;
        // A wrong `Authorization` (a guess the caller could make): reported even if the API
        // key succeeds. A certificate without an identity is no guess and is not.
        let mut failed: Option<AuthRejection> = None;

        if self.mtls && conn.client_cert {
            match conn.identity {
                Some(id) => {
                    let p = Principal::new(format!("mtls:{id}"), Scheme::Mtls);
                    let p = match self.mtls_identities.iter().find(|m| m.matches(id)) {
                        Some(m) => p.with(&m.attributes),
                        None => p,
                    };
                    return Ok((p, None));
                }
                None => refusal = Some(reject(reason::AUTH_MTLS_NO_IDENTITY)),
            }
        }

        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        match (values.next(), values.next()) {
            (None, _) => {}
            // Two Authorization headers are ambiguous between parsers: refuse outright.
            (Some(_), Some(_)) => return Err(reject(reason::AUTH_MULTIPLE_HEADERS)),
            (Some(value), None) => match self.authorization(value, conn.admitted).await {
                Ok(p) => return Ok((p, None)),
                // A password that could not be checked outweighs a certificate without an
                // identity (the only refusal before it: no credential, no guess): the caller
                // is told to come back, not refused.
                Err(e) if e.unchecked() => refusal = Some(e),
                Err(e) => {
                    refusal.get_or_insert(e);
                    failed = Some(e);
                }
            },
        }

        if let Some(api) = &self.api_key {
            match api.authenticate(headers) {
                None => {}
                Some(Ok(p)) => return Ok((p, failed)),
                // A wrong key was checked: a failure, even beside a password that could not
                // be (else a busy password check would hide unthrottled key guesses).
                Some(Err(e)) => match refusal {
                    Some(r) if !r.unchecked() => {}
                    _ => refusal = Some(e),
                },
            }
        }

        match refusal {
            Some(e) => Err(e),
            None if self.allow_anonymous => {
                Ok((Principal::new("anonymous", Scheme::Anonymous), None))
            }
            None => Err(reject(reason::AUTH_MISSING)),
        }
    }

    async fn authorization(
        &self,
        value: &HeaderValue,
        admitted: Option<StillAdmitted<'_>>,
    ) -> Result<Principal, AuthRejection> {
        let (scheme, credentials) = split_authorization(value)?;
        if scheme.eq_ignore_ascii_case("bearer") {
            if self.bearer.is_enabled() {
                match self.bearer.authenticate(credentials) {
                    Ok(p) => return Ok(p),
                    Err(e)
                        if self.jwt.is_none() || !jwt::JwtScheme::looks_like_jwt(credentials) =>
                    {
                        return Err(e)
                    }
                    Err(_) => {}
                }
            }
            return match &self.jwt {
                Some(j) => j.authenticate(credentials).await,
                None => Err(reject(reason::AUTH_UNSUPPORTED_SCHEME)),
            };
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let Some(basic) = &self.basic else {
                return Err(reject(reason::AUTH_UNSUPPORTED_SCHEME));
            };
            // argon2 is deliberately slow and memory-hungry: bounded, and off the reactor.
            let permit = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                self.basic_permits.clone().acquire_owned(),
            )
            .await;
            let Ok(Ok(permit)) = permit else {
                return Err(reject(reason::AUTH_OVERLOADED));
            };
            // The address was blocked while this request waited (a burst of guesses queued
            // behind the slots): the check is not run, and the gate answers as it would
            // have had the request come now (429).
            if admitted.is_some_and(|still| !(still.0)()) {
                return Err(reject(reason::AUTH_OVERLOADED));
            }
            let basic = basic.clone();
            let credentials = credentials.to_string();
            return tokio::task::spawn_blocking(move || {
                let _permit = permit;
                basic.authenticate(&credentials)
            })
            .await
            .unwrap_or(Err(reject(reason::AUTH_INTERNAL)));
        }
        Err(reject(reason::AUTH_UNSUPPORTED_SCHEME))
    }

    /// How many Basic password checks ran (tests).
    #[cfg(test)]
    pub(crate) fn password_checks(&self) -> usize {
        self.basic
            .as_ref()
            .map_or(0, |b| b.checks.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Holds every Basic password check slot (tests: the checks a request waits for).
    #[cfg(test)]
    pub(crate) async fn hold_password_checks(&self) -> tokio::sync::OwnedSemaphorePermit {
        let all = MAX_CONCURRENT_PASSWORD_CHECKS as u32;
        match self.basic_permits.clone().acquire_many_owned(all).await {
            Ok(p) => p,
            Err(_) => panic!("the password check slots are closed"),
        }
    }

    /// What a stream keeps to be proven again at a reload ([`Authenticator::proves_again`]):
    /// for a Basic user the digest of the secret its password was checked against (no
    /// password is kept, and no argon2 check runs again while the policy keeps the user's
    /// secret); for a static bearer token or API key the digest of the credential that
    /// proved `p` (the secret itself is not kept); otherwise (a JWT, a client certificate's
    /// caller) the request's credential headers alone (`Authorization`, the API key's
    /// header), a few hundred bytes.
    pub fn proof(&self, p: &Principal, headers: &HeaderMap) -> Proof {
        match p.scheme {
            Scheme::Basic => {
                if let Some(id) = self.basic.as_ref().and_then(|b| b.secret_id(&p.name)) {
                    return Proof::Basic(id);
                }
            }
            Scheme::Bearer => {
                let proving = headers.get_all(header::AUTHORIZATION).iter().find_map(|v| {
                    let (scheme, token) = split_authorization(v).ok()?;
                    let token = token.as_bytes();
                    (scheme.eq_ignore_ascii_case("bearer")
                        && self.bearer.proves(token) == Some(p.name.as_str()))
                    .then(|| crate::crypto::sha256(token))
                });
                if let Some(d) = proving {
                    return Proof::Bearer(d);
                }
            }
            Scheme::ApiKey => {
                let proving = self.api_key.as_ref().and_then(|a| {
                    let v = headers.get(a.header_name())?.as_bytes();
                    (a.proves(v) == Some(p.name.as_str()))
                        .then(|| Proof::ApiKey(a.header_name().clone(), crate::crypto::sha256(v)))
                });
                if let Some(proof) = proving {
                    return proof;
                }
            }
            _ => {}
        }
        // A JWT is checked again whole (its signature under the keys then in force): its
        // header is kept, and nothing else (a static secret beside it stays unkept). A client
        // certificate's caller is proven by the connection, an anonymous one by nothing.
        let mut kept = HeaderMap::new();
        if !matches!(p.scheme, Scheme::Mtls | Scheme::Anonymous) {
            for v in headers.get_all(header::AUTHORIZATION) {
                kept.append(header::AUTHORIZATION, v.clone());
            }
        }
        if p.scheme == Scheme::ApiKey {
            if let Some(a) = &self.api_key {
                for v in headers.get_all(a.header_name()) {
                    kept.append(a.header_name().clone(), v.clone());
                }
            }
        }
        Proof::Headers(kept)
    }

    /// The caller a stream's [`Proof`] proves under this policy, `None` when it proves none,
    /// or [`ProvesAgain::Unsure`] when the check cannot say now (no check slot free, an
    /// internal failure): a stream is not ended for those. A JWT that expired since the
    /// stream began is checked without its expiry (every other check holds). Nothing is
    /// counted against the client's failure budget.
    pub async fn proves_again(
        &self,
        proof: &Proof,
        name: &str,
        conn: ConnCredentials<'_>,
    ) -> ProvesAgain {
        match proof {
            Proof::Basic(id) => {
                let same = self
                    .basic
                    .as_ref()
                    .and_then(|b| b.secret_id(name))
                    .is_some_and(|now| now == *id);
                if !same {
                    return ProvesAgain::No;
                }
                ProvesAgain::Yes(self.static_principal(name, Scheme::Basic))
            }
            Proof::Bearer(d) => {
                if self.bearer.principal_of(d) != Some(name) {
                    return ProvesAgain::No;
                }
                ProvesAgain::Yes(self.static_principal(name, Scheme::Bearer))
            }
            Proof::ApiKey(came_in, d) => {
                // (a key in a header the policy no longer reads proves no one)
                let now = self
                    .api_key
                    .as_ref()
                    .filter(|a| a.header_name() == came_in)
                    .and_then(|a| a.principal_of(d));
                if now != Some(name) {
                    return ProvesAgain::No;
                }
                ProvesAgain::Yes(self.static_principal(name, Scheme::ApiKey))
            }
            Proof::Headers(h) => match self.authenticate(h, conn).await {
                Ok(a) => ProvesAgain::Yes(a.principal),
                // Expired since the stream began: every other check of the token still
                // holds it (a reload that changes the issuer, the audience, the keys or the
                // claims ends the stream; the expiry alone does not).
                Err(r) if r.reason == reason::JWT_EXPIRED => {
                    match self.jwt_ignoring_expiry(h).await {
                        Ok(p) => ProvesAgain::Yes(p),
                        Err(r) if r.reason == reason::AUTH_INTERNAL => ProvesAgain::Unsure,
                        Err(_) => ProvesAgain::No,
                    }
                }
                Err(r) if r.unchecked() => ProvesAgain::Unsure,
                Err(_) => ProvesAgain::No,
            },
        }
    }

    /// The JWT in a stream's kept `Authorization` header, verified without its expiry.
    async fn jwt_ignoring_expiry(&self, headers: &HeaderMap) -> Result<Principal, AuthRejection> {
        let jwt = self
            .jwt
            .as_ref()
            .ok_or(reject(reason::AUTH_UNSUPPORTED_SCHEME))?;
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or(reject(reason::AUTH_MISSING))?;
        match split_authorization(value)? {
            (scheme, token) if scheme.eq_ignore_ascii_case("bearer") => {
                jwt.authenticate_ignoring_expiry(token).await
            }
            _ => Err(reject(reason::AUTH_UNSUPPORTED_SCHEME)),
        }
    }

    /// The `WWW-Authenticate` challenges naming the configured schemes (one header line each).
    pub fn challenges(&self) -> &[HeaderValue] {
        &self.challenges
    }

    /// The card's `securitySchemes`: exactly the enabled schemes.
    pub fn security_schemes(&self) -> &Map<String, Value> {
        &self.schemes
    }
}

/// Splits `Scheme credentials`, refusing oversize, non-ASCII or control characters.
fn split_authorization(value: &HeaderValue) -> Result<(&str, &str), AuthRejection> {
    let malformed = reject(reason::AUTH_MALFORMED);
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_AUTHORIZATION_BYTES {
        return Err(malformed);
    }
    if !bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Err(malformed);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| malformed)?;
    let (scheme, rest) = text.split_once(' ').ok_or(malformed)?;
    let credentials = rest.trim_start_matches(' ');
    if scheme.is_empty() || credentials.is_empty() || credentials.contains(' ') {
        return Err(malformed);
    }
    Ok((scheme, credentials))
}

#[cfg(test)]
mod tests;
