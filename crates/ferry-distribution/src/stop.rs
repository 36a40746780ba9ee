//! The stop a caller sets on SIGINT/SIGTERM: new work does not start, and an upload in flight
//! ends at its next chunk boundary (its journal then keeps the session for the next process).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set to stop starting new work (SIGINT/SIGTERM); work in flight finishes.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    /// Stops new work from starting; work in flight finishes.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether [`StopSignal::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
