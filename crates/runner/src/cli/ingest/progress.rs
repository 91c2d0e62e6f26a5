//! Progress of a long ingest: a bar with rate and ETA on a terminal, plain periodic lines
//! otherwise (CI logs, redirected output), where a redrawn bar would be noise.
use std::fmt::Write;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// How often a plain progress line is printed.
const PLAIN_INTERVAL: Duration = Duration::from_secs(5);

pub(super) enum Progress {
    Bar(ProgressBar),
    Plain { total: u64, done: u64, started: Instant, last_line: Instant },
}

impl Progress {
    /// Progress over `total` input lines.
    pub(super) fn new(total: u64) -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} lines  {rate}  ETA {eta}",
            ) {
                let style =
                    style.progress_chars("=> ").with_key("rate", |state: &ProgressState, out: &mut dyn Write| {
                        let _ = write!(out, "{:.0} lines/s", state.per_sec());
                    });
                bar.set_style(style);
            }
            Progress::Bar(bar)
        } else {
            let now = Instant::now();
            Progress::Plain { total, done: 0, started: now, last_line: now }
        }
    }

    pub(super) fn advance(&mut self, lines: u64) {
        match self {
            Progress::Bar(bar) => bar.inc(lines),
            Progress::Plain { total, done, started, last_line } => {
                *done += lines;
                if last_line.elapsed() >= PLAIN_INTERVAL {
                    *last_line = Instant::now();
                    eprintln!("ingest: {}", plain_line(*done, *total, started.elapsed()));
                }
            }
        }
    }

    /// A message printed above the bar, or as its own line.
    pub(super) fn note(&self, message: &str) {
        match self {
            Progress::Bar(bar) => bar.println(message),
            Progress::Plain { .. } => eprintln!("{message}"),
        }
    }

    pub(super) fn finish(self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

fn plain_line(done: u64, total: u64, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
    let percent = if total == 0 { 100.0 } else { done as f64 * 100.0 / total as f64 };
    let eta = if rate > 0.0 { format!("{:.0}s", total.saturating_sub(done) as f64 / rate) } else { "?".into() };
    format!("{done}/{total} lines ({percent:.0}%), {rate:.0} lines/s, ETA {eta}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_has_count_rate_and_eta() {
        assert_eq!(plain_line(2500, 10_000, Duration::from_secs(10)), "2500/10000 lines (25%), 250 lines/s, ETA 30s");
    }
}
