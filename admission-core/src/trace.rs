//! A bounded trace of admissions, for choosing limits from real traffic.
//!
//! This module owns [`Trace`]: a ring of the last N admission decisions of
//! the pools recorded into it (when each was decided, its pool and
//! criticality, how long it waited and held its slot, and how it ended),
//! written out as JSON lines on demand. It must never hold anything a
//! caller sent: no header, no path, no flow key, no message; a pool's name
//! and the stable names of criticalities and codes are all the text in it.
//! Recording must never block or allocate: a writer claims an entry with
//! one atomic add and fills it under a sequence number, and a reader skips
//! an entry it saw half written.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::caller::Criticality;
use crate::error::ConfigError;
use crate::refusal::Code;

/// The most entries one trace may keep (8 bytes × 5 each: 40 MiB).
pub const MAX_ENTRIES: usize = 1 << 20;

/// A bounded trace of admissions: a ring of the last `entries` decisions of
/// every pool recorded into it ([`Pool::trace_into`](crate::Pool::trace_into),
/// [`RequestPools::trace_into`](crate::RequestPools::trace_into)), written
/// as JSON lines by [`write_json_lines`](Trace::write_json_lines).
///
/// Each line is one decision, oldest first:
///
/// ```json
/// {"at_ms":1520.250,"pool":"work","criticality":"default","outcome":"admitted","waited_ms":0.000,"held_ms":48.125}
/// {"at_ms":1521.003,"pool":"work","criticality":"sheddable","outcome":"refused","code":"ADMISSION_SATURATED","waited_ms":0.000,"held_ms":null}
/// ```
///
/// * `at_ms`: when the caller arrived (the decision, less any wait), in
///   milliseconds since the trace was made;
/// * `outcome`: `admitted`, `refused` (with its `code`), or `shadow` (a
///   pool in shadow mode served a caller it would have refused with
///   `code`; its hold is not timed);
/// * `waited_ms`: how long the caller waited for its slot (0 for
///   fail-fast); on a `shadow` line without a code (a caller that would
///   have waited), the wait it would have had, estimated as the time until
///   a slot frees;
/// * `held_ms`: how long an admitted caller held its slot (`null` for the
///   others). An admission is written when its slot is released, so a
///   slot still held is not in the trace yet;
/// * `flow`, only for a caller with a flow
///   ([`Caller::with_flow`](crate::Caller::with_flow)): the flow's keyed
///   32-bit hash, a number that tells one flow's decisions from another's
///   within a run of the process, never the key;
/// * `cost`, only for a caller of a cost above one
///   ([`Caller::with_cost`](crate::Caller::with_cost)): the slots it took
///   (or asked for), after clamping to the capacity.
///
/// Clones share one ring. Recording costs one atomic add, two clock reads
/// (at admission and at release) and a few stores per admission; pools
/// not recorded into a trace pay one load.
///
/// # Examples
///
/// ```
/// use admission_core::{Pool, trace::Trace};
///
/// let trace = Trace::new(1024)?;
/// let pool = Pool::new("walks", 1)?;
/// pool.trace_into(&trace)?;
///
/// let held = pool.try_admit()?;
/// assert!(pool.try_admit().is_err()); // refused: the one slot is held
/// drop(held);
///
/// let mut lines = Vec::new();
/// assert_eq!(trace.write_json_lines(&mut lines)?, 2);
/// let lines = String::from_utf8(lines)?;
/// assert!(lines.contains(r#""outcome":"refused","code":"ADMISSION_SATURATED""#));
/// assert!(lines.contains(r#""pool":"walks","criticality":"default","outcome":"admitted""#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Trace {
    ring: Arc<Ring>,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("entries", &self.ring.entries.len())
            .field("recorded", &self.recorded())
            .finish()
    }
}

struct Ring {
    epoch: Instant,
    /// How many entries were ever claimed; the next goes at `next % len`.
    next: AtomicU64,
    entries: Box<[Entry]>,
    /// The names of the pools recorded into this trace, by index.
    pools: Mutex<Vec<&'static str>>,
}

/// One decision. `seq` is odd while a writer fills the entry and `2n + 2`
/// once the `n`th decision is in it; 0 never written.
#[derive(Default)]
struct Entry {
    seq: AtomicU64,
    at_us: AtomicU64,
    waited_us: AtomicU64,
    /// `u64::MAX` for no hold.
    held_us: AtomicU64,
    /// The flow's hash (bits 32.., 0: none), the pool's index (18..32),
    /// the cost less one (10..18), the outcome (8..10) and the code
    /// (4..8) and criticality (0..4).
    meta: AtomicU64,
}

/// Who a traced decision was for, beyond its criticality: the flow's
/// hash (0: none) and the cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tag {
    pub(crate) flow: u32,
    pub(crate) cost: u32,
}

impl Tag {
    /// A caller's tag, its cost as admitted (clamped).
    pub(crate) fn of(caller: &crate::Caller, cost: u32) -> Tag {
        Tag {
            flow: caller.flow().map_or(0, std::num::NonZeroU32::get),
            cost,
        }
    }

    /// Packed into bits 8.. of a word: cost less one, then the flow.
    fn packed(self) -> u64 {
        (u64::from(self.cost.clamp(1, 256) - 1) << 10) | (u64::from(self.flow) << 32)
    }
}

/// How a traced decision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Admitted,
    Refused(Code),
    /// Served past the capacity in shadow mode: would have been refused
    /// with the code, or (none) would have waited.
    Shadow(Option<Code>),
}

const NO_HOLD: u64 = u64::MAX;

impl Trace {
    /// A trace that keeps the last `entries` decisions.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] for 0 entries, and
    /// [`ConfigError::TooManyEntries`] above [`MAX_ENTRIES`].
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{ConfigError, trace::Trace};
    ///
    /// assert_eq!(Trace::new(0).unwrap_err(), ConfigError::ZeroSetting { setting: "trace entries" });
    /// assert!(Trace::new(4096).is_ok());
    /// ```
    pub fn new(entries: usize) -> Result<Trace, ConfigError> {
        if entries == 0 {
            return Err(ConfigError::ZeroSetting {
                setting: "trace entries",
            });
        }
        if entries > MAX_ENTRIES {
            return Err(ConfigError::TooManyEntries {
                entries,
                max: MAX_ENTRIES,
            });
        }
        Ok(Trace {
            ring: Arc::new(Ring {
                epoch: Instant::now(),
                next: AtomicU64::new(0),
                entries: (0..entries).map(|_| Entry::default()).collect(),
                pools: Mutex::new(Vec::new()),
            }),
        })
    }

    /// How many decisions were recorded since the trace was made (the ring
    /// keeps the last of them, as many as it has entries).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Pool, trace::Trace};
    ///
    /// let trace = Trace::new(2)?;
    /// let pool = Pool::new("walks", 4)?;
    /// pool.trace_into(&trace)?;
    /// for _ in 0..3 {
    ///     drop(pool.try_admit()?);
    /// }
    /// assert_eq!(trace.recorded(), 3);
    /// let mut out = Vec::new();
    /// assert_eq!(trace.write_json_lines(&mut out)?, 2, "the last two");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recorded(&self) -> u64 {
        self.ring.next.load(Ordering::Relaxed)
    }

    /// Writes the decisions the ring holds as JSON lines, oldest arrival
    /// first, and returns how many it wrote. An entry being written at
    /// that moment is left out.
    ///
    /// It reads the ring while pools go on recording; it allocates a copy
    /// of the ring's entries (40 bytes each) to sort them.
    ///
    /// # Errors
    ///
    /// Whatever `out` returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::trace::Trace;
    ///
    /// let trace = Trace::new(16)?;
    /// let mut out = Vec::new();
    /// assert_eq!(trace.write_json_lines(&mut out)?, 0, "nothing recorded");
    /// assert!(out.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_json_lines(&self, out: &mut impl Write) -> io::Result<usize> {
        let mut read: Vec<Read> = self.ring.entries.iter().filter_map(Entry::read).collect();
        read.sort_by_key(|entry| (entry.at_us, entry.seq));
        let pools = self
            .ring
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for entry in &read {
            entry.write(&pools, out)?;
        }
        Ok(read.len())
    }

    /// Adds a pool's name; its index goes in that pool's entries.
    pub(crate) fn pool_index(&self, name: &'static str) -> u64 {
        let mut pools = self
            .ring
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let index = pools
            .iter()
            .position(|&known| known == name)
            .unwrap_or_else(|| {
                pools.push(name);
                pools.len() - 1
            });
        index as u64
    }

    /// Microseconds since the trace was made.
    pub(crate) fn now_us(&self) -> u64 {
        micros(self.ring.epoch.elapsed())
    }

    /// Records one decision.
    pub(crate) fn record(
        &self,
        pool: u64,
        (criticality, tag): (Criticality, Tag),
        outcome: Outcome,
        at_us: u64,
        waited_us: u64,
        held_us: Option<u64>,
    ) {
        let ring = &*self.ring;
        let n = ring.next.fetch_add(1, Ordering::Relaxed);
        let len = ring.entries.len() as u64;
        let entry = &ring.entries[usize::try_from(n % len).unwrap_or(0)];
        let (kind, code) = match outcome {
            Outcome::Admitted => (0, 0),
            Outcome::Refused(code) => (1, code_index(code)),
            Outcome::Shadow(code) => (2, code.map_or(0xf, code_index)),
        };
        let meta = (pool.min(0x3fff) << 18)
            | tag.packed()
            | (kind << 8)
            | (code << 4)
            | criticality.index() as u64;
        entry.seq.store(2 * n + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        entry.at_us.store(at_us, Ordering::Relaxed);
        entry.waited_us.store(waited_us, Ordering::Relaxed);
        entry
            .held_us
            .store(held_us.unwrap_or(NO_HOLD), Ordering::Relaxed);
        entry.meta.store(meta, Ordering::Relaxed);
        entry.seq.store(2 * n + 2, Ordering::Release);
    }
}

/// An entry as read, whole.
struct Read {
    seq: u64,
    at_us: u64,
    waited_us: u64,
    held_us: u64,
    meta: u64,
}

impl Entry {
    /// The entry, if it holds a decision and no writer changed it while it
    /// was read.
    fn read(&self) -> Option<Read> {
        let seq = self.seq.load(Ordering::Acquire);
        let read = Read {
            seq,
            at_us: self.at_us.load(Ordering::Relaxed),
            waited_us: self.waited_us.load(Ordering::Relaxed),
            held_us: self.held_us.load(Ordering::Relaxed),
            meta: self.meta.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        let whole = seq != 0 && seq.is_multiple_of(2) && self.seq.load(Ordering::Relaxed) == seq;
        whole.then_some(read)
    }
}

impl Read {
    fn write(&self, pools: &[&'static str], out: &mut impl Write) -> io::Result<()> {
        let pool = usize::try_from((self.meta >> 18) & 0x3fff)
            .ok()
            .and_then(|index| pools.get(index))
            .copied()
            .unwrap_or("");
        let criticality = Criticality::ALL
            .get(usize::try_from(self.meta & 0xf).unwrap_or(usize::MAX))
            .map_or("default", |level| level.as_str());
        let code = Code::ALL
            .get(usize::try_from((self.meta >> 4) & 0xf).unwrap_or(usize::MAX))
            .copied();
        write!(out, "{{\"at_ms\":{},\"pool\":\"", Millis(self.at_us))?;
        // Pool names are the app's own (never a caller's); escaped as JSON
        // needs all the same.
        for c in pool.chars() {
            match c {
                '"' => out.write_all(b"\\\"")?,
                '\\' => out.write_all(b"\\\\")?,
                c if u32::from(c) < 0x20 => write!(out, "\\u{:04x}", u32::from(c))?,
                c => write!(out, "{c}")?,
            }
        }
        write!(out, "\",\"criticality\":\"{criticality}\",\"outcome\":")?;
        match ((self.meta >> 8) & 0x3, code) {
            (0, _) => out.write_all(b"\"admitted\"")?,
            (1, Some(code)) => write!(out, "\"refused\",\"code\":\"{code}\"")?,
            (_, Some(code)) => write!(out, "\"shadow\",\"code\":\"{code}\"")?,
            (_, None) => out.write_all(b"\"shadow\",\"code\":null")?,
        }
        let flow = self.meta >> 32;
        if flow != 0 {
            write!(out, ",\"flow\":{flow}")?;
        }
        let cost = ((self.meta >> 10) & 0xff) + 1;
        if cost > 1 {
            write!(out, ",\"cost\":{cost}")?;
        }
        write!(
            out,
            ",\"waited_ms\":{},\"held_ms\":",
            Millis(self.waited_us)
        )?;
        if self.held_us == NO_HOLD {
            out.write_all(b"null}\n")
        } else {
            writeln!(out, "{}}}", Millis(self.held_us))
        }
    }
}

/// Microseconds written as milliseconds with three decimals.
struct Millis(u64);

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX - 1)
}

fn code_index(code: Code) -> u64 {
    Code::ALL
        .iter()
        .position(|&known| known == code)
        .map_or(0xf, |index| index as u64)
}

/// A pool's part of a trace: the trace, the pool's index in it, and when
/// each of its slots was admitted.
pub(crate) struct Traced {
    trace: Trace,
    pool: u64,
    /// Per slot: admission time (µs since the trace's epoch) and wait, set
    /// at admission, read at release.
    admitted: Box<[(AtomicU64, AtomicU64, AtomicU64)]>,
}

impl Traced {
    pub(crate) fn new(trace: &Trace, name: &'static str, capacity: usize) -> Traced {
        Traced {
            pool: trace.pool_index(name),
            trace: trace.clone(),
            admitted: (0..capacity)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
        }
    }

    pub(crate) fn same_trace(&self, trace: &Trace) -> bool {
        Arc::ptr_eq(&self.trace.ring, &trace.ring)
    }

    /// Slot `slot` was admitted now, for a caller of `criticality` (with
    /// `tag`) that waited `waited`.
    pub(crate) fn admitted(
        &self,
        slot: usize,
        (criticality, tag): (Criticality, Tag),
        waited: Duration,
    ) {
        if let Some((at, wait, level)) = self.admitted.get(slot) {
            at.store(self.trace.now_us(), Ordering::Relaxed);
            wait.store(micros(waited), Ordering::Relaxed);
            level.store(tag.packed() | criticality.index() as u64, Ordering::Relaxed);
        }
    }

    /// Slot `slot` is released now: its admission goes in the trace.
    pub(crate) fn released(&self, slot: usize) {
        let Some((at, wait, level)) = self.admitted.get(slot) else {
            return;
        };
        let now = self.trace.now_us();
        let admitted = at.load(Ordering::Relaxed);
        let waited = wait.load(Ordering::Relaxed);
        let level = level.load(Ordering::Relaxed);
        let criticality = Criticality::ALL
            .get(usize::try_from(level & 0xf).unwrap_or(usize::MAX))
            .copied()
            .unwrap_or_default();
        let tag = Tag {
            flow: (level >> 32) as u32,
            cost: ((level >> 10) & 0xff) as u32 + 1,
        };
        self.trace.record(
            self.pool,
            (criticality, tag),
            Outcome::Admitted,
            admitted.saturating_sub(waited),
            waited,
            Some(now.saturating_sub(admitted)),
        );
    }

    /// A decision that holds no slot of the table: a refusal, or a shadow
    /// admission past the capacity.
    pub(crate) fn decided(
        &self,
        (criticality, tag): (Criticality, Tag),
        outcome: Outcome,
        waited: Duration,
    ) {
        let now = self.trace.now_us();
        let waited = micros(waited);
        self.trace.record(
            self.pool,
            (criticality, tag),
            outcome,
            now.saturating_sub(waited),
            waited,
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{Outcome, Tag, Trace};
    use crate::{Code, Criticality};

    const NONE: Tag = Tag { flow: 0, cost: 1 };

    fn lines(trace: &Trace) -> Vec<String> {
        let mut out = Vec::new();
        trace.write_json_lines(&mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_line_is_json_with_every_field_and_oldest_arrival_first() {
        let trace = Trace::new(8).unwrap();
        let pool = trace.pool_index("a \"quoted\" pool");
        trace.record(
            pool,
            (Criticality::Critical, NONE),
            Outcome::Admitted,
            2_500,
            1_000,
            Some(48_125),
        );
        trace.record(
            pool,
            (Criticality::Sheddable, NONE),
            Outcome::Refused(Code::WaitTimedOut),
            1_000,
            0,
            None,
        );
        trace.record(
            pool,
            (Criticality::Default, NONE),
            Outcome::Shadow(Some(Code::Saturated)),
            3_000,
            0,
            None,
        );
        let lines = lines(&trace);
        assert_eq!(lines.len(), 3);
        let parsed: Vec<serde_json::Value> = lines
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(parsed[0]["outcome"], "refused");
        assert_eq!(parsed[0]["code"], "ADMISSION_WAIT_TIMEOUT");
        assert_eq!(parsed[0]["criticality"], "sheddable");
        assert!(parsed[0]["held_ms"].is_null());
        assert_eq!(parsed[1]["pool"], "a \"quoted\" pool");
        assert_eq!(parsed[1]["at_ms"], 2.5);
        assert_eq!(parsed[1]["waited_ms"], 1.0);
        assert_eq!(parsed[1]["held_ms"], 48.125);
        assert_eq!(parsed[1]["criticality"], "critical");
        assert_eq!(parsed[2]["outcome"], "shadow");
        assert_eq!(parsed[2]["code"], "ADMISSION_SATURATED");
    }

    #[test]
    fn the_ring_keeps_the_last_entries() {
        let trace = Trace::new(3).unwrap();
        let pool = trace.pool_index("p");
        for at in 0..10 {
            trace.record(
                pool,
                (Criticality::Default, NONE),
                Outcome::Admitted,
                at * 1000,
                0,
                Some(1),
            );
        }
        assert_eq!(trace.recorded(), 10);
        let at: Vec<String> = lines(&trace)
            .iter()
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line).unwrap()["at_ms"].to_string()
            })
            .collect();
        assert_eq!(at, ["7.0", "8.0", "9.0"]);
    }

    #[test]
    fn a_half_written_entry_is_left_out() {
        let trace = Trace::new(2).unwrap();
        let pool = trace.pool_index("p");
        trace.record(
            pool,
            (Criticality::Default, NONE),
            Outcome::Admitted,
            0,
            0,
            Some(1),
        );
        trace.record(
            pool,
            (Criticality::Default, NONE),
            Outcome::Admitted,
            1,
            0,
            Some(1),
        );
        // A writer claimed entry 0 again and has not finished.
        trace.ring.entries[0]
            .seq
            .store(2 * 2 + 1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(lines(&trace).len(), 1);
    }
}
