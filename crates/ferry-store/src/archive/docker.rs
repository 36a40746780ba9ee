//! `docker save` output read as a source: `manifest.json`'s images served as Docker v2 schema 2
//! manifests that ferry builds, whose config and layer digests are those of the bytes stored.
//!
//! docker-archive keeps no registry manifest, so the manifest's digest is ferry's (the same
//! for the same archive, every time), not the one the image had in the registry it came from;
//! the config's and the layers' digests are the original ones whenever the archive stores the
//! layers as the registry served them (skopeo does, naming each `<hex>.tar`; docker save stores
//! uncompressed tars, whose digest is the sha256 of those bytes).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, media};

use super::reader_tar::{self, TarEntry, TarIndex};
use crate::layout::INDEX_LIMIT;
use crate::layout::reader::MANIFEST_LIMIT;

/// The uncompressed Docker layer type (what `docker save` stores).
const DOCKER_LAYER_TAR: &str = "application/vnd.docker.image.rootfs.diff.tar";

/// One image of a docker-archive.
#[derive(Debug, Clone)]
pub struct DockerImage {
    /// Its `RepoTags` (`docker.io/myrepo/app:v1`), as written.
    pub repo_tags: Vec<String>,
    /// The manifest ferry built for it.
    pub manifest: Manifest,
    /// The tar entry holding each blob (config and layers).
    pub blobs: HashMap<Digest, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawImage {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Schema2<'a> {
    schema_version: u32,
    media_type: &'a str,
    config: Descriptor<'a>,
    layers: Vec<Descriptor<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor<'a> {
    media_type: &'a str,
    size: u64,
    digest: String,
}

/// Every image of the docker-archive indexed as `tar`.
pub async fn images(tar: &TarIndex) -> Result<Vec<DockerImage>, String> {
    Ok(images_and_files_read(tar).await?.0)
}

/// Every image, and how many layer files were read to learn their digests: each distinct file
/// once, however many images or layers name it (an archive listing one layer 20,000 times
/// is hashed once, not 20,000 times).
async fn images_and_files_read(tar: &TarIndex) -> Result<(Vec<DockerImage>, usize), String> {
    let entry = tar
        .get("manifest.json")
        .ok_or("not a docker-archive: entry \"manifest.json\" is missing")?;
    if entry.size > INDEX_LIMIT {
        return Err(format!(
            "entry \"manifest.json\" is {} bytes, larger than its limit of {INDEX_LIMIT}",
            entry.size
        ));
    }
    let bytes = reader_tar::read_entry(&tar.path, entry)
        .await
        .map_err(|e| format!("entry \"manifest.json\": {e}"))?;
    let raw: Vec<RawImage> = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "entry \"manifest.json\" does not parse: {}",
            crate::complaint(e)
        )
    })?;
    let mut sniffed = Sniffed::default();
    let mut out = Vec::new();
    for image in raw {
        out.push(one(tar, image, &mut sniffed).await?);
    }
    Ok((out, sniffed.reads))
}

/// What reading a layer file found (its digest and first bytes), by where its bytes are and
/// the digest its name claims; and how many files were read.
#[derive(Default)]
struct Sniffed {
    found: HashMap<(u64, Option<Digest>), (Digest, [u8; 4])>,
    reads: usize,
}

async fn one(
    tar: &TarIndex,
    image: RawImage,
    sniffed: &mut Sniffed,
) -> Result<DockerImage, String> {
    let mut blobs = HashMap::new();
    let find = |name: &str| -> Result<(String, TarEntry), String> {
        let clean = reader_tar::clean_name(name)
            .map_err(|e| format!("entry \"manifest.json\" names a file that {e}"))?;
        let entry = tar.get(&clean).ok_or_else(|| {
            format!(
                "entry \"manifest.json\" names {}, which the archive does not hold",
                crate::quoted(name)
            )
        })?;
        Ok((clean, entry))
    };
    let (config_name, config_entry) = find(&image.config)?;
    if config_entry.size > MANIFEST_LIMIT {
        return Err(format!(
            "entry {} (a config) is {} bytes, larger than {MANIFEST_LIMIT}",
            crate::quoted(&config_name),
            config_entry.size
        ));
    }
    let config = reader_tar::read_entry(&tar.path, config_entry)
        .await
        .map_err(|e| format!("entry {}: {e}", crate::quoted(&config_name)))?;
    let config_digest = Digest::of_bytes(Algorithm::Sha256, &config);
    blobs.insert(config_digest.clone(), config_name);
    let mut layers = Vec::new();
    for layer in &image.layers {
        let (name, entry) = find(layer)?;
        let named = digest_in_name(&name);
        let key = (entry.offset, named.clone());
        let (digest, magic) = match sniffed.found.get(&key) {
            Some(found) => found.clone(),
            None => {
                let path = tar.path.clone();
                let n = name.clone();
                // A layer named by its digest is checked as it streams; another is hashed now.
                let found = tokio::task::spawn_blocking(move || sniff(&path, entry, named))
                    .await
                    .map_err(|e| format!("entry {}: {e}", crate::quoted(&n)))?
                    .map_err(|e| format!("entry {}: {e}", crate::quoted(&n)))?;
                sniffed.reads += 1;
                sniffed.found.insert(key, found.clone());
                found
            }
        };
        layers.push(Descriptor {
            media_type: layer_type(&magic),
            size: entry.size,
            digest: digest.to_string(),
        });
        blobs.insert(digest, name);
    }
    let doc = Schema2 {
        schema_version: 2,
        media_type: media::DOCKER_MANIFEST,
        config: Descriptor {
            media_type: media::DOCKER_CONFIG,
            size: config.len() as u64,
            digest: config_digest.to_string(),
        },
        layers,
    };
    let bytes = serde_json::to_vec_pretty(&doc).map_err(|e| format!("building a manifest: {e}"))?;
    let manifest = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes: Bytes::from(bytes),
        media_type: media::DOCKER_MANIFEST.to_owned(),
    };
    Ok(DockerImage {
        repo_tags: image.repo_tags.unwrap_or_default(),
        manifest,
        blobs,
    })
}

/// The digest a layer's file name claims: `<hex>.tar`, `<hex>` or `blobs/sha256/<hex>`.
fn digest_in_name(name: &str) -> Option<Digest> {
    let last = name.rsplit('/').next().unwrap_or(name);
    let hex = last.strip_suffix(".tar").unwrap_or(last);
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then(|| Digest::parse(&format!("sha256:{hex}")).ok())
    .flatten()
}

/// The layer's first bytes (to tell its compression) and its digest: the one its name claims
/// (checked when it is read), or the sha256 of its bytes, read once here in chunks.
fn sniff(
    path: &std::path::Path,
    entry: TarEntry,
    named: Option<Digest>,
) -> std::io::Result<(Digest, [u8; 4])> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(entry.offset))?;
    let mut take = file.take(entry.size);
    let mut magic = [0u8; 4];
    let mut digester = ferry_distribution::digest::Digester::new(Algorithm::Sha256);
    let mut buf = vec![0u8; 256 * 1024];
    let mut first = true;
    loop {
        let n = take.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if first {
            let k = n.min(4);
            magic[..k].copy_from_slice(&buf[..k]);
            first = false;
            if let Some(d) = &named {
                return Ok((d.clone(), magic));
            }
        }
        digester.update(&buf[..n]);
    }
    Ok((named.unwrap_or_else(|| digester.finish()), magic))
}

fn layer_type(magic: &[u8; 4]) -> &'static str {
    match magic {
        [0x1f, 0x8b, _, _] => media::DOCKER_LAYER_TAR_GZIP,
        [0x28, 0xb5, 0x2f, 0xfd] => media::OCI_LAYER_TAR_ZSTD,
        _ => DOCKER_LAYER_TAR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_named_by_its_digest_is_recognised() {
        let hex = "a".repeat(64);
        for name in [
            format!("{hex}.tar"),
            format!("blobs/sha256/{hex}"),
            hex.clone(),
        ] {
            assert_eq!(
                digest_in_name(&name).map(|d| d.to_string()),
                Some(format!("sha256:{hex}")),
                "{name}"
            );
        }
        assert_eq!(digest_in_name("0123abcd/layer.tar"), None);
    }

    /// A docker-archive whose two images name one unnamed layer file four times between them
    /// (and once more through a link): the file is read once.
    #[tokio::test]
    async fn a_layer_file_named_many_times_is_read_once() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        {
            let mut builder = tar::Builder::new(file.as_file_mut());
            let mut add = |name: &str, body: &[u8]| {
                let mut header = tar::Header::new_ustar();
                header.set_size(body.len() as u64);
                header.set_path(name).unwrap();
                header.set_cksum();
                builder.append(&header, body).unwrap();
            };
            add("config.json", br#"{"architecture":"amd64","os":"linux"}"#);
            add("id/layer.tar", b"layer bytes");
            add(
                "manifest.json",
                br#"[{"Config":"config.json","RepoTags":["a:1"],"Layers":["id/layer.tar","id/layer.tar","id/layer.tar"]},
                    {"Config":"config.json","RepoTags":["b:1"],"Layers":["./id/layer.tar"]}]"#,
            );
            builder.finish().unwrap();
        }
        let tar = reader_tar::index(file.path(), reader_tar::Links::WithinArchive).unwrap();
        let (images, read) = images_and_files_read(&tar).await.unwrap();
        assert_eq!(images.len(), 2);
        assert_eq!(read, 1, "one layer file, read once");
        let layer = Digest::of_bytes(Algorithm::Sha256, b"layer bytes");
        for image in &images {
            assert!(image.blobs.contains_key(&layer), "{:?}", image.repo_tags);
        }
    }

    /// A name in manifest.json that the archive does not hold is quoted escaped and cut, as
    /// registry text is: a newline stays `\n`, 66 KB become a few hundred bytes.
    #[tokio::test]
    async fn a_hostile_name_in_manifest_json_is_quoted_escaped_and_cut() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let name = format!("x\nFORGED {}", "n".repeat(66_000));
        {
            let mut builder = tar::Builder::new(file.as_file_mut());
            let manifest = serde_json::to_vec(&serde_json::json!([
                {"Config": name, "RepoTags": ["a:1"], "Layers": []}
            ]))
            .unwrap();
            let mut header = tar::Header::new_ustar();
            header.set_size(manifest.len() as u64);
            header.set_path("manifest.json").unwrap();
            header.set_cksum();
            builder.append(&header, &manifest[..]).unwrap();
            builder.finish().unwrap();
        }
        let tar = reader_tar::index(file.path(), reader_tar::Links::WithinArchive).unwrap();
        let e = images(&tar).await.unwrap_err();
        assert!(e.contains(r#""x\nFORGED nnn"#), "{e:.300}");
        assert!(
            !e.contains('\n') && e.len() < 1_000,
            "{} bytes: {e:.300}",
            e.len()
        );
    }
}
