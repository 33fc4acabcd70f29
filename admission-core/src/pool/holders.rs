//! Which tasks hold a pool's slots, so that a task never waits for a slot
//! while it holds one itself.
//!
//! This module owns the holder table: one cell per slot, each naming the
//! tokio task that holds that slot, or free. It must never decide an
//! admission: it only answers "does this task hold a slot here?".
//!
//! A slot is recorded only while a task holds it: a slot taken outside any
//! task, or moved into work on a worker thread, has no cell, because no task
//! can be waiting behind it.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A free cell.
const FREE: u64 = 0;

/// One cell per slot of the pool.
#[derive(Debug)]
pub(crate) struct Holders {
    cells: Box<[AtomicU64]>,
}

/// The cell a slot occupies, if a task holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell(u32);

impl Holders {
    pub(crate) fn new(capacity: usize) -> Holders {
        Holders {
            cells: (0..capacity).map(|_| AtomicU64::new(FREE)).collect(),
        }
    }

    /// Records that the current task holds one more slot; `None` outside a
    /// task. A free cell always exists: the gate hands out at most one slot
    /// per cell, and a slot frees its cell before its permit goes back.
    #[inline]
    pub(crate) fn claim(&self) -> Option<Cell> {
        let task = current_task()?;
        // Cells are only ever set by the task that claims them and cleared
        // by the slot that owns them; a relaxed scan then one CAS suffices,
        // since a task only ever needs to see its own records.
        for (i, cell) in self.cells.iter().enumerate() {
            if cell.load(Relaxed) == FREE
                && cell.compare_exchange(FREE, task, Relaxed, Relaxed).is_ok()
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
            slot.store(FREE, Relaxed);
        }
    }

    /// Whether the current task holds a slot of this pool.
    pub(crate) fn current_task_holds(&self) -> bool {
        current_task().is_some_and(|task| self.cells.iter().any(|c| c.load(Relaxed) == task))
    }
}

/// The current tokio task's id as a non-zero number, `None` outside a task.
#[inline]
fn current_task() -> Option<u64> {
    let id = tokio::task::try_id()?;
    let mut bits = IdBits(FREE);
    id.hash(&mut bits);
    // tokio's ids are non-zero; guard anyway so a task never reads as free.
    Some(bits.0.max(1))
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
