//! `--verify-cost`: what `ferry verify` costs at both registries on corpus A (issue 27): after a
//! sync, the access logs of a shallow and a deep verify, by kind, beside the cost it states.

use ferry_testkit::distribution::RealRegistry;

use super::corpus::{Corpus, Shape};
use super::measure::{self, Traffic};
use super::{SyncJob, Tool};

const KINDS: [&str; 5] = [
    "ping /v2/",
    "tag list",
    "manifest HEAD",
    "manifest GET",
    "blob HEAD",
];

/// The markdown section: one row per request kind, source and target, shallow and deep.
pub async fn run() -> Result<String, String> {
    let corpus = Corpus::generate(&Shape::many_small());
    let source = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the source registry: {e}"))?;
    corpus.push(&source.url(), 8).await?;
    let target = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the target registry: {e}"))?;
    let workdir = super::work_dir("ferry-bench-verify-")?;
    let job = SyncJob {
        tool: Tool::Ferry,
        source: &source,
        target: &target,
        repos: corpus.repos.iter().map(|r| r.name.clone()).collect(),
        workdir: workdir.path(),
        skopeo_cache: workdir.path().join("unused"),
    };
    job.run("sync").await?;
    let config = workdir.path().join("ferry.yaml").display().to_string();
    let mut samples: Vec<(Traffic, Traffic)> = Vec::new();
    for deep in [false, true] {
        let (s0, t0) = (
            measure::requests(&source).await?.len(),
            measure::requests(&target).await?.len(),
        );
        let mut args: Vec<String> = ["--progress", "none", "verify", "-c", &config]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if deep {
            args.push("--deep".into());
        }
        let log = workdir.path().join(format!("verify-{deep}.log"));
        // Fails unless verify exits 0: the mirror the sync left is complete.
        measure::run_measured(
            &super::ferry_binary().display().to_string(),
            &args,
            &[],
            &log,
        )
        .await?;
        samples.push((
            Traffic::of(&measure::requests(&source).await?[s0..]),
            Traffic::of(&measure::requests(&target).await?[t0..]),
        ));
    }
    let (repos, tags, indexes) = (corpus.repos.len(), corpus.tag_count(), corpus.index_count());
    let mut md = format!(
        "Corpus A ({repos} repositories, {tags} tags, {indexes} of them two-platform indexes), synced \
         by `ferry sync`, then verified; each cell counts the requests in the registry's access log \
         (source / target). Stated cost: one tag listing per repository per side ({repos} / \
         {repos}) and one HEAD per tag per side ({tags} / {tags}), plus, on the target, a GET of \
         each index and a HEAD of each child ({indexes} GETs, {} HEADs); `--deep` adds a GET of \
         every manifest and a HEAD per unique repository and blob on the target.\n\n\
         | request | shallow | `--deep` |\n|---|---|---|\n",
        2 * indexes
    );
    for kind in KINDS {
        let cell = |(s, t): &(Traffic, Traffic)| {
            let n = |x: &Traffic| x.by_kind.get(kind).copied().unwrap_or(0);
            format!("{} / {}", n(s), n(t))
        };
        md.push_str(&format!(
            "| {kind} | {} | {} |\n",
            cell(&samples[0]),
            cell(&samples[1])
        ));
    }
    let total = |(s, t): &(Traffic, Traffic)| format!("{} / {}", s.requests, t.requests);
    md.push_str(&format!(
        "| all | {} | {} |\n",
        total(&samples[0]),
        total(&samples[1])
    ));
    Ok(md)
}
