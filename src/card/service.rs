//! The card the edge serves: verified (when upstream keys are configured), rewritten, signed by
//! the active key, and cached with its validators. The bytes only change when the canonical
//! content changes, so an unchanged card keeps its bytes, `ETag` and `Last-Modified` even with
//! randomized (ECDSA) signatures and agents that reorder keys.

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use serde_json::{json, Value};

use super::canonical::canonical_card;
use super::http::{strong_etag, Validators};
use super::jws::{sign_card, SignOptions};
use super::settings::{CardPolicy, Jku};
use super::verify::verify_card;
use super::{rewrite, EdgeFace};
use crate::reason::{self, Reason};

/// Why an agent's card was not published: the reason code, and what went wrong in words
/// when the code alone does not say (for the log only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub reason: Reason,
    pub detail: Option<String>,
}

impl Refused {
    fn new(reason: Reason, detail: impl Into<String>) -> Refused {
        Refused {
            reason,
            detail: Some(detail.into()),
        }
    }
}

impl From<Reason> for Refused {
    fn from(reason: Reason) -> Refused {
        Refused {
            reason,
            detail: None,
        }
    }
}

/// One published card.
#[derive(Debug)]
pub struct Served {
    pub bytes: Bytes,
    pub validators: Validators,
    /// The canonical form it was built from (to detect real changes).
    canonical: Vec<u8>,
    /// `capabilities.extendedAgentCard`: the agent has an extended card to ask for.
    pub extended: bool,
}

pub struct CardService {
    face: EdgeFace,
    policy: CardPolicy,
    options: SignOptions,
    current: RwLock<Option<Arc<Served>>>,
    jwks: Option<Bytes>,
}

impl CardService {
    pub fn new(policy: CardPolicy, face: EdgeFace) -> CardService {
        let keys: Vec<Value> = policy
            .signing_keys
            .iter()
            .filter_map(|k| k.public_jwk())
            .collect();
        let jwks = (!keys.is_empty()).then(|| Bytes::from(json!({"keys": keys}).to_string()));
        CardService {
            options: SignOptions {
                jku: match &policy.jku {
                    Jku::Url(u) => Some(u.clone()),
                    Jku::Off => None,
                    // An asymmetric active key is published in the edge's JWKS: say where.
                    Jku::Auto => policy
                        .active
                        .and_then(|i| policy.signing_keys.get(i))
                        .and_then(|k| k.public_jwk())
                        .and_then(|_| url::Url::parse(&face.public_url).ok())
                        .and_then(|u| u.join(super::JWKS_PATH).ok())
                        .map(String::from),
                },
                jku_null: false,
            },
            face,
            policy,
            current: RwLock::new(None),
            jwks,
        }
    }

    pub fn policy(&self) -> &CardPolicy {
        &self.policy
    }

    /// The public JWKS (asymmetric keys only; HS256 secrets are never published).
    pub fn jwks(&self) -> Option<Bytes> {
        self.jwks.clone()
    }

    /// The card being served, if one was published.
    pub fn current(&self) -> Option<Arc<Served>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Verifies (if configured), rewrites and signs an agent's card, and publishes it unless
    /// its canonical content is what is already served. Returns the reason code on refusal.
    pub fn publish(&self, agent_card: Value) -> Result<(), Refused> {
        let card = self.prepare(agent_card)?;
        let canonical =
            canonical_card(&card).map_err(|e| Refused::new(reason::CARD_INVALID, e.0))?;
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| c.canonical == canonical) {
            return Ok(());
        }
        let bytes = Bytes::from(card.to_string());
        let validators = Validators {
            etag: strong_etag(&bytes),
            last_modified: crate::time::now_micros() / 1_000_000,
        };
        let extended = card["capabilities"]["extendedAgentCard"] == serde_json::json!(true);
        *current = Some(Arc::new(Served {
            bytes,
            validators,
            canonical,
            extended,
        }));
        Ok(())
    }

    /// An agent's card (public or extended), verified, rewritten and signed for the edge.
    pub fn prepare(&self, agent_card: Value) -> Result<Value, Refused> {
        if let Some(keys) = &self.policy.upstream_keys {
            let verdict = verify_card(&agent_card, keys);
            if !verdict.is_valid() {
                return Err(Refused::new(
                    reason::CARD_UPSTREAM_SIGNATURE,
                    verdict.as_str(),
                ));
            }
        }
        let mut card = rewrite(agent_card, &self.face)?;
        // Only an A2A 1.0 AgentCard is published (an SDK refuses a whole card for one
        // missing field); an incomplete optional `provider` is dropped first.
        if super::schema::repair(&mut card) {
            tracing::info!(
                event = "card_repaired",
                dropped = "provider",
                why = "AgentProvider needs url and organization"
            );
        }
        if let Err(e) = super::schema::check(&card) {
            tracing::warn!(event = "card_invalid", field = e.0.as_str());
            return Err(Refused::new(reason::CARD_INVALID, e.0));
        }
        if let Some(key) = self
            .policy
            .active
            .and_then(|i| self.policy.signing_keys.get(i))
        {
            sign_card(&mut card, key, &self.options)
                .map_err(|e| Refused::new(reason::CARD_SIGN_FAILED, e.0))?;
        }
        Ok(card)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::keys::SigningKey;
    use crate::card::settings::CardSource;
    use crate::card::verify::VerifyKeys;
    use std::sync::Arc;
    use std::time::Duration;

    fn service(upstream_keys: Option<VerifyKeys>) -> CardService {
        let policy = CardPolicy {
            source: CardSource::Upstream,
            upstream: None,
            refresh_interval: Duration::from_secs(60),
            max_age_secs: 60,
            signing_keys: vec![Arc::new(SigningKey::hs256("edge", b"edge-secret").unwrap())],
            active: Some(0),
            jku: Jku::Off,
            upstream_keys: upstream_keys.map(Arc::new),
        };
        let face = EdgeFace {
            public_url: "https://edge.example/".into(),
            security_schemes: serde_json::Map::new(),
            required_extensions: Vec::new(),
            agent_urls: Vec::new(),
        };
        CardService::new(policy, face)
    }

    fn card() -> Value {
        json!({
            "name": "agent", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://agent:8000/", "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": []
        })
    }

    #[test]
    fn a_refused_card_says_why_with_one_code_and_what_in_words() {
        let mut trusted = VerifyKeys::new();
        trusted.add_secret("agent", b"agent-secret");
        let rows: Vec<(&str, CardService, Value, Reason, Option<&str>)> = vec![
            (
                "no object",
                service(None),
                json!([1]),
                reason::CARD_NOT_OBJECT,
                None,
            ),
            (
                "no version",
                service(None),
                {
                    let mut c = card();
                    c.as_object_mut().unwrap().remove("version");
                    c
                },
                reason::CARD_MISSING_FIELD,
                None,
            ),
            (
                "unsigned, keys required",
                service(Some(trusted)),
                card(),
                reason::CARD_UPSTREAM_SIGNATURE,
                Some("unsigned"),
            ),
        ];
        for (what, svc, card, reason, detail) in rows {
            let got = svc.publish(card).unwrap_err();
            assert_eq!(got.reason, reason, "{what}");
            assert_eq!(got.detail.as_deref(), detail, "{what}");
            assert!(svc.current().is_none(), "{what}: published");
        }
        // Not an AgentCard: the schema says which field.
        let mut bad = card();
        bad["skills"] = json!("none");
        let got = service(None).publish(bad).unwrap_err();
        assert_eq!(got.reason, reason::CARD_INVALID);
        assert!(
            got.detail.as_deref().is_some_and(|d| d.contains("skills")),
            "{got:?}"
        );
        // And a good one is published, signed.
        let svc = service(None);
        svc.publish(card()).unwrap();
        let served: Value = serde_json::from_slice(&svc.current().unwrap().bytes).unwrap();
        assert_eq!(served["signatures"].as_array().map(Vec::len), Some(1));
    }
}
