//! Run: `cargo run --release -p admission-examples --bin grpc-exporter -- --listen 127.0.0.1:50051`
//!
//! The gRPC registry exporter (tonic): `admission.example.v1.Registry` (see
//! `examples/src/grpc/registry.proto`), whose `Walk` walks a registry of
//! `--series` series through an admission pool of `--workers` slots, and
//! `grpc.health.v1.Health`. `Walk` and `Stream` calls hold a request lease
//! of class *work* until their response stream ends, or until it has let a
//! message lie unread for `--progress-timeout-ms`; health checks take none
//! and are never refused (a `Watch` stream costs no capacity). A `Walk` while every worker is busy is refused at
//! once with `UNAVAILABLE`, `ADMISSION_SATURATED: pool `registry` ...` and
//! `grpc-retry-pushback-ms`. On SIGTERM or SIGINT health turns
//! `NOT_SERVING`, the server stops accepting, drains under
//! `--shutdown-deadline-ms` counted from the signal, logs `drained` or
//! `abandoned`, and exits 0.
//!
//! `--help` lists every flag with its meaning and default (the registry
//! and shutdown flags are the `exporter`'s); `RUST_LOG` chooses the log
//! lines (default `info`). It prints `listening on ADDR` on stdout once
//! bound; logs go to stderr.
//!
//! Try it with `grpcurl -plaintext -proto examples/src/grpc/registry.proto
//! 127.0.0.1:50051 admission.example.v1.Registry/Walk`.

use std::net::SocketAddr;
use std::time::Duration;

use admission_examples::cli::{Cli, connection_limits, positive, positive_millis};
use admission_examples::exporter::WalkFlags;
use admission_examples::grpc::{self, Config, Gate};

/// The gRPC registry exporter (tonic): `Registry/Walk` and `Registry/Stream`
/// behind an admission pool, beside `grpc.health.v1.Health`.
///
/// A `Walk` while every worker is busy is refused at once with
/// `UNAVAILABLE` and `grpc-retry-pushback-ms`; health checks are never
/// refused. On SIGTERM or SIGINT health turns `NOT_SERVING`, the server
/// drains under the shutdown deadline, logs `drained` or `abandoned`, and
/// exits 0. `RUST_LOG` sets the log lines (default `info`).
#[derive(Debug, clap::Parser)]
#[command(name = "grpc-exporter", args_override_self = true)]
struct Flags {
    /// Where to listen (port 0 picks one; the address is printed as
    /// `listening on ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    #[command(flatten)]
    walks: WalkFlags,
    /// Request leases of class *work*, which `Walk` and `Stream` calls take
    /// until their response ends: calls in flight, streams included.
    #[arg(long = "work-slots", value_name = "N", default_value = "16", value_parser = positive)]
    work_slots: usize,
    /// Request leases of class *control* (health checks take none).
    #[arg(long = "control-slots", value_name = "N", default_value = "4", value_parser = positive)]
    control_slots: usize,
    /// How long a `Walk` or `Stream` response may let a message lie unread
    /// before its lease is taken back and the call ends.
    #[arg(long = "progress-timeout-ms", value_name = "MS", default_value = "30000", value_parser = positive_millis)]
    progress_timeout: Duration,
    /// Connections open at once; at the cap the oldest connection that has
    /// not sent the HTTP/2 preface is closed, else the newcomer (the
    /// default is the open-file limit less the descriptors open when it
    /// starts listening less a quarter of the limit, at most 4096).
    #[arg(long = "max-connections", value_name = "N", value_parser = positive)]
    max_connections: Option<usize>,
    /// Time a new connection has to send the HTTP/2 preface.
    #[arg(long = "preface-timeout-ms", value_name = "MS", default_value = "5000", value_parser = positive_millis)]
    preface_timeout: Duration,
    /// What stands in front of the walks: `admission`, or `tonic` (tonic's
    /// own per-connection limit and load shedding, the failure mode `storm
    /// --grpc` compares against).
    #[arg(long, value_name = "GATE", default_value = "admission")]
    gate: Gate,
}

const CLI: Cli = Cli {
    name: "grpc-exporter",
};

fn config(flags: &Flags) -> Result<Config, String> {
    Ok(Config {
        listen: flags.listen,
        workers: flags.walks.workers,
        series: flags.walks.series,
        walk_delay: flags.walks.walk_delay,
        work_slots: flags.work_slots,
        control_slots: flags.control_slots,
        shutdown_deadline: flags.walks.shutdown_deadline,
        gate: flags.gate,
        progress_timeout: flags.progress_timeout,
        connections: connection_limits(flags.max_connections)
            .with_header_timeout(flags.preface_timeout),
    })
}

#[tokio::main]
async fn main() {
    let config = CLI.start(tracing::Level::INFO, |flags| config(&flags));
    let listener = CLI.listen(config.listen).await;
    tracing::info!(
        workers = config.workers,
        series = config.series,
        walk_delay_ms = config.walk_delay.as_millis() as u64,
        gate = %config.gate,
        "grpc exporter up"
    );
    let served = grpc::serve(config, listener, admission_examples::signal::terminated()).await;
    CLI.exit(served.map(|stopped| stopped.log()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_are_consistent_and_give_the_documented_defaults() {
        CLI.assert_defaults(|flags: Flags| config(&flags));
    }
}
