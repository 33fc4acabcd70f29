//! (f) The work times' seqlock (`pool/estimate.rs`): a refusal reads the
//! running work (how many pieces run, and their start times) while a worker
//! records a start and an end; it must see a record that existed, never a
//! torn one (a count with a start time not yet written, or a start time
//! half shifted out). The worker and the refusal are both spawned threads,
//! so loom schedules either first. 5211 interleavings at two preemptions.
//!
//! Seen failing against two broken variants of `WorkTimes::read_running`:
//! with the second sequence check removed (whatever was read is kept), a
//! refusal saw `[10, 0]` (the count of two already stored, the second start
//! time not yet visible); with the acquire fence before that check removed,
//! it saw `[20, 20]` (the end's shift of the younger start down, read with
//! the count from before it dropped). RELIABILITY.md records the runs.

use std::sync::Arc;
use std::time::Duration;

use crate::pool::RetryHint;
use crate::pool::estimate::WorkTimes;

#[test]
fn a_refusal_never_reads_a_torn_running_work_record() {
    loom::model(|| {
        let rule = RetryHint::Observed {
            cap: Duration::from_secs(30),
        }
        .rule();
        let times = Arc::new(WorkTimes::new(rule, 2, Duration::ZERO));
        let first = times.start(10);
        let worker = loom::thread::spawn({
            let times = Arc::clone(&times);
            move || {
                let _second = times.start(20);
                times.finish(first, 30);
            }
        });
        let refusal = loom::thread::spawn({
            let times = Arc::clone(&times);
            move || {
                // Every record the worker ever leaves between its writes.
                let whole: [&[u64]; 3] = [&[10], &[10, 20], &[20]];
                if let Some(seen) = times.running_starts() {
                    assert!(
                        whole.contains(&seen.as_slice()),
                        "a refusal saw a torn running-work record: {seen:?}"
                    );
                }
            }
        });
        refusal.join().unwrap();
        worker.join().unwrap();
        assert_eq!(
            times.running_starts(),
            Some(vec![20]),
            "the younger work still runs"
        );
    });
}
