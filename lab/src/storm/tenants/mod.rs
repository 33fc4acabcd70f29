//! The tenants run: light tenants beside one, two or four heavy ones on a
//! small class, open loop, each gate side by side in one run.
//!
//! A class of `slots` (4) whose work holds a slot `work` (20 ms); twelve
//! light tenants each offer 2% of its capacity and the heavy ones together
//! ten times it. Each tenant is an open loop of its own (Poisson arrivals
//! whatever the answers, one connection per request) naming itself in
//! [`TENANT_HEADER`]. The server runs as a child process per point (pinned
//! to CPU 0, the generator to CPU 1, when `taskset` allows), so its memory
//! is its own. This module owns the run's order and what each point
//! measured; `server.rs` owns the gates and `table.rs` the tables.

mod server;
mod table;

use std::io;
use std::time::Duration;

pub use self::server::{Memory, TENANT_HEADER, TenantGate, TenantSpec, serve_tenants};
pub use self::table::{plot, render};
use super::Target;
use super::client::Conn;
use super::open_loop::{OpenLoop, Outcomes};
use super::overload::{Pinning, ServerChild};
use crate::progress::Progress;

/// The tenants run's settings; [`TenantsConfig::default`] gives the
/// binary's defaults.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::tenants::TenantsConfig;
///
/// let config = TenantsConfig::default();
/// assert_eq!(config.slots, 4);
/// assert_eq!(config.light, 12);
/// assert_eq!(config.heavy, [0, 1, 2, 4]);
/// assert_eq!(config.capacity(), 200.0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TenantsConfig {
    /// Slots of the class.
    pub slots: usize,
    /// How long each request holds its slot.
    pub work: Duration,
    /// Light tenants.
    pub light: usize,
    /// Each light tenant's offered load, as a share of the capacity.
    pub light_share: f64,
    /// The numbers of heavy tenants, one table each (0: the light tenants
    /// alone, the floor any gate's refusals start from).
    pub heavy: Vec<usize>,
    /// The heavy tenants' offered load together, as a multiple of the
    /// capacity.
    pub heavy_multiple: f64,
    /// How long each point's arrivals last (`--point-ms`, default 3000).
    pub point: Duration,
    /// The client timeout (`--timeout-ms`; default 1000, so the queue's
    /// waits are seen, not cut).
    pub timeout: Duration,
    /// Pin the server and the generator to a CPU each (`--no-pin` off).
    pub pin: bool,
    /// Seed of the arrival schedules (`--seed`, default 1).
    pub seed: u64,
}

impl Default for TenantsConfig {
    fn default() -> Self {
        TenantsConfig {
            slots: 4,
            work: Duration::from_millis(20),
            light: 12,
            light_share: 0.02,
            heavy: vec![0, 1, 2, 4],
            heavy_multiple: 10.0,
            point: Duration::from_secs(3),
            timeout: Duration::from_secs(1),
            pin: true,
            seed: 1,
        }
    }
}

impl TenantsConfig {
    /// Requests per second the class serves at most: slots per work time.
    pub fn capacity(&self) -> f64 {
        self.slots as f64 / self.work.as_secs_f64()
    }
}

/// One gate at one number of heavy tenants.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantPoint {
    /// The gate.
    pub gate: TenantGate,
    /// Heavy tenants.
    pub heavy: usize,
    /// The light tenants' requests, added up.
    pub light: Outcomes,
    /// The heavy tenants' requests, added up.
    pub flood: Outcomes,
    /// The arrival window (goodput is per second of it).
    pub window: Duration,
    /// The most any arrival was late (a busy generator shows here).
    pub max_lag: Duration,
    /// The server's memory at the end.
    pub memory: Memory,
}

/// Everything one `--tenants` run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Tenants {
    /// The settings.
    pub config: TenantsConfig,
    /// Whether server and generator were pinned to a CPU each.
    pub pinned: bool,
    /// Requests per second the class served at saturation, measured first
    /// (below [`TenantsConfig::capacity`] by what a request costs beside
    /// its work and by the timer's rounding of the work).
    pub capacity: f64,
    /// Points by heavy tenants, then by gate.
    pub points: Vec<TenantPoint>,
}

/// Runs every gate at every number of heavy tenants. Progress goes to
/// stderr.
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future kills the server child of the
/// point under way (it is `kill_on_drop`) but leaves this process pinned.
///
/// # Errors
///
/// An [`io::Error`] when a server child cannot be started or stopped.
pub async fn run(config: &TenantsConfig) -> io::Result<Tenants> {
    let pinning = if config.pin { Pinning::detect() } else { None };
    if config.pin && pinning.is_none() {
        eprintln!("tenants: taskset or a second CPU is missing; running unpinned");
    }
    if let Some(p) = &pinning {
        p.pin_self()?;
    }
    let cpu = pinning.as_ref().map(|_| 0);
    let progress = Progress::new(
        "tenants",
        1 + (config.heavy.len() * TenantGate::ALL.len()) as u64,
    );
    progress.start("measuring the capacity");
    let capacity = measure_capacity(config, cpu).await?;
    progress.done();
    progress.line(&format!(
        "tenants: capacity {capacity:.1}/s measured ({:.0}/s nominal)",
        config.capacity()
    ));
    let mut points = Vec::new();
    for &heavy in &config.heavy {
        for gate in TenantGate::ALL {
            progress.start(&format!("{} with {heavy} heavy", gate.name()));
            let point = one(config, gate, heavy, cpu).await?;
            progress.done();
            progress.line(&format!(
                "tenants: {} with {heavy} heavy: light served {:.1}%, goodput {:.1}/s, peak memory {} KiB",
                gate.name(),
                100.0 * point.light.availability(),
                (point.light.goodput(point.window) + point.flood.goodput(point.window)),
                point.memory.hwm_kib,
            ));
            points.push(point);
        }
    }
    progress.finish();
    if let Some(p) = &pinning {
        p.unpin_self()?;
    }
    Ok(Tenants {
        config: config.clone(),
        pinned: cpu.is_some(),
        capacity,
        points,
    })
}

/// Requests per second at saturation: twice `slots` patient clients, each
/// sending its next request on its connection when the last is answered,
/// through tower's limit without a shed (every request waits its turn, so
/// a slot never waits for a request), after an uncounted warm-up.
async fn measure_capacity(config: &TenantsConfig, cpu: Option<usize>) -> io::Result<f64> {
    let spec = TenantSpec {
        gate: TenantGate::Patient,
        slots: config.slots,
        work: config.work,
        tenants: 1,
    };
    let child = ServerChild::start_with(spec.args(), cpu).await?;
    let target = Target::local(child.addr, "/work");
    let patient = |window: Duration| {
        let clients: Vec<_> = (0..2 * config.slots)
            .map(|_| {
                let target = target.clone();
                tokio::spawn(async move {
                    let end = tokio::time::Instant::now() + window;
                    let mut served = 0_u64;
                    let Ok(mut conn) = Conn::open(&target).await else {
                        return 0;
                    };
                    while tokio::time::Instant::now() < end {
                        let Ok(request) = target.request_with(&[(TENANT_HEADER, "probe")]) else {
                            break;
                        };
                        match tokio::time::timeout_at(end, conn.send(request)).await {
                            Ok(Ok(status)) if status.is_success() => served += 1,
                            Ok(Ok(_)) => {}
                            Ok(Err(_)) | Err(_) => break,
                        }
                    }
                    served
                })
            })
            .collect();
        async move {
            let mut served = 0;
            for client in clients {
                served += client.await.unwrap_or(0);
            }
            served
        }
    };
    patient(Duration::from_millis(300)).await;
    let window = config
        .point
        .clamp(Duration::from_secs(1), Duration::from_secs(3));
    let served = patient(window).await;
    child.stop_with(Memory::parse, "memory").await?;
    Ok(served as f64 / window.as_secs_f64())
}

/// One point: a fresh server child behind `gate`, every tenant's open
/// loop against it at once.
async fn one(
    config: &TenantsConfig,
    gate: TenantGate,
    heavy: usize,
    cpu: Option<usize>,
) -> io::Result<TenantPoint> {
    let spec = TenantSpec {
        gate,
        slots: config.slots,
        work: config.work,
        tenants: config.light + heavy,
    };
    let child = ServerChild::start_with(spec.args(), cpu).await?;
    let target = Target::local(child.addr, "/work");
    let tenant = |name: String, rate: f64, seed: u64| {
        let mut load = OpenLoop::new(target.clone(), rate);
        load.duration = config.point;
        load.timeout = config.timeout;
        load.seed = seed;
        load.headers = vec![(TENANT_HEADER, name)];
        load
    };
    let capacity = config.capacity();
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..config.light {
        let load = tenant(
            format!("light-{i}"),
            config.light_share * capacity,
            config.seed.wrapping_add(i as u64),
        );
        runs.spawn(async move { (false, load.run().await) });
    }
    for i in 0..heavy {
        let load = tenant(
            format!("heavy-{i}"),
            config.heavy_multiple * capacity / heavy as f64,
            config.seed.wrapping_add(1000 + i as u64),
        );
        runs.spawn(async move { (true, load.run().await) });
    }
    let (mut light, mut flood) = (Outcomes::default(), Outcomes::default());
    let mut max_lag = Duration::ZERO;
    while let Some(done) = runs.join_next().await {
        let (is_heavy, report) = done.map_err(io::Error::other)?;
        max_lag = max_lag.max(report.max_lag);
        let sum = if is_heavy { &mut flood } else { &mut light };
        sum.merge(&report.total());
    }
    let memory = child.stop_with(Memory::parse, "memory").await?;
    Ok(TenantPoint {
        gate,
        heavy,
        light,
        flood,
        window: config.point,
        max_lag,
        memory,
    })
}
