//! The background loops: one cycle every `--cycle-ms`, pure work in the
//! owner's execution scope, counted and logged by cause.
//!
//! This module owns [`LoopStats`] and the loops' cycles. It must never run a
//! loop's pure work outside its owner's [`execution`](LoopOwner::execution)
//! scope (it would borrow request capacity, the incident's failure) nor log
//! an error's message: a failure is named by its class and code only.

use std::convert::Infallible;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use admission_core::log::log_failure;
use admission_core::shutdown::CancellationToken;
use admission_core::{Class, LoopOwner, Refusal, RequestPools, Reservation, Shutdown};
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::owners::{
    BROKER_TURNS_PER_CYCLE, BrokerConsumer, NativeDispatcher, ProviderLoop, RecoveryLoop,
};

/// How long one pure call of a loop takes: a stand-in for a state transition.
const TRANSITION_COST: Duration = Duration::from_millis(1);

/// Tenants the recovery loop traverses every cycle.
const TENANTS: u64 = 2;

/// The counters of one loop, read by `/status`.
///
/// # Examples
///
/// ```
/// use admission_examples::workflow::LoopStats;
///
/// let stats = LoopStats::default();
/// assert_eq!((stats.cycles(), stats.refusals(), stats.failures()), (0, 0, 0));
/// ```
#[derive(Debug, Default)]
pub struct LoopStats {
    cycles: AtomicU64,
    refusals: AtomicU64,
    failures: AtomicU64,
}

impl LoopStats {
    /// Cycles completed, whatever their calls ended in.
    pub fn cycles(&self) -> u64 {
        self.cycles.load(Relaxed)
    }

    /// Pure calls refused (by the loop's reservation, or by shutdown).
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Relaxed)
    }

    /// Pure calls that ran and failed, panicked or were cancelled.
    pub fn failures(&self) -> u64 {
        self.failures.load(Relaxed)
    }

    /// Counts a call's end; a failure is counted (as a refusal when a
    /// [`Refusal`] is in its source chain) and logged by its cause.
    fn record<T, E>(
        &self,
        result: Result<T, E>,
        operation: &'static str,
        consequence: &'static str,
    ) -> Option<T>
    where
        E: Error + 'static,
    {
        match result {
            Ok(value) => Some(value),
            Err(err) => {
                let counter = if is_refusal(&err) {
                    &self.refusals
                } else {
                    &self.failures
                };
                counter.fetch_add(1, Relaxed);
                log_failure(operation, &err, consequence);
                None
            }
        }
    }
}

/// Whether a [`Refusal`] is anywhere in `err`'s source chain.
fn is_refusal(err: &(dyn Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(current) = next {
        if current.is::<Refusal>() {
            return true;
        }
        next = current.source();
    }
    false
}

/// One loop as `/status` shows it: its name, counters and reservation.
#[derive(Debug, Clone)]
pub(crate) struct LoopEntry {
    pub(crate) name: &'static str,
    pub(crate) stats: Arc<LoopStats>,
    pub(crate) reservation: Reservation,
}

impl LoopEntry {
    fn new(name: &'static str, owner: &impl LoopOwner) -> LoopEntry {
        LoopEntry {
            name,
            stats: Arc::default(),
            reservation: owner.reservation().clone(),
        }
    }
}

/// The four loops, built but not started.
#[derive(Debug, Clone)]
pub(crate) struct Loops {
    recovery: LoopEntry,
    provider: LoopEntry,
    broker: LoopEntry,
    native: LoopEntry,
    dispatcher: NativeDispatcher,
}

impl Loops {
    pub(crate) fn new(dispatcher: NativeDispatcher) -> Loops {
        Loops {
            recovery: LoopEntry::new("recovery", &RecoveryLoop),
            provider: LoopEntry::new("provider", &ProviderLoop),
            broker: LoopEntry::new("broker", &BrokerConsumer),
            native: LoopEntry::new("native", &dispatcher),
            dispatcher,
        }
    }

    /// Every loop, for `/status` and shutdown.
    pub(crate) fn entries(&self) -> [&LoopEntry; 4] {
        [&self.recovery, &self.provider, &self.broker, &self.native]
    }

    /// Starts every loop as a lifespan task of `shutdown`: each stops at its
    /// next tick once shutdown begins.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub(crate) fn spawn(&self, shutdown: &Shutdown, requests: &RequestPools, every: Duration) {
        let start = |entry: &LoopEntry, cycle: Cycle| {
            let (stats, requests) = (Arc::clone(&entry.stats), requests.clone());
            shutdown.spawn_lifespan(move |stop| run(stop, every, stats, requests, cycle));
        };
        start(&self.recovery, Cycle::Recovery);
        start(&self.provider, Cycle::Provider);
        start(&self.broker, Cycle::Broker);
        start(&self.native, Cycle::Native(self.dispatcher.clone()));
    }
}

/// Which loop a cycle belongs to.
#[derive(Debug, Clone)]
enum Cycle {
    Recovery,
    Provider,
    Broker,
    Native(NativeDispatcher),
}

impl Cycle {
    async fn run(&self, requests: &RequestPools, stats: &Arc<LoopStats>, n: u64) {
        match self {
            Cycle::Recovery => recovery(requests, stats, n).await,
            Cycle::Provider => provider(requests, stats, n).await,
            Cycle::Broker => broker(requests, stats, n).await,
            Cycle::Native(dispatcher) => native(dispatcher, requests, stats, n).await,
        }
    }
}

/// Runs `cycle` at once and then every `every`, until `stop` is cancelled;
/// a cycle in progress finishes first.
async fn run(
    stop: CancellationToken,
    every: Duration,
    stats: Arc<LoopStats>,
    requests: RequestPools,
    cycle: Cycle,
) {
    // A zero period would make `interval` panic; 1 ms is the fastest cycle.
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        cycle.run(&requests, &stats, stats.cycles()).await;
        stats.cycles.fetch_add(1, Relaxed);
    }
}

/// A pure state transition standing in for the real ones: a short sleep and
/// a little arithmetic on `seed`.
fn transition(seed: u64) -> impl FnOnce() -> Result<u64, Infallible> + Send + 'static {
    move || {
        std::thread::sleep(TRANSITION_COST);
        Ok((0..64u64).fold(seed, |h, i| h.rotate_left(5) ^ i.wrapping_mul(0x9E37_79B9)))
    }
}

/// Recovery: per tenant, settle expired quanta (a work transition), then
/// timed-out deadlines (a control transition). A failed scan skips the rest
/// of that tenant's cycle; the traversal goes on with the next tenant.
async fn recovery(requests: &RequestPools, stats: &LoopStats, n: u64) {
    RecoveryLoop
        .execution(async {
            for tenant in 0..TENANTS {
                let seed = n.wrapping_mul(TENANTS) + tenant;
                let quanta = requests.execute_pure(Class::Work, transition(seed)).await;
                if stats
                    .record(quanta, "Tenant recovery scan", "; traversal will continue")
                    .is_none()
                {
                    continue;
                }
                let deadlines = requests
                    .execute_pure(Class::Control, transition(!seed))
                    .await;
                stats.record(
                    deadlines,
                    "Tenant recovery scan",
                    "; traversal will continue",
                );
            }
        })
        .await;
}

/// Provider and email receipts: start the provider's runtime step (work),
/// then deliver the receipt signal (control).
async fn provider(requests: &RequestPools, stats: &LoopStats, n: u64) {
    ProviderLoop
        .execution(async {
            let started = requests.execute_pure(Class::Work, transition(n)).await;
            if stats
                .record(
                    started,
                    "Provider receipt cycle",
                    "; receipts stay pending for the next cycle",
                )
                .is_some()
            {
                let delivered = requests.execute_pure(Class::Control, transition(!n)).await;
                stats.record(
                    delivered,
                    "Provider receipt cycle",
                    "; receipts stay pending for the next cycle",
                );
            }
        })
        .await;
}

/// Broker consumer: [`BROKER_TURNS_PER_CYCLE`] concurrent turns, each a task
/// in the consumer's own execution scope delivering one record.
async fn broker(requests: &RequestPools, stats: &LoopStats, n: u64) {
    let mut turns = JoinSet::new();
    for turn in 0..BROKER_TURNS_PER_CYCLE as u64 {
        let requests = requests.clone();
        turns.spawn(BrokerConsumer.execution(async move {
            requests
                .execute_pure(Class::Work, transition(n.rotate_left(8) + turn))
                .await
        }));
    }
    join_all(
        turns,
        stats,
        "Broker consumer turn",
        "; the record is redelivered",
    )
    .await;
}

/// Native dispatcher: every executor runs as many connector executions as
/// its capacity, concurrently, each in the dispatcher's execution scope.
async fn native(dispatcher: &NativeDispatcher, requests: &RequestPools, stats: &LoopStats, n: u64) {
    let mut executions = JoinSet::new();
    for (executor, &capacity) in dispatcher.capacities().as_slice().iter().enumerate() {
        for slot in 0..capacity {
            let requests = requests.clone();
            let seed = n ^ ((executor as u64) << 32) ^ slot as u64;
            executions.spawn(dispatcher.execution(async move {
                requests.execute_pure(Class::Work, transition(seed)).await
            }));
        }
    }
    join_all(
        executions,
        stats,
        "Native connector execution",
        "; the claim is released for the next cycle",
    )
    .await;
}

/// Awaits every task of a cycle, recording each call's end (a task that
/// panicked counts as a failure).
async fn join_all<T, E>(
    mut tasks: JoinSet<Result<T, E>>,
    stats: &LoopStats,
    operation: &'static str,
    consequence: &'static str,
) where
    T: 'static,
    E: Error + 'static,
{
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(result) => {
                stats.record(result, operation, consequence);
            }
            Err(join) => {
                stats.record(Err::<T, _>(join), operation, consequence);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_cycle_runs_while_requests_hold_every_slot() {
        let requests = RequestPools::new(1, 1).unwrap();
        let _work = requests.try_lease(Class::Work).unwrap();
        let _control = requests.try_lease(Class::Control).unwrap();
        let dispatcher = NativeDispatcher::new("2,3".parse().unwrap()).unwrap();
        let stats = Arc::new(LoopStats::default());

        for n in 0..3 {
            recovery(&requests, &stats, n).await;
            provider(&requests, &stats, n).await;
            broker(&requests, &stats, n).await;
            native(&dispatcher, &requests, &stats, n).await;
        }

        assert_eq!(
            stats.refusals(),
            0,
            "request load cannot refuse a reserved owner"
        );
        assert_eq!(stats.failures(), 0, "every call ran");
        for stats in requests.stats() {
            assert_eq!(
                stats.admitted, 1,
                "a reserved owner never takes request capacity ({})",
                stats.name
            );
        }
        let native_stats = dispatcher.reservation().stats();
        assert_eq!(
            native_stats.admitted,
            3 * 5,
            "one slot per native execution"
        );
        assert!(
            native_stats.peak_running <= 6,
            "never more than the reservation runs"
        );
    }

    #[tokio::test]
    async fn a_refused_call_is_counted_as_a_refusal() {
        let requests = RequestPools::new(1, 1).unwrap();
        let reservation = Reservation::new("exhausted", 1).unwrap();
        let _orphan = reservation.try_admit().unwrap();
        let stats = LoopStats::default();

        let refused = reservation
            .execution(requests.execute_pure(Class::Work, transition(1)))
            .await;
        assert!(
            stats
                .record(refused, "Tenant recovery scan", "; traversal will continue")
                .is_none()
        );
        assert_eq!((stats.refusals(), stats.failures()), (1, 0));

        let failed: Result<(), std::io::Error> = Err(std::io::Error::other("tenant 42"));
        assert!(stats.record(failed, "Broker consumer turn", "").is_none());
        assert_eq!(
            (stats.refusals(), stats.failures()),
            (1, 1),
            "not a refusal"
        );
    }
}
