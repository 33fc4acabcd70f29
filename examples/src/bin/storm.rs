//! Run: `cargo run --release -p admission-examples --bin storm`
//!
//! The scrape-storm demo. It runs the exporter in-process four ways, one
//! after another, each on a fresh `127.0.0.1` port, under the same storm of
//! concurrent scrapers: behind this project's admission gate, behind the
//! same gate with coalescing (scrapes that arrive during a walk share it),
//! behind an unbounded queue in front of the same N worker threads (the
//! incident's executor), and behind `tower`'s `ConcurrencyLimit` plus
//! `LoadShed`. Each mode sees two phases: patient scrapers, then scrapers
//! that give up mid-walk. It prints progress on stderr and then one table
//! on stdout. It ends by itself within 60 s on the defaults.
//!
//! Flags: `--clients N` (64), `--duration-ms MS` per phase (4000),
//! `--walk-delay-ms MS` (20), `--series N` (10000), `--workers N` (2),
//! `--give-up-ms MS` (5), `--refused-pause-ms MS` (10), `--max-requests N`
//! per scraper per phase (10000), `--coalesce-ms MS` the staleness bound of
//! the coalescing mode (1000; 0 leaves that mode out), and `--url URL` to
//! storm any `http://` server instead (the patient phase only).
//!
//! `--grpc` storms the gRPC exporter instead (`grpc-exporter`, in-process):
//! tonic clients calling `Registry/Walk`, one HTTP/2 connection each,
//! behind `admission-tonic` (`grpc-admission`) and behind tonic's own
//! `concurrency_limit_per_connection` + `load_shed` (`grpc-tonic-limit+shed`),
//! both phases; a caller that gives up cancels its call. The other flags
//! apply as above, but for `--coalesce-ms` and `--url`.

use std::time::Duration;

use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::storm::{self, StormConfig, Target};

const USAGE: &str = "usage: storm [--clients N] [--duration-ms MS] [--walk-delay-ms MS] \
[--series N] [--workers N] [--give-up-ms MS] [--refused-pause-ms MS] [--max-requests N] \
[--coalesce-ms MS] [--url http://HOST:PORT/PATH] [--grpc]";

const CLI: Cli = Cli {
    name: "storm",
    usage: USAGE,
};

fn config(mut args: Args) -> Result<StormConfig, ArgError> {
    let d = StormConfig::default();
    let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
    let config = StormConfig {
        clients: args.value("clients")?.unwrap_or(d.clients),
        duration: ms(args.value("duration-ms")?, d.duration),
        walk_delay: ms(args.value("walk-delay-ms")?, d.walk_delay),
        series: args.value("series")?.unwrap_or(d.series),
        workers: args.value("workers")?.unwrap_or(d.workers),
        give_up: ms(args.value("give-up-ms")?, d.give_up),
        refused_pause: ms(args.value("refused-pause-ms")?, d.refused_pause),
        max_requests: args.value("max-requests")?.unwrap_or(d.max_requests),
        coalesce: match args.value::<u64>("coalesce-ms")? {
            None => d.coalesce,
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
        },
        url: args.value::<Target>("url")?,
        grpc: args.flag("grpc"),
    };
    args.finish()?;
    if config.grpc && config.url.is_some() {
        return Err(ArgError::new(
            "`--grpc` storms the gRPC exporter; it takes no `--url`",
        ));
    }
    Ok(config)
}

#[tokio::main]
async fn main() {
    let Some(config) = CLI.start(tracing::Level::WARN, config) else {
        return;
    };
    if config.clients == 0 {
        CLI.fail(&"`--clients` must be at least 1");
    }
    let mut rows = match storm::run(&config).await {
        Ok(rows) => rows,
        Err(err) => {
            eprintln!("storm: {err}");
            std::process::exit(1);
        }
    };
    print!("{}", storm::render(&mut rows));
    let answers = if config.grpc {
        "OK and of refused (UNAVAILABLE, RESOURCE_EXHAUSTED) calls"
    } else {
        "200 and of 503 answers"
    };
    println!(
        "\nok p50/p99 and refused p99: latency of {answers}, timed apart.\n\
         gave up: requests the scraper stopped waiting for (its give-up time, or the phase's end).\n\
         walks run: registry walks that actually ran; under +coalesce, scrapes that arrive during a walk share it.\n\
         max walks at once: the gauge inside the walk. walks left: running or queued at the phase's end.\n\
         memory growth: this process's VmRSS (server and scrapers) over the phase."
    );
    // Walks orphaned on tokio's blocking pool may still be running; they hold
    // nothing the table needs.
    std::process::exit(0);
}
