//! tonic (gRPC) adapter for `admission`: every call holds a request lease
//! until its response stream has ended or been dropped, a refused call gets
//! the answer gRPC clients understand (a trailers-only `UNAVAILABLE`, or
//! `RESOURCE_EXHAUSTED`, naming the stable code and the pool, with
//! `grpc-retry-pushback-ms` from the pool's retry hint), and a handler runs
//! registry work in one line and returns its refusal as a `Status` with `?`.
//!
//! * [`AdmissionLayer`]: the tower layer for
//!   `Server::builder().layer(...)` (or around one service, with tonic's
//!   `named_layer`): `admission-http`'s middleware, which every adapter
//!   shares, speaking gRPC (it is
//!   [`ProtocolLayer<GrpcRefusalStatus>`](admission_http::ProtocolLayer),
//!   and every setting is documented there).
//!   `AdmissionLayer::new` lets health checks and server reflection
//!   through with no lease ([`UNLEASED`]: never refused, a `Watch` costs no
//!   capacity) and leases every other call from *work*;
//!   `AdmissionLayer::class` one class for a service; and
//!   `AdmissionLayer::classify` by your closure over the [`Call`] (its
//!   method path, metadata, caller and deadline);
//!   `queue()` lets a call wait in the class pool's bounded queue,
//!   `trust_peers()` honours the criticality and budget metadata of
//!   trusted peers, and `refusal_status` answers `RESOURCE_EXHAUSTED`
//!   ([`GrpcRefusalStatus`]). It makes an [`AdmissionService`], whose
//!   responses carry a [`body::LeasedBody`].
//! * [`Rejection`]: a core [`Refusal`](admission_core::Refusal) or
//!   [`WorkError`](admission_core::WorkError) on its way to a
//!   [`tonic::Status`]: `pool.run(work, Admission::FailFast).await.map_err(Rejection::from)?`.
//!   A panic is `INTERNAL` with a code and no message.
//! * [`CallerLayer`] and [`load_report::ReportLoad`][report-load] (feature `balancer`): the same pieces as in
//!   every adapter, for servers that admit on their own pools and for
//!   Envoy's client-side weighted round robin.
//! * [`status::pushback`]: for clients, the `grpc-retry-pushback-ms`
//!   trailer read as gRPC's retry design (gRFC A6) says.
//!
//! The refusal carries the facts of the HTTP adapters'
//! [`Problem`](admission_http::Problem) (code, pool, retry hint) in gRPC's
//! form ([`GrpcAnswer`](admission_http::GrpcAnswer)): the status code for
//! the HTTP status, the message for the problem's code and detail, and the
//! pushback, in milliseconds, for `Retry-After`.
//!
//! # Deadlines
//!
//! A call is admitted for its caller: its `x-admission-criticality`
//! metadata and the shortest of `grpc-timeout`, `x-admission-budget-ms` and
//! `x-envoy-expected-rq-timeout-ms`, each parsed strictly (a malformed value
//! is ignored and counted, [`malformed_headers`](admission_http::ProtocolLayer::malformed_headers)). A call
//! whose deadline cannot cover the pool's typical work (and the wait ahead
//! of it) is refused at once with `DEADLINE_EXCEEDED`
//! (`ADMISSION_BUDGET_TOO_SHORT`, no pushback: a retry with the same
//! deadline would be refused again): a Python grpcio call with
//! `timeout=0.1` against a pool whose walks take longer gets it within a
//! millisecond. The handler reads the deadline from
//! [`Caller::current`](admission_core::Caller::current), the classifier
//! from [`Call::deadline`]. tonic itself still ends a call whose
//! `grpc-timeout` passes before its response head (its lease goes with
//! it); tonic parses the header more leniently (it takes `+5S`), so a value
//! this layer counts as malformed may still be enforced by tonic.
//!
//! # Trust
//!
//! By default nobody's metadata is trusted: `sheddable` is honoured from
//! anyone, a `critical` claim is admitted as `default` (and counted,
//! [`lowered_claims`](admission_http::ProtocolLayer::lowered_claims)), and a budget refuses at once or
//! shortens a wait, never lengthens a queued wait past the queue's limit.
//! A server whose clients are its own peers, or behind a mesh that strips
//! `x-admission-*` from outside calls, says so once:
//! `AdmissionLayer::new(pools).trust_peers()`.
//!
//! # Streams
//!
//! A server-streaming call holds its lease until its last message, so a
//! client that stops reading would hold it for ever: a response that has
//! let a message lie unread for the layer's
//! [`progress_timeout`](admission_http::ProtocolLayer::progress_timeout) (30 s by
//! default) loses its lease at that moment, by a timer, and ends with
//! `ADMISSION_STREAM_STALLED` at its next poll (a stream reset). Streams
//! meant to live long should not share *work*: give them a class of their
//! own, or, when they cost nothing while idle, name their service in
//! [`unleased`](admission_http::ProtocolLayer::unleased). [`connections`][connections] (feature `connections`,
//! off by default) bounds the connections themselves.
//!
//! # One set of pools per server
//!
//! Build [`RequestPools`] once at startup and give the layer a clone:
//! clones share their slots. tonic clones the layered service for every
//! connection; every clone draws on the same slots. A layer around the
//! whole server and another around one service, of the same pools, take
//! one slot per call and class: the inner admission shares the outer lease.
//!
//! # Examples
//!
//! A complete server over loopback: the layer around tonic-health's
//! service, and a real tonic client. Health takes no lease, so it is
//! answered with every slot held; told to lease every service
//! (`unleased([])`, as a test of its own leases would), the same layer
//! refuses it with the pool's name and a pushback.
//!
//! ```
//! use admission_core::{Class, RequestPools};
//! use admission_tonic::AdmissionLayer;
//! use admission_tonic::status::{Hint, pushback};
//! use std::time::Duration;
//! use tonic::transport::{Endpoint, Server, server::TcpIncoming};
//! use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Built once at startup: a configuration error surfaces here, not per call.
//! let requests = RequestPools::new(1, 1)?;
//! let mut clients = Vec::new();
//! for layer in [AdmissionLayer::new(requests.clone()), AdmissionLayer::new(requests.clone()).unleased([])] {
//!     let (_reporter, health) = tonic_health::server::health_reporter();
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     tokio::spawn(
//!         Server::builder()
//!             .layer(layer)
//!             .add_service(health)
//!             .serve_with_incoming(TcpIncoming::from(listener)),
//!     );
//!     let channel = Endpoint::from_shared(format!("http://{addr}"))?.connect().await?;
//!     clients.push(HealthClient::new(channel));
//! }
//! let check = || HealthCheckRequest { service: String::new() };
//!
//! // Every slot is taken.
//! let held = (requests.try_lease(Class::Control)?, requests.try_lease(Class::Work)?);
//! assert!(clients[0].check(check()).await.is_ok(), "health is never leased");
//!
//! let refused = clients[1].check(check()).await.unwrap_err();
//! assert_eq!(refused.code(), tonic::Code::Unavailable);
//! assert!(refused.message().starts_with("ADMISSION_SATURATED: pool `control`"));
//! assert_eq!(pushback(refused.metadata()), Hint::After(Duration::from_secs(1)));
//!
//! drop(held);
//! assert!(clients[1].check(check()).await.is_ok());
//! # Ok(())
//! # }
//! ```
//!
//! [`RequestPools`]: admission_core::RequestPools
// A link to an item behind a feature resolves to the item with the
// feature on and to its docs.rs page (built with every feature) without,
// so the docs build without warnings either way.
#![cfg_attr(feature = "balancer", doc = "[report-load]: load_report::ReportLoad")]
#![cfg_attr(
    not(feature = "balancer"),
    doc = "[report-load]: https://docs.rs/admission-tonic/latest/admission_tonic/load_report/struct.ReportLoad.html"
)]
#![cfg_attr(feature = "connections", doc = "[connections]: mod@connections")]
#![cfg_attr(
    not(feature = "connections"),
    doc = "[connections]: https://docs.rs/admission-tonic/latest/admission_tonic/connections/index.html"
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

#[cfg(feature = "connections")]
#[cfg_attr(docsrs, doc(cfg(feature = "connections")))]
pub mod connections;

mod layer;
mod rejection;
pub mod status;

pub use admission_http::{Call, CallerLayer, CallerService, GrpcRefusalStatus, UNLEASED, body};
#[cfg(feature = "balancer")]
#[cfg_attr(docsrs, doc(cfg(feature = "balancer")))]
pub use admission_http::{balancer, load_report};

pub use crate::layer::{AdmissionLayer, AdmissionService};
pub use crate::rejection::Rejection;
