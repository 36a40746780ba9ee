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
    /// Stores that spool a compressed archive, or one from standard input, under `spool`.
    pub fn spooling(spool: super::input::SpoolPlace) -> Self {
        Stores {
            readers: ArchiveSet::spooling(spool),
            writers: Archives::default(),
        }
    }

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

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use ferry_distribution::ops::Manifest;
    use ferry_distribution::{Algorithm, Digest};

    use super::*;

    /// An OCI archive at `path` whose one image (`v1`) is a manifest the tar leaves out.
    fn archive_without_its_manifest(path: &Path) -> Manifest {
        let bytes = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}"#;
        let digest = Digest::of_bytes(Algorithm::Sha256, bytes);
        let index = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","size":{},"annotations":{{"org.opencontainers.image.ref.name":"v1"}}}}]}}"#,
            bytes.len()
        );
        let mut tar = tar::Builder::new(std::fs::File::create(path).unwrap());
        for (name, body) in [
            ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
            ("index.json", index.into_bytes()),
        ] {
            let mut header = tar::Header::new_gnu();
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, name, body.as_slice()).unwrap();
        }
        tar.finish().unwrap();
        Manifest {
            bytes: Bytes::from_static(bytes),
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            digest,
        }
    }

    #[tokio::test]
    async fn one_runs_stores_index_an_archive_once_and_another_runs_do_not_share_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bundle.tar");
        let manifest = archive_without_its_manifest(&path);
        let origin = Origin::OciArchive {
            path: path.clone(),
            reference: None,
        };
        let run = Stores::default();
        let first = run.read(&origin).await.unwrap();
        assert!(first.find_manifest("v1").await.unwrap().is_none());
        // What one reader learns (a manifest the base check read from the target) every later
        // reader of the same run sees: the archive was indexed once, for the run.
        assert!(first.supply(manifest.clone()));
        let again = run.clone().read(&origin).await.unwrap();
        assert_eq!(again.find_manifest("v1").await.unwrap(), Some(manifest));
        // Another run's stores (and a reader outside any) index the archive afresh.
        let other = Stores::default().read(&origin).await.unwrap();
        assert!(other.find_manifest("v1").await.unwrap().is_none());
        let alone = ArchiveReader::open(&origin).await.unwrap();
        assert!(alone.find_manifest("v1").await.unwrap().is_none());
    }
}
