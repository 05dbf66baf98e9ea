//! The edge's own work per request, measured without sockets: `Gate::handle` from the parsed
//! HTTP request to the response's last byte, with every check on (authentication, limits,
//! the strict parse, the params checks, ownership, the re-serialized request, the answer's
//! pass, metrics), the agent in the process answering at once. What the load benchmark adds
//! to this is TLS, HTTP, the kernel and the log line (no log subscriber here).
//!
//! The request and the answer are the load benchmark's (`benches/load/sendmessage.json`, the
//! static upstream's `static-task.json`), so `static` here is its static shape minus the
//! stack. `fresh_task` is the same answer naming a new task in a new context each time (the
//! edge learns both into a registry of 100,000 entries, full after the warm-up: each request
//! also evicts the oldest task and context); `fresh_task_engine_answer` the same with the
//! engine's answer (4.3 KB) as the template: the engine shape's work for the edge without the
//! engine's. `engine_alone` and `engine_answer` are the embedded engine by itself and behind
//! the gate.

use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;

// The allocator of the binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use a2a_edge::body::{full, BoxBody};
use a2a_edge::engine::{Engine, EngineConfig};
use a2a_edge::gate::Process;
use a2a_edge::gate::{ConnInfo, Gate};
use a2a_edge::policy::{LoadMode, Policy};
use a2a_edge::upstream::LocalAgent;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};

const POLICY: &str = r#"
[server]
listen = "127.0.0.1:0"
public_url = "https://edge.example/"

[tls]
dev = true

[[upstreams]]
name = "agent"
url = "embedded"

[auth]
# A refused credential is measured as a 401, not as the failure throttle's 429.
failures_per_minute = 1000000
failures_burst = 1000000
[[auth.bearer]]
principal = "bench"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

# The benchmark measures the edge's work, not its rate limits.
[limits]
requests_per_second = 1000000
burst = 1000000
client_ip_requests_per_second = 1000000
client_ip_burst = 1000000
max_in_flight_per_principal = 100000
"#;

/// The embedded engine as the agent, as the load benchmark's engine shape has it (there in a
/// process of its own): every SendMessage a new task in a new context, which the edge learns.
struct EngineAgent(Arc<Engine>);

impl LocalAgent for EngineAgent {
    fn handle(
        &self,
        req: Request<Bytes>,
    ) -> Pin<Box<dyn std::future::Future<Output = Response<BoxBody>> + Send + '_>> {
        Box::pin(self.0.handle(req))
    }
}

/// An answer with a new task in a new context each time: `template` with each of `ids` (the
/// task's and the context's) replaced by a new id of the same form. The engine shape's work
/// for the edge without the engine's own.
struct Fresh {
    template: String,
    ids: Vec<String>,
    n: std::sync::atomic::AtomicU64,
}

impl Fresh {
    fn new(template: &Bytes, ids: &[&str]) -> Fresh {
        Fresh {
            template: String::from_utf8(template.to_vec()).unwrap(),
            ids: ids.iter().map(|s| s.to_string()).collect(),
            n: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl LocalAgent for Fresh {
    fn handle(
        &self,
        _req: Request<Bytes>,
    ) -> Pin<Box<dyn std::future::Future<Output = Response<BoxBody>> + Send + '_>> {
        let n = self.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut body = self.template.clone();
        for (i, id) in self.ids.iter().enumerate() {
            body = body.replace(id, &format!("{:08x}-{i:04x}-4000-8000-{n:012x}", n as u32));
        }
        let resp = json_response(Bytes::from(body));
        Box::pin(async move { resp })
    }
}

/// An agent's 200 with a JSON body.
fn json_response(body: Bytes) -> Response<BoxBody> {
    Response::builder()
        .header("content-type", "application/json")
        .body(full(body))
        .unwrap()
}

/// Answers every request with the same bytes, as the static upstream does.
struct Static(Bytes);

impl LocalAgent for Static {
    fn handle(
        &self,
        _req: Request<Bytes>,
    ) -> Pin<Box<dyn std::future::Future<Output = Response<BoxBody>> + Send + '_>> {
        let resp = json_response(self.0.clone());
        Box::pin(async move { resp })
    }
}

fn file(name: &str) -> Bytes {
    let path = format!("{}/benches/load/{name}", env!("CARGO_MANIFEST_DIR"));
    Bytes::from(std::fs::read(path).unwrap())
}

fn request(body: &Bytes, token: &str) -> Request<Full<Bytes>> {
    Request::post("/")
        .version(http::Version::HTTP_11)
        .header("host", "edge.example")
        .header("authorization", token)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("content-length", body.len())
        .body(Full::new(body.clone()))
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = file("static-task.json");
    let policy =
        Policy::from_toml(std::path::Path::new("bench.toml"), POLICY, LoadMode::Check).unwrap();
    let url = url::Url::parse("https://edge.example/").unwrap();
    let conn = || ConnInfo {
        peer: "192.0.2.7:40000".parse().unwrap(),
        client_cert: false,
        client_identity: None,
        gates: None,
    };
    let send = file("sendmessage.json");

    // A gate in front of `agent`, and one request through it to the end of its answer.
    let gate_for = |agent: Arc<dyn LocalAgent>| {
        let process = Process::in_memory(100_000, agent);
        let gate = rt
            .block_on(Gate::new(&policy, &url, 443, &process, None))
            .unwrap();
        (gate, process)
    };
    let through = |gate: &Gate, req: Request<Full<Bytes>>| {
        rt.block_on(async {
            let resp = gate.handle(conn(), req).await;
            let status = resp.status();
            (status, resp.into_body().collect().await.unwrap().to_bytes())
        })
    };
    let answered = |(status, body): (http::StatusCode, Bytes)| {
        assert_eq!(status, 200);
        assert!(body.starts_with(b"{\"result\":{\"task\""), "{body:?}");
    };

    // Served as the load benchmark's static shape is: a 200 with the agent's task.
    let (gate, _p0) = gate_for(Arc::new(Static(answer.clone())));
    answered(through(&gate, request(&send, "Bearer test")));
    assert_eq!(through(&gate, request(&send, "Bearer wrong")).0, 401);

    // The engine shape: the engine alone, then behind the gate.
    let engine = Engine::new(EngineConfig::default());
    let (engine_gate, _p1) = gate_for(Arc::new(EngineAgent(engine.clone())));
    let direct = |req: Request<Full<Bytes>>| {
        rt.block_on(async {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            let resp = engine.handle(Request::from_parts(parts, body)).await;
            let status = resp.status();
            (status, resp.into_body().collect().await.unwrap().to_bytes())
        })
    };
    answered(through(&engine_gate, request(&send, "Bearer test")));
    // The engine's own answer (4.3 KB: the status message and the history echo the text), to
    // serve from a template below.
    let (status, engine_answer) = direct(request(&send, "Bearer test"));
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&engine_answer).unwrap();
    let (task, context) = (
        v["result"]["task"]["id"].as_str().unwrap().to_string(),
        v["result"]["task"]["contextId"]
            .as_str()
            .unwrap()
            .to_string(),
    );

    // New tasks in new contexts without the engine: the static answer, then the engine's.
    let (fresh_gate, _p2) = gate_for(Arc::new(Fresh::new(
        &answer,
        &[
            "6f1c7e0a-3b52-4d6e-9a1f-2c8b7d4e5a10",
            "0c2e9b8d-7a41-4f63-8e5d-1b9a6c3f2d70",
        ],
    )));
    let (fresh_engine_gate, _p3) =
        gate_for(Arc::new(Fresh::new(&engine_answer, &[&task, &context])));
    // Learned and relayed (not refused as another caller's), twice each.
    for gate in [&fresh_gate, &fresh_engine_gate] {
        for _ in 0..2 {
            answered(through(gate, request(&send, "Bearer test")));
        }
    }

    let mut g = c.benchmark_group("gate");
    g.throughput(Throughput::Elements(1));
    g.bench_function(format!("send_message_{}B_static_answer", send.len()), |b| {
        b.iter(|| black_box(through(&gate, request(&send, "Bearer test"))))
    });
    g.bench_function(format!("send_message_{}B_fresh_task", send.len()), |b| {
        b.iter(|| black_box(through(&fresh_gate, request(&send, "Bearer test"))))
    });
    g.bench_function(
        format!("send_message_{}B_fresh_task_engine_answer", send.len()),
        |b| b.iter(|| black_box(through(&fresh_engine_gate, request(&send, "Bearer test")))),
    );
    g.bench_function("engine_alone", |b| {
        b.iter(|| black_box(direct(request(&send, "Bearer test"))))
    });
    g.bench_function(format!("send_message_{}B_engine_answer", send.len()), |b| {
        b.iter(|| black_box(through(&engine_gate, request(&send, "Bearer test"))))
    });
    g.bench_function("refused_401", |b| {
        b.iter(|| {
            let (status, body) = through(&gate, request(&send, "Bearer wrong"));
            debug_assert_eq!(status, 401);
            black_box(body)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
