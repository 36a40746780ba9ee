//! One state record: its JSON form, and every check a file must pass before its session is
//! trusted (file type, owner, mode, size, form, the key it is filed under, origin, age).

use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_distribution::Secret;
use ferry_distribution::ops::UploadKey;
use serde::{Deserialize, Serialize};
use url::Url;

/// The largest record read: a record is a few hundred bytes; anything larger is not one.
pub const MAX_RECORD_BYTES: u64 = 16 * 1024;

/// The record format's version.
const VERSION: u32 = 1;

/// One upload in flight, as stored. The Location is a [`Secret`] in memory: it can carry a
/// signed token, and `Debug` prints it redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The format version (1).
    pub version: u32,
    /// The target registry's host, as configured.
    pub host: String,
    /// The repository the blob goes to.
    pub repository: String,
    /// The blob's digest.
    pub digest: String,
    /// The blob's size in bytes.
    pub size: u64,
    /// The session's Location (absolute).
    #[serde(with = "secret_string")]
    pub location: Secret,
    /// Bytes the registry acknowledged.
    pub offset: u64,
    /// When it was written, in seconds since the Unix epoch.
    pub updated: u64,
}

mod secret_string {
    use ferry_distribution::Secret;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Secret, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(value.expose())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
        String::deserialize(d).map(Secret::new)
    }
}

impl Record {
    /// The record of `key` acknowledged to `offset` in the session at `location`.
    pub fn new(key: UploadKey<'_>, location: &Url, offset: u64, updated: u64) -> Record {
        Record {
            version: VERSION,
            host: key.host.to_owned(),
            repository: key.repository.to_owned(),
            digest: key.digest.to_string(),
            size: key.size,
            location: Secret::new(location.as_str()),
            offset,
            updated,
        }
    }

    /// Its JSON text.
    pub fn to_json(&self) -> std::io::Result<String> {
        serde_json::to_string(self).map_err(std::io::Error::other)
    }

    /// The Location as a URL (checked when the record was loaded).
    pub fn location(&self) -> Option<Url> {
        Url::parse(self.location.expose()).ok()
    }

    /// Why this record may not be trusted for `key` on the registry at `origin` at `now`;
    /// `None` when it may.
    fn distrust(
        &self,
        key: UploadKey<'_>,
        origin: &Url,
        lifetime: Duration,
        now: SystemTime,
    ) -> Option<String> {
        if self.version != VERSION {
            return Some(format!("unknown record version {}", self.version));
        }
        if self.host != key.host
            || self.repository != key.repository
            || self.digest != key.digest.to_string()
        {
            return Some(
                "it names another registry, repository or blob than it is filed under".into(),
            );
        }
        if self.size != key.size {
            return Some(format!(
                "it names a blob of {} bytes, not {}",
                self.size, key.size
            ));
        }
        if self.offset > self.size {
            return Some("its offset is beyond the blob's size".into());
        }
        let Ok(location) = Url::parse(self.location.expose()) else {
            return Some("its session Location is not an absolute URL".into());
        };
        if location.origin() != origin.origin() || !matches!(location.scheme(), "http" | "https") {
            return Some(
                "its session Location is on another host or scheme than the registry".into(),
            );
        }
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if self.updated > now.saturating_add(24 * 3600) {
            return Some("it was written in the future".into());
        }
        if now.saturating_sub(self.updated) >= lifetime.as_secs() {
            return Some("it has expired (older than the registry keeps sessions)".into());
        }
        None
    }
}

/// Loads the record at `path` for `key`: `Ok(None)` when there is none, `Err(why)` when a file
/// is there that may not be trusted (the caller warns and removes it).
pub fn load(
    path: &Path,
    key: UploadKey<'_>,
    origin: &Url,
    lifetime: Duration,
    now: SystemTime,
) -> Result<Option<Record>, String> {
    let Some(text) = read_small(path, MAX_RECORD_BYTES, "a record")? else {
        return Ok(None);
    };
    // The parser's error names a line and column, never the content.
    let record: Record = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "it is not a state record (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    match record.distrust(key, origin, lifetime, now) {
        Some(why) => Err(why),
        None => Ok(Some(record)),
    }
}

/// The bytes of the small state file at `path` (`Ok(None)` when there is none), read only after
/// every check a file ferry wrote itself must pass: opened without following a link (and
/// without blocking on a planted FIFO), a regular file of this user's that others cannot write,
/// at most `max` bytes (`what`, e.g. "a record", names it in the reason). `Err(why)` names what
/// failed, never the content.
pub(crate) fn read_small(path: &Path, max: u64, what: &str) -> Result<Option<Vec<u8>>, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // No link is followed, and a FIFO planted at the name does not block the open.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("it is a symbolic link".into());
        }
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read its metadata: {e}"))?;
    if let Some(why) = unsafe_file(&meta) {
        return Err(why);
    }
    if meta.len() > max {
        return Err(format!(
            "it is {} bytes, more than {what}'s {max}",
            meta.len()
        ));
    }
    let mut text = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!("it grew past {what}'s size while being read"));
    }
    Ok(Some(text))
}

/// Why a record file may not be trusted by its metadata: not a regular file, not this user's,
/// or writable by others.
pub fn unsafe_file(meta: &std::fs::Metadata) -> Option<String> {
    if !meta.file_type().is_file() {
        return Some("it is not a regular file".into());
    }
    owner_and_mode(meta)
}

/// Why a state directory may not be used: a symbolic link, not a directory, not this user's,
/// or writable by others.
pub fn unsafe_dir(meta: &std::fs::Metadata) -> Option<String> {
    if meta.file_type().is_symlink() {
        return Some("it is a symbolic link".into());
    }
    if !meta.is_dir() {
        return Some("it is not a directory".into());
    }
    owner_and_mode(meta)
}

#[cfg(unix)]
fn owner_and_mode(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Some(format!(
            "it is owned by uid {}, not by the user running ferry (uid {uid})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "it is group- or world-writable (mode {:04o})",
            meta.mode() & 0o7777
        ));
    }
    None
}

#[cfg(not(unix))]
fn owner_and_mode(_meta: &std::fs::Metadata) -> Option<String> {
    None
}
