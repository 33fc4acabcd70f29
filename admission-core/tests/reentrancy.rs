//! `ADMISSION_REENTRANT`: a task that holds every slot of a pool and asks to
//! wait for another would wait forever (only its own slots could free one),
//! so every waiting admission refuses it once the grace
//! (`REENTRANT_GRACE`, 100 ms) shows the task still holds them all; a
//! branch of the task whose sibling lets go within the grace, a task whose
//! slot went into work, a task holding only some slots, and a different
//! task all wait as before and are admitted when a slot frees. The refusal
//! is a programming error: counted in `reentrant`, not `refused`,
//! `is_overload()` false, logged at ERROR once per call site.
//!
//! Each case runs in a task of its own ([`in_task`]), as a request or a loop
//! does; one runs in the body of `block_on`, where the thread is the holder.
//! Every wait is bounded, so a regression (the wait is left to hang) fails
//! the test instead of hanging it. Each refusal test fails if the
//! reentrancy check in `Pool::wait_for_permit` is removed (the call is left
//! waiting and the bound expires), and each waiting test fails if offloaded
//! slots, or another task's, were counted as the caller's own (it would be
//! refused at once instead of pending).

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use admission_core::{Admission, Class, Coalescing, Code, Pool, Refusal, RequestPools, WorkError};
use support::{Gate, poll_once};
use tokio::time::Instant;

/// How long any call may take before the test calls it a hang.
const BOUND: Duration = Duration::from_secs(10);

/// What "at once" means here: far below `BOUND` and below any wait asked for.
const AT_ONCE: Duration = Duration::from_secs(1);

/// Runs `future` as a task of its own and waits for it, bounded.
async fn in_task<F>(future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::time::timeout(BOUND, tokio::spawn(future))
        .await
        .expect("the task ended within the bound: nothing was left waiting")
        .expect("the task did not panic")
}

/// Awaits `call`, which must end (not hang) and end at once.
async fn at_once<T>(call: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let out = tokio::time::timeout(BOUND, call)
        .await
        .expect("refused, not left waiting for a slot only the caller could free");
    let took = started.elapsed();
    assert!(took < AT_ONCE, "refused at once, took {took:?}");
    out
}

/// Spawns a task that takes one slot of `pool` and holds it until the
/// returned sender is used; returns once it holds it.
async fn held_by_another_task(
    pool: &Pool,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (holding_tx, holding) = tokio::sync::oneshot::channel::<()>();
    let (release, release_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn({
        let pool = pool.clone();
        async move {
            let slot = pool.try_admit().unwrap();
            holding_tx.send(()).unwrap();
            release_rx.await.unwrap();
            drop(slot);
        }
    });
    holding.await.unwrap();
    (release, holder)
}

/// The refusal's code, or the whole result when it is not a refusal.
fn refused<T: std::fmt::Debug, E: std::fmt::Debug>(result: Result<T, WorkError<E>>) -> Refusal {
    match result {
        Err(WorkError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Work that records whether it ran.
fn flagged() -> (
    Arc<AtomicBool>,
    impl FnOnce() -> Result<u32, std::fmt::Error> + Send + 'static,
) {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    (ran, move || {
        flag.store(true, Ordering::SeqCst);
        Ok(7)
    })
}

#[tokio::test(flavor = "current_thread")]
async fn run_wait_while_holding_the_only_slot_is_refused_at_once() {
    let pool = Pool::new("reentrant-run-wait", 1).unwrap();
    let (ran, work) = flagged();
    let task_pool = pool.clone();
    let (refusal, in_use) = in_task(async move {
        let slot = task_pool.try_admit().unwrap();
        let refusal = refused(at_once(task_pool.run(work, Admission::Wait)).await);
        let in_use = task_pool.stats().in_use;
        drop(slot);
        (refusal, in_use)
    })
    .await;
    assert_eq!(refusal.code(), Code::Reentrant);
    assert_eq!(
        refusal.pool(),
        "reentrant-run-wait",
        "the refusal names the pool"
    );
    assert!(refusal.retry_after_secs() >= 1);
    assert!(!ran.load(Ordering::SeqCst), "the refused work never ran");
    assert_eq!(
        in_use, 1,
        "the refusal took nothing and the held slot stayed held"
    );
    let stats = pool.stats();
    assert_eq!(
        (stats.reentrant, stats.refused),
        (1, 0),
        "counted as reentrant, not as a refusal for overload"
    );
    assert!(!refusal.is_overload(), "a programming error, not overload");
    assert_eq!((stats.in_use, stats.admitted), (0, 1));
}

#[tokio::test(flavor = "current_thread")]
async fn run_wait_for_while_holding_the_only_slot_is_refused_before_its_bound() {
    let pool = Pool::new("reentrant-run-wait-for", 1).unwrap();
    let (ran, work) = flagged();
    let task_pool = pool.clone();
    let refusal = in_task(async move {
        let _slot = task_pool.try_admit().unwrap();
        // A 60 s bound: refused long before it, not timed out.
        let wait = Admission::WaitFor(Duration::from_secs(60));
        refused(at_once(task_pool.run(work, wait)).await)
    })
    .await;
    assert_eq!(
        refusal.code(),
        Code::Reentrant,
        "refused as reentrant, not as a timed-out wait"
    );
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!((pool.stats().reentrant, pool.stats().refused), (1, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn every_waiting_admit_while_holding_the_only_slot_is_refused_at_once() {
    let pool = Pool::new("reentrant-admit", 1).unwrap();
    let task_pool = pool.clone();
    let codes = in_task(async move {
        let pool = task_pool;
        // Admitted by the waiting path itself: that slot is held too.
        let _slot = at_once(pool.admit()).await.unwrap();
        let minute = Duration::from_secs(60);
        vec![
            at_once(pool.admit()).await.unwrap_err().code(),
            at_once(pool.admit_timeout(minute))
                .await
                .unwrap_err()
                .code(),
            at_once(pool.admit_with(Admission::Wait))
                .await
                .unwrap_err()
                .code(),
            at_once(pool.admit_with(Admission::WaitFor(minute)))
                .await
                .unwrap_err()
                .code(),
        ]
    })
    .await;
    assert_eq!(codes, [Code::Reentrant; 4]);
    let stats = pool.stats();
    assert_eq!(
        (stats.reentrant, stats.refused),
        (4, 0),
        "each is counted, as reentrant"
    );
    assert_eq!((stats.admitted, stats.in_use), (1, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn a_lease_held_outside_any_scope_refuses_a_waiting_lease_of_its_class() {
    let requests = RequestPools::new(1, 1).unwrap();
    let task_requests = requests.clone();
    let (codes, control) = in_task(async move {
        let requests = task_requests;
        // Held, but not run as a scope: nothing shares it.
        let _lease = requests.try_lease(Class::Work).unwrap();
        let codes = [
            at_once(requests.lease(Class::Work))
                .await
                .unwrap_err()
                .code(),
            at_once(requests.lease_timeout(Class::Work, Duration::from_secs(60)))
                .await
                .unwrap_err()
                .code(),
        ];
        let control = at_once(requests.lease(Class::Control))
            .await
            .map(|l| l.class());
        (codes, control)
    })
    .await;
    assert_eq!(codes, [Code::Reentrant; 2]);
    assert_eq!(control, Ok(Class::Control), "another class is not affected");
    let [work, _] = requests.stats();
    assert_eq!((work.reentrant, work.refused), (2, 0));
    assert_eq!((work.admitted, work.in_use), (1, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn a_coalesced_wait_while_holding_the_only_slot_is_refused_at_once() {
    let pool = Pool::new("reentrant-coalesce", 1).unwrap();
    let scrapes: Coalescing<&'static str, u32, std::fmt::Error> =
        Coalescing::new(&pool, Duration::from_secs(60)).unwrap();
    let (ran, work) = flagged();
    let (ran_for, work_for) = flagged();
    let refusals = in_task(async move {
        let _slot = scrapes.pool().try_admit().unwrap();
        [
            refused(at_once(scrapes.run("/metrics", work, Admission::Wait)).await),
            refused(
                at_once(scrapes.run(
                    "/metrics",
                    work_for,
                    Admission::WaitFor(Duration::from_secs(60)),
                ))
                .await,
            ),
        ]
    })
    .await;
    for refusal in &refusals {
        assert_eq!(refusal.code(), Code::Reentrant);
    }
    assert!(!ran.load(Ordering::SeqCst) && !ran_for.load(Ordering::SeqCst));
    let stats = pool.stats();
    assert_eq!((stats.reentrant, stats.refused), (2, 0));
    assert_eq!((stats.coalesced, stats.finished), (0, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn a_task_whose_slot_went_into_work_waits_and_is_admitted_when_the_work_ends() {
    let pool = Pool::new("reentrant-offloaded", 1).unwrap();
    let task_pool = pool.clone();
    let (walked, waited, admitted) = in_task(async move {
        let (pool, gate) = (task_pool, Gate::new());
        let busy = pool.try_admit().unwrap().offload(gate.work());
        gate.wait_started(1);

        let mut run = Box::pin(pool.run(|| Ok::<_, std::fmt::Error>(7), Admission::Wait));
        assert!(
            poll_once(&mut run).is_pending(),
            "the slot moved into work is not the task's: it waits"
        );
        let mut admit = Box::pin(pool.admit());
        assert!(poll_once(&mut admit).is_pending(), "admit waits too");

        gate.open(1);
        let walked = busy.await;
        let waited = tokio::time::timeout(BOUND, run).await.expect("admitted");
        let admitted = tokio::time::timeout(BOUND, admit)
            .await
            .expect("admitted")
            .is_ok();
        (walked, waited, admitted)
    })
    .await;
    assert_eq!(walked, Ok("walked"));
    assert_eq!(waited, Ok(7), "admitted when the work ended");
    assert!(admitted);
    assert_eq!(pool.stats().refused, 0, "no one was refused");
}

/// A request dropped while the pure work it started still runs: the work
/// keeps the lease's slot until it ends, but the slot is no longer the
/// request task's, so a later wait of that task for the class waits for the
/// work instead of being refused as reentrant. (Seen failing, refused at
/// once with `ADMISSION_REENTRANT`, when the lease's last share forgot to
/// give up the task's claim: `Drop for Share` or `Slot::detach_shared`
/// made a no-op.)
#[tokio::test(flavor = "current_thread")]
async fn a_task_whose_lease_went_to_its_pure_work_waits_and_is_admitted_when_the_work_ends() {
    let requests = RequestPools::new(1, 1).unwrap();
    let task_requests = requests.clone();
    let (still_held, waited) = in_task(async move {
        let (requests, gate) = (task_requests, Gate::new());
        let lease = requests.try_lease(Class::Work).unwrap();
        let mut request = Box::pin(
            lease
                .clone()
                .scope(requests.execute_pure(Class::Work, gate.work())),
        );
        assert!(
            poll_once(&mut request).is_pending(),
            "the pure work started"
        );
        gate.wait_started(1);
        // The client went away: the request and its lease are dropped while
        // the work runs.
        drop((request, lease));
        let still_held = requests.pool(Class::Work).stats().in_use;

        let mut again = Box::pin(requests.lease(Class::Work));
        assert!(
            poll_once(&mut again).is_pending(),
            "the slot held only by the work is not the task's: it waits"
        );
        gate.open(1);
        let waited = tokio::time::timeout(BOUND, again)
            .await
            .expect("admitted when the work ended")
            .map(|lease| lease.class());
        (still_held, waited)
    })
    .await;
    assert_eq!(
        still_held, 1,
        "the work kept the slot after the request went"
    );
    assert_eq!(waited, Ok(Class::Work));
    let [work, _] = requests.stats();
    assert_eq!((work.refused, work.in_use), (0, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn a_different_task_waiting_on_a_full_pool_is_admitted_when_the_slot_frees() {
    let pool = Pool::new("reentrant-other-task", 1).unwrap();
    let (release, holder) = held_by_another_task(&pool).await;

    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move {
            let result = pool
                .run(|| Ok::<_, std::fmt::Error>(7), Admission::Wait)
                .await;
            done_tx.send(result).unwrap();
        }
    });
    // In line: the pool says so, no timer needed.
    while pool.stats().waiting == 0 {
        tokio::task::yield_now().await;
    }
    assert!(
        done.try_recv().is_err(),
        "the other task is waiting in line, neither refused nor admitted, while the slot is held"
    );
    assert_eq!(pool.stats().refused, 0);

    release.send(()).unwrap();
    let result = tokio::time::timeout(BOUND, done.recv())
        .await
        .expect("admitted once the slot freed")
        .expect("the waiter reported");
    assert_eq!(result, Ok(7));
    holder.await.unwrap();
    waiter.await.unwrap();
    assert_eq!(pool.stats().refused, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_task_holding_some_but_not_every_slot_waits_for_the_others() {
    let pool = Pool::new("reentrant-some", 2).unwrap();
    let (release, other) = held_by_another_task(&pool).await;

    let task_pool = pool.clone();
    let (waited, second) = in_task(async move {
        let pool = task_pool;
        let mine = pool.try_admit().unwrap();
        let mut wait = Box::pin(pool.admit());
        assert!(
            poll_once(&mut wait).is_pending(),
            "the other task's slot can free: this task waits"
        );
        release.send(()).unwrap();
        let waited = tokio::time::timeout(BOUND, wait).await.expect("admitted");
        // Now it holds both: a third wait could never end.
        let second = at_once(pool.admit()).await.map(drop).map_err(|r| r.code());
        drop(mine);
        (waited.is_ok(), second)
    })
    .await;
    other.await.unwrap();
    assert!(waited);
    assert_eq!(second, Err(Code::Reentrant));
    assert_eq!((pool.stats().reentrant, pool.stats().refused), (1, 0));
}

/// The body of `block_on` (that of `#[tokio::main]` and `#[tokio::test]`)
/// is not a tokio task: there the thread is the holder, so the same wait is
/// refused there too (before that, it hung: `tokio::task::try_id()` is
/// `None` there and nothing was recorded).
#[tokio::test(flavor = "current_thread")]
async fn the_body_of_block_on_holding_the_only_slot_is_refused_too() {
    let pool = Pool::new("reentrant-block-on", 1).unwrap();
    let _slot = pool.try_admit().unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(2), pool.admit()).await;
    assert_eq!(
        waited.map(|admitted| admitted.map(drop).map_err(|r| r.code())),
        Ok(Err(Code::Reentrant)),
        "refused at once, not left waiting (Err(Elapsed) means it hung)"
    );
}

/// Outside any task (the body of `block_on`, `#[tokio::main]`'s), each
/// thread is its own holder: a thread waiting for the slot another thread
/// holds waits and is admitted when it frees, and is not refused as if it
/// held the slot itself. (Seen failing, refused at once, when every thread
/// was named alike.)
#[test]
fn a_thread_outside_any_task_waits_for_the_slot_another_thread_holds() {
    let pool = Pool::new("reentrant-threads", 1).unwrap();
    let (holding_tx, holding) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn({
        let pool = pool.clone();
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let slot = pool.admit().await.expect("an idle pool admits");
                holding_tx.send(()).unwrap();
                released.recv().unwrap();
                drop(slot);
            });
        }
    });
    holding
        .recv_timeout(BOUND)
        .expect("the other thread holds the slot");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let admitted = runtime.block_on(async {
        let mut admit = Box::pin(pool.admit());
        assert!(
            poll_once(&mut admit).is_pending(),
            "another thread's slot: this thread waits"
        );
        release.send(()).unwrap();
        tokio::time::timeout(BOUND, admit)
            .await
            .expect("admitted when the other thread let go")
            .map(drop)
            .map_err(|r| r.code())
    });
    holder.join().unwrap();
    assert_eq!(admitted, Ok(()));
    assert_eq!(pool.stats().refused, 0);
}

/// Holders are tasks (or threads), not futures, so two branches of one
/// task (`tokio::join!`, `select!`, `for_each_concurrent`) are one holder.
/// A branch that holds a raw slot across an `.await` that only its waiting
/// sibling could end is a real deadlock: the sibling gets
/// `ADMISSION_REENTRANT` when the grace ends, never a hang. (Seen failing,
/// the bound expiring, with the check at the grace's end made `false`.)
#[tokio::test(flavor = "current_thread")]
async fn a_raw_slot_held_across_an_await_by_one_branch_refuses_a_waiting_branch() {
    let pool = Pool::new("reentrant-join", 1).unwrap();
    let task_pool = pool.clone();
    let waited = in_task(async move {
        let pool = task_pool;
        let (holding_tx, holding) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
        let holder = async {
            let slot = pool.admit().await.unwrap();
            holding_tx.send(()).unwrap();
            let _ = done.await;
            drop(slot);
        };
        let waiter = async {
            holding.await.unwrap();
            let waited = tokio::time::timeout(BOUND, pool.admit())
                .await
                .expect("refused at once, never a hang")
                .map(drop)
                .map_err(|r| r.code());
            done_tx.send(()).unwrap();
            waited
        };
        tokio::join!(holder, waiter).1
    })
    .await;
    assert_eq!(waited, Err(Code::Reentrant));
}

/// The supported way to bound concurrent blocking calls inside one task:
/// `Pool::run` moves each slot into its work at once, so branches of one
/// task that wait on a full pool are admitted as the work ends.
#[tokio::test(flavor = "current_thread")]
async fn branches_of_one_task_waiting_through_run_are_admitted_in_turn() {
    let pool = Pool::new("reentrant-run-join", 1).unwrap();
    let task_pool = pool.clone();
    let outcomes = in_task(async move {
        let pool = task_pool;
        let (release, held) = std::sync::mpsc::channel::<()>();
        let first = pool.run(
            move || held.recv().map_err(|_| std::fmt::Error),
            Admission::Wait,
        );
        let second = pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::Wait);
        let third = async {
            tokio::task::yield_now().await;
            release.send(()).unwrap();
        };
        let (a, b, ()) = tokio::time::timeout(BOUND, async { tokio::join!(first, second, third) })
            .await
            .expect("every branch ends");
        (a, b)
    })
    .await;
    assert_eq!(outcomes, (Ok(()), Ok(())));
    assert_eq!(pool.stats().refused, 0);
}

/// A branch of one task whose sibling holds the only slot across an
/// `.await` and lets go of it while the branch waits is admitted, not
/// refused: the wait would have succeeded. (Seen failing, `waited` was
/// `Err(Reentrant)` and no one in line, when a task holding every slot was
/// refused at once, without a grace, as before.)
#[tokio::test(flavor = "current_thread")]
async fn a_branch_whose_sibling_lets_go_within_the_grace_is_admitted() {
    let pool = Pool::new("reentrant-join-lets-go", 1).unwrap();
    let task_pool = pool.clone();
    let (waited, waiting_seen) = in_task(async move {
        let pool = task_pool;
        let (holding_tx, holding) = tokio::sync::oneshot::channel::<()>();
        let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
        let holder = async {
            let slot = pool.admit().await.unwrap();
            holding_tx.send(()).unwrap();
            go.await.unwrap();
            drop(slot);
        };
        let answered = AtomicBool::new(false);
        let waiter = async {
            holding.await.unwrap();
            let waited = tokio::time::timeout(BOUND, pool.admit())
                .await
                .expect("admitted, never a hang")
                .map(drop)
                .map_err(|r| r.code());
            answered.store(true, Ordering::SeqCst);
            waited
        };
        // Lets the holder go once the waiter is in line (a third branch,
        // so the holder's await does not depend on the waiter), or once
        // the waiter was answered without waiting.
        let releaser = async {
            while pool.stats().waiting == 0 && !answered.load(Ordering::SeqCst) {
                tokio::task::yield_now().await;
            }
            let waiting_seen = pool.stats().waiting;
            go_tx.send(()).unwrap();
            waiting_seen
        };
        let ((), waited, waiting_seen) = tokio::join!(holder, waiter, releaser);
        (waited, waiting_seen)
    })
    .await;
    assert_eq!(waiting_seen, 1, "the waiting branch was in line");
    assert_eq!(waited, Ok(()), "admitted when its sibling let go");
    let stats = pool.stats();
    assert_eq!((stats.reentrant, stats.refused), (0, 0));
    assert_eq!((stats.admitted, stats.released, stats.in_use), (2, 2, 0));
}

/// A reentrant wait is a programming error: logged at ERROR with the pool
/// and the code (no user value), once per call site however often that
/// site repeats it, and once more for another call site.
#[tokio::test(flavor = "current_thread")]
async fn a_reentrant_wait_is_logged_at_error_once_per_call_site() {
    let pool = Pool::new("reentrant-logged", 1).unwrap();
    support::events();
    let task_pool = pool.clone();
    let codes = in_task(async move {
        let pool = task_pool;
        let _slot = pool.try_admit().unwrap();
        let mut codes = Vec::new();
        for _ in 0..3 {
            // One call site, three times.
            codes.push(pool.admit().await.map(drop).map_err(|r| r.code()));
        }
        // Another call site.
        let other = pool.admit_with(Admission::Queue).await;
        codes.push(other.map(drop).map_err(|r| r.code()));
        codes
    })
    .await;
    assert_eq!(codes, [Err(Code::Reentrant); 4]);
    let errors: Vec<_> = support::events_for("reentrant-logged")
        .into_iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .collect();
    assert_eq!(errors.len(), 2, "one per call site: {errors:?}");
    for event in &errors {
        assert_eq!(event.field("code"), Some("ADMISSION_REENTRANT"));
        assert!(
            event
                .field("location")
                .is_some_and(|at| at.contains("reentrancy.rs")),
            "names the caller's call site: {event:?}"
        );
    }
    assert_ne!(errors[0].field("location"), errors[1].field("location"));
    let stats = pool.stats();
    assert_eq!((stats.reentrant, stats.refused), (4, 0));
}

/// A slot handed over from its releaser to a waiting task (the waiter
/// never took it from the pool itself: it came with its number, through
/// the line) counts as the waiter's: once that task holds every slot this
/// way, its next wait is refused as reentrant, not left to hang, and the
/// releaser is no longer named for it. (Seen failing, the bound expiring,
/// when a slot admitted through the line was not recorded for its new
/// holder: `Pool::admit_with` building the slot with `Slot::new` instead
/// of `Pool::held`.)
#[tokio::test(flavor = "current_thread")]
async fn a_slot_handed_over_through_the_line_is_the_waiters_own() {
    let pool = Pool::new("reentrant-handoff", 1).unwrap();
    let (release, holder) = held_by_another_task(&pool).await;

    let task_pool = pool.clone();
    let (in_line, again) = in_task(async move {
        let pool = task_pool;
        let mut wait = Box::pin(pool.admit());
        assert!(
            poll_once(&mut wait).is_pending(),
            "another task holds the slot: this one waits in line"
        );
        let in_line = pool.stats().waiting;
        release.send(()).unwrap();
        let slot = tokio::time::timeout(BOUND, wait)
            .await
            .expect("handed the slot when the holder let go")
            .expect("admitted");
        let again = at_once(pool.admit()).await.map(drop).map_err(|r| r.code());
        drop(slot);
        (in_line, again)
    })
    .await;
    holder.await.unwrap();
    assert_eq!(in_line, 1, "the slot went through the line");
    assert_eq!(again, Err(Code::Reentrant));
    let stats = pool.stats();
    assert_eq!((stats.reentrant, stats.refused, stats.in_use), (1, 0, 0));
}

/// `Admission::Wait` in a request path (under a request's lease, no
/// deadline) is logged at WARN, once per call site: a client would wait as
/// long as the pool stays full. A loop's wait (outside any request) is
/// not. The wait itself is served as ever.
#[tokio::test(flavor = "current_thread")]
async fn an_unbounded_wait_in_a_request_is_logged_once_per_call_site() {
    let pool = Pool::new("unbounded-in-request", 1).unwrap();
    let requests = RequestPools::new(2, 2).unwrap();
    support::events();
    for _ in 0..2 {
        let lease = requests.try_lease(Class::Work).unwrap();
        let waiting = pool.clone();
        let waited = wait_behind_another_task(&pool, async move {
            lease
                .scope(async move { waiting.admit_with(Admission::Wait).await.map(drop) })
                .await
        });
        assert!(waited.await.is_ok(), "served once the slot is free");
    }
    // A loop's wait, outside any request: not logged.
    let waiting = pool.clone();
    let looped = wait_behind_another_task(&pool, async move {
        waiting.admit_with(Admission::Wait).await.map(drop)
    });
    assert!(looped.await.is_ok());
    let warned: Vec<_> = support::events_for("unbounded-in-request")
        .into_iter()
        .filter(|e| e.level == tracing::Level::WARN)
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "once, for the request's call site: {warned:?}"
    );
    assert!(
        warned[0]
            .field("location")
            .is_some_and(|at| at.contains("reentrancy.rs")),
        "names the call site: {warned:?}"
    );
}

/// Runs `wait` on a task of its own while another task holds `pool`'s only
/// slot, and lets the slot go once `wait` is waiting; `wait`'s result.
async fn wait_behind_another_task<T: Send + 'static>(
    pool: &Pool,
    wait: impl Future<Output = T> + Send + 'static,
) -> T {
    let slot = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.try_admit().unwrap() })
            .await
            .unwrap()
    };
    let waiter = tokio::spawn(wait);
    // On this current-thread runtime, the waiter runs until it waits.
    tokio::task::yield_now().await;
    assert_eq!(pool.stats().waiting, 1, "the waiter waits");
    drop(slot);
    waiter.await.unwrap()
}
