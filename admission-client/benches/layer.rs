//! What the retry layer costs when nothing fails: a GET to a hyper server
//! on 127.0.0.1 through hyper-util's client, bare and under `RetryLayer`
//! (default policy: budget, throttle, a 2 s deadline carried), in one run.
//! The goal is at most 1.1x the bare client; the bare client within a
//! `tokio::time::timeout` of the same 2 s is timed too (the layer's
//! deadline arms one timer per call, as that does). A second group times
//! the layer over an in-memory service, its own cost with no socket.

use std::convert::Infallible;
use std::time::Duration;

use admission_client::{RetryLayer, RetryPolicy};
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Layer as _, ServiceExt as _};

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let uri: http::Uri = runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address");
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                    TokioIo::new(stream),
                    service_fn(|_: Request<Incoming>| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    }),
                ));
            }
        });
        format!("http://{addr}/").parse().expect("a URI")
    });
    let bare = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let layered = RetryLayer::new(RetryPolicy::default().timeout(Duration::from_secs(2)))
        .expect("a valid policy")
        .layer(bare.clone());
    let request = || {
        Request::get(uri.clone())
            .body(Full::default())
            .expect("a request")
    };

    let mut group = c.benchmark_group("get_over_loopback");
    group.bench_function("bare", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = bare.clone().oneshot(request()).await.expect("an answer");
            response.into_body().collect().await.expect("a body");
        });
    });
    // The bare client as a careful caller uses it, within the same 2 s
    // the layer is given: one timer per call, as the layer arms.
    group.bench_function("bare_with_timeout", |b| {
        b.to_async(&runtime).iter(|| async {
            let response =
                tokio::time::timeout(Duration::from_secs(2), bare.clone().oneshot(request()))
                    .await
                    .expect("in time")
                    .expect("an answer");
            response.into_body().collect().await.expect("a body");
        });
    });
    group.bench_function("retry_layer", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = layered.clone().oneshot(request()).await.expect("an answer");
            response.into_body().collect().await.expect("a body");
        });
    });
    group.finish();

    // The layer's own work, with no socket to hide it: an in-memory
    // service that answers at once.
    let answer = tower::service_fn(|_: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    let layered_memory = RetryLayer::new(RetryPolicy::default().timeout(Duration::from_secs(2)))
        .expect("a valid policy")
        .layer(answer);
    let mut group = c.benchmark_group("in_memory");
    group.bench_function("bare", |b| {
        b.to_async(&runtime)
            .iter(|| async { answer.oneshot(request()).await.expect("an answer") });
    });
    group.bench_function("retry_layer", |b| {
        b.to_async(&runtime).iter(|| async {
            layered_memory
                .clone()
                .oneshot(request())
                .await
                .expect("an answer")
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
