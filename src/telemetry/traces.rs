//! Traces: with `[telemetry] otlp_endpoint`, one span per request (`request`, with the
//! pipeline's stages as children: `authenticate`, `read`, `parse`, `authorize`, `validate`,
//! `forward`, `relay`) exported over OTLP/HTTP (protobuf) in batches. The caller's W3C trace
//! context (a well-formed `traceparent`) is the request span's parent, and the agent is sent
//! the edge's own `forward` span as its `traceparent` (same trace, the edge's span as parent).
//! Without an endpoint no span is recorded and the caller's trace context is forwarded as it
//! came (`upstream::trace_context`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Spans are exported (an OTLP endpoint is configured).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are recorded and exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The tracer provider of `endpoint` (`<endpoint>/v1/traces`); must run inside the Tokio
/// runtime that will export the batches.
pub(super) fn provider(endpoint: &url::Url) -> Result<SdkTracerProvider, String> {
    let url = endpoint
        .join("v1/traces")
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.as_str())
        .with_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
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
