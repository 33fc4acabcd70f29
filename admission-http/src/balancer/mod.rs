//! What a replica tells the load balancer in front of it.
//!
//! Admission is per process: each replica protects its own workers and says
//! so with `503` + `Retry-After`. Across a fleet, the balancer spreads the
//! load, and this module gives it what it needs from each replica:
//!
//! | the balancer needs | piece | reads |
//! | --- | --- | --- |
//! | whether to route here at all (`/readyz`, a readiness probe) | [`Readiness`]: ready until the stop signal, then never again; saturation never flips it | the [`Shutdown`](admission_core::Shutdown) |
//! | time to notice before the listener closes (the preStop delay) | [`Readiness::withdraw_for`] | a configured delay |
//! | a weight per replica (HAProxy `agent-check`) | [`AgentCheck`]: `up ready W%` from free slots, `drain` once not ready | [`LoadReport`] and [`Readiness`] |
//! | a load figure on every response (Envoy's client-side weighted round robin) | [`Load::orca_text`], which the adapters' `load_report` layers put in the `endpoint-load-metrics` response header | [`LoadReport`] |
//!
//! Each file owns one piece (the ready state is `shutdown`'s): `load.rs` the
//! reading of the pools and its two written forms, `agent.rs` the agent
//! protocol on its own port. This module never admits, refuses or holds a
//! slot; it only reads pools ([`Pool::stats`](admission_core::Pool::stats)) and the
//! shutdown's state, and never puts a user value on the wire or in a log.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use admission_http::balancer::{AgentCheck, LoadReport, Readiness};
//! use admission_core::{Pool, Shutdown};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let shutdown = Shutdown::new(Duration::from_secs(5)).unwrap();
//! let registry = Pool::new("registry", 2).unwrap();
//! shutdown.register(&registry);
//! let readiness = Readiness::new(&shutdown);
//! let report = LoadReport::new(&registry);
//! let agent = AgentCheck::new(readiness.clone(), report.clone());
//!
//! let _held = (registry.try_admit().unwrap(), registry.try_admit().unwrap());
//! assert!(readiness.is_ready(), "saturated, still ready");
//! assert_eq!(report.load().utilization, 1.0);
//! assert_eq!(agent.answer().to_string(), "up ready 1%\n");
//!
//! readiness.withdraw_for(Duration::ZERO).await; // at SIGTERM, then close and drain
//! assert_eq!(agent.answer().to_string(), "drain\n");
//! # }
//! ```

mod agent;
mod load;

pub use self::agent::{AgentAnswer, AgentCheck, DEFAULT_MAX_LINGERING, LINGER, MAX_PEER_BYTES};
pub use self::load::{Load, LoadReport, RATE_WINDOW};
/// Readiness lives with shutdown, which withdraws it; named here too, beside
/// the balancer pieces that read it.
pub use admission_core::shutdown::Readiness;
