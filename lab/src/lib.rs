//! The measurement harnesses of the workspace (not published): they drive
//! the services of `admission-examples` and print the tables, pictures and
//! references the documents quote.
//!
//! * [`storm`]: the scrape-storm demo that puts numbers on the difference
//!   between admission, an unbounded queue and tower's limit plus shed, and
//!   its modes (`--grpc`, `--rate`, `--overload`, `--retry-storm`).
//! * [`fleet`]: the fleet demo, three `exporter` replicas behind a real
//!   HAProxy and a real Envoy (`examples/fleet/`), with a rolling restart.
//! * [`adaptive`]: the adaptive-limit harness (`lab/adaptive/`).
//! * [`metrics_reference`]: `docs/METRICS.md`, generated.
//! * [`progress`]: the progress line of the long runs.
//! * [`replay`]: a recorded admission trace replayed against other
//!   settings (`storm --replay`).

pub mod adaptive;
pub mod fleet;
pub mod metrics_reference;
pub mod progress;
pub mod replay;
pub mod storm;
