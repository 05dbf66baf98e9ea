//! The `[telemetry]` table: how log lines are written and where traces go.

use super::{file, Ctx, PolicyError};

/// How log lines are written on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One JSON object per line (`ts`, `level`, `event`, then the event's fields).
    #[default]
    Json,
    /// Human-readable lines (for a terminal).
    Text,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryPolicy {
    pub log_format: LogFormat,
    /// The least severe level written: `error`, `warn`, `info` (default), `debug`, `trace`.
    pub log_level: tracing::Level,
    /// OTLP/HTTP (protobuf) collector base URL (spans go to `<url>/v1/traces`); off when absent.
    pub otlp_endpoint: Option<url::Url>,
}

impl Default for TelemetryPolicy {
    fn default() -> Self {
        TelemetryPolicy {
            log_format: LogFormat::Json,
            log_level: tracing::Level::INFO,
            otlp_endpoint: None,
        }
    }
}

impl Ctx<'_> {
    pub(super) fn telemetry(
        &self,
        t: file::TelemetrySection,
    ) -> Result<TelemetryPolicy, PolicyError> {
        let log_format = match t.log_format.as_ref().map(|v| v.get_ref().as_str()) {
            None | Some("json") => LogFormat::Json,
            Some("text") => LogFormat::Text,
            Some(_) => {
                let v = t.log_format.as_ref().map(|v| v.span());
                return self.err(
                    "telemetry.log_format",
                    v,
                    "must be \"json\" or \"text\"".into(),
                );
            }
        };
        let log_level = match t.log_level.as_ref().map(|v| v.get_ref().as_str()) {
            None | Some("info") => tracing::Level::INFO,
            Some("error") => tracing::Level::ERROR,
            Some("warn") => tracing::Level::WARN,
            Some("debug") => tracing::Level::DEBUG,
            Some("trace") => tracing::Level::TRACE,
            Some(_) => {
                let v = t.log_level.as_ref().map(|v| v.span());
                return self.err(
                    "telemetry.log_level",
                    v,
                    "must be one of error, warn, info, debug, trace".into(),
                );
            }
        };
        let otlp_endpoint = match &t.otlp_endpoint {
            None => None,
            Some(raw) => match url::Url::parse(raw.get_ref()) {
                Ok(u)
                    if u.scheme() == "http"
                        && u.host().is_some()
                        && u.username().is_empty()
                        && u.password().is_none()
                        && u.query().is_none()
                        && u.fragment().is_none() =>
                {
                    Some(u)
                }
                Ok(u) if u.scheme() == "https" => {
                    return self.spanned_err(
                        "telemetry.otlp_endpoint",
                        raw,
                        "https collectors are not supported yet: run the collector (or an agent of it) beside the edge and give its http:// address",
                    )
                }
                _ => {
                    return self.spanned_err(
                        "telemetry.otlp_endpoint",
                        raw,
                        "must be an http:// URL of an OTLP/HTTP collector (e.g. \"http://127.0.0.1:4318\"), without credentials, query or fragment",
                    )
                }
            },
        };
        Ok(TelemetryPolicy {
            log_format,
            log_level,
            otlp_endpoint,
        })
    }
}
