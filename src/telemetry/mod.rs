//! Structured logs: one JSON object per line on standard error. Callers pass only
//! low-cardinality codes and identities, never secrets or request bodies.

pub mod metrics;
pub mod request_id;
pub mod sink;

use serde_json::{Map, Value};

/// Writes one log line that the caller built whole (for the per-request line: no map of
/// owned keys to build first). `line` must serialize to a JSON object with `ts` and `event`.
pub fn log_line<T: serde::Serialize>(line: &T) {
    if let Ok(mut text) = serde_json::to_vec(line) {
        text.push(b'\n');
        sink::emit(text);
    }
}

/// The timestamp of a log line, RFC 3339 with microseconds, UTC.
pub fn now() -> String {
    crate::time::format_rfc3339(crate::time::now_micros())
}

/// Writes one log line: `{"ts":"<RFC 3339>","event":…, …fields}`.
pub fn log(event: &str, fields: Value) {
    let mut line = Map::new();
    line.insert("ts".into(), Value::from(now()));
    line.insert("event".into(), Value::from(event));
    if let Value::Object(f) = fields {
        line.extend(f);
    }
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    // A log that cannot be written must not take the request down (nor wait for stderr).
    sink::emit(text.into_bytes());
}
