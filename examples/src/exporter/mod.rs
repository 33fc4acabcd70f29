//! The metrics exporter of incidents 1 and 2: a real `prometheus-client`
//! registry whose full walks run behind an admission gate, a background
//! cardinality walk that waits for a slot, and a shutdown bounded by one
//! deadline counted from the signal.
//!
//! This module declares and re-exports; each file owns one piece.
//!
//! # Examples
//!
//! ```no_run
//! use admission_examples::exporter::{self, Config};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
//! let stopped = exporter::serve(Config::default(), listener, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await?;
//! stopped.log();
//! # Ok(())
//! # }
//! ```

mod app;
mod backend;
mod backends;
mod body;
mod config;
mod connections;
mod flags;
mod held;
mod queue;
mod serve;

pub use self::backend::WalkError;
pub use self::config::{Config, DEFAULT_MAX_HELD, Gate, MetricsBackend, UnknownGate};
pub use self::flags::WalkFlags;
pub use self::serve::{Exporter, LOAD_REPORT_ROUTES, Stopped, serve};
pub use crate::walk::{RegistryStats, WalkGauge};
