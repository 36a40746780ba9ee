//! The markdown the compare bench prints and writes: the machine and versions, a table per
//! corpus with ratios and protocol minimums, the large-layer memory table, and the doc update.

use std::path::Path;

use crate::measure::{median, version_of};
use crate::{LargeCopy, Sample, ShapeResult, Tool};

pub const COMPARE_HEADING: &str = "## ferry against skopeo sync";
pub const MEMORY_HEADING: &str = "## Peak memory copying a 1 GiB layer";
const COMPARE_MARKERS: (&str, &str) = ("<!-- compare:begin -->", "<!-- compare:end -->");
const MEMORY_MARKERS: (&str, &str) = ("<!-- memory:begin -->", "<!-- memory:end -->");

/// Peak RSS the large-layer copy should stay under.
const MEMORY_TARGET_MIB: f64 = 64.0;

/// Where and with what the figures were measured.
pub struct Machine {
    pub date: String,
    pub cpus: String,
    pub cpu_model: String,
    pub memory: String,
    pub ferry: String,
    pub skopeo: String,
    pub registry: String,
    /// `/proc/loadavg`'s 1-minute figure when the bench started: other work on the machine.
    pub load: String,
}

impl Machine {
    pub fn collect(ferry: &Path) -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let memory = std::process::Command::new("free")
            .arg("-g")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find(|l| l.starts_with("Mem:"))
                    .and_then(|l| l.split_whitespace().nth(1).map(|g| format!("{g} GiB")))
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            date: version_of("date", &["-u"]),
            cpus: version_of("nproc", &[]),
            cpu_model,
            memory,
            ferry: version_of(&ferry.display().to_string(), &["--version"]),
            skopeo: version_of("skopeo", &["--version"]),
            registry: version_of("docker-registry", &["--version"]),
            load: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| l.split_whitespace().next().map(str::to_owned))
                .unwrap_or_else(|| "unknown".into()),
        }
    }

    pub fn describe(&self, command: &str) -> String {
        format!(
            "Measured {date} on {cpus} CPUs ({model}), {memory} memory, with `{command}`; \
             load average {load} when the bench started.\n\
             Versions: {ferry} (release build); {skopeo}; {registry} (Debian `docker-registry`, \
             source and target, filesystem storage in a temporary directory, plain HTTP on loopback).\n",
            date = self.date,
            cpus = self.cpus,
            model = self.cpu_model,
            memory = self.memory,
            ferry = self.ferry,
            skopeo = self.skopeo,
            registry = self.registry,
            load = self.load,
        )
    }
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        if a == 0.0 {
            "1.00".into()
        } else {
            "∞".into()
        }
    } else {
        format!("{:.2}", a / b)
    }
}

struct Row {
    label: String,
    ferry: f64,
    skopeo: f64,
    minimum: Option<f64>,
    decimals: usize,
}

fn median_of(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    let values: Vec<f64> = samples.iter().map(f).collect();
    median(&values).unwrap_or(f64::NAN)
}

fn runs_of(result: &ShapeResult, tool: Tool) -> Option<&crate::ToolRuns> {
    result.runs.iter().find(|(t, _)| *t == tool).map(|(_, r)| r)
}

fn rows_for(result: &ShapeResult) -> Vec<Row> {
    let min = result.corpus.minimum();
    let empty = crate::ToolRuns::default();
    let ferry = runs_of(result, Tool::Ferry).unwrap_or(&empty);
    let skopeo = runs_of(result, Tool::Skopeo).unwrap_or(&empty);
    let mut rows = Vec::new();
    for (phase, f, s, source_min, target_min) in [
        (
            "cold",
            &ferry.cold,
            &skopeo.cold,
            min.source_cold,
            min.target_cold,
        ),
        ("warm", &ferry.warm, &skopeo.warm, min.warm, min.warm),
    ] {
        let bytes_min = if phase == "cold" {
            mib(min.source_bytes as f64)
        } else {
            0.0
        };
        type Metric = fn(&Sample) -> f64;
        let metrics: [(&str, Metric, Option<f64>, usize); 5] = [
            ("wall time (s)", |s| s.cost.wall.as_secs_f64(), None, 2),
            (
                "peak RSS (MiB)",
                |s| s.cost.peak_rss_kib as f64 / 1024.0,
                None,
                1,
            ),
            (
                "requests to the source",
                |s| s.source.requests as f64,
                Some(source_min as f64),
                0,
            ),
            (
                "requests to the target",
                |s| s.target.requests as f64,
                Some(target_min as f64),
                0,
            ),
            (
                "blob bytes read from the source (MiB)",
                |s| mib(s.source.blob_bytes as f64),
                Some(bytes_min),
                1,
            ),
        ];
        for (label, metric, minimum, decimals) in metrics {
            rows.push(Row {
                label: format!("{phase}: {label}"),
                ferry: median_of(f, metric),
                skopeo: median_of(s, metric),
                minimum,
                decimals,
            });
        }
    }
    rows
}

fn breakdown(result: &ShapeResult) -> String {
    let mut columns: Vec<(String, &Sample)> = Vec::new();
    for phase in ["cold", "warm"] {
        for tool in [Tool::Ferry, Tool::Skopeo] {
            if let Some(runs) = runs_of(result, tool) {
                let samples = if phase == "cold" {
                    &runs.cold
                } else {
                    &runs.warm
                };
                if let Some(first) = samples.first() {
                    columns.push((format!("{} {phase}", tool.name()), first));
                }
            }
        }
    }
    let mut kinds: Vec<&str> = columns
        .iter()
        .flat_map(|(_, s)| s.source.by_kind.keys().chain(s.target.by_kind.keys()))
        .copied()
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut out = String::from("| Request (source / target) |");
    for (name, _) in &columns {
        out.push_str(&format!(" {name} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(columns.len()));
    out.push('\n');
    for kind in kinds {
        out.push_str(&format!("| {kind} |"));
        for (_, sample) in &columns {
            let s = sample.source.by_kind.get(kind).copied().unwrap_or(0);
            let t = sample.target.by_kind.get(kind).copied().unwrap_or(0);
            out.push_str(&format!(" {s} / {t} |"));
        }
        out.push('\n');
    }
    out.push_str("| errors (status ≥ 400 other than 404) |");
    for (_, sample) in &columns {
        out.push_str(&format!(
            " {} / {} |",
            sample.source.errors, sample.target.errors
        ));
    }
    out.push('\n');
    out
}

fn spread(result: &ShapeResult) -> String {
    let mut out = String::new();
    for (tool, runs) in &result.runs {
        for (phase, samples) in [("cold", &runs.cold), ("warm", &runs.warm)] {
            let walls: Vec<String> = samples.iter().map(|s| crate::secs(s.cost.wall)).collect();
            out.push_str(&format!(
                "{} {phase}: {} s; ",
                tool.name(),
                walls.join(", ")
            ));
        }
    }
    out.trim_end_matches("; ").to_owned()
}

/// The generated part of the "ferry against skopeo sync" section.
pub fn compare_section(
    machine: &Machine,
    command: &str,
    runs: usize,
    shapes: &[ShapeResult],
) -> String {
    let mut out = machine.describe(command);
    out.push_str(&format!(
        "\nEach figure is the median of {runs} runs. In each run, ferry and skopeo alternate order; \
         each gets a fresh target registry, a cold sync (every tag then checked in the target by \
         digest), and a warm sync with nothing changed. skopeo runs as \
         `skopeo sync --src yaml --dest docker --all --preserve-digests` with its blob-info cache \
         empty at the start of the cold sync and kept for the warm one. Requests and bytes come \
         from the registries' access logs. Protocol minimum: source cold = 1 GET per unique \
         blob + 1 GET per manifest + 1 tag listing per repository; target cold = POST+PUT per \
         blob new to the registry + 1 mount per further repository holding it + 1 PUT per \
         manifest + 1 listing per repository; warm (each side) = 1 listing per repository + \
         1 HEAD per tag. The `/v2/` ping is not counted in the minimum.\n"
    ));
    let mut losses = Vec::new();
    for result in shapes {
        let c = &result.corpus;
        out.push_str(&format!(
            "\n### Corpus {}\n\n{} repositories, {} tags ({} of them two-platform indexes), {} unique \
             blobs, {:.1} MiB of incompressible layer bytes; seed {:#x}.\n\n",
            c.shape.name,
            c.repos.len(),
            c.tag_count(),
            c.index_count(),
            c.blobs.len(),
            mib(c.unique_bytes() as f64),
            c.shape.seed
        ));
        out.push_str(
            "| Measure (median) | ferry | skopeo | ferry ÷ skopeo | protocol minimum | ferry ÷ minimum | skopeo ÷ minimum |\n\
             |---|---:|---:|---:|---:|---:|---:|\n",
        );
        for row in rows_for(result) {
            let d = row.decimals;
            let (min_text, fmin, smin) = match row.minimum {
                Some(m) => (
                    format!("{m:.d$}"),
                    ratio(row.ferry, m),
                    ratio(row.skopeo, m),
                ),
                None => ("—".into(), "—".into(), "—".into()),
            };
            out.push_str(&format!(
                "| {} | {:.d$} | {:.d$} | {} | {min_text} | {fmin} | {smin} |\n",
                row.label,
                row.ferry,
                row.skopeo,
                ratio(row.ferry, row.skopeo),
            ));
            // A loss is ferry above skopeo by more than 5 % (and by more than a rounding step).
            let step = 10f64.powi(-(d as i32));
            if row.ferry > row.skopeo * 1.05 && row.ferry - row.skopeo >= step {
                losses.push(format!(
                    "corpus {}, {}: ferry {:.d$}, skopeo {:.d$} ({}×)",
                    c.shape.name,
                    row.label,
                    row.ferry,
                    row.skopeo,
                    ratio(row.ferry, row.skopeo)
                ));
            }
        }
        out.push_str(&format!(
            "\nWall time per run: {}.\n\nRequests by kind in the first run, source / target:\n\n{}",
            spread(result),
            breakdown(result)
        ));
    }
    out.push_str("\n### Where ferry loses (generated)\n\n");
    if losses.is_empty() {
        out.push_str("Nowhere in this run: ferry is at or below skopeo (within 5 %) on every measure above.\n");
    } else {
        out.push_str("ferry is more than 5 % worse than skopeo on:\n\n");
        for loss in losses {
            out.push_str(&format!("- {loss}\n"));
        }
    }
    out
}

/// The generated part of the "Peak memory copying a 1 GiB layer" section.
pub fn memory_section(machine: &Machine, command: &str, size: u64, copies: &[LargeCopy]) -> String {
    let mut out = machine.describe(command);
    out.push_str(&format!(
        "\nOne image whose single layer is {:.0} MiB of incompressible bytes, streamed into the \
         source registry (digest in a first pass, PATCH chunks in a second). Each run copies it \
         into a fresh target under `/usr/bin/time -f %M`; the layer's size in the target is \
         checked afterwards. Throughput = layer size ÷ wall time of the whole sync process.\n\n",
        mib(size as f64)
    ));
    out.push_str(
        "| Tool | peak RSS (MiB), median | runs (MiB) | wall time (s), median | runs (s) | throughput (MiB/s), median | best | bytes read from source (MiB) |\n\
         |---|---:|---|---:|---|---:|---:|---:|\n",
    );
    let mut ferry_rss = None;
    let mut medians: Vec<(Tool, f64, f64)> = Vec::new();
    for tool in [Tool::Ferry, Tool::Skopeo] {
        let mine: Vec<&LargeCopy> = copies.iter().filter(|c| c.tool == tool).collect();
        if mine.is_empty() {
            continue;
        }
        let rss: Vec<f64> = mine
            .iter()
            .map(|c| c.cost.peak_rss_kib as f64 / 1024.0)
            .collect();
        let walls: Vec<f64> = mine.iter().map(|c| c.cost.wall.as_secs_f64()).collect();
        let rates: Vec<f64> = walls.iter().map(|w| mib(size as f64) / w).collect();
        let read: Vec<f64> = mine.iter().map(|c| mib(c.source_bytes as f64)).collect();
        let rss_median = median(&rss).unwrap_or(f64::NAN);
        if tool == Tool::Ferry {
            ferry_rss = Some(rss_median);
        }
        let best = rates.iter().copied().fold(f64::NAN, f64::max);
        let rate_median = median(&rates).unwrap_or(f64::NAN);
        medians.push((tool, rss_median, rate_median));
        out.push_str(&format!(
            "| {} | {:.1} | {} | {:.2} | {} | {:.0} | {:.0} | {:.0} |\n",
            tool.name(),
            rss_median,
            rss.iter()
                .map(|r| format!("{r:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            median(&walls).unwrap_or(f64::NAN),
            walls
                .iter()
                .map(|w| format!("{w:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            rate_median,
            best,
            median(&read).unwrap_or(f64::NAN),
        ));
    }
    if let Some(rss) = ferry_rss {
        let verdict = if rss < MEMORY_TARGET_MIB {
            "under"
        } else {
            "OVER"
        };
        out.push_str(&format!(
            "\nferry's median peak RSS is {rss:.1} MiB: {verdict} the {MEMORY_TARGET_MIB:.0} MiB target.\n"
        ));
    }
    if let [(Tool::Ferry, f_rss, f_rate), (Tool::Skopeo, s_rss, s_rate)] = medians[..] {
        let mut losses = Vec::new();
        if f_rss > s_rss * 1.05 {
            losses.push(format!(
                "peak RSS: ferry {f_rss:.1} MiB, skopeo {s_rss:.1} MiB"
            ));
        }
        if f_rate * 1.05 < s_rate {
            losses.push(format!(
                "median throughput: ferry {f_rate:.0} MiB/s, skopeo {s_rate:.0} MiB/s"
            ));
        }
        if losses.is_empty() {
            out.push_str("ferry is at or better than skopeo (within 5 %) on peak RSS and median throughput.\n");
        } else {
            out.push_str(&format!(
                "ferry loses to skopeo here on {}.\n",
                losses.join("; ")
            ));
        }
    }
    out
}

/// Replaces the text between `markers` under `heading` (adding heading and markers if absent).
fn splice(doc: &str, heading: &str, markers: (&str, &str), body: &str) -> String {
    let block = format!("{}\n{}\n{}", markers.0, body.trim_end(), markers.1);
    if let (Some(start), Some(end)) = (doc.find(markers.0), doc.find(markers.1))
        && start < end
    {
        return format!(
            "{}{}{}",
            &doc[..start],
            block,
            &doc[end + markers.1.len()..]
        );
    }
    if let Some(at) = doc.find(heading) {
        let after_heading = doc[at..].find('\n').map_or(doc.len(), |n| at + n + 1);
        return format!(
            "{}\n{}\n{}",
            &doc[..after_heading],
            block,
            &doc[after_heading..]
        );
    }
    format!("{}\n\n{heading}\n\n{block}\n", doc.trim_end())
}

/// Writes the generated sections into `path`, leaving every other part of the file as it is.
pub fn write_doc(path: &Path, compare: &str, memory: Option<&str>) -> Result<(), String> {
    let mut doc = std::fs::read_to_string(path).unwrap_or_else(|_| "# Performance\n".to_owned());
    doc = splice(&doc, COMPARE_HEADING, COMPARE_MARKERS, compare);
    if let Some(memory) = memory {
        doc = splice(&doc, MEMORY_HEADING, MEMORY_MARKERS, memory);
    }
    std::fs::write(path, doc).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Writes one generated section (`body` between `markers` under `heading`) into `path`.
pub fn write_section(
    path: &Path,
    heading: &str,
    markers: (&str, &str),
    body: &str,
) -> Result<(), String> {
    let doc = std::fs::read_to_string(path).unwrap_or_else(|_| "# Performance\n".to_owned());
    std::fs::write(path, splice(&doc, heading, markers, body))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}
