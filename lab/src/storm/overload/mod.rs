//! The overload table: the capacity of a small pool, then open-loop load
//! at multiples of it, for each gate side by side in one run, plus the
//! criticality and deadline scenarios.
//!
//! This module owns the order of the run and CPU pinning: the exporter
//! under test runs as a child process (see `server.rs`) pinned
//! to CPU 0, and this process (the generator) pins itself to CPU 1, when
//! `taskset` exists and two CPUs are allowed. Every point gets a fresh
//! child, and every point is bounded by its duration plus the client
//! timeout. It computes nothing but the runs; `table.rs`
//! renders and judges them.

mod server;
mod table;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub(crate) use self::server::ServerChild;
pub use self::server::{ServeSpec, WalkStats, serve_child};
pub use self::table::{Goal, QUEUE_GATE, goals, render};
use super::client::Scraper;
use super::open_loop::{Criticality, Mix, OpenLoop, Report};
use super::{Phase, Target};
use crate::progress::Progress;
use admission_examples::exporter::Gate;

/// The overload run's settings; [`OverloadConfig::default`] gives the
/// binary's defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::storm::overload::OverloadConfig;
///
/// let config = OverloadConfig::default();
/// assert_eq!(config.workers, 2);
/// assert_eq!(config.walk_delay, Duration::from_millis(20));
/// assert_eq!(config.multiples, [0.5, 0.9, 1.0, 2.0, 5.0, 10.0]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadConfig {
    /// How long each point's arrivals last (`--point-ms`, default 3000).
    pub point: Duration,
    /// Worker threads (`--workers`, default 2).
    pub workers: usize,
    /// Extra time inside every walk (`--walk-delay-ms`, default 20).
    pub walk_delay: Duration,
    /// Series in the registry (`--series`, default 10000).
    pub series: usize,
    /// The client timeout of the sweep (`--timeout-ms`, default 100).
    pub timeout: Duration,
    /// Offered load as multiples of the measured capacity.
    pub multiples: Vec<f64>,
    /// Pin server and generator to a CPU each when `taskset` allows
    /// (`--no-pin` turns it off).
    pub pin: bool,
    /// Repeat the sweep unpinned after the pinned one, when it was pinned
    /// (default on; `--pinned-only` turns it off).
    pub unpinned_too: bool,
    /// Seed of the arrival schedules (`--seed`, default 1).
    pub seed: u64,
}

impl Default for OverloadConfig {
    fn default() -> Self {
        OverloadConfig {
            point: Duration::from_secs(3),
            workers: 2,
            walk_delay: Duration::from_millis(20),
            series: 10_000,
            timeout: Duration::from_millis(100),
            multiples: vec![0.5, 0.9, 1.0, 2.0, 5.0, 10.0],
            pin: true,
            unpinned_too: true,
            seed: 1,
        }
    }
}

/// The gates of the sweep, in the table's order, with their labels.
pub const SWEEP_GATES: [(&str, Gate); 4] = [
    ("tower limit+shed", Gate::TowerLimit),
    ("admission fail-fast", Gate::Admission),
    (QUEUE_GATE, Gate::AdmissionQueue),
    ("unbounded queue", Gate::UnboundedQueue),
];

/// One run of open-loop load against one fresh exporter.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The gate's label.
    pub gate: &'static str,
    /// Offered load as a multiple of capacity (the total, all levels).
    pub multiple: f64,
    /// The arrival rate asked for.
    pub rate: f64,
    /// Whether requests announced their budget.
    pub budget: bool,
    /// What the generator saw.
    pub report: Report,
    /// What the walks did, from the child.
    pub walks: WalkStats,
}

/// One sweep: every gate at every multiple.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// Whether server and generator were pinned to a CPU each.
    pub pinned: bool,
    /// Walks per second the pool serves at saturation, measured first.
    pub capacity: f64,
    /// Points in order: by multiple, then by gate.
    pub points: Vec<Point>,
}

/// Everything one `--overload` run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Overload {
    /// The settings.
    pub config: OverloadConfig,
    /// The main sweep (pinned when possible).
    pub sweep: Sweep,
    /// The sweep again without pinning, if asked for.
    pub unpinned: Option<Sweep>,
    /// Critical at half the capacity beside sheddable at ten times it.
    pub criticality: Vec<Point>,
    /// Client timeouts at 1.5x the walk, five times the capacity, with and
    /// without the budget header.
    pub deadline: Vec<Point>,
}

/// Runs the whole overload measurement. Progress goes to stderr: a line
/// per point, and (on a terminal) a bar with the point under way, how
/// many of how many, and about how long is left.
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future kills the child exporter of the
/// point under way (it is `kill_on_drop`) but leaves this process pinned.
///
/// # Errors
///
/// An [`io::Error`] when a child exporter cannot be started or stopped.
pub async fn run(config: &OverloadConfig) -> io::Result<Overload> {
    let pinning = if config.pin { Pinning::detect() } else { None };
    if config.pin && pinning.is_none() {
        eprintln!("overload: taskset or a second CPU is missing; running unpinned");
    }
    if let Some(p) = &pinning {
        p.pin_self()?;
    }
    let sweeps = if pinning.is_some() && config.unpinned_too {
        2
    } else {
        1
    };
    let progress = Progress::new("overload", steps(config, sweeps));
    let server_cpu = pinning.as_ref().map(|_| 0);
    let sweep = sweep(config, server_cpu, &progress).await?;
    let capacity = sweep.capacity;
    let criticality = criticality(config, server_cpu, capacity, &progress).await?;
    let deadline = deadline(config, server_cpu, capacity, &progress).await?;
    let unpinned = match (&pinning, config.unpinned_too) {
        (Some(p), true) => {
            p.unpin_self()?;
            progress.line("overload: the sweep again, unpinned");
            Some(self::sweep(config, None, &progress).await?)
        }
        _ => None,
    };
    progress.finish();
    if let Some(p) = &pinning {
        p.unpin_self()?;
    }
    Ok(Overload {
        config: config.clone(),
        sweep,
        unpinned,
        criticality,
        deadline,
    })
}

/// The steps of a run of `sweeps` sweeps: per sweep the capacity and one
/// point per multiple and gate, then the criticality and deadline points.
fn steps(config: &OverloadConfig, sweeps: u64) -> u64 {
    let per_sweep = 1 + (config.multiples.len() * SWEEP_GATES.len()) as u64;
    sweeps * per_sweep + (CRITICALITY_GATES.len() + 2 * DEADLINE_GATES.len()) as u64
}

/// The gates of the criticality scenario, and whether requests announce
/// their budget.
const CRITICALITY_GATES: [(&str, Gate, bool); 4] = [
    ("tower limit+shed", Gate::TowerLimit, false),
    ("admission fail-fast", Gate::Admission, false),
    (QUEUE_GATE, Gate::AdmissionQueue, false),
    // As behind Envoy, which tells each request's timeout.
    (QUEUE_GATE, Gate::AdmissionQueue, true),
];

/// The gates of the deadline scenario, each without and with the budget.
const DEADLINE_GATES: [(&str, Gate); 2] = [
    ("admission fail-fast", Gate::Admission),
    (QUEUE_GATE, Gate::AdmissionQueue),
];

async fn sweep(
    config: &OverloadConfig,
    cpu: Option<usize>,
    progress: &Progress,
) -> io::Result<Sweep> {
    progress.start("measuring the capacity");
    let capacity = measure_capacity(config, cpu).await?;
    progress.done();
    progress.line(&format!(
        "overload: capacity {capacity:.1} walks/s ({} workers, {} ms walk delay){}",
        config.workers,
        config.walk_delay.as_millis(),
        if cpu.is_some() {
            ", pinned"
        } else {
            ", unpinned"
        }
    ));
    let mut points = Vec::new();
    for &multiple in &config.multiples {
        for (label, gate) in SWEEP_GATES {
            let mut load = open_loop(config, multiple * capacity);
            load.timeout = config.timeout;
            let point = one(config, cpu, label, gate, multiple, load, progress).await?;
            points.push(point);
        }
    }
    Ok(Sweep {
        pinned: cpu.is_some(),
        capacity,
        points,
    })
}

/// Critical at 0.5x capacity and sheddable at 10x, in one Poisson stream.
async fn criticality(
    config: &OverloadConfig,
    cpu: Option<usize>,
    capacity: f64,
    progress: &Progress,
) -> io::Result<Vec<Point>> {
    let (critical, sheddable) = (0.5, 10.0);
    let mut points = Vec::new();
    for (label, gate, budget) in CRITICALITY_GATES {
        let mut load = open_loop(config, (critical + sheddable) * capacity);
        load.timeout = config.timeout;
        load.budget = budget.then_some(config.timeout);
        load.mix = Mix::new(&[
            (Criticality::Critical, critical),
            (Criticality::Sheddable, sheddable),
        ])
        .map_err(io::Error::other)?;
        points.push(
            one(
                config,
                cpu,
                label,
                gate,
                critical + sheddable,
                load,
                progress,
            )
            .await?,
        );
    }
    Ok(points)
}

/// Client timeouts at 1.5x the walk, 5x capacity, with and without the
/// budget header.
async fn deadline(
    config: &OverloadConfig,
    cpu: Option<usize>,
    capacity: f64,
    progress: &Progress,
) -> io::Result<Vec<Point>> {
    let timeout = config.walk_delay * 3 / 2;
    let mut points = Vec::new();
    for (label, gate) in DEADLINE_GATES {
        for budget in [false, true] {
            let mut load = open_loop(config, 5.0 * capacity);
            load.timeout = timeout;
            load.budget = budget.then_some(timeout);
            points.push(one(config, cpu, label, gate, 5.0, load, progress).await?);
        }
    }
    Ok(points)
}

/// An open loop with the run's duration and seed; the target is set by
/// [`one`].
fn open_loop(config: &OverloadConfig, rate: f64) -> OpenLoop {
    let mut load = OpenLoop::new(Target::local(([127, 0, 0, 1], 0).into(), "/metrics"), rate);
    load.duration = config.point;
    load.seed = config.seed;
    load
}

/// Runs `load` against a fresh exporter child serving `spec` (on CPU
/// `cpu` when given), then stops the child and returns what the generator
/// saw and what the walks did. `load.target` is replaced by the child's
/// `/metrics`.
///
/// # Cancel safety
///
/// Nothing leaks: dropping the future kills the child and aborts the
/// requests under way.
///
/// # Errors
///
/// An [`io::Error`] when the child cannot be started or stopped.
pub async fn against_child(
    mut load: OpenLoop,
    spec: &ServeSpec,
    cpu: Option<usize>,
) -> io::Result<(Report, WalkStats)> {
    let child = ServerChild::start(spec, cpu).await?;
    load.target = Target::local(child.addr, "/metrics");
    let report = load.run().await;
    let walks = child.stop().await?;
    Ok((report, walks))
}

/// One point: a fresh child exporter behind `gate`, `load` against it.
async fn one(
    config: &OverloadConfig,
    cpu: Option<usize>,
    label: &'static str,
    gate: Gate,
    multiple: f64,
    load: OpenLoop,
    progress: &Progress,
) -> io::Result<Point> {
    let (rate, mixed, budget) = (load.rate, load.mix.sends_header(), load.budget.is_some());
    progress.start(&format!("{label} at {multiple}x"));
    let (report, walks) = against_child(load, &spec(config, gate), cpu).await?;
    progress.done();
    let total = report.total();
    progress.line(&format!(
        "overload: {label} at {multiple}x ({rate:.0}/s{}{}): goodput {:.1}/s, refused {}, \
         timed out {}, errors {}, dropped {}, max walks {}",
        if mixed { ", mixed" } else { "" },
        if budget { ", budget" } else { "" },
        total.goodput(report.window),
        total.refused.len(),
        total.timed_out,
        total.errors,
        total.dropped,
        walks.peak,
    ));
    Ok(Point {
        gate: label,
        multiple,
        rate,
        budget,
        report,
        walks,
    })
}

fn spec(config: &OverloadConfig, gate: Gate) -> ServeSpec {
    ServeSpec {
        gate,
        workers: config.workers,
        walk_delay: config.walk_delay,
        series: config.series,
    }
}

/// Walks per second at saturation: `2 x workers` patient clients, each
/// sending its next request when the last is answered, against the
/// unbounded queue (which never refuses, so both workers always have a
/// walk waiting), after an uncounted warm-up.
async fn measure_capacity(config: &OverloadConfig, cpu: Option<usize>) -> io::Result<f64> {
    let child = ServerChild::start(&spec(config, Gate::UnboundedQueue), cpu).await?;
    let target = Arc::new(Target::local(child.addr, "/metrics"));
    let clients = 2 * config.workers;
    let patient = |duration: Duration| {
        let target = Arc::clone(&target);
        async move {
            let scraper = Scraper {
                phase: Phase::Patient,
                end: Instant::now() + duration,
                refused_pause: Duration::ZERO,
                max_requests: u64::MAX,
            };
            let runs: Vec<_> = (0..clients)
                .map(|_| {
                    let target = Arc::clone(&target);
                    tokio::spawn(async move { scraper.run(&target).await })
                })
                .collect();
            let mut ok = 0;
            for run in runs {
                ok += run.await.map_or(0, |tally| tally.ok.len());
            }
            ok
        }
    };
    patient(Duration::from_millis(300)).await;
    let window = config
        .point
        .clamp(Duration::from_secs(1), Duration::from_secs(3));
    let ok = patient(window).await;
    child.stop().await?;
    Ok(ok as f64 / window.as_secs_f64())
}

/// `taskset` pinning of this process, and the affinity to restore.
#[derive(Debug)]
pub(crate) struct Pinning {
    restore: String,
}

impl Pinning {
    /// `Some` when `taskset` runs and at least CPUs 0 and 1 are allowed.
    pub(crate) fn detect() -> Option<Pinning> {
        let out = std::process::Command::new("taskset")
            .args(["-c", "-p", &std::process::id().to_string()])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let list = text.rsplit_once(": ")?.1.trim().to_owned();
        let allowed = cpus(&list)?;
        (allowed.contains(&0) && allowed.contains(&1)).then_some(Pinning { restore: list })
    }

    pub(crate) fn pin_self(&self) -> io::Result<()> {
        set_affinity("1")
    }

    pub(crate) fn unpin_self(&self) -> io::Result<()> {
        set_affinity(&self.restore)
    }
}

/// Sets the affinity of every thread of this process (`taskset -a`); new
/// threads inherit it.
fn set_affinity(list: &str) -> io::Result<()> {
    let status = std::process::Command::new("taskset")
        .args(["-a", "-c", "-p", list, &std::process::id().to_string()])
        .stdout(std::process::Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("taskset -a -c -p {list} failed")))
    }
}

/// The CPUs of a `taskset` list such as `0-3,6`.
fn cpus(list: &str) -> Option<Vec<usize>> {
    let mut all = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => all.extend(a.trim().parse::<usize>().ok()?..=b.trim().parse().ok()?),
            None => all.push(part.trim().parse().ok()?),
        }
    }
    Some(all)
}
