//! The threads that serve connections (see `server::workers`): how many there are, and which
//! one the calling code runs on, for what keeps one instance per thread (the agents'
//! connection pools), so that a request and the connection it is sent on share a thread.

use std::cell::Cell;

thread_local! {
    /// 1..=count() on a worker thread, 0 elsewhere.
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// The number of worker threads: `A2A_EDGE_WORKERS` (1 to 256), else one per core this
/// process may use (like nginx's `worker_processes auto`). Measured on 2 cores against
/// tokio's work-stealing runtime (benches/load, one run of 2 rounds each): one worker per
/// core was faster in every row (HTTP/1.1 and HTTP/2, cheap and costly upstream: 1.10 to
/// 1.23); two per core won more with a cheap upstream (up to 1.70 over HTTP/2) but lost with
/// an upstream that shares the cores (0.86 over HTTP/1.1).
pub fn workers() -> usize {
    configured()
        .ok()
        .flatten()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `A2A_EDGE_WORKERS` as set: `None` when unset, an error naming it when it is not 1 to 256
/// (`serve` refuses to start then, rather than run with a number nobody asked for).
pub fn configured() -> Result<Option<usize>, String> {
    match std::env::var("A2A_EDGE_WORKERS") {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "A2A_EDGE_WORKERS: expected a number of worker threads from 1 to 256, got {v:?}"
            )),
        },
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("A2A_EDGE_WORKERS: expected a number from 1 to 256".into())
        }
    }
}

/// Marks the calling thread as worker `index` (1-based).
pub fn enter_worker(index: usize) {
    WORKER.with(|w| w.set(index));
}

/// The calling thread's slot among `slots` per-thread instances: its worker index, or 0 off
/// the workers (and when there are fewer slots than workers).
pub fn slot(slots: usize) -> usize {
    let i = WORKER.with(Cell::get);
    if i < slots {
        i
    } else {
        0
    }
}
