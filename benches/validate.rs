//! The cost of the edge's work on a request body: strict parse of the JSON-RPC envelope, the
//! per-method checks (parts, workspace, metadata), and the re-serialization that is forwarded.

use std::hint::black_box;
use std::sync::Arc;

use a2a_edge::a2a::RpcRequest;
use a2a_edge::validate::media::MediaTypes;
use a2a_edge::validate::metadata::MetadataPolicy;
use a2a_edge::validate::push_url::PushUrlPolicy;
use a2a_edge::validate::request::{check_params, RequestPolicy};
use a2a_edge::validate::workspace::WorkspacePolicy;
use base64::Engine as _;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;

fn policy() -> Arc<RequestPolicy> {
    Arc::new(RequestPolicy {
        media: MediaTypes::new(&[], &[]).unwrap(),
        workspace: WorkspacePolicy::new(vec![std::env::temp_dir()], true).unwrap(),
        metadata: MetadataPolicy::new(&MetadataPolicy::default_denied(), &Default::default())
            .unwrap(),
        push: PushUrlPolicy::default(),
        required_extensions: vec![],
        redact_paths: false,
    })
}

fn send_message(parts: serde_json::Value) -> Vec<u8> {
    let cwd = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    json!({"jsonrpc": "2.0", "id": "bench-1", "method": "SendMessage", "params": {
        "message": {"messageId": "m-0001", "role": "ROLE_USER", "contextId": "ctx-bench",
            "parts": parts, "metadata": {"iac_code": {"cwd": cwd}}},
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 10}
    }})
    .to_string()
    .into_bytes()
}

fn edge_work(body: &[u8], policy: &RequestPolicy) -> Vec<u8> {
    let req = RpcRequest::parse(body).unwrap();
    let (params, _) = check_params(req.method, req.params, &policy.rules("bench")).unwrap();
    RpcRequest { params, ..req }.to_bytes()
}

fn bench(c: &mut Criterion) {
    let policy = policy();
    let text = "Create a VPC with two vSwitches in cn-hangzhou and a security group. ".repeat(11);
    let small = send_message(json!([{"text": text}]));
    let image = base64::engine::general_purpose::STANDARD.encode(vec![0x5au8; 5 << 20]);
    let large =
        send_message(json!([{"raw": image, "mediaType": "image/png", "filename": "x.png"}]));

    let mut g = c.benchmark_group("parse_validate_reserialize");
    g.throughput(Throughput::Bytes(small.len() as u64));
    g.bench_function(format!("send_message_{}B_text", small.len()), |b| {
        b.iter(|| edge_work(black_box(&small), &policy))
    });
    g.throughput(Throughput::Bytes(large.len() as u64));
    g.sample_size(20);
    g.bench_function("send_message_5MiB_image", |b| {
        b.iter(|| edge_work(black_box(&large), &policy))
    });
    g.finish();

    // The answer-cleaning pass over what an agent echoes: one long dotted key over many
    // children (quadratic before #13.1), at two sizes: the time per byte must stay flat.
    let mut g = c.benchmark_group("redact_metadata");
    for (segments, children) in [(10_000usize, 1_000usize), (100_000, 10_000)] {
        let long_key = vec!["a"; segments].join(".");
        let kids: serde_json::Map<String, serde_json::Value> = (0..children)
            .map(|i| (format!("c{i}"), json!("v")))
            .collect();
        let v = json!({ long_key: kids, "iac_code": {"iac_code_api_key": "sk"} });
        g.throughput(Throughput::Bytes(v.to_string().len() as u64));
        g.sample_size(20);
        g.bench_function(
            format!("dotted_key_{segments}_segments_{children}_children"),
            |b| {
                b.iter_batched(
                    || v.clone(),
                    |mut v| a2a_edge::validate::metadata::redact_metadata(&mut v, &policy.metadata),
                    criterion::BatchSize::LargeInput,
                )
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
