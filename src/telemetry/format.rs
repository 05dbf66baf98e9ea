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

use crate::a2a::write::{needs_escape, Escape};

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
    w.write_char('"')?;
    escape_into(w, s)?;
    w.write_char('"')
}

/// `s` as the inside of a JSON string (the edge's own escapes, `a2a::write`), unescaped runs
/// written whole.
fn escape_into(w: &mut impl fmt::Write, s: &str) -> fmt::Result {
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        if needs_escape(b) {
            w.write_str(&s[run..i])?;
            w.write_str(Escape::of(b).as_str())?;
            run = i + 1;
        }
    }
    w.write_str(&s[run..])
}

/// What a `?`-field's `Debug` writes, written on as a JSON value: escaped into a string as it
/// comes (no `String` of the value's own), unless it begins with [`JSON_MARK`]: then the rest
/// is kept and written raw if it is JSON indeed (a [`Json`] value), as a string otherwise.
struct DebugValue<'a, W: fmt::Write> {
    w: &'a mut W,
    state: Seen,
}

enum Seen {
    /// The first `n` bytes, while they are the beginning of [`JSON_MARK`]: nothing written yet.
    Start(usize),
    /// A string: its opening quote and what came so far are written.
    Text,
    /// [`JSON_MARK`], and what came after it.
    Json(String),
}

impl<'a, W: fmt::Write> DebugValue<'a, W> {
    fn new(w: &'a mut W) -> Self {
        DebugValue {
            w,
            state: Seen::Start(0),
        }
    }

    /// The closing: the string's quote, or the kept JSON.
    fn finish(self) -> fmt::Result {
        match self.state {
            Seen::Start(n) => json_string(self.w, &JSON_MARK[..n]),
            Seen::Text => self.w.write_char('"'),
            Seen::Json(json) if serde_json::from_str::<serde::de::IgnoredAny>(&json).is_ok() => {
                self.w.write_str(&json)
            }
            Seen::Json(json) => {
                self.w.write_char('"')?;
                escape_into(self.w, JSON_MARK)?;
                escape_into(self.w, &json)?;
                self.w.write_char('"')
            }
        }
    }
}

impl<W: fmt::Write> fmt::Write for DebugValue<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        match &mut self.state {
            Seen::Text => escape_into(self.w, s),
            Seen::Json(json) => {
                json.push_str(s);
                Ok(())
            }
            Seen::Start(n) => {
                let mark = &JSON_MARK.as_bytes()[*n..];
                let k = mark.len().min(s.len());
                if s.as_bytes()[..k] == mark[..k] {
                    if k < mark.len() {
                        *n += k;
                    } else {
                        self.state = Seen::Json(s[k..].to_string());
                    }
                    return Ok(());
                }
                // Not the mark: a string, beginning with what was held back.
                let held = &JSON_MARK[..*n];
                self.state = Seen::Text;
                self.w.write_char('"')?;
                escape_into(self.w, held)?;
                escape_into(self.w, s)
            }
        }
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
        // Written raw only when it is JSON indeed: the line stays one valid JSON object
        // whatever a displayed value holds.
        self.put(field, |w| {
            let mut v = DebugValue::new(w);
            write!(v, "{value:?}")?;
            v.finish()
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
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let cases = [
            "",
            "plain",
            "quote \" and backslash \\",
            "\n\r\t\u{8}\u{c}",
            "\u{0}\u{1}\u{1f} \u{7f}",
            "non-ASCII é ✓ 𝄞 and \u{2028}",
            "</script>",
            "\u{1}json:",
        ];
        for s in cases {
            let mut got = String::new();
            json_string(&mut got, s).unwrap();
            assert_eq!(got, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    /// A `Debug` that writes its text in the given pieces (as derived `Debug`s and `write!`
    /// do), so the mark can arrive split.
    struct Pieces(&'static [&'static str]);

    impl fmt::Debug for Pieces {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.iter().try_for_each(|p| f.write_str(p))
        }
    }

    #[test]
    fn debug_values_become_strings_unless_marked_json() {
        use serde_json::json;
        let cases: [(&[&str], serde_json::Value); 9] = [
            (&["plain"], json!("plain")),
            (&["a \"b\"", "\n", "c"], json!("a \"b\"\nc")),
            (&[], json!("")),
            (&["\u{1}js"], json!("\u{1}js")),
            (&["\u{1}js", "x"], json!("\u{1}jsx")),
            (&["\u{1}", "json", ":", "[1,", "2]"], json!([1, 2])),
            (&["\u{1}json:{\"k\":", "\"v\"}"], json!({"k": "v"})),
            (&["\u{1}json:[1,"], json!("\u{1}json:[1,")),
            (&["\u{1}json:1 2"], json!("\u{1}json:1 2")),
        ];
        for (pieces, want) in cases {
            let lines = capture(|| tracing::info!(v = ?Pieces(pieces), after = 1u64));
            assert_eq!(lines.len(), 1, "{pieces:?}");
            assert_eq!(lines[0]["v"], want, "{pieces:?}");
            assert_eq!(lines[0]["after"], 1, "{pieces:?}");
        }
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
