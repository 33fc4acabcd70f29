//! The bound on how long a request's body may keep its reader waiting.
//!
//! This module owns [`RequestBody`], a request body under the same
//! [`ProgressTimeout`] as a leased response, ending with the same
//! [`Stalled`]. A call whose handler waits on a body the client
//! stopped sending (HEADERS and one byte of a message, never the rest)
//! would hold its lease for as long as the client likes; under the bound
//! the body ends with an error, the handler answers, and the lease goes
//! with that answer. It must never buffer the body, never count the
//! handler's own pace (a body not polled is not waited on), and never log
//! per request: stalls are counted and logged once per interval (the
//! `progress` module's `stalled`).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::body::BoxError;
use crate::progress::{self, ProgressTimeout, Side, Stalled};

pin_project_lite::pin_project! {
    /// A request body whose reader is not kept waiting past a
    /// [`ProgressTimeout`]: the clock starts when a poll finds no frame
    /// (the handler waits on the client) and stops at the next frame; a
    /// wait that reaches the bound ends the body with [`Stalled`]
    /// (code `ADMISSION_STREAM_STALLED`, counted with stalled responses).
    ///
    /// Every [`ProtocolService`](crate::ProtocolService) hands its inner
    /// service the request's body as one of these: bounded under a lease,
    /// untimed for a request that passes with no lease. Outside a tokio
    /// runtime the body is never timed (nothing can wake it).
    ///
    /// # Panics
    ///
    /// Polling it inside a tokio runtime built without timers panics, as
    /// every tokio timer does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_http::body::ProgressTimeout;
    /// use admission_http::body::{RequestBody, Stalled};
    /// use http_body::Frame;
    /// use http_body_util::{BodyExt, StreamBody};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // One byte of a message, then nothing: a client that stopped sending.
    /// let first = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(Frame::data(bytes::Bytes::from("x")))]);
    /// let stalled = StreamBody::new(first.chain(futures_util::stream::pending()));
    /// let bound = ProgressTimeout::new(Duration::from_millis(50)).unwrap();
    /// let mut body = RequestBody::new(stalled, bound);
    ///
    /// assert_eq!(body.frame().await.unwrap().unwrap().into_data().unwrap(), "x");
    /// let ended = body.frame().await.unwrap().unwrap_err();
    /// assert!(ended.is::<Stalled>(), "ended at the bound: {ended}");
    /// assert!(body.frame().await.is_none(), "and stays ended");
    /// # }
    /// # use futures_util::StreamExt as _;
    /// ```
    #[derive(Debug)]
    pub struct RequestBody<B> {
        #[pin]
        inner: B,
        // `None` for a request that passed with no lease: never timed.
        bound: Option<ProgressTimeout>,
        // Armed while the reader waits: created at the first wait, reset at
        // the first wait after each frame.
        timer: Option<Pin<Box<Sleep>>>,
        waiting: bool,
        stalled: bool,
    }
}

impl<B> RequestBody<B> {
    /// Puts `inner` under `bound`.
    pub fn new(inner: B, bound: ProgressTimeout) -> Self {
        RequestBody {
            inner,
            bound: Some(bound),
            timer: None,
            waiting: false,
            stalled: false,
        }
    }

    /// `inner` never timed: the body of a request that holds no lease.
    pub(crate) fn passed(inner: B) -> Self {
        RequestBody {
            inner,
            bound: None,
            timer: None,
            waiting: false,
            stalled: false,
        }
    }
}

impl<B> Body for RequestBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.stalled {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            *this.waiting = false;
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let Some(bound) = this.bound else {
            return Poll::Pending;
        };
        if !*this.waiting {
            // The first wait since the last frame: the clock starts now
            // (outside a runtime there is no clock, and no bound).
            if this.timer.is_none() && tokio::runtime::Handle::try_current().is_err() {
                return Poll::Pending;
            }
            *this.waiting = true;
            let deadline = Instant::now() + bound.get();
            match this.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => *this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let Some(timer) = this.timer.as_mut() else {
            return Poll::Pending;
        };
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        *this.stalled = true;
        progress::stalled(Side::Request);
        Poll::Ready(Some(Err(Box::new(Stalled))))
    }

    fn is_end_stream(&self) -> bool {
        self.stalled || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::{BodyExt, StreamBody};
    use tokio::sync::mpsc;

    use super::{ProgressTimeout, RequestBody, Stalled};

    type Sent = Result<Frame<Bytes>, std::convert::Infallible>;

    /// A body whose client is the returned sender, under a bound of `bound_ms`.
    fn body(
        bound_ms: u64,
    ) -> (
        mpsc::UnboundedSender<Sent>,
        RequestBody<impl http_body::Body<Data = Bytes, Error = std::convert::Infallible>>,
    ) {
        let (send, mut receive) = mpsc::unbounded_channel();
        let frames = futures_util::stream::poll_fn(move |cx| receive.poll_recv(cx));
        let bound = ProgressTimeout::new(Duration::from_millis(bound_ms)).unwrap();
        (send, RequestBody::new(StreamBody::new(frames), bound))
    }

    fn part() -> Sent {
        Ok(Frame::data(Bytes::from_static(b"x")))
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_keeps_sending_within_the_bound_is_never_cut() {
        let (send, mut body) = body(1000);
        // A part every 900 ms for 9 s: ten times the bound in all, never
        // the bound between two parts.
        let sender = tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(900)).await;
                send.send(part()).unwrap();
            }
        });
        for n in 0..10 {
            let frame = body
                .frame()
                .await
                .expect("a part")
                .unwrap_or_else(|e| panic!("part {n}: {e}"));
            assert!(frame.is_data());
        }
        sender.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_reaches_the_bound_ends_the_body_and_the_clock_starts_at_the_wait() {
        let (send, mut body) = body(1000);
        send.send(part()).unwrap();
        body.frame().await.unwrap().unwrap();
        // The handler works 5 s before it reads again: not a wait.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let started = tokio::time::Instant::now();
        let ended = body.frame().await.unwrap().unwrap_err();
        assert!(ended.is::<Stalled>(), "{ended}");
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "the bound from the wait's start"
        );
        drop(send);
    }
}
