//! Shared pieces of the example services.
//!
//! * [`exporter`]: the incident-1 and incident-2 metrics exporter (axum),
//!   run by the `exporter` binary and, in-process, by `storm`.
//! * [`grpc`]: the same registry behind a gRPC service (tonic), run by the
//!   `grpc-exporter` binary and, in-process, by `storm --grpc`.
//! * [`storm`]: the scrape-storm demo that puts numbers on the difference
//!   between admission, an unbounded queue and tower's limit plus shed.
//! * [`cli`]: the binaries' start-up (logs, `RUST_LOG`, clap's `--help`
//!   and usage errors) and [`progress`], the progress line of the long runs.
//! * `walk` (private): the demo registry and its full walk, which both
//!   exporters share; [`signal`]: the stop signal they share.
//! * [`fleet`]: the fleet demo, three `exporter` replicas behind a real
//!   HAProxy and a real Envoy (`examples/fleet/`), with a rolling restart.

pub mod adaptive;
pub mod cli;
pub mod exporter;
pub mod fleet;
pub mod grpc;
pub mod metrics_reference;
pub mod progress;
pub mod signal;
mod stop;
pub mod storm;
mod walk;
pub mod workflow;
