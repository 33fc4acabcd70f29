//! Running the storm: each mode (a gate, with or without coalescing), each
//! phase, on a fresh exporter and port.
//!
//! This module owns the order of the run, the progress lines on stderr and
//! the memory reading. Every phase ends by its own clock: scrapers stop
//! waiting at the end of the phase, and the exporter is shut down by its
//! deadline before the next one starts.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::time::Instant;

use super::client::Scraper;
use super::{Phase, Row, StormConfig, Tally, Target};
use admission_examples::exporter::{Config, Exporter, Gate};

/// How long the exporter may take to stop between phases.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(2);
/// How long the untimed warm-up phase lasts at most.
const WARM_UP: Duration = Duration::from_millis(300);
/// How long to wait for walks left over by give-ups before the next phase.
const SETTLE: Duration = Duration::from_secs(2);

/// One row's exporter: its gate and, for admission, coalescing or not.
#[derive(Debug, Clone, Copy)]
struct Mode {
    gate: Gate,
    coalesce: Option<Duration>,
}

impl Mode {
    /// Every mode, in the order the table shows them: coalescing right
    /// below plain admission, so the two compare at a glance.
    fn all(config: &StormConfig) -> Vec<Mode> {
        let mut modes = Vec::new();
        for gate in Gate::ALL {
            modes.push(Mode {
                gate,
                coalesce: None,
            });
            if gate == Gate::Admission && config.coalesce.is_some() {
                modes.push(Mode {
                    gate,
                    coalesce: config.coalesce,
                });
            }
        }
        modes
    }

    fn name(self) -> String {
        match self.coalesce {
            None => self.gate.name().to_owned(),
            Some(_) => format!("{}+coalesce", self.gate.name()),
        }
    }
}

/// This process's resident memory (`VmRSS` in `/proc/self/status`), in KiB,
/// where the platform has it.
pub fn rss_kib() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs the storm and returns one row per mode and phase (or one row for
/// `--url`; with `--grpc`, one per gRPC gate and phase). Progress goes to
/// stderr, a line per phase.
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future leaves the exporter of the phase
/// under way serving until the process ends.
///
/// # Errors
///
/// An [`io::Error`] when an exporter cannot be built, bound or stopped.
pub async fn run(config: &StormConfig) -> io::Result<Vec<Row>> {
    if config.grpc {
        return super::grpc::run(config).await;
    }
    if let Some(target) = &config.url {
        eprintln!("storm: {} scrapers against {target}", config.clients);
        let tally = storm(config, target.clone(), Phase::Patient).await;
        let row = Row {
            mode: "url".to_owned(),
            phase: Phase::Patient,
            tally,
            walks_run: None,
            max_walks: None,
            walks_left: None,
            memory_growth_kib: None,
        };
        progress(&row);
        return Ok(vec![row]);
    }
    eprintln!(
        "storm: {} scrapers, {} ms per phase, {} workers, {} series, {} ms extra per walk, \
         coalescing within {}",
        config.clients,
        config.duration.as_millis(),
        config.workers,
        config.series,
        config.walk_delay.as_millis(),
        config
            .coalesce
            .map_or_else(|| "- (off)".to_owned(), |c| format!("{} ms", c.as_millis())),
    );
    // One short untimed phase first, so that the first row's memory does
    // not include the runtime's and the allocator's first use.
    let warm_up = StormConfig {
        duration: WARM_UP.min(config.duration),
        ..config.clone()
    };
    eprintln!("storm: warming up (not counted) ...");
    let plain = Mode {
        gate: Gate::Admission,
        coalesce: None,
    };
    one(&warm_up, plain, Phase::Patient).await?;
    let mut rows = Vec::new();
    for mode in Mode::all(config) {
        for phase in [Phase::Patient, Phase::GiveUp(config.give_up)] {
            eprintln!("storm: {} / {phase} ...", mode.name());
            let row = one(config, mode, phase).await?;
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// One mode under one phase, on a fresh exporter.
async fn one(config: &StormConfig, mode: Mode, phase: Phase) -> io::Result<Row> {
    let exporter = Exporter::new(Config {
        workers: config.workers,
        series: config.series,
        walk_delay: config.walk_delay,
        shutdown_deadline: SHUTDOWN_DEADLINE,
        gate: mode.gate,
        coalesce: mode.coalesce,
        ..Config::default()
    })?;
    let walks = exporter.walks();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let target = Target::local(listener.local_addr()?, "/metrics");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(exporter.serve(listener, async move {
        let _ = stopped.await;
    }));

    let before = rss_kib();
    let tally = storm(config, target, phase).await;
    let after = rss_kib();
    let (walks_run, max_walks) = (walks.started(), walks.peak());
    let walks_left = walks.running() + walks.queued();

    let _ = stop.send(());
    let stopped = server.await.map_err(io::Error::other)??;
    if !stopped.report.drained() || stopped.connections_cut {
        eprintln!("storm: {} did not drain by its deadline", mode.name());
    }
    // Walks whose scrapers gave up may still run (tokio's blocking pool
    // cannot be told to stop); let them end so they do not load the next
    // phase.
    let settle = Instant::now() + SETTLE;
    while walks.running() > 0 && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(Row {
        mode: mode.name(),
        phase,
        tally,
        walks_run: Some(walks_run),
        max_walks: Some(max_walks),
        walks_left: Some(walks_left),
        memory_growth_kib: before.zip(after).map(|(b, a)| a - b),
    })
}

/// Runs `config.clients` scrapers against `target` for one phase.
async fn storm(config: &StormConfig, target: Target, phase: Phase) -> Tally {
    let target = Arc::new(target);
    let scraper = Scraper {
        phase,
        end: Instant::now() + config.duration,
        refused_pause: config.refused_pause,
        max_requests: config.max_requests,
    };
    let scrapers: Vec<_> = (0..config.clients)
        .map(|_| {
            let target = Arc::clone(&target);
            tokio::spawn(async move { scraper.run(&target).await })
        })
        .collect();
    let mut tally = Tally::default();
    for scraper in scrapers {
        match scraper.await {
            Ok(one) => tally.merge(one),
            Err(_panicked) => tally.errors += 1,
        }
    }
    tally
}

pub(super) fn progress(row: &Row) {
    let t = &row.tally;
    eprintln!(
        "storm: {} / {} done: {} requests, {} ok, {} refused, {} gave up, {} errors, \
         walks run {}, max walks at once {}",
        row.mode,
        row.phase,
        t.requests(),
        t.ok.len(),
        t.refused.len(),
        t.gave_up,
        t.errors,
        row.walks_run
            .map_or_else(|| "-".to_owned(), |m| m.to_string()),
        row.max_walks
            .map_or_else(|| "-".to_owned(), |m| m.to_string()),
    );
}
