//! The JSON line of a `tracing` event: `{"ts":"<RFC 3339 µs, UTC>","level":"info",…fields}` in
//! the order the event names its fields, written in one pass into one buffer. Strings, numbers
//! and booleans keep their JSON types; a value given with `%`/`?` is written as a string, except
//! [`Json`] values (lists, objects), which are written as the JSON they are. A field that is an
//! empty `Option` is left out.

use std::fmt;

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
        // Written straight into the layer's buffer: no string of the line's own.
        writer.write_str("{\"ts\":\"")?;
        crate::time::write_rfc3339(&mut writer, crate::time::now_micros())?;
        writer.write_str("\",\"level\":\"")?;
        writer.write_str(level_name(event.metadata().level()))?;
        writer.write_char('"')?;
        let mut fields = Fields {
            w: &mut writer,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;
        writer.write_str("}\n")
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

/// Appends `,"name":value` for each field to `w`; the first error is kept.
struct Fields<'a, W: fmt::Write> {
    w: &'a mut W,
    result: fmt::Result,
}

impl<W: fmt::Write> Fields<'_, W> {
    fn put(&mut self, field: &Field, value: impl FnOnce(&mut W) -> fmt::Result) {
        if self.result.is_err() {
            return;
        }
        // Field names are Rust identifiers (or dotted ones): nothing to escape.
        self.result = write!(self.w, ",\"{}\":", field.name()).and_then(|()| value(self.w));
    }
}

/// A JSON string, with exactly the escapes JSON needs (serde_json's).
fn json_string(w: &mut impl fmt::Write, s: &str) -> fmt::Result {
    serde_json::to_writer(FmtWriter(w), s).map_err(|_| fmt::Error)
}

/// An `fmt::Write` as the `io::Write` serde_json writes to (it writes valid UTF-8 only).
struct FmtWriter<'a, W: fmt::Write>(&'a mut W);

impl<W: fmt::Write> std::io::Write for FmtWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let s = std::str::from_utf8(buf).map_err(|_| std::io::Error::other("not UTF-8"))?;
        self.0.write_str(s).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: fmt::Write> Visit for Fields<'_, W> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, |w| json_string(w, value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, |w| write!(w, "{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, |w| write!(w, "{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, |w| match serde_json::Number::from_f64(value) {
            Some(n) => write!(w, "{n}"),
            None => w.write_str("null"),
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, |w| w.write_str(if value { "true" } else { "false" }));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        // Written raw only when it is JSON indeed: the line stays one valid JSON object
        // whatever a displayed value holds.
        self.put(field, |w| match text.strip_prefix(JSON_MARK) {
            Some(json) if serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok() => {
                w.write_str(json)
            }
            _ => json_string(w, &text),
        });
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
