//! Agent paths (`server.agent_paths`): the agents' own routes an operator chose to expose,
//! authenticated and rate-limited like JSON-RPC and answered only with cleaned JSON.

use super::*;
use crate::reason::{self, Reason};

impl Gate {
    /// A path of the agents that the policy exposes: authenticated and rate-limited like
    /// JSON-RPC, forwarded with the agent's credential, answered only with cleaned JSON. Such
    /// paths are the agent's own API: the task registry does not guard them.
    pub(super) async fn agent_path(
        &self,
        at: &AgentGate,
        conn: &ConnInfo,
        client: IpAddr,
        req: Request<impl RequestBody>,
        h1_body: bool,
        trace: &mut Trace,
    ) -> Result<Response<BoxBody>, Rejection> {
        let (parts, body) = req.into_parts();
        // Refused before the body is needed: what is left of it is read and dropped (within
        // bounds), as on the JSON-RPC route.
        let before_body = async {
            let principal = self.admit(conn, client, &parts.headers, trace).await?;
            // The agents' own read-only routes: for callers granted the read class.
            let grant = self.grant(at, &principal, trace)?;
            if let Err(r) = grant.allows(Method::GetTask) {
                self.audit(&r, &principal, None, &grant.rules, trace);
                return Err(Rejection::Http {
                    status: StatusCode::FORBIDDEN,
                    message: "Forbidden",
                    reason: r.reason,
                    allow: None,
                });
            }
            let slot = self.slot(&principal.owner_key(), false)?;
            let held = self.reserve_body(&principal, &parts.headers, at.body_limits)?;
            Ok((principal, slot, held))
        };
        let (principal, slot, mut held) = match before_body.await {
            Ok(ok) => ok,
            Err(rej) => {
                drop_unneeded_body(body, &parts.headers, h1_body, trace).await;
                return Err(rej);
            }
        };
        let bytes = read_body(body, &parts.headers, at.body_limits, &mut held).await?;
        let path_and_query = parts
            .uri
            .path_and_query()
            .map(|pq| pq.as_str())
            .unwrap_or("/");
        // With `[[agents]]` the path is the agent's own, under its prefix.
        let path_and_query = match &at.name {
            Some(_) => match path_and_query.strip_prefix(at.rpc_path.as_str()) {
                Some(rest) => format!("/{rest}"),
                None => path_and_query.to_string(),
            },
            None => path_and_query.to_string(),
        };
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        if !bytes.is_empty() {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        headers.insert(
            self.principal_header.clone(),
            principal_header_value(&principal.name),
        );
        forwarding_headers(&mut headers, client, &trace.request_id);
        let bad_gateway = |reason: Reason| Rejection::Http {
            status: StatusCode::BAD_GATEWAY,
            message: "Upstream agent unavailable",
            reason,
            allow: None,
        };
        let agent = at
            .fleet
            .pick()
            .and_then(|id| at.fleet.get(id))
            .ok_or(bad_gateway(reason::UPSTREAM_UNAVAILABLE))?;
        self.caller_headers(
            &mut headers,
            &agent.upstream.name,
            &principal,
            &trace.request_id,
        )
        .map_err(|_| bad_gateway(reason::IDENTITY_SIGN_FAILED))?;
        let resp = agent
            .upstream
            .request_path(parts.method, &path_and_query, headers, bytes)
            .await
            .map_err(|e| bad_gateway(e.reason()))?;
        let status = resp.status();
        if !upstream::is_json(resp.headers()) {
            return Err(bad_gateway(reason::UPSTREAM_BAD_RESPONSE));
        }
        // Bounded in time with the head (the agent's response timeout).
        // What the answer holds is the caller's, as its request's was (its bytes as they
        // arrive, the body written from it, its tree), as a JSON-RPC answer's is: past the
        // caller's request budgets while its other requests hold them, or past everyone's,
        // 502 with the budget's reason (the agent has had the request: not a 429 or 503).
        held.answering();
        let bytes = upstream::read_answer(resp.into_body(), 64 * 1024 * 1024, &mut held)
            .await
            .map_err(|e| bad_gateway(e.reason()))?;
        held.grow(bytes.len()).map_err(bad_gateway)?;
        let value = upstream::parse_charged(&bytes, at.requests.max_json_values, &mut held)
            .map_err(|over| bad_gateway(over.map_or(reason::UPSTREAM_BAD_RESPONSE, |(r, _)| r)))?;
        let mut wrapped = json!({ "result": value });
        clean_response(
            &mut wrapped,
            &at.requests.metadata,
            at.requests.redact_paths,
        );
        let body = wrapped.get("result").unwrap_or(&Value::Null).to_string();
        // The body owns the slot until it is sent (a caller that reads nothing holds no
        // more answers than its slots), and what it holds of the caller's budgets.
        drop((bytes, wrapped));
        held.shrink_to(body.len());
        Ok(crate::body::json_response_holding(
            status,
            body,
            (slot, held),
        ))
    }
}
