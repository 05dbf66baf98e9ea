//! A turn's events for its listeners: one log per turn, appended under the store's lock, each
//! listener reading it from where it subscribed at its own pace. A listener never lags (a
//! turn emits at most 1 + 100 chunks + 1 events, all kept until the turn is over), and an
//! open turn holds what it emitted and a few words, not a ring of slots sized for the worst
//! case.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use serde_json::Value;

/// One event of a turn: a `StreamResponse` and whether it ends the turn.
#[derive(Debug)]
pub(crate) struct Update {
    pub result: Value,
    pub last: bool,
}

struct Log {
    state: Mutex<State>,
    changed: Notify,
}

struct State {
    updates: Vec<Arc<Update>>,
    /// Listeners alive: with none, nothing is kept (a later one starts at the end anyway).
    listeners: usize,
    closed: bool,
}

impl Log {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The turn's end: dropping it ends the log for every listener.
pub(crate) struct Writer {
    log: Arc<Log>,
}

/// A listener's end of a turn's events: those sent after it subscribed, in order.
pub(crate) struct Events {
    log: Arc<Log>,
    next: usize,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").field("next", &self.next).finish()
    }
}

/// A new log and its first listener.
pub(crate) fn log() -> (Writer, Events) {
    let log = Arc::new(Log {
        state: Mutex::new(State {
            updates: Vec::new(),
            listeners: 1,
            closed: false,
        }),
        changed: Notify::new(),
    });
    (Writer { log: log.clone() }, Events { log, next: 0 })
}

impl Writer {
    pub(crate) fn send(&self, update: Update) {
        {
            let mut st = self.log.lock();
            if st.listeners == 0 {
                return;
            }
            st.updates.push(Arc::new(update));
        }
        self.log.changed.notify_waiters();
    }

    /// A listener from the next event on.
    pub(crate) fn subscribe(&self) -> Events {
        let mut st = self.log.lock();
        st.listeners += 1;
        Events {
            log: self.log.clone(),
            next: st.updates.len(),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.log.lock().closed = true;
        self.log.changed.notify_waiters();
    }
}

impl Events {
    /// The next event; `None` once the turn is over and every event was read.
    pub(crate) async fn recv(&mut self) -> Option<Arc<Update>> {
        loop {
            // Registered before the log is read: an event sent in between still wakes it.
            let changed = self.log.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let st = self.log.lock();
                if let Some(u) = st.updates.get(self.next) {
                    self.next += 1;
                    return Some(u.clone());
                }
                if st.closed {
                    return None;
                }
            }
            changed.await;
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let mut st = self.log.lock();
        st.listeners = st.listeners.saturating_sub(1);
        if st.listeners == 0 {
            st.updates = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn update(n: u64, last: bool) -> Update {
        Update {
            result: json!(n),
            last,
        }
    }

    #[tokio::test]
    async fn every_listener_reads_from_where_it_subscribed_then_the_end() {
        let (w, mut first) = log();
        w.send(update(1, false));
        let mut second = w.subscribe();
        w.send(update(2, false));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(u) = second.recv().await {
                got.push(u.result.clone());
            }
            got
        });
        w.send(update(3, true));
        drop(w);
        let mut got = Vec::new();
        while let Some(u) = first.recv().await {
            got.push(u.result.clone());
        }
        assert_eq!(got, [json!(1), json!(2), json!(3)]);
        let second = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second, [json!(2), json!(3)]);
    }

    #[tokio::test]
    async fn a_waiting_listener_wakes_for_the_next_event() {
        let (w, mut events) = log();
        let reader = tokio::spawn(async move { events.recv().await.map(|u| u.result.clone()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        w.send(update(7, false));
        let got = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, Some(json!(7)));
    }

    #[test]
    fn nothing_is_kept_without_listeners() {
        let (w, events) = log();
        drop(events);
        w.send(update(1, false));
        assert!(w.log.lock().updates.is_empty());
        let late = w.subscribe();
        w.send(update(2, false));
        assert_eq!(late.next, 0);
        assert_eq!(w.log.lock().updates.len(), 1);
    }
}
