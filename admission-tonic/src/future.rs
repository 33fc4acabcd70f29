//! The future [`AdmissionService`](crate::AdmissionService) returns.
//!
//! This module owns [`ResponseFuture`]: the middle's future for an admitted
//! call (its body bound by the middle's progress timeout), or the inner
//! service's own future for a call that takes no lease. It must never take
//! or drop a lease itself.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_http::body::LeasedBody;
use http::Response;

pin_project_lite::pin_project! {
    /// The response of a call: admission's
    /// ([`admission_http::future::ResponseFuture`], whose cancel safety it
    /// shares), or, for a service that takes no lease (health, reflection),
    /// the inner service's future with its body unleased.
    ///
    /// # Cancel safety
    ///
    /// Dropping it before it completes drops the inner future; a leased
    /// call's lease goes with it, as the middle's future says.
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        Admitted { #[pin] future: admission_http::future::ResponseFuture<F> },
        Unleased { #[pin] future: F },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn admitted(future: admission_http::future::ResponseFuture<F>) -> Self {
        ResponseFuture {
            kind: Kind::Admitted { future },
        }
    }

    pub(crate) fn unleased(future: F) -> Self {
        ResponseFuture {
            kind: Kind::Unleased { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LeasedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Admitted { future } => future.poll(cx),
            KindProj::Unleased { future } => {
                Poll::Ready(ready!(future.poll(cx)).map(|r| r.map(LeasedBody::unleased)))
            }
        }
    }
}
