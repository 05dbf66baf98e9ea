//! The card routes: the public Agent Card (cached, conditional requests), the JWKS, the
//! refresh from the agents (or the static card), and the extended card of GetExtendedAgentCard.

use super::*;
use crate::body::CollectError;
use crate::card::service::Refused;
use crate::reason;

/// Largest agent card the edge will read from an agent.
pub(super) const MAX_CARD_BYTES: usize = 1024 * 1024;
/// The longest a card fetch (head and body) may take, when the agent's response timeout is
/// longer: a card is a small document, and start-up, a reload and public card requests
/// wait for it.
pub(super) const CARD_FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Gate {
    /// An agent's public Agent Card, from the cache the refresher keeps (fetched now if
    /// nothing was published yet), with its validators; 304 for a matching conditional request.
    pub(super) async fn card(
        &self,
        agent: &AgentGate,
        headers: &HeaderMap,
        head: bool,
    ) -> Result<Response<BoxBody>, Rejection> {
        let served = match agent.card.current() {
            Some(s) => s,
            None => {
                agent.refresh_card_on_demand(self).await;
                agent.card.current().ok_or(Rejection::Http {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    message: "Agent card unavailable",
                    reason: reason::CARD_UNAVAILABLE,
                    allow: None,
                })?
            }
        };
        let max_age = agent.card.policy().max_age_secs;
        let not_modified = card::http::not_modified(headers, &served.validators);
        let mut r = if not_modified {
            let mut r = Response::new(crate::body::empty());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        } else {
            let mut r = json_response(
                StatusCode::OK,
                if head {
                    Bytes::new()
                } else {
                    served.bytes.clone()
                },
            );
            r.headers_mut().insert(
                header::CONTENT_LENGTH,
                HeaderValue::from(served.bytes.len()),
            );
            r
        };
        let h = r.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&served.validators.etag) {
            h.insert(header::ETAG, v);
        }
        if let Ok(v) = HeaderValue::from_str(&crate::time::format_http_date(
            served.validators.last_modified,
        )) {
            h.insert(header::LAST_MODIFIED, v);
        }
        if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={max_age}")) {
            h.insert(header::CACHE_CONTROL, v);
        }
        Ok(r)
    }

    /// The public keys that verify the cards (asymmetric keys only; every agent's).
    pub(super) fn jwks(&self, head: bool) -> Result<Response<BoxBody>, Rejection> {
        let Some(bytes) = self.jwks.clone() else {
            return Err(Rejection::Http {
                status: StatusCode::NOT_FOUND,
                message: "Not found",
                reason: reason::ROUTE_NOT_FOUND,
                allow: None,
            });
        };
        let len = bytes.len();
        let mut r = json_response(StatusCode::OK, if head { Bytes::new() } else { bytes });
        let h = r.headers_mut();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        let max_age = self
            .agents
            .iter()
            .map(|a| a.card.policy().max_age_secs)
            .min();
        if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={}", max_age.unwrap_or(0))) {
            h.insert(header::CACHE_CONTROL, v);
        }
        Ok(r)
    }

    /// Refreshes every agent's card (see [`AgentGate::refresh_card`]), concurrently.
    pub async fn refresh_card(&self) {
        let all = self.agents.iter().map(|a| a.refresh_card(self));
        futures_join_all(all).await;
    }

    /// How often the refresher runs (the shortest of the agents' intervals).
    pub fn card_refresh_interval(&self) -> std::time::Duration {
        self.agents
            .iter()
            .map(|a| a.card.policy().refresh_interval)
            .min()
            .unwrap_or(std::time::Duration::from_secs(300))
    }
}

/// Runs the futures to completion together (a handful: one per agent).
async fn futures_join_all<F: std::future::Future<Output = ()>>(all: impl Iterator<Item = F>) {
    let mut pending: Vec<std::pin::Pin<Box<F>>> = all.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Every agent's public card keys as one JWKS; a kid shared by agents is one key (the policy
/// refuses a kid naming two keys).
pub(super) fn union_jwks<'a>(cards: impl Iterator<Item = &'a CardService>) -> Option<Bytes> {
    let mut keys: Vec<Value> = Vec::new();
    for card in cards {
        let Some(bytes) = card.jwks() else { continue };
        let Ok(Value::Object(mut set)) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if let Some(Value::Array(list)) = set.remove("keys") {
            for k in list {
                if !keys.iter().any(|seen| seen.get("kid") == k.get("kid")) {
                    keys.push(k);
                }
            }
        }
    }
    (!keys.is_empty()).then(|| Bytes::from(json!({ "keys": keys }).to_string()))
}

impl AgentGate {
    /// Fetches (or takes from the policy) this agent's card and publishes it; the last good
    /// card stays served when this fails. One refresh at a time (the refresher and public
    /// requests share it).
    pub(super) async fn refresh_card(&self, gate: &Gate) {
        let mut backoff = self.card_refresh.lock().await;
        self.refresh_card_locked(gate, &mut backoff).await;
    }

    async fn refresh_card_locked(&self, gate: &Gate, backoff: &mut CardBackoff) {
        let card = match &self.card.policy().source {
            CardSource::Static(v) => Ok(v.clone()),
            CardSource::Upstream => self.fetch_agent_card(gate.owners.registry()).await,
        };
        let publish = |c: Value| {
            let published = self.card.publish(c)?;
            // With `a2a.input_media_types = "card"`, the published card's input modes are
            // what parts may be (read from the card in JSON names: `default_input_modes` is
            // `defaultInputModes` by then).
            if self.requests.media.is_from_card() {
                self.requests.media.learn_card(&published);
            }
            Ok(())
        };
        let outcome = card.and_then(publish);
        // The first fetch after a reload failed: the card the policy before served (as
        // the agent gave it) is published under this one, as a running policy keeps its
        // last good card when a refresh fails.
        if outcome.is_err() && self.card.current().is_none() {
            let before = self
                .card_before_reload
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(before) = before {
                let kept = publish(before);
                tracing::info!(
                    event = "card_kept_across_reload",
                    published = kept.is_ok(),
                    agent = self.name.as_deref()
                );
            }
        }
        let invalid = |v: bool| {
            self.card_invalid
                .store(v, std::sync::atomic::Ordering::Relaxed)
        };
        match outcome {
            Ok(()) => {
                invalid(false);
                *backoff = CardBackoff::default();
                // (the agent's own card is served: the one before the reload is not needed)
                drop(
                    self.card_before_reload
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take(),
                );
            }
            Err(refused) => {
                // Not an A2A 1.0 AgentCard (the rewrite's own checks, or the schema's).
                if matches!(
                    refused.reason,
                    reason::CARD_INVALID | reason::CARD_MISSING_FIELD | reason::CARD_NOT_OBJECT
                ) {
                    invalid(true);
                }
                gate.metrics.card_refresh_failed();
                tracing::warn!(
                    event = "card_refresh_failed",
                    reason = refused.reason.as_str(),
                    detail = refused.detail.as_deref(),
                    agent = self.name.as_deref()
                );
                backoff.failed();
            }
        }
    }

    /// A public request found no card: fetch it, unless a fetch is under way (then wait for
    /// it) or one failed recently (then answer 503 at once). So callers never make the edge
    /// fetch from the agent once per request.
    async fn refresh_card_on_demand(&self, gate: &Gate) {
        // Waits for a refresh under way; then one may have published, or failed recently.
        let mut backoff = self.card_refresh.lock().await;
        if self.card.current().is_some() || backoff.holds(std::time::Instant::now()) {
            return;
        }
        self.refresh_card_locked(gate, &mut backoff).await;
    }

    /// The agent whose card is served: `card.upstream` when set (if healthy), else the least
    /// busy healthy agent.
    pub(super) fn card_agent(&self, registry: &TaskRegistry) -> Option<UpstreamId> {
        match &self.card.policy().upstream {
            Some(name) => self
                .fleet
                .get(registry.upstream_id(name))
                .filter(|a| a.is_healthy())
                .map(|a| a.id),
            None => self.fleet.pick(),
        }
    }

    pub(super) async fn fetch_agent_card(&self, registry: &TaskRegistry) -> Result<Value, Refused> {
        let agent = self
            .card_agent(registry)
            .and_then(|id| self.fleet.get(id))
            .ok_or(reason::UPSTREAM_UNAVAILABLE)?;
        let resp = agent
            .upstream
            .get(CARD_PATH, CARD_FETCH_TIMEOUT)
            .await
            .map_err(|e| e.reason())?;
        if resp.status() != StatusCode::OK {
            return Err(reason::CARD_UPSTREAM_STATUS.into());
        }
        let bytes = collect_limited(resp.into_body(), MAX_CARD_BYTES)
            .await
            .map_err(|e| match e {
                CollectError::TimedOut => reason::UPSTREAM_TIMEOUT,
                _ => reason::CARD_UPSTREAM_BODY,
            })?;
        // (cleaned once its signature is verified: `CardService::prepare`)
        Ok(serde_json::from_slice(&bytes).map_err(|_| reason::CARD_UPSTREAM_JSON)?)
    }

    /// The agent's extended card, verified, rewritten and signed like the public one. `relayed`
    /// is the relay's answer (read within [`MAX_CARD_BYTES`], an error cleaned, a card
    /// cleaned once verified by [`CardService::prepare`], its share of the caller's budgets
    /// its own); the card read from it, its tree and the card written again
    /// are the caller's in `held` (an empty reservation of the request's), which the answer's
    /// body owns with the caller's `slot` until it is sent. An agent's answer that is not a
    /// card the edge can serve is -32006 `card.extended_invalid`; one past the caller's
    /// budgets while its other requests hold them (or past everyone's), -32603 with the
    /// budget's reason, as any answer is.
    pub(super) async fn extended_card(
        &self,
        relayed: Result<Response<BoxBody>, UpstreamError>,
        id: &Value,
        (slot, mut held): (ConcurrencyGuard, RequestBytes),
    ) -> Result<Response<BoxBody>, Rejection> {
        let broken = || {
            Rejection::rpc(
                id.clone(),
                RpcError::new(
                    crate::a2a::code::INVALID_AGENT_RESPONSE,
                    "Upstream agent sent an invalid card",
                    reason::CARD_EXTENDED_INVALID,
                ),
            )
        };
        let over = |reason| Rejection::rpc(id.clone(), UpstreamError::Refused(reason).rpc_error());
        let resp = match relayed {
            Ok(resp) => resp,
            // Not a JSON-RPC answer within the card's bound.
            Err(UpstreamError::BadResponse) => return Err(broken()),
            Err(e) => return Err(Rejection::rpc(id.clone(), e.rpc_error())),
        };
        // (the relayed body, and what it holds, are gone once read: the card's copy is then
        // charged in their place; the relay read at most the bound, and what it wrote may be a
        // little larger)
        let bytes = collect_limited(resp.into_body(), 2 * MAX_CARD_BYTES)
            .await
            .map_err(|_| broken())?;
        held.answering();
        held.grow(bytes.len()).map_err(over)?;
        let max_values = self.requests.max_json_values;
        let mut v = crate::upstream::parse_charged(&bytes, max_values, &mut held)
            .map_err(|e| e.map_or_else(broken, |(reason, _)| over(reason)))?;
        let Some(result) = v.get_mut("result") else {
            // A JSON-RPC error from the agent passes as it is.
            drop(v);
            held.shrink_to(bytes.len());
            return Ok(crate::body::json_response_holding(
                StatusCode::OK,
                bytes,
                (slot, held),
            ));
        };
        let card = self.card.prepare(result.take()).map_err(|_| broken())?;
        *result = card;
        let body = v.to_string();
        drop((v, bytes));
        held.shrink_to(body.len());
        Ok(crate::body::json_response_holding(
            StatusCode::OK,
            body,
            (slot, held),
        ))
    }
}

/// After a failed card refresh, public requests do not fetch again before `retry_at`: 1 s
/// after the first failure, doubling to at most 60 s.
#[derive(Debug, Default)]
pub(super) struct CardBackoff {
    failures: u32,
    retry_at: Option<std::time::Instant>,
}

impl CardBackoff {
    fn failed(&mut self) {
        self.failures = self.failures.saturating_add(1);
        let secs = 1u64 << self.failures.saturating_sub(1).min(6);
        self.retry_at =
            Some(std::time::Instant::now() + std::time::Duration::from_secs(secs.min(60)));
    }

    fn holds(&self, now: std::time::Instant) -> bool {
        self.retry_at.is_some_and(|t| now < t)
    }
}
