//! What is under a tag a target holds: each child manifest of an index (a HEAD each), and with
//! `--deep` every blob the manifests reference (one HEAD per unique repository and blob; a
//! layout's blobs re-hashed from disk).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;

use ferry_distribution::error::Error;
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Digest, media};

use crate::engine::graph::{BlobRef, Refs, references};
use crate::plan::ImagePlan;
use crate::registries::Registries;
use crate::source::Source;
use crate::verify::report::{Finding, Missing};
use ferry_config::Target;
use ferry_config::platform::Platform;

/// Deeper than this, an index of indexes is not followed (as the engine refuses it).
const MAX_DEPTH: usize = 4;
/// More child manifests than this under one root are not asked about (the engine refuses such
/// a graph): a hostile index of a million children is one finding, not a million HEADs.
pub(crate) const MAX_CHILDREN: usize = 1024;

/// Checks what is under the tags targets hold, counting the checks and asking each
/// (target, blob) once.
pub(crate) struct ContentChecker<'a> {
    registries: &'a Registries,
    deep: bool,
    blobs: Mutex<HashSet<(String, Digest)>>,
    children: AtomicU64,
}

impl<'a> ContentChecker<'a> {
    pub(crate) fn new(registries: &'a Registries, deep: bool) -> Self {
        ContentChecker {
            registries,
            deep,
            blobs: Mutex::new(HashSet::new()),
            children: AtomicU64::new(0),
        }
    }

    /// Child manifests checked so far.
    pub(crate) fn children_checked(&self) -> u64 {
        self.children.load(Ordering::Relaxed)
    }

    /// Unique (target, blob) pairs checked so far.
    pub(crate) fn blobs_checked(&self) -> u64 {
        self.lock().len() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<(String, Digest)>> {
        self.blobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `image` (up to date on a target) has anything below its tag to check: an
    /// index's children, or with `--deep` any manifest's blobs.
    pub(crate) fn wants(&self, image: &ImagePlan) -> bool {
        self.deep || media::is_index(&image.media_type)
    }

    /// What is missing under `image` on `target`, which holds its root. The root's bytes come
    /// from the prepare phase where it fetched them (a platform filter computed the digest from
    /// them, with the function the engine uses), else from the target by digest (never from the
    /// source: a source HEAD already answered for it).
    pub(crate) async fn image(
        &self,
        target: &Target,
        image: &ImagePlan,
        platforms: &[Platform],
        keep_digest: bool,
    ) -> Vec<Finding> {
        let name = image.name();
        let side = match Source::open(target, self.registries, &Default::default()).await {
            Ok(s) => s,
            Err(e) => return vec![Finding::unreadable(format!("{target}"), &e)],
        };
        let root = match &image.root {
            Some(root) => {
                match ferry_config::platform::target_root(root.clone(), platforms, keep_digest) {
                    Ok(r) => r.filtered,
                    Err(e) => {
                        return vec![Finding::Unreadable {
                            what: format!("manifest of {name}"),
                            http_status: None,
                            auth: false,
                            error: e,
                        }];
                    }
                }
            }
            None => match side.get_manifest(&image.digest.to_string()).await {
                Ok(m) => m,
                Err(e) => return vec![Finding::unreadable(format!("manifest of {name}"), &e)],
            },
        };
        let mut findings = Vec::new();
        let mut budget = MAX_CHILDREN;
        self.walk(&side, target, root, &name, 0, &mut budget, &mut findings)
            .await;
        findings
    }

    /// What is missing under the manifest `digest` on `target`, which holds it (`ferry verify
    /// --bundle`): the root read from the target, then walked as [`Self::image`] walks.
    pub(crate) async fn under_digest(
        &self,
        target: &Target,
        digest: &Digest,
        name: &str,
    ) -> Vec<Finding> {
        let side = match Source::open(target, self.registries, &Default::default()).await {
            Ok(s) => s,
            Err(e) => return vec![Finding::unreadable(format!("{target}"), &e)],
        };
        let root = match side.get_manifest(&digest.to_string()).await {
            Ok(m) => m,
            Err(e) => return vec![Finding::unreadable(format!("manifest of {name}"), &e)],
        };
        let mut findings = Vec::new();
        let mut budget = MAX_CHILDREN;
        self.walk(&side, target, root, name, 0, &mut budget, &mut findings)
            .await;
        findings
    }

    #[allow(clippy::too_many_arguments)]
    fn walk<'b>(
        &'b self,
        side: &'b Source,
        target: &'b Target,
        manifest: Manifest,
        of: &'b str,
        depth: usize,
        budget: &'b mut usize,
        findings: &'b mut Vec<Finding>,
    ) -> futures::future::BoxFuture<'b, ()> {
        Box::pin(async move {
            let refs = match references(&manifest) {
                Ok(r) => r,
                Err(e) => {
                    findings.push(Finding::Unreadable {
                        what: format!("manifest {} of {of}", manifest.digest),
                        http_status: None,
                        auth: false,
                        error: e,
                    });
                    return;
                }
            };
            match refs {
                Refs::Children(children) => {
                    for child in children {
                        if *budget == 0 {
                            findings.push(Finding::Unreadable {
                                what: format!("children of {of}"),
                                http_status: None,
                                auth: false,
                                error: format!(
                                    "more than {MAX_CHILDREN} child manifests under one root \
                                     (a sync refuses it too); the rest are not checked"
                                ),
                            });
                            return;
                        }
                        *budget -= 1;
                        self.children.fetch_add(1, Ordering::Relaxed);
                        match self.child(side, &child).await {
                            Ok(Child::Fetched(m)) if depth < MAX_DEPTH => {
                                self.walk(side, target, m, of, depth + 1, budget, findings)
                                    .await;
                            }
                            Ok(Child::Fetched(_) | Child::Present) => {}
                            Ok(Child::Absent) => findings.push(missing(Missing::Child, &child, of)),
                            Err(e) => findings
                                .push(Finding::unreadable(format!("child {child} of {of}"), &e)),
                        }
                    }
                }
                Refs::Blobs(blobs) if self.deep => {
                    for blob in blobs {
                        if let Some(f) = self.blob(side, target, &blob, of).await {
                            findings.push(f);
                        }
                    }
                }
                Refs::Blobs(_) => {}
            }
        })
    }

    /// A child on the target: fetched with `--deep` (its blobs are checked next), else HEADed.
    async fn child(&self, side: &Source, child: &Digest) -> Result<Child, Error> {
        let reference = child.to_string();
        if self.deep {
            return Ok(match side.find_manifest(&reference).await? {
                Some(m) => Child::Fetched(m),
                None => Child::Absent,
            });
        }
        Ok(match side.head_manifest(&reference).await? {
            Some(_) => Child::Present,
            None => Child::Absent,
        })
    }

    /// A finding when the target lacks `blob` (or, in a layout, its bytes hash to another
    /// digest); each (target, blob) is asked once.
    async fn blob(
        &self,
        side: &Source,
        target: &Target,
        blob: &BlobRef,
        of: &str,
    ) -> Option<Finding> {
        if !self
            .lock()
            .insert((target.to_string(), blob.digest.clone()))
        {
            return None;
        }
        match (side, target) {
            (Source::Registry { client, repository }, _) => {
                match client.head_blob(repository, &blob.digest).await {
                    Ok(Some(_)) => None,
                    Ok(None) => Some(missing(Missing::Blob, &blob.digest, of)),
                    Err(e) => Some(Finding::unreadable(
                        format!("blob {} of {of}", blob.digest),
                        &e,
                    )),
                }
            }
            (Source::Store(reader), Target::OciLayout { path }) => {
                if !ferry_store::layout::writer::holds_blob(path, &blob.digest) {
                    return Some(missing(Missing::Blob, &blob.digest, of));
                }
                let mut stream = match reader.open_blob(&blob.digest, blob.size, 0).await {
                    Ok(s) => s,
                    Err(e) => {
                        return Some(Finding::unreadable(
                            format!("blob {} of {of}", blob.digest),
                            &e,
                        ));
                    }
                };
                let mut digester = blob.digest.digester();
                while let Some(chunk) = stream.next().await {
                    match chunk {
                        Ok(bytes) => digester.update(&bytes),
                        Err(e) => {
                            return Some(Finding::Unreadable {
                                what: format!("blob {} of {of}", blob.digest),
                                http_status: None,
                                auth: false,
                                error: e.to_string(),
                            });
                        }
                    }
                }
                let got = digester.finish();
                (got != blob.digest).then(|| Finding::Missing {
                    kind: Missing::Blob,
                    name: blob.digest.to_string(),
                    digest: blob.digest.to_string(),
                    of: Some(of.to_owned()),
                    detail: Some(format!("its bytes hash to {got}")),
                })
            }
            // A store side is opened only for a layout target (as a layout reader).
            (Source::Store(_), Target::Registry { .. }) => None,
            (Source::Store(_), Target::OciArchive { .. } | Target::DockerArchive { .. }) => {
                Some(Finding::unreadable(
                    format!("blob {} of {of}", blob.digest),
                    &target.archive_not_yet(ferry_distribution::Operation::BlobGet),
                ))
            }
        }
    }
}

/// A child manifest as the target answered for it.
enum Child {
    /// Fetched (`--deep`): its own references are checked next.
    Fetched(Manifest),
    /// HEAD answered.
    Present,
    /// Not there.
    Absent,
}

/// A missing child or blob of the image named `of`.
fn missing(kind: Missing, digest: &Digest, of: &str) -> Finding {
    Finding::Missing {
        kind,
        name: digest.to_string(),
        digest: digest.to_string(),
        of: Some(of.to_owned()),
        detail: None,
    }
}
