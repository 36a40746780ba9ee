//! Log setup: a `RUST_LOG`-style filter chosen from -v/-q, text or JSON lines on stderr, written
//! through the progress display so a log line never lands in the middle of a bar.

use std::io::Write as _;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::cli::{GlobalArgs, LogFormat};
use crate::progress::Progress;

/// The filter: -q errors only, -v debug for ferry, -vv trace; otherwise `RUST_LOG` when set,
/// else warnings plus ferry's info.
pub fn filter_for(args: &GlobalArgs, rust_log: Option<&str>) -> String {
    match (args.quiet, args.verbose, rust_log) {
        (true, _, _) => "error".into(),
        (false, 1, _) => "info,ferry=debug".into(),
        (false, v, _) if v >= 2 => "trace".into(),
        (false, _, Some(env)) if !env.trim().is_empty() => env.into(),
        _ => "warn,ferry=info".into(),
    }
}

/// Installs the global subscriber; logs go to stderr through `progress`.
pub fn init(args: &GlobalArgs, progress: &Progress) {
    let directives = filter_for(args, std::env::var("RUST_LOG").ok().as_deref());
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("warn"));
    let writer = ProgressAwareWriter {
        progress: progress.clone(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(args.verbose > 0);
    let result = match args.log_format {
        // JSON escapes control characters in its strings itself.
        // Always with the target: `ferry::image` and `ferry::output` tell the records apart.
        LogFormat::Json => builder.json().with_target(true).try_init(),
        LogFormat::Text => builder
            .with_ansi(progress.is_terminal())
            .fmt_fields(escaped_fields())
            .try_init(),
    };
    if let Err(e) = result {
        eprintln!("ferry: cannot set up logging: {e}");
    }
}

/// Text-log fields written as `name=value` (the message bare), each value through the one
/// escaping of outside text: a tag, repository or registry error text in a log line cannot move
/// the cursor, clear the screen or start a new line. The formatter's own colours are untouched.
fn escaped_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let text = format!("{value:?}");
        let text = ferry_distribution::text::escape_terminal(&text);
        match field.name() {
            "message" => write!(writer, "{text}"),
            name => write!(writer, "{name}={text}"),
        }
    })
    .delimited(" ")
}

/// Hands each log event to the progress display as one write.
#[derive(Clone)]
struct ProgressAwareWriter {
    progress: Progress,
}

impl<'a> MakeWriter<'a> for ProgressAwareWriter {
    type Writer = EventBuffer;

    fn make_writer(&'a self) -> Self::Writer {
        EventBuffer {
            progress: self.progress.clone(),
            bytes: Vec::new(),
        }
    }
}

/// Collects one event's bytes and writes them when dropped, with the bars suspended.
pub struct EventBuffer {
    progress: Progress,
    bytes: Vec<u8>,
}

impl std::io::Write for EventBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventBuffer {
    fn drop(&mut self) {
        if self.bytes.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.bytes);
        self.progress.suspend(|| {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(&bytes);
            let _ = err.flush();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(verbose: u8, quiet: bool) -> GlobalArgs {
        GlobalArgs {
            verbose,
            quiet,
            log_format: LogFormat::Text,
            progress: crate::cli::ProgressMode::None,
        }
    }

    #[test]
    fn flags_choose_the_filter_and_rust_log_fills_in_the_default() {
        assert_eq!(filter_for(&args(0, false), None), "warn,ferry=info");
        assert_eq!(filter_for(&args(1, false), None), "info,ferry=debug");
        assert_eq!(filter_for(&args(2, false), None), "trace");
        assert_eq!(filter_for(&args(0, true), Some("debug")), "error");
        assert_eq!(
            filter_for(&args(0, false), Some("ferry=trace")),
            "ferry=trace"
        );
    }
}
