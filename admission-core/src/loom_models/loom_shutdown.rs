//! (c) Shutdown racing with work completing: the outcome is `Drained` or
//! `Abandoned` consistently with what ran, and cleanup runs at most once,
//! only for a drained pool, and only after the work ended.

use std::sync::Arc;

use crate::Pool;
use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::shutdown::Outcome;
use crate::shutdown::drain;

#[test]
fn the_deadline_racing_the_last_work_is_drained_or_abandoned_consistently() {
    loom::model(|| {
        let pool = Pool::new("loom-drain", 1).unwrap();
        let started = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        let hooks_ran = Arc::new(AtomicUsize::new(0));

        let work = pool.try_admit().unwrap().offload({
            let (started, ended) = (Arc::clone(&started), Arc::clone(&ended));
            move || {
                started.store(true, Ordering::SeqCst);
                ended.store(true, Ordering::SeqCst);
                Ok::<_, std::fmt::Error>(())
            }
        });
        drop(work);

        let hook: drain::Hook = Box::new({
            let (started, ended) = (Arc::clone(&started), Arc::clone(&ended));
            let hooks_ran = Arc::clone(&hooks_ran);
            move || {
                // Work that had not started was cancelled; work that started
                // has ended before any cleanup.
                assert!(
                    !started.load(Ordering::SeqCst) || ended.load(Ordering::SeqCst),
                    "cleanup only after the work ended"
                );
                hooks_ran.fetch_add(1, Ordering::SeqCst);
            }
        });
        let mut drain = drain::start(pool.clone(), vec![hook]);
        let (outcome, cleanup) = drain.expire();
        let sent = drain.join();

        match outcome {
            Outcome::Drained => {
                assert_eq!(cleanup.unfinished, 1, "the coordinator claimed it first");
                assert_eq!(sent.map(|c| c.ran), Some(1));
                assert_eq!(hooks_ran.load(Ordering::SeqCst), 1);
            }
            Outcome::Abandoned { running } => {
                assert!(running <= 1);
                assert_eq!(cleanup.skipped, 1);
                assert!(sent.is_none());
                assert_eq!(
                    hooks_ran.load(Ordering::SeqCst),
                    0,
                    "never for an abandoned pool"
                );
            }
        }
        assert!(pool.try_admit().is_err(), "a drained pool refuses");
    });
}
