//! Benchmark: `ferry export` of the compare bench's corpora (benches/compare/corpus.rs) in full,
//! and `--since` a bundle that lacks 10% of the tags; against a registry-to-registry sync.
//!
//! For each corpus: the source registry is seeded; bundle OLD is exported without every tenth
//! tag; the full bundle is exported (timed) and so is the incremental one `--since OLD`; then a
//! plain `ferry sync` of the same corpus into a second real registry (timed). Printed: the
//! size ratio incremental/full (issue 25: at most 15%) and export throughput over sync's
//! (issue 25: at least 0.8x). Run: `cargo bench --bench bundle -- [--shapes a,b] [--runs N]`.
//! `FERRY_BIN` names another ferry binary than the one cargo built with this bench.

#[allow(dead_code)]
#[path = "compare/corpus.rs"]
mod corpus;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corpus::{Corpus, Shape};
use ferry_testkit::distribution::RealRegistry;

fn ferry_binary() -> PathBuf {
    std::env::var_os("FERRY_BIN")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ferry")), PathBuf::from)
}

/// Runs ferry to completion; its wall time.
fn timed(args: &[&str]) -> Result<Duration, String> {
    let start = Instant::now();
    let out = std::process::Command::new(ferry_binary())
        .args(["--progress", "none", "--quiet"])
        .args(args)
        .output()
        .map_err(|e| format!("ferry: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ferry {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(start.elapsed())
}

/// A config mapping every repository of `corpus` on `source` to `target_host/mirror/<name>`,
/// leaving out the tags `left_out` names for it.
fn config(
    path: &Path,
    corpus: &Corpus,
    source: &RealRegistry,
    target: &str,
    left_out: &dyn Fn(usize, usize) -> bool,
) -> Result<(), String> {
    let mut yaml = format!(
        "version: 1\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 16\n",
        source.host(),
        source.url()
    );
    if target.starts_with("127.0.0.1") {
        yaml.push_str(&format!(
            "  - host: \"{target}\"\n    url: \"http://{target}\"\n    insecure: true\n    max_concurrent: 16\n"
        ));
    }
    yaml.push_str("mappings:\n");
    for (r, repo) in corpus.repos.iter().enumerate() {
        let excluded: Vec<String> = repo
            .tags
            .iter()
            .enumerate()
            .filter(|(t, _)| left_out(r, *t))
            .map(|(_, t)| format!("\"{}\"", t.tag))
            .collect();
        yaml.push_str(&format!(
            "  - source: \"{}/{}\"\n    targets: [\"{target}/mirror/{}\"]\n    tags: {{ include: [\"*\"], exclude: [{}] }}\n",
            source.host(),
            repo.name,
            repo.name,
            excluded.join(", ")
        ));
    }
    std::fs::write(path, yaml).map_err(|e| format!("{}: {e}", path.display()))
}

struct Figures {
    shape: &'static str,
    tags: usize,
    new_tags: usize,
    full_bytes: u64,
    since_bytes: u64,
    export: Duration,
    sync: Duration,
    unique_bytes: u64,
}

async fn bench(shape: Shape, runs: usize, work: &Path) -> Result<Figures, String> {
    let corpus = Corpus::generate(&shape);
    let source = RealRegistry::start()
        .await
        .map_err(|e| format!("registry: {e}"))?;
    corpus.push(&source.url(), 4).await?;
    // Every tenth tag, counted over the corpus, is new since OLD.
    let mut positions = Vec::new();
    for (r, repo) in corpus.repos.iter().enumerate() {
        for t in 0..repo.tags.len() {
            positions.push((r, t));
        }
    }
    let new: std::collections::HashSet<(usize, usize)> =
        positions.iter().copied().step_by(10).collect();
    let (old_yaml, full_yaml) = (work.join("old.yaml"), work.join("full.yaml"));
    config(&old_yaml, &corpus, &source, "registry.internal", &|r, t| {
        new.contains(&(r, t))
    })?;
    config(
        &full_yaml,
        &corpus,
        &source,
        "registry.internal",
        &|_, _| false,
    )?;
    let s = |p: &Path| p.display().to_string();
    let (old, full, since) = (
        work.join("old.tar"),
        work.join("full.tar"),
        work.join("since.tar"),
    );
    timed(&["export", "-c", &s(&old_yaml), "-o", &s(&old)])?;
    let mut exports = Vec::new();
    let mut syncs = Vec::new();
    for _ in 0..runs {
        exports.push(timed(&["export", "-c", &s(&full_yaml), "-o", &s(&full)])?);
        let target = RealRegistry::start()
            .await
            .map_err(|e| format!("registry: {e}"))?;
        let sync_yaml = work.join("sync.yaml");
        config(&sync_yaml, &corpus, &source, &target.host(), &|_, _| false)?;
        syncs.push(timed(&["sync", "-c", &s(&sync_yaml), "--no-lock"])?);
    }
    timed(&[
        "export",
        "-c",
        &s(&full_yaml),
        "-o",
        &s(&since),
        "--since",
        &s(&old),
    ])?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    exports.sort();
    syncs.sort();
    Ok(Figures {
        shape: shape.name,
        tags: positions.len(),
        new_tags: new.len(),
        full_bytes: size(&full),
        since_bytes: size(&since),
        export: exports[exports.len() / 2],
        sync: syncs[syncs.len() / 2],
        unique_bytes: corpus.unique_bytes(),
    })
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let runs: usize = value("--runs").and_then(|v| v.parse().ok()).unwrap_or(3);
    let shapes = value("--shapes").unwrap_or_else(|| "a,b".into());
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!(
        "| Corpus | Tags (new) | Full bundle | Incremental | Ratio | Export | Sync | Export/sync throughput |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for s in shapes.split(',') {
        let shape = match s.trim() {
            "a" => Shape::many_small(),
            "b" => Shape::few_large(),
            "c" => Shape::chunked(),
            _ => continue,
        };
        let work = match tempfile::tempdir() {
            Ok(w) => w,
            Err(e) => {
                eprintln!("work dir: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
        match rt.block_on(bench(shape, runs.max(1), work.path())) {
            Ok(f) => {
                let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
                println!(
                    "| {} | {} ({}) | {:.1} MiB | {:.1} MiB | {:.1}% | {:.2}s ({:.0} MiB/s) | {:.2}s | {:.2}x |",
                    f.shape,
                    f.tags,
                    f.new_tags,
                    mib(f.full_bytes),
                    mib(f.since_bytes),
                    100.0 * f.since_bytes as f64 / f.full_bytes.max(1) as f64,
                    f.export.as_secs_f64(),
                    mib(f.unique_bytes) / f.export.as_secs_f64(),
                    f.sync.as_secs_f64(),
                    f.sync.as_secs_f64() / f.export.as_secs_f64(),
                );
            }
            Err(e) => {
                eprintln!("{s}: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
