//! Logs and traces. Log lines are `tracing` events, one per line on standard error (JSON by
//! default, see [`mod@format`]; or text), written by the edge's own batching writer
//! ([`sink`]: no request waits on stderr). Callers log only low-cardinality codes and
//! identities, never secrets or request bodies. Traces: see [`traces`].

pub mod format;
pub mod metrics;
pub mod request_id;
pub mod sampled;
pub mod settings;
pub mod sink;
pub mod traces;

pub use format::Json;

use tracing_subscriber::filter::{filter_fn, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use settings::{LogFormat, TelemetryPolicy};

/// The timestamp of a log line, RFC 3339 with microseconds, UTC.
pub fn now() -> String {
    crate::time::format_rfc3339(crate::time::now_micros())
}

/// What [`init`] set up, to be flushed at exit.
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

/// Installs the process's log writer (format and level of `policy`) and, with an OTLP
/// endpoint, the span exporter. Once per process, inside the Tokio runtime.
pub fn init(policy: &TelemetryPolicy) -> Result<Telemetry, String> {
    let level = LevelFilter::from_level(policy.log_level);
    // The exporter's environment is checked whenever spans are exported; its refusals stop
    // the start before any listener opens.
    let mut env = None;
    let provider = match &policy.otlp_endpoint {
        Some(endpoint) => {
            let e = env.insert(traces::OtlpEnv::from_process()?);
            Some(traces::provider(
                endpoint,
                policy.otlp_ca_file.as_deref(),
                policy.otlp_sample_ratio,
                e,
            )?)
        }
        None => None,
    };
    let export = provider.is_some();
    // One global filter, decided once per callsite: the edge's own events at the level, and
    // its spans only when they are exported. (Per-layer filters alone left every span
    // created in the registry, exported or not: 40 % of the CPU of a refused request.)
    let global = filter_fn(move |m: &tracing::Metadata<'_>| {
        m.target().starts_with("a2a_edge")
            && if m.is_span() {
                export
            } else {
                level >= *m.level()
            }
    });
    let logs = match policy.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .event_format(format::JsonLines)
            .with_writer(sink::Lines)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_target(false)
            .with_writer(sink::Lines)
            .boxed(),
    };
    let installed = match &provider {
        // Nothing but the global filter: every callsite is decided once (no per-event check).
        None => tracing_subscriber::registry()
            .with(global)
            .with(logs)
            .try_init(),
        Some(p) => {
            let events = filter_fn(|m: &tracing::Metadata<'_>| m.is_event());
            // The spans carry the edge's own attributes (route, method, status, request id,
            // agent, upstream), not the library's extras: code location, thread, target (six
            // attributes a span to build and encode) and busy/idle times (two clock reads
            // each time an instrumented future is polled); and no OpenTelemetry context is
            // attached per poll (nothing here reads it: parents come from the spans).
            let spans = tracing_opentelemetry::layer()
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_tracked_inactivity(false)
                .with_context_activation(false)
                .with_tracer(traces::tracer(p))
                .with_filter(filter_fn(|m: &tracing::Metadata<'_>| m.is_span()));
            tracing_subscriber::registry()
                .with(global)
                .with(logs.with_filter(events))
                .with(spans)
                .try_init()
        }
    };
    installed.map_err(|e| format!("cannot set up logging: {e}"))?;
    for (variable, reason) in env.iter().flat_map(|e| &e.ignored) {
        tracing::warn!(event = "otlp_env_ignored", variable, reason);
    }
    Ok(Telemetry { provider })
}

impl Telemetry {
    /// Exports the spans still buffered (at exit; waits at most the exporter's timeout).
    pub async fn shutdown(self) {
        if let Some(p) = self.provider {
            let _ = tokio::task::spawn_blocking(move || p.shutdown()).await;
        }
    }
}
