//! The future [`ProtocolService`](crate::ProtocolService) returns.
//!
//! This module owns [`ResponseFuture`]: the shared admission step
//! ([`Admitting`](crate::middle::Admitting)) with its outcome made an
//! `http` response. It must never drop the lease before the response body
//! holds it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::Response;

use crate::body::{LeasedBody, ProgressTimeout};
use crate::middle::{Admitting, Outcome, Waited};

/// A refusal's answer, ready to send.
pub(crate) type Answer = Response<Option<Bytes>>;

/// A queued request's wait, as a tower future needs it (`Send`).
pub(crate) type Wait<F> = Pin<Box<dyn Future<Output = Waited<F, Answer>> + Send>>;

pin_project_lite::pin_project! {
    /// The response of a request that was admitted (the inner service's
    /// future, run under the request's lease and for its caller), waited in
    /// the queue, passed with no lease, or was refused (the refusal's
    /// answer, ready at once).
    ///
    /// # Cancel safety
    ///
    /// Dropping it before it completes (the client went away, or a gRPC
    /// call's deadline passed) drops the inner future and releases the
    /// request's lease, unless pure work the handler started still holds a
    /// share: that work keeps the slot until it ends. Registry work
    /// offloaded with [`Pool::run`](admission_core::Pool::run) keeps its own
    /// pool's slot until it ends, whoever is still waiting for it. A request
    /// dropped while it waits in the queue takes no slot.
    ///
    /// # Panics
    ///
    /// Polling it again after it completed panics.
    #[must_use = "futures do nothing unless polled"]
    #[doc(hidden)]
    pub struct ResponseFuture<F> {
        #[pin]
        admitting: Admitting<F, Answer, Wait<F>>,
        progress: ProgressTimeout,
    }
}

impl<F: Future> ResponseFuture<F> {
    pub(crate) fn new(admitting: Admitting<F, Answer, Wait<F>>, progress: ProgressTimeout) -> Self {
        ResponseFuture {
            admitting,
            progress,
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LeasedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let progress = *this.progress;
        Poll::Ready(match ready!(this.admitting.poll(cx)) {
            Outcome::Served(output, lease) => output.map(|response| {
                response.map(|body| match lease {
                    Some(lease) => LeasedBody::new(body, lease).progress_timeout(progress),
                    None => LeasedBody::unleased(body),
                })
            }),
            Outcome::Refused(answer) => Ok(answer.map(LeasedBody::refusal)),
        })
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("state", &self.admitting.state())
            .finish()
    }
}
