//! What the retry layer costs on a unary gRPC call when nothing fails:
//! `grpc.health.v1.Health/Check` to tonic's server on 127.0.0.1, through
//! tonic's `Channel` bare, bare as a careful caller makes it (within a 2 s
//! timeout, sending it as `grpc-timeout` and `x-admission-budget-ms`, as
//! the layer does), and under `RetryLayer` (the default policy, and with
//! a 2 s deadline). A unary call's body is one encoded message,
//! so the layer keeps it for a retry: the path every tonic client under
//! the layer takes.
//!
//! `cargo bench -p admission-client --features tonic --bench grpc`. With
//! `ADMISSION_BENCH_PAIRED=N` it runs five rounds of N calls per variant,
//! interleaved in one process, prints each round's mean and exits.

use std::time::Duration;

use admission_client::{RetryLayer, RetryPolicy, RetryService};
use admission_http::BUDGET_HEADER;
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::Layer as _;

/// The clients timed, over one channel.
struct Clients {
    bare: HealthClient<Channel>,
    undated: HealthClient<RetryService<Channel>>,
    dated: HealthClient<RetryService<Channel>>,
}

const NAMES: [&str; 4] = [
    "bare",
    "bare_with_timeout_and_budget",
    "retry_layer_no_deadline",
    "retry_layer",
];

impl Clients {
    fn new(channel: &Channel) -> Clients {
        let layer = |policy| {
            HealthClient::new(
                RetryLayer::new(policy)
                    .expect("a valid policy")
                    .layer(channel.clone()),
            )
        };
        Clients {
            bare: HealthClient::new(channel.clone()),
            undated: layer(RetryPolicy::default()),
            dated: layer(RetryPolicy::default().timeout(Duration::from_secs(2))),
        }
    }

    /// One `Check`, as the variant `name` makes it.
    async fn call(&self, name: &str) {
        let request = HealthCheckRequest {
            service: String::new(),
        };
        let answer = match name {
            "bare" => self.bare.clone().check(request).await,
            "bare_with_timeout_and_budget" => {
                let mut request = tonic::Request::new(request);
                request.set_timeout(Duration::from_millis(1999));
                request
                    .metadata_mut()
                    .insert(BUDGET_HEADER, tonic::metadata::MetadataValue::from(1999u64));
                tokio::time::timeout(Duration::from_secs(2), self.bare.clone().check(request))
                    .await
                    .expect("in time")
            }
            "retry_layer_no_deadline" => self.undated.clone().check(request).await,
            _ => self.dated.clone().check(request).await,
        };
        assert_eq!(answer.expect("an answer").get_ref().status, 1, "SERVING");
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let clients = runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address");
        let (_reporter, health) = tonic_health::server::health_reporter();
        tokio::spawn(
            Server::builder()
                .add_service(health)
                .serve_with_incoming(TcpIncoming::from(listener)),
        );
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("a URI")
            .connect()
            .await
            .expect("the server accepts");
        Clients::new(&channel)
    });
    if let Some(n) = std::env::var("ADMISSION_BENCH_PAIRED")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    {
        for round in 1..=5 {
            let mut line = format!("round {round} (µs a call):");
            for name in NAMES {
                let start = std::time::Instant::now();
                runtime.block_on(async {
                    for _ in 0..n {
                        clients.call(name).await;
                    }
                });
                let micros = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
                line += &format!(" {name} {micros:.2}");
            }
            println!("{line}");
        }
        return;
    }
    let mut group = c.benchmark_group("grpc_check_over_loopback");
    for name in NAMES {
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| clients.call(name));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
