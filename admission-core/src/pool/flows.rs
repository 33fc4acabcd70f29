//! Fair shares between the flows of one pool: who holds how many of its
//! slots, who asked and was refused, and the share each may hold.
//!
//! This module owns [`Flows`], a pool's fixed table of [`BUCKETS`] flow
//! buckets (a flow is a keyed hash of the app's key, see
//! [`Caller::with_flow`](crate::Caller::with_flow); flows whose hashes meet
//! in one bucket are one flow here), allocated the first time a caller
//! with a flow asks the pool and never grown. It decides whether a flow is
//! under its share; the gate takes the permit. It must never hold a flow's
//! key (only its bucket), never grow with the keys it sees, and never be
//! touched by a caller without a flow, beyond the one load that finds the
//! table absent or the owner of a returning slot empty.
//!
//! Decisions and the marks they leave are made under the table's lock; a
//! returning slot takes its count down with one atomic swap and one
//! decrement, outside it (a decision that reads a count about to fall
//! decides as if the slot were still held: it may refuse, never over-admit).

use std::num::NonZeroU32;

use tokio::time::Instant;

use super::permits::SlotId;
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicU16, AtomicU32, Ordering::SeqCst};

/// The buckets of a pool's flow table: a light flow shares its bucket with
/// one of `h` heavy flows with probability `1 - (1 - 1/256)^h` (0.4% for
/// one, 1.6% for four, 3.8% for ten; the test
/// `collision_odds_are_as_documented` checks these figures).
pub(crate) const BUCKETS: usize = 256;

/// No flow owns the slot.
const NONE: u16 = u16::MAX;

/// How a flow stands against its share, decided under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// It holds less than its share: it may take any free slot.
    Under,
    /// It holds at least its share. `yields`: another active flow asked,
    /// was refused and is under its own share, so the free slot is left to
    /// it. `shared`: another flow is active at all (a refusal then names
    /// the share, not the pool's capacity).
    AtShare { yields: bool, shared: bool },
}

/// The bucket-keyed state only decisions touch.
#[derive(Debug)]
struct Table {
    /// Until when (microseconds after `base`) each bucket counts as asking:
    /// refused with demand left unmet. 0: not asking.
    asking_until: [u64; BUCKETS],
    /// The weight each bucket last asked with (at least 1).
    weight: [u8; BUCKETS],
    /// The buckets that may be active (held a slot or asked); pruned as
    /// decisions find them idle. At most [`BUCKETS`] entries.
    live: Vec<u16>,
    in_live: [bool; BUCKETS],
}

/// A pool's flow table; see the module's docs.
#[derive(Debug)]
pub(crate) struct Flows {
    table: Mutex<Table>,
    /// Slots each bucket holds now.
    held: Box<[AtomicU32]>,
    /// Per slot number, the bucket holding it ([`NONE`]: no flow).
    owner: Box<[AtomicU16]>,
    /// The table's clock origin.
    base: Instant,
}

/// A flow as the table sees it: its bucket and weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flow {
    bucket: u16,
    weight: u8,
}

impl Flow {
    pub(crate) fn new(hash: NonZeroU32, weight: u8) -> Flow {
        #[expect(clippy::cast_possible_truncation, reason = "below BUCKETS")]
        let bucket = (hash.get() as usize % BUCKETS) as u16;
        Flow {
            bucket,
            weight: weight.max(1),
        }
    }

    fn at(self) -> usize {
        usize::from(self.bucket)
    }
}

/// The decisions' lock, held from a decision to the mark it leaves.
#[derive(Debug)]
pub(crate) struct Deciding<'a> {
    flows: &'a Flows,
    table: crate::loom::sync::MutexGuard<'a, Table>,
    now: u64,
}

impl Flows {
    /// The table of a pool of `capacity` slots.
    pub(crate) fn new(capacity: usize) -> Flows {
        Flows {
            table: Mutex::new(Table {
                asking_until: [0; BUCKETS],
                weight: [1; BUCKETS],
                live: Vec::with_capacity(BUCKETS),
                in_live: [false; BUCKETS],
            }),
            held: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
            owner: (0..capacity).map(|_| AtomicU16::new(NONE)).collect(),
            base: Instant::now(),
        }
    }

    /// Takes the decisions' lock.
    pub(crate) fn lock(&self) -> Deciding<'_> {
        let table = self
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let since = Instant::now().saturating_duration_since(self.base);
        Deciding {
            flows: self,
            table,
            now: u64::try_from(since.as_micros())
                .unwrap_or(u64::MAX)
                .saturating_add(1),
        }
    }

    /// Slot `id` returns: the flow that held it, if any, holds one fewer.
    #[inline]
    pub(crate) fn released(&self, id: SlotId) {
        let Some(owner) = self.owner.get(id.index()) else {
            return;
        };
        let bucket = owner.swap(NONE, SeqCst);
        if bucket != NONE {
            self.held[usize::from(bucket)].fetch_sub(1, SeqCst);
        }
    }

    /// The bytes the table holds, wherever it lives: what the docs state
    /// as its bound (for the tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn footprint(&self) -> usize {
        let table = self.table.lock().unwrap();
        size_of::<Flows>()
            + table.live.capacity() * size_of::<u16>()
            + self.held.len() * size_of::<AtomicU32>()
            + self.owner.len() * size_of::<AtomicU16>()
    }

    /// Slots flow-holding buckets hold now, and how many buckets hold any
    /// (for the models and tests).
    #[cfg(test)]
    pub(crate) fn held_total(&self) -> (u32, usize) {
        let counts = self.held.iter().map(|held| held.load(SeqCst));
        counts.fold((0, 0), |(sum, buckets), n| {
            (sum + n, buckets + usize::from(n > 0))
        })
    }
}

impl Deciding<'_> {
    /// How `flow` stands against its share of `limit` slots now.
    ///
    /// The active flows are the buckets that hold a slot of the pool or
    /// asked (were refused) within their asking window, and `flow` itself.
    /// A flow's share is `limit × its weight / the active flows' weights`;
    /// it is under its share while it holds fewer slots than that.
    pub(crate) fn standing(&mut self, flow: Flow, limit: usize) -> Standing {
        let (now, flows) = (self.now, self.flows);
        let table = &mut *self.table;
        table.weight[flow.at()] = flow.weight;
        // Prune the idle, and weigh the rest.
        let mut total = 0_u64;
        let mut own = false;
        table.live.retain(|&bucket| {
            let at = usize::from(bucket);
            let active = flows.held[at].load(SeqCst) > 0 || table.asking_until[at] > now;
            if active {
                total += u64::from(table.weight[at]);
                own |= at == flow.at();
            } else {
                table.in_live[at] = false;
            }
            active
        });
        if !own {
            total += u64::from(flow.weight);
        }
        let limit = limit as u64;
        let under = |at: usize, weight: u8| {
            u64::from(flows.held[at].load(SeqCst)) * total < limit * u64::from(weight)
        };
        if under(flow.at(), flow.weight) {
            return Standing::Under;
        }
        let mut shared = false;
        let mut yields = false;
        for &bucket in &table.live {
            let at = usize::from(bucket);
            if at == flow.at() {
                continue;
            }
            shared = true;
            yields |= table.asking_until[at] > now && under(at, table.weight[at]);
        }
        Standing::AtShare { yields, shared }
    }

    /// `flow` took slot `id`: it holds one more, and no longer asks.
    pub(crate) fn admitted(&mut self, flow: Flow, id: SlotId) {
        if id.is_overdraft() {
            return;
        }
        let Some(owner) = self.flows.owner.get(id.index()) else {
            return;
        };
        self.flows.held[flow.at()].fetch_add(1, SeqCst);
        owner.store(flow.bucket, SeqCst);
        self.table.asking_until[flow.at()] = 0;
        self.live(flow);
    }

    /// `flow` was refused (or is about to wait): it asks for `window`
    /// from now, an active flow with demand the pool left unmet.
    pub(crate) fn asked(&mut self, flow: Flow, window: std::time::Duration) {
        let window = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        self.table.asking_until[flow.at()] = self.now.saturating_add(window);
        self.live(flow);
    }

    fn live(&mut self, flow: Flow) {
        if !self.table.in_live[flow.at()] {
            self.table.in_live[flow.at()] = true;
            self.table.live.push(flow.bucket);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;

    fn flow_of(key: impl std::hash::Hash) -> Flow {
        Flow::new(crate::Caller::default().with_flow(key).flow().unwrap(), 1)
    }

    /// 100,000 distinct keys asking a contended pool of 4 leave the table
    /// the size it was made with: under 5 KiB plus 2 bytes a slot, the
    /// bound the docs state, and at most [`BUCKETS`] live entries.
    #[test]
    fn a_hundred_thousand_keys_leave_the_table_its_size() {
        let flows = Flows::new(4);
        let made = flows.footprint();
        assert!(made <= 5 * 1024 + 2 * 4, "made with {made} bytes");
        let holders: Vec<Flow> = (0..4).map(|n| flow_of(("holder", n))).collect();
        for (n, holder) in holders.iter().enumerate() {
            flows.lock().admitted(*holder, SlotId::for_test(n));
        }
        for key in 0..100_000_u32 {
            let flow = flow_of(key);
            let mut deciding = flows.lock();
            let _ = deciding.standing(flow, 4);
            deciding.asked(flow, Duration::from_secs(2));
        }
        assert_eq!(flows.footprint(), made, "nothing grew with the keys");
        assert!(flows.table.lock().unwrap().live.len() <= BUCKETS);
        for n in 0..4 {
            flows.released(SlotId::for_test(n));
        }
        assert_eq!(flows.held_total(), (0, 0), "every slot's count came back");
    }

    /// The odds stated on [`BUCKETS`], computed and also drawn: random
    /// flows hashed into the table meet a given light flow's bucket as
    /// often as `1 - (1 - 1/B)^h` says.
    #[test]
    fn collision_odds_are_as_documented() {
        let odds = |heavy: i32| 1.0 - (1.0 - 1.0 / BUCKETS as f64).powi(heavy);
        for (heavy, stated) in [(1, 0.004), (4, 0.016), (10, 0.038)] {
            assert!(
                (odds(heavy) - stated).abs() < 0.0005,
                "{heavy} heavy flows: {} stated {stated}",
                odds(heavy)
            );
        }
        // Drawn through the real hashing: 4 heavy flows beside a light one.
        let trials = 20_000;
        let mut met = 0;
        for trial in 0..trials {
            let bucket = |key: String| {
                let caller = crate::Caller::default().with_flow(key);
                Flow::new(caller.flow().unwrap(), 1).bucket
            };
            let light = bucket(format!("light-{trial}"));
            met += usize::from((0..4).any(|h| bucket(format!("heavy-{trial}-{h}")) == light));
        }
        let seen = met as f64 / f64::from(trials);
        assert!(
            (seen - odds(4)).abs() < 0.006,
            "drawn {seen}, computed {}",
            odds(4)
        );
    }
}
