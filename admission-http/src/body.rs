//! The response body of a request that went through admission.
//!
//! This module owns [`LeasedBody`]: the inner body (an HTTP body, or a gRPC
//! call's messages and trailers) with a share of the request's lease, or the
//! refusal's own body (a problem document, or none at all for a gRPC
//! trailers-only answer). It must never release the lease before the inner
//! body has reported its end, failed, or been dropped (a handler that
//! returned a streamed body has not finished its response), unless its
//! consumer let a frame lie unread past the body's [`ProgressTimeout`]:
//! then the thread's watchdog (one task for every watched body of the
//! thread, not one per body) takes the lease back without waiting for
//! another poll, and the next poll ends the body with [`Stalled`]. A
//! leased body hands a data frame larger than 16 KiB over in
//! 16 KiB pieces (no copy): an HTTP/2 server asks for each piece only when
//! the stream's window lets it out, so a reader that stops reading is seen
//! within the bound even when the handler produced its whole answer at once.
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

pub use crate::progress::{ProgressTimeout, STREAM_STALLED, Stalled};
pub use crate::request_body::RequestBody;
use crate::watchdog::Watched;

/// The error type of a [`LeasedBody`]: the inner body's error, or
/// [`Stalled`].
#[doc(hidden)]
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project_lite::pin_project! {
    /// The body of every response [`ProtocolService`](crate::ProtocolService)
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
            hold: LeaseState,
            // What is left of a large data frame handed over in pieces.
            rest: Option<Bytes>,
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
enum LeaseState {
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

impl LeaseState {
    /// A frame short of the end was handed over.
    fn yielded(&mut self) {
        match std::mem::replace(self, LeaseState::Released) {
            LeaseState::Lease(lease, bound) => {
                *self = match Watched::start(lease, bound) {
                    Ok(watched) => LeaseState::Watched(watched),
                    // No runtime to watch on: held to the end, as before.
                    Err(lease) => LeaseState::Lease(lease, bound),
                };
            }
            LeaseState::Watched(watched) => {
                watched.yielded();
                *self = LeaseState::Watched(watched);
            }
            other => *self = other,
        }
    }
}

impl LeaseState {
    /// Whether the body still holds the lease (watched or not).
    fn is_held(&self) -> bool {
        matches!(self, LeaseState::Lease(..) | LeaseState::Watched(_))
    }
}

/// The most a leased body hands over in one data frame: HTTP/2's default
/// frame size, and the send buffer's low-water mark the accept loop sets.
const PIECE: usize = 16 * 1024;

/// `frame`, or its first [`PIECE`] bytes with the remainder left in `rest`.
fn piece(frame: Frame<Bytes>, rest: &mut Option<Bytes>) -> Frame<Bytes> {
    match frame.into_data() {
        Ok(mut data) => {
            if data.len() > PIECE {
                *rest = Some(data.split_off(PIECE));
            }
            Frame::data(data)
        }
        Err(frame) => frame,
    }
}

impl<B> LeasedBody<B> {
    /// Wraps `inner`, holding `lease` until the body ends, is dropped, or
    /// lets a frame lie unread past the default [`ProgressTimeout`].
    pub fn new(inner: B, lease: Lease) -> Self {
        LeasedBody {
            kind: Kind::Leased {
                inner,
                hold: LeaseState::Lease(lease, ProgressTimeout::DEFAULT),
                rest: None,
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
                hold: LeaseState::Released,
                rest: None,
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
            hold: LeaseState::Lease(_, current),
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
                LeaseState::Lease(..) => true,
                LeaseState::Watched(watched) => watched.holds_lease(),
                LeaseState::Released | LeaseState::Stalled => false,
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
            KindProj::Leased {
                mut inner,
                hold,
                rest,
            } => {
                match hold {
                    LeaseState::Watched(watched) if watched.polled() => {
                        *rest = None;
                        *hold = LeaseState::Stalled;
                        return Poll::Ready(Some(Err(Box::new(Stalled))));
                    }
                    LeaseState::Stalled => return Poll::Ready(None),
                    _ => {}
                }
                let frame = match rest.take() {
                    Some(data) => Some(Ok(Frame::data(data))),
                    None => ready!(inner.as_mut().poll_frame(cx)).map(|f| f.map_err(Into::into)),
                };
                // A leased body hands a large data frame over in pieces, so
                // that a server asks for each one only when it can send it:
                // over HTTP/2 the stream's buffer then never holds much past
                // the window, and a reader that stops shows as a stall
                // instead of a body the server keeps asking for more.
                let frame = match frame {
                    Some(Ok(frame)) if hold.is_held() => Some(Ok(piece(frame, rest))),
                    other => other,
                };
                let ended = match &frame {
                    None | Some(Err(_)) => true,
                    Some(Ok(_)) => rest.is_none() && inner.is_end_stream(),
                };
                if ended {
                    // The request is done with its slot (a watchdog, if
                    // any, ends with it).
                    *hold = LeaseState::Released;
                } else {
                    hold.yielded();
                }
                Poll::Ready(frame)
            }
            KindProj::Refusal { body } => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
        }
    }
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Leased {
                hold: LeaseState::Stalled,
                ..
            } => true,
            Kind::Leased { inner, rest, .. } => rest.is_none() && inner.is_end_stream(),
            Kind::Refusal { body } => body.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Leased { inner, rest, .. } => {
                let rest = rest.as_ref().map_or(0, |rest| rest.len() as u64);
                let inner = inner.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(inner.lower() + rest);
                if let Some(upper) = inner.upper() {
                    hint.set_upper(upper + rest);
                }
                hint
            }
            Kind::Refusal { body } => {
                SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use admission_core::{Class, RequestPools};
    use bytes::Bytes;
    use http_body_util::BodyExt;

    use super::{LeasedBody, PIECE};

    #[tokio::test(flavor = "current_thread")]
    async fn a_large_frame_is_handed_over_in_pieces_and_the_lease_goes_with_the_last() {
        let pools = RequestPools::new(1, 1).unwrap();
        let lease = pools.try_lease(Class::Work).unwrap();
        let whole = Bytes::from(vec![7_u8; 2 * PIECE + 10]);
        let mut body = LeasedBody::new(http_body_util::Full::new(whole.clone()), lease);
        let mut lengths = Vec::new();
        let mut read = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            lengths.push(data.len());
            read.extend_from_slice(&data);
            let in_use = pools.pool(Class::Work).stats().in_use;
            assert_eq!(
                in_use,
                usize::from(read.len() < whole.len()),
                "held until the last piece"
            );
        }
        assert_eq!(lengths, [PIECE, PIECE, 10]);
        assert_eq!(read, whole);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_unleased_body_hands_its_frames_over_whole() {
        let whole = Bytes::from(vec![7_u8; 2 * PIECE + 10]);
        let mut body = LeasedBody::unleased(http_body_util::Full::new(whole.clone()));
        let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(frame, whole);
    }
}
