//! The soak's service, served through either adapter on 127.0.0.1:0:
//! `GET /metrics?ms=MS&fault=F` runs a [`Walk`] on the registry pool behind
//! the admission middleware, and `GET /healthz` answers `ok` outside it, as
//! the examples mount their probes.
//!
//! Each server runs in a thread of its own, apart from the clients'
//! runtime, as a service would: axum under `axum::serve` on a 2-worker
//! tokio runtime, actix-web with 2 workers in an `actix_rt::System`, with
//! `h1_allow_half_closed(false)` so that a client hanging up drops its
//! handler at once (see the conformance harness).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use admission_core::{Pool, RequestPools};
use tokio::sync::oneshot;

use super::walk::{Gauge, Walk};

/// The content type of an exposition.
const METRICS: &str = "text/plain; version=0.0.4";

/// How long stopping a server may take.
const STOP: Duration = Duration::from_secs(10);

/// The adapter under soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapter {
    Axum,
    Actix,
}

impl Adapter {
    /// The adapter's name, as the summary prints it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Adapter::Axum => "axum",
            Adapter::Actix => "actix",
        }
    }

    /// Serves the soak's routes with request leases from `requests` and
    /// walks on `registry`.
    pub(crate) fn serve(self, requests: &RequestPools, registry: Registry) -> Server {
        match self {
            Adapter::Axum => axum_app::serve(requests, registry),
            Adapter::Actix => actix_app::serve(requests, registry),
        }
    }
}

/// What the `/metrics` handler walks on.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    pub(crate) pool: Pool,
    pub(crate) gauge: Arc<Gauge>,
}

impl Registry {
    fn walk(&self, query: &str) -> Walk {
        Walk::from_query(query, &self.gauge)
    }
}

/// A running server.
pub(crate) struct Server {
    addr: SocketAddr,
    stop: Option<Stop>,
}

enum Stop {
    Axum {
        shutdown: oneshot::Sender<()>,
        thread: std::thread::JoinHandle<std::io::Result<()>>,
    },
    Actix {
        handle: ServerHandle,
        thread: std::thread::JoinHandle<std::io::Result<()>>,
    },
}

/// Waits, at most [`STOP`], for a server's thread to end.
async fn join(thread: std::thread::JoinHandle<std::io::Result<()>>) {
    tokio::time::timeout(STOP, tokio::task::spawn_blocking(move || thread.join()))
        .await
        .expect("the server thread ends in time")
        .expect("join task")
        .expect("the server thread did not panic")
        .expect("the server ran without an I/O error");
}

impl Server {
    /// The server's socket address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and waits, at most [`STOP`], until it has stopped.
    pub(crate) async fn stop(mut self) {
        match self.stop.take().expect("stopped once") {
            Stop::Axum { shutdown, thread } => {
                let _ = shutdown.send(());
                join(thread).await;
            }
            Stop::Actix { handle, thread } => {
                tokio::time::timeout(STOP, handle.stop(false))
                    .await
                    .expect("actix-web stops in time");
                join(thread).await;
            }
        }
    }
}

impl Drop for Server {
    /// A soak that failed before [`Server::stop`] still stops its server.
    fn drop(&mut self) {
        match self.stop.take() {
            // Dropping the sender stops axum gracefully; nobody waits.
            Some(Stop::Axum { shutdown, .. }) => drop(shutdown),
            Some(Stop::Actix { handle, .. }) => drop(handle.stop(false)),
            None => {}
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

mod axum_app {
    //! The axum side: the layer over `/metrics` only, `/healthz` added
    //! after it.

    use admission_axum::AdmissionLayer;
    use admission_core::RequestPools;
    use axum::Router;
    use axum::extract::{RawQuery, State};
    use axum::http::header;
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use tokio::net::TcpListener;

    use admission_core::Admission;

    use super::{METRICS, Registry, Server, Stop, healthz};

    async fn metrics(State(registry): State<Registry>, RawQuery(query): RawQuery) -> Response {
        let walk = registry.walk(query.as_deref().unwrap_or_default());
        let run = registry.pool.run(walk, Admission::FailFast);
        match registry.gauge.in_flight_while(run).await {
            Ok(text) => ([(header::CONTENT_TYPE, METRICS)], text).into_response(),
            Err(err) => admission_axum::Rejection::from(err).into_response(),
        }
    }

    pub(super) fn serve(requests: &RequestPools, registry: Registry) -> Server {
        let router = Router::new()
            .route("/metrics", get(metrics))
            // `Router::layer` wraps the routes added so far: not `/healthz`.
            .layer(AdmissionLayer::new(requests.clone()))
            .route("/healthz", get(healthz))
            .with_state(registry);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                axum::serve(TcpListener::from_std(listener)?, router)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
            })
        });
        Server {
            addr,
            stop: Some(Stop::Axum { shutdown, thread }),
        }
    }
}

mod actix_app {
    //! The actix-web side: the middleware on a scope holding `/metrics`,
    //! `/healthz` on the app beside it.

    use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
    use admission_actix::AdmissionControl;
    use admission_core::RequestPools;

    use admission_core::Admission;

    use super::{METRICS, Registry, Server, Stop, healthz};

    async fn metrics(
        request: HttpRequest,
        registry: web::Data<Registry>,
    ) -> Result<HttpResponse, actix_web::Error> {
        let walk = registry.walk(request.query_string());
        let run = registry.pool.run(walk, Admission::FailFast);
        let text = registry.gauge.in_flight_while(run).await;
        let text = text.map_err(admission_actix::Rejection::from)?;
        Ok(HttpResponse::Ok().content_type(METRICS).body(text))
    }

    pub(super) fn serve(requests: &RequestPools, registry: Registry) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let (requests, registry) = (requests.clone(), web::Data::new(registry));
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_rt::System::new().block_on(async move {
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(registry.clone())
                        .route("/healthz", web::get().to(healthz))
                        .service(
                            web::scope("")
                                .wrap(AdmissionControl::new(requests.clone()))
                                .route("/metrics", web::get().to(metrics)),
                        )
                })
                .workers(2)
                // Notice a client's hang-up at once (see the module docs).
                .h1_allow_half_closed(false)
                .disable_signals()
                .listen(listener)?
                .run();
                handle_tx
                    .send(server.handle())
                    .expect("the test is waiting");
                server.await
            })
        });
        let handle = handle_rx.recv().expect("the server started");
        Server {
            addr,
            stop: Some(Stop::Actix { handle, thread }),
        }
    }
}
