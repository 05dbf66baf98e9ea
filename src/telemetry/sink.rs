//! Where log lines go: appended to a bounded in-memory buffer that one writer thread hands
//! to standard error in batches, so that no request waits on stderr (a slow terminal, a full
//! pipe, a stalled log shipper) and a request costs no system call for its log line. After a
//! batch the writer lets the next one gather for [`GATHER`] before it looks again; only when
//! it then finds nothing does it wait to be woken, and only a line that finds it waiting wakes
//! it (a wake-up per line was 15 % of the proxy's CPU under load: the futex calls on both
//! sides). When the buffer holds 8 MiB, new lines are dropped and counted
//! (`a2a_edge_log_lines_dropped_total`), never blocking the request that logs them. [`flush`]
//! writes what is buffered at once (at exit).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

/// What the buffer may hold before lines are dropped.
const BUFFER_BYTES: usize = 8 << 20;

/// How long a batch may gather after the previous one was written: the most a line waits
/// under load.
const GATHER: Duration = Duration::from_millis(10);

struct Pending {
    bytes: Vec<u8>,
    /// The writer waits on `ready` (found nothing after its gathering pause).
    idle: bool,
}

struct Sink {
    buf: Mutex<Pending>,
    ready: Condvar,
    /// Held while a batch is taken and written, so that batches reach stderr in order.
    writing: Mutex<()>,
}

static SINK: OnceLock<Option<&'static Sink>> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn sink() -> Option<&'static Sink> {
    *SINK.get_or_init(|| {
        // One per process, for its whole life.
        let sink: &'static Sink = Box::leak(Box::new(Sink {
            buf: Mutex::new(Pending {
                bytes: Vec::with_capacity(64 * 1024),
                idle: false,
            }),
            ready: Condvar::new(),
            writing: Mutex::new(()),
        }));
        std::thread::Builder::new()
            .name("a2a-edge-log".into())
            .spawn(move || write_loop(sink))
            .ok()
            .map(|_| sink)
    })
}

fn write_loop(sink: &'static Sink) {
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        {
            let mut buf = lock(&sink.buf);
            while buf.bytes.is_empty() {
                buf.idle = true;
                // Bounded, so that a wake-up missed for any reason costs a moment only.
                buf = sink
                    .ready
                    .wait_timeout(buf, Duration::from_millis(100))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            buf.idle = false;
        }
        write_pending(sink, &mut batch);
        std::thread::sleep(GATHER);
    }
}

/// Takes what is buffered and writes it (in order with every other batch).
fn write_pending(sink: &Sink, batch: &mut Vec<u8>) {
    let _in_order = lock(&sink.writing);
    std::mem::swap(&mut lock(&sink.buf).bytes, batch);
    if !batch.is_empty() {
        let _ = std::io::stderr().write_all(batch);
    }
    batch.clear();
    // A burst must not keep its memory for good.
    batch.shrink_to(1 << 20);
}

/// Buffers one finished line (with its newline); written directly if there is no writer.
pub fn emit(line: &[u8]) {
    let Some(sink) = sink() else {
        let _ = std::io::stderr().lock().write_all(line);
        return;
    };
    let mut buf = lock(&sink.buf);
    if buf.bytes.len() + line.len() > BUFFER_BYTES {
        drop(buf);
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    buf.bytes.extend_from_slice(line);
    // Woken only when it waits: a writer gathering a batch finds this line on its own.
    let wake = std::mem::take(&mut buf.idle);
    drop(buf);
    if wake {
        sink.ready.notify_one();
    }
}

/// Lines dropped because the buffer was full.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Writes what is buffered now (from the calling thread).
pub fn flush() {
    if let Some(sink) = SINK.get().copied().flatten() {
        write_pending(sink, &mut Vec::new());
    }
}

/// The `tracing` writer: each formatted event is one buffered line.
#[derive(Clone, Copy, Default)]
pub struct Lines;

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        emit(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
    type Writer = Lines;

    fn make_writer(&'a self) -> Lines {
        Lines
    }
}
