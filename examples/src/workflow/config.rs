//! The workflow service's settings.
//!
//! This module owns [`Config`] and [`NativeCapacities`]; the defaults here
//! are the binary's documented defaults.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Everything the `workflow` binary can be told on its command line.
///
/// # Examples
///
/// ```
/// use admission_examples::workflow::Config;
///
/// let config = Config::default();
/// assert_eq!((config.work_slots, config.control_slots), (2, 4));
/// assert_eq!(config.native_capacities.total(), 5);
/// assert_eq!(config.header_timeout, std::time::Duration::from_secs(5));
/// assert_eq!(config.max_connections, None, "counted as the server starts listening");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where to listen (`--listen`, default `127.0.0.1:8080`; port 0 picks one).
    pub listen: SocketAddr,
    /// Request slots for mutations (`--work-slots`, default 2).
    pub work_slots: usize,
    /// Request slots for reads and terminal control (`--control-slots`,
    /// default 4).
    pub control_slots: usize,
    /// Time between two cycles of every background loop (`--cycle-ms`,
    /// default 200 ms).
    pub cycle: Duration,
    /// The native executors' capacities (`--native-capacities`, default
    /// `2,3`); the dispatcher reserves their sum plus one.
    pub native_capacities: NativeCapacities,
    /// One deadline for the whole shutdown, counted from the signal
    /// (`--shutdown-deadline-ms`, default 5000 ms).
    pub shutdown_deadline: Duration,
    /// actix-web worker threads (`--http-workers`, default 2).
    pub http_workers: usize,
    /// The most connections open at once, over all HTTP workers
    /// (`--max-connections`; `None`, the default, is the open-file limit
    /// less the descriptors open when the server starts listening less a
    /// quarter of the limit, at most 4096): past it a newcomer evicts the
    /// connection that has waited longest for a request head, or is
    /// closed at once (`admission_actix::serve`).
    pub max_connections: Option<usize>,
    /// How long a client may take to send a whole request head
    /// (`--header-timeout-ms`, default 5000): past it the connection
    /// closes.
    pub header_timeout: Duration,
    /// How long a kept-alive connection may stay idle (`--idle-timeout-ms`,
    /// default 5000).
    pub idle_timeout: Duration,
    /// The preStop delay (`--drain-delay-ms`, default 0): from the signal,
    /// `/readyz` answers `503` and the agent says `drain`, while every
    /// route (`/healthz` included) is still served for this long; the
    /// shutdown deadline starts after it.
    pub drain_delay: Duration,
    /// Where to answer HAProxy's agent checks (`--agent-check ADDR`, off
    /// by default): a weight from the request pools' free slots, `drain`
    /// from the signal on. It answers anyone who connects, with the
    /// replica's load: bind it to an address only the balancer reaches
    /// (a private interface or `127.0.0.1` beside a local balancer), never
    /// a public one.
    pub agent_check: Option<SocketAddr>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            work_slots: 2,
            control_slots: 4,
            cycle: Duration::from_millis(200),
            native_capacities: NativeCapacities(vec![2, 3]),
            shutdown_deadline: Duration::from_millis(5000),
            http_workers: 2,
            max_connections: None,
            header_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            drain_delay: Duration::ZERO,
            agent_check: None,
        }
    }
}

/// The capacities of the native dispatcher's executors, e.g. `2,3`: each
/// executor runs at most that many connector executions at once.
///
/// # Examples
///
/// ```
/// use admission_examples::workflow::NativeCapacities;
///
/// let capacities: NativeCapacities = "2,3".parse().unwrap();
/// assert_eq!(capacities.as_slice(), &[2, 3]);
/// assert_eq!(capacities.total(), 5);
/// assert!("2,0".parse::<NativeCapacities>().is_err(), "an executor runs something");
/// assert!("".parse::<NativeCapacities>().is_err(), "at least one executor");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeCapacities(Vec<usize>);

impl NativeCapacities {
    /// One capacity per executor.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }

    /// Their sum (saturating): the most executions that run at once.
    pub fn total(&self) -> usize {
        self.0.iter().fold(0, |sum, c| sum.saturating_add(*c))
    }
}

/// A `--native-capacities` value that is not a comma-separated list of
/// positive integers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCapacities(String);

impl fmt::Display for BadCapacities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a list of executor capacities; write positive integers separated by commas, e.g. `2,3`",
            self.0
        )
    }
}

impl std::error::Error for BadCapacities {}

impl FromStr for NativeCapacities {
    type Err = BadCapacities;

    fn from_str(s: &str) -> Result<Self, BadCapacities> {
        let bad = || BadCapacities(s.to_owned());
        let capacities = s
            .split(',')
            .map(|part| match part.trim().parse::<usize>() {
                Ok(0) | Err(_) => Err(bad()),
                Ok(capacity) => Ok(capacity),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NativeCapacities(capacities))
    }
}
