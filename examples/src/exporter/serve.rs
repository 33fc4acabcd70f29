//! Building the exporter, serving it, and stopping it under one deadline.
//!
//! This module owns [`Exporter`], [`serve`] and [`Stopped`]. At the signal
//! readiness turns (`/readyz` `503`, the agent says `drain`) and the
//! exporter serves on through the drain delay; then shutdown counts its
//! deadline, stops accepting, drains the walk pool and the connections
//! concurrently, and never waits past the deadline for either: blocked
//! worker threads cannot be joined, so the caller's process exit is the
//! fallback.

use std::future::{Future, IntoFuture};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use admission_axum::load_report::ReportLoad;
use admission_axum::serve::ConnectionStats;
use admission_core::metrics::AdmissionMetrics;
use admission_core::shutdown::{CancellationToken, ShutdownReport};
use admission_core::trace::Trace;
use admission_core::{Admission, Shutdown};
use admission_http::balancer::{AgentCheck, LoadReport, Readiness};
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpListener;
use tokio::time::{Instant, MissedTickBehavior};

use super::app::{App, router};
use super::backend::Backend;
use super::connections::ConnectionMetrics;
use super::held::HeldBytes;
use super::{Config, Gate};
use crate::stop::Serving;
use crate::walk::{WalkGauge, Walker, demo_registry};

/// A built exporter, not yet serving.
///
/// Building it fills the registry and starts the worker threads; serving it
/// needs a tokio runtime.
///
/// # Examples
///
/// ```
/// use admission_examples::exporter::{Config, Exporter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let exporter = Exporter::new(Config { series: 10, ..Config::default() })?;
/// let walks = exporter.walks();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let stopped = exporter.serve(listener, async {}).await?;
/// assert!(stopped.report.drained());
/// assert_eq!(walks.peak(), 0, "nobody scraped");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Exporter {
    app: Arc<App>,
    shutdown: Shutdown,
    config: Config,
    connections: ConnectionMetrics,
}

/// How a served exporter stopped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Stopped {
    /// The gate the exporter ran with.
    pub gate: Gate,
    /// Per pool: drained or abandoned, with what was still running.
    pub report: ShutdownReport,
    /// Whether connections were still open at the deadline and were left
    /// to the process exit ([`Stopped::cut_cause`] says why).
    pub connections_cut: bool,
    /// Queued walks discarded at the signal (unbounded queue only).
    pub discarded: u64,
    /// The configured deadline, counted from the signal.
    pub deadline: Duration,
    /// Time from the signal to the end of shutdown.
    pub took: Duration,
    /// The connections served: accepted, refused, evicted, timed out.
    pub connections: ConnectionStats,
}

impl Stopped {
    /// Logs the outcome's summary line; each pool's `drained` or
    /// `abandoned` line (with what was still running) is logged by the
    /// shutdown itself.
    pub fn log(&self) {
        if self.discarded > 0 {
            tracing::warn!(
                discarded = self.discarded,
                "unbounded queue: {} queued walks discarded",
                self.discarded
            );
        }
        if self.connections_cut {
            self.log_cut();
        }
        let outcome = if self.report.drained() && !self.connections_cut {
            "drained"
        } else {
            "abandoned"
        };
        let c = &self.connections;
        tracing::info!(
            accepted = c.accepted,
            refused = c.refused,
            evicted = c.evicted,
            header_timeouts = c.header_timeouts,
            idle_timeouts = c.idle_timeouts,
            write_timeouts = c.write_timeouts,
            accept_errors = c.accept_errors,
            "connections served"
        );
        tracing::info!(
            gate = %self.gate,
            took_ms = self.took.as_millis() as u64,
            deadline_ms = self.deadline.as_millis() as u64,
            loops_stopped = self.report.loops_stopped,
            loops_aborted = self.report.loops_aborted,
            "shutdown {outcome} in {} ms of {} ms",
            self.took.as_millis(),
            self.deadline.as_millis(),
        );
    }
}

impl Stopped {
    /// Why connections were still open at the deadline: walks still
    /// running (the pool did not drain), or, with the pool drained,
    /// responses their clients have not read.
    pub fn cut_cause(&self) -> &'static str {
        if self.report.drained() {
            "responses not read by their clients"
        } else {
            "requests waiting on walks that had not ended"
        }
    }

    fn log_cut(&self) {
        tracing::warn!(
            open = self.connections.open,
            pool_drained = self.report.drained(),
            cause = self.cut_cause(),
            "connections still open at the deadline ({}); left to the exit",
            self.cut_cause()
        );
    }
}

impl Exporter {
    /// Fills the registry with `config.series` series and starts the gate's
    /// worker threads.
    ///
    /// # Errors
    ///
    /// A configuration error (0 workers, a zero deadline, coalescing with a
    /// gate other than admission) or a thread that could not start, as an
    /// [`io::Error`].
    pub fn new(config: Config) -> io::Result<Exporter> {
        let gauge = WalkGauge::default();
        let cardinality = Gauge::default();
        let backend = Backend::new(
            config.gate,
            config.workers,
            config.coalesce,
            gauge.queued.clone(),
        )
        .map_err(io::Error::other)?;
        let shutdown = Shutdown::new(config.shutdown_deadline).map_err(io::Error::other)?;
        let mut registry = demo_registry("exporter_demo_events", config.series);
        gauge.register(&mut registry);
        registry.register(
            "exporter_cardinality_series",
            "Series counted by the last background cardinality walk.",
            cardinality.clone(),
        );
        let connections = ConnectionMetrics::default();
        connections.register(&mut registry);
        let trace = match config.trace_entries {
            0 => None,
            entries => Some(Trace::new(entries).map_err(io::Error::other)?),
        };
        if let Some(pool) = backend.pool() {
            if let Some(trace) = &trace {
                pool.trace_into(trace).map_err(io::Error::other)?;
            }
            pool.set_shadow(config.shadow);
            let metrics = AdmissionMetrics::new();
            metrics.add(pool);
            metrics.register(&mut registry);
            super::backends::publish(
                &metrics,
                config.metrics_backend,
                config.cardinality_interval,
            )?;
            shutdown.register(pool);
        }
        let held = HeldBytes::new(config.max_held);
        register_held(&mut registry, &held);
        let walker = Walker::new(registry, config.walk_delay, gauge.clone());
        let app = Arc::new(App {
            backend,
            walker,
            held,
            gauge,
            cardinality,
            workers: config.workers,
            readiness: Readiness::new(&shutdown),
            trust_peers: config.trust_peers,
            write_timeout: config.connections.write_timeout(),
            trace,
        });
        Ok(Exporter {
            app,
            shutdown,
            config,
            connections,
        })
    }

    /// The walk gauge (running, peak, queued), readable while serving.
    pub fn walks(&self) -> WalkGauge {
        self.app.gauge.clone()
    }

    /// Serves on `listener` until `shutdown_signal` completes, then turns
    /// not ready, serves on for the drain delay, and shuts down by the
    /// configured deadline counted from the end of the delay.
    ///
    /// With the admission gate the responses a balancer sees
    /// ([`LOAD_REPORT_ROUTES`]: `/metrics`, `/` and `/readyz`) carry the
    /// walk pool's load in `endpoint-load-metrics` ([`ReportLoad`]); with
    /// `agent_check` set, HAProxy's agent checks are answered there
    /// ([`AgentCheck`]) until shutdown ends. Both tell whoever asks how
    /// busy the replica is: bind the agent port where only the balancer
    /// reaches it (a private address), never on the public interface.
    ///
    /// Connections are admitted as `config.connections` says (see
    /// [`admission_axum::serve()`]). On the signal it stops accepting
    /// connections, closes the ones waiting for a request, lets requests
    /// in flight finish, drains the walk pool (queued walks are cancelled)
    /// and stops the cardinality loop, all concurrently and none past the
    /// deadline.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future drops the server task's handle
    /// but not the server, which serves on.
    ///
    /// # Errors
    ///
    /// An [`io::Error`] when the agent-check address cannot be bound, or
    /// when the server stopped before any signal.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown_signal: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<Stopped> {
        let Exporter {
            app,
            shutdown,
            config,
            connections,
        } = self;
        let readiness = app.readiness.clone();
        let report = app.backend.pool().map(LoadReport::new);
        let agent = match config.agent_check {
            Some(addr) => {
                let agent = AgentCheck::new(readiness.clone(), report.clone().unwrap_or_default());
                let bound = TcpListener::bind(addr).await?;
                Some(tokio::spawn(agent.serve(bound)))
            }
            None => None,
        };
        spawn_cardinality(&shutdown, Arc::clone(&app), config.cardinality_interval);

        let routes = match report {
            Some(report) => router(Arc::clone(&app)).layer(load_report(report)),
            None => router(Arc::clone(&app)),
        };
        let stop_accepting = CancellationToken::new();
        let server = admission_axum::serve(listener, routes)
            .limits(config.connections)
            .map_err(io::Error::other)?
            .with_graceful_shutdown(stop_accepting.clone().cancelled_owned());
        let counted = server.connections();
        connections.attach(counted.clone());
        let mut server = Serving::spawn(server.into_future(), stop_accepting);

        let signalled = server.until(shutdown_signal, &shutdown).await?;
        // The preStop delay: not ready at once, still serving (and
        // accepting) so the balancer looks and routes elsewhere first.
        readiness.withdraw_for(config.drain_delay).await;
        let deadline = Instant::now() + config.shutdown_deadline;
        tracing::info!(
            deadline_ms = config.shutdown_deadline.as_millis() as u64,
            "shutdown signal: no new connections; draining by the deadline"
        );
        let mut discarded = 0;
        let drained = server
            .drain(
                &shutdown,
                deadline,
                || {
                    if let Backend::Queue(queue) = &app.backend {
                        discarded = queue.close();
                    }
                },
                || (),
            )
            .await;
        if let Some(agent) = agent {
            agent.abort();
        }
        Ok(Stopped {
            gate: config.gate,
            report: drained.report,
            connections_cut: drained.cut.is_some(),
            discarded,
            deadline: config.shutdown_deadline,
            took: signalled.elapsed(),
            connections: counted.stats(),
        })
    }
}

/// Builds an [`Exporter`] from `config` and [serves](Exporter::serve) it.
///
/// # Cancel safety
///
/// As [`Exporter::serve`].
///
/// # Errors
///
/// As [`Exporter::new`] and [`Exporter::serve`].
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown_signal: impl Future<Output = ()> + Send + 'static,
) -> io::Result<Stopped> {
    Exporter::new(config)?
        .serve(listener, shutdown_signal)
        .await
}

/// The load header on the responses a balancer sees: the balanced walk
/// routes and its readiness probe, never `/healthz` or a `404`.
fn load_report(report: LoadReport) -> ReportLoad {
    ReportLoad::new(report).on_routes(LOAD_REPORT_ROUTES)
}

/// The routes whose responses carry `endpoint-load-metrics`.
pub const LOAD_REPORT_ROUTES: [&str; 3] = ["/metrics", "/", "/readyz"];

/// Exports the bytes held by bodies not yet sent.
fn register_held(registry: &mut prometheus_client::registry::Registry, held: &HeldBytes) {
    registry.register(
        "exporter_response_bytes_held",
        "Bytes held by response bodies not yet sent (a shared body counts once).",
        held.gauge.clone(),
    );
}

/// The background cardinality walk: first after one interval, then every
/// interval; it waits for a slot instead of failing, and stops when
/// shutdown begins.
fn spawn_cardinality(shutdown: &Shutdown, app: Arc<App>, every: Duration) {
    shutdown.spawn_lifespan(move |stop| async move {
        let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let walked = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                walked = app.walk(Admission::Wait) => walked,
            };
            match walked {
                Ok(walked) => {
                    let series = walked.stats.series;
                    app.cardinality
                        .set(i64::try_from(series).unwrap_or(i64::MAX));
                    tracing::info!(series, "cardinality walk");
                }
                Err(err) => tracing::warn!(class = err.class(), "cardinality walk failed"),
            }
        }
    });
}
