//! The gRPC exporter's settings and the gate in front of its walks.
//!
//! This module owns [`Config`] and [`Gate`]; the defaults here are the
//! binary's documented defaults.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

pub use crate::cli::UnknownGate;

/// What stands in front of the registry walks.
///
/// Only [`Gate::Admission`] is this project's answer; the other is the
/// failure mode `storm --grpc` compares it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    /// `admission-tonic`'s layer (a request lease per call) and an
    /// admission [`Pool`](admission_core::Pool) of N slots and N worker
    /// threads: a walk fails fast with `UNAVAILABLE` and
    /// `grpc-retry-pushback-ms`, and a walk whose caller cancelled keeps
    /// its slot until it ends.
    #[default]
    Admission,
    /// tonic's own limits: `concurrency_limit_per_connection(N)` and
    /// `load_shed(true)`, around a handler that walks on tokio's blocking
    /// pool. The limit is per connection, and its permit goes with the
    /// cancelled call, not with the walk.
    TonicLimit,
}

impl Gate {
    /// Every gate, in the order `storm --grpc` runs them.
    pub const ALL: [Gate; 2] = [Gate::Admission, Gate::TonicLimit];

    /// The name used by `--gate` and, prefixed with `grpc-`, in the storm
    /// table.
    pub const fn name(self) -> &'static str {
        match self {
            Gate::Admission => "admission",
            Gate::TonicLimit => "tonic-limit+shed",
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
            "tonic" | "tonic-limit+shed" => Ok(Gate::TonicLimit),
            other => Err(UnknownGate::new(other, "`admission` or `tonic`")),
        }
    }
}

/// The gRPC exporter's settings; [`Config::default`] gives the binary's
/// defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_examples::grpc::{Config, Gate};
///
/// let config = Config::default();
/// assert_eq!(config.listen.to_string(), "127.0.0.1:50051");
/// assert_eq!((config.workers, config.series), (2, 10_000));
/// assert_eq!((config.work_slots, config.control_slots), (16, 4));
/// assert_eq!(config.shutdown_deadline, Duration::from_secs(5));
/// assert_eq!(config.gate, Gate::Admission);
/// assert_eq!(config.progress_timeout, Duration::from_secs(30));
/// assert_eq!(config.connections.header_timeout(), Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where the binary listens (`--listen`, default `127.0.0.1:50051`).
    pub listen: SocketAddr,
    /// Worker threads, and so slots, for registry walks (`--workers`,
    /// default 2).
    pub workers: usize,
    /// Series in the demo registry (`--series`, default 10000).
    pub series: usize,
    /// Extra time slept inside every walk, on the worker thread, standing
    /// in for a larger registry (`--walk-delay-ms`, default 0).
    pub walk_delay: Duration,
    /// Request leases of class *work*, which `Walk` and `Stream` calls take
    /// (`--work-slots`, default 16): calls in flight, streams included. The
    /// registry pool, not this, bounds the walks.
    pub work_slots: usize,
    /// Request leases of class *control* (`--control-slots`, default 4).
    /// Health checks take none: they are never refused.
    pub control_slots: usize,
    /// How long shutdown may take, counted from the signal
    /// (`--shutdown-deadline-ms`, default 5000).
    pub shutdown_deadline: Duration,
    /// What stands in front of the walks (`--gate`, default `admission`).
    pub gate: Gate,
    /// How long a `Walk` or `Stream` response may let a message lie
    /// unread before its *work* lease is taken back and the call ends
    /// (`--progress-timeout-ms`, default 30000; zero is refused at start).
    /// Health calls take no lease, so their `Watch` streams are not bound
    /// by it.
    pub progress_timeout: Duration,
    /// The bounds on connections (`--max-connections`, by default what the
    /// descriptors allow; `--preface-timeout-ms`, the header timeout, 5 s
    /// by default; 100
    /// concurrent streams and
    /// keepalive pings every 30 s): see
    /// [`ConnectionLimits`](admission_tonic::connections::ConnectionLimits).
    pub connections: admission_tonic::connections::ConnectionLimits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            workers: 2,
            series: 10_000,
            walk_delay: Duration::ZERO,
            work_slots: 16,
            control_slots: 4,
            shutdown_deadline: admission_core::shutdown::DEFAULT_DEADLINE,
            gate: Gate::Admission,
            progress_timeout: admission_http::body::ProgressTimeout::DEFAULT.get(),
            connections: admission_tonic::connections::ConnectionLimits::new()
                .with_header_timeout(Duration::from_secs(5)),
        }
    }
}
