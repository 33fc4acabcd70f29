//! The layer that wraps services in admission control.
//!
//! This module owns [`AdmissionLayer`] and its constructors. It must never
//! create pools: axum may call [`Layer::layer`] once per connection, and
//! every service it makes shares the one set of pools it was given.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use admission_core::http::{RefusalStatus, RequestCaller};
use admission_core::{Caller, Class, RequestPools};
use http::HeaderMap;
use http::request::Parts;
use tower_layer::Layer;

use crate::classify::Classify;
use crate::service::AdmissionService;

/// What every layer and service clone shares: the app's pools, how requests
/// are classified and the status a refusal is answered with.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) pools: RequestPools,
    pub(crate) classify: Classify,
    pub(crate) status: RefusalStatus,
    /// Requests whose budget header was malformed (and ignored).
    pub(crate) malformed: Arc<AtomicU64>,
    /// Wait in the class pool's queue instead of failing fast.
    pub(crate) queue: bool,
}

impl Shared {
    /// The caller a request's headers describe; a malformed budget is
    /// ignored and counted, never refused.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Caller {
        let read = RequestCaller::from_headers(
            headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
        );
        if read.malformed {
            self.malformed.fetch_add(1, Ordering::Relaxed);
        }
        read.caller
    }
}

/// A tower [`Layer`] that makes every request hold a request lease for its
/// whole response, body included, and answers a refused request with
/// `503 Service Unavailable` (or `429`, see
/// [`refusal_status`](Self::refusal_status)), `Retry-After` and an
/// `application/problem+json` body.
///
/// The layer holds the [`RequestPools`] it was given and nothing else:
/// cloning it, or applying it once per connection as axum does, never
/// creates pools, so one app has one set of slots however many connections
/// it serves. Build the pools once at startup; a configuration error
/// surfaces there ([`RequestPools::new`] returns a `Result`), never on a
/// request.
///
/// It fails fast: a request never waits for a lease. Stacked layers of the
/// same pools (router-wide and per route), or a layer and `#[admitted]`,
/// hold one slot per request and class: the inner admission shares the
/// outer lease.
///
/// # Examples
///
/// ```
/// use admission_axum::AdmissionLayer;
/// use admission_core::{Class, RequestPools};
/// use axum::{Router, routing::get};
///
/// let pools = RequestPools::new(2, 4).unwrap();
/// let app: Router = Router::new()
///     // A per-route class: this scrape always leases from *control*.
///     .route("/metrics", get(|| async { "# EOF\n" }).layer(AdmissionLayer::class(pools.clone(), Class::Control)))
///     // Everything else: reads are *control*, mutations *work*.
///     .route("/items", get(|| async { "[]" }).post(|| async { "created" }))
///     .layer(AdmissionLayer::new(pools));
/// # drop(app);
/// ```
#[derive(Clone)]
pub struct AdmissionLayer {
    shared: Arc<Shared>,
}

impl AdmissionLayer {
    /// Leases by method: `GET`, `HEAD` and `OPTIONS` from *control*, every
    /// other method from *work* ([`Class::for_method`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::{Class, RequestPools};
    /// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::post};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 4).unwrap();
    /// let app = Router::new()
    ///     .route("/items", post(|| async { "created" }))
    ///     .layer(AdmissionLayer::new(pools.clone()));
    ///
    /// let held = pools.try_lease(Class::Work).unwrap(); // every *work* slot is taken
    /// let post = Request::post("/items").body(Body::empty()).unwrap();
    /// let response = app.oneshot(post).await.unwrap();
    /// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// # drop(held);
    /// # }
    /// ```
    pub fn new(pools: RequestPools) -> Self {
        Self::with_classify(pools, Classify::Method)
    }

    /// Leases every request from `class`: the per-route form,
    /// `.route("/metrics", get(metrics).layer(AdmissionLayer::class(pools, Class::Control)))`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::{Class, RequestPools};
    /// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::post};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::class(pools.clone(), Class::Control);
    /// let app = Router::new().route("/terminal/stop", post(|| async { "stopping" }).layer(layer));
    ///
    /// let _work = pools.try_lease(Class::Work).unwrap(); // *work* is full, *control* is not
    /// let post = Request::post("/terminal/stop").body(Body::empty()).unwrap();
    /// assert_eq!(app.oneshot(post).await.unwrap().status(), StatusCode::OK);
    /// # }
    /// ```
    pub fn class(pools: RequestPools, class: Class) -> Self {
        Self::with_classify(pools, Classify::Fixed(class))
    }

    /// Leases from the class `classify` picks from the request head
    /// (method, URI, headers, extensions). It runs once per request, before
    /// the lease is taken, and must be cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::{Class, RequestPools};
    /// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::post};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::classify(pools.clone(), |head| {
    ///     if head.uri.path().starts_with("/control/") { Class::Control } else { Class::Work }
    /// });
    /// let app = Router::new()
    ///     .route("/control/pause", post(|| async { "paused" }))
    ///     .route("/jobs", post(|| async { "queued" }))
    ///     .layer(layer);
    ///
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let pause = Request::post("/control/pause").body(Body::empty()).unwrap();
    /// assert_eq!(app.clone().oneshot(pause).await.unwrap().status(), StatusCode::OK);
    /// let job = Request::post("/jobs").body(Body::empty()).unwrap();
    /// assert_eq!(app.oneshot(job).await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    /// # }
    /// ```
    pub fn classify<F>(pools: RequestPools, classify: F) -> Self
    where
        F: Fn(&Parts) -> Class + Send + Sync + 'static,
    {
        Self::with_classify(pools, Classify::custom(classify))
    }

    /// The request pools leases are taken from: the ones given at
    /// construction, shared, not a copy.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let pools = RequestPools::new(2, 4).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone());
    /// assert!(layer.pools().pool(Class::Work).same_pool(pools.pool(Class::Work)));
    /// ```
    pub fn pools(&self) -> &RequestPools {
        &self.shared.pools
    }

    /// How many requests came with a malformed or repeated budget header
    /// (`x-admission-budget-ms`, `x-envoy-expected-rq-timeout-ms`,
    /// `grpc-timeout`); each was served as if it had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::RequestPools;
    /// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(1, 1).unwrap());
    /// let app = Router::new().route("/", get(|| async { "ok" })).layer(layer.clone());
    /// let request = Request::get("/").header("x-admission-budget-ms", "soon").body(Body::empty());
    /// let response = app.oneshot(request.unwrap()).await.unwrap();
    /// assert_eq!(response.status(), StatusCode::OK);
    /// assert_eq!(layer.malformed_headers(), 1);
    /// # }
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.shared.malformed.load(Ordering::Relaxed)
    }

    /// Answers refusals with `status` instead of `503`: e.g.
    /// [`RefusalStatus::TooManyRequests`] for clients that expect `429`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::http::RefusalStatus;
    /// use admission_core::{Class, RequestPools};
    /// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).refusal_status(RefusalStatus::TooManyRequests);
    /// let app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
    ///
    /// let _held = pools.try_lease(Class::Control).unwrap();
    /// let response = app.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    /// assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    /// # }
    /// ```
    pub fn refusal_status(self, status: RefusalStatus) -> Self {
        self.with(|shared| shared.status = status)
    }

    /// Lets a request whose class is full wait in the class pool's bounded
    /// queue ([`Admission::Queue`](admission_core::Admission::Queue))
    /// instead of being refused at once: ordinary bursts are served, and
    /// under overload a request is refused with the same `503` and
    /// `Retry-After` when the queue is full or it has waited the queue's
    /// limit, never answered late.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::AdmissionLayer;
    /// use admission_core::{Class, RequestPools};
    /// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::class(pools.clone(), Class::Work).queue();
    /// let app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
    /// // The only slot is held past the queue's limit (100 ms by default).
    /// let _held = pools.try_lease(Class::Work).unwrap();
    /// let response = app.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    /// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// # }
    /// ```
    pub fn queue(self) -> Self {
        self.with(|shared| shared.queue = true)
    }

    /// The same layer with one setting changed (the counter stays shared).
    fn with(self, change: impl FnOnce(&mut Shared)) -> Self {
        let Shared {
            pools,
            classify,
            status,
            malformed,
            queue,
        } = &*self.shared;
        let mut shared = Shared {
            pools: pools.clone(),
            classify: classify.clone(),
            status: *status,
            malformed: Arc::clone(malformed),
            queue: *queue,
        };
        change(&mut shared);
        AdmissionLayer {
            shared: Arc::new(shared),
        }
    }

    fn with_classify(pools: RequestPools, classify: Classify) -> Self {
        AdmissionLayer {
            shared: Arc::new(Shared {
                pools,
                classify,
                status: RefusalStatus::default(),
                malformed: Arc::default(),
                queue: false,
            }),
        }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = AdmissionService<S>;

    fn layer(&self, inner: S) -> AdmissionService<S> {
        AdmissionService::new(inner, Arc::clone(&self.shared))
    }
}

impl fmt::Debug for AdmissionLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionLayer")
            .field("pools", &self.shared.pools)
            .field("classify", &self.shared.classify)
            .field("status", &self.shared.status)
            .finish()
    }
}
