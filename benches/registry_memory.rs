//! Memory of the task registry (the memory state backend) per task, at its default size:
//! 200,000 tasks (`max_registry_entries`) learned from answers as the proxy learns them, in
//! three shapes: every task in a context of its own (one-shot turns: a new conversation per
//! request, what the load and stream benchmarks send), ten tasks per context, and 200 per
//! context. Prints the process's resident memory before and after (`VmRSS`, with the
//! binary's allocator), per task; a measurement, not a timed test.
//!
//! `cargo bench --bench registry_memory`

use a2a_edge::state::registry::TaskRegistry;
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TASKS: u64 = 200_000;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    // Each shape in a process of its own (freed memory stays with the allocator): the
    // benchmark runs itself once per shape with the shape in the environment.
    if let Some(per_context) = std::env::var("REGISTRY_MEMORY_SHAPE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        one_shape(per_context);
        return;
    }
    println!("| tasks per context | RSS before | RSS with {TASKS} tasks | per task |");
    println!("|---:|---:|---:|---:|");
    let exe = std::env::current_exe().expect("the benchmark's own path");
    for per_context in [1u64, 10, 200] {
        let status = std::process::Command::new(&exe)
            .env("REGISTRY_MEMORY_SHAPE", per_context.to_string())
            .status()
            .expect("the benchmark runs itself");
        assert!(status.success());
    }
}

fn one_shape(per_context: u64) {
    let before = rss_kib();
    let registry = TaskRegistry::new(TASKS as usize);
    for i in 0..TASKS {
        let state = if i % 100 == 0 {
            "TASK_STATE_WORKING"
        } else {
            "TASK_STATE_COMPLETED"
        };
        let result = json!({"task": {
            "id": format!("task-{i:08}"),
            "contextId": format!("ctx-{:08}", i / per_context),
            "status": {"state": state,
                "timestamp": a2a_edge::time::format_rfc3339(1_700_000_000_000_000 + i * 1000)}
        }});
        let _ = registry.observe("bench-principal", 0, &result);
    }
    let after = rss_kib();
    println!(
        "| {per_context} | {:.1} MiB | {:.1} MiB | {:.0} B |",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after.saturating_sub(before) * 1024) as f64 / TASKS as f64
    );
    drop(registry);
}
