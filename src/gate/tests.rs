//! The gate driven without a socket: requests with bodies of any type (`RequestBody`), an
//! agent in the process that records what reaches it (the embedded engine behind it answers).
//! What needs a connection (TLS, HTTP framing, slow clients) is in `tests/`.

use super::Process;
use super::*;
use crate::engine::{Engine, EngineConfig};
use crate::policy::LoadMode;
use crate::reason::{self, Reason};
use crate::upstream::LocalAgent;
use http_body_util::{BodyExt, Full};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

/// The policy tests' good policy, with a body deadline short enough for a test.
fn policy_text() -> String {
    format!(
        "{}\n[limits]\nbody_read_timeout_ms = 300\n",
        crate::policy::tests::GOOD
    )
}
/// The bearer token whose SHA-256 the policy holds.
const TOKEN: &str = "Bearer test";

/// The agent: records every request that reaches it, then lets the embedded engine answer.
struct Recording {
    engine: Arc<Engine>,
    seen: Mutex<Vec<Bytes>>,
}

impl LocalAgent for Recording {
    fn handle(
        &self,
        req: Request<Bytes>,
    ) -> Pin<Box<dyn std::future::Future<Output = Response<BoxBody>> + Send + '_>> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(req.body().clone());
        Box::pin(self.engine.handle(req))
    }
}

async fn gate() -> (Gate, Arc<Recording>) {
    gate_with(&policy_text()).await
}

/// A gate serving the policy `text`, its agent in the process the recording one.
async fn gate_with(text: &str) -> (Gate, Arc<Recording>) {
    let policy = Policy::from_toml(std::path::Path::new("p.toml"), text, LoadMode::Check)
        .expect("the test policy loads");
    let agent = Arc::new(Recording {
        engine: Engine::new(EngineConfig::default()),
        seen: Mutex::new(Vec::new()),
    });
    let process = Process::in_memory(1_000, agent.clone());
    let url = url::Url::parse("https://edge.example/").expect("a URL");
    let gate = Gate::new(&policy, &url, 443, &process, None)
        .await
        .expect("the gate builds");
    (gate, agent)
}

fn conn() -> ConnInfo {
    ConnInfo {
        peer: "192.0.2.7:40000".parse().expect("an address"),
        client_cert: false,
        client_identity: None,
        gates: None,
    }
}

fn send_message(text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": format!("m-{text}"), "role": "ROLE_USER",
                               "parts": [{"text": text}]}}
    }))
    .expect("JSON")
}

fn post<B>(body: B, len: Option<usize>, extra: &[(&str, &str)]) -> Request<B> {
    let mut req = Request::post("/")
        .version(http::Version::HTTP_2)
        .header("authorization", TOKEN)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0");
    if let Some(n) = len {
        req = req.header("content-length", n);
    }
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    req.body(body).expect("a request")
}

async fn answer(resp: Response<BoxBody>) -> (StatusCode, Value) {
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The reason of a JSON-RPC error.
fn rpc_reason(v: &Value) -> Option<&str> {
    v["error"]["data"][0]["reason"].as_str()
}

/// A body that sends some bytes, then fails (a reset stream, a broken chunk).
struct Broken(Option<Bytes>);

impl http_body::Body for Broken {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(Some(match self.0.take() {
            Some(b) => Ok(http_body::Frame::data(b)),
            None => Err(std::io::Error::other("stream reset")),
        }))
    }
}

/// A body that never sends a byte.
struct Silent;

impl http_body::Body for Silent {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Poll::Pending
    }
}

#[tokio::test]
async fn a_checked_request_reaches_the_agent_as_the_edge_wrote_it() {
    let (gate, agent) = gate().await;
    let body = send_message("hello");
    let resp = gate
        .handle(
            conn(),
            post(Full::new(Bytes::from(body.clone())), Some(body.len()), &[]),
        )
        .await;
    let (status, v) = answer(resp).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["id"], 1, "{v}");
    assert!(v["result"]["task"]["id"].is_string(), "{v}");
    let seen = agent.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let forwarded: Value = serde_json::from_slice(&seen[0]).unwrap();
    assert_eq!(forwarded["method"], "SendMessage");
    assert_eq!(
        forwarded["params"]["message"]["parts"][0]["text"], "hello",
        "{forwarded}"
    );
}

#[tokio::test]
async fn refused_requests_never_reach_the_agent_whatever_their_body() {
    let (gate, agent) = gate().await;
    let good = send_message("x");
    let full = |b: &[u8]| Full::new(Bytes::copy_from_slice(b));
    // (what, response status, reason (in the JSON-RPC error; only in the metrics for a plain
    // HTTP refusal), request)
    type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;
    type Row = (&'static str, StatusCode, Reason, Request<Body>);
    let boxed = |r: Request<Full<Bytes>>| r.map(|b| b.map_err(|never| match never {}).boxed());
    // The good request with one header set to another value, or removed.
    let with = |name: &'static str, value: Option<&'static str>| {
        let mut r = post(full(&good), Some(good.len()), &[]);
        match value {
            Some(v) => r.headers_mut().insert(name, HeaderValue::from_static(v)),
            None => r.headers_mut().remove(name),
        };
        boxed(r)
    };
    let rows: Vec<Row> = vec![
        (
            "no credential",
            StatusCode::UNAUTHORIZED,
            reason::AUTH_MISSING,
            with("authorization", None),
        ),
        (
            "another token",
            StatusCode::UNAUTHORIZED,
            reason::AUTH_INVALID,
            with("authorization", Some("Bearer test2")),
        ),
        (
            "text/plain",
            StatusCode::OK,
            reason::CONTENT_TYPE_UNSUPPORTED,
            with("content-type", Some("text/plain")),
        ),
        (
            "not JSON",
            StatusCode::OK,
            reason::JSON_SYNTAX,
            boxed(post(full(b"{\"jsonrpc\":"), Some(11), &[])),
        ),
        (
            "a duplicate key",
            StatusCode::OK,
            reason::JSON_DUPLICATE_KEY,
            boxed(post(
                full(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask","params":{"id":"t"}}"#),
                None,
                &[],
            )),
        ),
        (
            "a file outside any workspace",
            StatusCode::OK,
            reason::PART_FILE_WITHOUT_WORKSPACE,
            boxed({
                let b = serde_json::to_vec(&json!({
                    "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                        "parts": [{"url": "file:///etc/passwd", "mediaType": "text/plain"}]}}
                }))
                .unwrap();
                post(full(&b), Some(b.len()), &[])
            }),
        ),
        (
            "A2A-Version 2",
            StatusCode::OK,
            reason::VERSION_UNSUPPORTED,
            with("a2a-version", Some("2.0")),
        ),
        (
            "a declared length over the cap",
            StatusCode::PAYLOAD_TOO_LARGE,
            reason::BODY_TOO_LARGE,
            boxed(post(full(&good), Some(64 * 1024 * 1024), &[])),
        ),
        (
            "a body that breaks off",
            StatusCode::BAD_REQUEST,
            reason::BODY_READ,
            post(
                Broken(Some(Bytes::from_static(b"{\"jsonrpc\""))).boxed(),
                None,
                &[],
            ),
        ),
        (
            "a body that never comes",
            StatusCode::REQUEST_TIMEOUT,
            reason::BODY_TOO_SLOW,
            post(Silent.boxed(), Some(100), &[]),
        ),
    ];
    let mut refused = Vec::new();
    for (what, status, reason, req) in rows {
        let (got, v) = answer(gate.handle(conn(), req).await).await;
        assert_eq!(got, status, "{what}: {v}");
        if v["jsonrpc"] == "2.0" {
            assert_eq!(rpc_reason(&v), Some(reason.as_str()), "{what}: {v}");
        } else {
            assert_eq!(rpc_reason(&v), None, "{what}: {v}");
        }
        refused.push((what, reason));
    }
    // Each refusal is counted under its reason (plain HTTP ones too: their bodies say less).
    let metrics = gate.metrics.render(&gate.snapshot());
    for (what, reason) in refused {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("a2a_edge_requests_total{")
                    && l.contains(&format!("reason=\"{reason}\""))
                    && l.ends_with(" 1")),
            "{what}: no request counted under {reason}:\n{metrics}"
        );
    }
    assert!(
        agent.seen.lock().unwrap().is_empty(),
        "a refused request reached the agent"
    );
    // The same gate still serves a good request: the rows above were refused for themselves.
    let (got, v) = answer(
        gate.handle(conn(), post(full(&good), Some(good.len()), &[]))
            .await,
    )
    .await;
    assert_eq!(got, StatusCode::OK, "{v}");
    assert_eq!(agent.seen.lock().unwrap().len(), 1);
}

/// Several agents behind the edge (`[[agents]]`), routed by the gate alone: the request's
/// authority (HTTP/2 `:authority`, else exactly one `Host`) must be an agent's host and port
/// and its path that agent's exact prefix; every other spelling is 404 and reaches no agent.
/// `tf` is the agent in the process; `ros`'s one upstream is a closed local port (one agent
/// at most may be the embedded one), so a request routed to it is answered
/// `upstream.unavailable` without reaching `tf`.
#[tokio::test]
async fn agents_are_routed_by_exact_authority_and_prefix() {
    let text = r#"
[server]
listen = "127.0.0.1:8443"
public_url = "https://edge.example/"

[tls]
dev = true

[[upstreams]]
name = "tf-engine"
url = "embedded"

[[upstreams]]
name = "ros-engine"
url = "http://127.0.0.1:1/"

[auth]
[[auth.bearer]]
principal = "ci-bot"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

[[agents]]
name = "tf"
public_url = "https://edge.example/tf/"
upstreams = ["tf-engine"]

[[agents]]
name = "ros"
public_url = "https://edge.example/ros/"
upstreams = ["ros-engine"]
"#;
    let (gate, agent) = gate_with(text).await;
    let body = send_message("routed");
    #[derive(Debug, PartialEq)]
    enum To {
        Tf,
        Ros,
        Nowhere,
    }
    use To::*;
    // (HTTP/2 URI or HTTP/1.1 path, Host headers, where it goes)
    #[rustfmt::skip]
    let cases: &[(&str, &[&str], To)] = &[
        ("https://edge.example/tf/", &[], Tf),
        ("https://edge.example/ros/", &[], Ros),
        ("https://edge.example/ros", &[], Ros),
        ("/ros/", &["edge.example"], Ros),
        // The prefix without its slash is the same endpoint.
        ("https://edge.example/tf", &[], Tf),
        // One trailing dot is the same host; case does not matter in a host; 443 is https's.
        ("https://edge.example./tf/", &[], Tf),
        ("https://EDGE.Example/tf/", &[], Tf),
        ("https://edge.example:443/tf/", &[], Tf),
        // HTTP/1.1: the Host header, exactly one.
        ("/tf/", &["edge.example"], Tf),
        ("/tf/", &[], Nowhere),
        ("/tf/", &["edge.example", "edge.example"], Nowhere),
        ("/tf/", &["other.example"], Nowhere),
        // Nothing is normalized into a match.
        ("https://edge.example/TF/", &[], Nowhere),
        ("https://edge.example/tf//", &[], Nowhere),
        ("https://edge.example/tf/../ros/", &[], Nowhere),
        ("https://edge.example/tf%2F", &[], Nowhere),
        ("https://edge.example/%74f/", &[], Nowhere),
        ("https://edge.example/tf/x", &[], Nowhere),
        ("https://edge.example/", &[], Nowhere),
        // Other hosts and ports, and other spellings of the host.
        ("https://other.example/tf/", &[], Nowhere),
        ("https://edge.example../tf/", &[], Nowhere),
        ("https://edge.example:8443/tf/", &[], Nowhere),
        ("https://edge.example.evil/tf/", &[], Nowhere),
        ("https://127.0.0.1/tf/", &[], Nowhere),
    ];
    for (uri, hosts, to) in cases {
        let before = agent.seen.lock().unwrap().len();
        let mut req = Request::post(*uri)
            .version(if hosts.is_empty() && uri.starts_with("https") {
                http::Version::HTTP_2
            } else {
                http::Version::HTTP_11
            })
            .header("authorization", TOKEN)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .header("content-length", body.len());
        for h in *hosts {
            req = req.header("host", *h);
        }
        let req = req
            .body(Full::new(Bytes::from(body.clone())))
            .expect("a request");
        let (status, v) = answer(gate.handle(conn(), req).await).await;
        let reached = agent.seen.lock().unwrap().len() - before;
        match to {
            Tf => {
                assert_eq!(status, StatusCode::OK, "{uri} {hosts:?}: {v}");
                assert!(
                    v["result"]["task"]["id"].is_string(),
                    "{uri} {hosts:?}: {v}"
                );
                assert_eq!(reached, 1, "{uri} {hosts:?}");
            }
            Ros => {
                assert_eq!(status, StatusCode::OK, "{uri} {hosts:?}: {v}");
                assert_eq!(
                    rpc_reason(&v),
                    Some("upstream.unavailable"),
                    "{uri} {hosts:?}: {v}"
                );
                assert_eq!(reached, 0, "{uri} {hosts:?}: reached tf");
            }
            Nowhere => {
                assert_eq!(status, StatusCode::NOT_FOUND, "{uri} {hosts:?}: {v}");
                assert_eq!(reached, 0, "{uri} {hosts:?}: reached an agent");
            }
        }
    }
}

/// A request on a connection that is closing (a reload did not leave it standing) is
/// refused 421 before anything of it is read, and still counted and answered like any
/// other: under its reason in the metrics, HTTP/1.1 told the connection closes, HTTP/2 not
/// (connection headers are not HTTP/2's); the agent never sees it.
#[tokio::test]
async fn a_request_on_a_closing_connection_is_refused_and_counted() {
    let (gate, agent) = gate().await;
    let body = send_message("late");
    for version in [http::Version::HTTP_11, http::Version::HTTP_2] {
        let mut req = post(Full::new(Bytes::from(body.clone())), Some(body.len()), &[]);
        *req.version_mut() = version;
        let refused = Rejection::Http {
            status: StatusCode::MISDIRECTED_REQUEST,
            message: "This connection is closing: retry on a new one",
            reason: reason::CONNECTION_OUTLIVED,
            allow: None,
        };
        let resp = gate.refuse(conn(), req, refused).await;
        let close = resp.headers().get("connection").cloned();
        let (status, _) = answer(resp).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{version:?}");
        assert_eq!(
            close.as_ref().and_then(|v| v.to_str().ok()),
            (version == http::Version::HTTP_11).then_some("close"),
            "{version:?}"
        );
    }
    let metrics = gate.metrics.render(&gate.snapshot());
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("a2a_edge_requests_total{")
                && l.contains("reason=\"connection.outlived\"")
                && l.contains("status=\"421\"")
                && l.ends_with(" 2")),
        "{metrics}"
    );
    assert!(agent.seen.lock().unwrap().is_empty());
}

/// A Basic caller whose password could not be checked (every check slot busy for the whole
/// wait) is told to come back (503 `auth.overloaded` with `Retry-After`), not that its
/// password is wrong (401), and no failure is counted against its address: past the failure
/// burst (10) it is served once a slot is free, where a wrong password is throttled.
#[tokio::test(start_paused = true)]
async fn a_password_never_checked_is_no_failure() {
    use base64::Engine as _;
    let home = std::env::var("HOME").expect("HOME is set");
    let text = format!(
        "{}[[auth.basic]]\nusername = \"alice\"\npassword_env = \"HOME\"\n",
        policy_text()
    );
    let (gate, agent) = gate_with(&text).await;
    let basic = |password: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("alice:{password}"));
        format!("Basic {b64}")
    };
    let send = |authorization: String| {
        let body = send_message("hi");
        let req = Request::post("/")
            .version(http::Version::HTTP_2)
            .header("authorization", authorization)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(Full::new(Bytes::from(body)))
            .expect("a request");
        gate.handle(conn(), req)
    };
    let busy = gate.auth.hold_password_checks().await;
    for _ in 0..12 {
        let resp = send(basic(&home)).await;
        let status = resp.status();
        let retry = resp.headers().get(http::header::RETRY_AFTER).cloned();
        let (_, v) = answer(resp).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        assert_eq!(v["reason"], "auth.overloaded", "{v}");
        assert!(retry.is_some(), "no Retry-After");
    }
    drop(busy);
    let (status, v) = answer(send(basic(&home)).await).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(agent.seen.lock().unwrap().len(), 1);
    // (wrong passwords, checked, are failures: the burst runs out)
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(send(basic("wrong")).await.status());
    }
    assert_eq!(statuses[0], StatusCode::UNAUTHORIZED);
    assert_eq!(statuses[11], StatusCode::TOO_MANY_REQUESTS, "{statuses:?}");
}

/// A burst of password guesses from one address that queued for the password checks while
/// the address got blocked (its failures spent) is not checked once a slot comes free: each
/// is refused as a request that came now would be (429 `auth.throttled`), without its
/// argon2 work (before, every queued guess ran its check: a few hundred checks per burst,
/// the CPU the workers need, honest Basic callers queued behind them).
#[tokio::test]
async fn guesses_queued_while_their_address_got_blocked_are_not_checked() {
    use base64::Engine as _;
    let text = format!(
        "{}[[auth.basic]]\nusername = \"alice\"\npassword_env = \"HOME\"\n",
        policy_text()
    );
    let (gate, agent) = gate_with(&text).await;
    let gate = Arc::new(gate);
    let wrong = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("alice:wrong")
    );
    let busy = gate.auth.hold_password_checks().await;
    let mut waves = Vec::new();
    for _ in 0..20 {
        let (gate, wrong) = (gate.clone(), wrong.clone());
        waves.push(tokio::spawn(async move {
            let req = Request::post("/")
                .version(http::Version::HTTP_2)
                .header("authorization", wrong)
                .header("content-type", "application/json")
                .header("a2a-version", "1.0")
                .body(Full::new(Bytes::from(send_message("hi"))))
                .expect("a request");
            gate.handle(conn(), req).await.status()
        }));
    }
    // (all twenty wait for a slot) The address's failures are spent meanwhile.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let ip = conn().peer.ip();
    while gate.budgets.retry_after(ip).is_none() {
        let _ = gate.budgets.record_failure(ip).await;
    }
    drop(busy);
    for w in waves {
        assert_eq!(w.await.expect("a status"), StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(gate.auth.password_checks(), 0, "a queued guess was checked");
    assert!(agent.seen.lock().unwrap().is_empty());
}
