//! `ferry import`'s plan: each image of an OCI archive (a ferry bundle or skopeo's) as a
//! one-image mapping to the registry its `ref.name` names, and the base check before any push.
//!
//! Where an image goes: its `ref.name` parsed as a reference (`registry.internal/mirror/alpine:3.20`
//! → that registry, repository and tag). With a target prefix `HOST/PATH`, the registry is
//! `HOST` and the repository is `PATH/` followed by the reference's repository without its
//! registry (`registry.internal/mirror/alpine:3.20` under `site.local:5000/dc1` →
//! `site.local:5000/dc1/mirror/alpine:3.20`; `alpine:3.20` → `…/dc1/library/alpine:3.20`); a
//! `ref.name` that is a bare tag (`v1`, as `skopeo copy … oci-archive:x.tar:v1` writes) goes
//! to the prefix itself (`site.local:5000/dc1:v1`) and needs one.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::MountOutcome;
use ferry_distribution::reference::Tag;
use ferry_distribution::text::for_error;
use ferry_distribution::{Digest, Operation, Reference, RegistryClient};

use crate::bundle_trust::{Authenticity, authenticate};
use crate::engine::graph::{Refs, references};
use crate::outcome::Outcome;
use crate::registries::Registries;
use ferry_config::{Mapping, Origin, Pick};
use ferry_store::archive::Stores;
use ferry_store::archive::reader::ArchiveReader;
use ferry_trust::PublicKey;

/// At most this many missing digests are named in an image's refusal.
const NAMED_MISSING: usize = 3;

/// What `ferry import` did: the run's outcome, the archive's entries that could not be placed
/// (with why), and the blobs mounted before the run from other repositories of the target.
#[derive(Debug)]
pub struct Imported {
    /// Entries left out: no `ref.name`, a bare tag without a prefix, a name that is not a
    /// reference, or a second image for one target.
    pub unplaced: Vec<String>,
    /// Blobs an incremental bundle leaves out, mounted into an image's repository first.
    pub mounted: u64,
    /// Whether the bundle is signed, only self-consistent, or not a ferry bundle at all.
    pub authenticity: Authenticity,
    /// The run of the placed images.
    pub outcome: Outcome,
    /// How the bundle was spooled (compressed, or read from standard input), if it was.
    pub spooled: Option<ferry_store::archive::input::Spooled>,
    /// A head-first bundle read from standard input in one pass: the blobs its body streamed to
    /// the target (each counted once, however many repositories it reached) and their bytes.
    /// The run's totals count what the engine did after, which found these blobs there.
    pub streamed: Option<(u64, u64)>,
}

/// Why an import did not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The archive could not be opened or indexed.
    #[error("{0}")]
    Open(Error),
    /// `--target-prefix` is not `HOST[/PATH]`.
    #[error("{0}")]
    Prefix(String),
    /// A `--since` bundle's record could not be read.
    #[error("{0}")]
    Bases(String),
    /// The bundle is refused under the keys given (unsigned, a bad signature), before any
    /// request to a target.
    #[error("{0}")]
    Untrusted(String),
    /// No entry of the archive can be imported.
    #[error("no image of the bundle can be imported")]
    Nothing {
        /// Why each entry was left out.
        unplaced: Vec<String>,
    },
}

/// The import's plan: one-image mappings, the images the base check refused (by mapping),
/// and what it mounted.
pub(crate) struct ImportPlan {
    pub mappings: Vec<Mapping>,
    pub refused: HashMap<usize, Error>,
    pub unplaced: Vec<String>,
    pub mounted: u64,
    pub authenticity: Authenticity,
    pub spooled: Option<ferry_store::archive::input::Spooled>,
    /// The archive and its placed images (by mapping index), for a bundle's body to stream.
    pub reader: ArchiveReader,
    pub images: Vec<ImportImage>,
}

/// Reads the archive at `path` (through the run's `stores`, so the run reads the same
/// indexing), places its images, and checks the base an incremental bundle leaves out on the
/// target with the run's `registries` (mounting nothing in a dry run).
pub(crate) async fn plan(
    path: &Path,
    prefix: Option<&str>,
    registries: &Registries,
    stores: &Stores,
    keys: &[PublicKey],
    site: &BTreeSet<Repo>,
    dry_run: bool,
) -> Result<ImportPlan, ImportError> {
    let origin = Origin::OciArchive {
        path: path.to_path_buf(),
        reference: None,
    };
    let reader = stores.read(&origin).await.map_err(ImportError::Open)?;
    // Before any request: a bundle the keys refuse never reaches a target.
    let authenticity = authenticate(crate::bundle_trust::RecordParts::of(&reader), keys)
        .map_err(ImportError::Untrusted)?;
    let (images, unplaced) = images(&reader, prefix).map_err(ImportError::Prefix)?;
    if images.is_empty() {
        return Err(ImportError::Nothing { unplaced });
    }
    let check = check_base(&reader, &images, registries, site, dry_run).await;
    // An image the record lists from a base is served once its root came from the target.
    let failed: BTreeSet<&str> = check.refused.iter().map(|(n, _)| n.as_str()).collect();
    let mut refused_late = Vec::new();
    for image in images.iter().filter(|i| i.from_base) {
        if !failed.contains(image.ref_name.as_str())
            && !reader.admit(&image.ref_name, &image.digest)
        {
            refused_late.push((
                image.ref_name.clone(),
                missing_error(
                    &reader,
                    image,
                    std::slice::from_ref(&image.digest),
                    Operation::ManifestGet,
                ),
            ));
        }
    }
    let mappings: Vec<Mapping> = images
        .iter()
        .enumerate()
        .map(|(n, image)| mapping(path, image, n))
        .collect();
    let by_name: HashMap<&str, usize> = images
        .iter()
        .enumerate()
        .map(|(n, i)| (i.ref_name.as_str(), n))
        .collect();
    let refused = check
        .refused
        .into_iter()
        .chain(refused_late)
        .filter_map(|(name, e)| by_name.get(name.as_str()).map(|n| (*n, e)))
        .collect();
    Ok(ImportPlan {
        mappings,
        refused,
        unplaced,
        mounted: check.mounted,
        authenticity,
        spooled: reader.spooled().cloned(),
        reader,
        images,
    })
}

/// One image of the archive and where it goes.
#[derive(Debug, Clone)]
pub(crate) struct ImportImage {
    /// Its `ref.name` in `index.json`, as written.
    pub ref_name: String,
    /// Its manifest (or index) digest.
    pub digest: Digest,
    /// The registry and repository it is pushed to.
    pub registry: String,
    /// The repository on it.
    pub repository: String,
    /// The tag it is pushed under (`None`: by digest only).
    pub tag: Option<Tag>,
    /// Listed by the bundle's record but not in `index.json`: its root is a base's, to be
    /// found on the target before the image is tagged there.
    pub from_base: bool,
}

impl ImportImage {
    /// `registry/repository:tag` (or `@digest`), as messages name the target.
    pub(crate) fn target(&self) -> String {
        match &self.tag {
            Some(t) => format!("{}/{}:{}", self.registry, self.repository, t.as_str()),
            None => format!("{}/{}@{}", self.registry, self.repository, self.digest),
        }
    }
}

/// The archive's images with their targets, and the entries that cannot be imported (with
/// why): no `ref.name`, a bare tag without a prefix, or a name that is not a reference.
pub(crate) fn images(
    reader: &ArchiveReader,
    prefix: Option<&str>,
) -> Result<(Vec<ImportImage>, Vec<String>), String> {
    let prefix = match prefix {
        Some(p) => Some(split_prefix(p)?),
        None => None,
    };
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut seen = BTreeSet::new();
    for (ref_name, digest) in reader.images() {
        // The name as messages quote it: cut and escaped as registry text is.
        let shown = ref_name.as_deref().map(for_error).unwrap_or_default();
        let Some(ref_name) = ref_name.filter(|r| !r.is_empty()) else {
            refused.push(format!(
                "index.json entry {digest} has no org.opencontainers.image.ref.name: not imported"
            ));
            continue;
        };
        match place(&ref_name, &digest, prefix.as_ref()) {
            Ok(image) => {
                if seen.insert(image.target()) {
                    out.push(image);
                } else {
                    refused.push(format!(
                        "{shown}: another image of the archive goes to {} too: not imported",
                        image.target()
                    ));
                }
            }
            Err(reason) => refused.push(format!("{shown}: {}", for_error(&reason))),
        }
    }
    // Every image the record lists is accounted for: one whose root a base carried (not in
    // index.json) is placed too, and the base check finds it on the target or fails it.
    let named: BTreeSet<String> = reader.images().into_iter().filter_map(|(n, _)| n).collect();
    for image in reader
        .record()
        .map(|r| r.images.as_slice())
        .unwrap_or_default()
    {
        if named.contains(&image.reference) {
            continue;
        }
        let placed = Digest::parse(&image.digest)
            .map_err(|e| {
                format!(
                    "digest \"{}\": {e}",
                    ferry_distribution::text::for_error(&image.digest)
                )
            })
            .and_then(|d| place(&image.reference, &d, prefix.as_ref()));
        match placed {
            Ok(mut placed) => {
                placed.from_base = true;
                if seen.insert(placed.target()) {
                    out.push(placed);
                } else {
                    refused.push(format!(
                        "{}: another image of the archive goes to {} too: not imported",
                        image.reference,
                        placed.target()
                    ));
                }
            }
            Err(reason) => refused.push(format!("{}: {reason}", image.reference)),
        }
    }
    Ok((out, refused))
}

/// `HOST/PATH` → (`HOST`, `PATH`), checked as a repository reference (`PATH` may be empty).
pub(crate) fn split_prefix(prefix: &str) -> Result<(String, String), String> {
    let prefix = prefix.trim_end_matches('/');
    let (host, path) = prefix.split_once('/').unwrap_or((prefix, ""));
    if host.is_empty() || !(host.contains(['.', ':']) || host == "localhost") {
        return Err(format!(
            "--target-prefix {prefix:?} must start with a registry host (registry.local:5000/mirror)"
        ));
    }
    let check = format!("{prefix}/x");
    Reference::parse(&check).map_err(|e| format!("--target-prefix {prefix:?}: {e}"))?;
    Ok((host.to_owned(), path.to_owned()))
}

pub(crate) fn place(
    ref_name: &str,
    digest: &Digest,
    prefix: Option<&(String, String)>,
) -> Result<ImportImage, String> {
    let bare = !ref_name.contains(['/', ':', '@']);
    let (registry, repository, tag) = match (bare, prefix) {
        (true, None) => {
            return Err(
                "the name is a tag without a repository: give --target-prefix HOST/PATH to say \
                 where it goes"
                    .into(),
            );
        }
        (true, Some((host, path))) if path.is_empty() => {
            return Err(format!(
                "the name is a tag without a repository, and --target-prefix {host} names no \
                 repository path"
            ));
        }
        (true, Some((host, path))) => (host.clone(), path.clone(), Some(ref_name.to_owned())),
        (false, _) => {
            let r = Reference::parse(ref_name).map_err(|e| format!("not a reference: {e}"))?;
            if r.digest.as_ref().is_some_and(|d| d != digest) {
                return Err(format!(
                    "the name pins {:?}, the entry is {digest}",
                    r.digest
                ));
            }
            match prefix {
                None => (r.registry, r.repository, r.tag),
                Some((host, path)) if path.is_empty() => (host.clone(), r.repository, r.tag),
                Some((host, path)) => (host.clone(), format!("{path}/{}", r.repository), r.tag),
            }
        }
    };
    let tag = tag
        .map(|t| Tag::parse(&t).map_err(|e| format!("tag {t:?}: {e}")))
        .transpose()?;
    let shown = format!("{registry}/{repository}");
    Reference::parse(&shown).map_err(|e| format!("target {shown:?}: {e}"))?;
    Ok(ImportImage {
        ref_name: ref_name.to_owned(),
        digest: digest.clone(),
        registry,
        repository,
        tag,
        from_base: false,
    })
}

/// The one-image mapping (index `index`) that pushes `image` from the archive at `path`: the
/// source's tag is the one the reference names, and the target keeps it.
fn mapping(path: &Path, image: &ImportImage, index: usize) -> Mapping {
    let origin = Origin::OciArchive {
        path: path.to_path_buf(),
        reference: Some(image.ref_name.clone()),
    };
    let target = ferry_config::Target::Registry {
        registry: image.registry.clone(),
        repository: image.repository.clone(),
    };
    let pick = match &image.tag {
        Some(tag) => Pick::Tag(tag.clone()),
        None => Pick::Digest(image.digest.clone()),
    };
    Mapping::one_image(index, origin, vec![target], pick)
}

/// What the base check did.
#[derive(Debug, Default)]
pub(crate) struct BaseCheck {
    /// Blobs mounted into an image's repository from another repository of its registry.
    pub mounted: u64,
    /// Images refused before anything of them was pushed: (ref.name, why).
    pub refused: Vec<(String, Error)>,
}

/// A registry repository: (registry, repository).
pub(crate) type Repo = (String, String);

/// For every image whose content the archive leaves out (an incremental bundle's), checks the
/// target holds it: a manifest by a GET in the image's repository (handed to the reader, so
/// the run can walk an index over it), a blob by a HEAD there. A blob its own repository lacks
/// is mounted (not in a dry run) only from a repository this import will write to (an image
/// complete in the bundle, or whose every left-out digest its own repository holds) or one
/// the site config names (`site`): never from a repository only a refused or incomplete entry
/// names, so a bundle cannot make the site's credentials copy a blob out of a repository of
/// its choosing. An image with a digest found nowhere is refused before anything of it is
/// pushed (the run then fails its mapping), naming the bundle's bases and the first missing
/// digests.
pub(crate) async fn check_base(
    reader: &ArchiveReader,
    images: &[ImportImage],
    registries: &Registries,
    site: &BTreeSet<Repo>,
    dry_run: bool,
) -> BaseCheck {
    let mut check = BaseCheck::default();
    // The repositories blobs may be mounted from: the site's, and each image's that the
    // import writes whatever else happens.
    let mut sources: BTreeSet<Repo> = site.clone();
    let mut pending = Vec::new();
    for image in images {
        let needed = match needed(reader, &image.digest).await {
            Ok(n) => n,
            Err(e) => {
                check.refused.push((image.ref_name.clone(), e));
                continue;
            }
        };
        let repo = (image.registry.clone(), image.repository.clone());
        if needed.is_empty() {
            sources.insert(repo);
            continue;
        }
        let client = match registries.client(&image.registry).await {
            Ok(c) => c,
            Err(e) => {
                check.refused.push((image.ref_name.clone(), e));
                continue;
            }
        };
        match in_own(reader, &client, image, &needed).await {
            Ok(lacking) if lacking.is_empty() => {
                sources.insert(repo);
            }
            Ok(lacking) => pending.push((image, client, lacking)),
            Err(e) => check.refused.push((image.ref_name.clone(), e)),
        }
    }
    for (image, client, lacking) in pending {
        let manifests: Vec<Digest> = lacking
            .iter()
            .filter_map(|n| match n {
                Needed::Manifest(d) => Some(d.clone()),
                Needed::Blob(_) => None,
            })
            .collect();
        if !manifests.is_empty() {
            let e = missing_error(reader, image, &manifests, Operation::ManifestGet);
            check.refused.push((image.ref_name.clone(), e));
            continue;
        }
        let others: Vec<&str> = sources
            .iter()
            .filter(|(r, p)| *r == image.registry && *p != image.repository)
            .map(|(_, p)| p.as_str())
            .collect();
        match elsewhere(&client, &others, &lacking).await {
            Ok((missing, mounts)) if missing.is_empty() => {
                if dry_run {
                    continue;
                }
                match mount_all(&client, image, &mounts).await {
                    Ok(n) => check.mounted += n,
                    Err(e) => check.refused.push((image.ref_name.clone(), e)),
                }
            }
            Ok((missing, _)) => {
                let e = missing_error(reader, image, &missing, Operation::BlobHead);
                check.refused.push((image.ref_name.clone(), e));
            }
            Err(e) => check.refused.push((image.ref_name.clone(), e)),
        }
    }
    check
}

/// A digest the image needs that the archive does not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Needed {
    Manifest(Digest),
    Blob(Digest),
}

/// The image's digests that the archive leaves out, walking the manifests it carries.
async fn needed(reader: &ArchiveReader, root: &Digest) -> Result<Vec<Needed>, Error> {
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    let mut seen = BTreeSet::new();
    while let Some(digest) = stack.pop() {
        if !seen.insert(digest.to_string()) || seen.len() > 1024 {
            continue;
        }
        let Some(m) = reader.find_manifest(&digest.to_string()).await? else {
            out.push(Needed::Manifest(digest));
            continue;
        };
        // The engine's parser: a manifest that does not parse is an error naming it.
        let refs = references(&m)
            .map_err(|message| reader_error(reader, Operation::ManifestGet, message))?;
        match refs {
            Refs::Children(children) => stack.extend(children),
            Refs::Blobs(blobs) => out.extend(
                blobs
                    .into_iter()
                    .filter(|b| !reader.carries(&b.digest))
                    .map(|b| Needed::Blob(b.digest)),
            ),
        }
    }
    Ok(out)
}

/// An error about the archive `reader` reads.
fn reader_error(reader: &ArchiveReader, operation: Operation, message: String) -> Error {
    Error::new(reader.name(), None, operation, ErrorKind::Local(message))
}

/// What the image's own repository lacks of `needed`: a manifest is read from there (and
/// handed to the reader), a blob HEADed there.
async fn in_own(
    reader: &ArchiveReader,
    client: &RegistryClient,
    image: &ImportImage,
    needed: &[Needed],
) -> Result<Vec<Needed>, Error> {
    let mut lacking = Vec::new();
    for n in needed {
        match n {
            // Read from the target, so the run can walk an index over it.
            Needed::Manifest(d) => {
                match client.get_manifest(&image.repository, &d.to_string()).await {
                    Ok(m) if m.digest == *d && reader.supply(m.clone()) => {}
                    Ok(_) => lacking.push(n.clone()),
                    Err(e) if e.is_not_found() => lacking.push(n.clone()),
                    Err(e) => return Err(e),
                }
            }
            Needed::Blob(d) => {
                if client.head_blob(&image.repository, d).await?.is_none() {
                    lacking.push(n.clone());
                }
            }
        }
    }
    Ok(lacking)
}

/// The blobs of `lacking` found in none of `others`, and for each found, where.
async fn elsewhere(
    client: &RegistryClient,
    others: &[&str],
    lacking: &[Needed],
) -> Result<(Vec<Digest>, Vec<(Digest, String)>), Error> {
    let mut missing = Vec::new();
    let mut mounts = Vec::new();
    for n in lacking {
        let Needed::Blob(d) = n else { continue };
        let mut from = None;
        for other in others {
            if client.head_blob(other, d).await?.is_some() {
                from = Some((*other).to_owned());
                break;
            }
        }
        match from {
            Some(repo) => mounts.push((d.clone(), repo)),
            None => missing.push(d.clone()),
        }
    }
    Ok((missing, mounts))
}

async fn mount_all(
    client: &RegistryClient,
    image: &ImportImage,
    mounts: &[(Digest, String)],
) -> Result<u64, Error> {
    let mut n = 0;
    for (digest, from) in mounts {
        match client.mount_blob(&image.repository, digest, from).await? {
            MountOutcome::Mounted => n += 1,
            MountOutcome::Session(s) => {
                let _ = client.cancel_upload_once(&s).await;
                return Err(Error::new(
                    client.host(),
                    Some(&image.repository),
                    Operation::Mount,
                    ErrorKind::Refused(format!(
                        "the bundle leaves out blob {digest}, held by {from} on this registry, \
                         but the registry did not mount it"
                    )),
                ));
            }
        }
    }
    Ok(n)
}

/// Why `image` is refused: `missing` (found by `operation`) is nowhere on the target.
fn missing_error(
    reader: &ArchiveReader,
    image: &ImportImage,
    missing: &[Digest],
    operation: Operation,
) -> Error {
    let bases = match reader.record() {
        Some(r) if !r.bases.is_empty() => r
            .bases
            .iter()
            .map(|b| format!("{} ({})", for_error(&b.name), for_error(&b.digest)))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "no base bundle (the archive does not say which bundle carried them)".to_owned(),
    };
    let first: Vec<String> = missing
        .iter()
        .take(NAMED_MISSING)
        .map(ToString::to_string)
        .collect();
    let more = missing.len().saturating_sub(NAMED_MISSING);
    Error::new(
        &image.registry,
        Some(&image.repository),
        operation,
        ErrorKind::Refused(format!(
            "{} needs {} digest{} that the bundle leaves out and the target does not hold \
             (import its base first: {bases}): {}{}; nothing of it was pushed",
            image.target(),
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            first.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )),
    )
}
