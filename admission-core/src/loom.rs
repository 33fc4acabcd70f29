//! The synchronisation primitives the crate's own code uses, swapped for
//! loom's under `--cfg loom` so that the models in `loom_models/` explore
//! their interleavings: the worker threads' queue lock and condition
//! variable, the threads themselves, the drain's state, the pool's gate
//! (the permit word, with its closed bit and the books it keeps, the
//! waiting line and its wakers, the free list of slot numbers, and the
//! holder table) and the work times' seqlock (the running work a refusal
//! reads, and the spin of a reader that meets a writer).
//!
//! tokio's oneshot (still used for a work's result, no longer by a waiter)
//! is *not* loom-instrumented when tokio is a dependency (tokio swaps it
//! only in its own tests), so in the models it acts as an atomic black box.
//! The pool's other statistics counters (refusals, orphans, durations)
//! stay on `std` atomics: they observe the accounting, they are not part
//! of it; admissions and returns are counted in the permit word itself.
//!
//! This module only re-exports; it must never hold logic.

#[cfg(not(loom))]
pub(crate) use std::{hint, sync, thread};

#[cfg(loom)]
pub(crate) use loom::{hint, sync, thread};
