//! Manifests: HEAD (digest, type, size), GET (bytes verified against the digest that named them,
//! refused above the size limit), PUT by tag or digest, and DELETE.

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE};

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::digest::{Algorithm, Digest};
use crate::error::{Error, ErrorKind};
use crate::media::MANIFEST_ACCEPT;
use crate::operation::Operation;
use crate::retry::{Call, Failure};

use super::{content_digest, expect_status, invalid};
use crate::reference::ManifestReference;

/// What a HEAD learns about a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestInfo {
    /// The digest the registry names it by (`Docker-Content-Digest`).
    pub digest: Digest,
    /// Its `Content-Type`.
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A manifest's exact bytes, with the digest they hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The bytes exactly as served: re-serialising would change the digest.
    pub bytes: Bytes,
    /// Its media type, sent again as `Content-Type` when pushed.
    pub media_type: String,
    /// The digest the bytes were checked to hash to.
    pub digest: Digest,
}

fn media_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned())
        .unwrap_or_default()
}

impl RegistryClient {
    /// HEADs a manifest by tag or digest; `None` when it does not exist. A registry that omits
    /// `Docker-Content-Digest` is answered by a GET and the digest computed from the bytes.
    pub async fn head_manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Option<ManifestInfo>, Error> {
        let scopes = Scopes::pull(repository);
        let (_, operation, url) =
            self.manifest_for(|_| Operation::ManifestHead, repository, reference)?;
        let call = Call::new(operation, Some(repository));
        let head = self
            .run(call, |_| async {
                let response = self
                    .send(&scopes, |http| {
                        http.head(url.clone()).header(ACCEPT, MANIFEST_ACCEPT)
                    })
                    .await?;
                if response.status().as_u16() == 404 {
                    return Ok(None);
                }
                let response = expect_status(response, &[200]).await?;
                let size = response
                    .headers()
                    .get(reqwest::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                Ok(Some((
                    content_digest(&response),
                    media_type(&response),
                    size,
                )))
            })
            .await?;
        match head {
            None => Ok(None),
            Some((Some(digest), media_type, size)) => Ok(Some(ManifestInfo {
                digest,
                media_type,
                size,
            })),
            Some((None, _, _)) => {
                let m = self.get_manifest(repository, reference).await?;
                Ok(Some(ManifestInfo {
                    size: m.bytes.len() as u64,
                    digest: m.digest,
                    media_type: m.media_type,
                }))
            }
        }
    }

    /// GETs a manifest's bytes. Fetched by digest, the bytes must hash to it; fetched by tag, the
    /// digest is computed from the bytes and must agree with the registry's header.
    pub async fn get_manifest(&self, repository: &str, reference: &str) -> Result<Manifest, Error> {
        let scopes = Scopes::pull(repository);
        let (parsed, operation, url) =
            self.manifest_for(|_| Operation::ManifestGet, repository, reference)?;
        let limit = self.options().manifest_limit;
        let wanted = parsed.digest().cloned();
        let call = Call::new(operation, Some(repository));
        self.run(call, |_| async {
            let response = self
                .send(&scopes, |http| {
                    http.get(url.clone()).header(ACCEPT, MANIFEST_ACCEPT)
                })
                .await?;
            let response = expect_status(response, &[200]).await?;
            let media_type = media_type(&response);
            let header = content_digest(&response);
            let bytes = crate::auth::token::read_limited(response, limit)
                .await
                .map_err(|f| match f {
                    Failure::Final(ErrorKind::TooLarge { limit, .. }) => {
                        Failure::Final(ErrorKind::TooLarge {
                            what: "manifest",
                            limit,
                        })
                    }
                    other => other,
                })?;
            let algorithm = wanted
                .as_ref()
                .or(header.as_ref())
                .map_or(Algorithm::Sha256, Digest::algorithm);
            let digest = Digest::of_bytes(algorithm, &bytes);
            for expected in [wanted.as_ref(), header.as_ref()].into_iter().flatten() {
                if expected.algorithm() == digest.algorithm() && *expected != digest {
                    return Err(Failure::Final(ErrorKind::DigestMismatch {
                        expected: expected.to_string(),
                        actual: digest.to_string(),
                    }));
                }
            }
            let media_type = if media_type.is_empty() {
                sniff_media_type(&bytes).ok_or_else(|| invalid("manifest has no media type"))?
            } else {
                media_type
            };
            Ok(Manifest {
                bytes: Bytes::from(bytes),
                media_type,
                digest,
            })
        })
        .await
    }

    /// PUTs a manifest under a tag or its digest and returns the digest the registry stored.
    ///
    /// Two answers are learned rather than failed (auth task, issue 31; docs/registries.md):
    /// `MANIFEST_BLOB_UNKNOWN` right after ferry committed every blob the manifest names is the
    /// registry catching up (sent again after a short wait, `retry::classify::commit_lag`), and
    /// a tag the registry will not overwrite (immutable) is HEADed: the same digest there is
    /// success, another is a final error naming both. Once tags are known immutable, a tag is
    /// HEADed before its PUT, and never pushed over.
    pub async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        manifest: &Manifest,
    ) -> Result<Digest, Error> {
        let scopes = Scopes::push(repository);
        let by = |r: &ManifestReference| match r {
            ManifestReference::Digest(_) => Operation::ManifestPutByDigest,
            ManifestReference::Tag(_) => Operation::ManifestPutByTag,
        };
        let (parsed, operation, url) = self.manifest_for(by, repository, reference)?;
        let tag = match &parsed {
            ManifestReference::Tag(_) => Some(reference),
            ManifestReference::Digest(_) => None,
        };
        let learned = &self.capabilities().auth;
        let names = crate::auth::learned::referenced_digests(&manifest.bytes);
        let call = Call::new(operation, Some(repository));
        let (scopes, url, names) = (&scopes, &url, &names);
        let digest = self
            .run(call, |attempt| async move {
                if let Some(tag) = tag
                    && learned.tags_immutable()
                    && let Some(held) = self.tag_digest(scopes, url).await?
                {
                    return self.immutable(repository, tag, &held, manifest);
                }
                // A retry follows a failed attempt whose PUT may have landed (a reply lost after
                // the registry stored it): a HEAD of the same reference that names our digest
                // settles it with a read, where a second PUT could lose its reply again.
                if attempt.number > 1 && self.manifest_landed(scopes, url, manifest).await {
                    return Ok(manifest.digest.clone());
                }
                let response = self
                    .send(scopes, |http| {
                        http.put(url.clone())
                            .header(CONTENT_TYPE, manifest.media_type.as_str())
                            .body(manifest.bytes.clone())
                    })
                    .await?;
                if !matches!(response.status().as_u16(), 200..=202) {
                    let failure = Failure::from_response(response).await;
                    if let Some(tag) = tag
                        && refuses_overwrite(&failure)
                        && let Some(held) = self.tag_digest(scopes, url).await?
                    {
                        if learned.learn_tags_immutable() {
                            tracing::info!(
                                registry = self.host(),
                                repository,
                                tag,
                                "the registry refuses to overwrite tags (immutable): tags are \
                                 HEADed before a push from now on"
                            );
                        }
                        return self.immutable(repository, tag, &held, manifest);
                    }
                    let lag = match &failure {
                        Failure::Status { message, .. } => {
                            learned.may_lag(repository, names, message.as_deref())
                        }
                        _ => false,
                    };
                    let failure = crate::retry::classify::commit_lag(failure, lag);
                    if matches!(failure, Failure::Lagging { .. }) && learned.learn_commit_lag() {
                        tracing::info!(
                            registry = self.host(),
                            repository,
                            "a manifest PUT was refused for blobs ferry had just committed: \
                             waiting for the registry to catch up"
                        );
                    }
                    return Err(failure);
                }
                self.count(|s| s.written(manifest.bytes.len() as u64));
                match content_digest(&response) {
                    Some(d)
                        if d.algorithm() == manifest.digest.algorithm() && d != manifest.digest =>
                    {
                        Err(Failure::Final(ErrorKind::DigestMismatch {
                            expected: manifest.digest.to_string(),
                            actual: d.to_string(),
                        }))
                    }
                    _ => Ok(manifest.digest.clone()),
                }
            })
            .await?;
        learned.committed(repository, &digest.to_string());
        Ok(digest)
    }

    /// The digest a tag names now (`None` when the tag is not there), by HEAD.
    async fn tag_digest(
        &self,
        scopes: &Scopes,
        url: &reqwest::Url,
    ) -> Result<Option<Digest>, Failure> {
        let response = self
            .send(scopes, |http| {
                http.head(url.clone()).header(ACCEPT, MANIFEST_ACCEPT)
            })
            .await?;
        if response.status().as_u16() == 404 {
            return Ok(None);
        }
        let response = expect_status(response, &[200]).await?;
        Ok(content_digest(&response))
    }

    /// An immutable tag holding `held`: success when that is the manifest's own digest, else a
    /// final error naming the tag and both digests (never retried: the registry will not move it).
    fn immutable(
        &self,
        repository: &str,
        tag: &str,
        held: &Digest,
        manifest: &Manifest,
    ) -> Result<Digest, Failure> {
        if *held == manifest.digest {
            tracing::debug!(registry = self.host(), repository, tag, digest = %held, "immutable tag already holds this digest");
            return Ok(manifest.digest.clone());
        }
        Err(Failure::Final(ErrorKind::Refused(format!(
            "tag {tag} is immutable on this registry: it holds {held}, and the source's {} \
             cannot replace it",
            manifest.digest
        ))))
    }

    /// Whether `manifest` is at `url` already: a HEAD answered 2xx naming its digest. Any other
    /// answer, or none, says no (the PUT is then sent again, as it is safe to).
    async fn manifest_landed(
        &self,
        scopes: &Scopes,
        url: &reqwest::Url,
        manifest: &Manifest,
    ) -> bool {
        match self
            .send(scopes, |http| {
                http.head(url.clone())
                    .header(ACCEPT, manifest.media_type.as_str())
            })
            .await
        {
            Ok(response) => {
                response.status().is_success()
                    && content_digest(&response).is_some_and(|d| d == manifest.digest)
            }
            Err(_) => false,
        }
    }

    /// DELETEs a manifest by digest, or a tag (where the registry supports tag deletion). A
    /// manifest already gone counts as deleted.
    pub async fn delete_manifest(&self, repository: &str, reference: &str) -> Result<(), Error> {
        let scopes = Scopes::push(repository);
        let by = |r: &ManifestReference| match r {
            ManifestReference::Digest(_) => Operation::ManifestDeleteByDigest,
            ManifestReference::Tag(_) => Operation::TagDelete,
        };
        let (_, operation, url) = self.manifest_for(by, repository, reference)?;
        self.run(Call::new(operation, Some(repository)), |_| async {
            let response = self.send(&scopes, |http| http.delete(url.clone())).await?;
            expect_status(response, &[200, 202, 204, 404]).await?;
            Ok(())
        })
        .await
    }
}

/// A manifest PUT refused because the tag may not be overwritten: `TAG_INVALID`, or any
/// refusal naming immutability (Amazon ECR: 400 TAG_INVALID "… cannot be overwritten because the
/// repository is immutable"). Settled by a HEAD of the tag, never by this alone.
fn refuses_overwrite(failure: &Failure) -> bool {
    match failure {
        Failure::Status {
            status: 400 | 403 | 409,
            code,
            message,
            ..
        } => {
            code.as_deref() == Some("TAG_INVALID")
                || message
                    .as_deref()
                    .is_some_and(|m| m.to_ascii_lowercase().contains("immutable"))
        }
        _ => false,
    }
}

/// The `mediaType` field of a manifest that was served without a `Content-Type`.
fn sniff_media_type(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "mediaType")]
        media_type: Option<String>,
    }
    serde_json::from_slice::<Probe>(bytes).ok()?.media_type
}
