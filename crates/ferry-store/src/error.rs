//! The store's one error: which file or directory, what was being done to it, and the I/O error,
//! so a full disk on a layout or archive target is that target's failure, not a registry's.

use std::path::PathBuf;
use std::sync::Arc;

/// A read or write of ferry's own files that failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("oci:{}: {io}", path.display())]
pub struct StoreError {
    /// The layout directory, archive or file.
    pub path: PathBuf,
    /// What was being done: `manifest`, `index.json`, `oci-layout`.
    pub what: &'static str,
    /// What went wrong, naming the file.
    pub io: Arc<std::io::Error>,
}

impl StoreError {
    /// A failed `what` on `path`.
    pub fn new(path: impl Into<PathBuf>, what: &'static str, io: std::io::Error) -> Self {
        StoreError {
            path: path.into(),
            what,
            io: Arc::new(io),
        }
    }
}
