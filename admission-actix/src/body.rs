//! The response body of a request that went through admission.
//!
//! This module owns [`LeasedBody`]: actix-web's [`MessageBody`] over
//! `admission-http`'s [`LeasedBody`](admission_http::body::LeasedBody), so
//! that an actix-web response holds and gives back its lease by the same
//! code as the other adapters' (the end of the body, an error, a drop, or
//! the [`ProgressTimeout`] bound on a consumer that stopped reading). It
//! must never decide itself when the lease goes: it only converts between
//! actix-web's body trait and `http-body`'s.

use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use actix_web::body::{BodySize, MessageBody};
use admission_core::Lease;
use admission_http::body::{BoxError, ProgressTimeout};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// The body of every response [`AdmissionMiddleware`](crate::AdmissionMiddleware)
    /// returns: an admitted response's own body holding a share of its
    /// request's lease until the last chunk has been sent
    /// ([`poll_next`](MessageBody::poll_next) returns `None`), the body
    /// fails, it is dropped (the client went away, or the response was
    /// never sent), or its consumer lets a chunk lie unread past the
    /// [`ProgressTimeout`] (then the body ends with
    /// [`Stalled`](admission_http::body::Stalled)); or a refusal's problem
    /// body.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::body;
    /// use admission_actix::body::LeasedBody;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let lease = pools.try_lease(Class::Control).unwrap();
    /// let body = LeasedBody::new("# EOF\n", lease);
    /// assert_eq!(pools.pool(Class::Control).stats().in_use, 1);
    ///
    /// // Sending the body to its end releases the lease.
    /// let bytes = body::to_bytes(body).await.unwrap();
    /// assert_eq!(bytes, "# EOF\n");
    /// assert_eq!(pools.pool(Class::Control).stats().in_use, 0);
    /// # }
    /// ```
    #[derive(Debug)]
    pub struct LeasedBody<B> {
        #[pin]
        inner: admission_http::body::LeasedBody<HttpBody<B>>,
    }
}

pin_project_lite::pin_project! {
    /// An actix-web body seen as an `http-body` one.
    #[derive(Debug)]
    struct HttpBody<B> {
        #[pin]
        inner: B,
    }
}

impl<B> LeasedBody<B> {
    /// Wraps `inner`, holding `lease` until the body ends, is dropped, or
    /// lets a chunk lie unread past the default [`ProgressTimeout`].
    pub fn new(inner: B, lease: Lease) -> Self {
        LeasedBody {
            inner: admission_http::body::LeasedBody::new(HttpBody { inner }, lease),
        }
    }

    /// Sets how long the body may let a chunk lie unread before its lease
    /// is taken back ([`ProgressTimeout`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_actix::body::LeasedBody;
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::body::ProgressTimeout;
    ///
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let bound = ProgressTimeout::new(Duration::from_secs(5)).unwrap();
    /// let body = LeasedBody::new("ok", pools.try_lease(Class::Work).unwrap()).progress_timeout(bound);
    /// assert!(body.holds_lease());
    /// ```
    #[must_use]
    pub fn progress_timeout(self, bound: ProgressTimeout) -> Self {
        LeasedBody {
            inner: self.inner.progress_timeout(bound),
        }
    }

    /// A body that holds no lease (a request let through by the bypass,
    /// or one whose lease an outer middleware's body holds).
    pub(crate) fn unleased(inner: B) -> Self {
        LeasedBody {
            inner: admission_http::body::LeasedBody::unleased(HttpBody { inner }),
        }
    }

    /// A refusal's problem body.
    pub(crate) fn problem(body: Bytes) -> Self {
        LeasedBody {
            inner: admission_http::body::LeasedBody::refusal(Some(body)),
        }
    }

    /// Whether the body still holds a lease: `false` once it has ended or
    /// stalled, and for a refusal's body.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::body::LeasedBody;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let body = LeasedBody::new("ok", pools.try_lease(Class::Work).unwrap());
    /// assert!(body.holds_lease());
    /// ```
    pub fn holds_lease(&self) -> bool {
        self.inner.holds_lease()
    }
}

/// Why a [`LeasedBody`] failed: its inner body's error (as text: actix-web's
/// errors cannot cross threads, the progress watchdog's can), or
/// [`Stalled`](admission_http::body::Stalled), which
/// [`source`](StdError::source) downcasts to.
#[derive(Debug)]
#[doc(hidden)]
pub struct BodyError(BoxError);

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for BodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

impl<B: MessageBody> MessageBody for LeasedBody<B> {
    type Error = BodyError;

    fn size(&self) -> BodySize {
        match self.inner.get_ref() {
            Some(body) => body.inner.size(),
            None => match self.inner.size_hint().exact() {
                Some(len) => BodySize::Sized(len),
                None => BodySize::Stream,
            },
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let frame = ready!(self.project().inner.poll_frame(cx));
        // An actix-web body has data frames only: a non-data frame is never
        // made, so none is dropped here.
        Poll::Ready(frame.map(|frame| match frame {
            Ok(frame) => Ok(frame.into_data().unwrap_or_default()),
            Err(error) => Err(BodyError(error)),
        }))
    }
}

impl<B: MessageBody> Body for HttpBody<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let chunk = ready!(self.project().inner.poll_next(cx));
        Poll::Ready(chunk.map(|chunk| match chunk {
            Ok(bytes) => Ok(Frame::data(bytes)),
            Err(error) => Err(error.into().to_string().into()),
        }))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.inner.size(), BodySize::None | BodySize::Sized(0))
    }

    fn size_hint(&self) -> SizeHint {
        match self.inner.size() {
            BodySize::None => SizeHint::with_exact(0),
            BodySize::Sized(len) => SizeHint::with_exact(len),
            BodySize::Stream => SizeHint::default(),
        }
    }
}
