//! What one sync costs, on both sides: the tool's wall time, CPU and peak RSS (GNU time), and
//! each registry's requests (access log), CPU (`/proc/PID/stat`) and handler time per kind.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ferry_testkit::distribution::{HARNESS_USER_AGENT, RealRegistry};

use crate::measure::{self, LoggedRequest, Traffic};

/// The tool's process: wall seconds, user + system CPU seconds, peak RSS.
#[derive(Debug, Clone, Default)]
pub struct Process {
    pub wall: f64,
    pub cpu: f64,
    pub rss_kib: u64,
}

/// What one registry did during one sync.
#[derive(Debug, Clone, Default)]
pub struct Side {
    pub traffic: Traffic,
    /// The registry process's user + system CPU seconds.
    pub cpu: f64,
    /// Per request kind: the sum of `http.response.duration` from its app log (time from
    /// request to response written, which includes waiting, not CPU alone).
    pub handler_secs: BTreeMap<&'static str, f64>,
}

/// One measured sync.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub process: Process,
    pub source: Side,
    pub target: Side,
}

impl Run {
    /// The least wall time the work could take on this machine: every CPU second spent (both
    /// registries and the tool) spread over all cores.
    pub fn cpu_floor(&self) -> f64 {
        (self.source.cpu + self.target.cpu + self.process.cpu) / cores()
    }

    pub fn requests(&self) -> u64 {
        self.source.traffic.requests + self.target.traffic.requests
    }
}

pub fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// A registry's counters before a sync.
pub struct RegistryMark {
    requests: usize,
    app_log_bytes: usize,
    cpu: f64,
}

impl RegistryMark {
    pub async fn take(registry: &RealRegistry) -> Result<RegistryMark, String> {
        Ok(RegistryMark {
            requests: measure::requests(registry).await?.len(),
            app_log_bytes: app_log(registry).len(),
            cpu: registry_cpu(registry)?,
        })
    }

    /// What the registry did since the mark.
    pub async fn since(&self, registry: &RealRegistry) -> Result<Side, String> {
        let requests = measure::requests(registry).await?;
        let cpu = registry_cpu(registry)? - self.cpu;
        let log = app_log(registry);
        let mut handler_secs = BTreeMap::new();
        for (request, secs) in log
            .get(self.app_log_bytes..)
            .unwrap_or("")
            .lines()
            .filter_map(completed)
        {
            *handler_secs.entry(measure::kind(&request)).or_insert(0.0) += secs;
        }
        Ok(Side {
            traffic: Traffic::of(requests.get(self.requests..).unwrap_or(&[])),
            cpu,
            handler_secs,
        })
    }
}

fn app_log(registry: &RealRegistry) -> String {
    std::fs::read_to_string(registry.stderr_log_path()).unwrap_or_default()
}

/// One `response completed` line of distribution's app log: the request and its duration.
fn completed(line: &str) -> Option<(LoggedRequest, f64)> {
    if !line.contains("msg=\"response completed") {
        return None;
    }
    let field = |key: &str| {
        let start = line.find(&format!(" {key}="))? + key.len() + 2;
        let rest = &line[start..];
        Some(match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or(""),
            None => rest.split(' ').next().unwrap_or(""),
        })
    };
    if field("http.request.useragent") == Some(HARNESS_USER_AGENT) {
        return None;
    }
    let request = LoggedRequest {
        method: field("http.request.method")?.to_owned(),
        path: field("http.request.uri")?.to_owned(),
        status: field("http.response.status")?.parse().ok()?,
        bytes: 0,
    };
    Some((request, go_duration(field("http.response.duration")?)?))
}

/// Seconds in a Go duration string such as `1.5ms`, `12µs` or `1m2.5s`.
pub fn go_duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..number_end].parse().ok()?;
        let unit_end = rest[number_end..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(rest.len(), |i| number_end + i);
        let scale = match &rest[number_end..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "µs" | "μs" | "us" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    Some(total)
}

/// The registry process's user + system CPU seconds from `/proc/PID/stat` (fields 14 and 15).
fn registry_cpu(registry: &RealRegistry) -> Result<f64, String> {
    let pid = registry_pid(registry)
        .ok_or_else(|| format!("no process serves the registry at {}", registry.host()))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("reading /proc/{pid}/stat: {e}"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // After ")" the fields start at number 3, so utime (14) and stime (15) are 11 and 12 here.
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => Ok((user + system) / clock_ticks()),
        _ => Err(format!("/proc/{pid}/stat has no CPU times: {stat:?}")),
    }
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The registry's process: the one whose command line serves the config in its work directory.
fn registry_pid(registry: &RealRegistry) -> Option<u32> {
    let config = registry.access_log_path().parent()?.join("config.yml");
    let config = config.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (args.get(1) == Some(&&b"serve"[..]) && args.get(2) == Some(&config.as_bytes()))
                .then_some(pid)
        })
}

/// Runs `program args…` measured (`measure::run_measured_within`: wall, peak RSS, user and
/// system CPU under `/usr/bin/time`), its output to `log`; `None` when stopped at `bound`.
pub async fn run_timed(
    program: &Path,
    args: &[String],
    envs: &[(String, String)],
    log: &Path,
    bound: Option<Duration>,
) -> Result<Option<Process>, String> {
    let program = program.to_string_lossy();
    let cost = measure::run_measured_within(&program, args, envs, log, bound).await?;
    Ok(cost.map(|cost| Process {
        wall: cost.wall.as_secs_f64(),
        cpu: cost.cpu_secs,
        rss_kib: cost.peak_rss_kib,
    }))
}
