//! Issue 17: criticality, deadline-aware admission and the bounded queue,
//! against the public API. Slots are held by guards or by real worker
//! threads blocked on gates the tests open; waits that must time out run on
//! tokio's paused clock, so "at once" and "at the target" are exact.

mod support;

use std::time::Duration;

use admission_core::pool::QueuePolicy;
use admission_core::{Admission, Caller, Code, ConfigError, Criticality, Pool, Refusal, WorkError};
use support::Gate;
use tokio::sync::mpsc;
use tokio::time::Instant;

const POLICY: QueuePolicy = QueuePolicy {
    bound: 3,
    target: Duration::from_millis(5),
    interval: Duration::from_millis(100),
};

fn queued_pool(name: &str, capacity: usize) -> Pool {
    Pool::builder(name)
        .capacity(capacity)
        .queue(POLICY)
        .build()
        .unwrap()
}

/// A slot taken on another thread: the test's task may wait for more
/// without being its holder (which would be refused as reentrant).
fn held_elsewhere(pool: &Pool) -> admission_core::pool::Slot {
    std::thread::scope(|s| s.spawn(|| pool.try_admit().unwrap()).join().unwrap())
}

/// Waits until `n` callers wait for a slot of `pool`.
async fn until_waiting(pool: &Pool, n: usize) {
    while pool.stats().waiting != n {
        tokio::task::yield_now().await;
    }
}

/// Makes `level`'s queue of `pool` stand (paused clock): a first caller
/// joins, a second joins 60 ms later, and at 105 ms the first has timed out
/// at the 100 ms interval while the queue has never emptied. Returns the
/// second, still in line.
async fn stand(
    pool: &Pool,
    level: Criticality,
    order: &mpsc::UnboundedSender<&'static str>,
) -> tokio::task::JoinHandle<Result<(), Refusal>> {
    let before = pool.stats().waiting;
    let first = waiter(pool, level, Admission::Queue, "first", order);
    until_waiting(pool, before + 1).await;
    tokio::time::advance(Duration::from_millis(60)).await;
    let second = waiter(pool, level, Admission::Queue, "second", order);
    until_waiting(pool, before + 2).await;
    tokio::time::advance(Duration::from_millis(45)).await;
    assert_eq!(first.await.unwrap().unwrap_err().code(), Code::WaitTimedOut);
    second
}

/// `n` default callers waiting on `pool` behind whatever holds it, in line
/// before this returns; each ends `Ok` once it has had its slot. Keep the
/// receiver while they run: each reports its turn on it.
async fn callers_ahead(
    pool: &Pool,
    n: usize,
) -> (
    Vec<tokio::task::JoinHandle<Result<(), Refusal>>>,
    mpsc::UnboundedReceiver<&'static str>,
) {
    let (order, admitted) = mpsc::unbounded_channel();
    let ahead = (0..n)
        .map(|_| waiter(pool, Criticality::Default, Admission::Wait, "ahead", &order))
        .collect();
    until_waiting(pool, n).await;
    (ahead, admitted)
}

/// Runs `admission` for `level` in a task that reports its order of
/// admission on `order`, holding its slot until `release` says so.
fn waiter(
    pool: &Pool,
    level: Criticality,
    admission: Admission,
    tag: &'static str,
    order: &mpsc::UnboundedSender<&'static str>,
) -> tokio::task::JoinHandle<Result<(), Refusal>> {
    let (pool, order) = (pool.clone(), order.clone());
    tokio::spawn(Caller::new(level).scope(async move {
        let slot = pool.admit_with(admission).await?;
        order.send(tag).unwrap();
        drop(slot);
        Ok(())
    }))
}

fn refused<T: std::fmt::Debug>(result: Result<T, WorkError<std::fmt::Error>>) -> Refusal {
    match result {
        Err(WorkError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn sheddable_work_fills_only_its_share_and_critical_work_the_whole_pool() {
    let pool = Pool::builder("shares")
        .capacity(4)
        .share(Criticality::Default, 75)
        .share(Criticality::Sheddable, 50)
        .build()
        .unwrap();
    let as_level = |level| Caller::new(level).scope_sync(|| pool.try_admit());

    let mut held = vec![
        as_level(Criticality::Sheddable).unwrap(),
        as_level(Criticality::Sheddable).unwrap(),
    ];
    let shed = as_level(Criticality::Sheddable).unwrap_err();
    assert_eq!(
        (shed.code(), shed.criticality()),
        (Code::Saturated, Criticality::Sheddable)
    );
    held.push(as_level(Criticality::Default).unwrap());
    assert_eq!(
        as_level(Criticality::Default).unwrap_err().criticality(),
        Criticality::Default,
        "default work stops at 3 of 4"
    );
    held.push(as_level(Criticality::Critical).unwrap());
    assert_eq!(pool.stats().in_use, 4, "critical work took the last slot");
    assert!(as_level(Criticality::Critical).is_err(), "and no more");
    assert_eq!(pool.stats().refused_by_criticality, [1, 1, 1]);
    drop(held);
}

#[tokio::test]
async fn a_plain_pool_gives_every_slot_to_callers_that_say_nothing() {
    let pool = Pool::new("shares-default", 3).unwrap();
    let held: Vec<_> = (0..3).map(|_| pool.try_admit().unwrap()).collect();
    assert_eq!(
        pool.try_admit().unwrap_err().criticality(),
        Criticality::Default
    );
    drop(held);
}

#[test]
fn shares_out_of_range_are_refused_at_construction() {
    for (level, percent) in [
        (Criticality::Critical, 90),
        (Criticality::Default, 0),
        (Criticality::Default, 101),
    ] {
        let err = Pool::builder("shares-bad")
            .share(level, percent)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::ShareOutOfRange { criticality, .. } if criticality == level),
            "{err}"
        );
    }
    let above = Pool::builder("shares-bad")
        .share(Criticality::Default, 40)
        .share(Criticality::Sheddable, 60)
        .build()
        .unwrap_err();
    assert!(above.to_string().contains("sheddable work 60%"), "{above}");
    let queue = Pool::builder("queue-bad")
        .queue(QueuePolicy { bound: 0, ..POLICY })
        .build()
        .unwrap_err();
    assert!(matches!(queue, ConfigError::BadQueue { .. }), "{queue}");
}

#[tokio::test]
async fn waiters_are_served_most_critical_first_and_in_order_within_a_level() {
    let pool = Pool::new("priority", 1).unwrap();
    let held = pool.try_admit().unwrap();
    let (order, mut admitted) = mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for (tag, level) in [
        ("shed-1", Criticality::Sheddable),
        ("default-1", Criticality::Default),
        ("critical-1", Criticality::Critical),
        ("default-2", Criticality::Default),
        ("critical-2", Criticality::Critical),
    ] {
        waiters.push(waiter(&pool, level, Admission::Wait, tag, &order));
        until_waiting(&pool, waiters.len()).await;
    }
    drop(held);
    for waiter in waiters {
        waiter.await.unwrap().unwrap();
    }
    let mut seen = Vec::new();
    while let Ok(tag) = admitted.try_recv() {
        seen.push(tag);
    }
    assert_eq!(
        seen,
        [
            "critical-1",
            "critical-2",
            "default-1",
            "default-2",
            "shed-1"
        ]
    );
}

#[tokio::test]
async fn a_patient_walker_is_served_before_the_queue_of_its_level() {
    let pool = queued_pool("walker-first", 1);
    let held = pool.try_admit().unwrap();
    let (order, mut admitted) = mpsc::unbounded_channel();
    let queued = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "queued",
        &order,
    );
    until_waiting(&pool, 1).await;
    let walker = waiter(
        &pool,
        Criticality::Default,
        Admission::Wait,
        "walker",
        &order,
    );
    until_waiting(&pool, 2).await;
    drop(held);
    walker.await.unwrap().unwrap();
    queued.await.unwrap().unwrap();
    assert_eq!(admitted.recv().await, Some("walker"));
    assert_eq!(admitted.recv().await, Some("queued"));
}

#[tokio::test]
async fn a_sheddable_waiter_gets_a_slot_only_once_its_share_has_room() {
    let pool = Pool::new("shed-wait", 2).unwrap();
    let first = pool.try_admit().unwrap();
    let second = pool.try_admit().unwrap();
    let (order, mut admitted) = mpsc::unbounded_channel();
    let shed = waiter(
        &pool,
        Criticality::Sheddable,
        Admission::Wait,
        "shed",
        &order,
    );
    until_waiting(&pool, 1).await;
    drop(first);
    // One slot of two in use: the sheddable share (half) is still full.
    tokio::task::yield_now().await;
    assert_eq!(pool.stats().waiting, 1, "still waiting at 1 of 2 in use");
    assert!(admitted.try_recv().is_err());
    drop(second);
    shed.await.unwrap().unwrap();
    assert_eq!(admitted.recv().await, Some("shed"));
    assert_eq!(pool.stats().in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn the_queue_serves_a_burst_and_refuses_past_its_bound_at_once() {
    let pool = queued_pool("queue-bound", 1);
    let held = held_elsewhere(&pool);
    let (order, mut admitted) = mpsc::unbounded_channel();
    let mut queued = Vec::new();
    for tag in ["q1", "q2", "q3"] {
        queued.push(waiter(
            &pool,
            Criticality::Default,
            Admission::Queue,
            tag,
            &order,
        ));
        until_waiting(&pool, queued.len()).await;
    }
    let before = Instant::now();
    let full = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(full.code(), Code::Saturated, "the bound is 3");
    assert_eq!(before.elapsed(), Duration::ZERO, "refused at once");
    drop(held);
    for waiter in queued {
        waiter.await.unwrap().unwrap();
    }
    let mut seen = Vec::new();
    while let Ok(tag) = admitted.try_recv() {
        seen.push(tag);
    }
    assert_eq!(
        seen,
        ["q1", "q2", "q3"],
        "a queue that empties is served oldest first"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_caller_is_refused_when_its_wait_reaches_the_interval() {
    let pool = queued_pool("queue-interval", 1);
    let _held = held_elsewhere(&pool);
    let started = Instant::now();
    let refusal = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    assert_eq!(
        started.elapsed(),
        POLICY.interval,
        "refused at the limit, not later"
    );
    assert_eq!(pool.stats().waiting, 0, "and out of line");
    assert_eq!(pool.stats().refused, 1);
}

#[tokio::test(start_paused = true)]
async fn a_standing_queue_sheds_its_stale_callers_and_serves_the_newest_first() {
    let pool = queued_pool("queue-standing", 1);
    let held = pool.try_admit().unwrap();
    let (order, mut admitted) = mpsc::unbounded_channel();

    // The queue goes non-empty at t=0 and never empties: `old` joins at
    // 60 ms (limit 100 ms, the queue does not stand yet), `first` leaves at
    // 100 ms, and at 101 ms the queue has stood longer than the interval.
    let first = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "first",
        &order,
    );
    until_waiting(&pool, 1).await;
    tokio::time::advance(Duration::from_millis(60)).await;
    let old = waiter(&pool, Criticality::Default, Admission::Queue, "old", &order);
    until_waiting(&pool, 2).await;
    tokio::time::advance(Duration::from_millis(41)).await;
    assert_eq!(first.await.unwrap().unwrap_err().code(), Code::WaitTimedOut);

    // A newcomer to the standing queue: `old`, waiting 41 ms, past the 5 ms
    // target, is refused at once rather than at its own 100 ms limit.
    let shed_at = Instant::now();
    let newer = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "newer",
        &order,
    );
    let stale = old.await.unwrap().unwrap_err();
    assert_eq!(stale.code(), Code::WaitTimedOut);
    assert_eq!(shed_at.elapsed(), Duration::ZERO, "shed at once");
    until_waiting(&pool, 1).await;
    tokio::time::advance(Duration::from_millis(1)).await;
    let newest = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "newest",
        &order,
    );
    until_waiting(&pool, 2).await;

    drop(held);
    newest.await.unwrap().unwrap();
    newer.await.unwrap().unwrap();
    assert_eq!(admitted.recv().await, Some("newest"), "newest first");
    assert_eq!(admitted.recv().await, Some("newer"));
}

#[tokio::test(start_paused = true)]
async fn a_newcomer_to_a_queue_that_stood_past_its_interval_waits_only_the_target() {
    let pool = queued_pool("queue-target", 1);
    let _held = held_elsewhere(&pool);
    let (order, _admitted) = mpsc::unbounded_channel();
    let late = stand(&pool, Criticality::Default, &order).await;

    let started = Instant::now();
    let refusal = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    assert_eq!(
        started.elapsed(),
        POLICY.target,
        "the target, not the interval"
    );
    drop(late);
}

/// Teaches `pool` that its work takes `took`: three pieces of work held by
/// a channel on real worker threads while the paused clock moves on.
async fn teach(pool: &Pool, took: Duration) {
    for _ in 0..3 {
        support::run_for(pool, took).await;
    }
    assert_eq!(
        pool.stats().recent_work,
        took,
        "the pool measured the paused clock"
    );
}

#[tokio::test(start_paused = true)]
async fn a_budget_shorter_than_the_typical_work_is_refused_at_once_with_its_own_code() {
    let pool = Pool::new("budget", 2).unwrap();
    teach(&pool, Duration::from_millis(40)).await;
    assert!(pool.stats().recent_work >= Duration::from_millis(40));

    let short = Caller::new(Criticality::Critical)
        .with_budget(Duration::from_millis(10))
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast))
        .await;
    let refusal = refused(short);
    assert_eq!(
        (refusal.code(), refusal.criticality()),
        (Code::BudgetTooShort, Criticality::Critical)
    );
    assert_eq!(pool.stats().in_use, 0, "nothing was taken");
    assert_eq!(pool.stats().refused_by_criticality, [1, 0, 0]);

    let long = Caller::new(Criticality::Critical)
        .with_budget(Duration::from_secs(30))
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(5), Admission::FailFast))
        .await;
    assert_eq!(long, Ok(5));
    let spent = Caller::new(Criticality::Default)
        .with_deadline(Instant::now())
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast))
        .await;
    assert_eq!(
        refused(spent).code(),
        Code::BudgetTooShort,
        "a passed deadline"
    );
}

/// How long a caller with `budget` waits on a one-slot pool taught `work`
/// and held by a blocked walk before it is refused: it must give up, and
/// leave the line, before the walk ends.
async fn budgeted_wait_on_a_held_pool(name: &str, work: Duration, budget: Duration) -> Duration {
    let pool = Pool::new(name, 1).unwrap();
    teach(&pool, work).await;
    let gate = Gate::new();
    let blocked = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(1);

    let started = Instant::now();
    let waited = Caller::new(Criticality::Default)
        .with_budget(budget)
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::Wait))
        .await;
    let took = started.elapsed();
    assert_eq!(refused(waited).code(), Code::WaitTimedOut);
    assert_eq!(pool.stats().waiting, 0);
    gate.open(1);
    assert_eq!(blocked.await, Ok("walked"));
    took
}

#[tokio::test(start_paused = true)]
async fn no_wait_outlasts_the_callers_budget_less_the_typical_work() {
    let took = budgeted_wait_on_a_held_pool(
        "budget-wait",
        Duration::from_millis(30),
        Duration::from_millis(130),
    )
    .await;
    // The budget less the typical work is 100 ms (tokio's timers tick in
    // whole milliseconds); without the budget this wait would last until
    // the gate opens, after the refusal.
    assert!(
        took >= Duration::from_millis(100) && took <= Duration::from_millis(102),
        "gave up when the work could no longer end in time: {took:?}"
    );
}

/// A waiting caller with a budget gives up while its work could still end
/// in time nine times in ten: at its budget less the 90th percentile of the
/// pool's work, not at the deadline (where it would only become an orphan).
#[tokio::test(start_paused = true)]
async fn a_budgeted_wait_ends_one_long_work_time_before_the_deadline() {
    let took = budgeted_wait_on_a_held_pool(
        "budget-p90",
        Duration::from_millis(600),
        Duration::from_millis(1500),
    )
    .await;
    assert!(
        took >= Duration::from_millis(900) && took <= Duration::from_millis(902),
        "gave up 900 ms in (1500 ms less the 600 ms work), not at the deadline: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiter_with_callers_ahead_and_too_little_budget_is_refused_at_once() {
    let pool = Pool::new("budget-ahead", 1).unwrap();
    teach(&pool, Duration::from_millis(40)).await;
    let held = held_elsewhere(&pool);
    let (ahead, _admitted) = callers_ahead(&pool, 3).await;
    // Three callers ahead on one slot: about 120 ms of waiting, 40 of work.
    let started = Instant::now();
    let refusal = Caller::new(Criticality::Default)
        .with_budget(Duration::from_millis(100))
        .scope(pool.admit_with(Admission::Wait))
        .await
        .unwrap_err();
    // At once: a caller that waited and then ran out would be refused
    // with `ADMISSION_WAIT_TIMEOUT` instead.
    assert_eq!(refusal.code(), Code::BudgetTooShort);
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "at once, on the paused clock"
    );
    assert_eq!(pool.stats().waiting, 3, "and out of line");
    drop(held);
    for waiter in ahead {
        waiter.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_cancelled_queued_waiter_leaves_the_line_and_loses_no_slot() {
    let pool = queued_pool("queue-cancel", 1);
    let held = pool.try_admit().unwrap();
    let (order, _admitted) = mpsc::unbounded_channel();
    let gone = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "gone",
        &order,
    );
    until_waiting(&pool, 1).await;
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    assert_eq!(pool.stats().waiting, 0);
    drop(held);
    assert_eq!(pool.stats().in_use, 0);
    assert!(pool.try_admit().is_ok());
}

#[tokio::test]
async fn the_caller_scope_reaches_work_run_inside_it_and_not_outside() {
    let pool = Pool::new("caller-scope", 2).unwrap();
    let _one = pool.try_admit().unwrap();
    let inside = Caller::new(Criticality::Sheddable)
        .scope(async { pool.try_admit().map(drop) })
        .await;
    assert_eq!(inside.unwrap_err().criticality(), Criticality::Sheddable);
    assert!(
        pool.try_admit().is_ok(),
        "outside, the caller is default again"
    );
    let nested = Caller::new(Criticality::Critical)
        .with_budget(Duration::from_secs(1))
        .scope(async {
            Caller::current()
                .with_budget(Duration::from_secs(60))
                .remaining()
        })
        .await
        .unwrap();
    assert!(
        nested <= Duration::from_secs(1),
        "the earlier deadline wins"
    );

    let budgeted = Caller::new(Criticality::Sheddable).with_budget(Duration::from_secs(5));
    let raised = budgeted.with_criticality(Criticality::Critical);
    assert_eq!(raised.criticality(), Criticality::Critical);
    assert_eq!(
        raised.deadline(),
        budgeted.deadline(),
        "the deadline is kept"
    );
    assert_eq!(
        Caller::default().with_budget(Duration::MAX).deadline(),
        None,
        "a budget past any point in time sets none"
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_makes_room_for_a_more_critical_caller_by_refusing_a_sheddable_one() {
    // Bound 3, one slot held: three sheddable callers fill the queue.
    let pool = Pool::builder("queue-evict")
        .capacity(2)
        .share(Criticality::Sheddable, 100)
        .queue(POLICY)
        .build()
        .unwrap();
    let held = [held_elsewhere(&pool), held_elsewhere(&pool)];
    let (order, mut admitted) = mpsc::unbounded_channel();
    let mut shed = Vec::new();
    for tag in ["shed-1", "shed-2", "shed-3"] {
        shed.push(waiter(
            &pool,
            Criticality::Sheddable,
            Admission::Queue,
            tag,
            &order,
        ));
        until_waiting(&pool, shed.len()).await;
    }
    let default = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "default",
        &order,
    );
    let oldest = shed.remove(0).await.unwrap().unwrap_err();
    assert_eq!(
        (oldest.code(), oldest.criticality()),
        (Code::Saturated, Criticality::Sheddable),
        "the oldest sheddable caller gave up its place, refused at once"
    );
    until_waiting(&pool, 3).await;
    // A sheddable newcomer finds no one less critical to displace.
    let full = Caller::new(Criticality::Sheddable)
        .scope(pool.admit_with(Admission::Queue))
        .await
        .unwrap_err();
    assert_eq!(full.code(), Code::Saturated);

    drop(held);
    default.await.unwrap().unwrap();
    for waiter in shed {
        waiter.await.unwrap().unwrap();
    }
    assert_eq!(admitted.recv().await, Some("default"), "served first");
}

#[tokio::test(start_paused = true)]
async fn a_standing_sheddable_queue_does_not_shorten_a_critical_callers_wait() {
    let pool = Pool::builder("queue-levels")
        .capacity(1)
        .share(Criticality::Sheddable, 100)
        .queue(QueuePolicy { bound: 8, ..POLICY })
        .build()
        .unwrap();
    let _held = held_elsewhere(&pool);
    let (order, _admitted) = mpsc::unbounded_channel();
    // Sheddable callers keep their queue non-empty past the interval.
    let _second = stand(&pool, Criticality::Sheddable, &order).await;

    let started = Instant::now();
    let critical = Caller::new(Criticality::Critical)
        .scope(pool.admit_with(Admission::Queue))
        .await
        .unwrap_err();
    assert_eq!(critical.code(), Code::WaitTimedOut);
    assert_eq!(
        started.elapsed(),
        POLICY.interval,
        "a critical caller waits its own (empty) queue's interval, not the target"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_policy_a_queued_caller_waits_about_one_typical_work_time() {
    let pool = Pool::new("queue-adaptive", 1).unwrap();
    // Before any work is seen: the 100 ms default.
    let held = held_elsewhere(&pool);
    let started = Instant::now();
    let cold = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(cold.code(), Code::WaitTimedOut);
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    drop(held);

    teach(&pool, Duration::from_millis(40)).await;
    let typical = pool.stats().recent_work;
    let _held = held_elsewhere(&pool);
    let started = Instant::now();
    let warm = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(warm.code(), Code::WaitTimedOut);
    // tokio's timers tick in whole milliseconds.
    let waited = started.elapsed();
    assert!(
        waited >= typical && waited <= typical + Duration::from_millis(2),
        "one typical work time ({typical:?}), waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_caller_with_a_budget_waits_as_long_as_the_budget_allows() {
    let pool = queued_pool("queue-budget", 1);
    let _held = held_elsewhere(&pool);
    let started = Instant::now();
    let refusal = Caller::new(Criticality::Default)
        .with_budget(Duration::from_millis(300))
        .scope(pool.admit_with(Admission::Queue))
        .await
        .unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(300),
        "past the 100 ms interval: the client said it would wait"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_policy_a_critical_caller_waits_two_typical_work_times() {
    let pool = Pool::new("queue-critical-wait", 1).unwrap();
    teach(&pool, Duration::from_millis(40)).await;
    let typical = pool.stats().recent_work;
    let _held = held_elsewhere(&pool);
    let started = Instant::now();
    let refusal = Caller::new(Criticality::Critical)
        .scope(pool.admit_with(Admission::Queue))
        .await
        .unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    let waited = started.elapsed();
    assert!(
        waited >= typical * 2 && waited <= typical * 2 + Duration::from_millis(2),
        "two typical work times ({typical:?}), waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_policy_a_standing_queue_gives_newcomers_an_eighth_of_the_typical_work() {
    let pool = Pool::new("queue-adaptive-target", 1).unwrap();
    teach(&pool, Duration::from_millis(40)).await;
    let typical = pool.stats().recent_work;
    let _held = held_elsewhere(&pool);
    let (order, _admitted) = mpsc::unbounded_channel();
    // A caller every 30 ms, each waiting one work time (40 ms): the queue
    // never empties, and stands once that has lasted four work times.
    let mut line = Vec::new();
    for _ in 0..7 {
        line.push(waiter(
            &pool,
            Criticality::Default,
            Admission::Queue,
            "w",
            &order,
        ));
        until_waiting(&pool, line.len().min(2)).await;
        tokio::time::advance(Duration::from_millis(30)).await;
    }
    let started = Instant::now();
    let refusal = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    let waited = started.elapsed();
    assert!(
        waited >= typical / 8 && waited <= typical / 8 + Duration::from_millis(2),
        "an eighth of the typical work ({typical:?}), waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn callers_ahead_count_in_rounds_of_the_pools_slots_plus_the_callers_own_work() {
    let pool = Pool::new("budget-rounds", 2).unwrap();
    teach(&pool, Duration::from_millis(40)).await;
    let held = [held_elsewhere(&pool), held_elsewhere(&pool)];
    let (ahead, _admitted) = callers_ahead(&pool, 2).await;
    // Two ahead on two slots: one round (40 ms), then this caller's own
    // work (40 ms): 80 ms in all.
    let short = Caller::new(Criticality::Default)
        .with_budget(Duration::from_millis(70))
        .scope(pool.admit_with(Admission::Wait))
        .await
        .unwrap_err();
    assert_eq!(short.code(), Code::BudgetTooShort, "70 ms cannot cover 80");
    // 190 ms covers 80 (and not the 200 a count of slots times callers
    // would give).
    let enough = tokio::spawn(
        Caller::new(Criticality::Default)
            .with_budget(Duration::from_millis(190))
            .scope({
                let pool = pool.clone();
                async move { pool.admit_with(Admission::Wait).await.map(drop) }
            }),
    );
    until_waiting(&pool, 3).await;
    drop(held);
    enough.await.unwrap().unwrap();
    for waiter in ahead {
        waiter.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_standing_queue_drained_by_service_starts_over() {
    let pool = queued_pool("queue-drained", 1);
    let held = held_elsewhere(&pool);
    let (order, _admitted) = mpsc::unbounded_channel();
    let stale = stand(&pool, Criticality::Default, &order).await;
    let fresh = waiter(
        &pool,
        Criticality::Default,
        Admission::Queue,
        "fresh",
        &order,
    );
    until_waiting(&pool, 1).await;
    // The stale caller is shed and the fresh one, the last in line, is
    // served: the queue drained by service.
    drop(held);
    assert_eq!(stale.await.unwrap().unwrap_err().code(), Code::WaitTimedOut);
    fresh.await.unwrap().unwrap();
    let _held = held_elsewhere(&pool);
    tokio::time::advance(Duration::from_millis(50)).await;
    let started = Instant::now();
    let refusal = pool.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    assert_eq!(
        started.elapsed(),
        POLICY.interval,
        "a newcomer to a drained queue waits the interval, not the target"
    );
}

#[tokio::test]
async fn closing_a_pool_refuses_its_waiters_and_counts_none_left() {
    let pool = queued_pool("queue-closed", 1);
    let held = held_elsewhere(&pool);
    let (order, _admitted) = mpsc::unbounded_channel();
    let waiters: Vec<_> = [Criticality::Critical, Criticality::Sheddable]
        .into_iter()
        .map(|level| waiter(&pool, level, Admission::Queue, "w", &order))
        .collect();
    until_waiting(&pool, 2).await;
    let shutdown = admission_core::Shutdown::new(Duration::from_secs(1)).unwrap();
    shutdown.register(&pool);
    drop(held);
    let _report = shutdown.shutdown().await;
    for waiter in waiters {
        // Each was refused as shutting down, or admitted just before.
        if let Err(refusal) = waiter.await.unwrap() {
            assert_eq!(refusal.code(), Code::ShuttingDown);
        }
    }
    assert_eq!(
        pool.stats().waiting,
        0,
        "no one is counted in line after close"
    );
}

/// Before any work has ended, the expected work time stands in for the
/// typical one: a caller whose budget is shorter is refused at once, and a
/// queued caller waits one expected work time; without it neither happens.
#[tokio::test(start_paused = true)]
async fn a_cold_pool_refuses_short_budgets_and_times_its_queue_from_the_expected_work() {
    let expecting = Pool::builder("cold-expected-budget")
        .capacity(1)
        .expected_work(Duration::from_millis(40))
        .build()
        .unwrap();
    let untold = Pool::new("cold-untold-budget", 1).unwrap();
    let short = |pool: &Pool| {
        let pool = pool.clone();
        Caller::new(Criticality::Default)
            .with_budget(Duration::from_millis(10))
            .scope(async move { pool.try_admit().map(drop) })
    };
    assert_eq!(
        short(&expecting).await.unwrap_err().code(),
        Code::BudgetTooShort,
        "10 ms cannot cover the 40 ms expected"
    );
    assert_eq!(
        short(&untold).await,
        Ok(()),
        "nothing expected, nothing seen"
    );

    let _held = held_elsewhere(&expecting);
    let started = Instant::now();
    let refusal = expecting.admit_with(Admission::Queue).await.unwrap_err();
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(40) && waited <= Duration::from_millis(42),
        "one expected work time (40 ms), not the 100 ms default: waited {waited:?}"
    );
}

/// A caller whose own (trusted) deadline promised it a longer wait than the
/// queue's is served when its slot frees, though its queue has stood since:
/// refusing it at that moment, as stale, would be the late answer the
/// queue exists to avoid. An asserted deadline (a client's, untrusted)
/// gets no such promise: it waits the queue's own limit.
#[tokio::test(start_paused = true)]
async fn a_trusted_budget_that_outwaits_the_queue_is_served_when_the_slot_frees() {
    let pool = Pool::builder("overload-promised")
        .capacity(1)
        .queue(QueuePolicy {
            bound: 4,
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
        })
        .build()
        .unwrap();
    let held = pool.try_admit().unwrap();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        Caller::default()
            .with_budget(Duration::from_secs(60))
            .scope(async move {
                pool.run(|| Ok::<_, std::fmt::Error>(7), Admission::Queue)
                    .await
            })
    });
    while pool.stats().waiting == 0 {
        tokio::task::yield_now().await;
    }
    // Five intervals: the queue has stood for four of them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(held);
    assert_eq!(waiter.await.unwrap(), Ok(7), "served, not shed as stale");

    let held = pool.try_admit().unwrap();
    let asked = Instant::now();
    let asserted = tokio::spawn({
        let pool = pool.clone();
        Caller::default()
            .with_asserted_deadline(Instant::now() + Duration::from_secs(60))
            .scope(async move {
                pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::Queue)
                    .await
            })
    })
    .await
    .unwrap();
    let Err(WorkError::Refused(refusal)) = asserted else {
        panic!("an asserted budget waits the queue's limit: {asserted:?}");
    };
    assert_eq!(refusal.code(), Code::WaitTimedOut);
    assert!(
        asked.elapsed() <= Duration::from_millis(100),
        "{:?}",
        asked.elapsed()
    );
    drop(held);
}
