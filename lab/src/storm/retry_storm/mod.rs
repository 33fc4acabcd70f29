//! The retry-storm scenario (`storm --retry-storm`): open-loop Poisson
//! load on this project's exporter (behind admission, fail-fast) at 0.8x
//! its capacity, a trigger (3x for 10 s), then 0.8x again for 20 s; once
//! per client kind, each against a fresh exporter; the same again with an
//! ingress ([`IngressPlan`]) in front of the exporter that spends a worker's turn
//! on every attempt (so retries cost capacity); then 10x overload from
//! cold for the amplification table. Every figure is per second of
//! scheduled arrival, so goodput never exceeds what was offered.
//!
//! This module owns the schedule, the run and its tables. It never loads
//! anything but the exporter it starts on 127.0.0.1, and every run ends by
//! itself: each request is bounded by its deadline, the outstanding ones
//! by [`StormPlan::max_outstanding`].

mod clients;
mod ingress;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tokio::time::Instant;

use self::clients::{Caller, Ended};
pub use self::clients::{Kind, Seconds};
use self::ingress::Ingress;
pub use self::ingress::IngressPlan;
use crate::progress::Progress;
use crate::storm::plot::timeline_svg;
use admission_examples::exporter::{Config, Exporter, Gate};

/// What the scenario runs.
#[derive(Debug, Clone, PartialEq)]
pub struct StormPlan {
    /// Walk slots of the exporter.
    pub workers: usize,
    /// The time each walk sleeps on its worker (capacity is
    /// `workers / walk_delay`).
    pub walk_delay: Duration,
    /// Steady load before the trigger.
    pub before: Duration,
    /// The trigger's length.
    pub trigger: Duration,
    /// The trigger's load, in multiples of capacity.
    pub trigger_multiple: f64,
    /// Steady load after the trigger.
    pub after: Duration,
    /// The steady load, in multiples of capacity.
    pub steady_multiple: f64,
    /// The length of each 10x amplification run (zero: none).
    pub amplification: Duration,
    /// Each application request's deadline, retries included.
    pub timeout: Duration,
    /// The naive and `tower::retry` clients' timeout of one attempt, after
    /// which they retry (a per-try timeout, as such clients are commonly
    /// set up); `admission-client` sends the time left instead.
    pub attempt_timeout: Duration,
    /// The ingress of the second scenario.
    pub ingress: IngressPlan,
    /// The third part: steady load on short work (zero length: none).
    pub short_work: ShortWork,
    /// Requests waiting at once, at most (the rest are counted as
    /// dropped, never sent).
    pub max_outstanding: usize,
    /// The arrival schedule's seed.
    pub seed: u64,
}

impl Default for StormPlan {
    /// 32 workers x 320 ms (100 walks/s), 5 s at 0.8x, 10 s at 3x, 20 s
    /// at 0.8x, 4 s at 10x, 2 s deadlines, 500 ms per-try timeouts; an
    /// ingress of 4 workers x 10 ms (400 attempts/s, four times the
    /// exporter's capacity). Many slots, because a fail-fast pool is a loss
    /// system: at 0.8x, Poisson arrivals find 2 slots full a third of the
    /// time (Erlang B), 32 slots about 3%.
    fn default() -> Self {
        StormPlan {
            workers: 32,
            walk_delay: Duration::from_millis(320),
            before: Duration::from_secs(5),
            trigger: Duration::from_secs(10),
            trigger_multiple: 3.0,
            after: Duration::from_secs(20),
            steady_multiple: 0.8,
            amplification: Duration::from_secs(4),
            timeout: Duration::from_secs(2),
            attempt_timeout: Duration::from_millis(500),
            ingress: IngressPlan {
                workers: 4,
                cost: Duration::from_millis(10),
            },
            short_work: ShortWork {
                workers: 4,
                walk_delay: Duration::from_millis(20),
                length: Duration::from_secs(10),
            },
            max_outstanding: 20_000,
            seed: 1,
        }
    }
}

impl StormPlan {
    /// Walks per second the exporter can serve.
    pub fn capacity(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a handful of workers")]
        let workers = self.workers as f64;
        workers / self.walk_delay.as_secs_f64()
    }

    fn length(&self) -> Duration {
        self.before + self.trigger + self.after
    }
}

/// Short work for the hint comparison: a pool whose walks take
/// milliseconds, at the plan's steady load, where `Retry-After` must say
/// 1 s and `x-admission-retry-after-ms` says what the pool expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortWork {
    /// Walk slots of the exporter.
    pub workers: usize,
    /// The time each walk takes.
    pub walk_delay: Duration,
    /// How long each of the two runs lasts.
    pub length: Duration,
}

impl ShortWork {
    /// Walks per second the exporter can serve.
    pub fn capacity(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a handful of workers")]
        let workers = self.workers as f64;
        workers / self.walk_delay.as_secs_f64()
    }
}

/// One second of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Second {
    /// Application requests scheduled in it.
    pub offered: u64,
    /// Attempts sent in it (the server sees each).
    pub attempts: u64,
    /// Of the requests scheduled in it, those answered 2xx in time.
    pub good: u64,
    /// Refusals answered in it.
    pub refusals: u64,
    /// Of the requests scheduled in it, those rejected locally.
    pub throttled: u64,
}

/// One run of one client kind.
#[derive(Debug, Clone)]
pub struct KindRun {
    /// The client.
    pub kind: Kind,
    /// Per second of the run.
    pub seconds: Vec<Second>,
    /// `(hint, waited)` of every retry after a server hint.
    pub hinted: Vec<(Duration, Duration)>,
    /// From schedule to answer, of every request answered 2xx in time.
    pub latencies: Vec<Duration>,
    /// Requests never sent because too many were outstanding.
    pub dropped: u64,
}

impl KindRun {
    /// Seconds from the trigger's end until goodput is, and stays to the
    /// run's end, at least `share` of what was offered; `None` when it
    /// never is.
    pub fn recovery(&self, trigger_end: usize, share: f64) -> Option<usize> {
        let met = |s: &Second| {
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            let (good, offered) = (s.good as f64, s.offered as f64);
            good >= share * offered
        };
        let tail = self.seconds.get(trigger_end..)?;
        let last_miss = tail.iter().rposition(|s| !met(s));
        match last_miss {
            None => Some(0),
            Some(i) if i + 1 < tail.len() => Some(i + 1),
            Some(_) => None,
        }
    }

    /// Seconds from the trigger's end to the first second whose goodput is
    /// at least `share` of what was offered.
    pub fn first_at(&self, trigger_end: usize, share: f64) -> Option<usize> {
        self.seconds.get(trigger_end..)?.iter().position(|s| {
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            let (good, offered) = (s.good as f64, s.offered as f64);
            good >= share * offered
        })
    }

    /// Attempts sent over application requests made.
    pub fn amplification(&self) -> f64 {
        let attempts: u64 = self.seconds.iter().map(|s| s.attempts).sum();
        let offered: u64 = self.seconds.iter().map(|s| s.offered).sum();
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let ratio = attempts as f64 / offered.max(1) as f64;
        ratio
    }
}

/// The whole scenario: the storm runs and the amplification runs.
#[derive(Debug, Clone)]
pub struct StormRun {
    /// The plan it ran.
    pub plan: StormPlan,
    /// The trigger runs, one per kind.
    pub storms: Vec<KindRun>,
    /// The trigger runs behind the ingress, one per kind.
    pub ingress_storms: Vec<KindRun>,
    /// The 10x runs, one per kind.
    pub overloads: Vec<KindRun>,
    /// The short-work runs of `admission-client`: `(whether it read the
    /// millisecond hint, the run)`.
    pub short_work: Vec<(bool, KindRun)>,
}

/// Runs the scenario.
///
/// # Cancel safety
///
/// Not cancel safe: dropping it leaves the exporter of the run under way
/// serving until the process ends.
///
/// # Errors
///
/// An [`std::io::Error`] when an exporter cannot be built or bound.
pub async fn run(plan: &StormPlan) -> std::io::Result<StormRun> {
    let capacity = plan.capacity();
    let steady = plan.steady_multiple * capacity;
    let (before, trigger_end) = (plan.before, plan.before + plan.trigger);
    let storm_rate = |t: Duration| {
        if t >= before && t < trigger_end {
            plan.trigger_multiple * capacity
        } else {
            steady
        }
    };
    let steps = 6
        + if plan.amplification.is_zero() { 0 } else { 3 }
        + if plan.short_work.length.is_zero() {
            0
        } else {
            2
        };
    let progress = Progress::new("retry storm", steps);
    let step = |what: String| {
        progress.line(&format!("storm: {what}"));
        progress.start(&what);
    };
    let mut storms = Vec::new();
    let mut ingress_storms = Vec::new();
    let mut overloads = Vec::new();
    for kind in Kind::ALL {
        step(format!("retry storm, {}", kind.name()));
        storms.push(one(plan, kind, plan.length(), &storm_rate, Setup::of(plan)).await?);
        progress.done();
    }
    for kind in Kind::ALL {
        step(format!("retry storm behind the ingress, {}", kind.name()));
        let setup = Setup {
            ingress: Some(plan.ingress),
            ..Setup::of(plan)
        };
        ingress_storms.push(one(plan, kind, plan.length(), &storm_rate, setup).await?);
        progress.done();
    }
    if !plan.amplification.is_zero() {
        for kind in Kind::ALL {
            step(format!("10x overload, {}", kind.name()));
            let rate = |_| 10.0 * capacity;
            overloads.push(one(plan, kind, plan.amplification, &rate, Setup::of(plan)).await?);
            progress.done();
        }
    }
    let mut short_work = Vec::new();
    if !plan.short_work.length.is_zero() {
        let short = plan.short_work;
        let rate = |_| plan.steady_multiple * short.capacity();
        for fine_hint in [false, true] {
            let reads = if fine_hint {
                "the ms hint"
            } else {
                "Retry-After only"
            };
            step(format!("short work, admission-client reading {reads}"));
            let setup = Setup {
                workers: short.workers,
                walk_delay: short.walk_delay,
                ingress: None,
                fine_hint,
            };
            let run = one(plan, Kind::Admission, short.length, &rate, setup).await?;
            short_work.push((fine_hint, run));
            progress.done();
        }
    }
    progress.finish();
    Ok(StormRun {
        plan: plan.clone(),
        storms,
        ingress_storms,
        overloads,
        short_work,
    })
}

/// What one run stands up: the exporter's size, an ingress or none, and
/// whether the client sees the millisecond hint.
#[derive(Debug, Clone, Copy)]
struct Setup {
    workers: usize,
    walk_delay: Duration,
    ingress: Option<IngressPlan>,
    fine_hint: bool,
}

impl Setup {
    fn of(plan: &StormPlan) -> Setup {
        Setup {
            workers: plan.workers,
            walk_delay: plan.walk_delay,
            ingress: None,
            fine_hint: true,
        }
    }
}

/// One kind against a fresh exporter (behind a fresh ingress when the
/// setup has one), for `length` at `rate(t)` per second.
async fn one(
    plan: &StormPlan,
    kind: Kind,
    length: Duration,
    rate: &dyn Fn(Duration) -> f64,
    setup: Setup,
) -> std::io::Result<KindRun> {
    let exporter = Exporter::new(Config {
        gate: Gate::Admission,
        workers: setup.workers,
        walk_delay: setup.walk_delay,
        series: 100,
        cardinality_interval: Duration::from_secs(3600),
        shutdown_deadline: Duration::from_secs(2),
        ..Config::default()
    })?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let exporter_addr = listener.local_addr()?;
    let ingress = match setup.ingress {
        Some(ingress) => Some(Ingress::start(ingress, exporter_addr).await?),
        None => None,
    };
    let target = ingress.as_ref().map_or(exporter_addr, Ingress::addr);
    let uri: http::Uri = format!("http://{target}/metrics")
        .parse()
        .map_err(std::io::Error::other)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(exporter.serve(listener, async move {
        let _ = stopped.await;
    }));

    let seconds =
        usize::try_from(length.as_secs() + u64::from(length.subsec_nanos() > 0)).unwrap_or(0);
    // Counters run a few seconds past the schedule, for late answers.
    let start = Instant::now();
    let counter = || Arc::new(Seconds::new(start, seconds + 5));
    let (offered, attempts, good, refusals, throttled) =
        (counter(), counter(), counter(), counter(), counter());
    let caller = Caller::new(
        kind,
        attempts.clone(),
        refusals.clone(),
        plan.timeout,
        plan.attempt_timeout,
        setup.fine_hint,
    );
    let hinted = Arc::new(Mutex::new(Vec::new()));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let outstanding = Arc::new(AtomicUsize::new(0));
    let mut dropped = 0;
    let mut rng = SmallRng::seed_from_u64(plan.seed);
    let mut at = start;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let r = rate(at - start).max(1e-3);
        at += Duration::from_secs_f64(-(1.0 - rng.random::<f64>()).ln() / r);
        if at - start >= length {
            break;
        }
        tokio::time::sleep_until(at).await;
        offered.add(at);
        if outstanding.load(Ordering::Relaxed) >= plan.max_outstanding {
            dropped += 1;
            continue;
        }
        outstanding.fetch_add(1, Ordering::Relaxed);
        let (caller, uri, good, throttled, hinted, latencies, outstanding) = (
            caller.clone(),
            uri.clone(),
            good.clone(),
            throttled.clone(),
            hinted.clone(),
            latencies.clone(),
            outstanding.clone(),
        );
        let deadline = at + plan.timeout;
        tasks.spawn(async move {
            let (ended, retries) = caller.call(&uri, deadline).await;
            match ended {
                Ended::Good => {
                    good.add(at);
                    latencies.lock().await.push(at.elapsed());
                }
                Ended::Throttled => throttled.add(at),
                Ended::Refused | Ended::Failed => {}
            }
            let waits: Vec<_> = retries
                .0
                .iter()
                .filter_map(|r| r.hint.map(|h| (h, r.waited)))
                .collect();
            if !waits.is_empty() {
                hinted.lock().await.extend(waits);
            }
            outstanding.fetch_sub(1, Ordering::Relaxed);
        });
        // Finished tasks are reaped as the run goes, so memory stays bounded.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    drop(ingress);
    let _ = stop.send(());
    let _ = server.await;
    let per_second = (0..seconds)
        .map(|i| Second {
            offered: offered.get(i),
            attempts: attempts.get(i),
            good: good.get(i),
            refusals: refusals.get(i),
            throttled: throttled.get(i),
        })
        .collect();
    let hinted = std::mem::take(&mut *hinted.lock().await);
    let latencies = std::mem::take(&mut *latencies.lock().await);
    debug_assert!(attempts.total() >= good.total());
    Ok(KindRun {
        kind,
        seconds: per_second,
        hinted,
        latencies,
        dropped,
    })
}

/// The Markdown tables: per second and recovery for each scenario, then
/// amplification and honest waits.
pub fn render(run: &StormRun) -> String {
    let plan = &run.plan;
    let trigger_end = usize::try_from((plan.before + plan.trigger).as_secs()).unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "capacity {:.0} walks/s ({} workers x {} ms); steady {:.1}x, trigger {:.1}x from {} s to {} s, deadline {} ms, per-try timeout {} ms (naive, tower::retry)\n",
        plan.capacity(),
        plan.workers,
        plan.walk_delay.as_millis(),
        plan.steady_multiple,
        plan.trigger_multiple,
        plan.before.as_secs(),
        trigger_end,
        plan.timeout.as_millis(),
        plan.attempt_timeout.as_millis()
    );
    out.push_str("Straight to the exporter:\n\n");
    storm_tables(&mut out, plan, &run.storms);
    if !run.ingress_storms.is_empty() {
        let _ = writeln!(
            out,
            "\nBehind the ingress ({} workers x {} ms per attempt, {:.0} attempts/s):\n",
            plan.ingress.workers,
            plan.ingress.cost.as_millis(),
            plan.ingress.capacity()
        );
        storm_tables(&mut out, plan, &run.ingress_storms);
    }

    if !run.overloads.is_empty() {
        let _ = write!(
            out,
            "\n| client at 10x ({:.0} requests/s for {} s) | requests | attempts | amplification | goodput/s | throttled locally |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
            10.0 * plan.capacity(),
            plan.amplification.as_secs()
        );
        for r in &run.overloads {
            let sum = |f: fn(&Second) -> u64| r.seconds.iter().map(f).sum::<u64>();
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            let goodput = sum(|s| s.good) as f64 / plan.amplification.as_secs_f64();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2} | {goodput:.1} | {} |",
                r.kind.name(),
                sum(|s| s.offered),
                sum(|s| s.attempts),
                r.amplification(),
                sum(|s| s.throttled)
            );
        }
    }

    if !run.short_work.is_empty() {
        short_work_table(&mut out, plan, &run.short_work);
    }

    let hinted: Vec<_> = run
        .storms
        .iter()
        .chain(&run.ingress_storms)
        .chain(&run.overloads)
        .chain(run.short_work.iter().map(|(_, r)| r))
        .flat_map(|r| r.hinted.iter().copied())
        .collect();
    let (seconds, millis): (Vec<_>, Vec<_>) = hinted
        .into_iter()
        .partition(|(h, _)| *h >= Duration::from_secs(1));
    for (which, hinted) in [
        ("hints of 1 s or more", seconds),
        ("hints under 1 s", millis),
    ] {
        if hinted.is_empty() {
            continue;
        }
        let early = hinted.iter().filter(|(h, w)| w < h).count();
        let late = |(h, w): &(Duration, Duration)| w.saturating_sub(*h).as_secs_f64();
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let (mean_share, mean_late) = (
            hinted
                .iter()
                .map(|p| late(p) / p.0.as_secs_f64().max(1e-3))
                .sum::<f64>()
                / hinted.len() as f64,
            hinted.iter().map(late).sum::<f64>() / hinted.len() as f64,
        );
        let max_late = hinted.iter().map(late).fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "\nhonest waits (admission-client, {which}): {} retries after a hint, {early} earlier than it, on average {:.1}% of the hint ({:.2} ms) after it, at most {:.1} ms after",
            hinted.len(),
            mean_share * 100.0,
            mean_late * 1e3,
            max_late * 1e3
        );
    }
    out
}

/// The short-work comparison: the same client with and without the
/// millisecond hint.
fn short_work_table(out: &mut String, plan: &StormPlan, runs: &[(bool, KindRun)]) {
    let short = plan.short_work;
    let _ = write!(
        out,
        "\nShort work ({} workers x {} ms, {:.0} walks/s) at {:.1}x for {} s, admission-client, {} ms deadlines:\n\n| the client reads | requests | goodput/offered | attempts per request | retries after a hint | mean wait after a hint | p50 | p99 (answered 2xx) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        short.workers,
        short.walk_delay.as_millis(),
        short.capacity(),
        plan.steady_multiple,
        short.length.as_secs(),
        plan.timeout.as_millis()
    );
    for (fine_hint, r) in runs {
        let offered: u64 = r.seconds.iter().map(|s| s.offered).sum();
        let good: u64 = r.seconds.iter().map(|s| s.good).sum();
        let mut latencies = r.latencies.clone();
        latencies.sort_unstable();
        let at = |q: f64| {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "an index into a short list"
            )]
            let i = ((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1);
            latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let (share, mean_wait) = (
            good as f64 / offered.max(1) as f64,
            r.hinted.iter().map(|(_, w)| w.as_secs_f64()).sum::<f64>()
                / r.hinted.len().max(1) as f64,
        );
        let _ = writeln!(
            out,
            "| {} | {offered} | {:.1}% | {:.2} | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
            if *fine_hint {
                "`x-admission-retry-after-ms`"
            } else {
                "`Retry-After` only"
            },
            share * 100.0,
            r.amplification(),
            r.hinted.len(),
            mean_wait * 1e3,
            at(0.5),
            at(0.99)
        );
    }
}

/// One scenario's per-second table and its recovery table.
fn storm_tables(out: &mut String, plan: &StormPlan, storms: &[KindRun]) {
    let trigger_end = usize::try_from((plan.before + plan.trigger).as_secs()).unwrap_or(0);
    out.push_str("| s |");
    for r in storms {
        let _ = write!(
            out,
            " {} offered / attempts / goodput / refusals |",
            r.kind.name()
        );
    }
    out.push_str("\n| ---: |");
    for _ in storms {
        out.push_str(" ---: |");
    }
    out.push('\n');
    let len = storms.iter().map(|r| r.seconds.len()).max().unwrap_or(0);
    for i in 0..len {
        let _ = write!(out, "| {i} |");
        for r in storms {
            let s = r.seconds.get(i).copied().unwrap_or_default();
            let _ = write!(
                out,
                " {} / {} / {} / {} |",
                s.offered, s.attempts, s.good, s.refusals
            );
        }
        out.push('\n');
    }

    out.push_str("\n| client | first second at 95% of offered (s after the trigger) | at 95% from then to the end (s after the trigger) | goodput/offered after the trigger | amplification in the trigger | dropped |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for r in storms {
        let after = &r.seconds[trigger_end.min(r.seconds.len())..];
        let (good, offered) = after
            .iter()
            .fold((0, 0), |(g, o), s| (g + s.good, o + s.offered));
        let during = &r.seconds
            [usize::try_from(plan.before.as_secs()).unwrap_or(0)..trigger_end.min(r.seconds.len())];
        let (att, off) = during
            .iter()
            .fold((0, 0), |(a, o), s| (a + s.attempts, o + s.offered));
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let (share, amp) = (
            good as f64 / offered.max(1) as f64,
            att as f64 / off.max(1) as f64,
        );
        let recovery = r.recovery(trigger_end, 0.95).map_or_else(
            || format!("not within {} s", plan.after.as_secs()),
            |s| s.to_string(),
        );
        let first = r
            .first_at(trigger_end, 0.95)
            .map_or_else(|| "never".to_owned(), |s| s.to_string());
        let _ = writeln!(
            out,
            "| {} | {first} | {recovery} | {:.1}% | {amp:.2} | {} |",
            r.kind.name(),
            share * 100.0,
            r.dropped
        );
    }
}

/// Points of a line: `(x, y)`.
pub type Points = Vec<(f64, f64)>;

/// The goodput-over-time lines of one scenario's runs for the plot:
/// `(name, [(second, goodput)])`, and the offered load of the first run.
pub fn lines(storms: &[KindRun]) -> (Points, Vec<(&'static str, Points)>) {
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let point = |i: usize, v: u64| (i as f64 + 0.5, v as f64);
    let offered = storms.first().map_or_else(Vec::new, |r| {
        r.seconds
            .iter()
            .enumerate()
            .map(|(i, s)| point(i, s.offered))
            .collect()
    });
    let lines = storms
        .iter()
        .map(|r| {
            (
                r.kind.name(),
                r.seconds
                    .iter()
                    .enumerate()
                    .map(|(i, s)| point(i, s.good))
                    .collect(),
            )
        })
        .collect();
    (offered, lines)
}

/// Draws goodput over time, one line per client kind: the straight
/// scenario to `svg`, the one behind the ingress beside it (`-ingress`
/// before the extension). Returns the paths written.
///
/// # Errors
///
/// An [`std::io::Error`] when a picture cannot be drawn or written.
pub fn draw(run: &StormRun, svg: &Path) -> std::io::Result<Vec<PathBuf>> {
    let plan = &run.plan;
    let title = format!(
        "Retry storm: {:.1}x for {} s, then {:.1}x ({} workers x {} ms, {} ms deadlines)",
        plan.trigger_multiple,
        plan.trigger.as_secs(),
        plan.steady_multiple,
        plan.workers,
        plan.walk_delay.as_millis(),
        plan.timeout.as_millis()
    );
    let trigger = (
        plan.before.as_secs_f64(),
        (plan.before + plan.trigger).as_secs_f64(),
    );
    let behind = svg.with_file_name(format!(
        "{}-ingress.{}",
        svg.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("retry-storm"),
        svg.extension().and_then(|s| s.to_str()).unwrap_or("svg")
    ));
    let ingress_title = format!(
        "{title}, behind an ingress of {} x {} ms per attempt",
        plan.ingress.workers,
        plan.ingress.cost.as_millis()
    );
    let mut written = Vec::new();
    for (path, title, storms) in [
        (svg.to_path_buf(), title, &run.storms),
        (behind, ingress_title, &run.ingress_storms),
    ] {
        if storms.is_empty() {
            continue;
        }
        let (offered, lines) = lines(storms);
        std::fs::write(&path, timeline_svg(&title, &offered, &lines, trigger)?)?;
        written.push(path);
    }
    Ok(written)
}
