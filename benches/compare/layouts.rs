//! The air-gapped round trip: a registry exported into OCI image-layout directories, then those
//! imported into a fresh registry; ferry (one `ferry sync` each way) against skopeo (`copy` a tag).

use std::path::{Path, PathBuf};

use ferry_testkit::distribution::RealRegistry;

use crate::corpus::Corpus;
use crate::measure::{self, ProcessCost, median};
use crate::{Invocation, Tool, ferry_binary, running_as_root, target_repository};

pub const LAYOUTS_HEADING: &str = "## OCI layouts: export and import";
pub const LAYOUTS_MARKERS: (&str, &str) = ("<!-- layouts:begin -->", "<!-- layouts:end -->");

/// One tool's round trip in one run.
#[derive(Debug, Clone)]
pub struct RoundTrip {
    pub export_cold: ProcessCost,
    pub export_warm: ProcessCost,
    pub import_cold: ProcessCost,
    pub import_warm: ProcessCost,
    /// Requests the source registry saw in the cold export; the target in the cold import.
    pub export_requests: u64,
    pub import_requests: u64,
    /// Bytes of every file under the layout directories after the export.
    pub layout_bytes: u64,
}

/// Every run of every tool on one corpus.
pub struct LayoutResult {
    pub corpus: Corpus,
    pub trips: Vec<(Tool, Vec<RoundTrip>)>,
}

/// The directory a repository is exported into.
fn layout_dir(root: &Path, repo: &str) -> PathBuf {
    root.join(repo.replace('/', "_"))
}

/// Runs `commands` (shell lines, joined with `&&`) as one measured process, with skopeo's
/// blob-info cache in `cache` (a private bind mount as root, `HOME` otherwise).
fn skopeo_script(commands: &[String], cache: &Path) -> Result<Invocation, String> {
    std::fs::create_dir_all(cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let body = commands.join(" && ");
    if running_as_root() {
        let script = format!("mount --bind \"$0\" {} && {body}", crate::SKOPEO_ROOT_CACHE);
        let args = vec![
            "--mount".into(),
            "sh".into(),
            "-c".into(),
            script,
            cache.display().to_string(),
        ];
        return Ok(("unshare".into(), args, Vec::new()));
    }
    let home = cache.display().to_string();
    Ok((
        "sh".into(),
        vec!["-c".into(), body],
        vec![
            ("HOME".into(), home.clone()),
            ("XDG_DATA_HOME".into(), home),
        ],
    ))
}

fn ferry_config(
    path: &Path,
    registry: &RealRegistry,
    mappings: &str,
) -> Result<Invocation, String> {
    let yaml = format!(
        "version: 1\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 16\nmappings:\n{mappings}",
        registry.host(),
        registry.url()
    );
    std::fs::write(path, yaml).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let args = ["--progress", "none", "sync", "-c"]
        .iter()
        .map(|s| s.to_string())
        .chain([path.display().to_string()])
        .collect();
    Ok((ferry_binary().display().to_string(), args, Vec::new()))
}

/// Which way a step copies: registry → layouts, or layouts → registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Export,
    Import,
}

/// One step of the round trip for `tool`: the export from `registry` into one layout per
/// repository, or the import of those layouts into `mirror/<name>` on `registry`.
fn step(
    tool: Tool,
    direction: Direction,
    corpus: &Corpus,
    registry: &RealRegistry,
    layouts: &Path,
    work: &Path,
    cache: &Path,
) -> Result<Invocation, String> {
    // (from, to) for a repository: a registry repository or a layout directory, each written
    // as ferry's config takes it; skopeo's spelling adds a transport and the tag.
    let ends = |name: &str| {
        let layout = format!("oci:{}", layout_dir(layouts, name).display());
        match direction {
            Direction::Export => (format!("{}/{name}", registry.host()), layout),
            Direction::Import => (
                layout,
                format!("{}/{}", registry.host(), target_repository(name)),
            ),
        }
    };
    match tool {
        Tool::Ferry => {
            let mappings: String = corpus
                .repos
                .iter()
                .map(|r| {
                    let (from, to) = ends(&r.name);
                    format!("  - source: \"{from}\"\n    targets: [\"{to}\"]\n    tags: {{ include: [\"*\"] }}\n")
                })
                .collect();
            let file = match direction {
                Direction::Export => "export.yaml",
                Direction::Import => "import.yaml",
            };
            ferry_config(&work.join(file), registry, &mappings)
        }
        Tool::Skopeo => {
            let skopeo_ref = |end: &str, tag: &str| match end.strip_prefix("oci:") {
                Some(_) => format!("{end}:{tag}"),
                None => format!("docker://{end}:{tag}"),
            };
            let tls = match direction {
                Direction::Export => "--src-tls-verify=false",
                Direction::Import => "--dest-tls-verify=false",
            };
            let commands: Vec<String> = corpus
                .repos
                .iter()
                .flat_map(|r| r.tags.iter().map(move |t| (r, t)))
                .map(|(r, t)| {
                    let (from, to) = ends(&r.name);
                    format!(
                        "skopeo copy -q --all --preserve-digests {tls} {} {}",
                        skopeo_ref(&from, &t.tag),
                        skopeo_ref(&to, &t.tag)
                    )
                })
                .collect();
            skopeo_script(&commands, cache)
        }
    }
}

async fn measured(invocation: Invocation, log: &Path) -> Result<ProcessCost, String> {
    let (program, args, envs) = invocation;
    measure::run_measured(&program, &args, &envs, log).await
}

fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// One tool's export (cold, warm) and import into a fresh registry (cold, checked, warm).
async fn round_trip(
    tool: Tool,
    corpus: &Corpus,
    source: &RealRegistry,
    work: &Path,
    run: usize,
) -> Result<RoundTrip, String> {
    let root = work.join(format!("{}-{run}", tool.name()));
    let layouts = root.join("layouts");
    std::fs::create_dir_all(&layouts)
        .map_err(|e| format!("creating {}: {e}", layouts.display()))?;
    let cache = root.join("skopeo-cache");
    let log = |step: &str| root.join(format!("{step}.log"));

    let before = measure::requests(source).await?.len();
    let invocation = step(
        tool,
        Direction::Export,
        corpus,
        source,
        &layouts,
        &root,
        &cache,
    )?;
    let export_cold = measured(invocation.clone(), &log("export-cold")).await?;
    let export_requests = (measure::requests(source).await?.len() - before) as u64;
    let layout_bytes = bytes_under(&layouts);
    let export_warm = measured(invocation, &log("export-warm")).await?;

    let target = RealRegistry::start()
        .await
        .map_err(|e| format!("starting a target registry: {e}"))?;
    let invocation = step(
        tool,
        Direction::Import,
        corpus,
        &target,
        &layouts,
        &root,
        &cache,
    )?;
    let import_cold = measured(invocation.clone(), &log("import-cold")).await?;
    let import_requests = measure::requests(&target).await?.len() as u64;
    crate::verify_target(corpus, &target).await?;
    let import_warm = measured(invocation, &log("import-warm")).await?;
    target
        .stop()
        .await
        .map_err(|e| format!("stopping the target registry: {e}"))?;
    // The layouts of one run are not needed by the next.
    let _ = std::fs::remove_dir_all(&layouts);
    Ok(RoundTrip {
        export_cold,
        export_warm,
        import_cold,
        import_warm,
        export_requests,
        import_requests,
        layout_bytes,
    })
}

/// Every tool's round trip on `corpus` (already in `source`), `runs` times, order alternating.
pub async fn bench_layouts(
    tools: &[Tool],
    runs: usize,
    corpus: Corpus,
    source: &RealRegistry,
) -> Result<LayoutResult, String> {
    let work = crate::work_dir("ferry-bench-layouts-")?;
    let mut trips: Vec<(Tool, Vec<RoundTrip>)> = tools.iter().map(|t| (*t, Vec::new())).collect();
    for run in 0..runs {
        for i in crate::run_order(run, trips.len()) {
            let tool = trips[i].0;
            let trip = round_trip(tool, &corpus, source, work.path(), run)
                .await
                .map_err(|e| format!("layouts, {} run {run}: {e}", tool.name()))?;
            eprintln!(
                "compare: layouts, {} run {run}: export {:.2}s / warm {:.2}s, import {:.2}s / warm {:.2}s",
                tool.name(),
                trip.export_cold.wall.as_secs_f64(),
                trip.export_warm.wall.as_secs_f64(),
                trip.import_cold.wall.as_secs_f64(),
                trip.import_warm.wall.as_secs_f64(),
            );
            trips[i].1.push(trip);
        }
    }
    Ok(LayoutResult { corpus, trips })
}

fn median_by(trips: &[RoundTrip], f: impl Fn(&RoundTrip) -> f64) -> f64 {
    let values: Vec<f64> = trips.iter().map(f).collect();
    median(&values).unwrap_or(f64::NAN)
}

/// The markdown for every corpus: a table of medians, ferry against skopeo.
pub fn layouts_section(describe: &str, runs: usize, results: &[&LayoutResult]) -> String {
    let mut out = String::new();
    out.push_str(describe);
    out.push_str(&format!(
        "\nEach figure is the median of {runs} runs (order alternating). Export: every tag of the corpus from the source registry into one OCI image layout per repository; ferry runs one `ferry sync` whose targets are `oci:<dir>`, skopeo runs `skopeo copy --all --preserve-digests docker://… oci:<dir>:<tag>` once per tag (skopeo sync cannot write OCI layouts). Warm: the same again with nothing changed. Import: those layouts into a fresh registry (every tag then checked there by digest); ferry runs one `ferry sync` whose sources are `oci:<dir>`, skopeo one `skopeo copy` per tag. Requests come from the registries' access logs.\n"
    ));
    for result in results {
        let corpus = &result.corpus;
        out.push_str(&format!(
            "\n### {}\n\n{} repositories, {} tags, {} unique blobs, {:.1} MiB.\n\n",
            corpus.shape.name,
            corpus.repos.len(),
            corpus.tag_count(),
            corpus.blobs.len(),
            corpus.unique_bytes() as f64 / (1u64 << 20) as f64
        ));
        let of = |tool: Tool| {
            result
                .trips
                .iter()
                .find(|(t, _)| *t == tool)
                .map(|(_, r)| r.as_slice())
                .unwrap_or(&[])
        };
        let (ferry, skopeo) = (of(Tool::Ferry), of(Tool::Skopeo));
        out.push_str(
            "| Measure (median) | ferry | skopeo | ferry ÷ skopeo |\n|---|---:|---:|---:|\n",
        );
        type Measure = fn(&RoundTrip) -> f64;
        let rows: [(&str, Measure, usize); 9] = [
            (
                "export cold: wall time (s)",
                |t| t.export_cold.wall.as_secs_f64(),
                2,
            ),
            (
                "export warm: wall time (s)",
                |t| t.export_warm.wall.as_secs_f64(),
                2,
            ),
            (
                "import cold: wall time (s)",
                |t| t.import_cold.wall.as_secs_f64(),
                2,
            ),
            (
                "import warm: wall time (s)",
                |t| t.import_warm.wall.as_secs_f64(),
                2,
            ),
            (
                "export cold: peak RSS (MiB)",
                |t| t.export_cold.peak_rss_kib as f64 / 1024.0,
                1,
            ),
            (
                "import cold: peak RSS (MiB)",
                |t| t.import_cold.peak_rss_kib as f64 / 1024.0,
                1,
            ),
            (
                "export cold: requests to the source",
                |t| t.export_requests as f64,
                0,
            ),
            (
                "import cold: requests to the target",
                |t| t.import_requests as f64,
                0,
            ),
            (
                "layout directories on disk (MiB)",
                |t| t.layout_bytes as f64 / (1u64 << 20) as f64,
                1,
            ),
        ];
        for (label, f, decimals) in rows {
            let (a, b) = (median_by(ferry, f), median_by(skopeo, f));
            let ratio = if b > 0.0 {
                format!("{:.2}", a / b)
            } else {
                "—".into()
            };
            out.push_str(&format!(
                "| {label} | {a:.decimals$} | {b:.decimals$} | {ratio} |\n"
            ));
        }
    }
    out
}
