//! Counters for the admin listener's `/metrics` (Prometheus text format 0.0.4). Every label is
//! a low-cardinality code: a route, a JSON-RPC method, an HTTP status, a rejection reason, a
//! connection outcome, an upstream's policy name. Never a principal, address, id or path.
//!
//! Counters live for the process (they survive policy reloads); gauges that describe the
//! current policy (upstream health, the card, the registry) are read at scrape time by the
//! admin listener and passed to [`Metrics::render`] as a [`Snapshot`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Upper bounds of the request-duration histogram, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One answered request's labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RequestKey {
    /// The agent's `[[agents]]` name; empty without `[[agents]]` (the label is left out).
    agent: Arc<str>,
    route: &'static str,
    method: &'static str,
    status: u16,
    reason: &'static str,
}

#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Cumulative counts are computed when rendering; these are per bucket (+ the overflow).
    buckets: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        let i = BUCKETS
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i] += 1;
        self.sum_seconds += seconds;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct Requests {
    counts: BTreeMap<RequestKey, u64>,
    durations: BTreeMap<(Arc<str>, &'static str), Histogram>,
}

/// The process's counters. Shared (`Arc`) by the listener, every policy's gate and the admin
/// listener.
#[derive(Debug)]
pub struct Metrics {
    started: SystemTime,
    requests: Mutex<Requests>,
    connections: Mutex<BTreeMap<&'static str, u64>>,
    connections_open: AtomicI64,
    streams: Mutex<BTreeMap<&'static str, u64>>,
    streams_open: AtomicI64,
    /// Authorization refusals by reason code (`authz.method`, `authz.push`, ...).
    authz_refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// Round trips to the shared state store: by outcome, and their durations.
    state_round_trips: Mutex<(BTreeMap<&'static str, u64>, Histogram)>,
    card_refresh_failures: AtomicU64,
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
    draining: AtomicBool,
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
    pub registry: Option<crate::state::registry::RegistryStats>,
    /// With a shared state store: whether it answers.
    pub state_available: Option<bool>,
}

#[derive(Debug, Clone)]
pub struct UpstreamGauge {
    pub name: String,
    pub healthy: bool,
    pub in_flight: usize,
}

/// Open connections: the gauge goes down when this is dropped.
pub struct OpenConnection<'a>(&'a Metrics);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An open SSE stream: the gauge goes down when this is dropped.
pub struct OpenStream<'a>(&'a Metrics);

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        self.0.streams_open.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Counters stay meaningful even if a holder panicked.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            started: SystemTime::now(),
            requests: Mutex::new(Requests::default()),
            connections: Mutex::new(BTreeMap::new()),
            connections_open: AtomicI64::new(0),
            streams: Mutex::new(BTreeMap::new()),
            streams_open: AtomicI64::new(0),
            authz_refusals: Mutex::new(BTreeMap::new()),
            state_round_trips: Mutex::new((BTreeMap::new(), Histogram::default())),
            card_refresh_failures: AtomicU64::new(0),
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
            draining: AtomicBool::new(false),
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
        reason: Option<&'static str>,
        elapsed: Duration,
    ) {
        let key = RequestKey {
            agent: agent.clone(),
            route,
            method: method.unwrap_or(""),
            status,
            reason: reason.unwrap_or("ok"),
        };
        let mut r = lock(&self.requests);
        *r.counts.entry(key).or_insert(0) += 1;
        r.durations
            .entry((agent.clone(), route))
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// One connection event: `accepted`, or why it was refused or dropped
    /// (`network.denied`, `limits.connections`, `tls.handshake_failed`, ...).
    pub fn connection(&self, outcome: &'static str) {
        *lock(&self.connections).entry(outcome).or_insert(0) += 1;
    }

    /// Counts an open connection until the guard is dropped.
    pub fn open_connection(&self) -> OpenConnection<'_> {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self)
    }

    /// Counts an open SSE stream until the guard is dropped.
    pub fn open_stream(&self) -> OpenStream<'_> {
        self.streams_open.fetch_add(1, Ordering::Relaxed);
        OpenStream(self)
    }

    /// An SSE stream ended: `completed`, `client_gone`, or the reason of its error frame.
    pub fn stream_ended(&self, outcome: &'static str) {
        *lock(&self.streams).entry(outcome).or_insert(0) += 1;
    }

    /// One round trip to the shared state store: `ok`, `error`, `timeout` or `unavailable`
    /// (no connection).
    pub fn state_round_trip(&self, outcome: &'static str, elapsed: Duration) {
        let mut s = lock(&self.state_round_trips);
        *s.0.entry(outcome).or_insert(0) += 1;
        if outcome != "unavailable" {
            s.1.observe(elapsed.as_secs_f64());
        }
    }

    /// An authorization decision refused a request, for this reason.
    pub fn authz_refused(&self, reason: &'static str) {
        *lock(&self.authz_refusals).entry(reason).or_insert(0) += 1;
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u64 {
        self.connections_open.load(Ordering::Relaxed).max(0) as u64
    }

    pub fn card_refresh_failed(&self) {
        self.card_refresh_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reload(&self, ok: bool) {
        let c = if ok {
            &self.reloads_ok
        } else {
            &self.reloads_failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The listener stopped accepting and drains: not ready any more.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition of every counter and of `now`.
    pub fn render(&self, now: &Snapshot) -> String {
        let mut out = String::with_capacity(4096);
        let started = self
            .started
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        help(
            &mut out,
            "a2a_edge_build_info",
            "gauge",
            "The running a2a-edge version.",
        );
        line(
            &mut out,
            "a2a_edge_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1,
        );
        help(
            &mut out,
            "a2a_edge_process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch.",
        );
        let _ = writeln!(out, "a2a_edge_process_start_time_seconds {started:.3}");

        let (counts, durations) = {
            let r = lock(&self.requests);
            (r.counts.clone(), r.durations.clone())
        };
        help(
            &mut out,
            "a2a_edge_requests_total",
            "counter",
            "Requests answered, by agent (with [[agents]]), route, JSON-RPC method, HTTP status and reason code (ok when served).",
        );
        for (k, n) in &counts {
            let status = k.status.to_string();
            line(
                &mut out,
                "a2a_edge_requests_total",
                &[
                    ("agent", &k.agent),
                    ("route", k.route),
                    ("method", k.method),
                    ("status", &status),
                    ("reason", k.reason),
                ],
                *n,
            );
        }
        help(
            &mut out,
            "a2a_edge_request_duration_seconds",
            "histogram",
            "Time from the request head to the response head, by agent (with [[agents]]) and route (a stream counts until it starts).",
        );
        for ((agent, route), h) in &durations {
            let mut cumulative = 0;
            for (i, b) in BUCKETS.iter().enumerate() {
                cumulative += h.buckets[i];
                let le = b.to_string();
                line(
                    &mut out,
                    "a2a_edge_request_duration_seconds_bucket",
                    &[("agent", agent), ("route", route), ("le", &le)],
                    cumulative,
                );
            }
            cumulative += h.buckets[BUCKETS.len()];
            line(
                &mut out,
                "a2a_edge_request_duration_seconds_bucket",
                &[("agent", agent), ("route", route), ("le", "+Inf")],
                cumulative,
            );
            let agent_label = if agent.is_empty() {
                String::new()
            } else {
                format!("agent=\"{}\",", escape(agent))
            };
            let _ = writeln!(
                out,
                "a2a_edge_request_duration_seconds_sum{{{agent_label}route=\"{}\"}} {}",
                escape(route),
                h.sum_seconds
            );
            line(
                &mut out,
                "a2a_edge_request_duration_seconds_count",
                &[("agent", agent), ("route", route)],
                h.count,
            );
        }

        let (state_outcomes, state_hist) = lock(&self.state_round_trips).clone();
        if !state_outcomes.is_empty() {
            help(
                &mut out,
                "a2a_edge_state_round_trips_total",
                "counter",
                "Round trips to the shared state store (Redis), by outcome: ok, error, timeout, unavailable.",
            );
            for (outcome, n) in &state_outcomes {
                line(
                    &mut out,
                    "a2a_edge_state_round_trips_total",
                    &[("outcome", outcome)],
                    *n,
                );
            }
            help(
                &mut out,
                "a2a_edge_state_round_trip_seconds",
                "histogram",
                "Time of one round trip to the shared state store.",
            );
            let mut cumulative = 0;
            for (i, b) in BUCKETS.iter().enumerate() {
                cumulative += state_hist.buckets[i];
                let le = b.to_string();
                line(
                    &mut out,
                    "a2a_edge_state_round_trip_seconds_bucket",
                    &[("le", &le)],
                    cumulative,
                );
            }
            cumulative += state_hist.buckets[BUCKETS.len()];
            line(
                &mut out,
                "a2a_edge_state_round_trip_seconds_bucket",
                &[("le", "+Inf")],
                cumulative,
            );
            let _ = writeln!(
                out,
                "a2a_edge_state_round_trip_seconds_sum {}",
                state_hist.sum_seconds
            );
            let _ = writeln!(
                out,
                "a2a_edge_state_round_trip_seconds_count {}",
                state_hist.count
            );
        }
        if let Some(available) = now.state_available {
            help(
                &mut out,
                "a2a_edge_state_available",
                "gauge",
                "Whether the last round trip to the shared state store succeeded (1) or not (0).",
            );
            let _ = writeln!(out, "a2a_edge_state_available {}", u8::from(available));
        }

        let refusals = lock(&self.authz_refusals).clone();
        help(
            &mut out,
            "a2a_edge_authz_refusals_total",
            "counter",
            "Requests an authorization decision refused, by reason code.",
        );
        for (reason, n) in &refusals {
            line(
                &mut out,
                "a2a_edge_authz_refusals_total",
                &[("reason", reason)],
                *n,
            );
        }

        let connections = lock(&self.connections).clone();
        help(
            &mut out,
            "a2a_edge_connections_total",
            "counter",
            "Connections by outcome: accepted, or the reason they were refused or dropped.",
        );
        for (outcome, n) in &connections {
            line(
                &mut out,
                "a2a_edge_connections_total",
                &[("outcome", outcome)],
                *n,
            );
        }
        help(
            &mut out,
            "a2a_edge_connections_open",
            "gauge",
            "Connections open now (TLS handshake included).",
        );
        let _ = writeln!(out, "a2a_edge_connections_open {}", self.open_connections());

        help(
            &mut out,
            "a2a_edge_streams_total",
            "counter",
            "SSE streams relayed, by how they ended: completed, client_gone, or the reason code of the error frame that ended them.",
        );
        for (outcome, n) in &lock(&self.streams).clone() {
            line(
                &mut out,
                "a2a_edge_streams_total",
                &[("outcome", outcome)],
                *n,
            );
        }
        help(
            &mut out,
            "a2a_edge_streams_open",
            "gauge",
            "SSE streams being relayed now.",
        );
        let _ = writeln!(
            out,
            "a2a_edge_streams_open {}",
            self.streams_open.load(Ordering::Relaxed).max(0)
        );
        help(
            &mut out,
            "a2a_edge_upstream_healthy",
            "gauge",
            "1 when the agent passes its health checks, 0 when it is ejected.",
        );
        for u in &now.upstreams {
            line(
                &mut out,
                "a2a_edge_upstream_healthy",
                &[("upstream", &u.name)],
                u64::from(u.healthy),
            );
        }
        help(
            &mut out,
            "a2a_edge_upstream_in_flight",
            "gauge",
            "Requests in flight to the agent.",
        );
        for u in &now.upstreams {
            line(
                &mut out,
                "a2a_edge_upstream_in_flight",
                &[("upstream", &u.name)],
                u.in_flight as u64,
            );
        }
        help(
            &mut out,
            "a2a_edge_card_published",
            "gauge",
            "1 when a card is published at /.well-known/agent-card.json.",
        );
        let _ = writeln!(
            out,
            "a2a_edge_card_published {}",
            u8::from(now.card_published)
        );
        help(
            &mut out,
            "a2a_edge_log_lines_dropped_total",
            "counter",
            "Log lines dropped because the log writer's buffer (8 MiB) was full (requests never wait for stderr).",
        );
        let _ = writeln!(
            out,
            "a2a_edge_log_lines_dropped_total {}",
            crate::telemetry::sink::dropped()
        );
        help(
            &mut out,
            "a2a_edge_card_invalid",
            "gauge",
            "1 when the last card refresh refused the card as not an A2A 1.0 AgentCard (card.invalid).",
        );
        let _ = writeln!(out, "a2a_edge_card_invalid {}", u8::from(now.card_invalid));
        help(
            &mut out,
            "a2a_edge_card_refresh_failures_total",
            "counter",
            "Card refreshes that failed (the last good card stays served).",
        );
        let _ = writeln!(
            out,
            "a2a_edge_card_refresh_failures_total {}",
            self.card_refresh_failures.load(Ordering::Relaxed)
        );
        if let Some(r) = &now.registry {
            registry(&mut out, r);
        }
        help(
            &mut out,
            "a2a_edge_policy_reloads_total",
            "counter",
            "Policy reloads (SIGHUP), applied or refused.",
        );
        for (result, c) in [("ok", &self.reloads_ok), ("refused", &self.reloads_failed)] {
            line(
                &mut out,
                "a2a_edge_policy_reloads_total",
                &[("result", result)],
                c.load(Ordering::Relaxed),
            );
        }
        help(
            &mut out,
            "a2a_edge_draining",
            "gauge",
            "1 once shutdown started: no new connections, in-flight requests finish.",
        );
        let _ = writeln!(out, "a2a_edge_draining {}", u8::from(self.is_draining()));
        out
    }
}

fn registry(out: &mut String, r: &crate::state::registry::RegistryStats) {
    help(
        out,
        "a2a_edge_registry_entries",
        "gauge",
        "Tasks and contexts whose owner the edge remembers; running contexts; turns in flight; evicted contexts whose owner is still known.",
    );
    for (kind, n) in [
        ("tasks", r.tasks),
        ("contexts", r.contexts),
        ("forgotten_contexts", r.forgotten_contexts),
        ("running_contexts", r.running_contexts),
        ("pending_turns", r.pending_turns),
    ] {
        line(
            out,
            "a2a_edge_registry_entries",
            &[("kind", kind)],
            n as u64,
        );
    }
    help(
        out,
        "a2a_edge_registry_evictions_total",
        "counter",
        "Entries evicted to stay within the registry's size (alert on contexts: once an evicted context's owner is forgotten too, its id can be claimed again).",
    );
    for (kind, n) in [("tasks", r.evicted_tasks), ("contexts", r.evicted_contexts)] {
        line(
            out,
            "a2a_edge_registry_evictions_total",
            &[("kind", kind)],
            n,
        );
    }
    help(
        out,
        "a2a_edge_registry_ignored_total",
        "counter",
        "Agent answers not recorded: naming another caller's task or context, or the registry full of running turns.",
    );
    for (why, n) in [("foreign", r.foreign_ignored), ("full", r.refused_full)] {
        line(out, "a2a_edge_registry_ignored_total", &[("why", why)], n);
    }
}

fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn line(out: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    out.push_str(name);
    // The agent label only exists with `[[agents]]`.
    let labels: Vec<&(&str, &str)> = labels
        .iter()
        .filter(|(k, v)| !(*k == "agent" && v.is_empty()))
        .collect();
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values: backslash, double quote and line feed escaped (exposition format 0.0.4).
fn escape(v: &str) -> String {
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
            Some("auth.missing"),
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
            .contains("a2a_edge_request_duration_seconds_bucket{route=\"rpc\",le=\"0.005\"} 2\n"));
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{route=\"rpc\",le=\"0.025\"} 2\n"));
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{route=\"rpc\",le=\"0.05\"} 3\n"));
        assert!(text.contains("a2a_edge_request_duration_seconds_count{route=\"rpc\"} 3\n"));
        // Above the last bucket: only +Inf holds it.
        assert!(
            text.contains("a2a_edge_request_duration_seconds_bucket{route=\"card\",le=\"10\"} 0\n")
        );
        assert!(text
            .contains("a2a_edge_request_duration_seconds_bucket{route=\"card\",le=\"+Inf\"} 1\n"));
    }

    #[test]
    fn connection_gauge_follows_guards_and_labels_are_escaped() {
        let m = Metrics::new();
        let a = m.open_connection();
        let b = m.open_connection();
        m.connection("accepted");
        m.connection("accepted");
        m.connection("network.denied");
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
        };
        let text = m.render(&now);
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
        m.connection("accepted");
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
            if l.starts_with('#') {
                continue;
            }
            let (series, value) = l.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{l}");
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
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
