//! Everything that paces and guards the requests to one registry: its retry policy, AIMD windows
//! (one, or one per action class), optional requests-per-second bucket, breaker and counters.

use std::sync::Arc;

use crate::breaker::{Breaker, BreakerSettings};
use crate::operation::Operation;
use crate::pacer::{Pacer, Ticket};
use crate::retry::policy::RetryPolicy;
use crate::stats::RegistryStats;
use crate::window::{AimdWindow, Permit, WindowSettings};

/// How a registry is paced.
#[derive(Debug, Clone)]
pub struct GateSettings {
    /// Requests in flight at once when the window is fully open; AIMD moves below it, never above.
    pub max_concurrent: usize,
    /// Separate windows for reads and writes (registries that meter them separately).
    pub split_read_write: bool,
    /// A fixed rate bucket on top of the window, for registries that publish a limit.
    pub requests_per_second: Option<f64>,
    /// How every request to this registry is retried (the one retry layer's settings).
    pub retry: RetryPolicy,
    /// When repeated failures open the breaker and for how long.
    pub breaker: BreakerSettings,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            max_concurrent: 16,
            split_read_write: false,
            requests_per_second: None,
            retry: RetryPolicy::default(),
            breaker: BreakerSettings::default(),
        }
    }
}

/// The pacing and protection shared by every request to one registry.
#[derive(Debug)]
pub struct RegistryGate {
    registry: String,
    /// The retry policy every operation on this registry runs under.
    pub policy: RetryPolicy,
    read: Arc<AimdWindow>,
    write: Arc<AimdWindow>,
    /// The rate side: configured, announced and learned limits, and held repositories.
    pub pacer: Pacer,
    /// Stops sending to the registry after repeated failures, so a dead registry costs no attempts.
    /// Shared when the client was given one ([`RegistryGate::with_breaker`]): `ferry watch`
    /// carries what one run learned about a registry's health into the next.
    pub breaker: Arc<Breaker>,
    /// Counts of requests, retries and throttles, for the run's report.
    pub stats: RegistryStats,
}

/// A slot in the window plus the pass from the rate bucket: held for one attempt, or longer
/// when the attempt hands back a stream that is still being read.
#[derive(Debug)]
pub struct Slot {
    _permit: Permit,
}

impl RegistryGate {
    /// Builds the gate for `registry`; reads and writes share one window unless `split_read_write`.
    pub fn new(registry: impl Into<String>, settings: GateSettings) -> Self {
        let registry = registry.into();
        let window = WindowSettings::new(settings.max_concurrent);
        let read = AimdWindow::new(registry.clone(), window);
        let write = if settings.split_read_write {
            AimdWindow::new(format!("{registry} (writes)"), window)
        } else {
            Arc::clone(&read)
        };
        RegistryGate {
            pacer: Pacer::new(&registry, settings.requests_per_second),
            breaker: Arc::new(Breaker::new(registry.clone(), settings.breaker)),
            policy: settings.retry,
            stats: RegistryStats::default(),
            registry,
            read,
            write,
        }
    }

    /// The same gate with `breaker` (another client's, for the same registry) in place of its
    /// own fresh one.
    pub fn with_breaker(mut self, breaker: Arc<Breaker>) -> Self {
        self.breaker = breaker;
        self
    }

    /// The registry host this gate paces, as errors and logs name it.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The window `operation` draws a slot from: the write window for writes, else the read one.
    pub fn window(&self, operation: Operation) -> &Arc<AimdWindow> {
        if operation.is_write() {
            &self.write
        } else {
            &self.read
        }
    }

    /// Waits out a hold on `repository`, then for a window slot, then for the pacer, for one
    /// attempt of `operation`. A held repository never sits on a slot.
    pub async fn acquire(&self, operation: Operation, repository: Option<&str>) -> (Slot, Ticket) {
        self.pacer.wait_for_hold(repository).await;
        let permit = self.window(operation).acquire().await;
        let ticket = self.pacer.admit(operation).await;
        (Slot { _permit: permit }, ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_windows_are_separate() {
        let gate = RegistryGate::new(
            "r",
            GateSettings {
                split_read_write: true,
                ..GateSettings::default()
            },
        );
        assert!(!Arc::ptr_eq(
            gate.window(Operation::BlobGet),
            gate.window(Operation::UploadFinish)
        ));
        let shared = RegistryGate::new("r", GateSettings::default());
        assert!(Arc::ptr_eq(
            shared.window(Operation::BlobGet),
            shared.window(Operation::UploadFinish)
        ));
    }
}
