//! Progress on stderr: indicatif bars on a terminal (prepare: mappings resolved; sync: images
//! and bytes, a bar per large blob), a plain grep-friendly line every 5 s elsewhere (and a log
//! line per 10% of a large blob), or nothing; `--progress` decides.

use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use ferry_distribution::text::{escape_terminal, escape_terminal_lines};
use ferry_sync::PrepareTracker;
use ferry_sync::progress::SyncProgress;
use ferry_sync::registries::Registries;
use ferry_sync::report::human_bytes;

use crate::cli::ProgressMode;

/// How often bars are refreshed from the counters.
const BAR_TICK: Duration = Duration::from_millis(200);
/// How often a plain progress line is written.
const PLAIN_EVERY: Duration = Duration::from_secs(5);
/// Overrides the large-blob threshold (bytes; default 64 MiB): blobs at least this large get a
/// bar, or in plain mode a log line per 10%. For tests and for watching smaller blobs.
pub const LARGE_BLOB_ENV: &str = "FERRY_LARGE_BLOB_BYTES";

#[derive(Clone)]
enum Display {
    Bars(MultiProgress),
    Plain,
    Off,
}

/// The run's progress display; cheap to clone.
#[derive(Clone)]
pub struct Progress {
    display: Display,
    terminal: bool,
    /// `-q`: no progress and, of a run's report on stderr, only its failure lines.
    quiet: bool,
    /// `--log-format json`: every line ferry writes to stderr is a JSON log record.
    json: bool,
}

/// Writes `text` to stderr: its lines as they are (control characters escaped), or with `json`
/// each as a JSON record shaped as the JSON logs' (`timestamp`, `level`, `fields.message`,
/// `target`), so a log pipeline reads every stderr line of `--log-format json`.
fn write_stderr(text: &str, json: bool) {
    let out = if json {
        let timestamp = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let mut out = String::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let record = serde_json::json!({
                "timestamp": timestamp,
                "level": "INFO",
                "fields": { "message": line.trim_end() },
                "target": "ferry::output",
            });
            out.push_str(&record.to_string());
            out.push('\n');
        }
        out
    } else {
        let mut out = escape_terminal_lines(text).into_owned();
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out
    };
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(out.as_bytes());
    let _ = err.flush();
}

/// Writes `text` to stdout with its control characters escaped (line breaks kept): how every
/// human-readable line that may carry a name or error text from outside reaches stdout.
pub fn print_stdout(text: &str) {
    write_stdout(escape_terminal_lines(text).as_bytes());
}

/// Writes `bytes` to stdout as they are (JSON, a manifest's own bytes): the one way anything
/// reaches stdout. A reader that closed early (`ferry tags REPO | head -1`: a broken pipe) ends
/// the output quietly, as ripgrep does: nothing more is written, nothing is printed about it,
/// and the command's exit code stays what its work earned (0 for a listing). Any other write
/// failure (a full disk behind a redirect) is said on stderr.
pub fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot write to standard output: {e}"
            );
        }
    }
}

/// [`write_stdout`] of `text` and a line break, unescaped (JSON documents, whose strings are
/// already escaped).
pub fn println_stdout(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    write_stdout(line.as_bytes());
}

impl Progress {
    /// Chooses bars, plain lines or nothing from `mode` and whether stderr is a terminal;
    /// `quiet` (`-q`, errors only) draws nothing whatever the mode.
    pub fn new(mode: ProgressMode, quiet: bool) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let display = match (mode, terminal) {
            _ if quiet => Display::Off,
            (ProgressMode::None, _) => Display::Off,
            (ProgressMode::Plain, _) | (ProgressMode::Auto, false) => Display::Plain,
            (ProgressMode::Auto, true) => {
                Display::Bars(MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
            }
            (ProgressMode::Bars, true) => {
                Display::Bars(MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
            }
            // Asked for bars where indicatif would hide them: draw to stderr regardless.
            (ProgressMode::Bars, false) => Display::Bars(MultiProgress::with_draw_target(
                ProgressDrawTarget::term_like(Box::new(ForcedStderr)),
            )),
        };
        Progress {
            display,
            terminal,
            quiet,
            json: false,
        }
    }

    /// This display without progress and with only the failure lines of a report (`-q`), its
    /// log format kept: what `ferry watch`'s event syncs write.
    pub fn quieted(&self) -> Progress {
        Progress {
            display: Display::Off,
            terminal: self.terminal,
            quiet: true,
            json: self.json,
        }
    }

    /// With `--log-format json`: stderr lines become JSON records (see `write_stderr`).
    pub fn json_lines(mut self, on: bool) -> Progress {
        self.json = on;
        self
    }

    /// Writes a run's human report to stderr: all of it, or with `-q` only its failure lines
    /// (`FAILED …` and `MISSING …`), so a quiet run that went well prints nothing.
    pub fn eprint_report(&self, text: &str) {
        let text = match self.quiet {
            false => text.trim_end().to_owned(),
            true => text
                .lines()
                .filter(|l| l.starts_with("FAILED") || l.starts_with("MISSING"))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        if !text.is_empty() {
            self.eprint(&text);
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Runs `f` (which writes to stderr) with the bars hidden, so output and bars never mix.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.display {
            Display::Bars(multi) => multi.suspend(f),
            _ => f(),
        }
    }

    /// Writes a line to stderr without garbling the bars, its control characters escaped (it may
    /// carry names and error texts from registries and layouts).
    pub fn eprint(&self, text: &str) {
        self.suspend(|| write_stderr(text, self.json));
    }

    /// The copy phase's counters for this display: in plain mode a large blob logs a line per
    /// 10% read (`ferry::blob`, info); the large-blob threshold is `FERRY_LARGE_BLOB_BYTES`
    /// when it holds a positive number of bytes.
    pub fn sync_counters(&self) -> SyncProgress {
        let counters = SyncProgress::default();
        counters.log_large_blobs(matches!(self.display, Display::Plain));
        if let Ok(text) = std::env::var(LARGE_BLOB_ENV) {
            match text.trim().parse::<u64>() {
                Ok(n) if n > 0 => counters.set_large_blob(n),
                _ => tracing::warn!(
                    value = %text,
                    "{LARGE_BLOB_ENV} is not a positive number of bytes: ignored"
                ),
            }
        }
        counters
    }

    /// Shows the prepare phase until the returned watch is finished.
    pub fn watch_prepare(&self, tracker: Arc<PrepareTracker>) -> Watch {
        let line = move || {
            let s = tracker.snapshot();
            let (slowest, slowest_secs) = s
                .slowest
                .map_or((String::from("-"), 0), |(n, d)| (n, d.as_secs()));
            Sample {
                position: s.done as u64,
                length: s.total as u64,
                message: format!(
                    "in flight {}, slowest {slowest} ({slowest_secs}s)",
                    s.in_flight
                ),
                plain: format!(
                    "prepare done={} total={} in_flight={} slowest={slowest} slowest_secs={slowest_secs} elapsed_secs={}",
                    s.done,
                    s.total,
                    s.in_flight,
                    s.elapsed.as_secs()
                ),
            }
        };
        self.watch("resolving", "mappings", line)
    }

    /// Shows the copy phase until the returned watch is finished: images done of total, source
    /// blob bytes read of those expected with rate and ETA, and a bar per large blob in flight;
    /// the plain line adds the run's `bytes_read`, `bytes_written` and `requests` so far, each
    /// meaning what the report's totals mean by it.
    pub fn watch_sync(&self, progress: Arc<SyncProgress>, registries: Registries) -> Watch {
        let start = tokio::time::Instant::now();
        let counters = Arc::clone(&progress);
        let line = move || {
            let s = counters.snapshot();
            // The report's totals as they stand: registries' bodies and layouts' bytes alike.
            let totals = counters.live_totals(&registries);
            let elapsed = start.elapsed();
            let rate = (s.blob_bytes_read as f64 / elapsed.as_secs_f64().max(0.001)) as u64;
            let eta = eta_secs(s.blob_bytes_read, s.bytes_total, elapsed);
            let eta_text = eta.map_or(String::from("-"), |e| format!("{}:{:02}", e / 60, e % 60));
            Sample {
                position: s.images_done,
                length: s.images_total,
                message: format!(
                    "{} of {} read, {}/s, ETA {eta_text}",
                    human_bytes(s.blob_bytes_read),
                    human_bytes(s.bytes_total),
                    human_bytes(rate)
                ),
                plain: format!(
                    "sync images_done={} images_total={} blob_bytes_read={} bytes_total={} bytes_read={} bytes_written={} requests={} eta_secs={} elapsed_secs={}",
                    s.images_done,
                    s.images_total,
                    s.blob_bytes_read,
                    s.bytes_total,
                    totals.bytes_read,
                    totals.bytes_written,
                    totals.requests,
                    eta.map_or(String::from("-"), |e| e.to_string()),
                    start.elapsed().as_secs()
                ),
            }
        };
        let blobs: BlobsInFlight = Arc::new(move || progress.large_blobs());
        self.watch_with("copying", "images", line, Some(blobs))
    }

    fn watch<F>(&self, prefix: &'static str, unit: &'static str, sample: F) -> Watch
    where
        F: Fn() -> Sample + Send + Sync + 'static,
    {
        self.watch_with(prefix, unit, sample, None)
    }

    fn watch_with<F>(
        &self,
        prefix: &'static str,
        unit: &'static str,
        sample: F,
        blobs: Option<BlobsInFlight>,
    ) -> Watch
    where
        F: Fn() -> Sample + Send + Sync + 'static,
    {
        let (done_tx, mut done_rx) = oneshot::channel::<()>();
        let task = match &self.display {
            Display::Off => tokio::spawn(async move {
                let _ = done_rx.await;
            }),
            Display::Plain => {
                let json = self.json;
                tokio::spawn(async move {
                    let mut ticker = tokio::time::interval(PLAIN_EVERY);
                    loop {
                        tokio::select! {
                            _ = ticker.tick() => write_stderr(&sample().plain, json),
                            _ = &mut done_rx => break,
                        }
                    }
                    write_stderr(&sample().plain, json);
                })
            }
            Display::Bars(multi) => {
                let style = ProgressStyle::with_template(&format!(
                    "{{prefix:>10}} [{{bar:30.cyan/blue}}] {{pos}}/{{len}} {unit}  {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
                // Nothing counted yet (or nothing to do): no bar, which indicatif draws full
                // for a length of 0.
                let empty = ProgressStyle::with_template(&format!(
                    "{{prefix:>10}} {{pos}}/{{len}} {unit}  {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
                let bar = multi.add(
                    ProgressBar::new(0)
                        .with_style(empty.clone())
                        .with_prefix(prefix),
                );
                let multi = multi.clone();
                tokio::spawn(async move {
                    let mut blob_bars = BlobBars::default();
                    let mut barred = false;
                    let mut draw = |bar: &ProgressBar| {
                        let s = sample();
                        if (s.length > 0) != barred {
                            barred = s.length > 0;
                            bar.set_style(if barred { &style } else { &empty }.clone());
                        }
                        bar.set_length(s.length);
                        bar.set_position(s.position);
                        bar.set_message(escape_terminal(&s.message).into_owned());
                        if let Some(blobs) = &blobs {
                            blob_bars.update(&multi, blobs());
                        }
                    };
                    draw(&bar);
                    let mut ticker = tokio::time::interval(BAR_TICK);
                    loop {
                        tokio::select! {
                            _ = ticker.tick() => draw(&bar),
                            _ = &mut done_rx => break,
                        }
                    }
                    draw(&bar);
                    blob_bars.clear();
                    bar.finish();
                })
            }
        };
        Watch {
            done: Some(done_tx),
            task,
        }
    }
}

/// Bytes must have flowed this long before their rate predicts anything: a few KiB of
/// manifests in the first instant made an ETA of hours.
const ETA_AFTER: Duration = Duration::from_secs(3);

/// Seconds left at the rate so far, once there is a rate to base it on: `ETA_AFTER` has
/// passed, bytes were read, and some are left.
fn eta_secs(read: u64, total: u64, elapsed: Duration) -> Option<u64> {
    let left = total.saturating_sub(read);
    if elapsed < ETA_AFTER || read == 0 || left == 0 {
        return None;
    }
    let rate = (read as f64 / elapsed.as_secs_f64()).max(1.0);
    Some((left as f64 / rate).ceil() as u64)
}

/// The large blobs being copied now: (digest, size, bytes read).
type BlobsInFlight = Arc<dyn Fn() -> Vec<(String, u64, u64)> + Send + Sync>;

/// A bar per large blob in flight, added when its transfer starts, removed when it ends.
#[derive(Default)]
struct BlobBars(std::collections::HashMap<String, ProgressBar>);

impl BlobBars {
    fn update(&mut self, multi: &MultiProgress, blobs: Vec<(String, u64, u64)>) {
        let live: std::collections::HashSet<&str> =
            blobs.iter().map(|(d, _, _)| d.as_str()).collect();
        self.0.retain(|digest, bar| {
            let keep = live.contains(digest.as_str());
            if !keep {
                bar.finish_and_clear();
            }
            keep
        });
        for (digest, size, done) in &blobs {
            let bar = self.0.entry(digest.clone()).or_insert_with(|| {
                let style = ProgressStyle::with_template(
                    "{prefix:>10} [{bar:30.green/blue}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
                let short = digest.split(':').nth(1).unwrap_or(digest).get(..12).unwrap_or(digest);
                multi.add(ProgressBar::new(*size).with_style(style).with_prefix(short.to_owned()))
            });
            bar.set_position(*done);
        }
    }

    fn clear(&mut self) {
        for (_, bar) in self.0.drain() {
            bar.finish_and_clear();
        }
    }
}

/// One reading of a phase's counters.
struct Sample {
    position: u64,
    length: u64,
    message: String,
    plain: String,
}

/// A running display of one phase.
pub struct Watch {
    done: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Watch {
    /// Draws the final state and stops.
    pub async fn finish(mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// stderr as a terminal, for `--progress bars` when stderr is not one.
#[derive(Debug)]
struct ForcedStderr;

impl ForcedStderr {
    fn out(&self, text: &str) -> std::io::Result<()> {
        let mut err = std::io::stderr().lock();
        err.write_all(text.as_bytes())
    }
}

impl TermLike for ForcedStderr {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.out(&format!("\x1b[{n}A"))
        }
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.out(&format!("\x1b[{n}B"))
        }
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.out(&format!("\x1b[{n}C"))
        }
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.out(&format!("\x1b[{n}D"))
        }
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.out(&format!("{s}\n"))
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.out(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.out("\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_eta_before_there_is_a_rate_then_the_time_left_at_it() {
        // The first instant: a few KiB of 1 GiB read in 10 ms predicted hours.
        assert_eq!(eta_secs(4096, 1 << 30, Duration::from_millis(10)), None);
        assert_eq!(eta_secs(0, 1 << 30, Duration::from_secs(60)), None);
        assert_eq!(eta_secs(100, 100, Duration::from_secs(60)), None);
        assert_eq!(eta_secs(1000, 4000, Duration::from_secs(10)), Some(30));
    }
}
