//! How a request is given its class.
//!
//! This module owns [`Classify`]: the protocol's default (reads by method
//! for HTTP, health and reflection by path for gRPC), one class for every
//! request, or the app's closure over the request head (and, for adapters
//! that offer it, the caller its headers describe). It must never take a
//! lease or look at the body.

use std::fmt;
use std::sync::Arc;

use admission_core::{Caller, Class};
use http::Request;
use http::request::Parts;

/// A closure over the request head and its caller, shared by every clone.
type Classifier = Arc<dyn Fn(&Parts, &Caller) -> Class + Send + Sync + 'static>;

/// How a layer picks a request's class.
///
/// Apps pick one through the layer's constructors (`new`, `class`,
/// `classify`); adapters build one for constructors of their own.
#[derive(Clone)]
#[doc(hidden)]
pub enum Classify {
    /// [`Classify::method_class`]: reads are *control*, every other method
    /// *work* (HTTP's default).
    Method,
    /// [`grpc_default_class`](crate::grpc_default_class) of the path:
    /// health and reflection are *control*, every other call *work* (gRPC's
    /// default).
    GrpcPath,
    /// One class for every request (a per-route layer).
    Fixed(Class),
    /// A closure over the request head and its caller.
    Custom(Classifier),
}

impl Classify {
    /// The class HTTP's default gives a request by its method: `GET`,
    /// `HEAD` and `OPTIONS` are reads (*control*), every other method is a
    /// mutation (*work*). `method` is the method's text, as every version
    /// of `http` (and actix-web's) spells it.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Class;
    /// use admission_http::Classify;
    ///
    /// assert_eq!(Classify::method_class("GET"), Class::Control);
    /// assert_eq!(Classify::method_class("POST"), Class::Work);
    /// ```
    pub fn method_class(method: &str) -> Class {
        match method {
            "GET" | "HEAD" | "OPTIONS" => Class::Control,
            _ => Class::Work,
        }
    }

    /// The app's closure over the request head (method, URI, headers,
    /// extensions).
    pub fn head<F>(classify: F) -> Classify
    where
        F: Fn(&Parts) -> Class + Send + Sync + 'static,
    {
        Classify::Custom(Arc::new(move |head, _| classify(head)))
    }

    /// A closure over the request head and the caller its headers describe
    /// (its criticality after the trust policy, its deadline).
    pub fn head_and_caller<F>(classify: F) -> Classify
    where
        F: Fn(&Parts, &Caller) -> Class + Send + Sync + 'static,
    {
        Classify::Custom(Arc::new(classify))
    }

    /// The request's class, and the request given back whole.
    /// The class of `request` read in place: `None` for an app's closure,
    /// which takes the head ([`class`](Self::class)).
    pub(crate) fn class_in_place<B>(&self, request: &Request<B>) -> Option<Class> {
        match self {
            Classify::Method => Some(Classify::method_class(request.method().as_str())),
            Classify::GrpcPath => Some(crate::grpc_default_class(request.uri().path())),
            Classify::Fixed(class) => Some(*class),
            Classify::Custom(_) => None,
        }
    }

    pub(crate) fn class<B>(&self, request: Request<B>, caller: &Caller) -> (Class, Request<B>) {
        match self {
            Classify::Method => (Classify::method_class(request.method().as_str()), request),
            Classify::GrpcPath => (crate::grpc_default_class(request.uri().path()), request),
            Classify::Fixed(class) => (*class, request),
            Classify::Custom(classifier) => {
                // Moving the head out and back is two moves, no allocation; it
                // lets the closure ignore the body type.
                let (parts, body) = request.into_parts();
                let class = classifier(&parts, caller);
                (class, Request::from_parts(parts, body))
            }
        }
    }
}

impl fmt::Debug for Classify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classify::Method => f.write_str("Method"),
            Classify::GrpcPath => f.write_str("GrpcPath"),
            Classify::Fixed(class) => f.debug_tuple("Fixed").field(class).finish(),
            Classify::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_control_and_every_other_method_is_work() {
        for read in ["GET", "HEAD", "OPTIONS"] {
            assert_eq!(Classify::method_class(read), Class::Control, "{read}");
        }
        for write in ["POST", "PUT", "PATCH", "DELETE", "get"] {
            assert_eq!(Classify::method_class(write), Class::Work, "{write}");
        }
    }
}
