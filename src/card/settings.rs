//! What the `[card]` table (and an agent's own `card` section) compiles to (built by
//! `crate::policy`, read by the card service): where the card comes from, the keys that sign
//! it, and the keys the agents' own signature must verify with.

use std::time::Duration;

use serde_json::Value;

use super::keys::SigningKey;
use super::verify::VerifyKeys;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardSource {
    /// Fetched from the agents and rewritten.
    Upstream,
    /// From `[card.static]`.
    Static(Value),
}

/// Where the card's signatures say the keys are (`card.jku`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Jku {
    /// The edge's own `/.well-known/jwks.json` when the signing key is asymmetric (the
    /// default), so verifiers that resolve keys by `jku` find them.
    Auto,
    Off,
    Url(String),
}

#[derive(Clone)]
pub struct CardPolicy {
    pub source: CardSource,
    /// The agent (policy name) whose card is served; `None`: any healthy agent.
    pub upstream: Option<String>,
    pub refresh_interval: Duration,
    pub max_age_secs: u32,
    /// All configured keys; `active` indexes the one that signs.
    pub signing_keys: Vec<std::sync::Arc<SigningKey>>,
    pub active: Option<usize>,
    /// `jku` of the signatures' protected header.
    pub jku: Jku,
    /// When set, the agents' card must verify with these keys first.
    pub upstream_keys: Option<std::sync::Arc<VerifyKeys>>,
}

impl std::fmt::Debug for CardPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self.signing_keys.iter().map(|k| k.kid.as_str()).collect();
        f.debug_struct("CardPolicy")
            .field("source", &self.source)
            .field("signing_keys", &kids)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}
