//! The admission middle under every `admission` adapter, as tower-http is to
//! tower: one tower middleware generic over `http::Request<B>`, the caller
//! read from request headers under a trust policy, and the answer a refused
//! request gets, as an HTTP problem document or a gRPC trailers-only status.
//!
//! `admission-axum` and `admission-tonic` are this middleware with what is
//! theirs added (axum: `IntoResponse` for its `Rejection`, `#[admitted]`,
//! `serve`; tonic: its `Rejection` as a `tonic::Status`): one layer type,
//! [`ProtocolLayer`], which axum names [`AdmissionLayer`] (refusals over
//! HTTP) and tonic names its `AdmissionLayer` (refusals over gRPC);
//! `admission-actix` calls the same [`RequestAdmission`] from its own
//! middleware, so no adapter can disagree with another on who is admitted
//! or what a refusal says. It knows no web framework; an app usually reaches
//! it through its adapter's re-exports.
//!
//! It is also the one owner of the wire: every header and trailer name, one
//! grammar and one parser for each, the problem document, the gRPC answer,
//! `Retry-After`'s rounding, the load report and the balancer protocols
//! (the HAProxy agent check, ORCA). `admission-client` reads the server's
//! hints with the same parsers, built without the middleware
//! (`default-features = false`).
//!
//! # Features
//!
//! * `server` (default): the middleware (the layers, services, futures and
//!   the leased body) and the reading of a request's caller. Without it
//!   the crate is the wire vocabulary alone: the names, the parsers, the
//!   problem document and the gRPC answer.
//! * `balancer`: module `balancer` (the HAProxy agent check on a port of
//!   its own, the load report) and module `load_report` (the load on
//!   responses, for Envoy).
//! * `tower-http`: `ShedAware`, a tower-http classifier that logs refusals
//!   as load shedding, not failures.
//!
//! # Which piece for which need
//!
//! | you have | use | a refused request gets |
//! | --- | --- | --- |
//! | an HTTP tower or hyper stack (axum, a bare hyper server) | [`AdmissionLayer::new`] / [`class`](AdmissionLayer::class) / [`classify`](AdmissionLayer::classify) | `503` + `Retry-After` + a problem document ([`HttpRefusalStatus`], or `429`) |
//! | a gRPC tower stack (tonic) | [`ProtocolLayer<GrpcRefusalStatus>`](ProtocolLayer) (`admission_tonic::AdmissionLayer`): `new` (health and reflection take no lease, [`UNLEASED`]) / `class` / `classify` over a [`Call`] | a trailers-only `UNAVAILABLE` + `grpc-retry-pushback-ms` ([`GrpcRefusalStatus`], or `RESOURCE_EXHAUSTED`) |
//! | bursts a short wait would serve | [`AdmissionLayer::queue`] | the same answer when the queue is full or its wait runs out, never a late one |
//! | peers whose headers you trust (a mesh, an edge that strips them) | [`AdmissionLayer::trust_peers`] | as sent: `critical` is honoured, a budget may lengthen a queued wait |
//! | admission on your own pools, no lease (`Pool::run` in handlers) | [`CallerLayer`] | whatever `Pool::run` refuses |
//! | a balancer that weighs replicas by load (Envoy) | [`load_report::ReportLoad`][report-load] (feature `balancer`) | (every answer carries `endpoint-load-metrics`) |
//! | tenants that must not take each other's capacity | [`AdmissionLayer::flow`] / [`weighted_flow`](AdmissionLayer::weighted_flow) | a flow over its fair share of a contended class: the same answer, code `ADMISSION_FLOW_SHARE` |
//! | routes that must answer whatever the load (health, readiness) | [`AdmissionLayer::bypass`] | (never refused, no lease) |
//! | your own page on refusals (an HTML route) | [`AdmissionLayer::refusal_body`] | the status and hints as ever, your body |
//!
//! actix-web's adapter runs this crate's admission step over its own
//! request type; the pieces it shares with it are not part of this API.
//!
//! # Trust
//!
//! By default nobody's headers are trusted: a request
//! can lower its own priority (`x-admission-criticality: sheddable` is
//! always honoured) and shorten its own wait (a budget header refuses at
//! once what could not be answered in time), but a `critical` claim is
//! admitted as `default` (and counted, [`AdmissionLayer::lowered_claims`]),
//! and a budget never lengthens a queued wait past the queue's own limit;
//! a request's own `x-admission-flow` is set aside (and counted), so the
//! flow is the app's word ([`AdmissionLayer::flow`]) alone.
//! A service behind a mesh or a balancer that strips these headers from
//! outside requests, or whose clients are all its own peers, opts in with
//! one call, [`AdmissionLayer::trust_peers`]. A route's fixed criticality
//! (`#[admitted(criticality = critical)]`) is the app's own word and always
//! holds.
//!
//! # Examples
//!
//! ```
//! use admission_core::{Class, RequestPools};
//! use admission_http::AdmissionLayer;
//! use http::{Request, Response};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Built once at startup: a configuration error surfaces here.
//! let pools = RequestPools::new(2, 4).unwrap();
//! let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: Request<_>| async {
//!     Ok::<_, std::convert::Infallible>(Response::new(String::from("# EOF\n")))
//! }));
//!
//! // Four reads in flight take every *control* slot: the next one is refused.
//! let in_flight: Vec<_> = (0..4).map(|_| pools.try_lease(Class::Control).unwrap()).collect();
//! let refused = service.oneshot(Request::get("/metrics").body(()).unwrap()).await.unwrap();
//! assert_eq!(refused.status(), 503);
//! assert_eq!(refused.headers()["retry-after"], "1");
//! assert_eq!(refused.headers()["content-type"], "application/problem+json");
//! # drop(in_flight);
//! # }
//! ```
// A link to an item behind a feature resolves to the item with the
// feature on and to its docs.rs page (built with every feature) without,
// so the docs build without warnings either way.
#![cfg_attr(feature = "balancer", doc = "[report-load]: load_report::ReportLoad")]
#![cfg_attr(
    not(feature = "balancer"),
    doc = "[report-load]: https://docs.rs/admission-http/latest/admission_http/load_report/struct.ReportLoad.html"
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

#[cfg(feature = "server")]
mod admit;
#[cfg(feature = "balancer")]
#[cfg_attr(docsrs, doc(cfg(feature = "balancer")))]
pub mod balancer;
#[cfg(feature = "server")]
pub mod body;
#[cfg(feature = "server")]
mod caller_layer;
#[cfg(feature = "server")]
mod classify;
#[cfg(feature = "connections")]
#[cfg_attr(docsrs, doc(cfg(feature = "connections")))]
pub mod connection;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod future;
mod grpc;
#[cfg(feature = "server")]
mod grpc_layer;
#[cfg(feature = "server")]
mod headers;
#[cfg(feature = "server")]
mod hooks;
#[cfg(feature = "server")]
mod layer;
#[cfg(feature = "balancer")]
#[cfg_attr(docsrs, doc(cfg(feature = "balancer")))]
pub mod load_report;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod middle;
mod problem;
#[cfg(feature = "server")]
mod progress;
#[cfg(feature = "server")]
mod protocol;
mod rejection;
#[cfg(feature = "server")]
mod request_body;
#[cfg(feature = "server")]
mod service;
#[cfg(feature = "server")]
mod shed;
#[cfg(feature = "server")]
mod watchdog;
#[doc(hidden)]
pub mod wire;

pub use crate::grpc::{GrpcAnswer, GrpcRefusalStatus, UNLEASED, grpc_default_class};
pub use crate::problem::{
    HttpRefusalStatus, NO_STORE, PROBLEM_JSON, Problem, WORK_FAILED, WORK_PANICKED,
};
// Sibling-only: the adapters and the client re-export what their users
// need; here they stay out of the documented API.
#[doc(hidden)]
pub use crate::problem::HeaderText;
pub use crate::rejection::Rejection;
#[doc(hidden)]
pub use crate::wire::{
    BUDGET_HEADER, CRITICALITY_HEADER, ENVOY_TIMEOUT_HEADER, FLOW_HEADER, GRPC_TIMEOUT_HEADER,
    Malformed, REFUSAL_HEADER, RETRY_AFTER_MS_HEADER, RETRY_PUSHBACK_MS, parse_budget_ms,
    parse_grpc_timeout,
};

/// What [`declare_rejection`] names; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use admission_core::{Refusal, WorkError};
}

#[cfg(all(
    feature = "server",
    any(feature = "tower-http", feature = "tower-http-06")
))]
pub use crate::shed::ShedAware;
#[cfg(feature = "server")]
pub use crate::{
    admit::RequestAdmission,
    caller_layer::{CallerLayer, CallerService},
    classify::Classify,
    grpc_layer::Call,
    headers::Trust,
    layer::{AdmissionLayer, ProtocolLayer},
    protocol::Protocol,
    service::{AdmissionService, FailFast, ProtocolService, Queue},
    shed::is_load_shedding,
};
