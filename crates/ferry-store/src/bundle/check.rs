//! A bundle's record held against the tar it travels in, entry by entry: `index.json`'s names,
//! digests and sizes, every carried entry's size, and every image under its own mapping.

use std::collections::{BTreeMap, BTreeSet};

use super::{BUNDLE_ENTRY, BUNDLE_FORMAT, BundleRecord, sha256_of};
use crate::layout::IndexEntry;

/// The tar's blob entries as the record must list them: `sha256:<hex>` → size.
pub type Carried = BTreeMap<String, u64>;

/// At most this many disagreements are named in one refusal.
const NAMED: usize = 3;

/// A bundle's record, parsed and its digest recomputed from the blobs the tar holds and
/// `index.json`'s bytes.
pub(crate) fn parse_record(
    carried: &[String],
    bytes: &[u8],
    index_json: &[u8],
) -> Result<BundleRecord, String> {
    let record: BundleRecord = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "entry {BUNDLE_ENTRY:?} does not parse: {}",
            crate::complaint(e)
        )
    })?;
    if record.format != BUNDLE_FORMAT {
        return Err(format!(
            "entry {BUNDLE_ENTRY:?} is format {}; this ferry reads {BUNDLE_FORMAT}",
            crate::quoted(&record.format)
        ));
    }
    let digest = super::bundle_digest(carried, index_json);
    if digest != record.digest {
        return Err(format!(
            "entry {BUNDLE_ENTRY:?} names the bundle {}, but its blobs and index.json make {digest}: \
             the bundle was altered or is not the one its record describes",
            crate::quoted(&record.digest)
        ));
    }
    Ok(record)
}

/// Whether `record` describes exactly this tar: its `index.json` (by digest, when the record
/// names it), every carried entry with its size (when the record gives sizes), and every
/// `index.json` entry as one of the record's images under the same name and digest, each image
/// under a target of its own mapping. An image whose root the tar does not carry (a base's)
/// must not be in `index.json`. Every disagreement is named (the first few), never printed raw.
pub fn against_tar(
    record: &BundleRecord,
    index: &[IndexEntry],
    index_json: &[u8],
    carried: &Carried,
) -> Result<(), String> {
    let mut wrong: Vec<String> = Vec::new();
    if let Some(named) = &record.index {
        let actual = sha256_of(index_json);
        if *named != actual {
            wrong.push(format!("index.json is {actual}, the record names {named}"));
        }
    }
    let listed: BTreeSet<&str> = record.carried.iter().map(String::as_str).collect();
    let held: BTreeSet<&str> = carried.keys().map(String::as_str).collect();
    for d in held.difference(&listed) {
        wrong.push(format!(
            "the tar carries {}, which the record does not list",
            crate::quoted(d)
        ));
    }
    for d in listed.difference(&held) {
        wrong.push(format!(
            "the record lists {}, which the tar does not carry",
            crate::quoted(d)
        ));
    }
    if !record.sizes.is_empty() {
        for (d, size) in carried {
            match record.sizes.get(d) {
                Some(s) if s == size => {}
                Some(s) => wrong.push(format!(
                    "{} is {size} bytes, the record says {s}",
                    crate::quoted(d)
                )),
                None => wrong.push(format!("the record gives no size for {}", crate::quoted(d))),
            }
        }
    }
    let mut images: BTreeMap<&str, &str> = BTreeMap::new();
    for image in &record.images {
        if images
            .insert(image.reference.as_str(), image.digest.as_str())
            .is_some()
        {
            wrong.push(format!(
                "the record lists {} twice",
                crate::quoted(&image.reference)
            ));
        }
        // A record written before bundles were signed (no `index`) named a whole-registry
        // mapping without targets: its images are held against index.json only.
        if record.index.is_none() {
            continue;
        }
        match record.mappings.get(image.mapping) {
            None => wrong.push(format!(
                "image {} names mapping {}, the record has {}",
                crate::quoted(&image.reference),
                image.mapping,
                record.mappings.len()
            )),
            Some(m)
                if !m
                    .targets
                    .iter()
                    .any(|t| under(&image.reference, t) || layout_tag(&image.reference, t)) =>
            {
                wrong.push(format!(
                    "image {} is not under a target of its mapping ({})",
                    crate::quoted(&image.reference),
                    crate::quoted(&m.targets.join(", "))
                ))
            }
            Some(_) => {}
        }
    }
    let mut in_index: BTreeSet<&str> = BTreeSet::new();
    for entry in index {
        let digest = entry.digest.to_string();
        let Some(name) = entry.ref_name.as_deref() else {
            wrong.push(format!("index.json entry {digest} has no name"));
            continue;
        };
        in_index.insert(name);
        match images.get(name) {
            None => wrong.push(format!(
                "index.json names {}, which the record does not list",
                crate::quoted(name)
            )),
            Some(d) if *d != digest => wrong.push(format!(
                "index.json names {} as {digest}, the record as {}",
                crate::quoted(name),
                crate::quoted(d)
            )),
            Some(_) => {}
        }
        match (carried.get(&digest), entry.size) {
            (None, _) => wrong.push(format!(
                "index.json entry {} is {digest}, which the tar does not carry",
                crate::quoted(name)
            )),
            (Some(held), Some(size)) if *held != size => wrong.push(format!(
                "index.json gives {} {size} bytes, the tar holds {held}",
                crate::quoted(name)
            )),
            _ => {}
        }
    }
    for (name, digest) in &images {
        if carried.contains_key(*digest) && !in_index.contains(name) {
            wrong.push(format!(
                "the record lists {} ({}), which index.json does not name",
                crate::quoted(name),
                crate::quoted(digest)
            ));
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    let more = wrong.len().saturating_sub(NAMED);
    let mut shown: Vec<String> = wrong.into_iter().take(NAMED).collect();
    if more > 0 {
        shown.push(format!("and {more} more"));
    }
    Err(format!(
        "the bundle's record and its content disagree: {}",
        shown.join("; ")
    ))
}

/// Whether `reference` is a bare tag and `target` a layout (`oci:DIR`): a bundle names a layout
/// target's images by their tag alone.
fn layout_tag(reference: &str, target: &str) -> bool {
    target.starts_with("oci:") && !reference.is_empty() && !reference.contains(['/', ':', '@'])
}

/// Whether `reference` is `target` with a tag, a digest or a deeper path (a glob mapping's).
fn under(reference: &str, target: &str) -> bool {
    reference
        .strip_prefix(target)
        .is_some_and(|rest| rest.starts_with([':', '@', '/']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{BUNDLE_FORMAT, BundleImage, BundleMapping, bundle_digest};
    use ferry_distribution::Digest;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn entry(name: &str, digest: &str, size: u64) -> IndexEntry {
        IndexEntry {
            digest: Digest::parse(digest).unwrap(),
            media_type: None,
            size: Some(size),
            tag: None,
            ref_name: Some(name.to_owned()),
        }
    }

    fn good() -> (BundleRecord, Vec<IndexEntry>, Vec<u8>, Carried) {
        let index_json = b"{}".to_vec();
        let carried: Carried = [(A.to_owned(), 10), (B.to_owned(), 20)].into();
        let keys: Vec<String> = carried.keys().cloned().collect();
        let record = BundleRecord {
            format: BUNDLE_FORMAT.into(),
            created: "2026-12-06T00:00:00Z".into(),
            mappings: vec![BundleMapping {
                source: "src.example/app".into(),
                targets: vec!["site.example/mirror/app".into()],
            }],
            images: vec![BundleImage {
                reference: "site.example/mirror/app:v1".into(),
                source: "src.example/app:v1".into(),
                digest: A.into(),
                mapping: 0,
            }],
            bases: Vec::new(),
            content: keys.clone(),
            carried: keys.clone(),
            digest: bundle_digest(&keys, &index_json),
            index: Some(sha256_of(&index_json)),
            sizes: carried.clone(),
        };
        let index = vec![entry("site.example/mirror/app:v1", A, 10)];
        (record, index, index_json, carried)
    }

    #[test]
    fn a_record_that_describes_its_tar_passes() {
        let (r, i, j, c) = good();
        against_tar(&r, &i, &j, &c).unwrap();
    }

    #[test]
    fn a_renamed_index_entry_is_refused() {
        // The retarget: one ref.name rewritten in index.json (its digest recomputed elsewhere).
        let (r, _, j, c) = good();
        let index = vec![entry("site.example/prod/critical:latest", A, 10)];
        let e = against_tar(&r, &index, &j, &c).unwrap_err();
        assert!(e.contains("prod/critical:latest"), "{e}");
    }

    #[test]
    fn a_record_image_moved_out_of_its_mapping_is_refused() {
        let (mut r, mut i, j, c) = good();
        r.images[0].reference = "site.example/prod/critical:latest".into();
        i[0].ref_name = Some("site.example/prod/critical:latest".into());
        let e = against_tar(&r, &i, &j, &c).unwrap_err();
        assert!(e.contains("not under a target of its mapping"), "{e}");
    }

    #[test]
    fn an_older_record_is_held_against_index_json_but_not_its_mappings() {
        let (mut r, i, j, c) = good();
        r.index = None;
        r.mappings[0].targets = Vec::new();
        against_tar(&r, &i, &j, &c).unwrap();
        let index = vec![entry("site.example/prod/critical:latest", A, 10)];
        assert!(against_tar(&r, &index, &j, &c).is_err());
    }

    #[test]
    fn a_layout_targets_image_is_named_by_its_tag() {
        let (mut r, mut i, j, c) = good();
        r.mappings[0].targets = vec!["oci:./mirror".into()];
        r.images[0].reference = "v1".into();
        i[0].ref_name = Some("v1".into());
        against_tar(&r, &i, &j, &c).unwrap();
        r.mappings[0].targets = vec!["site.example/other".into()];
        assert!(against_tar(&r, &i, &j, &c).is_err());
    }

    #[test]
    fn sizes_digests_and_the_index_digest_must_agree() {
        let (r, i, j, mut c) = good();
        c.insert(B.to_owned(), 21);
        assert!(
            against_tar(&r, &i, &j, &c)
                .unwrap_err()
                .contains("21 bytes")
        );
        let (r, i, _, c) = good();
        assert!(
            against_tar(&r, &i, b"{ }", &c)
                .unwrap_err()
                .contains("index.json is")
        );
        let (r, _, j, c) = good();
        let i = vec![entry("site.example/mirror/app:v1", B, 20)];
        assert!(
            against_tar(&r, &i, &j, &c)
                .unwrap_err()
                .contains("the record as")
        );
        let (r, mut i, j, c) = good();
        i[0].size = Some(11);
        assert!(
            against_tar(&r, &i, &j, &c)
                .unwrap_err()
                .contains("11 bytes")
        );
        let (r, _, j, c) = good();
        let e = against_tar(&r, &[], &j, &c).unwrap_err();
        assert!(e.contains("which index.json does not name"), "{e}");
        let (r, i, j, mut c) = good();
        c.remove(B);
        assert!(
            against_tar(&r, &i, &j, &c)
                .unwrap_err()
                .contains("which the tar does not carry")
        );
    }

    proptest::proptest! {
        /// A record with hostile fields (any text as names, targets and digests, any mapping
        /// index, any size) is checked, never a panic, and its refusal stays one bounded line.
        #[test]
        fn a_hostile_record_is_refused_in_one_bounded_line(
            reference in "\\PC{0,40}|[/.%a-z0-9\n\r\x1b]{0,40}",
            target in "\\PC{0,20}",
            mapping in proptest::prop_oneof![0usize..2, proptest::num::usize::ANY],
            size in proptest::num::u64::ANY,
            long in 0usize..70_000,
        ) {
            let (mut r, i, j, mut c) = good();
            r.images[0].reference = format!("{reference}{}", "x".repeat(long));
            r.images[0].mapping = mapping;
            r.mappings[0].targets = vec![target];
            c.insert(A.to_owned(), size);
            if let Err(message) = against_tar(&r, &i, &j, &c) {
                proptest::prop_assert!(!message.contains('\n'), "{message:.200}");
                proptest::prop_assert!(message.len() < 4_000, "{} bytes", message.len());
            }
            if mapping != 0 {
                proptest::prop_assert!(against_tar(&r, &i, &j, &c).is_err());
            }
        }

        /// Any bytes as `ferry-bundle.json`: parsed or refused, and a parsed one checked, never
        /// a panic.
        #[test]
        fn any_bytes_as_a_record_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            if let Ok(record) = serde_json::from_slice::<BundleRecord>(&bytes) {
                let (_, i, j, c) = good();
                let _ = against_tar(&record, &i, &j, &c);
            }
        }
    }
}
