//! The response body of a call that went through admission.
//!
//! This module owns [`LeasedBody`]: the inner body (the call's messages and
//! trailers) with a share of the call's lease, or the empty body of a
//! trailers-only refusal. It must never release the lease before the inner
//! body has reported its end, failed, or been dropped: a handler that
//! returned a stream has not finished its response.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::Lease;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// The body of every response [`AdmissionService`](crate::AdmissionService)
    /// returns: an admitted call's own body holding a share of the call's
    /// lease until it ends, or a refusal's empty body, which ends at once
    /// so that the refusal goes out as one HEADERS frame (trailers-only).
    ///
    /// It is generic over the inner body (as tower-http's bodies are), so
    /// the service serves any tower or hyper stack whose bodies carry
    /// [`Bytes`].
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::body::LeasedBody;
    /// use http_body_util::BodyExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let lease = pools.try_lease(Class::Work).unwrap();
    /// let body = LeasedBody::new(http_body_util::Full::new(bytes::Bytes::from("message")), lease);
    /// assert_eq!(pools.pool(Class::Work).stats().in_use, 1);
    ///
    /// // Sending the body to its end releases the lease.
    /// let bytes = body.collect().await.unwrap().to_bytes();
    /// assert_eq!(bytes, "message");
    /// assert_eq!(pools.pool(Class::Work).stats().in_use, 0);
    /// # }
    /// ```
    #[derive(Debug)]
    pub struct LeasedBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<B> {
        Leased {
            #[pin]
            inner: B,
            // The call's lease lives here, not in the handler's future: the
            // handler returns before a stream has been sent, and the call
            // holds its slot for the whole response. `None` once the body
            // reported its end or an error. Declared after `inner` (the one
            // drop order of every adapter, as tower's `_permit`): the body's
            // own resources, a stream and whatever feeds it, are gone before
            // the slot is back.
            lease: Option<Lease>,
        },
        Refused,
    }
}

impl<B> LeasedBody<B> {
    /// Wraps `inner`, holding `lease` until the body ends or is dropped.
    pub fn new(inner: B, lease: Lease) -> Self {
        LeasedBody {
            kind: Kind::Leased {
                inner,
                lease: Some(lease),
            },
        }
    }

    /// A trailers-only refusal's body: no frame at all.
    pub(crate) fn refused() -> Self {
        LeasedBody {
            kind: Kind::Refused,
        }
    }

    /// Whether the body still holds a lease: `false` once it has ended, and
    /// for a refusal's body.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    /// use admission_tonic::body::LeasedBody;
    ///
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let body = LeasedBody::new(String::from("message"), pools.try_lease(Class::Work).unwrap());
    /// assert!(body.holds_lease());
    /// ```
    pub fn holds_lease(&self) -> bool {
        matches!(&self.kind, Kind::Leased { lease: Some(_), .. })
    }
}

impl<B: Body<Data = Bytes>> Body for LeasedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Leased { mut inner, lease } => {
                let frame = ready!(inner.as_mut().poll_frame(cx));
                let ended = match &frame {
                    None | Some(Err(_)) => true,
                    // A gRPC response ends with its trailers frame.
                    Some(Ok(_)) => inner.is_end_stream(),
                };
                if ended {
                    // The call is done with its slot.
                    drop(lease.take());
                }
                Poll::Ready(frame)
            }
            KindProj::Refused => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Leased { inner, .. } => inner.is_end_stream(),
            Kind::Refused => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Leased { inner, .. } => inner.size_hint(),
            Kind::Refused => SizeHint::with_exact(0),
        }
    }
}
