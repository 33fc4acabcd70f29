//! The registry work of the soak: a walk that sleeps a few milliseconds on
//! its worker thread (the work itself, not a wait for anything), renders a
//! small exposition, and fails or panics when the request asked it to. A
//! [`Gauge`] inside the work counts the walks running at once.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use admission_core::RegistryWork;

/// Walks running right now, and the most ever seen at once.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl Gauge {
    /// Walks running right now.
    pub(crate) fn running(&self) -> usize {
        self.running.load(SeqCst)
    }

    /// The most walks ever seen running at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(SeqCst)
    }

    /// Counts a walk in until the returned guard is dropped (also by an
    /// unwinding panic).
    fn enter(&self) -> Running<'_> {
        let now = self.running.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        Running(self)
    }
}

/// One walk counted in by [`Gauge::enter`].
struct Running<'a>(&'a Gauge);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, SeqCst);
    }
}

/// How a walk ends, as the request's `fault` parameter says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// It answers its exposition.
    None,
    /// It returns [`WalkFailed`].
    Fail,
    /// It panics.
    Panic,
}

impl Fault {
    /// The value of the `fault` query parameter.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Fail => "fail",
            Fault::Panic => "panic",
        }
    }
}

/// The longest walk a request may ask for.
const MAX_WORK: Duration = Duration::from_millis(200);

/// One request's walk: `/metrics?ms=MS&fault=none|fail|panic`.
#[derive(Debug)]
pub(crate) struct Walk {
    gauge: Arc<Gauge>,
    work: Duration,
    fault: Fault,
}

impl Walk {
    /// The walk a query string asks for; anything it does not understand
    /// means a plain 1 ms walk.
    pub(crate) fn from_query(query: &str, gauge: &Arc<Gauge>) -> Walk {
        let mut walk = Walk {
            gauge: Arc::clone(gauge),
            work: Duration::from_millis(1),
            fault: Fault::None,
        };
        for (key, value) in query.split('&').filter_map(|pair| pair.split_once('=')) {
            match (key, value) {
                ("ms", ms) => {
                    if let Ok(ms) = ms.parse() {
                        walk.work = Duration::from_millis(ms).min(MAX_WORK);
                    }
                }
                ("fault", "fail") => walk.fault = Fault::Fail,
                ("fault", "panic") => walk.fault = Fault::Panic,
                _ => {}
            }
        }
        walk
    }
}

/// The error a walk asked to fail returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalkFailed;

impl fmt::Display for WalkFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the registry walk failed")
    }
}

impl std::error::Error for WalkFailed {}

/// The message of the panic a walk was asked for.
pub(crate) const REQUESTED_PANIC: &str = "the registry walk was asked to panic";

/// The first line of every exposition a walk renders.
pub(crate) const EXPOSITION_HEAD: &str = "# soak exposition\n";

impl RegistryWork for Walk {
    type Output = String;
    type Error = WalkFailed;

    fn run(self) -> Result<String, WalkFailed> {
        let _running = self.gauge.enter();
        // The walk itself: blocking its worker thread for a few ms, then a
        // little rendering.
        std::thread::sleep(self.work);
        let mut text = String::from(EXPOSITION_HEAD);
        for series in 0..32 {
            text.push_str(&format!("soak_series{{n=\"{series}\"}} {}\n", series * 7));
        }
        text.push_str("# EOF\n");
        match self.fault {
            Fault::None => Ok(text),
            Fault::Fail => Err(WalkFailed),
            Fault::Panic => std::panic::panic_any(REQUESTED_PANIC),
        }
    }
}
