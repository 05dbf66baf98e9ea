//! Traces: with `[telemetry] otlp_endpoint`, one span per request (`request`, with the
//! pipeline's stages as children: `authenticate`, `read`, `parse`, `authorize`, `validate`,
//! `forward`, `relay`) exported over OTLP/HTTP (protobuf) in batches, for the share of
//! requests `otlp_sample_ratio` keeps ([`keep`]; the others make no span). The caller's W3C
//! trace context (a well-formed `traceparent`) is the request span's parent, and the agent is
//! sent the edge's own `forward` span as its `traceparent` (same trace, the edge's span as
//! parent; an untraced request's agent gets the caller's, marked not sampled).
//! Without an endpoint no span is recorded and the caller's trace context is forwarded as it
//! came (`upstream::trace_context`).

use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderMap;
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    Link, SamplingDecision, SamplingResult, SpanKind, TraceContextExt, TraceId, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_otlp::{Compression, Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SpanProcessor};
use opentelemetry_sdk::trace::{ShouldSample, SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// How long one batch's export may take, unless `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` says.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest export timeout the environment may ask for.
const MAX_EXPORT_TIMEOUT: Duration = Duration::from_secs(60);

/// Spans are exported (an OTLP endpoint is configured).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Spans a collector did not take (`a2a_edge_spans_lost_total`).
static LOST: AtomicU64 = AtomicU64::new(0);

/// Spans lost since the start because their export failed.
pub fn spans_lost() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// Whether spans are recorded and exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// What the standard `OTEL_*` environment variables ask of the exporter, checked: the
/// policy's keys decide where spans go and which are sampled, the environment how they
/// travel. Values the exporter cannot honour stop the start (as a bad policy key does)
/// instead of being dropped or defaulted silently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpEnv {
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT` (ms).
    pub timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION = "gzip"`.
    pub gzip: bool,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: the most spans waiting for export; more are dropped (and
    /// counted lost).
    pub queue: usize,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: the most spans one export sends (at most `queue`).
    pub batch: usize,
    /// `OTEL_BSP_SCHEDULE_DELAY` (ms): how long a batch that is not full waits.
    pub delay: Duration,
    /// Variables that are set and that the edge does not read, and why: each is named in
    /// an `otlp_env_ignored` warning at start.
    pub ignored: Vec<(&'static str, &'static str)>,
}

/// Variables an operator may expect to configure the exporter, which do nothing here.
const IGNORED: [(&str, &str); 6] = [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", POLICY_DECIDES),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", POLICY_DECIDES),
    ("OTEL_TRACES_SAMPLER", POLICY_DECIDES),
    ("OTEL_TRACES_SAMPLER_ARG", POLICY_DECIDES),
    (
        "OTEL_BSP_EXPORT_TIMEOUT",
        "an export's timeout is OTEL_EXPORTER_OTLP_TIMEOUT",
    ),
    ("OTEL_BSP_MAX_CONCURRENT_EXPORTS", "one export at a time"),
];

const POLICY_DECIDES: &str =
    "the policy decides: telemetry.otlp_endpoint, telemetry.otlp_sample_ratio";

/// Defaults and bounds of the batch processor's variables.
const QUEUE: usize = 2048;
const MAX_QUEUE: usize = 1 << 20;
const BATCH: usize = 512;
const DELAY: Duration = Duration::from_secs(5);
const MAX_DELAY: Duration = Duration::from_secs(600);

/// `v`, the value of `name`, as a whole number from 1 to `max` (milliseconds or spans).
fn whole(name: &str, v: &str, max: u64) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("{name}: must be a whole number from 1 to {max} (is {v:?})"))
}

impl OtlpEnv {
    /// Reads the process's environment.
    pub fn from_process() -> Result<OtlpEnv, String> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads the variables through `var` (a signal's own variable before the general one,
    /// as the OpenTelemetry specification orders them).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<OtlpEnv, String> {
        // The first of `names` that is set; an empty value counts as unset when `skip_empty`
        // (the specification's rule; not for the compression, which the exporter library
        // reads itself and refuses when empty).
        let first = |names: [&'static str; 2], skip_empty: bool| {
            names.into_iter().find_map(|n| {
                var(n)
                    .map(|v| (n, v.trim().to_string()))
                    .filter(|(_, v)| !(skip_empty && v.is_empty()))
            })
        };
        let timeout = match first(
            [
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ],
            true,
        ) {
            None => EXPORT_TIMEOUT,
            Some((name, v)) => {
                Duration::from_millis(whole(name, &v, MAX_EXPORT_TIMEOUT.as_millis() as u64)?)
            }
        };
        let gzip = match first(
            [
                "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ],
            false,
        ) {
            None => false,
            Some((_, v)) if v == "gzip" => true,
            Some((name, v)) => {
                return Err(format!(
                    "{name}: the only compression is \"gzip\" (is {v:?}; unset it for none)"
                ))
            }
        };
        if let Some((name, v)) = first(
            [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ],
            true,
        ) {
            if v != "http/protobuf" {
                return Err(format!(
                    "{name}: spans are exported over OTLP/HTTP with protobuf only: \"http/protobuf\" or unset (is {v:?})"
                ));
            }
        }
        // The batch processor's: a whole number within bounds, or the start stops.
        let number = |name: &'static str, default: u64, max: u64| -> Result<u64, String> {
            match var(name).map(|v| v.trim().to_string()) {
                None => Ok(default),
                Some(v) if v.is_empty() => Ok(default),
                Some(v) => whole(name, &v, max),
            }
        };
        let queue = number("OTEL_BSP_MAX_QUEUE_SIZE", QUEUE as u64, MAX_QUEUE as u64)? as usize;
        let batch = number(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            BATCH.min(queue) as u64,
            queue as u64,
        )? as usize;
        let delay = Duration::from_millis(number(
            "OTEL_BSP_SCHEDULE_DELAY",
            DELAY.as_millis() as u64,
            MAX_DELAY.as_millis() as u64,
        )?);
        let ignored = IGNORED
            .into_iter()
            .filter(|(n, _)| var(n).is_some())
            .collect();
        Ok(OtlpEnv {
            timeout,
            gzip,
            queue,
            batch,
            delay,
            ignored,
        })
    }
}

/// Which requests' spans are exported (`telemetry.otlp_sample_ratio`): the fraction `ratio`
/// of requests, each trace whole. The gate decides before it makes the request's span
/// ([`keep`]): a request that is not kept makes no span at all (no stage either: they are
/// made only under a recorded request span), so sampling saves the spans' cost, not only
/// their export. The decision is a hash, under a key random to the process, of the caller's
/// trace id (the same trace is decided alike) or of a counter (a request without one), so a
/// caller can neither force export (its `traceparent`'s sampled flag is not obeyed) nor
/// choose trace ids that are always exported.
#[derive(Debug)]
struct Ratio {
    ratio: f64,
    key: RandomState,
    draws: AtomicU64,
}

impl Ratio {
    fn new(ratio: f64) -> Self {
        Ratio {
            ratio,
            key: RandomState::new(),
            draws: AtomicU64::new(0),
        }
    }

    /// Whether the request of this caller's trace id (or of none) is traced.
    fn keeps(&self, trace_id: Option<&[u8]>) -> bool {
        if self.ratio >= 1.0 {
            return true;
        }
        if self.ratio <= 0.0 {
            return false;
        }
        let h = match trace_id {
            Some(id) => self.key.hash_one(id),
            None => self
                .key
                .hash_one(self.draws.fetch_add(1, Ordering::Relaxed)),
        };
        // The hash's top 53 bits as a fraction in [0, 1).
        ((h >> 11) as f64) / ((1u64 << 53) as f64) < self.ratio
    }
}

/// The ratio of the running exporter (set once, at start).
static RATIO: std::sync::OnceLock<Ratio> = std::sync::OnceLock::new();

/// Whether a request whose caller sent the (well-formed) trace id `caller_trace_id`, or
/// none, is traced: spans exported and the decision passed on to the agent.
pub fn keep(caller_trace_id: Option<&str>) -> bool {
    enabled()
        && RATIO
            .get()
            .is_some_and(|r| r.keeps(caller_trace_id.map(str::as_bytes)))
}

/// The SDK's sampler: the gate has decided ([`keep`]) before a request span exists, so a
/// request span (no parent, or the caller's as its remote parent) is recorded, and a stage
/// follows its request span.
#[derive(Debug, Clone)]
struct Decided;

impl ShouldSample for Decided {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        _trace_id: TraceId,
        _name: &str,
        _kind: &SpanKind,
        _attributes: &[KeyValue],
        _links: &[Link],
    ) -> SamplingResult {
        let parent_span = parent
            .filter(|cx| cx.has_active_span())
            .map(|cx| cx.span().span_context().clone());
        let keep = match &parent_span {
            Some(p) if !p.is_remote() => p.is_sampled(),
            _ => true,
        };
        SamplingResult {
            decision: if keep {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: parent_span
                .map(|p| p.trace_state().clone())
                .unwrap_or_default(),
        }
    }
}

/// A stage's span (`authenticate`, `read`, ...): recorded only inside a traced request's
/// span, none otherwise (nothing is made for a request that is not traced).
macro_rules! stage_span {
    ($name:literal) => {
        if $crate::telemetry::traces::enabled() && !tracing::Span::current().is_none() {
            tracing::info_span!($name)
        } else {
            tracing::Span::none()
        }
    };
    ($name:literal, $($fields:tt)*) => {
        if $crate::telemetry::traces::enabled() && !tracing::Span::current().is_none() {
            tracing::info_span!($name, $($fields)*)
        } else {
            tracing::Span::none()
        }
    };
}

pub(crate) use stage_span;

/// The tracer provider of `endpoint` (`<endpoint>/v1/traces`; over TLS for `https://`, with
/// the certificates of `ca_file` or the system's roots), exporting `sample_ratio` of the
/// traces as `env` says; must run inside the Tokio runtime that will export the batches.
pub(super) fn provider(
    endpoint: &url::Url,
    ca_file: Option<&Path>,
    sample_ratio: f64,
    env: &OtlpEnv,
) -> Result<SdkTracerProvider, String> {
    let url = endpoint
        .join("v1/traces")
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.as_str())
        .with_timeout(env.timeout);
    let builder = if env.gzip {
        builder.with_compression(Compression::Gzip)
    } else {
        builder
    };
    let builder = if url.scheme() == "https" {
        let tls = crate::tls::upstream_client_config(ca_file, None)
            .map_err(|e| format!("telemetry.otlp_ca_file: {e}"))?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        builder.with_http_client(HyperClient::new(connector, env.timeout, None))
    } else {
        builder
    };
    let exporter = builder
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    // The SDK's batch processor runs on a thread of its own: a finished span is queued
    // without waking anyone (the thread wakes per batch or per `OTEL_BSP_SCHEDULE_DELAY`);
    // its exports run on this runtime (the HTTP client's connections and timers).
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "telemetry: the span exporter needs the Tokio runtime".to_string())?;
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(env.queue)
        .with_max_export_batch_size(env.batch)
        .with_scheduled_delay(env.delay)
        .build();
    let queued = Arc::new(AtomicUsize::new(0));
    let processor = BatchSpanProcessor::builder(Reported::new(exporter, runtime, queued.clone()))
        .with_batch_config(config)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Bounded {
            inner: processor,
            queued,
            cap: env.queue,
            dropped: Mutex::default(),
        })
        .with_sampler(Decided)
        .with_resource(resource())
        .build();
    // A second provider in one process (tests) keeps the first ratio.
    let _ = RATIO.set(Ratio::new(sample_ratio));
    ENABLED.store(true, Ordering::Relaxed);
    Ok(provider)
}

/// The spans' resource: the SDK's (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`), with the
/// service name `a2a-edge` unless the environment names it.
fn resource() -> opentelemetry_sdk::Resource {
    let detected = opentelemetry_sdk::Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|v| v.as_str() != "unknown_service");
    if named {
        detected
    } else {
        opentelemetry_sdk::Resource::builder()
            .with_service_name("a2a-edge")
            .build()
    }
}

/// How often at most a failing export is logged (the failures in between are counted into
/// the next line).
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The batch processor, with its queue counted: a span that would not fit
/// (`OTEL_BSP_MAX_QUEUE_SIZE` spans already wait or are being exported: the collector is
/// slower than the spans come) is dropped here, counted in `a2a_edge_spans_lost_total` and
/// logged (`otlp_queue_full`, at most one line per 10 s), where the SDK's processor would
/// drop it silently. `queued` is what was handed on and not exported yet (the exporter takes
/// its batches off), so the SDK's own queue, as large, is never full.
#[derive(Debug)]
struct Bounded<P> {
    inner: P,
    queued: Arc<AtomicUsize>,
    cap: usize,
    dropped: Mutex<Unreported>,
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        self.inner.on_start(span, cx)
    }

    fn on_end(&self, span: SpanData) {
        if self.queued.fetch_add(1, Ordering::Relaxed) < self.cap {
            return self.inner.on_end(span);
        }
        self.queued.fetch_sub(1, Ordering::Relaxed);
        LOST.fetch_add(1, Ordering::Relaxed);
        let Some(due) = Unreported::add(&self.dropped, 0, 1) else {
            return;
        };
        tracing::warn!(
            event = "otlp_queue_full",
            spans = due.spans,
            queue = self.cap,
            "spans dropped: the collector takes them slower than they come (OTEL_BSP_MAX_QUEUE_SIZE, otlp_sample_ratio)"
        );
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource)
    }
}

/// The exporter, with its failures written to the log: an unreachable collector, a refused
/// certificate or an error status loses those spans (requests never wait for the
/// collector), and the operator sees `otlp_export_failed` with the error and how many
/// batches and spans were lost since the last such line, and `a2a_edge_spans_lost_total`.
#[derive(Debug)]
struct Reported<E> {
    inner: E,
    /// The runtime the exports run on (the batch processor's thread is not one of its).
    runtime: tokio::runtime::Handle,
    /// [`Bounded`]'s count of spans not exported yet.
    queued: Arc<AtomicUsize>,
    failures: Mutex<Unreported>,
}

/// Failures not logged yet, and when the last line was.
#[derive(Debug, Default)]
struct Unreported {
    logged_at: Option<Instant>,
    batches: u64,
    spans: u64,
}

impl Unreported {
    /// Counts `batches` and `spans` more; when a line is due (none in the last
    /// [`REPORT_EVERY`]), returns what it reports and starts counting anew.
    fn add(this: &Mutex<Unreported>, batches: u64, spans: u64) -> Option<Unreported> {
        let mut u = this.lock().ok()?;
        u.batches += batches;
        u.spans += spans;
        let now = Instant::now();
        if u.logged_at
            .is_some_and(|at| now.duration_since(at) < REPORT_EVERY)
        {
            return None;
        }
        Some(std::mem::replace(
            &mut *u,
            Unreported {
                logged_at: Some(now),
                ..Unreported::default()
            },
        ))
    }
}

impl<E> Reported<E> {
    fn new(inner: E, runtime: tokio::runtime::Handle, queued: Arc<AtomicUsize>) -> Self {
        Reported {
            inner,
            runtime,
            queued,
            failures: Mutex::default(),
        }
    }

    fn failed(&self, spans: usize, error: &dyn std::fmt::Display) {
        LOST.fetch_add(spans as u64, Ordering::Relaxed);
        let Some(due) = Unreported::add(&self.failures, 1, spans as u64) else {
            return;
        };
        tracing::warn!(
            event = "otlp_export_failed",
            batches = due.batches,
            spans = due.spans,
            error = %error,
        );
    }
}

impl<E: SpanExporter> SpanExporter for Reported<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = match tokio::runtime::Handle::try_current() {
            Ok(_) => self.inner.export(batch).await,
            // The batch processor's thread: block it on the runtime (it has nothing else to
            // do; the runtime's threads drive the connection).
            Err(_) => self.runtime.block_on(self.inner.export(batch)),
        };
        // Exported or lost, these spans left the queue.
        self.queued.fetch_sub(n, Ordering::Relaxed);
        if let Err(e) = &result {
            self.failed(n, e);
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource)
    }
}

/// Clears the sampled flag of a forwarded `traceparent` (well-formed: checked when it was
/// forwarded; anything else is left alone).
fn not_sampled(headers: &mut HeaderMap) {
    let Some(v) = headers.get(TRACEPARENT) else {
        return;
    };
    let b = v.as_bytes();
    let Some(flags) = (b.len() == 55)
        .then(|| std::str::from_utf8(&b[53..]).ok())
        .flatten()
        .and_then(|f| u8::from_str_radix(f, 16).ok())
    else {
        return;
    };
    if flags & 1 == 0 {
        return;
    }
    let cleared = format!("{}{:02x}", String::from_utf8_lossy(&b[..53]), flags & !1);
    if let Ok(v) = http::HeaderValue::from_str(&cleared) {
        headers.insert(TRACEPARENT, v);
    }
}

const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

/// The tracer the `tracing` layer records with.
pub(super) fn tracer(provider: &SdkTracerProvider) -> opentelemetry_sdk::trace::Tracer {
    provider.tracer("a2a-edge")
}

/// Makes the caller's trace context the parent of `span`: `checked` is what
/// [`crate::upstream::trace_context::forwardable`] kept of it (one well-formed
/// `traceparent`, a `tracestate` only when valid), never the caller's raw headers, whose
/// `tracestate` OpenTelemetry's parser would take as it came (tabs, empty values, any
/// number of members) into every span and on to the agent.
pub fn adopt_parent(span: &tracing::Span, checked: &[(http::HeaderName, http::HeaderValue)]) {
    if !enabled() || span.is_disabled() {
        return;
    }
    let headers: HeaderMap = checked.iter().cloned().collect();
    let parent =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(&headers));
    let _ = span.set_parent(parent);
}

/// Writes `span`'s context as the `traceparent` (and `tracestate`) of a request to an agent,
/// replacing the caller's. No-op without export.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    if !enabled() {
        return;
    }
    if span.is_disabled() {
        // Not traced here: the agent gets the caller's trace context, marked not sampled
        // (the edge's decision is the trace's: a caller's flag cannot make agents export).
        not_sampled(headers);
        return;
    }
    let cx = span.context();
    TraceContextPropagator::new()
        .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
    // The propagator writes the state even when there is none: no empty header.
    if headers
        .get(TRACESTATE)
        .is_some_and(|v| v.as_bytes().is_empty())
    {
        headers.remove(TRACESTATE);
    }
}

const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceState;

    fn env(vars: &[(&str, &str)]) -> Result<OtlpEnv, String> {
        OtlpEnv::from_vars(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_exporters_environment_is_read_or_refused_by_name() {
        let plain = env(&[]).unwrap();
        assert_eq!(
            plain,
            OtlpEnv {
                timeout: EXPORT_TIMEOUT,
                gzip: false,
                queue: 2048,
                batch: 512,
                delay: Duration::from_secs(5),
                ignored: vec![]
            }
        );
        // The batch processor's variables: read, bounded, the batch within the queue.
        for (vars, queue, batch, delay) in [
            (vec![("OTEL_BSP_MAX_QUEUE_SIZE", "16")], 16, 16, 5_000),
            (vec![("OTEL_BSP_MAX_QUEUE_SIZE", "1")], 1, 1, 5_000),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "1048576")],
                1 << 20,
                512,
                5_000,
            ),
            (vec![("OTEL_BSP_MAX_QUEUE_SIZE", "")], 2048, 512, 5_000),
            (
                vec![
                    ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
                    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64"),
                ],
                64,
                64,
                5_000,
            ),
            (
                vec![("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8")],
                2048,
                8,
                5_000,
            ),
            (vec![("OTEL_BSP_SCHEDULE_DELAY", "100")], 2048, 512, 100),
            (
                vec![("OTEL_BSP_SCHEDULE_DELAY", " 600000 ")],
                2048,
                512,
                600_000,
            ),
        ] {
            let e = env(&vars).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
            assert_eq!(
                (e.queue, e.batch, e.delay),
                (queue, batch, Duration::from_millis(delay)),
                "{vars:?}"
            );
        }
        // Read: the signal's own variable before the general one.
        for (vars, timeout, gzip) in [
            (vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "250")], 250, false),
            (vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "")], 5_000, false),
            (vec![("OTEL_EXPORTER_OTLP_PROTOCOL", " ")], 5_000, false),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", ""),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "700"),
                ],
                700,
                false,
            ),
            (vec![("OTEL_EXPORTER_OTLP_TIMEOUT", " 250 ")], 250, false),
            (vec![("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")], 1, false),
            (vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")], 60_000, false),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "300"),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "junk"),
                ],
                300,
                false,
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")],
                5_000,
                true,
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")],
                5_000,
                true,
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
                5_000,
                false,
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")],
                5_000,
                false,
            ),
        ] {
            let e = env(&vars).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
            assert_eq!(e.timeout, Duration::from_millis(timeout), "{vars:?}");
            assert_eq!(e.gzip, gzip, "{vars:?}");
        }
        // Refused, naming the variable that decided.
        for (vars, name) in [
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "0")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "-5")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "5s")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "1.5")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "60001")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "99999999999999999999999")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "x"),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")],
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_COMPRESSION", "none")],
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP")],
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_COMPRESSION", "")],
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "br"),
                    ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")],
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            ),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "0")],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "-1")],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "1048577")],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "2k")],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
            (
                vec![
                    ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
                    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "17"),
                ],
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            ),
            (
                vec![("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0")],
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            ),
            (
                vec![("OTEL_BSP_SCHEDULE_DELAY", "0")],
                "OTEL_BSP_SCHEDULE_DELAY",
            ),
            (
                vec![("OTEL_BSP_SCHEDULE_DELAY", "5s")],
                "OTEL_BSP_SCHEDULE_DELAY",
            ),
            (
                vec![("OTEL_BSP_SCHEDULE_DELAY", "600001")],
                "OTEL_BSP_SCHEDULE_DELAY",
            ),
        ] {
            let Err(e) = env(&vars) else {
                panic!("accepted: {vars:?}")
            };
            assert!(e.starts_with(&format!("{name}: ")), "{vars:?}: {e}");
        }
        // Set and not read: named, so that the start can say so.
        let e = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4318"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=k"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "1000"),
        ])
        .unwrap();
        let names: Vec<&str> = e.ignored.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_TRACES_SAMPLER",
                "OTEL_BSP_EXPORT_TIMEOUT"
            ]
        );
        assert!(e.ignored[2].1.contains("OTEL_EXPORTER_OTLP_TIMEOUT"));
    }

    fn decide(parent: Option<&Context>) -> bool {
        Decided
            .should_sample(
                parent,
                TraceId::from(1u128),
                "request",
                &SpanKind::Server,
                &[],
                &[],
            )
            .decision
            == SamplingDecision::RecordAndSample
    }

    #[test]
    fn a_request_is_kept_by_the_ratio_and_a_caller_cannot_choose_ids_that_always_are() {
        let ids: Vec<[u8; 32]> = (1..=4000u128)
            .map(|i| {
                let id = i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
                format!("{id:032x}").into_bytes().try_into().unwrap()
            })
            .collect();
        for ratio in [0.0, 0.1, 0.5, 1.0] {
            let r = Ratio::new(ratio);
            let n = ids.len() as f64;
            let kept = ids.iter().filter(|t| r.keeps(Some(&t[..]))).count();
            assert!(
                (kept as f64 - ratio * n).abs() <= 0.05 * n,
                "{ratio}: {kept} of {n} trace ids"
            );
            // The same trace id is decided alike.
            for t in &ids[..200] {
                assert_eq!(r.keeps(Some(&t[..])), r.keeps(Some(&t[..])));
            }
            // Requests without a trace id: the ratio of them.
            let kept = (0..4000).filter(|_| r.keeps(None)).count();
            assert!(
                (kept as f64 - ratio * n).abs() <= 0.05 * n,
                "{ratio}: {kept} of {n} requests"
            );
        }
        // Trace ids that an unkeyed ratio sampler always keeps (the low 64 bits zero, as
        // hex) are kept at the ratio too: the key is the process's.
        let low_zero: Vec<String> = (1..=2000u64)
            .map(|i| format!("{i:016x}0000000000000000"))
            .collect();
        let r = Ratio::new(0.1);
        let kept = low_zero
            .iter()
            .filter(|t| r.keeps(Some(t.as_bytes())))
            .count();
        assert!((100..=300).contains(&kept), "{kept} of 2000");
    }

    #[test]
    fn the_sdk_records_a_request_span_and_a_stage_follows_its_request() {
        use opentelemetry::trace::{SpanContext, SpanId, TraceFlags};
        let parent = |remote: bool, sampled: bool| {
            let flags = if sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            };
            Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from(1u128),
                SpanId::from(7u64),
                flags,
                remote,
                TraceState::default(),
            ))
        };
        // The gate kept the request: its span is recorded whatever the caller's flag.
        assert!(decide(None));
        assert!(decide(Some(&Context::new())));
        assert!(decide(Some(&parent(true, true))));
        assert!(decide(Some(&parent(true, false))));
        // A stage: as its request span.
        assert!(decide(Some(&parent(false, true))));
        assert!(!decide(Some(&parent(false, false))));
    }

    #[test]
    fn an_untraced_requests_forwarded_trace_context_is_marked_not_sampled() {
        let tp =
            |flags: &str| format!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flags}");
        for (flags, want) in [
            ("01", "00"),
            ("00", "00"),
            ("03", "02"),
            ("ff", "fe"),
            ("02", "02"),
        ] {
            let mut h = HeaderMap::new();
            h.insert("traceparent", tp(flags).parse().unwrap());
            h.insert("tracestate", "a=b".parse().unwrap());
            not_sampled(&mut h);
            assert_eq!(h["traceparent"], tp(want).as_str(), "{flags}");
            assert_eq!(h["tracestate"], "a=b");
        }
        // Nothing to mark, or not a well-formed one (never forwarded): left alone.
        for v in [
            None,
            Some("00-abc-01"),
            Some(&*format!("{}zz", &tp("01")[..53])),
        ] {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert("traceparent", v.parse().unwrap());
            }
            let before = h.clone();
            not_sampled(&mut h);
            assert_eq!(h, before);
        }
    }
}
