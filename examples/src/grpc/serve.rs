//! Building the gRPC exporter, serving it, and stopping it under one
//! deadline.
//!
//! This module owns [`GrpcExporter`], [`serve`] and [`Stopped`]. On the
//! signal the health service turns `NOT_SERVING` (a balancer stops sending
//! new calls), the server stops accepting and lets open calls finish, and
//! the walk pool drains, all concurrently and none past the deadline:
//! blocked worker threads cannot be joined, so the caller's process exit is
//! the fallback.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use admission_core::metrics::AdmissionMetrics;
use admission_core::shutdown::{CancellationToken, ShutdownReport};
use admission_core::{Pool, RequestPools, Shutdown};
use admission_http::body::ProgressTimeout;
use admission_tonic::AdmissionLayer;
use admission_tonic::connections::{self, ConnectionStats};
use futures_util::TryFutureExt as _;
use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use super::methods::KnownMethodsLayer;
use super::proto::RegistryServer;
use super::service::{App, Backend};
use super::{Config, Gate};
use crate::stop::Serving;
use crate::walk::{WalkGauge, Walker, demo_registry};

/// A built gRPC exporter, not yet serving.
///
/// Building it fills the registry and starts the worker threads; serving it
/// needs a tokio runtime.
///
/// # Examples
///
/// ```
/// use admission_examples::grpc::{Config, GrpcExporter, RegistryClient, WalkRequest};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let exporter = GrpcExporter::new(Config { series: 10, ..Config::default() })?;
/// let walks = exporter.walks();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = listener.local_addr()?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(exporter.serve(listener, async { let _ = stopped.await; }));
///
/// let mut client = RegistryClient::connect(format!("http://{addr}")).await?;
/// let exposition = client.walk(WalkRequest::default()).await?.into_inner();
/// assert!(exposition.text.contains(r#"grpc_exporter_demo_events_total{series="series-9"} 9"#));
/// assert!(exposition.series > 10, "the demo series and admission's own");
/// assert_eq!(walks.started(), 1);
///
/// stop.send(()).unwrap();
/// assert!(server.await??.report.drained());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct GrpcExporter {
    app: Arc<App>,
    gauge: WalkGauge,
    requests: RequestPools,
    layer: AdmissionLayer,
    shutdown: Shutdown,
    config: Config,
}

/// How a served exporter stopped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Stopped {
    /// The gate the exporter ran with.
    pub gate: Gate,
    /// Per pool: drained or abandoned, with what was still running.
    pub report: ShutdownReport,
    /// Whether calls were still open at the deadline and were left to the
    /// process exit.
    pub connections_cut: bool,
    /// What was still open at the deadline, when calls were cut: the real
    /// cause of the wait.
    pub open_at_deadline: Option<OpenAtDeadline>,
    /// The connections the server accepted, evicted and timed out.
    pub connections: ConnectionStats,
    /// The configured deadline, counted from the signal.
    pub deadline: Duration,
    /// Time from the signal to the end of shutdown.
    pub took: Duration,
}

/// What kept a shutdown waiting until its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenAtDeadline {
    /// Walks still running on the registry's worker threads.
    pub walks: usize,
    /// Calls still holding a *work* lease (`Walk` waiting on its walk, or
    /// a `Stream` not yet read to its end).
    pub leased_calls: usize,
    /// Connections still open (health `Watch` streams, which take no
    /// lease, keep theirs open until their client goes).
    pub connections: usize,
}

impl Stopped {
    /// Logs the outcome's summary line; each pool's `drained` or
    /// `abandoned` line is logged by the shutdown itself.
    pub fn log(&self) {
        if let Some(open) = self.open_at_deadline {
            tracing::warn!(
                walks = open.walks,
                leased_calls = open.leased_calls,
                connections = open.connections,
                "at the deadline {} walks were running, {} calls held work leases and {} \
                 connections were open; left to the exit",
                open.walks,
                open.leased_calls,
                open.connections,
            );
        }
        let outcome = if self.report.drained() && !self.connections_cut {
            "drained"
        } else {
            "abandoned"
        };
        tracing::info!(
            gate = %self.gate,
            took_ms = self.took.as_millis() as u64,
            deadline_ms = self.deadline.as_millis() as u64,
            "shutdown {outcome} in {} ms of {} ms",
            self.took.as_millis(),
            self.deadline.as_millis(),
        );
    }
}

impl GrpcExporter {
    /// Fills the registry with `config.series` series and starts the gate's
    /// worker threads.
    ///
    /// # Errors
    ///
    /// A configuration error (0 workers or slots, a zero deadline, progress
    /// timeout or connection limit) as an [`io::Error`].
    pub fn new(config: Config) -> io::Result<GrpcExporter> {
        let requests =
            RequestPools::new(config.work_slots, config.control_slots).map_err(io::Error::other)?;
        let shutdown = Shutdown::new(config.shutdown_deadline).map_err(io::Error::other)?;
        let mut registry = demo_registry("grpc_exporter_demo_events", config.series);
        let backend = match config.gate {
            Gate::Admission => {
                let pool = Pool::new("registry", config.workers).map_err(io::Error::other)?;
                let metrics = AdmissionMetrics::new();
                metrics.add(&pool);
                metrics.add(&requests);
                metrics.register(&mut registry);
                shutdown.register(&pool);
                Backend::Admission(pool)
            }
            Gate::TonicLimit if config.workers == 0 => {
                return Err(io::Error::other("`workers` must be at least 1"));
            }
            Gate::TonicLimit => Backend::Blocking,
        };
        let progress = ProgressTimeout::new(config.progress_timeout).map_err(io::Error::other)?;
        config.connections.validate().map_err(io::Error::other)?;
        let gauge = WalkGauge::default();
        let walker = Walker::new(registry, config.walk_delay, gauge.clone());
        Ok(GrpcExporter {
            app: Arc::new(App { backend, walker }),
            gauge,
            layer: AdmissionLayer::new(requests.clone()).progress_timeout(progress),
            requests,
            shutdown,
            config,
        })
    }

    /// The walk gauge (running, peak, started), readable while serving.
    pub fn walks(&self) -> WalkGauge {
        self.gauge.clone()
    }

    /// The request pools the layer leases from (*work* for `Walk` and
    /// `Stream`; health checks take no lease).
    pub fn requests(&self) -> &RequestPools {
        &self.requests
    }

    /// The registry pool walks run on, with the admission gate.
    pub fn registry(&self) -> Option<&Pool> {
        match &self.app.backend {
            Backend::Admission(pool) => Some(pool),
            Backend::Blocking => None,
        }
    }

    /// The admission layer in front of every call (a clone: its
    /// [`malformed_headers`](AdmissionLayer::malformed_headers) counts
    /// for the server).
    pub fn layer(&self) -> AdmissionLayer {
        self.layer.clone()
    }

    /// Serves on `listener` until `shutdown_signal` completes, then shuts
    /// down by the configured deadline counted from that moment.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future drops the server task's handle
    /// but not the server, which serves on.
    ///
    /// # Errors
    ///
    /// An [`io::Error`] when the server stopped before any signal.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown_signal: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<Stopped> {
        let GrpcExporter {
            app,
            layer,
            shutdown,
            config,
            requests,
            ..
        } = self;
        let incoming =
            connections::incoming(listener, config.connections).map_err(io::Error::other)?;
        let connections = incoming.connections();
        let registry_pool = match &app.backend {
            Backend::Admission(pool) => Some(pool.clone()),
            Backend::Blocking => None,
        };
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter.set_serving::<RegistryServer>().await;
        let stop_accepting = CancellationToken::new();
        let registry = RegistryServer::new(app);
        let builder = connections::server(&config.connections, Server::builder());
        let stopped = stop_accepting.clone().cancelled_owned();
        let mut server = match config.gate {
            Gate::Admission => Serving::spawn(
                builder
                    .layer(KnownMethodsLayer)
                    // Its calls' request bodies under the progress bound too.
                    .layer(layer)
                    .add_service(health)
                    .add_service(registry)
                    .serve_with_incoming_shutdown(incoming, stopped)
                    .map_err(io::Error::other),
                stop_accepting,
            ),
            Gate::TonicLimit => Serving::spawn(
                builder
                    .concurrency_limit_per_connection(config.workers)
                    .load_shed(true)
                    .add_service(health)
                    .add_service(registry)
                    .serve_with_incoming_shutdown(incoming, stopped)
                    .map_err(io::Error::other),
                stop_accepting,
            ),
        };

        let signalled = server.until(shutdown_signal, &shutdown).await?;
        let deadline = signalled + config.shutdown_deadline;
        tracing::info!(
            deadline_ms = config.shutdown_deadline.as_millis() as u64,
            "shutdown signal: NOT_SERVING, no new connections; draining by the deadline"
        );
        not_serving(&reporter).await;
        let drained = server
            .drain(
                &shutdown,
                deadline,
                // Connections that never sent a preface would hold the
                // graceful shutdown to its deadline.
                || connections.close_waiting(),
                || OpenAtDeadline {
                    walks: registry_pool
                        .as_ref()
                        .map_or(0, |pool| pool.stats().running),
                    leased_calls: requests.pool(admission_core::Class::Work).stats().in_use,
                    connections: connections.stats().open,
                },
            )
            .await;
        Ok(Stopped {
            gate: config.gate,
            report: drained.report,
            connections_cut: drained.cut.is_some(),
            open_at_deadline: drained.cut,
            connections: connections.stats(),
            deadline: config.shutdown_deadline,
            took: signalled.elapsed(),
        })
    }
}

/// The whole server and the registry service turn `NOT_SERVING`.
async fn not_serving(reporter: &HealthReporter) {
    for service in ["", super::proto::SERVICE] {
        reporter
            .set_service_status(service, ServingStatus::NotServing)
            .await;
    }
}

/// Builds a [`GrpcExporter`] from `config` and [serves](GrpcExporter::serve) it.
///
/// # Cancel safety
///
/// As [`GrpcExporter::serve`].
///
/// # Errors
///
/// As [`GrpcExporter::new`] and [`GrpcExporter::serve`].
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown_signal: impl Future<Output = ()> + Send + 'static,
) -> io::Result<Stopped> {
    GrpcExporter::new(config)?
        .serve(listener, shutdown_signal)
        .await
}
