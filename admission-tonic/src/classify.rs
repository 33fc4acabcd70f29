//! How a call is given its class.
//!
//! This module owns [`Call`], what a classifier sees of a call, and
//! [`Classify`]: the default over the gRPC method path, one class for every
//! call, or the user's closure. It must never take a lease or look at the
//! request's messages.

use std::fmt;
use std::sync::Arc;

use admission_core::Class;
use http::HeaderMap;

use crate::deadline::Deadline;

/// The services the default classification leases from *control*: health
/// checks and server reflection, cheap reads that probes and tools send
/// while the service's own methods may be saturated.
const CONTROL_SERVICES: [&str; 3] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// What the layer knows of a call before it admits it: the gRPC method
/// path (`/package.Service/Method`), the request's metadata (its HTTP/2
/// headers) and the caller's [`Deadline`].
///
/// A classifier ([`AdmissionLayer::classify`](crate::AdmissionLayer::classify))
/// picks the call's class from it. Deadline-aware admission (the overload
/// issue) will read [`deadline`](Self::deadline) from here too.
///
/// # Examples
///
/// ```
/// use admission_core::Class;
/// use admission_tonic::Call;
///
/// let headers = http::HeaderMap::new();
/// let call = Call::new("/grpc.health.v1.Health/Check", &headers, None);
/// assert_eq!((call.service(), call.method()), ("grpc.health.v1.Health", "Check"));
/// assert_eq!(call.default_class(), Class::Control);
///
/// let call = Call::new("/shop.v1.Orders/Create", &headers, None);
/// assert_eq!(call.default_class(), Class::Work);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    path: &'a str,
    headers: &'a HeaderMap,
    deadline: Option<Deadline>,
}

impl<'a> Call<'a> {
    /// A call to `path` with `headers` and `deadline`: what the layer
    /// builds for each request; public so classifiers can be tested.
    pub fn new(path: &'a str, headers: &'a HeaderMap, deadline: Option<Deadline>) -> Call<'a> {
        Call {
            path,
            headers,
            deadline,
        }
    }

    /// The request path, `/package.Service/Method` for a gRPC call.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// The fully qualified service name (`package.Service`), or `""` when
    /// the path is not a gRPC method path.
    pub fn service(&self) -> &'a str {
        self.split().map_or("", |(service, _)| service)
    }

    /// The method name (`Method`), or `""` when the path is not a gRPC
    /// method path.
    pub fn method(&self) -> &'a str {
        self.split().map_or("", |(_, method)| method)
    }

    /// The request's metadata, as HTTP/2 headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The caller's deadline, when it sent a well-formed `grpc-timeout`.
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// The default classification ([`AdmissionLayer::new`](crate::AdmissionLayer::new)):
    /// health checks (`grpc.health.v1.Health`) and server reflection lease
    /// from *control*, every other call from *work*. gRPC has no read
    /// methods to tell apart by the wire; a classifier that knows the
    /// service's reads can fall back on this for the rest.
    pub fn default_class(&self) -> Class {
        if CONTROL_SERVICES.contains(&self.service()) {
            Class::Control
        } else {
            Class::Work
        }
    }

    fn split(&self) -> Option<(&'a str, &'a str)> {
        let (service, method) = self.path.strip_prefix('/')?.split_once('/')?;
        let valid = !service.is_empty() && !method.is_empty() && !method.contains('/');
        valid.then_some((service, method))
    }
}

/// A user's classifier, shared by every clone of the layer.
type Classifier = Arc<dyn Fn(&Call<'_>) -> Class + Send + Sync + 'static>;

/// How the layer picks a call's class.
#[derive(Clone)]
pub(crate) enum Classify {
    /// [`Call::default_class`].
    Default,
    /// One class for every call (a layer around one service).
    Fixed(Class),
    /// The user's closure over the call.
    Custom(Classifier),
}

impl Classify {
    pub(crate) fn custom<F>(classifier: F) -> Classify
    where
        F: Fn(&Call<'_>) -> Class + Send + Sync + 'static,
    {
        Classify::Custom(Arc::new(classifier))
    }

    /// The call's class.
    pub(crate) fn class(&self, call: &Call<'_>) -> Class {
        match self {
            Classify::Default => call.default_class(),
            Classify::Fixed(class) => *class,
            Classify::Custom(classifier) => classifier(call),
        }
    }
}

impl fmt::Debug for Classify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classify::Default => f.write_str("Default"),
            Classify::Fixed(class) => f.debug_tuple("Fixed").field(class).finish(),
            Classify::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_service_and_method() {
        let headers = HeaderMap::new();
        let parts = |path| {
            let call = Call::new(path, &headers, None);
            (call.service(), call.method())
        };
        assert_eq!(parts("/a.B/C"), ("a.B", "C"));
        for not_grpc in ["", "/", "/a.B", "/a.B/", "//C", "a.B/C", "/a.B/C/D"] {
            assert_eq!(parts(not_grpc), ("", ""), "{not_grpc:?}");
        }
    }

    #[test]
    fn only_health_and_reflection_default_to_control() {
        let headers = HeaderMap::new();
        let class = |path| Call::new(path, &headers, None).default_class();
        assert_eq!(class("/grpc.health.v1.Health/Watch"), Class::Control);
        assert_eq!(
            class("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            Class::Control
        );
        assert_eq!(
            class("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"),
            Class::Control
        );
        assert_eq!(class("/grpc.health.v1.HealthX/Check"), Class::Work);
        assert_eq!(class("/registry.v1.Registry/Walk"), Class::Work);
        assert_eq!(class("/"), Class::Work);
    }
}
