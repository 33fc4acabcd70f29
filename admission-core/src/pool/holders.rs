//! Which tasks hold a pool's slots, so that a task never waits for a slot
//! that only its own slots could free.
//!
//! This module owns the holder table: one cell per slot, each naming who
//! took that slot (the tokio task, or the thread when the caller runs
//! outside any task, as `#[tokio::main]`'s body and `block_on` do), or
//! free. It must never decide an
//! admission: it only answers "does this task hold every slot here?".
//!
//! A slot is recorded only while the task that took it may still hold it: a
//! slot taken outside any task, or moved into work on a worker thread, has
//! no cell, since its work will end and free it. A slot moved into another
//! task still names the task that took it until it is offloaded or dropped.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// A free cell.
const FREE: u64 = 0;

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
        match std::mem::replace(self.0.get_mut(), NO_CELL) {
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
        // starts where this holder's id points, so that concurrent holders
        // start on different cells.
        let n = self.cells.len();
        // The holder's id spread over 0..n without a division (a 64-bit
        // `%` alone costs more than the rest of the claim).
        let spread = holder.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let start = usize::try_from((spread * n as u64) >> 32).unwrap_or(0);
        for i in (start..n).chain(0..start) {
            let cell = &self.cells[i].0;
            if cell.load(Relaxed) == FREE
                && cell
                    .compare_exchange(FREE, holder, Relaxed, Relaxed)
                    .is_ok()
            {
                return u32::try_from(i).ok().map(Cell);
            }
        }
        None
    }

    /// Frees a cell.
    #[inline]
    pub(crate) fn clear(&self, cell: Cell) {
        if let Some(slot) = self.cells.get(cell.0 as usize) {
            slot.0.store(FREE, Relaxed);
        }
    }

    /// Whether the current task holds every slot of this pool: a wait for
    /// another could only be satisfied by a slot the waiter itself holds.
    pub(crate) fn current_task_holds_all(&self) -> bool {
        let holder = current_holder();
        self.cells.iter().all(|c| c.0.load(Relaxed) == holder)
    }
}

/// Who is running: the current tokio task's id, or, outside any task, the
/// current thread's (with the top bit set, so the two never meet). Never
/// [`FREE`].
#[inline]
fn current_holder() -> u64 {
    match tokio::task::try_id() {
        Some(id) => (id_bits(&id) & !THREAD_BIT).max(1),
        None => thread_holder(),
    }
}

/// Marks a thread's identity in a cell.
const THREAD_BIT: u64 = 1 << 63;

#[cfg(not(loom))]
thread_local! {
    /// This thread's identity once computed, `FREE` before.
    static THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(FREE) };
}

#[cfg(not(loom))]
#[inline]
fn thread_holder() -> u64 {
    THREAD.with(|thread| match thread.get() {
        FREE => {
            let id = id_bits(&std::thread::current().id()) | THREAD_BIT;
            thread.set(id);
            id
        }
        id => id,
    })
}

/// Under loom every modelled thread shares one OS thread: name loom's.
#[cfg(loom)]
fn thread_holder() -> u64 {
    let id = format!("{:?}", crate::loom::thread::current().id());
    let mut bits = IdBits(FREE);
    bits.write(id.as_bytes());
    bits.0 | THREAD_BIT
}

/// The number an id hashes as.
fn id_bits(id: &impl Hash) -> u64 {
    let mut bits = IdBits(FREE);
    id.hash(&mut bits);
    bits.finish()
}

/// Captures the number a task id hashes as (its whole value, no mixing).
struct IdBits(u64);

impl Hasher for IdBits {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
