//! Shared pieces of the example services.
//!
//! * [`exporter`]: the incident-1 and incident-2 metrics exporter (axum),
//!   run by the `exporter` binary and, in-process, by the lab's `storm`.
//! * [`grpc`]: the same registry behind a gRPC service (tonic), run by the
//!   `grpc-exporter` binary and, in-process, by the lab's `storm --grpc`.
//! * [`workflow`]: the incident-3 workflow service (actix-web).
//! * [`cli`]: the binaries' start-up (logs, `RUST_LOG`, clap's `--help`
//!   and usage errors), shared with the lab's binaries.
//! * `walk` (private): the demo registry and its full walk, which both
//!   exporters share; [`signal`]: the stop signal they share.
//! * `examples/fleet/`: the HAProxy and Envoy configurations in front of
//!   `exporter` replicas, which the lab's `fleet` runs.
//!
//! The measurement harnesses (storm, fleet, adaptive, the metrics
//! reference) are the `admission-lab` crate's (`lab/`).

pub mod cli;
pub mod exporter;
pub mod grpc;
pub mod signal;
mod stop;
mod walk;
pub mod workflow;
