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

impl Watch {
    /// Starts watching: requests made before now are not this run's.
    pub fn start() -> Watch {
        Watch(ASKED.load(Ordering::SeqCst))
    }

    pub fn asked(self) -> bool {
        ASKED.load(Ordering::Relaxed) != self.0
    }
}

/// A run stopped because a stop was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the run was interrupted and stopped before it finished")]
pub struct Stopped;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_sees_only_the_stops_asked_after_it_began() {
        ask();
        let watch = Watch::start();
        assert!(!watch.asked());
        ask();
        assert!(watch.asked());
        assert!(!Watch::start().asked());
    }
}
