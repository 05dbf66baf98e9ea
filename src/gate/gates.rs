//! The gate in force: what a policy compiles to, an immutable value that a reload swaps whole
//! ([`Gates::replace`]) and every request reads without a lock ([`Gates::load`]). What must
//! outlive a policy (ownership, budgets, counters) is the process's ([`super::Process`]), which
//! each new gate is handed; nothing else carries over.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::Gate;

struct Slot {
    current: ArcSwap<Gate>,
    /// Ticks at every swap (for the tasks that act at once on a reload).
    reloads: watch::Sender<()>,
}

/// A handle on the gate in force. Cheap to clone.
#[derive(Clone)]
pub struct Gates(Arc<Slot>);

impl std::fmt::Debug for Gates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gates").finish_non_exhaustive()
    }
}

impl Gates {
    pub fn new(gate: Arc<Gate>) -> Gates {
        Gates(Arc::new(Slot {
            current: ArcSwap::new(gate),
            reloads: watch::channel(()).0,
        }))
    }

    /// The gate in force now; a request keeps the one it started with.
    pub fn load(&self) -> Arc<Gate> {
        self.0.current.load_full()
    }

    /// Puts `gate` in force (a reload).
    pub fn replace(&self, gate: Arc<Gate>) {
        self.0.current.store(gate);
        self.0.reloads.send_replace(());
    }

    /// A receiver that changes at every later [`Gates::replace`].
    pub fn reloads(&self) -> watch::Receiver<()> {
        self.0.reloads.subscribe()
    }
}
