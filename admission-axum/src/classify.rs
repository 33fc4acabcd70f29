//! How a request is given its class.
//!
//! This module owns [`Classify`]: the method default, one class for every
//! request, or the user's closure over the request head. It must never take
//! a lease or look at the body.

use std::fmt;
use std::sync::Arc;

use admission_core::Class;
use http::Request;
use http::request::Parts;

/// A user's classifier, shared by every clone of the layer.
type Classifier = Arc<dyn Fn(&Parts) -> Class + Send + Sync + 'static>;

/// How the layer picks a request's class.
#[derive(Clone)]
pub(crate) enum Classify {
    /// [`Class::for_method`]: reads are *control*, every other method *work*.
    Method,
    /// One class for every request (a per-route layer).
    Fixed(Class),
    /// The user's closure over the request head.
    Custom(Classifier),
}

impl Classify {
    pub(crate) fn custom<F>(classifier: F) -> Classify
    where
        F: Fn(&Parts) -> Class + Send + Sync + 'static,
    {
        Classify::Custom(Arc::new(classifier))
    }

    /// The request's class, and the request given back whole.
    pub(crate) fn class<B>(&self, request: Request<B>) -> (Class, Request<B>) {
        match self {
            Classify::Method => (Class::for_method(request.method().as_str()), request),
            Classify::Fixed(class) => (*class, request),
            Classify::Custom(classifier) => {
                // Moving the head out and back is two moves, no allocation; it
                // lets the closure ignore the body type.
                let (parts, body) = request.into_parts();
                let class = classifier(&parts);
                (class, Request::from_parts(parts, body))
            }
        }
    }
}

impl fmt::Debug for Classify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classify::Method => f.write_str("Method"),
            Classify::Fixed(class) => f.debug_tuple("Fixed").field(class).finish(),
            Classify::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}
