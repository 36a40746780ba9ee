//! Archives from outside, built here byte by byte: each hostile entry (`..`, absolute paths,
//! links, devices, duplicates, sizes past the end, oversized index or record, bad names, a blob
//! that is not what its name says) refused naming the entry; skopeo-style docker links followed.
//! The good images come from the test kit's builder; the hostile entries and the tar headers
//! stay hand-made here (the tar crate's own checks refuse the names under test).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferry_config::{self as config, Config, Origin};
use ferry_distribution::{Algorithm, Digest, media};
use ferry_store::archive::reader::ArchiveReader;
use ferry_sync::{Run, RunContext};
use ferry_testkit::fixtures::images::{ArchiveEntry, Images, digest_of};
use futures::StreamExt;
use serde_json::json;

/// One tar entry as the test writes it: any name, any type, any link, no checks.
struct Entry {
    name: String,
    kind: tar::EntryType,
    body: Vec<u8>,
    link: Option<String>,
}

fn file(name: &str, body: &[u8]) -> Entry {
    Entry {
        name: name.to_owned(),
        kind: tar::EntryType::Regular,
        body: body.to_vec(),
        link: None,
    }
}

fn link(name: &str, kind: tar::EntryType, target: &str) -> Entry {
    Entry {
        name: name.to_owned(),
        kind,
        body: Vec::new(),
        link: Some(target.to_owned()),
    }
}

/// The tar bytes of `entries`, headers written raw (the tar crate's own path checks would
/// refuse the hostile names), ended by the two zero blocks.
fn tar_bytes(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let mut h = tar::Header::new_ustar();
        {
            let old = h.as_old_mut();
            old.name = [0; 100];
            old.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
            if let Some(l) = &e.link {
                old.linkname[..l.len()].copy_from_slice(l.as_bytes());
            }
        }
        h.set_size(e.body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(e.kind);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&e.body);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn sha(bytes: &[u8]) -> Digest {
    Digest::of_bytes(Algorithm::Sha256, bytes)
}

fn blob_name(d: &Digest) -> String {
    format!("blobs/sha256/{}", d.hex())
}

/// The builder's archive entry as this file's raw entry (a link is a symbolic link).
impl From<ArchiveEntry> for Entry {
    fn from(e: ArchiveEntry) -> Self {
        Entry {
            kind: match e.link {
                Some(_) => tar::EntryType::Symlink,
                None => tar::EntryType::Regular,
            },
            name: e.name,
            body: e.body,
            link: e.link,
        }
    }
}

/// A one-image OCI archive's entries from the test kit's builder (`oci-layout`, config, a layer
/// of `layer`, manifest, index.json naming it `ref_name`) and the layer's and manifest's digests.
fn oci_image(ref_name: &str, layer: &[u8]) -> (Vec<Entry>, Digest, Digest) {
    let mut images = Images::new();
    let manifest = images.image(br#"{"architecture":"amd64","os":"linux"}"#, &[layer]);
    images.tag(&manifest, Some(ref_name));
    let entries = images.oci_entries().into_iter().map(Entry::from).collect();
    (
        entries,
        sha(layer),
        Digest::parse(&digest_of(&manifest)).unwrap(),
    )
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn oci(path: &Path) -> Origin {
    Origin::OciArchive {
        path: path.to_path_buf(),
        reference: None,
    }
}

async fn refusal(origin: &Origin) -> String {
    match ArchiveReader::open(origin).await {
        Ok(_) => panic!("{origin} was opened"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn every_hostile_entry_refuses_the_archive_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (good, _, _) = oci_image("registry.example/app:v1", b"layer bytes");
    let hex = "e".repeat(64);
    let cases: Vec<(&str, Entry, &str)> = vec![
        ("dotdot", file("blobs/../../etc/x", b"x"), ".. component"),
        ("absolute", file("/etc/passwd", b"x"), "absolute path"),
        (
            "symlink",
            link(
                &format!("blobs/sha256/{hex}"),
                tar::EntryType::Symlink,
                "/etc/passwd",
            ),
            "symbolic link",
        ),
        (
            "hardlink",
            link(
                &format!("blobs/sha256/{hex}"),
                tar::EntryType::Link,
                "index.json",
            ),
            "hard link",
        ),
        (
            "char",
            Entry {
                name: "blobs/sha256/dev".into(),
                kind: tar::EntryType::Char,
                body: Vec::new(),
                link: None,
            },
            "device file or FIFO",
        ),
        (
            "fifo",
            Entry {
                name: "blobs/sha256/fifo".into(),
                kind: tar::EntryType::Fifo,
                body: Vec::new(),
                link: None,
            },
            "device file or FIFO",
        ),
        ("duplicate", file("index.json", b"{}"), "appears twice"),
        (
            "control",
            file("blobs/sha256/a\u{1b}[2J", b"x"),
            "control character",
        ),
        ("encoded slash", file("blobs%2Fsha256%2Fx", b"x"), "%2f"),
    ];
    for (label, hostile, reason) in cases {
        let mut entries: Vec<Entry> = good
            .iter()
            .map(|e| Entry {
                name: e.name.clone(),
                kind: e.kind,
                body: e.body.clone(),
                link: e.link.clone(),
            })
            .collect();
        let name = hostile.name.clone();
        entries.insert(2, hostile);
        let path = write(dir.path(), &format!("{label}.tar"), &tar_bytes(&entries));
        let error = refusal(&oci(&path)).await;
        // Named as registry text is shown: escaped (`\x1b`), cut.
        let shown = ferry_distribution::text::for_error(&name);
        assert!(
            error.contains(reason) && error.contains(&format!("\"{shown}\"")),
            "{label}: {error}"
        );
        assert!(
            error.contains(&format!("oci-archive:{}", path.display())),
            "{label}: {error}"
        );
    }
    // The same image without a hostile entry opens, and serves its tag.
    let path = write(dir.path(), "good.tar", &tar_bytes(&good));
    let reader = ArchiveReader::open(&oci(&path)).await.unwrap();
    assert_eq!(reader.list_tags().unwrap(), ["v1"]);
}

#[tokio::test]
async fn a_truncated_archive_is_refused_naming_the_entry_it_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let layer = vec![7u8; 100_000];
    let (entries, l, _) = oci_image("registry.example/app:v1", &layer);
    let bytes = tar_bytes(&entries);
    // Cut inside the layer's body: its header declares bytes the file no longer has.
    let cut = write(dir.path(), "cut.tar", &bytes[..3 * 512 + 50_000]);
    let error = refusal(&oci(&cut)).await;
    assert!(
        error.contains(&blob_name(&l)) && error.contains("truncated"),
        "{error}"
    );
    // Cut at an entry's end: no entry is half there, but the end blocks are missing.
    let whole_entries = tar_bytes(&entries[..3]);
    let at_boundary = write(
        dir.path(),
        "boundary.tar",
        &whole_entries[..whole_entries.len() - 1024],
    );
    let error = refusal(&oci(&at_boundary)).await;
    assert!(error.contains("truncated"), "{error}");
}

#[tokio::test]
async fn a_blob_whose_bytes_do_not_match_its_name_never_reaches_its_last_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let layer = noise(1_000_000);
    let (mut entries, l, _) = oci_image("registry.example/app:v1", &layer);
    // Same size, other bytes, under the layer's name.
    let mut other = layer.clone();
    other[999_999] ^= 1;
    entries[2].body = other;
    let path = write(dir.path(), "swapped.tar", &tar_bytes(&entries));
    let config = empty_config();
    let run = Run::new(config.clone(), RunContext::new(&config));
    let source = run.source(&oci(&path)).await.unwrap();
    let mut stream = source.open_blob(&l, layer.len() as u64, 0).await.unwrap();
    let mut delivered = 0usize;
    let mut failure = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => delivered += chunk.len(),
            Err(f) => failure = Some(f),
        }
    }
    assert!(
        delivered < layer.len(),
        "{delivered} bytes delivered of a mismatched blob"
    );
    let failure = failure.expect("the mismatch is an error");
    assert!(
        failure.reason().contains(&l.to_string()),
        "{}",
        failure.reason()
    );
    // Resumed part way, it is still checked over the whole blob.
    let mut resumed = source
        .open_blob(&l, layer.len() as u64, 500_000)
        .await
        .unwrap();
    let mut last = None;
    while let Some(item) = resumed.next().await {
        last = Some(item);
    }
    assert!(matches!(last, Some(Err(_))), "the resumed read passed");
    // The honest blob streams whole, in chunks.
    let (entries, l, _) = oci_image("registry.example/app:v1", &layer);
    let path = write(dir.path(), "honest.tar", &tar_bytes(&entries));
    let source = run.source(&oci(&path)).await.unwrap();
    let got: Vec<Bytes> = source
        .open_blob(&l, layer.len() as u64, 0)
        .await
        .unwrap()
        .map(|c| c.unwrap())
        .collect()
        .await;
    assert!(got.len() > 1);
    assert_eq!(got.concat(), layer);
}

#[tokio::test]
async fn an_index_or_bundle_record_past_its_limit_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (mut entries, _, _) = oci_image("registry.example/app:v1", b"layer");
    let mut big = b"{\"manifests\":[]}".to_vec();
    big.resize(32 * 1024 * 1024 + 1, b' ');
    entries[4].body = big;
    let path = write(dir.path(), "big-index.tar", &tar_bytes(&entries));
    let error = refusal(&oci(&path)).await;
    assert!(
        error.contains("\"index.json\"") && error.contains("limit"),
        "{error}"
    );
    std::fs::remove_file(&path).unwrap();

    let (mut entries, _, _) = oci_image("registry.example/app:v1", b"layer");
    let mut record = b"{}".to_vec();
    record.resize(ferry_store::bundle::BUNDLE_ENTRY_LIMIT as usize + 1, b' ');
    entries.push(file("ferry-bundle.json", &record));
    let path = write(dir.path(), "big-record.tar", &tar_bytes(&entries));
    let error = refusal(&oci(&path)).await;
    assert!(
        error.contains("ferry-bundle.json") && error.contains("limit"),
        "{error}"
    );
    std::fs::remove_file(&path).unwrap();
}

/// A ferry-bundle.json for `entries` (an OCI image's) with the digest computed as export does.
fn record_for(entries: &[Entry]) -> serde_json::Value {
    let carried: Vec<String> = entries
        .iter()
        .filter_map(|e| e.name.strip_prefix("blobs/sha256/"))
        .map(|h| format!("sha256:{h}"))
        .collect();
    let index = &entries
        .iter()
        .find(|e| e.name == "index.json")
        .unwrap()
        .body;
    // Every index.json entry is one of the record's images, under a mapping of its repository.
    let parsed: serde_json::Value = serde_json::from_slice(index).unwrap();
    let mut mappings = Vec::new();
    let mut images = Vec::new();
    for m in parsed["manifests"].as_array().unwrap() {
        let name = m["annotations"]["org.opencontainers.image.ref.name"]
            .as_str()
            .unwrap();
        let repo = name.rsplit_once(':').unwrap().0;
        mappings.push(json!({"source": repo, "targets": [repo]}));
        images.push(
            json!({"reference": name, "source": name, "digest": m["digest"],
            "mapping": mappings.len() - 1}),
        );
    }
    json!({
        "format": ferry_store::bundle::BUNDLE_FORMAT, "created": "2026-12-01T00:00:00Z",
        "mappings": mappings, "images": images,
        "bases": [{"digest": "sha256:00", "name": "week-47.tar"}],
        "content": carried.clone(), "carried": carried.clone(),
        "digest": ferry_store::bundle::bundle_digest(&carried, index),
    })
}

#[tokio::test]
async fn a_bundle_whose_record_does_not_match_what_it_carries_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut entries, _, _) = oci_image("registry.example/app:v1", b"layer");
    let record = record_for(&entries);
    entries.push(file(
        "ferry-bundle.json",
        &serde_json::to_vec(&record).unwrap(),
    ));
    let path = write(dir.path(), "bundle.tar", &tar_bytes(&entries));
    let reader = ArchiveReader::open(&oci(&path)).await.unwrap();
    assert_eq!(reader.record().unwrap().bases[0].name, "week-47.tar");
    // A blob slipped in after the export: the record no longer describes the bundle.
    let extra = b"slipped in";
    entries.insert(1, file(&blob_name(&sha(extra)), extra));
    let path = write(dir.path(), "altered.tar", &tar_bytes(&entries));
    let error = refusal(&oci(&path)).await;
    assert!(
        error.contains("ferry-bundle.json") && error.contains("altered"),
        "{error}"
    );
}

/// A docker-archive as skopeo writes it (the test kit's builder with legacy links): layers as
/// `<hex>.tar`, the legacy `<hex>/layer.tar` linking to them, `extra` entries appended.
fn docker_archive(layer: &[u8], extra: Vec<Entry>) -> (Vec<u8>, Digest) {
    let config = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}"#;
    let mut images = Images::new();
    images.docker_image(config, &[layer], &["docker.io/myrepo/app:v1"]);
    let mut entries: Vec<Entry> = images
        .docker_entries(true)
        .into_iter()
        .map(Entry::from)
        .collect();
    entries.extend(extra);
    (tar_bytes(&entries), sha(layer))
}

#[tokio::test]
async fn a_docker_archive_follows_its_links_inside_itself_only() {
    let dir = tempfile::tempdir().unwrap();
    let layer = b"uncompressed layer tar bytes";
    let (bytes, l) = docker_archive(layer, Vec::new());
    let path = write(dir.path(), "d.tar", &bytes);
    let origin = Origin::DockerArchive {
        path: path.clone(),
        reference: Some("myrepo/app:v1".into()),
    };
    let reader = ArchiveReader::open(&origin).await.unwrap();
    assert_eq!(reader.list_tags().unwrap(), ["v1"]);
    let info = reader.head_manifest("v1").await.unwrap().unwrap();
    assert_eq!(info.media_type, media::DOCKER_MANIFEST);
    let config = empty_config();
    let run = Run::new(config.clone(), RunContext::new(&config));
    let source = run.source(&origin).await.unwrap();
    let m = source.get_manifest("v1").await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
    assert_eq!(doc["layers"][0]["digest"], l.to_string());
    let got: Vec<Bytes> = source
        .open_blob(&l, layer.len() as u64, 0)
        .await
        .unwrap()
        .map(|c| c.unwrap())
        .collect()
        .await;
    assert_eq!(got.concat(), layer);

    let hostile: Vec<(&str, Entry, &str)> = vec![
        (
            "outside",
            link(
                "evil/layer.tar",
                tar::EntryType::Symlink,
                "../../etc/passwd",
            ),
            "outside the archive",
        ),
        (
            "absolute",
            link("evil/layer.tar", tar::EntryType::Symlink, "/etc/passwd"),
            "absolute path",
        ),
        (
            "dangling",
            link("evil/layer.tar", tar::EntryType::Link, "nothere.tar"),
            "does not hold",
        ),
    ];
    for (label, entry, reason) in hostile {
        let (bytes, _) = docker_archive(layer, vec![entry]);
        let path = write(dir.path(), &format!("{label}.tar"), &bytes);
        let error = refusal(&Origin::DockerArchive {
            path,
            reference: None,
        })
        .await;
        assert!(
            error.contains("evil/layer.tar") && error.contains(reason),
            "{label}: {error}"
        );
    }
    // A chain longer than four links (a loop is one) is not followed.
    let chain: Vec<Entry> = (0..6)
        .map(|n| {
            link(
                &format!("c{n}"),
                tar::EntryType::Symlink,
                &format!("c{}", (n + 1) % 6),
            )
        })
        .collect();
    let (bytes, _) = docker_archive(layer, chain);
    let path = write(dir.path(), "loop.tar", &bytes);
    let error = refusal(&Origin::DockerArchive {
        path,
        reference: None,
    })
    .await;
    assert!(error.contains("chain of more than 4 links"), "{error}");
}

fn empty_config() -> Config {
    Config {
        concurrency: config::DEFAULT_CONCURRENCY,
        engine: config::EngineSettings::default(),
        registries: Vec::new(),
        mappings: Vec::new(),
        events: None,
        listener_tls: None,
        state_dir: None,
        bundle_keys: Vec::new(),
    }
}

/// Bytes that do not repeat within a chunk.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
