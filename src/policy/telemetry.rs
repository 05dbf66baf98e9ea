//! The `[telemetry]` table: how log lines are written and where traces go.

use super::{file, Ctx, PolicyError};
use crate::telemetry::settings::{LogFormat, TelemetryPolicy};

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
                    if matches!(u.scheme(), "http" | "https")
                        && u.host().is_some()
                        && u.username().is_empty()
                        && u.password().is_none()
                        && u.query().is_none()
                        && u.fragment().is_none() =>
                {
                    Some(u)
                }
                _ => {
                    return self.spanned_err(
                        "telemetry.otlp_endpoint",
                        raw,
                        "must be an http:// or https:// URL of an OTLP/HTTP collector (e.g. \"http://127.0.0.1:4318\"), without credentials, query or fragment (headers such as an API key: OTEL_EXPORTER_OTLP_HEADERS)",
                    )
                }
            },
        };
        let otlp_ca_file = match &t.otlp_ca_file {
            None => None,
            Some(f) if otlp_endpoint.as_ref().map(url::Url::scheme) != Some("https") => {
                return self.spanned_err(
                    "telemetry.otlp_ca_file",
                    f,
                    "only meaningful with an https:// otlp_endpoint",
                )
            }
            Some(f) => {
                // Read now, so that `a2a-edge check` and a start refuse a CA file that is
                // missing or holds no certificate (the exporter reads it again at start).
                crate::tls::load_certs(f.get_ref())
                    .or_else(|e| self.spanned_err("telemetry.otlp_ca_file", f, e.to_string()))?;
                Some(f.get_ref().clone())
            }
        };
        let otlp_sample_ratio = match &t.otlp_sample_ratio {
            None => 1.0,
            Some(r) if otlp_endpoint.is_none() => {
                return self.spanned_err(
                    "telemetry.otlp_sample_ratio",
                    r,
                    "only meaningful with an otlp_endpoint",
                )
            }
            // NaN fails both comparisons.
            Some(r) if *r.get_ref() >= 0.0 && *r.get_ref() <= 1.0 => *r.get_ref(),
            Some(r) => {
                return self.spanned_err(
                    "telemetry.otlp_sample_ratio",
                    r,
                    "must be a number from 0 (no request's spans) to 1 (every request's)",
                )
            }
        };
        Ok(TelemetryPolicy {
            log_format,
            log_level,
            otlp_endpoint,
            otlp_ca_file,
            otlp_sample_ratio,
        })
    }
}
