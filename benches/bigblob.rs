//! Benchmark (issue 28): one image whose single layer is several GiB of random bytes, copied by
//! `ferry sync` between two real distribution registries, against curl's GET and PUT of the bytes.
//!
//! For each layer size, in the same run: the layer is generated from a seed and pushed into the
//! source registry as it is hashed (16 MiB PATCHes, never whole in memory); then
//! (a) `curl -o /dev/null` GETs it from the source; (b) curl uploads the same bytes (the source
//! registry's stored file) into a fresh registry: POST, then one monolithic `PUT -T file`;
//! (c) `ferry sync` copies the image into a fresh target under `/usr/bin/time` (peak RSS, the
//! kernel's `ru_maxrss`), once per engine variant, each right after its own (b). Rates are layer size ÷ wall time; the ratio
//! is ferry ÷ min(a, b). The target's access log gives ferry's PATCH and PUT counts.
//!
//! Run: `cargo build --release --bin ferry && cargo bench --bench bigblob -- --sizes 1,4,8`.
//! Options after `--`: `--sizes 1,4` (GiB, default 4), `--variants default,chunk256,one-put`
//! (engine settings: defaults, 64 MiB PATCHes, above 1 GiB at most 16 of up to 256 MiB; `chunk_size: 256MiB`, any `chunk<MiB>`; `monolithic_limit` above the layer, one
//! PUT), `--runs N` (ferry runs per variant, default 1), `--json PATH` (the figures as JSON, for
//! `scripts/bench compare`: benches/versus.rs reads them). `FERRY_BIN` names the ferry binary
//! (default: the one cargo built with this bench). Storage goes where `TMPDIR` points; a size is
//! skipped, with a note, when the disk has less than twice the layer plus 8 GiB free.

#[allow(dead_code)]
#[path = "compare/measure.rs"]
mod measure;

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use ferry_distribution::digest::{Algorithm, Digest, Digester};
use ferry_distribution::ops::manifest::Manifest;
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;

const REPO: &str = "bench/layer";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const GIB: u64 = 1 << 30;
const MIB: f64 = (1u64 << 20) as f64;
/// Bytes per PATCH while seeding the source.
const SEED_CHUNK: usize = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Default,
    /// `chunk_size` of this many MiB.
    Chunk(u64),
    OnePut,
}

impl Variant {
    fn parse(s: &str) -> Result<Variant, String> {
        match s {
            "default" => Ok(Variant::Default),
            "one-put" => Ok(Variant::OnePut),
            other => match other.strip_prefix("chunk").map(str::parse) {
                Some(Ok(mib)) => Ok(Variant::Chunk(mib)),
                _ => Err(format!(
                    "--variants: unknown {other:?} (default, chunk<MiB> such as chunk256, one-put)"
                )),
            },
        }
    }

    fn name(self) -> String {
        match self {
            Variant::Default => {
                "default chunks (64 MiB; above 1 GiB at most 16 PATCHes of up to 256 MiB)".into()
            }
            Variant::Chunk(mib) => format!("chunk_size {mib}MiB"),
            Variant::OnePut => "one PUT (monolithic_limit above the layer)".into(),
        }
    }

    fn engine(self, size: u64) -> Option<String> {
        match self {
            Variant::Default => None,
            Variant::Chunk(mib) => Some(format!("chunk_size: \"{mib}MiB\"")),
            Variant::OnePut => Some(format!("monolithic_limit: {}", size + 1)),
        }
    }
}

#[derive(Debug)]
struct Options {
    sizes: Vec<u64>,
    variants: Vec<Variant>,
    runs: usize,
    json: Option<PathBuf>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        sizes: vec![4],
        variants: vec![Variant::Default],
        runs: 1,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| measure::option_value(&mut args, name);
        match arg.as_str() {
            "--sizes" => {
                options.sizes = value("--sizes")?
                    .split(',')
                    .map(|s| s.trim().parse().map_err(|e| format!("--sizes {s:?}: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--variants" => {
                options.variants = value("--variants")?
                    .split(',')
                    .map(|s| Variant::parse(s.trim()))
                    .collect::<Result<_, _>>()?;
            }
            "--runs" => {
                options.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
            }
            "--json" => options.json = Some(value("--json")?.into()),
            // cargo bench passes `--bench`.
            "--bench" => {}
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(options)
}

fn ferry_binary() -> PathBuf {
    std::env::var_os("FERRY_BIN")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ferry")), PathBuf::from)
}

/// xorshift64* filling whole words: the layer's bytes, the same for a seed however cut.
struct LayerBytes {
    state: u64,
    remaining: u64,
}

impl LayerBytes {
    fn new(seed: u64, size: u64) -> LayerBytes {
        LayerBytes {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            remaining: size,
        }
    }

    /// The next piece of at most `max` bytes (a multiple of 8 but for the last), or `None`.
    fn next_piece(&mut self, max: usize) -> Option<Vec<u8>> {
        let n = usize::try_from(self.remaining).unwrap_or(max).min(max);
        if n == 0 {
            return None;
        }
        let mut piece = vec![0u8; n];
        for word in piece.chunks_mut(8) {
            let mut x = self.state;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.state = x;
            let bytes = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            word.copy_from_slice(&bytes[..word.len()]);
        }
        self.remaining -= n as u64;
        Some(piece)
    }
}

/// Generates the layer and pushes it into `repo` while hashing it: one pass, 16 MiB at a time.
async fn seed_layer(client: &RegistryClient, seed: u64, size: u64) -> Result<Digest, String> {
    let mut session = client
        .start_upload_once(REPO)
        .await
        .map_err(|e| format!("seeding: POST: {e:?}"))?;
    let mut bytes = LayerBytes::new(seed, size);
    let mut digester = Digester::new(Algorithm::Sha256);
    let mut offset = 0u64;
    while let Some(piece) = bytes.next_piece(SEED_CHUNK) {
        digester.update(&piece);
        let len = piece.len() as u64;
        session = client
            .patch_chunk_once(&session, offset, len, Bytes::from(piece).into())
            .await
            .map_err(|e| format!("seeding: PATCH at {offset}: {e:?}"))?;
        offset += len;
    }
    let digest = digester.finish();
    client
        .finish_upload_once(&session, &digest, None)
        .await
        .map_err(|e| format!("seeding: PUT {digest}: {e:?}"))?;
    Ok(digest)
}

/// A config and a manifest naming the layer, tagged `1`.
async fn put_image(client: &RegistryClient, digest: &Digest, size: u64) -> Result<(), String> {
    let config = format!(
        "{{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{{\"type\":\"layers\",\"diff_ids\":[\"{digest}\"]}}}}"
    )
    .into_bytes();
    let config_digest = Digest::of_bytes(Algorithm::Sha256, &config);
    client
        .push_blob_bytes(REPO, &config_digest, config.clone().into())
        .await
        .map_err(|e| format!("pushing the config: {e}"))?;
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"{OCI_MANIFEST}\",\"config\":{{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"{config_digest}\",\"size\":{}}},\"layers\":[{{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"{digest}\",\"size\":{size}}}]}}",
        config.len()
    )
    .into_bytes();
    let manifest = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &manifest),
        bytes: manifest.into(),
        media_type: OCI_MANIFEST.to_owned(),
    };
    client
        .put_manifest(REPO, "1", &manifest)
        .await
        .map(|_| ())
        .map_err(|e| format!("putting the manifest: {e}"))
}

/// Runs curl with `args`, returning its `-w` output; fails on a non-zero exit.
fn curl(args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("curl")
        .args(args)
        .output()
        .map_err(|e| format!("running curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "curl {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// (a): `curl -o /dev/null` of the blob; seconds.
fn curl_get(source: &RealRegistry, digest: &Digest, size: u64) -> Result<f64, String> {
    let url = format!("{}/v2/{REPO}/blobs/{digest}", source.url());
    let out = curl(&[
        "-s",
        "-f",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download} %{time_total}",
        &url,
    ])?;
    let mut fields = out.split_whitespace();
    let got: u64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let secs: f64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    if got != size {
        return Err(format!("curl GET read {got} bytes, want {size}"));
    }
    Ok(secs)
}

/// The file the source registry stores the blob in (filesystem driver).
fn stored_file(source: &RealRegistry, digest: &Digest) -> PathBuf {
    let hex = digest.to_string();
    let hex = hex.trim_start_matches("sha256:");
    source
        .storage_dir()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

/// (b): into a fresh registry, POST then one `PUT -T file` with the bytes; seconds, both requests.
async fn curl_put(file: &Path, digest: &Digest) -> Result<f64, String> {
    let target = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the curl target: {e}"))?;
    let started = Instant::now();
    let post = format!("{}/v2/curl/layer/blobs/uploads/", target.url());
    let headers = curl(&[
        "-s",
        "-f",
        "-X",
        "POST",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &post,
    ])?;
    let location = headers
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .ok_or_else(|| format!("POST {post}: no Location in {headers:?}"))?;
    let location = if location.starts_with('/') {
        format!("{}{location}", target.url())
    } else {
        location
    };
    let sep = if location.contains('?') { '&' } else { '?' };
    let put = format!("{location}{sep}digest={digest}");
    let file = file.display().to_string();
    let code = curl(&[
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Expect:",
        "-H",
        "Content-Type: application/octet-stream",
        "-T",
        &file,
        &put,
    ])?;
    let secs = started.elapsed().as_secs_f64();
    if code.trim() != "201" {
        return Err(format!("curl PUT answered {code}"));
    }
    target
        .stop()
        .await
        .map_err(|e| format!("stopping the curl target: {e}"))?;
    Ok(secs)
}

/// One ferry copy measured.
struct FerryRun {
    secs: f64,
    rss_kib: u64,
    /// User plus system CPU seconds of the ferry process.
    cpu: f64,
    patches: u64,
    puts: u64,
}

/// (c): `ferry sync` of the image into a fresh target, under `/usr/bin/time`.
async fn ferry_copy(
    source: &RealRegistry,
    digest: &Digest,
    size: u64,
    variant: Variant,
    workdir: &Path,
    label: &str,
) -> Result<FerryRun, String> {
    let target = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the target: {e}"))?;
    let mut yaml = match variant.engine(size) {
        Some(engine) => format!("version: 1\nengine: {{ {engine} }}\nregistries:\n"),
        None => String::from("version: 1\nregistries:\n"),
    };
    for registry in [source, &target] {
        yaml.push_str(&format!(
            "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
            registry.host(),
            registry.url()
        ));
    }
    yaml.push_str(&format!(
        "mappings:\n  - source: \"{}/{REPO}\"\n    targets: [\"{}/{REPO}\"]\n    tags: {{ include: [\"*\"] }}\n",
        source.host(),
        target.host()
    ));
    let config = workdir.join(format!("ferry-{label}.yaml"));
    std::fs::write(&config, yaml).map_err(|e| format!("writing {}: {e}", config.display()))?;
    let args: Vec<String> = vec![
        "--progress".into(),
        "none".into(),
        "sync".into(),
        "-c".into(),
        config.display().to_string(),
    ];
    let log = workdir.join(format!("ferry-{label}.log"));
    let before = measure::requests(&target).await?.len();
    let cost = run_timed(&ferry_binary(), &args, &log)?;
    let logged = measure::requests(&target).await?;
    let traffic = measure::Traffic::of(&logged[before..]);
    let client = RegistryClient::new(RegistryOptions::insecure_at(&target.url()))
        .map_err(|e| format!("client: {e}"))?;
    let landed = client
        .head_blob(REPO, digest)
        .await
        .map_err(|e| format!("HEAD the layer in the target: {e}"))?;
    if landed != Some(size) {
        return Err(format!(
            "the layer is {landed:?} bytes in the target, want {size}"
        ));
    }
    target
        .stop()
        .await
        .map_err(|e| format!("stopping the target: {e}"))?;
    let count = |kind: &str| traffic.by_kind.get(kind).copied().unwrap_or(0);
    Ok(FerryRun {
        secs: cost.wall,
        rss_kib: cost.rss_kib,
        cpu: cost.cpu,
        patches: count("upload PATCH"),
        puts: count("upload PUT"),
    })
}

/// What `/usr/bin/time -f "%e %M %U %S"` says of a process.
struct Timed {
    wall: f64,
    rss_kib: u64,
    cpu: f64,
}

/// Runs `program args…` under `/usr/bin/time` (wall time, peak RSS from `wait4`'s `ru_maxrss`,
/// user and system CPU), its output to `log`; fails with the log's tail on a non-zero exit.
fn run_timed(program: &Path, args: &[String], log: &Path) -> Result<Timed, String> {
    let times = log.with_extension("time");
    let out = std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cloning {}: {e}", log.display()))?;
    let status = std::process::Command::new(measure::TIME_BINARY)
        .args(["-f", "%e %M %U %S", "-o"])
        .arg(&times)
        .arg(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("running {}: {e}", measure::TIME_BINARY))?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        return Err(format!(
            "{} exited with {status}: {}",
            program.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let text =
        std::fs::read_to_string(&times).map_err(|e| format!("reading {}: {e}", times.display()))?;
    let fields: Vec<f64> = text
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    match fields[..] {
        [wall, rss, user, system] => Ok(Timed {
            wall,
            rss_kib: rss as u64,
            cpu: user + system,
        }),
        _ => Err(format!("{} holds no figures: {text:?}", times.display())),
    }
}

/// Bytes free on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

fn rate(size: u64, secs: f64) -> f64 {
    size as f64 / MIB / secs.max(1e-6)
}

/// One size: its figures for `--json` (`skipped` with the reason when the disk is short).
async fn bench_size(
    options: &Options,
    gib: u64,
    workdir: &Path,
) -> Result<serde_json::Value, String> {
    let size = gib * GIB;
    let tmp = std::env::temp_dir();
    let free = free_bytes(&tmp).unwrap_or(0);
    let want = 2 * size + 8 * GIB;
    if free < want {
        let note = format!(
            "{} GiB free under {}, {} GiB wanted",
            free / GIB,
            tmp.display(),
            want / GIB
        );
        println!("bigblob: {gib} GiB skipped: {note}");
        return Ok(serde_json::json!({ "gib": gib, "skipped": note }));
    }
    let source = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the source registry: {e}"))?;
    let client = RegistryClient::new(RegistryOptions::insecure_at(&source.url()))
        .map_err(|e| format!("client: {e}"))?;
    let started = Instant::now();
    let digest = seed_layer(&client, 0xB16_B10B ^ gib, size).await?;
    put_image(&client, &digest, size).await?;
    eprintln!(
        "bigblob: {gib} GiB layer {digest} seeded in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let get = curl_get(&source, &digest, size)?;
    println!(
        "bigblob: {gib} GiB: (a) curl GET {get:.2}s {:.0} MiB/s",
        rate(size, get)
    );
    let mut runs = Vec::new();
    // Each ferry run is paired with a curl PUT just before it: the machine's load moves the
    // registry's rate by a fifth between minutes, so a ratio compares neighbours.
    for variant in &options.variants {
        for run in 0..options.runs {
            let put = curl_put(&stored_file(&source, &digest), &digest).await?;
            let floor = rate(size, get).min(rate(size, put));
            let label = format!("{gib}g-{variant:?}-{run}");
            let r = ferry_copy(&source, &digest, size, *variant, workdir, &label).await?;
            let ferry_rate = rate(size, r.secs);
            println!(
                "bigblob: {gib} GiB: (b) curl POST + PUT -T {put:.2}s {:.0} MiB/s; (c) ferry sync, {}: {:.2}s {:.0} MiB/s, ratio {:.2} of min(a, b) {floor:.0} MiB/s; peak RSS {:.1} MiB; CPU {:.1}s ({:.2} s/GiB); {} PATCH, {} PUT to the target",
                rate(size, put),
                variant.name(),
                r.secs,
                ferry_rate,
                ferry_rate / floor,
                r.rss_kib as f64 / 1024.0,
                r.cpu,
                r.cpu / gib as f64,
                r.patches,
                r.puts
            );
            runs.push(serde_json::json!({
                "variant": variant.name(),
                "run": run,
                "curl_get_s": get,
                "curl_put_s": put,
                "floor_mib_s": floor,
                "ferry_s": r.secs,
                "ferry_mib_s": ferry_rate,
                "ratio": ferry_rate / floor,
                "peak_rss_kib": r.rss_kib,
                "cpu_s": r.cpu,
                "patches": r.patches,
                "puts": r.puts,
            }));
        }
    }
    source
        .stop()
        .await
        .map_err(|e| format!("stopping the source registry: {e}"))?;
    Ok(serde_json::json!({ "gib": gib, "curl_get_s": get, "runs": runs }))
}

async fn bench(options: Options) -> Result<(), String> {
    let ferry = ferry_binary();
    println!(
        "bigblob: {} on {} CPUs, ferry {}, {}, load average {}",
        measure::version_of("date", &["-u"]),
        measure::version_of("nproc", &[]),
        ferry.display(),
        measure::version_of("curl", &["--version"]),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );
    let workdir = tempfile::Builder::new()
        .prefix("ferry-bench-bigblob-")
        .tempdir()
        .map_err(|e| format!("creating a work directory: {e}"))?;
    let mut sizes = Vec::new();
    for gib in &options.sizes {
        sizes.push(bench_size(&options, *gib, workdir.path()).await?);
    }
    if let Some(path) = &options.json {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "sizes": sizes }))
            .map_err(|e| format!("encoding JSON: {e}"))?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    let result = match parse_options() {
        Ok(options) => bench(options).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bigblob: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
