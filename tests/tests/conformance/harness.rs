//! Serving one set of [`Endpoint`]s through either adapter, over real HTTP
//! on 127.0.0.1:0.
//!
//! axum runs under `axum::serve` on the test's own runtime and stops
//! gracefully; actix-web runs 2 workers in its own thread and
//! `actix_rt::System`, and stops with `ServerHandle::stop`.
//!
//! # A client that goes away
//!
//! hyper (under axum) watches a connection's read side while a response is
//! pending or streaming, and drops the handler's future or the response
//! body as soon as the client closes its socket. actix-web does the same
//! only with `h1_allow_half_closed(false)`; with its default (`true`) a
//! closed read side is taken for a half-closed client, and the handler or
//! body is dropped only when a later write to the client fails (a streamed
//! body that keeps writing chunks, or a handler that eventually answers).
//! The actix-web servers here set `h1_allow_half_closed(false)`, so the
//! same cases hold for both adapters without the test writing into a dead
//! connection.

use std::net::SocketAddr;

use actix_web::dev::ServerHandle;
use admission_core::RequestPools;
use tokio::sync::oneshot;

use super::client::within;
use super::endpoints::{Endpoint, Fed, METRICS, WALK, Watch};

/// An adapter, and how its admission middleware is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapter {
    Axum(AxumMount),
    Actix(ActixMount),
}

/// Where the axum layer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AxumMount {
    /// `Router::new().route(..).layer(AdmissionLayer::new(pools))`.
    Router,
    /// `get(handler).layer(AdmissionLayer::new(pools))` on each route.
    Route,
    /// `route_service(path, AdmissionLayer::new(pools).layer(service))`.
    RouteService,
}

/// Where the actix-web middleware goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActixMount {
    /// `App::new().wrap(AdmissionControl::new(pools))`.
    App,
    /// `web::scope(SCOPE).wrap(AdmissionControl::new(pools))`.
    Scope,
}

/// The prefix of the routes under [`ActixMount::Scope`].
const SCOPE: &str = "/scoped";

impl Adapter {
    /// axum with a router-wide layer.
    pub(crate) const AXUM: Adapter = Adapter::Axum(AxumMount::Router);
    /// actix-web with `App::wrap`.
    pub(crate) const ACTIX: Adapter = Adapter::Actix(ActixMount::App);

    /// Serves `routes` (all `GET`) behind admission over `pools`.
    pub(crate) async fn serve(self, pools: &RequestPools, routes: Routes) -> Server {
        match self {
            Adapter::Axum(mount) => axum_app::serve(mount, pools, routes).await,
            Adapter::Actix(mount) => actix_app::serve(mount, pools, routes),
        }
    }
}

/// The routes of one app: a path and what it does.
#[derive(Clone, Default)]
pub(crate) struct Routes(Vec<(&'static str, Endpoint)>);

impl Routes {
    pub(crate) fn new() -> Routes {
        Routes::default()
    }

    /// Adds `GET path`.
    pub(crate) fn route(mut self, path: &'static str, endpoint: Endpoint) -> Routes {
        self.0.push((path, endpoint));
        self
    }
}

/// A running server.
pub(crate) struct Server {
    addr: SocketAddr,
    prefix: &'static str,
    stop: Option<Stop>,
}

enum Stop {
    Axum {
        shutdown: oneshot::Sender<()>,
        task: tokio::task::JoinHandle<std::io::Result<()>>,
    },
    Actix {
        handle: ServerHandle,
        thread: std::thread::JoinHandle<std::io::Result<()>>,
    },
}

impl Server {
    /// The server's socket address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The request path of route `path` (with the scope's prefix, if any).
    pub(crate) fn path(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// The URL of route `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, self.path(path))
    }

    /// Stops the server and waits until it has stopped.
    pub(crate) async fn stop(mut self) {
        match self.stop.take().expect("stopped once") {
            Stop::Axum { shutdown, task } => {
                let _ = shutdown.send(());
                within("axum to shut down gracefully", task)
                    .await
                    .expect("the server task did not panic")
                    .expect("the server ran without an I/O error");
            }
            Stop::Actix { handle, thread } => {
                within("actix-web to stop", handle.stop(false)).await;
                within(
                    "the actix-web thread to end",
                    tokio::task::spawn_blocking(move || thread.join()),
                )
                .await
                .expect("join task")
                .expect("the server thread did not panic")
                .expect("the server ran without an I/O error");
            }
        }
    }
}

impl Drop for Server {
    /// A test that failed before [`Server::stop`] still stops its server.
    fn drop(&mut self) {
        match self.stop.take() {
            Some(Stop::Axum { task, .. }) => task.abort(),
            // `stop` sends its command at once; nobody waits for it here.
            Some(Stop::Actix { handle, .. }) => drop(handle.stop(false)),
            None => {}
        }
    }
}

mod axum_app {
    //! The axum side: handlers, the three mounts, `axum::serve`.

    use admission_axum::AdmissionLayer;
    use admission_core::{Admission, RequestPools};
    use axum::Router;
    use axum::body::Body;
    use axum::handler::Handler;
    use axum::http::header;
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use futures_util::StreamExt;
    use tokio::net::TcpListener;
    use tower_layer::Layer;

    use super::{AxumMount, Endpoint, Fed, METRICS, Routes, Server, Stop, WALK, Watch};

    /// One endpoint's answer, as an axum handler gives it.
    async fn answer(endpoint: Endpoint) -> Response {
        match endpoint {
            Endpoint::Registry {
                pool,
                walk,
                content_type,
                watch,
            } => {
                let mut watch = Watch::new(watch);
                let text = pool.run(walk, Admission::FailFast).await;
                watch.complete();
                text.map(|text| ([(header::CONTENT_TYPE, content_type)], text))
                    .map_err(admission_axum::Rejection::from)
                    .into_response()
            }
            Endpoint::Coalesced { scrapes, walk } => scrapes
                .run(WALK, walk, Admission::FailFast)
                .await
                .map(|text| ([(header::CONTENT_TYPE, METRICS)], text))
                .map_err(admission_axum::Rejection::from)
                .into_response(),
            Endpoint::Stream(feeds) => {
                let chunks = Fed::new(&feeds).map(Ok::<_, std::convert::Infallible>);
                Body::from_stream(chunks).into_response()
            }
            Endpoint::Gated(gate) => {
                gate.pass().await;
                "done".into_response()
            }
        }
    }

    fn router(mount: AxumMount, pools: &RequestPools, routes: Routes) -> Router {
        let layer = || AdmissionLayer::new(pools.clone());
        let mut router = Router::new();
        for (path, endpoint) in routes.0 {
            let handler = move || answer(endpoint.clone());
            router = match mount {
                AxumMount::Router => router.route(path, get(handler)),
                AxumMount::Route => router.route(path, get(handler).layer(layer())),
                AxumMount::RouteService => {
                    router.route_service(path, layer().layer(handler.with_state(())))
                }
            };
        }
        match mount {
            AxumMount::Router => router.layer(layer()),
            AxumMount::Route | AxumMount::RouteService => router,
        }
    }

    pub(super) async fn serve(mount: AxumMount, pools: &RequestPools, routes: Routes) -> Server {
        let router = router(mount, pools, routes);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Server {
            addr,
            prefix: "",
            stop: Some(Stop::Axum { shutdown, task }),
        }
    }
}

mod actix_app {
    //! The actix-web side: handlers, the two mounts, a 2-worker server in a
    //! thread and `actix_rt::System` of its own.

    use actix_web::{App, HttpResponse, HttpServer, web};
    use admission_actix::AdmissionControl;
    use admission_core::{Admission, RequestPools};
    use futures_util::StreamExt;

    use super::{ActixMount, Endpoint, Fed, METRICS, Routes, SCOPE, Server, Stop, WALK, Watch};

    /// One endpoint's answer, as an actix-web handler gives it: registry
    /// errors go out through `?` and core's `ResponseError`.
    async fn answer(endpoint: Endpoint) -> Result<HttpResponse, actix_web::Error> {
        match endpoint {
            Endpoint::Registry {
                pool,
                walk,
                content_type,
                watch,
            } => {
                let mut watch = Watch::new(watch);
                let text = pool.run(walk, Admission::FailFast).await;
                watch.complete();
                let text = text.map_err(admission_actix::Rejection::from)?;
                Ok(HttpResponse::Ok().content_type(content_type).body(text))
            }
            Endpoint::Coalesced { scrapes, walk } => {
                let text = scrapes.run(WALK, walk, Admission::FailFast).await;
                let text = text.map_err(admission_actix::Rejection::from)?;
                Ok(HttpResponse::Ok().content_type(METRICS).body(text))
            }
            Endpoint::Stream(feeds) => {
                let chunks = Fed::new(&feeds).map(Ok::<_, actix_web::Error>);
                Ok(HttpResponse::Ok().streaming(chunks))
            }
            Endpoint::Gated(gate) => {
                gate.pass().await;
                Ok(HttpResponse::Ok().body("done"))
            }
        }
    }

    fn configure(routes: Routes) -> impl Fn(&mut web::ServiceConfig) + Clone + 'static {
        move |cfg| {
            for (path, endpoint) in &routes.0 {
                let endpoint = endpoint.clone();
                cfg.route(path, web::get().to(move || answer(endpoint.clone())));
            }
        }
    }

    pub(super) fn serve(mount: ActixMount, pools: &RequestPools, routes: Routes) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let (pools, configure) = (pools.clone(), configure(routes));
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_rt::System::new().block_on(async move {
                let server = match mount {
                    ActixMount::App => HttpServer::new(move || {
                        App::new()
                            .wrap(AdmissionControl::new(pools.clone()))
                            .configure(configure.clone())
                    })
                    .workers(2)
                    // See the module docs: notice a client's hang-up at once.
                    .h1_allow_half_closed(false)
                    .disable_signals()
                    .listen(listener)?
                    .run(),
                    ActixMount::Scope => HttpServer::new(move || {
                        App::new().service(
                            web::scope(SCOPE)
                                .wrap(AdmissionControl::new(pools.clone()))
                                .configure(configure.clone()),
                        )
                    })
                    .workers(2)
                    .h1_allow_half_closed(false)
                    .disable_signals()
                    .listen(listener)?
                    .run(),
                };
                handle_tx
                    .send(server.handle())
                    .expect("the test is waiting");
                server.await
            })
        });
        let handle = handle_rx.recv().expect("the server started");
        let prefix = match mount {
            ActixMount::App => "",
            ActixMount::Scope => SCOPE,
        };
        Server {
            addr,
            prefix,
            stop: Some(Stop::Actix { handle, thread }),
        }
    }
}
