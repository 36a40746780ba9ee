//! When ferry first saw a digest, for `signatures: {min_age, tlog: skip}` (no Rekor time to age
//! by): one small file per digest in the state directory's `first-seen/`, written once.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use ferry_distribution::Digest;

/// The largest first-seen file read (Unix seconds as decimal text).
const MAX_BYTES: u64 = 32;

/// The first-seen records of a state directory.
#[derive(Debug, Clone)]
pub struct FirstSeen {
    dir: PathBuf,
    write: bool,
}

impl FirstSeen {
    /// The records under `state_dir/first-seen`; with `write` off (a dry run) a digest seen
    /// for the first time is not recorded.
    pub fn new(state_dir: &Path, write: bool) -> FirstSeen {
        FirstSeen {
            dir: state_dir.join("first-seen"),
            write,
        }
    }

    /// When `digest` was first seen: the recorded time, or `now`, recorded now (when writing).
    /// A record that is unreadable, not a number or in the future counts as absent and is
    /// replaced. A record that cannot be written is logged, and `now` returned: the cooldown
    /// then starts again at the next run, never earlier.
    pub async fn first_seen(&self, digest: &Digest, now: i64) -> i64 {
        let this = self.clone();
        let name = format!("{}-{}", digest.algorithm(), digest.hex());
        tokio::task::spawn_blocking(move || this.blocking(&name, now))
            .await
            .unwrap_or(now)
    }

    fn blocking(&self, name: &str, now: i64) -> i64 {
        let path = self.dir.join(name);
        if let Some(at) = read(&path).filter(|at| *at <= now) {
            return at;
        }
        if self.write
            && let Err(e) = self.record(&path, name, now)
        {
            tracing::warn!("first-seen record {}: {e}", path.display());
        }
        now
    }

    fn record(&self, path: &Path, name: &str, now: i64) -> std::io::Result<()> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&self.dir)?;
        let tmp = self.dir.join(crate::fsio::temp_name(name));
        crate::fsio::replace_blocking(path, &tmp, now.to_string().as_bytes(), 0o600)
    }
}

/// The record at `path`, opened without following a link and read bounded.
fn read(path: &Path) -> Option<i64> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    let file = options.open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_digest_keeps_the_time_it_was_first_seen_and_a_dry_run_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, b"x");
        let dry = FirstSeen::new(dir.path(), false);
        assert_eq!(dry.first_seen(&d, 100).await, 100);
        assert_eq!(
            dry.first_seen(&d, 200).await,
            200,
            "a dry run records nothing"
        );
        let seen = FirstSeen::new(dir.path(), true);
        assert_eq!(seen.first_seen(&d, 300).await, 300);
        assert_eq!(seen.first_seen(&d, 900).await, 300, "kept, not moved");
        assert_eq!(dry.first_seen(&d, 900).await, 300, "a dry run reads it");
        // A record from the future (a clock set back, a planted file) counts as absent.
        assert_eq!(seen.first_seen(&d, 250).await, 250);
    }
}
