//! Run: `cargo run --release -p admission-examples --bin exporter -- --listen 127.0.0.1:9464`
//!
//! The incident-1 and incident-2 metrics exporter (axum): a `prometheus-client`
//! registry of `--series` series whose full walks run behind an admission gate
//! of `--workers` slots. `GET /metrics` and `GET /` fail fast with `503` +
//! `Retry-After` when every slot is busy; `GET /healthz` never touches the
//! registry. On SIGTERM or SIGINT it stops accepting, drains under
//! `--shutdown-deadline-ms` counted from the signal, logs `drained` or
//! `abandoned`, and exits 0.
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:9464`; port 0 picks one),
//! `--workers N` (2), `--series N` (10000), `--walk-delay-ms MS` (0),
//! `--cardinality-interval-ms MS` (10000), `--shutdown-deadline-ms MS` (5000),
//! `--gate admission|admission-queue|queue|tower` (admission;
//! `admission-queue` lets scrapes wait in the pool's bounded queue, the other
//! two are the failure modes `storm` compares against), and `--coalesce-ms MS` (0, off):
//! with admission, scrapes of `/metrics` and `/` that arrive while a walk
//! started at most MS ago is running share that walk's result instead of
//! starting or being refused their own (`admission_coalesced_total` counts
//! them). Connection admission: `--max-connections N` (default three
//! quarters of the open-file limit, at most 4096; past it a newcomer evicts
//! the connection that has waited longest for a request head, or is closed
//! at once), `--header-timeout-ms MS` (10000) for a whole request head, and
//! `--idle-timeout-ms MS` (60000) for a kept-alive connection with nothing
//! in flight, and `--write-timeout-ms MS` (10000) for a response the
//! client takes no byte of. `--max-held-mb MB` (256) bounds the bytes held
//! by response bodies not yet sent, across connections (a coalesced body
//! counts once); past it scrapes are refused `503` `RESPONSE_MEMORY_BOUND`
//! without a walk. Behind a balancer: `GET /readyz` is `200` until the signal
//! and `503` from it on, `--drain-delay-ms MS` (0) keeps serving that long
//! after the signal before the listener closes (the deadline counts from
//! its end), `--agent-check ADDR` answers HAProxy's agent checks there
//! (`up ready W%` from the walk pool's free slots, `drain` from the signal
//! on), and every response carries `endpoint-load-metrics` (ORCA `TEXT`).
//! `--trust-peers` honours the `x-admission-criticality` and budget headers
//! as sent (by default a `critical` claim is served as `default` and a
//! budget never lengthens a queued wait).
//! It prints `listening on ADDR` on stdout once bound; logs go to stderr.

use std::net::SocketAddr;
use std::time::Duration;

use admission_axum::serve::ConnectionLimits;
use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::exporter::{self, Config, Gate};

const USAGE: &str = "usage: exporter [--listen ADDR] [--workers N] [--series N] \
[--walk-delay-ms MS] [--cardinality-interval-ms MS] [--shutdown-deadline-ms MS] \
[--gate admission|admission-queue|queue|tower] [--coalesce-ms MS] [--max-connections N] \
[--header-timeout-ms MS] [--idle-timeout-ms MS] [--write-timeout-ms MS] [--max-held-mb MB] \
[--drain-delay-ms MS] [--agent-check ADDR] [--trust-peers] [--metrics-backend metrics=ADDR|opentelemetry]";

const CLI: Cli = Cli {
    name: "exporter",
    usage: USAGE,
};

fn config(mut args: Args) -> Result<Config, ArgError> {
    let defaults = Config::default();
    let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
    let config = Config {
        listen: args
            .value::<SocketAddr>("listen")?
            .unwrap_or(defaults.listen),
        workers: args.value("workers")?.unwrap_or(defaults.workers),
        series: args.value("series")?.unwrap_or(defaults.series),
        walk_delay: ms(args.value("walk-delay-ms")?, defaults.walk_delay),
        cardinality_interval: ms(
            args.value("cardinality-interval-ms")?,
            defaults.cardinality_interval,
        ),
        shutdown_deadline: ms(
            args.value("shutdown-deadline-ms")?,
            defaults.shutdown_deadline,
        ),
        gate: args.value::<Gate>("gate")?.unwrap_or(defaults.gate),
        coalesce: match args.value::<u64>("coalesce-ms")? {
            None => defaults.coalesce,
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
        },
        connections: connection_limits(&mut args, defaults.connections)?,
        drain_delay: ms(args.value("drain-delay-ms")?, defaults.drain_delay),
        agent_check: args
            .value::<SocketAddr>("agent-check")?
            .or(defaults.agent_check),
        trust_peers: args.flag("trust-peers") || defaults.trust_peers,
        metrics_backend: args.value("metrics-backend")?.or(defaults.metrics_backend),
        max_held: max_held(&mut args, defaults.max_held)?,
    };
    args.finish()?;
    if config.coalesce.is_some() && config.gate != Gate::Admission {
        return Err(ArgError::new(format!(
            "`--coalesce-ms` needs `--gate admission`, not `{}`",
            config.gate
        )));
    }
    Ok(config)
}

/// The connection flags over `limits`; zero is a usage error, not a panic.
fn connection_limits(
    args: &mut Args,
    mut limits: ConnectionLimits,
) -> Result<ConnectionLimits, ArgError> {
    let zero = |name: &str| ArgError::new(format!("`--{name}` must be at least 1"));
    match args.value::<usize>("max-connections")? {
        Some(0) => return Err(zero("max-connections")),
        Some(max) => limits = limits.max_connections(max),
        None => {}
    }
    match args.value::<u64>("header-timeout-ms")? {
        Some(0) => return Err(zero("header-timeout-ms")),
        Some(ms) => limits = limits.header_read_timeout(Duration::from_millis(ms)),
        None => {}
    }
    match args.value::<u64>("idle-timeout-ms")? {
        Some(0) => return Err(zero("idle-timeout-ms")),
        Some(ms) => limits = limits.idle_timeout(Duration::from_millis(ms)),
        None => {}
    }
    match args.value::<u64>("write-timeout-ms")? {
        Some(0) => return Err(zero("write-timeout-ms")),
        Some(ms) => limits = limits.write_timeout(Duration::from_millis(ms)),
        None => {}
    }
    Ok(limits)
}

/// `--max-held-mb` in bytes; zero is a usage error.
fn max_held(args: &mut Args, default: usize) -> Result<usize, ArgError> {
    match args.value::<usize>("max-held-mb")? {
        Some(0) => Err(ArgError::new("`--max-held-mb` must be at least 1")),
        Some(mb) => Ok(mb.saturating_mul(1 << 20)),
        None => Ok(default),
    }
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
        coalesce_ms = config.coalesce.map_or(0, |c| c.as_millis() as u64),
        max_connections = config.connections.get_max_connections(),
        header_timeout_ms = config.connections.get_header_read_timeout().as_millis() as u64,
        idle_timeout_ms = config.connections.get_idle_timeout().as_millis() as u64,
        write_timeout_ms = config.connections.get_write_timeout().as_millis() as u64,
        max_held_mb = config.max_held >> 20,
        "exporter up"
    );
    match exporter::serve(config, listener, admission_examples::signal::terminated()).await {
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
