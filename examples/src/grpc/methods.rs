//! Calls to methods the exporter does not serve, answered before admission.
//!
//! This module owns [`KnownMethodsLayer`]: the outermost layer of the
//! server, which answers a call to any path outside the exporter's methods
//! with a trailers-only `UNIMPLEMENTED`, so that a client inventing paths
//! takes no lease and never moves `admitted_total{pool="work"}`. It must
//! never read a call's messages and never answer a method the exporter
//! serves.

use std::task::{Context, Poll};

use admission_http::body::LeasedBody;
use futures_util::future::{Either, Ready, ready};
use tower::{Layer, Service};

use super::proto::{STREAM, WALK};

/// Every path the exporter serves: the registry's two methods and health.
const KNOWN: [&str; 4] = [
    WALK,
    STREAM,
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
];

/// Puts [`KnownMethods`] in front of the admission layer.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KnownMethodsLayer;

impl<S> Layer<S> for KnownMethodsLayer {
    type Service = KnownMethods<S>;

    fn layer(&self, inner: S) -> KnownMethods<S> {
        KnownMethods { inner }
    }
}

/// Answers calls outside [`KNOWN`] with `UNIMPLEMENTED`; passes the rest to
/// the admission layer.
#[derive(Debug, Clone)]
pub(crate) struct KnownMethods<S> {
    inner: S,
}

impl<S, B, R> Service<http::Request<B>> for KnownMethods<S>
where
    S: Service<http::Request<B>, Response = http::Response<LeasedBody<R>>>,
{
    type Response = http::Response<LeasedBody<R>>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Self::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: http::Request<B>) -> Self::Future {
        if KNOWN.contains(&call.uri().path()) {
            Either::Left(self.inner.call(call))
        } else {
            // A fixed message: the path is the client's, never echoed.
            let answer = tonic::Status::unimplemented("no such method")
                .into_http::<()>()
                .map(|()| LeasedBody::refusal(None));
            Either::Right(ready(Ok(answer)))
        }
    }
}
