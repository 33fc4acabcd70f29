//! Connection admission for actix-web: an app served from the shared
//! accept loop, so the connection bound, eviction, the header, idle and
//! write timeouts and descriptor exhaustion hold as on axum and tonic
//! (feature `serve`).
//!
//! This module owns [`serve`], [`Serve`] and [`Server`]. It hands each
//! admitted connection ([`admission_http::connection::Incoming`]) to an
//! actix-web worker thread, which serves it with `actix-http`'s HTTP/1
//! service over the app. It must never parse HTTP itself and never count
//! or log what the accept loop counts: what is bounded, counted and
//! logged is described once in [`admission_http::connection`].
//!
//! actix-web's own `HttpServer` cannot evict: at its bound a worker stops
//! accepting, so slow senders re-filling the bound keep a health route
//! waiting in the backlog for up to `2 × client_request_timeout +
//! client_disconnect_timeout`. Here a newcomer evicts the connection that
//! has waited longest for a request head, as on axum. The header and idle
//! timeouts are the accept loop's (actix-web's own timers are off); a
//! client that closes its side (FIN) counts as gone
//! (`h1_allow_half_closed(false)`), so its work is orphaned at once.
//! HTTP/1.1 only.
//!
//! # Examples
//!
//! ```
//! use actix_web::{App, web};
//! use admission_actix::serve::{ConnectionLimits, serve};
//!
//! # #[actix_web::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let addr = listener.local_addr()?;
//! let server = serve(|| App::new().route("/healthz", web::get().to(|| async { "ok\n" })))
//!     .limits(ConnectionLimits::new().with_max_connections(64))?
//!     .workers(1)
//!     .listen(listener)?;
//!
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let mut socket = tokio::net::TcpStream::connect(addr).await?;
//! socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await?;
//! let mut answer = String::new();
//! socket.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
//!
//! let connections = server.connections();
//! server.stop().await;
//! assert_eq!((connections.stats().accepted, connections.stats().open), (1, 0));
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use actix_http::body::{BodySize, MessageBody};
use actix_http::{HttpService, KeepAlive, Protocol, Request};
use actix_service::{IntoServiceFactory, Service, ServiceFactory, map_config};
use actix_web::dev::{AppConfig, ServiceResponse};
use admission_http::connection::{Connection, InFlight, Incoming, Requests};
use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

pub use admission_http::connection::{ConnectionLimits, ConnectionStats, Connections};

/// An admitted connection on its way to a worker.
type Handoff = (Connection<TcpStream>, SocketAddr);

/// Serves the actix-web app that `factory` builds (one per worker, as
/// `HttpServer::new` takes it) under [`ConnectionLimits`]: set them with
/// [`Serve::limits`], the worker threads with [`Serve::workers`], and
/// start with [`Serve::listen`].
pub fn serve<F>(factory: F) -> Serve<F> {
    Serve {
        factory,
        limits: ConnectionLimits::new(),
        workers: 1,
    }
}

/// A server not yet listening: built by [`serve`].
#[must_use = "a server does nothing until it listens"]
pub struct Serve<F> {
    factory: F,
    limits: ConnectionLimits,
    workers: usize,
}

impl<F> fmt::Debug for Serve<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("limits", &self.limits)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<F> Serve<F> {
    /// The same server under `limits`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`](admission_core::ConfigError::ZeroSetting) naming a setting that is zero.
    pub fn limits(self, limits: ConnectionLimits) -> Result<Serve<F>, admission_core::ConfigError> {
        limits.validate()?;
        Ok(Serve { limits, ..self })
    }

    /// The same server on `workers` threads (at least 1), each with its own
    /// app, as actix-web's `HttpServer::workers`.
    pub fn workers(self, workers: usize) -> Serve<F> {
        Serve {
            workers: workers.max(1),
            ..self
        }
    }

    /// Starts the accept loop on the current tokio runtime (an actix
    /// system's) and the worker threads, serving until [`Server::stop`].
    ///
    /// # Errors
    ///
    /// The listener cannot be made non-blocking or registered, or a
    /// worker's runtime or thread cannot be started (out of descriptors).
    pub fn listen<I, S, B>(self, listener: std::net::TcpListener) -> io::Result<Server>
    where
        F: Fn() -> I + Send + Clone + 'static,
        I: IntoServiceFactory<S, Request>,
        S: ServiceFactory<
                Request,
                Config = AppConfig,
                Response = ServiceResponse<B>,
                Error = actix_web::Error,
            > + 'static,
        S::InitError: fmt::Debug,
        S::Future: 'static,
        S::Service: 'static,
        B: MessageBody + 'static,
    {
        listener.set_nonblocking(true)?;
        // The workers' runtimes first: they hold descriptors (a poller
        // each), which the default connection bound, counted as the accept
        // loop is built, must leave room for. A runtime that cannot be
        // built is this call's error, not a worker thread's panic.
        let runtimes = (0..self.workers)
            .map(|_| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
            })
            .collect::<io::Result<Vec<_>>>()?;
        let incoming = Incoming::new(TcpListener::from_std(listener)?, self.limits)
            .map_err(io::Error::other)?;
        let connections = incoming.connections();
        let mut handoffs = Vec::with_capacity(self.workers);
        let mut finished = Vec::with_capacity(self.workers);
        for (index, runtime) in runtimes.into_iter().enumerate() {
            let (handoff, connections_in) = mpsc::unbounded_channel::<Handoff>();
            let (done, ended) = oneshot::channel();
            let factory = self.factory.clone();
            std::thread::Builder::new()
                .name(format!("admission-actix-{index}"))
                .spawn(move || {
                    actix_rt::System::with_tokio_rt(move || runtime)
                        .block_on(work(factory, connections_in));
                    let _ = done.send(());
                })?;
            handoffs.push(handoff);
            finished.push(ended);
        }
        let (stop, stopped) = oneshot::channel();
        let accepting = tokio::spawn(accept(incoming, handoffs, stopped));
        Ok(Server {
            connections,
            stop,
            accepting,
            finished,
        })
    }
}

/// A running server, from [`Serve::listen`].
#[derive(Debug)]
pub struct Server {
    connections: Connections,
    stop: oneshot::Sender<()>,
    accepting: tokio::task::JoinHandle<()>,
    finished: Vec<oneshot::Receiver<()>>,
}

impl Server {
    /// The live counters of this server's connections.
    pub fn connections(&self) -> Connections {
        self.connections.clone()
    }

    /// Stops gracefully: stops accepting, closes the connections waiting
    /// for a request head (and each one that becomes idle after its
    /// response), lets requests in flight finish, and resolves once every
    /// worker has served its last connection.
    ///
    /// # Cancel safety
    ///
    /// Bound it with a deadline of your own (`tokio::time::timeout`):
    /// dropping the future leaves the workers finishing on their threads,
    /// which the process exit ends.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        drop(self.accepting.await);
        self.connections.close_waiting();
        for ended in self.finished {
            drop(ended.await);
        }
    }
}

/// The accept loop: admitted connections, round-robin to the workers,
/// until `stopped` fires.
async fn accept(
    mut incoming: Incoming<TcpListener>,
    workers: Vec<mpsc::UnboundedSender<Handoff>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut next = 0;
    loop {
        let admitted = poll_fn(|cx| {
            if Pin::new(&mut stopped).poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            incoming.poll_admit(cx).map(Some)
        })
        .await;
        let Some(mut handoff) = admitted else { return };
        // Tracked from the accept, not from when its worker gets to it: a
        // connection waiting in a worker's queue may be evicted at the
        // bound (after those the server has read from), rather than make
        // every newcomer be refused while the workers catch up.
        let _requests = handoff.0.requests();
        // A worker whose thread ended hands the connection back.
        for _ in 0..workers.len() {
            next = (next + 1) % workers.len();
            match workers[next].send(handoff) {
                Ok(()) => break,
                Err(mpsc::error::SendError(back)) => handoff = back,
            }
        }
    }
}

/// One worker: builds the app, serves each connection it is handed on a
/// task of its own, and ends when the accept loop has stopped and its
/// last connection has closed.
async fn work<F, I, S, B>(factory: F, mut connections: mpsc::UnboundedReceiver<Handoff>)
where
    F: Fn() -> I,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<
            Request,
            Config = AppConfig,
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
        > + 'static,
    S::InitError: fmt::Debug,
    S::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    let app = map_config(factory(), |()| AppConfig::default());
    let http = HttpService::build()
        // The accept loop's header and idle timeouts replace actix-web's.
        .client_request_timeout(Duration::ZERO)
        .keep_alive(KeepAlive::Os)
        .client_disconnect_timeout(Duration::from_secs(1))
        .h1_allow_half_closed(false)
        .on_connect_ext(|io: &Connection<TcpStream>, ext| {
            ext.insert(io.requests());
        })
        .finish(tracked_requests(app));
    let service = match http.new_service(()).await {
        Ok(service) => Rc::new(service),
        Err(_) => {
            tracing::error!(
                code = "ADMISSION_WORKER_FAILED",
                "an actix-web worker could not build its app; its connections go to the others"
            );
            return;
        }
    };
    let mut served = tokio::task::JoinSet::new();
    while let Some((io, peer)) = connections.recv().await {
        let service = Rc::clone(&service);
        served.spawn_local(async move {
            // A connection's end (closed, timed out, evicted) is counted
            // by the accept loop; nothing to add here.
            drop(service.call((io, Protocol::Http1, Some(peer))).await);
        });
        while served.try_join_next().is_some() {}
    }
    while served.join_next().await.is_some() {}
}

/// The app with each request marking its connection busy until its
/// response body has ended.
fn tracked_requests<T, B>(
    app: T,
) -> impl ServiceFactory<
    Request,
    Config = (),
    Response = actix_http::Response<InFlightBody<B>>,
    Error = actix_web::Error,
    InitError = T::InitError,
>
where
    T: ServiceFactory<
            Request,
            Config = (),
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
        >,
    T::Service: 'static,
    B: MessageBody + 'static,
{
    actix_service::apply_fn_factory(app, |request: Request, service: &T::Service| {
        let in_flight = request.conn_data::<Requests>().map(Requests::begin);
        let response = service.call(request);
        async move {
            let response = response.await?;
            Ok(response
                .map_body(|_, body| InFlightBody { body, in_flight })
                .into())
        }
    })
}

pin_project_lite::pin_project! {
    /// A response body that keeps its connection busy until it ends.
    #[derive(Debug)]
    pub(crate) struct InFlightBody<B> {
        #[pin]
        body: B,
        in_flight: Option<InFlight>,
    }
}

impl<B: MessageBody> MessageBody for InFlightBody<B> {
    type Error = B::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.project();
        let chunk = ready!(this.body.poll_next(cx));
        if chunk.is_none() {
            drop(this.in_flight.take());
        }
        Poll::Ready(chunk)
    }
}
