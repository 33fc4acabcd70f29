//! The shutdown coordinator: lifespan loops, registered pools and one
//! absolute deadline for all of them.
//!
//! This module owns [`Shutdown`]. It must never block a runtime thread, never
//! spend more than one deadline however many pools it drains, and never run
//! twice: every call returns the first call's report.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::drain::{self, Hook};
use super::report::ShutdownReport;
use crate::error::ConfigError;
use crate::pool::{HasPools, Pool};
use crate::scope::{self, Scope, Scoped};

/// The default shutdown deadline: 5 s.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);

/// One shutdown for the whole app: it signals the lifespan loops, closes and
/// drains every registered pool concurrently, and reports per pool whether it
/// drained or was abandoned, all by one absolute deadline.
///
/// Draining never blocks a runtime thread: worker threads are joined on a
/// coordinator thread per pool and the async side only waits for a message.
/// Queued work that had not started is cancelled. Cleanup hooks run only
/// after a pool's workers have stopped, and never for an abandoned pool.
/// Threads cannot be killed: past the deadline, the process exit is the
/// fallback, and the report (and a WARN event) says what was still running.
///
/// Clones share the same coordinator.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::{Pool, Shutdown};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let shutdown = Shutdown::new(Duration::from_secs(2)).unwrap();
/// let pool = Pool::new("registry", 2).unwrap();
/// shutdown.register(&pool);
/// shutdown.spawn_lifespan(|stop| async move { stop.cancelled().await });
///
/// let report = shutdown.shutdown().await;
/// assert!(report.pools[0].drained);
/// assert_eq!(report.loops_stopped, 1);
/// assert_eq!(shutdown.shutdown().await, report, "idempotent");
/// assert!(pool.try_admit().is_err(), "a drained pool refuses");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    deadline: Duration,
    stop: CancellationToken,
    /// Cancelled when readiness is withdrawn; a child of `stop`, so
    /// shutdown withdraws it too ([`crate::shutdown::Readiness`]).
    ready: CancellationToken,
    pools: Mutex<Vec<Registered>>,
    loops: Mutex<Vec<JoinHandle<()>>>,
    report: OnceCell<ShutdownReport>,
}

struct Registered {
    pool: Pool,
    hooks: Vec<Hook>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("pool", &self.pool.name())
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl Default for Shutdown {
    /// A coordinator with the [`DEFAULT_DEADLINE`].
    fn default() -> Self {
        Shutdown::with_deadline(DEFAULT_DEADLINE)
    }
}

impl Shutdown {
    /// A coordinator whose [`shutdown`](Self::shutdown) allows `deadline`
    /// from the moment it is called.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroDeadline`] for a zero deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::{ConfigError, Shutdown};
    ///
    /// assert_eq!(Shutdown::new(Duration::ZERO).unwrap_err(), ConfigError::ZeroDeadline);
    /// assert_eq!(Shutdown::new(Duration::from_secs(5)).unwrap().deadline(), Duration::from_secs(5));
    /// ```
    pub fn new(deadline: Duration) -> Result<Shutdown, ConfigError> {
        if deadline.is_zero() {
            return Err(ConfigError::ZeroDeadline);
        }
        Ok(Shutdown::with_deadline(deadline))
    }

    fn with_deadline(deadline: Duration) -> Shutdown {
        let stop = CancellationToken::new();
        Shutdown {
            inner: Arc::new(Inner {
                deadline,
                ready: stop.child_token(),
                stop,
                pools: Mutex::new(Vec::new()),
                loops: Mutex::new(Vec::new()),
                report: OnceCell::new(),
            }),
        }
    }

    /// The configured deadline.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    /// Registers every pool `owner` has to be drained: a [`Pool`], the
    /// [`RequestPools`](crate::RequestPools), a
    /// [`Reservation`](crate::Reservation) or a
    /// [`LoopOwner`](crate::LoopOwner). Registering a pool twice is harmless.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Pool, RequestPools, Shutdown};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::default();
    /// let registry = Pool::new("registry", 1).unwrap();
    /// shutdown.register(&registry);
    /// shutdown.register(&RequestPools::new(2, 4).unwrap());
    /// shutdown.register(&registry);
    /// assert_eq!(shutdown.shutdown().await.pools.len(), 3);
    /// # }
    /// ```
    pub fn register<P: HasPools + ?Sized>(&self, owner: &P) {
        owner.each_pool(&mut |pool| self.registered(pool, |_| ()));
    }

    /// Registers `hook` to run once `pool`'s worker threads have stopped
    /// (and registers the pool). The hook runs on the drain's own thread, so
    /// it may block; it never runs if the pool is abandoned. A hook that
    /// panics is reported and the others still run.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use admission_core::{Pool, Shutdown};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::default();
    /// let pool = Pool::new("sdk", 1).unwrap();
    /// let closed = Arc::new(AtomicBool::new(false));
    /// let flag = Arc::clone(&closed);
    /// shutdown.on_drained(&pool, move || flag.store(true, Ordering::SeqCst));
    /// let report = shutdown.shutdown().await;
    /// assert_eq!(report.pools[0].cleanups_ran, 1);
    /// assert!(closed.load(Ordering::SeqCst));
    /// # }
    /// ```
    pub fn on_drained(&self, pool: &Pool, hook: impl FnOnce() + Send + 'static) {
        self.registered(pool, |hooks| hooks.push(Box::new(hook)));
    }

    fn registered(&self, pool: &Pool, with: impl FnOnce(&mut Vec<Hook>)) {
        let mut pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = pools.iter_mut().find(|r| r.pool.same_pool(pool)) {
            with(&mut found.hooks);
        } else {
            let mut hooks = Vec::new();
            with(&mut hooks);
            pools.push(Registered {
                pool: pool.clone(),
                hooks,
            });
        }
    }

    /// A token cancelled when shutdown begins, for loops and servers that
    /// were not started with [`spawn_lifespan`](Self::spawn_lifespan) (an
    /// HTTP server's graceful shutdown, say) and must stop with the rest.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Shutdown;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::default();
    /// let stop = shutdown.stop_token();
    /// assert!(!stop.is_cancelled());
    /// shutdown.shutdown().await;
    /// assert!(stop.is_cancelled());
    /// # }
    /// ```
    pub fn stop_token(&self) -> CancellationToken {
        self.inner.stop.clone()
    }

    /// The token every [`Readiness`](crate::shutdown::Readiness) of this
    /// shutdown shares: cancelled when readiness is withdrawn or shutdown
    /// begins, whichever comes first.
    pub(crate) fn readiness_token(&self) -> CancellationToken {
        self.inner.ready.clone()
    }

    /// Starts a lifespan loop: `make` gets a token that is cancelled when
    /// shutdown begins, and the loop runs in an **empty** context (no request
    /// lease, no reservation) even when called from inside a request. The
    /// loop is awaited by shutdown and aborted at the deadline.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime; the panic names the caller's
    /// line.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, Lease, RequestPools, Shutdown};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let shutdown = Shutdown::default();
    /// let (tx, rx) = tokio::sync::oneshot::channel();
    /// let lease = requests.try_lease(Class::Work).unwrap();
    /// lease
    ///     .scope(async {
    ///         shutdown.spawn_lifespan(|_stop| async move {
    ///             tx.send(Lease::current().is_none()).unwrap();
    ///         });
    ///     })
    ///     .await;
    /// assert!(rx.await.unwrap(), "a loop started in a request has no lease");
    /// # }
    /// ```
    #[track_caller]
    pub fn spawn_lifespan<F, Fut>(&self, make: F)
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // The loop is *built* in an empty scope too: whatever `make`
        // captures from a request's scope, it does not capture its lease or
        // its caller.
        let loop_future = scope::sync_scope(Scope::default(), || make(self.inner.stop.clone()));
        let future = Scoped::whole(Scope::default(), loop_future);
        let handle = tokio::spawn(future);
        self.inner
            .loops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
    }

    /// Shuts down with the configured deadline counted from now.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: once begun, pools are closed and drain
    /// threads run whether or not this future is polled. A later call
    /// completes the same shutdown and returns its report.
    pub async fn shutdown(&self) -> ShutdownReport {
        self.shutdown_by(Instant::now() + self.inner.deadline).await
    }

    /// Shuts down by the absolute `deadline` (e.g. counted from a signal).
    /// A deadline already past is honoured at once: pools are closed and
    /// reported as they stand, and a WARN event says so.
    ///
    /// It is idempotent: a second call, even a concurrent one, returns the
    /// first call's report without draining again.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown`](Self::shutdown).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Pool, Shutdown};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::default();
    /// let pool = Pool::new("registry", 1).unwrap();
    /// shutdown.register(&pool);
    /// let past = tokio::time::Instant::now() - std::time::Duration::from_secs(1);
    /// let report = shutdown.shutdown_by(past).await;
    /// assert!(report.deadline_already_passed);
    /// assert!(pool.is_closed());
    /// # }
    /// ```
    pub async fn shutdown_by(&self, deadline: Instant) -> ShutdownReport {
        self.inner
            .report
            .get_or_init(|| self.run(deadline))
            .await
            .clone()
    }

    async fn run(&self, deadline: Instant) -> ShutdownReport {
        let started = Instant::now();
        let deadline_already_passed = deadline <= started;
        if deadline_already_passed {
            tracing::warn!("shutdown deadline already passed; reporting pools as they stand");
        }
        // Loops hear first; pools close in the same instant so that nothing
        // new starts while they wind down, and all drains share the deadline.
        self.inner.stop.cancel();
        let registered = std::mem::take(
            &mut *self
                .inner
                .pools
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let drains: Vec<_> = registered
            .into_iter()
            .map(|r| drain::start(r.pool, r.hooks))
            .collect();

        let loops = std::mem::take(
            &mut *self
                .inner
                .loops
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let (mut loops_stopped, mut loops_aborted) = (0, 0);
        for mut handle in loops {
            if tokio::time::timeout_at(deadline, &mut handle).await.is_ok() {
                loops_stopped += 1;
            } else {
                handle.abort();
                loops_aborted += 1;
                tracing::warn!("lifespan loop still running at the shutdown deadline; aborted");
            }
        }

        // Every drain is already under way; waiting for them one after the
        // other costs the slowest, not the sum.
        let mut pools = Vec::with_capacity(drains.len());
        for drain in drains {
            pools.push(drain.finish(deadline).await);
        }
        ShutdownReport {
            pools,
            loops_stopped,
            loops_aborted,
            deadline_already_passed,
            elapsed: started.elapsed(),
        }
    }
}
