//! Telling a connection when it has a request in flight.
//!
//! This module owns `track`, the make-service that gives every
//! connection of a `Listener` a service marking its requests, and the
//! response body that keeps the connection busy until it ends. It must
//! never change a request or a response beyond adding
//! [`ConnectInfo<SocketAddr>`](axum::extract::ConnectInfo) to the request.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use admission_http::connection::{InFlight, Requests};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::serve::IncomingStream;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use tower_service::Service;

use super::listener::Listener;

/// Serves `service` on every connection of a [`Listener`], telling each
/// connection when a request is in flight: only then can the listener
/// apply the header-read and idle timeouts and evict connections that
/// wait for a request head (a connection served without it gets the
/// bound and the write-progress timeout only). Each request carries
/// [`ConnectInfo<SocketAddr>`](axum::extract::ConnectInfo).
pub(crate) fn track<S>(service: S) -> Track<S> {
    Track { service }
}

/// The make-service [`track`] builds.
#[derive(Debug, Clone)]
pub(crate) struct Track<S> {
    service: S,
}

impl<S: Clone> Service<IncomingStream<'_, Listener>> for Track<S> {
    type Response = Tracked<S>;
    type Error = Infallible;
    type Future = Ready<Result<Tracked<S>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, Listener>) -> Self::Future {
        ready(Ok(Tracked {
            service: self.service.clone(),
            requests: stream.io().requests(),
            remote: *stream.remote_addr(),
        }))
    }
}

/// The app as one connection calls it (built by [`track`]): each request
/// marks the connection busy until its response body ends.
#[derive(Debug, Clone)]
pub(crate) struct Tracked<S> {
    service: S,
    requests: Requests,
    remote: SocketAddr,
}

impl<S, B> Service<Request<Body>> for Tracked<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = TrackedFuture<S, S::Future>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let in_flight = self.requests.begin();
        request.extensions_mut().insert(ConnectInfo(self.remote));
        TrackedFuture {
            call: Call::Ready {
                service: self.service.clone(),
                request: Some(request),
            },
            in_flight: Some(in_flight),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Tracked`].
    pub(crate) struct TrackedFuture<S, F> {
        #[pin]
        call: Call<S, F>,
        // Moves into the response body: the connection is busy until the
        // body ends, not only until the handler returns.
        in_flight: Option<InFlight>,
    }
}

impl<S, F> std::fmt::Debug for TrackedFuture<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackedFuture").finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    #[project = CallProj]
    enum Call<S, F> {
        Ready { service: S, request: Option<Request<Body>> },
        Called { #[pin] future: F },
    }
}

impl<S, B> Future for TrackedFuture<S, S::Future>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.call.as_mut().project() {
                CallProj::Ready { service, request } => {
                    let Ok(()) = ready!(service.poll_ready(cx));
                    let Some(request) = request.take() else {
                        // Polled again after it completed: nothing left.
                        return Poll::Pending;
                    };
                    let future = service.call(request);
                    this.call.set(Call::Called { future });
                }
                CallProj::Called { future } => {
                    let Ok(response) = ready!(future.poll(cx));
                    let in_flight = this.in_flight.take();
                    return Poll::Ready(Ok(
                        response.map(|inner| Body::new(InFlightBody { inner, in_flight }))
                    ));
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its connection busy until it ends.
    struct InFlightBody<B> {
        #[pin]
        inner: B,
        in_flight: Option<InFlight>,
    }
}

impl<B: http_body::Body<Data = Bytes>> http_body::Body for InFlightBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            drop(this.in_flight.take());
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
