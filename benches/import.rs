//! Benchmark: `ferry import` of a bundle holding the compare bench's corpus against a plain
//! registry-to-registry `ferry sync` of the same corpus, both into a fresh real registry.
//!
//! The bundle is written here straight from the seeded corpus (every blob, every manifest, an
//! `index.json` whose `ref.name`s are the full target references), as `ferry export` would
//! write it; the export's own cost is not measured. Run: `cargo bench --bench import --
//! [--runs N] [--shapes a,b]`. Work files go under `$FERRY_BENCH_DIR` (default the temp dir).

#[path = "compare/corpus.rs"]
#[allow(dead_code)]
mod corpus;
#[allow(dead_code)]
#[path = "compare/measure.rs"]
mod measure;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corpus::{BlobContent, Corpus, LayerBytes, Shape};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn target_repository(repo: &str) -> String {
    format!("mirror/{}", repo.rsplit('/').next().unwrap_or(repo))
}

/// Writes the corpus as one OCI archive whose images are named for `host`.
fn write_bundle(corpus: &Corpus, host: &str, path: &Path) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::with_capacity(1 << 20, file));
    let mut put = |name: &str, size: u64, reader: &mut dyn std::io::Read| {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        tar.append_data(&mut h, name, reader)
            .map_err(|e| format!("{name}: {e}"))
    };
    let layout = br#"{"imageLayoutVersion":"1.0.0"}"#;
    put("oci-layout", layout.len() as u64, &mut &layout[..])?;
    for blob in &corpus.blobs {
        let name = format!("blobs/sha256/{}", blob.digest.hex());
        match &blob.content {
            BlobContent::Config(bytes) => put(&name, bytes.len() as u64, &mut &bytes[..])?,
            BlobContent::Layer { seed, size } => {
                let mut reader = Generated(LayerBytes::new(*seed, *size));
                put(&name, *size, &mut reader)?
            }
        }
    }
    let mut index = Vec::new();
    let mut written = std::collections::BTreeSet::new();
    for repo in &corpus.repos {
        for tag in &repo.tags {
            for m in std::iter::once(&tag.top).chain(&tag.children) {
                if written.insert(m.digest.to_string()) {
                    let name = format!("blobs/sha256/{}", m.digest.hex());
                    put(&name, m.bytes.len() as u64, &mut &m.bytes[..])?;
                }
            }
            index.push(serde_json::json!({
                "mediaType": tag.top.media_type,
                "digest": tag.top.digest.to_string(),
                "size": tag.top.bytes.len(),
                "annotations": {"org.opencontainers.image.ref.name":
                    format!("{host}/{}:{}", target_repository(&repo.name), tag.tag)},
            }));
        }
    }
    let index = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "manifests": index}))
        .map_err(|e| e.to_string())?;
    put("index.json", index.len() as u64, &mut &index[..])?;
    tar.into_inner()
        .map_err(|e| e.to_string())?
        .into_inner()
        .map_err(|e| e.to_string())?;
    Ok(())
}

struct Generated(LayerBytes);

impl std::io::Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(self.0.fill(buf))
    }
}

async fn timed(args: &[String]) -> Result<Duration, String> {
    let start = Instant::now();
    let out = tokio::process::Command::new(FERRY)
        .args(args)
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("ferry: {e}"))?;
    let took = start.elapsed();
    if !out.status.success() {
        return Err(format!(
            "ferry {args:?} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(took)
}

/// Every tag of the corpus is on `target` with its digest.
async fn verify(corpus: &Corpus, target: &RealRegistry) -> Result<(), String> {
    let client = RegistryClient::new(RegistryOptions::insecure_at(&target.url()))
        .map_err(|e| e.to_string())?;
    for repo in &corpus.repos {
        let name = target_repository(&repo.name);
        for tag in &repo.tags {
            let got = client
                .head_manifest(&name, &tag.tag)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{name}:{} missing", tag.tag))?;
            if got.digest != tag.top.digest {
                return Err(format!("{name}:{} has {}", tag.tag, got.digest));
            }
        }
    }
    Ok(())
}

async fn one_run(corpus: &Corpus, source: &RealRegistry, dir: &Path) -> Result<(f64, f64), String> {
    // Registry to registry.
    let target = RealRegistry::start().await.map_err(|e| e.to_string())?;
    let mut yaml = format!(
        "version: 1\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\nmappings:\n",
        source.host(),
        source.url(),
        target.host(),
        target.url()
    );
    for repo in &corpus.repos {
        yaml.push_str(&format!(
            "  - source: \"{}/{}\"\n    targets: [\"{}/{}\"]\n    tags: {{ include: [\"*\"] }}\n",
            source.host(),
            repo.name,
            target.host(),
            target_repository(&repo.name)
        ));
    }
    let config = dir.join("mirror.yaml");
    std::fs::write(&config, yaml).map_err(|e| e.to_string())?;
    let sync = timed(&[
        "--progress".into(),
        "none".into(),
        "sync".into(),
        "-c".into(),
        config.display().to_string(),
    ])
    .await?;
    verify(corpus, &target).await?;
    target.stop().await.map_err(|e| e.to_string())?;

    // Bundle to registry.
    let target = RealRegistry::start().await.map_err(|e| e.to_string())?;
    let bundle = dir.join("bundle.tar");
    write_bundle(corpus, &target.host(), &bundle)?;
    let import = timed(&[
        "--progress".into(),
        "none".into(),
        "import".into(),
        "--insecure".into(),
        bundle.display().to_string(),
    ])
    .await?;
    verify(corpus, &target).await?;
    target.stop().await.map_err(|e| e.to_string())?;
    std::fs::remove_file(&bundle).map_err(|e| e.to_string())?;
    Ok((sync.as_secs_f64(), import.as_secs_f64()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let runs: usize = value("--runs").and_then(|r| r.parse().ok()).unwrap_or(3);
    let shapes = value("--shapes").unwrap_or_else(|| "a,b".into());
    let base = std::env::var("FERRY_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    println!(
        "| corpus | unique MiB | sync (s) | import (s) | sync MiB/s | import MiB/s | import / sync |"
    );
    println!("|---|---|---|---|---|---|---|");
    for s in shapes.split(',') {
        let shape = match s.trim() {
            "a" => Shape::many_small(),
            "b" => Shape::few_large(),
            other => return Err(format!("unknown shape {other}")),
        };
        let corpus = Corpus::generate(&shape);
        let source = RealRegistry::start().await.map_err(|e| e.to_string())?;
        corpus.push(&source.url(), 8).await?;
        let dir = tempfile::tempdir_in(&base).map_err(|e| e.to_string())?;
        let (mut syncs, mut imports) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let (s, i) = one_run(&corpus, &source, dir.path()).await?;
            syncs.push(s);
            imports.push(i);
        }
        source.stop().await.map_err(|e| e.to_string())?;
        let mib = corpus.unique_bytes() as f64 / (1 << 20) as f64;
        let (s, i) = (median(syncs), median(imports));
        println!(
            "| {} | {mib:.1} | {s:.2} | {i:.2} | {:.1} | {:.1} | {:.2}x |",
            shape.name,
            mib / s,
            mib / i,
            s / i
        );
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    measure::bench_main("import bench", || Ok(()), |()| run())
}
