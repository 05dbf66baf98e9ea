//! `GET /.well-known/agents.json`: the agents behind the edge, for discovery.
//!
//! ```json
//! {"agents": [{"name": "iac-code", "description": "…", "cardUrl": "https://edge.example/agents/iac-code/.well-known/agent-card.json"}],
//!  "signatures": [{"protected": "…", "signature": "…"}]}
//! ```
//!
//! Without credentials: every agent (each card is public). With credentials (authenticated and
//! rate-limited like JSON-RPC): the agents the caller may use (`[authz]` rules that apply at
//! them give it a method). `name` is the agent's `[[agents]]` name (without `[[agents]]`: its
//! card's name), `description` its card's (empty until a card was published). Signed like the
//! card, by the active `[card]` key, over RFC 8785 of the document without `signatures`; the
//! public document is cached with an `ETag` until a card changes.

use std::sync::Mutex;

use super::*;
use crate::card::jws::{sign_document, SignOptions};
use crate::card::keys::SigningKey;
use crate::reason;

pub(super) struct Catalog {
    key: Option<Arc<SigningKey>>,
    options: SignOptions,
    max_age: u32,
    /// The public document, by the ETags of the cards it was built from.
    cache: Mutex<Option<Cached>>,
}

/// The cards' ETags, the document and its own ETag.
type Cached = (Vec<Option<String>>, Bytes, String);

impl Catalog {
    pub(super) fn new(card: &crate::policy::CardPolicy, public_url: &url::Url) -> Catalog {
        let key = card.active.and_then(|i| card.signing_keys.get(i)).cloned();
        let jku = match &card.jku {
            crate::policy::Jku::Url(u) => Some(u.clone()),
            crate::policy::Jku::Off => None,
            crate::policy::Jku::Auto => key
                .as_ref()
                .and_then(|k| k.public_jwk())
                .and_then(|_| public_url.join(crate::card::JWKS_PATH).ok())
                .map(String::from),
        };
        Catalog {
            key,
            options: SignOptions {
                jku,
                jku_null: false,
            },
            max_age: card.max_age_secs,
            cache: Mutex::new(None),
        }
    }

    /// The signed document listing `agents`.
    fn document(&self, agents: &[&AgentGate]) -> Result<Bytes, Rejection> {
        let list: Vec<Value> = agents.iter().map(|a| entry(a)).collect();
        let mut doc = json!({ "agents": list });
        if let Some(key) = &self.key {
            sign_document(&mut doc, key, &self.options).map_err(|_| Rejection::Http {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: "Catalog could not be signed",
                reason: reason::CATALOG_SIGN_FAILED,
                allow: None,
            })?;
        }
        Ok(Bytes::from(doc.to_string()))
    }
}

/// One agent's entry: its name, its card's description, where its card is.
fn entry(a: &AgentGate) -> Value {
    let card: Option<Value> = a
        .card
        .current()
        .and_then(|s| serde_json::from_slice(&s.bytes).ok());
    let text = |k: &str| {
        card.as_ref()
            .and_then(|c| c.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let name = match &a.name {
        Some(n) => n.to_string(),
        None => text("name"),
    };
    json!({
        "name": name,
        "description": text("description"),
        "cardUrl": a.card_url(),
    })
}

impl AgentGate {
    /// Where this agent's card is served (absolute).
    pub(super) fn card_url(&self) -> String {
        match &self.name {
            // `<prefix>.well-known/agent-card.json`.
            Some(_) => format!("{}{}", self.public_url, &CARD_PATH[1..]),
            None => url::Url::parse(&self.public_url)
                .and_then(|u| u.join(CARD_PATH))
                .map(String::from)
                .unwrap_or_default(),
        }
    }
}

impl Gate {
    /// The catalog route (see the module note).
    pub(super) async fn catalog(
        &self,
        conn: &ConnInfo,
        client: IpAddr,
        headers: &HeaderMap,
        head: bool,
        trace: &mut Trace,
    ) -> Result<Response<BoxBody>, Rejection> {
        let creds = crate::auth::ConnCredentials {
            client_cert: conn.client_cert,
            identity: conn.client_identity.as_deref(),
            admitted: None,
        };
        // No credential at all: the public catalog. Anything else is authenticated as usual,
        // once (a wrong credential is 401 and counts against the address; an address that
        // failed too often is refused before its credential is verified, so a Basic password
        // costs no argon2 work here either).
        let anonymous = !self.auth.presents_credential(headers, creds);
        let (bytes, etag, public) = if anonymous {
            self.budgets
                .rates
                .check_client_ip(client)
                .map_err(too_many)?;
            let (bytes, etag) = self.public_catalog()?;
            (bytes, Some(etag), true)
        } else {
            let principal = self.admit(conn, client, headers, trace).await?;
            let usable: Vec<&AgentGate> = self
                .agents
                .iter()
                .filter(|a| self.may_use(a, &principal))
                .collect();
            (self.catalog.document(&usable)?, None, false)
        };
        let not_modified = etag.as_ref().is_some_and(|e| {
            let v = card::http::Validators {
                etag: e.clone(),
                // Only If-None-Match counts (the catalog has no Last-Modified).
                last_modified: u64::MAX,
            };
            card::http::not_modified(headers, &v)
        });
        let mut r = if not_modified {
            let mut r = Response::new(crate::body::empty());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        } else {
            let len = bytes.len();
            let mut r = json_response(StatusCode::OK, if head { Bytes::new() } else { bytes });
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            r
        };
        let h = r.headers_mut();
        if let Some(v) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
            h.insert(header::ETAG, v);
        }
        let cache = if public {
            format!("public, max-age={}", self.catalog.max_age)
        } else {
            "private, no-store".to_string()
        };
        if let Ok(v) = HeaderValue::from_str(&cache) {
            h.insert(header::CACHE_CONTROL, v);
        }
        h.insert(header::VARY, HeaderValue::from_static("authorization"));
        Ok(r)
    }

    /// The public catalog and its ETag, rebuilt only when a card changed.
    fn public_catalog(&self) -> Result<(Bytes, String), Rejection> {
        let tags: Vec<Option<String>> = self
            .agents
            .iter()
            .map(|a| a.card.current().map(|s| s.validators.etag.clone()))
            .collect();
        let mut cache = self
            .catalog
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, bytes, etag)) = cache.as_ref() {
            if *seen == tags {
                return Ok((bytes.clone(), etag.clone()));
            }
        }
        let all: Vec<&AgentGate> = self.agents.iter().collect();
        let bytes = self.catalog.document(&all)?;
        let etag = card::http::strong_etag(&bytes);
        *cache = Some((tags, bytes.clone(), etag.clone()));
        Ok((bytes, etag))
    }

    /// Whether the caller may use this agent: the rules that apply there give it a method.
    fn may_use(&self, at: &AgentGate, p: &Principal) -> bool {
        match &self.authz {
            None => true,
            Some(authz) => authz
                .grant_at(p, at.name.as_deref())
                .is_ok_and(|g| g.methods != crate::authz::MethodSet::EMPTY),
        }
    }
}
