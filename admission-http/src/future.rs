//! The future [`AdmissionService`](crate::AdmissionService) returns.
//!
//! This module owns [`ResponseFuture`]. It must never drop the lease before
//! the response body holds it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::Lease;
use admission_core::request::Scoped;
use bytes::Bytes;
use http::Response;

use crate::body::{LeasedBody, ProgressTimeout};

pin_project_lite::pin_project! {
    /// The response of a request that was admitted (the inner service's
    /// future, run under the request's lease and for its caller), waited in
    /// the queue, or was refused (the refusal's answer, ready at once).
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
            future: Scoped<F>,
            // The request's lease lives here until the response exists, then
            // moves into its body: the request holds its slot until the body
            // has been sent, not only until the handler returns. After
            // `future`, the one drop order of every adapter: what the
            // response owns goes before the slot.
            lease: Lease,
            progress: ProgressTimeout,
        },
        Refused {
            response: Response<Option<Bytes>>,
        },
        // Let through by the app's bypass: no lease, never refused.
        Bypassed {
            #[pin]
            future: F,
        },
        // Waiting in the class pool's queue: the lease and the inner call's
        // future once it comes, or the refusal's answer.
        Queued {
            wait: Wait<F>,
            progress: ProgressTimeout,
        },
        // Completed: the inner future and its share of the lease are gone.
        Done,
    }
}

/// What a queued request's wait ends with.
pub(crate) type Queued<F> = Result<(Scoped<F>, Lease), Response<Option<Bytes>>>;

/// A queued request's wait for its lease.
pub(crate) struct Wait<F>(Pin<Box<dyn Future<Output = Queued<F>> + Send>>);

impl<F> std::fmt::Debug for Wait<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wait(..)")
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn queued(
        progress: ProgressTimeout,
        wait: Pin<Box<dyn Future<Output = Queued<F>> + Send>>,
    ) -> Self {
        ResponseFuture {
            state: State::Queued {
                wait: Wait(wait),
                progress,
            },
        }
    }

    pub(crate) fn admitted(future: Scoped<F>, lease: Lease, progress: ProgressTimeout) -> Self {
        ResponseFuture {
            state: State::Admitted {
                future,
                lease,
                progress,
            },
        }
    }

    pub(crate) fn bypassed(future: F) -> Self {
        ResponseFuture {
            state: State::Bypassed { future },
        }
    }

    pub(crate) fn refused(response: Response<Option<Bytes>>) -> Self {
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
        if let StateProj::Queued { wait, progress } = state.as_mut().project() {
            let progress = *progress;
            let next = match ready!(wait.0.as_mut().poll(cx)) {
                Ok((future, lease)) => State::Admitted {
                    future,
                    lease,
                    progress,
                },
                Err(response) => State::Refused { response },
            };
            state.set(next);
        }
        if let StateProj::Bypassed { future } = state.as_mut().project() {
            let output = ready!(future.poll(cx));
            state.set(State::Done);
            return Poll::Ready(output.map(|response| response.map(LeasedBody::unleased)));
        }
        if let StateProj::Admitted { future, .. } = state.as_mut().project() {
            let output = ready!(future.poll(cx));
            // Drop the finished inner future (and the scope's share of the
            // lease) now, whoever owns this future, and move the lease on.
            return match state.project_replace(State::Done) {
                StateReplace::Admitted {
                    lease, progress, ..
                } => Poll::Ready(output.map(|response| {
                    // A lease an outer layer took is that layer's body's to
                    // hold under its own bound; a second hold here would
                    // keep the slot to the longer of the two bounds.
                    response.map(|body| {
                        if lease.is_inherited() {
                            LeasedBody::unleased(body)
                        } else {
                            LeasedBody::new(body, lease).progress_timeout(progress)
                        }
                    })
                })),
                _ => unreachable!("the state was `Admitted`"),
            };
        }
        match state.project_replace(State::Done) {
            StateReplace::Refused { response } => {
                Poll::Ready(Ok(response.map(LeasedBody::refusal)))
            }
            _ => panic!("`ResponseFuture` polled after completion"),
        }
    }
}
