//! (m) Fair order in the line, a release racing two flows' waiters: a
//! heavy flow holds both slots of a pool and has a waiter in line ahead of
//! a light flow's waiter (holding nothing); the heavy flow lets go of one
//! slot while both waiters poll. Whatever the interleaving, the light
//! waiter is served first (the heavy one only once the light one lets go),
//! no waiter's wake-up is lost, and every slot and every flow's count comes
//! back: seen failing against a line that serves flows in the order they
//! joined (`first_served` returning the first waiter in line; the heavy
//! waiter is then served first).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};

use crate::Caller;
use crate::Pool;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[test]
fn a_release_serves_the_flow_holding_least_first() {
    loom::model(|| {
        let pool = Pool::new("loom-fair", 2).unwrap();
        let heavy = Caller::default().with_flow("heavy");
        let light = Caller::default().with_flow("light");
        // Taken on another thread, so that this one holds no slot and its
        // waits are not seen as reentrant.
        let mut held = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                (0..2)
                    .map(|_| heavy.scope_sync(|| pool.try_admit()).unwrap())
                    .collect::<Vec<_>>()
            }
        })
        .join()
        .unwrap();
        let waiter = |caller: Caller| {
            let pool = pool.clone();
            Box::pin(caller.scope(async move { pool.admit().await }))
        };
        let (mut first, mut second) = (waiter(heavy), waiter(light));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            first.as_mut().poll(&mut cx).is_pending(),
            "the pool is full"
        );
        assert!(
            second.as_mut().poll(&mut cx).is_pending(),
            "the pool is full"
        );

        let order = Arc::new(AtomicUsize::new(0));
        let heavy_waiter = served_at(first, Arc::clone(&order));
        let light_waiter = served_at(second, Arc::clone(&order));
        let one = held.pop().unwrap();
        drop(one);
        let (heavy_at, light_at) = (heavy_waiter.join().unwrap(), light_waiter.join().unwrap());
        assert_eq!(
            (light_at, heavy_at),
            (0, 1),
            "the light flow, holding nothing, is served before the heavy flow's earlier waiter"
        );
        drop(held);
        assert_eq!(pool.stats().in_use, 0, "every slot is back");
        let flows = pool.flow_table().expect("flows asked");
        assert_eq!(flows.held_total(), (0, 0), "every flow's count is back");
    });
}

/// Waits on `future` in a thread of its own; once served, takes a number
/// from `order` (the order callers were served in) and lets go.
fn served_at<F>(future: Pin<Box<F>>, order: Arc<AtomicUsize>) -> loom::thread::JoinHandle<usize>
where
    F: Future<Output = Result<crate::pool::Slot, crate::Refusal>> + Send + 'static,
{
    loom::thread::spawn(move || {
        let slot = loom::future::block_on(future).expect("served");
        let at = order.fetch_add(1, SeqCst);
        drop(slot);
        at
    })
}
