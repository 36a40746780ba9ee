//! Tests of the one-pass bundle reader: a head-first tar gives its head and each blob checked,
//! a wrong blob fails alone, and anything else comes back byte for byte to spool.

use std::io::Read;

use super::*;

fn sha(bytes: &[u8]) -> Digest {
    Digest::of_bytes(ferry_distribution::Algorithm::Sha256, bytes)
}

fn blob_name(d: &Digest) -> String {
    format!("blobs/sha256/{}", d.hex())
}

fn tar_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, bytes) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, &bytes[..]).unwrap();
    }
    b.into_inner().unwrap()
}

/// Two images sharing a config; the second's layer is `layer2`. Entries in head-first order
/// (when `record_last`, in the order of an older ferry: blobs, then the head).
fn bundle(layer2: &[u8], record_last: bool) -> (Vec<u8>, Vec<Digest>) {
    let config = br#"{"os":"linux"}"#.to_vec();
    let layer1 = vec![7u8; 100_000];
    let layer2 = layer2.to_vec();
    let manifest = |layer: &[u8]| {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "config": {"digest": sha(&config).to_string(), "size": config.len()},
            "layers": [{"digest": sha(layer).to_string(), "size": layer.len()}],
        }))
        .unwrap()
    };
    let (m1, m2) = (manifest(&layer1), manifest(&layer2));
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"digest": sha(&m1).to_string()}, {"digest": sha(&m2).to_string()}],
    }))
    .unwrap();
    let head = vec![
        (
            "oci-layout".to_owned(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ),
        ("index.json".to_owned(), index),
        (BUNDLE_ENTRY.to_owned(), b"{}".to_vec()),
        (SIGNATURE_ENTRY.to_owned(), b"c2ln".to_vec()),
        (blob_name(&sha(&m2)), m2.clone()),
        (blob_name(&sha(&m1)), m1.clone()),
    ];
    let body = vec![
        (blob_name(&sha(&config)), config.clone()),
        (blob_name(&sha(&layer1)), layer1.clone()),
        // Named by the bytes it should have: `layer2` may differ from them.
        (blob_name(&sha(&vec![9u8; 70_000])), layer2.clone()),
    ];
    let entries: Vec<_> = match record_last {
        false => head.into_iter().chain(body).collect(),
        true => body.into_iter().chain(head).collect(),
    };
    let order = vec![sha(&config), sha(&layer1), sha(&vec![9u8; 70_000])];
    (tar_of(&entries), order)
}

fn read_all(blob: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    blob.read_to_end(&mut out)?;
    Ok(out)
}

#[test]
fn a_head_first_bundle_gives_its_head_then_each_blob_checked() {
    let (tar, order) = bundle(&vec![9u8; 70_000], false);
    let Opened::Bundle(head, mut body) = open(&tar[..]).unwrap() else {
        panic!("a head-first bundle is read as one");
    };
    assert_eq!(head.record, b"{}");
    assert_eq!(head.signature.as_deref(), Some(&b"c2ln"[..]));
    assert_eq!(head.manifests.len(), 2, "both manifests are in the head");
    let mut seen = Vec::new();
    while let Some(mut blob) = body.next_blob().unwrap() {
        let d = blob.digest().clone();
        let bytes = read_all(&mut blob).unwrap();
        assert_eq!(sha(&bytes), d);
        assert_eq!(bytes.len() as u64, blob.size());
        seen.push(d);
    }
    assert_eq!(seen, order);
}

#[test]
fn a_flipped_byte_fails_that_blob_alone_and_a_part_read_blob_is_skipped() {
    let mut wrong = vec![9u8; 70_000];
    wrong[1234] ^= 1;
    let (tar, order) = bundle(&wrong, false);
    let Opened::Bundle(_, mut body) = open(&tar[..]).unwrap() else {
        panic!("a head-first bundle");
    };
    // The config read whole, the first layer only 10 bytes of (its reader gave up).
    let mut config = body.next_blob().unwrap().unwrap();
    assert!(read_all(&mut config).is_ok());
    let mut layer1 = body.next_blob().unwrap().unwrap();
    let mut ten = [0u8; 10];
    layer1.read_exact(&mut ten).unwrap();
    let mut layer2 = body.next_blob().unwrap().unwrap();
    assert_eq!(
        layer2.digest(),
        &order[2],
        "the cursor skipped the rest of layer 1"
    );
    let err = read_all(&mut layer2).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(err.to_string().contains(&order[2].to_string()), "{err}");
    assert!(body.next_blob().unwrap().is_none());
}

#[test]
fn a_record_last_or_foreign_tar_comes_back_byte_for_byte() {
    let (tar, _) = bundle(&vec![9u8; 70_000], true);
    let Opened::Foreign(kept, mut rest) = open(&tar[..]).unwrap() else {
        panic!("a record written last is not read in one pass");
    };
    let mut again = kept;
    rest.read_to_end(&mut again).unwrap();
    assert_eq!(again, tar);

    // skopeo's oci-archive: index.json, no record.
    let skopeo = tar_of(&[
        ("index.json".to_owned(), b"{}".to_vec()),
        (blob_name(&sha(b"x")), b"x".to_vec()),
    ]);
    let Opened::Foreign(kept, mut rest) = open(&skopeo[..]).unwrap() else {
        panic!("an archive without a record is foreign");
    };
    let mut again = kept;
    rest.read_to_end(&mut again).unwrap();
    assert_eq!(again, skopeo);
}

#[test]
fn a_broken_header_is_an_error_not_a_panic() {
    let (mut tar, _) = bundle(&vec![9u8; 70_000], false);
    // In the second header (index.json's): its checksum no longer holds.
    tar[1030] ^= 0xff;
    assert!(open(&tar[..]).is_err());
    assert!(open(&b"short"[..]).is_err());
}
