//! The keys of `events.oidc` senders configured with a `jwks_url`: fetched when first needed,
//! kept for an hour, fetched again sooner (at most once a minute) when a token names a key the
//! cached set does not verify; each fetch bounded in time and size.
//!
//! Not a registry request and not retried: a failed fetch leaves the sender without keys (its
//! tokens get 401, and the sender retries its delivery); the next request tries again, no
//! sooner than [`MIN_REFETCH`] after the last try.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferry_config::{EventsSettings, OidcKeys};
use ferry_trust::JwkSet;

/// How long fetched keys are used before they are fetched again.
pub const KEEP: Duration = Duration::from_secs(3600);
/// The shortest time between two fetches of one URL, whatever happens.
pub const MIN_REFETCH: Duration = Duration::from_secs(60);
/// The time one fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set read.
pub const MAX_JWKS: usize = 256 * 1024;

#[derive(Debug)]
struct Entry {
    keys: Option<JwkSet>,
    fetched: Option<Instant>,
    tried: Instant,
}

/// Fetched key sets, by URL.
#[derive(Debug, Default)]
pub struct JwksCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl JwksCache {
    /// The keys held for `url`, if any.
    pub fn keys(&self, url: &str) -> Option<JwkSet> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(url).and_then(|e| e.keys.clone())
    }

    /// Fetches the key set of each `jwks_url` sender that has none, or whose keys are older
    /// than [`KEEP`] (or, with `stale`, any age), unless it was tried within [`MIN_REFETCH`].
    pub async fn refresh(&self, settings: &EventsSettings, stale: bool) {
        for sender in &settings.oidc {
            let OidcKeys::Url(url) = &sender.keys else {
                continue;
            };
            let now = Instant::now();
            let due = {
                let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
                match entries.get(url) {
                    None => true,
                    Some(e) if now.duration_since(e.tried) < MIN_REFETCH => false,
                    Some(e) => {
                        stale
                            || e.keys.is_none()
                            || e.fetched.is_none_or(|f| now.duration_since(f) >= KEEP)
                    }
                }
            };
            if !due {
                continue;
            }
            let fetched = fetch(url).await;
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let entry = entries.entry(url.clone()).or_insert(Entry {
                keys: None,
                fetched: None,
                tried: now,
            });
            entry.tried = now;
            match fetched {
                Ok(set) => {
                    entry.keys = Some(set);
                    entry.fetched = Some(now);
                }
                // The keys held (if any) stay until a fetch succeeds.
                Err(e) => tracing::warn!("watch: fetching the OIDC keys at {url} failed: {e}"),
            }
        }
    }
}

/// One GET of a key set, bounded in time and size.
async fn fetch(url: &str) -> Result<JwkSet, String> {
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let mut response = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("answered {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_JWKS {
            return Err(format!("larger than {MAX_JWKS} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    JwkSet::from_json(&body).map_err(|e| e.to_string())
}
