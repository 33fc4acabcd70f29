//! The storm against the gRPC exporter (`--grpc`): each gate, each phase,
//! on a fresh in-process server and port, with tonic clients calling
//! `Registry/Walk`.
//!
//! This module owns the gRPC rows and their callers. A caller keeps one
//! HTTP/2 connection for the whole phase; one that gives up drops its call,
//! which cancels the stream (`RST_STREAM`) and leaves the connection open,
//! as gRPC clients do. Admission's `UNAVAILABLE` and load shedding's
//! `RESOURCE_EXHAUSTED` count as refused; every wait is bounded by the end
//! of the phase.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use admission_tonic::status::{Hint, pushback};
use tokio::net::TcpListener;
use tokio::time::{Instant, sleep_until, timeout_at};
use tonic::{Code, Status};

use super::{Phase, Row, StormConfig, Tally, progress, rss_kib};
use admission_examples::grpc::{Config, Gate, GrpcExporter, RegistryClient, WalkRequest};

/// How long the exporter may take to stop between phases.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(2);
/// How long to wait for walks left over by give-ups before the next phase.
const SETTLE: Duration = Duration::from_secs(2);

/// The row's name for a gRPC gate.
fn mode(gate: Gate) -> String {
    format!("grpc-{}", gate.name())
}

/// Runs the gRPC storm: every gate of [`Gate::ALL`], both phases.
pub(super) async fn run(config: &StormConfig) -> io::Result<Vec<Row>> {
    eprintln!(
        "storm: --grpc: {} callers, {} ms per phase, {} workers, {} series, {} ms extra per walk",
        config.clients,
        config.duration.as_millis(),
        config.workers,
        config.series,
        config.walk_delay.as_millis(),
    );
    let mut rows = Vec::new();
    for gate in Gate::ALL {
        for phase in [Phase::Patient, Phase::GiveUp(config.give_up)] {
            eprintln!("storm: {} / {phase} ...", mode(gate));
            let row = one(config, gate, phase).await?;
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// One gate under one phase, on a fresh exporter.
async fn one(config: &StormConfig, gate: Gate, phase: Phase) -> io::Result<Row> {
    let exporter = GrpcExporter::new(Config {
        workers: config.workers,
        series: config.series,
        walk_delay: config.walk_delay,
        // Room for every caller: the registry pool, not the leases, is what
        // bounds the walks.
        work_slots: config.clients.max(1),
        shutdown_deadline: SHUTDOWN_DEADLINE,
        gate,
        ..Config::default()
    })?;
    let walks = exporter.walks();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(exporter.serve(listener, async move {
        let _ = stopped.await;
    }));

    let before = rss_kib();
    let tally = storm(config, addr, phase).await;
    let after = rss_kib();
    let (walks_run, max_walks) = (walks.started(), walks.peak());
    let walks_left = walks.running();

    let _ = stop.send(());
    let stopped = server.await.map_err(io::Error::other)??;
    if !stopped.report.drained() || stopped.connections_cut {
        eprintln!("storm: {} did not drain by its deadline", mode(gate));
    }
    // Walks whose callers gave up may still run; let them end so they do
    // not load the next phase.
    let settle = Instant::now() + SETTLE;
    while walks.running() > 0 && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(Row {
        mode: mode(gate),
        phase,
        tally,
        walks_run: Some(walks_run),
        max_walks: Some(max_walks),
        walks_left: Some(walks_left),
        memory_growth_kib: before.zip(after).map(|(b, a)| a - b),
    })
}

/// Runs `config.clients` callers against `addr` for one phase.
async fn storm(config: &StormConfig, addr: SocketAddr, phase: Phase) -> Tally {
    let caller = Caller {
        phase,
        end: Instant::now() + config.duration,
        refused_pause: config.refused_pause,
        max_requests: config.max_requests,
    };
    let callers: Vec<_> = (0..config.clients)
        .map(|_| tokio::spawn(async move { caller.run(addr).await }))
        .collect();
    let mut tally = Tally::default();
    for caller in callers {
        match caller.await {
            Ok(one) => tally.merge(one),
            Err(_panicked) => tally.errors += 1,
        }
    }
    tally
}

/// A refusal: admission's `UNAVAILABLE` (it carries a pushback; a
/// transport failure is `UNAVAILABLE` too, and does not), or tonic's load
/// shedding's `RESOURCE_EXHAUSTED`.
fn refused(status: &Status) -> bool {
    match status.code() {
        Code::ResourceExhausted => true,
        Code::Unavailable => pushback(status.metadata()) != Hint::None,
        _ => false,
    }
}

/// How one caller behaves.
#[derive(Debug, Clone, Copy)]
struct Caller {
    phase: Phase,
    end: Instant,
    refused_pause: Duration,
    max_requests: u64,
}

impl Caller {
    /// Calls `Walk` until the phase ends or the request bound is hit.
    async fn run(self, addr: SocketAddr) -> Tally {
        let mut tally = Tally::default();
        let mut client: Option<RegistryClient> = None;
        while Instant::now() < self.end && tally.requests() < self.max_requests {
            let open = match client.as_mut() {
                Some(open) => open,
                None => {
                    match timeout_at(self.end, RegistryClient::connect(format!("http://{addr}")))
                        .await
                    {
                        Ok(Ok(open)) => client.insert(open),
                        Ok(Err(_)) => {
                            tally.errors += 1;
                            self.pause(Duration::from_millis(10)).await;
                            continue;
                        }
                        Err(_end) => break,
                    }
                }
            };
            let started = Instant::now();
            let give_up = match self.phase {
                Phase::Patient => self.end,
                Phase::GiveUp(after) => (started + after).min(self.end),
            };
            match timeout_at(give_up, open.walk(WalkRequest::default())).await {
                Ok(Ok(_exposition)) => tally.ok.push(started.elapsed()),
                Ok(Err(status)) if refused(&status) => {
                    tally.refused.push(started.elapsed());
                    self.pause(self.refused_pause).await;
                }
                Ok(Err(_other)) => tally.errors += 1,
                // Dropping the call cancels its stream; the connection stays.
                Err(_gave_up) => tally.gave_up += 1,
            }
        }
        tally
    }

    async fn pause(&self, pause: Duration) {
        if !pause.is_zero() {
            sleep_until((Instant::now() + pause).min(self.end)).await;
        }
    }
}
