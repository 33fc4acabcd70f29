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
//! (`docs/overload.svg`). The exporter runs as a child pinned to CPU 0 and
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

use std::path::PathBuf;
use std::time::Duration;

use admission_examples::args::{ArgError, Args};
use admission_examples::cli::Cli;
use admission_examples::storm::open_loop::{Mix, OpenLoop, Report};
use admission_examples::storm::overload::{self, OverloadConfig, ServeSpec};
use admission_examples::storm::retry_storm::{self, StormPlan};
use admission_examples::storm::{self, StormConfig, Target, plot};

const USAGE: &str = "usage: storm [--clients N] [--duration-ms MS] [--walk-delay-ms MS] \
[--series N] [--workers N] [--give-up-ms MS] [--refused-pause-ms MS] [--max-requests N] \
[--coalesce-ms MS] [--url http://HOST:PORT/PATH] [--grpc]
       storm --rate R [--url URL | --gate G] [--duration-ms MS] [--timeout-ms MS] \
[--mix critical=W,default=W,sheddable=W] [--budget-ms MS] [--max-outstanding N] [--seed N]
       storm --overload [--point-ms MS] [--timeout-ms MS] [--workers N] [--walk-delay-ms MS] \
[--series N] [--svg PATH] [--no-pin] [--pinned-only] [--seed N]
       storm --retry-storm [--workers N] [--walk-delay-ms MS] [--before-ms MS] [--trigger-ms MS] \
[--trigger-multiple X] [--after-ms MS] [--amplification-ms MS] [--timeout-ms MS] [--svg PATH] [--seed N]";

/// What this run does.
#[derive(Debug)]
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
}

fn mode(mut args: Args) -> Result<Mode, ArgError> {
    if args.flag("serve-exporter") {
        let spec = ServeSpec::from_args(&mut args)?;
        args.finish()?;
        return Ok(Mode::ServeExporter(spec));
    }
    if args.flag("retry-storm") {
        let d = StormPlan::default();
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        let plan = StormPlan {
            workers: args.value("workers")?.unwrap_or(d.workers),
            walk_delay: ms(args.value("walk-delay-ms")?, d.walk_delay),
            before: ms(args.value("before-ms")?, d.before),
            trigger: ms(args.value("trigger-ms")?, d.trigger),
            trigger_multiple: args
                .value("trigger-multiple")?
                .unwrap_or(d.trigger_multiple),
            after: ms(args.value("after-ms")?, d.after),
            amplification: ms(args.value("amplification-ms")?, d.amplification),
            timeout: ms(args.value("timeout-ms")?, d.timeout),
            seed: args.value("seed")?.unwrap_or(d.seed),
            ..d
        };
        let svg = args
            .value::<PathBuf>("svg")?
            .unwrap_or_else(|| PathBuf::from("docs/retry-storm.svg"));
        args.finish()?;
        if plan.workers == 0 || plan.walk_delay.is_zero() || plan.timeout.is_zero() {
            return Err(ArgError::new(
                "`--workers`, `--walk-delay-ms` and `--timeout-ms` must be positive",
            ));
        }
        if !(plan.trigger_multiple.is_finite() && plan.trigger_multiple > 0.0) {
            return Err(ArgError::new(
                "`--trigger-multiple` must be a positive number",
            ));
        }
        if plan.before + plan.trigger + plan.after > Duration::from_secs(300) {
            return Err(ArgError::new(
                "the storm's phases must add up to at most 300 s",
            ));
        }
        return Ok(Mode::RetryStorm { plan, svg });
    }
    if args.flag("overload") {
        let d = OverloadConfig::default();
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        let config = OverloadConfig {
            point: ms(args.value("point-ms")?, d.point),
            workers: args.value("workers")?.unwrap_or(d.workers),
            walk_delay: ms(args.value("walk-delay-ms")?, d.walk_delay),
            series: args.value("series")?.unwrap_or(d.series),
            timeout: ms(args.value("timeout-ms")?, d.timeout),
            multiples: d.multiples,
            pin: !args.flag("no-pin"),
            unpinned_too: !args.flag("pinned-only"),
            seed: args.value("seed")?.unwrap_or(d.seed),
        };
        let svg = args
            .value::<PathBuf>("svg")?
            .unwrap_or_else(|| PathBuf::from("docs/overload.svg"));
        args.finish()?;
        if config.workers == 0 || config.point.is_zero() {
            return Err(ArgError::new(
                "`--workers` and `--point-ms` must be positive",
            ));
        }
        return Ok(Mode::Overload { config, svg });
    }
    if let Some(rate) = args.value::<f64>("rate")? {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(ArgError::new(
                "`--rate` must be a positive number of requests/s",
            ));
        }
        let url = args.value::<Target>("url")?;
        let serve = match url {
            Some(_) => None,
            None => Some(ServeSpec::from_args(&mut args)?),
        };
        let target = url.unwrap_or_else(|| Target::local(([127, 0, 0, 1], 0).into(), "/metrics"));
        let mut load = OpenLoop::new(target, rate);
        if let Some(ms) = args.value::<u64>("duration-ms")? {
            load.duration = Duration::from_millis(ms);
        }
        if let Some(ms) = args.value::<u64>("timeout-ms")? {
            load.timeout = Duration::from_millis(ms);
        }
        if let Some(mix) = args.value::<Mix>("mix")? {
            load.mix = mix;
        }
        load.budget = args.value::<u64>("budget-ms")?.map(Duration::from_millis);
        if let Some(n) = args.value("max-outstanding")? {
            load.max_outstanding = n;
        }
        if let Some(seed) = args.value("seed")? {
            load.seed = seed;
        }
        args.finish()?;
        return Ok(Mode::OpenLoop { load, serve });
    }
    config(args).map(Mode::Storm)
}

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
    let Some(mode) = CLI.start(tracing::Level::WARN, mode) else {
        return;
    };
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
