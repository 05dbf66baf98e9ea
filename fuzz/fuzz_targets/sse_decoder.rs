//! `a2a::sse::SseDecoder` fed arbitrary bytes, split at arbitrary points.
//!
//! Properties: never panics; events are contiguous: the `raw` bytes of the decoded events,
//! in order, are exactly the input consumed (after a leading byte order mark, which is
//! dropped, and but for the LF right after an event that ends with a CR, which is that CR's
//! CRLF and dropped) and, with `pending()` bytes, account for every byte pushed; each `raw`
//! ends with a line break; splitting the same bytes differently gives
//! the same events (or the same refusal, the events before it being a prefix of the others);
//! the event-size limit is enforced on what is pending; the encoders (`data_event`,
//! `error_event`, `comment`) decode to what they encode.
#![no_main]

use a2a_edge::a2a::sse::{comment, data_event, error_event, SseDecoder, SseError, SseEvent};
use libfuzzer_sys::fuzz_target;

/// The input: byte 0 is the event-size limit of a third decoding, byte 1 seeds the chunk
/// lengths (1 to 64) of the second, the rest is the stream (so seeds are real captures).
struct Input {
    bytes: Vec<u8>,
    splits: Vec<u8>,
    small_limit: u8,
}

impl Input {
    fn new(data: &[u8]) -> Option<Input> {
        let (&small_limit, rest) = data.split_first()?;
        let (&seed, bytes) = rest.split_first()?;
        let mut x = u32::from(seed) | 0x100;
        let splits = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x % 64) as u8 + 1
            })
            .collect();
        Some(Input {
            bytes: bytes.to_vec(),
            splits,
            small_limit,
        })
    }
}

/// Decodes `bytes` in chunks; returns the events, the error if any, and checks contiguity.
fn decode(bytes: &[u8], splits: &[u8], limit: usize) -> (Vec<SseEvent>, Option<SseError>) {
    let mut d = SseDecoder::new(limit);
    let mut events = Vec::new();
    // A leading byte order mark is dropped once its three bytes are in.
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let bom = if bytes.starts_with(BOM) { BOM.len() } else { 0 };
    let mut consumed = 0;
    let mut pushed = 0;
    // The last event ended with a CR: a LF right after it (once pushed) is dropped.
    let mut after_cr = false;
    let mut i = 0;
    while pushed < bytes.len() {
        let n = match splits.get(i % splits.len().max(1)) {
            Some(&n) => (n as usize).max(1),
            None => bytes.len(),
        };
        i += 1;
        let chunk = &bytes[pushed..(pushed + n).min(bytes.len())];
        pushed += chunk.len();
        match d.push(chunk) {
            Ok(out) => {
                let skip_lf = |consumed: &mut usize, after_cr: &mut bool| {
                    if *after_cr && bom + *consumed < pushed {
                        if bytes[bom + *consumed] == b'\n' {
                            *consumed += 1;
                        }
                        *after_cr = false;
                    }
                };
                for ev in out {
                    skip_lf(&mut consumed, &mut after_cr);
                    assert_eq!(
                        &ev.raw[..],
                        &bytes[bom + consumed..bom + consumed + ev.raw.len()],
                        "events are not contiguous"
                    );
                    assert!(
                        matches!(ev.raw.last(), Some(b'\n' | b'\r')),
                        "an event does not end with a line break: {:?}",
                        ev.raw
                    );
                    consumed += ev.raw.len();
                    after_cr = ev.raw.last() == Some(&b'\r');
                    events.push(ev);
                }
                skip_lf(&mut consumed, &mut after_cr);
                let dropped = if pushed >= bom { bom } else { 0 };
                assert_eq!(
                    dropped + consumed + d.pending(),
                    pushed,
                    "bytes lost or duplicated"
                );
                assert!(d.pending() <= limit, "pending past the limit");
            }
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::new(data) else {
        return;
    };
    let big = 1 << 20;
    let (whole, whole_err) = decode(&input.bytes, &[], big);
    let (split, split_err) = decode(&input.bytes, &input.splits, big);
    let (byte, byte_err) = decode(&input.bytes, &[1], big);
    for (events, err) in [(&split, &split_err), (&byte, &byte_err)] {
        assert_eq!(err, &whole_err, "splitting changes the outcome");
        if whole_err.is_none() {
            assert_eq!(events, &whole, "splitting changes the events");
        } else {
            let (short, long) = if events.len() <= whole.len() {
                (events, &whole)
            } else {
                (&whole, events)
            };
            assert_eq!(
                &long[..short.len()],
                &short[..],
                "events differ before the refusal"
            );
        }
    }
    // A small limit only refuses; what it decodes is a prefix of the events.
    // Byte by byte, every event before a refusal comes out, so `byte` is the longest list.
    let (small, _) = decode(&input.bytes, &input.splits, input.small_limit as usize);
    assert!(small.len() <= byte.len(), "a smaller limit decoded more");
    assert_eq!(
        &byte[..small.len()],
        &small[..],
        "a smaller limit decoded other events"
    );

    // The encoders round-trip, whatever the payload (as long as it has no line break).
    if let Ok(text) = std::str::from_utf8(&input.bytes) {
        let json: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        for (frame, event) in [
            (data_event(json.as_bytes()), None),
            (error_event(json.as_bytes()), Some("error")),
        ] {
            let (evs, err) = decode(&frame, &input.splits, big);
            assert_eq!(err, None);
            assert_eq!(evs.len(), 1, "{frame:?}");
            assert_eq!(evs[0].event.as_deref(), event);
            assert_eq!(evs[0].data.as_deref(), Some(json.as_str()), "{frame:?}");
        }
        let (evs, err) = decode(&comment(text), &input.splits, big);
        assert_eq!(err, None);
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data, None);
        assert_eq!(evs[0].event, None);
    }
});
