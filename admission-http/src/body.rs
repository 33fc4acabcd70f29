//! The response body of a request that went through admission.
//!
//! This module owns [`LeasedBody`]: the inner body (an HTTP body, or a gRPC
//! call's messages and trailers) with a share of the request's lease, or the
//! refusal's own body (a problem document, or none at all for a gRPC
//! trailers-only answer). It must never release the lease before the inner
//! body has reported its end, failed, or been dropped: a handler that
//! returned a streamed body has not finished its response.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::Lease;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// The body of every response [`AdmissionService`](crate::AdmissionService)
    /// returns: an admitted response's own body holding a share of the
    /// request's lease until it ends, or a refusal's body: a problem
    /// document over HTTP; over gRPC none, so that the refusal goes out as
    /// one HEADERS frame (trailers-only).
    ///
    /// It is generic over the inner body (as tower-http's bodies are), so the
    /// service serves any tower or hyper stack whose bodies carry [`Bytes`].
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::body::LeasedBody;
    /// use admission_core::{Class, RequestPools};
    /// use http_body_util::BodyExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let lease = pools.try_lease(Class::Control).unwrap();
    /// let body = LeasedBody::new(http_body_util::Full::new(bytes::Bytes::from("# EOF\n")), lease);
    /// assert_eq!(pools.pool(Class::Control).stats().in_use, 1);
    ///
    /// // Sending the body to its end releases the lease.
    /// let bytes = body.collect().await.unwrap().to_bytes();
    /// assert_eq!(bytes, "# EOF\n");
    /// assert_eq!(pools.pool(Class::Control).stats().in_use, 0);
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
            // The request's lease lives here, not in the handler's future:
            // the handler returns before a streamed body has been sent, and
            // the request holds its slot for the whole response. `None` once
            // the body reported its end or an error. Declared after `inner`
            // (the one drop order of both adapters, as tower's `_permit`):
            // the body's own resources, a stream and whatever feeds it, are
            // gone before the slot is back.
            lease: Option<Lease>,
        },
        // A refusal's body: its bytes until they are sent; `None` from the
        // start for a trailers-only gRPC refusal.
        Refusal {
            body: Option<Bytes>,
        },
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

    /// A refusal's body: the bytes of its answer, or `None` for an answer
    /// that is all head (a gRPC trailers-only refusal).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::body::LeasedBody;
    /// use http_body::Body;
    ///
    /// let trailers_only = LeasedBody::<String>::refusal(None);
    /// assert!(trailers_only.is_end_stream() && !trailers_only.holds_lease());
    /// ```
    pub fn refusal(body: Option<Bytes>) -> Self {
        LeasedBody {
            kind: Kind::Refusal { body },
        }
    }

    /// Whether the body still holds a lease: `false` once it has ended, and
    /// for a refusal's body.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::body::LeasedBody;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let body = LeasedBody::new(String::from("ok"), pools.try_lease(Class::Work).unwrap());
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
                    Some(Ok(_)) => inner.is_end_stream(),
                };
                if ended {
                    // The request is done with its slot.
                    drop(lease.take());
                }
                Poll::Ready(frame)
            }
            KindProj::Refusal { body } => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Leased { inner, .. } => inner.is_end_stream(),
            Kind::Refusal { body } => body.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Leased { inner, .. } => inner.size_hint(),
            Kind::Refusal { body } => {
                SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}
