//! Run: `cargo run --release -p admission-lab --bin adaptive`
//!
//! The adaptive-limit harness. A backend of `--capacity` C (8) hidden
//! permits, each request holding one for `--hold-ms` d (50), behind, one
//! after another on fresh loopback ports: the best fixed limit (found by a
//! sweep of fixed limits at 2x load, `--sweep-ms` (4000) per point), this
//! project's adaptive request class, Netflix's Gradient2 (written here)
//! and a real Envoy with `envoy.filters.http.adaptive_concurrency`'s
//! gradient controller (`--no-envoy` leaves it out; found on `PATH` or in
//! `target/fleet-tools/bin`, as `.ci/run` installs it). Open-loop Poisson
//! load, each request given up at `--timeout-ms` (250). Scenarios:
//! `--loads` (0.5,1,2,5,10) times capacity, each after `--warm-up-ms`
//! (3000) at 1x, for `--phase-ms` (6000); a capacity step (C halves, then
//! doubles back; `--phase-ms` each); a timeout plateau (every request
//! holds its permit twice the timeout). Envoy's minRTT interval is
//! `--min-rtt-interval-s` (5; its default is 60). Tables on stdout, one
//! SVG per scenario into `--out` (docs). `--seed N` (1).
//!
//! The defaults take about eight minutes. `--help` lists every flag with
//! its meaning and default; `RUST_LOG` chooses the log lines (default
//! `warn`).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use admission_examples::cli::{Cli, millis, positive, positive_millis};
use admission_lab::adaptive::{Bounds, Harness, Setup};
use admission_lab::fleet::Tool;

/// The adaptive-limit harness: the best fixed limit, this project's
/// adaptive class, Gradient2 and Envoy's adaptive concurrency filter, one
/// after another in front of the same hidden capacity, under open-loop
/// load.
///
/// Tables on stdout, one SVG per scenario into `--out`. The defaults take
/// about eight minutes. `RUST_LOG` sets the log lines (default `warn`).
#[derive(Debug, clap::Parser)]
#[command(name = "adaptive", args_override_self = true)]
struct Flags {
    /// The backend's hidden permits C.
    #[arg(long, value_name = "C", default_value = "8", value_parser = positive)]
    capacity: usize,
    /// How long each request holds its permit.
    #[arg(long = "hold-ms", value_name = "MS", default_value = "50", value_parser = positive_millis)]
    hold: Duration,
    /// The client's timeout per request.
    #[arg(long = "timeout-ms", value_name = "MS", default_value = "250", value_parser = positive_millis)]
    timeout: Duration,
    /// Length of each load phase (and of each half of the capacity step).
    #[arg(long = "phase-ms", value_name = "MS", default_value = "6000", value_parser = millis)]
    phase: Duration,
    /// Warm-up at 1x before each phase.
    #[arg(long = "warm-up-ms", value_name = "MS", default_value = "3000", value_parser = millis)]
    warm_up: Duration,
    /// Length of each point of the fixed-limit sweep at 2x load.
    #[arg(long = "sweep-ms", value_name = "MS", default_value = "4000", value_parser = millis)]
    sweep: Duration,
    /// Length of one time slice of the tables and pictures.
    #[arg(long = "slice-ms", value_name = "MS", default_value = "500", value_parser = positive_millis)]
    slice: Duration,
    /// Offered loads, as multiples of the capacity, separated by commas.
    #[arg(long, value_name = "X,X,...", default_value = "0.5,1,2,5,10")]
    loads: Loads,
    /// Leave out the capacity step and the timeout plateau.
    #[arg(long = "no-step")]
    no_step: bool,
    /// Leave out Envoy (else found on `PATH` or in `target/fleet-tools/bin`).
    #[arg(long = "no-envoy")]
    no_envoy: bool,
    /// Envoy's minRTT recalculation interval (Envoy's own default is 60).
    #[arg(long = "min-rtt-interval-s", value_name = "S", default_value_t = 5)]
    min_rtt_interval_s: u64,
    /// Where the SVG pictures go.
    #[arg(long, value_name = "DIR", default_value = "docs")]
    out: PathBuf,
    /// Seed of the arrival schedules.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
}

/// `--loads`: positive multiples of the capacity.
#[derive(Debug, Clone)]
struct Loads(Vec<f64>);

impl FromStr for Loads {
    type Err = String;

    fn from_str(text: &str) -> Result<Loads, String> {
        let bad = || "takes positive numbers separated by commas".to_owned();
        text.split(',')
            .map(|l| match l.trim().parse::<f64>() {
                Ok(l) if l.is_finite() && l > 0.0 => Ok(l),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Loads)
    }
}

const CLI: Cli = Cli { name: "adaptive" };

fn config(flags: Flags) -> Result<(Harness, bool, PathBuf), String> {
    let capacity = flags.capacity;
    let harness = Harness {
        setup: Setup {
            capacity,
            hold: flags.hold,
            bounds: Bounds {
                floor: 1,
                ceiling: capacity * 8,
                initial: (capacity / 2).max(1),
                timeout: flags.timeout,
            },
            slice: flags.slice,
            envoy: None,
            min_rtt_interval: Duration::from_secs(flags.min_rtt_interval_s),
            seed: flags.seed,
        },
        loads: flags.loads.0,
        sweep: vec![0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
        sweep_length: flags.sweep,
        phase: flags.phase,
        warm_up: flags.warm_up,
        step_and_plateau: !flags.no_step,
    };
    Ok((harness, flags.no_envoy, flags.out))
}

#[tokio::main]
async fn main() {
    let (mut harness, no_envoy, out) = CLI.start(tracing::Level::WARN, config);
    if !no_envoy {
        match Tool::Envoy.find() {
            Ok(path) => harness.setup.envoy = Some(path),
            Err(missing) => eprintln!("adaptive: Envoy rows left out: {missing}"),
        }
    }
    let results = match harness.run().await {
        Ok(results) => results,
        Err(err) => CLI.fail(&format!("a run failed: {err}")),
    };
    print!("{}", results.tables());
    match results.pictures() {
        Ok(pictures) => {
            for (stem, svg) in pictures {
                let path = out.join(format!("{stem}.svg"));
                if let Err(err) = std::fs::write(&path, svg) {
                    eprintln!("adaptive: cannot write {}: {err}", path.display());
                }
            }
        }
        Err(err) => eprintln!("adaptive: cannot draw: {err}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_flag_definitions_are_consistent() {
        <super::Flags as clap::CommandFactory>::command().debug_assert();
    }
}
