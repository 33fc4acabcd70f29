//! The client half of admission: a tower layer that retries only what a
//! server can take, waits as long as the server asks, and carries the
//! caller's deadline and criticality to it.
//!
//! A server behind `admission` refuses early and honestly: `503` +
//! `Retry-After`, gRPC `UNAVAILABLE` + `grpc-retry-pushback-ms`,
//! `ADMISSION_BUDGET_TOO_SHORT` when a deadline cannot be met. A client
//! that retries at once, three times, on every refusal turns a short spike
//! into an outage that outlives it (a metastable failure: the retries alone
//! keep the load above capacity). [`RetryLayer`] closes the loop:
//!
//! | piece | what it does |
//! | --- | --- |
//! | [`RetryBudget`] | retries at most a ratio of requests over a time to live, plus a minimum per second (Linkerd's and Finagle's meaning), exact for fractional ratios |
//! | [`AdaptiveThrottle`] | rejects locally with probability `max(0, (requests − K·accepts) / (requests + 1))` (Google SRE), so a client stops sending what will be refused |
//! | hints ([`retry_after`], [`pushback`]) | `Retry-After` (seconds or HTTP-date) and `grpc-retry-pushback-ms` waited for, never less; `-1` or a malformed pushback stops; `ADMISSION_BUDGET_TOO_SHORT` and `DEADLINE_EXCEEDED` are never retried |
//! | [`RetryPolicy`] | idempotent methods and gRPC `UNAVAILABLE` retried by default, anything else on request ([`RetryAnyway`]); jittered exponential back-off where the server gave no hint |
//! | deadline | each attempt sends the time left (`x-admission-budget-ms`, and `grpc-timeout` on gRPC calls); no attempt starts that cannot finish in it; the `admission` caller scope's deadline and criticality are carried from a server to its own calls; one call's own go in an [`admission_core::Caller`] request extension, which then stands for the scope's |
//!
//! Bodies are replayed only when they can be: the layer reads a retryable
//! request's body whole (up to [`RetryPolicy::replay_limit`]) and rebuilds
//! it for each attempt ([`ReplayBody`]); a request that may not be retried
//! is sent as it came.
//!
//! # reqwest
//!
//! reqwest's `Client` is no tower service, so this layer cannot wrap it.
//! Put hyper-util's legacy `Client` under the layer instead (what reqwest
//! itself uses underneath), or, to keep reqwest, use the pieces this crate
//! exports from a `reqwest-middleware` middleware: [`RetryBudget`],
//! [`AdaptiveThrottle`] and [`retry_after`]/[`pushback`] over the
//! response's headers (reqwest 0.12+ uses `http`'s `HeaderMap`).
//! reqwest-middleware's own retry middleware ignores `Retry-After`
//! (TrueLayer/reqwest-middleware#146) and has no budget, so it is not the
//! one to use in front of an `admission` server.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use admission_client::{RetryLayer, RetryPolicy};
//! use bytes::Bytes;
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::ServiceBuilder;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//! let client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(RetryPolicy::default().timeout(Duration::from_secs(2))).unwrap())
//!     .service(client);
//! # let _ = client;
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod body;
mod budget;
mod error;
mod hints;
mod layer;
mod policy;
mod throttle;

pub use crate::body::ReplayBody;
pub use crate::budget::RetryBudget;
pub use crate::error::{ConfigError, Error};
pub use crate::hints::{Hint, pushback, retry_after, retry_after_ms};
pub use crate::layer::{Retries, Retry, RetryAnyway, RetryFuture, RetryLayer, RetryService};
pub use crate::policy::RetryPolicy;
pub use crate::throttle::AdaptiveThrottle;
pub use admission_http::{REFUSAL_HEADER, RETRY_AFTER_MS_HEADER};
