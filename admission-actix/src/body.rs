//! The response body that holds the request's lease.
//!
//! This module owns [`LeasedBody`]. It must never release the lease before
//! the body has ended (its last chunk sent, or an error) or been dropped.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use admission_core::Lease;
use bytes::Bytes;

pin_project_lite::pin_project! {
    /// A response body holding a share of its request's lease until the
    /// last chunk has been sent ([`poll_next`](MessageBody::poll_next)
    /// returns `None`), the body fails, or it is dropped (the client went
    /// away, or the response was never sent).
    ///
    /// [`AdmissionControl`](crate::AdmissionControl) wraps every admitted
    /// response's body in one, so a streamed response keeps its slot for as
    /// long as it streams.
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
    pub struct LeasedBody<B> {
        #[pin]
        body: B,
        // The request's slot lives here, not in the middleware's future,
        // because actix-web resolves that future as soon as the handler
        // returns the response head, while the body may stream for much
        // longer. `None` once the body has ended.
        lease: Option<Lease>,
    }
}

impl<B> LeasedBody<B> {
    /// Wraps `body`, holding `lease` until the body ends or is dropped.
    pub fn new(body: B, lease: Lease) -> Self {
        LeasedBody::from_parts(body, Some(lease))
    }

    pub(crate) fn from_parts(body: B, lease: Option<Lease>) -> Self {
        LeasedBody { body, lease }
    }

    /// Whether the body still holds its lease: `false` once it has ended.
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
        self.lease.is_some()
    }
}

impl<B> std::fmt::Debug for LeasedBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedBody")
            .field("holds_lease", &self.holds_lease())
            .finish_non_exhaustive()
    }
}

impl<B: MessageBody> MessageBody for LeasedBody<B> {
    type Error = B::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.project();
        let polled = this.body.poll_next(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            // The last chunk has been handed over, or the body failed: the
            // request is done with its slot.
            this.lease.take();
        }
        polled
    }
}
