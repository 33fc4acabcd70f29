//! Which tasks hold a pool's slots, so that a task never waits forever for
//! a slot that only its own slots could free.
//!
//! This module owns the holder table: one entry per slot, each naming who
//! took that slot (the tokio task, or the thread when the caller runs
//! outside any task, as `#[tokio::main]`'s body and `block_on` do), or
//! free, and the identities it names them by. It must never decide an
//! admission: it only answers "does the current task (or thread) hold every
//! slot here?".
//!
//! A slot is recorded only while the task that took it may still hold it: a
//! slot moved into work on a worker thread has no holder, since its work
//! will end and free it. A slot moved into another task still names the
//! task that took it until it is offloaded or dropped.
//!
//! Each entry is written only by the slot at its index: the permits hand
//! every slot taken a number no other slot in use has
//! ([`SlotId`]), so recording and clearing a holder are plain stores, with
//! no compare-and-swap on the admission path. The cost that remains is
//! naming the caller (a task-local read or two).
//!
//! Identities are our own numbers, never another crate's bits read through
//! a hasher of ours: a thread is numbered from a counter the first time it
//! takes a slot; a task is named by [`std::hash::DefaultHasher`] over its
//! tokio [`Id`](tokio::task::Id), cached per thread and compared with `==`
//! on the id itself, so the same task is named alike on every thread (by
//! `Hash`'s contract: equal ids hash alike) and two tasks alike only by a
//! 64-bit collision. A collision could only refuse a wait as reentrant
//! that another task's slot would have ended; never leave a wait to hang.

use std::hash::{Hash, Hasher};

use super::permits::SlotId;
use crate::loom::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// A free entry: no task holds the slot.
const FREE: u64 = 0;

/// Marks a thread's identity, so a task's and a thread's never meet.
const THREAD_BIT: u64 = 1 << 63;

/// One entry per slot of the pool, each on a cache line of its own, so that
/// threads admitting at once do not bounce one line between them.
#[derive(Debug)]
pub(crate) struct Holders {
    entries: Box<[Padded]>,
}

#[derive(Debug)]
#[repr(align(64))]
struct Padded(AtomicU64, AtomicU32);

impl Holders {
    pub(crate) fn new(capacity: usize) -> Holders {
        Holders {
            entries: (0..capacity)
                .map(|_| Padded(AtomicU64::new(FREE), AtomicU32::new(1)))
                .collect(),
        }
    }

    /// Records that the caller holds slot `id`. Only the slot's owner
    /// writes its entry, and the caller only ever needs to see its own
    /// records, so a relaxed store suffices.
    #[inline]
    pub(crate) fn record(&self, id: SlotId) {
        if let Some(entry) = self.entries.get(id.index()) {
            entry.0.store(current_holder(), Relaxed);
        }
    }

    /// No task holds slot `id` any more (it moved into work, or returns).
    #[inline]
    pub(crate) fn clear(&self, id: SlotId) {
        if let Some(entry) = self.entries.get(id.index()) {
            entry.0.store(FREE, Relaxed);
        }
    }

    /// How many slots the table says the current task (or thread) holds,
    /// and how many it says anyone holds (for the models).
    #[cfg(all(test, loom))]
    pub(crate) fn held(&self) -> (usize, usize) {
        let holder = current_holder();
        let named = |who: &dyn Fn(u64) -> bool| {
            self.entries
                .iter()
                .filter(|e| who(e.0.load(Relaxed)))
                .count()
        };
        (named(&|h| h == holder), named(&|h| h != FREE))
    }

    /// Records how many slots the admission numbered `id` holds (its
    /// cost; a bare number: 1). Written only for admissions of a cost above
    /// one and as they return, off the path of the others.
    pub(crate) fn set_cost(&self, id: SlotId) {
        if id.is_overdraft() {
            return;
        }
        if let Some(entry) = self.entries.get(id.index()) {
            entry.1.store(id.cost(), Relaxed);
        }
    }

    /// Whether a wait of the current task (or thread) for `cost` slots
    /// could only be satisfied by slots it holds itself: it holds more
    /// than the capacity less `cost` (with a cost of 1: every slot).
    pub(crate) fn current_task_blocks(&self, cost: u32) -> bool {
        let holder = current_holder();
        let mine: usize = self
            .entries
            .iter()
            .filter(|e| e.0.load(Relaxed) == holder)
            .map(|e| e.1.load(Relaxed).max(1) as usize)
            .sum();
        mine + cost as usize > self.entries.len()
    }
}

/// Who is running: the current tokio task, or, outside any task, the
/// current thread. Never [`FREE`].
#[inline]
fn current_holder() -> u64 {
    match tokio::task::try_id() {
        Some(id) => task_holder(id),
        None => thread_holder(),
    }
}

#[cfg(not(loom))]
thread_local! {
    /// The last task seen on this thread and its identity: a task takes and
    /// returns its slots on one thread between two polls, so one `==` on
    /// the id finds it again.
    static LAST_TASK: std::cell::Cell<Option<(tokio::task::Id, u64)>> =
        const { std::cell::Cell::new(None) };
    /// This thread's identity once numbered, `FREE` before.
    static THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(FREE) };
}

#[cfg(loom)]
loom::thread_local! {
    static LAST_TASK: std::cell::Cell<Option<(tokio::task::Id, u64)>> =
        std::cell::Cell::new(None);
}

/// The identity of the task `id`.
#[inline]
fn task_holder(id: tokio::task::Id) -> u64 {
    LAST_TASK.with(|last| match last.get() {
        Some((seen, holder)) if seen == id => holder,
        _ => {
            let mut hasher = std::hash::DefaultHasher::new();
            id.hash(&mut hasher);
            let holder = (hasher.finish() & !THREAD_BIT).max(1);
            last.set(Some((id, holder)));
            holder
        }
    })
}

/// The identity of the current thread: numbered from a process-wide
/// counter the first time it is asked for.
#[cfg(not(loom))]
#[inline]
fn thread_holder() -> u64 {
    // Not a loom atomic: it only hands out distinct numbers, it orders
    // nothing.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    THREAD.with(|thread| match thread.get() {
        FREE => {
            let holder = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) | THREAD_BIT;
            thread.set(holder);
            holder
        }
        holder => holder,
    })
}

/// Under loom every modelled thread shares one OS thread, and a model must
/// run alike in every execution: name loom's thread by its id, which loom
/// numbers afresh in each.
#[cfg(loom)]
fn thread_holder() -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    format!("{:?}", crate::loom::thread::current().id()).hash(&mut hasher);
    hasher.finish() | THREAD_BIT
}
