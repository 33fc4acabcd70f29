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
//! With the admission gate, scrapes of `/metrics` and `/` can share a
//! running walk (`--coalesce-ms`); connections are admitted
//! (`--max-connections`, header, idle and write timeouts), bytes held by
//! unsent bodies are bounded (`--max-held-mb`), and behind a balancer
//! `GET /readyz` is `200` until the signal and `503` from it on, the agent
//! check answers HAProxy, and every response a balancer sees carries
//! `endpoint-load-metrics` (ORCA `TEXT`). `--help` lists every flag with
//! its meaning and default; `RUST_LOG` chooses the log lines (default
//! `info`).
//!
//! It prints `listening on ADDR` on stdout once bound; logs go to stderr.

use std::net::SocketAddr;
use std::time::Duration;

use admission_examples::cli::{Cli, connection_limits, millis, positive, positive_millis};
use admission_examples::exporter::{self, Config, Gate, MetricsBackend, WalkFlags};

/// The incident-1 and incident-2 metrics exporter (axum): a registry
/// whose full walks run behind an admission gate.
///
/// `GET /metrics` and `GET /` fail fast with `503` + `Retry-After` when
/// every slot is busy; `GET /healthz` never touches the registry. On
/// SIGTERM or SIGINT it stops accepting, drains under the shutdown
/// deadline, logs `drained` or `abandoned`, and exits 0. `RUST_LOG` sets
/// the log lines (default `info`).
#[derive(Debug, clap::Parser)]
#[command(name = "exporter", args_override_self = true)]
struct Flags {
    /// Where to listen (port 0 picks one; the address is printed as
    /// `listening on ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    #[command(flatten)]
    walks: WalkFlags,
    /// Period of the background cardinality walk (first after one
    /// interval, then every interval; it waits for a slot).
    #[arg(long = "cardinality-interval-ms", value_name = "MS", default_value = "10000", value_parser = positive_millis)]
    cardinality_interval: Duration,
    /// What stands in front of the walks: `admission`, `admission-queue`
    /// (scrapes wait in the pool's bounded queue), or the failure modes
    /// `storm` compares against, `queue` (unbounded) and `tower`
    /// (ConcurrencyLimit + LoadShed).
    #[arg(long, value_name = "GATE", default_value = "admission")]
    gate: Gate,
    /// With `--gate admission`: scrapes of `/metrics` and `/` that arrive
    /// while a walk started at most MS ago runs share its result
    /// (`admission_coalesced_total` counts them); 0 is off.
    #[arg(long = "coalesce-ms", value_name = "MS", default_value = "0", value_parser = millis)]
    coalesce: Duration,
    /// Connections open at once; past it a newcomer evicts the connection
    /// that has waited longest for a request head, or is closed at once
    /// (the default is the open-file limit less the descriptors open
    /// when it starts listening less a quarter of the limit, at most 4096).
    #[arg(long = "max-connections", value_name = "N", value_parser = positive)]
    max_connections: Option<usize>,
    /// Time for a whole request head.
    #[arg(long = "header-timeout-ms", value_name = "MS", default_value = "10000", value_parser = positive_millis)]
    header_timeout: Duration,
    /// Time a kept-alive connection with nothing in flight stays open.
    #[arg(long = "idle-timeout-ms", value_name = "MS", default_value = "60000", value_parser = positive_millis)]
    idle_timeout: Duration,
    /// Time a response may wait while its client takes no byte: the
    /// connection is cut when the socket accepted nothing for this long (it
    /// holds at most 16 KiB the client's window does not let out), so a
    /// reader taking 16 KiB per timeout, however slowly, is never cut.
    #[arg(long = "write-timeout-ms", value_name = "MS", default_value = "10000", value_parser = positive_millis)]
    write_timeout: Duration,
    /// Bound on the bytes held by response bodies not yet sent, across
    /// connections (a coalesced body counts once); past it scrapes are
    /// refused `503` `RESPONSE_MEMORY_BOUND` without a walk.
    #[arg(long = "max-held-mb", value_name = "MB", default_value = "256", value_parser = positive)]
    max_held_mb: usize,
    /// After the signal, keep serving this long (with `/readyz` `503` and
    /// the agent saying `drain`) before the listener closes; the deadline
    /// counts from its end.
    #[arg(long = "drain-delay-ms", value_name = "MS", default_value = "0", value_parser = millis)]
    drain_delay: Duration,
    /// Answer HAProxy's agent checks here (`up ready W%` from the walk
    /// pool's free slots, `drain` from the signal on); bind it where only
    /// the balancer reaches it. Off when not given.
    #[arg(long = "agent-check", value_name = "ADDR")]
    agent_check: Option<SocketAddr>,
    /// Honour the `x-admission-criticality` and budget headers as sent (by
    /// default a `critical` claim is served as `default` and a budget never
    /// lengthens a queued wait).
    #[arg(long = "trust-peers")]
    trust_peers: bool,
    /// Publish the admission families through a second back-end too:
    /// `metrics=ADDR` (the `metrics` facade, served on ADDR) or
    /// `opentelemetry` (printed to stdout). Off when not given.
    #[arg(long = "metrics-backend", value_name = "metrics=ADDR|opentelemetry")]
    metrics_backend: Option<MetricsBackend>,
    /// Keep the walk pool's last N admission decisions (when each arrived,
    /// its criticality, wait, hold and outcome; no request content) and
    /// serve them as JSON lines at `/debug/admission/trace`. 0 is off.
    #[arg(long = "trace-entries", value_name = "N", default_value_t = 0)]
    trace_entries: usize,
    /// Run the walk pool in shadow mode: every decision made and counted
    /// (`admission_would_refuse_total`, `admission_would_wait_total`), no
    /// scrape refused or kept waiting for a slot.
    #[arg(long)]
    shadow: bool,
}

const CLI: Cli = Cli { name: "exporter" };

fn config(flags: &Flags) -> Result<Config, String> {
    let coalesce = (!flags.coalesce.is_zero()).then_some(flags.coalesce);
    if coalesce.is_some() && flags.gate != Gate::Admission {
        return Err(format!(
            "`--coalesce-ms` needs `--gate admission`, not `{}`",
            flags.gate
        ));
    }
    if (flags.shadow || flags.trace_entries > 0) && flags.gate != Gate::Admission {
        let flag = if flags.shadow {
            "--shadow"
        } else {
            "--trace-entries"
        };
        return Err(format!(
            "`{flag}` needs `--gate admission` (its walk pool), not `{}`",
            flags.gate
        ));
    }
    Ok(Config {
        listen: flags.listen,
        workers: flags.walks.workers,
        series: flags.walks.series,
        walk_delay: flags.walks.walk_delay,
        cardinality_interval: flags.cardinality_interval,
        shutdown_deadline: flags.walks.shutdown_deadline,
        gate: flags.gate,
        coalesce,
        connections: connection_limits(flags.max_connections)
            .with_header_timeout(flags.header_timeout)
            .with_idle_timeout(flags.idle_timeout)
            .with_write_timeout(flags.write_timeout),
        drain_delay: flags.drain_delay,
        agent_check: flags.agent_check,
        trust_peers: flags.trust_peers,
        metrics_backend: flags.metrics_backend,
        max_held: flags.max_held_mb.saturating_mul(1 << 20),
        trace_entries: flags.trace_entries,
        shadow: flags.shadow,
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
        coalesce_ms = config.coalesce.map_or(0, |c| c.as_millis() as u64),
        max_connections = config.connections.max_connections(),
        header_timeout_ms = config.connections.header_timeout().as_millis() as u64,
        idle_timeout_ms = config.connections.idle_timeout().as_millis() as u64,
        write_timeout_ms = config.connections.write_timeout().as_millis() as u64,
        max_held_mb = config.max_held >> 20,
        "exporter up"
    );
    let served = exporter::serve(config, listener, admission_examples::signal::terminated()).await;
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
