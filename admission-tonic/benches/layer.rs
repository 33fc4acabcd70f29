//! Per-call cost of the tonic layer beside a bare service, in one run:
//! `cargo bench -p admission-tonic --bench layer`.
//!
//! * `bare`: a trivial gRPC-shaped service with no layer: a head, one
//!   message, then trailers (`grpc-status: 0`), as tonic answers a unary
//!   call, read to the end;
//! * `admission`: the same under `AdmissionLayer` (a lease taken, the call
//!   run under it, the body wrapped, the lease released at its end);
//! * `admission_with_deadline`: the same with a `grpc-timeout` to parse
//!   into the caller's deadline;
//! * `tower_limit_shed`: the bare service under tower's `LoadShed` +
//!   `GlobalConcurrencyLimit`, its overload error answered as tonic's
//!   `Status::unavailable` (what a tonic server does with tower alone);
//! * `refused`: a call the layer refuses (a trailers-only `UNAVAILABLE`
//!   with its message and pushback), and `tower_refused`, tower's shed
//!   answered as `Status::unavailable` (no pushback, no code).

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use admission_core::{Class, RequestPools};
use admission_http::body::RequestBody;
use admission_tonic::AdmissionLayer;
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::Either;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt, service_fn};

fn request(timeout: Option<&'static str>) -> http::Request<()> {
    let mut request = http::Request::post("/registry.v1.Registry/Walk");
    if let Some(timeout) = timeout {
        request = request.header("grpc-timeout", timeout);
    }
    request.body(()).unwrap()
}

/// One call, its whole body read: what a server does with the response.
fn call<S, B>(runtime: &tokio::runtime::Runtime, service: &S, timeout: Option<&'static str>) -> bool
where
    S: Service<http::Request<()>, Response = http::Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    runtime.block_on(async {
        let response = service.clone().oneshot(request(timeout)).await.unwrap();
        let refused = response.headers().contains_key("grpc-status");
        black_box(response.into_body().collect().await.unwrap());
        refused
    })
}

/// A unary call's answer body as tonic's encoder sends it: one message,
/// then the trailers.
#[derive(Debug)]
struct Unary {
    message: Option<Bytes>,
    trailers: bool,
}

impl http_body::Body for Unary {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(message) = self.message.take() {
            return Poll::Ready(Some(Ok(Frame::data(message))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.message.is_none() && !self.trailers
    }
}

/// A trivial gRPC-shaped answer: one message, then `grpc-status: 0`.
async fn hello<B>(_request: http::Request<B>) -> Result<http::Response<Unary>, Infallible> {
    Ok(http::Response::new(Unary {
        message: Some(Bytes::from_static(b"\0\0\0\0\x05hello")),
        trailers: true,
    }))
}

/// The answer to tower's overload error as a tonic server writes it: a
/// trailers-only `UNAVAILABLE`.
fn unavailable<B>(
    result: Result<http::Response<B>, BoxError>,
) -> Result<http::Response<Either<B, tonic::body::Body>>, BoxError> {
    Ok(match result {
        Ok(response) => response.map(Either::Left),
        Err(_) => tonic::Status::unavailable("overloaded")
            .into_http::<tonic::body::Body>()
            .map(Either::Right),
    })
}

/// `service` under tower's limit of `limit` with one semaphore, shed when
/// full and answered as [`unavailable`].
fn with_tower_limit<S>(
    service: S,
    limit: usize,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<Either<Unary, tonic::body::Body>>,
    Error = BoxError,
    Future: Send,
> + Clone
+ Send
where
    S: Service<http::Request<()>, Response = http::Response<Unary>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    ServiceBuilder::new()
        .map_result(unavailable)
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::new(limit))
        .service(service)
}

fn per_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A fn item, not a closure: the layer hands the inner service the
    // request with its body under the progress bound, another body type.
    let bare = service_fn(hello::<()>);
    let inner = service_fn(hello::<RequestBody<()>>);

    let mut group = c.benchmark_group("tonic_per_call");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("bare", |b| b.iter(|| call(&runtime, &bare, None)));

    let tower = with_tower_limit(bare, 64);
    assert!(!call(&runtime, &tower, None), "admitted");
    group.bench_function("tower_limit_shed", |b| {
        b.iter(|| call(&runtime, &tower, None));
    });

    let requests = RequestPools::new(64, 64).unwrap();
    let admitted = AdmissionLayer::new(requests.clone()).layer(inner);
    assert!(!call(&runtime, &admitted, None), "admitted");
    group.bench_function("admission", |b| b.iter(|| call(&runtime, &admitted, None)));
    group.bench_function("admission_with_deadline", |b| {
        b.iter(|| call(&runtime, &admitted, Some("250m")));
    });
    group.finish();

    let mut group = c.benchmark_group("tonic_refusal");
    group.measurement_time(Duration::from_secs(3));
    let full = RequestPools::new(1, 1).unwrap();
    let _held = full.try_lease(Class::Work).unwrap();
    let refusing = AdmissionLayer::new(full.clone()).layer(inner);
    assert!(call(&runtime, &refusing, None), "refused");
    group.bench_function("admission", |b| b.iter(|| call(&runtime, &refusing, None)));

    // tower: the one permit is held by a call whose answer never comes.
    let (hold, held) = tokio::sync::oneshot::channel::<()>();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Some(held)));
    let waiting = std::sync::Arc::clone(&held);
    let waits = service_fn(move |request: http::Request<()>| {
        let held = held.lock().unwrap().take();
        async move {
            if let Some(held) = held {
                let _ = held.await;
            }
            hello(request).await
        }
    });
    let blocking = with_tower_limit(waits, 1);
    let in_flight = runtime.spawn(blocking.clone().oneshot(request(None)));
    while waiting.lock().unwrap().is_some() {
        runtime.block_on(tokio::task::yield_now());
    }
    assert!(call(&runtime, &blocking, None), "refused");
    group.bench_function("tower_refused", |b| {
        b.iter(|| call(&runtime, &blocking, None));
    });
    group.finish();
    drop(hold);
    runtime.block_on(in_flight).unwrap().unwrap();
}

criterion_group!(benches, per_call);
criterion_main!(benches);
