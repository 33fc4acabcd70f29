//! actix-web adapter for `admission`: request leases held until the response
//! body ends, and refusals answered with `503` (or `429`), `Retry-After` and
//! an `application/problem+json` body.
//!
//! * [`AdmissionControl`]: the middleware an app `.wrap(...)`s. Every request
//!   takes a lease of its [`Class`](admission_core::Class) from
//!   [`RequestPools`](admission_core::RequestPools), failing fast, and holds
//!   it until its response body has been sent or dropped
//!   ([`body::LeasedBody`]). Pure work in the handler
//!   ([`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure))
//!   inherits the lease.
//! * [`registry`] and [`registry_wait`] (core's handler helpers, re-exported): registry work from a handler in one
//!   line; the [`WorkError`](admission_core::WorkError) they return is an
//!   actix-web `ResponseError`, so a handler returns it with `?`.
//!   [`registry_coalesced`] is the coalescing mode: scrapes that arrive
//!   together share one walk through a
//!   [`Coalescing`](admission_core::Coalescing).
//!
//! Refusals and work errors are rendered by core's
//! [`Problem`](admission_core::Problem), so this adapter and the axum one
//! send the same status, headers and bytes.
//!
//! # Examples
//!
//! A complete app: a `/metrics` endpoint whose registry walk runs on a
//! 1-slot pool, a streamed `/events` endpoint, and request leases for both.
//!
//! ```
//! use actix_web::{App, HttpResponse, test, web};
//! use admission_actix::{AdmissionControl, registry};
//! use admission_core::{Class, Pool, Problem, RequestPools, WorkError};
//! use bytes::Bytes;
//!
//! async fn metrics(pool: web::Data<Pool>) -> Result<String, WorkError<std::fmt::Error>> {
//!     registry(&pool, || Ok("requests_total 7\n# EOF\n".to_owned())).await
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
//! let expected = Problem::refusal(&registry_pool.try_admit().unwrap_err());
//! assert_eq!(test::read_body(res).await, expected.body(), "core's problem, byte for byte");
//! # }
//! ```
#![doc(test(attr(deny(warnings))))]

pub mod body;
pub mod future;
mod middleware;

pub use crate::middleware::{AdmissionControl, AdmissionMiddleware};
pub use admission_core::{registry, registry_coalesced, registry_wait};
