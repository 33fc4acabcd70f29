//! The layer that puts a tonic server's calls under admission control.
//!
//! This module owns [`AdmissionLayer`] and its constructors. It must never
//! create pools: tonic clones the layered service for every connection, and
//! every clone shares the one set of pools the layer was given.

use admission_core::{Class, RequestPools};
use admission_http::body::ProgressTimeout;
use admission_http::{Classify, FailFast, GrpcRefusalStatus, Queue};
use tower_layer::Layer;

use crate::classify::Call;
use crate::service::{AdmissionService, UNLEASED, unleased};

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
/// It fails fast unless told to [`queue`](Self::queue). The call is
/// admitted for its caller: the criticality its `x-admission-criticality`
/// metadata names and the shortest of its `grpc-timeout`,
/// `x-admission-budget-ms` and `x-envoy-expected-rq-timeout-ms` as its
/// deadline, read under the same trust policy as every adapter's (nobody
/// raises their own priority or lengthens their own wait unless
/// [`trust_peers`](Self::trust_peers)); a call whose deadline cannot cover
/// the pool's typical work is refused at once with `DEADLINE_EXCEEDED`.
/// Malformed budgets are ignored and counted
/// ([`malformed_headers`](Self::malformed_headers)).
///
/// Health checks and server reflection ([`UNLEASED`](crate::UNLEASED))
/// take no lease and are never refused: a `Watch` stream, which lives as
/// long as its client, costs no capacity ([`unleased`](Self::unleased)
/// names other services, or none). A leased response whose reader lets a
/// message lie unread for the [`progress_timeout`](Self::progress_timeout)
/// (30 s by default) loses its lease at that moment and ends.
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
///     .layer(AdmissionLayer::new(pools)) // health: no lease; every other call → work
///     .add_service(health)
///     .serve("127.0.0.1:50051".parse()?)
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct AdmissionLayer<M = FailFast> {
    inner: admission_http::AdmissionLayer<GrpcRefusalStatus, M>,
}

impl AdmissionLayer {
    /// Leases every call from *work* by the default classification
    /// ([`Call::default_class`]), except health checks and server
    /// reflection ([`UNLEASED`](crate::UNLEASED)), which take no lease and
    /// are never refused.
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
    /// let server = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: http::Request<_>| async {
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
        AdmissionLayer {
            inner: admission_http::AdmissionLayer::speaking(pools, GrpcRefusalStatus::default())
                .bypass(unleased(UNLEASED)),
        }
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
    /// let reads = AdmissionLayer::class(pools.clone(), Class::Control).layer(service_fn(|_req: http::Request<_>| async {
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
        AdmissionLayer::new(pools).with_classify(Classify::Fixed(class))
    }

    /// Leases from the class `classify` picks from the [`Call`] (method
    /// path, metadata, caller and deadline). It runs once per call, before
    /// the lease is taken, and must be cheap.
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
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
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
        AdmissionLayer::new(pools).with_classify(Classify::head_and_caller(move |head, caller| {
            classify(&Call::new(head.uri.path(), &head.headers, caller))
        }))
    }
}

impl<M> AdmissionLayer<M> {
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
        self.inner.pools()
    }

    /// Answers refusals with `status` instead of `UNAVAILABLE`: e.g.
    /// [`GrpcRefusalStatus::ResourceExhausted`] for clients that expect it.
    /// The message and the pushback are the same.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use admission_tonic::GrpcRefusalStatus;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).refusal_status(GrpcRefusalStatus::ResourceExhausted);
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
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
    pub fn refusal_status(self, status: GrpcRefusalStatus) -> Self {
        AdmissionLayer {
            inner: self.inner.refusal_status(status),
        }
    }

    /// Lets a call whose class is full wait in the class pool's bounded
    /// queue ([`Admission::Queue`](admission_core::Admission::Queue))
    /// instead of being refused at once: ordinary bursts are served, and
    /// under overload a call is refused with the same trailers-only answer
    /// when the queue is full or it has waited the queue's limit, never
    /// answered late. The services it makes call the inner service after
    /// the wait, so they need it `Clone + Send + 'static` (tonic's services
    /// are).
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
    /// let server = AdmissionLayer::new(pools.clone()).queue().layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    /// // The only *work* slot is held (by another thread) past the queue's limit.
    /// let held = pools.clone();
    /// let _held = std::thread::spawn(move || held.try_lease(Class::Work).unwrap()).join().unwrap();
    /// let call = http::Request::post("/shop.v1.Orders/Create").body(()).unwrap();
    /// assert_eq!(server.oneshot(call).await.unwrap().headers()["grpc-status"], "14");
    /// # }
    /// ```
    pub fn queue(self) -> AdmissionLayer<Queue> {
        AdmissionLayer {
            inner: self.inner.queue(),
        }
    }

    /// Honours the criticality, budget and flow metadata as sent: for a server
    /// whose clients are its own peers, or behind a mesh or balancer that
    /// strips `x-admission-*` from outside calls. Without it a `critical`
    /// claim is admitted as `default` and a budget never lengthens a queued
    /// wait; `sheddable` is honoured either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::RequestPools;
    /// use admission_tonic::AdmissionLayer;
    ///
    /// let layer = AdmissionLayer::new(RequestPools::new(2, 4).unwrap()).trust_peers();
    /// assert_eq!(layer.lowered_claims(), 0);
    /// ```
    #[must_use]
    pub fn trust_peers(self) -> Self {
        AdmissionLayer {
            inner: self.inner.trust_peers(),
        }
    }

    /// How many calls claimed `x-admission-criticality: critical` and were
    /// admitted as `default`, or named their own `x-admission-flow` and
    /// were not heard, since the layer trusts nobody's metadata.
    pub fn lowered_claims(&self) -> u64 {
        self.inner.lowered_claims()
    }

    /// How many calls came with a malformed or repeated budget
    /// (`grpc-timeout`, `x-admission-budget-ms`,
    /// `x-envoy-expected-rq-timeout-ms`), counted by every clone of this
    /// layer and the services it made. Such a call is served as if it had
    /// no deadline (tonic itself parses `grpc-timeout` more leniently, and
    /// may still end a call over a value counted here).
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
    /// let server = layer.clone().layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let call = http::Request::post("/a.B/C").header("grpc-timeout", "5s").body(()).unwrap();
    /// let served = server.oneshot(call).await.unwrap();
    /// assert!(served.headers().get("grpc-status").is_none(), "served, without a deadline");
    /// assert_eq!(layer.malformed_headers(), 1);
    /// # }
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.inner.malformed_headers()
    }

    /// The services whose calls take no lease and are never refused,
    /// instead of [`UNLEASED`](crate::UNLEASED) (health checking and
    /// server reflection): add a readiness service of your own, or pass
    /// none to admit every call (a test that uses the health service as a
    /// stand-in for leased work does).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::{AdmissionLayer, UNLEASED};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).unleased(UNLEASED.into_iter().chain(["shop.v1.Ready"]));
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    ///
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let _control = pools.try_lease(Class::Control).unwrap(); // every slot is taken
    /// for path in ["/grpc.health.v1.Health/Watch", "/shop.v1.Ready/Check"] {
    ///     let call = http::Request::post(path).body(()).unwrap();
    ///     let response = server.clone().oneshot(call).await.unwrap();
    ///     assert!(response.headers().get("grpc-status").is_none(), "{path} is never refused");
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn unleased(self, services: impl IntoIterator<Item = &'static str>) -> Self {
        AdmissionLayer {
            inner: self.inner.bypass(unleased(services)),
        }
    }

    /// Lets every call for which `predicate` (over the request head)
    /// answers `true` through with no lease, never refused, in place of the
    /// [`unleased`](Self::unleased) services: the general form of it.
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
    /// let layer = AdmissionLayer::new(pools.clone())
    ///     .bypass(|head| head.uri.path().starts_with("/shop.v1.Ready/"));
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let call = http::Request::post("/shop.v1.Ready/Check").body(()).unwrap();
    /// let response = server.oneshot(call).await.unwrap();
    /// assert!(response.headers().get("grpc-status").is_none(), "never refused");
    /// # }
    /// ```
    #[must_use]
    pub fn bypass<F>(self, predicate: F) -> Self
    where
        F: Fn(&http::request::Parts) -> bool + Send + Sync + 'static,
    {
        AdmissionLayer {
            inner: self.inner.bypass(predicate),
        }
    }

    /// Each call through this layer takes `cost` slots of its class, not
    /// one, all or none, given back together when its response stream
    /// ends, as [`admission_http::AdmissionLayer::cost`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::CostAboveCapacity`](admission_core::ConfigError::CostAboveCapacity)
    /// when a class the layer may lease has fewer slots than `cost`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU8;
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    ///
    /// let pools = RequestPools::new(4, 1).unwrap();
    /// assert!(AdmissionLayer::class(pools.clone(), Class::Work).cost(NonZeroU8::new(4).unwrap()).is_ok());
    /// assert!(AdmissionLayer::class(pools, Class::Work).cost(NonZeroU8::new(5).unwrap()).is_err());
    /// ```
    pub fn cost(self, cost: std::num::NonZeroU8) -> Result<Self, admission_core::ConfigError> {
        Ok(AdmissionLayer {
            inner: self.inner.cost(cost)?,
        })
    }

    /// Names the flow each call is for (a tenant, an API key): `flow`
    /// reads it from the call's head (its metadata as `head.headers`, the
    /// method path as `head.uri`, what an authenticating layer put in
    /// `head.extensions`); `None` leaves the call without a flow. While a
    /// class is contended each active flow is held to its fair share, and
    /// a flow at its share is refused `UNAVAILABLE` with
    /// `ADMISSION_FLOW_SHARE` while another flow that asked is under its
    /// own. The same rule, read in the same place, as every adapter's
    /// ([`admission_http::AdmissionLayer::flow`]): a call's own
    /// `x-admission-flow` metadata names the flow only after
    /// [`trust_peers`](Self::trust_peers), and is otherwise ignored and
    /// counted in [`lowered_claims`](Self::lowered_claims).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(2, 4).unwrap())
    ///     .flow(|head| head.headers.get("x-authenticated-tenant").cloned());
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
    ///     assert!(Caller::current().has_flow(), "the call runs for its tenant's flow");
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    /// let call = http::Request::post("/shop.v1.Orders/Create")
    ///     .header("x-authenticated-tenant", "acme")
    ///     .body(())
    ///     .unwrap();
    /// assert!(server.oneshot(call).await.unwrap().headers().get("grpc-status").is_none());
    /// # }
    /// ```
    #[must_use]
    pub fn flow<F, K>(self, flow: F) -> Self
    where
        F: Fn(&http::request::Parts) -> Option<K> + Send + Sync + 'static,
        K: std::hash::Hash,
    {
        AdmissionLayer {
            inner: self.inner.flow(flow),
        }
    }

    /// [`flow`](Self::flow) with a weight per flow (a paying tier of weight
    /// 2 is held to twice the share of a flow of weight 1), as
    /// [`admission_http::AdmissionLayer::weighted_flow`].
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, RequestPools};
    /// use admission_tonic::AdmissionLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(2, 4).unwrap()).weighted_flow(|head| {
    ///     let tier = head.headers.get("x-authenticated-tier")?;
    ///     Some((head.headers.get("x-authenticated-tenant")?.clone(), if tier == "pro" { 2 } else { 1 }))
    /// });
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
    ///     assert_eq!(Caller::current().weight(), 2);
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    /// }));
    /// let call = http::Request::post("/shop.v1.Orders/Create")
    ///     .header("x-authenticated-tenant", "acme")
    ///     .header("x-authenticated-tier", "pro")
    ///     .body(())
    ///     .unwrap();
    /// assert!(server.oneshot(call).await.unwrap().headers().get("grpc-status").is_none());
    /// # }
    /// ```
    #[must_use]
    pub fn weighted_flow<F, K>(self, flow: F) -> Self
    where
        F: Fn(&http::request::Parts) -> Option<(K, u8)> + Send + Sync + 'static,
        K: std::hash::Hash,
    {
        AdmissionLayer {
            inner: self.inner.weighted_flow(flow),
        }
    }

    /// How long a leased response may let a message lie unread (its
    /// reader has not asked for the next frame) before its lease is taken
    /// back, at that moment, by a timer, and the stream ends
    /// (`ADMISSION_STREAM_STALLED`, a reset); 30 s by default
    /// ([`ProgressTimeout::DEFAULT`]). A stream whose own messages are slow
    /// to come (its reader is waiting) is not stalled. Streams meant to
    /// live long belong in a class of their own, or, when they cost nothing
    /// while idle, among the [`unleased`](Self::unleased) services.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::RequestPools;
    /// use admission_http::body::ProgressTimeout;
    /// use admission_tonic::AdmissionLayer;
    ///
    /// let bound = ProgressTimeout::new(Duration::from_secs(5)).unwrap();
    /// let layer = AdmissionLayer::new(RequestPools::new(2, 4).unwrap()).progress_timeout(bound);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn progress_timeout(self, bound: ProgressTimeout) -> Self {
        AdmissionLayer {
            inner: self.inner.progress_timeout(bound),
        }
    }

    fn with_classify(self, classify: Classify) -> Self {
        AdmissionLayer {
            inner: self.inner.with_classify(classify),
        }
    }
}

impl<S, M> Layer<S> for AdmissionLayer<M> {
    type Service = AdmissionService<S, M>;

    fn layer(&self, inner: S) -> AdmissionService<S, M> {
        AdmissionService::new(self.inner.layer(inner))
    }
}
