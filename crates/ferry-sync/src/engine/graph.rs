//! The manifest graph of one image: the root (an index or a manifest), every child manifest
//! below it in push order (children before parents), and the blobs they reference.

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Digest, Operation, media};
use oci_spec::image::{ImageIndex, ImageManifest};

use crate::source::Source;
use ferry_config::platform::Platform;

/// Deeper than this, an index of indexes is refused (a loop or an attack).
const MAX_DEPTH: usize = 4;
/// More manifests than this under one root is refused.
const MAX_MANIFESTS: usize = 1024;

/// A blob a manifest references.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// The digest the blob's bytes must hash to.
    pub digest: Digest,
    /// The size its descriptor declares: a source stream is cut off past it.
    pub size: u64,
}

/// An image's manifests and blobs.
#[derive(Debug, Clone)]
pub struct ImageGraph {
    /// Every manifest, children first, the root last.
    pub manifests: Vec<Manifest>,
    /// Every blob any of them references, each once.
    pub blobs: Vec<BlobRef>,
    /// With `platforms_keep_digest`, where the filter dropped children: the source's own index,
    /// pushed in place of the filtered root (the last of `manifests`) where the target takes it.
    pub original_root: Option<Manifest>,
}

impl ImageGraph {
    /// The root manifest (what the tag names), the last one fetched.
    pub(crate) fn root(&self) -> &Manifest {
        self.manifests
            .last()
            .expect("a graph always holds its root")
    }
}

/// Fetches the manifest named by `digest` (unless `fetched` already holds it) and everything
/// under it. With `platforms`, an index root keeps only those platforms' children (and becomes
/// a new index, see [`ferry_config::platform`]); with `keep_original` too, the source's index is kept
/// beside it as [`ImageGraph::original_root`].
pub(crate) async fn fetch_graph(
    source: &Source,
    digest: &Digest,
    platforms: &[Platform],
    keep_original: bool,
    fetched: Option<&Manifest>,
) -> Result<ImageGraph, Error> {
    let mut graph = ImageGraph {
        manifests: Vec::new(),
        blobs: Vec::new(),
        original_root: None,
    };
    let mut seen = std::collections::HashSet::new();
    seen.insert(digest.clone());
    let root = match fetched {
        Some(m) if m.digest == *digest => m.clone(),
        _ => source.get_manifest(&digest.to_string()).await?,
    };
    let root = ferry_config::platform::target_root(root, platforms, keep_original)
        .map_err(|message| invalid(source, message))?;
    graph.original_root = root.kept;
    let root = root.filtered;
    expand(source, root, 0, &mut graph, &mut seen).await?;
    // The run keeps every image's graph to its end: no spare capacity (issue 42's memory).
    graph.manifests.shrink_to_fit();
    graph.blobs.shrink_to_fit();
    Ok(graph)
}

fn invalid(source: &Source, message: String) -> Error {
    source.error(Operation::ManifestGet, ErrorKind::InvalidResponse(message))
}

fn walk<'a>(
    source: &'a Source,
    digest: &'a Digest,
    depth: usize,
    graph: &'a mut ImageGraph,
    seen: &'a mut std::collections::HashSet<Digest>,
) -> futures::future::BoxFuture<'a, Result<(), Error>> {
    Box::pin(async move {
        if depth > MAX_DEPTH || graph.manifests.len() >= MAX_MANIFESTS {
            return Err(invalid(
                source,
                format!("manifest graph under {digest} is too deep or too large"),
            ));
        }
        if !seen.insert(digest.clone()) {
            return Ok(());
        }
        let manifest = source.get_manifest(&digest.to_string()).await?;
        expand(source, manifest, depth, graph, seen).await
    })
}

/// Walks what `manifest` references, then records it (children before parents).
fn expand<'a>(
    source: &'a Source,
    manifest: Manifest,
    depth: usize,
    graph: &'a mut ImageGraph,
    seen: &'a mut std::collections::HashSet<Digest>,
) -> futures::future::BoxFuture<'a, Result<(), Error>> {
    Box::pin(async move {
        match references(&manifest) {
            Ok(Refs::Children(children)) => {
                for child in children {
                    walk(source, &child, depth + 1, graph, seen).await?;
                }
            }
            Ok(Refs::Blobs(blobs)) => {
                for b in blobs {
                    if !graph.blobs.contains(&b) {
                        graph.blobs.push(b);
                    }
                }
            }
            Err(message) => return Err(invalid(source, message)),
        }
        graph.manifests.push(manifest);
        Ok(())
    })
}

/// What a manifest references (the engine's walk, and `ferry verify`'s on a target).
pub(crate) enum Refs {
    /// An index's child manifests.
    Children(Vec<Digest>),
    /// An image manifest's config and layers.
    Blobs(Vec<BlobRef>),
}

fn parse_digest(s: &str) -> Result<Digest, String> {
    Digest::parse(s).map_err(|e| format!("bad digest in manifest: {e}"))
}

/// What a manifest points at: child manifests (an index) or blobs (an image manifest).
pub(crate) fn references(manifest: &Manifest) -> Result<Refs, String> {
    if media::is_index(&manifest.media_type) {
        let index: ImageIndex = serde_json::from_slice(&manifest.bytes)
            .map_err(|e| format!("index {} does not parse: {e}", manifest.digest))?;
        let children = index
            .manifests()
            .iter()
            .map(|d| parse_digest(d.digest().as_ref()))
            .collect::<Result<_, _>>()?;
        return Ok(Refs::Children(children));
    }
    let image: ImageManifest = serde_json::from_slice(&manifest.bytes)
        .map_err(|e| format!("manifest {} does not parse: {e}", manifest.digest))?;
    let mut blobs = vec![BlobRef {
        digest: parse_digest(image.config().digest().as_ref())?,
        size: image.config().size(),
    }];
    for layer in image.layers() {
        blobs.push(BlobRef {
            digest: parse_digest(layer.digest().as_ref())?,
            size: layer.size(),
        });
    }
    Ok(Refs::Blobs(blobs))
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
