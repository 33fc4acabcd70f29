//! What the retry layer costs when nothing fails (goal: at most 1.1x the
//! bare client), in three groups:
//!
//! * `get_over_loopback`: a GET to a hyper server on 127.0.0.1 through
//!   hyper-util's client. Bare; bare within a 2 s `tokio::time::timeout`
//!   (one timer per call, as the layer's deadline arms); bare within that
//!   timeout and sending `x-admission-budget-ms` (what the layer sends on
//!   each attempt, so the header's encoding and parsing are in both: the
//!   fair baseline for a caller that carries its deadline); under
//!   `RetryLayer` with a 2 s deadline; and under the default policy
//!   (`retry_layer_no_deadline`: nothing carried, like for like with the
//!   bare client).
//! * `in_memory`: the layer over a service that answers at once, its own
//!   work with no socket.
//! * `in_memory_pending_once`: over a service that is pending once before
//!   it answers, so the layer takes the path a socket makes it take.
//!
//! Criterion times the variants one after another, and on a shared 2-core
//! machine the bare client alone drifts by more than the layer costs. With
//! `ADMISSION_BENCH_PAIRED=N` the bench instead runs five rounds of N calls
//! per variant, interleaved in one process, prints each round's mean and
//! exits (`ADMISSION_BENCH_PAIRED=20000 target/release/deps/layer-* --bench`).
//!
//! With `ADMISSION_BENCH_URL` set (say `http://127.0.0.1:9464/healthz`)
//! the loopback group calls that server instead of its own, so the server
//! and the bench can be pinned to different cores (`taskset -c 1` for the
//! server, `taskset -c 0` for the bench).

use std::convert::Infallible;
use std::time::Duration;

use admission_client::{RetryLayer, RetryPolicy};
use admission_http::BUDGET_HEADER;
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
    let external = std::env::var("ADMISSION_BENCH_URL").ok();
    let uri: http::Uri = match external {
        Some(url) => url.parse().expect("ADMISSION_BENCH_URL is a URI"),
        None => serve_here(&runtime),
    };
    let bare = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let layered = RetryLayer::new(RetryPolicy::default().timeout(Duration::from_secs(2)))
        .expect("a valid policy")
        .layer(bare.clone());
    // The default policy, with no timeout: nothing is carried (no header,
    // no timer) unless the caller's scope has a deadline, so the like for
    // like pair with the bare client.
    let undated = RetryLayer::new(RetryPolicy::default())
        .expect("a valid policy")
        .layer(bare.clone());
    let request = || {
        Request::get(uri.clone())
            .body(Full::default())
            .expect("a request")
    };

    let carried = || {
        let mut request = request();
        request
            .headers_mut()
            .insert(BUDGET_HEADER, http::HeaderValue::from(1999u64));
        request
    };
    if let Some(n) = std::env::var("ADMISSION_BENCH_PAIRED")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    {
        paired(&runtime, n, &bare, [&layered, &undated], &request, &carried);
        return;
    }

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
    // ... and carrying its deadline in the header the layer sends.
    group.bench_function("bare_with_timeout_and_budget", |b| {
        b.to_async(&runtime).iter(|| async {
            let response =
                tokio::time::timeout(Duration::from_secs(2), bare.clone().oneshot(carried()))
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
    group.bench_function("retry_layer_no_deadline", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = undated.clone().oneshot(request()).await.expect("an answer");
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

    // The same, over a service that is pending once before it answers (as
    // a socket is): the layer then also takes its Pending path (the
    // deadline's timer armed, the clock read again).
    let later = tower::service_fn(|_: Request<Full<Bytes>>| async {
        tokio::task::yield_now().await;
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    let layered_later = RetryLayer::new(RetryPolicy::default().timeout(Duration::from_secs(2)))
        .expect("a valid policy")
        .layer(later);
    let undated_later = RetryLayer::new(RetryPolicy::default())
        .expect("a valid policy")
        .layer(later);
    let mut group = c.benchmark_group("in_memory_pending_once");
    group.bench_function("bare", |b| {
        b.to_async(&runtime)
            .iter(|| async { later.oneshot(request()).await.expect("an answer") });
    });
    group.bench_function("retry_layer", |b| {
        b.to_async(&runtime).iter(|| async {
            layered_later
                .clone()
                .oneshot(request())
                .await
                .expect("an answer")
        });
    });
    group.bench_function("retry_layer_no_deadline", |b| {
        b.to_async(&runtime).iter(|| async {
            undated_later
                .clone()
                .oneshot(request())
                .await
                .expect("an answer")
        });
    });
    group.finish();
}

/// Five rounds of `n` calls per variant (the bare client, the bare client
/// carrying its deadline, the layer with a deadline and without), interleaved,
/// each round's mean printed in microseconds.
fn paired<S, L>(
    runtime: &tokio::runtime::Runtime,
    n: u32,
    bare: &S,
    [layered, undated]: [&L; 2],
    request: &dyn Fn() -> Request<Full<Bytes>>,
    carried: &dyn Fn() -> Request<Full<Bytes>>,
) where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<Incoming>> + Clone,
    S::Error: std::fmt::Debug,
    L: tower::Service<Request<Full<Bytes>>, Response = Response<Incoming>> + Clone,
    L::Error: std::fmt::Debug,
{
    for round in 1..=5 {
        let mut line = format!("round {round} (µs a call):");
        for variant in [
            "bare",
            "bare_with_timeout_and_budget",
            "retry_layer",
            "retry_layer_no_deadline",
        ] {
            let start = std::time::Instant::now();
            runtime.block_on(async {
                for _ in 0..n {
                    let response = match variant {
                        "bare" => bare.clone().oneshot(request()).await.expect("an answer"),
                        "retry_layer" => {
                            layered.clone().oneshot(request()).await.expect("an answer")
                        }
                        "retry_layer_no_deadline" => {
                            undated.clone().oneshot(request()).await.expect("an answer")
                        }
                        _ => tokio::time::timeout(
                            Duration::from_secs(2),
                            bare.clone().oneshot(carried()),
                        )
                        .await
                        .expect("in time")
                        .expect("an answer"),
                    };
                    response.into_body().collect().await.expect("a body");
                }
            });
            let micros = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
            line += &format!(" {variant} {micros:.2}");
        }
        println!("{line}");
    }
}

/// A hyper server on a port of this process's own, answering `ok`.
fn serve_here(runtime: &tokio::runtime::Runtime) -> http::Uri {
    runtime.block_on(async {
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
    })
}

criterion_group!(benches, bench);
criterion_main!(benches);
