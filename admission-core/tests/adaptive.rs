//! An adaptive request class in front of a simulated backend of `C`
//! hidden permits held `d` each, under open-loop arrivals, on a paused
//! tokio clock (virtual time: a minute of load runs in well under a second
//! of wall time, and every figure is exact, not a speed claim).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use admission_core::{AdaptiveLimit, Class, RequestPools};
use tokio::sync::Semaphore;
use tokio::time::{Instant, sleep, timeout};

const D: Duration = Duration::from_millis(20);
const TIMEOUT: Duration = Duration::from_millis(200);

/// The backend: `permits` hidden slots, each request holding one for
/// `hold` (both changeable while it runs).
struct Backend {
    permits: Semaphore,
    capacity: AtomicUsize,
    hold_us: AtomicU64,
}

impl Backend {
    fn new(capacity: usize) -> Arc<Backend> {
        Arc::new(Backend {
            permits: Semaphore::new(capacity),
            capacity: AtomicUsize::new(capacity),
            hold_us: AtomicU64::new(D.as_micros() as u64),
        })
    }

    /// Halves or grows the hidden capacity: permits taken away are
    /// acquired and forgotten as they come back.
    async fn set_capacity(&self, to: usize) {
        let from = self.capacity.swap(to, SeqCst);
        if to > from {
            self.permits.add_permits(to - from);
        } else {
            let taken = self
                .permits
                .acquire_many(u32::try_from(from - to).unwrap())
                .await
                .unwrap();
            taken.forget();
        }
    }

    async fn serve(&self) {
        let _permit = self.permits.acquire().await.unwrap();
        sleep(Duration::from_micros(self.hold_us.load(SeqCst))).await;
    }
}

#[derive(Default)]
struct Tally {
    good: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    /// Set when a lease was admitted while the class already held as many
    /// leases as its limit allowed before the admission.
    over: AtomicBool,
}

/// Open-loop arrivals at `rate` per second for `length` (a fixed-seed
/// Poisson schedule); each takes a lease of the work class or is refused,
/// and gives up at `TIMEOUT`. Samples the limit every 100 ms.
async fn load(
    requests: &RequestPools,
    backend: &Arc<Backend>,
    tally: &Arc<Tally>,
    rate: f64,
    length: Duration,
    seed: &mut u64,
) -> Vec<usize> {
    let start = Instant::now();
    let mut next = start;
    let mut limits = Vec::new();
    let mut sampled = start;
    while next < start + length {
        // xorshift: a fixed schedule for a fixed seed.
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let u = (*seed >> 11) as f64 / (1u64 << 53) as f64;
        next += Duration::from_secs_f64(-(1.0 - u).ln() / rate);
        tokio::time::sleep_until(next).await;
        while sampled + Duration::from_millis(100) <= Instant::now() {
            sampled += Duration::from_millis(100);
            limits.push(requests.pool(Class::Work).stats().limit);
        }
        let before = requests.pool(Class::Work).stats();
        match requests.try_lease(Class::Work) {
            Ok(lease) => {
                if before.in_use >= before.limit {
                    tally.over.store(true, SeqCst);
                }
                let (backend, tally) = (Arc::clone(backend), Arc::clone(tally));
                tokio::spawn(async move {
                    let counter = match timeout(TIMEOUT, backend.serve()).await {
                        Ok(()) => &tally.good,
                        Err(_) => &tally.timed_out,
                    };
                    counter.fetch_add(1, SeqCst);
                    drop(lease);
                });
            }
            Err(_) => {
                tally.refused.fetch_add(1, SeqCst);
            }
        }
    }
    limits
}

fn adaptive(floor: usize) -> RequestPools {
    RequestPools::builder()
        .adaptive(Class::Work, AdaptiveLimit::new(floor, 200).timeout(TIMEOUT))
        .build()
        .unwrap()
}

fn mean_and_cv(xs: &[usize]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<usize>() as f64 / n;
    let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt() / mean)
}

/// Capacity: `C / d` per second.
fn capacity_rate(c: usize) -> f64 {
    c as f64 / D.as_secs_f64()
}

async fn drained(requests: &RequestPools) {
    while requests.pool(Class::Work).stats().in_use > 0 {
        sleep(Duration::from_millis(10)).await;
    }
    let stats = requests.pool(Class::Work).stats();
    assert_eq!(stats.admitted, stats.released, "every slot returned once");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn at_twice_capacity_the_limit_finds_the_knee_and_holds_it_without_drift() {
    let requests = adaptive(1);
    let backend = Backend::new(10);
    let tally = Arc::new(Tally::default());
    let mut seed = 7;
    let rate = 2.0 * capacity_rate(10);
    let early = load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(30),
        &mut seed,
    )
    .await;
    let late = load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(270),
        &mut seed,
    )
    .await;

    let (mean_early, _) = mean_and_cv(&early[100..]);
    let (mean, cv) = mean_and_cv(&late[late.len() - 300..]);
    assert!((10.0..=14.0).contains(&mean), "mean limit {mean}: {late:?}");
    assert!(cv < 0.10, "coefficient of variation {cv}");
    assert!(
        mean <= mean_early * 1.05,
        "no drift: {mean_early} after 30 s, {mean} after 5 min"
    );
    assert!(!tally.over.load(SeqCst), "never admitted over the limit");
    let good = tally.good.load(SeqCst) as f64;
    assert!(
        good / 300.0 >= 0.95 * capacity_rate(10),
        "goodput {}/s",
        good / 300.0
    );
    drained(&requests).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn at_half_capacity_after_warming_up_nothing_is_refused() {
    let requests = adaptive(1);
    let backend = Backend::new(10);
    let tally = Arc::new(Tally::default());
    let mut seed = 11;
    load(
        &requests,
        &backend,
        &tally,
        capacity_rate(10),
        Duration::from_secs(5),
        &mut seed,
    )
    .await;
    let warm = tally.refused.load(SeqCst);
    load(
        &requests,
        &backend,
        &tally,
        0.5 * capacity_rate(10),
        Duration::from_secs(60),
        &mut seed,
    )
    .await;
    assert_eq!(tally.refused.load(SeqCst), warm, "no refusal at half load");
    drained(&requests).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_capacity_step_is_followed_down_and_up_within_five_seconds() {
    let requests = adaptive(1);
    let backend = Backend::new(20);
    let tally = Arc::new(Tally::default());
    let mut seed = 3;
    let rate = 2.0 * capacity_rate(20);
    load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(10),
        &mut seed,
    )
    .await;
    backend.set_capacity(10).await;
    let down = load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(10),
        &mut seed,
    )
    .await;
    let (after_down, _) = mean_and_cv(&down[50..]);
    assert!((10.0..=14.0).contains(&after_down), "{down:?}");
    backend.set_capacity(20).await;
    let up = load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(10),
        &mut seed,
    )
    .await;
    let (after_up, _) = mean_and_cv(&up[50..]);
    assert!((20.0..=28.0).contains(&after_up), "{up:?}");
    drained(&requests).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn when_every_request_times_out_the_limit_is_bounded_and_leaves_the_floor_after() {
    let requests = adaptive(2);
    let backend = Backend::new(10);
    let tally = Arc::new(Tally::default());
    let mut seed = 5;
    let rate = 2.0 * capacity_rate(10);
    load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(10),
        &mut seed,
    )
    .await;
    // Every request now takes longer than its timeout: each is given up at
    // the same latency.
    backend
        .hold_us
        .store(4 * TIMEOUT.as_micros() as u64, SeqCst);
    let plateau = load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(20),
        &mut seed,
    )
    .await;
    assert!(
        plateau[100..].iter().all(|&l| l <= 4),
        "bounded near the floor: {plateau:?}"
    );
    backend.hold_us.store(D.as_micros() as u64, SeqCst);
    let after = load(
        &requests,
        &backend,
        &tally,
        rate,
        Duration::from_secs(10),
        &mut seed,
    )
    .await;
    let (mean, _) = mean_and_cv(&after[50..]);
    assert!((10.0..=14.0).contains(&mean), "left the floor: {after:?}");
    drained(&requests).await;
}
