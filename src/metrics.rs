//! The Prometheus metrics `ferry watch` serves on /metrics (OpenMetrics text, through the
//! `prometheus-client` crate): per registry and per run, updated as each run's report is out.
//!
//! Per registry (label `registry`, the host), counters over the process's runs: requests sent
//! (retries included), retries, throttling answers (429, or 503 with `Retry-After`), blob bytes read
//! and written; and a gauge of the breaker's state at the end of the last run (0 closed,
//! 1 half-open, 2 open). Per run: the last run's duration, its images by status (synced,
//! up to date, failed) and the mappings that failed, runs by exit code, and the time of
//! the last clean run. Per mapping (labels `mapping`, `source`): freshness, from each run's
//! report (see [`Freshness`]). Push events on /v1/events: counted by outcome, and timed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use ferry_sync::report::{ImageStatus, RegistryReport, SyncReport, Totals};
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
    events_ignored: Family<Labels, Counter>,
    events_held: Family<Labels, Gauge>,
    listener_refused: Family<Labels, Counter>,
    freshness: Freshness,
    verify_findings: Family<Labels, Gauge>,
    last_verify: Gauge<f64, AtomicU64>,
}

/// Per mapping, how fresh its targets are, as the last run's report shows (issue 27):
/// tags out of date on some target (failed or interrupted on one), when a run last left the
/// mapping complete, and how long the oldest tag still out of date has been so (since the
/// first run that found it not on every target). A mapping that could not be resolved has no
/// images in the report and keeps its last values: nothing new is known about its targets.
#[derive(Debug, Default)]
struct Freshness {
    out_of_date: Family<Labels, Gauge>,
    last_complete: Family<Labels, Gauge<f64, AtomicU64>>,
    oldest_pending: Family<Labels, Gauge<f64, AtomicU64>>,
    /// (mapping, source) -> tag -> when a run first found it out of date.
    pending: Mutex<HashMap<(usize, String), HashMap<String, SystemTime>>>,
}

fn unix(at: SystemTime) -> f64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Freshness {
    fn record(&self, report: &SyncReport, at: SystemTime) {
        let mut stale: HashMap<(usize, String), BTreeSet<&str>> = HashMap::new();
        for i in &report.images {
            let entry = stale.entry((i.mapping, i.source.clone())).or_default();
            if matches!(
                i.status,
                ImageStatus::Failed { .. } | ImageStatus::Interrupted | ImageStatus::Held { .. }
            ) {
                entry.insert(i.image.as_str());
            }
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for (key, tags) in stale {
            let labels = vec![("mapping", key.0.to_string()), ("source", key.1.clone())];
            let since = pending.entry(key).or_default();
            since.retain(|tag, _| tags.contains(tag.as_str()));
            for tag in &tags {
                since.entry((*tag).to_owned()).or_insert(at);
            }
            self.out_of_date
                .get_or_create(&labels)
                .set(i64::try_from(tags.len()).unwrap_or(i64::MAX));
            if tags.is_empty() {
                self.last_complete.get_or_create(&labels).set(unix(at));
            }
            let oldest = since.values().min().copied().unwrap_or(at);
            let age = at.duration_since(oldest).map(|d| d.as_secs_f64());
            self.oldest_pending
                .get_or_create(&labels)
                .set(age.unwrap_or(0.0));
        }
    }
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
            events_ignored: Family::default(),
            events_held: Family::default(),
            listener_refused: Family::default(),
            freshness: Freshness::default(),
            verify_findings: Family::default(),
            last_verify: Gauge::default(),
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
            "event_oldest_unmirrored",
            "Age of the oldest accepted notice not yet on every target: queued, syncing, or left to the periodic run after its event syncs failed (0: none)",
            Unit::Seconds,
            m.event_oldest.clone(),
        );
        registry.register(
            "events_ignored",
            "Push notices that ask for nothing, by reason: no_tag, bad_digest, no_mapping, delete_not_pruned, no_config",
            m.events_ignored.clone(),
        );
        registry.register(
            "events_held",
            "What the events queue holds, set as /metrics is read: keys (queued or syncing), digests, bytes (of tags and digests), journal (entries in the state directory)",
            m.events_held.clone(),
        );
        registry.register(
            "listener_connections_refused",
            "Connections the listener closed unserved, by reason: per_client (that address holds its share), probes_only (a request other than /healthz or /readyz in the room kept for them)",
            m.listener_refused.clone(),
        );
        registry.register(
            "mapping_tags_out_of_date",
            "Tags of the mapping not on every target after the last run that resolved it (failed or interrupted on some target)",
            m.freshness.out_of_date.clone(),
        );
        registry.register_with_unit(
            "mapping_last_complete_timestamp",
            "When a run last left every selected tag of the mapping on every target, as Unix time",
            Unit::Seconds,
            m.freshness.last_complete.clone(),
        );
        registry.register_with_unit(
            "mapping_oldest_pending_change_age",
            "How long the oldest tag still out of date has been so, since the first run that found it; 0 when none is",
            Unit::Seconds,
            m.freshness.oldest_pending.clone(),
        );
        registry.register(
            "verify_findings",
            "Findings of the last deep verify (--verify-every), by kind: missing, drifted, extra, unreadable",
            m.verify_findings.clone(),
        );
        registry.register_with_unit(
            "last_verify_timestamp",
            "When the last verify (--verify-every) finished, as Unix time; 0 before the first",
            Unit::Seconds,
            m.last_verify.clone(),
        );
        WatchMetrics { registry, ..m }
    }

    /// Takes in one finished run: its report (when it got that far) and its exit code.
    pub fn record(&self, report: Option<&SyncReport>, exit: Exit, at: SystemTime) {
        self.runs
            .get_or_create(&vec![("code", exit.code().to_string())])
            .inc();
        if let Some(report) = report {
            // Its registries' counters are not taken from here: the watch counts its clients
            // (`commands::watch::clients`), whichever run sent the requests.
            let t = &report.totals;
            for (status, n) in [
                ("synced", t.images_synced),
                ("up_to_date", t.images_up_to_date),
                ("failed", t.images_failed),
                ("held", t.images_held),
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
            self.freshness.record(report, at);
        }
        if exit == Exit::Clean {
            let unix = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            self.last_success.set(unix);
        }
    }

    /// Adds each registry's counters (what the watch's clients sent since last counted) and
    /// sets its breaker gauge. The one way registry counters reach the metrics.
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

    /// A notice on /v1/events that asks for nothing, for `reason`.
    pub fn event_ignored(&self, reason: &str) {
        self.events_ignored
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// What the events queue holds (`what`: keys, digests, bytes, journal), set as /metrics is read.
    pub fn set_events_held(&self, what: &'static str, n: usize) {
        self.events_held
            .get_or_create(&vec![("what", what.to_owned())])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// A connection the listener closed unserved, for `reason`.
    pub fn listener_refused(&self, reason: &'static str) {
        self.listener_refused
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// Takes in one finished verify (`--verify-every`): its findings by kind, and when.
    pub fn record_verify(&self, report: &ferry_sync::verify::VerifyReport, at: SystemTime) {
        let t = &report.totals;
        for (kind, n) in [
            ("missing", t.missing),
            ("drifted", t.drifted),
            ("extra", t.extra),
            ("unreadable", t.unreadable),
        ] {
            self.verify_findings
                .get_or_create(&vec![("kind", kind.to_owned())])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.last_verify.set(unix(at));
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ferry_sync::report::{ImageReport, MappingFailure};

    use super::*;

    fn image(mapping: usize, tag: &str, failed: bool) -> ImageReport {
        ImageReport {
            mapping,
            source: format!("src.example/app{mapping}"),
            image: tag.into(),
            digest: String::new(),
            target: "dst.example/app".into(),
            status: match failed {
                true => ImageStatus::Interrupted,
                false => ImageStatus::UpToDate,
            },
            kept_digest_refused: None,
            bytes_resumed: 0,
            in_base: None,
            pushed_as: None,
        }
    }

    fn report(images: Vec<ImageReport>, failed_mappings: Vec<MappingFailure>) -> SyncReport {
        SyncReport {
            images,
            failed_mappings,
            rejected_names: Vec::new(),
            expansions: Vec::new(),
            selections: Vec::new(),
            repositories_created: Vec::new(),
            registries: Vec::new(),
            totals: Totals::default(),
            elapsed: Duration::ZERO,
            interrupted: false,
            archives: Vec::new(),
            repaired: Vec::new(),
            copy: None,
        }
    }

    fn line<'a>(text: &'a str, name: &str, mapping: usize) -> &'a str {
        let label = format!("{name}{{mapping=\"{mapping}\",source=\"src.example/app{mapping}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(label.as_str()))
            .unwrap_or_else(|| panic!("no {label} in {text}"))
    }

    #[test]
    fn freshness_per_mapping_counts_tags_out_of_date_and_the_age_of_the_oldest() {
        let m = WatchMetrics::new();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let t1 = t0 + Duration::from_secs(60);
        let t2 = t1 + Duration::from_secs(60);
        // Run 1: mapping 0 misses a and b; mapping 1 is complete.
        let r1 = report(
            vec![
                image(0, "a", true),
                image(0, "b", true),
                image(0, "c", false),
                image(1, "x", false),
            ],
            vec![],
        );
        m.record(Some(&r1), Exit::Partial, t0);
        // Run 2: b caught up, a did not; mapping 1 could not be resolved (values kept).
        let failed = MappingFailure {
            mapping: 1,
            source: "src.example/app1".into(),
            status: ImageStatus::Interrupted,
        };
        let r2 = report(
            vec![image(0, "a", true), image(0, "b", false)],
            vec![failed],
        );
        m.record(Some(&r2), Exit::Partial, t1);
        let text = m.encode();
        assert_eq!(line(&text, "ferry_mapping_tags_out_of_date", 0), "1");
        assert_eq!(
            line(&text, "ferry_mapping_oldest_pending_change_age_seconds", 0),
            "60.0"
        );
        assert_eq!(line(&text, "ferry_mapping_tags_out_of_date", 1), "0");
        assert_eq!(
            line(&text, "ferry_mapping_last_complete_timestamp_seconds", 1),
            "1000.0"
        );
        assert!(!text.contains("ferry_mapping_last_complete_timestamp_seconds{mapping=\"0\""));
        // Run 3: mapping 0 complete.
        m.record(
            Some(&report(vec![image(0, "a", false)], vec![])),
            Exit::Clean,
            t2,
        );
        let text = m.encode();
        assert_eq!(line(&text, "ferry_mapping_tags_out_of_date", 0), "0");
        assert_eq!(
            line(&text, "ferry_mapping_oldest_pending_change_age_seconds", 0),
            "0.0"
        );
        assert_eq!(
            line(&text, "ferry_mapping_last_complete_timestamp_seconds", 0),
            "1120.0"
        );
    }
}
