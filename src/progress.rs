//! Progress on stderr: indicatif bars on a terminal (prepare: mappings resolved; sync: images
//! and bytes), a plain grep-friendly line every 5 s elsewhere, or nothing; `--progress` decides.

use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use ferry_sync::prepare::PrepareTracker;
use ferry_sync::progress::SyncProgress;
use ferry_sync::registries::Registries;
use ferry_sync::report::human_bytes;

use crate::cli::ProgressMode;

/// How often bars are refreshed from the counters.
const BAR_TICK: Duration = Duration::from_millis(200);
/// How often a plain progress line is written.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

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
}

impl Progress {
    /// Chooses bars, plain lines or nothing from `mode` and whether stderr is a terminal.
    pub fn new(mode: ProgressMode) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let display = match (mode, terminal) {
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
        Progress { display, terminal }
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

    /// Writes a line to stderr without garbling the bars.
    pub fn eprint(&self, text: &str) {
        self.suspend(|| {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            if !text.ends_with('\n') {
                let _ = err.write_all(b"\n");
            }
            let _ = err.flush();
        });
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

    /// Shows the copy phase until the returned watch is finished.
    pub fn watch_sync(&self, progress: Arc<SyncProgress>, registries: Registries) -> Watch {
        let start = tokio::time::Instant::now();
        let line = move || {
            let s = progress.snapshot();
            let written: u64 = registries
                .built()
                .iter()
                .map(|c| c.gate().stats.snapshot().bytes_written)
                .sum();
            let bytes = s.bytes_copied.max(written);
            let secs = start.elapsed().as_secs_f64().max(0.001);
            let rate = (bytes as f64 / secs) as u64;
            Sample {
                position: s.images_done,
                length: s.images_total,
                message: format!("{} written, {}/s", human_bytes(bytes), human_bytes(rate)),
                plain: format!(
                    "sync images_done={} images_total={} bytes_written={bytes} elapsed_secs={}",
                    s.images_done,
                    s.images_total,
                    start.elapsed().as_secs()
                ),
            }
        };
        self.watch("copying", "images", line)
    }

    fn watch<F>(&self, prefix: &'static str, unit: &'static str, sample: F) -> Watch
    where
        F: Fn() -> Sample + Send + Sync + 'static,
    {
        let (done_tx, mut done_rx) = oneshot::channel::<()>();
        let task = match &self.display {
            Display::Off => tokio::spawn(async move {
                let _ = done_rx.await;
            }),
            Display::Plain => tokio::spawn(async move {
                let mut ticker = tokio::time::interval(PLAIN_EVERY);
                loop {
                    tokio::select! {
                        _ = ticker.tick() => eprintln!("{}", sample().plain),
                        _ = &mut done_rx => break,
                    }
                }
                eprintln!("{}", sample().plain);
            }),
            Display::Bars(multi) => {
                let style = ProgressStyle::with_template(&format!(
                    "{{prefix:>10}} [{{bar:30.cyan/blue}}] {{pos}}/{{len}} {unit}  {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
                let bar = multi.add(ProgressBar::new(0).with_style(style).with_prefix(prefix));
                tokio::spawn(async move {
                    let draw = |bar: &ProgressBar| {
                        let s = sample();
                        bar.set_length(s.length);
                        bar.set_position(s.position);
                        bar.set_message(s.message);
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
