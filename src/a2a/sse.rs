//! Server-sent events (WHATWG HTML §9.2) as A2A uses them: one `data:` line per JSON-RPC
//! response, `event: error` for an error after the stream started, `:` comments as keep-alive.
//! A `data:` line the edge writes holds no CR or LF: an agent's JSON may come pretty-printed
//! over several `data:` lines (and is relayed as it came when the edge changes nothing in it),
//! and a line break written inside one line would end the line, or with a blank line the
//! event, in the caller's decoder.
//!
//! The decoder splits a byte stream into whole events so the proxy can relay (and later
//! inspect) one event at a time, never a whole stream.

use bytes::{Buf, Bytes, BytesMut};

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

/// One decoded event: its raw bytes (as received, ending with the blank line; a blank line
/// that starts with a CR ends at it, the LF of a CRLF being dropped) and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub raw: Bytes,
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` for a comment-only block.
    pub data: Option<String>,
}

impl SseEvent {
    /// The bytes it holds (its raw text and its fields).
    pub fn held(&self) -> usize {
        let field = |f: &Option<String>| f.as_ref().map_or(0, String::len);
        self.raw.len() + field(&self.event) + field(&self.data)
    }
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
    /// The last event ended with a CR (its blank line's), so a LF that comes next, maybe in
    /// the next chunk, is that CR's CRLF: it is dropped, not taken as a blank line of its own.
    skip_lf: bool,
    /// An event was split off `buf` since it was last made to hold only what is pending.
    split: bool,
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
            skip_lf: false,
            split: false,
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

    /// Adds a chunk and returns every event it completed ([`SseDecoder::feed`], then
    /// [`SseDecoder::next_event`] until none is left).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        self.feed(chunk)?;
        let mut out = Vec::new();
        while let Some(event) = self.next_event()? {
            out.push(event);
        }
        Ok(out)
    }

    /// Adds a chunk; its events are taken out one at a time ([`SseDecoder::next_event`]), so
    /// that a chunk of many small events never stands as many events at once.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), SseError> {
        self.buf.extend_from_slice(chunk);
        if !self.started {
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                // Maybe a BOM, split across chunks (pending meanwhile, under the same limit).
                if self.buf.len() > self.max_event_bytes {
                    return Err(SseError::EventTooLarge);
                }
                return Ok(());
            }
            if self.buf.starts_with(BOM) {
                let _ = self.buf.split_to(BOM.len());
            }
            self.started = true;
        }
        Ok(())
    }

    /// The next complete event of what was fed, if any (with [`SseDecoder::data_only`], the
    /// next with data). When none is left, what is pending (an unfinished event) must be
    /// within the event limit.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if !self.started {
            return Ok(None);
        }
        loop {
            if self.skip_lf && !self.buf.is_empty() {
                // (`scanned` is 0 here: the last event was just split off)
                if self.buf[0] == b'\n' {
                    self.buf.advance(1);
                }
                self.skip_lf = false;
            }
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
            self.skip_lf = raw.last() == Some(&b'\r');
            self.split = true;
            let event = parse_event(raw)?;
            if !self.data_only || event.data.is_some() {
                return Ok(Some(event));
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
        } else if self.split && self.buf.capacity() > RETAIN_BYTES {
            self.buf = BytesMut::from(&self.buf[..]);
        }
        self.split = false;
        Ok(None)
    }

    /// The end of the stream. Every complete event could be taken out
    /// ([`SseDecoder::push`], [`SseDecoder::next_event`]) as soon as its blank line came in (a
    /// CR-only blank line included), so there is none left to complete: what is pending
    /// ([`SseDecoder::pending`]) is an unfinished event, which the end of the stream discards
    /// (WHATWG).
    pub fn finish(&mut self) -> Result<Vec<SseEvent>, SseError> {
        Ok(Vec::new())
    }

    /// Bytes received and not yet taken out as events (an unfinished event, once
    /// [`SseDecoder::next_event`] has found none left).
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// The index just past the blank line that ends the first event in `buf`, if complete,
/// resuming a scan that stopped at `from` inside a line starting at `line_start`; also where
/// the scan stopped and where its current line starts. Lines end in CRLF, LF or CR. A blank
/// line that starts with a CR ends the event at that CR, whatever follows: an agent that ends
/// its lines with CR alone is relayed without waiting for its next bytes, and the LF of a CRLF
/// (maybe in a later chunk) is dropped by [`SseDecoder::push`]. A CR that ends a line with
/// text, at the very end of `buf`, waits to be seen with the next byte (the event is not
/// complete anyway).
fn find_event_end(buf: &[u8], from: usize, line_start: usize) -> (Option<usize>, usize, usize) {
    let mut i = from;
    let mut line_start = line_start;
    while i < buf.len() {
        let eol_len = match buf[i] {
            b'\n' => 1,
            b'\r' if i == line_start => 1,
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

    /// A chunk of many events is taken out one event at a time: what stands decoded is one
    /// event, the rest stays the chunk's bytes (counted as pending) until it is asked for.
    #[test]
    fn a_chunk_of_many_events_is_taken_out_one_at_a_time() {
        let chunk = "data: x\n\n".repeat(10_000);
        let mut d = SseDecoder::data_only(1024);
        d.feed(chunk.as_bytes()).unwrap();
        assert_eq!(d.pending(), chunk.len());
        for n in 1..=10_000 {
            let ev = d.next_event().unwrap().expect("an event");
            assert_eq!(ev.data.as_deref(), Some("x"));
            assert_eq!(d.pending(), chunk.len() - 9 * n);
        }
        assert_eq!(d.next_event(), Ok(None));
        assert_eq!(d.pending(), 0);
        // The event limit binds what is left unfinished, not a chunk of whole events.
        d.feed(format!("{}data: {}", "data: y\n\n".repeat(200), "z".repeat(2000)).as_bytes())
            .unwrap();
        for _ in 0..200 {
            assert!(d.next_event().unwrap().is_some());
        }
        assert_eq!(d.next_event(), Err(SseError::EventTooLarge));
    }

    #[test]
    fn splits_events_across_chunk_boundaries_and_line_endings() {
        let cases: &[(&[&[u8]], usize)] = &[
            (&[b"data: {}\r\n\r\n"], 1),
            (&[b"data: {}\n\n"], 1),
            (&[b"data: {}\r\r"], 1), // a blank line's CR ends the event, LF or not
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

    /// `push` returns every complete event, so the end of the stream completes none: what is
    /// pending then is an unfinished event.
    #[test]
    fn the_end_of_the_stream_completes_nothing_more() {
        // (chunks, events from push, pending after finish)
        let cases: &[(&[&[u8]], usize, bool)] = &[
            (&[b"data: {}\r\r"], 1, false),
            (&[b"data: 1\r\rdata: 2\r\r"], 2, false),
            (&[b"data: {}\r", b"\r"], 1, false),
            (&[b"data: {}\n\n"], 1, false),
            (&[b"data: {}\r\n\r\n"], 1, false),
            (&[b"data: {}\r"], 0, true),
            (&[b"data: {}"], 0, true),
            (&[b"data: {}\r\n\r"], 1, false),
            (&[b""], 0, false),
        ];
        for (chunks, pushed, pending) in cases {
            let mut d = SseDecoder::new(1 << 20);
            let n: usize = chunks.iter().map(|c| d.push(c).unwrap().len()).sum();
            assert_eq!(n, *pushed, "{chunks:?}");
            assert_eq!(d.finish().unwrap(), [], "{chunks:?}");
            assert_eq!(d.pending() > 0, *pending, "{chunks:?}");
        }
    }

    /// Line endings CR, LF, CRLF and mixed, cut into three chunks at every pair of places
    /// (a CRLF split between its CR and its LF included): the same events (every one, also
    /// those without fields) and the same raw bytes as in one chunk, nothing left pending, and
    /// each event out of the `push` that brought the first byte of its blank line's end (no
    /// waiting for the agent's next bytes).
    #[test]
    fn every_chunking_of_every_line_ending_gives_the_same_events_at_once() {
        type Want = &'static [(Option<&'static str>, Option<&'static str>)];
        // (what, stream, events, the index just past the byte that completes each event)
        let cases: &[(&str, &[u8], Want, &[usize])] = &[
            (
                "CR only",
                b"data: 1\r\rdata: 2\rdata: 3\r\r",
                &[(None, Some("1")), (None, Some("2\n3"))],
                &[9, 26],
            ),
            (
                "LF only",
                b"data: 1\n\nevent: e\ndata: 2\n\n",
                &[(None, Some("1")), (Some("e"), Some("2"))],
                &[9, 27],
            ),
            (
                "CRLF",
                b"data: 1\r\n\r\ndata: 2\r\n\r\n",
                &[(None, Some("1")), (None, Some("2"))],
                &[10, 21],
            ),
            (
                "mixed",
                b"data: 1\rdata: 2\n\r\ndata: 3\r\n\n: c\r\r\n",
                &[(None, Some("1\n2")), (None, Some("3")), (None, None)],
                &[17, 28, 33],
            ),
            (
                // The LF after the CR that ended the event belongs to it; the next LF is a
                // blank line: an event of no fields.
                "CR, then CRLF, then LF",
                b"data: 1\r\r\n\n",
                &[(None, Some("1")), (None, None)],
                &[9, 11],
            ),
        ];
        for (what, stream, want, ends) in cases {
            let fields = |evs: &[SseEvent]| -> Vec<(Option<String>, Option<String>)> {
                evs.iter()
                    .map(|e| (e.event.clone(), e.data.clone()))
                    .collect()
            };
            let want: Vec<_> = want
                .iter()
                .map(|(e, d)| (e.map(String::from), d.map(String::from)))
                .collect();
            let whole = SseDecoder::new(1024).push(stream).unwrap();
            assert_eq!(fields(&whole), want, "{what}");
            for i in 0..=stream.len() {
                for j in i..=stream.len() {
                    let mut d = SseDecoder::new(1024);
                    let mut got = Vec::new();
                    for (from, to) in [(0, i), (i, j), (j, stream.len())] {
                        got.extend(d.push(&stream[from..to]).unwrap());
                        let due = ends.iter().filter(|&&e| e <= to).count();
                        assert_eq!(got.len(), due, "{what}: cut at {i} and {j}, after {to}");
                    }
                    assert_eq!(got, whole, "{what}: cut at {i} and {j}");
                    assert_eq!(d.finish().unwrap(), [], "{what}: cut at {i} and {j}");
                    assert_eq!(d.pending(), 0, "{what}: cut at {i} and {j}");
                }
            }
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
