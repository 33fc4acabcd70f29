//! Admission control for blocking work in async services.
//!
//! Expensive blocking work (a metrics-registry walk, a pure state transition,
//! a connector call) runs on a small, bounded set of worker threads. This
//! crate decides who may start it, what a refused caller gets, keeps a slot
//! held until the work really ends even when the caller has gone, gives
//! background loops reserved slots that requests cannot take, and drains
//! every pool under one shutdown deadline without blocking the runtime.
//!
//! It knows no web framework and no protocol: `admission-http` reads a
//! request's caller from its headers (under a trust policy) and answers a
//! refusal with `503` + `Retry-After` or gRPC's `UNAVAILABLE` + pushback,
//! and `admission-axum`, `admission-actix` and `admission-tonic` build on
//! it, holding a request's lease until its response body ends.
//!
//! # Which entry point fits which need
//!
//! | you have | call | a refused caller gets |
//! | --- | --- | --- |
//! | blocking work on a bounded pool (a registry walk) | [`Pool::run`]`(work, `[`Admission`]`)`: `FailFast` from a handler, `Wait` from a bounded background walker | [`WorkError::Refused`] at once |
//! | pure work inside a request or a loop (a state transition) | [`RequestPools::execute_pure`]: runs under the request's [`Lease`], the loop's [`Reservation`], or a fresh lease | `ADMISSION_LEASE_UNAVAILABLE` / `_RESERVATION_EXHAUSTED` |
//! | one walk shared by callers that arrive together | [`Coalescing::run`] | as `Pool::run`; joiners take no slot |
//! | a slot to hold yourself (the low-level form) | [`Pool::try_admit`] / [`Pool::admit`], then [`Slot::offload`](pool::Slot::offload) | a [`Refusal`] |
//!
//! A request holds one [`Lease`] of its [`Class`] for its whole response
//! (the adapters' layer, or `#[admitted]`); a background owner gets its own
//! slots with `#[reserved(slots = N)]` ([`LoopOwner`]); [`Shutdown`] drains
//! every pool and loop under one deadline.
//!
//! # Under heavy overload
//!
//! | you want | do | what happens |
//! | --- | --- | --- |
//! | serve what matters first | run the request for a [`Caller`] of its [`Criticality`] (adapters read `x-admission-criticality` under their trust policy; [`Caller::scope`] by hand) | sheddable work fills at most half a pool ([`PoolBuilder::share`](pool::PoolBuilder::share)), waiters are served critical first |
//! | never start work the client will not wait for | give the caller a deadline (adapters read `x-admission-budget-ms`, `x-envoy-expected-rq-timeout-ms`, `grpc-timeout`; [`Caller::with_budget`] by hand) | refused at once with `ADMISSION_BUDGET_TOO_SHORT` when the time left cannot cover the expected wait and the pool's typical work; no wait outlasts the deadline |
//! | keep one tenant from taking a class | give the caller a flow ([`Caller::with_flow`], weighted with [`Caller::with_weight`]) | while the class is contended each active flow is held to its fair share: a flow at its share is refused with `ADMISSION_FLOW_SHARE` while another flow that asked is short of its own; a flow alone gets the whole class; waiting flows are served in fair order (the one holding least for its weight first) |
//! | make heavy work pay for what it holds | give the caller a cost ([`Caller::with_cost`]); check a declared cost where the app is built ([`RequestPools::check_cost`]) | one admission takes that many slots, all or none, and gives them all back; shares and fair order count cost; a waiter is served whole, slots set aside for it as they come back |
//! | serve ordinary bursts instead of refusing them | [`Admission::Queue`] (the layers' `queue()`, `#[admitted(queue)]`) | a bounded queue that turns newest-first and short once it stands ([`QueuePolicy`](pool::QueuePolicy)); a caller waits at most one work time before it is served or refused (see [below](#fail-fast-or-queue)) |
//!
//! # Fail fast or queue
//!
//! For a pool of C slots whose work takes S, offered a load ρ (arrivals per
//! S over C, so ρ = 1 keeps every slot busy on average):
//!
//! * **fail-fast** never makes a caller wait: a refusal costs microseconds.
//!   But arrivals come in bursts, so it refuses even below capacity: with
//!   random (Poisson) arrivals the fraction refused is Erlang B of C and
//!   ρ·C, whatever the work's distribution. A one-slot pool at half load
//!   refuses a third of its callers.
//! * **queue** ([`Admission::Queue`]) serves the bursts a short wait
//!   absorbs: a caller waits at most the queue's target, by default one
//!   typical work time S, and is then served or refused, so a refusal
//!   comes after at most S, and an answer after at most S plus the work.
//!   Once the queue stands (overload, not a burst) newcomers wait an
//!   eighth of S, newest first.
//!
//! Measured on the real gate (Poisson arrivals from a seeded generator,
//! fixed work, the paused clock, 10,000 arrivals per row; the test
//! `fail_fast_or_queue` computes this table and checks it against Erlang B
//! and against these numbers):
//!
//! | C | ρ | Erlang B | fail-fast refused | queue refused | queue mean wait | queue longest wait |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | 1 | 0.5 | 33.3% | 32.9% | 9.1% | 0.21 S | 1.00 S |
//! | 1 | 0.8 | 44.4% | 43.4% | 18.7% | 0.30 S | 1.00 S |
//! | 1 | 1 | 50.0% | 50.1% | 27.0% | 0.37 S | 1.00 S |
//! | 1 | 2 | 66.7% | 66.2% | 53.2% | 0.54 S | 1.00 S |
//! | 2 | 0.5 | 20.0% | 20.5% | 2.3% | 0.12 S | 1.00 S |
//! | 2 | 0.8 | 33.0% | 33.5% | 9.6% | 0.27 S | 1.00 S |
//! | 2 | 1 | 40.0% | 40.3% | 17.9% | 0.35 S | 1.00 S |
//! | 2 | 2 | 61.5% | 61.6% | 51.8% | 0.56 S | 1.00 S |
//! | 4 | 0.5 | 9.5% | 10.1% | 0.2% | 0.05 S | 0.98 S |
//! | 4 | 0.8 | 22.8% | 22.7% | 3.5% | 0.20 S | 1.00 S |
//! | 4 | 1 | 31.1% | 31.1% | 12.0% | 0.32 S | 1.00 S |
//! | 4 | 2 | 57.5% | 56.7% | 49.8% | 0.58 S | 1.00 S |
//! | 8 | 0.5 | 3.0% | 3.0% | 0.0% | 0.01 S | 0.70 S |
//! | 8 | 0.8 | 14.4% | 15.0% | 1.6% | 0.12 S | 1.00 S |
//! | 8 | 1 | 23.6% | 22.5% | 7.8% | 0.25 S | 1.00 S |
//! | 8 | 2 | 54.5% | 54.5% | 50.3% | 0.58 S | 1.00 S |
//!
//! Choose fail-fast where a caller has somewhere better to go at once
//! (another replica, a cache) or the work is long; choose the queue where
//! ordinary bursts should be served and a wait of one work time is
//! acceptable. At twice the capacity both refuse half or more: the queue only
//! adds at most S to each refusal.
//!
//! The root holds the names most code types; the modules hold the rest:
//! [`pool`] (the slot, builder, queue policy, retry hint,
//! [`HasPools`](pool::HasPools)), [`request`] (the lease's scope and
//! builder, and the scoped future of a lease or a caller), [`caller`] (the
//! caller and its criticality), [`shutdown`] (report types and
//! readiness), [`stats`] (counters), [`log`] (failures named by class and
//! code) and, with its features, `metrics` (with `prometheus`, `metrics` or
//! `opentelemetry`). What a load balancer reads (the HAProxy agent check,
//! the load report) is `admission-http`'s: it is wire.
//!
//! # Examples
//!
//! ```
//! use admission_core::{Admission, Code, Pool, WorkError};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let registry = Pool::new("registry", 1).unwrap();
//! let (release, held) = std::sync::mpsc::channel::<()>();
//! let busy = registry.try_admit().unwrap().offload(move || held.recv().map(|()| "walked"));
//!
//! // The only worker is busy: an HTTP caller is refused at once.
//! let refused = registry.run(|| Ok::<_, std::fmt::Error>("walked"), Admission::FailFast).await;
//! assert!(matches!(refused, Err(WorkError::Refused(r)) if r.code() == Code::Saturated));
//!
//! release.send(()).unwrap();
//! assert_eq!(busy.await, Ok("walked"));
//! # }
//! ```
//!
//! # A pool below the web layer, and in tests
//!
//! Work offloaded from library code (a key derivation in a crate of free
//! functions) takes the pool as an argument: the app builds it once at
//! startup, keeps it in its state and passes it down. A [`Pool`] is cheap to
//! clone (one pointer; clones share the slots and threads) and starts no
//! thread until work needs one. A test that starts a server builds that
//! server's own pool, so tests running in parallel never refuse each other,
//! as they would through a process-wide `static` pool shared by every test
//! server.
//!
//! ```
//! use admission_core::{Admission, Pool, WorkError};
//!
//! // The library: the pool is an argument, never a global.
//! async fn derive_key(pool: &Pool, password: String) -> Result<u64, WorkError<()>> {
//!     let hash = move || Ok(password.bytes().map(u64::from).sum());
//!     pool.run(hash, Admission::FailFast).await
//! }
//!
//! // The app's state holds the pool and passes it down.
//! #[derive(Clone)]
//! struct App {
//!     argon2: Pool,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Each test server builds its own.
//! let app = App { argon2: Pool::new("argon2", 1).unwrap() };
//! assert_eq!(derive_key(&app.argon2, "hunter2".into()).await, Ok(712));
//! # }
//! ```
//!
//! [`RequestPools::install_global`] exists for `#[admitted]` handlers that
//! name no `pools`: the process-wide request pools it sets are shared by
//! every test of the binary (see its docs).
//!
//! # Features
//!
//! * `macros` (default): `#[reserved(slots = N)]`.
//! * `prometheus`: the `metrics` module, a `prometheus-client` collector.
//! * `metrics`: the `metrics` module, recording into the `metrics` facade.
//! * `opentelemetry`: the `metrics` module, OpenTelemetry observable
//!   instruments on a `Meter`.
//!
//! The back-ends are off by default and read the same pool statistics.
//! Readiness needs no feature ([`shutdown::Readiness`]).
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod caller;
mod coalesce;
mod error;
pub mod log;
mod loom;
#[cfg(all(test, loom))]
mod loom_models;
#[cfg(any(feature = "prometheus", feature = "metrics", feature = "opentelemetry"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "prometheus", feature = "metrics", feature = "opentelemetry")))
)]
pub mod metrics;
pub mod pool;
mod refusal;
pub mod request;
mod reserve;
mod scope;
pub mod shutdown;
pub mod trace;

/// Pool counters: the snapshot [`Pool::stats`] returns.
pub mod stats {
    pub use crate::pool::stats::{DURATION_BUCKETS, Durations, PoolStats};
}

pub use crate::caller::{Caller, Criticality};
pub use crate::coalesce::Coalescing;
pub use crate::error::ConfigError;
pub use crate::pool::{Admission, Pool, RegistryWork, WorkError};
pub use crate::refusal::{Code, Refusal};
pub use crate::request::{AdaptiveLimit, Class, Lease, RequestPools};
pub use crate::reserve::{LoopOwner, Reservation};
pub use crate::shutdown::Shutdown;

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use admission_macros::reserved;
