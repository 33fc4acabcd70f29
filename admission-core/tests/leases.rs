//! One request, one lease per class: inside the scope of a lease, every
//! admission of the same class and the same pools shares that lease instead
//! of taking a second slot (stacked layers, a layer and `#[admitted]`); a
//! different class takes its own slot, and pools built separately share
//! nothing.
//!
//! Each test would fail if `try_lease`/`lease`/`lease_timeout` stopped
//! looking for the inherited lease (a 1-slot class would refuse or wait on
//! itself), or if they shared a lease of another class or of other pools
//! (`in_use` and `admitted` of the other pool would stay 0).

mod support;

use std::time::Duration;

use admission_core::pool::RetryHint;
use admission_core::{Class, Code, Lease, RequestPools};
use support::{Gate, poll_once};

/// Long enough to call a wait a hang.
const BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "current_thread")]
async fn inside_a_work_lease_every_work_admission_shares_it() {
    let requests = RequestPools::new(1, 1).unwrap();
    let work = requests.pool(Class::Work).clone();
    let lease = requests.try_lease(Class::Work).unwrap();

    let shares = lease
        .scope(async {
            let shared = requests
                .try_lease(Class::Work)
                .expect("try_lease shares the request's lease");
            assert_eq!(work.stats().in_use, 1, "no second slot for try_lease");
            let waited = tokio::time::timeout(BOUND, requests.lease(Class::Work))
                .await
                .expect("lease does not wait on the request's own slot")
                .expect("lease shares the request's lease");
            assert_eq!(work.stats().in_use, 1, "no second slot for lease");
            let bounded = tokio::time::timeout(
                BOUND,
                requests.lease_timeout(Class::Work, Duration::from_secs(60)),
            )
            .await
            .expect("lease_timeout does not wait on the request's own slot")
            .expect("lease_timeout shares the request's lease");
            assert_eq!(work.stats().in_use, 1, "no second slot for lease_timeout");
            [shared, waited, bounded]
        })
        .await;

    assert!(shares.iter().all(|l| l.class() == Class::Work));
    let stats = work.stats();
    assert_eq!(
        (stats.in_use, stats.admitted, stats.refused),
        (1, 1, 0),
        "one slot taken, once, and nobody refused"
    );
    drop(shares);
    assert_eq!(work.stats().in_use, 0, "the last share returned the slot");
}

#[tokio::test(flavor = "current_thread")]
async fn a_share_keeps_the_slot_after_the_scope_and_the_lease_are_gone() {
    let requests = RequestPools::new(1, 1).unwrap();
    let lease = requests.try_lease(Class::Work).unwrap();
    let share = lease
        .scope(async { requests.try_lease(Class::Work).unwrap() })
        .await;
    assert_eq!(
        requests.pool(Class::Work).stats().in_use,
        1,
        "the share holds the slot"
    );
    assert_eq!(
        requests.try_lease(Class::Work).unwrap_err().code(),
        Code::Saturated,
        "outside the scope the class is full"
    );
    drop(share);
    assert_eq!(requests.pool(Class::Work).stats().in_use, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_different_class_takes_its_own_slot() {
    let requests = RequestPools::new(1, 1).unwrap();
    let lease = requests.try_lease(Class::Work).unwrap();
    let (control, refused) = lease
        .clone()
        .scope(async {
            let control = requests
                .try_lease(Class::Control)
                .expect("the control class has its own free slot");
            // The scope is a work lease: it does not stand in for control.
            let refused = requests.try_lease(Class::Control).unwrap_err().code();
            (control, refused)
        })
        .await;
    assert_eq!(control.class(), Class::Control);
    assert_eq!(refused, Code::Saturated);
    let [work, control_stats] = requests.stats();
    assert_eq!((work.in_use, work.admitted), (1, 1));
    assert_eq!((control_stats.in_use, control_stats.admitted), (1, 1));
    assert_eq!(control_stats.refused, 1);
}

#[tokio::test(flavor = "current_thread")]
async fn pools_built_separately_are_not_shared_and_clones_are() {
    let requests = RequestPools::new(1, 1).unwrap();
    let other = RequestPools::new(1, 1).unwrap();
    let lease = requests.try_lease(Class::Work).unwrap();
    let (from_other, other_full, from_clone) = lease
        .scope(async {
            let from_other = other
                .try_lease(Class::Work)
                .expect("the other pools have a free slot of their own");
            let other_full = other.try_lease(Class::Work).unwrap_err().code();
            let from_clone = requests
                .clone()
                .try_lease(Class::Work)
                .expect("a clone is the same pools: it shares");
            (from_other, other_full, from_clone)
        })
        .await;
    assert_eq!(
        other_full,
        Code::Saturated,
        "another RequestPools' work class is not the scope's lease"
    );
    let other_work = other.pool(Class::Work).stats();
    assert_eq!(
        (other_work.in_use, other_work.admitted),
        (1, 1),
        "the other pools gave their own slot"
    );
    let work = requests.pool(Class::Work).stats();
    assert_eq!(
        (work.in_use, work.admitted),
        (1, 1),
        "the clone took no slot"
    );
    drop((from_clone, from_other));
    assert_eq!(requests.pool(Class::Work).stats().in_use, 0);
    assert_eq!(other.pool(Class::Work).stats().in_use, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn nested_scopes_of_one_class_share_one_slot() {
    let requests = RequestPools::new(1, 1).unwrap();
    let lease = requests.try_lease(Class::Work).unwrap();
    let (nested, current) = lease
        .scope(async {
            // A second layer runs the request under the share it got.
            let shared = requests.try_lease(Class::Work).unwrap();
            shared
                .scope(async { (requests.try_lease(Class::Work), Lease::current()) })
                .await
        })
        .await;
    assert!(nested.is_ok(), "the innermost admission shares too");
    assert_eq!(current.map(|l| l.class()), Some(Class::Work));
    assert_eq!(
        requests.pool(Class::Work).stats().admitted,
        1,
        "nested scopes took one slot"
    );
}

/// Pure work that inherited a request's lease keeps the lease's slot until
/// the work ends, even when the request (and with it the scope and the
/// lease) is dropped while the work runs.
#[tokio::test(flavor = "current_thread")]
async fn pure_work_keeps_an_inherited_lease_after_its_request_is_dropped() {
    let requests = RequestPools::new(1, 1).unwrap();
    let gate = Gate::new();
    let lease = requests.try_lease(Class::Work).unwrap();
    let mut request = Box::pin(lease.scope(requests.execute_pure(Class::Work, gate.work())));
    assert!(poll_once(&mut request).is_pending());
    gate.wait_started(1);
    drop(request); // the client went away mid-work

    let work = requests.pool(Class::Work);
    assert_eq!(
        work.stats().in_use,
        1,
        "the running work still holds the slot"
    );
    assert_eq!(
        requests.try_lease(Class::Work).unwrap_err().code(),
        Code::Saturated,
        "no new request may take it while the work runs"
    );
    gate.open(1);
    let slot = tokio::time::timeout(BOUND, work.admit())
        .await
        .expect("the slot comes back when the work ends")
        .unwrap();
    drop(slot);
    assert_eq!(work.stats().orphaned, 1);
}

/// The retry hint configured on the request pools reaches both classes'
/// refusals.
#[test]
fn the_request_pools_retry_hint_reaches_both_classes() {
    let requests = RequestPools::builder()
        .work(1)
        .control(1)
        .retry_hint(RetryHint::Fixed(Duration::from_secs(7)))
        .build()
        .unwrap();
    for class in Class::ALL {
        let _held = requests.try_lease(class).unwrap();
        let refusal = requests.try_lease(class).unwrap_err();
        assert_eq!(
            refusal.retry_after_secs(),
            7,
            "{class} refusals carry the configured hint"
        );
        assert_eq!(requests.pool(class).retry_after_secs(), 7);
    }
}
