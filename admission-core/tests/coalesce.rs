//! Issue 10: coalesced registry work, with the one worker held by the test.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use admission_core::{Admission, Coalescing, Code, ConfigError, Pool, WorkError};
use support::{Gate, events_for, poll_once};

type Scrapes = Coalescing<&'static str, Arc<str>, String>;

/// A walk that counts itself, reports its start and blocks on `gate`.
fn walk(
    gate: &Gate,
    walks: &Arc<AtomicUsize>,
) -> impl FnOnce() -> Result<Arc<str>, String> + Send + 'static {
    let inner = gate.work();
    let walks = Arc::clone(walks);
    move || {
        let n = walks.fetch_add(1, Ordering::SeqCst) + 1;
        inner().map_err(|_| "gate dropped".to_owned())?;
        Ok(Arc::from(format!("walk {n}")))
    }
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_callers_of_one_key_share_exactly_one_walk() {
    let pool = Pool::new("coalesce-one-walk", 1).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(60)).unwrap();
    let (gate, walks) = (Gate::new(), Arc::new(AtomicUsize::new(0)));

    let mut callers: Vec<_> = (0..8)
        .map(|_| Box::pin(scrapes.run("/metrics", walk(&gate, &walks), Admission::FailFast)))
        .collect();
    for caller in &mut callers {
        assert!(poll_once(caller).is_pending());
    }
    gate.wait_started(1);
    assert_eq!(pool.stats().in_use, 1, "joining takes no slot");
    gate.open(1);

    let mut results = Vec::new();
    for caller in callers {
        results.push(caller.await.unwrap());
    }
    assert!(results.iter().all(|r| &**r == "walk 1"), "{results:?}");
    assert!(
        results.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])),
        "shared, not copied"
    );
    assert_eq!(walks.load(Ordering::SeqCst), 1, "exactly one walk");
    let stats = pool.stats();
    assert_eq!((stats.coalesced, stats.finished, stats.in_use), (7, 1, 0));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_caller_after_the_staleness_bound_does_not_join() {
    let pool = Pool::new("coalesce-stale", 1).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_millis(30)).unwrap();
    let (gate, walks) = (Gate::new(), Arc::new(AtomicUsize::new(0)));
    let mut first = Box::pin(scrapes.run("/metrics", walk(&gate, &walks), Admission::FailFast));
    assert!(poll_once(&mut first).is_pending());
    gate.wait_started(1);
    // The walk ages past the bound on the paused clock, which the walk's
    // age is read on.
    tokio::time::advance(Duration::from_millis(31)).await;

    // Bounded: a late caller that wrongly joined the blocked walk would
    // otherwise wait for it forever.
    let late = tokio::time::timeout(
        Duration::from_secs(10),
        scrapes.run("/metrics", walk(&gate, &walks), Admission::FailFast),
    )
    .await
    .expect("a caller after the bound does not join the blocked walk");
    assert_eq!(
        late.unwrap_err()
            .refusal()
            .map(admission_core::Refusal::code),
        Some(Code::Saturated),
        "a stale walk is not joined: the late caller goes through admission"
    );
    gate.open(1);
    assert_eq!(&*first.await.unwrap(), "walk 1");
    let fresh = scrapes
        .run("/metrics", || Ok(Arc::from("walk 2")), Admission::FailFast)
        .await;
    assert_eq!(
        &*fresh.unwrap(),
        "walk 2",
        "the next caller starts a fresh walk"
    );
    assert_eq!(pool.stats().coalesced, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn callers_all_gone_leave_the_slot_held_and_report_a_failure_once() {
    let name = "coalesce-all-gone";
    support::events();
    let pool = Pool::new(name, 1).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(60)).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let mut leader = Box::pin(scrapes.run(
        "/metrics",
        move || {
            held.recv().unwrap();
            Err::<Arc<str>, _>("registry locked".to_owned())
        },
        Admission::FailFast,
    ));
    assert!(poll_once(&mut leader).is_pending());
    let mut joined = Box::pin(scrapes.run("/metrics", || unreachable!(), Admission::FailFast));
    assert!(poll_once(&mut joined).is_pending());
    drop(leader);
    assert_eq!(
        pool.stats().orphans_running,
        0,
        "a caller still waits for the walk"
    );
    drop(joined);
    assert_eq!(
        pool.stats().orphans_running,
        1,
        "every caller has gone while the walk runs on"
    );
    // A caller joining the orphaned walk makes it wait for again.
    let mut again = Box::pin(scrapes.run("/metrics", || unreachable!(), Admission::FailFast));
    assert!(poll_once(&mut again).is_pending());
    assert_eq!(pool.stats().orphans_running, 0, "a caller waits again");
    drop(again);
    assert_eq!(pool.stats().orphans_running, 1);
    assert_eq!(
        pool.stats().orphaned,
        0,
        "counted as orphaned only once it ends"
    );

    assert_eq!(
        pool.try_admit().unwrap_err().code(),
        Code::Saturated,
        "the walk keeps its slot"
    );
    release.send(()).unwrap();
    let slot = tokio::time::timeout(Duration::from_secs(10), pool.admit())
        .await
        .unwrap()
        .unwrap();
    drop(slot);
    let events = events_for(name);
    assert_eq!(events.len(), 1, "reported once: {events:?}");
    assert_eq!(events[0].field("class"), Some("String"));
    let stats = pool.stats();
    assert_eq!(
        (stats.orphaned, stats.orphan_failures, stats.orphans_running),
        (1, 1, 0),
        "the ended orphan moved from running to orphaned"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_panicking_shared_walk_fails_every_caller_once_and_the_next_starts_fresh() {
    let pool = Pool::new("coalesce-panic", 1).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(60)).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let mut leader = Box::pin(scrapes.run(
        "/metrics",
        move || -> Result<Arc<str>, String> {
            held.recv().unwrap();
            panic!("walk exploded")
        },
        Admission::FailFast,
    ));
    assert!(poll_once(&mut leader).is_pending());
    let mut joined: Vec<_> = (0..2)
        .map(|_| Box::pin(scrapes.run("/metrics", || unreachable!(), Admission::FailFast)))
        .collect();
    for caller in &mut joined {
        assert!(poll_once(caller).is_pending());
    }
    release.send(()).unwrap();
    assert_eq!(leader.await, Err(WorkError::Panicked));
    for caller in joined {
        assert_eq!(caller.await, Err(WorkError::Panicked));
    }
    let stats = pool.stats();
    assert_eq!((stats.panicked, stats.coalesced, stats.orphaned), (1, 2, 0));
    let next = scrapes
        .run("/metrics", || Ok(Arc::from("fresh")), Admission::FailFast)
        .await;
    assert_eq!(
        &*next.unwrap(),
        "fresh",
        "the next caller starts a fresh walk"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn two_keys_never_share() {
    let pool = Pool::new("coalesce-two-keys", 2).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(60)).unwrap();
    let (gate, walks) = (Gate::new(), Arc::new(AtomicUsize::new(0)));
    let mut metrics = Box::pin(scrapes.run("/metrics", walk(&gate, &walks), Admission::FailFast));
    let mut status = Box::pin(scrapes.run("/", walk(&gate, &walks), Admission::FailFast));
    assert!(poll_once(&mut metrics).is_pending());
    assert!(poll_once(&mut status).is_pending());
    gate.wait_started(2);
    gate.open(2);
    let (a, b) = (metrics.await.unwrap(), status.await.unwrap());
    assert_ne!(a, b);
    assert_eq!(walks.load(Ordering::SeqCst), 2);
    assert_eq!(pool.stats().coalesced, 0);
}

#[test]
fn a_zero_staleness_bound_is_a_configuration_error() {
    let pool = Pool::new("coalesce-zero", 1).unwrap();
    assert!(matches!(
        Scrapes::new(&pool, Duration::ZERO),
        Err(ConfigError::ZeroStaleness { .. })
    ));
}

/// Staleness counts from the walk's start: callers that keep joining within
/// the bound do not keep a walk fresh for ever.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn joiners_within_the_bound_do_not_extend_a_walks_freshness() {
    let pool = Pool::new("coalesce-stale-joiners", 1).unwrap();
    let bound = Duration::from_millis(200);
    let scrapes: Scrapes = Coalescing::new(&pool, bound).unwrap();
    let (gate, walks) = (Gate::new(), Arc::new(AtomicUsize::new(0)));
    let started = tokio::time::Instant::now();
    let mut first = Box::pin(scrapes.run("/metrics", walk(&gate, &walks), Admission::FailFast));
    assert!(poll_once(&mut first).is_pending());
    gate.wait_started(1);

    // A joiner at the very end of the bound (paused clock).
    tokio::time::advance(bound).await;
    assert_eq!(started.elapsed(), bound);
    let mut joiner = Box::pin(scrapes.run("/metrics", || unreachable!(), Admission::FailFast));
    assert!(poll_once(&mut joiner).is_pending());
    assert_eq!(pool.stats().coalesced, 1, "joined inside the bound");

    // Past the bound since the start, though not since the last join.
    tokio::time::advance(Duration::from_millis(1)).await;
    let late = tokio::time::timeout(
        Duration::from_secs(10),
        scrapes.run("/metrics", walk(&gate, &walks), Admission::FailFast),
    )
    .await
    .expect("a caller past the bound does not join");
    assert_eq!(
        late.unwrap_err()
            .refusal()
            .map(admission_core::Refusal::code),
        Some(Code::Saturated)
    );
    assert_eq!(pool.stats().coalesced, 1);
    gate.open(1);
    assert_eq!(&*first.await.unwrap(), "walk 1");
    assert_eq!(&*joiner.await.unwrap(), "walk 1");
}

/// A waiting caller that is granted a slot and then finds a fresh walk for
/// its key (started meanwhile by an earlier waiter) joins it and gives the
/// slot straight back.
#[tokio::test(flavor = "current_thread")]
async fn a_waiter_that_joins_after_admission_returns_its_slot() {
    let pool = Pool::new("coalesce-wait-join", 2).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(60)).unwrap();
    // Two other callers hold both slots, in work of their own.
    let holders = Gate::new();
    let held: Vec<_> = (0..2)
        .map(|_| pool.try_admit().unwrap().offload(holders.work()))
        .collect();
    holders.wait_started(2);

    let (gate, walks) = (Gate::new(), Arc::new(AtomicUsize::new(0)));
    let mut w0 = Box::pin(scrapes.run("/metrics", walk(&gate, &walks), Admission::Wait));
    assert!(poll_once(&mut w0).is_pending(), "queued first");
    let mut w1 = Box::pin(scrapes.run("/metrics", walk(&gate, &walks), Admission::Wait));
    assert!(poll_once(&mut w1).is_pending(), "queued second");

    holders.open(2);
    for work in held {
        assert_eq!(work.await, Ok("walked"));
    }
    // Both waiters are admitted in turn; the first starts the walk, the
    // second finds it and joins.
    let open = async {
        // By now the first waiter started the walk and the second joined.
        gate.wait_started(1);
        gate.open(1);
    };
    let (a, b, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(w0, w1, open)
    })
    .await
    .expect("both callers end");
    assert_eq!((&*a.unwrap(), &*b.unwrap()), ("walk 1", "walk 1"));
    assert_eq!(walks.load(Ordering::SeqCst), 1, "one walk");
    assert_eq!(pool.stats().coalesced, 1);
    assert_eq!(
        pool.stats().in_use,
        0,
        "the joiner's unused slot went back, not only the walk's"
    );
}

/// A walk that replaced a stale one for its key stays joinable when the
/// stale walk ends: the stale walk's end removes only its own flight.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stale_walk_ending_leaves_the_newer_walk_joinable() {
    let pool = Pool::new("coalesce-replaced", 2).unwrap();
    let bound = Duration::from_millis(50);
    let scrapes: Scrapes = Coalescing::new(&pool, bound).unwrap();
    let walks = Arc::new(AtomicUsize::new(0));
    let (old_gate, new_gate) = (Gate::new(), Gate::new());
    let mut old = Box::pin(scrapes.run("/metrics", walk(&old_gate, &walks), Admission::FailFast));
    assert!(poll_once(&mut old).is_pending());
    old_gate.wait_started(1);
    tokio::time::advance(bound * 2).await; // the first walk goes stale

    let mut new = Box::pin(scrapes.run("/metrics", walk(&new_gate, &walks), Admission::FailFast));
    assert!(poll_once(&mut new).is_pending());
    new_gate.wait_started(1);
    old_gate.open(1);
    assert_eq!(&*old.await.unwrap(), "walk 1");

    // The newer walk is still running and fresh: a caller joins it.
    let mut joiner = Box::pin(scrapes.run("/metrics", || unreachable!(), Admission::FailFast));
    assert!(poll_once(&mut joiner).is_pending());
    assert_eq!(pool.stats().coalesced, 1, "joined the newer walk");
    new_gate.open(1);
    assert_eq!(&*new.await.unwrap(), "walk 2");
    assert_eq!(&*joiner.await.unwrap(), "walk 2");
}

#[test]
fn coalescing_debug_names_its_pool_and_bound() {
    let pool = Pool::new("coalesce-debug", 1).unwrap();
    let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_millis(250)).unwrap();
    let text = format!("{scrapes:?}");
    assert!(
        text.contains("coalesce-debug") && text.contains("250ms"),
        "{text}"
    );
}
