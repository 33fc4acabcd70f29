//! How a request is given its class.
//!
//! This module owns [`Classify`]: the method default, one class for every
//! request, or the user's closure over the request. It must never take a
//! lease or look at the body.

use std::fmt;
use std::sync::Arc;

use actix_web::dev::ServiceRequest;
use admission_core::Class;

/// A user's classifier, shared by every worker's middleware.
type Classifier = Arc<dyn Fn(&ServiceRequest) -> Class + Send + Sync + 'static>;

/// How the middleware picks a request's class.
#[derive(Clone)]
pub(crate) enum Classify {
    /// [`Classify::method_class`](admission_http::Classify::method_class): reads are *control*, every other method *work*.
    Method,
    /// One class for every request (a scope's middleware).
    Fixed(Class),
    /// The user's closure over the request.
    Custom(Classifier),
}

impl Classify {
    pub(crate) fn custom<F>(classifier: F) -> Classify
    where
        F: Fn(&ServiceRequest) -> Class + Send + Sync + 'static,
    {
        Classify::Custom(Arc::new(classifier))
    }

    /// The request's class.
    pub(crate) fn class(&self, req: &ServiceRequest) -> Class {
        match self {
            Classify::Method => admission_http::Classify::method_class(req.method().as_str()),
            Classify::Fixed(class) => *class,
            Classify::Custom(classifier) => classifier(req),
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
