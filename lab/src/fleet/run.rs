//! One fleet run: replicas, the balancer in front, the open-loop storm
//! through it and, when asked, a rolling restart while it runs.
//!
//! This module owns [`FleetConfig`], [`Scenario`], [`Row`] and the order
//! of a run: start, storm (and restart), read each replica's peak of walks,
//! stop. It measures through [`OpenLoop`] and reads replicas and balancers
//! only through their own modules; it never prints (the binary does).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::envoy::{Envoy, EnvoySpec};
use super::haproxy::{Haproxy, HaproxySpec};
use super::replica::{Replica, ReplicaSpec};
use super::tools::Tool;
use super::workdir::{Workdir, free_port};
use crate::storm::Target;
use crate::storm::open_loop::{OpenLoop, Outcomes};

/// What stands between the storm and the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// Nothing: the storm hits the first replica.
    Direct,
    /// `examples/fleet/haproxy.cfg`, with or without its retries and its
    /// agent checks.
    Haproxy {
        /// `retry-on` + `option redispatch` on.
        retries: bool,
        /// `maxconn` per replica (its pool's size) and HAProxy's queue on.
        maxconn: bool,
        /// Agent-check weights on.
        agent_weights: bool,
    },
    /// `examples/fleet/envoy.yaml` as it stands (retries, ORCA weights).
    Envoy,
}

/// One row of the fleet table.
///
/// # Examples
///
/// ```
/// use admission_lab::fleet::{Front, Scenario};
///
/// assert_eq!(Scenario::ALL[0].front, Front::Direct);
/// assert!(Scenario::ALL.contains(&Scenario::HAPROXY_RESTART));
/// assert!(Scenario::HAPROXY_RESTART.rolling_restart);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// The row's name.
    pub name: &'static str,
    /// Replicas started (1 or 3).
    pub replicas: usize,
    /// The balancer.
    pub front: Front,
    /// SIGTERM and restart each replica in turn while the storm runs.
    pub rolling_restart: bool,
}

impl Scenario {
    /// The demo's rows, in order: a single replica, then three behind
    /// HAProxy without retries, with retries, with retries and agent
    /// weights, with all that and `maxconn` (the file as shipped), that
    /// again under a rolling restart, then Envoy as shipped, and Envoy
    /// under a rolling restart.
    pub const ALL: [Scenario; 8] = [
        Scenario {
            name: "1 replica, direct",
            replicas: 1,
            front: Front::Direct,
            rolling_restart: false,
        },
        Scenario {
            name: "haproxy, 3, no retries",
            replicas: 3,
            front: Front::Haproxy {
                retries: false,
                maxconn: false,
                agent_weights: false,
            },
            rolling_restart: false,
        },
        Scenario {
            name: "haproxy, 3, retries",
            replicas: 3,
            front: Front::Haproxy {
                retries: true,
                maxconn: false,
                agent_weights: false,
            },
            rolling_restart: false,
        },
        Scenario {
            name: "haproxy, 3, retries+agent",
            replicas: 3,
            front: Front::Haproxy {
                retries: true,
                maxconn: false,
                agent_weights: true,
            },
            rolling_restart: false,
        },
        Scenario::HAPROXY,
        Scenario::HAPROXY_RESTART,
        Scenario {
            name: "envoy, 3, retries+orca",
            replicas: 3,
            front: Front::Envoy,
            rolling_restart: false,
        },
        Scenario::ENVOY_RESTART,
    ];

    /// Three replicas behind HAProxy with retries, `maxconn` and agent
    /// weights: the configuration as shipped.
    pub const HAPROXY: Scenario = Scenario {
        name: "haproxy, 3, retries+agent+maxconn",
        replicas: 3,
        front: Front::Haproxy {
            retries: true,
            maxconn: true,
            agent_weights: true,
        },
        rolling_restart: false,
    };

    /// [`Scenario::HAPROXY`] under a rolling restart.
    pub const HAPROXY_RESTART: Scenario = Scenario {
        name: "haproxy, 3, retries+agent+maxconn, rolling restart",
        rolling_restart: true,
        ..Scenario::HAPROXY
    };

    /// Envoy as configured, under a rolling restart.
    pub const ENVOY_RESTART: Scenario = Scenario {
        name: "envoy, 3, retries+orca, rolling restart",
        replicas: 3,
        front: Front::Envoy,
        rolling_restart: true,
    };
}

/// The settings of a fleet run.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetConfig {
    /// The `exporter` binary each replica runs.
    pub exporter: PathBuf,
    /// `haproxy`, when a row needs it.
    pub haproxy: Option<PathBuf>,
    /// `envoy`, when a row needs it.
    pub envoy: Option<PathBuf>,
    /// Each replica's walk pool (`--workers`).
    pub workers: usize,
    /// Each replica's registry (`--series`).
    pub series: usize,
    /// Each walk's sleep (`--walk-delay-ms`).
    pub walk_delay: Duration,
    /// Each replica's `--drain-delay-ms`.
    pub drain_delay: Duration,
    /// Each replica's `--shutdown-deadline-ms`.
    pub shutdown_deadline: Duration,
    /// How long each row's storm draws arrivals.
    pub duration: Duration,
    /// How long a rolling-restart row's storm draws arrivals (it must hold
    /// three restarts).
    pub restart_duration: Duration,
    /// The client's timeout per request.
    pub timeout: Duration,
    /// Poisson arrivals per second.
    pub rate: f64,
    /// Seed of the arrivals.
    pub seed: u64,
}

/// What one row measured.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario.
    pub scenario: Scenario,
    /// What the client saw.
    pub outcomes: Outcomes,
    /// The storm's arrival window.
    pub window: Duration,
    /// Per replica: the most walks it ran at once over all its lives.
    pub peak_walks: Vec<Option<u64>>,
    /// The pool size each replica had.
    pub workers: usize,
    /// The balancer's retries: HAProxy's retries (`wretr`) and
    /// redispatches (`wredis`), summed over the replicas; Envoy's retries
    /// and, of them, those that waited out a `Retry-After`.
    pub balancer_retries: Option<(u64, u64)>,
    /// Per restarted replica: how long from SIGTERM to exit, and its exit
    /// status was success.
    pub restarts: Vec<(Duration, bool)>,
    /// When the restarts were done, counted from the storm's start (None
    /// without a restart).
    pub restarts_done: Option<Duration>,
}

impl Row {
    /// Client-visible refusals (`503`), as a share of arrivals, in percent.
    pub fn refused_percent(&self) -> f64 {
        self.outcomes.refused_share() * 100.0
    }

    /// The most walks any replica ran at once.
    pub fn max_peak(&self) -> Option<u64> {
        self.peak_walks.iter().flatten().copied().max()
    }
}

/// The running balancer of a row.
#[derive(Debug)]
enum Running {
    Direct(SocketAddr),
    Haproxy(Haproxy),
    Envoy(Envoy),
}

impl Running {
    fn listen(&self) -> SocketAddr {
        match self {
            Running::Direct(addr) => *addr,
            Running::Haproxy(h) => h.listen(),
            Running::Envoy(e) => e.listen(),
        }
    }

    /// Waits until the balancer sends to every replica again.
    async fn all_in_rotation(&self) -> io::Result<()> {
        let bound = Duration::from_secs(10);
        match self {
            Running::Direct(_) => Ok(()),
            Running::Haproxy(h) => h.all_up(bound).await,
            Running::Envoy(e) => e.all_healthy(bound).await,
        }
    }
}

/// Measures one replica's capacity: an open-loop storm at `probe_rate`
/// straight at a fresh replica for `duration`; its goodput is the capacity
/// (a refusal costs microseconds, so at overload the pool never idles).
///
/// # Cancel safety
///
/// Cancel safe: the replica is killed when dropped.
///
/// # Errors
///
/// The replica did not start.
pub async fn capacity(
    config: &FleetConfig,
    probe_rate: f64,
    duration: Duration,
) -> io::Result<f64> {
    let dir = Workdir::new()?;
    let spec = replica_spec(config)?;
    let replica = Replica::start("capacity", &spec, dir.path()).await?;
    let mut load = OpenLoop::new(Target::local(spec.http, "/metrics"), probe_rate);
    load.duration = duration;
    load.timeout = config.timeout;
    load.seed = config.seed;
    let report = load.run().await;
    replica.stop().await?;
    Ok(report.total().goodput(report.window))
}

fn replica_spec(config: &FleetConfig) -> io::Result<ReplicaSpec> {
    Ok(ReplicaSpec {
        exporter: config.exporter.clone(),
        http: free_port()?,
        agent: free_port()?,
        workers: config.workers,
        series: config.series,
        walk_delay: config.walk_delay,
        drain_delay: config.drain_delay,
        shutdown_deadline: config.shutdown_deadline,
    })
}

fn tool(path: Option<&PathBuf>, tool: Tool) -> io::Result<&PathBuf> {
    path.ok_or_else(|| io::Error::other(super::tools::Missing(tool)))
}

/// Runs one row: starts its replicas and balancer, storms `GET /metrics`
/// through it at `config.rate` (restarting every replica in turn when the
/// scenario says so), reads each replica's peak of walks and stops them.
///
/// # Cancel safety
///
/// Cancel safe: every child is killed when dropped.
///
/// # Errors
///
/// A replica or the balancer did not start, a restarted replica did not
/// exit or come back in time, or the balancer did not take it back.
pub async fn run(config: &FleetConfig, scenario: Scenario) -> io::Result<Row> {
    let dir = Workdir::new()?;
    let specs = (0..scenario.replicas)
        .map(|_| replica_spec(config))
        .collect::<io::Result<Vec<_>>>()?;
    let mut replicas = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        replicas.push(Some(
            Replica::start(&format!("r{}", i + 1), spec, dir.path()).await?,
        ));
    }
    let running = match scenario.front {
        Front::Direct => Running::Direct(specs[0].http),
        Front::Haproxy {
            retries,
            maxconn,
            agent_weights,
        } => {
            let spec = HaproxySpec {
                listen: free_port()?,
                stats: free_port()?,
                replicas: specs.iter().map(|s| (s.http, s.agent)).collect(),
                retries,
                maxconn,
                agent_weights,
            };
            let binary = tool(config.haproxy.as_ref(), Tool::Haproxy)?;
            Running::Haproxy(Haproxy::start(binary, &spec, dir.path()).await?)
        }
        Front::Envoy => {
            let spec = EnvoySpec {
                listen: free_port()?,
                admin: free_port()?,
                replicas: specs.iter().map(|s| s.http).collect(),
            };
            let binary = tool(config.envoy.as_ref(), Tool::Envoy)?;
            Running::Envoy(Envoy::start(binary, &spec, dir.path()).await?)
        }
    };

    let mut load = OpenLoop::new(Target::local(running.listen(), "/metrics"), config.rate);
    load.duration = if scenario.rolling_restart {
        config.restart_duration
    } else {
        config.duration
    };
    load.timeout = config.timeout;
    load.seed = config.seed;

    let started = Instant::now();
    let mut peaks: Vec<Option<u64>> = vec![None; replicas.len()];
    let mut restarts = Vec::new();
    let restart = async {
        if !scenario.rolling_restart {
            return Ok(None);
        }
        // Let the storm settle first.
        tokio::time::sleep(load.duration / 6).await;
        rolling_restart(&mut replicas, &running, &dir, &mut peaks, &mut restarts).await?;
        Ok::<_, io::Error>(Some(started.elapsed()))
    };
    let (report, restarts_done) = tokio::join!(load.run(), restart);
    let restarts_done = restarts_done?;

    let balancer_retries = match &running {
        Running::Haproxy(h) => h.servers().await.ok().map(|servers| {
            servers
                .iter()
                .fold((0, 0), |(r, d), s| (r + s.retries, d + s.redispatches))
        }),
        Running::Envoy(e) => e.retries().await.ok(),
        Running::Direct(_) => None,
    };
    for (i, replica) in replicas.into_iter().enumerate() {
        let stopped = replica
            .ok_or_else(|| io::Error::other("a replica was not restarted"))?
            .stop()
            .await?;
        peaks[i] = peaks[i].max(stopped.peak_walks);
    }
    drop(running);
    Ok(Row {
        scenario,
        outcomes: report.total(),
        window: report.window,
        peak_walks: peaks,
        workers: config.workers,
        balancer_retries,
        restarts,
        restarts_done,
    })
}

/// SIGTERM each replica in turn, wait for its exit, start it again on the
/// same ports, and wait until the balancer sends to it again before the
/// next: never more than one replica out at a time.
async fn rolling_restart(
    replicas: &mut [Option<Replica>],
    running: &Running,
    dir: &Workdir,
    peaks: &mut [Option<u64>],
    restarts: &mut Vec<(Duration, bool)>,
) -> io::Result<()> {
    for (i, slot) in replicas.iter_mut().enumerate() {
        let old = slot
            .take()
            .ok_or_else(|| io::Error::other("a replica was not restarted"))?;
        let spec = old.spec().clone();
        let stopped = old.stop().await?;
        peaks[i] = peaks[i].max(stopped.peak_walks);
        restarts.push((stopped.took, stopped.status.success()));
        *slot = Some(Replica::start(&format!("r{}", i + 1), &spec, dir.path()).await?);
        running.all_in_rotation().await?;
    }
    Ok(())
}
