//! The adaptive-limit harness: a backend whose true capacity is known and
//! can change, open-loop Poisson load, and gates side by side (the best
//! fixed limit from the harness's own sweep, this project's adaptive
//! request class, Netflix's Gradient2 written here, and a real Envoy with
//! its adaptive concurrency filter), over offered loads, a capacity step
//! and a timeout plateau.
//!
//! This module declares and re-exports; each file owns one piece:
//! [`Backend`] the hidden permits, [`Gate`] the gates, [`Gradient2`] the
//! baseline, the server and Envoy, [`run_one`] one run, the tables, the
//! pictures and [`Harness`] the whole comparison.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use admission_lab::adaptive::{Bounds, Harness, Setup};
//!
//! # #[tokio::main]
//! # async fn main() -> std::io::Result<()> {
//! let timeout = Duration::from_millis(250);
//! let harness = Harness {
//!     setup: Setup {
//!         capacity: 8,
//!         hold: Duration::from_millis(50),
//!         bounds: Bounds { floor: 1, ceiling: 64, initial: 4, timeout },
//!         slice: Duration::from_millis(500),
//!         envoy: None,
//!         min_rtt_interval: Duration::from_secs(5),
//!         seed: 1,
//!     },
//!     loads: vec![2.0],
//!     sweep: vec![1.0],
//!     sweep_length: Duration::from_secs(2),
//!     phase: Duration::from_secs(3),
//!     warm_up: Duration::from_secs(2),
//!     step_and_plateau: false,
//! };
//! print!("{}", harness.run().await?.tables());
//! # Ok(())
//! # }
//! ```

mod backend;
mod envoy;
mod gate;
mod gradient2;
mod harness;
mod plot;
mod run;
mod server;
mod table;

pub use self::backend::Backend;
pub use self::envoy::{config_file as envoy_config_file, parse_limit as parse_envoy_limit};
pub use self::gate::{Bounds, Gate};
pub use self::gradient2::Gradient2;
pub use self::harness::{Harness, Results};
pub use self::plot::svg;
pub use self::run::{Phase, Scenario, Series, Setup, Slice, run_one};
pub use self::table::{PhaseFigures, label, load_table, plateau_table, recovery, step_table};
