//! What a classifier sees of a gRPC call.
//!
//! This module owns [`Call`]: the method path, the metadata and the caller
//! the call's headers describe, built by the layer for a classifier of the
//! app's. It must never take a lease or look at the request's messages.

use std::time::Duration;

use admission_core::{Caller, Class};
use admission_http::{grpc_default_class, grpc_path};
use http::HeaderMap;
use tokio::time::Instant;

/// What the layer knows of a call before it admits it: the gRPC method
/// path (`/package.Service/Method`), the request's metadata (its HTTP/2
/// headers) and its [`Caller`] (the criticality and the deadline its
/// `x-admission-criticality` and `grpc-timeout` metadata say, read under
/// the layer's trust policy).
///
/// A classifier ([`AdmissionLayer::classify`](crate::AdmissionLayer::classify))
/// picks the call's class from it.
///
/// # Examples
///
/// ```
/// use admission_core::{Caller, Class};
/// use admission_tonic::Call;
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

    /// The default classification ([`AdmissionLayer::new`](crate::AdmissionLayer::new)):
    /// health checks (`grpc.health.v1.Health`) and server reflection lease
    /// from *control* (when a layer leases them at all: by default they
    /// are [unleased](crate::AdmissionLayer::unleased)), every other call
    /// from *work*. gRPC has no read
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
