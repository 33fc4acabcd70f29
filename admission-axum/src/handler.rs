//! Helpers that make a handler's registry work one line.
//!
//! This module owns [`registry`] and [`registry_wait`], thin wrappers over
//! [`Pool::run`]. They must never decide an answer themselves: the error they
//! return is core's [`WorkError`], which renders its own response.

use admission_core::{Admission, Pool, RegistryWork, WorkError};

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
