//! `--signature-cost`: what `signatures:` costs on corpus A (issue 38): every tag signed with a
//! key (cosign's `.sig` tag scheme), then a cold `ferry sync` without a policy and one with a
//! policy naming the key, each to a fresh target: wall time and source requests, by kind.

use bytes::Bytes;
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::trust_signer::key_signed_layer;
use ferry_trust::PrivateKey;

use super::corpus::{Corpus, Shape};
use super::measure::{self, Traffic};
use super::{SyncJob, Tool};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Pushes one `.sig` manifest (one simple-signing layer by `key`) for every tag of `corpus`.
async fn sign_all(
    corpus: &Corpus,
    source: &RealRegistry,
    key: &PrivateKey,
) -> Result<usize, String> {
    let c = RegistryClient::new(RegistryOptions::insecure_at(&source.url()))
        .map_err(|e| format!("client: {e}"))?;
    let mut signed = 0;
    for repo in &corpus.repos {
        let empty = Digest::of_bytes(Algorithm::Sha256, b"{}");
        c.push_blob_bytes(&repo.name, &empty, Bytes::from_static(b"{}"))
            .await
            .map_err(|e| format!("pushing a config: {e}"))?;
        for tag in &repo.tags {
            let layer = key_signed_layer(key, &tag.top.digest);
            let payload = Digest::of_bytes(Algorithm::Sha256, &layer.payload);
            c.push_blob_bytes(&repo.name, &payload, Bytes::from(layer.payload.clone()))
                .await
                .map_err(|e| format!("pushing a payload: {e}"))?;
            let doc = serde_json::json!({
                "schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": empty.to_string(), "size": 2},
                "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                    "digest": payload.to_string(), "size": layer.payload.len(), "annotations": layer.annotations}],
            });
            let bytes = Bytes::from(serde_json::to_vec(&doc).map_err(|e| e.to_string())?);
            let m = Manifest {
                digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
                bytes,
                media_type: OCI_MANIFEST.to_owned(),
            };
            let sig_tag = format!("sha256-{}.sig", tag.top.digest.hex());
            c.put_manifest(&repo.name, &sig_tag, &m)
                .await
                .map_err(|e| format!("pushing {sig_tag}: {e}"))?;
            signed += 1;
        }
    }
    Ok(signed)
}

/// The markdown section: wall time and source requests, without and with a policy.
pub async fn run() -> Result<String, String> {
    let corpus = Corpus::generate(&Shape::many_small());
    let source = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the source registry: {e}"))?;
    corpus.push(&source.url(), 8).await?;
    let key = PrivateKey::generate_p256();
    let signed = sign_all(&corpus, &source, &key).await?;
    let workdir = super::work_dir("ferry-bench-signatures-")?;
    let key_path = workdir.path().join("release.pub");
    std::fs::write(&key_path, key.public_key().to_pem()).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for policy in [false, true] {
        let target = RealRegistry::start()
            .await
            .map_err(|e| format!("starting a target registry: {e}"))?;
        let job = SyncJob {
            tool: Tool::Ferry,
            source: &source,
            target: &target,
            repos: corpus.repos.iter().map(|r| r.name.clone()).collect(),
            workdir: workdir.path(),
            skopeo_cache: workdir.path().join("unused"),
        };
        let (program, mut args, envs) = job.command()?;
        if policy {
            // The same config, each mapping with the policy (tlog: skip: the signatures are
            // key-only, unlogged).
            let path = workdir.path().join("ferry.yaml");
            let yaml = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            let line = format!(
                "    signatures: {{ keys: [\"{}\"], tlog: skip }}\n",
                key_path.display()
            );
            let with: String = yaml
                .lines()
                .map(|l| match l.trim_start().starts_with("tags:") {
                    true => format!("{l}\n{line}"),
                    false => format!("{l}\n"),
                })
                .collect();
            let signed_path = workdir.path().join("ferry-signed.yaml");
            std::fs::write(&signed_path, with).map_err(|e| e.to_string())?;
            if let Some(last) = args.last_mut() {
                *last = signed_path.display().to_string();
            }
        }
        let s0 = measure::requests(&source).await?.len();
        let log = workdir.path().join(format!("sync-{policy}.log"));
        let cost = measure::run_measured(&program, &args, &envs, &log).await?;
        let traffic = Traffic::of(&measure::requests(&source).await?[s0..]);
        rows.push((policy, cost.wall, traffic));
    }
    let mut md = format!(
        "Corpus A ({} repositories, {} tags), every tag signed with a key (`{signed}` `.sig` \
         manifests of one layer), a cold `ferry sync` to a fresh target without and with \
         `signatures: {{keys: [...], tlog: skip}}` on every mapping (both copy the `.sig` tags).\n\n\
         | run | wall | source requests | manifest GET | manifest HEAD | blob GET | other (referrers API) |\n\
         |---|---|---|---|---|---|---|\n",
        corpus.repos.len(),
        corpus.tag_count(),
    );
    for (policy, wall, t) in &rows {
        let n = |k: &str| t.by_kind.get(k).copied().unwrap_or(0);
        md.push_str(&format!(
            "| {} | {:.2} s | {} | {} | {} | {} | {} |\n",
            if *policy {
                "with `signatures:`"
            } else {
                "no policy"
            },
            wall.as_secs_f64(),
            t.requests,
            n("manifest GET"),
            n("manifest HEAD"),
            n("blob GET"),
            n("other"),
        ));
    }
    Ok(md)
}
