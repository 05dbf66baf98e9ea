//! The SSE decoder on the agent's stream: a 16 MiB event arriving in 1 KiB chunks (the shape
//! that was quadratic before the decoder resumed its scan; it must stay linear), and a stream
//! of many small status events as an agent sends them.

use std::hint::black_box;

use a2a_edge::a2a::sse::SseDecoder;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn big_event() -> Vec<u8> {
    let mut ev = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"".to_vec();
    ev.resize(16 << 20, b'a');
    ev.extend_from_slice(b"\"}}\r\n\r\n");
    ev
}

fn decode_all(stream: &[u8], chunk: usize) -> usize {
    let mut dec = SseDecoder::new(32 << 20);
    let mut events = 0;
    for c in stream.chunks(chunk) {
        events += dec.push(c).map(|v| v.len()).unwrap_or(0);
    }
    events
}

fn bench(c: &mut Criterion) {
    let big = big_event();
    let mut g = c.benchmark_group("sse_decode");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("16MiB_event_in_1KiB_chunks", |b| {
        b.iter(|| assert_eq!(decode_all(black_box(&big), 1024), 1))
    });

    let one = b"data: {\"jsonrpc\":\"2.0\",\"id\":\"r-1\",\"result\":{\"statusUpdate\":{\"taskId\":\"t-1\",\"contextId\":\"c-1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n";
    let many: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
    g.sample_size(50);
    g.throughput(Throughput::Bytes(many.len() as u64));
    g.bench_function("1000_status_events_in_1KiB_chunks", |b| {
        b.iter(|| assert_eq!(decode_all(black_box(&many), 1024), 1000))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
