//! Run: `cargo run --release -p admission-examples --bin adaptive`
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
//! The defaults take about eight minutes.

use std::path::PathBuf;
use std::time::Duration;

use admission_examples::adaptive::{Bounds, Harness, Setup};
use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::fleet::Tool;

const USAGE: &str = "usage: adaptive [--capacity C] [--hold-ms MS] [--timeout-ms MS] \
[--phase-ms MS] [--warm-up-ms MS] [--sweep-ms MS] [--slice-ms MS] [--loads 0.5,1,2,5,10] \
[--no-step] [--no-envoy] [--min-rtt-interval-s S] [--out DIR] [--seed N]";

const CLI: Cli = Cli {
    name: "adaptive",
    usage: USAGE,
};

fn config(mut args: Args) -> Result<(Harness, bool, PathBuf), ArgError> {
    let ms = |v: Option<u64>, d: u64| Duration::from_millis(v.unwrap_or(d));
    let capacity: usize = args.value("capacity")?.unwrap_or(8);
    let hold = ms(args.value("hold-ms")?, 50);
    let timeout = ms(args.value("timeout-ms")?, 250);
    let loads = match args.value::<String>("loads")? {
        None => vec![0.5, 1.0, 2.0, 5.0, 10.0],
        Some(text) => text
            .split(',')
            .map(|l| l.trim().parse::<f64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ArgError::new("`--loads` takes numbers separated by commas"))?,
    };
    let harness = Harness {
        setup: Setup {
            capacity,
            hold,
            bounds: Bounds {
                floor: 1,
                ceiling: capacity * 8,
                initial: (capacity / 2).max(1),
                timeout,
            },
            slice: ms(args.value("slice-ms")?, 500),
            envoy: None,
            min_rtt_interval: Duration::from_secs(args.value("min-rtt-interval-s")?.unwrap_or(5)),
            seed: args.value("seed")?.unwrap_or(1),
        },
        loads,
        sweep: vec![0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
        sweep_length: ms(args.value("sweep-ms")?, 4000),
        phase: ms(args.value("phase-ms")?, 6000),
        warm_up: ms(args.value("warm-up-ms")?, 3000),
        step_and_plateau: !args.flag("no-step"),
    };
    let no_envoy = args.flag("no-envoy");
    let out = args.value("out")?.unwrap_or_else(|| PathBuf::from("docs"));
    args.finish()?;
    if capacity == 0
        || hold.is_zero()
        || timeout.is_zero()
        || harness.loads.iter().any(|l| *l <= 0.0)
    {
        return Err(ArgError::new(
            "`--capacity`, `--hold-ms`, `--timeout-ms` and every load must be positive",
        ));
    }
    Ok((harness, no_envoy, out))
}

#[tokio::main]
async fn main() {
    let Some((mut harness, no_envoy, out)) = CLI.start(tracing::Level::WARN, config) else {
        return;
    };
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
