//! The Prometheus metrics `ferry watch` serves on /metrics (OpenMetrics text, through the
//! `prometheus-client` crate): per registry and per run, updated as each run's report is out.
//!
//! Per registry (label `registry`, the host), counters over the process's runs: requests sent
//! (retries included), retries, throttling answers (429, or 503 with `Retry-After`), blob bytes read
//! and written; and a gauge of the breaker's state at the end of the last run (0 closed,
//! 1 half-open, 2 open). Per run: the last run's duration, its images by status (synced,
//! up to date, failed) and the mappings that failed, runs by exit code, and the time of
//! the last clean run.

use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use ferry_sync::report::{RegistryReport, SyncReport, Totals};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::exit::Exit;

type Labels = Vec<(&'static str, String)>;

/// Every metric of a `ferry watch` process.
#[derive(Debug)]
pub struct WatchMetrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    retries: Family<Labels, Counter>,
    throttled: Family<Labels, Counter>,
    read_bytes: Family<Labels, Counter>,
    written_bytes: Family<Labels, Counter>,
    breaker: Family<Labels, Gauge>,
    runs: Family<Labels, Counter>,
    run_images: Family<Labels, Gauge>,
    run_mappings: Family<Labels, Gauge>,
    run_duration: Gauge<f64, AtomicU64>,
    last_success: Gauge<f64, AtomicU64>,
    events: Family<Labels, Counter>,
    event_syncs: Family<Labels, Counter>,
    event_latency: Family<Labels, Histogram>,
    event_oldest: Gauge<f64, AtomicU64>,
}

impl Default for WatchMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl WatchMetrics {
    /// Every metric registered, all at zero (no run yet).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ferry");
        let m = WatchMetrics {
            registry: Registry::default(),
            requests: Family::default(),
            retries: Family::default(),
            throttled: Family::default(),
            read_bytes: Family::default(),
            written_bytes: Family::default(),
            breaker: Family::default(),
            runs: Family::default(),
            run_images: Family::default(),
            run_mappings: Family::default(),
            run_duration: Gauge::default(),
            last_success: Gauge::default(),
            events: Family::default(),
            event_syncs: Family::default(),
            event_latency: Family::new_with_constructor(|| {
                Histogram::new([0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0])
            }),
            event_oldest: Gauge::default(),
        };
        registry.register(
            "registry_requests",
            "HTTP requests sent to the registry's endpoint, retries included (token realms and object storage redirects not counted)",
            m.requests.clone(),
        );
        registry.register(
            "registry_retries",
            "Requests sent again after a transient failure",
            m.retries.clone(),
        );
        registry.register(
            "registry_throttled",
            "Throttling answers from the registry (429, or 503 with Retry-After)",
            m.throttled.clone(),
        );
        registry.register_with_unit(
            "registry_read",
            "Blob bytes received from the registry (manifests and listings not counted)",
            Unit::Bytes,
            m.read_bytes.clone(),
        );
        registry.register_with_unit(
            "registry_written",
            "Blob upload and manifest PUT bytes sent to the registry",
            Unit::Bytes,
            m.written_bytes.clone(),
        );
        registry.register(
            "registry_breaker_state",
            "The registry's circuit breaker at the end of the last run: 0 closed, 1 half-open, 2 open",
            m.breaker.clone(),
        );
        registry.register(
            "runs",
            "Runs finished, by exit code (0 clean, 1 partial, 2 failed, 3 config, 4 auth)",
            m.runs.clone(),
        );
        registry.register(
            "last_run_images",
            "(image, target) pairs of the last run, by status",
            m.run_images.clone(),
        );
        registry.register(
            "last_run_mappings",
            "Mappings of the last run that failed before any image of theirs was known (listing, auth, expansion), label status=failed",
            m.run_mappings.clone(),
        );
        registry.register_with_unit(
            "last_run_duration",
            "How long the last run took",
            Unit::Seconds,
            m.run_duration.clone(),
        );
        registry.register_with_unit(
            "last_success_timestamp",
            "When the last clean run (exit code 0) finished, as Unix time; 0 before the first",
            Unit::Seconds,
            m.last_success.clone(),
        );
        registry.register(
            "events",
            "Push notices on POST /v1/events, by outcome: queued, coalesced (covered by a sync queued or running), ignored (no mapping covers them), refused (queue full), and requests rejected (unauthorized, malformed, too_large)",
            m.events.clone(),
        );
        registry.register(
            "event_syncs",
            "Syncs of one tag started by events, by exit code",
            m.event_syncs.clone(),
        );
        registry.register_with_unit(
            "event_to_synced",
            "From a notice's arrival to the end of the sync it asked for, by mapping",
            Unit::Seconds,
            m.event_latency.clone(),
        );
        registry.register_with_unit(
            "event_oldest_waiting",
            "Age of the oldest accepted notice not yet synced (0: none waiting)",
            Unit::Seconds,
            m.event_oldest.clone(),
        );
        WatchMetrics { registry, ..m }
    }

    /// Takes in one finished run: its report (when it got that far) and its exit code.
    pub fn record(&self, report: Option<&SyncReport>, exit: Exit, at: SystemTime) {
        self.runs
            .get_or_create(&vec![("code", exit.code().to_string())])
            .inc();
        if let Some(report) = report {
            self.record_registries(&report.registries);
            let t = &report.totals;
            for (status, n) in [
                ("synced", t.images_synced),
                ("up_to_date", t.images_up_to_date),
                ("failed", t.images_failed),
            ] {
                self.run_images
                    .get_or_create(&vec![("status", status.to_owned())])
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            // A mapping that failed before any image of its was known (its listing, its auth,
            // its expansion) has no image to count as failed: it is counted here.
            self.run_mappings
                .get_or_create(&vec![("status", "failed".to_owned())])
                .set(i64::try_from(t.mappings_failed).unwrap_or(i64::MAX));
            self.run_duration.set(report.elapsed.as_secs_f64());
        }
        if exit == Exit::Clean {
            let unix = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            self.last_success.set(unix);
        }
    }

    /// Adds each registry's counters of one run (its report's, or a cancelled run's registries
    /// as they stood) and sets its breaker gauge.
    pub fn record_registries(&self, registries: &[RegistryReport]) {
        for r in registries {
            let labels = vec![("registry", r.registry.clone())];
            // The registry's share of the report's totals: one meaning per counter.
            let t = Totals::of(&r.stats);
            self.requests.get_or_create(&labels).inc_by(t.requests);
            self.retries.get_or_create(&labels).inc_by(t.retries);
            self.throttled.get_or_create(&labels).inc_by(t.throttled);
            self.read_bytes.get_or_create(&labels).inc_by(t.bytes_read);
            self.written_bytes
                .get_or_create(&labels)
                .inc_by(t.bytes_written);
            let state = match r.breaker.as_str() {
                "open" => 2,
                "half_open" => 1,
                _ => 0,
            };
            self.breaker.get_or_create(&labels).set(state);
        }
    }

    /// Counts `n` notices (or requests) of `outcome` on /v1/events.
    pub fn event(&self, outcome: &str, n: usize) {
        if n > 0 {
            self.events
                .get_or_create(&vec![("outcome", outcome.to_owned())])
                .inc_by(n as u64);
        }
    }

    /// An event sync of mapping `mapping` ended with `exit`, `seconds` after its first notice.
    pub fn event_synced(&self, mapping: usize, exit: Exit, seconds: f64) {
        self.event_syncs
            .get_or_create(&vec![("code", exit.code().to_string())])
            .inc();
        self.event_latency
            .get_or_create(&vec![("mapping", mapping.to_string())])
            .observe(seconds);
    }

    /// The age of the oldest notice waiting, set as /metrics is read.
    pub fn set_oldest_event(&self, seconds: f64) {
        self.event_oldest.set(seconds);
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
