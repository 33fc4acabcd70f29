//! The exporter's settings and the gate in front of its walks.
//!
//! This module owns [`Config`] and [`Gate`]; the defaults here are the
//! binary's documented defaults.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use admission_axum::serve::ConnectionLimits;

pub use crate::cli::UnknownGate;

/// What stands in front of the registry walks.
///
/// Only [`Gate::Admission`] is this project's answer; the other two are the
/// failure modes `storm` compares it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    /// An admission [`Pool`](admission_core::Pool) of N slots and N worker
    /// threads: HTTP walks fail fast with `503` + `Retry-After`, the
    /// cardinality walk waits.
    #[default]
    Admission,
    /// The incident's executor: N worker threads fed by a queue with no
    /// bound. Nothing is refused; every caller waits its turn, and a caller
    /// that went away still leaves its walk in the queue.
    UnboundedQueue,
    /// `tower::limit::ConcurrencyLimit` (one semaphore of N permits shared by
    /// the walk routes) plus `LoadShed`, around a handler that walks on
    /// tokio's blocking pool. The permit is released when the response future
    /// is dropped, not when the walk ends.
    TowerLimit,
    /// The admission pool of [`Gate::Admission`], but HTTP walks wait in
    /// the pool's bounded queue ([`Admission::Queue`](admission_core::Admission::Queue):
    /// a bound, a delay target, newest first while the queue stands)
    /// instead of failing fast; a refused waiter still gets `503` +
    /// `Retry-After`.
    AdmissionQueue,
}

impl Gate {
    /// Every gate, in the order `storm` runs them.
    pub const ALL: [Gate; 3] = [Gate::Admission, Gate::UnboundedQueue, Gate::TowerLimit];

    /// The name used by `--gate` and in the storm table.
    pub const fn name(self) -> &'static str {
        match self {
            Gate::Admission => "admission",
            Gate::UnboundedQueue => "unbounded-queue",
            Gate::TowerLimit => "tower-limit+shed",
            Gate::AdmissionQueue => "admission-queue",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Gate {
    type Err = UnknownGate;

    fn from_str(s: &str) -> Result<Gate, UnknownGate> {
        match s {
            "admission" => Ok(Gate::Admission),
            "queue" | "unbounded-queue" => Ok(Gate::UnboundedQueue),
            "tower" | "tower-limit+shed" => Ok(Gate::TowerLimit),
            "admission-queue" => Ok(Gate::AdmissionQueue),
            other => Err(UnknownGate::new(
                other,
                "`admission`, `admission-queue`, `queue` or `tower`",
            )),
        }
    }
}

/// The exporter's settings; [`Config::default`] gives the binary's defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_examples::exporter::{Config, Gate};
///
/// let config = Config::default();
/// assert_eq!(config.listen.to_string(), "127.0.0.1:9464");
/// assert_eq!((config.workers, config.series), (2, 10_000));
/// assert_eq!(config.shutdown_deadline, Duration::from_secs(5));
/// assert_eq!(config.gate, Gate::Admission);
/// assert_eq!(config.coalesce, None, "coalescing is opt-in");
/// assert_eq!(config.connections.header_timeout(), Duration::from_secs(10));
/// assert_eq!((config.drain_delay, config.agent_check), (Duration::ZERO, None));
/// assert_eq!(config.max_held, 256 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where the binary listens (`--listen`, default `127.0.0.1:9464`).
    pub listen: SocketAddr,
    /// Worker threads, and so slots, for registry walks (`--workers`, default 2).
    pub workers: usize,
    /// Series in the demo registry (`--series`, default 10000).
    pub series: usize,
    /// Extra time slept inside every walk, on the worker thread, standing in
    /// for a larger registry (`--walk-delay-ms`, default 0).
    pub walk_delay: Duration,
    /// Period of the background cardinality walk: first after one interval,
    /// then every interval (`--cardinality-interval-ms`, default 10000).
    pub cardinality_interval: Duration,
    /// How long shutdown may take, counted from the signal
    /// (`--shutdown-deadline-ms`, default 5000).
    pub shutdown_deadline: Duration,
    /// What stands in front of the walks (`--gate`, default `admission`).
    pub gate: Gate,
    /// Coalescing for the admission gate, off by default (`--coalesce-ms`,
    /// `0` = off): `Some(bound)` lets a scrape of `/metrics` or `/` that
    /// arrives while a walk runs, started no longer than `bound` ago, share
    /// that walk's result instead of starting (or being refused) its own.
    /// Only [`Gate::Admission`] coalesces; with another gate it is a
    /// configuration error.
    pub coalesce: Option<Duration>,
    /// Connection admission: at most `--max-connections` open (default
    /// three quarters of the open-file limit, at most 4096), a request
    /// head within `--header-timeout-ms` (10000) and kept-alive
    /// connections closed after `--idle-timeout-ms` (60000) of silence.
    /// See [`admission_axum::serve()`].
    pub connections: ConnectionLimits,
    /// The preStop delay (`--drain-delay-ms`, default 0): from the signal,
    /// `/readyz` answers `503` and the agent says `drain`, while the
    /// listener stays open and every route (`/healthz` included) is served
    /// for this long; the shutdown deadline starts after it. See
    /// [`Readiness::withdraw_for`](admission_http::balancer::Readiness::withdraw_for).
    pub drain_delay: Duration,
    /// Where to answer HAProxy's agent checks (`--agent-check ADDR`, off
    /// by default): a weight from the walk pool's free slots, `drain` from
    /// the signal on. See [`AgentCheck`](admission_http::balancer::AgentCheck).
    /// It answers anyone who connects, with the replica's load: bind it to
    /// an address only the balancer reaches (a private interface), never a
    /// public one.
    pub agent_check: Option<SocketAddr>,
    /// Whose `x-admission-criticality` and budget headers are honoured as
    /// sent (`--trust-peers`, off by default): off, a `critical` claim is
    /// served as `default` and a budget never lengthens a queued wait, as
    /// at an edge facing outside clients; on, for an exporter behind a
    /// mesh or balancer that strips those headers from outside traffic.
    pub trust_peers: bool,
    /// The bound on bytes held by response bodies not yet sent, across
    /// every connection (`--max-held-mb`, default 256 MiB): each walk's
    /// body counts once however many scrapes share it, until its last
    /// share is sent or dropped; past the bound, scrapes are refused
    /// (`503`, `RESPONSE_MEMORY_BOUND`) without a walk. With the
    /// write-progress timeout (`--write-timeout-ms`) it bounds the memory
    /// clients that never read can pin.
    pub max_held: usize,
    /// The admission families published through a second back-end too
    /// (`--metrics-backend metrics=ADDR|opentelemetry`, off by default);
    /// `/metrics` keeps the `prometheus-client` exposition either way.
    pub metrics_backend: Option<MetricsBackend>,
    /// The walk pool's last N admission decisions, kept and served as
    /// JSON lines at `/debug/admission/trace` (`--trace-entries`, 0 = off,
    /// the default); see [`Trace`](admission_core::trace::Trace).
    pub trace_entries: usize,
    /// The walk pool in shadow mode (`--shadow`, off by default): it
    /// decides and counts, and refuses no scrape for load. See
    /// [`Pool::set_shadow`](admission_core::Pool::set_shadow).
    pub shadow: bool,
}

/// A second back-end for the admission families (`--metrics-backend`),
/// fed from the same pool statistics as `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsBackend {
    /// `metrics=ADDR`: the `metrics` facade, served on ADDR by
    /// `metrics-exporter-prometheus` (recorded every second).
    Facade(SocketAddr),
    /// `opentelemetry`: OpenTelemetry instruments, printed to stdout by
    /// the SDK's stdout exporter every cardinality interval.
    OpenTelemetry,
}

impl FromStr for MetricsBackend {
    type Err = String;

    fn from_str(s: &str) -> Result<MetricsBackend, String> {
        match s.split_once('=') {
            None if s == "opentelemetry" => Ok(MetricsBackend::OpenTelemetry),
            Some(("metrics", addr)) => addr
                .parse()
                .map(MetricsBackend::Facade)
                .map_err(|_| format!("`--metrics-backend metrics=ADDR`: `{addr}` is no address")),
            _ => Err("expected `--metrics-backend metrics=ADDR` or `opentelemetry`".to_owned()),
        }
    }
}

/// The default of [`Config::max_held`]: 256 MiB.
pub const DEFAULT_MAX_HELD: usize = 256 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            workers: 2,
            series: 10_000,
            walk_delay: Duration::ZERO,
            cardinality_interval: Duration::from_secs(10),
            shutdown_deadline: admission_core::shutdown::DEFAULT_DEADLINE,
            gate: Gate::Admission,
            coalesce: None,
            connections: ConnectionLimits::new(),
            drain_delay: Duration::ZERO,
            agent_check: None,
            trust_peers: false,
            metrics_backend: None,
            max_held: DEFAULT_MAX_HELD,
            trace_entries: 0,
            shadow: false,
        }
    }
}
