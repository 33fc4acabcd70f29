//! What a handler returns when admission or its work produced no response:
//! the one logic under every adapter's `Rejection`.
//!
//! This module owns [`Rejection`] (a refusal or a failed piece of work, the
//! refusal status it is answered with, and the app's own body where it gave
//! one) and the macro the adapters declare their `Rejection` with, so each
//! adapter adds only its framework's trait. It must never choose a status,
//! a header or a problem field of its own: those are [`Problem`]'s and
//! [`GrpcAnswer`]'s.

use std::error::Error;
use std::fmt;

use admission_core::{Refusal, WorkError};
use bytes::Bytes;
use http::HeaderValue;
use http::header::CONTENT_TYPE;

use crate::grpc::{GrpcAnswer, GrpcRefusalStatus};
use crate::problem::{HttpRefusalStatus, Problem};

/// A refusal or a failed piece of work, as a handler returns it: for HTTP,
/// `503` (or `429`, see [`with_status`](Self::with_status)) with
/// `Retry-After` and an `application/problem+json` body for a refusal,
/// `500` with a code and no message for work that failed or panicked, and
/// `500` with `ADMISSION_REENTRANT` and no `Retry-After` for a task that
/// waited on a slot only it could free; for gRPC, the same as a
/// [`GrpcAnswer`].
///
/// Each adapter's `Rejection` wraps this one and adds its framework's
/// trait (axum's `IntoResponse`, actix-web's `ResponseError`, tonic's
/// `Status`); use the adapter's.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::{HttpRefusalStatus, Rejection};
///
/// let pool = Pool::new("argon2", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let rejection = Rejection::<HttpRefusalStatus>::from(pool.try_admit().unwrap_err());
/// assert_eq!(rejection.problem().status(), 503);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection<P> {
    error: WorkError<()>,
    status: P,
    body: Option<(HeaderValue, Bytes)>,
}

impl<P: Copy + Default> Rejection<P> {
    /// The answer to `error` (any error): the [`Refusal`] in its
    /// [`source`](Error::source) chain when it holds one (so a refusal that
    /// came up three error types deep is still answered `503` with its
    /// hints), or else a failure (`500` with a code and none of the error's
    /// words).
    ///
    /// An app's own error type converts with `?` through a one-line
    /// `impl From<AppError> for Rejection` that calls this.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::fmt;
    /// use admission_core::{Pool, Refusal};
    /// use admission_http::{HttpRefusalStatus, Rejection};
    ///
    /// #[derive(Debug)]
    /// struct Crypto(Refusal);
    /// impl fmt::Display for Crypto {
    ///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str("crypto") }
    /// }
    /// impl std::error::Error for Crypto {
    ///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(&self.0) }
    /// }
    ///
    /// let pool = Pool::new("argon2", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let deep = Crypto(pool.try_admit().unwrap_err());
    /// let rejection = Rejection::<HttpRefusalStatus>::from_error(&deep);
    /// assert_eq!(rejection.refusal().unwrap().pool(), "argon2");
    /// assert_eq!(Rejection::<HttpRefusalStatus>::from_error(&fmt::Error).problem().status(), 500);
    /// ```
    pub fn from_error(error: &(dyn Error + 'static)) -> Self {
        match Refusal::find(error) {
            Some(refusal) => Rejection::from(refusal.clone()),
            None => Rejection::from(WorkError::Failed(())),
        }
    }

    /// The same answer with another refusal status (for HTTP,
    /// [`HttpRefusalStatus::TooManyRequests`] for clients that expect
    /// `429`); failures keep theirs.
    #[must_use]
    pub fn with_status(self, status: P) -> Self {
        Rejection { status, ..self }
    }

    /// The refusal, when this is one (not a failure).
    pub fn refusal(&self) -> Option<&Refusal> {
        self.error.refusal()
    }

    /// The refusal or failure answered.
    pub fn work_error(&self) -> &WorkError<()> {
        &self.error
    }
}

impl Rejection<HttpRefusalStatus> {
    /// The HTTP status this answers with (`503`, `429` or `500`).
    pub fn status_code(&self) -> u16 {
        Problem::work_error_status(&self.error, self.status)
    }

    /// The problem document this answers with.
    pub fn problem(&self) -> Problem {
        Problem::work_error(&self.error, self.status)
    }

    /// The same answer with the app's own body (an HTML page, its own JSON)
    /// in place of the problem document; the status, `Retry-After`,
    /// `x-admission-retry-after-ms` and `x-admission-refusal` stay ours.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    /// use admission_http::{HttpRefusalStatus, Rejection};
    /// use bytes::Bytes;
    /// use http::HeaderValue;
    ///
    /// let pool = Pool::new("argon2", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let page = Rejection::<HttpRefusalStatus>::from(pool.try_admit().unwrap_err())
    ///     .with_body(HeaderValue::from_static("text/html"), Bytes::from_static(b"<h1>Busy</h1>"))
    ///     .into_http(|bytes| bytes);
    /// assert_eq!(page.status(), 503);
    /// assert_eq!(page.headers()["content-type"], "text/html");
    /// assert!(page.headers().contains_key("retry-after"));
    /// assert_eq!(page.body(), "<h1>Busy</h1>");
    /// ```
    #[must_use]
    pub fn with_body(self, content_type: HeaderValue, body: Bytes) -> Self {
        Rejection {
            body: Some((content_type, body)),
            ..self
        }
    }

    /// The HTTP answer, its body made by `body` from the bytes (the
    /// problem document, or the app's own body).
    pub fn into_http<B>(self, body: impl FnOnce(Bytes) -> B) -> http::Response<B> {
        let problem = self.problem();
        match self.body {
            None => problem.into_http(body),
            Some((content_type, bytes)) => {
                let mut response = problem.into_http(|_| body(bytes));
                response.headers_mut().insert(CONTENT_TYPE, content_type);
                response
            }
        }
    }
}

impl Rejection<GrpcRefusalStatus> {
    /// The gRPC answer this is.
    pub fn answer(&self) -> GrpcAnswer {
        GrpcAnswer::work_error(&self.error, self.status)
    }
}

impl<P: Default> From<Refusal> for Rejection<P> {
    fn from(refusal: Refusal) -> Self {
        Rejection {
            error: WorkError::Refused(refusal),
            status: P::default(),
            body: None,
        }
    }
}

impl<P: Default, E> From<WorkError<E>> for Rejection<P> {
    fn from(err: WorkError<E>) -> Self {
        Rejection {
            error: err.map_err(|_| ()),
            status: P::default(),
            body: None,
        }
    }
}

impl<P> fmt::Display for Rejection<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<P: fmt::Debug> Error for Rejection<P> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.refusal().map(|r| r as _)
    }
}

/// Declares an adapter's `Rejection`: a newtype over [`Rejection`] with its
/// conversions (`From<Refusal>`, `From<WorkError<E>>`, `from_error`), its
/// accessors and `Error`, so the adapter writes only its framework's trait.
/// Not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! declare_rejection {
    ($(#[$meta:meta])* $status:ty) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Rejection($crate::Rejection<$status>);

        impl Rejection {
            /// The answer to `error` (any error): the
            /// [`Refusal`](admission_core::Refusal) in its `source()` chain
            /// when it holds one, else a failure (`500` with a code and none
            /// of the error's words). An app's own error type converts with
            /// `?` through a one-line `impl From<AppError> for Rejection`
            /// that calls this.
            pub fn from_error(error: &(dyn ::std::error::Error + 'static)) -> Self {
                Rejection($crate::Rejection::from_error(error))
            }

            /// The same answer with another refusal status; failures keep
            /// theirs.
            #[must_use]
            pub fn with_status(self, status: $status) -> Self {
                Rejection(self.0.with_status(status))
            }

            /// The refusal, when this is one (not a failure).
            pub fn refusal(&self) -> Option<&$crate::__private::Refusal> {
                self.0.refusal()
            }

            /// The answer shared by every adapter, for what this adapter's
            /// trait does not show.
            pub fn as_shared(&self) -> &$crate::Rejection<$status> {
                &self.0
            }
        }

        impl From<$crate::Rejection<$status>> for Rejection {
            fn from(shared: $crate::Rejection<$status>) -> Self {
                Rejection(shared)
            }
        }

        impl From<$crate::__private::Refusal> for Rejection {
            fn from(refusal: $crate::__private::Refusal) -> Self {
                Rejection($crate::Rejection::from(refusal))
            }
        }

        impl<E> From<$crate::__private::WorkError<E>> for Rejection {
            fn from(err: $crate::__private::WorkError<E>) -> Self {
                Rejection($crate::Rejection::from(err))
            }
        }

        impl ::std::fmt::Display for Rejection {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(&self.0, f)
            }
        }

        impl ::std::error::Error for Rejection {
            fn source(&self) -> Option<&(dyn ::std::error::Error + 'static)> {
                self.0.refusal().map(|r| r as _)
            }
        }
    };
}
