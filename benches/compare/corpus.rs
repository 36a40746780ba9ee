//! The seeded synthetic corpus: repositories, tags, shared and unique layers of incompressible
//! bytes, multi-arch indexes; pushes it into a source registry and counts the protocol minimum.

use std::collections::{BTreeMap, BTreeSet};

use ferry_distribution::digest::{Algorithm, Digest, Digester};
use ferry_distribution::ops::manifest::Manifest;
use ferry_distribution::{RegistryClient, RegistryOptions};
use futures::StreamExt as _;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Bytes per PATCH when seeding a large blob, and per read of the generator.
pub const SEED_CHUNK: usize = 16 << 20;
/// Blobs above this size are seeded in two streaming passes (digest, then PATCH chunks).
const STREAM_ABOVE: u64 = 1 << 20;

/// xorshift64*: a small, fast, deterministic generator. Its output does not compress.
#[derive(Debug, Clone)]
pub struct Xorshift(u64);

impl Xorshift {
    pub fn new(seed: u64) -> Self {
        // A zero state would stay zero; mix the seed so nearby seeds diverge at once.
        Xorshift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }
}

/// The bytes of one layer, produced in order in pieces of any size: the same seed and size give
/// the same bytes however the reads are cut.
pub struct LayerBytes {
    rng: Xorshift,
    word: [u8; 8],
    used: usize,
    remaining: u64,
}

impl LayerBytes {
    pub fn new(seed: u64, size: u64) -> Self {
        LayerBytes {
            rng: Xorshift::new(seed),
            word: [0; 8],
            used: 8,
            remaining: size,
        }
    }

    /// Fills up to `buf.len()` bytes; returns how many (0 at the end).
    pub fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        for byte in &mut buf[..n] {
            if self.used == 8 {
                self.word = self.rng.next_u64().to_le_bytes();
                self.used = 0;
            }
            *byte = self.word[self.used];
            self.used += 1;
        }
        self.remaining -= n as u64;
        n
    }

    /// The next piece of at most `max` bytes, or `None` at the end.
    pub fn next_piece(&mut self, max: usize) -> Option<Vec<u8>> {
        let mut piece = vec![0; max.min(usize::try_from(self.remaining).unwrap_or(max))];
        let n = self.fill(&mut piece);
        (n > 0).then_some(piece)
    }
}

/// The digest of a generated layer, computed in one streaming pass.
pub fn layer_digest(seed: u64, size: u64) -> Digest {
    let mut bytes = LayerBytes::new(seed, size);
    let mut digester = Digester::new(Algorithm::Sha256);
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = bytes.fill(&mut buf);
        if n == 0 {
            break;
        }
        digester.update(&buf[..n]);
    }
    digester.finish()
}

/// A blob of the corpus: a generated layer or a small config held as bytes.
#[derive(Debug, Clone)]
pub enum BlobContent {
    Layer { seed: u64, size: u64 },
    Config(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: Digest,
    pub size: u64,
    pub media_type: &'static str,
    pub content: BlobContent,
}

/// One manifest with its exact bytes.
#[derive(Debug, Clone)]
pub struct ManifestDoc {
    pub digest: Digest,
    pub media_type: &'static str,
    pub bytes: Vec<u8>,
    /// Blob indexes (into `Corpus::blobs`) the manifest names: config first, then layers.
    pub blobs: Vec<usize>,
}

/// What a tag points at: a single-platform manifest, or an index over child manifests.
#[derive(Debug, Clone)]
pub struct TagDoc {
    pub tag: String,
    pub top: ManifestDoc,
    pub children: Vec<ManifestDoc>,
}

#[derive(Debug, Clone)]
pub struct RepoDoc {
    pub name: String,
    pub tags: Vec<TagDoc>,
}

/// The layout of a corpus, before any bytes are made.
#[derive(Debug, Clone)]
pub struct Shape {
    pub name: &'static str,
    pub seed: u64,
    /// Repositories with few tags, and how many tags each gets (inclusive range).
    pub small_repos: usize,
    pub small_tags: (u64, u64),
    /// Repositories with many tags.
    pub deep_repos: usize,
    pub deep_tags: usize,
    /// Layer sizes in bytes (inclusive range) for per-tag layers.
    pub layer_size: (u64, u64),
    /// Sizes of the shared base layers and of the per-repository layer.
    pub base_size: (u64, u64),
    pub repo_layer_size: (u64, u64),
    /// How many distinct base layers repositories draw from.
    pub base_pool: usize,
    /// Every n-th tag (counted over the corpus) is a two-platform index; 0 for none.
    pub index_every: usize,
}

impl Shape {
    /// Many small repositories: 40 repositories, about 230 tags, layers 4–64 KiB, ~30 indexes.
    pub fn many_small() -> Shape {
        Shape {
            name: "A: 40 small repositories",
            seed: 0xF3_22_A0,
            small_repos: 36,
            small_tags: (2, 4),
            deep_repos: 4,
            deep_tags: 30,
            layer_size: (4 << 10, 64 << 10),
            base_size: (32 << 10, 64 << 10),
            repo_layer_size: (4 << 10, 64 << 10),
            base_pool: 5,
            index_every: 8,
        }
    }

    /// Few repositories with large layers: 4 repositories × 3 tags, layers 8–32 MiB.
    pub fn few_large() -> Shape {
        Shape {
            name: "B: 4 repositories, large layers",
            seed: 0xF3_22_B0,
            small_repos: 4,
            small_tags: (3, 3),
            deep_repos: 0,
            deep_tags: 0,
            layer_size: (8 << 20, 24 << 20),
            base_size: (32 << 20, 32 << 20),
            repo_layer_size: (16 << 20, 16 << 20),
            base_pool: 1,
            index_every: 0,
        }
    }

    /// Layers above the engine's 64 MiB monolithic limit, so every upload is chunked (corpus B's
    /// largest blob is 32 MiB and goes up in one PUT): 2 repositories × 2 tags, layers 66–96 MiB.
    pub fn chunked() -> Shape {
        Shape {
            name: "C: 2 repositories, layers above the monolithic limit",
            seed: 0xF3_22_C0,
            small_repos: 2,
            small_tags: (2, 2),
            deep_repos: 0,
            deep_tags: 0,
            layer_size: (80 << 20, 96 << 20),
            base_size: (72 << 20, 72 << 20),
            repo_layer_size: (66 << 20, 66 << 20),
            base_pool: 1,
            index_every: 0,
        }
    }
}

impl Shape {
    /// The scale corpora of issue 42: `repos` repositories × 5 tags, one platform each, small
    /// layers (2–8 KiB per tag, 4–16 KiB per repository) over 8 shared base layers (16–32 KiB).
    pub fn scale(repos: usize) -> Shape {
        Shape {
            name: match repos {
                250 => "250 repositories × 5 tags",
                1000 => "1,000 repositories × 5 tags",
                _ => "repositories × 5 tags",
            },
            seed: 0xF3_22_D0 ^ repos as u64,
            small_repos: repos,
            small_tags: (5, 5),
            deep_repos: 0,
            deep_tags: 0,
            layer_size: (2 << 10, 8 << 10),
            base_size: (16 << 10, 32 << 10),
            repo_layer_size: (4 << 10, 16 << 10),
            base_pool: 8,
            index_every: 0,
        }
    }
}

/// A generated corpus: every blob once, and the repositories that use them.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub shape: Shape,
    pub blobs: Vec<Blob>,
    pub repos: Vec<RepoDoc>,
}

struct Builder {
    blobs: Vec<Blob>,
    by_digest: BTreeMap<String, usize>,
}

impl Builder {
    fn layer(&mut self, seed: u64, size: u64) -> usize {
        let digest = layer_digest(seed, size);
        self.add(Blob {
            digest,
            size,
            media_type: OCI_LAYER,
            content: BlobContent::Layer { seed, size },
        })
    }

    fn add(&mut self, blob: Blob) -> usize {
        if let Some(&i) = self.by_digest.get(&blob.digest.to_string()) {
            return i;
        }
        self.by_digest
            .insert(blob.digest.to_string(), self.blobs.len());
        self.blobs.push(blob);
        self.blobs.len() - 1
    }

    /// A config and manifest for one platform image over `layers`.
    fn image(&mut self, label: &str, arch: &str, layers: &[usize]) -> ManifestDoc {
        let diff_ids: Vec<String> = layers
            .iter()
            .map(|&i| self.blobs[i].digest.to_string())
            .collect();
        let config = serde_json::json!({
            "architecture": arch,
            "os": "linux",
            "config": { "Labels": { "ferry.bench": label } },
            "rootfs": { "type": "layers", "diff_ids": diff_ids },
        });
        let config = serde_json::to_vec(&config).unwrap_or_default();
        let config_index = self.add(Blob {
            digest: Digest::of_bytes(Algorithm::Sha256, &config),
            size: config.len() as u64,
            media_type: OCI_CONFIG,
            content: BlobContent::Config(config),
        });
        let descriptor = |blob: &Blob| {
            serde_json::json!({
                "mediaType": blob.media_type,
                "digest": blob.digest.to_string(),
                "size": blob.size,
            })
        };
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(&self.blobs[config_index]),
            "layers": layers.iter().map(|&i| descriptor(&self.blobs[i])).collect::<Vec<_>>(),
        });
        let bytes = serde_json::to_vec(&manifest).unwrap_or_default();
        let mut blobs = vec![config_index];
        blobs.extend_from_slice(layers);
        ManifestDoc {
            digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
            media_type: OCI_MANIFEST,
            bytes,
            blobs,
        }
    }
}

fn index_doc(children: &[(&str, &ManifestDoc)]) -> ManifestDoc {
    let manifests: Vec<_> = children
        .iter()
        .map(|(arch, child)| {
            serde_json::json!({
                "mediaType": child.media_type,
                "digest": child.digest.to_string(),
                "size": child.bytes.len(),
                "platform": { "architecture": arch, "os": "linux" },
            })
        })
        .collect();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": manifests,
    });
    let bytes = serde_json::to_vec(&index).unwrap_or_default();
    ManifestDoc {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        media_type: OCI_INDEX,
        bytes,
        blobs: Vec::new(),
    }
}

impl Corpus {
    /// Builds the corpus of `shape` (computing every layer digest; no registry involved).
    pub fn generate(shape: &Shape) -> Corpus {
        let mut rng = Xorshift::new(shape.seed);
        let mut b = Builder {
            blobs: Vec::new(),
            by_digest: BTreeMap::new(),
        };
        let bases: Vec<usize> = (0..shape.base_pool)
            .map(|_| {
                let size = rng.between(shape.base_size.0, shape.base_size.1);
                let seed = rng.next_u64();
                b.layer(seed, size)
            })
            .collect();
        let mut repos = Vec::new();
        let mut tag_counter = 0usize;
        let total = shape.small_repos + shape.deep_repos;
        for r in 0..total {
            let deep = r >= shape.small_repos;
            let name = if deep {
                format!("deep/app-{:02}", r - shape.small_repos)
            } else {
                format!("small/svc-{r:02}")
            };
            let tag_count = if deep {
                shape.deep_tags as u64
            } else {
                rng.between(shape.small_tags.0, shape.small_tags.1)
            };
            let base = bases[(rng.next_u64() % bases.len() as u64) as usize];
            let repo_layer = {
                let size = rng.between(shape.repo_layer_size.0, shape.repo_layer_size.1);
                let seed = rng.next_u64();
                b.layer(seed, size)
            };
            let mut tags = Vec::new();
            for t in 0..tag_count {
                tag_counter += 1;
                let tag = format!("1.{t}.0");
                let label = format!("{name}:{tag}");
                let top_layer = |b: &mut Builder, rng: &mut Xorshift| {
                    let size = rng.between(shape.layer_size.0, shape.layer_size.1);
                    let seed = rng.next_u64();
                    b.layer(seed, size)
                };
                let is_index =
                    shape.index_every > 0 && tag_counter.is_multiple_of(shape.index_every);
                if is_index {
                    let amd_top = top_layer(&mut b, &mut rng);
                    let arm_top = top_layer(&mut b, &mut rng);
                    let amd = b.image(&label, "amd64", &[base, repo_layer, amd_top]);
                    let arm = b.image(&label, "arm64", &[base, repo_layer, arm_top]);
                    let top = index_doc(&[("amd64", &amd), ("arm64", &arm)]);
                    tags.push(TagDoc {
                        tag,
                        top,
                        children: vec![amd, arm],
                    });
                } else {
                    let own = top_layer(&mut b, &mut rng);
                    let top = b.image(&label, "amd64", &[base, repo_layer, own]);
                    tags.push(TagDoc {
                        tag,
                        top,
                        children: Vec::new(),
                    });
                }
            }
            repos.push(RepoDoc { name, tags });
        }
        Corpus {
            shape: shape.clone(),
            blobs: b.blobs,
            repos,
        }
    }

    /// Blob indexes a repository holds, sorted.
    pub fn repo_blobs(&self, repo: &RepoDoc) -> BTreeSet<usize> {
        repo.tags
            .iter()
            .flat_map(|t| std::iter::once(&t.top).chain(t.children.iter()))
            .flat_map(|m| m.blobs.iter().copied())
            .collect()
    }

    pub fn tag_count(&self) -> usize {
        self.repos.iter().map(|r| r.tags.len()).sum()
    }

    pub fn index_count(&self) -> usize {
        self.repos
            .iter()
            .flat_map(|r| &r.tags)
            .filter(|t| !t.children.is_empty())
            .count()
    }

    pub fn unique_bytes(&self) -> u64 {
        self.blobs.iter().map(|b| b.size).sum()
    }

    /// The fewest requests a copy of the whole corpus into an empty registry needs.
    pub fn minimum(&self) -> Minimum {
        let repos = self.repos.len() as u64;
        let tags = self.tag_count() as u64;
        let unique = self.blobs.len() as u64;
        let pairs: u64 = self
            .repos
            .iter()
            .map(|r| self.repo_blobs(r).len() as u64)
            .sum();
        let manifests: u64 = self
            .repos
            .iter()
            .flat_map(|r| &r.tags)
            .map(|t| 1 + t.children.len() as u64)
            .sum();
        Minimum {
            source_cold: unique + manifests + repos,
            target_cold: 2 * unique + (pairs - unique) + manifests + repos,
            source_bytes: self.unique_bytes(),
            warm: repos + tags,
        }
    }

    /// Pushes every blob and manifest into the registry at `url`, `parallel` repositories at
    /// once; a blob already pushed to another repository is mounted from there.
    pub async fn push(&self, url: &str, parallel: usize) -> Result<(), String> {
        let client = RegistryClient::new(RegistryOptions::insecure_at(url))
            .map_err(|e| format!("client for {url}: {e}"))?;
        // First repository (in corpus order) that uses each blob: it uploads, others mount.
        let mut home: BTreeMap<usize, usize> = BTreeMap::new();
        for (r, repo) in self.repos.iter().enumerate() {
            for blob in self.repo_blobs(repo) {
                home.entry(blob).or_insert(r);
            }
        }
        // Pass 1: every blob in its home repository. Pass 2: mounts and manifests.
        let uploads = futures::stream::iter(home.iter().map(|(&blob, &r)| {
            let client = client.clone();
            async move { push_blob(&client, &self.repos[r].name, &self.blobs[blob]).await }
        }))
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
        uploads.into_iter().collect::<Result<Vec<()>, String>>()?;
        let repos = futures::stream::iter(self.repos.iter().enumerate().map(|(r, repo)| {
            let client = client.clone();
            let home = &home;
            async move {
                for blob in self.repo_blobs(repo) {
                    let from = home.get(&blob).copied().unwrap_or(r);
                    if from != r {
                        let digest = &self.blobs[blob].digest;
                        client
                            .mount_blob(&repo.name, digest, &self.repos[from].name)
                            .await
                            .map_err(|e| format!("mount {digest} into {}: {e}", repo.name))?;
                    }
                }
                for tag in &repo.tags {
                    for child in &tag.children {
                        put(&client, &repo.name, &child.digest.to_string(), child).await?;
                    }
                    put(&client, &repo.name, &tag.tag, &tag.top).await?;
                }
                Ok::<(), String>(())
            }
        }))
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
        repos.into_iter().collect::<Result<Vec<()>, String>>()?;
        Ok(())
    }
}

async fn put(
    client: &RegistryClient,
    repo: &str,
    reference: &str,
    doc: &ManifestDoc,
) -> Result<(), String> {
    let manifest = Manifest {
        bytes: doc.bytes.clone().into(),
        media_type: doc.media_type.to_owned(),
        digest: doc.digest.clone(),
    };
    client
        .put_manifest(repo, reference, &manifest)
        .await
        .map(|_| ())
        .map_err(|e| format!("PUT manifest {repo}:{reference}: {e}"))
}

async fn push_blob(client: &RegistryClient, repo: &str, blob: &Blob) -> Result<(), String> {
    match &blob.content {
        BlobContent::Config(bytes) => client
            .push_blob_bytes(repo, &blob.digest, bytes.clone().into())
            .await
            .map_err(|e| format!("push config {} to {repo}: {e}", blob.digest)),
        BlobContent::Layer { seed, size } if *size <= STREAM_ABOVE => {
            let mut bytes = LayerBytes::new(*seed, *size);
            let all = bytes.next_piece(*size as usize).unwrap_or_default();
            client
                .push_blob_bytes(repo, &blob.digest, all.into())
                .await
                .map_err(|e| format!("push layer {} to {repo}: {e}", blob.digest))
        }
        BlobContent::Layer { seed, size } => {
            stream_layer(client, repo, &blob.digest, *seed, *size).await
        }
    }
}

/// Uploads a generated layer in PATCH chunks of [`SEED_CHUNK`], generating each chunk as it
/// goes: at most one chunk is in memory. `digest` must come from [`layer_digest`].
pub async fn stream_layer(
    client: &RegistryClient,
    repo: &str,
    digest: &Digest,
    seed: u64,
    size: u64,
) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Debug| format!("{what} {digest} to {repo}: {e:?}");
    let mut session = client
        .start_upload_once(repo)
        .await
        .map_err(|e| fail("start upload of", &e))?;
    let mut bytes = LayerBytes::new(seed, size);
    let mut offset = 0u64;
    while let Some(piece) = bytes.next_piece(SEED_CHUNK) {
        let len = piece.len() as u64;
        session = client
            .patch_chunk_once(&session, offset, len, piece.into())
            .await
            .map_err(|e| fail("PATCH", &e))?;
        offset += len;
    }
    client
        .finish_upload_once(&session, digest, None)
        .await
        .map_err(|e| fail("finish upload of", &e))
}

/// The fewest requests (and bytes) the protocol allows for copying a corpus.
#[derive(Debug, Clone, Copy)]
pub struct Minimum {
    /// One GET per unique blob, one GET per manifest, one listing per repository.
    pub source_cold: u64,
    /// POST+PUT per blob new to the registry, one mount per further repository holding it, one
    /// PUT per manifest, one listing per repository.
    pub target_cold: u64,
    /// Sum of unique blob sizes.
    pub source_bytes: u64,
    /// One listing per repository and one HEAD per tag (on each side).
    pub warm: u64,
}
