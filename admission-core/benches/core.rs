//! Microbenchmarks of the admission hot paths, each measured beside its
//! baseline in the same run: run with `cargo bench -p admission-core --bench core`.
//!
//! Groups (ours first, then the baseline):
//! * `admit_release`: `Pool::try_admit` + drop vs `Arc<Semaphore>::try_acquire_owned` + drop;
//! * `admit_release_in_task`: the same pair inside a tokio task, where the
//!   slot's holder is the task (its id) rather than the thread;
//! * `refusal`: a failed `try_admit` (the typed refusal with its retry hint)
//!   vs tower's `LoadShed` rejecting over a saturated `ConcurrencyLimit`;
//! * `offload`: no-op work through the pool's own threads and awaited, vs
//!   `spawn_blocking` with an owned permit moved into the closure;
//! * `contended`: admit + release from two threads at once vs the raw
//!   semaphore under the same contention;
//! * `refusal_vs_pools`: a refusal with 1, 8 and 64 pools in the process;
//! * `lease_in_task`: a request lease (`RequestPools::try_lease` + drop, the
//!   class learning its hold) inside a tokio task vs the owned semaphore,
//!   and `scoped`: the lease entered as the task's scope for one call
//!   (`Lease::scope_sync_for`), as an adapter does for every request;
//! * `modes`: admit + release in enforce mode (the baseline), in shadow mode
//!   below the capacity, and with the pool recorded into a trace; and
//!   `offload` with the pool traced beside the same pool untraced;
//! * `lease_flow`: `RequestPools::try_lease_for` + drop for a caller
//!   without a flow and for one with a flow (the fair-share decision).

use std::future::Future;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use admission_core::{Admission, Caller, Class, Pool, RequestPools};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::sync::Semaphore;
use tower::{Service, ServiceBuilder};

fn admit_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("admit_release");
    let pool = Pool::new("bench", 4).unwrap();
    group.bench_function("admission", |b| {
        b.iter(|| drop(black_box(pool.try_admit().unwrap())));
    });
    let semaphore = Arc::new(Semaphore::new(4));
    group.bench_function("tokio_semaphore_owned", |b| {
        b.iter(|| {
            drop(black_box(
                Arc::clone(&semaphore).try_acquire_owned().unwrap(),
            ));
        });
    });
    group.finish();
}

/// `admit_release` inside a tokio task. A slot held by a task is recorded in
/// the pool's holder table under the task's id (`tokio::task::try_id` and
/// one plain store on admit, one on release, to the entry of the number
/// the permit's own swap gave the slot); outside any task, as in
/// `admit_release`, the holder is the thread. Each sample spawns one task on
/// a current-thread runtime that runs all `iters` iterations and times them
/// from inside, so the spawn and the `block_on` are not measured.
fn admit_release_in_task(c: &mut Criterion) {
    let mut group = c.benchmark_group("admit_release_in_task");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let pool = Pool::new("bench", 4).unwrap();
    group.bench_function("admission", |b| {
        b.iter_custom(|iters| {
            let pool = pool.clone();
            in_task(&runtime, async move {
                let started = Instant::now();
                for _ in 0..iters {
                    drop(black_box(pool.try_admit().unwrap()));
                }
                started.elapsed()
            })
        });
    });
    let semaphore = Arc::new(Semaphore::new(4));
    group.bench_function("tokio_semaphore_owned", |b| {
        b.iter_custom(|iters| {
            let semaphore = Arc::clone(&semaphore);
            in_task(&runtime, async move {
                let started = Instant::now();
                for _ in 0..iters {
                    drop(black_box(
                        Arc::clone(&semaphore).try_acquire_owned().unwrap(),
                    ));
                }
                started.elapsed()
            })
        });
    });
    group.finish();
}

/// `admit_release_in_task` for a request lease: what every request through
/// an adapter's layer pays for its lease, the class timing its hold
/// included.
fn lease_in_task(c: &mut Criterion) {
    let mut group = c.benchmark_group("lease_in_task");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let requests = RequestPools::new(4, 4).unwrap();
    group.bench_function("admission", |b| {
        b.iter_custom(|iters| {
            let requests = requests.clone();
            in_task(&runtime, async move {
                let started = Instant::now();
                for _ in 0..iters {
                    drop(black_box(requests.try_lease(Class::Control).unwrap()));
                }
                started.elapsed()
            })
        });
    });
    group.bench_function("scoped", |b| {
        b.iter_custom(|iters| {
            let requests = requests.clone();
            in_task(&runtime, async move {
                let started = Instant::now();
                for _ in 0..iters {
                    let lease = requests.try_lease(Class::Control).unwrap();
                    black_box(lease.scope_sync_for(Caller::default(), || black_box(1)));
                }
                started.elapsed()
            })
        });
    });
    let semaphore = Arc::new(Semaphore::new(4));
    group.bench_function("tokio_semaphore_owned", |b| {
        b.iter_custom(|iters| {
            let semaphore = Arc::clone(&semaphore);
            in_task(&runtime, async move {
                let started = Instant::now();
                for _ in 0..iters {
                    drop(black_box(
                        Arc::clone(&semaphore).try_acquire_owned().unwrap(),
                    ));
                }
                started.elapsed()
            })
        });
    });
    group.finish();
}

/// Runs `measure` as a spawned task (not in the body of `block_on`, which is
/// no task) and returns the time it measured.
fn in_task(
    runtime: &tokio::runtime::Runtime,
    measure: impl Future<Output = Duration> + Send + 'static,
) -> Duration {
    runtime.block_on(async {
        tokio::spawn(async move {
            assert!(
                tokio::task::try_id().is_some(),
                "the loop runs inside a tokio task"
            );
            measure.await
        })
        .await
        .unwrap()
    })
}

fn refusal(c: &mut Criterion) {
    let mut group = c.benchmark_group("refusal");
    let pool = Pool::new("bench", 1).unwrap();
    let _held = pool.try_admit().unwrap();
    group.bench_function("admission", |b| {
        b.iter(|| {
            let refusal = pool.try_admit().unwrap_err();
            black_box(refusal.retry_after_secs());
            black_box(refusal)
        });
    });

    // tower: LoadShed over ConcurrencyLimit(1) with the one permit taken.
    let mut service = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(1)
        .service_fn(|()| async { Ok::<_, std::convert::Infallible>(()) });
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let _in_flight = service.call(());
    group.bench_function("tower_load_shed", |b| {
        b.iter(|| {
            let ready = service.poll_ready(&mut cx);
            black_box(&ready);
            let rejected = service.call(());
            black_box(rejected)
        });
    });
    group.finish();
}

fn offload(c: &mut Criterion) {
    let mut group = c.benchmark_group("offload");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pool = Pool::new("bench", 2).unwrap();
    group.bench_function("admission", |b| {
        b.iter(|| {
            runtime.block_on(async {
                pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast)
                    .await
                    .unwrap();
            });
        });
    });
    let semaphore = Arc::new(Semaphore::new(2));
    group.bench_function("spawn_blocking_with_permit", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let permit = Arc::clone(&semaphore).try_acquire_owned().unwrap();
                tokio::task::spawn_blocking(move || drop(permit))
                    .await
                    .unwrap();
            });
        });
    });
    group.finish();
}

/// Runs `op` `iters` times on each of two threads started together and
/// returns the wall time.
fn two_threads(iters: u64, op: impl Fn() + Send + Sync + 'static) -> Duration {
    let op = Arc::new(op);
    let barrier = Arc::new(Barrier::new(3));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (op, barrier) = (Arc::clone(&op), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..iters {
                    op();
                }
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for thread in threads {
        thread.join().unwrap();
    }
    started.elapsed()
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended");
    let pool = Pool::new("bench", 4).unwrap();
    group.bench_function("admission", |b| {
        b.iter_custom(|iters| {
            let pool = pool.clone();
            two_threads(iters, move || drop(black_box(pool.try_admit().unwrap())))
        });
    });
    let semaphore = Arc::new(Semaphore::new(4));
    group.bench_function("tokio_semaphore_owned", |b| {
        b.iter_custom(|iters| {
            let semaphore = Arc::clone(&semaphore);
            two_threads(iters, move || {
                drop(black_box(
                    Arc::clone(&semaphore).try_acquire_owned().unwrap(),
                ));
            })
        });
    });
    group.finish();
}

/// Refusal cost as the number of pools in the process grows: every pool is
/// saturated and refusals go round-robin over them.
fn refusal_vs_pools(c: &mut Criterion) {
    let mut group = c.benchmark_group("refusal_vs_pools");
    for count in [1_usize, 8, 64] {
        let pools: Vec<Pool> = (0..count)
            .map(|i| Pool::new(format!("bench-{i}"), 1).unwrap())
            .collect();
        let _held: Vec<_> = pools.iter().map(|p| p.try_admit().unwrap()).collect();
        let mut next = 0;
        group.bench_function(format!("{count}_pools"), |b| {
            b.iter(|| {
                next = (next + 1) % count;
                black_box(pools[next].try_admit().unwrap_err())
            });
        });
    }
    group.finish();
}

/// The cost of shadow mode and of a trace, each beside the enforcing,
/// untraced pool in the same run.
fn modes(c: &mut Criterion) {
    let mut group = c.benchmark_group("modes");
    let enforcing = Pool::new("bench", 4).unwrap();
    group.bench_function("enforce", |b| {
        b.iter(|| drop(black_box(enforcing.try_admit().unwrap())));
    });
    let shadow = Pool::new("bench-shadow", 4).unwrap();
    shadow.set_shadow(true);
    group.bench_function("shadow", |b| {
        b.iter(|| drop(black_box(shadow.try_admit().unwrap())));
    });
    let traced = Pool::new("bench-traced", 4).unwrap();
    traced
        .trace_into(&admission_core::trace::Trace::new(1 << 16).unwrap())
        .unwrap();
    group.bench_function("traced", |b| {
        b.iter(|| drop(black_box(traced.try_admit().unwrap())));
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    for (name, pool) in [("offload", &enforcing), ("offload_traced", &traced)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast)
                        .await
                        .unwrap();
                });
            });
        });
    }
    group.finish();
}

/// A lease for a caller with a flow (the flow table's decision under its
/// lock, the count kept per slot) beside the same lease for a caller
/// without one, inside a tokio task; the flow is alone, so both are
/// admitted every time.
fn lease_flow(c: &mut Criterion) {
    let mut group = c.benchmark_group("lease_flow");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let requests = RequestPools::new(4, 4).unwrap();
    let callers = [
        ("no_flow", Caller::default()),
        ("with_flow", Caller::default().with_flow("tenant-1")),
    ];
    for (name, caller) in callers {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let requests = requests.clone();
                in_task(&runtime, async move {
                    let started = Instant::now();
                    for _ in 0..iters {
                        let lease = requests.try_lease_for(Class::Control, caller);
                        drop(black_box(lease.unwrap()));
                    }
                    started.elapsed()
                })
            });
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    modes,
    admit_release,
    admit_release_in_task,
    lease_in_task,
    refusal,
    offload,
    contended,
    refusal_vs_pools,
    lease_flow
);
criterion_main!(benches);
