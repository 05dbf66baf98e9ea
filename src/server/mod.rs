//! The listener: accept loop, TLS handshake with a deadline, one hyper server for HTTP/1.1
//! and HTTP/2, and a graceful drain on shutdown; the admin listener beside it. Knows nothing
//! of A2A.

mod activity;
mod admin;
pub mod workers;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::auth::mtls::peer_identity;
use crate::body::BoxBody;
use crate::engine::{Engine, EngineConfig};
use crate::gate::Gates;
use crate::gate::Process;
use crate::gate::{ConnInfo, Gate};
use crate::limits::connections::ConnectionsPerClient;
use crate::policy::ClientAuth;
use crate::policy::Policy;
use crate::reason;
use crate::state::ownership::Ownership;
use crate::state::redis::RedisStore;
use crate::state::registry::TaskRegistry;
use crate::state::shared::SharedOwners;
use crate::telemetry;
use crate::telemetry::metrics::{ConnectionOutcome, Metrics};
use crate::tls;
use crate::tls::client_auth::{server_config_with_client_auth, ClientAuthMode, ClientTrust};
use crate::upstream::LocalAgent;
use activity::{hold_until_body_done, Activity, Unused};
use rustls::pki_types::CertificateDer;
use workers::Workers;

type HandlerFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<http::Response<BoxBody>, Infallible>> + Send>,
>;

/// The proxy could not start. The message names files and keys, never secrets.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// A running proxy.
pub struct Running {
    pub local_addr: SocketAddr,
    /// `server.public_url` with a port 0 replaced by the bound port.
    pub public_url: url::Url,
    /// Set when `tls.dev = true`.
    pub dev_certs: Option<tls::dev::DevCerts>,
    /// The admin listener's address, when `server.admin_listen` is set.
    pub admin_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
    gates: Gates,
    /// The TLS settings new connections get (certificate rotation by reload).
    acceptors: watch::Sender<Acceptor>,
    /// The settings a reload cannot change, as started.
    fixed: FixedAtStart,
    /// What outlives a policy: ownership, counters, the embedded engine, the shared store.
    process: Process,
}

/// The embedded engine as one kind of agent of the fleet.
struct EmbeddedEngine(Arc<Engine>);

impl LocalAgent for EmbeddedEngine {
    fn handle(
        &self,
        req: http::Request<bytes::Bytes>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = http::Response<BoxBody>> + Send + '_>>
    {
        Box::pin(self.0.handle(req))
    }
}

impl Running {
    /// Stops accepting, lets in-flight requests and streams finish (up to the drain timeout).
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Applies a new policy to every request from now on (credentials, validation rules,
    /// card keys, upstreams) and its TLS certificate, key and client-certificate settings to
    /// every new connection (open connections keep theirs). The listeners and `[server]`
    /// settings stay as started. A policy that cannot be applied, in any part, leaves the
    /// running one in force.
    ///
    /// Returns the keys the new policy changes that only a restart applies (listeners,
    /// connection settings, the registry's size), so that the operator hears of them.
    pub async fn reload(&self, policy: Policy) -> Result<Vec<&'static str>, StartError> {
        let ignored = self.fixed.changed_by(&policy);
        let acceptor = tls_acceptor(&policy);
        if acceptor.is_err() {
            self.process.metrics.reload(false);
        }
        let (acceptor, _) = acceptor?;
        let in_force = self.acceptors.borrow().clone();
        if let Err(e) = in_time(&acceptor, Some(&in_force)) {
            self.process.metrics.reload(false);
            return Err(e);
        }
        let previous = self.gates.load();
        let port = self.local_addr.port();
        let gate = Gate::new(
            &policy,
            &self.public_url,
            port,
            &self.process,
            Some(&previous),
        )
        .await
        .map_err(StartError);
        if gate.is_err() {
            self.process.metrics.reload(false);
        }
        let gate = Arc::new(gate?);
        // (A stop meanwhile drops this future: no reload took effect, none is counted.)
        gate.refresh_card().await;
        // The acceptor first: a connection accepted once the new gate is in force is
        // handshaken with the new client CAs (the accept loop takes the reloads, then the
        // acceptor).
        publish_deadlines(&acceptor, &self.process.metrics);
        self.acceptors.send_replace(acceptor);
        self.gates.replace(gate);
        self.process.metrics.reload(true);
        Ok(ignored)
    }

    /// The process's counters (for a reload refused before it reached [`Running::reload`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.process.metrics
    }

    /// Waits until the server has drained and stopped.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// The state store as started (the whole `[state]` table; secrets by digest).
#[derive(Debug, Clone, PartialEq)]
struct StoreAtStart {
    backend: String,
    /// Redis's URL, key prefix, timeout, retention and leases.
    redis: Option<String>,
    page_token_secret: Option<[u8; 32]>,
    /// Redis's password and CA certificates: its connections are made with them at start.
    redis_credentials: Option<[u8; 32]>,
}

/// What a reload leaves as started: the listeners, the per-connection settings the accept
/// loop was built with, and the registry (which outlives policies).
#[derive(Debug, Clone, PartialEq)]
struct FixedAtStart {
    listen: SocketAddr,
    public_url: url::Url,
    admin_listen: Option<SocketAddr>,
    conn: ConnSettings,
    max_registry_entries: usize,
    /// The state store and its key.
    state: StoreAtStart,
    /// Logs and traces are set up once, for the process.
    telemetry: crate::policy::TelemetryPolicy,
}

impl FixedAtStart {
    fn of(policy: &Policy) -> FixedAtStart {
        FixedAtStart {
            listen: policy.server.listen,
            public_url: policy.server.public_url.clone(),
            admin_listen: policy.server.admin_listen,
            conn: ConnSettings::of(policy),
            max_registry_entries: policy.limits.max_registry_entries,
            state: StoreAtStart {
                backend: policy.state.backend().to_string(),
                redis: policy.state.redis.as_ref().map(|r| {
                    format!(
                        "{} {} {:?} {:?} {:?} {} {:?} {}",
                        r.url,
                        r.key_prefix,
                        r.timeout,
                        policy.state.task_retention,
                        policy.state.busy_lease,
                        r.rate_lease_max,
                        r.rate_lease,
                        policy.state.max_tasks_per_owner
                    )
                }),
                page_token_secret: policy
                    .state
                    .page_token_secret
                    .as_ref()
                    .map(|s| crate::crypto::sha256(s.as_bytes())),
                redis_credentials: policy.state.redis.as_ref().map(|r| {
                    let password = r.password.as_deref().unwrap_or("");
                    let ca = r.ca_pem.as_deref().unwrap_or(b"");
                    let mut both = (password.len() as u64).to_be_bytes().to_vec();
                    both.extend_from_slice(password.as_bytes());
                    both.extend_from_slice(ca);
                    crate::crypto::sha256(&both)
                }),
            },
            telemetry: policy.telemetry.clone(),
        }
    }

    /// The policy keys whose new values a reload does not apply.
    fn changed_by(&self, policy: &Policy) -> Vec<&'static str> {
        let new = FixedAtStart::of(policy);
        let (a, b) = (&self.conn, &new.conn);
        [
            ("server.listen", self.listen != new.listen),
            ("telemetry", self.telemetry != new.telemetry),
            ("server.public_url", self.public_url != new.public_url),
            ("server.admin_listen", self.admin_listen != new.admin_listen),
            (
                "server.drain_timeout_ms",
                a.drain_timeout != b.drain_timeout,
            ),
            (
                "server.tls_handshake_timeout_ms",
                a.handshake_timeout != b.handshake_timeout,
            ),
            (
                "server.max_header_bytes",
                a.max_header_bytes != b.max_header_bytes,
            ),
            ("server.send_buffer_bytes", a.send_buffer != b.send_buffer),
            (
                "limits.header_read_timeout_ms",
                a.header_read_timeout != b.header_read_timeout,
            ),
            ("limits.idle_timeout_ms", a.idle_timeout != b.idle_timeout),
            (
                "limits.write_timeout_ms",
                a.write_timeout != b.write_timeout,
            ),
            ("limits.max_headers", a.max_headers != b.max_headers),
            (
                "limits.max_h2_streams_per_connection",
                a.max_h2_streams != b.max_h2_streams,
            ),
            (
                "limits.max_connections",
                a.max_connections != b.max_connections,
            ),
            (
                "limits.max_connections_per_client",
                a.max_connections_per_client != b.max_connections_per_client,
            ),
            (
                "limits.client_ipv6_prefix (connections per client)",
                a.client_ipv6_prefix != b.client_ipv6_prefix,
            ),
            (
                "limits.max_registry_entries",
                self.max_registry_entries != new.max_registry_entries,
            ),
            ("state", self.state != new.state),
        ]
        .into_iter()
        .filter_map(|(key, changed)| changed.then_some(key))
        .collect()
    }
}

/// A TLS acceptor, and which client certificates it admits.
#[derive(Clone)]
struct Acceptor {
    tls: TlsAcceptor,
    trust: ClientTrust,
    /// Every client must present a certificate (`tls.client_auth = "required"`).
    requires_certificate: bool,
    /// When the chain it serves is valid for clients ([`tls::der::Validity`]).
    certificate: tls::der::Validity,
}

/// The TLS acceptor of `policy` (dev certificates generated when missing): certificate, key
/// and client-certificate settings read from their files now.
fn tls_acceptor(policy: &Policy) -> Result<(Acceptor, Option<tls::dev::DevCerts>), StartError> {
    let dev_certs = match &policy.tls.dev_dir {
        Some(dir) => Some(tls::dev::ensure(dir).map_err(|e| StartError(e.to_string()))?),
        None => None,
    };
    let mode = match policy.tls.client_auth {
        ClientAuth::Off => ClientAuthMode::Off,
        ClientAuth::Optional => ClientAuthMode::Optional,
        ClientAuth::Required => ClientAuthMode::Required,
    };
    let (config, trust, certificate) = server_config_with_client_auth(
        &policy.tls.cert_file,
        &policy.tls.key_file,
        mode,
        policy.tls.client_ca_file.as_deref(),
        policy.tls.client_crl_file.as_deref(),
    )
    .map_err(|e| StartError(e.to_string()))?;
    let tls = TlsAcceptor::from(config);
    let acceptor = Acceptor {
        tls,
        trust,
        requires_certificate: mode == ClientAuthMode::Required,
        certificate,
    };
    Ok((acceptor, dev_certs))
}

/// TLS settings out of time: a served certificate past its `notAfter`, or before its
/// `notBefore` (beyond [`NOT_BEFORE_SKEW_SECS`]), fails every handshake a client checks, and
/// client CRLs past their `nextUpdate` refuse every client certificate. A reload that brings
/// such settings while those in force are still good is refused: it would cut every client
/// off, and the settings in force stay. Without good ones to keep (at start, or the ones in
/// force ran out too, or serve no client: their certificate is out of time) they are taken,
/// and said loudly once in force ([`publish_deadlines`]): refusing would only block the
/// reload (or the start) that brings the next policy.
fn in_time(new: &Acceptor, in_force: Option<&Acceptor>) -> Result<(), StartError> {
    let deadlines = |a: &Acceptor| Deadlines {
        certificate: a.certificate,
        crls: a.trust.crls_run_out(),
    };
    match out_of_time(
        deadlines(new),
        in_force.map(deadlines),
        crate::time::now_secs(),
    ) {
        Some(refusal) => Err(StartError(refusal)),
        None => Ok(()),
    }
}

/// The deadlines of TLS settings that [`in_time`] checks (seconds since the epoch).
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    /// When the served chain is valid for clients.
    certificate: tls::der::Validity,
    /// When the client CRLs run out (their earliest `nextUpdate`; `None`: no CRLs).
    crls: Option<u64>,
}

/// Why settings with `new` deadlines may not replace those in force (`in_force`) at `now`
/// ([`in_time`]), or `None`.
fn out_of_time(new: Deadlines, in_force: Option<Deadlines>, now: u64) -> Option<String> {
    // Settings whose certificate serves no client have nothing to keep.
    let in_force = in_force.filter(|f| serves_now(f.certificate, now))?;
    let date = crate::time::format_http_date;
    if let Some(from) = new.certificate.not_before.filter(|&f| too_early(f, now)) {
        return Some(format!(
            "the certificate in tls.cert_file is not valid before {} (its notBefore: every \
             client would refuse the handshake until then; reload it then (the certificate \
             in force stays))",
            date(from)
        ));
    }
    if let Some(until) = new.certificate.not_after.filter(|&u| u <= now) {
        return Some(format!(
            "the certificate in tls.cert_file expired at {} (its notAfter: every client \
             would refuse the handshake; renew it (the certificate in force stays))",
            date(until)
        ));
    }
    let run_out = |crls: Option<u64>| crls.filter(|&u| u <= now);
    match run_out(new.crls) {
        Some(at) if run_out(in_force.crls).is_none() => Some(format!(
            "the client CRLs in tls.client_crl_file ran out at {} (their nextUpdate: every \
             client certificate would be refused; publish the next CRL (the CRLs in force \
             stay))",
            date(at)
        )),
        _ => None,
    }
}

/// How far past this clock a served certificate's `notBefore` may be and still count as
/// valid now: clocks differ, and a certificate just issued by a CA whose clock is a little
/// ahead would otherwise be refused for seconds.
const NOT_BEFORE_SKEW_SECS: u64 = 300;

/// Whether a served certificate's `notBefore` (`from`) is still to come at `now`, beyond
/// [`NOT_BEFORE_SKEW_SECS`].
fn too_early(from: u64, now: u64) -> bool {
    from > now.saturating_add(NOT_BEFORE_SKEW_SECS)
}

/// Whether a served chain valid over `v` is valid for clients at `now`.
fn serves_now(v: tls::der::Validity, now: u64) -> bool {
    !v.not_before.is_some_and(|f| too_early(f, now)) && v.not_after.map_or(true, |u| u > now)
}

/// Says when the TLS settings now in force run out, in the log and the gauges (operators
/// alert on them): the served chain, the client CAs, the client CRLs; and loudly what is
/// past it already ([`in_time`] took it). A client CA past its `notAfter` still admits its
/// clients (rustls-webpki does not check a trust anchor's validity): a warning, to replace
/// it.
fn publish_deadlines(acceptor: &Acceptor, metrics: &Metrics) {
    let trust = &acceptor.trust;
    metrics.set_client_crls_run_out(trust.crls_run_out());
    let served = acceptor.certificate;
    metrics.set_certificates_expire(served.not_after, trust.cas_expire());
    let date = |t: u64| crate::time::format_http_date(t);
    let now = crate::time::now_secs();
    tracing::info!(
        event = "tls_certificates_loaded",
        not_before = served.not_before.map(date).as_deref(),
        not_after = served.not_after.map(date).as_deref(),
        client_ca_not_after = trust.cas_expire().map(date).as_deref()
    );
    if let Some(from) = served.not_before.filter(|&f| too_early(f, now)) {
        tracing::error!(
            event = "server_certificate_not_yet_valid",
            not_before = %date(from),
            "clients refuse the edge's handshake until its notBefore, or a reload that \
             brings a certificate in time"
        );
    }
    if let Some(at) = served.not_after.filter(|t| *t <= now) {
        tracing::error!(
            event = "server_certificate_expired",
            not_after = %date(at),
            "clients refuse the edge's handshake until a reload brings a certificate in time"
        );
    }
    if let Some(until) = trust.crls_run_out() {
        tracing::info!(event = "client_crls_loaded", next_update = %date(until));
        if until <= now {
            tracing::error!(
                event = "client_crls_expired",
                next_update = %date(until),
                "every client certificate is refused until a reload brings CRLs in time"
            );
        }
    }
    if let Some(at) = trust.cas_expire().filter(|t| *t <= now) {
        tracing::warn!(
            event = "client_ca_expired",
            not_after = %date(at),
            "a client CA in tls.client_ca_file has expired: it still admits its clients \
             (a trust anchor's validity is not checked); replace it"
        );
    }
}

/// Binds the listener and starts serving `policy`.
pub async fn start(policy: Policy) -> Result<Running, StartError> {
    telemetry::request_id::init();
    let (acceptor, dev_certs) = tls_acceptor(&policy)?;
    let listener = TcpListener::bind(policy.server.listen)
        .await
        .map_err(|e| StartError(format!("cannot listen on {}: {e}", policy.server.listen)))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| StartError(format!("listener address: {e}")))?;
    let mut public_url = policy.server.public_url.clone();
    if public_url.port() == Some(0) {
        public_url
            .set_port(Some(local_addr.port()))
            .map_err(|_| StartError("server.public_url: cannot set the port".into()))?;
    }
    let admin = match policy.server.admin_listen {
        Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| {
            StartError(format!(
                "cannot listen on {addr} (server.admin_listen): {e}"
            ))
        })?),
        None => None,
    };
    let admin_addr = match &admin {
        Some(l) => Some(
            l.local_addr()
                .map_err(|e| StartError(format!("admin listener address: {e}")))?,
        ),
        None => None,
    };
    let registry = TaskRegistry::with_key(
        policy.limits.max_registry_entries,
        policy.state.page_token_secret.as_deref(),
    );
    in_time(&acceptor, None)?;
    let metrics = Arc::new(Metrics::new());
    publish_deadlines(&acceptor, &metrics);
    let engine: Arc<dyn LocalAgent> =
        Arc::new(EmbeddedEngine(Engine::new(EngineConfig::default())));
    let shared = match &policy.state.redis {
        Some(config) => Some(Arc::new(
            RedisStore::new(config.clone(), metrics.clone()).map_err(StartError)?,
        )),
        None => None,
    };
    let owners = shared.as_ref().map(|store| {
        Arc::new(SharedOwners::new(
            store.clone(),
            policy.state.busy_lease,
            policy.state.task_retention,
            policy.state.max_tasks_per_owner,
        ))
    });
    let process = Process {
        owners: Ownership::new(registry, owners),
        metrics: metrics.clone(),
        local_agent: Some(engine),
        shared,
    };
    let gate = Arc::new(
        Gate::new(&policy, &public_url, local_addr.port(), &process, None)
            .await
            .map_err(StartError)?,
    );
    let gates = Gates::new(gate.clone());
    let (shutdown, shutdown_rx) = watch::channel(false);
    // The card is published before the first request and kept fresh in the background.
    gate.refresh_card().await;
    tokio::spawn(card_refresher(gates.clone(), shutdown_rx.clone()));
    tokio::spawn(health_checker(gates.clone(), shutdown_rx.clone()));
    let settings = ConnSettings::of(&policy);
    if let (Some(asked), Some(kernel)) = (settings.send_buffer, settings.send_buffer_capped()) {
        tracing::warn!(
            event = "send_buffer_capped",
            asked,
            kernel,
            "server.send_buffer_bytes is above the kernel's net.core.wmem_max: each connection gets the kernel's maximum"
        );
    }
    let fixed = FixedAtStart::of(&policy);
    // The admin listener outlives the drain (so /ready says 503 meanwhile) and stops after it.
    let (admin_stop, admin_stop_rx) = watch::channel(false);
    let admin_task = admin.map(|l| {
        tokio::spawn(admin::serve(
            l,
            gates.clone(),
            metrics.clone(),
            admin_stop_rx,
        ))
    });
    let (acceptors, acceptor_rx) = watch::channel(acceptor);
    let serving = accept_loop(
        listener,
        acceptor_rx,
        gates.clone(),
        settings,
        shutdown_rx,
        metrics.clone(),
    );
    let task = tokio::spawn(async move {
        serving.await;
        let _ = admin_stop.send(true);
        if let Some(t) = admin_task {
            let _ = t.await;
        }
    });
    Ok(Running {
        local_addr,
        public_url,
        dev_certs,
        admin_addr,
        shutdown,
        task,
        gates,
        acceptors,
        fixed,
        process,
    })
}

/// Checks every agent's health at the policy's interval, and at once after a reload (a new
/// agent that is down is then known before it is sent a context).
async fn health_checker(gates: Gates, mut shutdown: watch::Receiver<bool>) {
    let mut reloads = gates.reloads();
    loop {
        reloads.borrow_and_update();
        let gate = gates.load();
        let interval = gate.health_interval();
        let started = tokio::time::Instant::now();
        // Every agent at once, each check within one interval: an agent that does not answer
        // before its next check is due has failed it, and a round lasts no longer, so one
        // silent agent cannot hold up the checks (and the ejection) of the others.
        let mut checks = tokio::task::JoinSet::new();
        for fleet in gate.fleets() {
            for agent in fleet.agents() {
                let agent = agent.clone();
                checks.spawn(async move { agent.check(interval).await });
            }
        }
        while checks.join_next().await.is_some() {}
        gate.check_state().await;
        tokio::select! {
            _ = tokio::time::sleep_until(started + interval) => {}
            reloaded = reloads.changed() => if reloaded.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

/// Refreshes the cards of the gate in force every `card_refresh_interval`; a reload starts
/// the wait again with the new gate (its cards were fetched as it was built), so a removed
/// agent is not asked again and the new interval applies at once.
async fn card_refresher(gates: Gates, mut shutdown: watch::Receiver<bool>) {
    let mut reloads = gates.reloads();
    loop {
        reloads.borrow_and_update();
        let gate = gates.load();
        tokio::select! {
            _ = tokio::time::sleep(gate.card_refresh_interval()) => gate.refresh_card().await,
            reloaded = reloads.changed() => if reloaded.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct ConnSettings {
    handshake_timeout: Duration,
    drain_timeout: Duration,
    max_header_bytes: usize,
    header_read_timeout: Duration,
    max_headers: usize,
    max_h2_streams: u32,
    max_connections: usize,
    max_connections_per_client: usize,
    /// How IPv6 clients are grouped for `max_connections_per_client` (the rates' prefix).
    client_ipv6_prefix: u8,
    idle_timeout: Duration,
    write_timeout: Duration,
    /// Each connection's fixed `SO_SNDBUF` (`server.send_buffer_bytes`); `None`: autotuned.
    send_buffer: Option<usize>,
}

impl ConnSettings {
    fn of(policy: &Policy) -> ConnSettings {
        ConnSettings {
            handshake_timeout: policy.server.tls_handshake_timeout,
            drain_timeout: policy.server.drain_timeout,
            max_header_bytes: policy.server.max_header_bytes,
            header_read_timeout: policy.limits.header_read_timeout,
            max_headers: policy.limits.max_headers,
            max_h2_streams: policy.limits.max_h2_streams_per_connection,
            max_connections: policy.limits.max_connections,
            max_connections_per_client: policy.limits.max_connections_per_client,
            client_ipv6_prefix: policy.limits.rates.ipv6_prefix,
            idle_timeout: policy.limits.idle_timeout,
            write_timeout: policy.limits.write_timeout,
            send_buffer: policy.server.send_buffer_bytes,
        }
    }

    /// What the kernel gives a socket that asks for `server.send_buffer_bytes`, when that is
    /// less (`net.core.wmem_max` caps it; Linux reports twice what it grants).
    fn send_buffer_capped(&self) -> Option<usize> {
        let asked = self.send_buffer?;
        let probe =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
        probe.set_send_buffer_size(asked).ok()?;
        let granted = probe.send_buffer_size().ok()? / 2;
        (granted < asked).then_some(granted)
    }

    /// What every accepted connection's socket is set to: no Nagle delay (an answer's last
    /// segment is not held for the peer's ACK), and the fixed send buffer when one is set.
    fn tune(&self, tcp: &tokio::net::TcpStream) {
        let _ = tcp.set_nodelay(true);
        if let Some(bytes) = self.send_buffer {
            let _ = socket2::SockRef::from(tcp).set_send_buffer_size(bytes);
        }
    }
}

/// The connection builders, one per protocol (a connection's is decided by ALPN, or by its
/// first bytes when ALPN named none: [`crate::sniff`]).
struct Builders {
    /// What every connection is served with (shared: not copied into each one's task).
    settings: ConnSettings,
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
}

impl Builders {
    fn new(s: &ConnSettings) -> Builders {
        let mut http1 = hyper::server::conn::http1::Builder::new();
        // The header-read timeout also bounds an idle keep-alive connection (slowloris).
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(s.header_read_timeout)
            .max_buf_size(s.max_header_bytes.max(8192))
            .max_headers(s.max_headers)
            .keep_alive(true);
        let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        // Bounded streams, header lists (CONTINUATION floods end at the list size), and
        // resets (rapid reset, CVE-2023-44487): a peer that resets too many streams is dropped.
        http2
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(s.max_header_bytes).unwrap_or(u32::MAX))
            .max_concurrent_streams(s.max_h2_streams)
            .max_pending_accept_reset_streams(Some(64))
            .max_local_error_reset_streams(Some(256))
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        Builders {
            settings: *s,
            http1,
            http2,
        }
    }
}

/// What ALPN settled: `Some(true)` HTTP/2, `Some(false)` HTTP/1.1, `None` nothing known.
fn alpn_h2(alpn: Option<&[u8]>) -> Option<bool> {
    match alpn {
        Some(b"h2") => Some(true),
        Some(b"http/1.1") => Some(false),
        _ => None,
    }
}

/// What a connection holds while it is open: its places under the connection limits, the
/// drain's count, and the open-connections gauge.
type Held = (
    tokio::sync::OwnedSemaphorePermit,
    crate::limits::connections::ClientSlot,
    tokio::sync::mpsc::Sender<()>,
    crate::telemetry::metrics::OpenConnection,
);

/// The stream a connection is served over: the bytes a sniff read first, then the TLS
/// stream, whose peer loses the connection if it takes nothing for the write timeout.
type Stream = TokioIo<crate::sniff::Prefixed<crate::write_stall::WriteStall<TlsStream>>>;
type TlsStream = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// Serves one connection after its TLS handshake, until it closes, in a task of its own on
/// this worker: by hyper's HTTP/1.1 or HTTP/2 connection, as ALPN settled, or as the first
/// bytes tell when ALPN named none ([`crate::sniff`]). The connection is boxed at its protocol's
/// size (hyper-util's `auto` connection was sized for HTTP/2's state, 2.8 KiB, against 1.9
/// for HTTP/1.1: each SSE stream's connection holds 1 KiB less); the task holds it, the
/// timers and the limits' places.
#[allow(clippy::too_many_arguments)]
fn serve(
    tls: TlsStream,
    trust: ClientTrust,
    handshake_began: u64,
    peer: SocketAddr,
    policy: Policed,
    builders: Arc<Builders>,
    stop: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    held: Held,
) {
    let (_, session) = tls.get_ref();
    let h2 = alpn_h2(session.alpn_protocol());
    let conn = ConnInfo {
        peer,
        client_cert: session.peer_certificates().is_some_and(|c| !c.is_empty()),
        client_identity: peer_identity(session).map(Arc::from),
        gates: Some(policy.gates.clone()),
    };
    let activity = Activity::new();
    let svc = EdgeService {
        gates: policy.gates.clone(),
        conn,
        busy: activity.clone(),
    };
    let open = Open {
        activity,
        stop,
        admitted: Admitted {
            peer: peer.ip(),
            client_cert: client_chain(session, &trust, handshake_began),
            policy,
        },
        metrics,
        _held: held,
    };
    match h2 {
        Some(h2) => spawn_served(
            h2,
            stream(tls, Bytes::new(), &builders),
            svc,
            builders,
            open,
        ),
        None => {
            tokio::spawn(async move {
                let mut tls = Box::new(tls);
                let mut open = open;
                let first = builders.settings.header_read_timeout;
                // Within the first-request timeout, and not past shutdown.
                let sniffed = tokio::select! {
                    sniffed = tokio::time::timeout(first, crate::sniff::sniff(&mut *tls)) => sniffed,
                    _ = open.stop.wait_for(|s| *s) => return,
                };
                let (h2, prefix) = match sniffed {
                    Ok(Ok(sniffed)) => sniffed,
                    // Closed (or failed) before a request: nothing to answer.
                    Ok(Err(_)) => return,
                    Err(_) => {
                        open.metrics
                            .connection(ConnectionOutcome::FirstRequestTimeout);
                        return;
                    }
                };
                let io = stream(*tls, prefix, &builders);
                spawn_served(h2, io, svc, builders, open);
            });
        }
    }
}

/// The stream over the TLS stream, after `prefix` (what a sniff read).
fn stream(tls: TlsStream, prefix: Bytes, builders: &Builders) -> Stream {
    let io = crate::write_stall::WriteStall::new(tls, builders.settings.write_timeout);
    TokioIo::new(crate::sniff::Prefixed::new(prefix, io))
}

/// The connection's task (spawned, not awaited in the sniff's task: hyper's connections are
/// proven `Send` here, for concrete types).
fn spawn_served(h2: bool, io: Stream, svc: EdgeService, builders: Arc<Builders>, open: Open) {
    let connection = if h2 {
        Served::H2(Box::pin(builders.http2.serve_connection(io, svc)))
    } else {
        Served::H1(Box::pin(builders.http1.serve_connection(io, svc)))
    };
    tokio::spawn(drive(connection, builders, open));
}

/// hyper's connection, boxed at its protocol's size; one type for both, so that one task type
/// drives every connection (two would each have hyper's connection code inlined: a larger
/// binary, more of it faulted in).
enum Served {
    H1(Pin<Box<hyper::server::conn::http1::Connection<Stream, EdgeService>>>),
    H2(Pin<Box<hyper::server::conn::http2::Connection<Stream, EdgeService, TokioExecutor>>>),
}

impl Served {
    /// Finishes what runs and closes (HTTP/2: GOAWAY).
    fn graceful_shutdown(&mut self) {
        match self {
            Served::H1(c) => c.as_mut().graceful_shutdown(),
            Served::H2(c) => c.as_mut().graceful_shutdown(),
        }
    }
}

impl std::future::Future for Served {
    /// How the connection ended concerns that peer only.
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self.get_mut() {
            Served::H1(c) => c.as_mut().poll(cx).map(|_| ()),
            Served::H2(c) => c.as_mut().poll(cx).map(|_| ()),
        }
    }
}

/// One connection's service: each request goes to the gate of the policy in force now
/// (reloads), counted in flight on the connection until its body is done.
#[derive(Clone)]
struct EdgeService {
    gates: Gates,
    conn: ConnInfo,
    busy: Activity,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for EdgeService {
    type Response = http::Response<BoxBody>;
    type Error = Infallible;
    type Future = HandlerFuture;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> HandlerFuture {
        let gate = self.gates.load();
        let conn = self.conn.clone();
        let Some(in_flight) = self.busy.begin_if_open() else {
            // A connection a reload did not leave standing: retry on a new one.
            let refused = crate::gate::Rejection::Http {
                status: http::StatusCode::MISDIRECTED_REQUEST,
                message: "This connection is closing: retry on a new one",
                reason: reason::CONNECTION_OUTLIVED,
                allow: None,
            };
            return Box::pin(async move { Ok(gate.refuse(conn, req, refused).await) });
        };
        Box::pin(async move {
            let resp = gate.handle(conn, req).await;
            Ok(hold_until_body_done(resp, in_flight))
        })
    }
}

/// What a served connection holds besides hyper's connection.
struct Open {
    activity: Activity,
    stop: watch::Receiver<bool>,
    admitted: Admitted,
    metrics: Arc<Metrics>,
    _held: Held,
}

/// The policy a connection is accepted under, and the reloads since: taken at accept,
/// before the handshake's acceptor, so that a reload during the handshake is one the
/// connection has outlived ([`Admitted::outlived`]) rather than one it never saw.
struct Policed {
    gates: Gates,
    reloads: watch::Receiver<()>,
    acceptors: watch::Receiver<Acceptor>,
}

impl Policed {
    fn now(gates: &Gates, acceptors: &watch::Receiver<Acceptor>) -> Policed {
        Policed {
            reloads: gates.reloads(),
            gates: gates.clone(),
            acceptors: acceptors.clone(),
        }
    }
}

/// What a connection was admitted by, which a reload may change ([`Admitted::outlived`]).
struct Admitted {
    policy: Policed,
    peer: std::net::IpAddr,
    /// The certificate chain its client presented (none: `None`), verified in its
    /// handshake, with the fingerprint of the trust it was last verified under.
    client_cert: Option<ClientChain>,
}

/// A connection's client certificate chain (leaf first), kept to verify it again when a
/// reload changes the client trust, and the fingerprint of the trust it was last verified
/// under ([`ClientTrust::fingerprint`]).
struct ClientChain {
    /// Empty when the chain was larger than [`MAX_KEPT_CHAIN`]: then it is not kept, and a
    /// change of trust ends the connection (a new handshake verifies it).
    certs: Box<[CertificateDer<'static>]>,
    verified_under: [u8; 32],
    /// When it was last verified (seconds since the epoch).
    verified_at: u64,
    /// When its chain expires (the earliest `notAfter` of its certificates, seconds since
    /// the epoch; `None` when the edge cannot read one, and then only a reload that changes
    /// the trust ends it).
    expires: Option<u64>,
}

/// The most bytes of client certificates a connection keeps (a usual chain is 1 to 4 KiB;
/// a client may pad its chain with certificates no path uses, up to what a handshake takes).
const MAX_KEPT_CHAIN: usize = 16 * 1024;

/// The certificate chain a connection's client presented, owned (held by mTLS connections
/// only, at most [`MAX_KEPT_CHAIN`] bytes).
fn client_chain(
    session: &rustls::ServerConnection,
    trust: &ClientTrust,
    handshake_began: u64,
) -> Option<ClientChain> {
    let chain = session.peer_certificates().filter(|c| !c.is_empty())?;
    let size: usize = chain.iter().map(|c| c.len()).sum();
    let certs = if size <= MAX_KEPT_CHAIN {
        chain.iter().map(|c| c.clone().into_owned()).collect()
    } else {
        Box::default()
    };
    let expires = crate::tls::der::chain_expiry(chain, handshake_began);
    Some(ClientChain {
        expires,
        certs,
        verified_under: trust.fingerprint(),
        verified_at: crate::time::now_secs(),
    })
}

impl Admitted {
    /// Waits for a reload after which this connection may not go on as it was admitted:
    /// its peer's network is now denied (the accept loop checks only new connections), it
    /// carries a client certificate verified in its handshake under client CAs (or a mode)
    /// the reload changed: a new handshake verifies it under the new ones, or it carries
    /// none and the reload requires one (its handshake would now fail). Or its client
    /// certificate (or an intermediate it presented) expires: the connection is its
    /// credential, so it serves no request past that `notAfter` (its streams have
    /// [`OUTLIVED_GRACE`], as after a reload). Other
    /// connections go on: each request reads the gate in force anyway.
    async fn outlived(&mut self) {
        let expires = self.client_cert.as_ref().and_then(|c| c.expires);
        let expired = async move {
            match expires {
                // Valid through its notAfter's second (RFC 5280 §4.1.2.5).
                Some(at) => crate::time::sleep_until_secs(at.saturating_add(1)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = expired => {
                tracing::info!(event = "client_certificate_expired", client = %self.peer);
            }
            () = self.reloaded_out() => {}
        }
    }

    /// Waits for a reload after which this connection may not go on ([`Admitted::outlived`]).
    async fn reloaded_out(&mut self) {
        // (an error: the gates are gone, and the server with them)
        let Policed {
            gates,
            reloads,
            acceptors,
        } = &mut self.policy;
        while reloads.changed().await.is_ok() {
            // A reload swaps the acceptor before the gate: this is the reload's.
            let (trusted, required) = {
                let acceptor = acceptors.borrow();
                (acceptor.trust.clone(), acceptor.requires_certificate)
            };
            // A certificate is verified again only when the trust changed (other CAs,
            // CRLs or mode), or its CRLs ran out since it was last verified: most reloads
            // leave it, and cost nothing per connection. (Its expiry has a timer of its
            // own: [`Admitted::outlived`].)
            let now = crate::time::now_secs();
            let outlived = match &mut self.client_cert {
                Some(chain)
                    if chain.verified_under == trusted.fingerprint()
                        && trusted
                            .crls_run_out()
                            .map_or(true, |until| until > now || chain.verified_at >= until) =>
                {
                    false
                }
                Some(chain) => {
                    let admitted = trusted.admits(&chain.certs);
                    chain.verified_under = trusted.fingerprint();
                    chain.verified_at = now;
                    !admitted
                }
                None => required,
            };
            if outlived || !gates.load().permits(self.peer) {
                return;
            }
        }
    }
}

/// What a connection a reload has outlived ([`Admitted::outlived`]) may still run for.
const OUTLIVED_GRACE: Duration = Duration::from_secs(10);

/// Drives `connection` until it closes; on shutdown, after a reload it has outlived
/// ([`Admitted::outlived`]), or when it is unused (idle, or no first request in time), it
/// finishes what runs (HTTP/2 sends GOAWAY) and closes. An
/// unused connection has nothing in flight, so its goodbye is bounded by the header-read
/// timeout: HTTP/2's graceful close waits for the peer to answer a PING, and a peer that sent
/// the preface and then nothing would otherwise hold the connection until the keep-alive
/// ping's timeout. On shutdown the server's drain timeout bounds what still runs, and a
/// connection with nothing left to run closes once it has been so for the header-read
/// timeout, whether or not its peer answers.
///
/// A function that returns its future, not an `async fn`: the future of an `async fn` keeps
/// its arguments twice, as they came and as the locals they are moved into (256 bytes more
/// in every connection's task).
#[allow(clippy::manual_async_fn)]
fn drive(
    mut connection: Served,
    builders: Arc<Builders>,
    mut open: Open,
) -> impl std::future::Future<Output = ()> + Send {
    async move {
        // The task holds the whole of `open` (its guards too), not only the fields it reads:
        // a block captures just the places it uses.
        let open = &mut open;
        let settings = &builders.settings;
        // `None`: dropped at once (a peer that takes nothing takes no goodbye either).
        let mut outlived = false;
        let closing = async {
            tokio::select! {
                _ = open.stop.wait_for(|s| *s) => Some(false),
                () = open.admitted.outlived() => {
                    open.activity.close_to_new();
                    outlived = true;
                    Some(false)
                }
                why = open.activity.unused(settings.idle_timeout, settings.header_read_timeout, settings.write_timeout) => {
                    open.metrics.connection(match why {
                        Unused::Idle => ConnectionOutcome::IdleTimeout,
                        Unused::NoRequest => ConnectionOutcome::FirstRequestTimeout,
                        Unused::Stalled => ConnectionOutcome::WriteTimeout,
                    });
                    (why != Unused::Stalled).then_some(true)
                }
            }
        };
        let unused = tokio::select! {
            () = &mut connection => return,
            unused = closing => unused,
        };
        let Some(unused) = unused else {
            return;
        };
        connection.graceful_shutdown();
        if unused {
            let _ = tokio::time::timeout(settings.header_read_timeout, connection).await;
        } else if outlived {
            // Its peer is no longer admitted as it was (network denied, client certificate
            // verified under trust the reload changed): what runs has `OUTLIVED_GRACE` to finish,
            // a stream included, then the connection is dropped.
            tokio::select! {
                _ = connection => {}
                // Nothing ran for a while (a peer that never completes the goodbye): closed
                // as on shutdown.
                () = open.activity.settled(settings.header_read_timeout) => {}
                () = tokio::time::sleep(OUTLIVED_GRACE) => {
                    open.metrics.connection(ConnectionOutcome::Refused(reason::CONNECTION_OUTLIVED));
                }
            }
        } else {
            // Shutdown or reload: what runs finishes (on shutdown the server's drain timeout
            // bounds it; after a reload, each request's and stream's own limits do); once nothing
            // has run for the header-read timeout, a peer that never completes the goodbye is
            // dropped rather than holding the drain.
            tokio::select! {
                _ = connection => {}
                () = open.activity.settled(settings.header_read_timeout) => {}
                () = open.activity.stalled(settings.write_timeout) => {
                    open.metrics.connection(ConnectionOutcome::WriteTimeout);
                }
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptors: watch::Receiver<Acceptor>,
    gates: Gates,
    settings: ConnSettings,
    mut shutdown: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
) {
    // Every connection task holds a clone of `open`; the drain ends when all are dropped.
    let (open, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let builders = Arc::new(Builders::new(&settings));
    // The connections are served by single-threaded runtimes on worker threads; the accept loop
    // stays here, so that every refusal at accept happens in one place.
    let workers = match Workers::start() {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(event = "workers_failed", error = %e);
            return;
        }
    };
    let connections = Arc::new(tokio::sync::Semaphore::new(settings.max_connections));
    let per_client = ConnectionsPerClient::new(
        settings.max_connections_per_client,
        settings.client_ipv6_prefix,
    );
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        tracing::warn!(event = "accept_error", error = %e);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Reloads from here on are seen: the network check just below and the
                // acceptor taken further down (a reload swaps it before its gate) may be the
                // old policy's.
                let policy = Policed::now(&gates, &acceptors);
                // Denied networks are dropped before any TLS work.
                if !gates.load().permits(peer.ip()) {
                    crate::telemetry::sampled::connection_line!(event = "connection_refused", client = %peer.ip(), reason = reason::NETWORK_DENIED.as_str());
                    metrics.connection(ConnectionOutcome::Refused(reason::NETWORK_DENIED));
                    drop(tcp);
                    continue;
                }
                // Faster than its connection rate: no TLS handshake for it.
                if !gates.load().admits_connection(peer.ip()) {
                    crate::telemetry::sampled::connection_line!(event = "connection_refused", client = %peer.ip(), reason = reason::LIMITS_CONNECTION_RATE.as_str());
                    metrics.connection(ConnectionOutcome::Refused(reason::LIMITS_CONNECTION_RATE));
                    drop(tcp);
                    continue;
                }
                // Over the connection limit: refuse at once rather than queue.
                let Some(client_slot) = per_client.acquire(peer.ip()) else {
                    crate::telemetry::sampled::connection_line!(event = "connection_refused", client = %peer.ip(), reason = reason::LIMITS_CONNECTIONS_PER_CLIENT.as_str());
                    metrics.connection(ConnectionOutcome::Refused(reason::LIMITS_CONNECTIONS_PER_CLIENT));
                    drop(tcp);
                    continue;
                };
                let Ok(permit) = connections.clone().try_acquire_owned() else {
                    crate::telemetry::sampled::connection_line!(event = "connection_refused", client = %peer.ip(), reason = reason::LIMITS_CONNECTIONS.as_str());
                    metrics.connection(ConnectionOutcome::Refused(reason::LIMITS_CONNECTIONS));
                    drop(tcp);
                    continue;
                };
                settings.tune(&tcp);
                // The socket leaves this runtime's reactor for the worker's: its readiness is
                // then polled by the thread that serves it (no wake-up across threads per read).
                let tcp = match tcp.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(event = "accept_error", error = %e);
                        continue;
                    }
                };
                let open = open.clone();
                let stop = shutdown.clone();
                let acceptor = acceptors.borrow().clone();
                let builders = builders.clone();
                let metrics = metrics.clone();
                metrics.connection(ConnectionOutcome::Accepted);
                workers.spawn(async move {
                    let held = (permit, client_slot, open, metrics.open_connection());
                    let tcp = match tokio::net::TcpStream::from_std(tcp) {
                        Ok(tcp) => tcp,
                        Err(e) => {
                            // The accepted socket could not join this worker's reactor
                            // (out of descriptors or epoll memory): the edge's trouble, not
                            // the client's.
                            tracing::warn!(event = "socket_error", client = %peer.ip(), error = %e);
                            metrics.connection(ConnectionOutcome::Refused(reason::SOCKET_ERROR));
                            return;
                        }
                    };
                    // (a certificate valid when its handshake began: rustls verified it
                    // then, and the client chose when to finish)
                    let handshake_began = crate::time::now_secs();
                    let tls = match tokio::time::timeout(settings.handshake_timeout, acceptor.tls.accept(tcp)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            // (rustls' own words: a revoked or unknown client certificate,
                            // a protocol error; no bytes of the peer's)
                            crate::telemetry::sampled::connection_line!(event = "tls_handshake_failed", client = %peer.ip(), error = %e);
                            metrics.connection(ConnectionOutcome::Refused(reason::TLS_HANDSHAKE_FAILED));
                            return;
                        }
                        Err(_) => {
                            crate::telemetry::sampled::connection_line!(event = "tls_handshake_timeout", client = %peer.ip());
                            metrics.connection(ConnectionOutcome::Refused(reason::TLS_HANDSHAKE_TIMEOUT));
                            return;
                        }
                    };
                    // The connection is served by a task of its own on this worker, sized for
                    // serving alone: the handshake's state goes now instead of lasting as long
                    // as the connection (3.9 KiB per open connection instead of 8.4).
                    serve(tls, acceptor.trust, handshake_began, peer, policy, builders, stop, metrics, held);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    drop(open);
    metrics.set_draining();
    tracing::info!(event = "draining", connections = metrics.open_connections());
    tokio::select! {
        _ = all_closed.recv() => tracing::info!(event = "drained"),
        _ = tokio::time::sleep(settings.drain_timeout) => {
            tracing::warn!(event = "drain_timeout", timeout_ms = settings.drain_timeout.as_millis() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::GOOD;
    use crate::policy::LoadMode;

    /// Whether a served chain is valid for clients now: within its `notAfter`, and past its
    /// `notBefore` or within [`NOT_BEFORE_SKEW_SECS`] of it (a clock a little behind the
    /// issuer's); what was not read bounds nothing.
    #[test]
    fn a_served_chain_is_valid_from_its_not_before_within_the_skew_to_its_not_after() {
        let now = 1_800_000_000;
        let skew = NOT_BEFORE_SKEW_SECS;
        let rows = [
            // (notBefore, notAfter, valid now)
            (Some(now - 86_400), Some(now + 86_400), true),
            (Some(now), Some(now + 1), true),
            (Some(now + 60), Some(now + 86_400), true),
            (Some(now + skew), Some(now + 86_400), true),
            (Some(now + skew + 1), Some(now + 86_400), false),
            (Some(now + 86_400 * 365 * 60), None, false),
            (Some(now - 86_400), Some(now), false),
            (Some(now - 86_400), Some(now - 1), false),
            (None, Some(now + 1), true),
            (Some(now - 1), None, true),
            (None, None, true),
            (Some(u64::MAX), Some(u64::MAX), false),
        ];
        for (not_before, not_after, valid) in rows {
            let v = tls::der::Validity {
                not_before,
                not_after,
            };
            assert_eq!(serves_now(v, now), valid, "{v:?}");
        }
        assert!(!too_early(now + skew, u64::MAX - 1), "no overflow");
    }

    /// A reload's TLS settings out of time are refused only while those in force serve
    /// clients: a certificate out of time (either way) or CRLs run out, each against good
    /// ones in force; settings in force whose certificate serves nobody (before its
    /// `notBefore`, after its `notAfter`) keep nothing, and neither does a start.
    #[test]
    fn settings_out_of_time_are_refused_only_against_settings_that_serve() {
        let now = 1_800_000_000;
        let day = 86_400;
        let at = |not_before: u64, not_after: u64, crls: Option<u64>| Deadlines {
            certificate: tls::der::Validity {
                not_before: Some(not_before),
                not_after: Some(not_after),
            },
            crls,
        };
        let good = at(now - day, now + day, None);
        let good_crls = at(now - day, now + day, Some(now + day));
        let rows = [
            // (what, new, in force, refused with)
            ("good over good", good, Some(good), None),
            (
                "expired over good",
                at(now - 2 * day, now - day, None),
                Some(good),
                Some("expired at"),
            ),
            (
                "future over good",
                at(now + day, now + 2 * day, None),
                Some(good),
                Some("not valid before"),
            ),
            (
                "within the skew",
                at(now + 60, now + day, None),
                Some(good),
                None,
            ),
            (
                "expired at start",
                at(now - 2 * day, now - day, None),
                None,
                None,
            ),
            (
                "future at start",
                at(now + day, now + 2 * day, None),
                None,
                None,
            ),
            (
                "expired over expired",
                at(now - 2 * day, now - day, None),
                Some(at(now - 3 * day, now - 2 * day, None)),
                None,
            ),
            (
                "expired over future",
                at(now - 2 * day, now - day, None),
                Some(at(now + day, now + 2 * day, None)),
                None,
            ),
            (
                "CRLs run out over future",
                at(now - day, now + day, Some(now - 1)),
                Some(at(now + day, now + 2 * day, Some(now + day))),
                None,
            ),
            (
                "CRLs run out over good",
                at(now - day, now + day, Some(now - 1)),
                Some(good_crls),
                Some("ran out at"),
            ),
            (
                "CRLs run out over none",
                at(now - day, now + day, Some(now - 1)),
                Some(good),
                Some("ran out at"),
            ),
            (
                "CRLs run out over run out",
                at(now - day, now + day, Some(now - 1)),
                Some(at(now - day, now + day, Some(now - 2))),
                None,
            ),
            (
                "good CRLs over run out",
                good_crls,
                Some(at(now - day, now + day, Some(now - 2))),
                None,
            ),
        ];
        for (what, new, in_force, want) in rows {
            let got = out_of_time(new, in_force, now);
            match want {
                None => assert!(got.is_none(), "{what}: {got:?}"),
                Some(said) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(said)),
                    "{what}: {got:?}"
                ),
            }
        }
    }

    /// A reload that changes what Redis's connections were made with (its password, its CA
    /// certificates) or how connections are counted per IPv6 client names those keys as
    /// needing a restart, as it does the Redis URL: they are not applied.
    #[test]
    fn a_reload_names_the_redis_secrets_and_the_ipv6_prefix_it_does_not_apply() {
        std::env::set_var("A2A_EDGE_SERVER_TEST_SECRET", "s".repeat(40));
        std::env::set_var("A2A_EDGE_SERVER_TEST_PW1", "first-password");
        std::env::set_var("A2A_EDGE_SERVER_TEST_PW2", "second-password");
        let policy = |extra: &str| {
            let text = format!(
                "{GOOD}[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:6379/0\"\npage_token_secret_env = \"A2A_EDGE_SERVER_TEST_SECRET\"\n{extra}"
            );
            Policy::from_toml(std::path::Path::new("p.toml"), &text, LoadMode::Check)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let first = FixedAtStart::of(&policy(
            "redis_password_env = \"A2A_EDGE_SERVER_TEST_PW1\"\n",
        ));
        let rows = [
            (
                "redis_password_env = \"A2A_EDGE_SERVER_TEST_PW1\"\n",
                vec![],
            ),
            (
                "redis_password_env = \"A2A_EDGE_SERVER_TEST_PW2\"\n",
                vec!["state"],
            ),
            ("", vec!["state"]),
        ];
        for (extra, want) in rows {
            assert_eq!(first.changed_by(&policy(extra)), want, "{extra}");
        }
        let prefix = policy("redis_password_env = \"A2A_EDGE_SERVER_TEST_PW1\"\n[limits]\nclient_ipv6_prefix = 48\n");
        assert_eq!(
            first.changed_by(&prefix),
            ["limits.client_ipv6_prefix (connections per client)"]
        );
    }

    /// `server.send_buffer_bytes` fixes an accepted connection's send buffer (Linux reports
    /// twice what was set: its bookkeeping), and a reload names it as needing a restart;
    /// without it the kernel's autotuning is left alone. Both ways, Nagle is off.
    #[tokio::test]
    async fn an_accepted_connection_gets_the_policys_send_buffer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let policy = |extra: &str| {
            let text = GOOD.replacen("[tls]\n", &format!("{extra}[tls]\n"), 1);
            Policy::from_toml(std::path::Path::new("p.toml"), &text, LoadMode::Check)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let autotuned = {
            let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            socket2::SockRef::from(&tcp).send_buffer_size().unwrap()
        };
        // (the policy's extra `[server]` key, the send buffer wanted: none, autotuned)
        // (all below the 212992-byte `net.core.wmem_max` of a stock kernel)
        let rows = [
            ("", None),
            ("send_buffer_bytes = 4096\n", Some(4096)),
            ("send_buffer_bytes = 65536\n", Some(65536)),
            ("send_buffer_bytes = 100000\n", Some(100000)),
        ];
        for (extra, want) in rows {
            let settings = ConnSettings::of(&policy(extra));
            let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            settings.tune(&tcp);
            let got = socket2::SockRef::from(&tcp).send_buffer_size().unwrap();
            assert_eq!(got, want.map_or(autotuned, |w| 2 * w), "{extra}");
            assert!(tcp.nodelay().unwrap(), "{extra}");
            let changed = FixedAtStart::of(&policy("")).changed_by(&policy(extra));
            let named: &[&str] = if want.is_some() {
                &["server.send_buffer_bytes"]
            } else {
                &[]
            };
            assert_eq!(changed, named, "{extra}");
        }
    }

    /// A `server.send_buffer_bytes` above the kernel's `net.core.wmem_max` is granted only
    /// that (a warning at start says so); one within it is not reported.
    #[test]
    fn a_send_buffer_above_the_kernels_maximum_is_reported() {
        let wmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let settings = |bytes: usize| {
            let text = GOOD.replacen(
                "[tls]\n",
                &format!("send_buffer_bytes = {bytes}\n[tls]\n"),
                1,
            );
            let p = Policy::from_toml(std::path::Path::new("p.toml"), &text, LoadMode::Check);
            ConnSettings::of(&p.unwrap_or_else(|e| panic!("{e}")))
        };
        assert_eq!(settings(4096).send_buffer_capped(), None);
        let most = 16 * 1024 * 1024;
        let want = (wmem_max < most).then_some(wmem_max);
        assert_eq!(
            settings(most).send_buffer_capped(),
            want,
            "wmem_max {wmem_max}"
        );
    }
}
