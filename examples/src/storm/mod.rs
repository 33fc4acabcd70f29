//! The scrape-storm demo: the exporter run in-process behind three gates
//! (admission also with coalescing), one after another, under the same storm
//! of concurrent scrapers, and one table of what each mode did.
//!
//! This module declares and re-exports; each file owns one piece.

mod client;
mod config;
mod run;
mod table;
mod tally;

pub use self::client::{BadUrl, Target};
pub use self::config::{Phase, StormConfig};
pub use self::run::{rss_kib, run};
pub use self::table::{Row, render};
pub use self::tally::{Tally, percentile};
