//! The archives one run opens, owned by whoever runs it (a command, a test), never the process:
//! the tars it reads (each indexed once) and the ones it writes (one writer per file, or a bundle).

use std::path::Path;

use ferry_config::Origin;
use ferry_distribution::Error;

use super::reader::{ArchiveReader, ArchiveSet};
use super::writer::{ArchiveWriter, Archives};

/// Every archive a run reads or writes. Cheap to clone; clones share what they opened.
#[derive(Debug, Clone, Default)]
pub struct Stores {
    readers: ArchiveSet,
    writers: Archives,
}

impl Stores {
    /// Stores whose every target is `bundle` (`ferry export`): the archives read stay shared
    /// with `self`'s clones.
    pub fn exporting_to(&self, bundle: ArchiveWriter) -> Self {
        Stores {
            readers: self.readers.clone(),
            writers: Archives::bundle(bundle),
        }
    }

    /// The archive `origin` names, indexed on this run's first open of it.
    pub async fn read(&self, origin: &Origin) -> Result<ArchiveReader, Error> {
        self.readers.open(origin).await
    }

    /// The export's bundle, when this run writes one.
    pub fn export(&self) -> Option<&ArchiveWriter> {
        self.writers.export()
    }

    /// The writer of the `oci-archive:` target at `path`, the same for every mapping.
    pub fn write_at(&self, path: &Path) -> ArchiveWriter {
        self.writers.at(path)
    }

    /// Every archive opened for writing, to finish as the run ends; each once.
    pub fn take_writers(&self) -> Vec<ArchiveWriter> {
        self.writers.take_all()
    }
}
