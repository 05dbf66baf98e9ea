//! The card the edge serves: verified (when upstream keys are configured), rewritten, signed by
//! the active key, and cached with its validators. The bytes only change when the canonical
//! content changes, so an unchanged card keeps its bytes, `ETag` and `Last-Modified` even with
//! randomized (ECDSA) signatures and agents that reorder keys.

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use serde_json::{json, Value};

use super::canonical::{canonical_card, CardError};
use super::http::{strong_etag, Validators};
use super::jws::{sign_card, SignOptions};
use super::verify::verify_card;
use super::{rewrite, EdgeFace};
use crate::policy::CardPolicy;
use crate::policy::Jku;
use crate::reason;

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
    pub fn publish(&self, agent_card: Value) -> Result<(), CardError> {
        let card = self.prepare(agent_card)?;
        let canonical = canonical_card(&card)?;
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
    pub fn prepare(&self, agent_card: Value) -> Result<Value, CardError> {
        if let Some(keys) = &self.policy.upstream_keys {
            let verdict = verify_card(&agent_card, keys);
            if !verdict.is_valid() {
                return Err(CardError(format!(
                    "card.upstream_signature.{}",
                    verdict.as_str()
                )));
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
            return Err(CardError(reason::CARD_INVALID.to_string()));
        }
        if let Some(key) = self
            .policy
            .active
            .and_then(|i| self.policy.signing_keys.get(i))
        {
            sign_card(&mut card, key, &self.options)?;
        }
        Ok(card)
    }
}
