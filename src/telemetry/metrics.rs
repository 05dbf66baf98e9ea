//! The process's metrics for the admin listener's `/metrics`, kept and encoded by
//! `prometheus-client` (OpenMetrics text). Every label is a low-cardinality code: a route, a
//! JSON-RPC method, an HTTP status, a rejection reason, a connection outcome, an upstream's or
//! agent's policy name. Never a principal, address, id or path.
//!
//! Counters live for the process (they survive policy reloads); gauges that describe the
//! current policy (upstream health, the card, the registry) are read at scrape time by the
//! admin listener and passed to [`Metrics::render`] as a [`Snapshot`].
//!
//! Counter families are registered under the name without `_total`, which the encoder
//! appends to each sample: `counter(…, "a2a_edge_requests_total", …)` below names the series
//! as they are scraped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use crate::reason::Reason;

/// Upper bounds of the request-duration histogram, in seconds.
/// From 100 µs: most requests the edge answers itself take well under 0.5 ms.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// How a connection went (`a2a_edge_connections_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionOutcome {
    Accepted,
    /// Refused or dropped before it served a request: `network.denied`, `limits.*`, `tls.*`,
    /// `socket.error`.
    Refused(Reason),
    /// No request began within `header_read_timeout_ms` of the handshake.
    FirstRequestTimeout,
    /// Closed after `idle_timeout_ms` without a request.
    IdleTimeout,
    /// Closed (dropped) after `write_timeout_ms` in which its peer took nothing of a
    /// response (an HTTP/2 peer that grants no flow-control window, where the socket has
    /// nothing pending to time out).
    WriteTimeout,
}

impl ConnectionOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionOutcome::Accepted => "accepted",
            ConnectionOutcome::Refused(r) => r.as_str(),
            ConnectionOutcome::FirstRequestTimeout => "first_request_timeout",
            ConnectionOutcome::IdleTimeout => "idle_timeout",
            ConnectionOutcome::WriteTimeout => "write_timeout",
        }
    }
}

/// How an SSE stream ended (`a2a_edge_streams_total{outcome}`, the `stream_end` log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOutcome {
    /// The agent ended it.
    Completed,
    /// The caller went away.
    ClientGone,
    /// Ended for this reason: the caller stalled (`client.stalled`), or the agent's stream
    /// broke a bound or a rule (`upstream.*`; the caller got an error frame first).
    Ended(Reason),
}

impl StreamOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamOutcome::Completed => "completed",
            StreamOutcome::ClientGone => "client_gone",
            StreamOutcome::Ended(r) => r.as_str(),
        }
    }
}

/// One answered request's labels (`agent` only with `[[agents]]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RequestLabels {
    agent: Arc<str>,
    route: &'static str,
    method: &'static str,
    status: u16,
    reason: &'static str,
}

impl EncodeLabelSet for RequestLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let status = self.status.to_string();
        let labels: &[(&str, &str)] = &[
            ("agent", &self.agent),
            ("route", self.route),
            ("method", self.method),
            ("status", &status),
            ("reason", self.reason),
        ];
        encode_labels(labels, encoder)
    }
}

/// A request duration's labels (`agent` only with `[[agents]]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DurationLabels {
    agent: Arc<str>,
    route: &'static str,
}

impl EncodeLabelSet for DurationLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let labels: &[(&str, &str)] = &[("agent", &self.agent), ("route", self.route)];
        encode_labels(labels, encoder)
    }
}

/// Writes the labels, but an empty `agent` (a policy without `[[agents]]` has no agent label).
fn encode_labels(
    labels: &[(&str, &str)],
    encoder: &mut LabelSetEncoder,
) -> Result<(), std::fmt::Error> {
    for label in labels {
        if !(label.0 == "agent" && label.1.is_empty()) {
            label.encode(encoder.encode_label())?;
        }
    }
    Ok(())
}

/// One label whose value is a code of the edge.
type Code = [(&'static str, &'static str); 1];
/// One label whose value an operator chose (an upstream's name).
type Named = [(&'static str, String); 1];

type Durations = Family<DurationLabels, Histogram, fn() -> Histogram>;

/// The process's counters. Shared (`Arc`) by the listener, every policy's gate and the admin
/// listener.
#[derive(Debug)]
pub struct Metrics {
    started: SystemTime,
    requests: Family<RequestLabels, Counter>,
    durations: Durations,
    connections: Family<Code, Counter>,
    connections_open: Gauge,
    streams: Family<Code, Counter>,
    streams_open: Gauge,
    /// Authorization refusals by reason code (`authz.method`, `authz.push`, ...).
    authz_refusals: Family<Code, Counter>,
    /// Round trips to the shared state store: by outcome, and their durations (exported once
    /// there was one).
    state_round_trips: Family<Code, Counter>,
    state_round_trip_seconds: Histogram,
    /// Rate checks against a shared budget, by where the token came from: `lease` (this
    /// replica's lease, no round trip) or `store` (a round trip to Redis, admitted or not).
    state_rate_checks: Family<Code, Counter>,
    state_used: AtomicBool,
    card_refresh_failures: Counter,
    reloads: Family<Code, Counter>,
    draining: AtomicBool,
    /// When the client CRLs in force run out (their earliest nextUpdate, seconds since the
    /// epoch; 0: no CRLs).
    client_crls_run_out: std::sync::atomic::AtomicU64,
    /// When the served chain stops being valid for clients and when the first client CA
    /// expires (seconds since the epoch; 0: none).
    certificate_expires: std::sync::atomic::AtomicU64,
    client_ca_expires: std::sync::atomic::AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// What the admin listener reads from the running policy at scrape time.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub upstreams: Vec<UpstreamGauge>,
    pub card_published: bool,
    /// The last card refresh refused the agent's card as not an A2A 1.0 AgentCard.
    pub card_invalid: bool,
    pub registry: Option<RegistryStats>,
    /// With a shared state store: whether it answers.
    pub state_available: Option<bool>,
    /// What requests being read and checked hold now, reckoned (`limits.request_bytes`).
    pub request_bytes: usize,
}

/// The task registry's counts, for metrics and /ready (the registry, `state::registry`,
/// makes them: state reports to telemetry, not the other way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegistryStats {
    pub tasks: usize,
    pub contexts: usize,
    pub running_contexts: usize,
    pub pending_turns: usize,
    /// Answers naming another caller's task or context (ignored).
    pub foreign_ignored: u64,
    pub evicted_tasks: u64,
    pub evicted_contexts: u64,
    /// Evicted contexts whose owner is still remembered (only they may take them up again).
    pub forgotten_contexts: usize,
    /// Evicted tasks whose owner is still remembered (an agent naming one in someone else's
    /// answer is refused).
    pub forgotten_tasks: usize,
    /// Answers not recorded because everything was pinned by running turns.
    pub refused_full: u64,
}

#[derive(Debug, Clone)]
pub struct UpstreamGauge {
    pub name: String,
    pub healthy: bool,
    pub in_flight: usize,
}

/// Open connections: the gauge goes down when this is dropped.
pub struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// An open SSE stream: the gauge goes down when this is dropped.
pub struct OpenStream<'a>(&'a Metrics);

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        self.0.streams_open.dec();
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let reloads = Family::<Code, Counter>::default();
        // Both results exist from the start (an alert on refusals needs the zero).
        for result in ["ok", "refused"] {
            let _ = reloads.get_or_create(&[("result", result)]);
        }
        Metrics {
            started: SystemTime::now(),
            requests: Family::default(),
            durations: Family::new_with_constructor(histogram as fn() -> Histogram),
            connections: Family::default(),
            connections_open: Gauge::default(),
            streams: Family::default(),
            streams_open: Gauge::default(),
            authz_refusals: Family::default(),
            state_round_trips: Family::default(),
            state_round_trip_seconds: histogram(),
            state_rate_checks: Family::default(),
            state_used: AtomicBool::new(false),
            card_refresh_failures: Counter::default(),
            reloads,
            draining: AtomicBool::new(false),
            client_crls_run_out: std::sync::atomic::AtomicU64::new(0),
            certificate_expires: std::sync::atomic::AtomicU64::new(0),
            client_ca_expires: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// One answered request. `reason` is the rejection's code, `None` when it was served;
    /// `elapsed` runs until the response head (for a stream: until the stream started).
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        agent: &Arc<str>,
        route: &'static str,
        method: Option<&'static str>,
        status: u16,
        reason: Option<Reason>,
        elapsed: Duration,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                agent: agent.clone(),
                route,
                method: method.unwrap_or(""),
                status,
                reason: reason.map_or("ok", Reason::as_str),
            })
            .inc();
        self.durations
            .get_or_create(&DurationLabels {
                agent: agent.clone(),
                route,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// One connection event: accepted, refused (and why), or closed unused.
    pub fn connection(&self, outcome: ConnectionOutcome) {
        self.connections
            .get_or_create(&[("outcome", outcome.as_str())])
            .inc();
    }

    /// Counts an open connection until the guard is dropped.
    pub fn open_connection(&self) -> OpenConnection {
        self.connections_open.inc();
        OpenConnection(self.connections_open.clone())
    }

    /// Counts an open SSE stream until the guard is dropped.
    pub fn open_stream(&self) -> OpenStream<'_> {
        self.streams_open.inc();
        OpenStream(self)
    }

    /// An SSE stream ended: completed, its caller gone, or for a reason.
    pub fn stream_ended(&self, outcome: StreamOutcome) {
        self.streams
            .get_or_create(&[("outcome", outcome.as_str())])
            .inc();
    }

    /// One round trip to the shared state store: `ok`, `error`, `timeout` or `unavailable`
    /// (no connection).
    pub fn state_round_trip(&self, outcome: &'static str, elapsed: Duration) {
        self.state_used.store(true, Ordering::Relaxed);
        self.state_round_trips
            .get_or_create(&[("outcome", outcome)])
            .inc();
        if outcome != "unavailable" {
            self.state_round_trip_seconds.observe(elapsed.as_secs_f64());
        }
    }

    /// One check of a shared rate budget: answered from this replica's lease (`lease`) or by
    /// a round trip to the store (`store`).
    pub fn state_rate_check(&self, source: &'static str) {
        self.state_used.store(true, Ordering::Relaxed);
        self.state_rate_checks
            .get_or_create(&[("source", source)])
            .inc();
    }

    /// An authorization decision refused a request, for this reason.
    pub fn authz_refused(&self, reason: Reason) {
        self.authz_refusals
            .get_or_create(&[("reason", reason.as_str())])
            .inc();
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u64 {
        u64::try_from(self.connections_open.get()).unwrap_or(0)
    }

    pub fn card_refresh_failed(&self) {
        self.card_refresh_failures.inc();
    }

    /// The client CRLs now in force run out at `until` (seconds since the epoch; `None`: no
    /// CRLs).
    pub fn set_client_crls_run_out(&self, until: Option<u64>) {
        self.client_crls_run_out
            .store(until.unwrap_or(0), Ordering::Relaxed);
    }

    /// The served certificate and the first client CA now in force expire at these times
    /// (seconds since the epoch; `None`: none).
    pub fn set_certificates_expire(&self, served: Option<u64>, client_ca: Option<u64>) {
        self.certificate_expires
            .store(served.unwrap_or(0), Ordering::Relaxed);
        self.client_ca_expires
            .store(client_ca.unwrap_or(0), Ordering::Relaxed);
    }

    pub fn reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "refused" };
        self.reloads.get_or_create(&[("result", result)]).inc();
    }

    /// The listener stopped accepting and drains: not ready any more.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// The OpenMetrics text exposition of every counter and of `now`.
    pub fn render(&self, now: &Snapshot) -> String {
        let mut r = Registry::default();
        let started = self
            .started
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let build = Family::<[(&'static str, &'static str); 1], Gauge>::default();
        build
            .get_or_create(&[("version", env!("CARGO_PKG_VERSION"))])
            .set(1);
        gauge(
            &mut r,
            "a2a_edge_build_info",
            "The running a2a-edge version",
            build,
        );
        gauge(
            &mut r,
            "a2a_edge_process_start_time_seconds",
            "Start time of the process since the Unix epoch",
            ConstGauge::new(started),
        );
        counter(
            &mut r,
            "a2a_edge_requests_total",
            "Requests answered, by agent (with [[agents]]), route, JSON-RPC method, HTTP status and reason code (ok when served)",
            self.requests.clone(),
        );
        r.register(
            "a2a_edge_request_duration_seconds",
            "Time from the request head to the response head, by agent (with [[agents]]) and route (a stream counts until it starts)",
            self.durations.clone(),
        );
        if self.state_used.load(Ordering::Relaxed) {
            counter(
                &mut r,
                "a2a_edge_state_round_trips_total",
                "Round trips to the shared state store (Redis), by outcome: ok, error, timeout, unavailable",
                self.state_round_trips.clone(),
            );
            r.register(
                "a2a_edge_state_round_trip_seconds",
                "Time of one round trip to the shared state store",
                self.state_round_trip_seconds.clone(),
            );
            counter(
                &mut r,
                "a2a_edge_state_rate_checks_total",
                "Checks of a shared rate budget, by where they were answered: lease (this replica's lease, no round trip) or store (a round trip to the shared state store)",
                self.state_rate_checks.clone(),
            );
        }
        if let Some(available) = now.state_available {
            gauge(
                &mut r,
                "a2a_edge_state_available",
                "Whether the last round trip to the shared state store succeeded (1) or not (0)",
                ConstGauge::new(i64::from(available)),
            );
        }
        counter(
            &mut r,
            "a2a_edge_authz_refusals_total",
            "Requests an authorization decision refused, by reason code",
            self.authz_refusals.clone(),
        );
        counter(
            &mut r,
            "a2a_edge_connections_total",
            "Connections by outcome: accepted, or the reason they were refused or dropped",
            self.connections.clone(),
        );
        gauge(
            &mut r,
            "a2a_edge_connections_open",
            "Connections open now (TLS handshake included)",
            self.connections_open.clone(),
        );
        counter(
            &mut r,
            "a2a_edge_streams_total",
            "SSE streams relayed, by how they ended: completed, client_gone, or the reason code of the error frame that ended them",
            self.streams.clone(),
        );
        gauge(
            &mut r,
            "a2a_edge_streams_open",
            "SSE streams being relayed now",
            self.streams_open.clone(),
        );
        let healthy = Family::<Named, Gauge>::default();
        let in_flight = Family::<Named, Gauge>::default();
        for u in &now.upstreams {
            healthy
                .get_or_create(&[("upstream", escaped(&u.name))])
                .set(i64::from(u.healthy));
            in_flight
                .get_or_create(&[("upstream", escaped(&u.name))])
                .set(i64::try_from(u.in_flight).unwrap_or(i64::MAX));
        }
        gauge(
            &mut r,
            "a2a_edge_upstream_healthy",
            "1 when the agent passes its health checks, 0 when it is ejected",
            healthy,
        );
        gauge(
            &mut r,
            "a2a_edge_upstream_in_flight",
            "Requests in flight to the agent",
            in_flight,
        );
        gauge(
            &mut r,
            "a2a_edge_request_bytes",
            "What requests being read and checked hold now (their bodies and parsed trees, reckoned), against limits.request_bytes",
            ConstGauge::new(i64::try_from(now.request_bytes).unwrap_or(i64::MAX)),
        );
        gauge(
            &mut r,
            "a2a_edge_card_published",
            "1 when a card is published at /.well-known/agent-card.json (with [[agents]]: some agent's)",
            ConstGauge::new(i64::from(now.card_published)),
        );
        counter(
            &mut r,
            "a2a_edge_log_lines_dropped_total",
            "Log lines dropped because the log writer's buffer (8 MiB) was full (requests never wait for stderr)",
            ConstCounter::new(crate::telemetry::sink::dropped()),
        );
        counter(
            &mut r,
            "a2a_edge_spans_lost_total",
            "Spans an OTLP collector did not take (the export failed; requests never wait for the collector)",
            ConstCounter::new(crate::telemetry::traces::spans_lost()),
        );
        let crls_run_out = self.client_crls_run_out.load(Ordering::Relaxed);
        if crls_run_out > 0 {
            gauge(
                &mut r,
                "a2a_edge_client_crl_next_update_timestamp_seconds",
                "When the client-certificate CRLs in force run out (their earliest nextUpdate, Unix seconds): past it every client certificate is refused until a reload brings new ones",
                ConstGauge::new(i64::try_from(crls_run_out).unwrap_or(i64::MAX)),
            );
        }
        let expiries = Family::<[(&'static str, &'static str); 1], Gauge>::default();
        for (which, at) in [
            ("server", &self.certificate_expires),
            ("client_ca", &self.client_ca_expires),
        ] {
            let at = at.load(Ordering::Relaxed);
            if at > 0 {
                let at = i64::try_from(at).unwrap_or(i64::MAX);
                expiries.get_or_create(&[("certificate", which)]).set(at);
            }
        }
        gauge(
            &mut r,
            "a2a_edge_tls_certificate_expiry_timestamp_seconds",
            "When the TLS certificates in force expire (notAfter, Unix seconds): the served chain's (certificate=server: its leaf's, or a valid intermediate's that comes first; past it clients refuse the handshake), the client CAs' earliest (certificate=client_ca: past it the CA still admits its clients; replace it)",
            expiries,
        );
        gauge(
            &mut r,
            "a2a_edge_card_invalid",
            "1 when the last card refresh refused the card as not an A2A 1.0 AgentCard (card.invalid)",
            ConstGauge::new(i64::from(now.card_invalid)),
        );
        counter(
            &mut r,
            "a2a_edge_card_refresh_failures_total",
            "Card refreshes that failed (the last good card stays served)",
            self.card_refresh_failures.clone(),
        );
        if let Some(stats) = &now.registry {
            registry(&mut r, stats);
        }
        counter(
            &mut r,
            "a2a_edge_policy_reloads_total",
            "Policy reloads (SIGHUP), applied or refused",
            self.reloads.clone(),
        );
        gauge(
            &mut r,
            "a2a_edge_draining",
            "1 once shutdown started: no new connections, in-flight requests finish",
            ConstGauge::new(i64::from(self.is_draining())),
        );
        let mut out = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        out
    }
}

/// A label value an operator chose, escaped as the exposition format wants (`\\`, `\"`,
/// `\n`): prometheus-client 0.24 writes label values as they are. Every other label value is
/// a code of the edge or a name the policy restricts to `[A-Za-z0-9._-]` (agents).
fn escaped(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Registers a counter by the name its samples have (`…_total`).
fn counter(r: &mut Registry, name_total: &str, help: &str, metric: impl Metric) {
    let name = name_total.strip_suffix("_total").unwrap_or(name_total);
    r.register(name, help, metric);
}

fn gauge(r: &mut Registry, name: &str, help: &str, metric: impl Metric) {
    r.register(name, help, metric);
}

fn registry(r: &mut Registry, s: &RegistryStats) {
    let entries = Family::<Code, Gauge>::default();
    for (kind, n) in [
        ("tasks", s.tasks),
        ("contexts", s.contexts),
        ("forgotten_contexts", s.forgotten_contexts),
        ("forgotten_tasks", s.forgotten_tasks),
        ("running_contexts", s.running_contexts),
        ("pending_turns", s.pending_turns),
    ] {
        entries
            .get_or_create(&[("kind", kind)])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    gauge(
        r,
        "a2a_edge_registry_entries",
        "Tasks and contexts whose owner the edge remembers; running contexts; turns in flight; evicted contexts and tasks whose owner is still known",
        entries,
    );
    let evictions = Family::<Code, Counter>::default();
    for (kind, n) in [("tasks", s.evicted_tasks), ("contexts", s.evicted_contexts)] {
        evictions.get_or_create(&[("kind", kind)]).inc_by(n);
    }
    counter(
        r,
        "a2a_edge_registry_evictions_total",
        "Entries evicted to stay within the registry's size (alert on contexts: once an evicted context's owner is forgotten too, its id can be claimed again)",
        evictions,
    );
    let ignored = Family::<Code, Counter>::default();
    for (why, n) in [("foreign", s.foreign_ignored), ("full", s.refused_full)] {
        ignored.get_or_create(&[("why", why)]).inc_by(n);
    }
    counter(
        r,
        "a2a_edge_registry_ignored_total",
        "Agent answers not recorded: naming another caller's task or context, or the registry full of running turns",
        ignored,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_labels_and_timed_by_route() {
        let m = Metrics::new();
        let ms = Duration::from_millis;
        m.request(&Arc::from(""), "rpc", Some("SendMessage"), 200, None, ms(3));
        m.request(
            &Arc::from(""),
            "rpc",
            Some("SendMessage"),
            200,
            None,
            ms(30),
        );
        m.request(
            &Arc::from(""),
            "rpc",
            None,
            401,
            Some(crate::reason::AUTH_MISSING),
            ms(0),
        );
        m.request(
            &Arc::from(""),
            "card",
            None,
            200,
            None,
            Duration::from_secs(60),
        );
        m.request(&Arc::from("ros"), "rpc", Some("GetTask"), 200, None, ms(1));
        let text = m.render(&Snapshot::default());
        // With [[agents]], the agent's name is a label; without, there is none.
        assert!(text.contains(
            "a2a_edge_requests_total{agent=\"ros\",route=\"rpc\",method=\"GetTask\",status=\"200\",reason=\"ok\"} 1\n"
        ), "{text}");
        assert!(text
            .contains("a2a_edge_request_duration_seconds_count{agent=\"ros\",route=\"rpc\"} 1\n"));
        assert!(
            text.contains("a2a_edge_request_duration_seconds_sum{agent=\"ros\",route=\"rpc\"} ")
        );
        assert!(text.contains(
            "a2a_edge_requests_total{route=\"rpc\",method=\"SendMessage\",status=\"200\",reason=\"ok\"} 2\n"
        ), "{text}");
        assert!(text.contains(
            "a2a_edge_requests_total{route=\"rpc\",method=\"\",status=\"401\",reason=\"auth.missing\"} 1\n"
        ));
        // 0 ms and 3 ms fall at or below 5 ms; 30 ms only from 50 ms on.
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{le=\"0.005\",route=\"rpc\"} 2\n"));
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{le=\"0.025\",route=\"rpc\"} 2\n"));
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{le=\"0.05\",route=\"rpc\"} 3\n"));
        assert!(text.contains("a2a_edge_request_duration_seconds_count{route=\"rpc\"} 3\n"));
        // Above the last bucket: only +Inf holds it.
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{le=\"10.0\",route=\"card\"} 0\n"));
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{le=\"+Inf\",route=\"card\"} 1\n"));
        assert!(text.ends_with("# EOF\n"), "OpenMetrics");
    }

    #[test]
    fn connection_gauge_follows_guards_and_labels_are_escaped() {
        let m = Metrics::new();
        let a = m.open_connection();
        let b = m.open_connection();
        m.connection(ConnectionOutcome::Accepted);
        m.connection(ConnectionOutcome::Accepted);
        m.connection(ConnectionOutcome::Refused(crate::reason::NETWORK_DENIED));
        drop(a);
        let now = Snapshot {
            upstreams: vec![UpstreamGauge {
                name: "a\"b\\c\nd".into(),
                healthy: true,
                in_flight: 2,
            }],
            card_published: true,
            card_invalid: false,
            registry: None,
            state_available: None,
            request_bytes: 4096,
        };
        let text = m.render(&now);
        assert!(text.contains("a2a_edge_request_bytes 4096\n"), "{text}");
        assert!(text.contains("a2a_edge_connections_open 1\n"), "{text}");
        assert!(text.contains("a2a_edge_connections_total{outcome=\"accepted\"} 2\n"));
        assert!(text.contains("a2a_edge_connections_total{outcome=\"network.denied\"} 1\n"));
        assert!(text.contains("a2a_edge_upstream_healthy{upstream=\"a\\\"b\\\\c\\nd\"} 1\n"));
        assert!(text.contains("a2a_edge_upstream_in_flight{upstream=\"a\\\"b\\\\c\\nd\"} 2\n"));
        assert!(text.contains("a2a_edge_card_published 1\n"));
        drop(b);
        assert!(m.render(&now).contains("a2a_edge_connections_open 0\n"));
    }

    #[test]
    fn every_sample_has_help_and_type_and_parses() {
        let m = Metrics::new();
        m.request(
            &Arc::from(""),
            "rpc",
            Some("GetTask"),
            200,
            None,
            Duration::from_millis(1),
        );
        m.connection(ConnectionOutcome::Accepted);
        m.reload(true);
        m.reload(false);
        m.set_draining();
        let text = m.render(&Snapshot {
            registry: Some(Default::default()),
            ..Snapshot::default()
        });
        let mut typed = std::collections::HashSet::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_string());
                continue;
            }
            if l.starts_with('#') || l.is_empty() {
                continue;
            }
            let (series, value) = l.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{l}");
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count", "_total"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
                .unwrap_or(name);
            assert!(typed.contains(family), "no # TYPE for {l}");
        }
        assert!(text.contains("a2a_edge_policy_reloads_total{result=\"refused\"} 1\n"));
        assert!(text.contains("a2a_edge_draining 1\n"));
        assert!(text.contains("a2a_edge_registry_evictions_total{kind=\"contexts\"} 0\n"));
    }
}
