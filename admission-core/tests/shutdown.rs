//! Issue 3: bounded shutdown with worker threads blocked forever on
//! channels the test holds, on a current-thread runtime whose heartbeat
//! must keep ticking.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use admission_core::{Class, Pool, RequestPools, Shutdown, WorkError};
use support::{Gate, poll_once};
use tokio::time::Instant;

/// A task that ticks every 5 ms and reports the largest gap it saw.
fn heartbeat() -> (tokio::task::JoinHandle<Duration>, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let handle = tokio::spawn(async move {
        let mut last = Instant::now();
        let mut largest = Duration::ZERO;
        while !flag.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let now = Instant::now();
            largest = largest.max(now - last);
            last = now;
        }
        largest
    });
    (handle, stop)
}

/// Fills `pool` with work blocked on `gate`.
fn block_all(pool: &Pool, gate: &Gate) {
    for _ in 0..pool.capacity() {
        drop(pool.try_admit().unwrap().offload(gate.work()));
    }
    gate.wait_started(pool.capacity());
}

#[tokio::test(flavor = "current_thread")]
async fn drain_returns_by_the_deadline_while_the_runtime_keeps_ticking() {
    let deadline = Duration::from_millis(300);
    let shutdown = Shutdown::new(deadline).unwrap();
    let pool = Pool::new("drain-blocked", 2).unwrap();
    shutdown.register(&pool);
    let gate = Gate::new();
    block_all(&pool, &gate);

    let (beat, stop) = heartbeat();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let started = Instant::now();
    let report = shutdown.shutdown().await;
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let largest_gap = beat.await.unwrap();

    println!("drain took {took:?}, largest heartbeat gap {largest_gap:?}");
    assert_eq!(
        (report.pools[0].drained, report.pools[0].running_at_deadline),
        (false, 2)
    );
    assert!(!report.drained(), "an abandoned pool is not drained");
    assert_eq!(report.abandoned_running(), 2);
    let shutdown = Shutdown::default();
    shutdown.register(&Pool::new("shown-in-debug", 1).unwrap());
    let shown = format!("{shutdown:?}");
    assert!(
        shown.contains(r#"pool: "shown-in-debug", hooks: 0"#),
        "{shown}"
    );
    assert!(took >= deadline, "waited for the deadline: {took:?}");
    assert!(
        took < deadline + Duration::from_millis(100),
        "returned by the deadline: {took:?}"
    );
    assert!(
        largest_gap < Duration::from_millis(50),
        "heartbeat gap {largest_gap:?}"
    );
    drop(gate);
}

#[tokio::test(flavor = "current_thread")]
async fn three_blocked_pools_cost_one_deadline_not_three() {
    let deadline = Duration::from_millis(300);
    let shutdown = Shutdown::new(deadline).unwrap();
    let gate = Gate::new();
    let pools: Vec<_> = ["sdk", "dns", "serving"]
        .into_iter()
        .map(|name| Pool::new(name, 1).unwrap())
        .collect();
    for pool in &pools {
        shutdown.register(pool);
        block_all(pool, &gate);
    }
    let started = Instant::now();
    let report = shutdown.shutdown().await;
    let took = started.elapsed();
    println!("three pools drained in {took:?}");
    assert_eq!(report.pools.len(), 3);
    assert!(
        report
            .pools
            .iter()
            .all(|p| !p.drained && p.running_at_deadline == 1)
    );
    assert!(
        took < deadline + Duration::from_millis(100),
        "one deadline: {took:?}"
    );
    assert_eq!(report.abandoned_running(), 3);
    drop(gate);
}

#[tokio::test(flavor = "current_thread")]
async fn shutdown_twice_even_concurrently_gives_the_same_outcome() {
    let shutdown = Shutdown::new(Duration::from_millis(200)).unwrap();
    let pool = Pool::new("twice", 1).unwrap();
    shutdown.register(&pool);
    let gate = Gate::new();
    block_all(&pool, &gate);
    let other = shutdown.clone();
    let (a, b) = tokio::join!(shutdown.shutdown(), other.shutdown());
    assert_eq!(a, b);
    let started = Instant::now();
    let c = shutdown.shutdown().await;
    assert_eq!(a, c);
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "no second wait"
    );
    drop(gate);
}

#[tokio::test(flavor = "current_thread")]
async fn cleanup_runs_after_a_drained_pool_stops_and_never_for_an_abandoned_one() {
    let shutdown = Shutdown::new(Duration::from_millis(500)).unwrap();
    let drained = Pool::new("cleanup-drained", 1).unwrap();
    let abandoned = Pool::new("cleanup-abandoned", 1).unwrap();

    let work_ended = Arc::new(AtomicBool::new(false));
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let ended = Arc::clone(&work_ended);
    let running = drained.try_admit().unwrap().offload(move || {
        started_tx.send(()).unwrap();
        held.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        ended.store(true, Ordering::SeqCst);
        Ok::<_, std::fmt::Error>(())
    });

    let saw_ended = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&saw_ended);
    let ended = Arc::clone(&work_ended);
    shutdown.on_drained(&drained, move || {
        seen.store(
            if ended.load(Ordering::SeqCst) { 1 } else { 2 },
            Ordering::SeqCst,
        );
    });
    let (abandoned_ran, ran_rx) = std::sync::mpsc::channel::<()>();
    shutdown.on_drained(&abandoned, move || abandoned_ran.send(()).unwrap());
    let gate = Gate::new();
    block_all(&abandoned, &gate);
    // The drained pool's work is running, not queued (queued work would be
    // cancelled by the shutdown).
    started.recv_timeout(Duration::from_secs(10)).unwrap();

    let stopping = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { shutdown.shutdown().await }
    });
    tokio::task::yield_now().await;
    release.send(()).unwrap();
    let report = stopping.await.unwrap();

    assert_eq!(
        running.await,
        Ok(()),
        "running work finished, not cancelled"
    );
    assert!(report.pools[0].drained);
    assert_eq!(report.pools[0].cleanups_ran, 1);
    assert_eq!(
        saw_ended.load(Ordering::SeqCst),
        1,
        "cleanup ran after the work ended"
    );
    assert_eq!(
        (report.pools[1].drained, report.pools[1].running_at_deadline),
        (false, 1)
    );
    assert_eq!(report.pools[1].cleanups_skipped, 1);
    // Even once its blocked work ends after the deadline, an abandoned
    // pool's cleanup never runs: the drain thread drops the hook unrun.
    drop(gate);
    assert_eq!(
        ran_rx.recv_timeout(Duration::from_secs(10)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected),
        "never for an abandoned pool"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_panicking_cleanup_hook_is_reported_and_the_rest_still_run() {
    let shutdown = Shutdown::new(Duration::from_secs(2)).unwrap();
    let pool = Pool::new("cleanup-panics", 1).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    shutdown.on_drained(&pool, || panic!("hook failed"));
    let flag = Arc::clone(&ran);
    shutdown.on_drained(&pool, move || flag.store(true, Ordering::SeqCst));
    let report = shutdown.shutdown().await;
    assert_eq!(report.pools[0].cleanups_panicked, 1);
    assert_eq!(report.pools[0].cleanups_ran, 1);
    assert!(ran.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "current_thread")]
async fn a_deadline_already_past_is_an_immediate_outcome() {
    let shutdown = Shutdown::default();
    let pool = Pool::new("past-deadline", 1).unwrap();
    shutdown.register(&pool);
    let gate = Gate::new();
    block_all(&pool, &gate);
    let started = Instant::now();
    let report = shutdown
        .shutdown_by(Instant::now() - Duration::from_secs(1))
        .await;
    assert!(started.elapsed() < Duration::from_millis(100));
    assert!(report.deadline_already_passed);
    assert_eq!(
        (report.pools[0].drained, report.pools[0].running_at_deadline),
        (false, 1)
    );
    drop(gate);
}

#[tokio::test(flavor = "current_thread")]
async fn queued_work_is_cancelled_and_new_admissions_are_refused() {
    let shutdown = Shutdown::new(Duration::from_millis(300)).unwrap();
    let requests = RequestPools::new(1, 1).unwrap();
    shutdown.register(&requests);
    let gate = Gate::new();
    let lease = requests.try_lease(Class::Work).unwrap();
    // Two calls under one lease: the second queues behind the first. Each
    // is submitted to the pool's threads on its first poll.
    let mut first = Box::pin(
        lease
            .clone()
            .scope(requests.execute_pure(Class::Work, gate.work())),
    );
    assert!(poll_once(&mut first).is_pending());
    gate.wait_started(1);
    let mut queued = Box::pin(
        lease
            .clone()
            .scope(requests.execute_pure(Class::Work, gate.work())),
    );
    assert!(poll_once(&mut queued).is_pending());
    drop(lease);

    let report = shutdown.shutdown().await;
    let work = report.pools.iter().find(|p| p.pool == "work").unwrap();
    assert_eq!(work.cancelled, 1);
    assert_eq!(queued.await, Err(WorkError::Cancelled));
    let refusal = requests.try_lease(Class::Control).unwrap_err();
    assert_eq!(refusal.code(), admission_core::Code::ShuttingDown);
    gate.open(1);
    assert_eq!(first.await, Ok("walked"));
}

#[tokio::test(flavor = "current_thread")]
async fn lifespan_loops_are_told_to_stop_and_stragglers_are_aborted() {
    let shutdown = Shutdown::new(Duration::from_millis(200)).unwrap();
    shutdown.spawn_lifespan(|stop| async move { stop.cancelled().await });
    shutdown.spawn_lifespan(|_stop| std::future::pending());
    let report = shutdown.shutdown().await;
    assert_eq!((report.loops_stopped, report.loops_aborted), (1, 1));
}

/// A straggling lifespan loop and a blocked pool share the one deadline:
/// the loops are waited for and the pools drained against the same absolute
/// time, never one deadline after the other.
#[tokio::test(flavor = "current_thread")]
async fn a_straggling_loop_and_a_blocked_pool_cost_one_deadline_not_two() {
    let deadline = Duration::from_millis(400);
    let shutdown = Shutdown::new(deadline).unwrap();
    let pool = Pool::new("straggler-and-blocked", 1).unwrap();
    shutdown.register(&pool);
    let gate = Gate::new();
    block_all(&pool, &gate);
    shutdown.spawn_lifespan(|_stop| std::future::pending());

    let started = Instant::now();
    let report = shutdown.shutdown().await;
    let took = started.elapsed();
    assert_eq!(report.loops_aborted, 1);
    assert_eq!(
        (report.pools[0].drained, report.pools[0].running_at_deadline),
        (false, 1)
    );
    assert!(
        took < deadline + deadline / 2,
        "one deadline for loops and pools together, took {took:?}"
    );
    drop(gate);
}

#[tokio::test(flavor = "current_thread")]
async fn the_stop_token_is_cancelled_when_shutdown_begins_and_the_deadline_is_kept() {
    let deadline = Duration::from_millis(750);
    let shutdown = Shutdown::new(deadline).unwrap();
    assert_eq!(shutdown.deadline(), deadline);
    let stop = shutdown.stop_token();
    assert!(!stop.is_cancelled());
    shutdown.shutdown().await;
    assert!(
        stop.is_cancelled(),
        "the token handed out before is the one cancelled"
    );
}
