//! Run: `cargo run --release -p admission-lab --bin storm`
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
//! `--help` lists every flag with its meaning and default, grouped by
//! mode; a flag of another mode is a usage error. `RUST_LOG` chooses the
//! log lines (default `warn`). `--url URL` storms any `http://` server
//! instead (the patient phase only).
//!
//! `--grpc` storms the gRPC exporter instead (`grpc-exporter`, in-process):
//! tonic clients calling `Registry/Walk`, one HTTP/2 connection each,
//! behind `admission-tonic` (`grpc-admission`) and behind tonic's own
//! `concurrency_limit_per_connection` + `load_shed` (`grpc-tonic-limit+shed`),
//! both phases; a caller that gives up cancels its call. The other flags
//! apply as above, but for `--coalesce-ms` and `--url`.
//!
//! `--rate R` sends open-loop load instead: Poisson arrivals at R requests
//! per second whatever the server answers, one connection per request,
//! for `--duration-ms` (5000), each request given up after `--timeout-ms`
//! (100) from its scheduled arrival; `--mix critical=0.1,default=0.3,
//! sheddable=0.6` sends the `x-admission-criticality` header in those
//! shares, `--budget-ms MS` sends `x-admission-budget-ms`,
//! `--max-outstanding N` (4096) bounds the requests waiting at once (the
//! rest are counted as dropped), `--seed N` (1) fixes the schedule. It
//! loads `--url` or, without it, an exporter child behind `--gate`
//! (`--workers`, `--walk-delay-ms`, `--series` as above), and prints
//! goodput, refusals, timeouts and latencies per criticality.
//!
//! `--overload` measures the capacity of a `--workers` (2) pool with a
//! `--walk-delay-ms` (20) walk, then offers 0.5x to 10x of it to every
//! gate side by side (`--point-ms` (3000) per point, `--timeout-ms` (100)),
//! runs the criticality and deadline scenarios, prints the Markdown tables
//! and the goals, and writes the picture to `--svg PATH`
//! (`docs/overload.svg`). It takes about three minutes; a progress line on
//! stderr (a terminal only) says which point of how many is under way and
//! about how long is left. The exporter runs as a child pinned to CPU 0 and
//! the generator on CPU 1 when `taskset` exists (`--no-pin` turns that
//! off); the sweep is repeated unpinned unless `--pinned-only`.
//!
//! `--retry-storm` runs the retry-storm scenario: open-loop load on an
//! in-process exporter at 0.8x its capacity (`--workers` (32) x
//! `--walk-delay-ms` (320)), `--trigger-multiple` (3) for `--trigger-ms`
//! (10000) after `--before-ms` (5000), then 0.8x for `--after-ms` (20000),
//! once per client kind (naive: 3 immediate retries; `tower::retry` +
//! `TpsBudget` 20%; `admission-client`), each request within
//! `--timeout-ms` (2000); then 10x for `--amplification-ms` (4000, 0 = no)
//! per kind. It prints the per-second, recovery, amplification and
//! honest-wait tables and writes goodput over time to `--svg PATH`
//! (`docs/retry-storm.svg`). It ends by itself in about two minutes.
//!
//! `--tenants` puts twelve light tenants (2% of the capacity each) beside
//! one, two and four heavy ones (10x together) on a class of four 20 ms
//! slots, open loop, `--point-ms` (3000) per point, behind each gate side
//! by side: the fair class failing fast and queued, the class without
//! flows, tower's limit + shed and `tower_governor` keyed per tenant. It
//! prints light tenants served and their p99, the heavy tenants' share of
//! the goodput, the goodput against capacity and the server's peak memory,
//! and writes the picture to `--svg PATH` (`docs/tenants.svg`).
//!
//! `--replay TRACE` replays an admission trace (the JSON lines of
//! `admission_core::trace::Trace`, e.g. the exporter's
//! `/debug/admission/trace`) against a class of `--capacity N` slots, fail
//! fast or with `--queue`, on the paused clock (no real sleep: an hour of
//! traffic in seconds), and prints refusals by code, waits, goodput and
//! utilisation; `--sweep A..B` prints one row per capacity and marks the
//! smallest that keeps refusals at or under `--refusal-target PCT` (1).
//! `--pool NAME` picks one pool of a trace that holds several.

use std::path::PathBuf;
use std::time::Duration;

use admission_examples::cli::{Cli, given, millis, positive, positive_millis, positive_number};
use admission_examples::exporter::Gate;
use admission_lab::storm::open_loop::{Mix, OpenLoop, Report};
use admission_lab::storm::overload::{self, OverloadConfig, ServeSpec};
use admission_lab::storm::retry_storm::{self, StormPlan};
use admission_lab::storm::tenants::{self, TenantSpec, TenantsConfig};
use admission_lab::storm::{self, StormConfig, Target, plot};
use clap::ArgMatches;

/// Help headings, one per mode.
const STORM: &str = "Scrape storm (the default mode)";
const RATE: &str = "Open loop (--rate R)";
const OVERLOAD: &str = "Overload table (--overload)";
const RETRY: &str = "Retry storm (--retry-storm)";
const REPLAY: &str = "What-if replay (--replay TRACE)";
const TENANTS: &str = "Tenants (--tenants)";

/// The scrape-storm demo: the exporter in-process behind admission,
/// admission with coalescing, an unbounded queue and tower's limit plus
/// shed, under the same storm of scrapers; or open-loop load (`--rate`),
/// the overload table (`--overload`) or the retry storm (`--retry-storm`).
///
/// Progress goes to stderr, the tables to stdout. `RUST_LOG` sets the log
/// lines (default `warn`). Flags of one mode do not go with another.
#[derive(Debug, clap::Parser)]
#[command(name = "storm", args_override_self = true)]
#[command(group = clap::ArgGroup::new("mode").args(["rate", "overload", "retry_storm", "replay", "tenants", "serve_exporter", "serve_tenants"]))]
struct Flags {
    /// Concurrent scrapers.
    #[arg(long, value_name = "N", default_value = "64", help_heading = STORM, value_parser = positive)]
    clients: usize,
    /// How long each scraper waits for an answer in the give-up phase.
    #[arg(long = "give-up-ms", value_name = "MS", default_value = "5", help_heading = STORM, value_parser = millis)]
    give_up: Duration,
    /// Pause of a scraper after a refusal.
    #[arg(long = "refused-pause-ms", value_name = "MS", default_value = "10", help_heading = STORM, value_parser = millis)]
    refused_pause: Duration,
    /// Requests per scraper per phase, at most.
    #[arg(long = "max-requests", value_name = "N", default_value_t = 10_000, help_heading = STORM)]
    max_requests: u64,
    /// Staleness bound of the coalescing mode (0 leaves that mode out).
    #[arg(long = "coalesce-ms", value_name = "MS", default_value = "1000", help_heading = STORM, value_parser = millis)]
    coalesce: Duration,
    /// Storm the gRPC exporter instead (tonic clients calling
    /// `Registry/Walk`, one HTTP/2 connection each).
    #[arg(long, help_heading = STORM, conflicts_with_all = ["url", "mode"])]
    grpc: bool,
    /// Storm (or, with `--rate`, load) any `http://HOST:PORT/PATH` instead
    /// of an exporter of this process or a child.
    #[arg(long, value_name = "URL", help_heading = STORM)]
    url: Option<Target>,

    /// Send open-loop load instead: Poisson arrivals at R requests per
    /// second whatever the server answers, one connection per request.
    #[arg(long, value_name = "R", help_heading = RATE, value_parser = positive_number, allow_negative_numbers = true)]
    rate: Option<f64>,
    /// The gate of the exporter child that `--rate` loads without `--url`:
    /// `admission`, `admission-queue`, `queue` or `tower`.
    #[arg(long, value_name = "GATE", default_value = "admission", help_heading = RATE, conflicts_with = "url")]
    gate: Gate,
    /// The shares of the `x-admission-criticality` header
    /// (`critical=W,default=W,sheddable=W`); without it no header is sent.
    #[arg(long, value_name = "LEVEL=W,...", help_heading = RATE)]
    mix: Option<Mix>,
    /// Send `x-admission-budget-ms: MS` with every request (none when not
    /// given).
    #[arg(long = "budget-ms", value_name = "MS", help_heading = RATE, value_parser = millis)]
    budget: Option<Duration>,
    /// Requests waiting at once, at most; the rest are counted as dropped.
    #[arg(long = "max-outstanding", value_name = "N", default_value = "4096", help_heading = RATE, value_parser = positive)]
    max_outstanding: usize,

    /// Measure the capacity of a `--workers` pool, offer 0.5x to 10x of it
    /// to every gate side by side, run the criticality and deadline
    /// scenarios, and print the tables (about three minutes).
    #[arg(long, help_heading = OVERLOAD)]
    overload: bool,
    /// How long each point's arrivals last.
    #[arg(long = "point-ms", value_name = "MS", default_value = "3000", help_heading = OVERLOAD, value_parser = positive_millis)]
    point: Duration,
    /// Do not pin the exporter child to CPU 0 and this process to CPU 1.
    #[arg(long = "no-pin", help_heading = OVERLOAD)]
    no_pin: bool,
    /// Do not repeat the sweep unpinned after the pinned one.
    #[arg(long = "pinned-only", help_heading = OVERLOAD)]
    pinned_only: bool,

    /// Run the retry-storm scenario: 0.8x the capacity, a trigger at a
    /// multiple of it, 0.8x again, once per client kind (naive,
    /// `tower::retry` with a budget, `admission-client`), then 10x.
    #[arg(long = "retry-storm", help_heading = RETRY)]
    retry_storm: bool,
    /// Time at 0.8x before the trigger.
    #[arg(long = "before-ms", value_name = "MS", default_value = "5000", help_heading = RETRY, value_parser = millis)]
    before: Duration,
    /// Length of the trigger.
    #[arg(long = "trigger-ms", value_name = "MS", default_value = "10000", help_heading = RETRY, value_parser = millis)]
    trigger: Duration,
    /// The trigger's load, as a multiple of the capacity.
    #[arg(long = "trigger-multiple", value_name = "X", default_value = "3", help_heading = RETRY, value_parser = positive_number)]
    trigger_multiple: f64,
    /// Time at 0.8x after the trigger.
    #[arg(long = "after-ms", value_name = "MS", default_value = "20000", help_heading = RETRY, value_parser = millis)]
    after: Duration,
    /// Length of the 10x run per client kind (0 leaves it out).
    #[arg(long = "amplification-ms", value_name = "MS", default_value = "4000", help_heading = RETRY, value_parser = millis)]
    amplification: Duration,

    /// Walk worker threads of the exporter under load [default: 2;
    /// --retry-storm: 32].
    #[arg(long, value_name = "N", value_parser = positive)]
    workers: Option<usize>,
    /// Extra time inside every walk [default: 20; --retry-storm: 320].
    #[arg(long = "walk-delay-ms", value_name = "MS", value_parser = millis)]
    walk_delay: Option<Duration>,
    /// Series in the exporter's registry.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    series: usize,
    /// Length of each phase, or of the open-loop run [default: 4000;
    /// --rate: 5000].
    #[arg(long = "duration-ms", value_name = "MS", value_parser = positive_millis)]
    duration: Option<Duration>,
    /// The client's timeout per request, from its scheduled arrival
    /// [default: 100; --retry-storm: 2000; --tenants: 1000].
    #[arg(long = "timeout-ms", value_name = "MS", value_parser = positive_millis)]
    timeout: Option<Duration>,
    /// Seed of the arrival schedules.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Where the picture goes [default: docs/overload.svg; --retry-storm:
    /// docs/retry-storm.svg; --tenants: docs/tenants.svg].
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,

    /// Replay this admission trace (JSON lines, as `Trace` writes them)
    /// against other settings, on the paused clock.
    #[arg(long, value_name = "TRACE", help_heading = REPLAY)]
    replay: Option<PathBuf>,
    /// The replayed class's slots [default: 2].
    #[arg(long, value_name = "N", help_heading = REPLAY, value_parser = positive, conflicts_with = "sweep")]
    capacity: Option<usize>,
    /// Callers wait in the class's bounded queue instead of failing fast.
    #[arg(long, help_heading = REPLAY)]
    queue: bool,
    /// One row per capacity from A to B.
    #[arg(long, value_name = "A..B", help_heading = REPLAY, value_parser = capacities)]
    sweep: Option<(usize, usize)>,
    /// The share of refusals, in percent, the sweep's mark keeps under.
    #[arg(long = "refusal-target", value_name = "PCT", default_value = "1", help_heading = REPLAY, value_parser = percent)]
    refusal_target: f64,
    /// The pool of the trace to replay (needed when it holds several).
    #[arg(long, value_name = "NAME", help_heading = REPLAY)]
    pool: Option<String>,

    /// Run the tenants scenario: twelve light tenants beside one, two and
    /// four heavy ones on a class of four 20 ms slots, each gate side by
    /// side (fair fail-fast, fair queued, the class without flows, tower's
    /// limit + shed, tower_governor per tenant), open loop; prints the
    /// tables and writes the picture (about a minute).
    #[arg(long, help_heading = TENANTS)]
    tenants: bool,

    /// Serve one exporter and report its walks (the child of `--overload`
    /// and `--rate`; not for users).
    #[arg(long = "serve-exporter", hide = true)]
    serve_exporter: bool,

    /// Serve one tenants gate and report its memory (the child of
    /// `--tenants`; not for users).
    #[arg(long = "serve-tenants", hide = true, num_args = 4, value_names = ["GATE", "SLOTS", "WORK_MS", "TENANTS"])]
    serve_tenants: Option<Vec<String>>,
}

/// The flags of each mode (clap ids; `workers` etc. are shared).
const STORM_FLAGS: &[&str] = &[
    "clients",
    "duration",
    "walk_delay",
    "series",
    "workers",
    "give_up",
    "refused_pause",
    "max_requests",
    "coalesce",
    "url",
    "grpc",
];
/// `--rate`'s flags against `--url`.
const RATE_URL_FLAGS: &[&str] = &[
    "rate",
    "url",
    "duration",
    "timeout",
    "mix",
    "budget",
    "max_outstanding",
    "seed",
];
/// What `--rate` also takes without `--url`: the child exporter's settings.
const CHILD_EXPORTER_FLAGS: &[&str] = &["gate", "workers", "walk_delay", "series"];
const OVERLOAD_FLAGS: &[&str] = &[
    "overload",
    "point",
    "workers",
    "walk_delay",
    "series",
    "timeout",
    "no_pin",
    "pinned_only",
    "seed",
    "svg",
];
const RETRY_FLAGS: &[&str] = &[
    "retry_storm",
    "workers",
    "walk_delay",
    "before",
    "trigger",
    "trigger_multiple",
    "after",
    "amplification",
    "timeout",
    "seed",
    "svg",
];
const SERVE_FLAGS: &[&str] = &["serve_exporter", "gate", "workers", "walk_delay", "series"];
const TENANTS_FLAGS: &[&str] = &["tenants", "point", "timeout", "no_pin", "seed", "svg"];
const REPLAY_FLAGS: &[&str] = &[
    "replay",
    "capacity",
    "queue",
    "sweep",
    "refusal_target",
    "pool",
    "seed",
];

/// What this run does.
#[derive(Debug, PartialEq)]
enum Mode {
    /// The closed-loop scrape storm (the default).
    Storm(StormConfig),
    /// Open-loop load against a URL or a child exporter.
    OpenLoop {
        load: OpenLoop,
        /// The child exporter to load when no `--url` was given.
        serve: Option<ServeSpec>,
    },
    /// The overload table and its picture.
    Overload {
        config: OverloadConfig,
        svg: PathBuf,
    },
    /// The retry-storm scenario and its picture.
    RetryStorm { plan: StormPlan, svg: PathBuf },
    /// The exporter child of `--overload` and `--rate` (not for users).
    ServeExporter(ServeSpec),
    /// A trace replayed against other settings.
    Replay(ReplayPlan),
    /// Light tenants beside heavy ones, every gate.
    Tenants { config: TenantsConfig, svg: PathBuf },
    /// The server child of `--tenants` (not for users).
    ServeTenants(TenantSpec),
}

/// `--replay`'s settings.
#[derive(Debug, PartialEq)]
struct ReplayPlan {
    trace: PathBuf,
    pool: Option<String>,
    capacities: (usize, usize),
    queue: bool,
    /// A share, 0 to 1, for a sweep.
    target: Option<f64>,
    seed: u64,
}

/// Fails on a flag given that `mode` does not take.
fn only(matches: &ArgMatches, mode: &str, flags: &[&str]) -> Result<(), String> {
    let command = <Flags as clap::CommandFactory>::command();
    match given(&command, matches).find(|arg| !flags.contains(&arg.get_id().as_str())) {
        None => Ok(()),
        Some(arg) => Err(format!(
            "`--{}` does not go with {mode}",
            arg.get_long().unwrap_or(arg.get_id().as_str())
        )),
    }
}

fn mode(flags: Flags, matches: &ArgMatches) -> Result<Mode, String> {
    let spec = |flags: &Flags| ServeSpec {
        gate: flags.gate,
        workers: flags.workers.unwrap_or(2),
        walk_delay: flags.walk_delay.unwrap_or(Duration::from_millis(20)),
        series: flags.series,
    };
    if let Some(trace) = flags.replay {
        only(matches, "`--replay`", REPLAY_FLAGS)?;
        let one = flags.capacity.unwrap_or(2);
        return Ok(Mode::Replay(ReplayPlan {
            trace,
            pool: flags.pool,
            capacities: flags.sweep.unwrap_or((one, one)),
            queue: flags.queue,
            target: flags.sweep.map(|_| flags.refusal_target / 100.0),
            seed: flags.seed,
        }));
    }
    if let Some(values) = &flags.serve_tenants {
        only(matches, "`--serve-tenants`", &["serve_tenants"])?;
        return TenantSpec::parse(values).map(Mode::ServeTenants);
    }
    if flags.tenants {
        only(matches, "`--tenants`", TENANTS_FLAGS)?;
        let d = TenantsConfig::default();
        let config = TenantsConfig {
            point: flags.point,
            timeout: flags.timeout.unwrap_or(d.timeout),
            pin: !flags.no_pin,
            seed: flags.seed,
            ..d
        };
        let svg = flags
            .svg
            .unwrap_or_else(|| PathBuf::from("docs/tenants.svg"));
        return Ok(Mode::Tenants { config, svg });
    }
    if flags.serve_exporter {
        only(matches, "`--serve-exporter`", SERVE_FLAGS)?;
        return Ok(Mode::ServeExporter(spec(&flags)));
    }
    if flags.retry_storm {
        only(matches, "`--retry-storm`", RETRY_FLAGS)?;
        let d = StormPlan::default();
        let plan = StormPlan {
            workers: flags.workers.unwrap_or(d.workers),
            walk_delay: flags.walk_delay.unwrap_or(d.walk_delay),
            before: flags.before,
            trigger: flags.trigger,
            trigger_multiple: flags.trigger_multiple,
            after: flags.after,
            amplification: flags.amplification,
            timeout: flags.timeout.unwrap_or(d.timeout),
            seed: flags.seed,
            ..d
        };
        if plan.walk_delay.is_zero() {
            return Err("`--walk-delay-ms` must be positive with `--retry-storm`".to_owned());
        }
        if plan.before + plan.trigger + plan.after > Duration::from_secs(300) {
            return Err("the storm's phases must add up to at most 300 s".to_owned());
        }
        let svg = flags
            .svg
            .unwrap_or_else(|| PathBuf::from("docs/retry-storm.svg"));
        return Ok(Mode::RetryStorm { plan, svg });
    }
    if flags.overload {
        only(matches, "`--overload`", OVERLOAD_FLAGS)?;
        let d = OverloadConfig::default();
        let config = OverloadConfig {
            point: flags.point,
            workers: flags.workers.unwrap_or(d.workers),
            walk_delay: flags.walk_delay.unwrap_or(d.walk_delay),
            series: flags.series,
            timeout: flags.timeout.unwrap_or(d.timeout),
            multiples: d.multiples,
            pin: !flags.no_pin,
            unpinned_too: !flags.pinned_only,
            seed: flags.seed,
        };
        let svg = flags
            .svg
            .unwrap_or_else(|| PathBuf::from("docs/overload.svg"));
        return Ok(Mode::Overload { config, svg });
    }
    if let Some(rate) = flags.rate {
        only(
            matches,
            "`--rate`",
            &[RATE_URL_FLAGS, CHILD_EXPORTER_FLAGS].concat(),
        )?;
        if flags.url.is_some() {
            only(
                matches,
                "`--rate` and `--url` (they set the child exporter)",
                RATE_URL_FLAGS,
            )?;
        }
        let serve = flags.url.is_none().then(|| spec(&flags));
        let target = flags
            .url
            .unwrap_or_else(|| Target::local(([127, 0, 0, 1], 0).into(), "/metrics"));
        let mut load = OpenLoop::new(target, rate);
        load.duration = flags.duration.unwrap_or(load.duration);
        load.timeout = flags.timeout.unwrap_or(load.timeout);
        load.mix = flags.mix.unwrap_or(load.mix);
        load.budget = flags.budget;
        load.max_outstanding = flags.max_outstanding;
        load.seed = flags.seed;
        return Ok(Mode::OpenLoop { load, serve });
    }
    only(matches, "the scrape storm", STORM_FLAGS)?;
    let d = StormConfig::default();
    Ok(Mode::Storm(StormConfig {
        clients: flags.clients,
        duration: flags.duration.unwrap_or(d.duration),
        walk_delay: flags.walk_delay.unwrap_or(d.walk_delay),
        series: flags.series,
        workers: flags.workers.unwrap_or(d.workers),
        give_up: flags.give_up,
        refused_pause: flags.refused_pause,
        max_requests: flags.max_requests,
        coalesce: (!flags.coalesce.is_zero()).then_some(flags.coalesce),
        url: flags.url,
        grpc: flags.grpc,
    }))
}

const CLI: Cli = Cli { name: "storm" };

#[tokio::main]
async fn main() {
    let mode = CLI.start_matched(tracing::Level::WARN, mode);
    let config = match mode {
        Mode::Storm(config) => config,
        Mode::ServeExporter(spec) => {
            if let Err(err) = overload::serve_child(spec).await {
                die(&err);
            }
            // Walks orphaned on tokio's blocking pool may still run.
            std::process::exit(0);
        }
        Mode::OpenLoop { load, serve } => open_loop(load, serve).await,
        Mode::Overload { config, svg } => overload_run(&config, &svg).await,
        Mode::RetryStorm { plan, svg } => retry_storm_run(&plan, &svg).await,
        Mode::Tenants { config, svg } => tenants_run(&config, &svg).await,
        Mode::ServeTenants(spec) => {
            if let Err(err) = tenants::serve_tenants(spec).await {
                die(&err);
            }
            std::process::exit(0);
        }
        Mode::Replay(plan) => {
            // The replay starts a paused-clock runtime of its own per setting.
            let code = tokio::task::spawn_blocking(move || replay_run(&plan))
                .await
                .unwrap_or(1);
            std::process::exit(code);
        }
    };
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

/// `--rate`: one open-loop run, against `--url` or a child exporter.
async fn open_loop(load: OpenLoop, serve: Option<ServeSpec>) -> ! {
    eprintln!(
        "storm: open loop, {} requests/s for {} ms at {}, timeout {} ms, mix {}",
        load.rate,
        load.duration.as_millis(),
        serve.as_ref().map_or_else(
            || load.target.to_string(),
            |s| format!("an exporter child behind {}", s.gate)
        ),
        load.timeout.as_millis(),
        load.mix,
    );
    let (report, walks) = match &serve {
        Some(spec) => match overload::against_child(load, spec, None).await {
            Ok((report, walks)) => (report, Some(walks)),
            Err(err) => die(&err),
        },
        None => (load.run().await, None),
    };
    print!("{}", open_loop_table(&report));
    println!(
        "\ngoodput: 2xx answers that ended within the timeout, per second of the {} ms window.\n\
         latencies run from each request's scheduled arrival; generator lag at most {:.1} ms.",
        report.window.as_millis(),
        report.max_lag.as_secs_f64() * 1e3,
    );
    if let Some(walks) = walks {
        println!(
            "walks: {} started, at most {} at once, {:.1}% of walk time after the client left",
            walks.started,
            walks.peak,
            walks.orphaned_share() * 100.0
        );
    }
    std::process::exit(0);
}

fn open_loop_table(report: &Report) -> String {
    let w = report.window;
    let ms = |d: Option<Duration>| {
        d.map_or_else(
            || "-".to_owned(),
            |d| format!("{:.1}ms", d.as_secs_f64() * 1e3),
        )
    };
    let mut rows = vec![
        [
            "criticality",
            "offered/s",
            "sent",
            "dropped",
            "goodput/s",
            "ok",
            "refused",
            "timed out",
            "errors",
            "ok p50",
            "ok p99",
            "refused p99",
        ]
        .map(str::to_owned),
    ];
    let total = report.total();
    let levels = report.levels().map(|(l, o)| (l.as_str(), o.clone()));
    for (name, o) in levels.chain(std::iter::once(("all", total))) {
        rows.push([
            name.to_owned(),
            format!("{:.1}", o.offered_rate(w)),
            o.sent().to_string(),
            o.dropped.to_string(),
            format!("{:.1}", o.goodput(w)),
            o.good.len().to_string(),
            o.refused.len().to_string(),
            o.timed_out.to_string(),
            o.errors.to_string(),
            ms(o.good_p(50.0)),
            ms(o.good_p(99.0)),
            ms(o.refused_p(99.0)),
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `--overload`: the sweep, the scenarios, the tables and the picture.
async fn overload_run(config: &OverloadConfig, svg: &std::path::Path) -> ! {
    let run = match overload::run(config).await {
        Ok(run) => run,
        Err(err) => die(&err),
    };
    print!("{}", overload::render(&run));
    let title = format!(
        "Open-loop overload: {} workers, {} ms walk, {} ms client timeout ({})",
        config.workers,
        config.walk_delay.as_millis(),
        config.timeout.as_millis(),
        if run.sweep.pinned {
            "server and generator pinned to a CPU each"
        } else {
            "unpinned"
        },
    );
    match plot::svg(&run.sweep, &title).and_then(|text| std::fs::write(svg, text)) {
        Ok(()) => eprintln!("storm: wrote {}", svg.display()),
        Err(err) => die(&format!("cannot write {}: {err}", svg.display())),
    }
    std::process::exit(0);
}

/// `--tenants`: the runs, the tables and the picture.
async fn tenants_run(config: &TenantsConfig, svg: &std::path::Path) -> ! {
    let run = match tenants::run(config).await {
        Ok(run) => run,
        Err(err) => die(&err),
    };
    print!("{}", tenants::render(&run));
    match tenants::plot(&run).and_then(|text| std::fs::write(svg, text)) {
        Ok(()) => eprintln!("storm: wrote {}", svg.display()),
        Err(err) => die(&format!("cannot write {}: {err}", svg.display())),
    }
    std::process::exit(0);
}

/// `--retry-storm`: the runs, the tables and the picture.
async fn retry_storm_run(plan: &StormPlan, svg: &std::path::Path) -> ! {
    let run = match retry_storm::run(plan).await {
        Ok(run) => run,
        Err(err) => die(&err),
    };
    print!("{}", retry_storm::render(&run));
    match retry_storm::draw(&run, svg) {
        Ok(paths) => {
            for path in paths {
                eprintln!("storm: wrote {}", path.display());
            }
        }
        Err(err) => die(&format!("cannot write {}: {err}", svg.display())),
    }
    std::process::exit(0);
}

/// A failure after the flags were understood: exit code 1, no usage text.
fn die(err: &dyn std::fmt::Display) -> ! {
    eprintln!("storm: {err}");
    std::process::exit(1);
}

/// `--sweep A..B`: two capacities, the first at most the second.
fn capacities(text: &str) -> Result<(usize, usize), String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}`: expected A..B, e.g. 1..16"))?;
    let (a, b) = (positive(a)?, positive(b)?);
    if a > b {
        return Err(format!("`{text}`: the first capacity is above the second"));
    }
    if b > admission_core::pool::MAX_CAPACITY {
        return Err(format!(
            "`{text}`: at most {} slots",
            admission_core::pool::MAX_CAPACITY
        ));
    }
    Ok((a, b))
}

/// `--refusal-target PCT`: 0 to 100.
fn percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(pct) if (0.0..=100.0).contains(&pct) => Ok(pct),
        _ => Err(format!("`{text}`: a percentage from 0 to 100")),
    }
}

/// `--replay`: the table, or the reason there is none; the exit code.
fn replay_run(plan: &ReplayPlan) -> i32 {
    use admission_lab::replay::{self, Setting};
    let text = match std::fs::read_to_string(&plan.trace) {
        Ok(text) => text,
        Err(err) => {
            eprintln!("storm: cannot read {}: {err}", plan.trace.display());
            return 1;
        }
    };
    let arrivals = match replay::parse(&text, plan.pool.as_deref()) {
        Ok(arrivals) if arrivals.is_empty() => {
            eprintln!("storm: no entries to replay in {}", plan.trace.display());
            return 1;
        }
        Ok(arrivals) => arrivals,
        Err(err) => {
            eprintln!("storm: {}: {err}", plan.trace.display());
            return 1;
        }
    };
    let (from, to) = plan.capacities;
    let predictions: Vec<_> = (from..=to)
        .map(|capacity| {
            let setting = Setting {
                capacity,
                queue: plan.queue,
            };
            replay::replay(&arrivals, setting, plan.seed)
        })
        .collect();
    let span = arrivals.last().map_or(Duration::ZERO, |last| last.at);
    println!(
        "{} callers over {:.1} s replayed on the paused clock\n",
        arrivals.len(),
        span.as_secs_f64()
    );
    print!("{}", replay::render(&predictions, plan.target));
    0
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    fn parse(args: &[&str]) -> Result<Mode, String> {
        let matches = Flags::command()
            .try_get_matches_from(std::iter::once("storm").chain(args.iter().copied()))
            .map_err(|err| err.to_string())?;
        let flags = <Flags as clap::FromArgMatches>::from_arg_matches(&matches).unwrap();
        mode(flags, &matches)
    }

    #[test]
    fn each_mode_without_flags_has_the_documented_defaults() {
        assert_eq!(parse(&[]), Ok(Mode::Storm(StormConfig::default())));
        assert_eq!(
            parse(&["--overload"]),
            Ok(Mode::Overload {
                config: OverloadConfig::default(),
                svg: PathBuf::from("docs/overload.svg")
            })
        );
        assert_eq!(
            parse(&["--retry-storm"]),
            Ok(Mode::RetryStorm {
                plan: StormPlan::default(),
                svg: PathBuf::from("docs/retry-storm.svg")
            })
        );
        let target = Target::local(([127, 0, 0, 1], 0).into(), "/metrics");
        assert_eq!(
            parse(&["--rate=50"]),
            Ok(Mode::OpenLoop {
                load: OpenLoop::new(target, 50.0),
                serve: Some(ServeSpec {
                    gate: Gate::Admission,
                    workers: 2,
                    walk_delay: Duration::from_millis(20),
                    series: 10_000
                })
            })
        );
    }

    #[test]
    fn replay_takes_one_capacity_or_a_sweep_and_nothing_of_the_storm() {
        let plan = |capacities, queue, target| {
            Ok(Mode::Replay(ReplayPlan {
                trace: PathBuf::from("t.jsonl"),
                pool: None,
                capacities,
                queue,
                target,
                seed: 1,
            }))
        };
        assert_eq!(parse(&["--replay", "t.jsonl"]), plan((2, 2), false, None));
        assert_eq!(
            parse(&["--replay", "t.jsonl", "--capacity", "6", "--queue"]),
            plan((6, 6), true, None)
        );
        assert_eq!(
            parse(&[
                "--replay",
                "t.jsonl",
                "--sweep",
                "1..16",
                "--refusal-target",
                "5"
            ]),
            plan((1, 16), false, Some(0.05))
        );
        for bad in [["--sweep", "4..2"], ["--sweep", "0..2"], ["--sweep", "3"]] {
            let args = [&["--replay", "t.jsonl"][..], &bad[..]].concat();
            assert!(parse(&args).is_err(), "{bad:?}");
        }
        assert!(parse(&["--replay", "t", "--sweep", "1..2", "--capacity", "3"]).is_err());
        assert_eq!(
            parse(&["--replay", "t.jsonl", "--clients", "3"]).unwrap_err(),
            "`--clients` does not go with `--replay`"
        );
        assert!(parse(&["--capacity", "3"]).is_err(), "a replay flag alone");
    }

    #[test]
    fn a_flag_of_another_mode_is_refused_by_name() {
        assert_eq!(
            parse(&["--overload", "--clients", "3"]).unwrap_err(),
            "`--clients` does not go with `--overload`"
        );
        assert!(
            parse(&["--point-ms", "5"])
                .unwrap_err()
                .contains("`--point-ms`")
        );
        assert!(
            parse(&[
                "--rate",
                "5",
                "--url",
                "http://127.0.0.1:1/",
                "--workers",
                "3"
            ])
            .is_err()
        );
        assert!(
            parse(&["--overload", "--retry-storm"]).is_err(),
            "one mode at a time"
        );
        assert!(parse(&["--grpc", "--url", "http://127.0.0.1:1/"]).is_err());
        assert!(parse(&["--clients", "0"]).is_err());
    }

    #[test]
    fn flags_may_come_in_any_order_and_with_an_equals_sign() {
        let Ok(Mode::Overload { config, .. }) =
            parse(&["--workers=3", "--overload", "--point-ms", "500"])
        else {
            panic!("an overload run");
        };
        assert_eq!(
            (config.workers, config.point),
            (3, Duration::from_millis(500))
        );
    }

    #[test]
    fn the_flag_definitions_are_consistent() {
        Flags::command().debug_assert();
    }
}
