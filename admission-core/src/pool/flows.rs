//! Fair shares between the flows of one pool: who holds how many of its
//! slots, who asked and was refused, how hard each presses (asked lately),
//! and the share each may hold.
//!
//! This module owns [`Flows`], a pool's fixed table of [`BUCKETS`] flow
//! buckets, allocated the first time a caller with a flow asks the pool
//! and never grown. A flow (a keyed 32-bit hash of the app's key, see
//! [`Caller::with_flow`](crate::Caller::with_flow)) takes a bucket of its
//! own among the [`PROBES`] its hash names (the first it already holds,
//! else the first free one), and shares the first of them only when all
//! are held by other active flows; flows that share a bucket are one flow
//! here. A bucket is freed once its flow is no longer active. It decides whether a flow is
//! under its share; the gate takes the permit. It must never hold a flow's
//! key (only its hash, in the bucket it took), never grow with the keys
//! it sees, and never be touched by a caller without a flow: the gate
//! tests one byte of the caller, and a returning slot looks here only when
//! its number carries a flow's mark.
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

/// The buckets of a pool's flow table. A flow shares a bucket only when
/// the [`PROBES`] buckets its hash names are all taken by other active
/// flows: with `n` active flows, odds of `C(n, 8) / C(256, 8)` (below
/// 10^-9 for 16 flows, 1.1·10^-5 for 64, 0.3% for 128; the test
/// `collision_odds_are_as_documented` checks them).
pub(crate) const BUCKETS: usize = 256;

/// The buckets a flow's hash names: its home and seven more, a stride
/// apart (an odd stride, so the eight are distinct).
pub(crate) const PROBES: usize = 8;

/// No flow owns the slot.
const NONE: u16 = u16::MAX;

/// How long a flow's [pressure](Deciding::standing_for) takes to halve once
/// it stops asking: its arrivals of the last moments are what tells the
/// flood from a tenant whose few requests happen to overlap.
const PRESSURE_HALF_LIFE_MICROS: u64 = 250_000;

/// One arrival's weight in a bucket's pressure count (fixed point, so
/// that halving keeps a fraction; the count saturates at `u16::MAX`, some
/// 16,000 arrivals a second).
const ARRIVAL: u16 = 16;

/// How a flow stands against its share, decided under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// It holds less than its share: it may take any free slot.
    Under,
    /// It holds at least its share. `yields`: another active flow asked,
    /// was refused and is under its own share, so the free slot is left to
    /// it. `tied`: another flow holds as much for its weight or more (it
    /// is not the flood: a queued caller then waits in line rather than
    /// being refused, and fair order settles between them). `shared`:
    /// another flow is active at all (a refusal then names the share, not
    /// the pool's capacity).
    AtShare {
        yields: bool,
        shared: bool,
        tied: bool,
        /// No other active flow asks more often for its weight: this flow
        /// is the flood (see [`Deciding::standing_for`]).
        flood: bool,
    },
}

/// The bucket-keyed state only decisions touch.
#[derive(Debug)]
struct Table {
    /// Until when (microseconds after `base`) each bucket counts as asking:
    /// refused with demand left unmet. 0: not asking.
    asking_until: [u64; BUCKETS],
    /// The weight each bucket last asked with (at least 1).
    weight: [u8; BUCKETS],
    /// The hash of the flow that took each bucket; 0: free.
    hash: [u32; BUCKETS],
    /// The buckets that may be active (held a slot or asked); pruned as
    /// decisions find them idle. At most [`BUCKETS`] entries.
    live: Vec<u16>,
    in_live: [bool; BUCKETS],
    /// How often each bucket asked lately: [`ARRIVAL`] per arrival,
    /// halved every half-life since `asked_in`.
    arrivals: [u16; BUCKETS],
    /// The half-life (counted from `base`) in which each bucket's
    /// `arrivals` were last brought up to date.
    asked_in: [u32; BUCKETS],
}

impl Table {
    /// Bucket `at`'s arrivals count in half-life `epoch`, decayed.
    fn arrivals_at(&self, at: usize, epoch: u32) -> u16 {
        self.arrivals[at]
            .checked_shr(epoch.saturating_sub(self.asked_in[at]))
            .unwrap_or(0)
    }

    /// Bucket `at`'s pressure in half-life `epoch`: its decayed arrivals
    /// per unit of weight.
    fn pressure_at(&self, at: usize, epoch: u32) -> u32 {
        u32::from(self.arrivals_at(at, epoch)) / u32::from(self.weight[at].max(1))
    }

    /// One more arrival of bucket `at`, in half-life `epoch`.
    fn arrived(&mut self, at: usize, epoch: u32) {
        self.arrivals[at] = self.arrivals_at(at, epoch).saturating_add(ARRIVAL);
        self.asked_in[at] = epoch;
    }
}

/// The half-life a table's clock reading (microseconds after its base)
/// falls in.
fn epoch(now: u64) -> u32 {
    u32::try_from(now / PRESSURE_HALF_LIFE_MICROS).unwrap_or(u32::MAX)
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

/// A flow as the table sees it: its hash and weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flow {
    hash: NonZeroU32,
    weight: u8,
}

impl Flow {
    pub(crate) fn new(hash: NonZeroU32, weight: u8) -> Flow {
        Flow {
            hash,
            weight: weight.max(1),
        }
    }

    /// The `i`th of the buckets its hash names.
    fn probe(self, i: usize) -> usize {
        let hash = self.hash.get() as usize;
        let stride = (hash >> 8) | 1;
        (hash + i * stride) % BUCKETS
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
                hash: [0; BUCKETS],
                live: Vec::with_capacity(BUCKETS),
                in_live: [false; BUCKETS],
                arrivals: [0; BUCKETS],
                asked_in: [0; BUCKETS],
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

    /// Slot `id` returns: the flow that held it, if any, holds its cost
    /// fewer.
    #[inline]
    pub(crate) fn released(&self, id: SlotId) {
        let Some(owner) = self.owner.get(id.index()) else {
            return;
        };
        let bucket = owner.swap(NONE, SeqCst);
        if bucket != NONE {
            self.held[usize::from(bucket)].fetch_sub(id.cost(), SeqCst);
        }
    }

    /// The slots bucket `bucket` holds now (0 for no bucket), for fair
    /// order in the line.
    pub(crate) fn held_in(&self, bucket: u16) -> u32 {
        self.held
            .get(usize::from(bucket))
            .map_or(0, |held| held.load(SeqCst))
    }

    /// The flows active now (holding slots or asking) and the sum of their
    /// weights, for the statistics.
    pub(crate) fn active(&self) -> (usize, u64) {
        let deciding = self.lock();
        let (now, table) = (deciding.now, &*deciding.table);
        table
            .live
            .iter()
            .map(|&bucket| usize::from(bucket))
            .filter(|&at| self.held[at].load(SeqCst) > 0 || table.asking_until[at] > now)
            .fold((0, 0), |(n, total), at| {
                (n + 1, total + u64::from(table.weight[at]))
            })
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
    #[cfg(all(test, not(loom)))]
    pub(crate) fn standing(&mut self, flow: Flow, limit: usize) -> Standing {
        self.standing_for(flow, limit, 1).0
    }

    /// `standing` for an admission of `cost` slots: the
    /// flow is under its share while it holds at most its share less the
    /// cost, rounded up (with a cost of 1: less than its share), so shares
    /// count what an admission takes, not requests.
    ///
    /// With it, how hard `flow` presses on the pool, this arrival counted:
    /// how often it asked lately (each arrival counts, admitted or not, and
    /// the count halves every quarter second), per unit of its weight. A
    /// flood presses hundreds of times harder than a tenant whose few
    /// requests overlap now and then, though both may hold a slot and have
    /// one waiting: the line tells them apart by it (who is favoured, who
    /// makes room, who wins a tie in a standing queue).
    pub(crate) fn standing_for(&mut self, flow: Flow, limit: usize, cost: u32) -> (Standing, u32) {
        let (now, flows) = (self.now, self.flows);
        let table = &mut *self.table;
        // Free the buckets of flows no longer active.
        table.live.retain(|&bucket| {
            let at = usize::from(bucket);
            let active = flows.held[at].load(SeqCst) > 0 || table.asking_until[at] > now;
            if !active {
                table.in_live[at] = false;
                table.hash[at] = 0;
                table.arrivals[at] = 0;
            }
            active
        });
        let own = self.place(flow);
        let table = &mut *self.table;
        table.weight[own] = flow.weight;
        table.arrived(own, epoch(now));
        let own_pressure = table.pressure_at(own, epoch(now));
        let total: u64 = table
            .live
            .iter()
            .map(|&bucket| u64::from(table.weight[usize::from(bucket)]))
            .sum();
        let limit = limit as u64;
        let under = |at: usize, weight: u8| {
            u64::from(flows.held[at].load(SeqCst)) * total < limit * u64::from(weight)
        };
        let own_held = u64::from(flows.held[own].load(SeqCst)) + u64::from(cost.max(1)) - 1;
        if own_held * total < limit * u64::from(flow.weight) {
            return (Standing::Under, own_pressure);
        }
        let mut shared = false;
        let mut yields = false;
        let mut tied = false;
        let mut flood = true;
        for &bucket in &table.live {
            let at = usize::from(bucket);
            if at == own {
                continue;
            }
            shared = true;
            yields |= table.asking_until[at] > now && under(at, table.weight[at]);
            tied |= u64::from(flows.held[at].load(SeqCst)) * u64::from(flow.weight)
                >= own_held * u64::from(table.weight[at]);
            flood &= table.pressure_at(at, epoch(now)) <= own_pressure;
        }
        let standing = Standing::AtShare {
            yields,
            shared,
            tied,
            flood,
        };
        (standing, own_pressure)
    }

    /// `flow`'s bucket: the one of its probes it holds, else the first
    /// free one (taken now, and live), else its first probe, shared.
    fn place(&mut self, flow: Flow) -> usize {
        let hash = flow.hash.get();
        let mut free = None;
        for i in 0..PROBES {
            let at = flow.probe(i);
            match self.table.hash[at] {
                held if held == hash => return at,
                0 if free.is_none() => free = Some(at),
                _ => {}
            }
        }
        let Some(at) = free else {
            return flow.probe(0);
        };
        self.table.hash[at] = hash;
        self.live(at);
        at
    }

    /// `flow` took slot `id`: it holds its cost more, and no longer asks.
    pub(crate) fn admitted(&mut self, flow: Flow, id: SlotId) {
        if id.is_overdraft() {
            return;
        }
        let Some(owner) = self.flows.owner.get(id.index()) else {
            return;
        };
        let at = self.place(flow);
        self.flows.held[at].fetch_add(id.cost(), SeqCst);
        #[expect(clippy::cast_possible_truncation, reason = "below BUCKETS")]
        owner.store(at as u16, SeqCst);
        self.table.asking_until[at] = 0;
        self.live(at);
    }

    /// `flow` was refused (or is about to wait): it asks for `window`
    /// from now, an active flow with demand the pool left unmet. Returns
    /// its bucket (a waiter's place in fair order).
    pub(crate) fn asked(&mut self, flow: Flow, window: std::time::Duration) -> u16 {
        let window = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        let at = self.place(flow);
        self.table.asking_until[at] = self.now.saturating_add(window);
        self.live(at);
        #[expect(clippy::cast_possible_truncation, reason = "below BUCKETS")]
        let bucket = at as u16;
        bucket
    }

    /// Bucket `at` may be active: decisions weigh it, and free it once idle.
    fn live(&mut self, at: usize) {
        if !self.table.in_live[at] {
            self.table.in_live[at] = true;
            #[expect(clippy::cast_possible_truncation, reason = "below BUCKETS")]
            self.table.live.push(at as u16);
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
    /// the size it was made with: under 7 KiB plus 2 bytes a slot, the
    /// bound the docs state, and at most [`BUCKETS`] live entries.
    #[test]
    fn a_hundred_thousand_keys_leave_the_table_its_size() {
        let flows = Flows::new(4);
        let made = flows.footprint();
        assert!(made <= 7 * 1024 + 2 * 4, "made with {made} bytes");
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

    /// The odds stated on [`BUCKETS`]: computed, and drawn through the
    /// real placement: with `n` flows holding buckets, a new flow finds all
    /// of its probes taken as often as `C(n, 8) / C(256, 8)` says.
    #[test]
    fn collision_odds_are_as_documented() {
        let odds = |n: usize| -> f64 {
            (0..PROBES)
                .map(|i| (n - i) as f64 / (BUCKETS - i) as f64)
                .product()
        };
        assert!(odds(16) < 1e-9, "{}", odds(16));
        assert!((odds(64) - 1.1e-5).abs() < 0.1e-5, "{}", odds(64));
        assert!((odds(128) - 0.003).abs() < 0.0005, "{}", odds(128));
        // Drawn: 176 flows take buckets, then 20,000 newcomers probe.
        let flows = Flows::new(1);
        let mut deciding = flows.lock();
        for n in 0..176_u32 {
            deciding.asked(flow_of(("heavy", n)), Duration::from_secs(60));
        }
        let taken = deciding.table.live.len();
        assert!(taken >= 170, "the heavy flows took {taken} buckets");
        let trials = 20_000;
        let shared = (0..trials)
            .filter(|n| {
                let newcomer = flow_of(("light", n));
                (0..PROBES).all(|i| deciding.table.hash[newcomer.probe(i)] != 0)
            })
            .count();
        let seen = shared as f64 / f64::from(trials);
        assert!(
            (seen - odds(taken)).abs() < 0.01,
            "drawn {seen}, computed {} for {taken} taken",
            odds(taken)
        );
    }

    /// Two flows never share a bucket while a free one is among their
    /// probes: each holds its own count.
    #[test]
    fn flows_take_buckets_of_their_own() {
        // 64 flows in 256 buckets: by their first probes alone, two would
        // meet (the birthday odds: 99.96%).
        let flows = Flows::new(64);
        for n in 0..64_u32 {
            flows
                .lock()
                .admitted(flow_of(("tenant", n)), SlotId::for_test(n as usize));
        }
        assert_eq!(flows.held_total(), (64, 64), "64 flows, 64 buckets");
    }
}
