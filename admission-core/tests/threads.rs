//! Issue 37.1: worker threads start on demand, up to the pool's capacity,
//! and exit after the keep-alive; a pool whose slots are only held starts
//! none. The threads are counted by name from `/proc/self/task/*/comm` (the
//! kernel keeps the first 15 bytes of a name: `admission-` and five more),
//! so each test names its pools apart from every other test of this binary.

mod support;

use std::time::{Duration, Instant};

use admission_core::{Admission, Class, Pool, RequestPools};
use support::Gate;

/// The threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").expect("Linux /proc");
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end().starts_with(prefix))
        .count()
}

#[test]
fn a_class_used_only_for_leases_starts_no_thread() {
    let requests = RequestPools::new(32, 128).unwrap();
    let count = || threads_named("admission-work") + threads_named("admission-contr");
    assert_eq!(count(), 0, "idle: no thread");

    let mut leases = Vec::new();
    for _ in 0..32 {
        leases.push(requests.try_lease(Class::Work).unwrap());
    }
    for _ in 0..128 {
        leases.push(requests.try_lease(Class::Control).unwrap());
    }
    assert!(requests.try_lease(Class::Work).is_err(), "every slot held");
    assert_eq!(count(), 0, "every slot leased: still no thread");
    drop(leases);
    assert_eq!(count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offloading_starts_at_most_capacity_threads() {
    let pool = Pool::new("offl4", 4).unwrap();
    let count = || threads_named("admission-offl4");
    assert_eq!(count(), 0, "nothing offloaded yet");

    // Four pieces of work blocked at once need four threads.
    let gate = Gate::new();
    let held: Vec<_> = (0..4)
        .map(|_| pool.try_admit().unwrap().offload(gate.work()))
        .collect();
    gate.wait_started(4);
    assert_eq!(count(), 4);
    gate.open(4);
    for work in held {
        assert_eq!(work.await, Ok("walked"));
    }

    // Sixteen callers racing for the four slots, each as soon as its last
    // work ended: never a fifth thread.
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    let ran = pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::Wait);
                    ran.await.unwrap();
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    assert!((1..=4).contains(&count()), "{} threads", count());
}

#[tokio::test(flavor = "current_thread")]
async fn idle_threads_exit_after_the_keep_alive_and_start_again() {
    let pool = Pool::builder("keepa")
        .capacity(3)
        .keep_alive(Duration::from_millis(100))
        .build()
        .unwrap();
    let count = || threads_named("admission-keepa");

    let gate = Gate::new();
    let held: Vec<_> = (0..3)
        .map(|_| pool.try_admit().unwrap().offload(gate.work()))
        .collect();
    gate.wait_started(3);
    assert_eq!(count(), 3);
    let ended = Instant::now();
    gate.open(3);
    for work in held {
        assert_eq!(work.await, Ok("walked"));
    }

    // Nothing tells a test that a thread has exited but the kernel's list:
    // read it until the threads are gone, within a generous bound.
    while count() > 0 {
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "{} threads still alive 5 s after a 100 ms keep-alive",
            count()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        ended.elapsed() >= Duration::from_millis(100),
        "not before the keep-alive"
    );

    // The next work starts a thread again.
    let ran = pool.run(|| Ok::<_, std::fmt::Error>(7), Admission::FailFast);
    assert_eq!(ran.await, Ok(7));
    assert_eq!(count(), 1);
}
