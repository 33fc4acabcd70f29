//! Issue 39's costs: an admission may take several slots at once
//! ([`Caller::with_cost`]). Every entry point that admits for a caller
//! takes all of them or none, holds them until the lease, slot or work
//! ends (or the waiter is dropped) and gives them all back; a waiter is
//! served whole, the slots that come back set aside for it; shares count
//! cost; a cost above the capacity is clamped (never a wait forever) and
//! reported where it is declared; live limits keep working.
//!
//! Slots are held with leases, slots and channels, never with sleeps.

use std::num::NonZeroU8;
use std::time::Duration;

use admission_core::{
    Admission, Caller, Class, Code, ConfigError, Criticality, Pool, RequestPools,
};

fn cost(slots: u8) -> Caller {
    Caller::default().with_cost(NonZeroU8::new(slots).unwrap())
}

/// Yields until `done` holds, at most a bounded number of times.
async fn settle(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..64 {
        if done() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    done()
}

#[test]
fn a_cost_of_four_holds_a_class_of_four_and_gives_all_four_back() {
    let requests = RequestPools::new(1, 4).unwrap();
    let pool = requests.pool(Class::Control);
    let lease = requests.try_lease_for(Class::Control, cost(4)).unwrap();
    assert_eq!(
        pool.stats().in_use,
        4,
        "one lease of cost 4 holds four slots"
    );
    let refused = requests
        .try_lease_for(Class::Control, Caller::default())
        .unwrap_err();
    assert_eq!(refused.code(), Code::Saturated, "nothing is left");
    drop(lease);
    let stats = pool.stats();
    assert_eq!(stats.in_use, 0, "all four came back");
    assert_eq!(
        (stats.admitted, stats.released),
        (4, 4),
        "the books count slots"
    );
    // And the class is whole again: four of cost 1.
    let four: Vec<_> = (0..4)
        .map(|_| {
            requests
                .try_lease_for(Class::Control, Caller::default())
                .unwrap()
        })
        .collect();
    assert_eq!(pool.stats().in_use, 4);
    drop(four);
}

#[test]
fn a_cost_is_all_or_nothing() {
    let pool = Pool::new("walks", 4).unwrap();
    let _one = pool.try_admit().unwrap();
    let _two = pool.try_admit().unwrap();
    let refused = cost(3).scope_sync(|| pool.try_admit()).unwrap_err();
    assert_eq!(refused.code(), Code::Saturated);
    assert_eq!(pool.stats().in_use, 2, "a refused cost of 3 took nothing");
    let two = cost(2).scope_sync(|| pool.try_admit()).unwrap();
    assert_eq!(pool.stats().in_use, 4);
    drop(two);
    assert_eq!(pool.stats().in_use, 2);
}

/// `Pool::run`, the waits and pure work's fresh lease take the cost too,
/// and work run on a costly slot gives every slot back when it ends.
#[tokio::test(flavor = "current_thread")]
async fn every_entry_point_takes_the_cost() {
    let pool = Pool::new("walks", 3).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel();
    let walk = {
        let pool = pool.clone();
        tokio::spawn(cost(2).scope(async move {
            pool.run(
                move || {
                    started.send(()).unwrap();
                    held.recv().map_err(|_| std::fmt::Error)
                },
                Admission::FailFast,
            )
            .await
        }))
    };
    running.await.unwrap();
    assert_eq!(pool.stats().in_use, 2, "run took two slots for its work");
    release.send(()).unwrap();
    walk.await.unwrap().unwrap();
    assert!(
        settle(|| pool.stats().in_use == 0).await,
        "both came back with the work"
    );

    for admission in [
        Admission::Wait,
        Admission::WaitFor(Duration::from_secs(60)),
        Admission::Queue,
    ] {
        let slot = cost(3).scope(pool.admit_with(admission)).await.unwrap();
        assert_eq!(pool.stats().in_use, 3, "{admission:?} took three");
        drop(slot);
        assert_eq!(pool.stats().in_use, 0);
    }

    let requests = RequestPools::new(2, 1).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel();
    let pure = {
        let requests = requests.clone();
        tokio::spawn(cost(2).scope(async move {
            requests
                .execute_pure(Class::Work, move || {
                    started.send(()).unwrap();
                    held.recv().map_err(|_| std::fmt::Error)
                })
                .await
        }))
    };
    running.await.unwrap();
    assert_eq!(
        requests.pool(Class::Work).stats().in_use,
        2,
        "pure work's fresh lease took two"
    );
    release.send(()).unwrap();
    pure.await.unwrap().unwrap();
    assert!(settle(|| requests.pool(Class::Work).stats().in_use == 0).await);
}

/// A waiter of cost 4 on a pool of 4 whose slots come back one by one is
/// served once all four are free: the slots that come back meanwhile are
/// set aside for it, so fail-fast callers of cost 1 do not starve it.
#[tokio::test(flavor = "current_thread")]
async fn a_costly_waiter_is_served_whole_and_not_starved() {
    let pool = Pool::new("walks", 4).unwrap();
    let mut held: Vec<_> = (0..4).map(|_| pool.try_admit().unwrap()).collect();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(cost(4).scope(async move { pool.admit().await }))
    };
    assert!(settle(|| pool.stats().waiting == 1).await, "it waits");
    for left in (1..4).rev() {
        held.pop();
        assert!(
            pool.try_admit().is_err(),
            "a slot that came back is set aside for the waiter ({left} still held)"
        );
        assert!(!waiter.is_finished(), "not served before all four are free");
    }
    held.pop();
    let slot = waiter.await.unwrap().expect("served whole");
    assert_eq!(pool.stats().in_use, 4);
    drop(slot);
    assert_eq!(pool.stats().in_use, 0);
}

/// A costly waiter dropped while slots are set aside for it takes nothing
/// with it: they go back to the pool (or on to the next waiter).
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_costly_waiter_gives_back_what_was_set_aside() {
    let pool = Pool::new("walks", 4).unwrap();
    let mut held: Vec<_> = (0..4).map(|_| pool.try_admit().unwrap()).collect();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(cost(4).scope(async move { pool.admit().await }))
    };
    assert!(settle(|| pool.stats().waiting == 1).await);
    held.truncate(1);
    assert_eq!(pool.stats().in_use, 4, "three set aside, one held");
    // Another waiter, of cost 1, queues behind it.
    let next = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.admit().await })
    };
    assert!(settle(|| pool.stats().waiting == 2).await);
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    // Bounded, so that slots kept by the dropped waiter fail the test
    // instead of hanging it: the next waiter is served at once.
    let slot = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the set-aside slots went on to the next waiter")
        .unwrap()
        .unwrap();
    assert!(
        settle(|| pool.stats().in_use == 2).await,
        "the held one and the next waiter's: the other two went back, in use {}",
        pool.stats().in_use
    );
    drop((slot, held));
    assert_eq!(pool.stats().in_use, 0);
    assert_eq!(pool.stats().waiting, 0);
}

/// A cost above the capacity takes the whole pool (it never waits for
/// slots that do not exist), and is a construction error where declared.
#[tokio::test(flavor = "current_thread")]
async fn a_cost_above_the_capacity_takes_the_whole_pool_and_is_a_construction_error() {
    let requests = RequestPools::new(2, 4).unwrap();
    let five = NonZeroU8::new(5).unwrap();
    assert_eq!(
        requests.check_cost(Class::Control, five),
        Err(ConfigError::CostAboveCapacity {
            pool: requests.pool(Class::Control).name().to_owned(),
            cost: 5,
            capacity: 4,
        })
    );
    assert_eq!(
        requests.check_cost(Class::Control, NonZeroU8::new(4).unwrap()),
        Ok(())
    );
    assert!(
        requests
            .check_cost(Class::Work, NonZeroU8::new(3).unwrap())
            .is_err()
    );

    let lease = requests.try_lease_for(Class::Control, cost(5)).unwrap();
    assert_eq!(requests.pool(Class::Control).stats().in_use, 4, "clamped");
    drop(lease);

    // Waiting: served once the pool is free, not forever in line.
    let pool = Pool::new("walks", 2).unwrap();
    let one = pool.try_admit().unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(cost(200).scope(async move { pool.admit().await }))
    };
    assert!(settle(|| pool.stats().waiting == 1).await);
    drop(one);
    // A bound on a hang (a cost waiting for slots that do not exist), not
    // a synchronisation: the waiter is served at once.
    let all = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("never waits for slots the pool does not have")
        .unwrap()
        .expect("served with the whole pool");
    assert_eq!(pool.stats().in_use, 2);
    drop(all);
}

/// A cost above the current limit but within the capacity is refused as
/// saturated at once, and a waiter for it is served when the limit rises.
#[tokio::test(flavor = "current_thread")]
async fn a_cost_above_a_lowered_limit_waits_for_it_to_rise() {
    let pool = Pool::new("walks", 4).unwrap();
    pool.set_limit(2).unwrap();
    let refused = cost(3).scope_sync(|| pool.try_admit()).unwrap_err();
    assert_eq!(refused.code(), Code::Saturated);
    let small = pool.try_admit().unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(cost(3).scope(async move { pool.admit().await }))
    };
    assert!(settle(|| pool.stats().waiting == 1).await);
    // A slot coming back is not set aside for a cost the limit cannot hold.
    drop(small);
    assert_eq!(pool.stats().in_use, 0);
    let other = pool.try_admit().expect("nothing was set aside");
    drop(other);
    pool.set_limit(4).unwrap();
    let three = waiter.await.unwrap().expect("the raised limit holds it");
    assert_eq!(pool.stats().in_use, 3);
    drop(three);
}

/// Shares count cost: a flow asking for 3 of a class of 4 beside another
/// that asks is asking for more than its share (2), and is refused; for 2
/// it is admitted.
#[test]
fn shares_count_cost_not_requests() {
    let requests = RequestPools::new(4, 1).unwrap();
    let (a, b) = (
        Caller::default().with_flow("a"),
        Caller::default().with_flow("b"),
    );
    let alone = requests
        .try_lease_for(Class::Work, a.with_cost(NonZeroU8::new(3).unwrap()))
        .expect("alone, a flow gets the class");
    let b_one = requests.try_lease_for(Class::Work, b).unwrap();
    assert_eq!(
        requests.try_lease_for(Class::Work, b).unwrap_err().code(),
        Code::Saturated,
        "full: b asks from now on"
    );
    drop(alone);
    let three = requests.try_lease_for(Class::Work, a.with_cost(NonZeroU8::new(3).unwrap()));
    assert_eq!(
        three.unwrap_err().code(),
        Code::FlowShare,
        "3 slots would put a over its share of 2 while b asks under its own"
    );
    let two = requests
        .try_lease_for(Class::Work, a.with_cost(NonZeroU8::new(2).unwrap()))
        .expect("2 is a's share");
    assert_eq!(requests.pool(Class::Work).stats().in_use, 3);
    drop((two, b_one));
}

/// A task that holds slots itself and waits for a cost only its own slots
/// could make room for is refused as reentrant, not left waiting.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_costly_wait_only_the_waiters_own_slots_could_end_is_reentrant() {
    let pool = Pool::new("walks", 4).unwrap();
    let _mine = pool.try_admit().unwrap();
    // Bounded, so that a wait not seen as reentrant times out instead.
    let refused = cost(4)
        .scope(pool.admit_timeout(Duration::from_secs(3600)))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Code::Reentrant,
        "its own slot is all that could free one"
    );
    let critical = Caller::new(Criticality::Critical).with_cost(NonZeroU8::new(3).unwrap());
    let three = critical
        .scope(pool.admit())
        .await
        .expect("3 of the other slots are free");
    drop(three);
}

#[test]
fn a_caller_with_a_cost_stays_small() {
    assert_eq!(size_of::<Caller>(), 24);
    assert_eq!(cost(4).cost(), 4);
    assert_eq!(Caller::default().cost(), 1);
}

/// A request that already holds a lease of cost 1 (a router-wide layer)
/// and asks the same class for cost 3 (its route's layer) takes the two
/// missing slots, not a second lease and not nothing; the top-up goes back
/// with the inner lease, the outer slot with the outer lease; a cost the
/// request already holds is shared as it is.
#[tokio::test]
async fn a_lease_topped_up_to_a_routes_cost_holds_the_difference() {
    let requests = RequestPools::new(1, 4).unwrap();
    let pool = requests.pool(Class::Control).clone();
    let outer = requests.try_lease(Class::Control).unwrap();
    let (inner, again) = outer
        .clone()
        .scope(async {
            let inner = requests.try_lease_for(Class::Control, cost(3)).unwrap();
            let again = inner
                .clone()
                .scope(async { requests.try_lease_for(Class::Control, cost(2)).unwrap() })
                .await;
            (inner, again)
        })
        .await;
    assert!(!inner.is_inherited(), "the route's own admission");
    assert!(again.is_inherited(), "three held, two asked: shared");
    assert_eq!(pool.stats().in_use, 3, "one, and two on top");
    drop((inner, again));
    assert_eq!(
        pool.stats().in_use,
        1,
        "the top-up went back, the outer stays"
    );

    // Queued, the top-up waits for its slots like any waiter.
    let other = requests.try_lease_for(Class::Control, cost(3)).unwrap();
    let waiting = tokio::spawn({
        let (requests, outer) = (requests.clone(), outer.clone());
        outer.scope_for(cost(4), async move {
            requests.lease_with(Class::Control, Admission::Queue).await
        })
    });
    drop(other);
    let topped = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served")
        .expect("task")
        .expect("admitted");
    assert_eq!(pool.stats().in_use, 4);
    drop(topped);
    drop(outer);
    assert_eq!(pool.stats().in_use, 0);
}

/// Two requests that each hold one slot of a class of two (a router-wide
/// layer) and queue for a route of cost 2 wait for each other's slot:
/// neither can be served, both end refused at the queue's wait, never
/// waiting for ever, and their outer slots go back with the outer leases.
#[tokio::test(start_paused = true)]
async fn requests_that_hold_one_and_queue_for_more_end_refused_at_the_queues_wait() {
    let requests = RequestPools::new(1, 2).unwrap();
    let pool = requests.pool(Class::Control).clone();
    let outers = [
        requests.try_lease(Class::Control).unwrap(),
        requests.try_lease(Class::Control).unwrap(),
    ];
    let waits: Vec<_> = outers
        .iter()
        .map(|outer| {
            let (requests, outer) = (requests.clone(), outer.clone());
            tokio::spawn(outer.scope_for(cost(2), async move {
                requests.lease_with(Class::Control, Admission::Queue).await
            }))
        })
        .collect();
    for wait in waits {
        let refusal = tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .expect("refused at the queue's wait, not waiting for ever")
            .expect("the waiting task")
            .expect_err("no slot can come back to either");
        assert_eq!(refusal.code(), Code::WaitTimedOut);
    }
    assert_eq!(pool.stats().in_use, 2, "the outer leases hold theirs");
    drop(outers);
    assert_eq!(pool.stats().in_use, 0, "all back");
}

/// Work started under a topped-up lease keeps every slot of it until the
/// work ends, though the request is cancelled and lets go of both leases
/// first (a real worker, held by a channel).
#[tokio::test]
async fn work_under_a_topped_up_lease_holds_the_whole_cost_until_it_ends() {
    let requests = RequestPools::new(1, 4).unwrap();
    let pool = requests.pool(Class::Control).clone();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, entered) = tokio::sync::oneshot::channel::<()>();
    let outer = requests.try_lease(Class::Control).unwrap();
    let inner = outer
        .clone()
        .scope(async { requests.try_lease_for(Class::Control, cost(4)).unwrap() })
        .await;
    let work = tokio::spawn(inner.scope({
        let requests = requests.clone();
        async move {
            requests
                .execute_pure(Class::Control, move || {
                    started.send(()).unwrap();
                    held.recv().map_err(|_| std::fmt::Error)
                })
                .await
        }
    }));
    entered.await.unwrap();
    // The client went away: the request's task and both its leases end.
    work.abort();
    assert!(work.await.unwrap_err().is_cancelled());
    drop(outer);
    assert_eq!(pool.stats().in_use, 4, "the orphaned work holds all four");
    release.send(()).unwrap();
    // A waiter for all four is woken when the work gives them back.
    let whole = tokio::time::timeout(
        Duration::from_secs(10),
        cost(4).scope(requests.lease_with(Class::Control, Admission::Wait)),
    )
    .await
    .expect("all four back when the work ends")
    .expect("admitted");
    drop(whole);
    assert_eq!(pool.stats().in_use, 0);
}
