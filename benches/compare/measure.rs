//! What one sync costs: the registry access logs read with response sizes (requests by kind,
//! blob bytes served), and the syncing process's wall time and peak RSS from `/usr/bin/time`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ferry_testkit::distribution::{HARNESS_USER_AGENT, RealRegistry};

/// The GNU time binary (Debian package `time`); `scripts/bench` installs it when missing.
pub const TIME_BINARY: &str = "/usr/bin/time";

/// One access-log line with the response size the registry wrote.
#[derive(Debug, Clone)]
pub struct LoggedRequest {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub bytes: u64,
}

/// Parses `HOST - - [TIME] "METHOD PATH PROTO" STATUS BYTES "REFERER" "USER-AGENT"`; `None` for
/// other lines and for the harness's own requests.
fn parse_line(line: &str) -> Option<LoggedRequest> {
    let (_, after_open) = line.split_once('"')?;
    let (request_line, rest) = after_open.split_once('"')?;
    let mut request = request_line.split(' ');
    let method = request.next()?.to_owned();
    let path = request.next()?.to_owned();
    let mut fields = rest.split_whitespace();
    let status = fields.next()?.parse().ok()?;
    let bytes = fields.next()?.parse().unwrap_or(0);
    let user_agent = rest.split('"').nth(3)?;
    if user_agent == HARNESS_USER_AGENT {
        return None;
    }
    Some(LoggedRequest {
        method,
        path,
        status,
        bytes,
    })
}

/// Every client request the registry has logged so far (flushed: the harness waits for a
/// marker request to appear first).
pub async fn requests(registry: &RealRegistry) -> Result<Vec<LoggedRequest>, String> {
    registry
        .access_log()
        .await
        .map_err(|e| format!("reading the access log of {}: {e}", registry.host()))?;
    let text = std::fs::read_to_string(registry.access_log_path())
        .map_err(|e| format!("reading {}: {e}", registry.access_log_path().display()))?;
    Ok(text.lines().filter_map(parse_line).collect())
}

/// What kind of API call a logged request was, for the breakdown tables.
pub fn kind(request: &LoggedRequest) -> &'static str {
    let path = request.path.split('?').next().unwrap_or("");
    let query = request.path.split_once('?').map_or("", |(_, q)| q);
    match request.method.as_str() {
        _ if path == "/v2/" || path == "/v2" => "ping /v2/",
        "GET" if path.ends_with("/tags/list") => "tag list",
        "HEAD" if path.contains("/manifests/") => "manifest HEAD",
        "GET" if path.contains("/manifests/") => "manifest GET",
        "PUT" if path.contains("/manifests/") => "manifest PUT",
        "HEAD" if path.contains("/blobs/uploads/") => "upload status",
        "GET" if path.contains("/blobs/uploads/") => "upload status",
        "HEAD" if path.contains("/blobs/") => "blob HEAD",
        "GET" if path.contains("/blobs/") => "blob GET",
        "POST" if query.contains("mount=") => "mount POST",
        "POST" if path.contains("/blobs/uploads/") => "upload POST",
        "PATCH" => "upload PATCH",
        "PUT" if path.contains("/blobs/uploads/") => "upload PUT",
        _ => "other",
    }
}

/// Requests of one phase, by kind, with the blob bytes served.
#[derive(Debug, Clone, Default)]
pub struct Traffic {
    pub requests: u64,
    pub blob_bytes: u64,
    pub by_kind: BTreeMap<&'static str, u64>,
    /// Requests answered with a status of 400 or above other than 404 (an ordinary "not there").
    pub errors: u64,
}

impl Traffic {
    pub fn of(requests: &[LoggedRequest]) -> Traffic {
        let mut traffic = Traffic::default();
        for request in requests {
            let kind = kind(request);
            traffic.requests += 1;
            *traffic.by_kind.entry(kind).or_default() += 1;
            if kind == "blob GET" && matches!(request.status, 200 | 206) {
                traffic.blob_bytes += request.bytes;
            }
            if request.status >= 400 && request.status != 404 {
                traffic.errors += 1;
            }
        }
        traffic
    }
}

/// How a measured process ended and what it cost.
#[derive(Debug, Clone)]
pub struct ProcessCost {
    pub wall: Duration,
    pub peak_rss_kib: u64,
    /// User plus system CPU seconds of the process and its children (`/usr/bin/time`).
    pub cpu_secs: f64,
}

/// Runs `program args…` under `/usr/bin/time -f "%M %U %S"`, its output to `log`. Fails with the
/// output's tail when it exits non-zero.
pub async fn run_measured(
    program: &str,
    args: &[String],
    envs: &[(String, String)],
    log: &Path,
) -> Result<ProcessCost, String> {
    run_measured_within(program, args, envs, log, None)
        .await?
        .ok_or_else(|| format!("{program} stopped without a bound"))
}

/// As [`run_measured`], but a run still going after `bound` is killed with its whole process
/// group (the timer and the program under it) and answers `None`: stopped, no figures.
pub async fn run_measured_within(
    program: &str,
    args: &[String],
    envs: &[(String, String)],
    log: &Path,
    bound: Option<Duration>,
) -> Result<Option<ProcessCost>, String> {
    let rss_file = log.with_extension("rss");
    let out = std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cloning {}: {e}", log.display()))?;
    let mut command = tokio::process::Command::new(TIME_BINARY);
    command
        .arg("-f")
        .arg("%M %U %S")
        .arg("-o")
        .arg(&rss_file)
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    for (name, value) in envs {
        command.env(name, value);
    }
    if bound.is_some() {
        // Its own group, so the bound can stop the program under the timer too. Only then: a
        // group of its own no longer gets the terminal's Ctrl-C with the bench.
        command.process_group(0);
    }
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("running {TIME_BINARY} {program}: {e}"))?;
    let waited = match bound {
        Some(bound) => tokio::time::timeout(bound, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    let Some(status) = waited else {
        if let Some(group) = child.id() {
            // The group this call made the timer lead: the timer and the program under it.
            let _ = tokio::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{group}")])
                .status()
                .await;
        }
        child
            .wait()
            .await
            .map_err(|e| format!("reaping {program} after its bound: {e}"))?;
        return Ok(None);
    };
    let status = status.map_err(|e| format!("waiting for {program}: {e}"))?;
    let wall = started.elapsed();
    let output = std::fs::read_to_string(log).unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = output.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "{program} {} exited with {status}; output ends:\n{}",
            args.join(" "),
            tail.join("\n")
        ));
    }
    let rss_text = std::fs::read_to_string(&rss_file)
        .map_err(|e| format!("reading {}: {e}", rss_file.display()))?;
    let figures: Vec<f64> = rss_text
        .lines()
        .rev()
        .find_map(|line| {
            let v: Vec<f64> = line
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            (v.len() == 3).then_some(v)
        })
        .ok_or_else(|| {
            format!(
                "{} holds no RSS/CPU figures: {rss_text:?}",
                rss_file.display()
            )
        })?;
    Ok(Some(ProcessCost {
        wall,
        peak_rss_kib: figures[0] as u64,
        cpu_secs: figures[1] + figures[2],
    }))
}

/// The next argument as the value of option `name`. cargo appends `--bench` to every bench's
/// arguments: a flag is never taken as a value (a missing path must not become `--bench`).
pub fn option_value(args: &mut impl Iterator<Item = String>, name: &str) -> Result<String, String> {
    args.next()
        .filter(|v| !v.starts_with("--"))
        .ok_or(format!("{name} needs a value"))
}

/// Starts a registry for the bench: its stderr log at `FERRY_BENCH_REGISTRY_LOG` (`info` logs
/// every response with its duration and the client's port, for a profile; `warn` by default).
pub async fn start_registry() -> Result<RealRegistry, String> {
    start_registry_in(None).await
}

/// As [`start_registry`], its work directory (storage included) made in `work_in` when given.
pub async fn start_registry_in(work_in: Option<PathBuf>) -> Result<RealRegistry, String> {
    let level = match std::env::var("FERRY_BENCH_REGISTRY_LOG").as_deref() {
        Ok("info") => "info",
        Ok("debug") => "debug",
        _ => "warn",
    };
    RealRegistry::start_with(ferry_testkit::distribution::RealRegistryOptions {
        log_level: level,
        work_in,
        ..Default::default()
    })
    .await
    .map_err(|e| format!("starting a registry: {e}"))
}

/// CPU seconds (user plus system) the registry process has used so far, from
/// `/proc/PID/stat` (fields 14 and 15, in clock ticks of 1/100 s: Linux's USER_HZ).
pub fn registry_cpu_secs(registry: &RealRegistry) -> f64 {
    let Some(pid) = registry.pid() else {
        return 0.0;
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    fields.iter().sum::<u64>() as f64 / 100.0
}

/// The first line a command prints, for the versions table.
pub fn version_of(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .unwrap_or_else(|| format!("{program}: not runnable"))
}

/// The middle value (the lower middle for an even count).
pub fn median<T: PartialOrd + Copy>(values: &[T]) -> Option<T> {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    sorted.get((sorted.len().saturating_sub(1)) / 2).copied()
}

/// A bench's `main`: parses its options (exit 2 with the message), runs it on a 2-thread
/// runtime (exit 1 with the error), each message prefixed with the bench's `name`.
pub fn bench_main<O, F, Fut>(
    name: &str,
    parse: impl FnOnce() -> Result<O, String>,
    run: F,
) -> std::process::ExitCode
where
    F: FnOnce(O) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let options = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{name}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
