//! The scrape-storm demo: the exporter run in-process behind three gates
//! (admission also with coalescing), one after another, under the same storm
//! of concurrent scrapers, and one table of what each mode did; with
//! `--grpc`, the gRPC exporter behind admission and behind tonic's own
//! limit and load shedding, under a storm of tonic clients. [`open_loop`]
//! is the other kind of load: Poisson arrivals at a fixed rate whatever
//! the server answers. [`retry_storm`] compares retrying clients through
//! a spike that outlasts itself for naive ones. [`tenants`] puts light
//! tenants beside noisy ones on one small class.
//!
//! This module declares and re-exports; each file owns one piece.

mod client;
mod config;
mod grpc;
pub mod open_loop;
pub mod overload;
pub mod plot;
pub mod retry_storm;
mod run;
mod table;
mod tally;
pub mod tenants;

pub use self::client::{BadUrl, Target};
pub use self::config::{Phase, StormConfig};
use self::run::progress;
pub use self::run::{rss_kib, run};
pub use self::table::{Row, render};
pub use self::tally::{Tally, percentile};
