//! The cost of the edge's work on a request body: strict parse of the JSON-RPC envelope, the
//! per-method checks (parts, workspace, metadata), and the re-serialization that is forwarded;
//! and on an agent's answer: parse, clean, observe (the registry learns the task), the
//! caller's view, and the serialization that is relayed.

use std::hint::black_box;

// The allocator of the binary, so that the numbers are the proxy's (large buffers in
// particular: the system allocator maps and unmaps them on every iteration).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
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
        max_json_values: a2a_edge::a2a::json::DEFAULT_MAX_VALUES,
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
    RpcRequest { params, ..req }.to_bytes_sized(body.len())
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

    // The multimodal part's base64 check alone: the decode it replaced (the crate's decoder,
    // 64 KiB of symbols at a time into one buffer) against the check without decoding.
    let mut g = c.benchmark_group("base64_check_5MiB");
    g.throughput(Throughput::Bytes(image.len() as u64));
    g.sample_size(20);
    g.bench_function("decode_in_slices", |b| {
        let mut buf = vec![0u8; 48 * 1024];
        b.iter(|| {
            let mut decoded = 0;
            for slice in black_box(&image).as_bytes().chunks(64 * 1024) {
                decoded += base64::engine::general_purpose::STANDARD
                    .decode_slice(slice, &mut buf)
                    .unwrap();
            }
            decoded
        })
    });
    g.bench_function("standard_decoded_len", |b| {
        b.iter(|| {
            a2a_edge::validate::base64_check::standard_decoded_len(black_box(&image).as_bytes())
        })
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

/// What the edge does with one unary answer of an agent (the steps of `relay_response` and
/// the gate's `one_answer`): parse, clean, learn the task (a turn of the registry), rewrite to
/// the caller's view, serialize.
fn answer_pass(
    bytes: &[u8],
    policy: &RequestPolicy,
    registry: &a2a_edge::state::registry::TaskRegistry,
    upstream: a2a_edge::state::registry::UpstreamId,
) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    a2a_edge::upstream::clean::clean_response(&mut v, &policy.metadata, policy.redact_paths);
    let mut turn = registry.begin_turn("bench", None, None, None).unwrap();
    turn.bind_upstream(upstream);
    turn.observe(upstream, &v["result"]).unwrap();
    turn.finish();
    registry.client_view("bench", &mut v);
    a2a_edge::a2a::to_json_bytes_sized(&v, bytes.len() + 64)
}

/// The same with the fast pass first (`upstream::answer`, as `relay_response` does it): when
/// cleaning would change nothing, the registry learns from the projection and the agent's
/// result is relayed as its bytes; else the full pass.
fn answer_pass_fast(
    bytes: &[u8],
    policy: &RequestPolicy,
    registry: &a2a_edge::state::registry::TaskRegistry,
    upstream: a2a_edge::state::registry::UpstreamId,
) -> Vec<u8> {
    use a2a_edge::upstream::answer;
    let cleaning = answer::Cleaning {
        metadata: &policy.metadata,
        redact_paths: policy.redact_paths,
        max_values: policy.max_json_values,
    };
    let Some(fast) = answer::scan(bytes, cleaning) else {
        return answer_pass(bytes, policy, registry, upstream);
    };
    let mut v = json!({"result": fast.projection, "jsonrpc": "2.0", "id": "bench-1"});
    a2a_edge::upstream::clean::clean_response(&mut v, &policy.metadata, policy.redact_paths);
    let mut turn = registry.begin_turn("bench", None, None, None).unwrap();
    turn.bind_upstream(upstream);
    turn.observe(upstream, &v["result"]).unwrap();
    turn.finish();
    registry.client_view("bench", &mut v);
    answer::respond(fast.result, &v["id"])
}

fn answers(c: &mut Criterion) {
    let policy = policy();
    let text = "lorem ipsum dolor sit amet ".repeat(40);
    let answer = |task: &str, context: &str| -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": "bench-1", "result": {"task": {
            "id": task, "contextId": context,
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T12:00:00.000000Z"},
            "artifacts": [{"artifactId": "a-1", "parts": [{"text": &text[..1000]}]}],
            "metadata": {"iac_code": {"cwd": "/srv/ws", "iac_code_api_key": "sk-redacted"}}
        }}})
        .to_string()
        .into_bytes()
    };
    let registry = a2a_edge::state::registry::TaskRegistry::new(100_000);
    let upstream = registry.upstream_id("agent");
    let known = answer("task-known", "ctx-known");
    let mut g = c.benchmark_group("answer_pass");
    g.throughput(Throughput::Bytes(known.len() as u64));
    g.bench_function(format!("known_task_{}B", known.len()), |b| {
        b.iter(|| answer_pass(black_box(&known), &policy, &registry, upstream))
    });
    let mut n = 0u64;
    g.bench_function(format!("new_task_{}B", known.len()), |b| {
        b.iter_batched(
            || {
                n += 1;
                answer(&format!("task-{n:08}"), &format!("ctx-{n:08}"))
            },
            |bytes| answer_pass(&bytes, &policy, &registry, upstream),
            criterion::BatchSize::SmallInput,
        )
    });
    // An answer with nothing to clean (no denied metadata key), as the engine's and most
    // agents' are: the full pass against the fast one.
    let plain = json!({"jsonrpc": "2.0", "id": "bench-1", "result": {"task": {
        "id": "task-known", "contextId": "ctx-known",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T12:00:00.000000Z"},
        "artifacts": [{"artifactId": "a-1", "parts": [{"text": &text[..1000]}]}],
        "history": [{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": &text[..1000]}]}],
        "metadata": {"iac_code": {"cwd": "/srv/ws"}}
    }}})
    .to_string()
    .into_bytes();
    g.throughput(Throughput::Bytes(plain.len() as u64));
    g.bench_function(format!("plain_full_{}B", plain.len()), |b| {
        b.iter(|| answer_pass(black_box(&plain), &policy, &registry, upstream))
    });
    g.bench_function(format!("plain_fast_{}B", plain.len()), |b| {
        b.iter(|| answer_pass_fast(black_box(&plain), &policy, &registry, upstream))
    });
    g.finish();
}

/// ListTasks over one caller's 200,000 tasks (the default `max_registry_entries`) in 1,000
/// contexts, 1 % of them still working: the first page of each kind of query, under the
/// registry's lock the whole time (every other request waits for it).
fn list_tasks(c: &mut Criterion) {
    // Built on the first selected bench of the group (about 2 s): a run filtered to other
    // groups does not pay for it.
    let registry = std::sync::OnceLock::new();
    let registry = || {
        registry.get_or_init(|| {
            let registry = a2a_edge::state::registry::TaskRegistry::new(200_000);
            for i in 0..200_000u64 {
                let state = if i % 100 == 0 {
                    "TASK_STATE_WORKING"
                } else {
                    "TASK_STATE_COMPLETED"
                };
                let micros = 1_700_000_000_000_000 + i * 1000;
                let result = json!({"task": {
                    "id": format!("task-{i:08}"), "contextId": format!("ctx-{:04}", i % 1000),
                    "status": {"state": state, "timestamp": a2a_edge::time::format_rfc3339(micros)}
                }});
                let _ = registry.observe("bench", 0, &result);
            }
            registry
        })
    };
    let mut g = c.benchmark_group("list_tasks_200k");
    let after = Some(1_700_000_000_000_000u64 + 1000);
    for (name, context, status, after) in [
        ("all", None, None, None),
        ("one_state_of_1pct", None, Some("TASK_STATE_WORKING"), None),
        (
            "one_state_of_99pct",
            None,
            Some("TASK_STATE_COMPLETED"),
            None,
        ),
        ("after_a_time", None, None, after),
        ("context", Some("ctx-0007"), None, None),
        (
            "context_and_state",
            Some("ctx-0000"),
            Some("TASK_STATE_WORKING"),
            None,
        ),
    ] {
        g.bench_function(name, |b| {
            let registry = registry();
            b.iter(|| {
                registry
                    .list_after("bench", context, status, after.unwrap_or(0), 50, None)
                    .map(|p| p.total_size)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, answers, list_tasks);
criterion_main!(benches);
