//! Coalescing identical registry work: callers of one key that arrive while
//! its walk runs share that walk's result instead of starting their own.
//!
//! This module owns [`Coalescing`]. Joining a walk takes no slot and starts no
//! work. It must never let a shared walk free its slot before its thread ends
//! (all callers gone or not), and never report a failure more than once. A
//! walk whose every caller has gone counts as a running orphan until it ends
//! or a caller joins it again.
//!
//! A walk's age is read on tokio's clock ([`tokio::time::Instant`]), always
//! on the caller's side (the walk is registered and looked up by callers,
//! never by the worker thread), so a test on a paused clock decides when a
//! walk goes stale.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::ConfigError;
use crate::pool::job::{HeldCapacity, Job};
use crate::pool::stats::Listeners;
use crate::pool::{Admission, Pool, RegistryWork, Slot, WorkError};

/// The shared outcome of one walk, `None` until it ends.
type Outcome<T, E> = Option<Result<T, WorkError<E>>>;

/// A walk under way for one key.
struct Flight<T, E> {
    id: u64,
    started: Instant,
    rx: watch::Receiver<Outcome<T, E>>,
    /// The callers waiting for it.
    listeners: Arc<Listeners>,
}

/// A caller waiting for a walk's outcome; dropped when it returns or its
/// future is dropped, when it stops listening.
struct Listening {
    pool: Pool,
    listeners: Arc<Listeners>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        // After the walk ended this changes nothing; before, the last
        // caller to go makes the walk a running orphan.
        self.listeners.leave(self.pool.counters());
    }
}

/// A receiver on a walk's outcome, with the caller counted as listening.
type Listener<T, E> = (watch::Receiver<Outcome<T, E>>, Listening);

/// How a caller takes part in a walk.
enum Joined<T, E> {
    /// It started the walk.
    Walk(Listener<T, E>),
    /// It joined a walk already running.
    Shared(Listener<T, E>),
}

struct Flights<K, T, E> {
    next_id: u64,
    by_key: HashMap<K, Flight<T, E>>,
}

/// Registry work identified by a key, coalesced: a caller that arrives while
/// a walk for the same key is running, and started no longer ago than the
/// staleness bound, joins it and receives the same result; otherwise it goes
/// through normal admission on the pool.
///
/// Results are cloned per caller, so make them cheap to clone (`Bytes`,
/// `Arc<str>`): a large body is then shared, not copied.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::{Admission, Coalescing, Pool};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let scrapes = Coalescing::new(&pool, Duration::from_millis(500)).unwrap();
/// let (release, held) = std::sync::mpsc::channel::<()>();
/// let walk = move || held.recv().map(|()| std::sync::Arc::<str>::from("# EOF\n"));
///
/// // Two scrapes of `/metrics` arrive together: one walk serves both.
/// let first = scrapes.run("/metrics", walk, Admission::FailFast);
/// let second = scrapes.run("/metrics", || unreachable!("joins instead"), Admission::FailFast);
/// // The walk is released only once both callers are in.
/// let (a, b, ()) = tokio::join!(first, second, async { release.send(()).unwrap() });
/// assert_eq!(a.unwrap(), b.unwrap());
/// assert_eq!(pool.stats().coalesced, 1);
/// assert_eq!(pool.stats().finished, 1, "one walk");
/// # }
/// ```
pub struct Coalescing<K, T, E> {
    pool: Pool,
    staleness: Duration,
    flights: Arc<Mutex<Flights<K, T, E>>>,
}

impl<K, T, E> Clone for Coalescing<K, T, E> {
    fn clone(&self) -> Self {
        Coalescing {
            pool: self.pool.clone(),
            staleness: self.staleness,
            flights: Arc::clone(&self.flights),
        }
    }
}

impl<K, T, E> fmt::Debug for Coalescing<K, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coalescing")
            .field("pool", &self.pool.name())
            .field("staleness", &self.staleness)
            .finish_non_exhaustive()
    }
}

impl<K, T, E> Coalescing<K, T, E>
where
    K: Hash + Eq + Clone + Send + 'static,
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    /// Coalesces work on `pool`; a running walk is joined only while it
    /// started no longer ago than `staleness`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroStaleness`] for a zero bound (nothing could ever
    /// join: leave coalescing off instead).
    pub fn new(pool: &Pool, staleness: Duration) -> Result<Self, ConfigError> {
        if staleness.is_zero() {
            return Err(ConfigError::ZeroStaleness {
                pool: pool.name().to_owned(),
            });
        }
        Ok(Coalescing {
            pool: pool.clone(),
            staleness,
            flights: Arc::new(Mutex::new(Flights {
                next_id: 0,
                by_key: HashMap::new(),
            })),
        })
    }

    /// The pool the walks run on.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Joins the running walk for `key` if it is fresh enough, or else
    /// admits (as `admission` says) and starts `work` as the walk others may
    /// join. Joining takes no slot; `work` is then dropped unrun.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future never cancels a walk: it runs to its end and holds
    /// its slot until then, whoever is still waiting. If every caller has
    /// gone, a failure is reported once as an orphan failure. A caller that
    /// joined and then dropped costs nothing.
    ///
    /// # Errors
    ///
    /// As [`Pool::run`]; every caller of one walk gets the same error.
    pub async fn run<W>(&self, key: K, work: W, admission: Admission) -> Result<T, WorkError<E>>
    where
        W: RegistryWork<Output = T, Error = E>,
    {
        let (mut rx, _listening) = match self.join_or_admit(key, work, admission).await? {
            Joined::Walk(listener) => listener,
            Joined::Shared(listener) => {
                self.pool.counters().count_coalesced();
                listener
            }
        };
        let shared = rx.wait_for(Option::is_some).await;
        match shared {
            Ok(outcome) => outcome.clone().unwrap_or(Err(WorkError::Cancelled)),
            // The walk was dropped before it started (shutdown).
            Err(_closed) => Err(WorkError::Cancelled),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Flights<K, T, E>> {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the fresh walk for `key`, or admits and starts one. For a
    /// fail-fast caller the look-up and the admission happen under one lock,
    /// so two callers arriving together never both miss the other's walk; a
    /// waiting caller looks again once admitted and joins a walk that started
    /// meanwhile (its unused slot goes straight back).
    async fn join_or_admit<W>(
        &self,
        key: K,
        work: W,
        admission: Admission,
    ) -> Result<Joined<T, E>, WorkError<E>>
    where
        W: RegistryWork<Output = T, Error = E>,
    {
        {
            let mut flights = self.lock();
            if let Some(listener) = self.fresh(&flights, &key) {
                return Ok(Joined::Shared(listener));
            }
            if admission == Admission::FailFast {
                let slot = self.pool.try_admit_for_work(self.pool.saturated_code())?;
                return Ok(Joined::Walk(self.start(&mut flights, key, slot, work)));
            }
        }
        // The unused slot of a waiter that joins after all goes back when
        // `slot` drops at the end of this function.
        let slot = self.pool.admit_with(admission).await?;
        let mut flights = self.lock();
        if let Some(listener) = self.fresh(&flights, &key) {
            return Ok(Joined::Shared(listener));
        }
        Ok(Joined::Walk(self.start(&mut flights, key, slot, work)))
    }

    /// A receiver on the fresh walk for `key`, if there is one, with the
    /// caller counted as listening (under the caller's lock, so the walk
    /// cannot end unseen in between).
    fn fresh(&self, flights: &Flights<K, T, E>, key: &K) -> Option<Listener<T, E>> {
        let flight = flights.by_key.get(key)?;
        if flight.started.elapsed() > self.staleness {
            return None;
        }
        flight.listeners.listen(self.pool.counters());
        let listening = Listening {
            pool: self.pool.clone(),
            listeners: Arc::clone(&flight.listeners),
        };
        Some((flight.rx.clone(), listening))
    }

    /// Starts the walk for `key` with `slot` moved into it.
    /// The flight is registered under the caller's lock, so it is visible
    /// before anyone else can look.
    fn start<W>(
        &self,
        flights: &mut Flights<K, T, E>,
        key: K,
        slot: Slot,
        work: W,
    ) -> Listener<T, E>
    where
        W: RegistryWork<Output = T, Error = E>,
    {
        let (tx, rx) = watch::channel(None);
        let listeners = Arc::new(Listeners::new());
        let id = flights.next_id;
        flights.next_id += 1;
        flights.by_key.insert(
            key.clone(),
            Flight {
                id,
                started: Instant::now(),
                rx: rx.clone(),
                listeners: Arc::clone(&listeners),
            },
        );
        let flights = Arc::clone(&self.flights);
        let job = Job::new(self.pool.clone(), HeldCapacity::Slot(slot), work);
        job.spawn_with(Arc::clone(&listeners), move |result, hold| {
            // The next caller starts a fresh walk; a newer flight for the
            // key (one that replaced a stale one) stays. The slot goes back
            // under the same lock, so a caller never finds the walk gone
            // while its slot is still held.
            {
                let mut flights = flights.lock().unwrap_or_else(PoisonError::into_inner);
                if flights.by_key.get(&key).is_some_and(|f| f.id == id) {
                    flights.by_key.remove(&key);
                }
                if tx.receiver_count() == 0 {
                    // Nobody is listening: reported as an orphan, then released.
                    return Err((result, hold));
                }
                drop(hold);
            }
            tx.send_replace(Some(result));
            Ok(())
        });
        let listening = Listening {
            pool: self.pool.clone(),
            listeners,
        };
        (rx, listening)
    }
}
