//! The request pipeline. [`Gate::handle`] is the one place where the stages run, in order:
//!
//! ```text
//! framing ─ route ─ /health ─ card ─ jwks ─ agent paths
//!                 └ JSON-RPC: admit (address rate → authenticate → principal rate)
//!                   → grant → content type → read body (cap) → parse envelope
//!                   → authorize (method, push, tenant) → method rate → concurrency slot
//!                   → version/extensions → params (in the caller's roots) → ownership
//!                   → forward (principal, tenant, identity assertion) → relay
//! ```
//!
//! Each stage returns `Result<_, Rejection>`; how each decides lives in its own module. Here:
//! the order. Beside it: `authorize` (grants, audit, what the agent learns of the caller),
//! `body` (framing, reading the body), `forwarding` (headers the agent gets from the proxy),
//! `list_tasks`, `agent_path`, `card_routes`.

mod agent_gate;
mod agent_path;
mod authorize;
mod body;
mod card_routes;
mod catalog;
mod forwarding;
mod gates;
mod list_tasks;
mod process;
mod rejection;
mod route;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{
    header, HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, Request, Response, StatusCode,
};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tracing::{info_span, Instrument};

pub use body::RequestBody;
use body::{
    check_framing, check_host, declared_length, declares_h1_body, drop_unneeded_body,
    leaves_body_unread, read_body, BodyLimits,
};
use forwarding::{forwarding_headers, principal_header_value};
pub use gates::Gates;
pub use process::Process;
use rejection::over_request_budget;
pub use rejection::Rejection;
pub use route::{classify, Route, CARD_PATH, CATALOG_PATH, HEALTH_PATH};

use crate::policy::routes::AgentRoutes;
use agent_gate::AgentGate;

use crate::a2a::{Method, RpcError, RpcRequest};
use crate::auth::{Authenticator, ConnCredentials, Principal, StillAdmitted};
use crate::authz::{AuthzPolicy, Grant, Roots};
use crate::body::{collect_limited, json_response, BoxBody};
use crate::card::service::CardService;
use crate::card::{self, EdgeFace};
use crate::limits::concurrency::{reckoned_tree, ConcurrencyGuard, RequestBytes};
use crate::limits::network::NetworkPolicy;
use crate::limits::rate::Limited;
use crate::policy::CardSource;
use crate::policy::IdentityAssertionPolicy;
use crate::policy::Policy;
use crate::reason::{self, Reason};
use crate::state::ownership::{Ownership, Pending, Refusal};
use crate::state::registry::UpstreamId;
use crate::state::registry::{Denial, Shape, TaskRegistry};
use crate::state::Budgets;
use crate::telemetry;
use crate::telemetry::metrics::{Metrics, Snapshot, UpstreamGauge};
use crate::upstream::clean::clean_response;
use crate::upstream::fleet::Fleet;
use crate::upstream::RelayLimits;
use crate::upstream::{self, relay_response, StreamLog, UpstreamError};
use crate::validate::push_url::check_resolved;
use crate::validate::request::{check_params, Checked, RequestPolicy};
use crate::validate::service;
use crate::validate::workspace::WorkspacePolicy;

/// What the stages learned about a request, for its log line.
#[derive(Debug, Default)]
struct Trace {
    principal: Option<String>,
    tenant: Option<String>,
    scheme: Option<&'static str>,
    method: Option<&'static str>,
    /// Sent to the agent as `X-Request-Id` and logged, to join the two.
    request_id: String,
    /// The caller's W3C trace id, when its `traceparent` is well-formed (and forwarded).
    trace_id: Option<String>,
    /// The `[[agents]]` name the request is for (none without `[[agents]]`).
    agent: Option<Arc<str>>,
    /// Refused before its body was needed, and the rest of the body did not arrive within
    /// the bounds of `discard_body`: the connection cannot carry another request.
    body_left_unread: bool,
}

/// What the gate knows about the connection a request came on.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    /// The client presented a certificate that chains to `tls.client_ca_file`.
    pub client_cert: bool,
    /// The identity in that certificate (URI SAN, DNS SAN or CN), if usable.
    pub client_identity: Option<Arc<str>>,
    /// The gates the connection is served by, so that a stream sees the reloads after its
    /// start ([`Gate::revocation`]); `None`: no reloads (benches, some tests).
    pub gates: Option<Gates>,
}

/// The pipeline with everything its stages need. Built once per policy.
pub struct Gate {
    /// The agents behind the edge, in the policy's order (one without `[[agents]]`).
    agents: Vec<AgentGate>,
    /// With `[[agents]]`: which agent a request is for (host and path prefix).
    routes: Option<AgentRoutes>,
    /// Every agent's public card keys, by kid (`/.well-known/jwks.json`).
    jwks: Option<Bytes>,
    catalog: catalog::Catalog,
    /// The metrics label of requests for no agent (the edge's own paths, 404).
    unnamed: Arc<str>,
    auth: Authenticator,
    principal_header: HeaderName,
    network: NetworkPolicy,
    /// Rates, the failure throttle and concurrency: the process's, kept across reloads.
    budgets: Budgets,
    /// Who owns which task and context (the process's; with `redis`, shared by replicas).
    owners: Ownership,
    relay_limits: RelayLimits,
    allow_chunked: bool,
    agent_paths: Vec<String>,
    /// The process's counters (shared across reloads, like the registry).
    metrics: Arc<Metrics>,
    /// The byte budget of one ListTasks page.
    list_page_bytes: usize,
    /// `[authz]`; `None`: every caller gets `everything`.
    authz: Option<Arc<AuthzPolicy>>,
    everything: Arc<Grant>,
    identity: Option<IdentityAssertionPolicy>,
    /// The public URL (the identity assertion's issuer).
    public_url: String,
}

impl Gate {
    /// `public_url` is the policy's, with a port 0 already replaced by the bound port.
    /// `process` is what outlives a policy (who owns which task, the counters, the embedded
    /// engine, the shared store). `previous` is the gate this one replaces (a reload): its
    /// agents' health and its budgets carry over.
    pub async fn new(
        policy: &Policy,
        public_url: &url::Url,
        bound_port: u16,
        process: &Process,
        previous: Option<&Gate>,
    ) -> Result<Gate, String> {
        let owners = process.owners.clone();
        let registry = owners.registry().clone();
        let metrics = process.metrics.clone();
        let local = process.local_agent.clone();
        let auth = Authenticator::new(&policy.auth, previous.map(|g| &g.auth)).await?;
        let schemes = auth.security_schemes().clone();
        let principal_header = HeaderName::from_bytes(policy.auth.principal_header.as_bytes())
            .map_err(|_| "auth.principal_header: not a header name".to_string())?;
        let shared = agent_gate::Shared {
            policy,
            schemes: &schemes,
            registry: &registry,
            local: local.as_ref(),
            previous,
            body: BodyLimits {
                cap: policy.a2a.max_body_bytes,
                timeout: policy.limits.body_read_timeout,
                min_bytes_per_second: policy.limits.min_body_bytes_per_second,
            },
        };
        let agents = if policy.agents.is_empty() {
            vec![AgentGate::single(&shared, public_url)?]
        } else {
            policy
                .agents
                .iter()
                .map(|a| AgentGate::named(&shared, a, bound_port))
                .collect::<Result<Vec<_>, _>>()?
        };
        let routes = if policy.agents.is_empty() {
            None
        } else {
            let urls: Vec<url::Url> = agents
                .iter()
                .map(|a| url::Url::parse(&a.public_url))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("agents: {e}"))?;
            let named = agents.iter().map(|a| &**a.label()).zip(urls.iter());
            Some(AgentRoutes::new(named)?.with_agent_paths(&policy.server.agent_paths))
        };
        let jwks = card_routes::union_jwks(agents.iter().map(|a| &a.card));
        Ok(Gate {
            catalog: catalog::Catalog::new(&policy.card, public_url),
            unnamed: Arc::from(""),
            jwks,
            routes,
            agents,
            list_page_bytes: policy.limits.list_tasks_page_bytes,
            authz: policy.authz.clone(),
            everything: Arc::new(Grant::everything()),
            identity: policy.auth.identity_assertion.clone(),
            public_url: public_url.to_string(),
            auth,
            principal_header,
            network: policy.network.clone(),
            budgets: Budgets::carry(
                policy.budgets(),
                previous.map(|g| &g.budgets),
                process.shared.clone(),
            )?,
            owners,
            metrics,
            allow_chunked: policy.limits.allow_chunked_requests,
            agent_paths: policy.server.agent_paths.clone(),
            relay_limits: RelayLimits {
                keepalive: policy.limits.stream_keepalive,
                idle_timeout: policy.limits.stream_idle_timeout,
                max_duration: policy.limits.stream_max_duration,
                stream_buffer_bytes: policy.limits.stream_buffer_bytes,
                ..RelayLimits::default()
            },
        })
    }

    /// Serves one request. Never fails: every refusal is rendered as a response.
    pub async fn handle(
        &self,
        conn: ConnInfo,
        req: Request<impl RequestBody>,
    ) -> Response<BoxBody> {
        self.serve(conn, req, None).await
    }

    /// Refuses one request with `refused` before anything of it is read (its connection is
    /// closing): logged and counted like any other answer, and the connection not kept.
    pub async fn refuse(
        &self,
        conn: ConnInfo,
        req: Request<impl RequestBody>,
        refused: Rejection,
    ) -> Response<BoxBody> {
        let h1 = req.version() < http::Version::HTTP_2;
        let mut resp = self.serve(conn, req, Some(refused)).await;
        if h1 {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }

    async fn serve(
        &self,
        conn: ConnInfo,
        req: Request<impl RequestBody>,
        refused: Option<Rejection>,
    ) -> Response<BoxBody> {
        let started = Instant::now();
        let (route, named) = self.route(&req);
        // Routes without an agent of their own (the edge's paths, 404) use the first's
        // settings where they need any; they are labelled with no agent.
        let (agent, label) = match named {
            Some(a) => (a, a.label()),
            None => (&self.agents[0], &self.unnamed),
        };
        let head = req.method() == HttpMethod::HEAD;
        let h1_body = declares_h1_body(&req);
        // The real client: the peer, or the rightmost untrusted hop behind a trusted proxy.
        let client = self.network.client_address(conn.peer.ip(), req.headers());
        let mut trace = Trace {
            request_id: telemetry::request_id::next(),
            agent: named.and_then(|a| a.name.clone()),
            ..Trace::default()
        };
        // One span per traced request (with trace export, `otlp_sample_ratio` of them), the
        // caller's trace as its parent when its `traceparent` is well-formed; none for the
        // others (nor for their stages).
        let caller_trace = if telemetry::traces::enabled() {
            upstream::trace_context::forwardable(req.headers())
        } else {
            None
        };
        let span = if telemetry::traces::keep(caller_trace.as_ref().map(|(_, id)| id.as_str())) {
            let span = info_span!(
                "request",
                otel.kind = "server",
                http.route = route_name(route),
                request_id = trace.request_id.as_str(),
                agent = trace.agent.as_deref(),
                a2a.method = tracing::field::Empty,
                http.response.status_code = tracing::field::Empty,
            );
            if let Some((checked, _)) = &caller_trace {
                telemetry::traces::adopt_parent(&span, checked);
            }
            span
        } else {
            tracing::Span::none()
        };
        // Framing that two HTTP parsers could read differently is refused first. Each
        // route's future is boxed where it is made: a future is moved whole (all its states'
        // bytes) each time it changes hands, and the routes' futures are kilobytes (the
        // request's was 14.7 KiB, moved several times per request: memmove was the largest
        // user-space item of the profile); boxed, it is moved once and this one stays small.
        let outcome = async {
            if let Some(rej) = refused {
                trace.body_left_unread = h1_body;
                return Err(rej);
            }
            if let Err(rej) =
                check_framing(req.headers(), self.allow_chunked).and_then(|()| check_host(&req))
            {
                // Framing (or a host) two parsers could read differently: nothing of the
                // body is read.
                trace.body_left_unread = h1_body;
                return Err(rej);
            }
            // The routes that read a body take the request whole and drop what they refuse
            // before reading it themselves (`drop_unneeded_body`).
            let (parts, body) = match route {
                Route::Rpc => {
                    return Box::pin(self.rpc(agent, &conn, client, req, h1_body, &mut trace)).await
                }
                Route::AgentPath => {
                    return Box::pin(
                        self.agent_path(agent, &conn, client, req, h1_body, &mut trace),
                    )
                    .await
                }
                _ => req.into_parts(),
            };
            let headers = &parts.headers;
            let outcome = match route {
                Route::Catalog => {
                    Box::pin(self.catalog(&conn, client, headers, head, &mut trace)).await
                }
                // A wrong route spends the client address's rate too, as every routed request
                // does.
                Route::NotFound => Err(self.client_rate(client).unwrap_or(Rejection::Http {
                    status: StatusCode::NOT_FOUND,
                    message: "Not found",
                    reason: reason::ROUTE_NOT_FOUND,
                    allow: None,
                })),
                Route::MethodNotAllowed(allow) => {
                    Err(self.client_rate(client).unwrap_or(Rejection::Http {
                        status: StatusCode::METHOD_NOT_ALLOWED,
                        message: "Method not allowed",
                        reason: reason::ROUTE_METHOD_NOT_ALLOWED,
                        allow: Some(allow),
                    }))
                }
                _ => Box::pin(self.public_route(route, agent, headers, head, client)).await,
            };
            // These routes take no body: what a request declared anyway is read and dropped
            // (within bounds) so that its HTTP/1.1 connection can carry the next request.
            drop_unneeded_body(body, headers, h1_body, &mut trace).await;
            outcome
        }
        .instrument(span.clone())
        .await;
        let (mut resp, reason) = match outcome {
            Ok(r) => (r, None),
            Err(rej) => {
                let reason = rej.reason();
                (rej.render(), Some(reason))
            }
        };
        // Refused while its body was still coming (too large, too slow, unreadable): hyper
        // will not read the rest, so the connection cannot carry another request. Say so
        // (RFC 9112 §9.6) rather than close under a client that would send its next request
        // on it. A JSON-RPC request refused before its body was needed (401, 403, 429, a
        // content type) keeps its connection when the rest of its body could be read and
        // dropped within bounds (`discard_body`); otherwise the same applies.
        if h1_body && (reason.is_some_and(leaves_body_unread) || trace.body_left_unread) {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        span.record("a2a.method", trace.method);
        span.record("http.response.status_code", resp.status().as_u16());
        self.metrics.request(
            label,
            route_name(route),
            trace.method,
            resp.status().as_u16(),
            reason,
            started.elapsed(),
        );
        // The log line of the request (field order as written). Without a credential (refused
        // before or by authentication, a public route, or `anonymous` where it is allowed) it
        // is one anyone can make the edge write: within the budget of such lines.
        let proven = trace.principal.is_some()
            && trace.scheme != Some(crate::auth::Scheme::Anonymous.as_str());
        let written = if proven {
            Some(0)
        } else {
            crate::telemetry::sampled::unproven_requests().admit()
        };
        let Some(suppressed) = written else {
            return resp;
        };
        tracing::info!(
            event = "request",
            request_id = trace.request_id.as_str(),
            trace_id = trace.trace_id.as_deref(),
            client = %client,
            peer = %conn.peer.ip(),
            route = route_name(route),
            agent = trace.agent.as_deref(),
            method = trace.method,
            principal = trace.principal.as_deref(),
            tenant = trace.tenant.as_deref(),
            scheme = trace.scheme,
            reason = reason.map(Reason::as_str),
            status = resp.status().as_u16(),
            ms = started.elapsed().as_millis() as u64,
            suppressed = (suppressed > 0).then_some(suppressed),
        );
        resp
    }

    /// The client address's rate refusal, when it is past it (a request spent from it).
    fn client_rate(&self, client: IpAddr) -> Option<Rejection> {
        self.budgets
            .rates
            .check_client_ip(client)
            .err()
            .map(too_many)
    }

    /// The unauthenticated routes: they spend the client address's rate like every other.
    async fn public_route(
        &self,
        route: Route,
        agent: &AgentGate,
        headers: &HeaderMap,
        head: bool,
        client: IpAddr,
    ) -> Result<Response<BoxBody>, Rejection> {
        self.budgets
            .rates
            .check_client_ip(client)
            .map_err(too_many)?;
        match route {
            Route::Card => self.card(agent, headers, head).await,
            Route::Jwks => self.jwks(head),
            _ => Ok(health()),
        }
    }

    /// The admission stages every authenticated route shares, in order: the client address's
    /// rate, authentication (with the failure throttle), the principal's rate.
    async fn admit(
        &self,
        conn: &ConnInfo,
        client: IpAddr,
        headers: &HeaderMap,
        trace: &mut Trace,
    ) -> Result<Principal, Rejection> {
        self.budgets
            .rates
            .check_client_ip(client)
            .map_err(too_many)?;
        let principal = self
            .authenticate(conn, client, headers)
            .instrument(telemetry::traces::stage_span!("authenticate"))
            .await?;
        trace.principal = Some(principal.name.clone());
        trace.tenant = principal.tenant.clone();
        trace.scheme = Some(principal.scheme.as_str());
        self.budgets
            .check_principal(&principal.owner_key(), None)
            .await
            .map_err(refused)?;
        Ok(principal)
    }

    /// The JSON-RPC route: the stages in order. Cheap checks come first; the body is read
    /// only for an authenticated caller with an acceptable content type.
    async fn rpc(
        &self,
        agent: &AgentGate,
        conn: &ConnInfo,
        client: IpAddr,
        req: Request<impl RequestBody>,
        h1_body: bool,
        trace: &mut Trace,
    ) -> Result<Response<BoxBody>, Rejection> {
        let (parts, body) = req.into_parts();
        // Refused before the body is needed: what is left of it is read and dropped (within
        // bounds) so that the connection can carry the next request.
        let before_body = async {
            let principal = self.admit(conn, client, &parts.headers, trace).await?;
            let grant = self.grant(agent, &principal, trace)?;
            service::check_content_type(&parts.headers)
                .map_err(|e| Rejection::rpc(Value::Null, e))?;
            let held = self.reserve_body(&principal, &parts.headers, agent.body_limits)?;
            Ok((principal, grant, held))
        };
        let (principal, grant, mut held) = match before_body.await {
            Ok(ok) => ok,
            Err(rej) => {
                drop_unneeded_body(body, &parts.headers, h1_body, trace).await;
                return Err(rej);
            }
        };
        let bytes = read_body(body, &parts.headers, agent.body_limits, &mut held)
            .instrument(telemetry::traces::stage_span!("read"))
            .await?;
        // The tree owns what it needs of the body: the body's buffer goes once it is parsed, and
        // its share of the caller's budget stands for the copy sent to the agent (`forward`).
        let body_len = bytes.len();
        let max_values = agent.requests.max_json_values;
        let span = telemetry::traces::stage_span!("parse");
        let parsed = if body_len > INLINE_CHECK_BYTES {
            // A large body's parse would hold this connection's worker thread, and every
            // connection it serves, for as long as it takes: it runs on the blocking pool,
            // as many at once as there are workers (as many trees being built as when they
            // ran on the workers). The body goes with its share of the budgets: if the caller
            // leaves, the parse still runs to its end on the pool, holding both until then.
            let mut share = held.take();
            let parse = move || {
                let parsed = span.in_scope(|| parse_request(&bytes, max_values, &mut share));
                // (a tree refused for the budget is dropped here too, off the worker)
                drop(bytes);
                (parsed, share)
            };
            match on_large_pool(parse).await {
                Some((parsed, share)) => {
                    held.absorb(share);
                    parsed
                }
                // (the parse panicked: fail closed)
                None => Err(Rejection::rpc(
                    Value::Null,
                    RpcError::internal(reason::VALIDATE_PANICKED),
                )),
            }
        } else {
            let parsed = span.in_scope(|| parse_request(&bytes, max_values, &mut held));
            drop(bytes);
            parsed
        };
        let rpc = parsed?;
        trace.method = Some(rpc.method.as_str());
        telemetry::traces::stage_span!("authorize")
            .in_scope(|| self.authorize(&grant, &principal, &rpc, trace))?;
        // The caller as one caller (a JWT subject within its tenant): its budgets, its
        // slots, its tasks.
        let key = principal.owner_key();
        self.budgets
            .check_principal(&key, Some(&agent.method_key(rpc.method)))
            .await
            .map_err(|r| match refused(r) {
                Rejection::Rpc { error, .. } => Rejection::rpc(rpc.id.clone(), error),
                other => other,
            })?;
        let guard = self.slot(&key, rpc.method.is_streaming())?;
        let refuse = |e: RpcError| Rejection::rpc(rpc.id.clone(), e);
        let version = service::check_version(&parts.headers).map_err(refuse)?;
        let extensions =
            service::check_extensions(&parts.headers, &agent.requests.required_extensions)
                .map_err(refuse)?;
        if rpc.method == Method::GetExtendedAgentCard && !principal.is_authenticated() {
            // The extended card is for authenticated callers only (A2A spec §13.3).
            return Err(self.unauthorized(reason::AUTH_EXTENDED_CARD_ANONYMOUS));
        }
        // The registry knows the caller by its name at this agent.
        let name = agent.owner(&key);
        let principal_value = principal_header_value(&principal.name);
        // A turn of a caller with its own roots runs in one of them (`require_workspace`): one
        // that names no workspace gets the first (a follow-up then names the same one, as the
        // registry's workspace binding wants).
        let default_cwd = grant.require_workspace
            && matches!(grant.roots, Roots::Only(_))
            && matches!(
                rpc.method,
                Method::SendMessage | Method::SendStreamingMessage
            )
            && !names_cwd(&rpc.params);
        let heavy = default_cwd || body_len > INLINE_CHECK_BYTES || touches_filesystem(&rpc.params);
        let (mut rpc, checked) = self
            .check_params(
                agent,
                rpc,
                &principal,
                grant,
                (heavy, default_cwd),
                &mut held,
                trace,
            )
            .instrument(telemetry::traces::stage_span!("validate"))
            .await?;
        // What the shared store knows of the ids the request names (one round trip, only
        // for ids this replica has not seen), then the context ids the caller names become
        // the ids the agent knows them by.
        if self.owners.is_shared() {
            let (tasks, contexts) = named_ids(&rpc);
            self.owners
                .prefetch(&name, &tasks, &contexts)
                .await
                .map_err(|r| refusal(&rpc.id, r))?;
        }
        let alias = alias_contexts(self.owners.registry(), &name, &mut rpc);
        let (mut headers, trace_id) =
            upstream::forwarded_headers(&parts.headers, version, extensions);
        trace.trace_id = trace_id;
        headers.insert(self.principal_header.clone(), principal_value);
        forwarding_headers(&mut headers, client, &trace.request_id);
        // Whose task is it? Decided here, before any agent sees the request.
        let deny = |d: Denial| Rejection::rpc(rpc.id.clone(), d.rpc_error());
        let owners = self.owners.clone();
        let registry = owners.registry().clone();
        // A push callback's host name is looked up (`resolve_names`) only once the tasks the
        // request names are known to be the caller's: no lookup, nor its verdict (an oracle
        // of the edge's DNS), for a request naming another caller's task or none that exists.
        // (A new turn's callback is looked up before the turn is begun: a caller granted push
        // callbacks may have a name looked up that way.)
        if let Some(url) = &checked.push_url {
            for t in push_tasks(&rpc) {
                registry.authorize_task(&name, t).map_err(deny)?;
            }
            check_resolved(url, &agent.requests.push, &principal.owner_key())
                .await
                .map_err(|e| Rejection::rpc(rpc.id.clone(), e))?;
        }
        // A stream ends when a reload no longer admits it (`auth.revoked`).
        let revoked = rpc
            .method
            .is_streaming()
            .then(|| {
                let workspace = checked.workspace.clone();
                let (headers, method) = (&parts.headers, rpc.method);
                self.revocation(conn, headers, &principal, agent, method, workspace, trace)
            })
            .flatten();
        match rpc.method {
            Method::SendMessage | Method::SendStreamingMessage => {
                let message = rpc.params.get("message");
                // A task the message refers to must be the caller's own, like any task it names
                // (an agent that reads referred tasks would hand another caller's over).
                for r in referenced_tasks(message) {
                    registry
                        .authorize_task(&name, r.as_str().unwrap_or(""))
                        .map_err(deny)?;
                }
                // So must the task a push config sent with the message names (an agent that
                // honours it would send that task's updates to this caller's URL).
                if let Some(t) = inline_push_task(&rpc) {
                    registry.authorize_task(&name, t).map_err(deny)?;
                }
                let field = |k: &str| message.and_then(|m| m.get(k)).and_then(Value::as_str);
                let workspace = checked.workspace.as_ref().map(|w| w.forward_cwd());
                // The least busy healthy agent, for a context no agent serves yet.
                let pick = || agent.fleet.pick();
                let mut turn = owners
                    .begin_turn(
                        &name,
                        field("taskId"),
                        field("contextId"),
                        workspace.as_deref(),
                        alias.as_ref().map(|(_, client)| client.as_str()),
                        rpc.method.is_streaming(),
                        pick,
                    )
                    .await
                    .map_err(|r| refusal(&rpc.id, r))?;
                if let Some((agent_id, client_id)) = &alias {
                    registry.name_context(&name, agent_id, client_id);
                }
                // A context stays with its agent; a new one goes to the one picked.
                let wanted = match turn.upstream() {
                    Some(id) => id,
                    None => pick().ok_or_else(|| unavailable(&rpc.id))?,
                };
                let upstream = turn.bind_upstream(wanted);
                let requests = agent.requests.clone();
                let view = registry.clone();
                let shape = Shape::of(rpc.method).unwrap_or(Shape::Send);
                // A stream whose lease is lost ends at once, not at its agent's next answer
                // (a unary turn ends at its answer).
                let lost = rpc.method.is_streaming().then(|| turn.lease_lost());
                let lost = lost.flatten().map(|lost| -> upstream::Interrupt {
                    Box::pin(async move {
                        lost.await;
                        reason::CONTEXT_LEASE_LOST
                    })
                });
                let interrupt = either_interrupt(lost, revoked);
                // A unary answer is its turn's last, and so is a stream's event that ends the
                // turn, or an error: it leaves once the context is free.
                let unary = !rpc.method.is_streaming();
                let ending = turn.ender();
                let observe = move |v: &mut Value| {
                    one_answer(v, shape, &requests, &view, &name, |r| match r {
                        None => Ok(turn.end()),
                        Some(r) if unary || crate::a2a::ends_turn(r) => {
                            turn.observe_last(upstream, r)
                        }
                        Some(r) => turn.observe(upstream, r),
                    })
                };
                let plan = Plan {
                    agent: upstream,
                    slot: guard,
                    held,
                    observe,
                    interrupt,
                    size_hint: body_len,
                };
                let answer =
                    Box::pin(self.forward(agent, headers, rpc, &principal, trace, plan)).await;
                // The edge's error instead of the agent's answer ends the turn too.
                let end = answer.is_err().then(|| ending.end()).flatten();
                if let Some(end) = end {
                    let _ = end.await;
                }
                answer
            }
            Method::ListTasks => {
                // The slot and the request's budget are held for the whole fan-out, and by
                // the answer until it is sent.
                let held = (guard, held);
                Box::pin(self.list_tasks(agent, headers, &rpc, &principal, &name, trace, held))
                    .await
            }
            Method::GetExtendedAgentCard => {
                // A2A §3.3.4: a card whose `capabilities.extendedAgentCard` is false or absent
                // answers UnsupportedOperationError, no agent asked (an agent that offers one
                // and has none configured answers ExtendedAgentCardNotConfiguredError
                // itself). With no card published, the edge cannot tell.
                let Some(card) = agent.card.current() else {
                    return Err(Rejection::rpc(
                        rpc.id.clone(),
                        RpcError::internal(reason::CARD_UNAVAILABLE),
                    ));
                };
                if !card.extended {
                    return Err(Rejection::rpc(
                        rpc.id.clone(),
                        RpcError::unsupported_operation("This agent offers no extended agent card"),
                    ));
                }
                let requests = agent.requests.clone();
                let upstream = agent.card_agent(self.owners.registry());
                let plan = Plan {
                    agent: upstream.ok_or_else(|| unavailable(&rpc.id))?,
                    size_hint: body_len,
                    slot: guard,
                    held,
                    interrupt: None,
                    observe: move |v: &mut Value| -> Result<Option<Pending>, upstream::Refused> {
                        // An error is cleaned here; a card once its signature is verified
                        // (`CardService::prepare`: cleaned before, a signed card with a path
                        // in it would fail the agent's signature under `redact_paths`).
                        if v.get("result").is_none() {
                            clean_response(v, &requests.metadata, requests.redact_paths);
                        }
                        Ok(None)
                    },
                };
                Box::pin(self.forward(agent, headers, rpc, &principal, trace, plan)).await
            }
            _ => {
                let key = match rpc.method {
                    Method::GetTask | Method::CancelTask | Method::SubscribeToTask => "id",
                    _ => "taskId",
                };
                let task = rpc.params.get(key).and_then(Value::as_str).unwrap_or("");
                let upstream = registry.authorize_task(&name, task).map_err(deny)?;
                let requests = agent.requests.clone();
                let task = task.to_string();
                // (every method here has one; the strictest shape otherwise)
                let shape = Shape::of(rpc.method).unwrap_or(Shape::Empty);
                let observe = move |v: &mut Value| {
                    one_answer(v, shape, &requests, &registry, &name, |r| {
                        let Some(r) = r else { return Ok(None) };
                        // An answer about another task is not the answer to this request.
                        if !TaskRegistry::names_only_task(r, &task) {
                            return Err(crate::state::registry::Unrelayable::Malformed);
                        }
                        owners.observe(&name, upstream, r)
                    })
                };
                let plan = Plan {
                    agent: upstream,
                    slot: guard,
                    held,
                    observe,
                    interrupt: revoked,
                    size_hint: body_len,
                };
                Box::pin(self.forward(agent, headers, rpc, &principal, trace, plan)).await
            }
        }
    }

    /// For a stream: what ends it (`auth.revoked`) when a reload leaves its caller without
    /// the access it was admitted with. At every reload the gate then in force checks the
    /// connection's network and proves the caller again from what the stream kept
    /// ([`crate::auth::Proof`]: the credential headers, or a Basic user's secret digest):
    /// the same caller (owner and tenant), whose grants at this agent still give it the
    /// method and, for a turn that runs in a workspace (`workspace`, its real path), still
    /// hold that workspace within the caller's roots and the agent's allowed roots. The
    /// request's other checks (its `tenant` parameter, which the same tenant passes alike, a
    /// push callback, its file parts) are not run again. `None` without reloads to watch.
    #[allow(clippy::too_many_arguments)]
    fn revocation(
        &self,
        conn: &ConnInfo,
        headers: &HeaderMap,
        principal: &Principal,
        agent: &AgentGate,
        method: Method,
        workspace: Option<crate::validate::workspace::Workspace>,
        trace: &Trace,
    ) -> Option<upstream::Interrupt> {
        let gates = conn.gates.clone()?;
        let request_id = trace.request_id.clone();
        let mut reloads = gates.reloads();
        // A reload since this request began (it keeps the gate it started with) is checked
        // at once.
        if !std::ptr::eq(Arc::as_ptr(&gates.load()), self) {
            reloads.mark_changed();
        }
        let conn = ConnInfo {
            gates: None,
            ..conn.clone()
        };
        let proof = self.auth.proof(principal, headers);
        let admitted = principal.clone();
        let owner = principal.owner_key().into_owned();
        let agent_name = agent.name.clone();
        Some(Box::pin(async move {
            loop {
                if reloads.changed().await.is_err() {
                    // The gates are gone, and the server with them.
                    return std::future::pending().await;
                }
                let gate = gates.load();
                // (boxed: an idle stream's future holds this check's state only while it runs)
                let still = Box::pin(gate.readmits(
                    &conn,
                    &proof,
                    &admitted,
                    agent_name.as_deref(),
                    method,
                    workspace.as_ref(),
                ))
                .await;
                if !still {
                    tracing::warn!(
                        event = "stream_revoked",
                        request_id = request_id.as_str(),
                        principal = owner.as_str(),
                        method = method.as_str()
                    );
                    return reason::AUTH_REVOKED;
                }
            }
        }))
    }

    /// Whether this gate admits a stream's caller as it was admitted: see
    /// [`Gate::revocation`]. Nothing is logged or counted as a refusal, and nothing spends
    /// the client's failure budget (the stream's credential was proven once).
    #[allow(clippy::too_many_arguments)]
    async fn readmits(
        &self,
        conn: &ConnInfo,
        proof: &crate::auth::Proof,
        admitted: &Principal,
        agent_name: Option<&str>,
        method: Method,
        workspace: Option<&crate::validate::workspace::Workspace>,
    ) -> bool {
        // (the connection's own check closes it too: `connection.outlived`)
        if !self.permits(conn.peer.ip()) {
            return false;
        }
        let creds = ConnCredentials {
            client_cert: conn.client_cert,
            identity: conn.client_identity.as_deref(),
            admitted: None,
        };
        let p = match self.auth.proves_again(proof, &admitted.name, creds).await {
            crate::auth::ProvesAgain::Yes(p) => p,
            crate::auth::ProvesAgain::No => return false,
            // A check that cannot run now: the caller as admitted, held to the new grants
            // and roots all the same.
            crate::auth::ProvesAgain::Unsure => admitted.clone(),
        };
        if p.owner_key() != admitted.owner_key() || p.tenant != admitted.tenant {
            return false;
        }
        let Some(at) = self.agents.iter().find(|a| a.name.as_deref() == agent_name) else {
            return false;
        };
        let grant = match &self.authz {
            None => None,
            Some(authz) => match authz.grant_at(&p, at.name.as_deref()) {
                Ok(g) if g.methods.contains(method) => Some(g),
                _ => return false,
            },
        };
        let Some(workspace) = workspace else {
            return true;
        };
        // The caller's roots now, and where the workspace is now (off the reactor: it may
        // touch the filesystem), as a request's would be resolved (nothing outside the roots
        // looked up, within the walk's budget).
        let allowed = at.requests.workspace.clone();
        let workspace = workspace.clone();
        tokio::task::spawn_blocking(move || {
            let roots = match &grant {
                Some(g) => g.workspace(&allowed),
                None => allowed,
            };
            workspace.still_within(&roots)
        })
        .await
        // (the check panicked: fail closed)
        .unwrap_or(false)
    }

    /// Checks the params of the request for its method and replaces them with the sanitized
    /// params. File and workspace checks touch the filesystem, so they run off the reactor.
    #[allow(clippy::too_many_arguments)]
    async fn check_params(
        &self,
        agent: &AgentGate,
        rpc: RpcRequest,
        principal: &Principal,
        grant: Arc<Grant>,
        (heavy, default_cwd): (bool, bool),
        held: &mut RequestBytes,
        trace: &Trace,
    ) -> Result<(RpcRequest, Checked), Rejection> {
        let RpcRequest { id, method, params } = rpc;
        let policy = agent.requests.clone();
        // (`allowed_for` names the caller as one caller: a JWT subject within its tenant)
        let name = principal.owner_key().into_owned();
        let restricted = matches!(grant.roots, Roots::Only(_));
        let rules_grant = grant.clone();
        let check = move |mut params: serde_json::Map<String, Value>| {
            // The caller's own roots, resolved now; a request that names no workspace and no
            // file (not `heavy`) is checked against no root at all.
            let own = match &rules_grant.roots {
                Roots::All => None,
                Roots::Only(_) if heavy => Some(rules_grant.workspace(&policy.workspace)),
                Roots::Only(_) => Some(WorkspacePolicy {
                    roots: Vec::new(),
                    check_filesystem: policy.workspace.check_filesystem,
                }),
            };
            let workspace = own.as_ref().unwrap_or(&policy.workspace);
            if default_cwd {
                let required = || {
                    RpcError::invalid_params(
                        "This caller must work in a workspace of its own, and has none",
                        reason::WORKSPACE_REQUIRED,
                    )
                };
                let root = workspace.roots.first().ok_or_else(required)?;
                if !insert_cwd(&mut params, root) {
                    return Err(required());
                }
            }
            check_params(
                method,
                params,
                &policy.rules_for(&name, workspace, &rules_grant.metadata_allowed),
            )
        };
        // Checks that touch the filesystem (workspace, file parts) or decode large parts run
        // on the blocking pool; small, filesystem-free requests are checked in place.
        let checked = if heavy {
            // The tree goes to the blocking thread with its share of the budgets: if this
            // request is dropped (its caller left), the check goes on there and holds both
            // until it ends.
            let share = held.take();
            tokio::task::spawn_blocking(move || (check(params), share))
                .await
                .map(|(checked, share)| {
                    held.absorb(share);
                    checked
                })
        } else {
            Ok(check(params))
        };
        let (params, checked) = match checked {
            Ok(Ok(ok)) => ok,
            Ok(Err(e)) => {
                // Outside the caller's own roots is an authorization decision too: audited.
                if restricted
                    && matches!(
                        e.reason,
                        reason::WORKSPACE_OUTSIDE_ROOTS | reason::PART_OUTSIDE_WORKSPACE
                    )
                {
                    let r = crate::authz::Refusal {
                        reason: e.reason,
                        missing: None,
                    };
                    self.audit(&r, principal, Some(method), &grant.rules, trace);
                }
                return Err(Rejection::rpc(id, e));
            }
            Err(_) => {
                return Err(Rejection::rpc(
                    id,
                    RpcError::internal(reason::VALIDATE_PANICKED),
                ))
            }
        };
        Ok((RpcRequest { id, method, params }, checked))
    }

    /// Who the caller is. An address that failed too often is refused with 429 before its
    /// credentials are even looked at, and also when it was blocked while they were (a
    /// wave of guesses sent at once: the one that guessed right is refused like the
    /// others); each failure spends from its budget.
    async fn authenticate(
        &self,
        conn: &ConnInfo,
        ip: IpAddr,
        headers: &HeaderMap,
    ) -> Result<Principal, Rejection> {
        let throttled = |wait: std::time::Duration| Rejection::TooManyRequests {
            reason: reason::AUTH_THROTTLED,
            retry_after_secs: wait.as_secs().max(1),
        };
        let blocks = self.budgets.blocks();
        if let Some(wait) = self.budgets.retry_after(ip) {
            return Err(throttled(wait));
        }
        // (one atomic load while no address was blocked meanwhile, as nearly always)
        let still_admitted =
            || self.budgets.blocks() == blocks || self.budgets.retry_after(ip).is_none();
        let creds = ConnCredentials {
            client_cert: conn.client_cert,
            identity: conn.client_identity.as_deref(),
            admitted: Some(StillAdmitted(&still_admitted)),
        };
        let (found, failed) = match self.auth.authenticate(headers, creds).await {
            Ok(a) => (Ok(a.principal), a.failed),
            // No check ran: the address was blocked while the request waited for a password
            // check (a burst of guesses: refused as if it came now), or the password checks
            // are all busy (nothing was guessed).
            Err(r) if r.unchecked() => {
                if let Some(wait) = self.budgets.retry_after(ip) {
                    return Err(throttled(wait));
                }
                let busy = Rejection::Overloaded {
                    reason: r.reason,
                    retry_after_secs: 1,
                };
                (Err(busy), None)
            }
            Err(r) => (Err(self.unauthorized(r.reason)), Some(r)),
        };
        // Every failed credential is counted, also one beside a credential that succeeded
        // (else a valid API key would buy unthrottled guesses in `Authorization`).
        if failed.is_some() {
            match self.budgets.record_failure(ip).await {
                Ok(Some(wait)) => return Err(throttled(wait)),
                Ok(None) => {}
                // The failure could not be counted: refuse (fail closed), and say why.
                Err(_) => return Err(refused(crate::state::Refused::Unavailable)),
            }
        } else if self.budgets.blocks() != blocks {
            // (one atomic load when no address was blocked meanwhile, as nearly always)
            if let Some(wait) = self.budgets.retry_after(ip) {
                return Err(throttled(wait));
            }
        }
        found
    }

    /// A concurrency slot of the caller (in flight, or a stream), or 429.
    fn slot(&self, principal: &str, streaming: bool) -> Result<ConcurrencyGuard, Rejection> {
        self.budgets
            .concurrency
            .acquire(principal, streaming)
            .map_err(|reason| Rejection::TooManyRequests {
                reason,
                retry_after_secs: 1,
            })
    }

    /// The request's share of its caller's and everyone's request budgets, empty: its body
    /// is reserved as it arrives ([`read_body`]), its tree once parsed. A body whose declared
    /// length does not fit what is left now is refused before it is read (one past the cap
    /// is left to the read: 413).
    fn reserve_body(
        &self,
        principal: &Principal,
        headers: &HeaderMap,
        limits: BodyLimits,
    ) -> Result<RequestBytes, Rejection> {
        let declared = declared_length(headers)
            .ok()
            .flatten()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= limits.cap);
        let key = principal.owner_key();
        let budgets = &self.budgets.concurrency;
        if let Some(n) = declared {
            budgets.has_room(&key, n).map_err(over_request_budget)?;
        }
        Ok(budgets.reservation(&key))
    }

    fn unauthorized(&self, reason: Reason) -> Rejection {
        Rejection::Unauthorized {
            reason,
            challenges: self.auth.challenges().to_vec(),
        }
    }

    /// Sends the proxy's own serialization of the validated request with sanitized headers
    /// to the plan's agent, and relays the answer through the plan's observer.
    async fn forward<F>(
        &self,
        at: &AgentGate,
        mut headers: HeaderMap,
        mut rpc: RpcRequest,
        who: &Principal,
        trace: &Trace,
        plan: Plan<F>,
    ) -> Result<Response<BoxBody>, Rejection>
    where
        F: FnMut(&mut Value) -> Result<Option<Pending>, upstream::Refused> + Send + 'static,
    {
        let Plan {
            agent,
            slot,
            mut held,
            observe,
            interrupt,
            size_hint,
        } = plan;
        // The agent that owns the context or task; if it is down, say so (never move the
        // request to an agent that does not know it).
        let agent = at
            .fleet
            .get(agent)
            .filter(|a| a.is_healthy())
            .ok_or_else(|| unavailable(&rpc.id))?;
        let request_id = trace.request_id.as_str();
        self.caller_headers(&mut headers, &agent.upstream.name, who, request_id)
            .map_err(|e| Rejection::rpc(rpc.id.clone(), e))?;
        // The agent's parent span is the edge's (with trace export).
        let span = telemetry::traces::stage_span!(
            "forward",
            otel.kind = "client",
            upstream = agent.upstream.name.as_str()
        );
        telemetry::traces::inject(&span, &mut headers);
        // The copy sent is charged as the request's body was (the body itself is gone by now):
        // its share goes with it, and is given back when the connection has taken it, which
        // may be after a stream has started and the rest of the request's share is given back.
        // The request's tree is done with once written: what it held of the caller's budget
        // is given back, not held through a turn that may take minutes.
        let (copy, rpc) = if size_hint > INLINE_CHECK_BYTES {
            // A large request's writing and its tree's drop would hold the worker thread as
            // its parse would have: the blocking pool, as parses do.
            let id = rpc.id.clone();
            let write = move || {
                let copy = rpc.to_bytes_sized(size_hint);
                drop(std::mem::take(&mut rpc.params));
                (copy, rpc)
            };
            on_large_pool(write)
                .await
                .ok_or_else(|| Rejection::rpc(id, RpcError::internal(reason::VALIDATE_PANICKED)))?
        } else {
            let copy = rpc.to_bytes_sized(size_hint);
            drop(std::mem::take(&mut rpc.params));
            (copy, rpc)
        };
        let upstream_error = |e: UpstreamError| Rejection::rpc(rpc.id.clone(), e.rpc_error());
        let share = held.hand_off(copy.len());
        let resp = agent
            .send_rpc(
                headers,
                upstream::charged(copy, share),
                upstream::Answer::to(rpc.method),
            )
            .instrument(span)
            .await
            .map_err(upstream_error)?;
        // The slot lives as long as the answer: for a stream, until the stream ends; for a JSON
        // answer, until its body is sent. `observe` (and the turn it owns) until the stream
        // ends, or the JSON answer is built.
        let log = StreamLog {
            request_id: request_id.to_string(),
            metrics: self.metrics.clone(),
            shared_budget: slot.stream_budget(),
        };
        // Every plan's observer cleans with this agent's request policy (`one_answer`, or for
        // the extended card `clean_response` of an error, its card cleaned by
        // `CardService::prepare` once verified), so the relay may take the fast pass.
        let fast = Some(at.requests.clone());
        let streaming = rpc.method.is_streaming();
        // The extended card is read again from the relayed answer, to be rewritten and
        // signed: the relay reads no more than a card may be, and the card's answer owns the
        // slot and what it holds of the caller's budgets (`extended_card`).
        let card = rpc.method == Method::GetExtendedAgentCard;
        let mut limits = self.relay_limits;
        let (slot, card_slot) = match card {
            true => {
                limits.max_json_bytes = limits.max_json_bytes.min(card_routes::MAX_CARD_BYTES);
                (None, Some((slot, held.sibling())))
            }
            false => (Some(slot), None),
        };
        let relayed = relay_response(
            resp,
            &rpc.id,
            streaming,
            limits,
            log,
            fast,
            interrupt,
            (slot, held),
            observe,
        )
        .instrument(telemetry::traces::stage_span!("relay"))
        .await;
        match card_slot {
            Some(holds) => at.extended_card(relayed, &rpc.id, holds).await,
            None => relayed.map_err(upstream_error),
        }
    }

    /// Every agent's fleet, for the health checker.
    pub fn fleets(&self) -> impl Iterator<Item = &Fleet> {
        self.agents.iter().map(|a| &a.fleet)
    }

    /// How often the health checker runs (the shortest of the fleets' intervals).
    pub fn health_interval(&self) -> Duration {
        self.fleets()
            .map(Fleet::health_interval)
            .min()
            .unwrap_or(Duration::from_secs(5))
    }

    /// Which route a request takes, and for which agent: without `[[agents]]` the one agent
    /// (the host is not looked at, as before); with them, the edge's own paths on any host,
    /// then the agent whose host and prefix the request names (else 404).
    fn route<B>(&self, req: &Request<B>) -> (Route, Option<&AgentGate>) {
        let path = req.uri().path();
        let Some(routes) = &self.routes else {
            let first = self.agents.first();
            let rpc_path = first.map_or("/", |a| a.rpc_path.as_str());
            let route = classify(req.method(), path, rpc_path, &self.agent_paths);
            return (route, first);
        };
        if let Some(r) = route::classify_edge(req.method(), path) {
            return (r, None);
        }
        // HTTP/2 `:authority` (in the URI), else HTTP/1.1 `Host` (exactly one).
        let authority = match req.uri().authority() {
            Some(a) => Some(a.as_str()),
            None => {
                let mut hosts = req.headers().get_all(header::HOST).iter();
                match (hosts.next(), hosts.next()) {
                    (Some(h), None) => h.to_str().ok(),
                    _ => None,
                }
            }
        };
        match authority.and_then(|a| routes.route_index(a, path)) {
            Some((i, kind)) => match self.agents.get(i) {
                Some(a) => (route::classify_agent(req.method(), kind), Some(a)),
                None => (Route::NotFound, None),
            },
            None => (Route::NotFound, None),
        }
    }

    /// The health checker's probe of the shared state store (nothing with `memory`): a PING
    /// whose outcome `/ready` reports until the next round trip.
    pub async fn check_state(&self) {
        if let Some(store) = &self.budgets.shared {
            let _ = store.ping().await;
        }
    }

    /// What `/metrics` and `/ready` report about this policy's state now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            upstreams: self
                .fleets()
                .flat_map(|f| f.agents().iter())
                .map(|a| UpstreamGauge {
                    name: a.upstream.name.clone(),
                    healthy: a.is_healthy(),
                    in_flight: a.in_flight(),
                })
                .collect(),
            // With [[agents]], a replica is ready while any agent can be served: one agent
            // whose card is missing must not take every replica (and so every agent) out.
            card_published: self.agents.iter().any(|a| a.card.current().is_some()),
            card_invalid: self
                .agents
                .iter()
                .all(|a| a.card_invalid.load(std::sync::atomic::Ordering::Relaxed)),
            registry: Some(self.owners.registry().stats()),
            state_available: self.budgets.shared.as_ref().map(|s| s.is_available()),
            request_bytes: self.budgets.concurrency.request_bytes_total(),
        }
    }
}

/// Whether a connection from this address may proceed (`[network]` allow and deny lists).
impl Gate {
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.network.permits(ip)
    }

    /// Whether a new connection from this address is within its rate
    /// (`limits.client_ip_connections_per_second`). A trusted proxy is not held to it: it
    /// carries many clients, each held to its own request rate once its address is read
    /// (and a proxy that opens a connection per request would otherwise cap them all).
    pub fn admits_connection(&self, ip: IpAddr) -> bool {
        self.network.is_trusted_proxy(ip) || self.budgets.rates.check_connection(ip).is_ok()
    }
}

/// Replaces the `contextId` of a SendMessage's message, or of a ListTasks filter, with the id
/// the agent knows the caller's context by ([`TaskRegistry::agent_context`]). Returns the
/// agent's id and the caller's, when they differ (a SendMessage then names the context).
fn alias_contexts(
    registry: &TaskRegistry,
    principal: &str,
    rpc: &mut RpcRequest,
) -> Option<(String, String)> {
    // A follow-up naming only its task runs in the task's context: the agent is told which
    // (an agent would otherwise make one up and refuse the task as another context's).
    if let Some(Value::Object(m)) = rpc.params.get_mut("message") {
        if !m.contains_key("contextId") {
            let context = m
                .get("taskId")
                .and_then(Value::as_str)
                .and_then(|t| registry.task_context(principal, t));
            if let Some(c) = context {
                m.insert("contextId".into(), Value::String(c));
            }
            return None;
        }
    }
    let slot = match rpc.method {
        Method::SendMessage | Method::SendStreamingMessage => rpc
            .params
            .get_mut("message")
            .and_then(Value::as_object_mut)
            .and_then(|m| m.get_mut("contextId")),
        Method::ListTasks => rpc.params.get_mut("contextId"),
        _ => None,
    };
    let Some(Value::String(id)) = slot else {
        return None;
    };
    let agent_id = registry.agent_context(principal, id);
    if agent_id == *id {
        return None;
    }
    let client_id = std::mem::replace(id, agent_id.clone());
    Some((agent_id, client_id))
}

/// Where a request goes and how its answer is relayed: the agent, the caller's concurrency
/// slot (with the byte budget its principal's streams share), and the observer that cleans
/// and learns from each response (it owns the running turn).
struct Plan<F> {
    agent: UpstreamId,
    /// The caller's concurrency slot: the answer's until it is sent (a stream: until it ends).
    slot: ConcurrencyGuard,
    /// The request's share of the caller's request budgets, which a JSON answer grows as it
    /// is read and built, and then holds until it is sent (`relay_response`).
    held: RequestBytes,
    /// Cleans and learns from each JSON-RPC response of the answer; owns the turn, which
    /// ends with the answer (a stream: when it ends).
    observe: F,
    /// Ends the answer's stream early (a turn that lost its busy lease).
    interrupt: Option<upstream::Interrupt>,
    /// The caller's body's size: the forwarded request is written into a buffer of that
    /// size (no regrowing and copying a large body on the way).
    size_hint: usize,
}

/// The single pass over one JSON-RPC response of an agent's answer to `name`: cleaned,
/// learned from (`learn`: who owns what, given the `result`, `None` for an error; refused
/// when it names another caller's task), then put in the caller's view (its own context
/// ids).
fn one_answer(
    v: &mut Value,
    shape: Shape,
    requests: &RequestPolicy,
    view: &TaskRegistry,
    name: &str,
    learn: impl FnOnce(Option<&Value>) -> Result<Option<Pending>, crate::state::registry::Unrelayable>,
) -> Result<Option<Pending>, upstream::Refused> {
    clean_response(v, &requests.metadata, requests.redact_paths);
    let pending = match v.get("result") {
        // Held to its method's shape first: a result that reads as another shape (a task
        // list, a Task beside a `taskId`) would be judged, or not at all, as that one.
        Some(result) if !shape.holds(result) => return Err(reason::UPSTREAM_BAD_RESPONSE),
        Some(result) => learn(Some(result)).map_err(|u| u.reason())?,
        // An error.
        None => learn(None).map_err(|u| u.reason())?,
    };
    view.client_view(name, v);
    Ok(pending)
}

/// The task a push config sent with a message names (`configuration.
/// taskPushNotificationConfig.taskId`), when it names one.
fn inline_push_task(rpc: &RpcRequest) -> Option<&str> {
    rpc.params
        .get("configuration")?
        .get("taskPushNotificationConfig")?
        .get("taskId")?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The ids a message refers to (`referenceTaskIds`).
fn referenced_tasks(message: Option<&Value>) -> impl Iterator<Item = &Value> {
    message
        .and_then(|m| m.get("referenceTaskIds"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The tasks a request with a push callback names, each the caller's to be before the
/// callback's name is looked up: a config's `taskId`; a message's inline config's, the
/// message's own and those it refers to.
fn push_tasks(rpc: &RpcRequest) -> Vec<&str> {
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    match rpc.method {
        Method::SendMessage | Method::SendStreamingMessage => {
            let message = rpc.params.get("message");
            [
                inline_push_task(rpc),
                text(message.and_then(|m| m.get("taskId"))),
            ]
            .into_iter()
            .flatten()
            .chain(referenced_tasks(message).filter_map(Value::as_str))
            .collect()
        }
        _ => text(rpc.params.get("taskId")).into_iter().collect(),
    }
}

/// The task ids and the context ids a request names (the ownership stage's to check).
fn named_ids(rpc: &RpcRequest) -> (Vec<&str>, Vec<&str>) {
    let p = &rpc.params;
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    let mut tasks = Vec::new();
    let mut contexts = Vec::new();
    match rpc.method {
        Method::SendMessage | Method::SendStreamingMessage => {
            let m = p.get("message");
            tasks.extend(text(m.and_then(|m| m.get("taskId"))));
            contexts.extend(text(m.and_then(|m| m.get("contextId"))));
            let refs = m
                .and_then(|m| m.get("referenceTaskIds"))
                .and_then(Value::as_array);
            tasks.extend(refs.into_iter().flatten().filter_map(|r| text(Some(r))));
            tasks.extend(inline_push_task(rpc));
        }
        Method::ListTasks => contexts.extend(text(p.get("contextId"))),
        Method::GetTask | Method::CancelTask | Method::SubscribeToTask => {
            tasks.extend(text(p.get("id")))
        }
        Method::GetExtendedAgentCard => {}
        _ => tasks.extend(text(p.get("taskId"))),
    }
    (tasks, contexts)
}

/// An ownership refusal as the caller's error.
fn refusal(id: &Value, r: Refusal) -> Rejection {
    match r {
        Refusal::Denied(d) => Rejection::rpc(id.clone(), d.rpc_error()),
        Refusal::Unavailable => {
            Rejection::rpc(id.clone(), crate::state::ownership::state_unavailable())
        }
    }
}

/// Bodies above this size are parsed, checked (base64 decoding of large parts) and written for
/// the agent on the blocking pool.
const INLINE_CHECK_BYTES: usize = 64 * 1024;

/// The large requests being parsed, or written for the agent, at once on the blocking pool:
/// as many as there are worker threads.
fn large_parses() -> &'static Arc<tokio::sync::Semaphore> {
    static SLOTS: std::sync::OnceLock<Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(crate::runtime::workers())))
}

/// Runs `f` on the blocking pool once one of [`large_parses`]' places is free, the place
/// held until `f` returns; None when `f` panicked.
async fn on_large_pool<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let permit = large_parses().clone().acquire_owned().await.ok()?;
    tokio::task::spawn_blocking(move || {
        let out = f();
        drop(permit);
        out
    })
    .await
    .ok()
}

/// A request body parsed (within `max_values` values), its tree charged to `held` (it is
/// the request's too, and may hold far more than its body) and its params' ProtoJSON names
/// normalized: every later stage reads one spelling (authorization looks for inline push
/// configs and tenants).
fn parse_request(
    body: &[u8],
    max_values: usize,
    held: &mut RequestBytes,
) -> Result<RpcRequest, Rejection> {
    let (mut rpc, values) =
        RpcRequest::parse_counted(body, max_values).map_err(|e| Rejection::rpc(e.id, e.error))?;
    held.grow(reckoned_tree(body.len(), values))
        .map_err(over_request_budget)?;
    crate::validate::names::normalize_params(&mut rpc.params)
        .map_err(|e| Rejection::rpc(rpc.id.clone(), e))?;
    Ok(rpc)
}

/// Whether checking these params reads the filesystem: a workspace (`iac_code.cwd` in the
/// request's or the message's metadata) or a file part.
fn touches_filesystem(params: &serde_json::Map<String, Value>) -> bool {
    let file_part = params
        .get("message")
        .and_then(|m| m.get("parts"))
        .and_then(Value::as_array)
        .is_some_and(|parts| parts.iter().any(|p| p.get("url").is_some()));
    file_part || names_cwd(params)
}

/// Whether the request or its message names a workspace (`metadata.iac_code.cwd`).
fn names_cwd(params: &serde_json::Map<String, Value>) -> bool {
    let cwd = |owner: Option<&Value>| {
        owner
            .and_then(|o| o.get("metadata"))
            .and_then(|m| m.get("iac_code"))
            .is_some_and(|i| i.get("cwd").is_some())
    };
    cwd(params.get("message"))
        || params
            .get("metadata")
            .and_then(|m| m.get("iac_code"))
            .is_some_and(|i| i.get("cwd").is_some())
}

/// Sets the message's `metadata.iac_code.cwd` to `root` (a request that named none); false
/// when the message, its metadata or `iac_code` is not an object (then the agent could not
/// be told where to work: the request is refused).
fn insert_cwd(params: &mut serde_json::Map<String, Value>, root: &std::path::Path) -> bool {
    let Some(Value::Object(message)) = params.get_mut("message") else {
        return false;
    };
    let meta = message
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if meta.is_null() {
        *meta = Value::Object(Default::default());
    }
    let Value::Object(meta) = meta else {
        return false;
    };
    let iac = meta
        .entry("iac_code")
        .or_insert_with(|| Value::Object(Default::default()));
    if iac.is_null() {
        *iac = Value::Object(Default::default());
    }
    match iac {
        Value::Object(iac) => {
            iac.insert(
                "cwd".into(),
                Value::String(root.to_string_lossy().into_owned()),
            );
            true
        }
        _ => false,
    }
}

fn unavailable(id: &Value) -> Rejection {
    let e = UpstreamError::Unavailable;
    Rejection::rpc(id.clone(), e.rpc_error())
}

/// A refused budget: 429, or, when the shared state did not answer, JSON-RPC -32603
/// `state.unavailable` (never a decision taken without it).
fn refused(r: crate::state::Refused) -> Rejection {
    match r {
        crate::state::Refused::Limited(l) => too_many(l),
        crate::state::Refused::Unavailable => {
            Rejection::rpc(Value::Null, crate::state::ownership::state_unavailable())
        }
    }
}

fn too_many(l: Limited) -> Rejection {
    Rejection::TooManyRequests {
        reason: l.reason,
        retry_after_secs: l.retry_after_secs(),
    }
}

fn health() -> Response<BoxBody> {
    json_response(StatusCode::OK, r#"{"status":"healthy"}"#)
}

fn route_name(route: Route) -> &'static str {
    match route {
        Route::Health => "health",
        Route::Card => "card",
        Route::Jwks => "jwks",
        Route::Catalog => "catalog",
        Route::Rpc => "rpc",
        Route::AgentPath => "agent_path",
        Route::NotFound => "not_found",
        Route::MethodNotAllowed(_) => "method_not_allowed",
    }
}

/// One interrupt out of two that may each be there: the first of them to end.
fn either_interrupt(
    a: Option<upstream::Interrupt>,
    b: Option<upstream::Interrupt>,
) -> Option<upstream::Interrupt> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Box::pin(async move {
            tokio::select! {
                r = a => r,
                r = b => r,
            }
        })),
        (a, b) => a.or(b),
    }
}
