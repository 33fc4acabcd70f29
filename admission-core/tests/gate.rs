//! The gate's books and its line, against a model: random sequences of
//! fail-fast admissions, releases, waiters joining, polled and dropped
//! (among them waiters dropped after a released slot was handed to them,
//! before they saw it), and reentrant waits. After every step the pool's
//! counters equal what the callers actually got: `admitted` the slots
//! returned to callers, `released` the slots they gave back, `refused` the
//! refusals they were given, `reentrant` the reentrant refusals, `in_use`
//! the slots held plus those handed to a waiter not yet polled, `waiting`
//! the waiters still in line; and `admitted == released + in_use` but for
//! the slots handed to waiters not yet polled (in use, not yet admitted).
//!
//! Also: a waiter's waker may call straight back into the pool (it is woken
//! after the line's lock is released, or this test would deadlock).

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use admission_core::pool::Slot;
use admission_core::{Code, Pool, Refusal};
use proptest::prelude::*;

type Admit = Pin<Box<dyn Future<Output = Result<Slot, Refusal>> + Send>>;

#[derive(Debug, Clone)]
enum Op {
    /// A fail-fast admission, made on another thread (so the slot is that
    /// thread's, not the waiters').
    TryAdmit,
    Release(usize),
    /// A waiting admission made and polled once on this thread.
    Wait,
    Poll(usize),
    DropWaiter(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::TryAdmit),
        3 => (0..6_usize).prop_map(Op::Release),
        3 => Just(Op::Wait),
        2 => (0..6_usize).prop_map(Op::Poll),
        2 => (0..6_usize).prop_map(Op::DropWaiter),
    ]
}

/// A thread that takes slots for the test, so that they are not held by
/// the test's own thread.
struct Taker {
    ask: mpsc::Sender<Pool>,
    answer: mpsc::Receiver<Result<Slot, Refusal>>,
}

impl Taker {
    fn new() -> Taker {
        let (ask, asked) = mpsc::channel::<Pool>();
        let (answered, answer) = mpsc::channel();
        std::thread::spawn(move || {
            for pool in asked {
                if answered.send(pool.try_admit()).is_err() {
                    return;
                }
            }
        });
        Taker { ask, answer }
    }

    fn try_admit(&self, pool: &Pool) -> Result<Slot, Refusal> {
        self.ask.send(pool.clone()).unwrap();
        self.answer
            .recv_timeout(Duration::from_secs(10))
            .expect("the taker answers")
    }
}

struct Waiter {
    future: Admit,
    /// Handed a slot by a release, not yet polled.
    granted: bool,
}

/// What the callers got, and what is where.
#[derive(Default)]
struct Books {
    admitted: u64,
    released: u64,
    refused: u64,
    reentrant: u64,
    /// Slots held and who took them (`true`: this thread).
    held: Vec<(Slot, bool)>,
    waiters: Vec<Waiter>,
}

impl Books {
    fn granted(&self) -> usize {
        self.waiters.iter().filter(|w| w.granted).count()
    }

    fn in_line(&self) -> usize {
        self.waiters.len() - self.granted()
    }

    fn mine(&self) -> usize {
        self.held.iter().filter(|(_, mine)| *mine).count()
    }

    /// A slot was given back while waiters may be in line: the oldest one
    /// still in line gets it.
    fn hand_over(&mut self) {
        if let Some(next) = self.waiters.iter_mut().find(|w| !w.granted) {
            next.granted = true;
        }
    }
}

fn poll(future: &mut Admit) -> Poll<Result<Slot, Refusal>> {
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

fn check(pool: &Pool, books: &Books, step: usize) -> Result<(), TestCaseError> {
    let stats = pool.stats();
    let in_use = books.held.len() + books.granted();
    prop_assert!(stats.in_use <= pool.capacity(), "step {step}: {stats:?}");
    prop_assert_eq!(stats.in_use, in_use, "step {}: in use", step);
    prop_assert_eq!(stats.waiting, books.in_line(), "step {}: waiting", step);
    prop_assert_eq!(stats.admitted, books.admitted, "step {}: admitted", step);
    prop_assert_eq!(stats.released, books.released, "step {}: released", step);
    prop_assert_eq!(stats.refused, books.refused, "step {}: refused", step);
    prop_assert_eq!(stats.reentrant, books.reentrant, "step {}: reentrant", step);
    // A slot handed to a waiter not yet polled is in use, not yet admitted.
    prop_assert_eq!(
        stats.admitted + books.granted() as u64,
        stats.released + stats.in_use as u64
    );
    Ok(())
}

fn run(capacity: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let pool = Pool::new("gate-books", capacity).unwrap();
    let taker = Taker::new();
    let mut books = Books::default();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::TryAdmit => {
                let free = books.held.len() + books.granted() < capacity;
                match taker.try_admit(&pool) {
                    Ok(slot) => {
                        prop_assert!(free, "step {step}: admitted beyond capacity");
                        books.admitted += 1;
                        books.held.push((slot, false));
                    }
                    Err(refusal) => {
                        prop_assert!(!free, "step {step}: refused with a slot free");
                        prop_assert_eq!(refusal.code(), Code::Saturated);
                        prop_assert!(refusal.is_overload());
                        books.refused += 1;
                    }
                }
            }
            Op::Release(i) if !books.held.is_empty() => {
                let (slot, _) = books.held.remove(i % books.held.len());
                drop(slot);
                books.released += 1;
                books.hand_over();
            }
            Op::Release(_) => {}
            Op::Wait => {
                let free = books.held.len() + books.granted() < capacity;
                let reentrant = books.mine() == capacity;
                let mut future: Admit = Box::pin({
                    let pool = pool.clone();
                    async move { pool.admit().await }
                });
                match poll(&mut future) {
                    Poll::Ready(Ok(slot)) => {
                        prop_assert!(free, "step {step}: a waiter jumped the line");
                        books.admitted += 1;
                        books.held.push((slot, true));
                    }
                    Poll::Ready(Err(refusal)) => {
                        // Outside a runtime a reentrant wait is refused at
                        // once.
                        prop_assert!(reentrant, "step {step}: refused {refusal:?}");
                        prop_assert_eq!(refusal.code(), Code::Reentrant);
                        prop_assert!(!refusal.is_overload());
                        books.reentrant += 1;
                    }
                    Poll::Pending => {
                        prop_assert!(!free && !reentrant, "step {step}: left waiting");
                        books.waiters.push(Waiter {
                            future,
                            granted: false,
                        });
                    }
                }
            }
            Op::Poll(i) if !books.waiters.is_empty() => {
                let at = i % books.waiters.len();
                let granted = books.waiters[at].granted;
                match poll(&mut books.waiters[at].future) {
                    Poll::Ready(Ok(slot)) => {
                        prop_assert!(granted, "step {step}: served out of turn");
                        books.waiters.remove(at);
                        books.admitted += 1;
                        books.held.push((slot, true));
                    }
                    Poll::Ready(Err(refusal)) => {
                        return Err(TestCaseError::fail(format!(
                            "step {step}: a waiter was refused {refusal:?}"
                        )));
                    }
                    Poll::Pending => prop_assert!(!granted, "step {step}: a grant was lost"),
                }
            }
            Op::Poll(_) => {}
            Op::DropWaiter(i) if !books.waiters.is_empty() => {
                let waiter = books.waiters.remove(i % books.waiters.len());
                let granted = waiter.granted;
                drop(waiter);
                if granted {
                    // Its slot goes on to the next in line, uncounted.
                    books.hand_over();
                }
            }
            Op::DropWaiter(_) => {}
        }
        check(&pool, &books, step)?;
    }
    // Everything goes back.
    books.waiters.clear();
    let given_back = books.held.len() as u64;
    books.held.clear();
    books.released += given_back;
    check(&pool, &books, ops.len())?;
    let stats = pool.stats();
    prop_assert_eq!(stats.in_use, 0);
    prop_assert_eq!(stats.admitted, stats.released);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_books_match_what_callers_got(
        capacity in 1..4_usize,
        ops in proptest::collection::vec(op(), 1..48),
    ) {
        run(capacity, &ops)?;
    }
}

/// A waker that polls a new waiting admission of the pool when woken: it
/// takes the line's lock, so it would deadlock if woken under it.
struct CallsBack {
    pool: Pool,
    done: mpsc::SyncSender<Poll<()>>,
}

impl Wake for CallsBack {
    fn wake(self: std::sync::Arc<Self>) {
        let mut again: Admit = Box::pin({
            let pool = self.pool.clone();
            async move { pool.admit().await }
        });
        let polled = poll(&mut again).map(drop);
        let _ = self.done.try_send(polled);
    }
}

#[test]
fn a_waiters_waker_may_call_back_into_the_pool() {
    let pool = Pool::new("gate-wakes-outside-the-lock", 1).unwrap();
    let taker = Taker::new();
    let held = taker.try_admit(&pool).unwrap();
    let (done, woken) = mpsc::sync_channel(1);
    let waker = Waker::from(std::sync::Arc::new(CallsBack {
        pool: pool.clone(),
        done,
    }));
    let mut waiter: Admit = Box::pin({
        let pool = pool.clone();
        async move { pool.admit().await }
    });
    assert!(
        waiter
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    // The release hands the slot over and wakes the waiter, whose waker
    // joins the line itself: on a thread, bounded, so a wake under the
    // lock fails the test instead of hanging it.
    let releaser = std::thread::spawn(move || drop(held));
    let called_back = woken
        .recv_timeout(Duration::from_secs(10))
        .expect("the waker ran, outside the line's lock");
    releaser.join().unwrap();
    assert!(
        called_back.is_pending(),
        "the waker's own admission waits: the slot went to the woken waiter"
    );
    match waiter
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(Ok(slot)) => drop(slot),
        other => panic!("the woken waiter holds the slot: {other:?}"),
    }
    assert_eq!(pool.stats().in_use, 0);
}
