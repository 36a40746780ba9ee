//! `--personalities`: each field registry personality of the test kit, each single switch, and
//! the real registry, as target then source of `ferry sync` and `skopeo sync`; images mirrored.

// The corpus is small (what is measured is whether each image gets through, not speed). A
// source personality is seeded through the test kit's own store, so only reads meet it; a
// target personality meets every write. Each tool gets fresh registries. A tool's non-zero exit
// is recorded, not fatal: the table says how many images each mirrored.

use std::path::Path;
use std::time::{Duration, Instant};

use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{Personality, TestRegistry};
use futures::StreamExt as _;

use super::Tool;
use super::corpus::{BlobContent, Corpus, LayerBytes, Shape};

/// The small corpus of this mode: 6 repositories, ~75 tags (one repository of 60, so paging
/// shows), layers 4–16 KiB, every 8th tag an index.
pub fn shape() -> Shape {
    Shape {
        name: "P: 6 repositories (personalities)",
        seed: 0xF3_22_D0,
        small_repos: 5,
        small_tags: (2, 3),
        deep_repos: 1,
        deep_tags: 60,
        layer_size: (4 << 10, 16 << 10),
        base_size: (8 << 10, 16 << 10),
        repo_layer_size: (4 << 10, 8 << 10),
        base_pool: 3,
        index_every: 8,
    }
}

/// Where a personality sits in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Target,
    Source,
}

/// One registry a tool met.
enum Reg {
    Real(Box<RealRegistry>),
    Kit(TestRegistry),
}

impl Reg {
    fn host(&self) -> String {
        match self {
            Reg::Real(r) => r.host(),
            Reg::Kit(r) => r.host(),
        }
    }
    fn url(&self) -> String {
        match self {
            Reg::Real(r) => r.url(),
            Reg::Kit(r) => r.url(),
        }
    }
}

/// One tool's run under one personality on one side.
pub struct Cell {
    pub personality: &'static str,
    pub side: Side,
    pub tool: Tool,
    pub mirrored: usize,
    pub expected: usize,
    pub exit: Option<i32>,
    pub wall: Duration,
}

async fn start(personality: Option<Personality>) -> Result<Reg, String> {
    match personality {
        None => RealRegistry::start()
            .await
            .map(|r| Reg::Real(Box::new(r)))
            .map_err(|e| format!("starting the real registry: {e}")),
        Some(p) => TestRegistry::builder()
            .personality(p)
            .start()
            .await
            .map(Reg::Kit)
            .map_err(|e| format!("starting the test registry: {e}")),
    }
}

/// Seeds the corpus: through the API into a real registry, into the kit's store otherwise.
async fn seed(corpus: &Corpus, reg: &Reg) -> Result<(), String> {
    match reg {
        Reg::Real(r) => corpus.push(&r.url(), 8).await,
        Reg::Kit(r) => {
            for repo in &corpus.repos {
                for blob in corpus.repo_blobs(repo) {
                    let bytes = match &corpus.blobs[blob].content {
                        BlobContent::Config(b) => b.clone(),
                        BlobContent::Layer { seed, size } => LayerBytes::new(*seed, *size)
                            .next_piece(*size as usize)
                            .unwrap_or_default(),
                    };
                    r.seed_blob(&repo.name, &bytes);
                }
                for tag in &repo.tags {
                    for child in &tag.children {
                        r.seed_manifest(
                            &repo.name,
                            &child.digest.to_string(),
                            child.media_type,
                            &child.bytes,
                        );
                    }
                    r.seed_manifest(&repo.name, &tag.tag, tag.top.media_type, &tag.top.bytes);
                }
            }
            Ok(())
        }
    }
}

/// Tags of the corpus in `target` with the source's digest.
async fn mirrored(corpus: &Corpus, target: &Reg) -> Result<usize, String> {
    let client = RegistryClient::new(RegistryOptions::insecure_at(&target.url()))
        .map_err(|e| format!("client for {}: {e}", target.url()))?;
    let checks = corpus
        .repos
        .iter()
        .flat_map(|repo| repo.tags.iter().map(move |tag| (repo, tag)))
        .map(|(repo, tag)| {
            let client = client.clone();
            async move {
                let repository = crate::target_repository(&repo.name);
                matches!(client.head_manifest(&repository, &tag.tag).await,
                    Ok(Some(info)) if info.digest == tag.top.digest)
            }
        });
    let found: Vec<bool> = futures::stream::iter(checks)
        .buffer_unordered(8)
        .collect()
        .await;
    Ok(found.into_iter().filter(|ok| *ok).count())
}

/// Runs `tool` from `source` to `target` over every repository of the corpus; the exit code,
/// or `None` when it was killed (10 minutes at most).
async fn sync(
    tool: Tool,
    corpus: &Corpus,
    source: &Reg,
    target: &Reg,
    workdir: &Path,
    label: &str,
) -> Result<(Option<i32>, Duration), String> {
    let repos: Vec<String> = corpus.repos.iter().map(|r| r.name.clone()).collect();
    let (program, args, envs): (String, Vec<String>, Vec<(String, String)>) = match tool {
        Tool::Ferry => {
            let mut yaml = String::from("version: 1\nregistries:\n");
            for r in [source, target] {
                yaml.push_str(&format!(
                    "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
                    r.host(),
                    r.url()
                ));
            }
            yaml.push_str("mappings:\n");
            for repo in &repos {
                yaml.push_str(&format!(
                    "  - source: \"{}/{repo}\"\n    targets: [\"{}/{}\"]\n",
                    source.host(),
                    target.host(),
                    crate::target_repository(repo)
                ));
            }
            let path = workdir.join(format!("ferry-{label}.yaml"));
            std::fs::write(&path, yaml).map_err(|e| format!("writing {}: {e}", path.display()))?;
            let args = ["--progress", "none", "sync", "--no-lock", "-c"]
                .iter()
                .map(|s| s.to_string())
                .chain([path.display().to_string()])
                .collect();
            (
                crate::ferry_binary().display().to_string(),
                args,
                Vec::new(),
            )
        }
        Tool::Skopeo => {
            let mut yaml = format!("{}:\n  tls-verify: false\n  images:\n", source.host());
            for repo in &repos {
                yaml.push_str(&format!("    {repo}: []\n"));
            }
            let path = workdir.join(format!("skopeo-{label}.yaml"));
            std::fs::write(&path, yaml).map_err(|e| format!("writing {}: {e}", path.display()))?;
            let home = workdir.join(format!("skopeo-home-{label}"));
            std::fs::create_dir_all(&home)
                .map_err(|e| format!("creating {}: {e}", home.display()))?;
            let args = [
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
                format!("{}/{}", target.host(), crate::MIRROR_PREFIX),
            ])
            .collect();
            let home = home.display().to_string();
            let envs = vec![
                ("HOME".into(), home.clone()),
                ("XDG_DATA_HOME".into(), home),
            ];
            ("skopeo".to_owned(), args, envs)
        }
    };
    let log = workdir.join(format!("{}-{label}.log", tool.name()));
    let out =
        std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true);
    for (k, v) in &envs {
        command.env(k, v);
    }
    let started = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(600), command.status()).await;
    let wall = started.elapsed();
    match status {
        Ok(Ok(s)) => Ok((s.code(), wall)),
        Ok(Err(e)) => Err(format!("running {program}: {e}")),
        Err(_) => Ok((None, wall)),
    }
}

/// The real registry, every personality of `Personality::field()` and of `Personality::each()`,
/// on each side, each tool.
pub async fn bench(tools: &[Tool]) -> Result<(Corpus, Vec<Cell>), String> {
    let corpus = Corpus::generate(&shape());
    let expected = corpus.tag_count();
    let workdir = crate::work_dir("ferry-bench-personalities-")?;
    let mut all: Vec<(&'static str, Option<Personality>)> = vec![("distribution (real)", None)];
    all.extend(Personality::field().into_iter().map(|(n, p)| (n, Some(p))));
    // The single switches too: what each one behaviour does to each tool.
    all.extend(Personality::each().into_iter().map(|(n, p)| (n, Some(p))));
    let mut cells = Vec::new();
    for (name, personality) in all {
        for side in [Side::Target, Side::Source] {
            if side == Side::Source && personality.is_none() {
                continue;
            }
            for &tool in tools {
                let (source_p, target_p) = match side {
                    Side::Target => (None, personality),
                    Side::Source => (personality, None),
                };
                let source = start(source_p).await?;
                seed(&corpus, &source).await?;
                let target = start(target_p).await?;
                if let Reg::Kit(t) = &target {
                    // A registry where repositories must exist (ECR) gets them made first, as
                    // its user would.
                    for repo in &corpus.repos {
                        t.create_repository(&crate::target_repository(&repo.name));
                    }
                }
                let label = format!("{name}-{side:?}").replace([' ', '(', ')'], "");
                let (exit, wall) =
                    sync(tool, &corpus, &source, &target, workdir.path(), &label).await?;
                let got = mirrored(&corpus, &target).await?;
                eprintln!(
                    "compare: personality {name} as {side:?}, {}: {got}/{expected} images, exit {exit:?}, {:.1}s",
                    tool.name(),
                    wall.as_secs_f64()
                );
                cells.push(Cell {
                    personality: name,
                    side,
                    tool,
                    mirrored: got,
                    expected,
                    exit,
                    wall,
                });
            }
        }
    }
    Ok((corpus, cells))
}

pub const HEADING: &str = "## Personality × tool: images mirrored of expected";
pub const MARKERS: (&str, &str) = ("<!-- personalities:begin -->", "<!-- personalities:end -->");

/// The markdown table: one row per personality and side, one column per tool.
pub fn section(describe: &str, corpus: &Corpus, tools: &[Tool], cells: &[Cell]) -> String {
    let mut md = String::new();
    md.push_str(&format!(
        "{describe}\n\nCorpus: {} ({} repositories, {} tags, {} of them indexes). Each cell: images \
         whose tag landed in the target with the source's digest, of those expected, and the \
         tool's exit code and wall time. Target: the personality receives every write (its repositories made \
         first, as an ECR user would); source: the personality serves every read (seeded through \
         the test kit's store).\n\n",
        corpus.shape.name,
        corpus.repos.len(),
        corpus.tag_count(),
        corpus.index_count()
    ));
    md.push_str("| personality | side |");
    for t in tools {
        md.push_str(&format!(" {} |", t.name()));
    }
    md.push_str("\n|---|---|");
    for _ in tools {
        md.push_str("---|");
    }
    md.push('\n');
    let mut rows: Vec<(&str, Side)> = Vec::new();
    for c in cells {
        if !rows.contains(&(c.personality, c.side)) {
            rows.push((c.personality, c.side));
        }
    }
    for (name, side) in rows {
        md.push_str(&format!(
            "| {name} | {} |",
            match side {
                Side::Target => "target",
                Side::Source => "source",
            }
        ));
        for t in tools {
            match cells
                .iter()
                .find(|c| c.personality == name && c.side == side && c.tool == *t)
            {
                Some(c) => md.push_str(&format!(
                    " {}/{} (exit {}, {:.1} s) |",
                    c.mirrored,
                    c.expected,
                    c.exit.map_or("killed".to_owned(), |e| e.to_string()),
                    c.wall.as_secs_f64()
                )),
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    md
}
