//! The authorization stage: the caller's grant (from `[authz]`), the method, push callbacks,
//! the request's `tenant`; the audit line and counter of every refusal; and what the agent
//! learns of the caller (tenant header, signed identity assertion).

use super::*;
use crate::auth::assertion;
use crate::authz::{Grant, Refusal, AUTHZ_ERROR_CODE};
use crate::reason;

impl Gate {
    /// The caller's grant under the policy in force. Refused outright when a workspace
    /// template cannot take the caller's tenant or name, and before the body is read when the
    /// grant allows no method at all.
    pub(super) fn grant(
        &self,
        at: &AgentGate,
        p: &Principal,
        trace: &Trace,
    ) -> Result<Arc<Grant>, Rejection> {
        let Some(authz) = &self.authz else {
            return Ok(self.everything.clone());
        };
        let grant = match authz.grant_at(p, at.name.as_deref()) {
            Ok(g) => g,
            Err(r) => {
                self.audit(&r, p, None, &[], trace);
                return Err(authz_rejection(Value::Null, &r, None));
            }
        };
        if grant.methods == crate::authz::MethodSet::EMPTY {
            let r = Refusal {
                reason: reason::AUTHZ_METHOD,
                missing: None,
            };
            self.audit(&r, p, None, &grant.rules, trace);
            return Err(authz_rejection(Value::Null, &r, None));
        }
        Ok(Arc::new(grant))
    }

    /// May this caller make this request? The method, a push callback in SendMessage, and
    /// the request's `tenant` against the caller's.
    pub(super) fn authorize(
        &self,
        grant: &Grant,
        p: &Principal,
        rpc: &RpcRequest,
        trace: &Trace,
    ) -> Result<(), Rejection> {
        let refusal = grant.allows(rpc.method).err().or_else(|| {
            let inline_push = matches!(
                rpc.method,
                Method::SendMessage | Method::SendStreamingMessage
            ) && rpc
                .params
                .get("configuration")
                .and_then(|c| c.get("taskPushNotificationConfig"))
                .is_some_and(|v| !v.is_null());
            (inline_push && !grant.create_push_configs).then_some(Refusal {
                reason: reason::AUTHZ_PUSH,
                missing: Some("push"),
            })
        });
        if let Some(r) = refusal {
            self.audit(&r, p, Some(rpc.method), &grant.rules, trace);
            return Err(authz_rejection(rpc.id.clone(), &r, Some(rpc.method)));
        }
        {
            if !tenants_agree(&rpc.params, p.tenant.as_deref()) {
                let r = Refusal {
                    reason: reason::TENANT_MISMATCH,
                    missing: None,
                };
                self.audit(&r, p, Some(rpc.method), &grant.rules, trace);
                return Err(Rejection::rpc(
                    rpc.id.clone(),
                    RpcError::invalid_params(
                        "The request's tenant is not the caller's tenant",
                        reason::TENANT_MISMATCH,
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Logs and counts a refused authorization decision.
    pub(super) fn audit(
        &self,
        r: &Refusal,
        p: &Principal,
        method: Option<Method>,
        matched: &[Arc<str>],
        trace: &Trace,
    ) {
        self.metrics.authz_refused(r.reason);
        let (consulted, default) = match &self.authz {
            None => (0, "none"),
            Some(a) if a.default_allow => (a.rules.len(), "allow"),
            Some(a) => (a.rules.len(), "deny"),
        };
        // The audit line of a refused authorization decision.
        let matched: Vec<&str> = matched.iter().map(|n| &**n).collect();
        tracing::info!(
            event = "authz_refused",
            request_id = trace.request_id.as_str(),
            agent = trace.agent.as_deref(),
            principal = p.name.as_str(),
            tenant = p.tenant.as_deref(),
            groups = ?telemetry::Json(&p.groups),
            method = method.map(Method::as_str),
            reason = r.reason.as_str(),
            missing = r.missing,
            // The rules that matched the caller (empty: none did), how many rules the policy
            // has, and its default for a caller none matches.
            rules_matched = ?telemetry::Json(&matched),
            rules_consulted = consulted as u64,
            default,
        );
    }

    /// What the agent learns of the caller besides the principal header: its tenant, and
    /// (with `[auth.identity_assertion]`) a signed statement addressed to this agent.
    pub(super) fn caller_headers(
        &self,
        headers: &mut HeaderMap,
        agent: &str,
        p: &Principal,
        request_id: &str,
    ) -> Result<(), RpcError> {
        if let Some(t) = &p.tenant {
            headers.insert(TENANT_HEADER, principal_header_value(t));
        }
        let Some(ia) = &self.identity else {
            return Ok(());
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let jws = assertion::sign(
            &ia.key,
            &assertion::Statement {
                issuer: &self.public_url,
                audience: agent,
                principal: p,
                request_id,
                issued_at: now,
                ttl_secs: ia.ttl.as_secs(),
            },
        )
        .ok()
        .and_then(|t| HeaderValue::from_str(&t).ok());
        // An agent that expects an assertion must never get a request without one.
        let jws = jws.ok_or_else(|| RpcError::internal(reason::IDENTITY_SIGN_FAILED))?;
        let name = HeaderName::from_bytes(ia.header.as_bytes())
            .map_err(|_| RpcError::internal(reason::IDENTITY_SIGN_FAILED))?;
        headers.insert(name, jws);
        Ok(())
    }
}

/// The header that carries the caller's tenant to the agents (never taken from callers: the
/// header allow-list drops it).
pub(super) const TENANT_HEADER: HeaderName = HeaderName::from_static("x-a2a-edge-tenant");

/// Whether every `tenant` the request names (the params', a nested message's, an inline push
/// config's) is the caller's. A non-string tenant is left to the params check.
fn tenants_agree(params: &serde_json::Map<String, Value>, tenant: Option<&str>) -> bool {
    // A caller without a tenant names none (an empty one is proto3's "unset"): an agent that
    // scopes by `tenant` would otherwise serve it in any tenant it names.
    let ok = |v: Option<&Value>| match (v, tenant) {
        (Some(Value::String(s)), Some(tenant)) => s.is_empty() || s == tenant,
        (Some(Value::String(s)), None) => s.is_empty(),
        _ => true,
    };
    let message = params.get("message");
    let push = params
        .get("configuration")
        .and_then(|c| c.get("taskPushNotificationConfig"));
    ok(params.get("tenant"))
        && ok(message.and_then(|m| m.get("tenant")))
        && ok(push.and_then(|p| p.get("tenant")))
}

/// The JSON-RPC authorization error: its reason, the method and the class the caller lacks.
fn authz_rejection(id: Value, r: &Refusal, method: Option<Method>) -> Rejection {
    let message = match method {
        Some(m) => format!("Permission denied: this caller may not call {m}"),
        None => "Permission denied".to_string(),
    };
    let mut e = RpcError::new(AUTHZ_ERROR_CODE, message, r.reason);
    if let Some(m) = method {
        e = e.with_metadata("method", m.as_str());
    }
    if let Some(c) = r.missing {
        e = e.with_metadata("missing", c);
    }
    Rejection::rpc(id, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_fields() {
        let p = |v: Value| v.as_object().unwrap().clone();
        let rows = [
            (json!({}), true),
            (json!({"tenant": "team-a"}), true),
            (json!({"tenant": "team-b"}), false),
            (json!({"tenant": "Team-A"}), false),
            (json!({"tenant": "team-a "}), false),
            // An empty one is unset (proto3), and is not forwarded.
            (json!({"tenant": ""}), true),
            (json!({"message": {"tenant": "team-b"}}), false),
            (
                json!({"tenant": "team-a", "message": {"tenant": "team-b"}}),
                false,
            ),
            (
                json!({"configuration": {"taskPushNotificationConfig": {"tenant": "team-b"}}}),
                false,
            ),
            (
                json!({"configuration": {"taskPushNotificationConfig": {"tenant": "team-a"}}}),
                true,
            ),
            (json!({"tenant": 7}), true),
        ];
        for (params, want) in rows {
            assert_eq!(
                tenants_agree(&p(params.clone()), Some("team-a")),
                want,
                "{params}"
            );
        }
        // A caller without a tenant: no tenant named anywhere (an empty one is unset).
        let rows = [
            (json!({}), true),
            (json!({"tenant": ""}), true),
            (json!({"tenant": "team-a"}), false),
            (json!({"message": {"tenant": "team-a"}}), false),
            (
                json!({"configuration": {"taskPushNotificationConfig": {"tenant": "team-b"}}}),
                false,
            ),
            (json!({"tenant": 7}), true),
        ];
        for (params, want) in rows {
            assert_eq!(tenants_agree(&p(params.clone()), None), want, "{params}");
        }
    }
}
