//! The threads that serve connections (one per core), each with a single-threaded
//! runtime, like nginx's workers. A connection and everything its requests spawn (the upstream
//! connection of the pool, a stream's relay) stay on the thread it was given, so that a
//! request costs no hand-over between threads and no work-stealing (each agent's connection
//! pool is per thread too: `crate::runtime`). New connections are dealt out in turn, and each
//! socket is registered with its worker's own reactor, so that its readiness is seen by the
//! thread that serves it (through the accept loop's runtime, every read was a wake-up across
//! threads: 10-17 % of the edge's samples; static-upstream A/B 1.21 over HTTP/1.1, 1.14 over
//! HTTP/2).
//! `A2A_EDGE_WORKERS` sets the number of threads (1 to 256; default: the cores this process
//! may use).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::{Builder, Handle};
use tokio::sync::watch;

pub struct Workers {
    handles: Vec<Handle>,
    next: AtomicUsize,
    /// Dropped (with the accept loop, after its drain): every thread ends its runtime, which
    /// drops what still runs on it.
    _stop: watch::Sender<()>,
}

impl Workers {
    pub fn start() -> std::io::Result<Workers> {
        let (stop, _) = watch::channel(());
        let mut handles = Vec::new();
        for i in 0..crate::runtime::workers() {
            let runtime = Builder::new_current_thread().enable_all().build()?;
            handles.push(runtime.handle().clone());
            let mut stopped = stop.subscribe();
            std::thread::Builder::new()
                .name(format!("a2a-edge-w{i}"))
                .spawn(move || {
                    // What keeps one instance per thread (agent connection pools, Redis
                    // connections) finds this thread's own by it.
                    crate::runtime::enter_worker(i + 1);
                    runtime.block_on(async move { while stopped.changed().await.is_ok() {} })
                })?;
        }
        Ok(Workers {
            handles,
            next: AtomicUsize::new(0),
            _stop: stop,
        })
    }

    /// Runs `task` on the next thread in turn.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        self.handles[i].spawn(task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_worker_finds_its_own_slot() {
        let workers = Workers::start().unwrap();
        let n = crate::runtime::workers();
        let slots = n + 1;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..2 * n {
            let tx = tx.clone();
            workers.spawn(async move {
                let name = std::thread::current().name().unwrap_or("").to_string();
                let _ = tx.send((name, crate::runtime::slot(slots)));
            });
        }
        drop(tx);
        let mut seen = std::collections::BTreeMap::new();
        while let Some((name, slot)) = rx.recv().await {
            assert!(name.starts_with("a2a-edge-w"), "{name}");
            // a worker's slot is its own, never the shared 0, the same on every call
            assert!((1..=n).contains(&slot), "{name}: {slot}");
            assert_eq!(*seen.entry(name.clone()).or_insert(slot), slot, "{name}");
        }
        assert_eq!(seen.len(), n, "{seen:?}");
        let distinct: std::collections::BTreeSet<_> = seen.values().collect();
        assert_eq!(distinct.len(), n, "{seen:?}");
        // off the workers: the shared slot
        assert_eq!(crate::runtime::slot(slots), 0);
    }
}
