//! actix-web adapter for `admission`: every request holds a request lease
//! until its response body has been sent or dropped, a refused request gets
//! `503 Service Unavailable` (or `429`) with `Retry-After` and an
//! `application/problem+json` body, and a handler runs registry work in one
//! line and returns its refusal with `?`.
//!
//! * [`AdmissionControl`]: the middleware (a `Transform`) an app or scope
//!   `.wrap(...)`s. [`AdmissionControl::new`] leases by method (reads from
//!   *control*, mutations from *work*), [`AdmissionControl::class`] one
//!   class per scope, and [`AdmissionControl::classify`] by your closure.
//!   It makes an [`AdmissionMiddleware`], whose [`future::ResponseFuture`]
//!   answers with a [`body::LeasedBody`].
//! * [`Rejection`]: what a handler returns when admission or its work did
//!   not produce a response. `?` turns a core
//!   [`Refusal`](admission_core::Refusal) or
//!   [`WorkError`](admission_core::WorkError) into one, so registry work from
//!   a handler is one line:
//!   `pool.run(work, Admission::FailFast).await?`.
//! * [`CallerScope`]: the caller a request's headers describe, for apps that
//!   admit on their own pools (`Pool::run` in handlers, no lease), under the
//!   same trust policy as [`AdmissionControl`] (see its
//!   [`trust_peers`](AdmissionControl::trust_peers)).
//! * [`load_report::ReportLoad`][report-load] (feature `balancer`): the replica's load on every response, for
//!   Envoy's client-side weighted round robin.
//! * [`macro@admitted`] (feature `macros`, on by default): a lease for one
//!   handler.
//!
//! The answers themselves (status, headers, body) are core's
//! [`Problem`](admission_http::Problem), so this adapter and the
//! axum one send the same status, headers and bytes.
//!
//! # Examples
//!
//! A complete app: a `/metrics` endpoint whose registry walk runs on a
//! 1-slot pool, a streamed `/events` endpoint, and request leases for both.
//!
//! ```
//! use actix_web::{App, HttpResponse, test, web};
//! use admission_actix::{AdmissionControl, Rejection};
//! use admission_actix::HttpRefusalStatus;
//! use admission_http::Problem;
//! use admission_core::{Admission, Class, Pool, RequestPools};
//! use bytes::Bytes;
//!
//! async fn metrics(pool: web::Data<Pool>) -> Result<String, Rejection> {
//!     let walk = || Ok::<_, std::fmt::Error>("requests_total 7\n# EOF\n".to_owned());
//!     Ok(pool.run(walk, Admission::FailFast).await?)
//! }
//!
//! async fn events() -> HttpResponse {
//!     let chunks = ["a\n", "b\n"].map(|c| Ok::<_, actix_web::Error>(Bytes::from_static(c.as_bytes())));
//!     HttpResponse::Ok().streaming(futures_util::stream::iter(chunks))
//! }
//!
//! # #[actix_web::main]
//! # async fn main() {
//! // Built once, before the server starts: configuration errors surface here.
//! let requests = RequestPools::new(2, 4).unwrap();
//! let registry_pool = Pool::new("registry", 1).unwrap();
//!
//! // `HttpServer::new(move || ...)` would run this closure on every worker;
//! // each clone shares the same slots.
//! let app = {
//!     let (requests, registry_pool) = (requests.clone(), registry_pool.clone());
//!     move || {
//!         App::new()
//!             .wrap(AdmissionControl::new(requests.clone()))
//!             .app_data(web::Data::new(registry_pool.clone()))
//!             .route("/metrics", web::get().to(metrics))
//!             .route("/events", web::get().to(events))
//!     }
//! };
//! let app = test::init_service(app()).await;
//!
//! let req = test::TestRequest::get().uri("/metrics").to_request();
//! assert_eq!(test::call_and_read_body(&app, req).await, "requests_total 7\n# EOF\n");
//!
//! // The streamed body holds its control lease until its last chunk.
//! let res = test::call_service(&app, test::TestRequest::get().uri("/events").to_request()).await;
//! assert_eq!(requests.pool(Class::Control).stats().in_use, 1);
//! assert_eq!(test::read_body(res).await, "a\nb\n");
//! assert_eq!(requests.pool(Class::Control).stats().in_use, 0);
//!
//! // A walk holds the registry's only slot: a scrape is refused at once.
//! let _walking = registry_pool.try_admit().unwrap();
//! let res = test::call_service(&app, test::TestRequest::get().uri("/metrics").to_request()).await;
//! assert_eq!(res.status(), 503);
//! assert_eq!(res.headers().get("retry-after").unwrap(), "1");
//! assert_eq!(res.headers().get("cache-control").unwrap(), "no-store");
//! let expected = Problem::refusal(&registry_pool.try_admit().unwrap_err(), HttpRefusalStatus::default());
//! assert_eq!(test::read_body(res).await, expected.body(), "core's problem, byte for byte");
//! # }
//! ```
//!
//! # One handler: `#[admitted]`
//!
//! ```
//! use std::sync::LazyLock;
//!
//! use actix_web::{App, test, web};
//! use admission_actix::{AdmissionControl, admitted};
//! use admission_core::{Class, RequestPools};
//!
//! // `pools =` takes a static's path: one set of slots for the program.
//! static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());
//!
//! #[admitted(class = work, pools = POOLS)]
//! async fn create() -> &'static str {
//!     "created"
//! }
//!
//! # #[actix_web::main]
//! # async fn main() {
//! // Under a middleware of the same pools the handler shares the request's
//! // lease: one slot, so an idle server with one *work* slot still answers.
//! let app = test::init_service(
//!     App::new()
//!         .wrap(AdmissionControl::new(POOLS.clone()))
//!         .route("/items", web::post().to(create)),
//! )
//! .await;
//! let res = test::call_service(&app, test::TestRequest::post().uri("/items").to_request()).await;
//! assert_eq!(res.status(), 200);
//! assert_eq!(POOLS.pool(Class::Work).stats().refused, 0);
//! # }
//! ```
//!
//! # Connection admission: `HttpServer`'s own settings
//!
//! Request admission bounds the work requests start; a client that holds
//! connections with requests it never finishes (slowloris) is stopped a
//! layer below, by settings `HttpServer` already has (the axum adapter
//! brings its own, `admission_axum::serve`). Set them; the defaults do not
//! fit a service under hostile clients:
//!
//! | concern | `HttpServer` method | set it to | why |
//! | --- | --- | --- | --- |
//! | a bound on open connections | `max_connections(n)` (per worker; default 25 600) | three quarters of `RLIMIT_NOFILE`, divided by the workers | at the bound a worker stops accepting and newcomers wait in the listen backlog; above the descriptor limit, accepts fail with `Too many open files` instead |
//! | a request head that never ends | `client_request_timeout(d)` (default 5 s) | a few seconds | past it the client gets `408` and the connection closes |
//! | idle kept-alive connections | `keep_alive(d)` (default 5 s) | a few seconds | actix-web cannot evict an idle connection for a newcomer, so at the bound idle ones are what newcomers wait on |
//! | a client that closes its side | `h1_allow_half_closed(false)` (default `true`) | `false` | with `true`, a client that sent its request and closed (a FIN) still counts as connected: its handler runs on and its work is not counted as orphaned |
//! | closing a connection | `client_disconnect_timeout(d)` (default 1 s) | about a second | bounds how long a closing connection holds its descriptor |
//!
//! Unlike `admission_axum::serve`, actix-web has no eviction: while an
//! attacker holds every connection the bound allows, a newcomer (a health
//! probe too) waits in the backlog until `client_request_timeout` frees a
//! connection.
//!
//! **The limit these settings cannot pass**: with slow senders
//! re-filling the bound as soon as a connection frees, a newcomer waits in
//! the (first come, first served) listen backlog behind the attackers
//! accepted before it, so it is answered within about
//! `2 x client_request_timeout + client_disconnect_timeout + 1 s`, never
//! sooner than the attackers' connections time out: 4 s with a 1 s
//! `client_request_timeout`, 12 s with the default 5 s. The workflow test
//! `status_answers_within_the_documented_bound_while_slow_senders_refill_the_bound`
//! holds `/status` to that bound; what it measured is in the repository's
//! RELIABILITY.md. The header timeout is the
//! knob: keep it as short as the slowest honest client allows, and keep
//! health probes off the attacked listener (a second, private
//! `HttpServer` with its own bound) where that is not short enough. actix-web also logs one `ERROR` per malformed request
//! (target `actix_http::h1::dispatcher`) and one per failed accept every
//! 500 ms (`actix_server::accept`); the example services filter those
//! targets and log a count at most every 10 s instead.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use actix_web::{App, HttpServer, web};
//!
//! # #[actix_web::main]
//! # async fn main() -> std::io::Result<()> {
//! let workers = 2;
//! HttpServer::new(|| App::new().route("/healthz", web::get().to(|| async { "ok\n" })))
//!     .workers(workers)
//!     .max_connections(768 / workers)
//!     .client_request_timeout(Duration::from_secs(5))
//!     .keep_alive(Duration::from_secs(5))
//!     .h1_allow_half_closed(false)
//!     .client_disconnect_timeout(Duration::from_secs(1))
//!     .bind("127.0.0.1:8080")?
//!     .run()
//!     .await
//! # }
//! ```
// A link to an item behind a feature resolves to the item with the
// feature on and to its docs.rs page (built with every feature) without,
// so the docs build without warnings either way.
#![cfg_attr(feature = "balancer", doc = "[report-load]: load_report::ReportLoad")]
#![cfg_attr(
    not(feature = "balancer"),
    doc = "[report-load]: https://docs.rs/admission-actix/latest/admission_actix/load_report/struct.ReportLoad.html"
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

pub mod body;
mod caller;
mod classify;
#[doc(hidden)]
pub mod future;
#[cfg(feature = "balancer")]
#[cfg_attr(docsrs, doc(cfg(feature = "balancer")))]
pub use admission_http::balancer;
#[cfg(feature = "balancer")]
#[cfg_attr(docsrs, doc(cfg(feature = "balancer")))]
pub mod load_report;
mod middleware;
mod rejection;
mod request_body;
#[cfg(feature = "serve")]
#[cfg_attr(docsrs, doc(cfg(feature = "serve")))]
pub mod serve;
mod transform;

pub use admission_http::HttpRefusalStatus;

pub use crate::caller::{CallerScope, CallerScopeMiddleware};
pub use crate::middleware::AdmissionMiddleware;
pub use crate::rejection::Rejection;
pub use crate::transform::AdmissionControl;

#[cfg(feature = "macros")]
pub use admission_macros::admitted_actix as admitted;

/// What `#[admitted]` generates code against; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::Rejection;
    pub use admission_core::{Admission, Caller, Class, Criticality, RequestPools};
}
