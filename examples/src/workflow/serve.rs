//! Building the workflow service, serving it, and stopping it under one
//! deadline.
//!
//! This module owns [`Workflow`], `AppState` and [`Stopped`]. The
//! admission middleware wraps only the `/operations` scope, so `/healthz`,
//! `/readyz` and `/status` are never refused; the responses a balancer
//! sees (`/operations/*` and `/readyz`) and the operator's `/status` carry
//! the request pools' load (`endpoint-load-metrics`), no other does. At the signal readiness
//! turns and the service serves on through the drain delay; then shutdown
//! counts its deadline and never waits past it: blocked worker threads
//! cannot be joined, so the caller's process exit is the fallback.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, Resource, Route, web};
use admission_actix::AdmissionControl;
use admission_actix::load_report::ReportLoad;
use admission_core::shutdown::ShutdownReport;
use admission_core::{ConfigError, RequestPools, Shutdown};
use admission_http::balancer::{AgentCheck, LoadReport, Readiness};
use tokio::time::Instant;

use super::Config;
use super::loops::Loops;
use super::operations::{self, Store};
use super::owners::NativeDispatcher;
use super::{problem, status};

/// The routes whose responses carry `endpoint-load-metrics`: the balanced
/// scope, the balancer's readiness probe, and the operator's `/status`
/// (which shows the same load in full).
pub const LOAD_REPORT_ROUTES: [&str; 3] = ["/operations/*", "/readyz", "/status"];

/// The resource at `path` served by `route` alone: any other method is a
/// `405` problem document.
fn only(path: &str, route: Route) -> Resource {
    web::resource(path)
        .route(route)
        .default_service(web::to(problem::method_not_allowed))
}

/// What every actix-web worker's handlers share.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) requests: RequestPools,
    pub(crate) store: Store,
    pub(crate) loops: Loops,
    pub(crate) readiness: Readiness,
}

/// A built workflow service, not yet serving: pools, reservations and their
/// worker threads exist; the loops start when it serves.
///
/// # Examples
///
/// ```
/// use admission_examples::workflow::{Config, Workflow};
///
/// let workflow = Workflow::new(Config::default()).unwrap();
/// let status = workflow.status();
/// assert_eq!(status["pools"]["work"]["capacity"], 2);
/// assert_eq!(status["pools"]["native"]["capacity"], 2 + 3 + 1);
/// assert_eq!(status["loops"]["broker"]["cycles"], 0, "loops start when it serves");
/// ```
#[derive(Debug)]
pub struct Workflow {
    state: Arc<AppState>,
    shutdown: Shutdown,
    config: Config,
}

/// How a served workflow stopped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Stopped {
    /// Per pool: drained or abandoned, with what was still running; and the
    /// loops stopped or aborted.
    pub report: ShutdownReport,
    /// Whether the HTTP server finished its in-flight requests before the
    /// deadline (otherwise they were left to the process exit).
    pub server_stopped: bool,
    /// The configured deadline, counted from the signal.
    pub deadline: Duration,
    /// Time from the signal to the end of shutdown.
    pub took: Duration,
}

impl Stopped {
    /// Logs the outcome's summary line; each pool's `drained` or
    /// `abandoned` line (with what was still running) is logged by the
    /// shutdown itself.
    pub fn log(&self) {
        if !self.server_stopped {
            tracing::warn!("requests still in flight at the deadline; left to the exit");
        }
        let outcome = if self.report.drained() && self.server_stopped {
            "drained"
        } else {
            "abandoned"
        };
        tracing::info!(
            client_errors = crate::cli::client_errors(),
            took_ms = self.took.as_millis() as u64,
            deadline_ms = self.deadline.as_millis() as u64,
            loops_stopped = self.report.loops_stopped,
            loops_aborted = self.report.loops_aborted,
            "shutdown {outcome}"
        );
    }
}

impl Workflow {
    /// Builds the request pools, the loop owners' reservations and the
    /// shutdown coordinator, and registers every pool with it.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a class of 0 slots, native capacities too large,
    /// or a zero shutdown deadline.
    pub fn new(config: Config) -> Result<Workflow, ConfigError> {
        let requests = RequestPools::new(config.work_slots, config.control_slots)?;
        let shutdown = Shutdown::new(config.shutdown_deadline)?;
        let dispatcher = NativeDispatcher::new(config.native_capacities.clone())?;
        let loops = Loops::new(dispatcher);
        shutdown.register(&requests);
        for entry in loops.entries() {
            shutdown.register(entry.reservation.pool());
        }
        Ok(Workflow {
            state: Arc::new(AppState {
                readiness: Readiness::new(&shutdown),
                requests,
                store: Store::default(),
                loops,
            }),
            shutdown,
            config,
        })
    }

    /// The `/status` document as it stands.
    pub fn status(&self) -> serde_json::Value {
        status::document(&self.state)
    }

    /// The routes: `/operations` behind admission, `/healthz` and `/status`
    /// outside it; a method a route does not serve is a `405` and any
    /// other path a `404`, both problem documents.
    fn configure(state: &Arc<AppState>, cfg: &mut web::ServiceConfig) {
        cfg.app_data(web::Data::from(Arc::clone(state)))
            .service(
                web::scope("/operations")
                    .wrap(AdmissionControl::new(state.requests.clone()))
                    .service(only("", web::post().to(operations::create)))
                    .service(only("/{id}", web::get().to(operations::read)))
                    .default_service(web::to(problem::not_found)),
            )
            .service(only("/healthz", web::get().to(status::healthz)))
            .service(only("/readyz", web::get().to(status::readyz)))
            .service(only("/status", web::get().to(status::status)));
    }

    /// Starts the loops, serves on `listener` until `signal` completes,
    /// turns not ready and serves on for the drain
    /// delay, then stops the server and shuts down every pool and loop
    /// concurrently, by one deadline counted from the end of the delay.
    /// With `agent_check` set, HAProxy's agent checks are answered there
    /// until shutdown ends.
    ///
    /// Call it inside an actix system (`#[actix_web::main]`).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping it mid-shutdown leaves pools closed and
    /// the server stopping.
    ///
    /// # Errors
    ///
    /// The I/O error of a listener the server cannot take, or a worker
    /// thread that cannot start.
    pub async fn serve(
        self,
        listener: std::net::TcpListener,
        signal: impl Future<Output = ()>,
    ) -> io::Result<Stopped> {
        let Workflow {
            state,
            shutdown,
            config,
        } = self;
        let routes = Arc::clone(&state);
        let workers = config.http_workers.max(1);
        let report = LoadReport::new(&state.requests);
        let agent = match config.agent_check {
            Some(addr) => {
                let agent = AgentCheck::new(state.readiness.clone(), report.clone());
                let bound = tokio::net::TcpListener::bind(addr).await?;
                Some(actix_web::rt::spawn(agent.serve(bound)))
            }
            None => None,
        };
        // Connection admission (`admission_actix::serve`, the accept loop
        // axum and tonic use): one bound over all workers, at which a
        // newcomer evicts the connection that has waited longest for a
        // request head; a head must arrive within the header timeout (else
        // the connection closes); an idle kept-alive connection closes after
        // the idle timeout; and a client that closes its side (FIN) counts
        // as gone, so its work is orphaned and counted as such, as with a
        // reset.
        let limits = crate::cli::connection_limits(config.max_connections)
            .with_header_timeout(config.header_timeout)
            .with_idle_timeout(config.idle_timeout);
        let server = admission_actix::serve::serve(move || {
            let routes = Arc::clone(&routes);
            App::new()
                .configure(move |cfg| Workflow::configure(&routes, cfg))
                .default_service(web::to(problem::not_found))
                .wrap(ReportLoad::new(report.clone()).on_routes(LOAD_REPORT_ROUTES))
        })
        .limits(limits)
        .map_err(io::Error::other)?
        .workers(workers)
        .listen(listener)?;
        state.loops.spawn(&shutdown, &state.requests, config.cycle);
        signal.await;
        let signalled = Instant::now();
        // The preStop delay: not ready at once, still serving (and
        // accepting) so the balancer looks and routes elsewhere first.
        state.readiness.withdraw_for(config.drain_delay).await;
        let deadline = Instant::now() + config.shutdown_deadline;
        let stop_server = async {
            tokio::time::timeout_at(deadline, server.stop())
                .await
                .is_ok()
        };
        let (server_stopped, report) = tokio::join!(stop_server, shutdown.shutdown_by(deadline));
        if let Some(agent) = agent {
            agent.abort();
        }
        Ok(Stopped {
            report,
            server_stopped,
            deadline: config.shutdown_deadline,
            took: signalled.elapsed(),
        })
    }
}
