//! The tag cache: per target registry, which digest ferry gave (or confirmed on) each target
//! tag and when, so a warm run believes an unchanged tag without a HEAD on the target.

// One file per target registry under the state directory's `tag-cache/`, named by the sha256
// of the registry's name (no name a config or registry sends reaches the file system), 0600 in
// a 0700 directory. A file is versioned JSON holding its own registry name; one that fails a
// check (not a regular file of this user, too big, not the form, another version, filed under
// a name not its own, a digest that does not parse) is ignored with a warning and replaced at
// the end of the run: a cache never fails a run. Writes are read-merge-write under a `flock`
// on `tag-cache/lock`, the file replaced through `fsio` (temporary, fsync, rename), so two
// runs on one state directory lose at most each other's confirmations, never the file. It
// holds names and digests only: no credential, no upload location.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use ferry_distribution::{Algorithm, Digest};
use serde::{Deserialize, Serialize};

/// The form this build writes and reads; a file of another version is ignored.
const VERSION: u32 = 1;
/// The largest cache file read (one registry's tags).
const MAX_FILE_BYTES: u64 = 32 << 20;
/// Entries kept per registry at most (the most recently confirmed).
pub const MAX_ENTRIES: usize = 100_000;
/// A temporary left by a killed process is removed after this long.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// One target tag as the cache file holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileEntry {
    repository: String,
    tag: String,
    digest: String,
    /// Unix seconds when ferry last gave the tag this digest or saw the target hold it.
    confirmed: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    ferry_tag_cache: u32,
    registry: String,
    entries: Vec<FileEntry>,
}

/// (repository, tag) of one registry.
type Key = (String, String);

/// What one run saw of one target repository: every tag it was to hold (what the cache keeps
/// for the repository: the others are dropped) and those it confirmed (pushed, or found
/// holding the digest by a HEAD).
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The target registry.
    pub registry: String,
    /// The target repository.
    pub repository: String,
    /// Every tag the run selected for it.
    pub selected: HashSet<String>,
    /// Tags the run confirmed, with the digest the target holds under each.
    pub confirmed: Vec<(String, Digest)>,
}

/// The tag cache of one state directory, as loaded when a run starts.
#[derive(Debug)]
pub struct TagCache {
    dir: PathBuf,
    ttl: Duration,
    now: u64,
    loaded: HashMap<String, HashMap<Key, (Digest, u64)>>,
    /// Tags believed from the cache in this run: kept with their old time, not refreshed.
    hits: Mutex<HashSet<(String, String, String)>>,
}

impl TagCache {
    /// The cache under `state_dir`, read on the blocking pool; entries are believed for `ttl`
    /// after `now` (Unix seconds) confirmed them. With `ignore` (`--no-cache`) nothing is read
    /// and nothing is believed, but the run's confirmations are still written.
    pub async fn load(state_dir: &Path, ttl: Duration, now: u64, ignore: bool) -> TagCache {
        let dir = state_dir.join("tag-cache");
        let loaded = match ignore || ttl.is_zero() {
            true => HashMap::new(),
            false => {
                let d = dir.clone();
                tokio::task::spawn_blocking(move || read_all(&d))
                    .await
                    .unwrap_or_default()
            }
        };
        TagCache {
            dir,
            ttl,
            now,
            loaded,
            hits: Mutex::default(),
        }
    }

    /// Whether the target's `tag` is believed to hold `digest` (or `other`, a filtered index
    /// the target got instead): ferry confirmed it less than the TTL ago. A hit is recorded.
    pub fn holds(
        &self,
        registry: &str,
        repository: &str,
        tag: &str,
        digest: &Digest,
        other: Option<&Digest>,
    ) -> bool {
        let Some((held, at)) = self
            .loaded
            .get(registry)
            .and_then(|r| r.get(&(repository.to_owned(), tag.to_owned())))
        else {
            return false;
        };
        // A time in the future (a clock set back) is not believed.
        let fresh = *at <= self.now && self.now - *at < self.ttl.as_secs();
        let same = held == digest || other == Some(held);
        if fresh && same {
            self.hits.lock().unwrap_or_else(|p| p.into_inner()).insert((
                registry.to_owned(),
                repository.to_owned(),
                tag.to_owned(),
            ));
        }
        fresh && same
    }

    /// Writes what the run saw, on the blocking pool: for each repository in `seen`, its
    /// entries become the confirmed tags (at the run's time) and the tags believed from the
    /// cache (their old time); tags not selected are dropped; other repositories are kept. A
    /// failure is a warning: the next run asks the target.
    pub async fn store(self: std::sync::Arc<Self>, seen: Vec<Seen>) {
        if seen.is_empty() {
            return;
        }
        let this = std::sync::Arc::clone(&self);
        let done = tokio::task::spawn_blocking(move || this.store_blocking(seen)).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(dir = %self.dir.display(), error = %e, "the tag cache could not be written: the next run asks the targets");
        }
    }

    fn store_blocking(&self, seen: Vec<Seen>) -> std::io::Result<()> {
        make_dir(&self.dir)?;
        let _lock = lock(&self.dir)?;
        sweep(&self.dir);
        let hits = self.hits.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut by_registry: BTreeMap<&str, Vec<&Seen>> = BTreeMap::new();
        for s in &seen {
            by_registry.entry(&s.registry).or_default().push(s);
        }
        for (registry, seen) in by_registry {
            let path = self.dir.join(file_name(registry));
            let mut entries = read_file(&path, registry).unwrap_or_default();
            let repositories: HashSet<&str> = seen.iter().map(|s| s.repository.as_str()).collect();
            entries.retain(|(repository, _), _| !repositories.contains(repository.as_str()));
            for s in &seen {
                for tag in &s.selected {
                    let key = (s.repository.clone(), tag.clone());
                    let believed =
                        hits.contains(&(registry.to_owned(), key.0.clone(), key.1.clone()));
                    if let Some(old) = self.loaded.get(registry).and_then(|r| r.get(&key))
                        && believed
                    {
                        entries.insert(key, old.clone());
                    }
                }
                for (tag, digest) in &s.confirmed {
                    // A tag believed from the cache was not confirmed: its time stays.
                    let believed =
                        hits.contains(&(registry.to_owned(), s.repository.clone(), tag.clone()));
                    if s.selected.contains(tag) && !believed {
                        entries.insert(
                            (s.repository.clone(), tag.clone()),
                            (digest.clone(), self.now),
                        );
                    }
                }
            }
            write_file(&self.dir, &path, registry, entries)?;
        }
        Ok(())
    }
}

/// `tag-cache/<sha256 of the registry>.json`.
fn file_name(registry: &str) -> String {
    let hash = Digest::of_bytes(
        Algorithm::Sha256,
        format!("ferry tag cache\n{registry}").as_bytes(),
    );
    format!("{}.json", hash.hex())
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    match super::unsafe_dir(&meta) {
        Some(why) => Err(std::io::Error::other(format!("{}: {why}", dir.display()))),
        None => Ok(()),
    }
}

/// An exclusive `flock` on `tag-cache/lock`, held while the file is read, merged and
/// replaced (milliseconds; released when the file is closed, or by the kernel).
fn lock(dir: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    let file = options.open(dir.join("lock"))?;
    #[cfg(unix)]
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

/// Removes temporaries a killed process left in `dir` an hour ago or more (only names this
/// module makes: `.<64 hex>.json.<pid>.<n>.tmp`).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| n.split_once(".json."))
            .is_some_and(|(hex, _)| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        let old = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= STALE_TEMPORARY);
        if ours && old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Every registry's entries in `dir`; a file that fails a check is left out with a warning.
fn read_all(dir: &Path) -> HashMap<String, HashMap<Key, (Digest, u64)>> {
    let mut out = HashMap::new();
    if let Ok(meta) = std::fs::symlink_metadata(dir)
        && let Some(why) = super::unsafe_dir(&meta)
    {
        tracing::warn!(dir = %dir.display(), "tag cache ignored: {why}");
        return out;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| is_cache_name(n)) else {
            continue;
        };
        let path = dir.join(name);
        match parse(&path) {
            Ok(Some((registry, _))) if file_name(&registry) != name => {
                tracing::warn!(file = %path.display(), "tag cache file is filed under a name not its registry's: ignored");
            }
            Ok(Some((registry, map))) => {
                out.insert(registry, map);
            }
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(file = %path.display(), "tag cache file ignored: {why}");
            }
        }
    }
    out
}

fn is_cache_name(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The entries of `registry`'s file at `path` (none when absent or failing a check).
fn read_file(path: &Path, registry: &str) -> Option<HashMap<Key, (Digest, u64)>> {
    match parse(path) {
        Ok(Some((r, map))) if r == registry => Some(map),
        Ok(_) => None,
        Err(why) => {
            tracing::warn!(file = %path.display(), "tag cache file ignored: {why}");
            None
        }
    }
}

type Parsed = (String, HashMap<Key, (Digest, u64)>);

fn parse(path: &Path) -> Result<Option<Parsed>, String> {
    let Some(bytes) = super::read_small(path, MAX_FILE_BYTES, "a tag cache file")? else {
        return Ok(None);
    };
    let file: CacheFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("it is not a tag cache: {e}"))?;
    if file.ferry_tag_cache != VERSION {
        return Err(format!(
            "it is version {}, this ferry reads version {VERSION}",
            file.ferry_tag_cache
        ));
    }
    let mut map = HashMap::new();
    for e in file.entries.into_iter().take(MAX_ENTRIES) {
        let digest =
            Digest::parse(&e.digest).map_err(|_| "an entry's digest does not parse".to_owned())?;
        map.insert((e.repository, e.tag), (digest, e.confirmed));
    }
    Ok(Some((file.registry, map)))
}

fn write_file(
    dir: &Path,
    path: &Path,
    registry: &str,
    entries: HashMap<Key, (Digest, u64)>,
) -> std::io::Result<()> {
    let mut entries: Vec<FileEntry> = entries
        .into_iter()
        .map(|((repository, tag), (digest, confirmed))| FileEntry {
            repository,
            tag,
            digest: digest.to_string(),
            confirmed,
        })
        .collect();
    // Bounded: the most recently confirmed are kept; sorted so the file is stable.
    entries.sort_by(|a, b| {
        (b.confirmed, &a.repository, &a.tag).cmp(&(a.confirmed, &b.repository, &b.tag))
    });
    entries.truncate(MAX_ENTRIES);
    let file = CacheFile {
        ferry_tag_cache: VERSION,
        registry: registry.to_owned(),
        entries,
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
    let tmp = dir.join(crate::fsio::temp_name_ending(name, "tmp"));
    crate::fsio::replace_blocking(path, &tmp, &bytes, 0o600)
}

#[cfg(test)]
#[path = "tag_cache_tests.rs"]
mod tests;
