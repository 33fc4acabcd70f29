//! Handler helpers: registry work from an HTTP handler in one line.
//!
//! This module owns [`registry`], [`registry_wait`] and
//! [`registry_coalesced`], thin wrappers over [`Pool::run`] and
//! [`Coalescing::run`] that both web adapters re-export. They must never
//! decide an answer: the [`WorkError`] they return renders itself (`503` +
//! `Retry-After` for a refusal, `500` for a failure or a panic) through the
//! `axum` and `actix` features.

use std::hash::Hash;

use crate::{Admission, Coalescing, Pool, RegistryWork, WorkError};

/// Runs registry work (a full metrics-registry walk, a status snapshot) on
/// `pool`'s workers, failing fast when no slot is free: the one line a
/// `/metrics`-style handler needs. This is [`Pool::run`] with
/// [`Admission::FailFast`].
///
/// A handler returns the error with `?` or as its `Result`: a refusal
/// answers `503` (or the pool's `429`) with `Retry-After` and a problem
/// body; work that failed or panicked answers `500` with a code and no
/// message. A panic releases the slot, and the worker thread keeps serving.
///
/// # Cancel safety
///
/// Dropping the future before admission takes nothing. Dropping it after
/// admission (the client went away) does **not** cancel the work: it runs to
/// its end on its worker thread and keeps its slot until then; a failure of
/// such orphaned work is reported by the pool.
///
/// # Errors
///
/// [`WorkError::Refused`] when every slot is in use or the pool is shutting
/// down, [`WorkError::Failed`] with the work's own error,
/// [`WorkError::Panicked`] when it panicked, [`WorkError::Cancelled`] when
/// shutdown dropped it before it started.
///
/// # Examples
///
/// ```
/// use admission_core::{Code, Pool, WorkError, registry};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// assert_eq!(registry(&pool, || Ok::<_, std::fmt::Error>("# EOF\n")).await, Ok("# EOF\n"));
///
/// let panicked = registry(&pool, || -> Result<(), std::fmt::Error> { panic!("walk failed") }).await;
/// assert_eq!(panicked, Err(WorkError::Panicked));
/// assert_eq!(pool.stats().in_use, 0, "the slot is back after the panic");
///
/// // A walk holds the only slot: the next scrape is refused at once.
/// let _walking = pool.try_admit().unwrap();
/// let refused = registry(&pool, || Ok::<_, std::fmt::Error>("# EOF\n")).await.unwrap_err();
/// assert_eq!(refused.refusal().unwrap().code(), Code::Saturated);
/// # }
/// ```
pub async fn registry<W: RegistryWork>(
    pool: &Pool,
    work: W,
) -> Result<W::Output, WorkError<W::Error>> {
    pool.run(work, Admission::FailFast).await
}

/// Runs registry work on `pool`'s workers, waiting (first come, first
/// served) for a slot: for callers whose producer is already bounded, such as
/// a background cardinality walk. This is [`Pool::run`] with
/// [`Admission::Wait`].
///
/// # Cancel safety
///
/// As [`registry`]: a waiter dropped before admission takes nothing and
/// keeps no place in the queue.
///
/// # Errors
///
/// As [`registry`]; the only refusal is `ADMISSION_SHUTTING_DOWN`.
///
/// # Examples
///
/// ```
/// use admission_core::{Pool, registry_wait};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let held = pool.try_admit().unwrap();
/// let waiting = registry_wait(&pool, || Ok::<_, std::fmt::Error>(42));
/// drop(held); // the slot frees; the waiter gets it
/// assert_eq!(waiting.await, Ok(42));
/// # }
/// ```
pub async fn registry_wait<W: RegistryWork>(
    pool: &Pool,
    work: W,
) -> Result<W::Output, WorkError<W::Error>> {
    pool.run(work, Admission::Wait).await
}

/// Runs coalesced registry work: joins the walk already running for `key`
/// (no slot, no new work) or starts one, failing fast when that needs a slot
/// and none is free. This is [`Coalescing::run`] with
/// [`Admission::FailFast`].
///
/// # Cancel safety
///
/// As [`Coalescing::run`]: dropping the future never cancels a walk; a
/// caller that joined and then dropped costs nothing.
///
/// # Errors
///
/// As [`registry`]; every caller of one walk gets the same error.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use admission_core::{Coalescing, Pool, registry_coalesced};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let scrapes = Coalescing::new(&pool, Duration::from_secs(1)).unwrap();
/// let (release, held) = std::sync::mpsc::channel::<()>();
/// let first = registry_coalesced(&scrapes, "/metrics", move || {
///     held.recv().map(|()| Arc::<str>::from("# EOF\n"))
/// });
/// let second = registry_coalesced(&scrapes, "/metrics", || unreachable!("joins instead"));
/// let (a, b, ()) = tokio::join!(first, second, async { release.send(()).unwrap() });
/// assert_eq!(a.unwrap(), b.unwrap());
/// assert_eq!(pool.stats().coalesced, 1);
/// # }
/// ```
pub async fn registry_coalesced<K, T, E, W>(
    scrapes: &Coalescing<K, T, E>,
    key: K,
    work: W,
) -> Result<T, WorkError<E>>
where
    K: Hash + Eq + Clone + Send + 'static,
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
    W: RegistryWork<Output = T, Error = E>,
{
    scrapes.run(key, work, Admission::FailFast).await
}
