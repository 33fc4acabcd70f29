//! The fleet demo: three exporter replicas (the built `exporter` binary,
//! as child processes on loopback ports) behind a real HAProxy and a real
//! Envoy, running the configuration files in `examples/fleet/`, under the
//! open-loop storm; and a rolling restart of every replica while it runs.
//!
//! This module declares and re-exports; each file owns one piece:
//! [`Tool`] finds the balancers, [`exporter_in`] the `exporter` binary
//! (built first under cargo), [`Supervised`] keeps a child process
//! (killed and reaped when dropped), [`Replica`] is one exporter,
//! [`Haproxy`] and [`Envoy`] the balancers, [`run()`] one row of the
//! table and [`render`] the table.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use admission_lab::fleet::{self, FleetConfig, Scenario, Tool};
//!
//! # #[tokio::main]
//! # async fn main() -> std::io::Result<()> {
//! let config = FleetConfig {
//!     exporter: "target/release/exporter".into(),
//!     haproxy: Tool::Haproxy.find().ok(),
//!     envoy: None,
//!     workers: 2,
//!     series: 1000,
//!     walk_delay: Duration::from_millis(20),
//!     drain_delay: Duration::from_millis(500),
//!     shutdown_deadline: Duration::from_secs(2),
//!     duration: Duration::from_secs(4),
//!     restart_duration: Duration::from_secs(8),
//!     timeout: Duration::from_secs(5),
//!     rate: 150.0,
//!     seed: 1,
//! };
//! let row = fleet::run(&config, Scenario::HAPROXY_RESTART).await?;
//! print!("{}", fleet::render(&[row]));
//! # Ok(())
//! # }
//! ```

mod binary;
mod child;
mod envoy;
mod haproxy;
pub(crate) mod probe;
mod replica;
mod run;
mod table;
mod tools;
mod workdir;

pub use self::binary::exporter_in;
pub use self::child::Supervised;
pub use self::envoy::{Envoy, EnvoySpec, validate as envoy_validate};
pub use self::haproxy::{Haproxy, HaproxySpec, ServerState};
pub use self::replica::{Replica, ReplicaSpec, Stopped};
pub use self::run::{FleetConfig, Front, Row, Scenario, capacity, run};
pub use self::table::render;
pub use self::tools::{Missing, Tool, config_dir, required};
pub use self::workdir::{Workdir, free_port};
