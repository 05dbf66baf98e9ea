//! Where log lines go: a bounded queue to one writer thread, so that no request waits on
//! standard error (a slow terminal, a full pipe, a stalled log shipper). The writer batches
//! what is queued into one buffered write. When the queue is full a line is dropped and
//! counted (`a2a_edge_log_lines_dropped_total`), never blocking the request that logs it.
//! [`flush`] waits (boundedly) until what was queued is written: at exit, and for tests.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::Duration;

/// Lines the queue holds before new ones are dropped.
const QUEUE_LINES: usize = 65_536;

enum Item {
    Line(Vec<u8>),
    /// Acknowledged once every line queued before it is written.
    Flush(SyncSender<()>),
}

static SINK: OnceLock<Option<SyncSender<Item>>> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn sink() -> Option<&'static SyncSender<Item>> {
    SINK.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        std::thread::Builder::new()
            .name("a2a-edge-log".into())
            .spawn(move || write_loop(rx))
            .ok()
            .map(|_| tx)
    })
    .as_ref()
}

fn write_loop(rx: Receiver<Item>) {
    // Not the locked handle: others (eprintln! at start and exit) take the lock per write.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr());
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        // Everything queued now goes out in one flush.
        while let Some(item) = next.take() {
            match item {
                Item::Line(line) => {
                    let _ = out.write_all(&line);
                }
                Item::Flush(ack) => {
                    let _ = out.flush();
                    let _ = ack.send(());
                }
            }
            next = rx.try_recv().ok();
        }
        let _ = out.flush();
    }
}

/// Queues one finished line (with its newline); written directly if there is no writer.
pub fn emit(line: Vec<u8>) {
    match sink() {
        Some(tx) => match tx.try_send(Item::Line(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(Item::Line(line))) => direct(&line),
            Err(TrySendError::Disconnected(_)) => {}
        },
        None => direct(&line),
    }
}

fn direct(line: &[u8]) {
    let _ = std::io::stderr().lock().write_all(line);
}

/// Lines dropped because the queue was full.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Waits until every line queued so far is written, at most `limit`.
pub fn flush(limit: Duration) {
    let Some(tx) = SINK.get().and_then(Option::as_ref) else {
        return;
    };
    let (ack, done) = sync_channel(1);
    if tx.send(Item::Flush(ack)).is_ok() {
        match done.recv_timeout(limit) {
            Ok(()) | Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
        }
    }
}
