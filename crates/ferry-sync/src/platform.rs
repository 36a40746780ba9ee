//! Platform filters: an index keeps only the children whose platform a mapping asks for. That
//! rewrites the index, so its digest changes; with every child kept the bytes stay as they were.

use bytes::Bytes;
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, media};

/// Does `os/arch[/variant]` of a descriptor's platform match one of `wanted`? A wanted entry
/// without a variant matches every variant.
fn matches(platform: &serde_json::Value, wanted: &[String]) -> bool {
    let os = platform.get("os").and_then(|v| v.as_str()).unwrap_or("");
    let arch = platform
        .get("architecture")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let variant = platform.get("variant").and_then(|v| v.as_str());
    wanted.iter().any(|w| {
        let mut parts = w.split('/');
        let (wos, warch, wvar) = (parts.next(), parts.next(), parts.next());
        wos == Some(os) && warch == Some(arch) && (wvar.is_none() || wvar == variant)
    })
}

/// The index with only the wanted platforms, or `None` when nothing needs to change (not an
/// index, no filter, or every child kept). An index where nothing matches is an error.
pub fn filter_index(manifest: &Manifest, wanted: &[String]) -> Result<Option<Manifest>, String> {
    if wanted.is_empty() || !media::is_index(&manifest.media_type) {
        return Ok(None);
    }
    let mut index: serde_json::Value = serde_json::from_slice(&manifest.bytes)
        .map_err(|e| format!("index {} does not parse: {e}", manifest.digest))?;
    let Some(children) = index.get_mut("manifests").and_then(|m| m.as_array_mut()) else {
        return Err(format!("index {} has no manifests", manifest.digest));
    };
    let before = children.len();
    children.retain(|c| c.get("platform").is_some_and(|p| matches(p, wanted)));
    if children.is_empty() {
        return Err(format!(
            "index {} has no child for the platforms {}",
            manifest.digest,
            wanted.join(", ")
        ));
    }
    if children.len() == before {
        return Ok(None);
    }
    let bytes = Bytes::from(
        serde_json::to_vec(&index).map_err(|e| format!("cannot write the filtered index: {e}"))?,
    );
    Ok(Some(Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: manifest.media_type.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(platforms: &[(&str, &str, Option<&str>)]) -> Manifest {
        let children: Vec<_> = platforms
            .iter()
            .enumerate()
            .map(|(i, (os, arch, var))| {
                let mut p = serde_json::json!({"os": os, "architecture": arch});
                if let Some(v) = var {
                    p["variant"] = serde_json::json!(v);
                }
                serde_json::json!({
                    "mediaType": media::OCI_MANIFEST,
                    "digest": format!("sha256:{:064x}", i),
                    "size": 1,
                    "platform": p
                })
            })
            .collect();
        let bytes = Bytes::from(
            serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2, "mediaType": media::OCI_INDEX, "manifests": children
            }))
            .unwrap(),
        );
        Manifest {
            digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
            bytes,
            media_type: media::OCI_INDEX.into(),
        }
    }

    #[test]
    fn keeps_only_the_wanted_platforms_and_changes_the_digest() {
        let m = index(&[
            ("linux", "amd64", None),
            ("linux", "arm64", Some("v8")),
            ("linux", "arm", Some("v7")),
            ("windows", "amd64", None),
        ]);
        let wanted = vec!["linux/amd64".to_owned(), "linux/arm64".to_owned()];
        let f = filter_index(&m, &wanted).unwrap().expect("rewritten");
        assert_ne!(f.digest, m.digest);
        let v: serde_json::Value = serde_json::from_slice(&f.bytes).unwrap();
        let archs: Vec<_> = v["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["platform"]["architecture"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(archs, ["amd64", "arm64"]);
        // Deterministic.
        assert_eq!(filter_index(&m, &wanted).unwrap().unwrap().digest, f.digest);
    }

    #[test]
    fn leaves_the_bytes_alone_when_everything_is_kept_or_nothing_is_asked() {
        let m = index(&[("linux", "amd64", None), ("linux", "arm64", Some("v8"))]);
        assert_eq!(filter_index(&m, &[]).unwrap(), None);
        let all = vec!["linux/amd64".to_owned(), "linux/arm64/v8".to_owned()];
        assert_eq!(filter_index(&m, &all).unwrap(), None);
        assert!(filter_index(&m, &["linux/s390x".to_owned()]).is_err());
    }
}
