//! Issue 40.1's engine part: a pool in shadow mode makes every decision and
//! counts it, and refuses nothing for load and makes nothing wait; switching
//! back enforces from the next admission on. A `#[reserved]` loop owner's
//! reservation honours it too.

use std::time::Duration;

use admission_core::{Admission, Caller, Class, Code, Criticality, Pool, RequestPools};

#[test]
fn a_full_pool_in_shadow_lets_through_and_counts_what_it_would_refuse() {
    let pool = Pool::new("registry", 1).unwrap();
    pool.set_shadow(true);
    let first = pool.try_admit().unwrap();
    let past = Caller::new(Criticality::Sheddable)
        .scope_sync(|| pool.try_admit())
        .expect("shadow mode refuses nothing for load");

    let stats = pool.stats();
    assert!(stats.shadow);
    assert_eq!(
        (stats.in_use, stats.overdraft),
        (2, 1),
        "in use past the capacity, and said so"
    );
    assert_eq!(stats.would_refuse_with(Code::Saturated), 1);
    assert_eq!(
        stats.would_refuse_by_code[0],
        [0, 0, 1],
        "by the caller's criticality (sheddable)"
    );
    assert_eq!(stats.refused, 0, "nothing refused");

    pool.set_shadow(false);
    let refused = pool.try_admit().unwrap_err();
    assert_eq!(
        refused.code(),
        Code::Saturated,
        "enforced from the next admission on"
    );
    drop((first, past));
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.overdraft), (0, 0));
    assert_eq!(
        (stats.admitted, stats.released),
        (2, 2),
        "each slot back once"
    );
    assert!(
        pool.try_admit().is_ok(),
        "the slot past the capacity took none of the N"
    );
}

#[tokio::test]
async fn waits_in_shadow_are_served_at_once_and_counted() {
    let pool = Pool::builder("registry").capacity(1).build().unwrap();
    pool.set_shadow(true);
    let _held = pool.try_admit().unwrap();
    for admission in [
        Admission::Wait,
        Admission::WaitFor(Duration::from_secs(60)),
        Admission::Queue,
    ] {
        let slot = tokio::time::timeout(Duration::from_secs(10), pool.admit_with(admission))
            .await
            .unwrap_or_else(|_| panic!("{admission:?} waited"))
            .unwrap_or_else(|refusal| panic!("{admission:?} refused: {refusal}"));
        drop(slot);
    }
    let stats = pool.stats();
    assert_eq!(stats.would_wait, 3, "each would have waited");
    assert_eq!(stats.waiting, 0);
    assert_eq!(stats.refused, 0);
}

#[tokio::test]
async fn a_wait_in_shadow_is_counted_with_how_long_it_would_have_lasted() {
    let work = Duration::from_millis(40);
    let pool = Pool::builder("registry")
        .capacity(1)
        .expected_work(work)
        .build()
        .unwrap();
    let trace = admission_core::trace::Trace::new(16).unwrap();
    pool.trace_into(&trace).unwrap();
    pool.set_shadow(true);
    let held = pool.try_admit().unwrap();
    drop(pool.admit_with(Admission::Wait).await.unwrap());
    let would = pool.stats().would_wait_time;
    assert!(
        would > Duration::ZERO && would <= work,
        "until the one slot frees, at most one typical work: {would:?}"
    );
    drop(held);
    let mut lines = Vec::new();
    trace.write_json_lines(&mut lines).unwrap();
    let lines = String::from_utf8(lines).unwrap();
    let shadow: serde_json::Value = lines
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|entry| entry["outcome"] == "shadow")
        .expect("the wait it would have had is traced");
    assert!(shadow["code"].is_null(), "a wait, not a refusal");
    assert_eq!(
        shadow["waited_ms"].as_f64().unwrap(),
        would.as_secs_f64() * 1000.0
    );
}

#[tokio::test]
async fn a_deadline_too_short_is_counted_and_served_in_shadow() {
    let pool = Pool::builder("registry")
        .capacity(4)
        .expected_work(Duration::from_secs(1))
        .build()
        .unwrap();
    let hurried = Caller::new(Criticality::Default).with_budget(Duration::from_millis(10));
    let enforced = hurried.scope_sync(|| pool.try_admit()).unwrap_err();
    assert_eq!(enforced.code(), Code::BudgetTooShort);

    pool.set_shadow(true);
    let slot = hurried
        .scope_sync(|| pool.try_admit())
        .expect("served in shadow mode");
    let stats = pool.stats();
    assert_eq!(stats.would_refuse_with(Code::BudgetTooShort), 1);
    assert_eq!(stats.overdraft, 0, "a free slot: not past the capacity");
    drop(slot);
}

#[tokio::test]
async fn a_closed_pool_refuses_in_shadow_too() {
    let pool = Pool::new("registry", 1).unwrap();
    pool.set_shadow(true);
    let shutdown = admission_core::Shutdown::new(Duration::from_secs(5)).unwrap();
    shutdown.register(&pool);
    shutdown.shutdown().await;
    let refused = pool.try_admit().unwrap_err();
    assert_eq!(refused.code(), Code::ShuttingDown, "shutdown is not load");
}

#[test]
fn request_classes_in_shadow_serve_a_full_class() {
    let requests = RequestPools::new(1, 1).unwrap();
    requests.set_shadow(true);
    let _one = requests.try_lease(Class::Work).unwrap();
    let _two = requests
        .try_lease(Class::Work)
        .expect("a full class serves in shadow mode");
    let work = requests.pool(Class::Work).stats();
    assert_eq!((work.in_use, work.overdraft), (2, 1));
    assert!(requests.pool(Class::Control).is_shadow(), "both classes");
}

/// A `#[reserved]` loop owner whose reservation is in shadow mode: a call
/// past its slots runs (on the reservation's own thread) and is counted as
/// `ADMISSION_RESERVATION_EXHAUSTED`; switched back, the next one is
/// refused with that code.
#[admission_core::reserved(slots = 1, name = "shadowed-loop")]
struct ShadowedLoop;

#[tokio::test]
async fn a_reserved_owner_in_shadow_runs_past_its_slots_and_counts_them() {
    use admission_core::LoopOwner;

    let requests = RequestPools::new(1, 1).unwrap();
    let reservation = ShadowedLoop.reservation();
    reservation.pool().set_shadow(true);
    let _held = reservation.try_admit().unwrap(); // the loop's one slot

    let ran = ShadowedLoop
        .execution(requests.execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(7)))
        .await
        .expect("shadow mode refuses nothing for load");
    assert_eq!(ran, 7);
    let stats = reservation.stats();
    assert_eq!(stats.would_refuse_with(Code::ReservationExhausted), 1);
    assert_eq!(stats.refused, 0);
    assert_eq!(
        requests.pool(Class::Work).stats().admitted,
        0,
        "the loop's work took no request slot"
    );

    reservation.pool().set_shadow(false);
    let refused = ShadowedLoop
        .execution(requests.execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(7)))
        .await
        .unwrap_err();
    assert_eq!(
        refused.refusal().map(admission_core::Refusal::code),
        Some(Code::ReservationExhausted),
        "enforced from the next call on"
    );
}
