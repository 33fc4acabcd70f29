//! The response body of a request that went through admission.
//!
//! This module owns [`LeasedBody`]: the inner body (an HTTP body, or a gRPC
//! call's messages and trailers) with a share of the request's lease, or the
//! refusal's own body (a problem document, or none at all for a gRPC
//! trailers-only answer). It must never release the lease before the inner
//! body has reported its end, failed, or been dropped (a handler that
//! returned a streamed body has not finished its response), unless its
//! consumer let a frame lie unread past the body's [`ProgressTimeout`]:
//! then a watchdog task takes the lease back
//! without waiting for another poll, and the next poll ends the body with
//! [`Stalled`].
//!
//! # Long-lived streams
//!
//! A lease is capacity: a stream that holds one for its whole life (a
//! subscription, a watch) takes a slot of its class for as long as its
//! client stays. Admit such streams in a class of their own (a
//! [`RequestPools`](admission_core::RequestPools) sized for how many may be
//! open at once, so that they can never crowd out unary calls), or, for a
//! stream that costs nothing while it idles (gRPC's health `Watch`), with
//! no lease at all ([`LeasedBody::unleased`]; the tonic adapter does so for
//! health and reflection). Either way a client that stops reading loses its
//! lease after the [`ProgressTimeout`]; a stream whose producer is slow
//! (its consumer is waiting) is not stalled and keeps it.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_core::Lease;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::progress::Watched;
pub use crate::progress::{ProgressTimeout, STREAM_STALLED, Stalled};
pub use crate::request_body::RequestBody;

/// The error type of a [`LeasedBody`]: the inner body's error, or
/// [`Stalled`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
            // the request holds its slot for the whole response. Declared
            // after `inner` (the one drop order of both adapters, as tower's
            // `_permit`): the body's own resources, a stream and whatever
            // feeds it, are gone before the slot is back.
            hold: Hold,
        },
        // A refusal's body: its bytes until they are sent; `None` from the
        // start for a trailers-only gRPC refusal.
        Refusal {
            body: Option<Bytes>,
        },
    }
}

/// What an admitted body holds of its request's lease.
#[derive(Debug)]
enum Hold {
    /// The lease, not yet watched: no frame has been handed over short of
    /// the end (a body sent in one frame never starts a watchdog).
    Lease(Lease, ProgressTimeout),
    /// The lease under a watchdog, which takes it back when the consumer
    /// lets a frame lie past the bound.
    Watched(Watched),
    /// Nothing: the body ended or failed, or was never leased.
    Released,
    /// The watchdog took the lease and the body ended with [`Stalled`].
    Stalled,
}

impl Hold {
    /// A frame short of the end was handed over.
    fn yielded(&mut self) {
        match std::mem::replace(self, Hold::Released) {
            Hold::Lease(lease, bound) => {
                *self = match Watched::start(lease, bound) {
                    Ok(watched) => Hold::Watched(watched),
                    // No runtime to watch on: held to the end, as before.
                    Err(lease) => Hold::Lease(lease, bound),
                };
            }
            Hold::Watched(watched) => {
                watched.yielded();
                *self = Hold::Watched(watched);
            }
            other => *self = other,
        }
    }
}

impl<B> LeasedBody<B> {
    /// Wraps `inner`, holding `lease` until the body ends, is dropped, or
    /// lets a frame lie unread past the default [`ProgressTimeout`].
    pub fn new(inner: B, lease: Lease) -> Self {
        LeasedBody {
            kind: Kind::Leased {
                inner,
                hold: Hold::Lease(lease, ProgressTimeout::DEFAULT),
            },
        }
    }

    /// Wraps `inner` holding no lease: the body of a call admission lets
    /// through without one (gRPC health checks, whose `Watch` streams live
    /// as long as their client).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::body::LeasedBody;
    ///
    /// let body = LeasedBody::unleased(String::from("SERVING"));
    /// assert!(!body.holds_lease());
    /// ```
    pub fn unleased(inner: B) -> Self {
        LeasedBody {
            kind: Kind::Leased {
                inner,
                hold: Hold::Released,
            },
        }
    }

    /// Sets how long the body may let a frame lie unread before its lease
    /// is taken back ([`ProgressTimeout`]); a body that already started
    /// its watchdog keeps its bound.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::{Class, RequestPools};
    /// use admission_http::body::{LeasedBody, ProgressTimeout, Stalled};
    /// use http_body::Frame;
    /// use http_body_util::{BodyExt, StreamBody};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let frames = (0..3).map(|_| Ok::<_, std::convert::Infallible>(Frame::data(bytes::Bytes::from("part\n"))));
    /// let body = StreamBody::new(futures_util::stream::iter(frames));
    /// let mut body = LeasedBody::new(body, pools.try_lease(Class::Work).unwrap())
    ///     .progress_timeout(ProgressTimeout::new(Duration::from_millis(50)).unwrap());
    ///
    /// body.frame().await.unwrap().unwrap(); // one part, then the consumer stops reading
    /// tokio::time::sleep(Duration::from_millis(200)).await;
    /// assert_eq!(pools.pool(Class::Work).stats().in_use, 0, "released without another poll");
    /// let ended = body.frame().await.unwrap().unwrap_err();
    /// assert!(ended.is::<Stalled>());
    /// # }
    /// ```
    #[must_use]
    pub fn progress_timeout(mut self, bound: ProgressTimeout) -> Self {
        if let Kind::Leased {
            hold: Hold::Lease(_, current),
            ..
        } = &mut self.kind
        {
            *current = bound;
        }
        self
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

    /// The inner body of an admitted (or unleased) response; `None` for a
    /// refusal's body. For adapters whose own body trait asks the inner
    /// body directly (actix-web's `MessageBody::size`).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::body::LeasedBody;
    ///
    /// assert_eq!(LeasedBody::unleased(String::from("ok")).get_ref().map(String::as_str), Some("ok"));
    /// assert!(LeasedBody::<String>::refusal(None).get_ref().is_none());
    /// ```
    pub fn get_ref(&self) -> Option<&B> {
        match &self.kind {
            Kind::Leased { inner, .. } => Some(inner),
            Kind::Refusal { .. } => None,
        }
    }

    /// Whether the body still holds a lease: `false` once it has ended or
    /// stalled, and for a refusal's or an unleased body.
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
        match &self.kind {
            Kind::Leased { hold, .. } => match hold {
                Hold::Lease(..) => true,
                Hold::Watched(watched) => watched.holds_lease(),
                Hold::Released | Hold::Stalled => false,
            },
            Kind::Refusal { .. } => false,
        }
    }
}

impl<B> Body for LeasedBody<B>
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
        match self.project().kind.project() {
            KindProj::Leased { mut inner, hold } => {
                match hold {
                    Hold::Watched(watched) if watched.polled() => {
                        *hold = Hold::Stalled;
                        return Poll::Ready(Some(Err(Box::new(Stalled))));
                    }
                    Hold::Stalled => return Poll::Ready(None),
                    _ => {}
                }
                let frame = ready!(inner.as_mut().poll_frame(cx));
                let ended = match &frame {
                    None | Some(Err(_)) => true,
                    Some(Ok(_)) => inner.is_end_stream(),
                };
                if ended {
                    // The request is done with its slot (a watchdog, if
                    // any, ends with it).
                    *hold = Hold::Released;
                } else {
                    hold.yielded();
                }
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            KindProj::Refusal { body } => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
        }
    }
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Leased {
                hold: Hold::Stalled,
                ..
            } => true,
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
