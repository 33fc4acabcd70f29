//! Issue 37.3: what fail-fast and the queue give a pool of C slots at a
//! load ρ, measured on the real gate. Arrivals are Poisson (a seeded
//! generator), each holds its slot for one work time S (fixed: the
//! fraction a loss system refuses does not depend on the work's
//! distribution), on tokio's paused clock, so 10,000 arrivals per cell
//! take no real time. Fail-fast's refused fraction is checked against
//! Erlang B; the queue's waits and refusals against the bounds its docs
//! state (a wait never longer than one work time, a refusal never later).
//! The table in the crate docs (`# Fail fast or queue`) is what this test
//! prints (`cargo test -p admission-core --test fail_fast_or_queue --
//! --nocapture`), and the test checks the docs' numbers against it.

use std::time::Duration;

use admission_core::{Admission, Pool};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// One work time: long enough that the timer's 1 ms grain is noise.
const WORK: Duration = Duration::from_secs(10);

const ARRIVALS: usize = 10_000;

/// splitmix64: a seeded generator, so every run sees the same arrivals.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // 53 random bits in (0, 1].
        ((z >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// An exponential draw of mean `mean`.
    fn exponential(&mut self, mean: Duration) -> Duration {
        mean.mul_f64(-self.next_f64().ln())
    }
}

/// Erlang B: the fraction of arrivals a loss system of `c` servers refuses
/// at an offered load of `a` erlangs.
fn erlang_b(c: usize, a: f64) -> f64 {
    (1..=c).fold(1.0, |b, k| a * b / (k as f64 + a * b))
}

#[derive(Debug, Default)]
struct Measured {
    refused: f64,
    /// Of the admitted, the longest wait, in work times.
    max_wait: f64,
    /// Of the admitted, the mean wait, in work times.
    mean_wait: f64,
    /// Of the refused, the latest refusal, in work times.
    max_refusal: f64,
}

/// Offers `c * rho` erlangs to a pool of `c` slots admitting as `admission`.
async fn measure(c: usize, rho: f64, admission: Admission, seed: u64) -> Measured {
    let pool = Pool::builder(format!("table-{c}-{rho}-{admission:?}"))
        .capacity(c)
        .expected_work(WORK)
        .build()
        .unwrap();
    let mut rng = Rng(seed);
    let between = WORK.div_f64(rho * c as f64);
    let mut arrivals = JoinSet::new();
    for _ in 0..ARRIVALS {
        tokio::time::sleep(rng.exponential(between)).await;
        let pool = pool.clone();
        arrivals.spawn(async move {
            let arrived = Instant::now();
            let admitted = pool.admit_with(admission).await;
            let waited = arrived.elapsed();
            if let Ok(slot) = admitted {
                tokio::time::sleep(WORK).await;
                drop(slot);
                (true, waited)
            } else {
                (false, waited)
            }
        });
    }
    let (mut refused, mut served, mut waits) = (0usize, 0usize, Duration::ZERO);
    let mut measured = Measured::default();
    let in_work = |took: Duration| took.as_secs_f64() / WORK.as_secs_f64();
    while let Some(outcome) = arrivals.join_next().await {
        let (admitted, waited) = outcome.unwrap();
        if admitted {
            served += 1;
            waits += waited;
            measured.max_wait = measured.max_wait.max(in_work(waited));
        } else {
            refused += 1;
            measured.max_refusal = measured.max_refusal.max(in_work(waited));
        }
    }
    measured.refused = refused as f64 / ARRIVALS as f64;
    measured.mean_wait = in_work(waits) / served.max(1) as f64;
    measured
}

/// The rows of the docs' table: C, ρ, Erlang B, fail-fast refused, queue
/// refused, queue mean wait, queue longest wait.
fn documented() -> Vec<[f64; 7]> {
    include_str!("../src/lib.rs")
        .lines()
        .filter_map(|line| line.strip_prefix("//! | "))
        .filter_map(|row| {
            let cells: Vec<f64> = row
                .split('|')
                .map(|cell| cell.trim().trim_end_matches('%').trim_end_matches(" S"))
                .filter_map(|cell| cell.parse().ok())
                .collect();
            <[f64; 7]>::try_from(cells).ok()
        })
        .collect()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn fail_fast_refuses_as_erlang_b_and_the_queue_within_one_work_time() {
    let mut rows = Vec::new();
    println!(
        "| C | ρ | Erlang B | fail-fast refused | queue refused | queue mean wait | queue longest wait |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (i, c) in [1usize, 2, 4, 8].into_iter().enumerate() {
        for (j, rho) in [0.5, 0.8, 1.0, 2.0].into_iter().enumerate() {
            let seed = (i * 4 + j) as u64;
            let expected = erlang_b(c, rho * c as f64);
            let fail_fast = measure(c, rho, Admission::FailFast, seed).await;
            let queue = measure(c, rho, Admission::Queue, seed).await;
            println!(
                "| {c} | {rho} | {:.1}% | {:.1}% | {:.1}% | {:.2} S | {:.2} S |",
                expected * 100.0,
                fail_fast.refused * 100.0,
                queue.refused * 100.0,
                queue.mean_wait,
                queue.max_wait,
            );
            assert!(
                (fail_fast.refused - expected).abs() < 0.02,
                "C={c} ρ={rho}: fail-fast refused {:.3}, Erlang B {expected:.3}",
                fail_fast.refused
            );
            assert_eq!(fail_fast.max_refusal, 0.0, "fail-fast never waits");
            assert!(
                queue.refused < fail_fast.refused || fail_fast.refused == 0.0,
                "C={c} ρ={rho}: the queue serves bursts fail-fast refuses"
            );
            // A queued caller waits at most one work time (the
            // expectation the pool starts from), admitted or refused.
            assert!(queue.max_wait <= 1.001, "C={c} ρ={rho}: {queue:?}");
            assert!(queue.max_refusal <= 1.001, "C={c} ρ={rho}: {queue:?}");
            rows.push([
                c as f64,
                rho,
                expected * 100.0,
                fail_fast.refused * 100.0,
                queue.refused * 100.0,
                queue.mean_wait,
                queue.max_wait,
            ]);
        }
    }
    let docs = documented();
    assert_eq!(docs.len(), rows.len(), "the docs' table has every cell");
    for (doc, row) in docs.iter().zip(&rows) {
        for (documented, measured) in doc.iter().zip(row) {
            assert!(
                (documented - measured).abs() <= 0.051,
                "the docs say {doc:?}, measured {row:?}"
            );
        }
    }
}
