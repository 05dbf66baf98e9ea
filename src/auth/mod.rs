//! Authentication: every request but `/health` and the public card proves who the caller is
//! and gets a [`Principal`]. One file per scheme. Knows nothing of JSON-RPC.

pub mod api_key;
pub mod basic;
mod bearer;
pub mod hash;
pub mod jwks;
pub mod jwt;
pub mod mtls;

use http::{header, HeaderMap, HeaderValue};

use crate::policy::AuthPolicy;

/// Upper bound on the length of an `Authorization` header value.
pub const MAX_AUTHORIZATION_BYTES: usize = 8192;

/// Who the caller is, as proven by one credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub scheme: Scheme,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    pub reason: &'static str,
}

/// Checks credentials against the policy.
pub struct Authenticator {
    bearer: bearer::BearerScheme,
    allow_anonymous: bool,
    challenge: HeaderValue,
}

impl Authenticator {
    pub fn from_policy(policy: &AuthPolicy) -> Self {
        Self {
            bearer: bearer::BearerScheme::new(&policy.bearer),
            allow_anonymous: policy.allow_anonymous,
            challenge: HeaderValue::from_static("Bearer realm=\"a2a-edge\""),
        }
    }

    /// The principal behind the request's credentials. A request with several
    /// `Authorization` headers, or with a malformed or unknown credential, is refused even
    /// when anonymous access is allowed: a wrong credential never degrades to anonymous.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthRejection> {
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let value = match (values.next(), values.next()) {
            (None, _) => {
                return if self.allow_anonymous {
                    Ok(Principal {
                        name: "anonymous".into(),
                        scheme: Scheme::Anonymous,
                    })
                } else {
                    Err(AuthRejection {
                        reason: "auth.missing",
                    })
                }
            }
            (Some(_), Some(_)) => {
                return Err(AuthRejection {
                    reason: "auth.multiple_headers",
                })
            }
            (Some(v), None) => v,
        };
        let (scheme, credentials) = split_authorization(value)?;
        if scheme.eq_ignore_ascii_case("bearer") && self.bearer.is_enabled() {
            return self.bearer.authenticate(credentials);
        }
        Err(AuthRejection {
            reason: "auth.unsupported_scheme",
        })
    }

    /// The `WWW-Authenticate` challenge naming the configured schemes.
    pub fn challenge(&self) -> HeaderValue {
        self.challenge.clone()
    }
}

/// Splits `Scheme credentials`, refusing oversize, non-ASCII or control characters.
fn split_authorization(value: &HeaderValue) -> Result<(&str, &str), AuthRejection> {
    let malformed = AuthRejection {
        reason: "auth.malformed",
    };
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
