//! The tools `scripts/bench compare` measures (ferry, ocync, skopeo): where each binary is, the
//! config each gets for one source → target sync, and one measured run of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_testkit::distribution::RealRegistry;

use crate::cost::{self, RegistryMark, Run};

/// The syncing tool under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tool {
    Ferry,
    Ocync,
    Skopeo,
}

impl Tool {
    pub const ALL: [Tool; 3] = [Tool::Ferry, Tool::Ocync, Tool::Skopeo];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Ferry => "ferry",
            Tool::Ocync => "ocync",
            Tool::Skopeo => "skopeo",
        }
    }

    /// The binary to run: `FERRY_BIN` / `OCYNC_BIN` when set, else ferry as cargo built it with
    /// this bench and ocync or skopeo from `PATH`; `None` when it is not installed.
    pub fn locate(self) -> Option<PathBuf> {
        let from_env = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let found = match self {
            Tool::Ferry => {
                Some(from_env("FERRY_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_ferry").into()))
            }
            Tool::Ocync => from_env("OCYNC_BIN").or_else(|| on_path("ocync")),
            Tool::Skopeo => on_path("skopeo"),
        };
        found.filter(|p| p.is_file())
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Where a source repository lands in the target: `mirror/<last path component>`, the name
/// `skopeo sync` (without `--scoped`) gives it; ferry and ocync are configured to match.
pub fn target_repository(source_repository: &str) -> String {
    let base = source_repository
        .rsplit('/')
        .next()
        .unwrap_or(source_repository);
    format!("mirror/{base}")
}

/// One tool syncing `repos` from `source` into `target`. `dir` is this tool's directory for the
/// pair: configs, process logs, and the state a warm run reuses (ocync's cache, skopeo's
/// blob-info cache; ferry keeps none by default).
pub struct Job<'a> {
    pub tool: Tool,
    pub binary: &'a Path,
    pub source: &'a RealRegistry,
    pub target: &'a RealRegistry,
    pub repos: &'a [String],
    pub dir: PathBuf,
}

impl Job<'_> {
    /// Program, arguments and extra environment for one sync.
    fn invocation(&self) -> Result<Invocation, String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
        let write = |name: &str, text: String| {
            let path = self.dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok::<String, String>(path.display().to_string())
        };
        match self.tool {
            Tool::Ferry => {
                // The same config benches/compare.rs gives ferry.
                let mut yaml = String::from("version: 1\nregistries:\n");
                for registry in [self.source, self.target] {
                    yaml.push_str(&format!(
                        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 16\n",
                        registry.host(),
                        registry.url()
                    ));
                }
                yaml.push_str("mappings:\n");
                for repo in self.repos {
                    yaml.push_str(&format!(
                        "  - source: \"{}/{repo}\"\n    targets: [\"{}/{}\"]\n    tags: {{ include: [\"*\"] }}\n",
                        self.source.host(),
                        self.target.host(),
                        target_repository(repo)
                    ));
                }
                let config = write("ferry.yaml", yaml)?;
                let args = ["--progress", "none", "sync", "-c", &config];
                Ok((self.binary.into(), strings(&args), Vec::new()))
            }
            Tool::Ocync => {
                // ocync's configuration.md: a registry `url` given with its `http://` scheme is
                // used as is (plain HTTP); `cache_dir` holds the persistent cache a warm run
                // reads, valid for `cache_ttl` (default 12h). Engine settings stay at its defaults.
                // Its anonymous auth asks `https://HOST/v2/` for a challenge whatever the url's
                // scheme (v0.5.2, ocync-distribution's `auth/anonymous.rs`), so both registries
                // get `static_token`, which sends a fixed bearer token without asking anything;
                // the test registries have no auth and ignore it.
                let cache = self.dir.join("ocync-cache");
                let mut yaml = format!(
                    "global:\n  cache_dir: \"{}\"\n  cache_ttl: \"12h\"\nregistries:\n  source:\n    url: \"{}\"\n    auth_type: static_token\n    token: \"unused\"\n  target:\n    url: \"{}\"\n    auth_type: static_token\n    token: \"unused\"\ndefaults:\n  source: source\n  targets: target\n  tags:\n    glob: \"*\"\nmappings:\n",
                    cache.display(),
                    self.source.url(),
                    self.target.url()
                );
                for repo in self.repos {
                    yaml.push_str(&format!(
                        "  - from: \"{repo}\"\n    to: \"{}\"\n",
                        target_repository(repo)
                    ));
                }
                let config = write("ocync.yaml", yaml)?;
                let home = self.dir.display().to_string();
                Ok((
                    self.binary.into(),
                    strings(&["sync", "-c", &config]),
                    vec![("HOME".into(), home)],
                ))
            }
            Tool::Skopeo => {
                // As benches/compare.rs runs it, with a private HOME for its blob-info cache.
                let mut yaml = format!("{}:\n  tls-verify: false\n  images:\n", self.source.host());
                for repo in self.repos {
                    yaml.push_str(&format!("    {repo}: []\n"));
                }
                let config = write("skopeo.yaml", yaml)?;
                let destination = format!("{}/mirror", self.target.host());
                let args = [
                    "sync",
                    "--src",
                    "yaml",
                    "--dest",
                    "docker",
                    "--all",
                    "--preserve-digests",
                    "--dest-tls-verify=false",
                    &config,
                    &destination,
                ];
                let home = self.dir.display().to_string();
                Ok((
                    self.binary.into(),
                    strings(&args),
                    vec![
                        ("HOME".into(), home.clone()),
                        ("XDG_DATA_HOME".into(), home),
                    ],
                ))
            }
        }
    }

    /// Runs one sync, measured: wall, the tool's CPU and peak RSS, each registry's requests,
    /// CPU and handler time by request kind.
    /// `None` when the sync was still going after `bound` and was stopped.
    pub async fn run(&self, label: &str, bound: Option<Duration>) -> Result<Option<Run>, String> {
        let (program, args, envs) = self.invocation()?;
        let source = RegistryMark::take(self.source).await?;
        let target = RegistryMark::take(self.target).await?;
        let log = self.dir.join(format!("{label}.log"));
        let Some(process) = cost::run_timed(&program, &args, &envs, &log, bound).await? else {
            return Ok(None);
        };
        Ok(Some(Run {
            process,
            source: source.since(self.source).await?,
            target: target.since(self.target).await?,
        }))
    }
}

/// A program, its arguments, and extra environment variables.
type Invocation = (PathBuf, Vec<String>, Vec<(String, String)>);

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}
