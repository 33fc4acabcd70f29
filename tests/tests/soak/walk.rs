//! The registry work of the soak: a walk that sleeps a few milliseconds on
//! its worker thread (the work itself, not a wait for anything), renders a
//! small exposition, and fails or panics when the request asked it to.
//!
//! A [`Gauge`] inside the work counts the walks running at once, and the
//! walks *in flight*: admitted and not yet ended, whether running or queued
//! for a worker thread. A pool has as many threads as slots, so no more
//! than N walks can ever run; a slot released too early shows instead as
//! more than N walks in flight, the extra ones queued behind a walk whose
//! slot has already gone. Each walk holds its slot from admission until
//! after its end, so with the slot kept until then no more than N are ever
//! in flight.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::SeqCst};
use std::task::Poll;
use std::time::Duration;

use admission_core::{RegistryWork, WorkError};

/// Walks running and in flight right now, and the most ever seen at once.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    running: AtomicUsize,
    peak: AtomicUsize,
    /// Admitted walks counted in by [`Gauge::in_flight`], less walks
    /// ended. A walk that ends before it is counted in makes this lower
    /// for a moment, never higher.
    in_flight: AtomicIsize,
    peak_in_flight: AtomicIsize,
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

    /// Walks admitted and not ended right now.
    pub(crate) fn in_flight(&self) -> isize {
        self.in_flight.load(SeqCst)
    }

    /// The most walks ever seen admitted and not ended at once.
    pub(crate) fn peak_in_flight(&self) -> isize {
        self.peak_in_flight.load(SeqCst)
    }

    /// Awaits `run`, a fail-fast registry call of one walk, counting the
    /// walk in flight once it is admitted. A fail-fast call decides on its
    /// first poll: refused, or admitted with its walk handed to a worker.
    pub(crate) async fn in_flight_while<T, E>(
        &self,
        run: impl Future<Output = Result<T, WorkError<E>>>,
    ) -> Result<T, WorkError<E>> {
        let mut run = std::pin::pin!(run);
        let mut first = true;
        std::future::poll_fn(|cx| {
            let poll = run.as_mut().poll(cx);
            let refused = matches!(poll, Poll::Ready(Err(WorkError::Refused(_))));
            if std::mem::take(&mut first) && !refused {
                let now = self.in_flight.fetch_add(1, SeqCst) + 1;
                self.peak_in_flight.fetch_max(now, SeqCst);
            }
            poll
        })
        .await
    }

    /// Counts a walk in until the returned guard is dropped (also by an
    /// unwinding panic); the walk ends, and leaves the walks in flight,
    /// with it.
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
        self.0.in_flight.fetch_sub(1, SeqCst);
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
