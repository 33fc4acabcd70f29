//! Issue 2: pools, slots, the bounded worker pool and orphans, proven with
//! real worker threads held by gates the tests control.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use admission_core::pool::{MAX_CAPACITY, RetryHint};
use admission_core::{
    Admission, Code, ConfigError, Pool, RequestPools, Reservation, Shutdown, WorkError,
};
use support::{Gate, events_for, poll_once};

/// Waits (without spinning) until every slot of `pool` is free again, by
/// taking them all, within a generous bound.
async fn all_slots_back(pool: &Pool) {
    let mut slots = Vec::new();
    for _ in 0..pool.capacity() {
        let slot = tokio::time::timeout(Duration::from_secs(10), pool.admit())
            .await
            .expect("every slot comes back within 10 s")
            .expect("pool open");
        slots.push(slot);
    }
    drop(slots);
    assert_eq!(pool.stats().in_use, 0, "every slot is back");
}

#[tokio::test(flavor = "current_thread")]
async fn third_fail_fast_call_is_refused_at_once_and_never_touches_the_work() {
    let pool = Pool::new("refuse-third", 2).unwrap();
    let gate = Gate::new();
    let first = pool.try_admit().unwrap().offload(gate.work());
    let second = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(2);

    let touched = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&touched);
    let started = Instant::now();
    let third = pool
        .run(
            move || {
                flag.store(true, Ordering::SeqCst);
                Ok::<_, std::fmt::Error>("walked")
            },
            Admission::FailFast,
        )
        .await;
    let took = started.elapsed();

    let refusal = third.unwrap_err().refusal().cloned().expect("a refusal");
    assert_eq!(refusal.code(), Code::Saturated);
    assert_eq!(refusal.pool(), "refuse-third");
    assert!(refusal.retry_after_secs() >= 1);
    assert!(
        !touched.load(Ordering::SeqCst),
        "the refused work never ran"
    );
    assert!(
        took < Duration::from_secs(1),
        "refused at once, took {took:?}"
    );
    assert_eq!(pool.stats().refused, 1);

    gate.open(2);
    assert_eq!(first.await, Ok("walked"));
    assert_eq!(second.await, Ok("walked"));
    assert_eq!(pool.stats().in_use, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_waiting_caller_is_admitted_when_a_slot_frees() {
    let pool = Pool::new("wait-admitted", 1).unwrap();
    let gate = Gate::new();
    let busy = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(1);

    let mut waiter = Box::pin(pool.run(|| Ok::<_, std::fmt::Error>(7), Admission::Wait));
    assert!(
        poll_once(&mut waiter).is_pending(),
        "waits while the slot is held"
    );
    assert!(
        pool.run(|| Ok::<_, std::fmt::Error>(0), Admission::FailFast)
            .await
            .is_err(),
        "a fail-fast caller is refused meanwhile"
    );

    gate.open(1);
    assert_eq!(busy.await, Ok("walked"));
    assert_eq!(waiter.await, Ok(7), "the waiter got the freed slot");
}

#[tokio::test(flavor = "current_thread")]
async fn a_waiter_dropped_before_admission_leaks_nothing() {
    let pool = Pool::new("wait-dropped", 1).unwrap();
    // The slot is held by running work, not by this caller: a caller that
    // held every slot itself would be refused (`ADMISSION_REENTRANT`), not
    // queued.
    let gate = Gate::new();
    let held = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(1);
    let mut waiter = Box::pin(pool.admit());
    assert!(poll_once(&mut waiter).is_pending());
    drop(waiter);
    gate.open(1);
    assert_eq!(held.await, Ok("walked"));
    let stats = pool.stats();
    assert_eq!(stats.in_use, 0, "the dropped waiter took nothing");
    let a = pool
        .try_admit()
        .expect("the slot is free for the next caller");
    drop(a);
    assert_eq!(pool.stats().admitted, 2);
}

#[tokio::test(flavor = "current_thread")]
async fn bounded_wait_refuses_with_its_own_code() {
    let pool = Pool::new("wait-bounded", 1).unwrap();
    // Held by running work, so the wait can only time out.
    let gate = Gate::new();
    let held = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(1);
    let refused = pool
        .run(
            || Ok::<_, std::fmt::Error>(()),
            Admission::WaitFor(Duration::from_millis(20)),
        )
        .await;
    assert_eq!(
        refused
            .unwrap_err()
            .refusal()
            .map(admission_core::Refusal::code),
        Some(Code::WaitTimedOut)
    );
    assert_eq!(
        pool.stats().refused,
        1,
        "a timed-out wait is a counted refusal"
    );
    let refused = pool
        .admit_timeout(Duration::from_millis(5))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::WaitTimedOut);
    assert_eq!(pool.stats().refused, 2, "on `admit_timeout` too");
    gate.open(1);
    assert_eq!(held.await, Ok("walked"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_awaiting_future_keeps_its_slot_until_the_thread_finishes() {
    let pool = Pool::new("orphan-holds", 1).unwrap();
    let gate = Gate::new();
    let walk = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(1);
    drop(walk);

    assert_eq!(
        pool.try_admit().unwrap_err().code(),
        Code::Saturated,
        "the orphan still holds its slot"
    );
    assert_eq!(pool.stats().in_use, 1);

    gate.open(1);
    all_slots_back(&pool).await;
    let stats = pool.stats();
    assert_eq!(stats.orphaned, 1);
    assert_eq!(stats.orphan_failures, 0);
    assert_eq!(stats.admitted, stats.released + stats.in_use as u64);
}

/// A running orphan is visible while it runs, not only once it ends: two
/// real worker threads held by their own channels, one caller gone.
#[tokio::test(flavor = "current_thread")]
async fn a_running_orphan_is_counted_while_it_runs_and_moves_to_orphaned_when_it_ends() {
    let pool = Pool::new("orphans-running", 2).unwrap();
    let (orphan_gate, awaited_gate) = (Gate::new(), Gate::new());
    let orphan = pool.try_admit().unwrap().offload(orphan_gate.work());
    let awaited = pool.try_admit().unwrap().offload(awaited_gate.work());
    orphan_gate.wait_started(1);
    awaited_gate.wait_started(1);
    assert_eq!(pool.stats().orphans_running, 0, "both callers still wait");

    drop(orphan);
    let stats = pool.stats();
    assert_eq!(
        (stats.orphans_running, stats.orphaned, stats.running),
        (1, 0, 2),
        "the orphan runs on and is counted as it runs"
    );

    orphan_gate.open(1);
    // The only slot that can free is the orphan's, after it is counted.
    let slot = pool.admit().await.unwrap();
    let stats = pool.stats();
    assert_eq!(
        (stats.orphans_running, stats.orphaned),
        (0, 1),
        "once ended, it left the gauge and is counted as orphaned"
    );
    drop(slot);

    awaited_gate.open(1);
    assert_eq!(awaited.await, Ok("walked"));
    assert_eq!(
        pool.stats().orphans_running,
        0,
        "work whose caller took its result was never an orphan"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_orphan_is_reported_exactly_once_and_releases_its_slot() {
    let name = "orphan-fails";
    let pool = Pool::new(name, 1).unwrap();
    support::events();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let walk = pool.try_admit().unwrap().offload(move || {
        held.recv().unwrap();
        Err::<(), _>(std::io::Error::other("tenant 42 secret"))
    });
    drop(walk);
    release.send(()).unwrap();
    all_slots_back(&pool).await;

    let events = events_for(name);
    assert_eq!(events.len(), 1, "exactly one event: {events:?}");
    let event = &events[0];
    assert!(event.level <= tracing::Level::WARN, "WARN or ERROR");
    assert_eq!(event.field("class"), Some("Error"));
    assert!(
        !format!("{event:?}").contains("tenant 42"),
        "never the error's message"
    );
    let stats = pool.stats();
    assert_eq!((stats.orphaned, stats.orphan_failures), (1, 1));
}

#[tokio::test(flavor = "current_thread")]
async fn a_panicking_orphan_is_reported_once_and_the_pool_keeps_its_workers() {
    let name = "orphan-panics";
    let pool = Pool::new(name, 2).unwrap();
    support::events();
    for _ in 0..2 {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let walk = pool
            .try_admit()
            .unwrap()
            .offload(move || -> Result<(), std::fmt::Error> {
                held.recv().unwrap();
                panic!("walk exploded with user data 42");
            });
        drop(walk);
        release.send(()).unwrap();
    }
    all_slots_back(&pool).await;

    let events = events_for(name);
    assert_eq!(events.len(), 2, "one event per failing orphan: {events:?}");
    assert!(events.iter().all(|e| e.field("class") == Some("panic")));
    for event in &events {
        assert!(
            !event.message.contains("42")
                && event.fields.iter().all(|(_, value)| !value.contains("42")),
            "the panic's message is a user value and is never logged: {event:?}"
        );
    }
    assert_eq!(pool.stats().panicked, 2);

    // Both threads survived: two blocking pieces of work run at once.
    let gate = Gate::new();
    let a = pool.try_admit().unwrap().offload(gate.work());
    let b = pool.try_admit().unwrap().offload(gate.work());
    gate.wait_started(2);
    gate.open(2);
    assert_eq!((a.await, b.await), (Ok("walked"), Ok("walked")));
}

#[tokio::test(flavor = "current_thread")]
async fn a_panic_reaches_the_awaiting_caller_as_a_typed_error() {
    let pool = Pool::new("panic-awaited", 1).unwrap();
    let result = pool
        .run(
            || -> Result<(), std::fmt::Error> { panic!("boom") },
            Admission::FailFast,
        )
        .await;
    assert_eq!(result, Err(WorkError::Panicked));
    assert_eq!(pool.stats().in_use, 0, "the slot is back");
    assert_eq!(
        pool.stats().orphaned,
        0,
        "an awaited panic is not an orphan"
    );
    assert_eq!(
        pool.run(|| Ok::<_, std::fmt::Error>(1), Admission::FailFast)
            .await,
        Ok(1),
        "the pool keeps serving"
    );
}

#[test]
fn many_callers_that_randomly_drop_never_run_more_than_n_and_return_every_slot() {
    const N: usize = 3;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pool = Pool::new("random-drops", N).unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    runtime.block_on(async {
        let mut tasks = Vec::new();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..400_u64 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let drop_after = Duration::from_micros((seed >> 33) % 400);
            let mode = if i.is_multiple_of(3) {
                Admission::FailFast
            } else {
                Admission::Wait
            };
            let (pool, running, peak) = (pool.clone(), Arc::clone(&running), Arc::clone(&peak));
            tasks.push(tokio::spawn(async move {
                let work = move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(150));
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, std::fmt::Error>(())
                };
                let call = pool.run(work, mode);
                if seed.is_multiple_of(2) {
                    // This caller gives up after a random moment.
                    let _ = tokio::time::timeout(drop_after, call).await;
                } else {
                    let _ = call.await;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        all_slots_back(&pool).await;
    });
    let stats = pool.stats();
    assert!(peak.load(Ordering::SeqCst) <= N, "at most {N} ran at once");
    assert!(stats.peak_running <= N);
    assert_eq!(stats.running, 0);
    assert_eq!(
        stats.admitted, stats.released,
        "every slot returned exactly once"
    );
    assert_eq!(
        stats.admitted,
        stats.finished + N as u64,
        "each admission ran once (plus the final probe)"
    );
}

#[test]
fn bad_configuration_is_refused_at_construction() {
    assert_eq!(
        Pool::new("p", 0).unwrap_err(),
        ConfigError::ZeroCapacity { pool: "p".into() }
    );
    assert_eq!(Pool::new("", 1).unwrap_err(), ConfigError::EmptyName);
    assert!(matches!(
        Pool::new("p", MAX_CAPACITY + 1),
        Err(ConfigError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        Pool::builder("p")
            .capacity(1)
            .retry_hint(RetryHint::Observed {
                cap: Duration::ZERO
            })
            .build(),
        Err(ConfigError::RetryHintTooSmall { .. })
    ));
    // The refusal status is no pool setting: the adapters choose it from
    // `admission_http::HttpRefusalStatus`, an enum in which 404 cannot be
    // written.
    let zero_slots = Reservation::new("r", 0).unwrap_err();
    assert_eq!(
        zero_slots,
        ConfigError::ZeroSlots {
            reservation: "r".into()
        },
        "a reservation's error names the reservation, not a pool"
    );
    assert!(
        zero_slots.to_string().contains("reservation `r`"),
        "{zero_slots}"
    );
    assert!(matches!(
        RequestPools::new(0, 4),
        Err(ConfigError::ZeroCapacity { pool }) if pool == "work"
    ));
    assert_eq!(
        Shutdown::new(Duration::ZERO).unwrap_err(),
        ConfigError::ZeroDeadline
    );
    for err in [
        ConfigError::ZeroCapacity { pool: "p".into() },
        ConfigError::ZeroDeadline,
    ] {
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn the_largest_capacity_is_accepted_and_one_more_is_not() {
    let largest = Pool::new("capacity-largest", MAX_CAPACITY).expect("MAX_CAPACITY is allowed");
    assert_eq!(largest.capacity(), MAX_CAPACITY);
    drop(largest);
    assert!(matches!(
        Pool::new("capacity-largest", MAX_CAPACITY + 1),
        Err(ConfigError::CapacityTooLarge { .. })
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn a_work_future_debug_names_its_pool_and_never_the_result() {
    let pool = Pool::new("future-debug", 1).unwrap();
    let future = pool
        .try_admit()
        .unwrap()
        .offload(|| Ok::<_, std::fmt::Error>("secret 42"));
    let text = format!("{future:?}");
    assert!(
        text.contains("future-debug") && !text.contains("secret"),
        "{text}"
    );
    assert_eq!(future.await, Ok("secret 42"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_slot_names_its_pool_and_a_pool_is_open_until_shutdown() {
    let pool = Pool::new("named-and-open", 1).unwrap();
    assert_eq!(pool.try_admit().unwrap().pool_name(), "named-and-open");
    assert!(!pool.is_closed(), "a new pool is open");
    assert_eq!(
        format!("{pool:?}"),
        r#"Pool { name: "named-and-open", capacity: 1, closed: false, .. }"#,
        "a pool prints one line, not its internals"
    );
    let shutdown = Shutdown::default();
    shutdown.register(&pool);
    shutdown.shutdown().await;
    assert!(pool.is_closed());
    assert!(format!("{pool:?}").contains("closed: true"));
}

#[test]
fn a_reservation_is_named_as_built() {
    let reservation = Reservation::new("recovery-named", 2).unwrap();
    assert_eq!(reservation.name(), "recovery-named");
    assert_eq!(reservation.pool().name(), "recovery-named");
    assert_eq!(reservation.stats().capacity, 2);
}

#[test]
fn a_refusal_says_its_pool_code_and_hint_in_words_and_as_a_duration() {
    let pool = Pool::builder("worded")
        .capacity(1)
        .retry_hint(RetryHint::Fixed(Duration::from_millis(2500)))
        .build()
        .unwrap();
    let _held = pool.try_admit().unwrap();
    let refusal = pool.try_admit().unwrap_err();
    assert_eq!(refusal.retry_after(), Duration::from_secs(3), "rounded up");
    assert_eq!(
        refusal.to_string(),
        "pool `worded` refused work (ADMISSION_SATURATED); retry in 3 s"
    );
    assert_eq!(Code::WaitTimedOut.to_string(), "ADMISSION_WAIT_TIMEOUT");
}

#[tokio::test(start_paused = true)]
async fn stats_count_the_peak_of_running_work_and_how_long_work_ran() {
    let pool = Pool::new("peak-and-time", 2).unwrap();
    let gate = Gate::new();
    let walks = [
        pool.try_admit().unwrap().offload(gate.work()),
        pool.try_admit().unwrap().offload(gate.work()),
    ];
    gate.wait_started(2);
    assert_eq!(pool.stats().peak_running, 2);
    gate.open(2);
    for walk in walks {
        assert_eq!(walk.await, Ok("walked"));
    }
    let before = pool.stats().duration_sum;
    // 20 ms on the paused clock, with a real worker thread held meanwhile.
    support::run_for(&pool, Duration::from_millis(20)).await;
    let stats = pool.stats();
    assert_eq!((stats.peak_running, stats.finished), (2, 3));
    assert_eq!(
        stats.duration_sum - before,
        Duration::from_millis(20),
        "the 20 ms piece is in the sum, measured on the runtime's clock"
    );
    // The 25 ms bucket holds it, the 10 ms one does not.
    assert_eq!(
        stats.duration_buckets[2], 2,
        "10 ms: the two released walks"
    );
    assert_eq!(stats.duration_buckets[3], 3, "25 ms: and the 20 ms piece");
}

#[test]
fn a_work_error_names_its_kind_and_chains_only_to_a_refusal() {
    use std::error::Error as _;
    let failed = WorkError::Failed(std::io::Error::other("tenant 42"));
    assert!(
        failed.source().is_none(),
        "the work's own error (a user value) is not a source a report would print"
    );
    assert!(!failed.to_string().contains("tenant 42"), "{failed}");
    assert!(failed.to_string().starts_with("work failed"), "{failed}");
    assert_eq!(
        WorkError::<std::io::Error>::Panicked.to_string(),
        "work panicked"
    );
    assert!(WorkError::<std::io::Error>::Cancelled.source().is_none());
}

/// Threads named for this test's pools, in this process.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("Linux /proc")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// A pool built and dropped where it should not be (say, per request),
/// never shut down: its worker threads end with its last handle.
#[tokio::test]
async fn a_dropped_pool_leaves_no_worker_threads_behind() {
    for _ in 0..8 {
        let pool = Pool::new("dropme", 2).unwrap();
        pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast)
            .await
            .unwrap();
    }
    // Thread names are cut to 15 bytes: "admission-dropm".
    let deadline = Instant::now() + Duration::from_secs(10);
    while threads_named("admission-dropm") > 0 {
        assert!(
            Instant::now() < deadline,
            "{} worker threads still alive",
            threads_named("admission-dropm")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The issue's cold case, on a paused clock with a real worker thread held
/// by a channel: 20 s walks, none finished yet. Told to expect 20 s, the
/// pool counts down the oldest walk's expected remaining time; not told,
/// it says 1 s whatever has run, never the walk's age (which said 1 when
/// the slot freed in 19 s and 19 when it freed in 1 s).
#[tokio::test(start_paused = true)]
async fn a_cold_pools_hint_counts_down_the_expected_work_and_never_the_age() {
    let told = Pool::builder("cold-expected")
        .capacity(1)
        .expected_work(Duration::from_secs(20))
        .build()
        .unwrap();
    let untold = Pool::new("cold-untold", 1).unwrap();
    let (told_gate, untold_gate) = (Gate::new(), Gate::new());
    let told_walk = told.try_admit().unwrap().offload(told_gate.work());
    let untold_walk = untold.try_admit().unwrap().offload(untold_gate.work());
    told_gate.wait_started(1);
    untold_gate.wait_started(1);

    let mut hints = Vec::new();
    for _ in 0..20 {
        tokio::time::advance(Duration::from_secs(1)).await;
        hints.push((
            told.try_admit().unwrap_err().retry_after_secs(),
            untold.try_admit().unwrap_err().retry_after_secs(),
        ));
    }
    let (told_hints, untold_hints): (Vec<u32>, Vec<u32>) = hints.into_iter().unzip();
    assert_eq!(told_hints[0], 19, "1 s in, the slot frees in 19 s");
    assert_eq!(told_hints[18], 1, "19 s in, it frees in 1 s");
    assert!(
        told_hints.windows(2).take(18).all(|w| w[1] < w[0]),
        "counts down while the walk is younger than expected: {told_hints:?}"
    );
    assert_eq!(
        told_hints[19], 20,
        "20 s in, overdue: expected to run as long again"
    );
    assert!(
        untold_hints.iter().all(|&hint| hint == 1),
        "nothing seen, nothing expected: 1 s, never the age: {untold_hints:?}"
    );

    told_gate.open(1);
    untold_gate.open(1);
    assert_eq!(told_walk.await, Ok("walked"));
    assert_eq!(untold_walk.await, Ok("walked"));
    assert_eq!(
        told.stats().recent_work,
        Duration::from_secs(20),
        "measured on the paused clock"
    );
    assert_eq!(
        untold.try_admit().map(drop),
        Ok(()),
        "the slot came back with the walk's end"
    );
}

/// Orphans far past the pool's typical work (20 ms) are expected to run as
/// long again: aged 2.5 s on the paused clock, they make the hint 3 s. The
/// pool learns its 20 ms and the orphans run on real worker threads held by
/// channels; no real time passes.
#[tokio::test(start_paused = true)]
async fn orphans_far_past_the_typical_work_are_expected_to_run_as_long_again() {
    let pool = Pool::new("orphans-aged", 2).unwrap();
    for _ in 0..3 {
        support::run_for(&pool, Duration::from_millis(20)).await;
    }
    assert_eq!(pool.stats().recent_work, Duration::from_millis(20));
    let gate = Gate::new();
    for _ in 0..2 {
        drop(pool.try_admit().unwrap().offload(gate.work()));
    }
    gate.wait_started(2);
    assert_eq!(pool.stats().orphans_running, 2, "both callers have gone");
    tokio::time::advance(Duration::from_millis(2500)).await;
    assert_eq!(
        pool.try_admit().unwrap_err().retry_after_secs(),
        3,
        "2.5 s past a 20 ms typical: as long again, rounded up"
    );
    gate.open(2);
    let slots = [pool.admit().await.unwrap(), pool.admit().await.unwrap()];
    let stats = pool.stats();
    assert_eq!((stats.orphans_running, stats.orphaned), (0, 2));
    drop(slots);
}
