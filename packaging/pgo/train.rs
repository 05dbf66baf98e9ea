//! The training run of a profile-guided build (`packaging/pgo-build.sh`), on its own: no nginx,
//! wrk, h2load or Python, so that a container's build stage can train the binary it builds.
//!
//!   cargo run --example pgo-train -- --edge target/pgo-gen/release/a2a-edge [--requests 60000]
//!
//! It starts `EDGE engine` (an agent on plain HTTP) and, in front of it, `EDGE serve` with dev
//! certificates, one principal per scheme (bearer, API key, Basic, a JWT signed here), a signed
//! card and a signed identity assertion for the agent (as the shipped default policy), then
//! sends what callers send, over HTTP/1.1 and HTTP/2 at once: mostly SendMessage, some
//! SendStreamingMessage (read to the end), GetTask, ListTasks, CancelTask, the Agent Card, and
//! requests the edge refuses (unknown method, bad params, a traversing workspace path, a wrong
//! token). With `--redis` (and `redis-server` on PATH) a third phase puts the edge's state in a
//! Redis of its own. Every process is stopped with SIGTERM, so that an instrumented binary
//! writes its profile as it exits. It fails when the edge answers what it should not (a
//! training that trained nothing is not a success), and prints what it sent.
//!
//! A phase is a number of requests (`--requests`, split evenly over the workers, each
//! sending its own fixed sequence of kinds), so that every training sends the same requests
//! whatever the machine's speed or load (a slow build machine trains as much as a fast one);
//! `--secs` makes each phase a duration instead. It does not make two PGO builds identical:
//! the profile also counts what follows the scheduling (polls, wake-ups, retries), and two
//! builds trained alike differ in a few hundred of the binary's 13,000 functions either way.
//! Both protocols must be served at comparable rates (within ten times), or the training
//! fails: a protocol served far slower would leave its code untrained.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

type Https = hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;
type Http = Client<Https, Full<Bytes>>;

const USAGE: &str = "usage: pgo-train --edge BINARY [--requests N | --secs N] [--connections N] [--redis] [--dir DIR]";

/// How long a phase lasts.
#[derive(Clone, Copy, Debug)]
enum Budget {
    /// This many requests in all, split evenly over the workers (the default: reproducible).
    Requests(u64),
    /// Requests until this many seconds have passed.
    Secs(u64),
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Requests(n) => write!(f, "{n} requests"),
            Budget::Secs(s) => write!(f, "{s} s"),
        }
    }
}

struct Args {
    edge: PathBuf,
    budget: Budget,
    connections: usize,
    redis: bool,
    dir: Option<PathBuf>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        edge: PathBuf::new(),
        budget: Budget::Requests(60_000),
        connections: 16,
        redis: false,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--edge" => a.edge = value("--edge")?.into(),
            "--secs" => {
                a.budget = Budget::Secs(
                    value("--secs")?
                        .parse()
                        .map_err(|e| format!("--secs: {e}"))?,
                )
            }
            "--requests" => {
                a.budget = Budget::Requests(
                    value("--requests")?
                        .parse()
                        .map_err(|e| format!("--requests: {e}"))?,
                )
            }
            "--connections" => {
                a.connections = value("--connections")?
                    .parse()
                    .map_err(|e| format!("--connections: {e}"))?
            }
            "--redis" => a.redis = true,
            "--dir" => a.dir = Some(value("--dir")?.into()),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if a.edge.as_os_str().is_empty() {
        return Err(format!("--edge is required\n{USAGE}"));
    }
    let budget = match a.budget {
        Budget::Requests(n) | Budget::Secs(n) => n,
    };
    if budget == 0 || a.connections == 0 {
        return Err("--requests, --secs and --connections must be at least 1".into());
    }
    Ok(a)
}

/// A child process stopped with SIGTERM when dropped (an instrumented binary writes its
/// profile at a normal exit; SIGKILL would lose it).
struct Process {
    name: &'static str,
    child: Child,
}

impl Process {
    fn start(name: &'static str, cmd: &mut Command, log: &Path) -> Result<Process, String> {
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Process { name, child })
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then up to 60 s for a clean exit (a drain, the profile written).
    fn stop(&mut self) -> Result<(), String> {
        if !self.running() {
            return Err(format!("{} exited before it was stopped", self.name));
        }
        self.terminate();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("{} exited with {status}", self.name))
                };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(format!("{} did not exit within 60 s of SIGTERM", self.name))
    }
}

impl Process {
    /// SIGTERM by the shell's `kill` builtin (std sends only SIGKILL; no procps needed).
    fn terminate(&self) {
        let _ = Command::new("sh")
            .args([
                "-c",
                "kill -TERM \"$1\"",
                "sh",
                &self.child.id().to_string(),
            ])
            .status();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.running() {
            self.terminate();
            let _ = self.child.wait();
        }
    }
}

/// Waits up to 60 s for `find` to see something in `file`, while `process` runs.
fn wait_for<T>(
    process: &mut Process,
    file: &Path,
    find: impl Fn(&str) -> Option<T>,
) -> Result<T, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(found) = std::fs::read_to_string(file)
            .ok()
            .as_deref()
            .and_then(&find)
        {
            return Ok(found);
        }
        if !process.running() {
            let log = std::fs::read_to_string(file).unwrap_or_default();
            return Err(format!("{} exited early:\n{log}", process.name));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{} was not ready within 60 s", process.name))
}

/// A random token (a counter's value if the system has no randomness to give: the tokens
/// of a training run guard nothing but a loopback listener that lives for a minute).
fn random_token() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut b = [0u8; 24];
    if ring::rand::SecureRandom::fill(&SystemRandom::new(), &mut b).is_err() {
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        b[..8].copy_from_slice(&n.to_le_bytes());
        b[8..16].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    }
    URL_SAFE_NO_PAD.encode(b)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The callers' credentials, one per scheme, and the JWT issuer's key.
struct Credentials {
    bearer: String,
    api_key: String,
    basic_password: String,
    jwt_key: EcdsaKeyPair,
}

impl Credentials {
    fn new() -> Result<Credentials, String> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| format!("a P-256 key: {e}"))?;
        let jwt_key =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .map_err(|e| format!("the P-256 key: {e}"))?;
        Ok(Credentials {
            bearer: random_token(),
            api_key: random_token(),
            basic_password: random_token(),
            jwt_key,
        })
    }

    /// The issuer's public key as a JWKS (an uncompressed P-256 point: 0x04, x, y).
    fn jwks(&self) -> String {
        let point = self.jwt_key.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        serde_json::json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "train",
            "use": "sig", "alg": "ES256", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)}]})
        .to_string()
    }

    /// A fresh ES256 token for `sub` (one per request would be unusual; one per worker is
    /// what a client's token cache gives).
    fn jwt(&self, sub: &str) -> Result<String, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256","typ":"JWT","kid":"train"}"#);
        let claims = URL_SAFE_NO_PAD.encode(
            serde_json::json!({"iss": "https://issuer.train", "aud": "a2a-edge", "sub": sub,
                "iat": now, "exp": now + 3600, "tenant": "train", "groups": ["deployers"]})
            .to_string(),
        );
        let input = format!("{header}.{claims}");
        let sig = self
            .jwt_key
            .sign(&SystemRandom::new(), input.as_bytes())
            .map_err(|e| format!("an ES256 signature: {e}"))?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
    }

    fn env(&self) -> [(&'static str, &str); 3] {
        [
            ("TRAIN_BEARER", self.bearer.as_str()),
            ("TRAIN_API_KEY", self.api_key.as_str()),
            ("TRAIN_BASIC", self.basic_password.as_str()),
        ]
    }
}

fn policy(dir: &Path, upstream: &str, workspace: &Path, redis: Option<&str>) -> String {
    let d = dir.display();
    let w = workspace.display();
    let mut p = format!(
        r#"[server]
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:0/"

[tls]
dev = true
dev_dir = "{d}/certs"

[[upstreams]]
name = "agent"
url = "{upstream}"

[auth]
failures_per_minute = 1000000
failures_burst = 1000000
[[auth.bearer]]
principal = "train-bearer"
token_env = "TRAIN_BEARER"
tenant = "train"
groups = ["deployers"]
[[auth.basic]]
username = "train-basic"
password_env = "TRAIN_BASIC"
tenant = "train"
[auth.api_key]
header = "X-API-Key"
[[auth.api_key.keys]]
principal = "train-key"
key_env = "TRAIN_API_KEY"
tenant = "train"
[auth.jwt]
issuer = "https://issuer.train"
audience = "a2a-edge"
jwks_file = "{d}/jwks.json"
algorithms = ["ES256"]
principal_claim = "sub"
tenant_claim = "tenant"
groups_claim = "groups"
[auth.identity_assertion]
kid = "train-es256"

[card]
active_kid = "train-es256"
[[card.signing_keys]]
kid = "train-es256"
alg = "ES256"
private_key_file = "{d}/card-es256.pem"
generate_if_missing = true

[authz]
default = "deny"
[[authz.rules]]
name = "train"
tenants = ["train"]
methods = ["*"]
workspace_roots = ["{w}"]

[workspace]
allowed_roots = ["{w}"]

[limits]
requests_per_second = 1000000
burst = 1000000
client_ip_requests_per_second = 1000000
client_ip_burst = 1000000
max_in_flight_per_principal = 100000
"#
    );
    if let Some(url) = redis {
        p.push_str(&format!(
            "\n[state]\nbackend = \"redis\"\nredis_url = \"{url}\"\npage_token_secret_env = \"TRAIN_PAGE_SECRET\"\n"
        ));
    }
    p
}

/// What a caller sends.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Send,
    SendWorkspace,
    Stream,
    GetTask,
    ListTasks,
    CancelTask,
    Card,
    UnknownMethod,
    BadParams,
    Traversal,
    WrongToken,
}

/// How many of every 32 requests are of each kind.
const MIX: [(Kind, usize); 11] = [
    (Kind::Send, 15),
    (Kind::SendWorkspace, 2),
    (Kind::Stream, 4),
    (Kind::GetTask, 3),
    (Kind::ListTasks, 2),
    (Kind::CancelTask, 1),
    (Kind::Card, 1),
    (Kind::UnknownMethod, 1),
    (Kind::BadParams, 1),
    (Kind::Traversal, 1),
    (Kind::WrongToken, 1),
];

impl Kind {
    /// Whether the edge's answer is the expected one (status, and a result or the error).
    fn expected(self, status: u16, body: &[u8]) -> bool {
        let has = |needle: &str| body.windows(needle.len()).any(|w| w == needle.as_bytes());
        match self {
            Kind::Send | Kind::SendWorkspace | Kind::GetTask | Kind::ListTasks => {
                status == 200 && has("\"result\"")
            }
            // An answer or a JSON-RPC error (a finished task cannot be canceled).
            Kind::CancelTask => status == 200,
            Kind::Stream => status == 200 && has("data:"),
            Kind::Card => status == 200 && has("\"skills\"") && has("\"signatures\""),
            Kind::UnknownMethod | Kind::BadParams | Kind::Traversal => {
                status == 200 && has("\"error\"")
            }
            Kind::WrongToken => status == 401,
        }
    }
}

/// Who a worker is (its credentials, by scheme).
#[derive(Clone)]
enum Caller {
    Bearer(String),
    ApiKey(String),
    Basic(String),
    Jwt(String),
}

struct Load {
    url: String,
    card: String,
    workspace: String,
    /// The phase's end: a time, or each worker's number of requests.
    until: Until,
    counts: Mutex<BTreeMap<(Kind, &'static str), u64>>,
    unexpected: Mutex<Vec<String>>,
}

fn message(id: u64, text: &str, metadata: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"messageId": format!("train-{id}-{}", random_token()), "role": "ROLE_USER",
        "parts": [{"text": text}], "metadata": metadata})
}

fn rpc(id: u64, method: &str, params: serde_json::Value) -> Vec<u8> {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

#[derive(Clone, Copy)]
enum Until {
    Deadline(Instant),
    Each(u64),
}

/// Sends the phase's requests over `http`; returns its protocol and how many it sent.
async fn worker(
    http: Http,
    proto: &'static str,
    caller: Caller,
    n: usize,
    load: Arc<Load>,
) -> (&'static str, u64) {
    let text = "training payload: lorem ipsum dolor sit amet ".repeat(20);
    let mix: Vec<Kind> = MIX
        .iter()
        .flat_map(|&(kind, n)| std::iter::repeat(kind).take(n))
        .collect();
    let mut tasks: VecDeque<String> = VecDeque::new();
    let mut i = n as u64 * 7919;
    let mut sent = 0u64;
    while match load.until {
        Until::Deadline(at) => Instant::now() < at,
        Until::Each(count) => sent < count,
    } {
        sent += 1;
        i += 1;
        let mut kind = mix[(i % mix.len() as u64) as usize];
        let task = tasks.back().cloned().unwrap_or_default();
        if task.is_empty() && matches!(kind, Kind::GetTask | Kind::CancelTask) {
            // Nothing to ask about yet: a task first.
            kind = Kind::Send;
        }
        let body = match kind {
            Kind::Send => rpc(
                i,
                "SendMessage",
                serde_json::json!({"message": message(i, &text, serde_json::json!({"train": proto})),
                "configuration": {"acceptedOutputModes": ["text/plain"]}}),
            ),
            Kind::SendWorkspace => rpc(
                i,
                "SendMessage",
                serde_json::json!({"message":
                message(i, "plan", serde_json::json!({"iac_code": {"cwd": load.workspace}}))}),
            ),
            Kind::Stream => rpc(
                i,
                "SendStreamingMessage",
                serde_json::json!({"message": message(i, &text, serde_json::json!({}))}),
            ),
            Kind::GetTask => rpc(
                i,
                "GetTask",
                serde_json::json!({"id": task, "historyLength": 2}),
            ),
            Kind::ListTasks => rpc(i, "ListTasks", serde_json::json!({"pageSize": 5})),
            Kind::CancelTask => rpc(i, "CancelTask", serde_json::json!({"id": task})),
            Kind::Card => Vec::new(),
            Kind::UnknownMethod => rpc(i, "tasks/frobnicate", serde_json::json!({})),
            Kind::BadParams => rpc(
                i,
                "SendMessage",
                serde_json::json!({"message": {"role": "ROLE_USER"}}),
            ),
            Kind::Traversal => rpc(
                i,
                "SendMessage",
                serde_json::json!({"message":
                message(i, "plan", serde_json::json!({"iac_code": {"cwd": format!("{}/../../etc", load.workspace)}}))}),
            ),
            Kind::WrongToken => rpc(
                i,
                "SendMessage",
                serde_json::json!({"message": message(i, "x", serde_json::json!({}))}),
            ),
        };
        let mut req = hyper::Request::builder();
        req = if kind == Kind::Card {
            req.method("GET").uri(&load.card)
        } else {
            req.method("POST")
                .uri(&load.url)
                .header("content-type", "application/json")
                .header("a2a-version", "1.0")
        };
        req = match (&caller, kind) {
            (_, Kind::WrongToken) => req.header("authorization", "Bearer not-a-token"),
            (Caller::Bearer(t), _) => req.header("authorization", format!("Bearer {t}")),
            (Caller::Jwt(t), _) => req.header("authorization", format!("Bearer {t}")),
            (Caller::ApiKey(k), _) => req.header("x-api-key", k.as_str()),
            (Caller::Basic(b), _) => req.header("authorization", format!("Basic {b}")),
        };
        let Ok(req) = req.body(Full::new(Bytes::from(body))) else {
            continue;
        };
        let outcome = match http.request(req).await {
            // The protocol too: a training meant for both must not fall back to one.
            Ok(resp) if (resp.version() == hyper::Version::HTTP_2) != (proto == "HTTP/2") => Err(
                format!("{kind:?} over {proto}: answered over {:?}", resp.version()),
            ),
            Ok(resp) => {
                let status = resp.status().as_u16();
                match resp.into_body().collect().await {
                    Ok(b) => {
                        let b = b.to_bytes();
                        if kind == Kind::Send && status == 200 {
                            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&b) {
                                if let Some(id) =
                                    v.pointer("/result/task/id").and_then(|v| v.as_str())
                                {
                                    tasks.push_back(id.to_owned());
                                    if tasks.len() > 64 {
                                        tasks.pop_front();
                                    }
                                }
                            }
                        }
                        if kind.expected(status, &b) {
                            Ok(())
                        } else {
                            Err(format!(
                                "{kind:?} over {proto}: HTTP {status}: {}",
                                String::from_utf8_lossy(&b[..b.len().min(300)])
                            ))
                        }
                    }
                    Err(e) => Err(format!("{kind:?} over {proto}: reading the body: {e}")),
                }
            }
            Err(e) => Err(format!("{kind:?} over {proto}: {e}")),
        };
        let key = (
            kind,
            if outcome.is_ok() {
                "as expected"
            } else {
                "unexpected"
            },
        );
        *lock(&load.counts).entry(key).or_default() += 1;
        if let Err(e) = outcome {
            let mut u = lock(&load.unexpected);
            if u.len() < 10 {
                u.push(e);
            }
        }
    }
    (proto, sent)
}

fn client(ca: &Path, h2: bool) -> Result<Http, String> {
    // The edge's own client configuration (its provider, TLS 1.3 and 1.2); ALPN is the
    // connector's.
    let tls = a2a_edge::tls::client_config(ca, &[]).map_err(|e| e.to_string())?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*tls).clone())
        .https_only();
    // TCP_NODELAY, as callers' clients set it: hyper's HTTP/2 client writes a request's
    // HEADERS and DATA in two TLS records, and without it the second waits for the edge's
    // delayed ACK (40 ms on Linux) once the connection leaves quick-ACK mode: the HTTP/2
    // workers then sent about 24 requests a second each and trained next to nothing.
    let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let mut builder = Client::builder(TokioExecutor::new());
    Ok(if h2 {
        builder.http2_only(true);
        builder.build(connector.enable_http2().wrap_connector(tcp))
    } else {
        builder.build(connector.enable_http1().wrap_connector(tcp))
    })
}

/// One phase: an edge in front of `upstream` (state in Redis at `redis`, if any), driven for
/// the budget's requests or seconds over HTTP/1.1 and HTTP/2 at once, then stopped.
fn phase(a: &Args, dir: &Path, upstream: &str, redis: Option<&str>) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(workspace.join("project")).map_err(|e| e.to_string())?;
    let workspace = workspace.canonicalize().map_err(|e| e.to_string())?;
    let creds = Credentials::new()?;
    std::fs::write(dir.join("jwks.json"), creds.jwks()).map_err(|e| e.to_string())?;
    let policy_file = dir.join("policy.toml");
    std::fs::write(&policy_file, policy(dir, upstream, &workspace, redis))
        .map_err(|e| e.to_string())?;
    let ready = dir.join("ready.json");
    let mut cmd = Command::new(&a.edge);
    cmd.arg("serve")
        .arg("--policy")
        .arg(&policy_file)
        .arg("--ready-file")
        .arg(&ready)
        .envs(creds.env())
        .env("TRAIN_PAGE_SECRET", random_token());
    let log = dir.join("edge.log");
    let mut edge = Process::start("a2a-edge serve", &mut cmd, &log)?;
    let url = wait_for(&mut edge, &ready, |text| {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(v.get("public_url")?.as_str()?.to_owned())
    })?;
    let load = Arc::new(Load {
        card: format!("{url}.well-known/agent-card.json"),
        url,
        workspace: workspace.join("project").display().to_string(),
        until: match a.budget {
            Budget::Secs(s) => Until::Deadline(Instant::now() + Duration::from_secs(s)),
            // Rounded up: at least the budget, the same number for every worker.
            Budget::Requests(n) => Until::Each(n.div_ceil(a.connections as u64)),
        },
        counts: Mutex::default(),
        unexpected: Mutex::default(),
    });
    let ca = dir.join("certs/ca.pem");
    // HTTP/1.1 workers share one pool (a connection per request in flight); each HTTP/2
    // worker gets a client, so a connection, of its own (one shared client would multiplex
    // them all on one connection: not how h2load or real callers load the edge).
    let h1 = client(&ca, false)?;
    let mut clients = Vec::with_capacity(a.connections);
    for n in 0..a.connections {
        clients.push(if n % 2 == 0 {
            (h1.clone(), "HTTP/1.1")
        } else {
            (client(&ca, true)?, "HTTP/2")
        });
    }
    let basic = STANDARD.encode(format!("train-basic:{}", creds.basic_password));
    let callers = [
        Caller::Bearer(creds.bearer.clone()),
        Caller::Jwt(creds.jwt("train-jwt")?),
        Caller::ApiKey(creds.api_key.clone()),
        Caller::Bearer(creds.bearer.clone()),
        Caller::Basic(basic),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let began = Instant::now();
    // Per protocol: requests sent, and when its last worker was done.
    let mut protocols: BTreeMap<&'static str, (u64, f64)> = BTreeMap::new();
    rt.block_on(async {
        let mut all = tokio::task::JoinSet::new();
        for (n, (http, proto)) in clients.into_iter().enumerate() {
            let caller = callers[n % callers.len()].clone();
            all.spawn(worker(http, proto, caller, n, load.clone()));
        }
        while let Some(done) = all.join_next().await {
            if let Ok((proto, sent)) = done {
                let p = protocols.entry(proto).or_default();
                p.0 += sent;
                p.1 = began.elapsed().as_secs_f64();
            }
        }
    });
    drop(rt);
    edge.stop()?;
    let counts = lock(&load.counts).clone();
    let unexpected = lock(&load.unexpected).clone();
    let total: u64 = counts.values().sum();
    let bad: u64 = counts
        .iter()
        .filter(|((_, o), _)| *o == "unexpected")
        .map(|(_, n)| n)
        .sum();
    let mut report = String::new();
    let mut rates = Vec::new();
    for (proto, (sent, secs)) in &protocols {
        let rate = *sent as f64 / secs.max(0.001);
        rates.push(rate);
        report.push_str(&format!(
            "  {proto}: {sent} requests in {secs:.1} s ({rate:.0}/s)\n"
        ));
    }
    for ((kind, outcome), n) in &counts {
        report.push_str(&format!("  {kind:?} {outcome}: {n}\n"));
    }
    // A few unexpected answers (e.g. a stream cut by a --secs deadline) are not a failed training;
    // more than 1 % of them, or none at all sent, is.
    if total == 0 || bad * 100 > total {
        return Err(format!(
            "{bad} of {total} answers were unexpected:\n{report}  e.g. {unexpected:#?}\nedge log: {}",
            log.display()
        ));
    }
    // Both protocols trained, at comparable rates: one served ten times slower than the other
    // (e.g. a client waiting on delayed ACKs, as this driver's HTTP/2 workers did before they
    // set TCP_NODELAY) leaves its code all but untrained.
    let (slow, fast) = rates
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    if rates.len() > 1 && slow * 10.0 < fast {
        return Err(format!(
            "one protocol was served over ten times slower than the other:\n{report}edge log: {}",
            log.display()
        ));
    }
    Ok(format!(
        "{total} requests, {bad} unexpected, in {:.1} s\n{report}",
        began.elapsed().as_secs_f64()
    ))
}

fn run() -> Result<(), String> {
    let a = args()?;
    let scratch = match &a.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("a2a-edge-pgo-train-{}", std::process::id())),
    };
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let engine_log = scratch.join("engine.log");
    let mut engine = Process::start(
        "a2a-edge engine",
        Command::new(&a.edge).args(["engine", "--listen", "127.0.0.1:0"]),
        &engine_log,
    )?;
    let upstream = wait_for(&mut engine, &engine_log, |text| {
        let at = text.find("engine listening on ")? + "engine listening on ".len();
        Some(text[at..].lines().next()?.trim().to_owned())
    })?;
    let started = Instant::now();
    say(format_args!("pgo-train: memory state, {}\n", a.budget));
    say(phase(&a, &scratch.join("memory"), &upstream, None)?);
    if a.redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let redis_dir = scratch.join("redis");
        std::fs::create_dir_all(&redis_dir).map_err(|e| e.to_string())?;
        let redis_log = redis_dir.join("redis.log");
        let mut redis = Process::start(
            "redis-server",
            Command::new("redis-server")
                .args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(&redis_dir),
            &redis_log,
        )?;
        wait_for(&mut redis, &redis_log, |t| {
            t.contains("Ready to accept").then_some(())
        })?;
        say(format_args!("pgo-train: state in Redis, {}\n", a.budget));
        let url = format!("redis://127.0.0.1:{port}/0");
        say(phase(
            &a,
            &scratch.join("redis-state"),
            &upstream,
            Some(&url),
        )?);
        redis.stop()?;
    }
    engine.stop()?;
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    say(format_args!(
        "pgo-train: done in {} s\n",
        started.elapsed().as_secs()
    ));
    Ok(())
}

/// Writes to standard output; a closed one (`| head`) does not stop the training, which is
/// what the build needs (print! would panic on the broken pipe).
fn say(text: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{text}").and_then(|()| out.flush());
}

fn main() {
    if let Err(e) = run() {
        eprintln!("pgo-train: {e}");
        std::process::exit(1);
    }
}
