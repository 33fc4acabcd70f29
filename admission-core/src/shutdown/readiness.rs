//! Readiness: whether a balancer should send this replica new work.
//!
//! This module owns [`Readiness`]. It turns "not ready" once, when
//! readiness is withdrawn or shutdown begins, and never turns back; it must
//! never look at the pools (a saturated replica is still ready: a balancer
//! that ejects every saturated replica turns a storm into an outage), and
//! never stop anything itself.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Shutdown;

/// Whether this replica accepts new work: ready until readiness is
/// withdrawn ([`withdraw`](Self::withdraw), or
/// [`withdraw_for`](Self::withdraw_for) at the stop signal) or shutdown
/// begins, and never ready again after that.
///
/// Readiness is not liveness: a `/healthz` answer stays `200` while the
/// process serves, a `/readyz` answer built on this turns `503` at the stop
/// signal so that the balancer stops routing here while in-flight and
/// late-routed requests are still served. Saturation never changes it: a
/// full pool refuses with `503` + `Retry-After` and the balancer retries
/// elsewhere, but the replica stays in rotation.
///
/// Every `Readiness` made from one [`Shutdown`] (and every clone) shares the
/// same state.
///
/// # Examples
///
/// ```
/// use admission_core::Shutdown;
/// use admission_core::shutdown::Readiness;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let shutdown = Shutdown::default();
/// let readiness = Readiness::new(&shutdown);
/// assert!(readiness.is_ready());
///
/// readiness.withdraw(); // the stop signal: the balancer must stop routing here
/// assert!(!Readiness::new(&shutdown).is_ready(), "one state per shutdown");
/// shutdown.shutdown().await;
/// assert!(!readiness.is_ready(), "never ready again");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Readiness {
    withdrawn: CancellationToken,
}

impl Readiness {
    /// The readiness of the replica `shutdown` stops: ready until
    /// withdrawn or until `shutdown` begins.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Shutdown;
    /// use admission_core::shutdown::Readiness;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::default();
    /// let readiness = Readiness::new(&shutdown);
    /// shutdown.shutdown().await;
    /// assert!(!readiness.is_ready(), "shutdown withdraws readiness too");
    /// # }
    /// ```
    pub fn new(shutdown: &Shutdown) -> Readiness {
        Readiness {
            withdrawn: shutdown.readiness_token(),
        }
    }

    /// Whether the replica accepts new work. One atomic load.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Shutdown;
    /// use admission_core::shutdown::Readiness;
    ///
    /// assert!(Readiness::new(&Shutdown::default()).is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        !self.withdrawn.is_cancelled()
    }

    /// Not ready from now on, for good. Idempotent.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Shutdown;
    /// use admission_core::shutdown::Readiness;
    ///
    /// let readiness = Readiness::new(&Shutdown::default());
    /// readiness.withdraw();
    /// readiness.withdraw();
    /// assert!(!readiness.is_ready());
    /// ```
    pub fn withdraw(&self) {
        self.withdrawn.cancel();
    }

    /// Completes once readiness is withdrawn (at once if it already is).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it only stops waiting.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Shutdown;
    /// use admission_core::shutdown::Readiness;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::default();
    /// let readiness = Readiness::new(&shutdown);
    /// let waiting = tokio::spawn({
    ///     let readiness = readiness.clone();
    ///     async move { readiness.withdrawn().await }
    /// });
    /// shutdown.shutdown().await;
    /// waiting.await.unwrap();
    /// # }
    /// ```
    pub async fn withdrawn(&self) {
        self.withdrawn.cancelled().await;
    }

    /// The preStop step of a stop: withdraws readiness at once, then keeps
    /// the replica serving for `delay` so that the balancer sees "not
    /// ready" (its check interval times its fall count) and stops routing
    /// here before the listener closes. Count the shutdown deadline from
    /// when this returns.
    ///
    /// The delay is a library piece, not each app's: every replica behind a
    /// balancer needs the same three steps in the same order (not ready,
    /// keep serving, then close and drain under the deadline), and the one
    /// mistake that costs errors at the client, closing the listener before
    /// the balancer has looked, is the one this order rules out. The app
    /// still owns its listener and calls this between its stop signal and
    /// closing it. Under Kubernetes the same delay can instead be a
    /// `preStop` hook's sleep (KEP-3960); then pass zero here.
    ///
    /// # Cancel safety
    ///
    /// Readiness is withdrawn at the first poll; dropping the future after
    /// that only ends the delay early, and readiness stays withdrawn.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::Shutdown;
    /// use admission_core::shutdown::Readiness;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let shutdown = Shutdown::new(Duration::from_secs(5)).unwrap();
    /// let readiness = Readiness::new(&shutdown);
    /// // On SIGTERM:
    /// readiness.withdraw_for(Duration::from_millis(10)).await;
    /// assert!(!readiness.is_ready());
    /// let report = shutdown.shutdown().await; // the deadline counts from here
    /// assert!(report.drained());
    /// # }
    /// ```
    pub async fn withdraw_for(&self, delay: Duration) {
        self.withdraw();
        tracing::info!(
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "readiness withdrawn; serving on through the drain delay"
        );
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }
}
