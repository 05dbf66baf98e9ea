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
