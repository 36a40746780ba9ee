//! Failures of a sync that are not a registry's answer (a layout that cannot be written or
//! locked, a broken plan invariant), beside the registry's `Error`; the report matches on the type.

use std::path::PathBuf;
use std::sync::Arc;

use ferry_distribution::error::Error;

use ferry_store::StoreError;
use ferry_store::layout::lock::LockError;

/// What failed one image on one target.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SyncError {
    /// A registry request failed (the registry, repository, operation and status are in it).
    #[error(transparent)]
    Registry(#[from] Error),
    /// A layout target's writing lock could not be taken: nothing was written to it.
    #[error("{source}")]
    LayoutLock {
        /// The layout directory.
        path: PathBuf,
        /// Why (held by another run, or the lock file could not be opened).
        source: Arc<LockError>,
    },
    /// A plan invariant broke: the engine asked the scheduler for a blob it never planned for
    /// this destination. Reported as a failure, never taken for a success.
    #[error("{destination}: blob {digest} {what}")]
    Unplanned {
        /// The destination, as reports name it.
        destination: String,
        /// The blob.
        digest: String,
        /// What was not planned.
        what: &'static str,
    },
    /// Not started: the run was stopped first.
    #[error("interrupted before it started")]
    Interrupted,
    /// A store target (a layout or an archive) could not be written: its own failure.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `signatures:` refused the image: no signature for its digest verified. Nothing of it was
    /// sent to the target.
    #[error("{refusal}")]
    Signature {
        /// The source, as reports name it.
        source_name: String,
        /// The image, its digest, and why.
        refusal: crate::plan::SignatureRefusal,
    },
}

impl SyncError {
    /// A lock refusal of the layout at `path`.
    pub fn lock(path: PathBuf, e: LockError) -> Self {
        SyncError::LayoutLock {
            path,
            source: Arc::new(e),
        }
    }

    /// Where it failed as reports name it: the registry, or `oci:<dir>`.
    pub fn place(&self) -> String {
        match self {
            SyncError::Registry(e) => e.registry.clone(),
            SyncError::Interrupted => String::new(),
            SyncError::Unplanned { destination, .. } => destination.clone(),
            SyncError::LayoutLock { path, .. } => format!("oci:{}", path.display()),
            SyncError::Store(e) => e.place(),
            SyncError::Signature { source_name, .. } => source_name.clone(),
        }
    }

    /// The repository, for a registry operation on one.
    pub(crate) fn repository(&self) -> Option<&str> {
        match self {
            SyncError::Registry(e) => e.repository.as_deref(),
            _ => None,
        }
    }

    /// The HTTP status, when a registry answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            SyncError::Registry(e) => e.status(),
            _ => None,
        }
    }

    /// Requests sent for the failed operation (0 for a failure that sent none).
    pub fn attempts(&self) -> u32 {
        match self {
            SyncError::Registry(e) => e.attempts,
            _ => 0,
        }
    }

    /// A registry refused the credentials (or found none): exit code 4 when every failure is one.
    pub fn is_auth(&self) -> bool {
        matches!(self, SyncError::Registry(e) if e.is_auth())
    }

    /// What was being done, as reports name it (`manifest PUT (tag)`, `layout lock`).
    pub fn operation(&self) -> String {
        match self {
            SyncError::Registry(e) => e.operation.name().to_owned(),
            SyncError::Interrupted => String::new(),
            SyncError::Unplanned { .. } => "plan".to_owned(),
            SyncError::LayoutLock { .. } => "layout lock".to_owned(),
            SyncError::Store(StoreError {
                what,
                archive: false,
                ..
            }) => format!("layout write ({what})"),
            SyncError::Store(StoreError { what, .. }) => format!("archive write ({what})"),
            SyncError::Signature { .. } => "signature verify".to_owned(),
        }
    }
}
