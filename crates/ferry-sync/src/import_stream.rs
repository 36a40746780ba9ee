//! `ferry import -`'s one pass over a head-first bundle's body: each blob, as the tar hands it
//! out, streamed to every repository of the import that needs it and does not hold it.
//!
//! The plan (`import::plan`) placed the images from the head; this reads the body once, on a
//! blocking thread that sends each blob's chunks through a bounded channel (no blob is held
//! whole), and the run then tags from the head's manifests as a file import does (its blob
//! checks find each blob on the target). A blob that fails (its bytes not its digest, its size
//! not the record's, an upload that breaks: a pipe cannot be read again, so nothing retries it)
//! fails exactly the images that need it, before anything of them is tagged.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use tokio::sync::mpsc;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{BlobBytes, BlobPush, MountOutcome, UploadShape};
use ferry_distribution::retry::Failure;
use ferry_distribution::{Digest, Operation, RegistryClient};
use ferry_store::archive::reader::ArchiveReader;
use ferry_store::archive::streamed::StreamBody;

use crate::engine::graph::{Refs, references};
use crate::import::{ImportImage, Repo};
use crate::registries::Registries;
use crate::source::ByteStream;

/// Bytes per chunk read from the pipe.
const CHUNK: usize = 256 * 1024;
/// Chunks in flight between the pipe's thread and the uploads (with one chunk per upload's
/// own channel, the most of a blob in memory at once).
const IN_FLIGHT: usize = 4;

/// What the pipe's thread sends.
enum Msg {
    Blob(Digest, u64),
    Chunk(Bytes),
    /// The blob ended: `Err` when its bytes are not its digest, or the tar broke inside it.
    End(Result<(), String>),
    /// The tar ended (`Err`: it broke between blobs).
    Done(Result<(), String>),
}

/// A pipe read once: a retry of an upload has nothing to read again.
struct Once<'a>(&'a std::sync::OnceLock<ErrorKind>);

impl BlobBytes for Once<'_> {
    async fn open(&self, _offset: u64) -> Result<ByteStream, Failure> {
        Err(Failure::Final(self.0.get().cloned().unwrap_or_else(|| {
            ErrorKind::Local(
                "the bundle is read from a pipe once: its blob cannot be sent again".into(),
            )
        })))
    }

    fn poisoned(&self) -> Option<ErrorKind> {
        self.0.get().cloned()
    }
}

/// Streams the body of the bundle `reader` read from a pipe (nothing, for any other archive)
/// to the repositories of `images` (those not `refused`) that need each blob; returns the
/// images a blob failed (by index), each with an error naming the image and the digest, and
/// (for a streamed body) the blobs sent and their bytes.
pub(crate) async fn stream_body(
    reader: &ArchiveReader,
    images: &[ImportImage],
    refused: &BTreeSet<usize>,
    registries: &Registries,
    shape: UploadShape,
    stop: &ferry_distribution::StopSignal,
) -> (Vec<(usize, Error)>, Option<(u64, u64)>) {
    let Some((body, carried)) = reader.take_body() else {
        return (Vec::new(), None);
    };
    let mut sent = (0u64, 0u64);
    let mut failed: BTreeMap<usize, Error> = BTreeMap::new();
    // digest -> (declared size, the images needing it)
    let mut needs: HashMap<Digest, (u64, BTreeSet<usize>)> = HashMap::new();
    for (n, image) in images.iter().enumerate() {
        if refused.contains(&n) {
            continue;
        }
        match blobs_of(reader, &image.digest).await {
            Ok(blobs) => {
                for (digest, size) in blobs.into_iter().filter(|(d, _)| carried.contains_key(d)) {
                    needs
                        .entry(digest)
                        .or_insert((size, BTreeSet::new()))
                        .1
                        .insert(n);
                }
            }
            Err(e) => {
                failed.insert(n, e);
            }
        }
    }
    // The repositories each blob goes to: those of its images that do not hold it.
    let mut clients: HashMap<String, RegistryClient> = HashMap::new();
    let mut wanted: HashMap<Digest, Vec<Repo>> = HashMap::new();
    for (digest, (_, users)) in &needs {
        let repos: BTreeSet<Repo> = users
            .iter()
            .filter(|n| !failed.contains_key(n))
            .map(|n| (images[*n].registry.clone(), images[*n].repository.clone()))
            .collect();
        for (registry, repository) in repos {
            let client = match clients.get(&registry) {
                Some(c) => c.clone(),
                None => match registries.client(&registry).await {
                    Ok(c) => {
                        clients.insert(registry.clone(), c.clone());
                        c
                    }
                    Err(e) => {
                        fail_users(&mut failed, images, users, &registry, &repository, |_| {
                            e.clone()
                        });
                        continue;
                    }
                },
            };
            // The plan's HEAD: a blob the repository holds is not sent again.
            if let Ok(Some(_)) = client.head_blob(&repository, digest).await {
                continue;
            }
            wanted
                .entry(digest.clone())
                .or_default()
                .push((registry, repository));
        }
    }
    let (tx, mut rx) = mpsc::channel::<Msg>(IN_FLIGHT);
    let pump = tokio::task::spawn_blocking(move || pump(body, tx));
    let mut seen: BTreeSet<Digest> = BTreeSet::new();
    let mut broke: Option<String> = None;
    while let Some(msg) = rx.recv().await {
        let (digest, size) = match msg {
            // Stopped (a signal): no blob is started; the rest of the pipe is not read.
            Msg::Blob(..) if stop.is_stopped() => {
                broke = Some("the import was stopped before the pipe reached it".to_owned());
                break;
            }
            Msg::Blob(d, s) => (d, s),
            Msg::Done(Ok(())) => break,
            Msg::Done(Err(e)) => {
                broke = Some(format!("the bundle's tar broke before it: {e}"));
                break;
            }
            Msg::Chunk(_) | Msg::End(_) => continue,
        };
        seen.insert(digest.clone());
        let recorded = carried.get(&digest).copied().flatten();
        let declared = needs.get(&digest).map(|(s, _)| *s);
        let wrong_size = [recorded, declared]
            .into_iter()
            .flatten()
            .find(|s| *s != size)
            .map(|s| format!("its tar entry is {size} bytes, the bundle says {s}"));
        let targets = wanted.remove(&digest).unwrap_or_default();
        let outcome = match (&wrong_size, targets.is_empty()) {
            (Some(why), _) => {
                let _ = drain(&mut rx).await;
                Err((targets, why.clone()))
            }
            (None, true) => drain(&mut rx).await.map_err(|e| (Vec::new(), e)),
            (None, false) => {
                let r = send(&mut rx, &clients, &digest, size, targets, shape).await;
                if r.is_ok() {
                    sent = (sent.0 + 1, sent.1 + size);
                }
                r
            }
        };
        if let Err((targets, why)) = outcome {
            let Some((_, users)) = needs.get(&digest) else {
                continue;
            };
            let users = users.clone();
            let repos: Vec<Repo> = match targets.is_empty() {
                // Not sent anywhere (no target needed it, or its size was wrong): every image
                // using it fails, as a file import's would.
                true => users
                    .iter()
                    .map(|n| (images[*n].registry.clone(), images[*n].repository.clone()))
                    .collect(),
                false => targets,
            };
            for (registry, repository) in repos {
                fail_users(
                    &mut failed,
                    images,
                    &users,
                    &registry,
                    &repository,
                    |image| blob_error(image, &digest, &why),
                );
            }
        }
    }
    drop(rx);
    let _ = pump.await;
    // Blobs the images need that the body never handed out.
    for (digest, (_, users)) in &needs {
        if seen.contains(digest) {
            continue;
        }
        let why = match &broke {
            Some(e) => e.clone(),
            None => "the bundle's record lists it, but its tar does not carry it".to_owned(),
        };
        for n in users {
            let image = &images[*n];
            failed
                .entry(*n)
                .or_insert_with(|| blob_error(image, digest, &why));
        }
    }
    (failed.into_iter().collect(), Some(sent))
}

/// Fails every image of `users` that goes to `registry`/`repository` (the first error kept).
fn fail_users(
    failed: &mut BTreeMap<usize, Error>,
    images: &[ImportImage],
    users: &BTreeSet<usize>,
    registry: &str,
    repository: &str,
    error: impl Fn(&ImportImage) -> Error,
) {
    for n in users {
        let image = &images[*n];
        if image.registry == registry && image.repository == repository {
            failed.entry(*n).or_insert_with(|| error(image));
        }
    }
}

fn blob_error(image: &ImportImage, digest: &Digest, why: &str) -> Error {
    Error::new(
        &image.registry,
        Some(&image.repository),
        Operation::UploadFinish,
        ErrorKind::Refused(format!(
            "{}: blob {digest} of the bundle read from the pipe failed ({why}); nothing of the \
             image was tagged",
            image.target()
        )),
    )
}

/// Every blob (digest, declared size) the manifests the head carries reach from `root`.
async fn blobs_of(reader: &ArchiveReader, root: &Digest) -> Result<Vec<(Digest, u64)>, Error> {
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    let mut seen = BTreeSet::new();
    while let Some(digest) = stack.pop() {
        if !seen.insert(digest.clone()) || seen.len() > 1024 {
            continue;
        }
        // A manifest the head leaves out is the base check's and the run's to find.
        let Some(m) = reader.find_manifest(&digest.to_string()).await? else {
            continue;
        };
        let refs = references(&m).map_err(|message| {
            Error::new(
                reader.name(),
                None,
                Operation::ManifestGet,
                ErrorKind::Local(message),
            )
        })?;
        match refs {
            Refs::Children(children) => stack.extend(children),
            Refs::Blobs(blobs) => out.extend(blobs.into_iter().map(|b| (b.digest, b.size))),
        }
    }
    Ok(out)
}

/// The pipe's thread: each blob's header, chunks and end, then the tar's end.
fn pump(mut body: StreamBody, tx: mpsc::Sender<Msg>) {
    use std::io::Read;
    loop {
        let mut blob = match body.next_blob() {
            Ok(Some(b)) => b,
            Ok(None) => {
                let _ = tx.blocking_send(Msg::Done(Ok(())));
                return;
            }
            Err(e) => {
                let _ = tx.blocking_send(Msg::Done(Err(e)));
                return;
            }
        };
        if tx
            .blocking_send(Msg::Blob(blob.digest().clone(), blob.size()))
            .is_err()
        {
            return;
        }
        loop {
            let mut buf = vec![0u8; CHUNK];
            let msg = match blob.read(&mut buf) {
                Ok(0) => Msg::End(Ok(())),
                Ok(n) => {
                    buf.truncate(n);
                    Msg::Chunk(Bytes::from(buf))
                }
                Err(e) => Msg::End(Err(e.to_string())),
            };
            let end = !matches!(msg, Msg::Chunk(_));
            if tx.blocking_send(msg).is_err() {
                return;
            }
            if end {
                break;
            }
        }
    }
}

/// Reads the current blob's chunks to its end; its end's verdict.
async fn drain(rx: &mut mpsc::Receiver<Msg>) -> Result<(), String> {
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Chunk(_) => {}
            Msg::End(r) => return r,
            Msg::Blob(..) | Msg::Done(_) => return Err("the pipe's reader went astray".into()),
        }
    }
    Err("the pipe's reader stopped".into())
}

/// Streams the current blob to the first repository `targets` names on each registry, then
/// mounts it into the others there; `Err` with the repositories it did not reach and why.
async fn send(
    rx: &mut mpsc::Receiver<Msg>,
    clients: &HashMap<String, RegistryClient>,
    digest: &Digest,
    size: u64,
    targets: Vec<Repo>,
    shape: UploadShape,
) -> Result<(), (Vec<Repo>, String)> {
    let mut by_registry: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (registry, repository) in &targets {
        by_registry.entry(registry).or_default().push(repository);
    }
    let poisoned = std::sync::OnceLock::new();
    let mut senders = Vec::new();
    let mut uploads = Vec::new();
    for (registry, repos) in &by_registry {
        let client = &clients[*registry];
        let (utx, urx) = mpsc::channel::<Result<Bytes, Failure>>(1);
        senders.push(utx);
        let stream: ByteStream = Box::pin(futures::stream::unfold(urx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }));
        let push = BlobPush {
            repository: repos[0],
            digest,
            size,
            shape,
            session: None,
        };
        let once = Once(&poisoned);
        uploads.push(async move {
            // The journal is not asked: a session an earlier process recorded would have this
            // upload read the blob again from its offset, and a pipe cannot.
            let pushed = client
                .push_blob_recalled(push, None, Some(Ok(stream)), &once)
                .await;
            (*registry, pushed)
        });
    }
    let forward = async {
        let verdict = loop {
            match rx.recv().await {
                Some(Msg::Chunk(bytes)) => {
                    for s in &senders {
                        let _ = s.send(Ok(bytes.clone())).await;
                    }
                }
                Some(Msg::End(r)) => break r,
                Some(_) | None => break Err("the pipe's reader went astray".to_owned()),
            }
        };
        if let Err(why) = &verdict {
            let _ = poisoned.set(ErrorKind::Local(why.clone()));
            for s in &senders {
                let _ = s
                    .send(Err(Failure::Final(ErrorKind::Local(why.clone()))))
                    .await;
            }
        }
        senders.clear();
        verdict
    };
    let (verdict, pushed) = futures::join!(forward, futures::future::join_all(uploads));
    if let Err(why) = verdict {
        return Err((targets, why));
    }
    let mut missed = Vec::new();
    let mut why = String::new();
    for (registry, result) in pushed {
        let repos = &by_registry[registry];
        match result {
            Ok(_) => {
                let client = &clients[registry];
                for other in &repos[1..] {
                    match client.mount_blob(other, digest, repos[0]).await {
                        Ok(MountOutcome::Mounted) => {}
                        Ok(MountOutcome::Session(s)) => {
                            let _ = client.cancel_upload_once(&s).await;
                            why = format!("{registry} did not mount it from {}", repos[0]);
                            missed.push((registry.to_owned(), (*other).to_owned()));
                        }
                        Err(e) => {
                            why = e.to_string();
                            missed.push((registry.to_owned(), (*other).to_owned()));
                        }
                    }
                }
            }
            Err(e) => {
                why = e.to_string();
                missed.extend(repos.iter().map(|r| (registry.to_owned(), (*r).to_owned())));
            }
        }
    }
    match missed.is_empty() {
        true => Ok(()),
        false => Err((missed, why)),
    }
}
