//! axum adapter for `admission`: every request holds a request lease until
//! its response body has been sent or dropped, a refused request gets
//! `503 Service Unavailable` (or `429`) with `Retry-After` and an
//! `application/problem+json` body, and a handler runs registry work in one
//! line and returns its refusal with `?`.
//!
//! * [`AdmissionLayer`]: the tower layer, `admission-http`'s middleware,
//!   which every adapter shares. [`AdmissionLayer::new`] leases by method
//!   (reads from *control*, mutations from *work*), [`AdmissionLayer::class`]
//!   one class per route, and [`AdmissionLayer::classify`] by your closure
//!   over the request head; [`queue()`](AdmissionLayer::queue) lets a
//!   request wait in the class pool's bounded queue,
//!   [`trust_peers()`](AdmissionLayer::trust_peers) honours the criticality
//!   and budget headers of trusted peers (see [Trust](#trust)), and
//!   [`refusal_status`](AdmissionLayer::refusal_status) answers `429`. It
//!   makes an [`AdmissionService`], whose [`future::ResponseFuture`]
//!   answers with a [`body::LeasedBody`].
//! * [`CallerLayer`]: the caller a request's headers describe, for apps that
//!   admit on their own pools (`Pool::run` in handlers, no lease), under the
//!   same trust policy.
//! * [`load_report::ReportLoad`][report-load] (feature `balancer`): the replica's load on every response, for
//!   Envoy's client-side weighted round robin.
//! * [`Rejection`]: what a handler returns when admission or its work did
//!   not produce a response. `?` turns a core
//!   [`Refusal`](admission_core::Refusal) or
//!   [`WorkError`](admission_core::WorkError) into one, so registry work from
//!   a handler is one line:
//!   `pool.run(work, Admission::FailFast).await?`.
//! * [`macro@admitted`] (feature `macros`, on by default): a lease for one
//!   handler.
//! * [`serve()`][serve-fn] (feature `serve`, off by default): `axum::serve` with
//!   connection admission, for what request admission cannot see: a bound
//!   on open connections with eviction of the oldest waiting one,
//!   header-read, idle and write-progress timeouts, so a client holding
//!   connections with unfinished requests (slowloris) or never reading its
//!   responses cannot take the process off the air. See the
//!   [`serve`][serve-mod] module.
//!
//! The answers themselves (status, headers, body) are `admission-http`'s
//! [`Problem`](admission_http::Problem), so every adapter sends the same
//! bytes.
//!
//! # Trust
//!
//! By default nobody's headers are trusted: `x-admission-criticality:
//! sheddable` is honoured from anyone, but a `critical` claim is admitted as
//! `default` (and counted, [`AdmissionLayer::lowered_claims`]), and a budget
//! header refuses at once or shortens a wait, never lengthens a queued wait
//! past the queue's own limit. An outside client cannot take the slots, the
//! queue places or the patience kept for the app's critical work. Behind a
//! mesh or a balancer that strips these headers from outside requests (or
//! when every client is a peer), say so once:
//!
//! ```
//! use admission_axum::AdmissionLayer;
//! use admission_core::RequestPools;
//! use axum::{Router, routing::get};
//!
//! let pools = RequestPools::new(2, 4).unwrap();
//! // At the edge: the default, nobody is trusted.
//! let public: Router = Router::new().route("/", get(|| async { "ok" })).layer(AdmissionLayer::new(pools.clone()));
//! // Behind a mesh that strips x-admission-* from outside traffic.
//! let internal: Router = Router::new().route("/", get(|| async { "ok" })).layer(AdmissionLayer::new(pools).trust_peers());
//! # drop((public, internal));
//! ```
//!
//! A route's own criticality, `#[admitted(criticality = critical)]`, is the
//! app's word, not a client's, and always holds.
//!
//! # One set of pools per app
//!
//! Build [`RequestPools`] once at startup and give the layer a clone: clones
//! share their slots. axum may apply a route's layer once per connection
//! (`axum::serve` calls `with_state` per connection); the layer only clones
//! a pointer there, so every connection draws on the same slots. Stacked
//! layers of the same pools, or a layer and `#[admitted]`, take one slot per
//! request and class.
//!
//! # Examples
//!
//! A complete app: the layer over every route and a `/metrics` handler
//! whose registry walk runs on a bounded pool. It is served here with
//! [`tower::ServiceExt::oneshot`](https://docs.rs/tower/0.5/tower/trait.ServiceExt.html#method.oneshot);
//! in production, [`admission_axum::serve`][serve-fn]`(listener, router).await`
//! (feature `serve`) or `axum::serve` (axum's `tokio` feature).
//!
//! ```
//! use admission_axum::{AdmissionLayer, Rejection};
//! use admission_core::{Admission, Class, Pool, RequestPools};
//! use axum::body::{Body, to_bytes};
//! use axum::extract::State;
//! use axum::http::{Request, StatusCode, header};
//! use axum::{Router, routing::{get, post}};
//! use tower::ServiceExt;
//!
//! #[derive(Clone)]
//! struct App {
//!     registry: Pool,
//! }
//!
//! async fn metrics(State(app): State<App>) -> Result<String, Rejection> {
//!     Ok(app.registry.run(|| Ok::<_, std::fmt::Error>("# EOF\n".to_owned()), Admission::FailFast).await?)
//! }
//!
//! async fn create_item() -> StatusCode {
//!     StatusCode::CREATED
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Built once at startup: a configuration error surfaces here, not per request.
//! let requests = RequestPools::new(2, 4).unwrap();
//! let app = App { registry: Pool::new("registry", 2).unwrap() };
//! let router = Router::new()
//!     .route("/metrics", get(metrics))
//!     .route("/items", post(create_item))
//!     .layer(AdmissionLayer::new(requests.clone()))
//!     .with_state(app);
//!
//! let get_metrics = || Request::get("/metrics").body(Body::empty()).unwrap();
//! let response = router.clone().oneshot(get_metrics()).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//! assert_eq!(to_bytes(response.into_body(), 1024).await.unwrap(), "# EOF\n");
//! assert_eq!(requests.pool(Class::Control).stats().in_use, 0, "the body was sent: the lease is back");
//!
//! // Four reads in flight take every *control* slot: the next one is refused.
//! let in_flight: Vec<_> = (0..4).map(|_| requests.try_lease(Class::Control).unwrap()).collect();
//! let refused = router.clone().oneshot(get_metrics()).await.unwrap();
//! assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
//! assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
//! assert_eq!(refused.headers()[header::CONTENT_TYPE], "application/problem+json");
//! let problem = to_bytes(refused.into_body(), 1024).await.unwrap();
//! assert!(std::str::from_utf8(&problem).unwrap().contains(r#""code":"ADMISSION_SATURATED""#));
//!
//! // Mutations lease from *work*, which is still free.
//! let post_item = Request::post("/items").body(Body::empty()).unwrap();
//! assert_eq!(router.oneshot(post_item).await.unwrap().status(), StatusCode::CREATED);
//! # drop(in_flight);
//! # }
//! ```
//!
//! # One handler: `#[admitted]`
//!
//! ```
//! use std::sync::LazyLock;
//!
//! use admission_axum::{AdmissionLayer, admitted};
//! use admission_core::{Class, RequestPools};
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use axum::{Router, routing::post};
//! use tower::ServiceExt;
//!
//! // `pools =` takes a static's path: one set of slots for the program.
//! static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());
//!
//! #[admitted(class = work, pools = POOLS)]
//! async fn create() -> &'static str {
//!     "created"
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Under a layer of the same pools the handler shares the request's lease:
//! // one slot, so an idle server with one *work* slot still answers.
//! let app = Router::new()
//!     .route("/items", post(create))
//!     .layer(AdmissionLayer::new(POOLS.clone()));
//! let response = app.oneshot(Request::post("/items").body(Body::empty()).unwrap()).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//! drop(response); // the body held the lease until now
//!
//! // Called while the class is full, it answers the refusal.
//! let _held = std::thread::spawn(|| POOLS.try_lease(Class::Work).unwrap()).join().unwrap();
//! assert!(create().await.is_err());
//! # }
//! ```
//!
//! [`RequestPools`]: admission_core::RequestPools
// The links to items behind features resolve to the items when the
// feature is on, and to their pages on docs.rs (built with every feature)
// when it is off, so the docs build without warnings either way.
#![cfg_attr(feature = "serve", doc = "[serve-fn]: serve()\n[serve-mod]: mod@serve")]
#![cfg_attr(
    not(feature = "serve"),
    doc = "[serve-fn]: https://docs.rs/admission-axum/latest/admission_axum/fn.serve.html\n\
           [serve-mod]: https://docs.rs/admission-axum/latest/admission_axum/serve/index.html"
)]
#![cfg_attr(feature = "balancer", doc = "[report-load]: load_report::ReportLoad")]
#![cfg_attr(
    not(feature = "balancer"),
    doc = "[report-load]: https://docs.rs/admission-axum/latest/admission_axum/load_report/struct.ReportLoad.html"
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod rejection;
#[cfg(feature = "serve")]
#[cfg_attr(docsrs, doc(cfg(feature = "serve")))]
pub mod serve;

pub use admission_http::{
    AdmissionLayer, AdmissionService, CallerLayer, CallerService, HttpRefusalStatus, body, future,
};
#[cfg(feature = "balancer")]
#[cfg_attr(docsrs, doc(cfg(feature = "balancer")))]
pub use admission_http::{balancer, load_report};

pub use crate::rejection::Rejection;
#[cfg(feature = "serve")]
#[cfg_attr(docsrs, doc(cfg(feature = "serve")))]
pub use crate::serve::serve;

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use admission_macros::admitted_axum as admitted;

/// What `#[admitted]` generates code against; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::Rejection;
    pub use admission_core::{Admission, Caller, Class, Criticality, RequestPools};
}
