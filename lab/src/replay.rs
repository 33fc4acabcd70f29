//! What-if replay: a recorded admission trace against other settings.
//!
//! This module owns [`Arrival`] (one caller of a trace, as
//! `admission_core::trace::Trace` writes it), [`parse`], [`replay`] and the
//! table [`render`] prints. The model is the real gate: each arrival asks a
//! real request class (`RequestPools`, its work class at the capacity
//! tried) for a lease at its arrival instant, on tokio's paused clock, and
//! holds it as long as the recorded caller held its slot, so an hour of
//! traffic replays in seconds and no sleep is real. It must never copy the
//! gate's rules: every decision comes from `admission-core`.
//!
//! A caller the trace saw refused held nothing, so its hold is not known:
//! it holds one drawn (seeded) from the holds the trace did record. A
//! caller traced with a flow asks for that flow (its hash stands for the
//! key, weight 1: the trace keeps no weight), and one traced with a cost
//! asks for that many slots.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt::Write as _;
use std::num::NonZeroU8;
use std::time::Duration;

use admission_core::{Admission, Caller, Class, Criticality, Lease, RequestPools};
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::time::Instant;

use crate::storm::percentile;

/// One caller of a trace: when it arrived, how critical it was, who it
/// was for and how many slots it asked, and how long it held its slot if
/// it was admitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// Since the trace began.
    pub at: Duration,
    /// The caller's criticality.
    pub criticality: Criticality,
    /// How long it held its slot; `None` for a caller refused (or served
    /// past the capacity in shadow mode), whose hold was not timed.
    pub held: Option<Duration>,
    /// Its flow's hash (the trace's `flow`), for a caller with a flow.
    pub flow: Option<u32>,
    /// The slots it took (the trace's `cost`, 1 where the line has none).
    pub cost: NonZeroU8,
}

impl Arrival {
    /// A caller of no flow and cost 1.
    #[must_use]
    pub fn new(at: Duration, criticality: Criticality, held: Option<Duration>) -> Arrival {
        Arrival {
            at,
            criticality,
            held,
            flow: None,
            cost: NonZeroU8::MIN,
        }
    }

    /// The caller it was: its criticality, flow and cost.
    fn caller(&self) -> Caller {
        let caller = Caller::new(self.criticality).with_cost(self.cost);
        match self.flow {
            Some(flow) => caller.with_flow(flow),
            None => caller,
        }
    }
}

/// A trace line that is not one of `Trace`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTrace {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl std::fmt::Display for BadTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for BadTrace {}

/// Reads a trace's JSON lines: the arrivals of `pool` (every pool's when
/// `None`), oldest first.
///
/// # Errors
///
/// [`BadTrace`] naming the first line that is not a trace entry.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::replay::parse;
///
/// let trace = r#"{"at_ms":0.500,"pool":"work","criticality":"default","outcome":"admitted","waited_ms":0.000,"held_ms":20.000}
/// {"at_ms":1.000,"pool":"work","criticality":"sheddable","outcome":"refused","code":"ADMISSION_SATURATED","waited_ms":0.000,"held_ms":null}
/// {"at_ms":2.000,"pool":"control","criticality":"default","outcome":"admitted","waited_ms":0.000,"held_ms":1.000}
/// {"at_ms":3.000,"pool":"work","criticality":"default","flow":3735928559,"cost":4,"outcome":"admitted","waited_ms":0.000,"held_ms":5.000}"#;
/// let work = parse(trace, Some("work")).unwrap();
/// assert_eq!(work.len(), 3);
/// assert_eq!(work[0].held, Some(Duration::from_millis(20)));
/// assert_eq!(work[1].held, None);
/// assert_eq!((work[0].flow, work[0].cost.get()), (None, 1));
/// assert_eq!((work[2].flow, work[2].cost.get()), (Some(3_735_928_559), 4));
/// assert!(parse("{}", None).is_err());
/// ```
pub fn parse(trace: &str, pool: Option<&str>) -> Result<Vec<Arrival>, BadTrace> {
    let mut arrivals = Vec::new();
    for (index, line) in trace.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason| BadTrace {
            line: index + 1,
            reason,
        };
        let entry: serde_json::Value = serde_json::from_str(line).map_err(|_| bad("not JSON"))?;
        if pool.is_some_and(|pool| entry["pool"].as_str() != Some(pool)) {
            continue;
        }
        let at = entry["at_ms"].as_f64().ok_or_else(|| bad("no `at_ms`"))?;
        let criticality = match entry["criticality"].as_str() {
            Some("critical") => Criticality::Critical,
            Some("default") => Criticality::Default,
            Some("sheddable") => Criticality::Sheddable,
            _ => return Err(bad("no known `criticality`")),
        };
        let held = match (entry["outcome"].as_str(), entry["held_ms"].as_f64()) {
            (Some("admitted"), Some(held)) => Some(millis(held)),
            (Some("refused" | "shadow"), None) => None,
            _ => return Err(bad("an `outcome` without the `held_ms` it goes with")),
        };
        let flow = match &entry["flow"] {
            serde_json::Value::Null => None,
            flow => Some(
                flow.as_u64()
                    .and_then(|flow| u32::try_from(flow).ok())
                    .ok_or_else(|| bad("a `flow` that is not a 32-bit hash"))?,
            ),
        };
        let cost = match &entry["cost"] {
            serde_json::Value::Null => NonZeroU8::MIN,
            cost => cost
                .as_u64()
                .and_then(|cost| u8::try_from(cost).ok())
                .and_then(NonZeroU8::new)
                .ok_or_else(|| bad("a `cost` that is not a number of slots from 1 to 255"))?,
        };
        arrivals.push(Arrival {
            flow,
            cost,
            ..Arrival::new(millis(at), criticality, held)
        });
    }
    arrivals.sort_by_key(|arrival| arrival.at);
    Ok(arrivals)
}

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// The settings one replay tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// Slots of the class.
    pub capacity: usize,
    /// Callers wait in the class's bounded queue (`Admission::Queue`)
    /// instead of failing fast.
    pub queue: bool,
}

/// What a setting would have done to the trace's callers.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The setting.
    pub setting: Setting,
    /// Callers replayed.
    pub arrivals: usize,
    /// Callers admitted.
    pub admitted: usize,
    /// Callers refused, by code.
    pub refused: BTreeMap<&'static str, usize>,
    /// The waits of admitted callers: median and 99th percentile.
    pub wait_p50: Duration,
    /// See `wait_p50`.
    pub wait_p99: Duration,
    /// Admitted callers per second of the trace.
    pub goodput: f64,
    /// The share of the slots' time held, 0 to 1.
    pub utilisation: f64,
}

impl Prediction {
    /// The share of callers refused, 0 to 1.
    #[must_use]
    pub fn refused_share(&self) -> f64 {
        let refused: usize = self.refused.values().sum();
        refused as f64 / self.arrivals.max(1) as f64
    }
}

/// Replays `arrivals` against a class of `setting`, on tokio's paused
/// clock (a runtime of its own: call it outside any runtime).
///
/// # Panics
///
/// When called from inside a tokio runtime (it starts its own), or with a
/// capacity of 0.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::Criticality;
/// use admission_lab::replay::{Arrival, Setting, replay};
///
/// // Three callers at once, each holding its slot 10 ms.
/// let at_once = Arrival::new(Duration::ZERO, Criticality::Default, Some(Duration::from_millis(10)));
/// let trace = [at_once; 3];
/// let two = replay(&trace, Setting { capacity: 2, queue: false }, 1);
/// assert_eq!((two.admitted, two.refused["ADMISSION_SATURATED"]), (2, 1));
/// let three = replay(&trace, Setting { capacity: 3, queue: false }, 1);
/// assert_eq!(three.admitted, 3);
/// ```
#[must_use]
pub fn replay(arrivals: &[Arrival], setting: Setting, seed: u64) -> Prediction {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(replay_paused(arrivals, setting, seed))
}

/// A lease a queued caller got, sent to the driver with the caller's
/// index; or its refusal's code.
type Answer = (usize, Result<Lease, &'static str>);

/// Replays on the paused clock. One driver orders every event exactly by
/// the trace's own times (microseconds), releases before arrivals at the
/// same instant: tokio's timers tick in milliseconds, so a slot freed and
/// a caller arriving within one millisecond would otherwise race. A
/// fail-fast caller asks the class from the driver itself; a queued one
/// waits in a task of its own (the class's queue wakes it when the driver
/// frees a slot) and hands its lease back to the driver, which holds it
/// for the caller's recorded time. The clock the gate reads trails the
/// driver's by less than a millisecond.
async fn replay_paused(arrivals: &[Arrival], setting: Setting, seed: u64) -> Prediction {
    // One name per setting: a sweep builds each once (a name built over
    // and over is what the builder warns about).
    let mode = if setting.queue { "queue" } else { "fail-fast" };
    let pools = RequestPools::builder()
        .name(format!("replay-{}-{mode}", setting.capacity))
        .work(setting.capacity)
        .control(1)
        .build()
        .expect("a capacity of at least 1");
    let mut tally = Tally::new(arrivals, seed);
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<Answer>();
    let start = Instant::now();
    let mut next = 0;
    let mut queued = 0_usize;
    loop {
        let release = tally.next_release();
        let arrival = arrivals.get(next).map(|arrival| arrival.at);
        let (now, is_release) = match (release, arrival) {
            (Some(release), Some(arrival)) if release <= arrival => (release, true),
            (_, Some(arrival)) => (arrival, false),
            (Some(release), None) => (release, true),
            (None, None) if queued > 0 => {
                // Callers still in the queue: their own timers end them.
                let answer = answered.recv().await.expect("the driver holds a sender");
                queued -= 1;
                tally.answer(answer, Duration::ZERO);
                continue;
            }
            (None, None) => break,
        };
        tokio::time::sleep_until(start + now).await;
        if is_release {
            tally.release_next();
        } else {
            let index = next;
            next += 1;
            let caller = arrivals[index].caller();
            if setting.queue {
                queued += 1;
                let (pools, answers) = (pools.clone(), answers.clone());
                tokio::spawn(caller.scope(async move {
                    let lease = pools.lease_with(Class::Work, Admission::Queue).await;
                    let _ = answers.send((index, lease.map_err(|refusal| refusal.code().as_str())));
                }));
            } else {
                let lease = caller.scope_sync(|| pools.try_lease(Class::Work));
                tally.answer(
                    (index, lease.map_err(|refusal| refusal.code().as_str())),
                    now,
                );
            }
        }
        // Let the callers this event woke (or started) take their turn,
        // then hold what they were given from this instant.
        tokio::task::yield_now().await;
        while let Ok(answer) = answered.try_recv() {
            queued -= 1;
            tally.answer(answer, now);
        }
    }
    tally.prediction(setting)
}

/// What the replayed callers did, and the leases held now.
struct Tally<'a> {
    arrivals: &'a [Arrival],
    /// Each caller's hold: its own, or one drawn from the recorded ones.
    holds: Vec<Duration>,
    admitted: usize,
    refused: BTreeMap<&'static str, usize>,
    waits: Vec<Duration>,
    held_time: Duration,
    /// Held leases by release time, then admission order.
    releases: BinaryHeap<Reverse<(Duration, u64)>>,
    leases: HashMap<u64, Lease>,
    order: u64,
}

impl<'a> Tally<'a> {
    fn new(arrivals: &'a [Arrival], seed: u64) -> Tally<'a> {
        let recorded: Vec<Duration> = arrivals.iter().filter_map(|arrival| arrival.held).collect();
        let mut rng = SmallRng::seed_from_u64(seed);
        let holds = arrivals
            .iter()
            .map(|arrival| {
                arrival.held.unwrap_or_else(|| {
                    recorded
                        .get(rng.random_range(0..recorded.len().max(1)))
                        .copied()
                        .unwrap_or_default()
                })
            })
            .collect();
        Tally {
            arrivals,
            holds,
            admitted: 0,
            refused: BTreeMap::new(),
            waits: Vec::new(),
            held_time: Duration::ZERO,
            releases: BinaryHeap::new(),
            leases: HashMap::new(),
            order: 0,
        }
    }

    /// When the next held lease goes back.
    fn next_release(&self) -> Option<Duration> {
        self.releases.peek().map(|Reverse((at, _))| *at)
    }

    /// The next held lease goes back now.
    fn release_next(&mut self) {
        if let Some(Reverse((_, id))) = self.releases.pop() {
            drop(self.leases.remove(&id));
        }
    }

    /// A caller's answer at `now` (the trace's time): a lease is held for
    /// the caller's time from now, a refusal counted. A queued caller's
    /// refusal came at its own timer; a refused caller's wait is not
    /// reported.
    fn answer(&mut self, (index, answer): Answer, now: Duration) {
        match answer {
            Ok(lease) => {
                self.admitted += 1;
                self.waits.push(now.saturating_sub(self.arrivals[index].at));
                self.held_time += self.holds[index] * u32::from(self.arrivals[index].cost.get());
                self.order += 1;
                self.releases
                    .push(Reverse((now + self.holds[index], self.order)));
                self.leases.insert(self.order, lease);
            }
            Err(code) => *self.refused.entry(code).or_default() += 1,
        }
    }

    fn prediction(mut self, setting: Setting) -> Prediction {
        let span = self
            .arrivals
            .last()
            .map_or(Duration::ZERO, |last| last.at)
            .max(Duration::from_millis(1));
        let wait_p50 = percentile(&mut self.waits, 50.0).unwrap_or_default();
        let wait_p99 = percentile(&mut self.waits, 99.0).unwrap_or_default();
        Prediction {
            setting,
            arrivals: self.arrivals.len(),
            admitted: self.admitted,
            refused: self.refused,
            wait_p50,
            wait_p99,
            goodput: self.admitted as f64 / span.as_secs_f64(),
            utilisation: self.held_time.as_secs_f64()
                / (span.as_secs_f64() * setting.capacity as f64),
        }
    }
}

/// One row per prediction; with a `target` share of refusals, the smallest
/// capacity that keeps under it is marked.
#[must_use]
pub fn render(predictions: &[Prediction], target: Option<f64>) -> String {
    let smallest = target.and_then(|target| {
        predictions
            .iter()
            .filter(|p| p.refused_share() <= target)
            .map(|p| p.setting.capacity)
            .min()
    });
    let mut out = String::from(
        "capacity  mode       refused  by code                                    wait p50   wait p99   goodput/s  utilisation\n",
    );
    for p in predictions {
        let codes = p
            .refused
            .iter()
            .map(|(code, n)| format!("{}={n}", code.trim_start_matches("ADMISSION_")))
            .collect::<Vec<_>>()
            .join(" ");
        let mark = if Some(p.setting.capacity) == smallest {
            "  <- smallest under the target"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:>8}  {:<9}  {:>6.2}%  {:<41}  {:>8.1?}  {:>8.1?}  {:>9.1}  {:>10.0}%{mark}",
            p.setting.capacity,
            if p.setting.queue {
                "queue"
            } else {
                "fail-fast"
            },
            p.refused_share() * 100.0,
            if codes.is_empty() {
                "-".to_owned()
            } else {
                codes
            },
            p.wait_p50,
            p.wait_p99,
            p.goodput,
            p.utilisation * 100.0,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use admission_core::Criticality;

    use super::{Arrival, Setting, parse, replay};

    fn at(ms: u64, held: u64) -> Arrival {
        Arrival::new(
            Duration::from_millis(ms),
            Criticality::Default,
            Some(Duration::from_millis(held)),
        )
    }

    const FAIL_FAST: Setting = Setting {
        capacity: 2,
        queue: false,
    };

    #[test]
    fn a_traced_flow_is_replayed_as_that_flow() {
        // Flow A holds both slots; B is refused and so asks; once A's
        // slots are back, A's second request is refused for its share
        // with a slot free, and B's is admitted. Without the flows, A
        // takes both again and B is refused.
        let flow = |arrival: Arrival, flow| Arrival {
            flow: Some(flow),
            ..arrival
        };
        let trace = [
            flow(at(0, 100), 1),
            flow(at(0, 100), 1),
            flow(at(10, 100), 2),
            flow(at(101, 100), 1),
            flow(at(101, 100), 1),
            flow(at(102, 100), 2),
        ];
        let p = replay(&trace, FAIL_FAST, 1);
        assert_eq!(p.admitted, 4, "{p:?}");
        assert_eq!(p.refused["ADMISSION_FLOW_SHARE"], 1, "{p:?}");
        assert_eq!(p.refused["ADMISSION_SATURATED"], 1, "{p:?}");
        let without: Vec<Arrival> = trace.iter().map(|a| Arrival { flow: None, ..*a }).collect();
        let p = replay(&without, FAIL_FAST, 1);
        assert_eq!(p.refused["ADMISSION_SATURATED"], 2, "{p:?}");
        assert!(!p.refused.contains_key("ADMISSION_FLOW_SHARE"), "{p:?}");
    }

    #[test]
    fn a_traced_cost_is_replayed_as_that_many_slots() {
        let walk = Arrival {
            cost: std::num::NonZeroU8::new(2).unwrap(),
            ..at(0, 10)
        };
        let p = replay(&[walk, at(5, 10)], FAIL_FAST, 1);
        assert_eq!(p.admitted, 1, "the walk holds both slots: {p:?}");
        assert_eq!(p.refused["ADMISSION_SATURATED"], 1);
        // Slot time counts both slots of the walk: 2 x 10 ms and 10 ms
        // over the trace's 10 ms on 2 slots.
        let p = replay(&[walk, at(10, 10)], FAIL_FAST, 1);
        assert_eq!(p.admitted, 2, "the walk's slots are back at 10 ms: {p:?}");
        assert!((p.utilisation - 1.5).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn a_slot_freed_before_the_next_arrival_serves_it() {
        let trace = [at(0, 10), at(10, 10), at(20, 10)];
        let p = replay(
            &trace,
            Setting {
                capacity: 1,
                queue: false,
            },
            1,
        );
        assert_eq!((p.admitted, p.refused_share()), (3, 0.0));
        let overlapping = [at(0, 10), at(5, 10), at(20, 10)];
        let p = replay(
            &overlapping,
            Setting {
                capacity: 1,
                queue: false,
            },
            1,
        );
        assert_eq!(p.admitted, 2);
        assert_eq!(p.refused["ADMISSION_SATURATED"], 1);
    }

    #[test]
    fn a_queue_serves_a_burst_a_short_wait_absorbs() {
        // Two at once on one slot: the queue serves the second after the
        // first's 10 ms, on the paused clock.
        let trace = [at(0, 10), at(0, 10), at(100, 10), at(100, 10)];
        let p = replay(
            &trace,
            Setting {
                capacity: 1,
                queue: true,
            },
            1,
        );
        assert_eq!(p.admitted, 4, "{p:?}");
        assert_eq!(p.wait_p99, Duration::from_millis(10));
    }

    #[test]
    fn an_hour_of_a_hundred_a_second_replays_in_seconds() {
        let trace: Vec<Arrival> = (0..360_000).map(|i| at(i * 10, 15)).collect();
        let started = std::time::Instant::now();
        let p = replay(
            &trace,
            Setting {
                capacity: 2,
                queue: false,
            },
            1,
        );
        let took = started.elapsed();
        assert_eq!(p.arrivals, 360_000);
        assert_eq!(p.refused_share(), 0.0, "1.5 slots busy of 2");
        assert!(took < Duration::from_secs(60), "a generous bound: {took:?}");
        println!("an hour at 100/s replayed in {took:?}");
    }

    #[test]
    fn a_line_that_is_not_the_traces_is_named() {
        let err = parse("{\"at_ms\":1}\nnot json", None).unwrap_err();
        assert_eq!(err.line, 1);
        let err = parse(
            "{\"at_ms\":1,\"criticality\":\"default\",\"outcome\":\"admitted\",\"held_ms\":1}\nnot json",
            None,
        )
        .unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn a_cost_no_caller_could_ask_is_named() {
        let line = |cost: &str| {
            format!(
                "{{\"at_ms\":1,\"criticality\":\"default\",\"cost\":{cost},\"outcome\":\"admitted\",\"held_ms\":1}}"
            )
        };
        assert_eq!(parse(&line("255"), None).unwrap()[0].cost.get(), 255);
        for cost in ["0", "256", "-1", "\"4\""] {
            assert!(parse(&line(cost), None).is_err(), "cost {cost}");
        }
    }
}
