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
//! Flags: `--listen ADDR` (default `127.0.0.1:50051`; port 0 picks one),
//! `--workers N` (2), `--series N` (10000), `--walk-delay-ms MS` (0),
//! `--work-slots N` (16), `--control-slots N` (4), `--shutdown-deadline-ms
//! MS` (5000), `--progress-timeout-ms MS` (30000), `--max-connections N`
//! (1024: at the cap the oldest connection that has not sent the HTTP/2
//! preface is closed; keep it under `ulimit -n`), `--preface-timeout-ms
//! MS` (5000) and `--gate admission|tonic` (admission; `tonic` is tonic's
//! own per-connection limit and load shedding, the failure mode `storm
//! --grpc` compares against). It prints `listening on ADDR` on stdout once
//! bound; logs go to stderr.
//!
//! Try it with `grpcurl -plaintext -proto examples/src/grpc/registry.proto
//! 127.0.0.1:50051 admission.example.v1.Registry/Walk`.

use std::net::SocketAddr;
use std::time::Duration;

use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::grpc::{self, Config, Gate};
use admission_tonic::connections::ConnectionLimits;

const USAGE: &str = "usage: grpc-exporter [--listen ADDR] [--workers N] [--series N] \
[--walk-delay-ms MS] [--work-slots N] [--control-slots N] [--shutdown-deadline-ms MS] \
[--gate admission|tonic] [--progress-timeout-ms MS] [--max-connections N] \
[--preface-timeout-ms MS]";

const CLI: Cli = Cli {
    name: "grpc-exporter",
    usage: USAGE,
};

fn config(mut args: Args) -> Result<Config, ArgError> {
    let d = Config::default();
    let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
    let config = Config {
        listen: args.value::<SocketAddr>("listen")?.unwrap_or(d.listen),
        workers: args.value("workers")?.unwrap_or(d.workers),
        series: args.value("series")?.unwrap_or(d.series),
        walk_delay: ms(args.value("walk-delay-ms")?, d.walk_delay),
        work_slots: args.value("work-slots")?.unwrap_or(d.work_slots),
        control_slots: args.value("control-slots")?.unwrap_or(d.control_slots),
        shutdown_deadline: ms(args.value("shutdown-deadline-ms")?, d.shutdown_deadline),
        gate: args.value::<Gate>("gate")?.unwrap_or(d.gate),
        progress_timeout: ms(args.value("progress-timeout-ms")?, d.progress_timeout),
        connections: ConnectionLimits {
            max_connections: args
                .value("max-connections")?
                .unwrap_or(d.connections.max_connections),
            preface_timeout: ms(
                args.value("preface-timeout-ms")?,
                d.connections.preface_timeout,
            ),
            ..d.connections
        },
    };
    args.finish()?;
    Ok(config)
}

#[tokio::main]
async fn main() {
    let Some(config) = CLI.start(tracing::Level::INFO, config) else {
        return;
    };
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(listener) => listener,
        Err(err) => CLI.fail(&format!("cannot listen on {}: {err}", config.listen)),
    };
    CLI.announce(listener.local_addr());
    tracing::info!(
        workers = config.workers,
        series = config.series,
        walk_delay_ms = config.walk_delay.as_millis() as u64,
        gate = %config.gate,
        "grpc exporter up"
    );
    match grpc::serve(config, listener, admission_examples::signal::terminated()).await {
        Ok(stopped) => stopped.log(),
        Err(err) => {
            tracing::error!(class = ?err.kind(), "server failed");
            std::process::exit(1);
        }
    }
    // Blocked worker threads cannot be joined; the report above says what
    // was left running, and the exit ends it.
    std::process::exit(0);
}
