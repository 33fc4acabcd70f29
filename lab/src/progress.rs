//! The progress line of the long runs (`storm --overload`, `storm
//! --retry-storm`, `fleet`).
//!
//! This module owns [`Progress`]: one `indicatif` bar on stderr saying
//! which step of how many is under way, the time spent and the time left,
//! and the run's own progress lines printed above it. It must never write
//! to stdout (the tables there are read by tests and BENCHMARKS.md), and
//! never drop a progress line: when stderr is no terminal the bar is
//! hidden and the lines are printed as they always were.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A run of `len` steps, shown on stderr as `prefix [n of N] elapsed, eta
/// left: message`.
///
/// # Examples
///
/// ```
/// use admission_lab::progress::Progress;
///
/// let progress = Progress::new("overload", 3);
/// for point in ["0.5x", "1x", "2x"] {
///     progress.start(point);
///     progress.line(&format!("overload: {point} done"));
///     progress.done();
/// }
/// assert_eq!(progress.position(), (3, 3));
/// progress.finish();
/// ```
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// `len` steps, none done.
    pub fn new(prefix: &'static str, len: u64) -> Progress {
        let bar = ProgressBar::new(len).with_prefix(prefix);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix}: [{pos} of {len}] {elapsed} elapsed, about {eta} left: {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_secs(1));
        Progress { bar }
    }

    /// The steps grow to `len` (when a run learns it has more to do).
    pub fn set_len(&self, len: u64) {
        self.bar.set_length(len);
    }

    /// A step starts: `what` is shown beside the count.
    pub fn start(&self, what: &str) {
        self.bar.set_message(what.to_owned());
    }

    /// The step under way is done.
    pub fn done(&self) {
        self.bar.inc(1);
    }

    /// Steps done and steps in all.
    pub fn position(&self) -> (u64, u64) {
        (self.bar.position(), self.bar.length().unwrap_or(0))
    }

    /// Prints `text` on stderr above the bar (always, bar or not).
    pub fn line(&self, text: &str) {
        self.bar.suspend(|| eprintln!("{text}"));
    }

    /// Removes the bar: what follows is the run's output.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
