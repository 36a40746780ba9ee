//! `ferry export`'s side of a bundle: what the record says of the config, and the records of
//! earlier bundles (`--since`) read from their tar (headers only; a gzip or zstd one read
//! through once) or a kept `ferry-bundle.json`.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use super::{
    BUNDLE_ENTRY, BUNDLE_ENTRY_LIMIT, BUNDLE_FORMAT, BundleBase, BundleMapping, BundleRecord,
};
use crate::archive::input::{self, Packing};
use crate::archive::writer::BundleSpec;
use ferry_config::Config;

/// `index.json` larger than this is refused while checking an earlier bundle's digest.
const INDEX_LIMIT: u64 = 64 * 1024 * 1024;

/// The config's mappings as a bundle records them: sources and targets as shown (a
/// whole-registry mapping's target prefixes, under which its repositories go), nothing of the
/// registries (no credentials, no settings).
pub fn mappings_of(config: &Config) -> Vec<BundleMapping> {
    config
        .mappings
        .iter()
        .map(|m| BundleMapping {
            source: m.source.clone(),
            targets: match &m.repositories {
                Some(glob) => glob.targets.iter().map(ToString::to_string).collect(),
                None => m.targets.iter().map(ToString::to_string).collect(),
            },
        })
        .collect()
}

/// What a new bundle builds on: each `--since` record's digest and name, and the union of
/// their `content` (left out of the new tar).
pub fn bases_of(records: &[(String, BundleRecord)]) -> (Vec<BundleBase>, HashSet<String>) {
    let mut bases = Vec::new();
    let mut content = HashSet::new();
    for (name, r) in records {
        if !bases.iter().any(|b: &BundleBase| b.digest == r.digest) {
            bases.push(BundleBase {
                digest: r.digest.clone(),
                name: name.clone(),
            });
        }
        content.extend(r.content.iter().cloned());
    }
    (bases, content)
}

/// The spec of a bundle for `config` built on `records`, created at `created` (RFC 3339).
pub fn spec(config: &Config, records: &[(String, BundleRecord)], created: String) -> BundleSpec {
    let (bases, base_content) = bases_of(records);
    BundleSpec {
        mappings: mappings_of(config),
        bases,
        base_content,
        created,
        signer: None,
    }
}

/// Reads the record of the bundle at `path` (a ferry bundle's tar, plain or compressed with
/// gzip or zstd, or its `ferry-bundle.json` kept beside it), blocking: call it on a blocking
/// thread. Errors name the file and entry.
pub fn read_since(path: &Path) -> Result<BundleRecord, String> {
    let shown = path.display();
    let mut file = std::fs::File::open(path).map_err(|e| format!("--since {shown}: {e}"))?;
    let mut head = Vec::with_capacity(512);
    (&mut file)
        .take(512)
        .read_to_end(&mut head)
        .map_err(|e| format!("--since {shown}: {e}"))?;
    if head.first() == Some(&b'{') {
        let bytes = read_bounded(std::io::Cursor::new(head).chain(file), BUNDLE_ENTRY_LIMIT)
            .map_err(|e| format!("--since {shown}: {e}"))?;
        return parse(&bytes).map_err(|e| format!("--since {shown}: {e}"));
    }
    let packing = input::sniff(&head).map_err(|e| format!("--since {shown}: {e}"))?;
    match packing {
        // A plain tar: seek past every body.
        Packing::Tar => {
            drop(file);
            let file = std::fs::File::open(path).map_err(|e| format!("--since {shown}: {e}"))?;
            let mut archive = tar::Archive::new(file);
            from_tar(archive.entries_with_seek(), path)
        }
        // A compressed one is read through once, its bodies decompressed and dropped.
        Packing::Gzip | Packing::Zstd => {
            let mut archive = tar::Archive::new(input::decoded(head, file, packing));
            from_tar(archive.entries(), path)
        }
    }
}

fn parse(bytes: &[u8]) -> Result<BundleRecord, String> {
    let r: BundleRecord =
        serde_json::from_slice(bytes).map_err(|e| format!("{BUNDLE_ENTRY} does not parse: {e}"))?;
    if r.format != BUNDLE_FORMAT {
        return Err(format!(
            "{BUNDLE_ENTRY} has format {:?}, not {BUNDLE_FORMAT:?}",
            r.format
        ));
    }
    Ok(r)
}

/// At most `limit` bytes; more is an error.
fn read_bounded(r: impl Read, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    r.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "larger than its limit of {limit} bytes"
        )));
    }
    Ok(out)
}

/// The record in a bundle's tar: its entries' headers are read in turn, seeking past every
/// body; only `ferry-bundle.json` and `index.json` are read (each bounded, each once), and the
/// record's digest must match what the tar holds.
fn from_tar<R: Read>(
    entries: std::io::Result<tar::Entries<'_, R>>,
    path: &Path,
) -> Result<BundleRecord, String> {
    let shown = path.display();
    let entries = entries.map_err(|e| format!("--since {shown}: not a tar: {e}"))?;
    let mut record: Option<Vec<u8>> = None;
    let mut index: Option<Vec<u8>> = None;
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("--since {shown}: a tar entry cannot be read: {e}"))?;
        let name = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = name.trim_start_matches("./");
        let (slot, limit) = match name {
            BUNDLE_ENTRY => (&mut record, BUNDLE_ENTRY_LIMIT),
            "index.json" => (&mut index, INDEX_LIMIT),
            _ => continue,
        };
        if slot.is_some() {
            return Err(format!("--since {shown}: entry {name} appears twice"));
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > limit {
            return Err(format!(
                "--since {shown}: entry {name} is {size} bytes, over its limit of {limit}"
            ));
        }
        *slot = Some(
            read_bounded(entry, limit)
                .map_err(|e| format!("--since {shown}: entry {name}: {e}"))?,
        );
    }
    let Some(record) = record else {
        return Err(format!(
            "--since {shown}: no {BUNDLE_ENTRY} in it: not a ferry bundle (give its {BUNDLE_ENTRY} instead)"
        ));
    };
    let record = parse(&record).map_err(|e| format!("--since {shown}: {e}"))?;
    let index = index.ok_or_else(|| format!("--since {shown}: no index.json in it"))?;
    let digest = super::bundle_digest(&record.carried, &index);
    if digest != record.digest {
        return Err(format!(
            "--since {shown}: {BUNDLE_ENTRY} names digest {} but the tar's content gives {digest}",
            record.digest
        ));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(content: &[&str]) -> BundleRecord {
        BundleRecord {
            format: BUNDLE_FORMAT.into(),
            created: "2026-12-02T00:00:00Z".into(),
            mappings: Vec::new(),
            images: Vec::new(),
            bases: Vec::new(),
            content: content.iter().map(|s| s.to_string()).collect(),
            carried: Vec::new(),
            digest: format!("sha256:{}", content.join("")),
            index: None,
            sizes: Default::default(),
        }
    }

    #[test]
    fn bases_are_the_union_of_every_since_each_named_once() {
        let a = ("a.tar".to_owned(), record(&["x", "y"]));
        let b = ("b.json".to_owned(), record(&["z"]));
        let (bases, content) = bases_of(&[a.clone(), b, a]);
        assert_eq!(bases.len(), 2);
        assert_eq!(bases[0].name, "a.tar");
        let mut c: Vec<_> = content.into_iter().collect();
        c.sort();
        assert_eq!(c, ["x", "y", "z"]);
    }

    fn tar_with(entries: &[(&str, Vec<u8>)]) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        let mut b = tar::Builder::new(f.reopen().unwrap());
        for (name, bytes) in entries {
            let mut h = tar::Header::new_ustar();
            h.set_path(name).unwrap();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append(&h, &bytes[..]).unwrap();
        }
        b.finish().unwrap();
        f
    }

    #[test]
    fn a_tar_whose_record_does_not_match_its_content_is_refused() {
        let mut r = record(&["sha256:aa"]);
        r.carried = vec!["sha256:aa".into()];
        r.digest = super::super::bundle_digest(&r.carried, b"{}");
        let good = tar_with(&[
            ("index.json", b"{}".to_vec()),
            (BUNDLE_ENTRY, serde_json::to_vec(&r).unwrap()),
        ]);
        assert_eq!(read_since(good.path()).unwrap(), r);
        let tampered = tar_with(&[
            ("index.json", b"{ }".to_vec()),
            (BUNDLE_ENTRY, serde_json::to_vec(&r).unwrap()),
        ]);
        let err = read_since(tampered.path()).unwrap_err();
        assert!(err.contains("but the tar's content gives"), "{err}");
        let twice = tar_with(&[
            ("index.json", b"{}".to_vec()),
            (BUNDLE_ENTRY, serde_json::to_vec(&r).unwrap()),
            (BUNDLE_ENTRY, serde_json::to_vec(&r).unwrap()),
        ]);
        let err = read_since(twice.path()).unwrap_err();
        assert!(err.contains("appears twice"), "{err}");
        let none = tar_with(&[("index.json", b"{}".to_vec())]);
        assert!(
            read_since(none.path())
                .unwrap_err()
                .contains("not a ferry bundle")
        );
    }

    /// A bundle kept compressed (`ferry export -o - | zstd`) is read as its tar; garbage is
    /// refused naming the bytes it starts with.
    #[test]
    fn a_compressed_bundle_gives_its_record_and_garbage_is_named() {
        let mut r = record(&["sha256:aa"]);
        r.carried = vec!["sha256:aa".into()];
        r.digest = super::super::bundle_digest(&r.carried, b"{}");
        let tar = tar_with(&[
            ("index.json", b"{}".to_vec()),
            ("blobs/sha256/pad", vec![9u8; 70_000]),
            (BUNDLE_ENTRY, serde_json::to_vec(&r).unwrap()),
        ]);
        let bytes = std::fs::read(tar.path()).unwrap();
        let zst = ruzstd::encoding::compress_to_vec(
            &bytes[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &bytes).unwrap();
        for packed in [zst, gz.finish().unwrap()] {
            let f = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(f.path(), packed).unwrap();
            assert_eq!(read_since(f.path()).unwrap(), r);
        }
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), [0x42, 0x5a, 0x68, 0x39, 0x31, 0x41, 0x59, 0x26]).unwrap();
        let err = read_since(f.path()).unwrap_err();
        assert!(
            err.contains("42 5a 68 39") && err.contains("bzip2"),
            "{err}"
        );
    }

    #[test]
    fn a_record_entry_over_its_limit_is_refused_before_it_is_read() {
        // A header that claims more than the limit, and no body: refused on the header alone.
        let mut h = tar::Header::new_ustar();
        h.set_path(BUNDLE_ENTRY).unwrap();
        h.set_size(BUNDLE_ENTRY_LIMIT + 1);
        h.set_mode(0o644);
        h.set_cksum();
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), h.as_bytes()).unwrap();
        let err = read_since(f.path()).unwrap_err();
        assert!(err.contains("over its limit"), "{err}");
        assert!(
            err.contains(BUNDLE_ENTRY),
            "the error names the entry: {err}"
        );
    }
}
