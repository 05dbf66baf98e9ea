//! The card routes: the public Agent Card (cached, conditional requests), the JWKS, the
//! refresh from the agents (or the static card), and the extended card of GetExtendedAgentCard.

use super::*;

/// Largest agent card the edge will read from an agent.
pub(super) const MAX_CARD_BYTES: usize = 1024 * 1024;

impl Gate {
    /// The public Agent Card, from the cache the refresher keeps (fetched now if nothing was
    /// published yet), with its validators; 304 for a matching conditional request.
    pub(super) async fn card(
        &self,
        headers: &HeaderMap,
        head: bool,
    ) -> Result<Response<BoxBody>, Rejection> {
        let served = match self.card.current() {
            Some(s) => s,
            None => {
                self.refresh_card_on_demand().await;
                self.card.current().ok_or(Rejection::Http {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    message: "Agent card unavailable",
                    reason: "card.unavailable",
                    allow: None,
                })?
            }
        };
        let max_age = self.card.policy().max_age_secs;
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

    /// The public keys that verify the card (asymmetric keys only).
    pub(super) fn jwks(&self, head: bool) -> Result<Response<BoxBody>, Rejection> {
        let Some(bytes) = self.card.jwks() else {
            return Err(Rejection::Http {
                status: StatusCode::NOT_FOUND,
                message: "Not found",
                reason: "route.not_found",
                allow: None,
            });
        };
        let len = bytes.len();
        let mut r = json_response(StatusCode::OK, if head { Bytes::new() } else { bytes });
        let h = r.headers_mut();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        if let Ok(v) = HeaderValue::from_str(&format!(
            "public, max-age={}",
            self.card.policy().max_age_secs
        )) {
            h.insert(header::CACHE_CONTROL, v);
        }
        Ok(r)
    }

    /// Fetches (or takes from the policy) the agents' card and publishes it; the last good
    /// card stays served when this fails. One refresh at a time (the refresher and public
    /// requests share it).
    pub async fn refresh_card(&self) {
        let mut backoff = self.card_refresh.lock().await;
        self.refresh_card_locked(&mut backoff).await;
    }

    async fn refresh_card_locked(&self, backoff: &mut CardBackoff) {
        let card = match &self.card.policy().source {
            CardSource::Static(v) => Ok(v.clone()),
            CardSource::Upstream => self.fetch_agent_card().await,
        };
        let outcome = card.and_then(|c| {
            // With `a2a.input_media_types = "card"`, the published card's input modes are
            // what parts may be.
            let modes = self.requests.media.is_from_card().then(|| c.clone());
            self.card.publish(c).map_err(|e| e.0)?;
            if let Some(card) = modes {
                self.requests.media.learn_card(&card);
            }
            Ok(())
        });
        let invalid = |v: bool| {
            self.card_invalid
                .store(v, std::sync::atomic::Ordering::Relaxed)
        };
        match outcome {
            Ok(()) => {
                invalid(false);
                *backoff = CardBackoff::default()
            }
            Err(reason) => {
                // Not an A2A 1.0 AgentCard (the rewrite's own checks, or the schema's).
                if matches!(
                    reason.as_str(),
                    "card.invalid" | "card.missing_field" | "card.not_object"
                ) {
                    invalid(true);
                }
                self.metrics.card_refresh_failed();
                telemetry::log("card_refresh_failed", json!({"reason": reason}));
                backoff.failed();
            }
        }
    }

    /// A public request found no card: fetch it, unless a fetch is under way (then wait for
    /// it) or one failed recently (then answer 503 at once). So callers never make the edge
    /// fetch from the agent once per request.
    async fn refresh_card_on_demand(&self) {
        // Waits for a refresh under way; then one may have published, or failed recently.
        let mut backoff = self.card_refresh.lock().await;
        if self.card.current().is_some() || backoff.holds(std::time::Instant::now()) {
            return;
        }
        self.refresh_card_locked(&mut backoff).await;
    }

    /// The agent whose card is served: `card.upstream` when set (if healthy), else the least
    /// busy healthy agent.
    pub(super) fn card_agent(&self) -> Option<UpstreamId> {
        match &self.card.policy().upstream {
            Some(name) => self
                .fleet
                .get(self.owners.registry().upstream_id(name))
                .filter(|a| a.is_healthy())
                .map(|a| a.id),
            None => self.fleet.pick(),
        }
    }

    pub(super) async fn fetch_agent_card(&self) -> Result<Value, String> {
        let agent = self
            .card_agent()
            .and_then(|id| self.fleet.get(id))
            .ok_or_else(|| "upstream.unavailable".to_string())?;
        let resp = agent
            .upstream
            .get(CARD_PATH)
            .await
            .map_err(|e| e.reason().to_string())?;
        if resp.status() != StatusCode::OK {
            return Err("card.upstream_status".into());
        }
        let bytes = collect_limited(resp.into_body(), MAX_CARD_BYTES)
            .await
            .map_err(|_| "card.upstream_body".to_string())?;
        serde_json::from_slice(&bytes).map_err(|_| "card.upstream_json".to_string())
    }

    /// How often the refresher runs.
    pub fn card_refresh_interval(&self) -> std::time::Duration {
        self.card.policy().refresh_interval
    }

    /// The agent's extended card, verified, rewritten and signed like the public one.
    pub(super) async fn extended_card(
        &self,
        resp: Response<BoxBody>,
        id: &Value,
    ) -> Result<Response<BoxBody>, Rejection> {
        let broken = || {
            Rejection::rpc(
                id.clone(),
                RpcError::new(
                    crate::upstream::INVALID_AGENT_RESPONSE,
                    "Upstream agent sent an invalid card",
                    "card.extended_invalid",
                ),
            )
        };
        let bytes = collect_limited(resp.into_body(), MAX_CARD_BYTES)
            .await
            .map_err(|_| broken())?;
        let mut v: Value = serde_json::from_slice(&bytes).map_err(|_| broken())?;
        let Some(result) = v.get_mut("result") else {
            // A JSON-RPC error from the agent passes as it is.
            return Ok(json_response(StatusCode::OK, bytes));
        };
        let card = self.card.prepare(result.take()).map_err(|_| broken())?;
        *result = card;
        Ok(json_response(StatusCode::OK, v.to_string()))
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
