//! Server-sent events (WHATWG HTML §9.2) as A2A uses them: one `data:` line per JSON-RPC
//! response, `event: error` for an error after the stream started, `:` comments as keep-alive.
//! A `data:` line the edge writes holds no CR or LF: an agent's JSON may come pretty-printed
//! over several `data:` lines (and is relayed as it came when the edge changes nothing in it),
//! and a line break written inside one line would end the line, or with a blank line the
//! event, in the caller's decoder.
//!
//! The decoder splits a byte stream into whole events so the proxy can relay (and later
//! inspect) one event at a time, never a whole stream.

use bytes::{Bytes, BytesMut};

/// An SSE event carrying one JSON-RPC response (its line breaks made spaces: [`one_line`]).
pub fn data_event(json: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(json.len() + 10);
    b.extend_from_slice(b"data: ");
    one_line(&mut b, json);
    b.extend_from_slice(b"\r\n\r\n");
    b.freeze()
}

/// An `event: error` frame carrying a JSON-RPC error response; the stream ends after it.
pub fn error_event(json: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(json.len() + 24);
    b.extend_from_slice(b"event: error\r\ndata: ");
    one_line(&mut b, json);
    b.extend_from_slice(b"\r\n\r\n");
    b.freeze()
}

/// Appends `json` with every CR and LF made a space, so that it stays one `data:` line. In
/// valid JSON a raw CR or LF can only be whitespace between tokens (inside a string it is
/// escaped), so the value is the same.
fn one_line(b: &mut BytesMut, json: &[u8]) {
    let start = b.len();
    b.extend_from_slice(json);
    for byte in &mut b[start..] {
        if matches!(*byte, b'\r' | b'\n') {
            *byte = b' ';
        }
    }
}

/// A comment line (keep-alive). Line breaks in `text` are dropped.
pub fn comment(text: &str) -> Bytes {
    let clean: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    Bytes::from(format!(": {clean}\r\n\r\n"))
}

/// One decoded event: its raw bytes (as received, ending with the blank line) and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub raw: Bytes,
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` for a comment-only block.
    pub data: Option<String>,
}

/// The decoder refused the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// One event grew beyond the limit without ending.
    EventTooLarge,
    /// An event is not UTF-8.
    NotUtf8,
}

/// A decoder's buffer larger than this is not kept once the events in it are taken out.
const RETAIN_BYTES: usize = 64 * 1024;

/// Incremental decoder: feed chunks as they arrive, take complete events out.
#[derive(Debug)]
pub struct SseDecoder {
    buf: BytesMut,
    max_event_bytes: usize,
    /// How far `buf` was scanned, and where the line being scanned starts: each byte is looked
    /// at once, however small the chunks (no quadratic rescans of a growing event).
    scanned: usize,
    line_start: usize,
    /// Events without data (comments, blank lines) are passed over, not returned.
    data_only: bool,
    /// Whether the stream's start was looked at for a byte order mark (WHATWG: one leading
    /// U+FEFF is dropped).
    started: bool,
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max_event_bytes,
            scanned: 0,
            line_start: 0,
            data_only: false,
            started: false,
        }
    }

    /// A decoder that returns only events with data: a relay has nothing to do with the
    /// others, and a chunk of blank lines (one event each) then costs no memory per line.
    pub fn data_only(max_event_bytes: usize) -> Self {
        Self {
            data_only: true,
            ..Self::new(max_event_bytes)
        }
    }

    /// Adds a chunk and returns every event it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        if !self.started {
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                // Maybe a BOM, split across chunks (pending meanwhile, under the same limit).
                if self.buf.len() > self.max_event_bytes {
                    return Err(SseError::EventTooLarge);
                }
                return Ok(out);
            }
            if self.buf.starts_with(BOM) {
                let _ = self.buf.split_to(BOM.len());
            }
            self.started = true;
        }
        loop {
            let (found, scanned, line_start) =
                find_event_end(&self.buf, self.scanned, self.line_start);
            let Some(end) = found else {
                self.scanned = scanned;
                self.line_start = line_start;
                break;
            };
            let raw = self.buf.split_to(end).freeze();
            self.scanned = 0;
            self.line_start = 0;
            let event = parse_event(raw)?;
            if !self.data_only || event.data.is_some() {
                out.push(event);
            }
        }
        if self.buf.len() > self.max_event_bytes {
            return Err(SseError::EventTooLarge);
        }
        // Nothing pending (the usual case between events): no buffer at all, so that a
        // stream waiting for its agent holds none (issue 16: ~0.5 KiB per open stream).
        // Otherwise what is left shares the allocation of the events split off, and a large
        // event's buffer would live as long as the stream: keep only what is pending.
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        } else if !out.is_empty() && self.buf.capacity() > RETAIN_BYTES {
            self.buf = BytesMut::from(&self.buf[..]);
        }
        Ok(out)
    }

    /// The end of the stream: a last event whose blank line ends in a lone CR (`\r\r`, held
    /// back by [`SseDecoder::push`] in case a LF followed) is complete now. What is left after
    /// it is an unfinished event ([`SseDecoder::pending`] stays non-zero).
    pub fn finish(&mut self) -> Result<Vec<SseEvent>, SseError> {
        if self.buf.last() == Some(&b'\r') {
            // At the end of the stream a final CR is a line end: the same as CRLF.
            return self.push(b"\n");
        }
        Ok(Vec::new())
    }

    /// Bytes received that do not yet form a whole event.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// The index just past the blank line that ends the first event in `buf`, if complete,
/// resuming a scan that stopped at `from` inside a line starting at `line_start`; also where
/// the scan stopped and where its current line starts. Lines end in CRLF, LF or CR (a lone CR
/// at the very end may still become CRLF, so it waits).
fn find_event_end(buf: &[u8], from: usize, line_start: usize) -> (Option<usize>, usize, usize) {
    let mut i = from;
    let mut line_start = line_start;
    while i < buf.len() {
        let eol_len = match buf[i] {
            b'\n' => 1,
            b'\r' => {
                if i + 1 < buf.len() {
                    if buf[i + 1] == b'\n' {
                        2
                    } else {
                        1
                    }
                } else {
                    return (None, i, line_start);
                }
            }
            _ => {
                i += 1;
                continue;
            }
        };
        if i == line_start {
            // An empty line: the event ends here.
            return (Some(i + eol_len), 0, 0);
        }
        i += eol_len;
        line_start = i;
    }
    (None, i, line_start)
}

fn parse_event(raw: Bytes) -> Result<SseEvent, SseError> {
    let text = std::str::from_utf8(&raw).map_err(|_| SseError::NotUtf8)?;
    let mut event = None;
    let mut data: Option<String> = None;
    for line in text.split(['\n', '\r']) {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.find(':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_string()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            _ => {}
        }
    }
    Ok(SseEvent { raw, event, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new(1 << 20);
        chunks.iter().flat_map(|c| d.push(c).unwrap()).collect()
    }

    #[test]
    fn splits_events_across_chunk_boundaries_and_line_endings() {
        let cases: &[(&[&[u8]], usize)] = &[
            (&[b"data: {}\r\n\r\n"], 1),
            (&[b"data: {}\n\n"], 1),
            (&[b"data: {}\r\r"], 0), // a final CR may still become CRLF
            (&[b"data: {}\r\rdata"], 1),
            (&[b"data: {}\r", b"\n\r", b"\n"], 1),
            (&[b"data: 1\r\n\r\ndata: 2\r\n\r\n"], 2),
            (&[b"da", b"ta: 1\r\n", b"\r\n: ping\r\n\r\n"], 2),
            (&[b"data: incomplete\r\n"], 0),
        ];
        for (chunks, n) in cases {
            assert_eq!(decode_all(chunks).len(), *n, "{chunks:?}");
        }
    }

    #[test]
    fn the_end_of_the_stream_completes_a_cr_only_event() {
        // (chunks, events from push, events from finish, pending after finish)
        let cases: &[(&[&[u8]], usize, usize, bool)] = &[
            (&[b"data: {}\r\r"], 0, 1, false),
            (&[b"data: 1\r\rdata: 2\r\r"], 1, 1, false),
            (&[b"data: {}\r", b"\r"], 0, 1, false),
            (&[b"data: {}\n\n"], 1, 0, false),
            (&[b"data: {}\r\n\r\n"], 1, 0, false),
            (&[b"data: {}\r"], 0, 0, true),
            (&[b"data: {}"], 0, 0, true),
            (&[b"data: {}\r\n\r"], 0, 1, false),
            (&[b""], 0, 0, false),
        ];
        for (chunks, pushed, finished, pending) in cases {
            let mut d = SseDecoder::new(1 << 20);
            let n: usize = chunks.iter().map(|c| d.push(c).unwrap().len()).sum();
            assert_eq!(n, *pushed, "{chunks:?}");
            let last = d.finish().unwrap();
            assert_eq!(last.len(), *finished, "{chunks:?}");
            if let Some(ev) = last.first() {
                assert!(ev.data.is_some(), "{chunks:?}");
            }
            assert_eq!(d.pending() > 0, *pending, "{chunks:?}");
        }
    }

    #[test]
    fn fields() {
        let ev = decode_all(&[b"event: error\r\ndata: {\"a\":1}\r\n\r\n"]);
        assert_eq!(ev[0].event.as_deref(), Some("error"));
        assert_eq!(ev[0].data.as_deref(), Some("{\"a\":1}"));
        let ev = decode_all(&[b"data: a\ndata: b\n\n"]);
        assert_eq!(ev[0].data.as_deref(), Some("a\nb"));
        let ev = decode_all(&[b": ping - now\r\n\r\n"]);
        assert_eq!(ev[0].data, None);
        // encoders round-trip
        let ev = decode_all(&[&data_event(b"{\"x\":2}")]);
        assert_eq!(ev[0].data.as_deref(), Some("{\"x\":2}"));
        let ev = decode_all(&[&error_event(b"{}")]);
        assert_eq!(ev[0].event.as_deref(), Some("error"));
        assert_eq!(decode_all(&[&comment("a\r\nb")])[0].data, None);
    }

    /// JSON with line breaks between its tokens (an agent's pretty-printed answer, relayed as
    /// it came) stays one event, one line of data, and the same JSON.
    #[test]
    fn frames_keep_json_with_line_breaks_whole() {
        let json = b"{\n  \"a\": [1,\r\n\r\n 2],\r  \"b\": \"x\\ny\"\n}\n";
        let want: serde_json::Value = serde_json::from_slice(json).unwrap();
        for frame in [data_event(json), error_event(json)] {
            let mut d = SseDecoder::new(1 << 20);
            let events = d.push(&frame).unwrap();
            assert_eq!(events.len(), 1, "{frame:?}");
            assert_eq!(d.pending(), 0, "{frame:?}");
            let data = events[0].data.as_deref().unwrap();
            assert!(!data.contains(['\r', '\n']), "{data:?}");
            let got: serde_json::Value = serde_json::from_str(data).unwrap();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn byte_by_byte_equals_one_chunk() {
        let stream = b"data: {\"a\":1}\r\n\r\n: ping\r\n\r\nevent: error\r\ndata: x\r\ndata: y\n\ndata: z\r\rdata: w\r\n\r\n";
        let whole = decode_all(&[stream]);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode_all(&bytes), whole);
        let threes: Vec<&[u8]> = stream.chunks(3).collect();
        assert_eq!(decode_all(&threes), whole);
        assert_eq!(whole.len(), 5);
    }

    #[test]
    fn holds_no_buffer_between_events() {
        let mut d = SseDecoder::new(1024);
        // (chunk, events it completes, bytes pending after it, a buffer kept?)
        let steps: [(&[u8], usize, usize, bool); 5] = [
            (b"data: {\"a\":1}\n\n", 1, 0, false),
            (b"data: {\"b\"", 0, 10, true),
            (b":2}\n\ndata: {", 1, 7, true),
            (b"}\n\n", 1, 0, false),
            (b"\r\n", 1, 0, false), // a blank line: an event of no fields
        ];
        for (chunk, events, pending, kept) in steps {
            let out = d.push(chunk).unwrap();
            let text = String::from_utf8_lossy(chunk);
            assert_eq!(out.len(), events, "{text}");
            assert_eq!(d.pending(), pending, "{text}");
            assert_eq!(d.buf.capacity() > 0, kept, "{text}");
        }
    }

    /// The relay's decoder passes over what carries no data: a chunk of many blank lines and
    /// comments returns only the events with data (no memory per empty event).
    #[test]
    fn a_data_only_decoder_returns_only_events_with_data() {
        let mut chunk = b"\n".repeat(100_000);
        chunk.extend_from_slice(b": ping\n\nevent: x\n\ndata: {}\n\n");
        chunk.extend_from_slice(&b"\r\n".repeat(1000));
        let all = SseDecoder::new(1 << 20).push(&chunk).unwrap();
        assert_eq!(all.len(), 100_000 + 3 + 1000);
        let out = SseDecoder::data_only(1 << 20).push(&chunk).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.as_deref(), Some("{}"));
    }

    /// A byte order mark at the start of the stream is dropped (also split across chunks);
    /// anywhere else it is text.
    #[test]
    fn a_leading_byte_order_mark_is_dropped() {
        let bom = "\u{feff}";
        let whole = format!("{bom}data: 1\n\ndata: 2\n\n");
        for split in 0..=whole.len() {
            let mut d = SseDecoder::new(1024);
            let mut out = d.push(&whole.as_bytes()[..split]).unwrap();
            out.extend(d.push(&whole.as_bytes()[split..]).unwrap());
            let data: Vec<_> = out.iter().map(|e| e.data.as_deref()).collect();
            assert_eq!(data, [Some("1"), Some("2")], "split at {split}");
        }
        let mut d = SseDecoder::new(1024);
        let out = d
            .push(format!("data: 1\n\n{bom}data: 2\n\n").as_bytes())
            .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].data, None, "a BOM later is part of a field's name");
    }

    #[test]
    fn refuses_oversize_and_non_utf8() {
        let mut d = SseDecoder::new(8);
        assert_eq!(d.push(b"data: 0123456789"), Err(SseError::EventTooLarge));
        let mut d = SseDecoder::new(64);
        assert_eq!(d.push(b"data: \xff\n\n"), Err(SseError::NotUtf8));
    }
}
