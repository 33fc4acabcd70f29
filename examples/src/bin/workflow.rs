//! Run: `cargo run -p admission-examples --bin workflow -- --listen 127.0.0.1:8080`
//!
//! The incident-3 workflow service (actix-web). Requests take a lease of
//! their class (`POST /operations?work_ms=MS` a *work* lease, `GET
//! /operations/{id}` a *control* lease) and are refused with `503` +
//! `Retry-After` when their class is full; `GET /healthz` and `GET /status`
//! are never refused. Four background loops (recovery, provider, broker
//! consumer, native dispatcher) do pure work every cycle in their own
//! reserved slots, so request load cannot refuse them: `/status` shows their
//! cycles going up while requests hold every slot. On SIGTERM or SIGINT it
//! stops the server and drains every pool under `--shutdown-deadline-ms`
//! counted from the signal, logs `drained` or `abandoned`, and exits 0.
//!
//! Connections are admitted by the same accept loop as the exporter's
//! (`admission_actix::serve`: `--max-connections`, past which a newcomer
//! evicts the connection that has waited longest for a request head,
//! `--header-timeout-ms`, `--idle-timeout-ms`, and a 10 s write timeout
//! that cuts only a client taking no byte for that long); a client that
//! closes its side (FIN) counts as gone. Behind a balancer: `GET /readyz` is `200`
//! until the signal and `503` from it on, `--drain-delay-ms` keeps serving
//! that long after the signal, `--agent-check ADDR` answers HAProxy's agent
//! checks, and every response carries `endpoint-load-metrics` (ORCA
//! `TEXT`). Every error answer is a problem document with no request data
//! in it, and malformed requests from clients are logged as one `WARN` line
//! per 10 s at most, with a count. `--help` lists every flag with its
//! meaning and default; `RUST_LOG` chooses the log lines (default `info`).
//! It prints `listening on ADDR` on stdout once bound; logs go to stderr.

use std::net::SocketAddr;
use std::time::Duration;

use admission_examples::cli::{Cli, millis, positive, positive_millis};
use admission_examples::workflow::{Config, NativeCapacities, Workflow};

/// The incident-3 workflow service (actix-web): request leases by class,
/// `503` + `Retry-After` when a class is full, and four background loops
/// in reserved slots that request load cannot refuse.
///
/// `POST /operations?work_ms=MS` takes a *work* lease, `GET
/// /operations/{id}` a *control* lease; `GET /healthz` and `GET /status`
/// are never refused. On SIGTERM or SIGINT it drains every pool under the
/// shutdown deadline, logs `drained` or `abandoned`, and exits 0.
/// `RUST_LOG` sets the log lines (default `info`).
#[derive(Debug, clap::Parser)]
#[command(name = "workflow", args_override_self = true)]
struct Flags {
    /// Where to listen (port 0 picks one; the address is printed as
    /// `listening on ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Request leases of class *work* (`POST /operations`).
    #[arg(long = "work-slots", value_name = "N", default_value_t = 2)]
    work_slots: usize,
    /// Request leases of class *control* (`GET /operations/{id}`).
    #[arg(long = "control-slots", value_name = "N", default_value_t = 4)]
    control_slots: usize,
    /// Period of each background loop's cycle.
    #[arg(long = "cycle-ms", value_name = "MS", default_value = "200", value_parser = millis)]
    cycle: Duration,
    /// Slots of the native dispatcher's pools, one pool per number.
    #[arg(
        long = "native-capacities",
        value_name = "N,N,...",
        default_value = "2,3"
    )]
    native_capacities: NativeCapacities,
    /// How long shutdown may take, counted from the signal (after the
    /// drain delay).
    #[arg(long = "shutdown-deadline-ms", value_name = "MS", default_value = "5000", value_parser = millis)]
    shutdown_deadline: Duration,
    /// actix-web's HTTP worker threads.
    #[arg(long = "http-workers", value_name = "N", default_value_t = 2)]
    http_workers: usize,
    /// Connections open at once, over all HTTP workers; past it a newcomer
    /// evicts the connection that has waited longest for a request head,
    /// or is closed at once (the default is the open-file limit less the
    /// descriptors open when it starts listening less a quarter of the
    /// limit, at most
    /// 4096).
    #[arg(long = "max-connections", value_name = "N", value_parser = positive)]
    max_connections: Option<usize>,
    /// Time for a request head to arrive, else the connection closes.
    #[arg(long = "header-timeout-ms", value_name = "MS", default_value = "5000", value_parser = positive_millis)]
    header_timeout: Duration,
    /// Time a kept-alive connection stays open with nothing in flight.
    #[arg(long = "idle-timeout-ms", value_name = "MS", default_value = "5000", value_parser = positive_millis)]
    idle_timeout: Duration,
    /// After the signal, keep serving this long (with `/readyz` `503` and
    /// the agent saying `drain`) before the listener closes; the deadline
    /// counts from its end.
    #[arg(long = "drain-delay-ms", value_name = "MS", default_value = "0", value_parser = millis)]
    drain_delay: Duration,
    /// Answer HAProxy's agent checks here (`up ready W%` from the request
    /// pools' free slots, `drain` from the signal on). Off when not given.
    #[arg(long = "agent-check", value_name = "ADDR")]
    agent_check: Option<SocketAddr>,
}

const CLI: Cli = Cli { name: "workflow" };

fn config(flags: Flags) -> Result<Config, String> {
    Ok(Config {
        listen: flags.listen,
        work_slots: flags.work_slots,
        control_slots: flags.control_slots,
        cycle: flags.cycle,
        native_capacities: flags.native_capacities,
        shutdown_deadline: flags.shutdown_deadline,
        http_workers: flags.http_workers,
        max_connections: flags.max_connections,
        header_timeout: flags.header_timeout,
        idle_timeout: flags.idle_timeout,
        drain_delay: flags.drain_delay,
        agent_check: flags.agent_check,
    })
}

fn main() {
    let config = CLI.start(tracing::Level::INFO, config);
    let listen = config.listen;
    let workflow = match Workflow::new(config) {
        Ok(workflow) => workflow,
        Err(err) => CLI.fail(&err),
    };
    let listener = CLI.listen_std(listen);
    let served = actix_web::rt::System::new()
        .block_on(workflow.serve(listener, admission_examples::signal::terminated()));
    CLI.exit(served.map(|stopped| stopped.log()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_are_consistent_and_give_the_documented_defaults() {
        CLI.assert_defaults(config);
    }
}
