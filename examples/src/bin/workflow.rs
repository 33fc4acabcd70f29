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
//! Flags: `--listen ADDR` (default `127.0.0.1:8080`; port 0 picks one),
//! `--work-slots N` (2), `--control-slots N` (4), `--cycle-ms MS` (200),
//! `--native-capacities LIST` (`2,3`), `--shutdown-deadline-ms MS` (5000),
//! `--http-workers N` (2), and actix-web's connection admission:
//! `--max-connections N` (three quarters of the open-file limit, at most
//! 4096, over all HTTP workers), `--header-timeout-ms MS` (5000: a request
//! head must arrive in time, else `408`) and `--idle-timeout-ms MS` (5000,
//! kept-alive connections). A client that closes its side (FIN) counts as
//! gone. Behind a balancer: `GET /readyz` is `200` until the signal and
//! `503` from it on, `--drain-delay-ms MS` (0) keeps serving that long
//! after the signal before the listener closes (the deadline counts from
//! its end), `--agent-check ADDR` answers HAProxy's agent checks there
//! (`up ready W%` from the request pools' free slots, `drain` from the
//! signal on), and every response carries `endpoint-load-metrics` (ORCA
//! `TEXT`). Every error answer is a problem document with no request data in
//! it, and malformed requests from clients are logged as one `WARN` line
//! per 10 s at most, with a count. It prints `listening on ADDR` on stdout
//! once bound; logs go to stderr.

use std::net::SocketAddr;
use std::time::Duration;

use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::workflow::{Config, NativeCapacities, Workflow};

const USAGE: &str = "usage: workflow [--listen ADDR] [--work-slots N] [--control-slots N] \
[--cycle-ms MS] [--native-capacities N,N,...] [--shutdown-deadline-ms MS] [--http-workers N] \
[--max-connections N] [--header-timeout-ms MS] [--idle-timeout-ms MS] [--drain-delay-ms MS] \
[--agent-check ADDR]";

const CLI: Cli = Cli {
    name: "workflow",
    usage: USAGE,
};

fn config(mut args: Args) -> Result<Config, ArgError> {
    let defaults = Config::default();
    let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
    let config = Config {
        listen: args
            .value::<SocketAddr>("listen")?
            .unwrap_or(defaults.listen),
        work_slots: args.value("work-slots")?.unwrap_or(defaults.work_slots),
        control_slots: args
            .value("control-slots")?
            .unwrap_or(defaults.control_slots),
        cycle: ms(args.value("cycle-ms")?, defaults.cycle),
        native_capacities: args
            .value::<NativeCapacities>("native-capacities")?
            .unwrap_or(defaults.native_capacities),
        shutdown_deadline: ms(
            args.value("shutdown-deadline-ms")?,
            defaults.shutdown_deadline,
        ),
        http_workers: args.value("http-workers")?.unwrap_or(defaults.http_workers),
        max_connections: positive(&mut args, "max-connections")?
            .unwrap_or(defaults.max_connections),
        header_timeout: ms(
            positive(&mut args, "header-timeout-ms")?,
            defaults.header_timeout,
        ),
        idle_timeout: ms(
            positive(&mut args, "idle-timeout-ms")?,
            defaults.idle_timeout,
        ),
        drain_delay: ms(args.value("drain-delay-ms")?, defaults.drain_delay),
        agent_check: args
            .value::<SocketAddr>("agent-check")?
            .or(defaults.agent_check),
    };
    args.finish()?;
    Ok(config)
}

/// `--name N`, which must be at least 1.
fn positive<T>(args: &mut Args, name: &str) -> Result<Option<T>, ArgError>
where
    T: std::str::FromStr + PartialEq + Default,
    T::Err: std::fmt::Display,
{
    match args.value::<T>(name)? {
        Some(zero) if zero == T::default() => {
            Err(ArgError::new(format!("`--{name}` must be at least 1")))
        }
        value => Ok(value),
    }
}

fn main() {
    let Some(config) = CLI.start(tracing::Level::INFO, config) else {
        return;
    };
    let listen = config.listen;
    let workflow = match Workflow::new(config) {
        Ok(workflow) => workflow,
        Err(err) => CLI.fail(&err),
    };
    let listener = match std::net::TcpListener::bind(listen) {
        Ok(listener) => listener,
        Err(err) => CLI.fail(&format!("cannot listen on {listen}: {err}")),
    };
    CLI.announce(listener.local_addr());
    let served = actix_web::rt::System::new()
        .block_on(workflow.serve(listener, admission_examples::signal::terminated()));
    match served {
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
