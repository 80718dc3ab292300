//! Stopping runs from outside them: Ctrl-C in the Python package, whose
//! process lives on after it (the command line exits on a signal instead).
//! Runs look at the request between pieces of their work and return
//! [`Stopped`]; what they hold (GPU buffers, threads) is freed as they return.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many stops were asked in this process so far.
static ASKED: AtomicU64 = AtomicU64::new(0);

/// Asks every run under way in this process to stop at its next piece of work.
pub fn ask() {
    ASKED.fetch_add(1, Ordering::SeqCst);
}

/// A run's view of the requests: whether one came since the run began.
#[derive(Debug, Clone, Copy)]
pub struct Watch(u64);

thread_local! {
    /// The requests counted when this thread's call began ([`watching`]):
    /// a backend's watch counts from there, so that a stop asked while the
    /// call planned or compiled is seen when its work starts.
    static CALL_BEGAN: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `call` (a run, on this thread) so that every watch its backends start
/// counts requests from now.
pub fn watching<T>(call: impl FnOnce() -> T) -> T {
    let before = CALL_BEGAN.replace(Some(ASKED.load(Ordering::SeqCst)));
    let out = call();
    CALL_BEGAN.set(before);
    out
}

impl Watch {
    /// Starts watching: requests made before now (or before the call this
    /// thread is [`watching`]) are not this run's.
    pub fn start() -> Watch {
        Watch(CALL_BEGAN.get().unwrap_or_else(|| ASKED.load(Ordering::SeqCst)))
    }

    pub fn asked(self) -> bool {
        ASKED.load(Ordering::Relaxed) != self.0
    }
}

/// A run stopped because a stop was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the run was interrupted and stopped before it finished")]
pub struct Stopped;
