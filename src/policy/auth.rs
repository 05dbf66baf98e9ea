//! The `[auth]` table: which schemes prove a caller, and the secrets they compare against.
//! The iac-code environment variables configure Bearer, Basic and API key when the policy
//! leaves that scheme unset.

use std::time::Duration;

use toml::Spanned;

use super::file;
use super::secret::{self, parse_sha256_hex};
use super::{random_token, sha256, Ctx, LoadMode, PolicyError};
use crate::auth::attributes::{self, Attributes, IdentityPattern};
use crate::auth::hash::PasswordHash;
use crate::auth::settings::{
    ApiKeyPolicy, AuthPolicy, BasicCredential, BasicSecret, BearerCredential, ClientAuth,
    JwksLocation, JwtPolicy, ThrottlePolicy,
};

/// The least `auth.jwt.jwks_min_refresh_ms` a policy may set.
const MIN_JWKS_REFRESH_MS: u64 = 1_000;

/// Principal names of the iac-code compatibility variables, as iac-code names its owners.
const ENV_BEARER_PRINCIPAL: &str = "bearer";

fn valid_principal(p: &str) -> bool {
    !p.is_empty() && p.len() <= 128 && !p.chars().any(char::is_control) && !reserved_principal(p)
}

/// Names other schemes give their principals: a static principal spelled like one would
/// share its tasks (`anonymous` with every unauthenticated caller under `allow_anonymous`).
/// Compared case-insensitively, so no spelling of them is a static name either.
/// Whether an API key's header name is one the edge may read keys from: a plain name (at
/// most 64 letters, digits, '-' or '_') other than a credential, routing or protocol header
/// (a key read from `Authorization` would first be taken for a failed bearer token).
fn api_key_header_ok(header: &str) -> bool {
    let reserved = [
        "authorization",
        "cookie",
        "host",
        "content-type",
        "content-length",
        "connection",
        "te",
        "upgrade",
        "a2a-version",
        "a2a-extensions",
    ];
    !header.is_empty()
        && header.len() <= 64
        && header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && !reserved.contains(&header.to_ascii_lowercase().as_str())
}

pub(crate) fn reserved_principal(p: &str) -> bool {
    let lower = p.to_ascii_lowercase();
    lower == "anonymous"
        || ["jwt:", "mtls:", "api-key:"]
            .iter()
            .any(|r| lower.starts_with(r))
}

const PRINCIPAL_RULE: &str = "must be 1-128 printable characters, and not \"anonymous\" nor start with \"jwt:\", \"mtls:\" or \"api-key:\" (names of other schemes)";

impl Ctx<'_> {
    pub(super) fn auth(
        &self,
        a: file::AuthSection,
        client_auth: ClientAuth,
        mode: LoadMode,
    ) -> Result<AuthPolicy, PolicyError> {
        let mut from_environment = Vec::new();
        let mut bearer = self.bearer(a.bearer, mode)?;
        if bearer.is_empty() {
            if let Ok(token) = secret::from_env("IACCODE_A2A_HTTP_TOKEN") {
                from_environment.push("IACCODE_A2A_HTTP_TOKEN");
                bearer.push(BearerCredential {
                    attributes: Attributes::default(),
                    principal: ENV_BEARER_PRINCIPAL.into(),
                    token_sha256: sha256(token.as_bytes()),
                    generated: None,
                });
            }
        }
        let mut basic = self.basic(a.basic)?;
        if basic.is_empty() {
            if let (Ok(user), Ok(password)) = (
                secret::from_env("IACCODE_A2A_BASIC_USERNAME"),
                secret::from_env("IACCODE_A2A_BASIC_PASSWORD"),
            ) {
                if user.contains(':') || !valid_principal(&user) {
                    return self.err(
                        "IACCODE_A2A_BASIC_USERNAME",
                        None,
                        format!("{PRINCIPAL_RULE}, without ':'"),
                    );
                }
                from_environment.push("IACCODE_A2A_BASIC_USERNAME + IACCODE_A2A_BASIC_PASSWORD");
                basic.push(BasicCredential {
                    attributes: Attributes::default(),
                    username: user,
                    secret: BasicSecret::Plain(password),
                });
            }
        }
        // The environment's bearer callers are one owner, `bearer`: a Basic user of that name
        // would share their tasks.
        if from_environment.contains(&"IACCODE_A2A_HTTP_TOKEN")
            && basic.iter().any(|b| b.username == ENV_BEARER_PRINCIPAL)
        {
            return self.err(
                "auth.basic",
                None,
                format!("the username \"{ENV_BEARER_PRINCIPAL}\" is the principal of IACCODE_A2A_HTTP_TOKEN's callers, who would share its tasks: name the user otherwise"),
            );
        }
        let api_key = match a.api_key {
            Some(section) => Some(self.api_key(section)?),
            None => match secret::from_env("IACCODE_A2A_API_KEY") {
                Ok(key) => {
                    from_environment.push("IACCODE_A2A_API_KEY");
                    let header = std::env::var("IACCODE_A2A_API_KEY_HEADER")
                        .ok()
                        .filter(|h| !h.is_empty())
                        .unwrap_or_else(|| "X-API-Key".into());
                    if !api_key_header_ok(&header) {
                        return self.err(
                            "auth.api_key.header",
                            None,
                            "IACCODE_A2A_API_KEY_HEADER must be a plain header name other than Authorization, Cookie, Host and the HTTP/A2A protocol headers".into(),
                        );
                    }
                    Some(ApiKeyPolicy {
                        keys: vec![(format!("api-key:{header}"), sha256(key.as_bytes()))],
                        header,
                        attributes: Default::default(),
                    })
                }
                Err(_) => None,
            },
        };
        let jwt = match a.jwt {
            Some(j) => Some(self.jwt(j)?),
            None => None,
        };
        let principal_header = self.x_header(
            "auth.principal_header",
            &a.principal_header,
            "x-a2a-edge-principal",
        )?;
        let per_minute = a
            .failures_per_minute
            .as_ref()
            .map(|v| *v.get_ref())
            .unwrap_or(30);
        let burst = a
            .failures_burst
            .as_ref()
            .map(|v| *v.get_ref())
            .unwrap_or(10);
        for (key, v, n) in [
            (
                "auth.failures_per_minute",
                &a.failures_per_minute,
                per_minute,
            ),
            ("auth.failures_burst", &a.failures_burst, burst),
        ] {
            if n == 0 {
                return match v {
                    Some(v) => self.spanned_err(key, v, "must be at least 1"),
                    None => self.err(key, None, "must be at least 1".into()),
                };
            }
        }
        let mtls_identities = self.mtls_identities(a.mtls)?;
        if !mtls_identities.is_empty() && client_auth == ClientAuth::Off {
            return self.err(
                "auth.mtls.identities",
                None,
                "only meaningful with tls.client_auth = \"optional\" or \"required\"".into(),
            );
        }
        let policy = AuthPolicy {
            from_environment,
            mtls_identities,
            identity_assertion: None,
            allow_anonymous: a.allow_anonymous,
            bearer,
            basic,
            api_key,
            jwt,
            client_auth,
            principal_header,
            throttle: ThrottlePolicy {
                failures_per_minute: per_minute,
                failures_burst: burst,
            },
        };
        self.one_tenant_per_principal(&policy)?;
        if !policy.any_scheme() && !policy.allow_anonymous {
            return self.err(
                "auth",
                None,
                "no authentication is configured; add a scheme (e.g. [[auth.bearer]]) or set allow_anonymous = true explicitly".into(),
            );
        }
        Ok(policy)
    }

    /// A name is one principal whichever static credential proves it (one owner of tasks and
    /// contexts, one rate budget, one name in `authz.rules.principals`): the same name under
    /// two schemes (a bearer token and an API key of one robot) must then be in one tenant, or
    /// each tenant's caller would see the other's tasks.
    fn one_tenant_per_principal(&self, policy: &AuthPolicy) -> Result<(), PolicyError> {
        let tenant = |a: Option<&Attributes>| a.and_then(|a| a.tenant.clone());
        let bearer = policy.bearer.iter().enumerate().map(|(i, b)| {
            let key = format!("auth.bearer[{i}].principal");
            (key, &b.principal, tenant(Some(&b.attributes)))
        });
        let basic = policy.basic.iter().enumerate().map(|(i, b)| {
            let key = format!("auth.basic[{i}].username");
            (key, &b.username, tenant(Some(&b.attributes)))
        });
        let api = policy.api_key.iter().flat_map(|k| {
            k.keys.iter().enumerate().map(|(i, (name, _))| {
                let key = format!("auth.api_key.keys[{i}].principal");
                (key, name, tenant(k.attributes.get(name)))
            })
        });
        let mut seen: std::collections::HashMap<&str, (String, Option<String>)> =
            std::collections::HashMap::new();
        for (key, name, tenant) in bearer.chain(basic).chain(api) {
            match seen.get(name.as_str()) {
                Some((other, t)) if *t != tenant => {
                    let show = |t: &Option<String>| match t {
                        Some(t) => format!("tenant \"{t}\""),
                        None => "no tenant".to_string(),
                    };
                    return self.err(
                        &key,
                        None,
                        format!(
                            "principal \"{name}\" has {} here and {} at {other}: one name is one principal (one owner of tasks) whichever credential proves it, so give it one tenant or another name",
                            show(&tenant),
                            show(t)
                        ),
                    );
                }
                Some(_) => {}
                None => {
                    seen.insert(name, (key, tenant));
                }
            }
        }
        Ok(())
    }

    fn bearer(
        &self,
        entries: Vec<file::BearerSection>,
        mode: LoadMode,
    ) -> Result<Vec<BearerCredential>, PolicyError> {
        let mut bearer: Vec<BearerCredential> = Vec::new();
        for (i, b) in entries.into_iter().enumerate() {
            let key = |k: &str| format!("auth.bearer[{i}].{k}");
            let principal = b.principal.get_ref().clone();
            if !valid_principal(&principal) {
                return self.spanned_err(&key("principal"), &b.principal, PRINCIPAL_RULE);
            }
            if b.generate_if_missing && b.token_file.is_none() {
                return self.spanned_err(
                    &key("generate_if_missing"),
                    &b.principal,
                    "only meaningful with token_file",
                );
            }
            let (token_sha256, generated) = match (&b.token_sha256, &b.token_env, &b.token_file) {
                (Some(hex), None, None) => {
                    let d = parse_sha256_hex(hex.get_ref())
                        .or_else(|m| self.spanned_err(&key("token_sha256"), hex, m))?;
                    (d, None)
                }
                (None, Some(var), None) => {
                    let t = secret::from_env(var.get_ref())
                        .or_else(|m| self.spanned_err(&key("token_env"), var, m))?;
                    (sha256(t.as_bytes()), None)
                }
                (None, None, Some(path)) => {
                    match secret::from_file(
                        path.get_ref(),
                        b.generate_if_missing,
                        mode == LoadMode::Serve,
                    ) {
                        // Only a token the edge makes (`generate_if_missing`) is a dev
                        // token, printed at start; an operator's own file is a secret.
                        Ok(Some(g)) => {
                            let digest = sha256(g.token.as_bytes());
                            (digest, b.generate_if_missing.then_some(g))
                        }
                        // Check mode: the file will be generated by `serve`; this digest matches nothing.
                        Ok(None) => (sha256(random_token().as_bytes()), None),
                        Err(m) => return self.spanned_err(&key("token_file"), path, m),
                    }
                }
                _ => {
                    return self.spanned_err(
                        &key("principal"),
                        &b.principal,
                        "exactly one of token_sha256, token_env or token_file is required",
                    )
                }
            };
            if bearer.iter().any(|o| o.principal == principal) {
                return self.spanned_err(&key("principal"), &b.principal, "duplicate principal");
            }
            let attributes = self.attributes(&key(""), &b.tenant, &b.groups)?;
            bearer.push(BearerCredential {
                principal,
                attributes,
                token_sha256,
                generated,
            });
        }
        Ok(bearer)
    }

    fn basic(&self, entries: Vec<file::BasicSection>) -> Result<Vec<BasicCredential>, PolicyError> {
        let mut out: Vec<BasicCredential> = Vec::new();
        for (i, b) in entries.into_iter().enumerate() {
            let key = |k: &str| format!("auth.basic[{i}].{k}");
            let username = b.username.get_ref().clone();
            if username.contains(':') || !valid_principal(&username) {
                return self.spanned_err(
                    &key("username"),
                    &b.username,
                    format!("{PRINCIPAL_RULE}, without ':'"),
                );
            }
            if out.iter().any(|o| o.username == username) {
                return self.spanned_err(&key("username"), &b.username, "duplicate username");
            }
            let secret = match (&b.password_hash, &b.password_env) {
                (Some(phc), None) => {
                    PasswordHash::parse(phc.get_ref())
                        .map_err(|m| m.to_string())
                        .or_else(|m| self.spanned_err(&key("password_hash"), phc, m))?;
                    BasicSecret::Phc(phc.get_ref().clone())
                }
                (None, Some(var)) => BasicSecret::Plain(
                    secret::from_env(var.get_ref())
                        .or_else(|m| self.spanned_err(&key("password_env"), var, m))?,
                ),
                _ => {
                    return self.spanned_err(
                        &key("username"),
                        &b.username,
                        "exactly one of password_hash or password_env is required",
                    )
                }
            };
            let attributes = self.attributes(&key(""), &b.tenant, &b.groups)?;
            out.push(BasicCredential {
                username,
                attributes,
                secret,
            });
        }
        Ok(out)
    }

    fn api_key(&self, section: file::ApiKeySection) -> Result<ApiKeyPolicy, PolicyError> {
        let header = section
            .header
            .as_ref()
            .map(|h| h.get_ref().clone())
            .unwrap_or_else(|| "X-API-Key".into());
        if !api_key_header_ok(&header) {
            return match &section.header {
                Some(h) => self.spanned_err("auth.api_key.header", h, "must be a plain header name other than Authorization, Cookie, Host and the HTTP/A2A protocol headers"),
                None => self.err("auth.api_key.header", None, "invalid".into()),
            };
        }
        if section.keys.is_empty() {
            return self.err(
                "auth.api_key.keys",
                None,
                "at least one [[auth.api_key.keys]] entry is required".into(),
            );
        }
        let mut keys: Vec<(String, [u8; 32])> = Vec::new();
        let mut attributes = std::collections::BTreeMap::new();
        for (i, k) in section.keys.into_iter().enumerate() {
            let key = |n: &str| format!("auth.api_key.keys[{i}].{n}");
            let principal = k.principal.get_ref().clone();
            if !valid_principal(&principal) {
                return self.spanned_err(&key("principal"), &k.principal, PRINCIPAL_RULE);
            }
            if keys.iter().any(|(p, _)| *p == principal) {
                return self.spanned_err(&key("principal"), &k.principal, "duplicate principal");
            }
            let digest = match (&k.key_sha256, &k.key_env) {
                (Some(hex), None) => parse_sha256_hex(hex.get_ref())
                    .or_else(|m| self.spanned_err(&key("key_sha256"), hex, m))?,
                (None, Some(var)) => sha256(
                    secret::from_env(var.get_ref())
                        .or_else(|m| self.spanned_err(&key("key_env"), var, m))?
                        .as_bytes(),
                ),
                _ => {
                    return self.spanned_err(
                        &key("principal"),
                        &k.principal,
                        "exactly one of key_sha256 or key_env is required",
                    )
                }
            };
            let attrs = self.attributes(&key(""), &k.tenant, &k.groups)?;
            attributes.insert(principal.clone(), attrs);
            keys.push((principal, digest));
        }
        Ok(ApiKeyPolicy {
            header,
            keys,
            attributes,
        })
    }

    fn jwt(&self, j: file::JwtSection) -> Result<JwtPolicy, PolicyError> {
        let nonempty = |v: &Spanned<String>, key: &str| -> Result<String, PolicyError> {
            if v.get_ref().is_empty() || v.get_ref().len() > 1024 {
                return self.spanned_err(key, v, "must not be empty");
            }
            Ok(v.get_ref().clone())
        };
        let issuer = nonempty(&j.issuer, "auth.jwt.issuer")?;
        let audience = nonempty(&j.audience, "auth.jwt.audience")?;
        let jwks = match (&j.jwks_file, &j.jwks_url) {
            (Some(f), None) => JwksLocation::File(f.get_ref().clone()),
            (None, Some(u)) => match url::Url::parse(u.get_ref()) {
                Ok(url) if url.scheme() == "https" && url.host().is_some() => JwksLocation::Url {
                    url,
                    ca_file: j.jwks_ca_file.clone(),
                },
                _ => return self.spanned_err("auth.jwt.jwks_url", u, "must be an https:// URL"),
            },
            _ => {
                return self.spanned_err(
                    "auth.jwt",
                    &j.issuer,
                    "exactly one of jwks_file or jwks_url is required",
                )
            }
        };
        let mut algorithms = Vec::new();
        for name in j.algorithms.get_ref() {
            use jsonwebtoken::Algorithm::*;
            let alg = match name.as_str() {
                "RS256" => RS256,
                "RS384" => RS384,
                "RS512" => RS512,
                "PS256" => PS256,
                "PS384" => PS384,
                "PS512" => PS512,
                "ES256" => ES256,
                "ES384" => ES384,
                "EdDSA" => EdDSA,
                _ => return self.spanned_err("auth.jwt.algorithms", &j.algorithms, format!("{name:?} is not allowed: use asymmetric algorithms (RS256, PS256, ES256, ES384, EdDSA, ...)")),
            };
            algorithms.push(alg);
        }
        if algorithms.is_empty() {
            return self.spanned_err(
                "auth.jwt.algorithms",
                &j.algorithms,
                "at least one algorithm is required",
            );
        }
        let principal_claim = match &j.principal_claim {
            None => "sub".to_string(),
            Some(c) => nonempty(c, "auth.jwt.principal_claim")?,
        };
        let claim_path = |c: &Option<Spanned<String>>, key: &str| match c {
            None => Ok(None),
            Some(c) if attributes::valid_claim_path(c.get_ref()) => Ok(Some(c.get_ref().clone())),
            Some(c) => self.spanned_err(
                key,
                c,
                "must be a dotted claim path (e.g. \"groups\" or \"realm_access.roles\")",
            ),
        };
        let tenant_claim = claim_path(&j.tenant_claim, "auth.jwt.tenant_claim")?;
        let groups_claim = claim_path(&j.groups_claim, "auth.jwt.groups_claim")?;
        // Every token with an unknown `kid` may refresh the key set: without a floor, each
        // one re-reads the file or asks the issuer again (a caller's forged tokens would
        // make the edge hammer its identity provider).
        let min_refresh = match &j.jwks_min_refresh_ms {
            Some(ms) if *ms.get_ref() < MIN_JWKS_REFRESH_MS => {
                return self.spanned_err(
                    "auth.jwt.jwks_min_refresh_ms",
                    ms,
                    format!("must be at least {MIN_JWKS_REFRESH_MS}"),
                )
            }
            Some(ms) => *ms.get_ref(),
            None => 10_000,
        };
        Ok(JwtPolicy {
            tenant_claim,
            groups_claim,
            issuer,
            audience,
            jwks,
            algorithms,
            principal_claim,
            leeway: Duration::from_millis(j.leeway_ms.unwrap_or(30_000).min(300_000)),
            min_refresh: Duration::from_millis(min_refresh),
            max_age: Duration::from_millis(j.jwks_max_age_ms.unwrap_or(3_600_000)),
        })
    }
}

impl Ctx<'_> {
    /// A header the edge sets for the agents: an `X-` name of letters, digits and `-`
    /// (lower-cased), or `default` when the policy names none.
    pub(super) fn x_header(
        &self,
        key: &str,
        given: &Option<Spanned<String>>,
        default: &str,
    ) -> Result<String, PolicyError> {
        let Some(h) = given else {
            return Ok(default.to_string());
        };
        let name = h.get_ref().to_ascii_lowercase();
        let ok = name.len() <= 64
            && name.starts_with("x-")
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return self.spanned_err(
                key,
                h,
                "must be an X- header name of letters, digits and '-'",
            );
        }
        Ok(name)
    }

    /// A principal's `tenant` and `groups` from the policy, checked as a JWT's claims would be.
    /// `prefix` is the entry's key with a trailing `.` (e.g. `auth.bearer[0].`).
    fn attributes(
        &self,
        prefix: &str,
        tenant: &Option<Spanned<String>>,
        groups: &Option<Spanned<Vec<String>>>,
    ) -> Result<Attributes, PolicyError> {
        let tenant = match tenant {
            None => None,
            Some(t) if attributes::valid_tenant(t.get_ref()) => Some(t.get_ref().clone()),
            Some(t) => {
                return self.spanned_err(
                    &format!("{prefix}tenant"),
                    t,
                    "must be 1-128 characters without control characters",
                )
            }
        };
        let groups = match groups {
            None => Vec::new(),
            Some(g) => attributes::groups_from_list(g.get_ref()).or_else(|_| {
                self.spanned_err(
                    &format!("{prefix}groups"),
                    g,
                    format!(
                        "at most {} names of 1-128 characters without white space or control characters",
                        attributes::MAX_GROUPS
                    ),
                )
            })?,
        };
        Ok(Attributes { tenant, groups })
    }

    fn mtls_identities(
        &self,
        section: Option<file::MtlsSection>,
    ) -> Result<Vec<IdentityPattern>, PolicyError> {
        let mut out = Vec::new();
        for (i, m) in section
            .unwrap_or_default()
            .identities
            .into_iter()
            .enumerate()
        {
            let prefix = format!("auth.mtls.identities[{i}].");
            if !attributes::valid_identity_pattern(m.pattern.get_ref()) {
                return self.spanned_err(
                    &format!("{prefix}match"),
                    &m.pattern,
                    "must be 1-512 printable ASCII characters, with '*' only as the last one (a prefix)",
                );
            }
            let attrs = self.attributes(&prefix, &m.tenant, &m.groups)?;
            out.push(IdentityPattern {
                text: m.pattern.get_ref().clone(),
                attributes: attrs,
            });
        }
        Ok(out)
    }
}
