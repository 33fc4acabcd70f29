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
//! `ADMISSION_BENCH_CALLS=bare,retry_layer_no_deadline` limits the paired
//! rounds to the variants named (for `valgrind --tool=callgrind`, one
//! variant a run).
//!
//! With `ADMISSION_BENCH_URL` set (say `http://127.0.0.1:9464/healthz`)
//! the loopback group calls that server instead of its own, so the server
//! and the bench can be pinned to different cores (`taskset -c 1` for the
//! server, `taskset -c 0` for the bench).

use std::convert::Infallible;
use std::time::Duration;

use admission_client::{RetryLayer, RetryPolicy, RetryService};
use admission_http::BUDGET_HEADER;
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Layer as _, ServiceExt as _};

/// The calls timed over loopback, in the order criterion and the paired
/// mode time them.
#[derive(Clone, Copy)]
enum Call {
    Bare,
    /// The bare client as a careful caller uses it, within the same 2 s
    /// the layer is given: one timer per call, as the layer arms.
    BareWithTimeout,
    /// ... and carrying its deadline in the header the layer sends.
    BareWithTimeoutAndBudget,
    RetryLayer,
    /// The default policy, with no timeout: nothing is carried (no header,
    /// no timer) unless the caller's scope has a deadline, so the
    /// like-for-like pair with the bare client.
    RetryLayerNoDeadline,
}

impl Call {
    const ALL: [Call; 5] = [
        Call::Bare,
        Call::BareWithTimeout,
        Call::BareWithTimeoutAndBudget,
        Call::RetryLayer,
        Call::RetryLayerNoDeadline,
    ];

    fn name(self) -> &'static str {
        match self {
            Call::Bare => "bare",
            Call::BareWithTimeout => "bare_with_timeout",
            Call::BareWithTimeoutAndBudget => "bare_with_timeout_and_budget",
            Call::RetryLayer => "retry_layer",
            Call::RetryLayerNoDeadline => "retry_layer_no_deadline",
        }
    }
}

type Bare = Client<HttpConnector, Full<Bytes>>;

/// The clients of the loopback group, over one server.
struct Loopback {
    uri: http::Uri,
    bare: Bare,
    layered: RetryService<Bare>,
    undated: RetryService<Bare>,
}

impl Loopback {
    fn new(uri: http::Uri) -> Loopback {
        let bare = Client::builder(TokioExecutor::new()).build_http();
        Loopback {
            uri,
            layered: layer(
                RetryPolicy::default().timeout(Duration::from_secs(2)),
                bare.clone(),
            ),
            undated: layer(RetryPolicy::default(), bare.clone()),
            bare,
        }
    }

    /// One GET as `call` makes it, its body read to the end.
    async fn call(&self, call: Call) {
        let request = get(&self.uri);
        let response = match call {
            Call::Bare => self.bare.clone().oneshot(request).await.expect("an answer"),
            Call::BareWithTimeout | Call::BareWithTimeoutAndBudget => {
                let mut request = request;
                if matches!(call, Call::BareWithTimeoutAndBudget) {
                    request
                        .headers_mut()
                        .insert(BUDGET_HEADER, http::HeaderValue::from(1999u64));
                }
                tokio::time::timeout(Duration::from_secs(2), self.bare.clone().oneshot(request))
                    .await
                    .expect("in time")
                    .expect("an answer")
            }
            Call::RetryLayer => self
                .layered
                .clone()
                .oneshot(request)
                .await
                .expect("an answer"),
            Call::RetryLayerNoDeadline => self
                .undated
                .clone()
                .oneshot(request)
                .await
                .expect("an answer"),
        };
        response.into_body().collect().await.expect("a body");
    }
}

fn layer<S>(policy: RetryPolicy, inner: S) -> RetryService<S> {
    RetryLayer::new(policy)
        .expect("a valid policy")
        .layer(inner)
}

fn get(uri: &http::Uri) -> Request<Full<Bytes>> {
    Request::get(uri.clone())
        .body(Full::default())
        .expect("a request")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let uri = match std::env::var("ADMISSION_BENCH_URL") {
        Ok(url) => url.parse().expect("ADMISSION_BENCH_URL is a URI"),
        Err(_) => serve_here(&runtime),
    };
    let loopback = Loopback::new(uri);
    if let Some(n) = std::env::var("ADMISSION_BENCH_PAIRED")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    {
        paired(&runtime, n, &loopback);
        return;
    }

    let mut group = c.benchmark_group("get_over_loopback");
    for call in Call::ALL {
        group.bench_function(call.name(), |b| {
            b.to_async(&runtime).iter(|| loopback.call(call));
        });
    }
    group.finish();

    // The layer's own work, with no socket to hide it: an in-memory
    // service that answers at once.
    in_memory(
        c,
        &runtime,
        "in_memory",
        &tower::service_fn(|_: Request<Full<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        }),
    );
    // The same, over a service that is pending once before it answers (as
    // a socket is): the layer then also takes its Pending path (the
    // deadline's timer armed, the clock read again).
    in_memory(
        c,
        &runtime,
        "in_memory_pending_once",
        &tower::service_fn(|_: Request<Full<Bytes>>| async {
            tokio::task::yield_now().await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        }),
    );
}

/// `service` bare, under the layer with a 2 s deadline and under the
/// default policy.
fn in_memory<S>(c: &mut Criterion, runtime: &tokio::runtime::Runtime, name: &str, service: &S)
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<Full<Bytes>>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let uri: http::Uri = "http://in-memory/".parse().expect("a URI");
    let layered = layer(
        RetryPolicy::default().timeout(Duration::from_secs(2)),
        service.clone(),
    );
    let undated = layer(RetryPolicy::default(), service.clone());
    let mut group = c.benchmark_group(name);
    group.bench_function("bare", |b| {
        b.to_async(runtime)
            .iter(|| service.clone().oneshot(get(&uri)));
    });
    group.bench_function("retry_layer", |b| {
        b.to_async(runtime)
            .iter(|| layered.clone().oneshot(get(&uri)));
    });
    group.bench_function("retry_layer_no_deadline", |b| {
        b.to_async(runtime)
            .iter(|| undated.clone().oneshot(get(&uri)));
    });
    group.finish();
}

/// Five rounds of `n` calls of each loopback variant, interleaved, each
/// round's mean printed in microseconds.
fn paired(runtime: &tokio::runtime::Runtime, n: u32, loopback: &Loopback) {
    let only = std::env::var("ADMISSION_BENCH_CALLS").ok();
    let calls: Vec<Call> = Call::ALL
        .into_iter()
        .filter(|call| {
            only.as_deref()
                .is_none_or(|only| only.split(',').any(|name| name == call.name()))
        })
        .collect();
    for round in 1..=5 {
        let mut line = format!("round {round} (µs a call):");
        for &call in &calls {
            let start = std::time::Instant::now();
            runtime.block_on(async {
                for _ in 0..n {
                    loopback.call(call).await;
                }
            });
            let micros = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
            line += &format!(" {} {micros:.2}", call.name());
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
