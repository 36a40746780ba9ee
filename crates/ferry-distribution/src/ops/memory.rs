//! Blob uploads from bytes held in memory, for tests, benches and fixtures: one request through
//! `push_blob`, or chunk by chunk. Apart from `upload` and `push`, which the engine's streams use.

use bytes::Bytes;

use crate::client::RegistryClient;
use crate::digest::Digest;
use crate::error::Error;
use crate::operation::Operation;
use crate::retry::Call;

use super::push::{BlobPush, InMemory, UploadShape};

impl RegistryClient {
    /// Uploads a small blob held in memory (a config, a test fixture) in one request, through
    /// `push_blob` (so in docker's flow where the registry wants it). Large blobs stream.
    pub async fn push_blob_bytes(
        &self,
        repository: &str,
        digest: &Digest,
        bytes: Bytes,
    ) -> Result<(), Error> {
        let push = BlobPush {
            repository,
            digest,
            size: bytes.len() as u64,
            shape: UploadShape {
                chunk_size: u64::MAX,
                monolithic_limit: u64::MAX,
            },
            session: None,
        };
        self.push_blob(push, None, &InMemory(bytes))
            .await
            .map(|_| ())
    }

    /// Uploads a blob in chunks of `chunk` bytes from memory: POST, PATCH…, PUT. For tests of
    /// the chunked flow and registries that need it; the engine streams instead.
    pub async fn push_blob_chunked(
        &self,
        repository: &str,
        digest: &Digest,
        bytes: Bytes,
        chunk: usize,
    ) -> Result<(), Error> {
        self.run(Call::new(Operation::UploadChunk, Some(repository)), |_| {
            let bytes = bytes.clone();
            async move {
                let mut session = self.start_upload_once(repository).await?;
                let chunk = chunk.max(session.min_chunk.unwrap_or(0) as usize).max(1);
                let mut offset = 0usize;
                while offset < bytes.len() {
                    let end = (offset + chunk).min(bytes.len());
                    let part = bytes.slice(offset..end);
                    session = self
                        .patch_chunk_once(&session, offset as u64, part.len() as u64, part.into())
                        .await?;
                    offset = end;
                }
                self.finish_upload_once(&session, digest, None).await
            }
        })
        .await
    }
}
