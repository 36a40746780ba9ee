//! An in-process OCI distribution registry for tests: real HTTP on 127.0.0.1 over real
//! in-memory state, with token auth, pagination, latency, rate limits, faults and metrics; and
//! [`FaultProxy`], the same fault knobs in front of any upstream registry.

mod auth;
mod content;
mod faults;
mod hostile;
mod listing;
mod metrics;
mod net;
mod personality;
mod proxy;
mod reply;
mod routes;
mod stall;
mod state;
mod uploads;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use auth::{TOKEN_SERVICE, TokenAuthConfig};
pub use faults::{
    FaultAction, FaultRule, FaultsHandle, RandomFaultKind, RandomFaults, RetryAfter,
    RetryAfterStyle, TokenBucket,
};
pub use hostile::{HostileHandle, HostileRule, Hostility};
pub use listing::{LaterPage, ListingFaults};
pub use metrics::{OpKind, RequestRecord, Stats};
pub use net::{HangingServer, closed_port};
pub use personality::{MalformedListing, Personality};
pub use proxy::FaultProxy;
pub use stall::BodyStalls;
pub use state::sha256_digest;

use routes::{Config, Listening, Shared};
use state::StoredManifest;

/// OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image config media type.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Uncompressed OCI layer media type (used by `seed_image`, so layer digest = diff id).
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// Settings for a [`TestRegistry`]; start it with [`TestRegistryBuilder::start`].
#[derive(Debug, Clone)]
pub struct TestRegistryBuilder {
    auth: Option<TokenAuthConfig>,
    config: Config,
    rate_limit: Option<TokenBucket>,
}

impl Default for TestRegistryBuilder {
    fn default() -> Self {
        TestRegistryBuilder {
            auth: None,
            config: Config {
                referrers_api: true,
                ..Config::default()
            },
            rate_limit: None,
        }
    }
}

impl TestRegistryBuilder {
    /// Requires bearer tokens from the registry's own `/token` endpoint.
    pub fn token_auth(mut self, auth: TokenAuthConfig) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Caps tag-list pages at `size` entries (answering `Link: <..>; rel="next"` when more
    /// remain); a smaller `n` from the client still wins.
    pub fn page_size(mut self, size: usize) -> Self {
        self.config.page_size = Some(size);
        self
    }

    /// Adds `delay` (tokio clock) to every request for repositories starting with `prefix`;
    /// the longest matching prefix wins.
    pub fn repo_latency(mut self, prefix: impl Into<String>, delay: Duration) -> Self {
        self.config.latency.push((prefix.into(), delay));
        self
    }

    /// Token-bucket rate limit over all registry requests (changeable later through
    /// [`FaultsHandle::set_rate_limit`]).
    pub fn rate_limit(mut self, bucket: TokenBucket) -> Self {
        self.rate_limit = Some(bucket);
        self
    }

    /// Whether `GET /v2/NAME/referrers/D` is served (default) or answered 404, forcing
    /// clients onto the tag-schema fallback. Also controls the `OCI-Subject` header.
    pub fn referrers_api(mut self, enabled: bool) -> Self {
        self.config.referrers_api = enabled;
        self
    }

    /// Behaves like a registry in the field that refuses or ignores what `personality` says.
    pub fn personality(mut self, personality: Personality) -> Self {
        self.config.personality = personality;
        if personality.referrers_api_absent {
            self.config.referrers_api = false;
        }
        self
    }

    /// Answers blob GETs with 307 to a second listener serving the same bytes, which records
    /// every `Authorization` header it receives.
    pub fn redirect_blobs(mut self, enabled: bool) -> Self {
        self.config.redirect_blobs = enabled;
        self
    }

    /// Binds both listeners on 127.0.0.1 and spawns them on the current tokio runtime.
    pub async fn start(self) -> io::Result<TestRegistry> {
        let main = TcpListener::bind("127.0.0.1:0").await?;
        let redirect = TcpListener::bind("127.0.0.1:0").await?;
        let host = main.local_addr()?.to_string();
        let redirect_host = redirect.local_addr()?.to_string();
        let faults = FaultsHandle::default();
        faults.set_rate_limit(self.rate_limit);
        let shared = Arc::new(Shared {
            store: Mutex::default(),
            metrics: metrics::Metrics::default(),
            faults,
            auth: self.auth.map(auth::AuthState::new),
            config: self.config,
            base_url: format!("http://{host}"),
            redirect_url: format!("http://{redirect_host}"),
            redirect_authorizations: Mutex::default(),
            hostile: HostileHandle::default(),
            auth_personality: Default::default(),
        });
        let router = |redirect_target| {
            axum::Router::new()
                .fallback(routes::handle)
                .with_state(Listening {
                    shared: shared.clone(),
                    redirect_target,
                })
        };
        let tasks = vec![
            net::serve(main, router(false)),
            net::serve(redirect, router(true)),
        ];
        Ok(TestRegistry {
            shared,
            host,
            tasks,
        })
    }
}

/// A running in-process registry. Stops accepting connections when dropped.
#[derive(Debug)]
pub struct TestRegistry {
    shared: Arc<Shared>,
    host: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Platforms given to the children of a seeded index, in order (cycled).
const SEED_PLATFORMS: &[(&str, Option<&str>)] = &[
    ("amd64", None),
    ("arm64", Some("v8")),
    ("arm", Some("v7")),
    ("ppc64le", None),
    ("s390x", None),
    ("386", None),
];

impl TestRegistry {
    /// A builder with defaults: no auth, no pagination, no latency, no rate limit, referrers on,
    /// no redirects.
    pub fn builder() -> TestRegistryBuilder {
        TestRegistryBuilder::default()
    }

    /// A loopback port with nothing listening (bound, then released).
    pub fn closed_port() -> io::Result<u16> {
        closed_port()
    }

    /// A server that accepts TCP connections and never answers.
    pub async fn hanging_server() -> io::Result<HangingServer> {
        HangingServer::start().await
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        self.host.clone()
    }

    /// `http://127.0.0.1:PORT2` of the redirect-target listener.
    pub fn redirect_url(&self) -> String {
        self.shared.redirect_url.clone()
    }

    /// The hostile rules that rewrite this registry's answers (see [`Hostility`]).
    pub fn hostile(&self) -> HostileHandle {
        self.shared.hostile.clone()
    }

    /// Runtime fault knobs.
    pub fn faults(&self) -> FaultsHandle {
        self.shared.faults.clone()
    }

    /// Runtime body stalls (blob GETs that stop part way and never end).
    pub fn body_stalls(&self) -> BodyStalls {
        self.shared.config.stalls.clone()
    }

    /// Runtime tag-listing faults (pages after the first failing or linking to themselves).
    pub fn listing_faults(&self) -> ListingFaults {
        self.shared.config.listing.clone()
    }

    /// Stores a blob and links it into `repo`; returns its digest.
    pub fn seed_blob(&self, repo: &str, bytes: &[u8]) -> String {
        self.shared
            .store()
            .put_blob(repo, Bytes::copy_from_slice(bytes))
    }

    /// Stores manifest bytes as given (no checks) under a tag or digest; returns the digest of
    /// the bytes. Seeding by a digest that does not match the bytes stores them under that
    /// digest anyway (to build broken registries on purpose).
    pub fn seed_manifest(
        &self,
        repo: &str,
        tag_or_digest: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> String {
        let digest = sha256_digest(bytes);
        let mut store = self.shared.store();
        let repository = store.repo_mut(repo);
        let stored = StoredManifest {
            media_type: media_type.to_string(),
            bytes: Bytes::copy_from_slice(bytes),
        };
        if state::is_digest(tag_or_digest) {
            repository
                .manifests
                .insert(tag_or_digest.to_string(), stored);
            return tag_or_digest.to_string();
        }
        repository.manifests.insert(digest.clone(), stored);
        repository
            .tags
            .insert(tag_or_digest.to_string(), digest.clone());
        digest
    }

    /// Writes a config blob, the layer blobs (uncompressed tar media type) and an OCI image
    /// manifest, and tags it; returns the manifest digest. Same layers give the same digest.
    pub fn seed_image(&self, repo: &str, tag: &str, layers: &[&[u8]]) -> String {
        let layer_descriptors: Vec<_> = layers
            .iter()
            .map(|layer| {
                let digest = self.seed_blob(repo, layer);
                json!({"mediaType": OCI_LAYER_TAR, "digest": digest, "size": layer.len()})
            })
            .collect();
        let diff_ids: Vec<String> = layers.iter().map(|l| sha256_digest(l)).collect();
        let config = json!({
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "config": {},
        })
        .to_string();
        let config_digest = self.seed_blob(repo, config.as_bytes());
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
            "layers": layer_descriptors,
        })
        .to_string();
        self.seed_manifest(repo, tag, OCI_MANIFEST, manifest.as_bytes())
    }

    /// Writes an OCI index over manifests already in `repo` (platforms assigned in order:
    /// linux/amd64, linux/arm64/v8, linux/arm/v7, linux/ppc64le, linux/s390x, linux/386) and
    /// tags it; returns the index digest. Children not found in `repo` are described with the
    /// OCI manifest media type and size 0.
    pub fn seed_index(&self, repo: &str, tag: &str, children: &[String]) -> String {
        let descriptors: Vec<_> = children
            .iter()
            .enumerate()
            .map(|(i, child)| {
                let (media_type, size) = match self.manifest(repo, child) {
                    Some((media_type, bytes)) => (media_type, bytes.len()),
                    None => (OCI_MANIFEST.to_string(), 0),
                };
                let (arch, variant) = SEED_PLATFORMS[i % SEED_PLATFORMS.len()];
                let mut platform = json!({"architecture": arch, "os": "linux"});
                if let Some(variant) = variant {
                    platform["variant"] = json!(variant);
                }
                json!({"mediaType": media_type, "digest": child, "size": size, "platform": platform})
            })
            .collect();
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descriptors})
            .to_string();
        self.seed_manifest(repo, tag, OCI_INDEX, index.as_bytes())
    }

    /// Removes `tag` from `repo` (its manifest stays, by digest), as a tag delete would.
    pub fn untag(&self, repo: &str, tag: &str) {
        self.shared.store().repo_mut(repo).tags.remove(tag);
    }

    /// Tags of `repo`, sorted; empty when the repository is unknown.
    pub fn tags(&self, repo: &str) -> Vec<String> {
        self.shared
            .store()
            .repos
            .get(repo)
            .map(|r| r.tags.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// `(media type, bytes)` of a manifest by tag or digest.
    pub fn manifest(&self, repo: &str, reference: &str) -> Option<(String, Vec<u8>)> {
        self.shared
            .store()
            .manifest(repo, reference)
            .map(|(_, m)| (m.media_type, m.bytes.to_vec()))
    }

    /// Whether `digest` is linked into `repo` (pushed or mounted there).
    pub fn has_blob(&self, repo: &str, digest: &str) -> bool {
        self.shared.store().repo_blob(repo, digest).is_some()
    }

    /// A blob's bytes from the global store, whichever repository it is in.
    pub fn blob(&self, digest: &str) -> Option<Vec<u8>> {
        self.shared.store().blobs.get(digest).map(|b| b.to_vec())
    }

    /// Makes an empty repository, as a registry's API for creating one would (see
    /// `Personality::writes_need_existing_repository`).
    pub fn create_repository(&self, repo: &str) {
        self.shared.store().repo_mut(repo);
    }

    /// Names of all repositories holding anything.
    pub fn repositories(&self) -> Vec<String> {
        self.shared.store().repos.keys().cloned().collect()
    }

    /// Number of upload sessions still open.
    pub fn open_uploads(&self) -> usize {
        self.shared.store().uploads.len()
    }

    /// Manifest GETs a `pull_limit` personality has counted (HEADs are not pulls).
    pub fn pulls(&self) -> u64 {
        self.shared.auth_personality.pulls()
    }

    /// Counters since start or the last [`TestRegistry::reset_stats`].
    pub fn stats(&self) -> Stats {
        self.shared.metrics.lock().stats.clone()
    }

    /// Every request seen, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.metrics.lock().records.clone()
    }

    /// `(time, requests in flight)` sampled at every request start and end.
    pub fn in_flight_series(&self) -> Vec<(tokio::time::Instant, usize)> {
        self.shared.metrics.lock().in_flight_series.clone()
    }

    /// Clears counters, records and the in-flight series (requests in flight stay counted).
    pub fn reset_stats(&self) {
        self.shared.metrics.reset();
    }

    /// `Authorization` header values received by the redirect-target listener.
    pub fn redirect_authorizations(&self) -> Vec<String> {
        match self.shared.redirect_authorizations.lock() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod knob_tests;
