//! How a request is given its class.
//!
//! This module owns [`Classifier`]: the method default, a fixed class per
//! route, or the user's closure. It must never take a lease or look at the
//! body.

use std::fmt;
use std::sync::Arc;

use admission_core::Class;
use http::Request;
use http::request::Parts;

/// A user's classifier closure, shared by every clone of the layer.
pub(crate) type ClassifyFn = dyn Fn(&Parts) -> Class + Send + Sync + 'static;

/// Chooses the [`Class`] a request leases from.
#[derive(Clone)]
pub(crate) enum Classifier {
    /// [`Class::for_method`]: reads are *control*, every other method *work*.
    Method,
    /// One class for every request (a per-route layer).
    Fixed(Class),
    /// The user's closure over the request head.
    Custom(Arc<ClassifyFn>),
}

impl Classifier {
    /// The request's class, and the request given back whole.
    pub(crate) fn classify<B>(&self, request: Request<B>) -> (Class, Request<B>) {
        match self {
            Classifier::Method => (Class::for_method(request.method().as_str()), request),
            Classifier::Fixed(class) => (*class, request),
            Classifier::Custom(classify) => {
                // Moving the head out and back is two moves, no allocation; it
                // lets the closure ignore the body type.
                let (parts, body) = request.into_parts();
                let class = classify(&parts);
                (class, Request::from_parts(parts, body))
            }
        }
    }
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classifier::Method => f.write_str("Method"),
            Classifier::Fixed(class) => f.debug_tuple("Fixed").field(class).finish(),
            Classifier::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}
