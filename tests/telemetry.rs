//! Traces and logs of the binary as operators run it: `[telemetry] otlp_endpoint` pointed at
//! a real OTLP/HTTP receiver started here (protobuf, decoded with the OpenTelemetry protocol
//! types), over plain HTTP and over TLS (`otlp_ca_file`; a collector the CA does not vouch
//! for gets nothing and the operator is told); one span per request with the pipeline's
//! stages as children, the caller's trace context as parent, the edge's own span as the
//! agent's `traceparent`; `otlp_sample_ratio` (whole traces, a caller's flag cannot force
//! one); the exporter's `OTEL_*` environment (gzip, timeout, service name, the export queue;
//! values it cannot honour stop `serve` and `check`); and the text log format.

mod common;

use std::convert::Infallible;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

/// An OTLP/HTTP receiver: every span POSTed to `/v1/traces`.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    paths: Arc<Mutex<Vec<String>>>,
    /// The `api-key` header of each export that had one.
    keys: Arc<Mutex<Vec<String>>>,
    /// Each export's `content-encoding` (empty: none).
    encodings: Arc<Mutex<Vec<String>>>,
    /// The `service.name` of each exported resource.
    services: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    /// Every request it got was an OTLP/HTTP protobuf export to `/v1/traces`.
    fn assert_only_trace_exports(&self) {
        let paths = self.paths.lock().unwrap();
        assert!(
            paths
                .iter()
                .all(|p| p == "POST /v1/traces application/x-protobuf"),
            "{paths:?}"
        );
    }
}

async fn receiver() -> Receiver {
    receiver_over(None).await
}

/// The receiver behind TLS, with a dev CA and server certificate of its own in `certs`
/// (`certs/ca.pem` is what a client must trust); `https_handshakes` counts the handshakes
/// that completed.
async fn receiver_tls(certs: &std::path::Path) -> (Receiver, Arc<Mutex<usize>>) {
    let dev = a2a_edge::tls::dev::ensure(certs).unwrap();
    let cfg = a2a_edge::tls::server_config(&dev.server_cert, &dev.server_key).unwrap();
    let handshakes: Arc<Mutex<usize>> = Arc::default();
    let r = receiver_over(Some((
        tokio_rustls::TlsAcceptor::from(cfg),
        handshakes.clone(),
    )))
    .await;
    (r, handshakes)
}

async fn receiver_over(tls: Option<(tokio_rustls::TlsAcceptor, Arc<Mutex<usize>>)>) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
    let paths: Arc<Mutex<Vec<String>>> = Arc::default();
    let keys: Arc<Mutex<Vec<String>>> = Arc::default();
    let encodings: Arc<Mutex<Vec<String>>> = Arc::default();
    let services: Arc<Mutex<Vec<String>>> = Arc::default();
    let (s2, p2, k2) = (spans.clone(), paths.clone(), keys.clone());
    let (e2, n2) = (encodings.clone(), services.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (spans, paths, keys) = (s2.clone(), p2.clone(), k2.clone());
            let (encodings, services) = (e2.clone(), n2.clone());
            let tls = tls.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (spans, paths, keys) = (spans.clone(), paths.clone(), keys.clone());
                    let (encodings, services) = (encodings.clone(), services.clone());
                    async move {
                        if let Some(k) = req.headers().get("api-key") {
                            keys.lock()
                                .unwrap()
                                .push(k.to_str().unwrap_or("?").to_string());
                        }
                        paths.lock().unwrap().push(format!(
                            "{} {} {}",
                            req.method(),
                            req.uri().path(),
                            req.headers()
                                .get("content-type")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                        ));
                        let encoding = req
                            .headers()
                            .get("content-encoding")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        let mut body = req.into_body().collect().await.unwrap().to_bytes();
                        if encoding == "gzip" {
                            use std::io::Read;
                            let mut plain = Vec::new();
                            flate2::read::GzDecoder::new(&body[..])
                                .read_to_end(&mut plain)
                                .unwrap();
                            body = plain.into();
                        }
                        encodings.lock().unwrap().push(encoding);
                        let export = ExportTraceServiceRequest::decode(body).unwrap();
                        for rs in export.resource_spans {
                            for a in rs.resource.iter().flat_map(|r| &r.attributes) {
                                if a.key == "service.name" {
                                    services
                                        .lock()
                                        .unwrap()
                                        .push(format!("{:?}", a.value.as_ref().unwrap().value));
                                }
                            }
                            for ss in rs.scope_spans {
                                spans.lock().unwrap().extend(ss.spans);
                            }
                        }
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::new()))
                                .unwrap(),
                        )
                    }
                });
                let http = hyper::server::conn::http1::Builder::new();
                match tls {
                    None => {
                        let _ = http.serve_connection(TokioIo::new(tcp), svc).await;
                    }
                    Some((acceptor, handshakes)) => {
                        let Ok(stream) = acceptor.accept(tcp).await else {
                            return;
                        };
                        *handshakes.lock().unwrap() += 1;
                        let _ = http.serve_connection(TokioIo::new(stream), svc).await;
                    }
                }
            });
        }
    });
    Receiver {
        url,
        spans,
        paths,
        keys,
        encodings,
        services,
    }
}

/// The binary with `telemetry` lines added to a policy in front of `upstream`.
struct Edge {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    /// The admin listener (`/metrics`).
    admin: std::net::SocketAddr,
    dir: TempDir,
}

async fn edge(upstream: &str, telemetry: &str) -> Edge {
    edge_with_env(upstream, telemetry, &[]).await
}

/// A policy in front of `upstream` with `telemetry` lines, written to `dir/p.toml`.
fn policy_file(dir: &TempDir, upstream: &str, telemetry: &str) -> std::path::PathBuf {
    policy_file_with(dir, upstream, "", telemetry)
}

/// [`policy_file`] with `auth` lines in `[auth]`.
fn policy_file_with(
    dir: &TempDir,
    upstream: &str,
    auth: &str,
    telemetry: &str,
) -> std::path::PathBuf {
    let token_sha = hex(&a2a_edge::policy::sha256(TOKEN.as_bytes()));
    let policy = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\npublic_url = \"https://127.0.0.1:0/\"\n[tls]\ndev = true\ndev_dir = \"{d}/certs\"\n[[upstreams]]\nname = \"agent-1\"\nurl = \"{upstream}\"\n[auth]\n{auth}[[auth.bearer]]\nprincipal = \"tester\"\ntoken_sha256 = \"{token_sha}\"\n[telemetry]\n{telemetry}\n",
        d = dir.path().display()
    );
    let file = dir.path().join("p.toml");
    std::fs::write(&file, policy).unwrap();
    file
}

async fn edge_with_env(upstream: &str, telemetry: &str, env: &[(&str, &str)]) -> Edge {
    edge_with(upstream, "", telemetry, env).await
}

/// [`edge_with_env`] with `auth` lines in `[auth]`.
async fn edge_with(upstream: &str, auth: &str, telemetry: &str, env: &[(&str, &str)]) -> Edge {
    let dir = TempDir::new("telemetry");
    let file = policy_file_with(&dir, upstream, auth, telemetry);
    let ready = dir.path().join("ready.json");
    let child = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .envs(env.iter().copied())
        .args(["serve", "--policy"])
        .arg(&file)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    Edge {
        child,
        addr: info["listen"].as_str().unwrap().parse().unwrap(),
        admin: info["admin"].as_str().unwrap().parse().unwrap(),
        dir,
    }
}

impl Edge {
    async fn client(&self) -> Client {
        Client::connect(self.addr, &self.dir.path().join("certs/ca.pem"), Proto::H2).await
    }

    /// SIGTERM, then the process's standard error (it flushes spans before it exits). The
    /// test's runtime keeps running meanwhile (the receiver and the client's connection are
    /// served while the edge drains).
    async fn stop(mut self) -> String {
        let mut stderr = self.child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut err = String::new();
            use std::io::Read;
            let _ = stderr.read_to_string(&mut err);
            err
        });
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the edge did not stop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let err = reader.join().unwrap();
        assert!(status.success(), "{status}: {err}");
        err
    }
}

fn hex_id(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn spans_reach_a_collector_with_the_callers_parent_and_the_agent_gets_the_edges() {
    let otlp = receiver().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge(&agent.url, &format!("otlp_endpoint = \"{}\"", otlp.url)).await;
    let mut c = e.client().await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let mut headers = rpc_headers();
    headers.push(("traceparent", &traceparent));
    headers.push(("tracestate", "vendor=abc"));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))});
    let (status, _, b) = c.request("POST", "/", &headers, body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    // A request without a trace context starts a trace of its own.
    let (status, _, _) = c
        .request("POST", "/", &rpc_headers(), body.to_string())
        .await;
    assert_eq!(status, StatusCode::OK);
    drop(c);
    let log = e.stop().await;
    let spans = otlp.spans.lock().unwrap().clone();
    otlp.assert_only_trace_exports();
    let requests: Vec<&Span> = spans.iter().filter(|s| s.name == "request").collect();
    assert_eq!(
        requests.len(),
        2,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let traced = requests
        .iter()
        .find(|s| hex_id(&s.trace_id) == TRACE)
        .expect("the request span continues the caller's trace");
    assert_eq!(
        hex_id(&traced.parent_span_id),
        PARENT,
        "the caller's span is the parent"
    );
    let other = requests
        .iter()
        .find(|s| hex_id(&s.trace_id) != TRACE)
        .unwrap();
    assert!(
        other.parent_span_id.is_empty(),
        "a root span without a trace context"
    );
    // The stages are children of the request span, in its trace.
    let children: Vec<&str> = spans
        .iter()
        .filter(|s| s.trace_id == traced.trace_id && s.parent_span_id == traced.span_id)
        .map(|s| s.name.as_str())
        .collect();
    for stage in [
        "authenticate",
        "read",
        "parse",
        "authorize",
        "validate",
        "forward",
        "relay",
    ] {
        assert!(
            children.contains(&stage),
            "{stage} missing from {children:?}"
        );
    }
    let forward = spans
        .iter()
        .find(|s| s.name == "forward" && s.trace_id == traced.trace_id)
        .unwrap();
    // The agent's parent is the edge's forward span, in the caller's trace.
    let seen = agent.rpc_requests();
    let sent = seen[0].headers["traceparent"].to_str().unwrap();
    assert_eq!(
        sent,
        format!("00-{TRACE}-{}-01", hex_id(&forward.span_id)),
        "the agent's traceparent"
    );
    assert_eq!(seen[0].headers["tracestate"], "vendor=abc");
    // The request span says what it served.
    let attr = |s: &Span, k: &str| {
        s.attributes
            .iter()
            .find(|a| a.key == k)
            .and_then(|a| a.value.as_ref())
            .map(|v| format!("{:?}", v.value))
    };
    assert!(attr(traced, "a2a.method").unwrap().contains("SendMessage"));
    assert!(attr(traced, "http.response.status_code")
        .unwrap()
        .contains("200"));
    // The log line carries the caller's trace id too.
    assert!(log.contains(&format!("\"trace_id\":\"{TRACE}\"")), "{log}");
}

/// The spans one forwarded `SendMessage` makes.
const REQUEST_SPANS: u64 = 8;

/// One SendMessage through an edge exporting to `otlp` (with `ca_file` as its CA file), then
/// the edge stopped (it flushes its spans): the names of the spans the receiver got, and the
/// edge's log.
async fn one_request_exported(
    otlp: &Receiver,
    ca_file: &std::path::Path,
) -> (Vec<String>, String, u64) {
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let telemetry = format!(
        "otlp_endpoint = \"{}\"\notlp_ca_file = {:?}",
        otlp.url,
        ca_file.display().to_string()
    );
    // Collector credentials come the OpenTelemetry way, from the environment.
    let e = edge_with_env(
        &agent.url,
        &telemetry,
        &[
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=k-123"),
            // Batches go out every 100 ms (not 5 s), so they are sent while the edge runs.
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    let mut c = e.client().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))});
    let (status, _, b) = c
        .request("POST", "/", &rpc_headers(), body.to_string())
        .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    assert_eq!(agent.rpc_requests().len(), 1);
    drop(c);
    // The request's spans are exported (or fail to be) within a few batch intervals, possibly
    // in more than one batch: wait for all of them (the root span `request` ends last), not the
    // first batch.
    let deadline = Instant::now() + Duration::from_secs(10);
    let lost = loop {
        let lost = spans_lost(e.admin).await;
        let root_arrived = otlp
            .spans
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.name == "request");
        if lost >= REQUEST_SPANS || root_arrived || Instant::now() > deadline {
            break lost;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = e.stop().await;
    let spans = otlp.spans.lock().unwrap();
    (spans.iter().map(|s| s.name.clone()).collect(), log, lost)
}

/// `a2a_edge_spans_lost_total` on the admin listener at `admin`.
async fn spans_lost(admin: std::net::SocketAddr) -> u64 {
    let (status, text) = admin_get_at(admin, "/metrics").await;
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("a2a_edge_spans_lost_total "))
        .unwrap_or_else(|| panic!("no a2a_edge_spans_lost_total in {text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn spans_reach_an_https_collector_whose_certificate_the_ca_file_vouches_for() {
    let dir = TempDir::new("otlp-tls");
    let (otlp, handshakes) = receiver_tls(&dir.path().join("collector")).await;
    let (names, log, lost) =
        one_request_exported(&otlp, &dir.path().join("collector/ca.pem")).await;
    assert!(names.iter().any(|n| n == "request"), "{names:?}");
    assert_eq!(lost, 0);
    assert!(!log.contains("otlp_export_failed"), "{log}");
    assert!(names.iter().any(|n| n == "forward"), "{names:?}");
    assert!(*handshakes.lock().unwrap() >= 1);
    let keys = otlp.keys.lock().unwrap().clone();
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k == "k-123"),
        "{keys:?}"
    );
    otlp.assert_only_trace_exports();
}

#[tokio::test]
async fn an_https_collector_with_a_certificate_of_another_ca_gets_nothing_and_requests_still_pass()
{
    let dir = TempDir::new("otlp-tls-other");
    let (otlp, handshakes) = receiver_tls(&dir.path().join("collector")).await;
    // A CA the collector's certificate does not chain to.
    let other = a2a_edge::tls::dev::ensure(&dir.path().join("other")).unwrap();
    let (names, log, lost) = one_request_exported(&otlp, &other.ca_cert).await;
    assert!(names.is_empty(), "{names:?}");
    assert!(
        lost >= REQUEST_SPANS,
        "the request's {REQUEST_SPANS} spans are counted lost: {lost}"
    );
    // The operator is told, once (not per batch), without the collector's credentials.
    let failed: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "otlp_export_failed")
        .collect();
    assert_eq!(failed.len(), 1, "one line within 10 s: {log}");
    assert_eq!(failed[0]["level"], "warn");
    assert!(failed[0]["spans"].as_u64().unwrap() >= 1, "{log}");
    assert!(!log.contains("k-123"), "{log}");
    assert_eq!(*handshakes.lock().unwrap(), 0, "no handshake may complete");
    assert!(otlp.paths.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_an_endpoint_the_callers_trace_context_is_forwarded_as_it_came() {
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge(&agent.url, "log_format = \"text\"\nlog_level = \"warn\"").await;
    let mut c = e.client().await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let mut headers = rpc_headers();
    headers.push(("traceparent", &traceparent));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))});
    let (status, _, _) = c.request("POST", "/", &headers, body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    drop(c);
    let log = e.stop().await;
    assert_eq!(
        agent.rpc_requests()[0].headers["traceparent"],
        traceparent.as_str()
    );
    // `log_level = "warn"` leaves the request lines (info) out; text lines are not JSON.
    assert!(
        !log.contains("event=\"request\"") && !log.contains("\"event\":\"request\""),
        "{log}"
    );
    assert!(
        log.lines()
            .filter(|l| l.contains("event"))
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{log}"
    );
}

#[tokio::test]
async fn the_text_format_writes_readable_lines() {
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge(&agent.url, "log_format = \"text\"").await;
    let mut c = e.client().await;
    let (status, _, _) = c.request("GET", "/nope", &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    drop(c);
    let log = e.stop().await;
    let line = log
        .lines()
        .find(|l| l.contains("route.not_found"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains("INFO") && line.contains("event=\"request\"") && line.contains("status=404"),
        "{line}"
    );
}

/// Connections that fail before they prove anything (here: TLS handshakes of plain HTTP) are
/// logged at most 50 a second after a burst of 200, so that a flood of them cannot crowd the
/// lines of callers who got in out of the log buffer; the first line after some were left out
/// says how many. A request's own line is written as ever.
#[tokio::test]
async fn a_flood_of_failed_handshakes_is_logged_in_part() {
    use tokio::io::AsyncWriteExt;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge(&agent.url, "").await;
    let started = Instant::now();
    for _ in 0..600 {
        let mut tcp = tokio::net::TcpStream::connect(e.addr).await.unwrap();
        let _ = tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
        let _ = tcp.shutdown().await;
        drop(tcp);
    }
    // (the edge's last handshake is over once a real client gets in after them)
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut c = e.client().await;
    let (status, _, _) = c.request("GET", "/nope", &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    drop(c);
    // A line after the flood, within the budget again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut tcp = tokio::net::TcpStream::connect(e.addr).await.unwrap();
    let _ = tcp.write_all(b"GET / HTTP/1.1\r\n\r\n").await;
    drop(tcp);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let secs = started.elapsed().as_secs_f64();
    let log = e.stop().await;
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("tls_handshake_failed"))
        .collect();
    let most = 200.0 + 50.0 * secs + 5.0;
    assert!(
        (failed.len() as f64) <= most && failed.len() < 600,
        "{} handshake lines in {secs:.1} s",
        failed.len()
    );
    // (on any connection line: one refused for the per-client limit shares the budget)
    assert!(
        log.lines()
            .filter(|l| l.contains("tls_handshake") || l.contains("connection_refused"))
            .any(|l| l.contains("\"suppressed\"")),
        "no line says how many were left out"
    );
    assert!(log.contains("route.not_found"), "the request's line");
}

/// Request lines without a credential (404s, which anyone can send as fast as a connection
/// carries them; `anonymous` callers where they are allowed) are logged at most 50 a second
/// after a burst of 200, and the first line after some were left out says how many; the line
/// of every request that proved a credential is written whatever the flood (and the metrics
/// count every request).
#[tokio::test]
async fn a_flood_of_requests_without_a_credential_is_logged_in_part() {
    let agent = RecordingUpstream::start(Reply::Echo).await;
    // (the client address's rate, which every request spends, out of the way)
    let limits = "[limits]\nclient_ip_requests_per_second = 100000\nclient_ip_burst = 100000\nrequests_per_second = 100000\nburst = 100000\n";
    // (a body that is no JSON: refused at once, after authentication)
    let not_json = "not json";
    // (the [auth] lines, the flood's request, its status, what its log lines hold)
    /// (method, path, body)
    type Flood<'a> = (&'a str, &'a str, &'a str);
    let rows: [(&str, Flood, StatusCode, &str); 2] = [
        (
            "",
            ("GET", "/nope", ""),
            StatusCode::NOT_FOUND,
            "route.not_found",
        ),
        (
            "allow_anonymous = true\n",
            ("POST", "/", not_json),
            StatusCode::OK,
            "\"principal\":\"anonymous\"",
        ),
    ];
    for (auth, (method, path, flood_body), status_of_flood, marks) in rows {
        // (the [limits] table follows the empty [telemetry] one: the telemetry lines end the
        // file)
        let e = edge_with(&agent.url, auth, limits, &[]).await;
        let started = Instant::now();
        // The flood: 900 requests from 30 connections at once (a request with a body takes
        // this test client tens of milliseconds), beside 6 of a caller with a credential.
        let mut flood = tokio::task::JoinSet::new();
        for _ in 0..30 {
            let mut c = e.client().await;
            flood.spawn(async move {
                let headers: &[(&str, &str)] = if method == "POST" {
                    &[("content-type", "application/json"), ("a2a-version", "1.0")]
                } else {
                    &[]
                };
                for _ in 0..30 {
                    let (status, _, b) = c.request(method, path, headers, flood_body).await;
                    assert_eq!(status, status_of_flood, "{}", String::from_utf8_lossy(&b));
                }
            });
        }
        let mut c = e.client().await;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))});
        let honest = 6;
        for _ in 0..honest {
            let (status, _, _) = c
                .request("POST", "/", &rpc_headers(), body.to_string())
                .await;
            assert_eq!(status, StatusCode::OK);
        }
        while let Some(done) = flood.join_next().await {
            done.unwrap();
        }
        let (_, metrics) = admin_get_at(e.admin, "/metrics").await;
        let secs = started.elapsed().as_secs_f64();
        let log = e.stop().await;
        let flood: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"event\":\"request\"") && l.contains(marks))
            .collect();
        let most = 200.0 + 50.0 * secs + 5.0;
        assert!(
            (flood.len() as f64) <= most && flood.len() < 900,
            "{marks}: {} lines in {secs:.1} s",
            flood.len()
        );
        assert!(
            flood.iter().any(|l| l.contains("\"suppressed\"")),
            "{marks}: no line says how many were left out"
        );
        let proven = log
            .lines()
            .filter(|l| {
                l.contains("\"event\":\"request\"") && l.contains("\"principal\":\"tester\"")
            })
            .count();
        assert_eq!(proven, honest, "{marks}: every proven request's line");
        let counted: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("a2a_edge_requests_total{"))
            .filter(|l| l.contains(&format!("status=\"{}\"", status_of_flood.as_u16())))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        let sent_with_that_status = if status_of_flood == StatusCode::OK {
            900 + honest
        } else {
            900
        };
        assert_eq!(
            counted, sent_with_that_status as f64,
            "{marks}: the metrics count every request: {metrics}"
        );
    }
}

/// `n` SendMessages on one connection, each with `traceparent` when given; all answered 200.
async fn send(e: &Edge, n: usize, traceparent: Option<&str>) {
    let mut c = e.client().await;
    let mut headers = rpc_headers();
    if let Some(tp) = traceparent {
        headers.push(("traceparent", tp));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))});
    for _ in 0..n {
        let (status, _, b) = c.request("POST", "/", &headers, body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    }
}

const STAGES: [&str; 7] = [
    "authenticate",
    "read",
    "parse",
    "authorize",
    "validate",
    "forward",
    "relay",
];

#[tokio::test]
async fn a_sample_ratio_exports_that_share_of_traces_whole_and_a_caller_cannot_force_one() {
    // Ratio 0: a caller's sampled flag exports nothing; the agent still gets the caller's
    // trace, as not sampled.
    let otlp = receiver().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let telemetry = format!("otlp_endpoint = \"{}\"\notlp_sample_ratio = 0", otlp.url);
    let e = edge(&agent.url, &telemetry).await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    send(&e, 5, Some(&traceparent)).await;
    send(&e, 5, None).await;
    e.stop().await;
    assert!(
        otlp.spans.lock().unwrap().is_empty(),
        "ratio 0 exports no span"
    );
    let seen = agent.rpc_requests();
    assert_eq!(seen.len(), 10);
    // The caller's context as it came, marked not sampled: the edge's decision is the
    // trace's. The requests without one carry none.
    for r in &seen[..5] {
        assert_eq!(
            r.headers["traceparent"],
            format!("00-{TRACE}-{PARENT}-00").as_str()
        );
    }
    assert!(seen[5..]
        .iter()
        .all(|r| r.headers.get("traceparent").is_none()));

    // Ratio 0.5 over 60 requests: some traces, not all, each with every stage, and no stage
    // of a request that was not kept.
    let otlp = receiver().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let telemetry = format!("otlp_endpoint = \"{}\"\notlp_sample_ratio = 0.5", otlp.url);
    let e = edge(&agent.url, &telemetry).await;
    send(&e, 60, None).await;
    e.stop().await;
    let spans = otlp.spans.lock().unwrap().clone();
    let requests: Vec<&Span> = spans.iter().filter(|s| s.name == "request").collect();
    assert!(
        (5..=55).contains(&requests.len()),
        "{} of 60 traces exported at 0.5",
        requests.len()
    );
    assert_eq!(
        spans.len(),
        requests.len() * 8,
        "each kept trace whole, nothing else"
    );
    for r in &requests {
        let children: Vec<&str> = spans
            .iter()
            .filter(|s| s.trace_id == r.trace_id && s.parent_span_id == r.span_id)
            .map(|s| s.name.as_str())
            .collect();
        for stage in STAGES {
            assert!(children.contains(&stage), "{stage} missing: {children:?}");
        }
    }
}

#[tokio::test]
async fn the_exporters_environment_gzips_names_the_service_and_what_the_policy_decides_is_ignored_aloud(
) {
    let otlp = receiver().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge_with_env(
        &agent.url,
        &format!("otlp_endpoint = \"{}\"", otlp.url),
        &[
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_SERVICE_NAME", "edge-eu-1"),
            // Not where spans go: the policy's endpoint is.
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/"),
            ("OTEL_TRACES_SAMPLER", "always_off"),
        ],
    )
    .await;
    send(&e, 2, None).await;
    let log = e.stop().await;
    let names: Vec<String> = otlp
        .spans
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(
        names.iter().filter(|n| *n == "request").count(),
        2,
        "{names:?}"
    );
    let encodings = otlp.encodings.lock().unwrap().clone();
    assert!(
        !encodings.is_empty() && encodings.iter().all(|e| e == "gzip"),
        "{encodings:?}"
    );
    let services = otlp.services.lock().unwrap().clone();
    assert!(
        !services.is_empty() && services.iter().all(|s| s.contains("\"edge-eu-1\"")),
        "{services:?}"
    );
    otlp.assert_only_trace_exports();
    let ignored: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "otlp_env_ignored")
        .collect();
    let vars: Vec<&str> = ignored
        .iter()
        .map(|l| l["variable"].as_str().unwrap())
        .collect();
    assert_eq!(
        vars,
        ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER"],
        "{log}"
    );
    assert!(ignored.iter().all(|l| l["level"] == "warn"));
}

#[tokio::test]
async fn without_a_service_name_in_the_environment_the_spans_name_a2a_edge() {
    let otlp = receiver().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge(&agent.url, &format!("otlp_endpoint = \"{}\"", otlp.url)).await;
    send(&e, 1, None).await;
    let log = e.stop().await;
    let services = otlp.services.lock().unwrap().clone();
    assert!(
        !services.is_empty() && services.iter().all(|s| s.contains("\"a2a-edge\"")),
        "{services:?}"
    );
    assert_eq!(
        otlp.encodings.lock().unwrap()[0],
        "",
        "not compressed unless asked"
    );
    assert!(!log.contains("otlp_env_ignored"), "{log}");
}

#[tokio::test]
async fn an_exporter_environment_the_edge_cannot_honour_stops_serve_and_check() {
    let agent = RecordingUpstream::start(Reply::Echo).await;
    for (var, value) in [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "5s"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"),
    ] {
        let dir = TempDir::new("telemetry-env");
        let file = policy_file(
            &dir,
            &agent.url,
            "otlp_endpoint = \"http://127.0.0.1:4318\"",
        );
        let ready = dir.path().join("ready.json");
        let serve = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
            .env(var, value)
            .args(["serve", "--policy"])
            .arg(&file)
            .arg("--ready-file")
            .arg(&ready)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&serve.stderr);
        assert_eq!(serve.status.code(), Some(1), "{var}={value}: {err}");
        assert!(err.contains(&format!("{var}: ")), "{var}={value}: {err}");
        assert!(!ready.exists(), "{var}={value}: it must not start");
        let check = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
            .env(var, value)
            .args(["check", "--policy"])
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&check.stderr);
        assert!(!check.status.success(), "{var}={value}: check passed");
        assert!(err.contains(&format!("{var}: ")), "{var}={value}: {err}");
    }
    // With good values `check` says what the exporter will do.
    let dir = TempDir::new("telemetry-env-good");
    let file = policy_file(
        &dir,
        &agent.url,
        "otlp_endpoint = \"http://127.0.0.1:4318\"\notlp_sample_ratio = 0.25",
    );
    let check = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        .env("OTEL_BSP_MAX_QUEUE_SIZE", "64")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "750")
        .env("OTEL_TRACES_SAMPLER", "always_on")
        .args(["check", "--policy"])
        .arg(&file)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{check:?}");
    for want in [
        "warning: OTEL_TRACES_SAMPLER is set and ignored",
        "traces   OTLP/HTTP to http://127.0.0.1:4318/v1/traces, 25 % of the requests' spans",
        "timeout 750 ms, gzip, queue 64 spans, batches of up to 64 sent when full or after 5000 ms",
    ] {
        assert!(out.contains(want), "{want} not in {out}");
    }
    // Without an endpoint the exporter's environment is not read at all.
    let dir = TempDir::new("telemetry-env-off");
    let file = policy_file(&dir, &agent.url, "");
    let check = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .args(["check", "--policy"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
}

/// `a2a_edge_spans_lost_total` once it is at least `at_least`, or at `deadline`.
async fn spans_lost_by(admin: std::net::SocketAddr, at_least: u64, deadline: Instant) -> u64 {
    loop {
        let lost = spans_lost(admin).await;
        if lost >= at_least || Instant::now() > deadline {
            return lost;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A collector that accepts connections and never answers: its URL, and the connections it
/// holds.
async fn silent_collector() -> (String, Arc<Mutex<Vec<tokio::net::TcpStream>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held: Arc<Mutex<Vec<tokio::net::TcpStream>>> = Arc::default();
    let h2 = held.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            h2.lock().unwrap().push(tcp);
        }
    });
    (url, held)
}

#[tokio::test]
async fn the_export_timeout_comes_from_the_environment() {
    let (url, held) = silent_collector().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge_with_env(
        &agent.url,
        &format!("otlp_endpoint = \"{url}\""),
        &[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "200"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    let started = Instant::now();
    send(&e, 1, None).await;
    // With the default (5 s) nothing would be lost for 5 s; with 200 ms the batch fails
    // well within 4 s.
    // (The request's spans may go out in more than one batch: wait for all of them.)
    let lost = spans_lost_by(e.admin, REQUEST_SPANS, started + Duration::from_secs(4)).await;
    assert!(
        lost >= REQUEST_SPANS,
        "the batches timed out: {lost} spans lost"
    );
    assert!(
        !held.lock().unwrap().is_empty(),
        "the collector was reached"
    );
    let log = e.stop().await;
    assert!(log.contains("otlp_export_failed"), "{log}");
}

#[tokio::test]
async fn spans_that_do_not_fit_the_export_queue_are_counted_lost_and_said_once() {
    // The first batch's export hangs (a minute), the queue (16 spans) fills, and the rest
    // is dropped, not queued.
    let (url, _held) = silent_collector().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge_with_env(
        &agent.url,
        &format!("otlp_endpoint = \"{url}\""),
        &[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
    .await;
    // 10 requests, 80 spans: at most 16 wait or are on their way.
    send(&e, 10, None).await;
    let lost = spans_lost_by(e.admin, 64, Instant::now() + Duration::from_secs(10)).await;
    assert!((64..=80).contains(&lost), "{lost} spans lost");
    assert_eq!(
        agent.rpc_requests().len(),
        10,
        "requests never wait for the collector"
    );
    let log = e.stop().await;
    let full: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "otlp_queue_full")
        .collect();
    assert_eq!(full.len(), 1, "one line within 10 s: {log}");
    assert_eq!(full[0]["level"], "warn");
    assert_eq!(full[0]["queue"], 16);
}

/// A caller's `tracestate` the edge does not forward (a tab in it, an empty value, more
/// than 32 members) reaches neither the agent nor the exported spans by way of the edge's
/// own span, with export on: the span's parent is built from what the edge checked, not
/// from the caller's raw headers (OpenTelemetry's parser takes such values as they come).
#[tokio::test]
async fn an_invalid_tracestate_reaches_neither_the_agent_nor_the_spans() {
    let otlp = receiver().await;
    let agent = RecordingUpstream::start(Reply::Echo).await;
    let e = edge(&agent.url, &format!("otlp_endpoint = \"{}\"", otlp.url)).await;
    let mut c = e.client().await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
    let many = many.join(",");
    let states = [
        "vendor=abc\t",
        "vendor=",
        "vendor=abc,other=",
        many.as_str(),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))});
    for state in states {
        let mut headers = rpc_headers();
        headers.push(("traceparent", &traceparent));
        headers.push(("tracestate", state));
        let (status, _, b) = c.request("POST", "/", &headers, body.to_string()).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{state:?}: {}",
            String::from_utf8_lossy(&b)
        );
    }
    drop(c);
    e.stop().await;
    let seen = agent.rpc_requests();
    assert_eq!(seen.len(), states.len());
    for r in &seen {
        let sent = r.headers["traceparent"].to_str().unwrap();
        assert!(sent.starts_with(&format!("00-{TRACE}-")), "{sent}");
        assert!(
            r.headers.get("tracestate").is_none(),
            "forwarded: {:?}",
            r.headers.get("tracestate")
        );
    }
    let spans = otlp.spans.lock().unwrap().clone();
    let traced: Vec<&Span> = spans
        .iter()
        .filter(|s| hex_id(&s.trace_id) == TRACE)
        .collect();
    assert!(!traced.is_empty());
    for s in traced {
        assert_eq!(s.trace_state, "", "{}: {:?}", s.name, s.trace_state);
    }
}
