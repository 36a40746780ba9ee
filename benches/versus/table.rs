//! The one table `scripts/bench compare` prints (each issue-42 target as a ratio), its header
//! (date, commit, machine), the raw-figures JSON, and its section of docs/performance.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use crate::cost::{Run, Side};
use crate::measure::{median, version_of};
use crate::tools::Tool;
use crate::{CorpusRow, Found, Options};

pub const MARKERS: (&str, &str) = ("<!-- versus:begin -->", "<!-- versus:end -->");

/// The machine and versions, for the table's header.
pub struct Machine {
    pub date: String,
    pub commit: String,
    pub cpus: usize,
    pub model: String,
    pub memory: String,
    pub load: String,
}

impl Machine {
    pub fn collect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or("unknown CPU".to_owned(), |(_, v)| v.trim().to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<f64>().ok())
            .map_or("unknown".to_owned(), |kib| {
                format!("{:.1} GiB", kib / f64::from(1 << 20))
            });
        let commit = version_of(
            "git",
            &[
                "-C",
                env!("CARGO_MANIFEST_DIR"),
                "rev-parse",
                "--short",
                "HEAD",
            ],
        );
        let dirty = std::process::Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "status", "--porcelain"])
            .output()
            .is_ok_and(|o| !o.stdout.is_empty());
        Machine {
            date: version_of("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            commit: if dirty {
                format!("{commit} (with uncommitted changes)")
            } else {
                commit
            },
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            model,
            memory,
            load: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .next()
                .unwrap_or("?")
                .to_owned(),
        }
    }
}

/// Everything the table is made from.
pub struct Inputs<'a> {
    pub options: &'a Options,
    pub machine: &'a Machine,
    pub found: &'a Found,
    pub rows: &'a [CorpusRow],
    pub bigblob: Option<&'a Value>,
    pub resilience: Option<&'a Value>,
}

fn med(runs: Option<&Vec<Run>>, f: impl Fn(&Run) -> f64) -> Option<f64> {
    let values: Vec<f64> = runs?.iter().map(f).collect();
    median(&values)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn fmt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.decimals$}"))
}

/// A tool's cell: its figure, or why there is none.
fn cell(inputs: &Inputs, tool: Tool, runs: Option<&Vec<Run>>, text: String) -> String {
    if !inputs.found.iter().any(|(t, _)| *t == tool) {
        "not installed".to_owned()
    } else if runs.is_none()
        && inputs
            .rows
            .iter()
            .any(|r| r.runs.failed.contains_key(&tool))
    {
        "failed (error in the JSON)".to_owned()
    } else if runs.is_none() {
        "not run".to_owned()
    } else {
        text
    }
}

fn versions(inputs: &Inputs) -> String {
    let mut parts = Vec::new();
    for tool in Tool::ALL {
        let text = match inputs.found.iter().find(|(t, _)| *t == tool) {
            Some((_, binary)) => {
                let binary = binary.display().to_string();
                version_of(&binary, &["--version"])
            }
            None => format!("{}: not installed", tool.name()),
        };
        parts.push(text);
    }
    parts.push(version_of("/usr/bin/docker-registry", &["--version"]));
    parts.join("; ")
}

/// The rows for one corpus: each measure with the three tools and ferry's ratios.
fn corpus_rows(inputs: &Inputs, row: &CorpusRow, out: &mut String) {
    let tags = row.corpus.tag_count() as f64;
    let repos = row.corpus.repos.len() as f64;
    let label = match row.key {
        "corpus-a" => "corpus A cold (stands in for corpus M)".to_owned(),
        "scale-250" => "250 × 5".to_owned(),
        _ => "1,000 × 5".to_owned(),
    };
    // The scale rows have a warm phase even when every cold sync was stopped at the bound.
    let phases: Vec<(&str, &BTreeMap<Tool, Vec<Run>>)> = if row.key == "corpus-a" {
        vec![("", &row.runs.cold)]
    } else {
        vec![(" cold", &row.runs.cold), (" warm", &row.runs.warm)]
    };
    for (phase, runs) in phases {
        let name = format!("{label}{phase}");
        type Measure<'m> = (&'m str, Box<dyn Fn(&Run) -> f64>, usize, &'m str);
        let mut measures: Vec<Measure> = vec![
            (
                "wall s",
                Box::new(|r: &Run| r.process.wall),
                2,
                "≤ 0.9x ocync",
            ),
            (
                "requests source",
                Box::new(|r: &Run| r.source.traffic.requests as f64),
                0,
                "",
            ),
            (
                "requests target",
                Box::new(|r: &Run| r.target.traffic.requests as f64),
                0,
                "",
            ),
            (
                "requests per tag",
                Box::new(move |r: &Run| r.requests() as f64 / tags),
                2,
                "",
            ),
            (
                "peak RSS MiB",
                Box::new(|r: &Run| r.process.rss_kib as f64 / 1024.0),
                0,
                "",
            ),
        ];
        if row.key == "corpus-a" {
            measures.extend::<Vec<Measure>>(vec![
                (
                    "registry CPU s (source + target)",
                    Box::new(|r: &Run| r.source.cpu + r.target.cpu),
                    2,
                    "",
                ),
                ("tool CPU s", Box::new(|r: &Run| r.process.cpu), 2, ""),
                ("CPU floor s", Box::new(Run::cpu_floor), 2, ""),
                (
                    "wall ÷ CPU floor",
                    Box::new(|r: &Run| r.process.wall / r.cpu_floor().max(1e-6)),
                    2,
                    "ferry ≤ 1.1x",
                ),
            ]);
        }
        for (measure, f, decimals, target) in &measures {
            let values: Vec<Option<f64>> = Tool::ALL
                .iter()
                .map(|t| med(runs.get(t), f.as_ref()))
                .collect();
            // A tool stopped at `--bound` on this corpus: its cold wall is more than the bound.
            let stopped = |t: &Tool| {
                runs.get(t)
                    .is_none()
                    .then(|| row.runs.stopped.get(t).copied())
                    .flatten()
            };
            let cells: Vec<String> = Tool::ALL
                .iter()
                .zip(&values)
                .map(|(t, v)| match stopped(t) {
                    Some(b) if *measure == "wall s" && phase != " warm" => {
                        format!("> {b:.0} (stopped at the bound)")
                    }
                    Some(_) if phase == " warm" => "not run (cold stopped at the bound)".to_owned(),
                    Some(_) => "stopped at the bound".to_owned(),
                    None => cell(inputs, *t, runs.get(t), fmt(*v, *decimals)),
                })
                .collect();
            let mut ratios = Vec::new();
            if *measure != "wall ÷ CPU floor" {
                for (i, other) in [(1, "ocync"), (2, "skopeo")] {
                    if let Some(r) = ratio(values[0], values[i]) {
                        ratios.push(format!("{r:.2}x {other}"));
                    } else if let (true, Some(b), Some(ferry)) = (
                        *measure == "wall s" && phase != " warm",
                        stopped(&Tool::ALL[i]),
                        values[0],
                    ) {
                        ratios.push(format!("< {:.2}x {other}", ferry / b));
                    }
                }
            } else if let Some(v) = values[0] {
                ratios.push(format!("ferry {v:.2}x its floor"));
            }
            let mut target = (*target).to_owned();
            if phase == " warm" && *measure == "requests per tag" {
                let allowance = tags + 2.0 * repos;
                let ferry = med(runs.get(&Tool::Ferry), |r| r.requests() as f64);
                target = format!(
                    "≤ 1 per tag + 2 per repository ({allowance:.0} requests; ferry {})",
                    fmt(ratio(ferry, Some(allowance)), 2) + "x of it"
                );
            }
            let _ = writeln!(
                out,
                "| {name} | {measure} | {} | {} | {} | {} | {target} |",
                cells[0],
                cells[1],
                cells[2],
                ratios.join(", ")
            );
        }
    }
}

/// Ferry's and ocync's cold time and memory at 1,000 repositories over 250.
fn scaling_rows(inputs: &Inputs, out: &mut String) {
    let find = |key: &str| inputs.rows.iter().find(|r| r.key == key);
    let (Some(small), Some(large)) = (find("scale-250"), find("scale-1000")) else {
        return;
    };
    type Measure<'m> = (&'m str, fn(&Run) -> f64, &'m str);
    let measures: [Measure; 2] = [
        ("cold wall, 1,000 ÷ 250", |r| r.process.wall, "ferry ≤ 4.4x"),
        (
            "cold peak RSS, 1,000 ÷ 250",
            |r| r.process.rss_kib as f64,
            "ferry ≤ 2x, < 200 MiB",
        ),
    ];
    for (measure, f, target) in measures {
        let cells: Vec<String> = Tool::ALL
            .iter()
            .map(|t| {
                let r = ratio(
                    med(large.runs.cold.get(t), f),
                    med(small.runs.cold.get(t), f),
                );
                if !large.runs.cold.contains_key(t) && large.runs.stopped.contains_key(t) {
                    return "stopped at the bound".to_owned();
                }
                cell(inputs, *t, large.runs.cold.get(t), fmt(r, 2) + "x")
            })
            .collect();
        let _ = writeln!(
            out,
            "| scaling | {measure} | {} | {} | {} | | {target} |",
            cells[0], cells[1], cells[2]
        );
    }
}

fn number(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// Ferry ÷ the slower curl, per size, from benches/bigblob.rs's JSON.
fn bigblob_rows(inputs: &Inputs, out: &mut String) {
    let Some(records) = inputs
        .bigblob
        .and_then(|v| v.get("sizes")?.as_array().cloned())
    else {
        let _ = writeln!(
            out,
            "| big layers | ferry ÷ slower curl | not run | | | | ≥ 0.85x |"
        );
        return;
    };
    for size in records {
        let gib = number(&size, "gib").unwrap_or(0.0);
        if let Some(note) = size.get("skipped").and_then(Value::as_str) {
            let _ = writeln!(
                out,
                "| {gib:.0} GiB layer | ferry ÷ slower curl | skipped: {note} | | | | ≥ 0.85x |"
            );
            continue;
        }
        let runs = size
            .get("runs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let ratios: Vec<f64> = runs.iter().filter_map(|r| number(r, "ratio")).collect();
        let rates: Vec<f64> = runs
            .iter()
            .filter_map(|r| number(r, "ferry_mib_s"))
            .collect();
        let floors: Vec<f64> = runs
            .iter()
            .filter_map(|r| number(r, "floor_mib_s"))
            .collect();
        let worst = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            out,
            "| {gib:.0} GiB layer | ferry ÷ slower of curl GET and PUT (MiB/s) | {} MiB/s | | | {} (per run: {}; worst {}) | ≥ 0.85x |",
            fmt(median(&rates), 0),
            fmt(median(&ratios), 2) + "x of " + &fmt(median(&floors), 0) + " MiB/s",
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            fmt(worst.is_finite().then_some(worst), 2)
        );
    }
}

/// S1 (mixed faults) and S6 (lost replies) over clean, per run, from benches/resilience.rs.
fn resilience_rows(inputs: &Inputs, out: &mut String) {
    let wanted = |row: &str| inputs.options.only.iter().any(|r| r == row);
    let runs = inputs
        .resilience
        .and_then(|v| v.get("runs")?.as_array().cloned())
        .unwrap_or_default();
    for (row, key, name) in [
        ("s1", "mixed", "S1: ~10% mixed transient faults"),
        ("s6", "lost", "S6: 20% of write replies lost"),
    ] {
        if !wanted(row) {
            continue;
        }
        let ratios: Vec<f64> = runs
            .iter()
            .filter_map(|run| {
                let wall = |c: &str| {
                    run.get("conditions")?
                        .as_array()?
                        .iter()
                        .find(|o| o.get("condition").and_then(Value::as_str) == Some(c))
                        .and_then(|o| number(o, "wall_s"))
                };
                ratio(wall(key), wall("clean"))
            })
            .collect();
        let worst = ratios.iter().copied().fold(0.0, f64::max);
        let text = if ratios.is_empty() {
            "not run".to_owned()
        } else {
            format!(
                "{} runs: {}",
                ratios.len(),
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let _ = writeln!(
            out,
            "| {name} | wall ÷ clean, per run | {text} | | | worst {worst:.2}x | ≤ 3x clean in every run |"
        );
    }
}

/// Request counts and summed handler time by kind, per side, in corpus A's cold runs (per run).
fn kinds_table(inputs: &Inputs, out: &mut String) {
    let Some(row) = inputs.rows.iter().find(|r| r.key == "corpus-a") else {
        return;
    };
    let _ = writeln!(
        out,
        "\nCorpus A cold, per run (mean over runs): requests and the registry's summed handler time (`http.response.duration` from its app log: request to response written, waiting included) by request kind. The test registry logs at a level that keeps only `response completed with error` lines (404s and the like), so the handler time covers those answers only; 0.00 means no such line.\n\n| side | kind | ferry requests | ferry handler s | ocync requests | ocync handler s | skopeo requests | skopeo handler s |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for (side_name, side) in [
        ("source", (|r: &Run| &r.source) as fn(&Run) -> &Side),
        ("target", |r: &Run| &r.target),
    ] {
        let mut kinds: Vec<&'static str> = row
            .runs
            .cold
            .values()
            .flatten()
            .flat_map(|r| side(r).traffic.by_kind.keys().copied())
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            let mut cells = Vec::new();
            for tool in Tool::ALL {
                let runs = row.runs.cold.get(&tool);
                let n = runs.map_or(0, Vec::len).max(1) as f64;
                let count: f64 = runs
                    .into_iter()
                    .flatten()
                    .map(|r| side(r).traffic.by_kind.get(kind).copied().unwrap_or(0) as f64)
                    .sum();
                let secs: f64 = runs
                    .into_iter()
                    .flatten()
                    .map(|r| side(r).handler_secs.get(kind).copied().unwrap_or(0.0))
                    .sum();
                cells.push(cell(inputs, tool, runs, format!("{:.0}", count / n)));
                cells.push(cell(inputs, tool, runs, format!("{:.2}", secs / n)));
            }
            let _ = writeln!(out, "| {side_name} | {kind} | {} |", cells.join(" | "));
        }
    }
}

/// The table with its header.
pub fn render(inputs: &Inputs) -> String {
    let m = inputs.machine;
    let mut out = format!(
        "Measured {} at commit {} on {} CPUs ({}), {} memory; load average {} at the start. \
         Command: `scripts/bench compare --runs {}{}`; medians of {} run(s) per tool (S1/S6: every run). \
         Versions: {}. Raw figures: `{}`.\n\n\
         | Row | Measure | ferry | ocync | skopeo | ferry's ratio | issue-42 target |\n\
         |---|---|---:|---:|---:|---|---|\n",
        m.date,
        m.commit,
        m.cpus,
        m.model,
        m.memory,
        m.load,
        inputs.options.runs,
        flags(inputs.options),
        inputs.options.runs,
        versions(inputs),
        inputs.options.json.display()
    );
    for row in inputs.rows {
        corpus_rows(inputs, row, &mut out);
    }
    scaling_rows(inputs, &mut out);
    if inputs.options.only.iter().any(|r| r == "bigblob") {
        bigblob_rows(inputs, &mut out);
    }
    resilience_rows(inputs, &mut out);
    kinds_table(inputs, &mut out);
    out
}

/// The options besides `--runs` that change what was measured, as typed.
fn flags(options: &Options) -> String {
    let mut out = String::new();
    if let Some(bound) = options.bound {
        out.push_str(&format!(" --bound {}", bound.as_secs()));
    }
    if options.warm_runs != 1 {
        out.push_str(&format!(" --warm-runs {}", options.warm_runs));
    }
    if let Some(dir) = &options.registry_dir {
        out.push_str(&format!(" --registry-dir {}", dir.display()));
    }
    out
}

fn side_json(side: &Side) -> Value {
    json!({
        "requests": side.traffic.requests,
        "errors": side.traffic.errors,
        "blob_bytes": side.traffic.blob_bytes,
        "by_kind": side.traffic.by_kind,
        "cpu_s": side.cpu,
        "handler_s_by_kind": side.handler_secs,
    })
}

fn run_json(run: &Run) -> Value {
    json!({
        "wall_s": run.process.wall,
        "cpu_s": run.process.cpu,
        "peak_rss_kib": run.process.rss_kib,
        "cpu_floor_s": run.cpu_floor(),
        "source": side_json(&run.source),
        "target": side_json(&run.target),
    })
}

/// Every figure measured, for the JSON file.
pub fn raw_json(inputs: &Inputs) -> Value {
    let m = inputs.machine;
    let rows: Vec<Value> = inputs
        .rows
        .iter()
        .map(|row| {
            let phase = |runs: &BTreeMap<Tool, Vec<Run>>| {
                runs.iter()
                    .map(|(t, rs)| (t.name(), rs.iter().map(run_json).collect::<Vec<_>>()))
                    .collect::<BTreeMap<_, _>>()
            };
            json!({
                "row": row.key,
                "corpus": {
                    "name": row.corpus.shape.name,
                    "repositories": row.corpus.repos.len(),
                    "tags": row.corpus.tag_count(),
                    "blobs": row.corpus.blobs.len(),
                    "bytes": row.corpus.unique_bytes(),
                },
                "cold": phase(&row.runs.cold),
                "failed": row.runs.failed.iter().map(|(t, e)| (t.name(), e.clone())).collect::<BTreeMap<_, _>>(),
                "stopped_at_bound_secs": row.runs.stopped.iter().map(|(t, b)| (t.name(), *b)).collect::<BTreeMap<_, _>>(),
                "warm": phase(&row.runs.warm),
            })
        })
        .collect();
    json!({
        "date": m.date,
        "commit": m.commit,
        "machine": { "cpus": m.cpus, "model": m.model, "memory": m.memory, "load": m.load },
        "versions": versions(inputs),
        "runs": inputs.options.runs,
        "tools": inputs.found.iter().map(|(t, b)| (t.name(), b.display().to_string())).collect::<BTreeMap<_, _>>(),
        "rows": rows,
        "bigblob": inputs.bigblob,
        "resilience": inputs.resilience,
    })
}

/// Replaces the text between [`MARKERS`] in `path` with `body`.
pub fn write_doc(path: &Path, body: &str) -> Result<(), String> {
    let doc =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let (begin, end) = MARKERS;
    let (Some(start), Some(stop)) = (doc.find(begin), doc.find(end)) else {
        return Err(format!(
            "{} lacks the markers {begin} … {end}",
            path.display()
        ));
    };
    let updated = format!(
        "{}{begin}\n{}\n{}",
        &doc[..start],
        body.trim_end(),
        &doc[stop..]
    );
    std::fs::write(path, updated).map_err(|e| format!("writing {}: {e}", path.display()))
}
