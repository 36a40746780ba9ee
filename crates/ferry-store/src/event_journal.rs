//! The event journal of `ferry watch`: each accepted push notice as one small file in the state
//! directory's `events/`, written before the answer, read back at start, removed once synced.

// A file is named by what it asks for (host, repository, tag, push or delete; not the digest),
// so five deliveries of one event, or a burst of pushes of one tag, are one file. Files are
// written through `fsio` (0600 in a 0700 directory, temporary, fsync, rename, fsync of the
// directory) and read no-follow and bounded; a file that fails any check (not this user's,
// writable by others, too large, not a journal entry, filed under another name, from the
// future) is logged by name with the reason and removed, never trusted and never a panic.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_distribution::text::for_error;
use ferry_distribution::{Algorithm, Digest};
use serde::{Deserialize, Serialize};

use crate::resume::StateDirError;

/// The largest journal file read: an entry is a few hundred bytes.
pub const MAX_ENTRY_BYTES: u64 = 4 * 1024;
/// The longest host, repository and tag an entry may name (distribution's own limits are
/// lower: 255 for a repository path, 128 for a tag).
const MAX_NAME_CHARS: usize = 512;
/// The entry format's version.
const VERSION: u32 = 1;
/// Blocking tasks one [`EventJournal::write`] spreads its entries over.
pub const WRITERS: usize = 32;

/// One accepted notice, as journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalEntry {
    /// The format version (1).
    #[serde(default = "version")]
    pub version: u32,
    /// The registry's host as the event named it.
    pub host: Option<String>,
    /// The repository path.
    pub repository: String,
    /// The tag pushed or deleted.
    pub tag: Option<String>,
    /// The manifest digest the first accepted event named (a hint; the sync resolves the tag).
    pub digest: Option<String>,
    /// A delete rather than a push.
    pub delete: bool,
    /// When it was accepted, in seconds since the Unix epoch.
    pub received: u64,
}

fn version() -> u32 {
    VERSION
}

impl JournalEntry {
    /// An entry accepted at `received` (Unix seconds).
    pub fn new(
        host: Option<&str>,
        repository: &str,
        tag: Option<&str>,
        digest: Option<&str>,
        delete: bool,
        received: u64,
    ) -> JournalEntry {
        JournalEntry {
            version: VERSION,
            host: host.map(str::to_owned),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
            delete,
            received,
        }
    }

    /// The entry's name in the journal: the sha256 of what it asks for (host, repository, tag,
    /// push or delete), so no name an event sends reaches the file system.
    pub fn id(&self) -> String {
        let what = format!(
            "{}\n{}\n{}\n{}",
            self.host.as_deref().unwrap_or(""),
            self.repository,
            self.tag.as_deref().unwrap_or(""),
            if self.delete { "delete" } else { "push" }
        );
        Digest::of_bytes(Algorithm::Sha256, what.as_bytes())
            .hex()
            .to_owned()
    }

    /// Why this entry, read from the file named `id`, is not one ferry wrote; `None` when it is.
    fn distrust(&self, id: &str, now: u64) -> Option<String> {
        if self.version != VERSION {
            return Some(format!("unknown entry version {}", self.version));
        }
        let names = [
            self.host.as_deref(),
            Some(self.repository.as_str()),
            self.tag.as_deref(),
        ];
        if self.repository.is_empty()
            || names
                .into_iter()
                .flatten()
                .any(|n| n.chars().count() > MAX_NAME_CHARS || n.chars().any(char::is_control))
        {
            return Some("it names an empty, overlong or control-character name".into());
        }
        if let Some(d) = &self.digest
            && Digest::parse(d).is_err()
        {
            return Some("its digest is not sha256:<64 hex> or sha512:<128 hex>".into());
        }
        if self.id() != id {
            return Some("it is filed under another name than what it names".into());
        }
        if self.received > now.saturating_add(24 * 3600) {
            return Some("it was accepted in the future".into());
        }
        None
    }
}

/// The journal under a state directory.
#[derive(Debug, Clone)]
pub struct EventJournal {
    dir: PathBuf,
    limit: usize,
}

/// Now, in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl EventJournal {
    /// Opens `state_dir/events` (each created `0700` if missing), refusing either when it is a
    /// symbolic link, not a directory, not this user's, or group- or world-writable. At most
    /// `limit` entries are held (written or replayed).
    pub fn open(state_dir: &Path, limit: usize) -> Result<EventJournal, StateDirError> {
        let dir = state_dir.join("events");
        for d in [state_dir, dir.as_path()] {
            let io = |source| StateDirError::Io {
                path: d.to_path_buf(),
                source,
            };
            match std::fs::symlink_metadata(d) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let mut builder = std::fs::DirBuilder::new();
                    builder.recursive(true);
                    #[cfg(unix)]
                    {
                        use std::os::unix::fs::DirBuilderExt;
                        builder.mode(0o700);
                    }
                    builder.create(d).map_err(io)?;
                }
                Err(e) => return Err(io(e)),
                Ok(_) => {}
            }
            let meta = std::fs::symlink_metadata(d).map_err(io)?;
            if let Some(why) = crate::resume::unsafe_dir(&meta) {
                return Err(StateDirError::Unsafe {
                    path: d.to_path_buf(),
                    why,
                });
            }
        }
        Ok(EventJournal {
            dir,
            limit: limit.max(1),
        })
    }

    /// The directory entries are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The most entries held.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.event"))
    }

    /// Writes each entry (on the blocking pool), each durable when its result is `Ok`. The
    /// entries are spread over up to [`WRITERS`] blocking tasks: their fsyncs then share the
    /// file system's commits (ext4 and xfs group them), so a request naming a thousand tags is
    /// answered in a fraction of a second, not a thousand fsyncs in a row (10 s measured).
    pub async fn write(&self, entries: Vec<JournalEntry>) -> Vec<std::io::Result<()>> {
        let n = entries.len();
        let writers = n.clamp(1, WRITERS);
        let mut shares: Vec<Vec<(usize, JournalEntry)>> =
            (0..writers).map(|_| Vec::new()).collect();
        // Shared out by file, not by position: the entries of one file go to one task in the
        // order given, so the last of them is what the file holds (two tasks renaming over one
        // file would leave either).
        for (i, e) in entries.into_iter().enumerate() {
            use std::hash::{Hash as _, Hasher as _};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            e.id().hash(&mut h);
            shares[(h.finish() % writers as u64) as usize].push((i, e));
        }
        let tasks: Vec<_> = shares
            .into_iter()
            .map(|share| {
                let this = self.clone();
                tokio::task::spawn_blocking(move || {
                    share
                        .into_iter()
                        .map(|(i, e)| (i, this.write_blocking(&e)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out: Vec<std::io::Result<()>> = (0..n)
            .map(|_| Err(std::io::Error::other("the blocking task did not run")))
            .collect();
        for task in tasks {
            if let Ok(done) = task.await {
                for (i, result) in done {
                    out[i] = result;
                }
            }
        }
        out
    }

    fn write_blocking(&self, entry: &JournalEntry) -> std::io::Result<()> {
        let id = entry.id();
        let bytes = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        if bytes.len() as u64 > MAX_ENTRY_BYTES {
            return Err(std::io::Error::other(format!(
                "the entry is {} bytes, more than {MAX_ENTRY_BYTES}",
                bytes.len()
            )));
        }
        let name = format!("{id}.event");
        let tmp = self.dir.join(crate::fsio::temp_name_ending(&name, "tmp"));
        crate::fsio::replace_blocking(&self.path_of(&id), &tmp, &bytes, 0o600)
    }

    /// Removes the entries named `ids` (on the blocking pool); a missing one is no error.
    pub async fn remove(&self, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let this = self.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for id in ids {
                let path = this.path_of(&id);
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(file = %path.display(), "cannot remove event journal entry: {e}")
                    }
                }
            }
        })
        .await;
    }

    /// The entries a previous process left, oldest first, at most [`limit`](Self::limit) (the
    /// newer rest removed with a warning: the periodic run is their net). Temporaries a killed
    /// process left are removed; a file at an entry's name that fails a check is logged and
    /// removed; any other file is left alone.
    pub async fn replay(&self) -> Vec<JournalEntry> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.replay_blocking(unix_now()))
            .await
            .unwrap_or_default()
    }

    fn replay_blocking(&self, now: u64) -> Vec<JournalEntry> {
        let Ok(names) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in names.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_temp(&name) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let Some(id) = name.strip_suffix(".event").filter(|h| is_hex64(h)) else {
                continue;
            };
            match load(&path, id, now) {
                Ok(e) => found.push((id.to_owned(), e)),
                Err(why) => {
                    tracing::warn!(
                        file = %path.display(),
                        "event journal entry ignored and removed: {why}"
                    );
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        found.sort_by(|a, b| (a.1.received, &a.0).cmp(&(b.1.received, &b.0)));
        if found.len() > self.limit {
            tracing::warn!(
                dir = %self.dir.display(),
                "event journal holds {} entries, more than {}: the newest {} removed, left to the periodic run",
                found.len(),
                self.limit,
                found.len() - self.limit
            );
            for (id, _) in found.drain(self.limit..) {
                let _ = std::fs::remove_file(self.path_of(&id));
            }
        }
        found.into_iter().map(|(_, e)| e).collect()
    }
}

/// Whether `name` is a temporary of an entry (`.<64 hex>.event.<pid>.<n>.tmp`).
fn is_temp(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.split_once(".event."))
        .is_some_and(|(hex, _)| is_hex64(hex))
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The entry at `path`, filed as `id`, after every check; `Err(why)` names what failed, never
/// the content.
fn load(path: &Path, id: &str, now: u64) -> Result<JournalEntry, String> {
    let text = crate::resume::read_small(path, MAX_ENTRY_BYTES, "an entry")?
        .ok_or("it was removed while being read")?;
    let entry: JournalEntry = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "it is not an event journal entry (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    match entry.distrust(id, now) {
        Some(why) => Err(for_error(&why)),
        None => Ok(entry),
    }
}

#[cfg(test)]
mod tests;
