//! A pool's limit changed while it runs (`Pool::set_limit`): shrinking
//! interrupts nothing and admits nobody until fewer than the new limit are
//! held; growing wakes waiters at once; out-of-range limits and adaptive
//! classes are refused with a clear error. (The race of a resize with
//! admissions and releases is loom model (j), `loom_limit`.)

use std::time::Duration;

use admission_core::{
    AdaptiveLimit, Admission, Class, ConfigError, Pool, RequestPools, pool::Slot,
};

#[test]
fn shrinking_8_to_2_with_8_held_admits_nobody_until_fewer_than_2_are_held() {
    let pool = Pool::new("shrink", 8).unwrap();
    let mut held: Vec<Slot> = (0..8).map(|_| pool.try_admit().unwrap()).collect();
    pool.set_limit(2).unwrap();
    assert_eq!(pool.stats().in_use, 8, "nothing running is interrupted");
    while held.len() > 2 {
        held.pop();
        assert!(
            pool.try_admit().is_err(),
            "{} held, a limit of 2: nobody is admitted",
            held.len()
        );
    }
    assert!(pool.try_admit().is_err(), "2 held: at the limit");
    held.pop();
    let second = pool.try_admit().expect("1 held: room for one more");
    assert!(pool.try_admit().is_err(), "and it holds at 2");
    assert_eq!(pool.stats().limit, 2);
    drop((held, second));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growing_2_to_8_wakes_six_waiters_at_once() {
    let pool = Pool::new("grow", 8).unwrap();
    pool.set_limit(2).unwrap();
    // Held by this test for the whole case: only growing frees room.
    let _held = [pool.try_admit().unwrap(), pool.try_admit().unwrap()];
    let (admitted, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
    let waiters: Vec<_> = (0..6)
        .map(|_| {
            let pool = pool.clone();
            let admitted = admitted.clone();
            tokio::spawn(async move {
                let slot = pool.admit_with(Admission::Wait).await.unwrap();
                admitted.send(()).unwrap();
                slot
            })
        })
        .collect();
    let line = pool.clone();
    tokio::time::timeout(Duration::from_secs(10), async move {
        while line.stats().waiting < 6 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the six wait in line");
    assert!(
        arrivals.try_recv().is_err(),
        "nobody admitted over the limit"
    );

    pool.set_limit(8).unwrap();
    for _ in 0..6 {
        tokio::time::timeout(Duration::from_secs(10), arrivals.recv())
            .await
            .expect("every waiter is admitted when the limit grows")
            .unwrap();
    }
    assert_eq!(pool.stats().in_use, 8);
    for waiter in waiters {
        drop(waiter.await.unwrap());
    }
}

#[test]
fn a_limit_of_zero_or_above_the_capacity_is_a_clear_error() {
    let pool = Pool::new("registry", 4).unwrap();
    for limit in [0, 5] {
        let err = pool.set_limit(limit).unwrap_err();
        assert_eq!(
            err,
            ConfigError::LimitOutOfRange {
                pool: "registry".into(),
                limit,
                capacity: 4
            }
        );
        assert!(
            err.to_string().contains("give it 1 to its capacity, 4"),
            "{err}"
        );
    }
    assert_eq!(pool.stats().limit, 4, "unchanged");
}

#[test]
fn an_adaptive_class_keeps_its_limit_to_its_controller() {
    let pools = RequestPools::builder()
        .work(8)
        .control(2)
        .adaptive(Class::Work, AdaptiveLimit::new(1, 8))
        .build()
        .unwrap();
    let err = pools.pool(Class::Work).set_limit(4).unwrap_err();
    assert!(matches!(err, ConfigError::AdaptiveLimit { .. }), "{err:?}");
    pools
        .pool(Class::Control)
        .set_limit(1)
        .expect("a fixed class's limit is the app's");
}
