//! The layer's gRPC face: what it leases a call from and what it lets
//! through.
//!
//! This module owns [`Call`] (what a classifier sees of a gRPC call), the
//! bypass of [`UNLEASED`] services and the constructors of
//! [`ProtocolLayer`] speaking gRPC, which the tonic adapter names
//! `AdmissionLayer`. It must never admit, refuse or answer anything
//! itself: the service does, for every protocol alike. It must never
//! depend on tonic.

use std::sync::Arc;
use std::time::Duration;

use admission_core::{Caller, Class, RequestPools};
use http::HeaderMap;
use http::request::Parts;
use tokio::time::Instant;

use crate::classify::Classify;
use crate::grpc::{GrpcRefusalStatus, UNLEASED, calls_one_of, grpc_default_class, grpc_path};
use crate::layer::ProtocolLayer;

/// The bypass that lets the calls of `services` (whole names,
/// `package.Service`) through with no lease. A name that is empty or holds
/// a `/` names no service a call can be for, and is left out.
fn unleased(
    services: impl IntoIterator<Item = &'static str>,
) -> impl Fn(&Parts) -> bool + Send + Sync + 'static {
    let services: Arc<[&'static str]> = services
        .into_iter()
        .filter(|service| !service.is_empty() && !service.contains('/'))
        .collect();
    move |head| calls_one_of(head.uri.path(), &services)
}

/// The gRPC examples below name the layer as the tonic adapter does:
/// `type AdmissionLayer = ProtocolLayer<GrpcRefusalStatus>;` is
/// `admission_tonic::AdmissionLayer`.
impl ProtocolLayer<GrpcRefusalStatus> {
    /// Leases every call from *work* by the default classification
    /// ([`Call::default_class`]), except health checks and server
    /// reflection ([`UNLEASED`]), which take no lease and are never
    /// refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::{GrpcRefusalStatus, ProtocolLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    /// type AdmissionLayer = ProtocolLayer<GrpcRefusalStatus>; // admission_tonic::AdmissionLayer
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let server = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    ///
    /// // Every slot is taken.
    /// let _held = (pools.try_lease(Class::Work).unwrap(), pools.try_lease(Class::Control).unwrap());
    /// let call = http::Request::post("/shop.v1.Orders/Create").body(()).unwrap();
    /// let refused = server.clone().oneshot(call).await.unwrap();
    /// assert_eq!(refused.headers()["grpc-status"], "14"); // UNAVAILABLE
    /// let health = http::Request::post("/grpc.health.v1.Health/Check").body(()).unwrap();
    /// let answered = server.oneshot(health).await.unwrap();
    /// assert!(answered.headers().get("grpc-status").is_none(), "health takes no lease");
    /// # }
    /// ```
    pub fn new(pools: RequestPools) -> Self {
        ProtocolLayer::speaking(pools, GrpcRefusalStatus::default()).bypass(unleased(UNLEASED))
    }

    /// Leases every call from `class`: the form for a layer around one
    /// service, `add_service(AdmissionLayer::class(pools, Class::Control).named_layer(service))`
    /// (tonic's `LayerExt::named_layer` keeps the service's name).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::{GrpcRefusalStatus, ProtocolLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    /// type AdmissionLayer = ProtocolLayer<GrpcRefusalStatus>; // admission_tonic::AdmissionLayer
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let reads = AdmissionLayer::class(pools.clone(), Class::Control).layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    ///
    /// let _work = pools.try_lease(Class::Work).unwrap(); // *work* is full, *control* is not
    /// let call = http::Request::post("/shop.v1.Orders/Get").body(()).unwrap();
    /// let response = reads.oneshot(call).await.unwrap();
    /// assert!(response.headers().get("grpc-status").is_none(), "admitted");
    /// # }
    /// ```
    pub fn class(pools: RequestPools, class: Class) -> Self {
        Self::new(pools).with_classify(Classify::Fixed(class))
    }

    /// Leases from the class `classify` picks from the [`Call`] (method
    /// path, metadata, caller and deadline). It runs once per call, before
    /// the lease is taken, and must be cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::{GrpcRefusalStatus, ProtocolLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    /// type AdmissionLayer = ProtocolLayer<GrpcRefusalStatus>; // admission_tonic::AdmissionLayer
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
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
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
        Self::new(pools).with_classify(Classify::head_and_caller(move |head, caller| {
            classify(&Call::new(head.uri.path(), &head.headers, caller))
        }))
    }
}

impl<M> ProtocolLayer<GrpcRefusalStatus, M> {
    /// The services whose calls take no lease and are never refused,
    /// instead of [`UNLEASED`] (health checking and server reflection): add
    /// a readiness service of your own, or pass none to admit every call
    /// (a test that uses the health service as a stand-in for leased work
    /// does). It replaces any [`bypass`](Self::bypass), the general form.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::{GrpcRefusalStatus, ProtocolLayer, UNLEASED};
    /// use tower::{Layer, ServiceExt, service_fn};
    /// type AdmissionLayer = ProtocolLayer<GrpcRefusalStatus>; // admission_tonic::AdmissionLayer
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let layer = AdmissionLayer::new(pools.clone()).unleased(UNLEASED.into_iter().chain(["shop.v1.Ready"]));
    /// let server = layer.layer(service_fn(|_req: http::Request<_>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
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
        self.bypass(unleased(services))
    }
}

/// What the layer knows of a call before it admits it: the gRPC method
/// path (`/package.Service/Method`), the request's metadata (its HTTP/2
/// headers) and its [`Caller`] (the criticality and the deadline its
/// `x-admission-criticality` and `grpc-timeout` metadata say, read under
/// the layer's trust policy).
///
/// A gRPC layer's classifier (`admission_tonic::AdmissionLayer::classify`,
/// [`ProtocolLayer<GrpcRefusalStatus>`]) picks the call's class from it.
///
/// # Examples
///
/// ```
/// use admission_core::{Caller, Class};
/// use admission_http::Call;
///
/// let (headers, caller) = (http::HeaderMap::new(), Caller::default());
/// let call = Call::new("/grpc.health.v1.Health/Check", &headers, &caller);
/// assert_eq!((call.service(), call.method()), ("grpc.health.v1.Health", "Check"));
/// assert_eq!(call.default_class(), Class::Control);
///
/// let call = Call::new("/shop.v1.Orders/Create", &headers, &caller);
/// assert_eq!(call.default_class(), Class::Work);
/// assert_eq!(call.deadline(), None);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    path: &'a str,
    headers: &'a HeaderMap,
    caller: &'a Caller,
}

impl<'a> Call<'a> {
    /// A call to `path` with `headers`, for `caller`: what the layer builds
    /// for each request; public so classifiers can be tested.
    pub fn new(path: &'a str, headers: &'a HeaderMap, caller: &'a Caller) -> Call<'a> {
        Call {
            path,
            headers,
            caller,
        }
    }

    /// The request path, `/package.Service/Method` for a gRPC call.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// The fully qualified service name (`package.Service`), or `""` when
    /// the path is not a gRPC method path.
    pub fn service(&self) -> &'a str {
        grpc_path(self.path).map_or("", |(service, _)| service)
    }

    /// The method name (`Method`), or `""` when the path is not a gRPC
    /// method path.
    pub fn method(&self) -> &'a str {
        grpc_path(self.path).map_or("", |(_, method)| method)
    }

    /// The request's metadata, as HTTP/2 headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The caller the call is admitted for.
    pub fn caller(&self) -> &'a Caller {
        self.caller
    }

    /// The call's deadline: the shortest of its `grpc-timeout`,
    /// `x-admission-budget-ms` and `x-envoy-expected-rq-timeout-ms`, counted
    /// from when the layer saw it; `None` without one (or with a malformed
    /// one, which the layer counts).
    pub fn deadline(&self) -> Option<Instant> {
        self.caller.deadline()
    }

    /// What is left of the deadline now, if the call has one.
    pub fn remaining(&self) -> Option<Duration> {
        self.caller.remaining()
    }

    /// The default classification (a gRPC layer's `new`): health checks
    /// (`grpc.health.v1.Health`) and server reflection lease from
    /// *control* (when a layer leases them at all: by default they are
    /// [`UNLEASED`]), every other call from *work*. gRPC has no read
    /// methods to tell apart by the wire; a classifier that knows the
    /// service's reads can fall back on this for the rest.
    pub fn default_class(&self) -> Class {
        grpc_default_class(self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unleased_names_that_no_call_can_be_for_are_left_out() {
        let head = |path: &str| http::Request::post(path).body(()).unwrap().into_parts().0;
        let passes = unleased(["", "shop.v1/Orders", "shop.v1.Ready"]);
        assert!(passes(&head("/shop.v1.Ready/Check")));
        for leased in [
            "//Check",
            "/shop.v1/Orders/Create",
            "/shop.v1.Orders/Create",
        ] {
            assert!(!passes(&head(leased)), "{leased} takes a lease");
        }
    }

    #[test]
    fn paths_split_into_service_and_method() {
        let (headers, caller) = (HeaderMap::new(), Caller::default());
        let parts = |path| {
            let call = Call::new(path, &headers, &caller);
            (call.service(), call.method())
        };
        assert_eq!(parts("/a.B/C"), ("a.B", "C"));
        for not_grpc in ["", "/", "/a.B", "/a.B/", "//C", "a.B/C", "/a.B/C/D"] {
            assert_eq!(parts(not_grpc), ("", ""), "{not_grpc:?}");
        }
    }
}
