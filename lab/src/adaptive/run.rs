//! One run of one scenario behind one gate: the backend, the gate (or
//! Envoy), open-loop load cut into slices, the limit sampled, and what each
//! slice got.
//!
//! This module owns [`Setup`], [`Scenario`] and its [`Phase`]s, [`Series`]
//! (one run's measurements) and [`run_one`]. It never judges a gate: the
//! tables do that from the series.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::backend::Backend;
use super::envoy::EnvoyGate;
use super::gate::{Bounds, Front, Gate};
use super::server::Server;
use crate::storm::Target;
use crate::storm::open_loop::{OpenLoop, Report};

/// What every run shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// The backend's hidden permits, `C`.
    pub capacity: usize,
    /// How long each request holds one, `d`.
    pub hold: Duration,
    /// The bounds every adaptive gate gets (and the clients' timeout).
    pub bounds: Bounds,
    /// The length of one load slice (a point of the goodput series).
    pub slice: Duration,
    /// Envoy's binary; `None` leaves Envoy out.
    pub envoy: Option<PathBuf>,
    /// Envoy's minRTT interval (its default is 60 s).
    pub min_rtt_interval: Duration,
    /// Seed of the first slice's schedule.
    pub seed: u64,
}

impl Setup {
    /// The backend's capacity in requests per second, `C / d`.
    pub fn rate(&self) -> f64 {
        self.capacity as f64 / self.hold.as_secs_f64()
    }
}

/// One stretch of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    /// How long.
    pub length: Duration,
    /// Offered load, in multiples of the backend's initial capacity.
    pub load: f64,
    /// The backend's permits during it, in multiples of the initial `C`.
    pub capacity: f64,
    /// How long each request holds its permit, in multiples of `d`.
    pub hold: f64,
    /// Whether it counts (a warm-up does not).
    pub counted: bool,
}

impl Phase {
    /// A counted phase at `load` times capacity, the backend as set up.
    pub fn at(load: f64, length: Duration) -> Phase {
        Phase {
            length,
            load,
            capacity: 1.0,
            hold: 1.0,
            counted: true,
        }
    }

    /// The same, not counted.
    #[must_use]
    pub fn warm_up(self) -> Phase {
        Phase {
            counted: false,
            ..self
        }
    }
}

/// A named list of phases.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Its name in tables and file names.
    pub name: String,
    /// Its phases, in order.
    pub phases: Vec<Phase>,
}

/// One slice of load and what it got.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// When it started, from the scenario's start, in seconds.
    pub at: f64,
    /// Which phase it belongs to.
    pub phase: usize,
    /// What its requests got.
    pub report: Report,
}

/// One run's measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The gate.
    pub gate: Gate,
    /// The slices, in order.
    pub slices: Vec<Slice>,
    /// The gate's limit every 100 ms: (seconds from the start, phase, limit).
    pub limits: Vec<(f64, usize, usize)>,
}

/// Runs `scenario` behind `gate`: a fresh backend and server (and Envoy
/// for [`Gate::Envoy`]), the phases' load in slices, the backend changed
/// at each phase's start (and a fixed limit moved with the capacity, as
/// an oracle would).
///
/// # Cancel safety
///
/// Cancel safe: dropping it stops the server, Envoy and the load.
///
/// # Errors
///
/// The server or Envoy could not start.
pub async fn run_one(setup: &Setup, scenario: &Scenario, gate: Gate) -> io::Result<Series> {
    let backend = Backend::new(setup.capacity, setup.hold);
    let front = Arc::new(Front::new(gate, setup.bounds).map_err(io::Error::other)?);
    let server = Server::start(Arc::clone(&front), Arc::clone(&backend)).await?;
    let envoy = match (gate, &setup.envoy) {
        (Gate::Envoy, Some(binary)) => Some(
            EnvoyGate::start(
                binary,
                server.addr(),
                setup.bounds.ceiling,
                setup.min_rtt_interval,
            )
            .await?,
        ),
        (Gate::Envoy, None) => return Err(io::Error::other("no Envoy binary")),
        _ => None,
    };
    let target = Target::local(envoy.as_ref().map_or(server.addr(), EnvoyGate::listen), "/");
    let start = Instant::now();
    let total: Duration = scenario.phases.iter().map(|p| p.length).sum();

    let mut slices = Vec::new();
    let mut at = Duration::ZERO;
    let mut seed = setup.seed;
    for (index, phase) in scenario.phases.iter().enumerate() {
        let phase_start = at;
        let (backend, front, setup2) = (Arc::clone(&backend), Arc::clone(&front), setup.clone());
        let phase = *phase;
        tokio::spawn(async move {
            sleep_until(start + phase_start).await;
            let permits = ((setup2.capacity as f64 * phase.capacity).round() as usize).max(1);
            backend.set_hold(setup2.hold.mul_f64(phase.hold));
            if let Gate::Fixed(best) = gate {
                front.set_fixed(((best as f64 * phase.capacity).round() as usize).max(1));
            }
            backend.set_capacity(permits).await;
        });
        while at < phase_start + phase.length {
            let length = setup.slice.min(phase_start + phase.length - at);
            let mut load = OpenLoop::new(target.clone(), phase.load * setup.rate());
            load.duration = length;
            load.timeout = setup.bounds.timeout;
            load.seed = seed;
            seed += 1;
            let begin = start + at;
            let secs = at.as_secs_f64();
            slices.push((
                secs,
                index,
                tokio::spawn(async move {
                    sleep_until(begin).await;
                    load.run().await
                }),
            ));
            at += length;
        }
    }

    let mut limits = Vec::new();
    let mut tick = start;
    while tick < start + total {
        sleep_until(tick).await;
        let t = tick.duration_since(start);
        let limit = match &envoy {
            Some(envoy) => envoy.limit().await,
            None => front.limit(),
        };
        if let Some(limit) = limit {
            limits.push((t.as_secs_f64(), phase_of(scenario, t), limit));
        }
        tick += Duration::from_millis(100);
    }
    let mut done = Vec::with_capacity(slices.len());
    for (at, phase, task) in slices {
        let report = task.await.map_err(io::Error::other)?;
        done.push(Slice { at, phase, report });
    }
    drop((envoy, server));
    Ok(Series {
        gate,
        slices: done,
        limits,
    })
}

/// The phase `t` into `scenario` falls in.
fn phase_of(scenario: &Scenario, t: Duration) -> usize {
    let mut end = Duration::ZERO;
    for (i, phase) in scenario.phases.iter().enumerate() {
        end += phase.length;
        if t < end {
            return i;
        }
    }
    scenario.phases.len().saturating_sub(1)
}
