//! Issue 3: request leases, reserved slots for loop owners and lifespan
//! spawn, proven through a real loop owner doing pure work every cycle.

mod support;

use std::time::Duration;

use admission_core::log::log_failure;
use admission_core::{
    Class, Code, Lease, LoopOwner, RequestPools, Reservation, Shutdown, WorkError,
};
use support::{Gate, events, poll_once};

/// A recovery loop as in incident 3: each cycle settles one quantum with a
/// work-class transition and one with a control-class transition.
struct RecoveryLoop {
    requests: RequestPools,
    reservation: Reservation,
}

impl LoopOwner for RecoveryLoop {
    fn reservation(&self) -> &Reservation {
        &self.reservation
    }
}

impl RecoveryLoop {
    fn new(requests: &RequestPools, name: &str) -> RecoveryLoop {
        RecoveryLoop {
            requests: requests.clone(),
            reservation: Reservation::new(name, 2).unwrap(),
        }
    }

    /// One cycle; a failure is logged with its class and code only.
    async fn cycle(&self) -> Result<u32, WorkError<std::fmt::Error>> {
        self.execution(async {
            let settled = self
                .requests
                .execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(1))
                .await?;
            let timed_out = self
                .requests
                .execute_pure(Class::Control, || Ok::<_, std::fmt::Error>(1))
                .await?;
            Ok(settled + timed_out)
        })
        .await
        .inspect_err(|err| {
            log_failure("Tenant recovery scan", err, "; traversal will continue");
        })
    }
}

fn hold_all(requests: &RequestPools, class: Class) -> Vec<Lease> {
    let capacity = requests.pool(class).capacity();
    let leases: Vec<_> = (0..capacity)
        .map(|_| requests.try_lease(class).unwrap())
        .collect();
    assert!(requests.try_lease(class).is_err(), "{class} is full");
    leases
}

#[tokio::test(flavor = "current_thread")]
async fn the_loop_progresses_while_requests_hold_every_work_slot() {
    let requests = RequestPools::new(2, 4).unwrap();
    let recovery = RecoveryLoop::new(&requests, "recovery-work-full");
    let _held = hold_all(&requests, Class::Work);
    for _ in 0..3 {
        assert_eq!(recovery.cycle().await, Ok(2));
    }
    assert_eq!(
        recovery.reservation().stats().admitted,
        6,
        "one slot per call, not per cycle"
    );
    assert_eq!(
        requests.pool(Class::Work).stats().admitted,
        2,
        "no request capacity taken"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_loop_progresses_while_requests_hold_every_control_slot() {
    let requests = RequestPools::new(2, 4).unwrap();
    let recovery = RecoveryLoop::new(&requests, "recovery-control-full");
    let _held = hold_all(&requests, Class::Control);
    assert_eq!(recovery.cycle().await, Ok(2));
    assert_eq!(requests.pool(Class::Control).stats().admitted, 4);
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_reservation_pure_work_is_refused_with_its_own_code() {
    let requests = RequestPools::new(2, 4).unwrap();
    let _held = hold_all(&requests, Class::Work);
    let refused = requests
        .execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(()))
        .await
        .unwrap_err();
    assert_eq!(refused.refusal().unwrap().code(), Code::LeaseUnavailable);
}

#[tokio::test(flavor = "current_thread")]
async fn the_spare_absorbs_one_orphan_and_a_second_exhausts_the_reservation() {
    let name = "recovery-orphans";
    events();
    let requests = RequestPools::new(2, 4).unwrap();
    let recovery = RecoveryLoop::new(&requests, name);
    let gate = Gate::new();

    // A call that outlives its cancelled caller keeps its slot.
    let mut orphan = Box::pin(recovery.execution(requests.execute_pure(Class::Work, gate.work())));
    assert!(poll_once(&mut orphan).is_pending());
    gate.wait_started(1);
    drop(orphan);
    assert_eq!(recovery.reservation().stats().in_use, 1);
    assert_eq!(
        recovery.cycle().await,
        Ok(2),
        "the spare absorbs one orphan"
    );

    let mut second = Box::pin(recovery.execution(requests.execute_pure(Class::Work, gate.work())));
    assert!(poll_once(&mut second).is_pending());
    gate.wait_started(1);
    drop(second);

    let refused = recovery.cycle().await.unwrap_err();
    let refusal = refused.refusal().expect("refused");
    assert_eq!(refusal.code(), Code::ReservationExhausted);
    assert_eq!(refusal.pool(), name, "the code names the reservation");

    let logged: Vec<_> = events()
        .into_iter()
        .filter(|e| e.message.contains("Tenant recovery scan failed"))
        .filter(|e| e.field("code") == Some("ADMISSION_RESERVATION_EXHAUSTED"))
        .collect();
    assert_eq!(logged.len(), 1, "logged once: {logged:?}");
    assert_eq!(logged[0].field("class"), Some("ReservationExhausted"));
    assert_eq!(
        logged[0].message,
        "Tenant recovery scan failed (ReservationExhausted ADMISSION_RESERVATION_EXHAUSTED); traversal will continue"
    );
    assert_eq!(
        requests.pool(Class::Work).stats().admitted,
        0,
        "never borrowed request capacity"
    );

    gate.open(2);
    let reservation_pool = recovery.reservation().pool().clone();
    tokio::time::timeout(Duration::from_secs(10), async {
        let _a = reservation_pool.admit().await.unwrap();
        let _b = reservation_pool.admit().await.unwrap();
    })
    .await
    .expect("both orphans ended and returned their slots");
    assert_eq!(recovery.reservation().stats().orphaned, 2);
}

#[tokio::test(flavor = "current_thread")]
async fn inside_the_execution_scope_an_inherited_lease_is_set_aside() {
    let requests = RequestPools::new(2, 4).unwrap();
    let recovery = RecoveryLoop::new(&requests, "recovery-set-aside");
    let lease = requests.try_lease(Class::Work).unwrap();
    let (in_scope, during) = lease
        .scope(async {
            assert!(
                Lease::current().is_some(),
                "the request's lease is inherited"
            );
            recovery
                .execution(async {
                    let had_lease = Lease::current().is_some();
                    let reservation = recovery.reservation().pool().clone();
                    let during = requests
                        .execute_pure(Class::Work, move || {
                            Ok::<_, std::fmt::Error>(reservation.stats().in_use)
                        })
                        .await
                        .unwrap();
                    (had_lease, during)
                })
                .await
        })
        .await;
    assert!(
        !in_scope,
        "the lease is set aside inside the execution scope"
    );
    assert_eq!(during, 1, "the call took a reservation slot");
    assert_eq!(
        requests.pool(Class::Work).stats().admitted,
        1,
        "no second request slot"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn pure_work_in_a_request_runs_under_its_lease_and_takes_no_second_slot() {
    let requests = RequestPools::new(2, 4).unwrap();
    let lease = requests.try_lease(Class::Work).unwrap();
    let pool = requests.pool(Class::Work).clone();
    let in_use = lease
        .scope(requests.execute_pure(Class::Work, move || {
            Ok::<_, std::fmt::Error>(pool.stats().in_use)
        }))
        .await;
    assert_eq!(in_use, Ok(1));
}

#[tokio::test(flavor = "current_thread")]
async fn a_loop_spawned_inside_a_request_has_no_lease() {
    let requests = RequestPools::new(2, 4).unwrap();
    let shutdown = Shutdown::default();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let lease = requests.try_lease(Class::Control).unwrap();
    lease
        .scope(async {
            shutdown.spawn_lifespan(|_stop| async move {
                tx.send(Lease::current().is_none()).unwrap();
            });
        })
        .await;
    assert!(rx.await.unwrap());
    assert_eq!(shutdown.shutdown().await.loops_stopped, 1);
}

#[tokio::test(flavor = "current_thread")]
async fn request_ceilings_are_unchanged_while_loops_run() {
    let requests = RequestPools::new(2, 4).unwrap();
    let recovery = RecoveryLoop::new(&requests, "recovery-ceilings");
    let gate = Gate::new();
    let mut call = Box::pin(recovery.execution(requests.execute_pure(Class::Work, gate.work())));
    assert!(poll_once(&mut call).is_pending());
    gate.wait_started(1);

    let work = hold_all(&requests, Class::Work);
    let control = hold_all(&requests, Class::Control);
    assert_eq!(
        (work.len(), control.len()),
        (2, 4),
        "requests keep their full ceilings"
    );

    gate.open(1);
    assert_eq!(call.await, Ok("walked"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_dispatcher_reservation_is_sized_from_configuration() {
    struct NativeDispatcher {
        reservation: Reservation,
    }
    impl LoopOwner for NativeDispatcher {
        fn reservation(&self) -> &Reservation {
            &self.reservation
        }
    }
    let executor_capacities = [2_usize, 3];
    let dispatcher = NativeDispatcher {
        reservation: Reservation::new("native", executor_capacities.iter().sum::<usize>() + 1)
            .unwrap(),
    };
    let requests = RequestPools::new(2, 4).unwrap();
    let _held = hold_all(&requests, Class::Work);
    let gate = Gate::new();
    let mut calls = Vec::new();
    for _ in 0..5 {
        let mut call =
            Box::pin(dispatcher.execution(requests.execute_pure(Class::Work, gate.work())));
        assert!(poll_once(&mut call).is_pending());
        calls.push(call);
    }
    gate.wait_started(5);
    assert_eq!(
        dispatcher.reservation().stats().in_use,
        5,
        "five concurrent executions"
    );
    gate.open(5);
    for call in calls {
        assert_eq!(call.await, Ok("walked"));
    }
}
