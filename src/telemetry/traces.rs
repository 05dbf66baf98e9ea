//! Traces: with `[telemetry] otlp_endpoint`, one span per request (`request`, with the
//! pipeline's stages as children: `authenticate`, `read`, `parse`, `authorize`, `validate`,
//! `forward`, `relay`) exported over OTLP/HTTP (protobuf) in batches. The caller's W3C trace
//! context (a well-formed `traceparent`) is the request span's parent, and the agent is sent
//! the edge's own `forward` span as its `traceparent` (same trace, the edge's span as parent).
//! Without an endpoint no span is recorded and the caller's trace context is forwarded as it
//! came (`upstream::trace_context`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::HeaderMap;
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// How long one batch's export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

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

/// The tracer provider of `endpoint` (`<endpoint>/v1/traces`; over TLS for `https://`, with
/// the certificates of `ca_file` or the system's roots); must run inside the Tokio runtime
/// that will export the batches.
pub(super) fn provider(
    endpoint: &url::Url,
    ca_file: Option<&Path>,
) -> Result<SdkTracerProvider, String> {
    let url = endpoint
        .join("v1/traces")
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.as_str())
        .with_timeout(EXPORT_TIMEOUT);
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
        builder.with_http_client(HyperClient::new(connector, EXPORT_TIMEOUT, None))
    } else {
        builder
    };
    let exporter = builder
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let processor =
        BatchSpanProcessor::builder(Reported::new(exporter), opentelemetry_sdk::runtime::Tokio)
            .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("a2a-edge")
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    ENABLED.store(true, Ordering::Relaxed);
    Ok(provider)
}

/// How often at most a failing export is logged (the failures in between are counted into
/// the next line).
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The exporter, with its failures written to the log: an unreachable collector, a refused
/// certificate or an error status loses those spans (requests never wait for the
/// collector), and the operator sees `otlp_export_failed` with the error and how many
/// batches and spans were lost since the last such line, and `a2a_edge_spans_lost_total`.
#[derive(Debug)]
struct Reported<E> {
    inner: E,
    /// When a failure was last logged; failed batches and lost spans not logged yet.
    failures: Mutex<(Option<Instant>, u64, u64)>,
}

impl<E> Reported<E> {
    fn new(inner: E) -> Self {
        Reported {
            inner,
            failures: Mutex::new((None, 0, 0)),
        }
    }

    fn failed(&self, spans: usize, error: &dyn std::fmt::Display) {
        LOST.fetch_add(spans as u64, Ordering::Relaxed);
        let Ok(mut f) = self.failures.lock() else {
            return;
        };
        f.1 += 1;
        f.2 += spans as u64;
        let now = Instant::now();
        if f.0.is_some_and(|at| now.duration_since(at) < REPORT_EVERY) {
            return;
        }
        tracing::warn!(
            event = "otlp_export_failed",
            batches = f.1,
            spans = f.2,
            error = %error,
        );
        *f = (Some(now), 0, 0);
    }
}

impl<E: SpanExporter> SpanExporter for Reported<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
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

/// The tracer the `tracing` layer records with.
pub(super) fn tracer(provider: &SdkTracerProvider) -> opentelemetry_sdk::trace::Tracer {
    provider.tracer("a2a-edge")
}

/// Makes the caller's trace context (already checked well-formed) the parent of `span`.
pub fn adopt_parent(span: &tracing::Span, headers: &HeaderMap) {
    if !enabled() || span.is_disabled() {
        return;
    }
    let parent =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    let _ = span.set_parent(parent);
}

/// Writes `span`'s context as the `traceparent` (and `tracestate`) of a request to an agent,
/// replacing the caller's. No-op without export.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    if !enabled() || span.is_disabled() {
        return;
    }
    let cx = span.context();
    TraceContextPropagator::new()
        .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
}
