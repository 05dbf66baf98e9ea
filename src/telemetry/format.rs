//! The JSON line of a `tracing` event: `{"ts":"<RFC 3339 µs, UTC>","level":"info",…fields}` in
//! the order the event names its fields, written in one pass into one buffer. Strings, numbers
//! and booleans keep their JSON types; a value given with `%`/`?` is written as a string, except
//! [`Json`] values (lists, objects), which are written as the JSON they are. A field that is an
//! empty `Option` is left out.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format of `log_format = "json"`.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut out = String::with_capacity(320);
        out.push_str("{\"ts\":\"");
        out.push_str(&super::now());
        out.push_str("\",\"level\":\"");
        out.push_str(level_name(event.metadata().level()));
        out.push('"');
        event.record(&mut Fields(&mut out));
        out.push_str("}\n");
        writer.write_str(&out)
    }
}

fn level_name(l: &tracing::Level) -> &'static str {
    match *l {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warn",
        tracing::Level::INFO => "info",
        tracing::Level::DEBUG => "debug",
        tracing::Level::TRACE => "trace",
    }
}

/// Appends `,"name":value` for each field.
struct Fields<'a>(&'a mut String);

impl Fields<'_> {
    fn key(&mut self, field: &Field) {
        self.0.push_str(",\"");
        // Field names are Rust identifiers (or dotted ones): nothing to escape.
        self.0.push_str(field.name());
        self.0.push_str("\":");
    }

    fn string(&mut self, s: &str) {
        // serde_json writes a JSON string with exactly the escapes JSON needs.
        let _ = serde_json::to_writer(StringWriter(self.0), s);
    }
}

/// A `String` as an `io::Write` (serde_json writes valid UTF-8 only).
struct StringWriter<'a>(&'a mut String);

impl std::io::Write for StringWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(s) => {
                self.0.push_str(s);
                Ok(buf.len())
            }
            Err(_) => Err(std::io::Error::other("not UTF-8")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        self.string(value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = write!(self.0, "{value}");
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.0, "{value}");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        match serde_json::Number::from_f64(value) {
            Some(n) => {
                let _ = write!(self.0, "{n}");
            }
            None => self.0.push_str("null"),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.0.push_str(if value { "true" } else { "false" });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        let text = format!("{value:?}");
        // Written raw only when it is JSON indeed: the line stays one valid JSON object
        // whatever a displayed value holds.
        match text.strip_prefix(JSON_MARK) {
            Some(json) if serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok() => {
                self.0.push_str(json)
            }
            _ => self.string(&text),
        }
    }
}

/// What [`Json`] writes first, so that the formatter knows the rest is JSON already (a field
/// never starts with it otherwise: it is not a printable character).
const JSON_MARK: &str = "\u{1}json:";

/// A list or object logged as JSON (`tracing` fields are scalars): `groups = ?Json(&groups)`.
/// The text format shows it as JSON too.
pub struct Json<T: serde::Serialize>(pub T);

impl<T: serde::Serialize> fmt::Debug for Json<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(&self.0).map_err(|_| fmt::Error)?;
        if f.alternate() {
            f.write_str(&text)
        } else {
            write!(f, "{JSON_MARK}{text}")
        }
    }
}

impl<T: serde::Serialize> fmt::Display for Json<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(&self.0).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// Captures what the formatter writes.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn capture(f: impl FnOnce()) -> Vec<serde_json::Value> {
        let out = Capture::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .event_format(JsonLines)
                .with_writer(move || writer.clone()),
        );
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    #[test]
    fn fields_keep_their_json_types_and_order() {
        let lines = capture(|| {
            let none: Option<&str> = None;
            tracing::info!(
                event = "request",
                principal = "al\"ice\n",
                tenant = none,
                status = 200u64,
                delta = -3i64,
                ratio = 0.5f64,
                ok = true,
                client = %std::net::IpAddr::from([127, 0, 0, 1]),
                groups = ?Json(["a", "b,c"]),
                detail = ?Json(serde_json::json!({"k": [1, 2]})),
                odd = "\u{1}json:not this",
            );
            tracing::warn!(event = "upstream_unhealthy", upstream = "agent-1");
        });
        assert_eq!(lines.len(), 2);
        let l = &lines[0];
        assert_eq!(l["level"], "info");
        assert_eq!(l["event"], "request");
        assert_eq!(l["principal"], "al\"ice\n");
        assert!(l.get("tenant").is_none(), "an empty Option is left out");
        assert_eq!(l["status"], 200);
        assert_eq!(l["delta"], -3);
        assert_eq!(l["ratio"], 0.5);
        assert_eq!(l["ok"], true);
        assert_eq!(l["client"], "127.0.0.1");
        assert_eq!(l["groups"], serde_json::json!(["a", "b,c"]));
        assert_eq!(l["detail"], serde_json::json!({"k": [1, 2]}));
        assert_eq!(
            l["odd"], "\u{1}json:not this",
            "a str is never taken for JSON"
        );
        let keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(&keys[..3], ["ts", "level", "event"]);
        assert!(crate::time::parse_rfc3339(l["ts"].as_str().unwrap()).is_some());
        assert_eq!(lines[1]["level"], "warn");
        assert_eq!(lines[1]["upstream"], "agent-1");
    }
}
