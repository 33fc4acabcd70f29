//! Which tasks hold a pool's slots, so that a task never waits forever for
//! a slot that only its own slots could free.
//!
//! This module owns the holder table: one cell per slot, each naming who
//! took that slot (the tokio task, or the thread when the caller runs
//! outside any task, as `#[tokio::main]`'s body and `block_on` do), or
//! free, and the identities it names them by. It must never decide an
//! admission: it only answers "does the current task (or thread) hold every
//! slot here?".
//!
//! A slot is recorded only while the task that took it may still hold it: a
//! slot moved into work on a worker thread has no cell, since its work will
//! end and free it. A slot moved into another task still names the task that
//! took it until it is offloaded or dropped.
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

use crate::loom::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// A free cell.
const FREE: u64 = 0;

/// Marks a thread's identity, so a task's and a thread's never meet.
const THREAD_BIT: u64 = 1 << 63;

/// One cell per slot of the pool, each on a cache line of its own, so that
/// threads admitting at once do not bounce one line between them.
#[derive(Debug)]
pub(crate) struct Holders {
    cells: Box<[Padded]>,
}

#[derive(Debug)]
#[repr(align(64))]
struct Padded(AtomicU64);

/// The cell a slot occupies, if a task holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell(u32);

/// A slot's cell, if it has one: given up at most once, either when the
/// slot goes (`&mut`) or when its last task-side holder lets go while work
/// still holds the slot (`&`).
#[derive(Debug)]
pub(crate) struct Entry(AtomicU32);

const NO_CELL: u32 = u32::MAX;

impl Entry {
    #[inline]
    pub(crate) fn new(cell: Option<Cell>) -> Entry {
        Entry(AtomicU32::new(cell.map_or(NO_CELL, |c| c.0)))
    }

    /// Takes the cell through a shared reference.
    pub(crate) fn take_shared(&self) -> Option<Cell> {
        match self.0.swap(NO_CELL, Relaxed) {
            NO_CELL => None,
            i => Some(Cell(i)),
        }
    }

    /// Takes the cell, no atomic operation needed.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<Cell> {
        #[cfg(not(loom))]
        let was = std::mem::replace(self.0.get_mut(), NO_CELL);
        #[cfg(loom)]
        let was = self.0.with_mut(|cell| std::mem::replace(cell, NO_CELL));
        match was {
            NO_CELL => None,
            i => Some(Cell(i)),
        }
    }
}

impl Holders {
    pub(crate) fn new(capacity: usize) -> Holders {
        Holders {
            cells: (0..capacity)
                .map(|_| Padded(AtomicU64::new(FREE)))
                .collect(),
        }
    }

    /// Records that the caller holds one more slot. A free cell always
    /// exists: the gate hands out at most one slot per cell, and a slot
    /// frees its cell before its permit goes back.
    #[inline]
    pub(crate) fn claim(&self) -> Option<Cell> {
        let holder = current_holder();
        // Cells are only ever set by the holder that claims them and cleared
        // by the slot that owns them; a relaxed scan then one CAS suffices,
        // since a holder only ever needs to see its own records. The scan
        // starts where this holder's identity points, so that concurrent
        // holders start on different cells.
        let n = self.cells.len();
        // The identity spread over 0..n without a division (a 64-bit `%`
        // alone costs more than the rest of the claim).
        let spread = holder.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let start = usize::try_from((spread * n as u64) >> 32).unwrap_or(0);
        let mut i = start;
        loop {
            if let Some(cell) = self.cells.get(i) {
                let cell = &cell.0;
                if cell.load(Relaxed) == FREE
                    && cell
                        .compare_exchange(FREE, holder, Relaxed, Relaxed)
                        .is_ok()
                {
                    return u32::try_from(i).ok().map(Cell);
                }
            }
            i = if i + 1 >= n { 0 } else { i + 1 };
            if i == start {
                return None;
            }
        }
    }

    /// Frees a cell.
    #[inline]
    pub(crate) fn clear(&self, cell: Cell) {
        if let Some(slot) = self.cells.get(cell.0 as usize) {
            slot.0.store(FREE, Relaxed);
        }
    }

    /// Whether the current task (or thread) holds every slot of this pool:
    /// a wait for another could only be satisfied by a slot it holds itself.
    pub(crate) fn current_task_holds_all(&self) -> bool {
        let holder = current_holder();
        self.cells.iter().all(|c| c.0.load(Relaxed) == holder)
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
