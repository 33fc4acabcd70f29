//! Handler helpers: registry work from an actix-web handler in one line.
//!
//! This module owns [`registry`], [`registry_wait`] and
//! [`registry_coalesced`], thin wrappers over [`Pool::run`] and
//! [`Coalescing::run`]. It must never decide a status or a body: the
//! [`WorkError`] they return answers itself through core's
//! [`ResponseError`](actix_web::ResponseError) impl.

use std::hash::Hash;

use admission_core::{Admission, Coalescing, Pool, RegistryWork, WorkError};

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

/// Runs registry work as the walk for `key`, or joins the walk for `key`
/// already running if it started within the staleness bound of `scrapes`;
/// a caller that cannot join fails fast like [`registry`]
/// ([`Coalescing::run`] with [`Admission::FailFast`]).
///
/// This is the coalescing mode of [`registry`]: build one [`Coalescing`]
/// over the registry pool before the server starts and give handlers that
/// instead of the pool. Scrapes that arrive together (an HA pair of
/// Prometheus replicas and a dashboard) cost one walk, and every one of them
/// gets the same result; make it cheap to clone (`Bytes`) so a body is
/// shared rather than copied per caller. Joining takes no slot and starts no
/// work, and `work` is then dropped unrun. A walk that failed or panicked
/// answers every caller that shared it with the same `500`, and the next
/// caller starts a fresh walk.
///
/// # Cancel safety
///
/// Dropping the future does **not** cancel a walk that started: it runs to
/// its end on its worker thread and keeps its slot until then, whoever
/// still waits; if every caller went away, a failure is reported once by
/// the pool. A caller that joined and then went away costs nothing.
/// Dropped before admission, it takes nothing.
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
/// use actix_web::{App, HttpResponse, test, web};
/// use admission_actix::registry_coalesced;
/// use admission_core::{Coalescing, Pool, WorkError};
/// use bytes::Bytes;
///
/// type Scrapes = Coalescing<&'static str, Bytes, std::fmt::Error>;
///
/// async fn metrics(scrapes: web::Data<Scrapes>) -> Result<HttpResponse, WorkError<std::fmt::Error>> {
///     let text = registry_coalesced(&scrapes, "/metrics", || Ok(Bytes::from_static(b"# EOF\n"))).await?;
///     Ok(HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(text))
/// }
///
/// # #[actix_web::main]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let scrapes: Scrapes = Coalescing::new(&pool, Duration::from_secs(1)).unwrap();
/// let app = test::init_service(
///     App::new()
///         .app_data(web::Data::new(scrapes.clone()))
///         .route("/metrics", web::get().to(metrics)),
/// )
/// .await;
/// let req = test::TestRequest::get().uri("/metrics").to_request();
/// assert_eq!(test::call_and_read_body(&app, req).await, "# EOF\n");
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
/// assert_eq!(pool.stats().finished, 2, "one walk per round of scrapes");
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
