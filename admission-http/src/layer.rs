//! The layer that wraps services in admission control.
//!
//! This module owns [`ProtocolLayer`] (and its HTTP alias,
//! [`AdmissionLayer`]), the HTTP constructors and every setting; the gRPC
//! constructors are `grpc_layer`'s.
//! It must never create pools: axum may call [`Layer::layer`] once per
//! connection and tonic clones the layered service for every connection,
//! and every service it makes shares the one set of pools it was given.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::num::NonZeroU8;
use std::sync::Arc;

use admission_core::{Caller, Class, Refusal, RequestPools};
use bytes::Bytes;
use http::HeaderValue;
use http::request::Parts;
use tower_layer::Layer;

use crate::admit::RequestAdmission;
use crate::body::ProgressTimeout;
use crate::classify::Classify;
use crate::hooks::{Bypass, FlowOf, RefusalBody};
use crate::problem::HttpRefusalStatus;
use crate::protocol::Protocol;
use crate::service::{FailFast, ProtocolService, Queue, Shared};

/// A tower [`Layer`] that makes every request hold a request lease for its
/// whole response, body included, and answers a refused request at once:
/// over HTTP with `503 Service Unavailable` (or `429`, see
/// [`refusal_status`](Self::refusal_status)), `Retry-After` and an
/// `application/problem+json` body; over gRPC (the tonic adapter's layer)
/// with a trailers-only `UNAVAILABLE` and `grpc-retry-pushback-ms`.
///
/// The layer holds the [`RequestPools`] it was given and nothing else:
/// cloning it, or applying it once per connection as axum does, never
/// creates pools, so one app has one set of slots however many connections
/// it serves. Build the pools once at startup; a configuration error
/// surfaces there ([`RequestPools::new`] returns a `Result`), never on a
/// request.
///
/// By default a request whose class is full is refused at once
/// ([`FailFast`]); [`queue`](Self::queue) lets it wait in the class pool's
/// bounded queue instead. Stacked layers of the same pools (router-wide and
/// per route), or a layer and `#[admitted]`, hold one lease per request and
/// class: the inner admission shares the outer lease, or tops it up to its
/// route's [`cost`](Self::cost) when that is more.
///
/// The caller a request is admitted for comes from its headers
/// (`x-admission-criticality`, and the shortest of `x-admission-budget-ms`,
/// `x-envoy-expected-rq-timeout-ms` and `grpc-timeout`), read under a trust
/// policy: by default nobody's headers can raise their own priority or
/// lengthen their own wait; [`trust_peers`](Self::trust_peers)
/// honours them as sent. The flow it is for (a tenant, held to its fair
/// share of the class) is the app's word, [`flow`](Self::flow), and
/// `x-admission-flow`'s only under `trust_peers`.
///
/// # Examples
///
/// ```
/// use admission_core::{Class, RequestPools};
/// use admission_http::AdmissionLayer;
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pools = RequestPools::new(1, 4).unwrap();
/// let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: Request<_>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::from("created")))
/// }));
///
/// let _held = pools.try_lease(Class::Work).unwrap(); // every *work* slot is taken
/// let refused = service.oneshot(Request::post("/items").body(()).unwrap()).await.unwrap();
/// assert_eq!(refused.status(), 503);
/// assert_eq!(refused.headers()["retry-after"], "1");
/// # }
/// ```
pub type AdmissionLayer<M = FailFast> = ProtocolLayer<HttpRefusalStatus, M>;

/// The admission layer, generic over the protocol a refusal is answered in
/// (`P`): [`AdmissionLayer`] is this layer over HTTP
/// ([`HttpRefusalStatus`]), the tonic adapter's `AdmissionLayer` the same
/// layer over gRPC ([`GrpcRefusalStatus`](crate::GrpcRefusalStatus)). Each
/// protocol has its own constructors (`new`, `class`, `classify`, over its
/// own view of a request) and its own settings
/// ([`refusal_body`](Self::refusal_body) for HTTP,
/// [`unleased`](Self::unleased) for gRPC); every other setting, and what a
/// request goes through, is one and the same. Name it through its alias,
/// [`AdmissionLayer`] or `admission_tonic::AdmissionLayer`.
///
/// # Examples
///
/// ```
/// use admission_core::RequestPools;
/// use admission_http::{AdmissionLayer, GrpcRefusalStatus, HttpRefusalStatus, ProtocolLayer};
///
/// let pools = RequestPools::new(2, 4).unwrap();
/// let http: ProtocolLayer<HttpRefusalStatus> = AdmissionLayer::new(pools.clone());
/// let grpc = ProtocolLayer::<GrpcRefusalStatus>::new(pools); // admission_tonic::AdmissionLayer::new
/// # let _ = (http, grpc);
/// ```
pub struct ProtocolLayer<P, M = FailFast> {
    shared: Arc<Shared<P>>,
    mode: PhantomData<fn() -> M>,
}

impl ProtocolLayer<HttpRefusalStatus> {
    /// Leases by method: `GET`, `HEAD` and `OPTIONS` from *control*, every
    /// other method from *work* ([`Classify::method_class`](crate::Classify::method_class)).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 4).unwrap();
    /// let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let read = service.oneshot(Request::get("/items").body(()).unwrap()).await.unwrap();
    /// assert_eq!(read.status(), 200, "reads lease from *control*");
    /// # }
    /// ```
    pub fn new(pools: RequestPools) -> Self {
        ProtocolLayer::speaking(pools, HttpRefusalStatus::default())
    }

    /// Leases every request from `class`: the per-route form,
    /// `.route("/metrics", get(metrics).layer(AdmissionLayer::class(pools, Class::Control)))`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::class(pools.clone(), Class::Control);
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::from("stopping")))
    /// }));
    /// let _work = pools.try_lease(Class::Work).unwrap(); // *work* is full, *control* is not
    /// let stop = Request::post("/terminal/stop").body(()).unwrap();
    /// assert_eq!(service.oneshot(stop).await.unwrap().status(), 200);
    /// # }
    /// ```
    pub fn class(pools: RequestPools, class: Class) -> Self {
        Self::new(pools).with_classify(Classify::Fixed(class))
    }

    /// Leases from the class `classify` picks from the request head
    /// (method, URI, headers, extensions). It runs once per request, before
    /// the lease is taken, and must be cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::classify(pools.clone(), |head| {
    ///     if head.uri.path().starts_with("/control/") { Class::Control } else { Class::Work }
    /// });
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let pause = Request::post("/control/pause").body(()).unwrap();
    /// assert_eq!(service.clone().oneshot(pause).await.unwrap().status(), 200);
    /// let job = Request::post("/jobs").body(()).unwrap();
    /// assert_eq!(service.oneshot(job).await.unwrap().status(), 503);
    /// # }
    /// ```
    pub fn classify<F>(pools: RequestPools, classify: F) -> Self
    where
        F: Fn(&Parts) -> Class + Send + Sync + 'static,
    {
        Self::new(pools).with_classify(Classify::head(classify))
    }
}

impl<P: Protocol> ProtocolLayer<P, FailFast> {
    /// A fail-fast layer over `pools` speaking `protocol`'s answers, with its
    /// default classification: what each protocol's `new` builds on.
    pub(crate) fn speaking(pools: RequestPools, protocol: P) -> Self {
        ProtocolLayer::from_shared(Shared {
            admission: RequestAdmission::new(pools),
            classify: P::default_classify(),
            protocol,
            progress: ProgressTimeout::DEFAULT,
            bypass: None,
            flow: None,
            refusal_body: None,
        })
    }
}

impl<P: Protocol, M> ProtocolLayer<P, M> {
    /// The same layer with another classification (for the protocols'
    /// constructors over their own view of a request).
    #[must_use]
    pub(crate) fn with_classify(self, classify: Classify) -> Self {
        self.with(|shared| shared.classify = classify)
    }

    /// Leases from the class `classify` picks from the request head and
    /// the caller its headers describe (its criticality after the trust
    /// policy, its deadline): for example, a short deadline to *control*.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).classify_for_caller(|_head, caller| {
    ///     match caller.remaining() {
    ///         Some(left) if left < Duration::from_secs(1) => Class::Control,
    ///         _ => Class::Work,
    ///     }
    /// });
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let _work = pools.try_lease(Class::Work).unwrap();
    /// let hurried = Request::post("/").header("x-admission-budget-ms", "500").body(()).unwrap();
    /// assert_eq!(service.oneshot(hurried).await.unwrap().status(), 200);
    /// # }
    /// ```
    #[must_use]
    pub fn classify_for_caller<F>(self, classify: F) -> Self
    where
        F: Fn(&Parts, &Caller) -> Class + Send + Sync + 'static,
    {
        self.with_classify(Classify::head_and_caller(classify))
    }

    /// The request pools leases are taken from: the ones given at
    /// construction, shared, not a copy.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    ///
    /// let pools = RequestPools::new(2, 4).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone());
    /// assert!(layer.pools().pool(Class::Work).same_pool(pools.pool(Class::Work)));
    /// ```
    pub fn pools(&self) -> &RequestPools {
        self.shared.admission.pools()
    }

    /// How many requests came with a malformed or repeated budget header
    /// (`x-admission-budget-ms`, `x-envoy-expected-rq-timeout-ms`,
    /// `grpc-timeout`) or flow header (`x-admission-flow`), counted by every clone of this layer and the
    /// services it made; each was served as if it had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::RequestPools;
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(1, 1).unwrap());
    /// let service = layer.clone().layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let request = Request::get("/").header("x-admission-budget-ms", "soon").body(()).unwrap();
    /// assert_eq!(service.oneshot(request).await.unwrap().status(), 200);
    /// assert_eq!(layer.malformed_headers(), 1);
    /// # }
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.shared.admission.malformed_headers()
    }

    /// How many requests claimed `x-admission-criticality: critical` and
    /// were admitted as `default`, or named their own `x-admission-flow`
    /// and were not heard, since the layer trusts nobody's headers (always
    /// 0 after [`trust_peers`](Self::trust_peers)); a request that did both
    /// counts once.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(1, 1).unwrap());
    /// let service = layer.clone().layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Caller::current().criticality().to_string()))
    /// }));
    /// let claim = Request::get("/").header("x-admission-criticality", "critical").body(()).unwrap();
    /// let response = service.oneshot(claim).await.unwrap();
    /// assert_eq!(http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes(), "default");
    /// assert_eq!(layer.lowered_claims(), 1);
    /// # }
    /// ```
    pub fn lowered_claims(&self) -> u64 {
        self.shared.admission.lowered_claims()
    }

    /// Honours the criticality, budget and flow headers as sent:
    /// for a service whose clients are its own peers, or behind a mesh or
    /// balancer that strips these headers from outside requests. Without
    /// it a `critical` claim is admitted as `default` and a budget never
    /// lengthens a queued wait; `sheddable` is honoured either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = AdmissionLayer::new(RequestPools::new(1, 1).unwrap()).trust_peers();
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Caller::current().criticality().to_string()))
    /// }));
    /// let claim = Request::get("/").header("x-admission-criticality", "critical").body(()).unwrap();
    /// let response = service.oneshot(claim).await.unwrap();
    /// assert_eq!(http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes(), "critical");
    /// # }
    /// ```
    #[must_use]
    pub fn trust_peers(self) -> Self {
        self.with(|shared| shared.admission = shared.admission.clone().trust_peers())
    }

    /// Each request through this layer takes `cost` slots of its class, not
    /// one: a route whose request walks the whole registry beside point
    /// reads of one slot, say. It takes them all or none, holds them until
    /// its response ends and gives them back together; fair shares count
    /// them ([`Caller::with_cost`]). Checked here, against every class the
    /// layer may lease (its fixed class, or both). Under a router-wide layer
    /// of the same pools, which took one slot before the route was known,
    /// this layer takes the rest (admitted, waited for or refused as its
    /// own admission) and gives them back when its response ends.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CostAboveCapacity`](admission_core::ConfigError::CostAboveCapacity)
    /// when a class has fewer slots than `cost`: such a request could never
    /// be admitted whole.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU8;
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    ///
    /// let pools = RequestPools::new(4, 1).unwrap();
    /// let walk = NonZeroU8::new(4).unwrap();
    /// let layer = AdmissionLayer::class(pools.clone(), Class::Work).cost(walk).unwrap();
    /// # drop(layer);
    /// let too_much = NonZeroU8::new(5).unwrap();
    /// assert!(AdmissionLayer::class(pools, Class::Work).cost(too_much).is_err());
    /// ```
    pub fn cost(self, cost: NonZeroU8) -> Result<Self, admission_core::ConfigError> {
        let classes: &[Class] = match self.shared.classify {
            Classify::Fixed(class) => &[class],
            _ => &[Class::Work, Class::Control],
        };
        let admission = self.shared.admission.clone().costing(cost, classes)?;
        Ok(self.with(|shared| shared.admission = admission))
    }

    /// Names the flow each request is for (a tenant, an API key, a user):
    /// `flow` reads it from the request head (an authenticated tenant an
    /// earlier layer put in the extensions, a header your gateway sets),
    /// and `None` leaves the request without a flow. While a class is
    /// contended, each active flow is held to its fair share of it: a flow
    /// at its share is refused with `ADMISSION_FLOW_SHARE` while another
    /// flow that asked is under its own, and a flow alone gets the whole
    /// class ([`Caller::with_flow`] says the rule). It runs once per
    /// request, before the lease is taken, and must be cheap: return a
    /// key that borrows nothing and allocates nothing (a number, a
    /// [`HeaderValue`] or an `Arc<str>` clone); it is hashed at once and
    /// dropped, and no answer, log or metric ever carries it.
    ///
    /// The app's word is final under the default trust policy: a request's
    /// own `x-admission-flow` header is ignored (and counted in
    /// [`lowered_claims`](Self::lowered_claims)), so a client cannot pick
    /// another tenant's share or escape its own by inventing keys. After
    /// [`trust_peers`](Self::trust_peers) a well-formed `x-admission-flow`
    /// (1 to 64 of `A-Z a-z 0-9 - _ . :`) names the flow in place of this
    /// closure's; a malformed one is ignored and counted in
    /// [`malformed_headers`](Self::malformed_headers) either way. Without
    /// this closure and without trust, no request has a flow and the class
    /// is one shared line, as before.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, Code, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{HeaderValue, Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(2, 2).unwrap();
    /// // The tenant an authenticating layer above this one vouched for.
    /// let layer = AdmissionLayer::class(pools.clone(), Class::Work)
    ///     .flow(|head| head.headers.get("x-authenticated-tenant").cloned());
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let tenant = |name| {
    ///     let value = HeaderValue::from_static(name);
    ///     Request::post("/jobs").header("x-authenticated-tenant", value).body(()).unwrap()
    /// };
    ///
    /// // A batch job holds one slot; bob asks while it holds the other too.
    /// let batch = admission_core::Caller::default().with_flow(HeaderValue::from_static("batch"));
    /// let _one = pools.try_lease_for(Class::Work, batch).unwrap();
    /// let two = pools.try_lease_for(Class::Work, batch).unwrap();
    /// let refused = service.clone().oneshot(tenant("bob")).await.unwrap();
    /// assert_eq!(refused.headers()["x-admission-refusal"], "ADMISSION_SATURATED");
    /// drop(two);
    /// // The free slot is bob's share: the batch job, at its own, is refused it.
    /// let over = service.clone().oneshot(tenant("batch")).await.unwrap();
    /// assert_eq!(over.headers()["x-admission-refusal"], Code::FlowShare.as_str());
    /// assert_eq!(service.oneshot(tenant("bob")).await.unwrap().status(), 200);
    /// # }
    /// ```
    #[must_use]
    pub fn flow<F, K>(self, flow: F) -> Self
    where
        F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
        K: Hash,
    {
        self.with(|shared| {
            shared.flow = Some(FlowOf::new(move |head| flow(head).map(|key| (key, None))));
        })
    }

    /// [`flow`](Self::flow) with a weight per flow: `flow` gives the key and
    /// how many times it counts in shares (a paying tier of weight 2 is
    /// held to twice the share of a flow of weight 1; 0 is read as 1; see
    /// [`Caller::with_weight`]). A flow named by a trusted
    /// `x-admission-flow` header has weight 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // Who the request is for, as the app's authentication put it there.
    /// #[derive(Clone, Copy)]
    /// struct Tenant { id: u64, paying: bool }
    ///
    /// let layer = AdmissionLayer::new(RequestPools::new(2, 4).unwrap()).weighted_flow(|head| {
    ///     let tenant = head.extensions.get::<Tenant>()?;
    ///     Some((tenant.id, if tenant.paying { 2 } else { 1 }))
    /// });
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Caller::current().weight().to_string()))
    /// }));
    /// let pro = Request::get("/report").extension(Tenant { id: 42, paying: true }).body(()).unwrap();
    /// let response = service.oneshot(pro).await.unwrap();
    /// assert_eq!(http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes(), "2");
    /// # }
    /// ```
    #[must_use]
    pub fn weighted_flow<F, K>(self, flow: F) -> Self
    where
        F: Fn(&Parts) -> Option<(K, u8)> + Send + Sync + 'static,
        K: Hash,
    {
        self.with(|shared| {
            shared.flow = Some(FlowOf::new(move |head| {
                flow(head).map(|(key, weight)| (key, Some(weight)))
            }));
        })
    }

    /// How long an admitted response may let a frame lie unread (its
    /// reader has not asked for the next one) before its lease is taken
    /// back by a timer and the body ends with
    /// [`Stalled`](crate::body::Stalled); [`ProgressTimeout::DEFAULT`]
    /// (30 s) unless set. A body sent in one frame is never watched. The
    /// same bound holds an admitted request's body: a handler left waiting
    /// that long for the client's next bytes gets `Stalled` from the body
    /// ([`RequestBody`](crate::body::RequestBody)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::RequestPools;
    /// use admission_http::AdmissionLayer;
    /// use admission_http::body::ProgressTimeout;
    ///
    /// let bound = ProgressTimeout::new(Duration::from_secs(5)).unwrap();
    /// let layer = AdmissionLayer::new(RequestPools::new(2, 4).unwrap()).progress_timeout(bound);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn progress_timeout(self, bound: ProgressTimeout) -> Self {
        self.with(|shared| shared.progress = bound)
    }

    /// Lets every request for which `predicate` (over the request head)
    /// answers `true` through with no lease: never refused, never counted
    /// against a class, its response body never watched. For health and
    /// readiness routes, gRPC health and reflection, anything that must
    /// answer whatever the load. A request it lets through passes every
    /// admission layer under this one as well (a route's layer under a
    /// router-wide one, another set of pools), whatever their own bypass;
    /// a handler's own `#[admitted]` still takes the lease it asks for. The
    /// predicate runs on every request, so keep it to a comparison (a path,
    /// a header's presence).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).bypass(|head| head.uri.path() == "/healthz");
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::from("ok")))
    /// }));
    /// let _every_control_slot = pools.try_lease(Class::Control).unwrap();
    /// let health = Request::get("/healthz").body(()).unwrap();
    /// assert_eq!(service.clone().oneshot(health).await.unwrap().status(), 200);
    /// let other = Request::get("/status").body(()).unwrap();
    /// assert_eq!(service.oneshot(other).await.unwrap().status(), 503);
    /// # }
    /// ```
    #[must_use]
    pub fn bypass<F>(self, predicate: F) -> Self
    where
        F: Fn(&Parts) -> bool + Send + Sync + 'static,
    {
        self.with(|shared| shared.bypass = Some(Bypass::new(predicate)))
    }

    /// Answers refusals with `status` instead of the protocol's default:
    /// e.g. [`HttpRefusalStatus::TooManyRequests`] for clients that expect
    /// `429`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::{AdmissionLayer, HttpRefusalStatus};
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).refusal_status(HttpRefusalStatus::TooManyRequests);
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let _held = pools.try_lease(Class::Control).unwrap();
    /// assert_eq!(service.oneshot(Request::new(())).await.unwrap().status(), 429);
    /// # }
    /// ```
    #[must_use]
    pub fn refusal_status(self, status: P) -> Self {
        self.with(|shared| shared.protocol = status)
    }

    /// Lets a request whose class is full wait in the class pool's bounded
    /// queue ([`Admission::Queue`](admission_core::Admission::Queue))
    /// instead of being refused at once: ordinary bursts are served, and
    /// under overload a request is refused with the same answer when the
    /// queue is full or it has waited the queue's limit, never answered
    /// late. The services it makes call the inner service after the wait,
    /// so they need it `Clone + Send + 'static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::class(pools.clone(), Class::Work).queue();
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// // The only slot is held (by another thread) past the queue's limit
    /// // (100 ms by default).
    /// let held = pools.clone();
    /// let _held = std::thread::spawn(move || held.try_lease(Class::Work).unwrap()).join().unwrap();
    /// let refused = service.oneshot(Request::new(())).await.unwrap();
    /// assert_eq!(refused.status(), 503);
    /// assert_eq!(refused.headers()["retry-after"], "1");
    /// # }
    /// ```
    pub fn queue(self) -> ProtocolLayer<P, Queue> {
        ProtocolLayer::from_shared(self.copy(|shared| {
            shared.admission = shared.admission.clone().queue();
        }))
    }

    /// The same layer with one setting changed (the counters stay shared).
    fn with(self, change: impl FnOnce(&mut Shared<P>)) -> Self {
        ProtocolLayer::from_shared(self.copy(change))
    }

    fn copy(&self, change: impl FnOnce(&mut Shared<P>)) -> Shared<P> {
        let mut shared = Shared::clone(&self.shared);
        change(&mut shared);
        shared
    }

    fn from_shared(shared: Shared<P>) -> Self {
        ProtocolLayer {
            shared: Arc::new(shared),
            mode: PhantomData,
        }
    }
}

impl<M> ProtocolLayer<HttpRefusalStatus, M> {
    /// Answers a refusal with the app's own body (an HTML page in the
    /// site's theme, its own JSON shape) where `body` gives one for the
    /// refusal and the request's head: its content type and bytes replace
    /// the problem document, while the status, `Retry-After`,
    /// `x-admission-retry-after-ms`, `x-admission-refusal` and
    /// `cache-control: no-store` stay the layer's. `None` keeps the problem
    /// document (`application/problem+json`, the default), so one layer
    /// can serve pages and an API. The closure runs on refusals only.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::AdmissionLayer;
    /// use bytes::Bytes;
    /// use http::{HeaderValue, Request, Response};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).refusal_body(|_refusal, head| {
    ///     head.uri.path().starts_with("/app/").then(|| {
    ///         (HeaderValue::from_static("text/html; charset=utf-8"), Bytes::from_static(b"<h1>Busy</h1>"))
    ///     })
    /// });
    /// let service = layer.layer(service_fn(|_req: Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// let _every_control_slot = pools.try_lease(Class::Control).unwrap();
    /// let page = service.clone().oneshot(Request::get("/app/home").body(()).unwrap()).await.unwrap();
    /// assert_eq!(page.status(), 503);
    /// assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    /// assert!(page.headers().contains_key("retry-after"));
    /// let api = service.oneshot(Request::get("/api/items").body(()).unwrap()).await.unwrap();
    /// assert_eq!(api.headers()["content-type"], "application/problem+json");
    /// # }
    /// ```
    #[must_use]
    pub fn refusal_body<F>(self, body: F) -> Self
    where
        F: Fn(&Refusal, &Parts) -> Option<(HeaderValue, Bytes)> + Send + Sync + 'static,
    {
        self.with(|shared| shared.refusal_body = Some(RefusalBody::new(body)))
    }
}

impl<P, M> Clone for ProtocolLayer<P, M> {
    fn clone(&self) -> Self {
        ProtocolLayer {
            shared: Arc::clone(&self.shared),
            mode: PhantomData,
        }
    }
}

impl<S, P, M> Layer<S> for ProtocolLayer<P, M> {
    type Service = ProtocolService<S, P, M>;

    fn layer(&self, inner: S) -> ProtocolService<S, P, M> {
        ProtocolService::new(inner, Arc::clone(&self.shared))
    }
}

impl<P: fmt::Debug, M> fmt::Debug for ProtocolLayer<P, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProtocolLayer").field(&self.shared).finish()
    }
}
