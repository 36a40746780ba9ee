//! `ferry watch`'s registry clients: one `Registries` for the process, shared by the periodic
//! runs, the event syncs and the verifies, made again only when the config's `registries:` change.
//!
//! The clients keep what they learned (the /v2/ ping, tokens, capabilities, breakers, windows)
//! from one run to the next. What they sent reaches the metrics through one path, [`Clients::
//! count`]: each client's counters since they were last counted, whichever run sent the
//! requests (a run cancelled at its bound included). Each run sees the clients through its own
//! view (`Registries::for_run`): its report counts its own requests, and a periodic run's
//! uploads are recorded in its state directory; an event sync records none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use ferry_config::{Config, RegistrySettings};
use ferry_distribution::stats::StatsSnapshot;
use ferry_sync::registries::{Breakers, Registries};

use crate::metrics::WatchMetrics;

/// The process's clients, and what of their requests the metrics have counted.
#[derive(Debug)]
pub struct Clients {
    breakers: Breakers,
    current: Mutex<Arc<Generation>>,
}

/// One `Registries`, for as long as the config's `registries:` stay as they were.
#[derive(Debug)]
struct Generation {
    settings: Vec<RegistrySettings>,
    registries: Registries,
    /// Each host's counters as they stood when last counted into the metrics.
    counted: Mutex<HashMap<String, StatsSnapshot>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Generation {
    fn new(config: &Config, breakers: &Breakers) -> Arc<Generation> {
        let registries = Registries::new(config).with_breakers(breakers.clone());
        Arc::new(Generation {
            settings: config.registries.clone(),
            registries,
            counted: Mutex::new(HashMap::new()),
        })
    }

    fn count(&self, metrics: &WatchMetrics) {
        let mut counted = lock(&self.counted);
        let mut reports = self.registries.report();
        for r in &mut reports {
            let now = r.stats;
            if let Some(before) = counted.insert(r.registry.clone(), now) {
                r.stats = since(&now, &before);
            }
        }
        metrics.record_registries(&reports);
    }
}

/// The counters `now` added to `before`.
fn since(now: &StatsSnapshot, before: &StatsSnapshot) -> StatsSnapshot {
    StatsSnapshot {
        requests: now.requests.saturating_sub(before.requests),
        http_requests: now.http_requests.saturating_sub(before.http_requests),
        retries: now.retries.saturating_sub(before.retries),
        throttled: now.throttled.saturating_sub(before.throttled),
        server_errors: now.server_errors.saturating_sub(before.server_errors),
        transport_errors: now.transport_errors.saturating_sub(before.transport_errors),
        bytes_read: now.bytes_read.saturating_sub(before.bytes_read),
        bytes_written: now.bytes_written.saturating_sub(before.bytes_written),
    }
}

impl Clients {
    /// The clients for `config`'s registries (none built yet), on `breakers`.
    pub fn new(config: &Config, breakers: Breakers) -> Clients {
        let current = Mutex::new(Generation::new(config, &breakers));
        Clients { breakers, current }
    }

    /// The clients every run uses now.
    pub fn registries(&self) -> Registries {
        lock(&self.current).registries.clone()
    }

    /// Takes in a config just read: when its `registries:` differ from the clients', new
    /// clients are made (on the same breakers) and what the old ones sent is counted.
    /// Runs still going on the old clients finish on them.
    pub fn reload(&self, config: &Config, metrics: &WatchMetrics) {
        let old = {
            let mut current = lock(&self.current);
            if current.settings == config.registries {
                return;
            }
            std::mem::replace(&mut *current, Generation::new(config, &self.breakers))
        };
        old.count(metrics);
    }

    /// Counts into `metrics` what the clients sent since they were last counted.
    pub fn count(&self, metrics: &WatchMetrics) {
        let current = Arc::clone(&lock(&self.current));
        current.count(metrics);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config(max_concurrent: usize, source: &str) -> Config {
        let yaml = format!(
            "version: 1\nregistries:\n  - host: r.example\n    max_concurrent: {max_concurrent}\nmappings:\n  - source: r.example/{source}\n    targets: [r.example/dst]\n"
        );
        ferry_config::parse(&yaml, Path::new("watch.yaml"), &|_| None).expect("parses")
    }

    fn current(clients: &Clients) -> Arc<Generation> {
        Arc::clone(&lock(&clients.current))
    }

    #[test]
    fn the_clients_are_made_again_only_when_the_registries_change() {
        let metrics = WatchMetrics::new();
        let clients = Clients::new(&config(3, "a"), Breakers::default());
        let first = current(&clients);
        // Another mapping, the same registries: the same clients.
        clients.reload(&config(3, "b"), &metrics);
        assert!(Arc::ptr_eq(&first, &current(&clients)));
        assert_eq!(clients.registries().settings("r.example").max_concurrent, 3);
        // A registry's settings changed: new clients, built from them.
        clients.reload(&config(5, "b"), &metrics);
        assert!(!Arc::ptr_eq(&first, &current(&clients)));
        assert_eq!(clients.registries().settings("r.example").max_concurrent, 5);
    }

    #[test]
    fn counters_are_counted_once_as_what_was_added_since_last_time() {
        let before = StatsSnapshot {
            http_requests: 4,
            bytes_written: 100,
            ..StatsSnapshot::default()
        };
        let now = StatsSnapshot {
            http_requests: 9,
            bytes_written: 150,
            retries: 1,
            ..StatsSnapshot::default()
        };
        let added = since(&now, &before);
        assert_eq!(
            (added.http_requests, added.bytes_written, added.retries),
            (5, 50, 1)
        );
        assert_eq!(since(&now, &now), StatsSnapshot::default());
    }
}
