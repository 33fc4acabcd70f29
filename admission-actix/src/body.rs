//! The response body of a request that went through admission.
//!
//! This module owns [`LeasedBody`]: the inner body with a share of the
//! request's lease, or the refusal's own problem body. It must never release
//! the lease before the body has ended (its last chunk sent, or an error) or
//! been dropped.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use admission_core::Lease;
use bytes::Bytes;

pin_project_lite::pin_project! {
    /// The body of every response [`AdmissionMiddleware`](crate::AdmissionMiddleware)
    /// returns: an admitted response's own body holding a share of its
    /// request's lease until the last chunk has been sent
    /// ([`poll_next`](MessageBody::poll_next) returns `None`), the body
    /// fails, or it is dropped (the client went away, or the response was
    /// never sent); or a refusal's problem body.
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
            // The request's slot lives here, not in the middleware's future,
            // because actix-web resolves that future as soon as the handler
            // returns the response head, while the body may stream for much
            // longer. `None` once the body has ended. Declared after `inner`
            // (the one drop order of both adapters, as tower's `_permit`):
            // the body's own resources, a stream and whatever feeds it, are
            // gone before the slot is back.
            lease: Option<Lease>,
        },
        Problem {
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

    /// A refusal's problem body.
    pub(crate) fn problem(body: Bytes) -> Self {
        LeasedBody {
            kind: Kind::Problem { body: Some(body) },
        }
    }

    /// Whether the body still holds a lease: `false` once it has ended, and
    /// for a refusal's body.
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
        matches!(&self.kind, Kind::Leased { lease: Some(_), .. })
    }
}

impl<B: MessageBody> MessageBody for LeasedBody<B> {
    type Error = B::Error;

    fn size(&self) -> BodySize {
        match &self.kind {
            Kind::Leased { inner, .. } => inner.size(),
            Kind::Problem { body } => BodySize::Sized(body.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Leased { inner, lease } => {
                let polled = inner.poll_next(cx);
                if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
                    // The last chunk has been handed over, or the body
                    // failed: the request is done with its slot.
                    drop(lease.take());
                }
                polled
            }
            KindProj::Problem { body } => Poll::Ready(body.take().map(Ok)),
        }
    }
}
