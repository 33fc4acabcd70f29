//! A loop owner's own pool of slots and its execution scope.
//!
//! This module owns [`Reservation`]. It must never take request capacity:
//! its slots and worker threads are its own.

use std::future::Future;
use std::num::NonZeroUsize;

use crate::error::ConfigError;
use crate::pool::{HasPools, Pool, Slot};
use crate::refusal::Refusal;
use crate::request::context::Context;
use crate::scope::Scoped;
use crate::stats::PoolStats;

/// A background owner's reserved slots: N slots and N worker threads that no
/// request can take.
///
/// Size it as the owner's concurrent calls plus one spare: a loop that makes
/// one call at a time gets 2, a consumer with at most 7 concurrent turns gets
/// 8. The spare absorbs one call that outlived its cancelled caller; when
/// orphans hold every slot, a call is refused with
/// `ADMISSION_RESERVATION_EXHAUSTED` naming the reservation.
///
/// # Examples
///
/// ```
/// use admission_core::{Class, RequestPools, Reservation};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let requests = RequestPools::new(1, 1).unwrap();
/// let _every_work_slot = requests.try_lease(Class::Work).unwrap();
/// let recovery = Reservation::new("recovery", 2).unwrap();
/// let done = recovery
///     .execution(async {
///         requests.execute_pure(Class::Work, || Ok::<_, std::fmt::Error>("settled")).await
///     })
///     .await;
/// assert_eq!(done, Ok("settled"), "requests cannot starve the loop");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Reservation {
    pool: Pool,
}

impl Reservation {
    /// A reservation of `slots` slots named `name`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when `slots` is 0 or too large, or `name` is empty;
    /// the message names the reservation.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Reservation;
    ///
    /// let err = Reservation::new("recovery", 0).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "reservation `recovery` has 0 slots: size it as the owner's concurrent calls plus one spare"
    /// );
    /// ```
    pub fn new(name: impl Into<String>, slots: usize) -> Result<Reservation, ConfigError> {
        let pool = Pool::builder(name)
            .capacity(slots)
            .build_reservation()
            .map_err(ConfigError::for_reservation)?;
        Ok(Reservation { pool })
    }

    /// The constructor `#[reserved]` uses: `slots` was checked at compile
    /// time.
    ///
    /// # Panics
    ///
    /// When the operating system refuses to start the worker threads, or
    /// `slots` is above [`MAX_CAPACITY`](crate::pool::MAX_CAPACITY).
    #[doc(hidden)]
    pub fn __for_owner(name: &'static str, slots: NonZeroUsize) -> Reservation {
        match Reservation::new(name, slots.get()) {
            Ok(reservation) => reservation,
            Err(err) => panic!("cannot create reservation `{name}`: {err}"),
        }
    }

    /// Runs `future` with this reservation as the task's context: every pure
    /// call inside takes one of its slots (per call, not per scope), and any
    /// request lease the task inherited is set aside.
    ///
    /// Tasks spawned inside the scope do not inherit it; wrap them in
    /// `execution` of their own.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops the scope; calls it started keep
    /// their slots until they end.
    ///
    /// # Examples
    ///
    /// See the type's example.
    pub fn execution<F: Future>(&self, future: F) -> Scoped<F> {
        Scoped::part(Context::Reservation(self.pool.clone()).part(), future)
    }

    /// Takes one slot or refuses at once with
    /// `ADMISSION_RESERVATION_EXHAUSTED`.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when every slot is held or the reservation is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Code, Reservation};
    ///
    /// let reservation = Reservation::new("recovery", 1).unwrap();
    /// let _slot = reservation.try_admit().unwrap();
    /// assert_eq!(reservation.try_admit().unwrap_err().code(), Code::ReservationExhausted);
    /// ```
    pub fn try_admit(&self) -> Result<Slot, Refusal> {
        self.pool.try_admit()
    }

    /// The reservation's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Reservation;
    ///
    /// assert_eq!(Reservation::new("recovery", 2).unwrap().name(), "recovery");
    /// ```
    pub fn name(&self) -> &str {
        self.pool.name()
    }

    /// The pool behind the reservation.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Reservation;
    ///
    /// assert_eq!(Reservation::new("recovery", 2).unwrap().pool().capacity(), 2);
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A snapshot of its counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Reservation;
    ///
    /// assert_eq!(Reservation::new("recovery", 2).unwrap().stats().in_use, 0);
    /// ```
    pub fn stats(&self) -> PoolStats {
        self.pool.stats()
    }
}

impl HasPools for Reservation {
    fn each_pool(&self, each: &mut dyn FnMut(&Pool)) {
        each(&self.pool);
    }
}
