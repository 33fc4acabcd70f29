//! The future [`AdmissionService`](crate::AdmissionService) returns.
//!
//! This module owns [`ResponseFuture`]. It must never drop the lease before
//! the response body holds it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::Lease;
use admission_core::caller::WithCaller;
use admission_core::request::Scoped;
use http::Response;

use crate::body::LeasedBody;

pin_project_lite::pin_project! {
    /// The response of a call that was admitted (the inner service's
    /// future, run under the call's lease) or refused (the trailers-only
    /// refusal, ready at once).
    ///
    /// # Cancel safety
    ///
    /// Dropping it before it completes (the client cancelled the call, or
    /// its deadline passed) drops the inner future and releases the call's
    /// lease, unless pure work the handler started still holds a share:
    /// that work keeps the slot until it ends. Registry work offloaded with
    /// [`Pool::run`](admission_core::Pool::run) keeps its own pool's slot
    /// until it ends, whoever is still waiting for it.
    ///
    /// # Panics
    ///
    /// Polling it again after it completed panics.
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    #[project_replace = StateReplace]
    #[derive(Debug)]
    enum State<F> {
        Admitted {
            #[pin]
            future: WithCaller<Scoped<F>>,
            // The call's lease lives here until the response exists, then
            // moves into its body: the call holds its slot until the last
            // message and the trailers have been sent, not only until the
            // handler returns. After `future`, the one drop order of every
            // adapter: what the response owns goes before the slot.
            lease: Lease,
        },
        Refused {
            response: Response<()>,
        },
        // Completed: the inner future and its share of the lease are gone.
        Done,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn admitted(future: WithCaller<Scoped<F>>, lease: Lease) -> Self {
        ResponseFuture {
            state: State::Admitted { future, lease },
        }
    }

    pub(crate) fn refused(response: Response<()>) -> Self {
        ResponseFuture {
            state: State::Refused { response },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LeasedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        if let StateProj::Admitted { future, .. } = state.as_mut().project() {
            let output = ready!(future.poll(cx));
            // Drop the finished inner future (and the scope's share of the
            // lease) now, whoever owns this future, and move the lease on.
            return match state.project_replace(State::Done) {
                StateReplace::Admitted { lease, .. } => Poll::Ready(
                    output.map(|response| response.map(|body| LeasedBody::new(body, lease))),
                ),
                _ => unreachable!("the state was `Admitted`"),
            };
        }
        match state.project_replace(State::Done) {
            StateReplace::Refused { response } => {
                Poll::Ready(Ok(response.map(|()| LeasedBody::refused())))
            }
            _ => panic!("`ResponseFuture` polled after completion"),
        }
    }
}
