//! The store's one error: which layout or archive, what was being done to it, and the I/O error,
//! so a full disk on a layout or archive target is that target's failure, not a registry's.

use std::path::PathBuf;
use std::sync::Arc;

/// A read or write of ferry's own files that failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {io}", self.place())]
pub struct StoreError {
    /// The layout directory or archive file (`-` for an archive on standard output).
    pub path: PathBuf,
    /// What was being done: `blob`, `manifest`, `index.json`, `oci-layout`, `archive`.
    pub what: &'static str,
    /// What went wrong, naming the file.
    pub io: Arc<std::io::Error>,
    /// Whether `path` is an archive (`oci-archive:`) rather than a layout (`oci:`).
    pub archive: bool,
}

impl StoreError {
    /// A failed `what` on the layout at `path`.
    pub fn new(path: impl Into<PathBuf>, what: &'static str, io: std::io::Error) -> Self {
        StoreError {
            path: path.into(),
            what,
            io: Arc::new(io),
            archive: false,
        }
    }

    /// A failed `what` on the archive at `path`.
    pub fn archive(path: impl Into<PathBuf>, what: &'static str, io: std::io::Error) -> Self {
        StoreError {
            archive: true,
            ..StoreError::new(path, what, io)
        }
    }

    /// The place as reports name it: `oci:<dir>` or `oci-archive:<path>`.
    pub fn place(&self) -> String {
        match self.archive {
            true => format!("oci-archive:{}", self.path.display()),
            false => format!("oci:{}", self.path.display()),
        }
    }
}
