//! The layer that puts a tonic server's calls under admission control.
//!
//! This module owns [`AdmissionLayer`] and its constructors. It must never
//! create pools: tonic clones the layered service for every connection, and
//! every clone shares the one set of pools the layer was given.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use admission_core::{Class, RequestPools};
use tower_layer::Layer;

use crate::classify::{Call, Classify};
use crate::service::AdmissionService;
use crate::status::RefusalStatus;

/// What every layer and service clone shares: the app's pools, how calls
/// are classified, the status a refusal is answered with, and the count of
/// malformed `grpc-timeout` values.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) pools: RequestPools,
    pub(crate) classify: Classify,
    pub(crate) status: RefusalStatus,
    // Its own `Arc`: a layer rebuilt by `refusal_status` keeps counting into
    // the same counter as the layer it came from.
    pub(crate) malformed_timeouts: Arc<AtomicU64>,
}

impl Shared {
    pub(crate) fn count_malformed_timeout(&self) {
        self.malformed_timeouts.fetch_add(1, Ordering::Relaxed);
    }
}

/// A tower [`Layer`] for tonic servers
/// (`Server::builder().layer(AdmissionLayer::new(pools))`) that makes every
/// call hold a request lease until its response stream has ended (a
/// server-streaming call to its last message and trailers), and refuses a
/// call whose class has no free slot with a trailers-only response:
/// `UNAVAILABLE` (or `RESOURCE_EXHAUSTED`, see
/// [`refusal_status`](Self::refusal_status)), a message naming the stable
/// code and the pool, and `grpc-retry-pushback-ms` from the pool's retry
/// hint.
///
/// The layer holds the [`RequestPools`] it was given and nothing else:
/// tonic clones the layered service for every connection, and every clone
/// draws on the same slots. Build the pools once at startup; a
/// configuration error surfaces there ([`RequestPools::new`] returns a
/// `Result`), never on a call.
///
/// It fails fast: a call never waits for a lease. It also reads the
/// caller's `grpc-timeout` strictly, hands the [`Deadline`](crate::deadline::Deadline)
/// to the classifier and to the handler (a request extension), and counts
/// malformed values ([`malformed_timeouts`](Self::malformed_timeouts)).
///
/// # Examples
///
/// ```no_run
/// use admission_core::RequestPools;
/// use admission_tonic::AdmissionLayer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pools = RequestPools::new(2, 4)?;
/// let (_reporter, health) = tonic_health::server::health_reporter();
/// tonic::transport::Server::builder()
///     .layer(AdmissionLayer::new(pools)) // health → control, every other call → work
///     .add_service(health)
///     .serve("127.0.0.1:50051".parse()?)
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AdmissionLayer {
    shared: Arc<Shared>,
}

impl AdmissionLayer {
    /// Leases by the default classification ([`Call::default_class`]):
    /// health checks and server reflection from *control*, every other call
    /// from *work*.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let server = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let _held = pools.try_lease(Class::Work).unwrap(); // every *work* slot is taken
    /// let call = http::Request::post("/shop.v1.Orders/Create").body(()).unwrap();
    /// let refused = server.oneshot(call).await.unwrap();
    /// assert_eq!(refused.headers()["grpc-status"], "14"); // UNAVAILABLE
    /// # }
    /// ```
    pub fn new(pools: RequestPools) -> Self {
        Self::with_classify(pools, Classify::Default)
    }

    /// Leases every call from `class`: the form for a layer around one
    /// service, `add_service(AdmissionLayer::class(pools, Class::Control).layer(service))`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let reads = AdmissionLayer::class(pools.clone(), Class::Control).layer(service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let _work = pools.try_lease(Class::Work).unwrap(); // *work* is full, *control* is not
    /// let call = http::Request::post("/shop.v1.Orders/Get").body(()).unwrap();
    /// let response = reads.oneshot(call).await.unwrap();
    /// assert!(response.headers().get("grpc-status").is_none(), "admitted");
    /// # }
    /// ```
    pub fn class(pools: RequestPools, class: Class) -> Self {
        Self::with_classify(pools, Classify::Fixed(class))
    }

    /// Leases from the class `classify` picks from the [`Call`] (method
    /// path, metadata, deadline). It runs once per call, before the lease
    /// is taken, and must be cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// // This service's reads are `Get…` and `List…`; everything else as by default.
    /// let layer = AdmissionLayer::classify(pools.clone(), |call| {
    ///     if call.method().starts_with("Get") || call.method().starts_with("List") {
    ///         Class::Control
    ///     } else {
    ///         call.default_class()
    ///     }
    /// });
    /// let server = layer.layer(service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let get = http::Request::post("/shop.v1.Orders/GetOrder").body(()).unwrap();
    /// assert!(server.clone().oneshot(get).await.unwrap().headers().get("grpc-status").is_none());
    /// let create = http::Request::post("/shop.v1.Orders/CreateOrder").body(()).unwrap();
    /// assert_eq!(server.oneshot(create).await.unwrap().headers()["grpc-status"], "14");
    /// # }
    /// ```
    pub fn classify<F>(pools: RequestPools, classify: F) -> Self
    where
        F: Fn(&Call<'_>) -> Class + Send + Sync + 'static,
    {
        Self::with_classify(pools, Classify::custom(classify))
    }

    /// The request pools leases are taken from: the ones given at
    /// construction, shared, not a copy.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    ///
    /// let pools = RequestPools::new(2, 4).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone());
    /// assert!(layer.pools().pool(Class::Work).same_pool(pools.pool(Class::Work)));
    /// ```
    pub fn pools(&self) -> &RequestPools {
        &self.shared.pools
    }

    /// Answers refusals with `status` instead of `UNAVAILABLE`: e.g.
    /// [`RefusalStatus::ResourceExhausted`] for clients that expect it.
    /// The message and the pushback are the same.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use admission_tonic::status::RefusalStatus;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).refusal_status(RefusalStatus::ResourceExhausted);
    /// let server = layer.layer(service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let _held = pools.try_lease(Class::Work).unwrap();
    /// let call = http::Request::post("/shop.v1.Orders/Create").body(()).unwrap();
    /// let refused = server.oneshot(call).await.unwrap();
    /// assert_eq!(refused.headers()["grpc-status"], "8"); // RESOURCE_EXHAUSTED
    /// assert_eq!(refused.headers()["grpc-retry-pushback-ms"], "1000");
    /// # }
    /// ```
    #[must_use]
    pub fn refusal_status(self, status: RefusalStatus) -> Self {
        let Shared {
            pools,
            classify,
            malformed_timeouts,
            ..
        } = &*self.shared;
        AdmissionLayer {
            shared: Arc::new(Shared {
                pools: pools.clone(),
                classify: classify.clone(),
                status,
                malformed_timeouts: Arc::clone(malformed_timeouts),
            }),
        }
    }

    /// How many calls came with a malformed `grpc-timeout` (or more than
    /// one), counted by every clone of this layer and the services it made.
    /// Such a call is served as if it had no deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::RequestPools;
    /// use admission_tonic::AdmissionLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(1, 1).unwrap());
    /// let server = layer.clone().layer(service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let call = http::Request::post("/a.B/C").header("grpc-timeout", "5s").body(()).unwrap();
    /// let served = server.oneshot(call).await.unwrap();
    /// assert!(served.headers().get("grpc-status").is_none(), "served, without a deadline");
    /// assert_eq!(layer.malformed_timeouts(), 1);
    /// # }
    /// ```
    pub fn malformed_timeouts(&self) -> u64 {
        self.shared.malformed_timeouts.load(Ordering::Relaxed)
    }

    fn with_classify(pools: RequestPools, classify: Classify) -> Self {
        AdmissionLayer {
            shared: Arc::new(Shared {
                pools,
                classify,
                status: RefusalStatus::default(),
                malformed_timeouts: Arc::default(),
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
            .field("malformed_timeouts", &self.malformed_timeouts())
            .finish()
    }
}
