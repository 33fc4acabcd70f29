//! Request bodies that can be sent again: the layer keeps the bytes of a
//! retryable request's body (up to a limit) and builds each attempt's body
//! from them.
//!
//! This module owns [`ReplayBody`] and its implementations. It must never
//! replay a body it did not read whole.

use bytes::Bytes;

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
