//! Handler helpers: registry work from an actix-web handler in one line.
//!
//! This module owns [`registry`] and [`registry_wait`], thin wrappers over
//! [`Pool::run`]. It must never decide a status or a body: the
//! [`WorkError`] they return answers itself through core's
//! [`ResponseError`](actix_web::ResponseError) impl.

use admission_core::{Admission, Pool, RegistryWork, WorkError};

/// Runs registry work (a full metrics-registry walk, a status snapshot) on
/// `pool`'s workers, failing fast when no slot is free: the one line a
/// `/metrics`-style handler needs.
///
/// This is [`Pool::run`] with [`Admission::FailFast`]. Its error is a
/// [`WorkError`], which is an actix-web
/// [`ResponseError`](actix_web::ResponseError) when the work's error is
/// `Debug`, so a handler returns it with `?`: a refusal answers `503` (or
/// `429`) with `Retry-After` and a problem body; work that failed or
/// panicked answers `500` with a code and no message. A panic releases the
/// slot, and the worker thread and the server keep serving.
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
/// [`WorkError::Refused`] when every slot is in use (code
/// `ADMISSION_SATURATED`) or the pool is shutting down,
/// [`WorkError::Failed`] with the work's own error, [`WorkError::Panicked`]
/// when it panicked, [`WorkError::Cancelled`] when shutdown dropped it
/// before it started.
///
/// # Examples
///
/// ```
/// use actix_web::{App, HttpResponse, test, web};
/// use admission_actix::registry;
/// use admission_core::{Pool, WorkError};
///
/// async fn metrics(pool: web::Data<Pool>) -> Result<HttpResponse, WorkError<std::fmt::Error>> {
///     let text = registry(&pool, || Ok("# EOF\n".to_owned())).await?;
///     Ok(HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(text))
/// }
///
/// # #[actix_web::main]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let app = test::init_service(
///     App::new()
///         .app_data(web::Data::new(pool.clone()))
///         .route("/metrics", web::get().to(metrics)),
/// )
/// .await;
///
/// let req = test::TestRequest::get().uri("/metrics").to_request();
/// assert_eq!(test::call_and_read_body(&app, req).await, "# EOF\n");
///
/// // A walk holds the only slot: the next scrape is refused at once.
/// let _walking = pool.try_admit().unwrap();
/// let res = test::call_service(&app, test::TestRequest::get().uri("/metrics").to_request()).await;
/// assert_eq!(res.status(), 503);
/// assert_eq!(res.headers().get("content-type").unwrap(), "application/problem+json");
/// # }
/// ```
pub async fn registry<W: RegistryWork>(
    pool: &Pool,
    work: W,
) -> Result<W::Output, WorkError<W::Error>> {
    pool.run(work, Admission::FailFast).await
}

/// Runs registry work on `pool`'s workers, waiting (first come, first
/// served) for a slot when none is free.
///
/// Prefer [`registry`] in HTTP handlers: a waiting handler is how an
/// unbounded backlog builds up under a scrape storm. Use this one where the
/// callers are already bounded, e.g. one internal endpoint per background
/// walker.
///
/// # Cancel safety
///
/// Cancel safe while waiting: dropped before admission, it takes nothing and
/// keeps no place in the queue. Dropped after admission, the work is **not**
/// cancelled: it runs to its end and keeps its slot until then.
///
/// # Errors
///
/// [`WorkError::Refused`] with `ADMISSION_SHUTTING_DOWN` when the pool is
/// closed, otherwise as [`registry`].
///
/// # Examples
///
/// ```
/// use admission_actix::registry_wait;
/// use admission_core::Pool;
///
/// # #[actix_web::main]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let (end_walk, held) = std::sync::mpsc::channel::<()>();
/// let walk = pool.try_admit().unwrap().offload(move || held.recv().map(|()| "walked"));
///
/// // The only slot is busy: the scrape waits for the walk instead of failing.
/// let (walked, scraped) = tokio::join!(walk, async {
///     let scrape = registry_wait(&pool, || Ok::<_, std::sync::mpsc::RecvError>("scraped"));
///     end_walk.send(()).unwrap();
///     scrape.await
/// });
/// assert_eq!(walked, Ok("walked"));
/// assert_eq!(scraped, Ok("scraped"));
/// # }
/// ```
pub async fn registry_wait<W: RegistryWork>(
    pool: &Pool,
    work: W,
) -> Result<W::Output, WorkError<W::Error>> {
    pool.run(work, Admission::Wait).await
}
