//! Benchmark: a 2 GiB layer's upload resumed by the next process (issue 28), through the real
//! `ferry` binary into the real distribution registry, behind fault proxies.
//!
//! Two conditions, each a first run stopped once about half the layer is on the target and a
//! second run to the end, then `ferry verify --deep`:
//! - kill: SIGKILL while the target's proxy holds the PATCH after the 16th of 32 (64 MiB each);
//! - term: SIGTERM while that PATCH is in flight (the proxy holds it 5 s, then passes it on).
//!
//! Printed per condition: bytes the second run read from the source (counted by the source's
//! proxy) as a fraction of the layer, PATCHes it sent, each run's wall time, and the verify's
//! exit code. The layer is a file under `$FERRY_BENCH_DIR` (default /work/tmp-resume), deleted
//! at the end; set `TMPDIR` to the same place so the registry's storage is there too.
//!
//! Run: `TMPDIR=/work/tmp-resume cargo bench --bench resume` (or `--profile dev` for a debug
//! build). Option after `--`: `--size-mib N` (default 2048).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_distribution::ops::push::{BlobBytes, BlobPush, ByteStream, UploadShape};
use ferry_distribution::retry::{Failure, Sent};
use ferry_distribution::{Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{FaultAction, FaultProxy, FaultRule, OpKind, RequestRecord};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const MIB: u64 = 1 << 20;
const CHUNK_MIB: u64 = 64;

/// The layer on disk, read again from any offset.
struct LayerFile(PathBuf);

impl BlobBytes for LayerFile {
    fn open(
        &self,
        offset: u64,
    ) -> impl std::future::Future<Output = Result<ByteStream, Failure>> + Send {
        let path = self.0.clone();
        async move {
            let fail = |e: std::io::Error| Failure::Transport {
                message: e.to_string(),
                sent: Sent::No,
                local: true,
            };
            let mut file = tokio::fs::File::open(&path).await.map_err(fail)?;
            file.seek(std::io::SeekFrom::Start(offset))
                .await
                .map_err(fail)?;
            let stream = futures::stream::unfold(file, move |mut file| async move {
                let mut buf = vec![0u8; MIB as usize];
                match file.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(Bytes::from(buf)), file))
                    }
                    Err(e) => Some((Err(fail(e)), file)),
                }
            });
            let stream: ByteStream = Box::pin(stream);
            Ok(stream)
        }
    }
}

/// Writes a layer of `size` bytes (each MiB distinct) and returns its digest, by `sha256sum`.
fn write_layer(path: &Path, size: u64) -> Digest {
    use std::io::Write as _;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut block = vec![0u8; MIB as usize];
    for (i, b) in block.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
    }
    for m in 0..size / MIB {
        block[..8].copy_from_slice(&m.to_le_bytes());
        file.write_all(&block).unwrap();
    }
    file.flush().unwrap();
    drop(file);
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    let hex = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    Digest::parse(&format!("sha256:{hex}")).unwrap()
}

async fn seed(client: &RegistryClient, layer: &Path, digest: &Digest, size: u64) {
    let push = BlobPush {
        repository: "src/app",
        digest,
        size,
        shape: UploadShape {
            chunk_size: CHUNK_MIB * MIB,
            monolithic_limit: 0,
        },
        session: None,
    };
    let bytes = LayerFile(layer.to_path_buf());
    let first = bytes.open(0).await;
    client.push_blob(push, Some(first), &bytes).await.unwrap();
    let config = b"{\"bench\":\"resume\"}";
    let config_digest = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, config);
    client
        .push_blob_bytes("src/app", &config_digest, Bytes::from_static(config))
        .await
        .unwrap();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest.to_string(), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest.to_string(), "size": size}],
    }))
    .unwrap();
    let manifest = ferry_distribution::ops::Manifest {
        digest: Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &manifest),
        bytes: manifest.into(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
    };
    client
        .put_manifest("src/app", "v1", &manifest)
        .await
        .unwrap();
}

fn patches(r: &[RequestRecord]) -> Vec<&RequestRecord> {
    r.iter().filter(|r| r.op == OpKind::UploadPatch).collect()
}

fn sync(config: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(FERRY);
    c.args(["sync", "-c", config.to_str().unwrap(), "--progress", "none"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    c
}

struct Figures {
    condition: &'static str,
    run1: Duration,
    run2: Duration,
    read2: u64,
    patches2: usize,
    run2_code: i32,
    verify_code: i32,
}

async fn condition(
    name: &'static str,
    dir: &Path,
    src: &FaultProxy,
    dst: &FaultProxy,
    digest: &Digest,
    size: u64,
) -> Figures {
    // Larger blobs go in larger chunks (`UploadShape::chunk_for`): half of the PATCHes sent.
    let chunk = UploadShape {
        chunk_size: CHUNK_MIB * MIB,
        monolithic_limit: 0,
    }
    .chunk_for(size);
    let half = (size.div_ceil(chunk) / 2) as u32;
    let config = dir.join(format!("{name}.yaml"));
    let registries = [src, dst]
        .iter()
        .map(|p| {
            format!(
                "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
                p.host(),
                p.url()
            )
        })
        .collect::<String>();
    std::fs::write(
        &config,
        format!(
            "version: 1\nengine: {{ images_in_flight: 1, blobs_in_flight: 1, chunk_size: {CHUNK_MIB}MiB }}\nregistries:\n{registries}mappings:\n  - source: \"{}/src/app\"\n    targets: [\"{}/mirror/{name}\"]\n    tags: {{ exact: [\"v1\"] }}\n",
            src.host(),
            dst.host()
        ),
    )
    .unwrap();
    dst.reset_stats();
    let hold = match name {
        "kill" => FaultAction::Hang,
        _ => FaultAction::Delay(Duration::from_secs(5)),
    };
    dst.faults()
        .push(FaultRule::on(OpKind::UploadPatch, FaultAction::Delay(Duration::ZERO)).times(half));
    dst.faults().push(FaultRule::on(OpKind::UploadPatch, hold));
    let started = Instant::now();
    let mut run1 = sync(&config).spawn().unwrap();
    let n = half as usize;
    dst.wait_until(|r| {
        let p = patches(r);
        p.len() > n && p[n].status == 0
    })
    .await;
    match name {
        "kill" => run1.start_kill().unwrap(),
        _ => {
            let pid = run1.id().unwrap().to_string();
            std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap();
        }
    }
    run1.wait().await.unwrap();
    let run1_time = started.elapsed();
    src.wait_idle().await;
    src.reset_stats();
    dst.reset_stats();
    let started = Instant::now();
    let out = sync(&config).output().await.unwrap();
    let run2 = started.elapsed();
    let verify = tokio::process::Command::new(FERRY)
        .args([
            "verify",
            "-c",
            config.to_str().unwrap(),
            "--deep",
            "--progress",
            "none",
        ])
        .output()
        .await
        .unwrap();
    Figures {
        condition: name,
        run1: run1_time,
        run2,
        read2: src.stats().blob_bytes(&digest.to_string()),
        patches2: patches(&dst.requests()).len(),
        run2_code: out.status.code().unwrap_or(-1),
        verify_code: verify.status.code().unwrap_or(-1),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size_mib: u64 = args
        .iter()
        .position(|a| a == "--size-mib")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2048);
    let size = size_mib * MIB;
    let base = PathBuf::from(
        std::env::var("FERRY_BENCH_DIR").unwrap_or_else(|_| "/work/tmp-resume".into()),
    );
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let layer = dir.path().join("layer.bin");
    let t = Instant::now();
    let digest = write_layer(&layer, size);
    eprintln!(
        "layer of {size_mib} MiB written and hashed in {:.1?}",
        t.elapsed()
    );
    let real = RealRegistry::start().await.expect("registry");
    let client = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    let t = Instant::now();
    seed(&client, &layer, &digest, size).await;
    eprintln!("seeded in {:.1?}", t.elapsed());
    let src = FaultProxy::start(&real.url()).await.unwrap();
    let dst = FaultProxy::start(&real.url()).await.unwrap();
    let mut rows = Vec::new();
    for name in ["kill", "term"] {
        rows.push(condition(name, dir.path(), &src, &dst, &digest, size).await);
    }
    println!(
        "| condition | run 1 | run 2 | run 2 read from source | of the layer | run 2 PATCHes | run 2 exit | verify --deep exit |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for f in &rows {
        println!(
            "| {} | {:.1?} | {:.1?} | {} MiB | {:.1}% | {} | {} | {} |",
            f.condition,
            f.run1,
            f.run2,
            f.read2 / MIB,
            f.read2 as f64 * 100.0 / size as f64,
            f.patches2,
            f.run2_code,
            f.verify_code
        );
    }
    drop(src);
    drop(dst);
    real.stop().await.ok();
    drop(dir);
}
