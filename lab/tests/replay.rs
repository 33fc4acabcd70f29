//! Replay fidelity (issue 40.4): a trace recorded from a real open-loop run
//! (Poisson arrivals at a fixed rate whatever the answers, work that blocks
//! a real worker thread for 20 ms) replayed at the run's own settings
//! predicts its refusal rate within 2 percentage points and its p99 wait
//! within 20%; replayed at other capacities, it predicts real runs at
//! those capacities (the same arrivals) as closely.

use std::sync::Arc;
use std::time::Duration;

use admission_core::trace::Trace;
use admission_core::{Admission, Pool};
use admission_lab::replay::{self, Setting};
use admission_lab::storm::percentile;
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

/// The work: a real worker thread blocked this long.
const WORK: Duration = Duration::from_millis(20);
/// How long each real run offers load.
const RUN: Duration = Duration::from_secs(4);

/// What a real run did.
struct Real {
    arrivals: usize,
    refused: usize,
    wait_p99: Duration,
    trace: String,
}

impl Real {
    fn refused_share(&self) -> f64 {
        self.refused as f64 / self.arrivals as f64
    }
}

/// Poisson arrival times at `rate` per second for [`RUN`], seeded.
fn schedule(rate: f64, seed: u64) -> Vec<Duration> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut at = Duration::ZERO;
    let mut arrivals = Vec::new();
    loop {
        at += Duration::from_secs_f64(-(1.0 - rng.random::<f64>()).ln() / rate);
        if at >= RUN {
            return arrivals;
        }
        arrivals.push(at);
    }
}

/// One real open-loop run against a pool of `capacity` threads, traced.
async fn real_run(name: &str, capacity: usize, queue: bool, arrivals: &[Duration]) -> Real {
    let pool = Pool::new(name, capacity).unwrap();
    let trace = Trace::new(1 << 16).unwrap();
    pool.trace_into(&trace).unwrap();
    let admission = if queue {
        Admission::Queue
    } else {
        Admission::FailFast
    };
    let start = tokio::time::Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for &at in arrivals {
        tokio::time::sleep_until(start + at).await;
        let pool = pool.clone();
        calls.spawn(async move {
            pool.run(
                || {
                    std::thread::sleep(WORK);
                    Ok::<_, std::fmt::Error>(())
                },
                admission,
            )
            .await
            .is_ok()
        });
    }
    let mut refused = 0;
    while let Some(call) = calls.join_next().await {
        if !call.unwrap() {
            refused += 1;
        }
    }
    let mut lines = Vec::new();
    trace.write_json_lines(&mut lines).unwrap();
    let trace = String::from_utf8(lines).unwrap();
    // The admitted calls' waits, as the pool measured them.
    let mut waits: Vec<Duration> = trace
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|entry| entry["outcome"] == "admitted")
        .map(|entry| Duration::from_secs_f64(entry["waited_ms"].as_f64().unwrap() / 1000.0))
        .collect();
    Real {
        arrivals: arrivals.len(),
        refused,
        wait_p99: percentile(&mut waits, 99.0).unwrap_or_default(),
        trace,
    }
}

fn predict(trace: &str, capacity: usize, queue: bool) -> replay::Prediction {
    let arrivals = replay::parse(trace, None).unwrap();
    replay::replay(&arrivals, Setting { capacity, queue }, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_trace_predicts_the_real_runs_refusals_and_waits() {
    // Two 20 ms slots serve 100 calls a second.
    let capacity = 2;
    let full = capacity as f64 / WORK.as_secs_f64();
    let cases = [
        ("fidelity-half-ff", 0.5, false),
        ("fidelity-one-ff", 1.0, false),
        ("fidelity-three-ff", 3.0, false),
        ("fidelity-one-queue", 1.0, true),
        ("fidelity-three-queue", 3.0, true),
    ];
    let runs = cases.map(|(name, load, queue)| {
        let arrivals = schedule(load * full, 7);
        tokio::spawn(async move {
            (
                name,
                load,
                queue,
                real_run(name, capacity, queue, &arrivals).await,
            )
        })
    });
    let mut table =
        String::from("load  mode       real refused  predicted  real p99 wait  predicted\n");
    let mut failures = Vec::new();
    for run in runs {
        let (name, load, queue, real) = run.await.unwrap();
        let trace = real.trace.clone();
        let predicted = tokio::task::spawn_blocking(move || predict(&trace, capacity, queue))
            .await
            .unwrap();
        assert_eq!(
            predicted.arrivals, real.arrivals,
            "{name}: every arrival is in the trace"
        );
        let gap = (predicted.refused_share() - real.refused_share()).abs();
        table += &format!(
            "{load:>4}x {:<9} {:>11.2}% {:>9.2}% {:>13.1?} {:>10.1?}\n",
            if queue { "queue" } else { "fail-fast" },
            real.refused_share() * 100.0,
            predicted.refused_share() * 100.0,
            real.wait_p99,
            predicted.wait_p99,
        );
        if gap > 0.02 {
            failures.push(format!("{name}: refusals {gap:.3} apart"));
        }
        if queue {
            let (real_p99, predicted_p99) = (
                real.wait_p99.as_secs_f64(),
                predicted.wait_p99.as_secs_f64(),
            );
            // Within 20%, or 2 ms where both are near zero.
            if (predicted_p99 - real_p99).abs() > (0.2 * real_p99).max(0.002) {
                failures.push(format!(
                    "{name}: p99 wait {predicted_p99:.4} s predicted, {real_p99:.4} s real"
                ));
            }
        }
    }
    println!("{table}");
    assert!(failures.is_empty(), "{failures:?}\n{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_replayed_at_other_capacities_predicts_real_runs_there() {
    // The same arrivals (100 a second) against 1, 2 and 4 slots; the trace
    // of the 2-slot run predicts the other two.
    let arrivals = Arc::new(schedule(100.0, 11));
    let run = |name: &'static str, capacity: usize| {
        let arrivals = Arc::clone(&arrivals);
        tokio::spawn(async move { real_run(name, capacity, false, &arrivals).await })
    };
    let (one, two, four) = (
        run("other-one", 1),
        run("other-two", 2),
        run("other-four", 4),
    );
    let (one, two, four) = (one.await.unwrap(), two.await.unwrap(), four.await.unwrap());
    let trace = two.trace.clone();
    let (at_one, at_four) =
        tokio::task::spawn_blocking(move || (predict(&trace, 1, false), predict(&trace, 4, false)))
            .await
            .unwrap();
    let table = format!(
        "capacity  real refused  predicted from the 2-slot trace\n\
         1         {:>11.2}%  {:>9.2}%\n4         {:>11.2}%  {:>9.2}%\n",
        one.refused_share() * 100.0,
        at_one.refused_share() * 100.0,
        four.refused_share() * 100.0,
        at_four.refused_share() * 100.0,
    );
    println!("{table}");
    assert!(
        (at_one.refused_share() - one.refused_share()).abs() <= 0.02,
        "{table}"
    );
    assert!(
        (at_four.refused_share() - four.refused_share()).abs() <= 0.02,
        "{table}"
    );
    assert!(
        one.refused > four.refused,
        "fewer slots refuse more: {table}"
    );
}
