//! Which protocol a layer speaks: how it classifies by default and how it
//! answers a refusal.
//!
//! This module owns [`Protocol`], implemented by [`HttpRefusalStatus`] (a
//! problem document with `503`/`429` and `Retry-After`) and
//! [`GrpcRefusalStatus`] (a trailers-only `UNAVAILABLE`/`RESOURCE_EXHAUSTED`
//! with `grpc-retry-pushback-ms`): the refusal status an app configures is
//! also the protocol its layer speaks. It must never admit anything.

use std::fmt;

use admission_core::Refusal;
use bytes::Bytes;
use http::Response;

use crate::classify::Classify;
use crate::grpc::{GrpcAnswer, GrpcRefusalStatus};
use crate::problem::{HttpRefusalStatus, Problem};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::HttpRefusalStatus {}
    impl Sealed for super::GrpcRefusalStatus {}
}

/// The protocol a layer speaks, named by the refusal status it is
/// configured with: [`HttpRefusalStatus`] or [`GrpcRefusalStatus`]. Sealed:
/// this crate answers in these two forms only.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::{GrpcRefusalStatus, HttpRefusalStatus, Protocol};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refusal = pool.try_admit().unwrap_err();
///
/// let http = HttpRefusalStatus::default().refusal(&refusal);
/// assert_eq!(http.status(), 503);
/// assert!(http.body().is_some(), "a problem document");
///
/// let grpc = GrpcRefusalStatus::default().refusal(&refusal);
/// assert_eq!(grpc.headers()["grpc-status"], "14");
/// assert!(grpc.body().is_none(), "trailers-only: no body at all");
/// ```
#[doc(hidden)]
pub trait Protocol: sealed::Sealed + Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// How a request is classified when the app does not say.
    fn default_classify() -> Classify;

    /// The answer to a refusal: the response head, and the body's bytes
    /// (`None`: no body, the response ends with its head).
    fn refusal(&self, refusal: &Refusal) -> Response<Option<Bytes>>;
}

impl Protocol for HttpRefusalStatus {
    fn default_classify() -> Classify {
        Classify::Method
    }

    fn refusal(&self, refusal: &Refusal) -> Response<Option<Bytes>> {
        Problem::refusal(refusal, *self).into_http(Some)
    }
}

impl Protocol for GrpcRefusalStatus {
    fn default_classify() -> Classify {
        Classify::GrpcPath
    }

    fn refusal(&self, refusal: &Refusal) -> Response<Option<Bytes>> {
        GrpcAnswer::refusal(refusal, *self)
            .into_trailers_only()
            .map(|()| None)
    }
}
