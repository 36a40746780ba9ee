//! `ferry doctor --write`: a scratch push under a unique tag through the sync's own operations,
//! each upload flow alone, a large PATCH, a mount, manifest lag, tag overwrite, deletes, cleanup.

use bytes::Bytes;
use ferry_distribution::capabilities::{Feature, Support};
use ferry_distribution::ops::doctor::{ProbeFlow, scratch_blob, scratch_tag};
use ferry_distribution::ops::push::InMemory;
use ferry_distribution::ops::{BlobPush, Manifest, MountOutcome, UploadShape};
use ferry_distribution::{Digest, Error, ErrorKind, RegistryClient};

use super::{Cleanup, Findings, Outcome};
use crate::progress::Progress;

const MIB: usize = 1024 * 1024;
/// The layer pushed through the sync's chunked path: above the probe's monolithic limit.
const LAYER: usize = MIB + MIB / 2;
/// The PATCH sizes tried, largest first, until one is accepted (GHCR refuses over 4 MiB).
const PATCH_SIZES: [usize; 3] = [5 * MIB, 4 * MIB, MIB];

/// What was pushed, for the cleanup.
#[derive(Default)]
struct Pushed {
    blobs: Vec<(String, Digest)>,
    manifests: Vec<Digest>,
    tag: Option<String>,
}

/// Runs the write probes against `repo` and cleans up; returns what was deleted and left.
pub async fn probe(
    client: &RegistryClient,
    repo: &str,
    shape: UploadShape,
    progress: &Progress,
    found: &mut Findings,
) -> Cleanup {
    let tag = scratch_tag();
    let say = |what: &str| progress.eprint(&format!("doctor: {what}"));
    say(&format!("scratch push to {}/{repo}:{tag}", client.host()));
    let mut pushed = Pushed::default();
    let image = push_image(client, repo, shape, &mut pushed, found, &say).await;
    if found.auth_failed {
        say("the credentials may not push here: no further write probes");
        return cleanup(client, repo, pushed, found).await;
    }
    say("trying each upload flow alone");
    flows(client, repo, &mut pushed, found).await;
    say("trying large PATCHes");
    patch_limit(client, repo, &mut pushed, found).await;
    if let Some((_, layer)) = &image {
        say("trying a cross-repository mount");
        mount(client, repo, layer, &mut pushed, found).await;
    }
    if let Some((config, layer)) = &image {
        say("pushing the scratch manifest");
        manifests(client, repo, &tag, config, layer, &mut pushed, found).await;
    }
    say("cleaning up");
    cleanup(client, repo, pushed, found).await
}

/// The config (one request) and a layer above the monolithic limit (chunks), both through
/// `push_blob`, as the sync sends them: the upload flow learned here is the sync's.
async fn push_image(
    client: &RegistryClient,
    repo: &str,
    shape: UploadShape,
    pushed: &mut Pushed,
    found: &mut Findings,
    say: &dyn Fn(&str),
) -> Option<((Bytes, Digest), (Bytes, Digest))> {
    let config = scratch_config();
    match client
        .push_blob_bytes(repo, &config.1, config.0.clone())
        .await
    {
        Ok(()) => {
            pushed.blobs.push((repo.to_owned(), config.1.clone()));
            let flow = client.capabilities().upload_flow();
            found.add(
                "upload (the sync's flow, small blob)",
                Outcome::Ok,
                format!("{} bytes went up; flow now {flow:?}", config.0.len()).to_lowercase(),
            );
        }
        Err(e) if e.is_not_found() => {
            found.add(
                "upload (the sync's flow, small blob)",
                Outcome::Failed,
                format!(
                    "{repo} does not exist and a push does not create it (ECR: create it first, \
                     or set `create_repositories` for the registry): {e}"
                ),
            );
            return None;
        }
        Err(e) => {
            found.add_error("upload (the sync's flow, small blob)", Outcome::Failed, &e);
            return None;
        }
    }
    say("pushing a layer in chunks");
    let layer = scratch_blob(LAYER);
    let chunked = UploadShape {
        chunk_size: (MIB as u64).min(shape.chunk_size),
        monolithic_limit: (MIB as u64).min(shape.monolithic_limit),
    };
    let push = BlobPush {
        repository: repo,
        digest: &layer.1,
        size: layer.0.len() as u64,
        shape: chunked,
        session: None,
    };
    match client
        .push_blob(push, None, &InMemory(layer.0.clone()))
        .await
    {
        Ok(flow) => {
            pushed.blobs.push((repo.to_owned(), layer.1.clone()));
            let refused = client.capabilities().support(Feature::ChunkedPatch) == Support::Refused;
            found.add(
                "upload (the sync's flow, chunked)",
                if refused {
                    Outcome::Refused
                } else {
                    Outcome::Ok
                },
                format!(
                    "{} bytes in {} KiB chunks went up as {flow:?}{}",
                    layer.0.len(),
                    chunked.chunk_size / 1024,
                    if refused {
                        " (chunked PATCH refused: one PATCH instead)"
                    } else {
                        ""
                    }
                ),
            );
        }
        Err(e) => {
            found.add_error("upload (the sync's flow, chunked)", Outcome::Failed, &e);
            return None;
        }
    }
    Some((config, layer))
}

/// Each flow on its own fresh blob, learning nothing: which flows the registry takes.
async fn flows(client: &RegistryClient, repo: &str, pushed: &mut Pushed, found: &mut Findings) {
    let cases: [(&'static str, ProbeFlow); 3] = [
        (
            "flow: monolithic (POST, PUT with the bytes)",
            ProbeFlow::Monolithic,
        ),
        ("flow: docker (POST, PATCH, empty PUT)", ProbeFlow::Docker),
        (
            "flow: chunked (POST, PATCH with Content-Range..., empty PUT)",
            ProbeFlow::Chunked { chunk: 256 * 1024 },
        ),
    ];
    for (probe, flow) in cases {
        let (bytes, digest) = scratch_blob(512 * 1024);
        match client.probe_flow(repo, flow, &digest, &bytes).await {
            Ok(()) => {
                pushed.blobs.push((repo.to_owned(), digest));
                found.add(probe, Outcome::Ok, "accepted");
            }
            Err(e) => found.add_error(probe, Outcome::Refused, &e),
        }
    }
}

/// One PATCH of each size in turn until one is accepted.
async fn patch_limit(
    client: &RegistryClient,
    repo: &str,
    pushed: &mut Pushed,
    found: &mut Findings,
) {
    let mut refused = Vec::new();
    for size in PATCH_SIZES {
        let (bytes, digest) = scratch_blob(size);
        let flow = ProbeFlow::Chunked { chunk: size as u64 };
        match client.probe_flow(repo, flow, &digest, &bytes).await {
            Ok(()) => {
                pushed.blobs.push((repo.to_owned(), digest));
                let (outcome, detail) = match refused.is_empty() {
                    true => (
                        Outcome::Ok,
                        format!("a PATCH of {} MiB accepted", size / MIB),
                    ),
                    false => (
                        Outcome::Refused,
                        format!(
                            "refused {}; a PATCH of {} MiB accepted",
                            refused.join("; "),
                            size / MIB
                        ),
                    ),
                };
                found.add("PATCH size", outcome, detail);
                return;
            }
            Err(e) => refused.push(format!("{} MiB ({})", size / MIB, short(&e))),
        }
    }
    found.add(
        "PATCH size",
        Outcome::Refused,
        format!("every size refused: {}", refused.join("; ")),
    );
}

/// `mount_blob` (the sync's) into `REPOSITORY-doctor`, then a HEAD to see it completed.
async fn mount(
    client: &RegistryClient,
    repo: &str,
    layer: &(Bytes, Digest),
    pushed: &mut Pushed,
    found: &mut Findings,
) {
    let target = format!("{repo}-doctor");
    let probe = "cross-repository mount";
    match client.mount_blob(&target, &layer.1, repo).await {
        Ok(MountOutcome::Mounted) => {
            pushed.blobs.push((target.clone(), layer.1.clone()));
            match client.head_blob(&target, &layer.1).await {
                Ok(Some(_)) => found.add(probe, Outcome::Ok, format!("mounted into {target}")),
                _ => found.add(
                    probe,
                    Outcome::Refused,
                    format!("answered 201 but {target} does not hold the blob (never completes)"),
                ),
            }
        }
        Ok(MountOutcome::Session(session)) => {
            // As the engine learns it: a mount of a blob the source repository holds that opens
            // an upload session is ignored.
            if client.capabilities().support(Feature::Mount) == Support::Unknown {
                client
                    .capabilities()
                    .learn(Feature::Mount, Support::Ignored);
            }
            let _ = client.cancel_upload_once(&session).await;
            let how = match client.capabilities().support(Feature::Mount) {
                Support::Refused => "refused",
                _ => "ignored (202: an upload session instead, the mount never completes)",
            };
            found.add(
                probe,
                Outcome::Refused,
                format!("{how}; ferry uploads the blob instead"),
            );
        }
        Err(e) => found.add_error(probe, Outcome::Failed, &e),
    }
}

/// The manifest right after its blobs (lag), the same again, a different one under the same
/// tag (immutable tags), then deletes by tag and by digest.
async fn manifests(
    client: &RegistryClient,
    repo: &str,
    tag: &str,
    config: &(Bytes, Digest),
    layer: &(Bytes, Digest),
    pushed: &mut Pushed,
    found: &mut Findings,
) {
    // A config pushed just now: the lag is about blobs the manifest names that were committed
    // a moment before (the probes above took longer than a lag lasts).
    let fresh = scratch_config();
    let config = match client
        .push_blob_bytes(repo, &fresh.1, fresh.0.clone())
        .await
    {
        Ok(()) => {
            pushed.blobs.push((repo.to_owned(), fresh.1.clone()));
            &fresh
        }
        Err(_) => config,
    };
    let first = scratch_manifest(config, layer, "1");
    let second = scratch_manifest(config, layer, "2");
    let lag = "manifest right after its blobs";
    match client.put_manifest_once(repo, tag, &first).await {
        Ok(()) => found.add(lag, Outcome::Ok, "accepted at once (no commit lag)"),
        Err(e) => {
            let lagged = matches!(code(&e), Some("MANIFEST_BLOB_UNKNOWN" | "BLOB_UNKNOWN"));
            match client.put_manifest(repo, tag, &first).await {
                Ok(_) if lagged => found.add(
                    lag,
                    Outcome::Refused,
                    format!(
                        "commit lag: {} at once, accepted when sent again",
                        short(&e)
                    ),
                ),
                Ok(_) => found.add(
                    lag,
                    Outcome::Failed,
                    format!("{} at once, accepted when sent again", short(&e)),
                ),
                Err(e) => {
                    found.add_error(lag, Outcome::Failed, &e);
                    return;
                }
            }
        }
    }
    pushed.manifests.push(first.digest.clone());
    pushed.tag = Some(tag.to_owned());
    let overwrite = "tag overwrite";
    let same = client.put_manifest_once(repo, tag, &first).await;
    match client.put_manifest_once(repo, tag, &second).await {
        Ok(()) => {
            pushed.manifests.push(second.digest.clone());
            let detail = match same {
                Ok(()) => "mutable: the same digest and another both accepted".to_owned(),
                Err(e) => format!(
                    "the same digest again refused ({}), another accepted",
                    short(&e)
                ),
            };
            found.add(overwrite, Outcome::Ok, detail);
        }
        Err(e) => found.add(
            overwrite,
            Outcome::Refused,
            format!(
                "immutable: another digest refused ({}); the same digest again {}",
                short(&e),
                if same.is_ok() {
                    "accepted"
                } else {
                    "refused too"
                }
            ),
        ),
    }
}

/// Deletes the tag (learning tag deletion as prune does), then each manifest by digest, then
/// each blob; says what stayed.
async fn cleanup(
    client: &RegistryClient,
    repo: &str,
    pushed: Pushed,
    found: &mut Findings,
) -> Cleanup {
    let mut out = Cleanup::default();
    if let Some(tag) = &pushed.tag {
        match client.delete_manifest(repo, tag).await {
            Ok(()) => {
                client
                    .capabilities()
                    .learn(Feature::TagDelete, Support::Works);
                found.add("delete by tag", Outcome::Ok, format!("{tag} deleted"));
                out.deleted.push(format!("tag {tag}"));
            }
            Err(e) => {
                if cannot_delete_tags(&e) {
                    client
                        .capabilities()
                        .learn(Feature::TagDelete, Support::Refused);
                }
                found.add_error("delete by tag", Outcome::Refused, &e);
            }
        }
    }
    let mut by_digest = Outcome::Ok;
    let mut detail = Vec::new();
    for digest in &pushed.manifests {
        match client.delete_manifest(repo, &digest.to_string()).await {
            Ok(()) => out.deleted.push(format!("manifest {digest}")),
            Err(e) => {
                by_digest = Outcome::Refused;
                detail.push(short(&e));
                out.left
                    .push(format!("manifest {repo}@{digest}: {}", short(&e)));
            }
        }
    }
    if !pushed.manifests.is_empty() {
        let text = match detail.is_empty() {
            true => format!("{} manifests deleted", pushed.manifests.len()),
            false => detail.join("; "),
        };
        found.add("delete by digest", by_digest, text);
    }
    let mut repositories = Vec::new();
    for (repository, digest) in &pushed.blobs {
        match client.delete_blob_once(repository, digest).await {
            Ok(()) => out.deleted.push(format!("blob {repository}@{digest}")),
            Err(e) => out
                .left
                .push(format!("blob {repository}@{digest}: {}", short(&e))),
        }
        if repository != repo && !repositories.contains(repository) {
            repositories.push(repository.clone());
        }
    }
    out.repositories = repositories;
    out
}

/// A registry that cannot delete by tag, as prune judges it.
fn cannot_delete_tags(e: &Error) -> bool {
    match &e.kind {
        ErrorKind::Status { status: 405, .. } => true,
        ErrorKind::Status {
            status: 400,
            code: Some(code),
            ..
        } => code == "DIGEST_INVALID" || code == "UNSUPPORTED",
        _ => false,
    }
}

fn code(e: &Error) -> Option<&str> {
    match &e.kind {
        ErrorKind::Status { code, .. } => code.as_deref(),
        _ => None,
    }
}

/// `HTTP 416 BLOB_UPLOAD_INVALID` or the error's text, for a one-line detail.
fn short(e: &Error) -> String {
    match &e.kind {
        ErrorKind::Status { status, code, .. } => match code {
            Some(c) => format!("HTTP {status} {c}"),
            None => format!("HTTP {status}"),
        },
        other => other.to_string(),
    }
}

fn scratch_config() -> (Bytes, Digest) {
    let (nonce, _) = scratch_blob(8);
    let text = format!(
        "{{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{{\"type\":\"layers\",\"diff_ids\":[]}},\
         \"config\":{{\"Labels\":{{\"ferry.doctor\":\"{}\"}}}}}}",
        nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let digest = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, text.as_bytes());
    (Bytes::from(text), digest)
}

fn scratch_manifest(config: &(Bytes, Digest), layer: &(Bytes, Digest), variant: &str) -> Manifest {
    let media_type = "application/vnd.oci.image.manifest.v1+json";
    let text = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"{media_type}\",\
         \"config\":{{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"{}\",\"size\":{}}},\
         \"layers\":[{{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"{}\",\"size\":{}}}],\
         \"annotations\":{{\"ferry.doctor.variant\":\"{variant}\"}}}}",
        config.1,
        config.0.len(),
        layer.1,
        layer.0.len()
    );
    let digest = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, text.as_bytes());
    Manifest {
        bytes: Bytes::from(text),
        media_type: media_type.to_owned(),
        digest,
    }
}
