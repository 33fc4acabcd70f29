//! Request bodies that can be sent again: the layer keeps the bytes of a
//! retryable request's body (up to a limit) and builds each attempt's body
//! from them.
//!
//! This module owns [`ReplayBody`], its implementations and the bounded
//! read of a body for replay. It must never replay a body it did not read
//! whole, nor read more than the limit.

use std::future::poll_fn;
use std::pin::pin;

use bytes::{Buf as _, Bytes, BytesMut};

use crate::error::Error;

/// A body type the layer can rebuild from the bytes it read, so that a
/// request may be attempted again. Streaming bodies are read whole (up to
/// the policy's replay limit) before the first attempt; trailers of a
/// request body are not kept.
///
/// Implemented for `http_body_util::Full<Bytes>`, `Empty<Bytes>`,
/// `String`, and (feature `tonic`) `tonic::body::Body`.
///
/// # Examples
///
/// ```
/// use admission_client::ReplayBody;
/// use bytes::Bytes;
/// use http_body_util::Full;
///
/// let again: Full<Bytes> = ReplayBody::replay(&Bytes::from_static(b"{}"));
/// # let _ = again;
/// ```
pub trait ReplayBody: http_body::Body + Sized {
    /// A body holding `bytes`, the whole of what was read.
    fn replay(bytes: &Bytes) -> Self;
}

impl ReplayBody for http_body_util::Full<Bytes> {
    fn replay(bytes: &Bytes) -> Self {
        http_body_util::Full::new(bytes.clone())
    }
}

impl ReplayBody for http_body_util::Empty<Bytes> {
    /// Empty again (an empty body reads as no bytes).
    fn replay(_: &Bytes) -> Self {
        http_body_util::Empty::new()
    }
}

impl ReplayBody for String {
    /// The bytes came from a `String`, so they are UTF-8.
    fn replay(bytes: &Bytes) -> Self {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

#[cfg(feature = "tonic")]
impl ReplayBody for tonic::body::Body {
    /// A unary call's encoded message, as one frame.
    fn replay(bytes: &Bytes) -> Self {
        tonic::body::Body::new(http_body_util::Full::new(bytes.clone()))
    }
}

/// Reads `body` whole for replay, at most `limit` bytes: the bytes, and
/// whether they were there at once (no frame was waited for, so no time
/// passed). An empty body is not polled; a body of one frame (a `Full`)
/// is kept as its own `Bytes`, not copied.
///
/// # Cancel safety
///
/// Dropping the future drops the body and what was read of it.
pub(crate) async fn keep<B, E>(body: B, limit: usize) -> Result<(Bytes, bool), Error<E>>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.is_end_stream() {
        return Ok((Bytes::new(), true));
    }
    let mut body = pin!(body);
    let mut at_once = true;
    let mut len = 0usize;
    // The first chunk as it came; later ones (rare) appended to a copy.
    let mut first: Option<Bytes> = None;
    let mut rest = BytesMut::new();
    loop {
        let frame = poll_fn(|cx| {
            let frame = body.as_mut().poll_frame(cx);
            at_once &= frame.is_ready();
            frame
        })
        .await;
        match frame {
            None => break,
            Some(Err(err)) => return Err(Error::Body(err.into())),
            Some(Ok(frame)) => {
                // Trailers of a request body are not kept.
                let Ok(mut data) = frame.into_data() else {
                    continue;
                };
                let n = data.remaining();
                if n == 0 {
                    continue;
                }
                len = len.saturating_add(n);
                if len > limit {
                    return Err(Error::BodyTooLarge);
                }
                let chunk = data.copy_to_bytes(n);
                if first.is_none() && rest.is_empty() {
                    first = Some(chunk);
                } else {
                    if let Some(first) = first.take() {
                        rest.extend_from_slice(&first);
                    }
                    rest.extend_from_slice(&chunk);
                }
            }
        }
    }
    Ok((first.unwrap_or_else(|| rest.freeze()), at_once))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// A body of `chunks`, each frame after the first once pending.
    struct Chunks {
        chunks: VecDeque<&'static [u8]>,
        pend: bool,
    }

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
            if self.pend && self.chunks.len() == 1 {
                self.pend = false;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(
                self.chunks
                    .pop_front()
                    .map(|chunk| Ok(http_body::Frame::data(Bytes::from_static(chunk)))),
            )
        }
    }

    fn chunks(chunks: &[&'static [u8]], pend: bool) -> Chunks {
        Chunks {
            chunks: chunks.iter().copied().collect(),
            pend,
        }
    }

    #[tokio::test]
    async fn a_body_is_kept_whole_within_its_limit_and_says_if_it_waited() {
        let (bytes, at_once) = keep::<_, ()>(chunks(&[b"ab", b"", b"cd"], true), 4)
            .await
            .unwrap();
        assert_eq!((&bytes[..], at_once), (&b"abcd"[..], false));
        let full = http_body_util::Full::new(Bytes::from_static(b"xyz"));
        let (bytes, at_once) = keep::<_, ()>(full, 3).await.unwrap();
        assert_eq!((&bytes[..], at_once), (&b"xyz"[..], true));
        let (bytes, at_once) = keep::<_, ()>(http_body_util::Empty::<Bytes>::new(), 0)
            .await
            .unwrap();
        assert!(bytes.is_empty() && at_once);
        let over = keep::<_, ()>(chunks(&[b"ab", b"cde"], false), 4).await;
        assert!(matches!(over, Err(Error::BodyTooLarge)), "5 bytes over 4");
    }
}
