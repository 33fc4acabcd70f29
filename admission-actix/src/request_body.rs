//! A leased request's payload under the middle's progress bound.
//!
//! This module owns the adaptation of actix-web's payload stream to
//! `admission-http`'s [`RequestBody`] and back: the bound, its clock and
//! its counting are the middle's, so a client that stops sending a body it
//! began ends its own request at the same bound, with the same code
//! (`ADMISSION_STREAM_STALLED`) and counters, on actix-web as on axum and
//! tonic. It must never buffer the payload and never time a request that
//! holds no lease.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use actix_web::HttpMessage as _;
use actix_web::dev::{Payload, ServiceRequest};
use actix_web::error::PayloadError;
use admission_http::body::{ProgressTimeout, RequestBody};
use bytes::Bytes;
use futures_core::Stream;
use http_body::{Body, Frame};

/// `request` with its payload held to `bound` (see [`RequestBody`]).
pub(crate) fn bounded(mut request: ServiceRequest, bound: ProgressTimeout) -> ServiceRequest {
    let payload = request.take_payload();
    if let Payload::None = payload {
        // No payload (a `GET`, a body of length zero): nothing can stall,
        // and the request keeps it as it was, with no stream to box.
        return request;
    }
    let body = RequestBody::new(PayloadBody { payload }, bound);
    request.set_payload(Payload::from(
        Box::pin(BoundedPayload { body }) as actix_http::BoxedPayloadStream
    ));
    request
}

pin_project_lite::pin_project! {
    /// actix-web's payload read as an HTTP body of data frames.
    struct PayloadBody {
        #[pin]
        payload: Payload,
    }
}

impl Body for PayloadBody {
    type Data = Bytes;
    type Error = PayloadError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, PayloadError>>> {
        self.project()
            .payload
            .poll_next(cx)
            .map(|item| item.map(|chunk| chunk.map(Frame::data)))
    }
}

pin_project_lite::pin_project! {
    /// The bounded body read back as actix-web's payload stream.
    struct BoundedPayload {
        #[pin]
        body: RequestBody<PayloadBody>,
    }
}

impl Stream for BoundedPayload {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut body = self.project().body;
        loop {
            return Poll::Ready(match ready!(body.as_mut().poll_frame(cx)) {
                None => None,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => Some(Ok(data)),
                    // A payload stream has no trailers; none come from it.
                    Err(_) => continue,
                },
                // The payload's own error as it was; the bound's as the
                // timeout it is.
                Some(Err(error)) => Some(Err(match error.downcast::<PayloadError>() {
                    Ok(own) => *own,
                    Err(stalled) => {
                        PayloadError::Io(io::Error::new(io::ErrorKind::TimedOut, stalled))
                    }
                })),
            });
        }
    }
}
