//! A streaming response body bounded by bytes, not frames: the producer waits while what it
//! queued and the connection has not yet taken holds more than the stream's budget, and (when
//! given) more than a budget shared by every stream of one principal. A slow reader thus
//! holds at most its budgets (plus one frame, which the relay keeps charged to the caller's
//! request budget until it is queued) however large the events it is sent.
//!
//! The connection is handed a frame in pieces of at most [`PIECE_BYTES`], so it asks for the
//! next piece as the caller reads (hyper buffers a bounded amount ahead of the socket): a
//! caller that reads a large event slowly but steadily is seen making progress, not stalled.
//! What the sender gives the body to hold (the caller's stream slot) lasts until the body
//! has handed out its last piece or is dropped, not only while the sender lives.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::body::{BodyError, BoxBody, PIECE_BYTES};

/// One queued frame and the budget it holds until the connection takes it.
struct Queued {
    item: Result<Bytes, BodyError>,
    _permits: [Option<OwnedSemaphorePermit>; 2],
}

/// The queue between the one sender and the body: it holds what it queues and nothing more
/// (an open stream that waits holds a few words here, where a channel would hold a block of
/// slots).
struct Queue {
    frames: VecDeque<Queued>,
    /// The body's task, waiting for a frame.
    waker: Option<Waker>,
    sender_gone: bool,
    body_gone: bool,
    /// Released with the body's end (see the module's note).
    held: Option<Box<dyn Send>>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when the body is dropped.
    body_gone: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock leaves a queue that is still consistent.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a frame and wakes the body; the frame comes back when the body is gone.
    fn push(&self, q: Queued) -> Result<(), Queued> {
        let waker = {
            let mut queue = self.lock();
            if queue.body_gone {
                return Err(q);
            }
            queue.frames.push_back(q);
            queue.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

/// The receiving half: the response body.
pub struct BudgetedBody {
    shared: Arc<Shared>,
}

/// The sending half.
pub struct BudgetedSender {
    shared: Arc<Shared>,
    stream: Arc<Semaphore>,
    stream_bytes: usize,
    shared_budget: Option<(Arc<Semaphore>, usize)>,
}

/// The receiver is gone (the caller left).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// A body and its sender. `stream_bytes`: what one stream may hold queued; `shared`: a
/// semaphore with the principal's budget for all its streams, and its size.
pub fn budgeted(
    stream_bytes: usize,
    shared: Option<(Arc<Semaphore>, usize)>,
) -> (BudgetedSender, BudgetedBody) {
    let queue = Arc::new(Shared {
        queue: Mutex::new(Queue {
            frames: VecDeque::new(),
            waker: None,
            sender_gone: false,
            body_gone: false,
            held: None,
        }),
        body_gone: Notify::new(),
    });
    let stream_bytes = stream_bytes.clamp(1, u32::MAX as usize);
    (
        BudgetedSender {
            shared: queue.clone(),
            stream: Arc::new(Semaphore::new(stream_bytes)),
            stream_bytes,
            shared_budget: shared.map(|(s, n)| (s, n.clamp(1, u32::MAX as usize))),
        },
        BudgetedBody { shared: queue },
    )
}

impl BudgetedSender {
    /// Queues a frame once the budgets have room for it (a frame larger than a budget waits
    /// for all of it: one such frame at a time). Fails when the receiver goes meanwhile: its
    /// leaving frees only this stream's budget, not the principal's shared one, which other
    /// streams may hold.
    pub async fn send(&self, frame: Bytes) -> Result<(), Closed> {
        tokio::select! {
            biased;
            queued = self.queue(frame) => queued,
            () = self.closed() => Err(Closed),
        }
    }

    async fn queue(&self, frame: Bytes) -> Result<(), Closed> {
        let cost = |limit: usize| frame.len().clamp(1, limit) as u32;
        let own = Arc::clone(&self.stream)
            .acquire_many_owned(cost(self.stream_bytes))
            .await
            .map_err(|_| Closed)?;
        let shared = match &self.shared_budget {
            Some((s, limit)) => Some(
                Arc::clone(s)
                    .acquire_many_owned(cost(*limit))
                    .await
                    .map_err(|_| Closed)?,
            ),
            None => None,
        };
        self.shared
            .push(Queued {
                item: Ok(frame),
                _permits: [Some(own), shared],
            })
            .map_err(|_| Closed)
    }

    /// Queues a last, small frame (an error frame) without waiting for the budgets: the
    /// stream ends with it.
    pub fn send_last(&self, frame: Bytes) {
        let _ = self.shared.push(Queued {
            item: Ok(frame),
            _permits: [None, None],
        });
    }

    /// Gives the body `held` to keep until it has handed out its last frame or is dropped
    /// (at once, if it is gone already).
    pub fn hold<H: Send + 'static>(&self, held: H) {
        let mut queue = self.shared.lock();
        if !queue.body_gone {
            queue.held = Some(Box::new(held));
        }
    }

    /// Ends the body with an error in place of what is queued (the caller took nothing for
    /// too long): the connection aborts the response (HTTP/1.1: closed without its last
    /// chunk; HTTP/2: the stream reset), so the caller cannot take the stream's end for a
    /// complete one. What the body held is released now: nothing is queued any more, and a
    /// caller that never reads may never take the error either.
    pub fn abort(&self, why: &'static str) {
        let dropped = {
            let mut queue = self.shared.lock();
            (std::mem::take(&mut queue.frames), queue.held.take())
        };
        drop(dropped);
        let _ = self.shared.push(Queued {
            item: Err(why.into()),
            _permits: [None, None],
        });
    }

    /// Resolves when the receiver is gone.
    pub async fn closed(&self) {
        loop {
            // Registered before the flag is read: a body dropped in between still wakes it.
            let gone = self.shared.body_gone.notified();
            tokio::pin!(gone);
            gone.as_mut().enable();
            if self.shared.lock().body_gone {
                return;
            }
            gone.await;
        }
    }
}

impl Drop for BudgetedSender {
    fn drop(&mut self) {
        let waker = {
            let mut queue = self.shared.lock();
            queue.sender_gone = true;
            queue.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Drop for BudgetedBody {
    fn drop(&mut self) {
        // What was queued goes now, and its budget with it, then what the body held (outside
        // the lock).
        let dropped = {
            let mut queue = self.shared.lock();
            queue.body_gone = true;
            (std::mem::take(&mut queue.frames), queue.held.take())
        };
        drop(dropped);
        self.shared.body_gone.notify_waiters();
    }
}

impl BudgetedBody {
    pub fn boxed(self) -> BoxBody {
        UnsyncBoxBody::new(self)
    }
}

impl Body for BudgetedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let mut queue = self.shared.lock();
        // A large frame goes out a piece at a time; its permits stay with what is left.
        if let Some(Queued { item: Ok(rest), .. }) = queue.frames.front_mut() {
            if rest.len() > PIECE_BYTES {
                return Poll::Ready(Some(Ok(Frame::data(rest.split_to(PIECE_BYTES)))));
            }
        }
        // The permits go back when the queued frame is dropped: now, as the connection takes it.
        if let Some(q) = queue.frames.pop_front() {
            drop(queue);
            return Poll::Ready(Some(q.item.map(Frame::data)));
        }
        if queue.sender_gone {
            let held = queue.held.take();
            drop(queue);
            drop(held);
            return Poll::Ready(None);
        }
        match &mut queue.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::time::Duration;

    #[tokio::test]
    async fn the_sender_waits_for_the_reader_by_bytes() {
        let shared = Arc::new(Semaphore::new(300));
        let (tx, mut body) = budgeted(200, Some((shared.clone(), 300)));
        let (tx2, _body2) = budgeted(200, Some((shared.clone(), 300)));
        tx.send(Bytes::from(vec![b'a'; 150])).await.unwrap();
        // 150 + 100 > 200 for this stream: waits.
        let blocked = tokio::time::timeout(
            Duration::from_millis(50),
            tx.send(Bytes::from(vec![b'b'; 100])),
        )
        .await;
        assert!(blocked.is_err(), "the stream's budget is spent");
        // The other stream of the principal has 150 of the shared 300 left.
        tx2.send(Bytes::from(vec![b'c'; 150])).await.unwrap();
        let blocked = tokio::time::timeout(
            Duration::from_millis(50),
            tx2.send(Bytes::from(vec![b'd'; 10])),
        )
        .await;
        assert!(blocked.is_err(), "the principal's budget is spent");
        // Reading gives the budget back.
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first.len(), 150);
        tx.send(Bytes::from(vec![b'b'; 100])).await.unwrap();
        // An event larger than the budget still goes, alone.
        let (big_tx, mut big) = budgeted(10, None);
        let sending = tokio::spawn(async move {
            big_tx.send(Bytes::from(vec![b'x'; 1000])).await.unwrap();
            big_tx.send(Bytes::from(vec![b'y'; 5])).await.unwrap();
            big_tx.send_last(Bytes::from_static(b"last"));
        });
        let mut got = Vec::new();
        while let Some(f) = big.frame().await {
            got.push(f.unwrap().into_data().unwrap().len());
        }
        sending.await.unwrap();
        assert_eq!(got, [1000, 5, 4]);
    }

    #[tokio::test]
    async fn a_closed_body_fails_the_sender() {
        let (tx, body) = budgeted(10, None);
        drop(body);
        assert_eq!(tx.send(Bytes::from_static(b"x")).await, Err(Closed));
        tokio::time::timeout(Duration::from_secs(1), tx.closed())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_dropped_body_gives_back_what_it_held_and_a_dropped_sender_ends_it() {
        let shared = Arc::new(Semaphore::new(100));
        let (tx, body) = budgeted(100, Some((shared.clone(), 100)));
        tx.send(Bytes::from(vec![b'a'; 60])).await.unwrap();
        assert_eq!(shared.available_permits(), 40);
        drop(body);
        assert_eq!(
            shared.available_permits(),
            100,
            "the queued frame's budget is back"
        );
        let (tx, mut body) = budgeted(100, None);
        let reader = tokio::spawn(async move {
            let mut n = 0;
            while let Some(f) = body.frame().await {
                n += f.unwrap().into_data().unwrap().len();
            }
            n
        });
        tx.send(Bytes::from_static(b"abc")).await.unwrap();
        drop(tx);
        let n = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 3);
    }

    /// A large frame is handed out in pieces of at most `PIECE_BYTES`, in order; its budget
    /// is held until the last piece is taken.
    #[tokio::test]
    async fn a_large_frame_goes_out_in_pieces_holding_its_budget_to_the_last() {
        let shared = Arc::new(Semaphore::new(1 << 20));
        let (tx, mut body) = budgeted(1 << 20, Some((shared.clone(), 1 << 20)));
        let bytes: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        tx.send(Bytes::from(bytes.clone())).await.unwrap();
        tx.send(Bytes::from_static(b"next")).await.unwrap();
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        while got.len() < bytes.len() {
            assert_eq!(
                shared.available_permits(),
                (1 << 20) - 40_000 - 4,
                "held while pieces of it are left ({} taken)",
                got.len()
            );
            let piece = body.frame().await.unwrap().unwrap().into_data().unwrap();
            sizes.push(piece.len());
            got.extend_from_slice(&piece);
        }
        assert_eq!(got, bytes);
        assert_eq!(sizes, [PIECE_BYTES, PIECE_BYTES, 40_000 - 2 * PIECE_BYTES]);
        assert_eq!(shared.available_permits(), (1 << 20) - 4, "given back");
        let next = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(next, Bytes::from_static(b"next"));
    }

    /// What the sender gives the body to hold lasts until the body has handed out its last
    /// frame (not only while the sender lives), or until the body is dropped.
    #[tokio::test]
    async fn what_the_body_holds_lasts_until_its_end_is_taken() {
        let held = Arc::new(());
        let (tx, mut body) = budgeted(100, None);
        tx.hold(Arc::clone(&held));
        tx.send(Bytes::from_static(b"abc")).await.unwrap();
        drop(tx);
        assert_eq!(
            Arc::strong_count(&held),
            2,
            "the sender is gone, a frame is not"
        );
        body.frame().await.unwrap().unwrap();
        assert_eq!(Arc::strong_count(&held), 2, "the end is not taken yet");
        assert!(body.frame().await.is_none());
        assert_eq!(Arc::strong_count(&held), 1);
        // Dropped unread: released with it.
        let (tx, body) = budgeted(100, None);
        tx.hold(Arc::clone(&held));
        tx.send(Bytes::from_static(b"abc")).await.unwrap();
        drop(tx);
        drop(body);
        assert_eq!(Arc::strong_count(&held), 1);
        // Given to a body already gone: released at once.
        let (tx, body) = budgeted(100, None);
        drop(body);
        tx.hold(Arc::clone(&held));
        assert_eq!(Arc::strong_count(&held), 1);
    }

    /// An aborted body drops what is queued (and its budget) and ends with an error, so the
    /// connection aborts the response instead of ending it as complete.
    #[tokio::test]
    async fn an_aborted_body_ends_with_an_error_in_place_of_what_is_queued() {
        let shared = Arc::new(Semaphore::new(100));
        let held = Arc::new(());
        let (tx, mut body) = budgeted(100, Some((shared.clone(), 100)));
        tx.hold(Arc::clone(&held));
        tx.send(Bytes::from(vec![b'a'; 60])).await.unwrap();
        tx.abort("client.stalled");
        assert_eq!(
            shared.available_permits(),
            100,
            "the queue's budget is back"
        );
        assert_eq!(Arc::strong_count(&held), 1, "what it held is released");
        drop(tx);
        let end = body.frame().await.expect("a last frame");
        assert_eq!(end.unwrap_err().to_string(), "client.stalled");
    }
}
