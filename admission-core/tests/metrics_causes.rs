//! Issue 28: refusals by cause. The pool counts each refusal under its
//! code, the wait of every caller that waited in line before it was
//! admitted or refused, the callers a more critical one displaced from a
//! full queue and those a standing queue let go. Waits run on tokio's
//! paused clock, so the recorded waits are exact.

use std::time::Duration;

use admission_core::pool::QueuePolicy;
use admission_core::stats::{DURATION_BUCKETS, PoolStats};
use admission_core::{Admission, Caller, Code, Criticality, Pool, Refusal};

const POLICY: QueuePolicy = QueuePolicy {
    bound: 3,
    target: Duration::from_millis(5),
    interval: Duration::from_millis(100),
};

/// A slot taken on another thread: the test's task may wait for more
/// without being its holder (which would be refused as reentrant).
fn held_elsewhere(pool: &Pool) -> admission_core::pool::Slot {
    std::thread::scope(|s| s.spawn(|| pool.try_admit().unwrap()).join().unwrap())
}

async fn until_waiting(pool: &Pool, n: usize) {
    while pool.stats().waiting != n {
        tokio::task::yield_now().await;
    }
}

fn waiter(
    pool: &Pool,
    level: Criticality,
    admission: Admission,
) -> tokio::task::JoinHandle<Result<(), Refusal>> {
    let pool = pool.clone();
    tokio::spawn(
        Caller::new(level).scope(async move { pool.admit_with(admission).await.map(drop) }),
    )
}

/// The index of the first bucket whose bound holds `d`.
fn bucket_of(d: Duration) -> usize {
    DURATION_BUCKETS
        .iter()
        .position(|&b| d.as_secs_f64() <= b)
        .unwrap()
}

fn only_in_bucket(durations: &admission_core::stats::Durations, d: Duration) {
    let i = bucket_of(d);
    assert_eq!(durations.count(), 1);
    assert_eq!(durations.buckets[i], 1, "in the bucket of {d:?}");
    if i > 0 {
        assert_eq!(durations.buckets[i - 1], 0, "not below it");
    }
    assert_eq!(durations.sum, d);
}

#[tokio::test(start_paused = true)]
async fn each_refusal_is_counted_under_its_code_and_criticality() {
    let pool = Pool::new("causes-codes", 1).unwrap();
    let held = held_elsewhere(&pool);
    let saturated = Caller::new(Criticality::Sheddable).scope(async { pool.try_admit() });
    assert_eq!(saturated.await.unwrap_err().code(), Code::Saturated);
    let timed_out = pool
        .admit_timeout(Duration::from_millis(3))
        .await
        .unwrap_err();
    assert_eq!(timed_out.code(), Code::WaitTimedOut);

    let stats = pool.stats();
    let row =
        |code: Code| stats.refused_by_code[Code::ALL.iter().position(|&c| c == code).unwrap()];
    assert_eq!(row(Code::Saturated), [0, 0, 1], "sheddable");
    assert_eq!(row(Code::WaitTimedOut), [0, 1, 0], "default");
    assert_eq!(stats.refused_with(Code::ShuttingDown), 0);
    assert_eq!(stats.refused, 2, "the total is unchanged by the split");
    assert_eq!(stats.refused_by_criticality, [0, 1, 1]);
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn the_wait_of_a_caller_that_waited_is_recorded_by_outcome() {
    let pool = Pool::new("causes-wait", 1).unwrap();
    // A caller a free slot admits at once never waited.
    drop(pool.admit().await.unwrap());
    assert_eq!(pool.stats().waited_admitted.count(), 0);

    let held = held_elsewhere(&pool);
    let refused = pool
        .admit_timeout(Duration::from_millis(3))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::WaitTimedOut);
    only_in_bucket(&pool.stats().waited_refused, Duration::from_millis(3));

    let admitted = waiter(&pool, Criticality::Default, Admission::Wait);
    until_waiting(&pool, 1).await;
    tokio::time::advance(Duration::from_millis(20)).await;
    drop(held);
    admitted.await.unwrap().unwrap();
    let stats = pool.stats();
    only_in_bucket(&stats.waited_admitted, Duration::from_millis(20));
    assert_eq!(stats.waited_refused.count(), 1, "unchanged");
}

#[tokio::test(start_paused = true)]
async fn a_caller_displaced_from_a_full_queue_is_counted_as_evicted() {
    let pool = Pool::builder("causes-evict")
        .capacity(2)
        .share(Criticality::Sheddable, 100)
        .queue(POLICY)
        .build()
        .unwrap();
    let held = [held_elsewhere(&pool), held_elsewhere(&pool)];
    let mut shed = Vec::new();
    for _ in 0..3 {
        shed.push(waiter(&pool, Criticality::Sheddable, Admission::Queue));
        until_waiting(&pool, shed.len()).await;
    }
    let default = waiter(&pool, Criticality::Default, Admission::Queue);
    let oldest = shed.remove(0).await.unwrap().unwrap_err();
    assert_eq!(oldest.code(), Code::Saturated);
    let stats = pool.stats();
    assert_eq!((stats.evicted, stats.shed_standing), (1, 0));
    assert_eq!(stats.refused_with(Code::Saturated), 1);
    assert_eq!(stats.waited_refused.count(), 1, "it had waited in line");
    drop(held);
    default.await.unwrap().unwrap();
    for waiter in shed {
        waiter.await.unwrap().unwrap();
    }
    assert_eq!(pool.stats().evicted, 1, "those served are not evicted");
}

/// Makes the default queue of `pool` stand: a first caller joins, a second
/// 60 ms later; at 101 ms the first has timed out at the interval while the
/// queue never emptied. Returns the second, still in line.
async fn stand(pool: &Pool) -> tokio::task::JoinHandle<Result<(), Refusal>> {
    let first = waiter(pool, Criticality::Default, Admission::Queue);
    until_waiting(pool, 1).await;
    tokio::time::advance(Duration::from_millis(60)).await;
    let second = waiter(pool, Criticality::Default, Admission::Queue);
    until_waiting(pool, 2).await;
    tokio::time::advance(Duration::from_millis(41)).await;
    assert_eq!(first.await.unwrap().unwrap_err().code(), Code::WaitTimedOut);
    second
}

#[tokio::test(start_paused = true)]
async fn callers_let_go_by_a_standing_queue_are_counted_apart_from_timeouts() {
    let pool = Pool::builder("causes-standing")
        .capacity(1)
        .queue(POLICY)
        .build()
        .unwrap();
    let held = held_elsewhere(&pool);
    let old = stand(&pool).await;
    let timed_out = pool.stats();
    assert_eq!(
        (
            timed_out.shed_standing,
            timed_out.refused_with(Code::WaitTimedOut)
        ),
        (0, 1),
        "the first timed out at the interval, before the queue stood"
    );
    // A newcomer to the standing queue: `old`, past the target, is let go.
    let newer = waiter(&pool, Criticality::Default, Admission::Queue);
    assert_eq!(old.await.unwrap().unwrap_err().code(), Code::WaitTimedOut);
    until_waiting(&pool, 1).await;
    // The newcomer waits the target at most, then the queue lets it go too.
    tokio::time::advance(POLICY.target).await;
    assert_eq!(newer.await.unwrap().unwrap_err().code(), Code::WaitTimedOut);
    let stats: PoolStats = pool.stats();
    assert_eq!(stats.shed_standing, 2, "the stale caller and the newcomer");
    assert_eq!(stats.refused_with(Code::WaitTimedOut), 3);
    assert_eq!(stats.evicted, 0);
    drop(held);
}
