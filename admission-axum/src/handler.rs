//! Helpers that make a handler's registry work one line.
//!
//! This module owns [`registry`], [`registry_wait`] and
//! [`registry_coalesced`], thin wrappers over [`Pool::run`] and
//! [`Coalescing::run`]. They must never decide an answer themselves: the
//! error they return is core's [`WorkError`], which renders its own response.

use std::hash::Hash;

use admission_core::{Admission, Coalescing, Pool, RegistryWork, WorkError};

/// Runs `work` on `pool`'s workers if a slot is free now, else refuses at
/// once: the fail-fast call an HTTP handler makes ([`Pool::run`] with
/// [`Admission::FailFast`]).
///
/// The error is [`IntoResponse`](axum::response::IntoResponse), so a handler
/// returns it with `?` or as its `Result`: a refusal becomes `503` (or the
/// pool's configured `429`) with `Retry-After` and a problem body; a failure
/// or a panic in the work becomes `500` with a problem body that names a
/// code, never the message. The slot is released when the work ends, panic
/// included, and the worker thread keeps serving.
///
/// # Cancel safety
///
/// Dropping the future (the client went away) does **not** cancel work that
/// started: it runs to its end on its thread and keeps its slot until then.
/// Dropped before admission, it takes nothing.
///
/// # Errors
///
/// [`WorkError::Refused`] when no slot is free or the pool is closed,
/// [`WorkError::Failed`] with the work's own error, [`WorkError::Panicked`],
/// or [`WorkError::Cancelled`] when shutdown dropped the work before it
/// started.
///
/// # Examples
///
/// ```
/// use admission_axum::registry;
/// use admission_core::{Pool, WorkError};
/// use axum::{Router, extract::State, routing::get};
///
/// async fn metrics(State(registry_pool): State<Pool>) -> Result<String, WorkError<std::fmt::Error>> {
///     registry(&registry_pool, || Ok("# EOF\n".to_owned())).await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 2).unwrap();
/// let app: Router = Router::new().route("/metrics", get(metrics)).with_state(pool.clone());
/// # drop(app);
/// assert_eq!(registry(&pool, || Ok::<_, std::fmt::Error>(1)).await, Ok(1));
///
/// let panicked = registry(&pool, || -> Result<(), std::fmt::Error> { panic!("walk failed") }).await;
/// assert_eq!(panicked, Err(WorkError::Panicked));
/// assert_eq!(pool.stats().in_use, 0, "the slot is back after the panic");
/// # }
/// ```
pub async fn registry<W: RegistryWork>(
    pool: &Pool,
    work: W,
) -> Result<W::Output, WorkError<W::Error>> {
    pool.run(work, Admission::FailFast).await
}

/// Runs `work` on `pool`'s workers, waiting for a slot first come first
/// served ([`Pool::run`] with [`Admission::Wait`]).
///
/// For callers whose own producer is bounded (a single background walker,
/// an internal endpoint with one caller). An HTTP handler facing the public
/// should use [`registry`]: a waiting request still holds its request lease.
///
/// # Cancel safety
///
/// Cancel safe while waiting: dropped before admission, it takes nothing and
/// leaves the queue. Once the work started, dropping the future does **not**
/// cancel it: it runs to its end and keeps its slot until then.
///
/// # Errors
///
/// [`WorkError::Refused`] with `ADMISSION_SHUTTING_DOWN` when the pool is
/// closed, or the work's own end as [`registry`] describes.
///
/// # Examples
///
/// ```
/// use admission_axum::registry_wait;
/// use admission_core::Pool;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let held = pool.try_admit().unwrap();
/// let waiting = tokio::spawn({
///     let pool = pool.clone();
///     async move { registry_wait(&pool, || Ok::<_, std::fmt::Error>(42)).await }
/// });
/// tokio::task::yield_now().await; // the waiter is queued behind `held`
/// assert!(!waiting.is_finished());
/// drop(held); // the slot frees and the waiter runs
/// assert_eq!(waiting.await.unwrap(), Ok(42));
/// # }
/// ```
pub async fn registry_wait<W: RegistryWork>(
    pool: &Pool,
    work: W,
) -> Result<W::Output, WorkError<W::Error>> {
    pool.run(work, Admission::Wait).await
}

/// Runs `work` as the walk for `key`, or joins the walk for `key` already
/// running if it started within the staleness bound of `scrapes`; a caller
/// that cannot join fails fast like [`registry`] ([`Coalescing::run`] with
/// [`Admission::FailFast`]).
///
/// This is the coalescing mode of [`registry`]: build one [`Coalescing`]
/// over the registry pool at startup and pass it instead of the pool.
/// Scrapes that arrive together cost one walk; every one of them gets the
/// same result (make it cheap to clone, e.g. `Bytes`, so a body is shared
/// rather than copied per caller). Joining takes no slot and starts no work,
/// and `work` is then dropped unrun. A walk that failed or panicked answers
/// every caller that shared it with the same `500`, and the next caller
/// starts a fresh walk.
///
/// # Cancel safety
///
/// Dropping the future does **not** cancel a walk that started: it runs to
/// its end on its thread and keeps its slot until then, whoever still
/// waits; if every caller went away, a failure is reported once by the
/// pool. A caller that joined and then went away costs nothing. Dropped
/// before admission, it takes nothing.
///
/// # Errors
///
/// As [`registry`], shared by every caller of one walk:
/// [`WorkError::Refused`] when it could not join and no slot is free,
/// [`WorkError::Failed`], [`WorkError::Panicked`] or
/// [`WorkError::Cancelled`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_axum::registry_coalesced;
/// use admission_core::{Coalescing, Pool, WorkError};
/// use axum::{Router, extract::State, routing::get};
/// use bytes::Bytes;
///
/// type Scrapes = Coalescing<&'static str, Bytes, std::fmt::Error>;
///
/// async fn metrics(State(scrapes): State<Scrapes>) -> Result<Bytes, WorkError<std::fmt::Error>> {
///     registry_coalesced(&scrapes, "/metrics", || Ok(Bytes::from_static(b"# EOF\n"))).await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(1)).unwrap();
/// let app: Router = Router::new().route("/metrics", get(metrics)).with_state(scrapes.clone());
/// # drop(app);
///
/// // Two scrapes arrive while the walk is held: one walk answers both.
/// let (release, held) = std::sync::mpsc::channel::<()>();
/// let walk = move || held.recv().map(|()| Bytes::from_static(b"# EOF\n")).map_err(|_| std::fmt::Error);
/// let first = registry_coalesced(&scrapes, "/metrics", walk);
/// let second = registry_coalesced(&scrapes, "/metrics", || unreachable!("it joins"));
/// // `join!` polls in order: the walk starts, the second scrape joins it,
/// // and only then is the walk released.
/// let (a, b, ()) = tokio::join!(first, second, async { release.send(()).unwrap() });
/// assert_eq!(a.unwrap(), b.unwrap());
/// assert_eq!(pool.stats().coalesced, 1, "the second scrape joined");
/// assert_eq!(pool.stats().finished, 1, "one walk ran");
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
