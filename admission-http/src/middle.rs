//! One request's admission, from the decision to the end of the inner
//! call, as one future every adapter runs.
//!
//! This module owns [`Admitting`] and what it ends with, [`Outcome`]: a
//! request let through with no lease, admitted (the inner call and its
//! future run in one scope holding the caller and the lease), waiting in
//! the class pool's queue ([`wait`]), or refused. The tower service of this
//! crate and actix-web's middleware both run it, so the order in which a
//! finished call gives up its scope and hands its lease on is written
//! once. It must never build an answer or touch a body: turning an
//! [`Outcome`] into a response is the adapter's.
//!
//! Sibling-only: `admission-actix` runs it; apps never name it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::request::Scoped;
use admission_core::{Caller, Class, Lease, Refusal};

use crate::admit::RequestAdmission;

/// What an [`Admitting`] ends with.
#[derive(Debug)]
#[doc(hidden)]
pub enum Outcome<T, X> {
    /// The inner call's output, and the lease its response body must hold
    /// until it ends: `None` when the request passed with no lease, or when
    /// the lease is an outer layer's, whose body holds it under its own
    /// bound (a second hold would keep the slot to the longer of the two).
    Served(T, Option<Lease>),
    /// The adapter's answer to a refusal, made by [`wait`] after a queued
    /// wait, or given to [`Admitting::refused`].
    Refused(X),
}

/// What a queued wait ends with: the admitted call and its lease, or the
/// adapter's answer to the refusal.
#[doc(hidden)]
pub type Waited<F, X> = Result<(Scoped<F>, Lease), X>;

pin_project_lite::pin_project! {
    /// A request's admission: ready at once when refused, else the inner
    /// call's future, under the request's lease (admitted, at once or after
    /// the queued wait `W`) or with none (let through).
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner future and its share of the lease; a
    /// request dropped while it waits in the queue takes no slot.
    ///
    /// # Panics
    ///
    /// Polling it again after it completed panics.
    #[must_use = "futures do nothing unless polled"]
    #[doc(hidden)]
    pub struct Admitting<F, X, W> {
        #[pin]
        step: Step<F, X, W>,
    }
}

pin_project_lite::pin_project! {
    #[project = StepProj]
    enum Step<F, X, W> {
        Queued {
            #[pin]
            wait: W,
        },
        Admitted {
            #[pin]
            future: Scoped<F>,
            // After `future`, the one drop order of every adapter: what the
            // response owns goes before the slot. An `Option` only so that
            // the end takes it out and writes `Done` (a tag) over the step,
            // instead of copying a whole step in and out.
            lease: Option<Lease>,
        },
        Passed {
            #[pin]
            future: F,
        },
        // `None` once taken, as `lease` above.
        Refused {
            answer: Option<X>,
        },
        Done,
    }
}

impl<F: Future, X, W> Admitting<F, X, W> {
    /// Admitted under `lease` for `caller`: `call` runs now, inside the
    /// lease's scope (a layer below that admits in its own `call` shares
    /// the lease), and so does every poll of the future it returns.
    pub fn admitted(lease: Lease, caller: Caller, call: impl FnOnce() -> F) -> Self {
        let (future, lease) = enter(lease, caller, call);
        Admitting {
            step: Step::Admitted {
                future,
                lease: Some(lease),
            },
        }
    }

    /// Let through with no lease (a bypassed route).
    pub fn passed(future: F) -> Self {
        Admitting {
            step: Step::Passed { future },
        }
    }

    /// Refused at once, with the adapter's `answer`.
    pub fn refused(answer: X) -> Self {
        Admitting {
            step: Step::Refused {
                answer: Some(answer),
            },
        }
    }

    /// Waiting in the queue: `wait` is [`wait`]'s future, boxed as the
    /// adapter needs it (`Send` for tower, not for actix-web).
    pub fn queued(wait: W) -> Self {
        Admitting {
            step: Step::Queued { wait },
        }
    }
}

impl<F, X, W> Admitting<F, X, W> {
    /// The step it is at, for a future's `Debug`: `Queued`, `Admitted`,
    /// `Passed`, `Refused` or `Done`.
    pub fn state(&self) -> &'static str {
        match self.step {
            Step::Queued { .. } => "Queued",
            Step::Admitted { .. } => "Admitted",
            Step::Passed { .. } => "Passed",
            Step::Refused { .. } => "Refused",
            Step::Done => "Done",
        }
    }
}

impl<F, X, W> fmt::Debug for Admitting<F, X, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitting")
            .field("state", &self.state())
            .finish()
    }
}

/// A queued request's wait: the lease of `class` for `caller` (at once or
/// after the bounded wait), then `call` with `request` inside the lease's
/// scope; or `refuse`'s answer to the refusal, given the request back.
///
/// # Cancel safety
///
/// Cancel safe: dropped while it waits, it takes no slot and leaves no
/// place in the queue.
///
/// # Errors
///
/// `refuse`'s answer when the class refuses the request.
pub async fn wait<R, F, X>(
    admission: RequestAdmission,
    class: Class,
    caller: Caller,
    request: R,
    call: impl FnOnce(R) -> F,
    refuse: impl FnOnce(&Refusal, R) -> X,
) -> Waited<F, X>
where
    F: Future,
{
    match admission.lease(class, caller).await {
        Ok(lease) => Ok(enter(lease, caller, || call(request))),
        Err(refusal) => Err(refuse(&refusal, request)),
    }
}

/// `call` made and its future run in the scope of `lease` for `caller`;
/// the lease itself for the response body.
fn enter<F: Future>(lease: Lease, caller: Caller, call: impl FnOnce() -> F) -> (Scoped<F>, Lease) {
    // The call writes its future in place: returned through the scope's
    // `sync_scope` (a `Result`, then unwrapped), the future, as large as
    // the inner service makes it, would be copied at each step.
    let mut future = None;
    lease.scope_sync_for(caller, || future = Some(call()));
    let Some(future) = future else {
        unreachable!("`sync_scope` runs its closure")
    };
    (lease.clone().scope_for(caller, future), lease)
}

impl<F, X, W> Future for Admitting<F, X, W>
where
    F: Future,
    W: Future<Output = Waited<F, X>>,
{
    type Output = Outcome<F::Output, X>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut step = self.project().step;
        if let StepProj::Queued { wait } = step.as_mut().project() {
            let next = match ready!(wait.poll(cx)) {
                Ok((future, lease)) => Step::Admitted {
                    future,
                    lease: Some(lease),
                },
                Err(answer) => Step::Refused {
                    answer: Some(answer),
                },
            };
            step.set(next);
        }
        let output = match step.as_mut().project() {
            StepProj::Admitted { future, .. } => ready!(future.poll(cx)),
            StepProj::Passed { future } => {
                let output = ready!(future.poll(cx));
                step.set(Step::Done);
                return Poll::Ready(Outcome::Served(output, None));
            }
            StepProj::Refused { answer } => {
                let answer = answer.take();
                step.set(Step::Done);
                return match answer {
                    Some(answer) => Poll::Ready(Outcome::Refused(answer)),
                    None => panic!("`Admitting` polled after completion"),
                };
            }
            _ => panic!("`Admitting` polled after completion"),
        };
        // Drop the finished inner future (and the scope's share of the
        // lease) now, whoever owns this future, and hand the lease on.
        let lease = match step.as_mut().project() {
            StepProj::Admitted { lease, .. } => lease.take(),
            _ => unreachable!("the step was `Admitted`"),
        };
        step.set(Step::Done);
        let Some(lease) = lease else {
            unreachable!("an admitted step holds its lease until it ends")
        };
        let lease = (!lease.is_inherited()).then_some(lease);
        Poll::Ready(Outcome::Served(output, lease))
    }
}
