//! The gRPC registry exporter (tonic): `admission.example.v1.Registry`,
//! whose `Walk` walks a `prometheus-client` registry through a 2-worker
//! admission pool and whose `Stream` sends one walk's text in parts, behind
//! `admission-tonic`'s layer, beside `grpc.health.v1.Health`; and a real
//! tonic client for it, and one under `admission-client`'s retry layer
//! (the retries tonic's client lacks).
//!
//! This module declares and re-exports; each file owns one piece. The
//! service is written by hand in [`proto`](self) (messages with prost's
//! derive, routing and calls as tonic's generated code does them), so the
//! example needs no `protoc`; `registry.proto` beside it is the contract.
//!
//! # Examples
//!
//! ```no_run
//! use admission_examples::grpc::{self, Config};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
//! let stopped = grpc::serve(Config::default(), listener, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await?;
//! stopped.log();
//! # Ok(())
//! # }
//! ```

mod config;
mod methods;
mod proto;
mod retry;
mod serve;
mod service;

pub use self::config::{Config, Gate, UnknownGate};
pub use self::proto::{
    Exposition, RegistryClient, RegistryServer, SERVICE, STREAM, WALK, WalkRequest,
};
pub use self::retry::RetryingClient;
pub use self::serve::{GrpcExporter, OpenAtDeadline, Stopped, serve};
pub use self::service::{App, Parts};
pub use crate::walk::WalkGauge;
