//! The response body that holds the request's lease.
//!
//! This module owns [`LeasedBody`]. It must never release the lease before
//! the wrapped body has reported its end, failed, or been dropped: a handler
//! that returned a streamed body has not finished its response.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::Lease;
use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// A response body that keeps a share of the request's lease until the
    /// body ends.
    #[derive(Debug)]
    pub(crate) struct LeasedBody<B> {
        // The request's lease lives here, not in the handler's future: the
        // handler returns before a streamed body has been sent, and the
        // request holds its slot for the whole response. `None` once the body
        // reported its end or an error. Declared before `inner` so that, when
        // the body is dropped, the slot is back before the body's own
        // resources (a stream's channel) are released.
        _lease: Option<Lease>,
        #[pin]
        inner: B,
    }
}

impl<B> LeasedBody<B> {
    pub(crate) fn new(inner: B, lease: Lease) -> Self {
        LeasedBody {
            _lease: Some(lease),
            inner,
        }
    }
}

impl<B: Body> Body for LeasedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        let ended = match &frame {
            None | Some(Err(_)) => true,
            Some(Ok(_)) => this.inner.is_end_stream(),
        };
        if ended {
            drop(this._lease.take());
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
