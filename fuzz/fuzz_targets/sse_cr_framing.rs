//! `a2a::sse::SseDecoder` on well-formed event streams framed with CR only, LF only, CRLF or
//! a mix, split at arbitrary points, ending right after the last event's blank line.
//!
//! Properties: every event comes out of `push`, with its `data` and `event` fields, in order
//! (`finish()` adds none: a final `\r\r` completes its event at once, #13.10); after
//! `finish()` nothing is pending; splitting the same stream differently gives the same events.
#![no_main]

use a2a_edge::a2a::sse::SseDecoder;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Event {
    name: Option<u8>,
    data: Vec<String>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    events: Vec<Event>,
    /// Line endings, cycled: 0 CR, 1 LF, 2 CRLF.
    endings: Vec<u8>,
    splits: Vec<u8>,
}

fn clean(s: &str) -> String {
    s.chars().filter(|c| *c != '\r' && *c != '\n').collect()
}

fuzz_target!(|input: Input| {
    let mut stream = Vec::new();
    let mut want = Vec::new();
    let mut e = 0usize;
    let mut eol = |out: &mut Vec<u8>| {
        let mut k = input
            .endings
            .get(e % input.endings.len().max(1))
            .copied()
            .unwrap_or(0)
            % 3;
        e += 1;
        // A LF right after a CR line end would make them one CRLF: the stream would mean
        // something else (SSE itself cannot tell), so that pair is written CR CRLF.
        if k == 1 && out.last() == Some(&b'\r') {
            k = 2;
        }
        out.extend_from_slice(match k {
            0 => b"\r",
            1 => b"\n",
            _ => b"\r\n",
        });
    };
    for ev in input.events.iter().take(64) {
        if ev.data.is_empty() {
            continue;
        }
        let name = ev.name.map(|n| format!("e{n}"));
        if let Some(n) = &name {
            stream.extend_from_slice(format!("event: {n}").as_bytes());
            eol(&mut stream);
        }
        let lines: Vec<String> = ev.data.iter().take(8).map(|d| clean(d)).collect();
        for l in &lines {
            stream.extend_from_slice(format!("data: {l}").as_bytes());
            eol(&mut stream);
        }
        eol(&mut stream);
        want.push((name, lines.join("\n")));
    }
    let decode = |splits: &[u8]| {
        let mut d = SseDecoder::new(1 << 24);
        let mut got = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < stream.len() {
            let n = splits
                .get(i)
                .map_or(stream.len(), |&n| usize::from(n).max(1));
            i += 1;
            let end = (at + n).min(stream.len());
            got.extend(d.push(&stream[at..end]).expect("well-formed"));
            at = end;
        }
        assert_eq!(
            d.finish().expect("well-formed"),
            [],
            "an event held back until the end of the stream"
        );
        assert_eq!(d.pending(), 0, "something left after the end of the stream");
        got.into_iter()
            .map(|ev| (ev.event, ev.data.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    let whole = decode(&[]);
    assert_eq!(whole, want);
    assert_eq!(decode(&input.splits), want);
});
