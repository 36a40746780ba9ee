//! Benchmark: `ferry sync` against `skopeo sync` on three seeded corpora in real distribution
//! registries (wall time, requests per side, bytes read, peak RSS), and ferry's peak memory on a
//! 1 GiB layer. Run: `scripts/bench` (writes docs/performance.md) or `cargo bench --bench compare`.
//!
//! Options (after `--`): `--runs N` (default 3), `--shapes a,b,c` (`none` for none), `--tools ferry,skopeo`,
//! `--memory-mib M` (default 1024, 0 skips it), `--no-layouts` (skips the OCI layout export and
//! import of each corpus), `--write-doc` (update docs/performance.md), `--personalities` (only
//! the personality × tool table: benches/compare/personalities.rs), `--verify-cost` (only what
//! `ferry verify` costs on corpus A: benches/compare/verify_cost.rs).
//! `FERRY_BIN` names another ferry binary than the one cargo built with this bench;
//! `FERRY_BENCH_ENGINE` (e.g. `blobs_in_flight: 4`) adds engine settings to ferry's config, for
//! investigations only (the documented figures use ferry's defaults);
//! `FERRY_BENCH_KEEP=1` keeps the work directories (configs, process output).

#[path = "compare/corpus.rs"]
mod corpus;
#[path = "compare/layouts.rs"]
mod layouts;
#[path = "compare/measure.rs"]
mod measure;
#[path = "compare/personalities.rs"]
mod personalities;
#[path = "compare/report.rs"]
mod report;
#[path = "compare/signature_cost.rs"]
mod signature_cost;
#[path = "compare/verify_cost.rs"]
mod verify_cost;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_distribution::digest::{Algorithm, Digest};
use ferry_distribution::ops::manifest::Manifest;
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use futures::StreamExt as _;

use corpus::{Corpus, Shape};
use measure::{ProcessCost, Traffic};

/// The syncing tool under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ferry,
    Skopeo,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ferry => "ferry",
            Tool::Skopeo => "skopeo",
        }
    }
}

/// One sync measured: the process and what each registry saw.
#[derive(Debug, Clone)]
pub struct Sample {
    pub cost: ProcessCost,
    pub source: Traffic,
    pub target: Traffic,
}

/// Cold and warm samples of one tool on one corpus, one per run.
#[derive(Debug, Clone, Default)]
pub struct ToolRuns {
    pub cold: Vec<Sample>,
    pub warm: Vec<Sample>,
}

#[derive(Debug, Clone)]
struct Options {
    runs: usize,
    shapes: Vec<Shape>,
    tools: Vec<Tool>,
    memory_mib: u64,
    layouts: bool,
    write_doc: bool,
    personalities: bool,
    verify_cost: bool,
    signature_cost: bool,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        runs: 3,
        shapes: vec![Shape::many_small(), Shape::few_large(), Shape::chunked()],
        tools: vec![Tool::Ferry, Tool::Skopeo],
        memory_mib: 1024,
        layouts: true,
        write_doc: false,
        personalities: false,
        verify_cost: false,
        signature_cost: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| measure::option_value(&mut args, name);
        match arg.as_str() {
            "--runs" => {
                options.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
            }
            "--shapes" => {
                let shapes = value("--shapes")?;
                options.shapes = shapes
                    .split(',')
                    .filter(|s| !s.is_empty() && *s != "none")
                    .map(|s| match s {
                        "a" | "A" => Ok(Shape::many_small()),
                        "b" | "B" => Ok(Shape::few_large()),
                        "c" | "C" => Ok(Shape::chunked()),
                        other => Err(format!("unknown shape {other:?} (a, b or c)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--tools" => {
                options.tools = value("--tools")?
                    .split(',')
                    .map(|s| match s {
                        "ferry" => Ok(Tool::Ferry),
                        "skopeo" => Ok(Tool::Skopeo),
                        other => Err(format!("unknown tool {other:?} (ferry or skopeo)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--memory-mib" => {
                options.memory_mib = value("--memory-mib")?
                    .parse()
                    .map_err(|e| format!("--memory-mib: {e}"))?;
            }
            "--no-layouts" => options.layouts = false,
            "--write-doc" => options.write_doc = true,
            "--personalities" => options.personalities = true,
            "--verify-cost" => options.verify_cost = true,
            "--signature-cost" => options.signature_cost = true,
            // cargo bench passes --bench to every harness=false bench.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(options)
}

fn ferry_binary() -> PathBuf {
    std::env::var_os("FERRY_BIN")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ferry")), PathBuf::from)
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// True when this process runs as root (skopeo's blob-info cache is then system-wide).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Where skopeo (as root) keeps its blob-info cache, which survives between runs.
const SKOPEO_ROOT_CACHE: &str = "/var/lib/containers/cache";

/// The prefix the mirrored repositories get in the target registry.
const MIRROR_PREFIX: &str = "mirror";

/// Where a source repository lands in the target: `mirror/<last path component>`, the name
/// `skopeo sync` (without `--scoped`) gives it; ferry is configured to match.
fn target_repository(source_repository: &str) -> String {
    let base = source_repository
        .rsplit('/')
        .next()
        .unwrap_or(source_repository);
    format!("{MIRROR_PREFIX}/{base}")
}

/// A program, its arguments, and extra environment variables.
type Invocation = (String, Vec<String>, Vec<(String, String)>);

struct SyncJob<'a> {
    tool: Tool,
    source: &'a RealRegistry,
    target: &'a RealRegistry,
    repos: Vec<String>,
    workdir: &'a Path,
    /// skopeo's private blob-info cache directory, kept from the cold to the warm run.
    skopeo_cache: PathBuf,
}

impl SyncJob<'_> {
    fn command(&self) -> Result<Invocation, String> {
        match self.tool {
            Tool::Ferry => {
                let engine = std::env::var("FERRY_BENCH_ENGINE").unwrap_or_default();
                let mut yaml = if engine.is_empty() {
                    String::from("version: 1\nregistries:\n")
                } else {
                    format!("version: 1\nengine: {{ {engine} }}\nregistries:\n")
                };
                for registry in [self.source, self.target] {
                    yaml.push_str(&format!(
                        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 16\n",
                        registry.host(),
                        registry.url()
                    ));
                }
                yaml.push_str("mappings:\n");
                for repo in &self.repos {
                    yaml.push_str(&format!(
                        "  - source: \"{}/{repo}\"\n    targets: [\"{}/{}\"]\n    tags: {{ include: [\"*\"] }}\n",
                        self.source.host(),
                        self.target.host(),
                        target_repository(repo)
                    ));
                }
                let path = self.workdir.join("ferry.yaml");
                std::fs::write(&path, yaml)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
                let args = vec![
                    "--progress".into(),
                    "none".into(),
                    "sync".into(),
                    "-c".into(),
                    path.display().to_string(),
                ];
                Ok((ferry_binary().display().to_string(), args, Vec::new()))
            }
            Tool::Skopeo => {
                let mut yaml = format!("{}:\n  tls-verify: false\n  images:\n", self.source.host());
                for repo in &self.repos {
                    yaml.push_str(&format!("    {repo}: []\n"));
                }
                let path = self.workdir.join("skopeo.yaml");
                std::fs::write(&path, yaml)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
                let skopeo_args: Vec<String> = [
                    "sync",
                    "--src",
                    "yaml",
                    "--dest",
                    "docker",
                    "--all",
                    "--preserve-digests",
                    "--dest-tls-verify=false",
                ]
                .iter()
                .map(|s| s.to_string())
                .chain([
                    path.display().to_string(),
                    format!("{}/{MIRROR_PREFIX}", self.target.host()),
                ])
                .collect();
                std::fs::create_dir_all(&self.skopeo_cache)
                    .map_err(|e| format!("creating {}: {e}", self.skopeo_cache.display()))?;
                if running_as_root() {
                    // The cache is system-wide for root: give this run its own, in a private
                    // mount namespace, so no earlier run's knowledge helps or hurts.
                    std::fs::create_dir_all(SKOPEO_ROOT_CACHE)
                        .map_err(|e| format!("creating {SKOPEO_ROOT_CACHE}: {e}"))?;
                    let script =
                        format!("mount --bind \"$0\" {SKOPEO_ROOT_CACHE} && exec skopeo \"$@\"");
                    let mut args = vec![
                        "--mount".into(),
                        "sh".into(),
                        "-c".into(),
                        script,
                        self.skopeo_cache.display().to_string(),
                    ];
                    args.extend(skopeo_args);
                    Ok(("unshare".into(), args, Vec::new()))
                } else {
                    let home = self.skopeo_cache.display().to_string();
                    let envs = vec![
                        ("HOME".into(), home.clone()),
                        ("XDG_DATA_HOME".into(), home),
                    ];
                    Ok(("skopeo".into(), skopeo_args, envs))
                }
            }
        }
    }

    async fn run(&self, label: &str) -> Result<Sample, String> {
        let (program, args, envs) = self.command()?;
        let source_before = measure::requests(self.source).await?.len();
        let target_before = measure::requests(self.target).await?.len();
        let log = self
            .workdir
            .join(format!("{}-{label}.log", self.tool.name()));
        let cpu_before = [self.source, self.target].map(measure::registry_cpu_secs);
        let cost = measure::run_measured(&program, &args, &envs, &log).await?;
        let cpu_after = [self.source, self.target].map(measure::registry_cpu_secs);
        let source_log = measure::requests(self.source).await?;
        let target_log = measure::requests(self.target).await?;
        eprintln!(
            "compare: {} {label}: wall {:.2} s, its CPU {:.2} s, registry CPU source {:.2} s target {:.2} s, requests source {} target {}",
            self.tool.name(),
            cost.wall.as_secs_f64(),
            cost.cpu_secs,
            cpu_after[0] - cpu_before[0],
            cpu_after[1] - cpu_before[1],
            source_log.len() - source_before,
            target_log.len() - target_before,
        );
        // With FERRY_BENCH_KEEP=1, the registries' own logs go beside the tool's.
        for (side, registry) in [("source", self.source), ("target", self.target)] {
            let _ = std::fs::copy(
                registry.stderr_log_path(),
                self.workdir
                    .join(format!("{}-{label}-{side}-registry.log", self.tool.name())),
            );
        }
        Ok(Sample {
            cost,
            source: Traffic::of(&source_log[source_before..]),
            target: Traffic::of(&target_log[target_before..]),
        })
    }
}

/// The order the tools run in, alternating from run to run so that neither always runs on a
/// cooler (or warmer) machine.
fn run_order(run: usize, tools: usize) -> Box<dyn Iterator<Item = usize>> {
    if run.is_multiple_of(2) {
        Box::new(0..tools)
    } else {
        Box::new((0..tools).rev())
    }
}

/// A directory for configs and process logs; kept after the run when `FERRY_BENCH_KEEP=1`.
fn work_dir(prefix: &str) -> Result<tempfile::TempDir, String> {
    let keep = std::env::var("FERRY_BENCH_KEEP").is_ok_and(|v| v == "1");
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .disable_cleanup(keep)
        .tempdir()
        .map_err(|e| format!("creating a work directory: {e}"))?;
    if keep {
        eprintln!("compare: keeping {}", dir.path().display());
    }
    Ok(dir)
}

/// Checks that every tag of the corpus is in the target with the source's digest.
async fn verify_target(corpus: &Corpus, target: &RealRegistry) -> Result<(), String> {
    let client = RegistryClient::new(RegistryOptions::insecure_at(&target.url()))
        .map_err(|e| format!("client for {}: {e}", target.url()))?;
    let checks = corpus
        .repos
        .iter()
        .flat_map(|repo| repo.tags.iter().map(move |tag| (repo, tag)))
        .map(|(repo, tag)| {
            let client = client.clone();
            async move {
                let repository = target_repository(&repo.name);
                match client.head_manifest(&repository, &tag.tag).await {
                    Ok(Some(info)) if info.digest == tag.top.digest => Ok(()),
                    Ok(Some(info)) => Err(format!(
                        "{repository}:{} is {} in the target, {} in the source",
                        tag.tag, info.digest, tag.top.digest
                    )),
                    Ok(None) => Err(format!("{repository}:{} is missing in the target", tag.tag)),
                    Err(e) => Err(format!("HEAD {repository}:{}: {e}", tag.tag)),
                }
            }
        });
    let results: Vec<Result<(), String>> = futures::stream::iter(checks)
        .buffer_unordered(8)
        .collect()
        .await;
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} tags wrong after the sync: {}",
            failures.len(),
            corpus.tag_count(),
            failures
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ))
    }
}

/// A fresh target, a cold sync (checked), then a warm sync of the same corpus.
async fn cold_and_warm(
    tool: Tool,
    corpus: &Corpus,
    source: &RealRegistry,
    workdir: &Path,
    run: usize,
) -> Result<(Sample, Sample), String> {
    let target = measure::start_registry()
        .await
        .map_err(|e| format!("starting a target registry: {e}"))?;
    let job = SyncJob {
        tool,
        source,
        target: &target,
        repos: corpus.repos.iter().map(|r| r.name.clone()).collect(),
        workdir,
        skopeo_cache: workdir.join(format!("skopeo-cache-{run}")),
    };
    let cold = job.run(&format!("cold-{run}")).await?;
    verify_target(corpus, &target).await?;
    let warm = job.run(&format!("warm-{run}")).await?;
    target
        .stop()
        .await
        .map_err(|e| format!("stopping the target registry: {e}"))?;
    Ok((cold, warm))
}

/// Results for one corpus shape.
pub struct ShapeResult {
    pub corpus: Corpus,
    pub runs: Vec<(Tool, ToolRuns)>,
    /// The export into OCI layouts and import from them, unless `--no-layouts`.
    pub layouts: Option<layouts::LayoutResult>,
}

async fn bench_shape(options: &Options, shape: &Shape) -> Result<ShapeResult, String> {
    eprintln!("compare: generating corpus {}", shape.name);
    let corpus = Corpus::generate(shape);
    let source = measure::start_registry()
        .await
        .map_err(|e| format!("starting the source registry: {e}"))?;
    eprintln!(
        "compare: seeding {} repositories, {} tags, {} blobs ({:.1} MiB) into {}",
        corpus.repos.len(),
        corpus.tag_count(),
        corpus.blobs.len(),
        corpus.unique_bytes() as f64 / (1 << 20) as f64,
        source.host()
    );
    corpus.push(&source.url(), 8).await?;
    let workdir = work_dir("ferry-bench-compare-")?;
    let mut runs: Vec<(Tool, ToolRuns)> = options
        .tools
        .iter()
        .map(|t| (*t, ToolRuns::default()))
        .collect();
    for run in 0..options.runs {
        for i in run_order(run, runs.len()) {
            let tool = runs[i].0;
            let (cold, warm) = cold_and_warm(tool, &corpus, &source, workdir.path(), run)
                .await
                .map_err(|e| format!("{} run {run}: {e}", tool.name()))?;
            eprintln!(
                "compare: {} run {run}: cold {:.2}s ({} src / {} dst requests), warm {:.2}s ({} / {})",
                tool.name(),
                cold.cost.wall.as_secs_f64(),
                cold.source.requests,
                cold.target.requests,
                warm.cost.wall.as_secs_f64(),
                warm.source.requests,
                warm.target.requests,
            );
            runs[i].1.cold.push(cold);
            runs[i].1.warm.push(warm);
        }
    }
    let layouts = if options.layouts {
        let result =
            layouts::bench_layouts(&options.tools, options.runs, corpus.clone(), &source).await?;
        Some(result)
    } else {
        None
    };
    source
        .stop()
        .await
        .map_err(|e| format!("stopping the source registry: {e}"))?;
    Ok(ShapeResult {
        corpus,
        runs,
        layouts,
    })
}

/// One copy of the large layer: peak RSS and wall time.
pub struct LargeCopy {
    pub tool: Tool,
    pub cost: ProcessCost,
    pub source_bytes: u64,
}

/// Seeds one image with a `mib` MiB incompressible layer (streamed: digest pass, then PATCH
/// chunks), then copies it with each tool into fresh targets, `runs` times alternating.
async fn bench_large_layer(options: &Options, mib: u64) -> Result<(u64, Vec<LargeCopy>), String> {
    let size = mib << 20;
    let seed = 0xF3_22_C0;
    let source = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the source registry: {e}"))?;
    let client = RegistryClient::new(RegistryOptions::insecure_at(&source.url()))
        .map_err(|e| format!("client: {e}"))?;
    eprintln!("compare: hashing the {mib} MiB layer");
    let digest = corpus::layer_digest(seed, size);
    eprintln!(
        "compare: streaming the {mib} MiB layer into {}",
        source.host()
    );
    let repo = "large/layer";
    corpus::stream_layer(&client, repo, &digest, seed, size).await?;
    let config = format!(
        "{{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{{\"type\":\"layers\",\"diff_ids\":[\"{digest}\"]}}}}"
    )
    .into_bytes();
    let config_digest = Digest::of_bytes(Algorithm::Sha256, &config);
    client
        .push_blob_bytes(repo, &config_digest, config.clone().into())
        .await
        .map_err(|e| format!("pushing the config: {e}"))?;
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"{}\",\"config\":{{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"{config_digest}\",\"size\":{}}},\"layers\":[{{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"{digest}\",\"size\":{size}}}]}}",
        corpus::OCI_MANIFEST,
        config.len()
    )
    .into_bytes();
    let manifest = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &manifest),
        bytes: manifest.into(),
        media_type: corpus::OCI_MANIFEST.to_owned(),
    };
    client
        .put_manifest(repo, "1", &manifest)
        .await
        .map_err(|e| format!("putting the manifest: {e}"))?;
    let workdir = work_dir("ferry-bench-large-")?;
    let mut copies = Vec::new();
    for run in 0..options.runs {
        for tool in run_order(run, options.tools.len()).map(|i| options.tools[i]) {
            let target = RealRegistry::start()
                .await
                .map_err(|e| format!("starting a target registry: {e}"))?;
            let job = SyncJob {
                tool,
                source: &source,
                target: &target,
                repos: vec![repo.to_owned()],
                workdir: workdir.path(),
                skopeo_cache: workdir.path().join(format!("skopeo-cache-{run}")),
            };
            let sample = job.run(&format!("large-{run}")).await?;
            let target_client = RegistryClient::new(RegistryOptions::insecure_at(&target.url()))
                .map_err(|e| format!("client: {e}"))?;
            let landed = target_client
                .head_blob(&target_repository(repo), &digest)
                .await
                .map_err(|e| format!("HEAD the large layer in the target: {e}"))?;
            if landed != Some(size) {
                return Err(format!(
                    "{}: the large layer is {landed:?} bytes in the target, want {size}",
                    tool.name()
                ));
            }
            eprintln!(
                "compare: large layer, {} run {run}: {:.2}s, peak RSS {} KiB",
                tool.name(),
                sample.cost.wall.as_secs_f64(),
                sample.cost.peak_rss_kib
            );
            copies.push(LargeCopy {
                tool,
                cost: sample.cost,
                source_bytes: sample.source.blob_bytes,
            });
            target
                .stop()
                .await
                .map_err(|e| format!("stopping the target registry: {e}"))?;
        }
    }
    source
        .stop()
        .await
        .map_err(|e| format!("stopping the source registry: {e}"))?;
    Ok((size, copies))
}

/// `--personalities`: the personality × tool table only.
async fn run_personalities(options: &Options) -> Result<(), String> {
    let machine = report::Machine::collect(&ferry_binary());
    let (corpus, cells) = personalities::bench(&options.tools).await?;
    // The bench and the ferry it runs are built in the same profile.
    let (profile, command) = if cfg!(debug_assertions) {
        (
            "debug build",
            "cargo build --bench compare && target/debug/deps/compare-<hash> --personalities",
        )
    } else {
        (
            "release build",
            "cargo bench --bench compare -- --personalities",
        )
    };
    let describe = format!(
        "Measured {} on {} CPUs ({}), {} memory, with `{command}`; load average {} when the bench \
         started (other engineers' builds on the same machine). Versions: {} ({profile}); {}; \
         {} (Debian `docker-registry`) for the real registry and the non-personality side; the \
         test kit's in-process registry for each personality.",
        machine.date,
        machine.cpus,
        machine.cpu_model,
        machine.memory,
        machine.load,
        machine.ferry,
        machine.skopeo,
        machine.registry
    );
    let md = personalities::section(&describe, &corpus, &options.tools, &cells);
    println!("{md}");
    if options.write_doc {
        let path = repo_root().join("docs/performance.md");
        report::write_section(&path, personalities::HEADING, personalities::MARKERS, &md)?;
        eprintln!("compare: wrote {}", path.display());
    }
    Ok(())
}

async fn run_all(options: Options) -> Result<(), String> {
    if options.signature_cost {
        println!("{}", signature_cost::run().await?);
        return Ok(());
    }
    if options.verify_cost {
        println!("{}", verify_cost::run().await?);
        return Ok(());
    }
    if options.personalities {
        return run_personalities(&options).await;
    }
    let started = std::time::Instant::now();
    let machine = report::Machine::collect(&ferry_binary());
    let mut shapes = Vec::new();
    for shape in &options.shapes {
        shapes.push(bench_shape(&options, shape).await?);
    }
    let large = if options.memory_mib > 0 {
        Some(bench_large_layer(&options, options.memory_mib).await?)
    } else {
        None
    };
    let command = if options.write_doc {
        "scripts/bench".to_owned()
    } else {
        "cargo bench --bench compare".to_owned()
    };
    let compare_md = report::compare_section(&machine, &command, options.runs, &shapes);
    let memory_md = large
        .as_ref()
        .map(|(size, copies)| report::memory_section(&machine, &command, *size, copies));
    let layout_results: Vec<&layouts::LayoutResult> =
        shapes.iter().filter_map(|s| s.layouts.as_ref()).collect();
    let layouts_md = (!layout_results.is_empty()).then(|| {
        layouts::layouts_section(&machine.describe(&command), options.runs, &layout_results)
    });
    println!("{compare_md}");
    if let Some(text) = &memory_md {
        println!("{text}");
    }
    if let Some(text) = &layouts_md {
        println!("{text}");
    }
    eprintln!(
        "compare: finished in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    if options.write_doc {
        let path = repo_root().join("docs/performance.md");
        report::write_doc(&path, &compare_md, memory_md.as_deref())?;
        if let Some(text) = &layouts_md {
            report::write_section(
                &path,
                layouts::LAYOUTS_HEADING,
                layouts::LAYOUTS_MARKERS,
                text,
            )?;
        }
        eprintln!("compare: wrote {}", path.display());
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    measure::bench_main("compare", parse_options, run_all)
}

/// Seconds with two decimals.
pub fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}
