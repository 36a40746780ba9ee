//! Benchmark (issue 42): ferry against ocync and skopeo on every issue-42 target, one table of
//! ratios and a JSON file of raw figures. Run it as `scripts/bench compare` (which also runs the
//! big-layer and fault rows through benches/bigblob.rs and benches/resilience.rs and passes their
//! JSON here).
//!
//! Options after `--`: `--runs N` (default 3), `--only corpus-a,scale-250,scale-1000,bigblob,s1,s6`,
//! `--json PATH` (raw figures; default `bench-compare.json` in the temp directory),
//! `--bigblob-json PATH` and `--resilience-json PATH` (the other benches' figures, read into the
//! table), `--skopeo-scale` (skopeo in the scale rows too: slow), `--bound SECS` (a cold sync
//! still going after SECS is stopped, shown as "> SECS", and that tool is not run again on that
//! corpus: ocync v0.5.2 takes about an hour at 1,000 × 5), `--warm-runs N` (warm runs after
//! each cold one in the scale rows, default 1), `--registry-dir DIR` (the registries' storage
//! under DIR, e.g. tmpfs: "Above the CPU floor" in docs/performance.md), `--write-doc` (the section of
//! docs/performance.md). `OCYNC_BIN` / `FERRY_BIN` name the binaries; `FERRY_BENCH_KEEP=1` keeps
//! the work directories.

#[allow(dead_code)]
#[path = "compare/corpus.rs"]
mod corpus;
#[path = "versus/cost.rs"]
mod cost;
#[allow(dead_code)]
#[path = "compare/measure.rs"]
mod measure;
#[path = "versus/table.rs"]
mod table;
#[path = "versus/tools.rs"]
mod tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use futures::StreamExt as _;

use corpus::{Corpus, Shape};
use cost::Run;
use tools::{Job, Tool, target_repository};

/// The rows this binary measures itself; `bigblob`, `s1` and `s6` come from the JSON files.
pub const ROWS: [&str; 6] = ["corpus-a", "scale-250", "scale-1000", "bigblob", "s1", "s6"];

pub struct Options {
    pub runs: usize,
    pub only: Vec<String>,
    pub json: PathBuf,
    pub bigblob_json: Option<PathBuf>,
    pub resilience_json: Option<PathBuf>,
    pub skopeo_scale: bool,
    pub write_doc: bool,
    /// A cold sync still going after this is stopped (`--bound SECS`).
    pub bound: Option<std::time::Duration>,
    /// Warm runs after each cold one in the scale rows (`--warm-runs N`, default 1): the
    /// state a cold run leaves is what every warm run starts from, so N of them need one cold.
    pub warm_runs: usize,
    /// Where the registries keep their storage (`--registry-dir DIR`); the system's temporary
    /// directory when not given. On tmpfs the registries' `fsync` costs nothing.
    pub registry_dir: Option<PathBuf>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        runs: 3,
        only: ROWS.iter().map(|s| (*s).to_owned()).collect(),
        json: std::env::temp_dir().join("bench-compare.json"),
        bigblob_json: None,
        resilience_json: None,
        skopeo_scale: false,
        write_doc: false,
        bound: None,
        warm_runs: 1,
        registry_dir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| measure::option_value(&mut args, name);
        // A count or a number of seconds: a whole number above zero.
        let positive = |name: &str, text: String| {
            text.parse::<u64>().ok().filter(|n| *n > 0).ok_or(format!(
                "{name} takes a positive whole number, not {text:?}"
            ))
        };
        match arg.as_str() {
            "--runs" => options.runs = positive("--runs", value("--runs")?)? as usize,
            "--only" => {
                options.only = value("--only")?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| {
                        ROWS.contains(&s)
                            .then(|| s.to_owned())
                            .ok_or(format!("--only: unknown row {s:?} (one of {ROWS:?})"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--json" => options.json = value("--json")?.into(),
            "--bigblob-json" => options.bigblob_json = Some(value("--bigblob-json")?.into()),
            "--resilience-json" => {
                options.resilience_json = Some(value("--resilience-json")?.into());
            }
            "--skopeo-scale" => options.skopeo_scale = true,
            "--write-doc" => options.write_doc = true,
            "--bound" => {
                let secs = positive("--bound", value("--bound")?)?;
                options.bound = Some(std::time::Duration::from_secs(secs));
            }
            "--warm-runs" => {
                options.warm_runs = positive("--warm-runs", value("--warm-runs")?)? as usize;
            }
            "--registry-dir" => {
                let dir = PathBuf::from(value("--registry-dir")?);
                if !dir.is_dir() {
                    return Err(format!(
                        "--registry-dir: {} is not a directory",
                        dir.display()
                    ));
                }
                options.registry_dir = Some(dir);
            }
            // cargo bench passes --bench to every harness=false bench.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// The tools found on this machine, with their binaries.
pub type Found = Vec<(Tool, PathBuf)>;

/// Every run of every tool on one corpus: cold, and warm when the row has one.
#[derive(Default)]
pub struct RowRuns {
    pub cold: BTreeMap<Tool, Vec<Run>>,
    pub warm: BTreeMap<Tool, Vec<Run>>,
    /// Tools whose sync failed (or left the target incomplete), with the error: not run again.
    pub failed: BTreeMap<Tool, String>,
    /// Tools whose cold sync was stopped at `--bound`, with the bound in seconds: not run again.
    pub stopped: BTreeMap<Tool, f64>,
}

/// One measured corpus.
pub struct CorpusRow {
    pub key: &'static str,
    pub corpus: Corpus,
    pub runs: RowRuns,
}

/// A directory for configs and process logs; kept after the run when `FERRY_BENCH_KEEP=1`.
fn work_dir() -> Result<tempfile::TempDir, String> {
    let keep = std::env::var("FERRY_BENCH_KEEP").is_ok_and(|v| v == "1");
    let dir = tempfile::Builder::new()
        .prefix("ferry-bench-versus-")
        .disable_cleanup(keep)
        .tempdir()
        .map_err(|e| format!("creating a work directory: {e}"))?;
    if keep {
        eprintln!("versus: keeping {}", dir.path().display());
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
                    Ok(Some(info)) if info.digest == tag.top.digest => None,
                    Ok(other) => Some(format!("{repository}:{} is {other:?}", tag.tag)),
                    Err(e) => Some(format!("HEAD {repository}:{}: {e}", tag.tag)),
                }
            }
        });
    let failures: Vec<String> = futures::stream::iter(checks)
        .buffer_unordered(16)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    match failures.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "{} of {} tags wrong after the sync, e.g. {first}",
            failures.len(),
            corpus.tag_count()
        )),
    }
}

/// Seeds `shape` into a fresh source, then per run and tool (order alternating): a fresh
/// target, a cold sync (checked tag by tag), and `warm` warm ones (0: none).
async fn bench_corpus(
    key: &'static str,
    shape: &Shape,
    tools: &Found,
    options: &Options,
    warm: usize,
) -> Result<CorpusRow, String> {
    let (runs, bound) = (options.runs, options.bound);
    let corpus = Corpus::generate(shape);
    let source = measure::start_registry_in(options.registry_dir.clone())
        .await
        .map_err(|e| format!("the source: {e}"))?;
    let seeding = std::time::Instant::now();
    corpus.push(&source.url(), 16).await?;
    eprintln!(
        "versus: {key}: seeded {} repositories, {} tags, {} blobs in {:.1}s",
        corpus.repos.len(),
        corpus.tag_count(),
        corpus.blobs.len(),
        seeding.elapsed().as_secs_f64()
    );
    let repos: Vec<String> = corpus.repos.iter().map(|r| r.name.clone()).collect();
    let workdir = work_dir()?;
    let mut row = RowRuns::default();
    for run in 0..runs {
        let order: Vec<&(Tool, PathBuf)> = if run % 2 == 0 {
            tools.iter().collect()
        } else {
            tools.iter().rev().collect()
        };
        for (tool, binary) in order {
            if row.failed.contains_key(tool) || row.stopped.contains_key(tool) {
                continue;
            }
            let target = measure::start_registry_in(options.registry_dir.clone())
                .await
                .map_err(|e| format!("a target: {e}"))?;
            let job = Job {
                tool: *tool,
                binary,
                source: &source,
                target: &target,
                repos: &repos,
                dir: workdir.path().join(format!("{key}-{}-{run}", tool.name())),
            };
            let checked = match job.run("cold", bound).await {
                Ok(Some(cold)) => verify_target(&corpus, &target).await.map(|()| cold),
                Ok(None) => {
                    let secs = bound.map_or(0.0, |b| b.as_secs_f64());
                    eprintln!(
                        "versus: {key} {} run {run}: stopped at the {secs:.0}s bound; not run again on {key}",
                        tool.name()
                    );
                    row.stopped.insert(*tool, secs);
                    target
                        .stop()
                        .await
                        .map_err(|e| format!("stopping the target registry: {e}"))?;
                    continue;
                }
                Err(e) => Err(e),
            };
            let cold = match checked {
                Ok(cold) => cold,
                Err(e) => {
                    eprintln!("versus: {key}, {} run {run} failed: {e}", tool.name());
                    row.failed.insert(*tool, e);
                    continue;
                }
            };
            eprintln!(
                "versus: {key} {} run {run}: cold {:.2}s, {} + {} requests, CPU {:.1}s tool / {:.1}s + {:.1}s registries",
                tool.name(),
                cold.process.wall,
                cold.source.traffic.requests,
                cold.target.traffic.requests,
                cold.process.cpu,
                cold.source.cpu,
                cold.target.cpu
            );
            row.cold.entry(*tool).or_default().push(cold);
            for _ in 0..warm {
                let again = job
                    .run("warm", None)
                    .await
                    .map_err(|e| format!("{key}, {} run {run}, warm: {e}", tool.name()))?
                    .ok_or(format!("{key}, {} run {run}, warm: stopped", tool.name()))?;
                eprintln!(
                    "versus: {key} {} run {run}: warm {:.2}s, {} + {} requests",
                    tool.name(),
                    again.process.wall,
                    again.source.traffic.requests,
                    again.target.traffic.requests
                );
                row.warm.entry(*tool).or_default().push(again);
            }
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
    Ok(CorpusRow {
        key,
        corpus,
        runs: row,
    })
}

fn read_json(path: Option<&Path>) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path?).ok()?;
    serde_json::from_str(&text).ok()
}

async fn run_all(options: Options) -> Result<(), String> {
    let started = std::time::Instant::now();
    let machine = table::Machine::collect();
    let found: Found = Tool::ALL
        .iter()
        .filter_map(|t| t.locate().map(|b| (*t, b)))
        .collect();
    for tool in Tool::ALL {
        if !found.iter().any(|(t, _)| *t == tool) {
            eprintln!(
                "versus: {} not installed: its columns stay empty",
                tool.name()
            );
        }
    }
    let scale_tools: Found = found
        .iter()
        .filter(|(t, _)| options.skopeo_scale || *t != Tool::Skopeo)
        .cloned()
        .collect();
    let wanted = |row: &str| options.only.iter().any(|r| r == row);
    let mut rows = Vec::new();
    if wanted("corpus-a") {
        let shape = Shape::many_small();
        rows.push(bench_corpus("corpus-a", &shape, &found, &options, 0).await?);
    }
    for (key, repos) in [("scale-250", 250), ("scale-1000", 1000)] {
        if wanted(key) {
            let shape = Shape::scale(repos);
            let row = bench_corpus(key, &shape, &scale_tools, &options, options.warm_runs);
            rows.push(row.await?);
        }
    }
    let bigblob = wanted("bigblob")
        .then(|| read_json(options.bigblob_json.as_deref()))
        .flatten();
    let resilience = (wanted("s1") || wanted("s6"))
        .then(|| read_json(options.resilience_json.as_deref()))
        .flatten();
    let inputs = table::Inputs {
        options: &options,
        machine: &machine,
        found: &found,
        rows: &rows,
        bigblob: bigblob.as_ref(),
        resilience: resilience.as_ref(),
    };
    let md = table::render(&inputs);
    println!("{md}");
    let raw = table::raw_json(&inputs);
    let text = serde_json::to_string_pretty(&raw).map_err(|e| format!("encoding JSON: {e}"))?;
    std::fs::write(&options.json, text)
        .map_err(|e| format!("writing {}: {e}", options.json.display()))?;
    eprintln!(
        "versus: raw figures in {}; finished in {:.0}s",
        options.json.display(),
        started.elapsed().as_secs_f64()
    );
    if options.write_doc {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/performance.md");
        table::write_doc(&path, &md)?;
        eprintln!("versus: wrote {}", path.display());
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    measure::bench_main("versus", parse_options, run_all)
}
