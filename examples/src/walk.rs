//! The demo registry and the full walk over it, shared by the HTTP
//! [`exporter`](crate::exporter) and the [`grpc`](crate::grpc) one.
//!
//! This module owns the registry's demo family, the walk (encode the whole
//! registry to exposition text, after the configured extra delay, and count
//! it) and [`WalkGauge`], which counts walks. The walk runs on whatever
//! thread the gate gives it; it must never run on a runtime thread, and it
//! never decides how its text is served (the exporter counts it as held,
//! the gRPC service sends it in messages).

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Walks running right now, the most ever seen at once, walks queued and
/// not started (only the unbounded queue has any), and walks that ran;
/// and the time walks held a thread, in all and after their caller left.
///
/// The exporter exports the counts as `exporter_walks_running`,
/// `exporter_walks_peak`, `exporter_walks_queued` and
/// `exporter_walks_started_total`; the gRPC exporter only reads them.
/// Clones share them.
///
/// # Examples
///
/// ```
/// use admission_examples::exporter::WalkGauge;
///
/// let gauge = WalkGauge::default();
/// assert_eq!((gauge.running(), gauge.peak(), gauge.started()), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Default)]
pub struct WalkGauge {
    running: Gauge,
    peak: Gauge,
    pub(crate) queued: Gauge,
    started: Counter,
    busy_ns: Arc<AtomicU64>,
    orphaned_ns: Arc<AtomicU64>,
}

impl WalkGauge {
    /// Walks running right now.
    pub fn running(&self) -> u64 {
        u64::try_from(self.running.get()).unwrap_or(0)
    }

    /// The most walks ever seen running at once.
    pub fn peak(&self) -> u64 {
        u64::try_from(self.peak.get()).unwrap_or(0)
    }

    /// Walks waiting in a queue, not started.
    pub fn queued(&self) -> u64 {
        u64::try_from(self.queued.get()).unwrap_or(0)
    }

    /// Walks that started on a thread so far: the registry walks actually
    /// run, whoever was still waiting for them. Coalesced callers share a
    /// walk and add none.
    pub fn started(&self) -> u64 {
        self.started.get()
    }

    /// Thread time of every walk that ended so far, from its start on a
    /// thread to its end.
    pub fn busy_time(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Relaxed))
    }

    /// The part of [`busy_time`](Self::busy_time) spent after the walk's
    /// caller had stopped waiting for it (its request was dropped: the
    /// client closed the connection): slot time that served nobody. Under
    /// coalescing only the caller that started a walk is watched.
    pub fn orphaned_time(&self) -> Duration {
        Duration::from_nanos(self.orphaned_ns.load(Relaxed))
    }

    fn enter<'a>(&'a self, caller: &'a Departure) -> Walking<'a> {
        self.started.inc();
        let now = self.running.inc() + 1;
        self.peak.inner().fetch_max(now, Relaxed);
        Walking {
            gauge: self,
            caller,
            started: Instant::now(),
        }
    }
}

/// Counts one walk as running until dropped (also on a panic), and adds
/// its thread time when it ends.
#[must_use = "the walk counts as running only while this lives"]
#[clippy::has_significant_drop]
struct Walking<'a> {
    gauge: &'a WalkGauge,
    caller: &'a Departure,
    started: Instant,
}

impl Drop for Walking<'_> {
    fn drop(&mut self) {
        let ended = Instant::now();
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.gauge
            .busy_ns
            .fetch_add(nanos(ended - self.started), Relaxed);
        if let Some(left) = self.caller.left() {
            let from = left.max(self.started);
            self.gauge
                .orphaned_ns
                .fetch_add(nanos(ended.saturating_duration_since(from)), Relaxed);
        }
        self.gauge.running.dec();
    }
}

/// The process's reference instant for [`Departure`]'s clock.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// When the caller of one walk stopped waiting for it, if it did: shared
/// between the request (which marks it through [`Waiting`]) and the walk's
/// thread (which reads it when the walk ends).
#[derive(Debug, Clone, Default)]
pub(crate) struct Departure {
    /// Nanoseconds after [`EPOCH`], plus one; zero while the caller waits.
    left_at: Arc<AtomicU64>,
}

impl Departure {
    /// A guard held by the waiting caller: dropped before
    /// [`Waiting::answered`], it marks the caller as gone.
    pub(crate) fn waiting(&self) -> Waiting<'_> {
        LazyLock::force(&EPOCH);
        Waiting {
            departure: self,
            answered: false,
        }
    }

    fn left(&self) -> Option<Instant> {
        match self.left_at.load(Relaxed) {
            0 => None,
            n => Some(*EPOCH + Duration::from_nanos(n - 1)),
        }
    }
}

/// The caller of a walk still waiting for it; see [`Departure::waiting`].
#[derive(Debug)]
#[clippy::has_significant_drop]
pub(crate) struct Waiting<'a> {
    departure: &'a Departure,
    answered: bool,
}

impl Waiting<'_> {
    /// The caller got its answer: dropping the guard now marks nothing.
    pub(crate) fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.answered {
            let since = u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
            self.departure.left_at.store(since + 1, Relaxed);
        }
    }
}

/// What one full walk found, as the status page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryStats {
    /// Metric families (`# TYPE` lines).
    pub families: usize,
    /// Sample lines.
    pub series: usize,
    /// All lines, comments included.
    pub lines: usize,
    /// Bytes of exposition text.
    pub bytes: usize,
}

impl RegistryStats {
    /// Counts `text`, the exposition of one full walk.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_examples::exporter::RegistryStats;
    ///
    /// let text = "# TYPE a counter\na_total 1\na_total{x=\"1\"} 2\n# EOF\n";
    /// let stats = RegistryStats::of(text);
    /// assert_eq!((stats.families, stats.series, stats.lines), (1, 2, 4));
    /// ```
    pub fn of(text: &str) -> RegistryStats {
        let (mut families, mut series, mut lines) = (0, 0, 0);
        for line in text.lines() {
            lines += 1;
            if line.starts_with("# TYPE ") {
                families += 1;
            } else if !line.starts_with('#') && !line.is_empty() {
                series += 1;
            }
        }
        RegistryStats {
            families,
            series,
            lines,
            bytes: text.len(),
        }
    }
}

/// The registry and what a walk over it costs.
#[derive(Debug, Clone)]
pub(crate) struct Walker {
    registry: Arc<Registry>,
    delay: Duration,
    gauge: WalkGauge,
}

/// A registry holding the demo family `name`: `series` counters labelled
/// `series="series-{i}"`.
pub(crate) fn demo_registry(name: &str, series: usize) -> Registry {
    let mut registry = Registry::default();
    let events = Family::<Vec<(String, String)>, Counter>::default();
    for i in 0..series {
        let labels = vec![("series".to_owned(), format!("series-{i}"))];
        events.get_or_create(&labels).inc_by(i as u64);
    }
    registry.register(
        name,
        "Demo series standing in for a large registry.",
        events,
    );
    registry
}

impl WalkGauge {
    /// Exports the counts into `registry` as `exporter_walks_*`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "exporter_walks_running",
            "Full registry walks running right now.",
            self.running.clone(),
        );
        registry.register(
            "exporter_walks_peak",
            "The most full registry walks ever seen running at once.",
            self.peak.clone(),
        );
        registry.register(
            "exporter_walks_queued",
            "Full registry walks queued and not started.",
            self.queued.clone(),
        );
        registry.register(
            "exporter_walks_started",
            "Full registry walks started on a thread (coalesced callers share one).",
            self.started.clone(),
        );
    }
}

impl Walker {
    pub(crate) fn new(registry: Registry, delay: Duration, gauge: WalkGauge) -> Walker {
        Walker {
            registry: Arc::new(registry),
            delay,
            gauge,
        }
    }

    /// One full walk for `caller`: the extra delay, then the whole
    /// registry as exposition text, and its statistics (counted here, on
    /// the walking thread). Blocks the calling thread.
    pub(crate) fn walk(&self, caller: &Departure) -> Result<(String, RegistryStats), fmt::Error> {
        let _walking = self.gauge.enter(caller);
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        let stats = RegistryStats::of(&text);
        Ok((text, stats))
    }
}
