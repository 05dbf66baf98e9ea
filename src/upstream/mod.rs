//! The agents behind the proxy: a pooled HTTP client (or the embedded engine), the headers
//! an agent may see, and the relay of its responses (SSE event by event).

pub mod answer;
pub mod clean;
pub mod fleet;
pub mod h2;
pub mod headers;
mod peer_settings;
mod relay;
pub mod settings;
mod stall;
pub mod trace_context;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub use headers::{forwarded_headers, strip_hop_by_hop};
pub use relay::{
    is_json, is_json_ok, parse_charged, read_answer, relay_response, Interrupt, Refused,
    RelayLimits, StreamLog,
};

use crate::a2a::code::{INTERNAL_ERROR, INVALID_AGENT_RESPONSE};
use crate::body::BoxBody;
use crate::limits::concurrency::RequestBytes;
use crate::reason::{self, Reason};
use settings::{UpstreamPolicy, UpstreamTarget};

/// Why an agent could not answer. Rendered to callers without addresses or internals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// Connection refused, reset, or DNS failure.
    Unavailable,
    /// No whole answer within the configured time (for a stream: no response head).
    Timeout,
    /// The agent answered with something the proxy will not relay.
    BadResponse,
    /// The observer refused the answer (its reason: `upstream.foreign_task`, ...).
    Refused(Reason),
}

impl UpstreamError {
    /// The JSON-RPC code: -32006 (InvalidAgentResponseError, A2A §5.4) when the agent's
    /// answer does not conform, -32603 otherwise.
    pub fn code(self) -> i64 {
        match self {
            UpstreamError::BadResponse => INVALID_AGENT_RESPONSE,
            UpstreamError::Refused(reason) => answer_code(reason),
            _ => INTERNAL_ERROR,
        }
    }

    /// The caller's error for it.
    pub fn rpc_error(self) -> crate::a2a::RpcError {
        crate::a2a::RpcError::new(self.code(), self.message(), self.reason())
    }

    /// An answer's body that could not be read: too large or broken is an answer the edge
    /// will not relay; one that did not end in time, a timeout.
    pub fn of_body(e: crate::body::CollectError) -> UpstreamError {
        match e {
            crate::body::CollectError::TimedOut => UpstreamError::Timeout,
            _ => UpstreamError::BadResponse,
        }
    }

    pub fn reason(self) -> Reason {
        match self {
            UpstreamError::Unavailable => reason::UPSTREAM_UNAVAILABLE,
            UpstreamError::Timeout => reason::UPSTREAM_TIMEOUT,
            UpstreamError::BadResponse => reason::UPSTREAM_BAD_RESPONSE,
            UpstreamError::Refused(reason) => reason,
        }
    }
    pub fn message(self) -> &'static str {
        match self {
            UpstreamError::Unavailable => "Upstream agent unavailable",
            UpstreamError::Timeout => "Upstream agent timed out",
            UpstreamError::BadResponse => "Upstream agent sent an invalid response",
            UpstreamError::Refused(reason::STATE_UNAVAILABLE) => {
                crate::state::ownership::STATE_UNAVAILABLE_MESSAGE
            }
            UpstreamError::Refused(reason::CONCURRENCY_REQUEST_BYTES) => {
                "The agent's answer does not fit the caller's request byte budget now (the agent has acted on the request)"
            }
            UpstreamError::Refused(reason::OVERLOAD_REQUEST_BYTES) => {
                "The agent's answer does not fit the edge's request byte budget now (the agent has acted on the request)"
            }
            UpstreamError::Refused(_) => "Upstream agent sent an answer the edge refuses",
        }
    }
}

/// The code of an answer refused or cut short for `reason`: -32006 when the agent's answer did
/// not conform (malformed, truncated, another caller's task), -32603 when the edge could not
/// relay it (shared state, time limits, a broken connection).
pub fn answer_code(reason: Reason) -> i64 {
    match reason {
        reason::UPSTREAM_BAD_RESPONSE
        | reason::UPSTREAM_BAD_STREAM
        | reason::UPSTREAM_STREAM_TRUNCATED
        | reason::UPSTREAM_FOREIGN_TASK => INVALID_AGENT_RESPONSE,
        reason::AUTH_REVOKED => crate::authz::AUTHZ_ERROR_CODE,
        _ => INTERNAL_ERROR,
    }
}

/// The message of the error frame that ends a stream for `reason`.
pub fn stream_end_message(reason: Reason) -> &'static str {
    match reason {
        reason::AUTH_REVOKED => "Access revoked by a policy reload",
        reason::CONTEXT_LEASE_LOST => "The turn lost its lease on the context",
        reason::CONCURRENCY_REQUEST_BYTES => {
            "The agent's event does not fit the caller's request byte budget now"
        }
        reason::OVERLOAD_REQUEST_BYTES => {
            "The agent's event does not fit the edge's request byte budget now"
        }
        _ => "Upstream stream failed",
    }
}

/// HTTP/1.1 request bodies are handed to the connection in pieces ([`crate::body::Holding`]):
/// it takes them as the agent reads, and never copies a whole large body into its buffer.
type HttpClient = Client<
    stall::StallLimit<hyper_rustls::HttpsConnector<HttpConnector>>,
    crate::body::Holding<()>,
>;

/// A copy of a request for an agent whose bytes own what they hold of the caller's request
/// budgets (`share`, [`RequestBytes::hand_off`]): given back when the last of them is gone,
/// written by the connection or dropped unsent, however long after the answer began (an
/// agent may answer, or start a stream, before it has read the request; the embedded engine
/// keeps a request until it answers).
pub fn charged(copy: Vec<u8>, share: RequestBytes) -> Bytes {
    Bytes::from_owner(Charged {
        copy,
        _share: share,
    })
}

struct Charged {
    copy: Vec<u8>,
    _share: RequestBytes,
}

impl AsRef<[u8]> for Charged {
    fn as_ref(&self) -> &[u8] {
        &self.copy
    }
}

enum Target {
    Embedded(Arc<dyn LocalAgent>),
    Http {
        via: Via,
        /// The agent's JSON-RPC endpoint.
        rpc: Uri,
    },
}

/// How requests reach an agent over the network: one pool per worker thread (and one for the
/// others), `crate::runtime::slot`.
enum Via {
    /// HTTP/1.1: a connection per request in flight (kept alive between them).
    Http1(Box<[HttpClient]>),
    /// HTTP/2 (`http2 = true`): requests and streams share connections.
    Http2(Box<[h2::Pool]>),
}

/// One agent.
pub struct Upstream {
    pub name: String,
    target: Target,
    authorization: Option<HeaderValue>,
    response_timeout: Duration,
}

/// An agent that runs in this process (the embedded task engine). The server builds it once
/// and hands it to every policy's fleet, so its tasks outlive reloads; this module knows
/// nothing of what it is.
pub trait LocalAgent: Send + Sync {
    fn handle(
        &self,
        req: Request<Bytes>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<BoxBody>> + Send + '_>>;
}

impl Upstream {
    /// The agent of `p`; an `"embedded"` one is `local`.
    pub fn from_policy(
        p: &UpstreamPolicy,
        local: Option<&Arc<dyn LocalAgent>>,
    ) -> Result<Upstream, String> {
        let target = match &p.target {
            UpstreamTarget::Embedded => match local {
                Some(agent) => Target::Embedded(agent.clone()),
                None => {
                    return Err(format!(
                        "upstreams {:?}: no embedded engine in this process",
                        p.name
                    ))
                }
            },
            UpstreamTarget::Http(uri) => {
                let tls = crate::tls::upstream_client_config(
                    p.ca_file.as_deref(),
                    p.client_cert
                        .as_ref()
                        .map(|(c, k)| (c.as_path(), k.as_path())),
                )
                .map_err(|e| format!("upstreams {:?}: {e}", p.name))?;
                let via = if p.http2 {
                    let tls = (uri.scheme_str() == Some("https")).then_some(tls);
                    let mut dial = h2::Dial::new(uri, tls, p.connect_timeout, p.http2_max_streams)
                        .map_err(|e| format!("upstreams {:?}: {e}", p.name))?;
                    // An agent that stops taking what is written to it (a request it never
                    // reads) loses its connection after the response timeout.
                    dial.write_stall = p.response_timeout;
                    Via::Http2(
                        (0..=crate::runtime::workers())
                            .map(|_| h2::Pool::new(dial.clone()))
                            .collect(),
                    )
                } else {
                    let mut connector = HttpConnector::new();
                    connector.set_connect_timeout(Some(p.connect_timeout));
                    connector.set_nodelay(true);
                    connector.enforce_http(false);
                    // http:// URLs stay plain; https:// ones get the edge's own rustls client.
                    let connector = hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(tls)
                        .https_or_http()
                        .enable_http1()
                        .wrap_connector(connector);
                    // An agent that stops taking what is written to it (a request it never
                    // reads) loses its connection after the response timeout.
                    let connector = stall::StallLimit::new(connector, p.response_timeout);
                    Via::Http1(
                        (0..=crate::runtime::workers())
                            .map(|_| {
                                // The idle timeout needs the timer: without it, idle
                                // connections were only checked when next taken.
                                Client::builder(TokioExecutor::new())
                                    .pool_timer(TokioTimer::new())
                                    .pool_idle_timeout(Duration::from_secs(60))
                                    .pool_max_idle_per_host(1024)
                                    .build(connector.clone())
                            })
                            .collect(),
                    )
                };
                Target::Http {
                    via,
                    rpc: uri.clone(),
                }
            }
        };
        let authorization = match &p.token {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
                    format!(
                        "upstreams {:?}: the token is not a valid header value",
                        p.name
                    )
                })?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        Ok(Upstream {
            name: p.name.clone(),
            target,
            authorization,
            response_timeout: p.response_timeout,
        })
    }

    /// Sends a JSON-RPC body (already the proxy's own serialization) with sanitized headers.
    /// `answer`: whether the request asked for a stream (only then is an event stream's body
    /// left without the response timeout).
    pub async fn send_rpc(
        &self,
        mut headers: HeaderMap,
        body: Bytes,
        answer: Answer,
    ) -> Result<Response<BoxBody>, UpstreamError> {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let uri = match &self.target {
            Target::Embedded(_) => Uri::from_static("/"),
            Target::Http { rpc, .. } => rpc.clone(),
        };
        self.send(
            Method::POST,
            uri,
            headers,
            body,
            self.response_timeout,
            answer,
        )
        .await
    }

    /// GETs a path on the agent (e.g. its card, its health), with the agent's credential;
    /// the answer, head and body, within `within` (and the response timeout).
    pub async fn get(
        &self,
        path: &'static str,
        within: Duration,
    ) -> Result<Response<BoxBody>, UpstreamError> {
        let uri = match &self.target {
            Target::Embedded(_) => Uri::from_static(path),
            Target::Http { rpc, .. } => {
                let mut parts = rpc.clone().into_parts();
                parts.path_and_query = Some(http::uri::PathAndQuery::from_static(path));
                Uri::from_parts(parts).map_err(|_| UpstreamError::Unavailable)?
            }
        };
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let within = within.min(self.response_timeout);
        self.send(
            Method::GET,
            uri,
            headers,
            Bytes::new(),
            within,
            Answer::Whole,
        )
        .await
    }

    /// Sends a request to a path of the agent the policy exposes (`server.agent_paths`),
    /// with the agent's credential. `path_and_query` was checked by the caller.
    pub async fn request_path(
        &self,
        method: Method,
        path_and_query: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<BoxBody>, UpstreamError> {
        let pq = http::uri::PathAndQuery::try_from(path_and_query)
            .map_err(|_| UpstreamError::BadResponse)?;
        let uri = match &self.target {
            Target::Embedded(_) => Uri::from(pq),
            Target::Http { rpc, .. } => {
                let mut parts = rpc.clone().into_parts();
                parts.path_and_query = Some(pq);
                Uri::from_parts(parts).map_err(|_| UpstreamError::Unavailable)?
            }
        };
        self.send(
            method,
            uri,
            headers,
            body,
            self.response_timeout,
            Answer::Whole,
        )
        .await
    }

    /// One exchange with the agent, bounded by `timeout`: the response head, and the whole
    /// body of an answer that is not a stream (it fails with [`crate::body::TimedOut`] past
    /// that; a stream is bounded by the relay's idle timeout and maximum duration instead).
    /// An answer is a stream only if `answer` asked for one: an event stream in answer to a
    /// card fetch or a ListTasks read is bounded like any other body (the agent chose its
    /// `Content-Type`, not the edge).
    async fn send(
        &self,
        method: Method,
        uri: Uri,
        mut headers: HeaderMap,
        body: Bytes,
        timeout: Duration,
        answer: Answer,
    ) -> Result<Response<BoxBody>, UpstreamError> {
        let deadline = tokio::time::Instant::now() + timeout;
        if let Some(auth) = &self.authorization {
            headers.insert(header::AUTHORIZATION, auth.clone());
        }
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        let exchange = async {
            match &self.target {
                Target::Embedded(engine) => Ok(engine.handle(req).await),
                Target::Http { via, .. } => {
                    let sent = match via {
                        Via::Http1(clients) => clients[crate::runtime::slot(clients.len())]
                            .request(req.map(|b| crate::body::Holding::new(b, ())))
                            .await
                            .map(|resp| resp.map(box_body))
                            .map_err(|e| e.to_string()),
                        // Boxed: the h2 pool's request future is 1.3 KiB, and every
                        // future that holds this one (send, send_rpc, forward: each copied
                        // whole where it is made) would carry it for HTTP/1.1 agents too.
                        Via::Http2(pools) => Box::pin(
                            pools[crate::runtime::slot(pools.len())].request(req.map(Full::new)),
                        )
                        .await
                        .map(|resp| resp.map(box_body))
                        .map_err(|e| e.to_string()),
                    };
                    sent.map_err(|e| {
                        tracing::warn!(
                            event = "upstream_error",
                            upstream = self.name.as_str(),
                            error = %e
                        );
                        UpstreamError::Unavailable
                    })
                }
            }
        };
        let resp = tokio::time::timeout_at(deadline, exchange)
            .await
            .unwrap_or(Err(UpstreamError::Timeout))?;
        if answer == Answer::Stream && is_event_stream(resp.headers()) {
            return Ok(resp);
        }
        Ok(resp.map(|body| crate::body::Deadline::new(body, deadline).boxed()))
    }
}

/// What a request to an agent asks for: one whole answer, or a stream of events (the
/// streaming methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Whole,
    Stream,
}

impl Answer {
    pub fn to(method: crate::a2a::method::Method) -> Answer {
        if method.is_streaming() {
            Answer::Stream
        } else {
            Answer::Whole
        }
    }
}

/// Whether an answer is a stream of server-sent events (the relay's test too).
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// An agent's response body as the relay takes it.
fn box_body<B>(b: B) -> BoxBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    b.map_err(|e| -> crate::body::BodyError { Box::new(e) })
        .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(http2: bool) -> UpstreamPolicy {
        UpstreamPolicy {
            name: "a".into(),
            target: UpstreamTarget::Http(Uri::from_static("http://127.0.0.1:9/")),
            token: Some("t".into()),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            ca_file: None,
            client_cert: None,
            health_interval: Duration::from_secs(1),
            unhealthy_threshold: 1,
            healthy_threshold: 1,
            http2,
            http2_max_streams: 4,
        }
    }

    /// A request's future is built, moved and copied on every request (it sits inside the
    /// gate's): a new connection's handshake, rare and several KiB of state (~7.7 KiB over
    /// HTTP/2), is boxed where it is awaited instead of being carried by every request.
    #[test]
    fn a_request_does_not_carry_a_new_connection() {
        for http2 in [false, true] {
            let up = Upstream::from_policy(&agent(http2), None).unwrap();
            let size =
                std::mem::size_of_val(&up.send_rpc(HeaderMap::new(), Bytes::new(), Answer::Whole));
            assert!(size < 4096, "http2 = {http2}: {size} bytes");
        }
    }
}
