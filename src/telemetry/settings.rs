//! What the `[telemetry]` table compiles to (built by `crate::policy`, read by [`super::init`]):
//! how log lines are written and where traces go.

/// How log lines are written on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One JSON object per line (`ts`, `level`, `event`, then the event's fields).
    #[default]
    Json,
    /// Human-readable lines (for a terminal).
    Text,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryPolicy {
    pub log_format: LogFormat,
    /// The least severe level written: `error`, `warn`, `info` (default), `debug`, `trace`.
    pub log_level: tracing::Level,
    /// OTLP/HTTP (protobuf) collector base URL (spans go to `<url>/v1/traces`); off when absent.
    pub otlp_endpoint: Option<url::Url>,
    /// The CA certificates that an `https://` collector's certificate must chain to (PEM);
    /// absent: the system's roots.
    pub otlp_ca_file: Option<std::path::PathBuf>,
    /// The fraction of requests whose spans are exported, 0 to 1 (default 1: all).
    pub otlp_sample_ratio: f64,
}

impl Default for TelemetryPolicy {
    fn default() -> Self {
        TelemetryPolicy {
            log_format: LogFormat::Json,
            log_level: tracing::Level::INFO,
            otlp_endpoint: None,
            otlp_ca_file: None,
            otlp_sample_ratio: 1.0,
        }
    }
}
