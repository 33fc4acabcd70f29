//! Serving one set of [`Endpoint`]s through any adapter, over real HTTP on
//! 127.0.0.1:0 (HTTP/1.1 for axum and actix-web, HTTP/2 for tonic), and
//! calling them with the adapter's own kind of client.
//!
//! axum runs under `axum::serve` on the test's own runtime and stops
//! gracefully; actix-web runs 2 workers in its own thread and
//! `actix_rt::System`, and stops with `ServerHandle::stop`; tonic runs
//! `Server::serve_with_incoming_shutdown` on the test's runtime, its routes
//! one gRPC service (`grpc`), called with tonic's client.
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
//! connection. A gRPC client that goes away cancels its call
//! (`RST_STREAM`) or closes its connection; tonic (hyper) drops the
//! handler's future or the response stream at once either way.

use std::net::SocketAddr;

use actix_web::dev::ServerHandle;
use admission_core::{Class, RequestPools};
use admission_http::Trust;
use admission_http::body::ProgressTimeout;
use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::client::{Headers, Reply, client, get_with, hang_up_later, stall_body, within};
use super::endpoints::{Endpoint, Fed, METRICS, READ, WALK, Watch};

// A child of the harness, so that every suite that shares the harness
// (`conformance`, `hostile`) has it.
#[path = "grpc.rs"]
mod grpc;

/// An adapter, and how its admission middleware is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapter {
    Axum(AxumMount),
    Actix(ActixMount),
    Tonic(TonicMount),
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

/// Where the tonic layer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TonicMount {
    /// `Server::builder().layer(AdmissionLayer::new(pools))`.
    Server,
    /// `add_service(AdmissionLayer::new(pools).named_layer(routes))`.
    Service,
}

/// How the middleware is configured, the same way on every adapter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Config {
    /// A request whose class is full waits in the class pool's queue
    /// (`.queue()`) instead of being refused at once.
    pub(crate) queue: bool,
    /// Whose headers are honoured: `Trust::Peers` is `.trust_peers()`.
    pub(crate) trust: Trust,
    /// Requests to the route [`BYPASSED`] pass with no lease
    /// (`.bypass(..)`).
    pub(crate) bypass: bool,
    /// Refusals carry the app's own page ([`OWN_PAGE`], as HTML) instead
    /// of the problem document (`.refusal_body(..)`; HTTP only).
    pub(crate) own_page: bool,
    /// How long a response may let a chunk lie unread
    /// (`.progress_timeout(..)`); the middleware's default if `None`.
    pub(crate) progress: Option<ProgressTimeout>,
    /// The app names each request's flow from its [`TENANT_HEADER`]
    /// (`.flow(..)`), standing for the tenant an authenticating layer
    /// vouched for.
    pub(crate) flow: bool,
    /// Each request takes this many slots of its class (`.cost(..)`).
    pub(crate) cost: Option<std::num::NonZeroU8>,
}

/// The header the app's flow closure reads (over gRPC, the metadata key):
/// in an app, what its authentication vouched for; to the middleware, the
/// app's word.
pub(crate) const TENANT_HEADER: &str = "x-tenant";

/// The app's flow for a request, as the harness configures it: its
/// [`TENANT_HEADER`], cloned (a reference count, no copy of the bytes).
pub(crate) fn app_flow(head: &http::request::Parts) -> Option<http::HeaderValue> {
    head.headers.get(TENANT_HEADER).cloned()
}

/// The route a bypassing middleware lets through (over gRPC, its method
/// `Health`).
pub(crate) const BYPASSED: &str = "/health";

/// The app's own refusal page.
pub(crate) const OWN_PAGE: &str = "<h1>We are busy</h1>";

/// The bypass the harness configures: the last path segment is
/// [`BYPASSED`]'s, in either case (HTTP `/health`, gRPC `/pkg.Svc/Health`).
pub(crate) fn bypassed(head: &http::request::Parts) -> bool {
    head.uri
        .path()
        .rsplit('/')
        .next()
        .is_some_and(|last| last.eq_ignore_ascii_case(&BYPASSED[1..]))
}

/// The app's own page for every refusal, as the harness configures it.
pub(crate) fn own_page(
    _refusal: &admission_core::Refusal,
    _head: &http::request::Parts,
) -> Option<(http::HeaderValue, bytes::Bytes)> {
    Some((
        http::HeaderValue::from_static(super::endpoints::HTML),
        bytes::Bytes::from_static(OWN_PAGE.as_bytes()),
    ))
}

impl Config {
    /// `layer`, made to trust peers with `trust_peers` if this says so.
    fn trusting<L>(self, layer: L, trust_peers: impl FnOnce(L) -> L) -> L {
        match self.trust {
            Trust::Nobody => layer,
            Trust::Peers => trust_peers(layer),
        }
    }

    /// `layer`, given this config's progress bound with `progress_timeout`
    /// if it sets one.
    fn bounded<L>(self, layer: L, progress_timeout: impl FnOnce(L, ProgressTimeout) -> L) -> L {
        match self.progress {
            Some(bound) => progress_timeout(layer, bound),
            None => layer,
        }
    }
}

/// The prefix of the routes under [`ActixMount::Scope`].
const SCOPE: &str = "/scoped";

impl Adapter {
    /// axum with a router-wide layer.
    pub(crate) const AXUM: Adapter = Adapter::Axum(AxumMount::Router);
    /// actix-web with `App::wrap`.
    pub(crate) const ACTIX: Adapter = Adapter::Actix(ActixMount::App);
    /// tonic with `Server::builder().layer(..)`.
    pub(crate) const TONIC: Adapter = Adapter::Tonic(TonicMount::Server);

    /// Serves `routes` (all `GET`, or gRPC methods) behind admission over
    /// `pools`, failing fast and trusting nobody (the defaults).
    pub(crate) async fn serve(self, pools: &RequestPools, routes: Routes) -> Server {
        self.serve_with(pools, routes, Config::default()).await
    }

    /// [`serve`](Self::serve) with the middleware configured as `config`
    /// says.
    pub(crate) async fn serve_with(
        self,
        pools: &RequestPools,
        routes: Routes,
        config: Config,
    ) -> Server {
        match self {
            Adapter::Axum(mount) => axum_app::serve(mount, pools, routes, config).await,
            Adapter::Actix(mount) => actix_app::serve(mount, pools, routes, config),
            Adapter::Tonic(mount) => tonic_app::serve(mount, pools, routes, config).await,
        }
    }

    /// The request class the routes lease from with the middleware's
    /// default classification: a `GET` is *control*; a gRPC call to a
    /// service other than health or reflection is *work*.
    pub(crate) fn class(self) -> Class {
        match self {
            Adapter::Axum(_) | Adapter::Actix(_) => Class::Control,
            Adapter::Tonic(_) => Class::Work,
        }
    }

    /// Whether the adapter's layer (or middleware) refuses, where it is
    /// built, a cost that a class of `pools` cannot hold.
    pub(crate) fn refuses_cost_at_build(
        self,
        pools: &RequestPools,
        cost: std::num::NonZeroU8,
    ) -> bool {
        match self {
            Adapter::Axum(_) => admission_axum::AdmissionLayer::new(pools.clone())
                .cost(cost)
                .is_err(),
            Adapter::Actix(_) => admission_actix::AdmissionControl::new(pools.clone())
                .cost(cost)
                .is_err(),
            Adapter::Tonic(_) => admission_tonic::AdmissionLayer::new(pools.clone())
                .cost(cost)
                .is_err(),
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
    protocol: Protocol,
    /// The middleware's count of `critical` claims read as `default`.
    lowered: Lowered,
    stop: Option<Stop>,
}

/// Reads a middleware's `lowered_claims()`.
type Lowered = Box<dyn Fn() -> u64 + Send + Sync>;

/// How a server's routes are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http,
    Grpc,
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
    Tonic {
        shutdown: oneshot::Sender<()>,
        task: JoinHandle<Result<(), tonic::transport::Error>>,
    },
}

/// A request whose client goes away when this is dropped: a raw socket
/// closed (HTTP), or a call cancelled with its connection (gRPC).
pub(crate) enum HangUp {
    // Held, never read: dropping it closes the socket.
    #[allow(dead_code)]
    Socket(TcpStream),
    Call(JoinHandle<()>),
}

impl Drop for HangUp {
    fn drop(&mut self) {
        if let HangUp::Call(call) = self {
            call.abort();
        }
    }
}

/// An answer read chunk by chunk (HTTP) or message by message (gRPC).
pub(crate) enum Streamed {
    Http(reqwest::Response),
    Grpc(tonic::codec::Streaming<grpc::Text>),
}

impl Streamed {
    /// The next chunk or message; `None` at the end.
    pub(crate) async fn next(&mut self, what: &str) -> Option<Bytes> {
        match self {
            Streamed::Http(response) => within(what, response.chunk())
                .await
                .expect("the body streams"),
            Streamed::Grpc(messages) => within(what, messages.message())
                .await
                .expect("the stream ends with status OK")
                .map(|text| text.data),
        }
    }
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

    /// The URL of route `path`, for an HTTP server.
    pub(crate) fn url(&self, path: &str) -> String {
        assert_eq!(self.protocol, Protocol::Http, "an HTTP server");
        format!("http://{}{}", self.addr, self.path(path))
    }

    /// Calls route `path` on a fresh connection and reads the whole answer.
    pub(crate) async fn get(&self, path: &str) -> Reply {
        self.call(path, &[]).await
    }

    /// [`get`](Self::get), sending `headers` (over gRPC, as metadata).
    pub(crate) async fn get_with(&self, path: &str, headers: Headers) -> Reply {
        self.call(path, headers).await
    }

    /// [`get`](Self::get) in a task of its own, for a request the test holds.
    pub(crate) fn spawn_get(&self, path: &str) -> JoinHandle<Reply> {
        tokio::spawn(self.call(path, &[]))
    }

    /// [`get_with`](Self::get_with) in a task of its own.
    pub(crate) fn spawn_get_with(&self, path: &str, headers: Headers) -> JoinHandle<Reply> {
        tokio::spawn(self.call(path, headers))
    }

    /// A call of route `path` with `headers`, owning what it needs.
    fn call(&self, path: &str, headers: Headers) -> impl Future<Output = Reply> + Send + 'static {
        let (protocol, addr) = (self.protocol, self.addr);
        let target = match protocol {
            Protocol::Http => self.url(path),
            Protocol::Grpc => path.to_owned(),
        };
        async move {
            match protocol {
                Protocol::Http => Reply::Http(get_with(&target, headers).await),
                Protocol::Grpc => {
                    let what = format!("an answer from {target}");
                    Reply::Grpc(within(&what, grpc::call(addr, &target, headers)).await)
                }
            }
        }
    }

    /// How many requests claiming `critical` the middleware admitted as
    /// `default` (its `lowered_claims()`).
    pub(crate) fn lowered_claims(&self) -> u64 {
        (self.lowered)()
    }

    /// Sends a request for route `path` and leaves it open: dropping the
    /// returned [`HangUp`] is the client going away mid-request.
    pub(crate) async fn hang_up_later(&self, path: &str) -> HangUp {
        match self.protocol {
            Protocol::Http => HangUp::Socket(hang_up_later(self.addr(), &self.path(path)).await),
            Protocol::Grpc => {
                let (addr, path) = (self.addr(), path.to_owned());
                HangUp::Call(tokio::spawn(async move {
                    let _ = grpc::call(addr, &path, &[]).await;
                }))
            }
        }
    }

    /// Begins a request of route `path` whose body stops after one byte
    /// (over gRPC, a call whose message stops after one byte); dropping
    /// the returned [`HangUp`] closes the client.
    pub(crate) async fn stall_body(&self, path: &str) -> HangUp {
        match self.protocol {
            Protocol::Http => HangUp::Socket(stall_body(self.addr(), &self.path(path)).await),
            Protocol::Grpc => HangUp::Call(grpc::stall(self.addr(), path).await),
        }
    }

    /// Calls route `path` over HTTP/2 with a stream window of 0 and returns
    /// once the answer's head has come; dropping the returned [`HangUp`]
    /// closes the client.
    pub(crate) async fn shut_window(&self, path: &str) -> HangUp {
        let (route, grpc) = match self.protocol {
            Protocol::Http => (self.path(path), false),
            Protocol::Grpc => (grpc::path(path), true),
        };
        HangUp::Call(grpc::shut_window(self.addr(), route, grpc).await)
    }

    /// Calls route `path` and returns the answer's head, `200 OK` or a
    /// gRPC stream, to be read chunk by chunk.
    pub(crate) async fn open_stream(&self, path: &str) -> Streamed {
        match self.protocol {
            Protocol::Http => {
                let send = client().get(self.url(path)).send();
                let response = within("the stream's head", send)
                    .await
                    .expect("the server answers");
                assert_eq!(response.status(), reqwest::StatusCode::OK);
                Streamed::Http(response)
            }
            Protocol::Grpc => {
                let head = within("the stream's head", grpc::open(self.addr, path, &[])).await;
                Streamed::Grpc(head.expect("the call is admitted"))
            }
        }
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
            Stop::Tonic { shutdown, task } => {
                let _ = shutdown.send(());
                within("tonic to shut down gracefully", task)
                    .await
                    .expect("the server task did not panic")
                    .expect("the server ran without a transport error");
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
            Some(Stop::Tonic { task, .. }) => task.abort(),
            // `stop` sends its command at once; nobody waits for it here.
            Some(Stop::Actix { handle, .. }) => drop(handle.stop(false)),
            None => {}
        }
    }
}

mod axum_app {
    //! The axum side: handlers, the three mounts, `axum::serve`.

    use admission_axum::AdmissionLayer;
    use admission_core::{Admission, Caller, RequestPools};
    use axum::Router;
    use axum::body::Body;
    use axum::handler::Handler;
    use axum::http::header;
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use futures_util::StreamExt;
    use tokio::net::TcpListener;
    use tower_layer::Layer;

    use super::{
        AxumMount, Config, Endpoint, Fed, Lowered, METRICS, READ, Routes, Server, Stop, WALK, Watch,
    };

    /// One endpoint's answer, as an axum handler gives it.
    async fn answer(endpoint: Endpoint, body: Body) -> Response {
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
            Endpoint::Criticality => Caller::current().criticality().as_str().into_response(),
            Endpoint::Deep(pool) => crate::endpoints::deep(&pool)
                .map_err(|error| admission_axum::Rejection::from_error(&error))
                .into_response(),
            Endpoint::Upload => match axum::body::to_bytes(body, usize::MAX).await {
                Ok(_) => READ.into_response(),
                Err(_) => axum::http::StatusCode::REQUEST_TIMEOUT.into_response(),
            },
        }
    }

    /// The router with `$layer` mounted as `$mount` says: a macro, since
    /// a queueing layer is a type of its own.
    macro_rules! mounted {
        ($mount:expr, $layer:expr, $routes:expr) => {{
            let (mount, layer) = ($mount, $layer);
            let mut router = Router::new();
            for (path, endpoint) in $routes.0 {
                let handler = move |body: Body| answer(endpoint.clone(), body);
                router = match mount {
                    AxumMount::Router => router.route(path, get(handler)),
                    AxumMount::Route => router.route(path, get(handler).layer(layer.clone())),
                    AxumMount::RouteService => {
                        router.route_service(path, layer.layer(handler.with_state(())))
                    }
                };
            }
            match mount {
                AxumMount::Router => router.layer(layer),
                AxumMount::Route | AxumMount::RouteService => router,
            }
        }};
    }

    fn router(
        mount: AxumMount,
        pools: &RequestPools,
        routes: Routes,
        config: Config,
    ) -> (Router, Lowered) {
        let layer = config.trusting(
            AdmissionLayer::new(pools.clone()),
            AdmissionLayer::trust_peers,
        );
        let layer = if config.bypass {
            layer.bypass(super::bypassed)
        } else {
            layer
        };
        let layer = if config.own_page {
            layer.refusal_body(super::own_page)
        } else {
            layer
        };
        let layer = config.bounded(layer, AdmissionLayer::progress_timeout);
        let layer = if config.flow {
            layer.flow(super::app_flow)
        } else {
            layer
        };
        let layer = match config.cost {
            Some(cost) => layer.cost(cost).expect("both classes hold the cost"),
            None => layer,
        };
        let counted = layer.clone();
        let router = if config.queue {
            mounted!(mount, layer.queue(), routes)
        } else {
            mounted!(mount, layer, routes)
        };
        (router, Box::new(move || counted.lowered_claims()))
    }

    pub(super) async fn serve(
        mount: AxumMount,
        pools: &RequestPools,
        routes: Routes,
        config: Config,
    ) -> Server {
        let (router, lowered) = router(mount, pools, routes, config);
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
            protocol: super::Protocol::Http,
            lowered,
            stop: Some(Stop::Axum { shutdown, task }),
        }
    }
}

mod actix_app {
    //! The actix-web side: handlers, the two mounts, a 2-worker server in a
    //! thread and `actix_rt::System` of its own.

    use actix_web::{App, HttpResponse, HttpServer, web};
    use admission_actix::AdmissionControl;
    use admission_core::{Admission, Caller, RequestPools};
    use futures_util::StreamExt;

    use super::{
        ActixMount, Config, Endpoint, Fed, METRICS, READ, Routes, SCOPE, Server, Stop, WALK, Watch,
    };

    /// One endpoint's answer, as an actix-web handler gives it: registry
    /// errors go out through `?` and core's `ResponseError`.
    async fn answer(
        endpoint: Endpoint,
        body: web::Payload,
    ) -> Result<HttpResponse, actix_web::Error> {
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
            Endpoint::Criticality => {
                Ok(HttpResponse::Ok().body(Caller::current().criticality().as_str()))
            }
            Endpoint::Deep(pool) => {
                let text = crate::endpoints::deep(&pool)
                    .map_err(|error| admission_actix::Rejection::from_error(&error))?;
                Ok(HttpResponse::Ok().body(text))
            }
            Endpoint::Upload => Ok(match body.to_bytes().await {
                Ok(_) => HttpResponse::Ok().body(READ),
                Err(_) => HttpResponse::RequestTimeout().finish(),
            }),
        }
    }

    fn configure(routes: Routes) -> impl Fn(&mut web::ServiceConfig) + Clone + 'static {
        move |cfg| {
            for (path, endpoint) in &routes.0 {
                let endpoint = endpoint.clone();
                cfg.route(
                    path,
                    web::get().to(move |body: web::Payload| answer(endpoint.clone(), body)),
                );
            }
        }
    }

    /// The head the harness's hooks read (its path), from actix-web's
    /// request: actix-web 4 speaks `http` 0.2.
    fn head(req: &actix_web::dev::ServiceRequest) -> http::request::Parts {
        http::Request::get(req.path())
            .body(())
            .expect("a path actix-web parsed is a valid URI")
            .into_parts()
            .0
    }

    pub(super) fn serve(
        mount: ActixMount,
        pools: &RequestPools,
        routes: Routes,
        config: Config,
    ) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let admission = AdmissionControl::new(pools.clone());
        let admission = if config.queue {
            admission.queue()
        } else {
            admission
        };
        let admission = config.trusting(admission, AdmissionControl::trust_peers);
        let admission = config.bounded(admission, AdmissionControl::progress_timeout);
        // actix-web 4 speaks `http` 0.2: the same header, read from its own
        // request type.
        let admission = if config.flow {
            admission.flow(|req| req.headers().get(super::TENANT_HEADER).cloned())
        } else {
            admission
        };
        let admission = match config.cost {
            Some(cost) => admission.cost(cost).expect("both classes hold the cost"),
            None => admission,
        };
        let admission = if config.bypass {
            admission.bypass(|req| super::bypassed(&head(req)))
        } else {
            admission
        };
        let admission = if config.own_page {
            admission.refusal_body(|refusal, req| {
                let (content_type, page) = super::own_page(refusal, &head(req))?;
                Some((
                    actix_web::http::header::HeaderValue::from_bytes(content_type.as_bytes())
                        .ok()?,
                    page,
                ))
            })
        } else {
            admission
        };
        // Every worker's clone counts with this one.
        let counted = admission.clone();
        let configure = configure(routes);
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_rt::System::new().block_on(async move {
                let server = match mount {
                    ActixMount::App => HttpServer::new(move || {
                        App::new()
                            .wrap(admission.clone())
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
                                .wrap(admission.clone())
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
            protocol: super::Protocol::Http,
            lowered: Box::new(move || counted.lowered_claims()),
            stop: Some(Stop::Actix { handle, thread }),
        }
    }
}

mod tonic_app {
    //! The tonic side: the routes as one gRPC service, the two mounts, a
    //! server on the test's runtime.

    use admission_core::RequestPools;
    use admission_tonic::AdmissionLayer;
    use tokio::net::TcpListener;
    use tonic::service::LayerExt as _;
    use tonic::transport::Server as TonicServer;
    use tonic::transport::server::TcpIncoming;

    use super::grpc;
    use super::{Config, Protocol, Routes, Server, Stop, TonicMount};

    pub(super) async fn serve(
        mount: TonicMount,
        pools: &RequestPools,
        routes: Routes,
        config: Config,
    ) -> Server {
        let service = grpc::Routes::new(routes.0);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let incoming = TcpIncoming::from(listener);
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let stopped = async move {
            let _ = stopped.await;
        };
        let layer = config.trusting(
            AdmissionLayer::new(pools.clone()),
            AdmissionLayer::trust_peers,
        );
        let layer = if config.bypass {
            layer.bypass(super::bypassed)
        } else {
            layer
        };
        let layer = config.bounded(layer, AdmissionLayer::progress_timeout);
        let layer = if config.flow {
            layer.flow(super::app_flow)
        } else {
            layer
        };
        let layer = match config.cost {
            Some(cost) => layer.cost(cost).expect("both classes hold the cost"),
            None => layer,
        };
        let counted = layer.clone();
        // A macro, since a queueing layer is a type of its own.
        macro_rules! spawn_with {
            ($layer:expr) => {
                match mount {
                    TonicMount::Server => tokio::spawn(
                        TonicServer::builder()
                            .layer($layer)
                            .add_service(service)
                            .serve_with_incoming_shutdown(incoming, stopped),
                    ),
                    TonicMount::Service => tokio::spawn(
                        TonicServer::builder()
                            .add_service($layer.named_layer(service))
                            .serve_with_incoming_shutdown(incoming, stopped),
                    ),
                }
            };
        }
        let task = if config.queue {
            spawn_with!(layer.queue())
        } else {
            spawn_with!(layer)
        };
        Server {
            addr,
            prefix: "",
            protocol: Protocol::Grpc,
            lowered: Box::new(move || counted.lowered_claims()),
            stop: Some(Stop::Tonic { shutdown, task }),
        }
    }
}
