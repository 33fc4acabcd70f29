//! The gRPC exporter over real HTTP/2 with tonic's client: walks, refusals
//! with their pushback, a retrying client that honours it, a stream that
//! holds its lease to its last part, health that turns at the signal; the
//! `grpc-exporter` binary; and `storm --grpc`.

mod support;

use std::time::Duration;

use admission_client::{Retries, RetryLayer, RetryPolicy};
use admission_core::{Class, Pool};
use admission_examples::grpc::{Config, GrpcExporter, RegistryClient, RetryingClient, WalkRequest};
use admission_tonic::status::{Hint, pushback};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Code;
use tonic::transport::Endpoint;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use support::Service;

/// The bound on every wait here: generous, it only matters when a test is
/// about to fail.
const PATIENCE: Duration = Duration::from_secs(20);

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `condition` until it holds: only for a pool's counters, which
/// nothing signals.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

/// A served exporter and how to stop it.
struct Running {
    uri: String,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<admission_examples::grpc::Stopped>>,
}

async fn serve(exporter: GrpcExporter) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let uri = format!("http://{}", listener.local_addr().expect("an address"));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(exporter.serve(listener, async {
        let _ = stopped.await;
    }));
    Running { uri, stop, server }
}

impl Running {
    async fn client(&self) -> RegistryClient {
        within("a connection", RegistryClient::connect(self.uri.clone()))
            .await
            .expect("the server accepts")
    }

    async fn health(&self) -> HealthClient<tonic::transport::Channel> {
        let endpoint = Endpoint::from_shared(self.uri.clone()).expect("a URI");
        HealthClient::new(
            within("a connection", endpoint.connect())
                .await
                .expect("connect"),
        )
    }

    async fn stop(self) -> admission_examples::grpc::Stopped {
        let _ = self.stop.send(());
        within("the exporter to stop", self.server)
            .await
            .expect("the server task")
            .expect("the exporter stopped cleanly")
    }
}

/// The binary's defaults, with a small registry.
fn small() -> Config {
    Config {
        series: 100,
        ..Config::default()
    }
}

fn exporter(config: Config) -> GrpcExporter {
    GrpcExporter::new(config).expect("a valid configuration")
}

/// Takes every slot of `pool`, as running walks would.
fn hold_all(pool: &Pool) -> Vec<admission_core::pool::Slot> {
    (0..pool.capacity())
        .map(|_| pool.try_admit().expect("a free slot"))
        .collect()
}

fn overall() -> HealthCheckRequest {
    HealthCheckRequest {
        service: String::new(),
    }
}

fn serving() -> i32 {
    ServingStatus::Serving as i32
}

#[tokio::test]
async fn walks_are_served_and_refused_with_the_pools_name_and_a_pushback() {
    let exporter = exporter(small());
    let registry = exporter.registry().expect("the admission gate").clone();
    let requests = exporter.requests().clone();
    let running = serve(exporter).await;
    let mut client = running.client().await;
    let mut health = running.health().await;

    let walked = client.walk(WalkRequest::default()).await.expect("a walk");
    assert!(
        walked
            .get_ref()
            .text
            .contains("grpc_exporter_demo_events_total")
    );
    assert!(walked.get_ref().text.ends_with("# EOF\n"));

    // Both registry workers busy: a walk is refused at once, by the pool.
    let walking = hold_all(&registry);
    let refused = client.walk(WalkRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(
        refused
            .message()
            .starts_with("ADMISSION_SATURATED: pool `registry`"),
        "{}",
        refused.message()
    );
    assert!(matches!(
        pushback(refused.metadata()),
        Hint::After(wait) if wait >= Duration::from_millis(1)
    ));
    drop(walking);

    // Every *work* lease taken: the layer refuses before any walk, and the
    // health service, on *control*, still answers.
    let leases: Vec<_> = (0..requests.pool(Class::Work).capacity())
        .map(|_| requests.try_lease(Class::Work).expect("a free lease"))
        .collect();
    let refused = client.walk(WalkRequest::default()).await.unwrap_err();
    assert!(
        refused
            .message()
            .starts_with("ADMISSION_SATURATED: pool `work`")
    );
    let checked = health
        .check(overall())
        .await
        .expect("health is never a walk");
    assert_eq!(checked.get_ref().status, serving());
    drop(leases);

    assert!(client.walk(WalkRequest::default()).await.is_ok());
    assert!(running.stop().await.report.drained());
}

/// Calls to paths the exporter does not serve (an unknown method of the
/// registry, an unknown service, a path that is no method at all) are
/// `UNIMPLEMENTED` without a lease: they never move the *work* pool's
/// `admitted` count, and are answered so even while every lease is taken.
#[tokio::test]
async fn unknown_methods_are_unimplemented_without_a_lease() {
    let exporter = exporter(small());
    let work = exporter.requests().pool(Class::Work).clone();
    let requests = exporter.requests().clone();
    let running = serve(exporter).await;
    let channel = within(
        "a connection",
        Endpoint::from_shared(running.uri.clone())
            .expect("a URI")
            .connect(),
    )
    .await
    .expect("connect");
    let bogus = [
        "/admission.example.v1.Registry/Nope",
        "/bogus.v1.Service/Walk",
        "/not-a-method",
    ];
    let call = |path: &'static str| {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        async move {
            grpc.ready().await.expect("the connection is ready");
            grpc.unary::<WalkRequest, admission_examples::grpc::Exposition, _>(
                tonic::Request::new(WalkRequest::default()),
                http::uri::PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::default(),
            )
            .await
        }
    };
    for round in 0..20 {
        for path in bogus {
            let answer = call(path).await.expect_err("no such method");
            assert_eq!(
                answer.code(),
                Code::Unimplemented,
                "{path} (round {round}): {answer:?}"
            );
        }
    }
    assert_eq!(
        work.stats().admitted,
        0,
        "60 unknown calls took no work lease"
    );

    // Every *work* lease taken: still UNIMPLEMENTED, never a refusal.
    let leases: Vec<_> = (0..work.capacity())
        .map(|_| requests.try_lease(Class::Work).expect("a free lease"))
        .collect();
    let answer = call(bogus[0]).await.expect_err("no such method");
    assert_eq!(answer.code(), Code::Unimplemented, "{answer:?}");
    drop(leases);
    // And a method the exporter serves still takes its lease.
    running
        .client()
        .await
        .walk(WalkRequest::default())
        .await
        .expect("a walk");
    assert_eq!(work.stats().admitted, work.capacity() as u64 + 1);
    assert!(running.stop().await.report.drained());
}

/// A client that sends its `Walk` and closes its side of the connection
/// (a FIN, no reset) while the walk runs is gone: its walk counts as an
/// orphan running at once (keeping its slot until it ends), as after a
/// reset, not only when the walk ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_closes_with_a_fin_is_orphaned_at_once() {
    use tokio::io::AsyncWriteExt as _;
    let exporter = exporter(Config {
        series: 50,
        walk_delay: Duration::from_secs(5),
        ..Config::default()
    });
    let registry = exporter.registry().expect("the admission gate").clone();
    let walks = exporter.walks();
    let running = serve(exporter).await;
    let addr: std::net::SocketAddr = running
        .uri
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let mut tcp = within("a connection", tokio::net::TcpStream::connect(addr))
        .await
        .expect("the server accepts");
    let mut call = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    call.extend(support::frame(0x4, 0, 0, &[])); // SETTINGS
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    support::literal(&mut block, ":path", admission_examples::grpc::WALK);
    support::literal(&mut block, ":authority", "127.0.0.1");
    support::literal(&mut block, "content-type", "application/grpc");
    support::literal(&mut block, "te", "trailers");
    call.extend(support::frame(0x1, 0x4, 1, &block)); // HEADERS, END_HEADERS
    call.extend(support::frame(0x0, 0x1, 1, &[0; 5])); // an empty message, END_STREAM
    tcp.write_all(&call).await.expect("the call is written");
    eventually("the walk to start", || walks.running() == 1).await;

    let closed = std::time::Instant::now();
    tcp.shutdown().await.expect("a FIN");
    // `orphans_running` counts a walk whose caller went away as it goes;
    // `orphaned` counts it once the walk has ended.
    eventually("the call to be orphaned", || {
        registry.stats().orphans_running == 1
    })
    .await;
    let took = closed.elapsed();
    println!("a FIN counted as an orphan running after {took:?} (the walk runs 5 s)");
    assert!(
        took < Duration::from_secs(2),
        "orphaned at the FIN, not at the walk's end: {took:?}"
    );
    assert_eq!(walks.running(), 1, "the walk keeps its slot until it ends");
    assert_eq!(registry.stats().orphaned, 0, "counted once it ends");
    drop(tcp);
    drop(running);
}

/// tonic's client has no retry policy (grpc/grpc-rust#1463); the example's
/// `RetryingClient` is `admission-client`'s layer under a real tonic call
/// over a `Channel`. Its own back-off here is 10 ms: a client that ignored
/// the server's 1 s pushback would try again within 10 ms; this one waits
/// the pushback, and carries the call's deadline as `grpc-timeout`.
#[tokio::test]
async fn a_retrying_client_honours_the_servers_pushback() {
    let exporter = exporter(small());
    let registry = exporter.registry().expect("the admission gate").clone();
    let running = serve(exporter).await;
    let channel = within(
        "a connection",
        Endpoint::from_shared(running.uri.clone())
            .expect("a URI")
            .connect(),
    )
    .await
    .expect("the server accepts");
    let policy = RetryPolicy::default()
        .backoff(Duration::from_millis(10), Duration::from_millis(10))
        .throttle(None)
        .timeout(Duration::from_secs(20));
    let mut client =
        RetryingClient::new(channel, &RetryLayer::new(policy).expect("a valid policy"));

    let walking = hold_all(&registry);
    let call = tokio::spawn(async move {
        let sent = tokio::time::Instant::now();
        (client.walk(WalkRequest::default()).await, sent.elapsed())
    });
    eventually("the first attempt to be refused", || {
        registry.stats().refused == 1
    })
    .await;
    // The slots are free again at once: only the pushback holds the retry.
    drop(walking);

    let (walked, took) = within("the retried call", call)
        .await
        .expect("the call task");
    let walked = walked.expect("the retry was admitted");
    assert!(walked.get_ref().text.ends_with("# EOF\n"));
    let retries = &walked.extensions().get::<Retries>().expect("one retry").0;
    assert_eq!(
        retries.len(),
        1,
        "one refusal, one admitted retry: {retries:?}"
    );
    assert_eq!(
        retries[0].hint,
        Some(Duration::from_secs(1)),
        "the wait is the server's pushback, not the client's 10 ms back-off"
    );
    assert!(
        retries[0].waited >= Duration::from_secs(1) && took >= Duration::from_secs(1),
        "the retry went out no sooner than the pushback allowed ({retries:?})"
    );
    assert_eq!(
        registry.stats().refused,
        1,
        "the server saw one refusal, no early retry"
    );
    assert!(running.stop().await.report.drained());
}

#[tokio::test]
async fn a_stream_holds_its_lease_until_its_last_part() {
    let exporter = exporter(Config {
        series: 5_000,
        work_slots: 1,
        ..Config::default()
    });
    let requests = exporter.requests().clone();
    let running = serve(exporter).await;
    // Small flow-control windows: the server can send no further ahead of
    // the client's reading than 64 KiB.
    let channel = Endpoint::from_shared(running.uri.clone())
        .expect("a URI")
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .expect("connect");
    let mut streaming = RegistryClient::new(channel);
    let mut other = running.client().await;

    let request = WalkRequest {
        lines_per_message: 10,
    };
    let mut parts = streaming
        .stream(request)
        .await
        .expect("admitted")
        .into_inner();
    let first = parts
        .message()
        .await
        .expect("a part")
        .expect("a first part");
    assert_eq!(first.text.lines().count(), 10);
    assert_eq!(
        requests.pool(Class::Work).stats().in_use,
        1,
        "the open stream holds the only *work* lease"
    );
    let refused = other.walk(WalkRequest::default()).await.unwrap_err();
    assert!(
        refused
            .message()
            .starts_with("ADMISSION_SATURATED: pool `work`")
    );

    let mut text = first.text;
    while let Some(part) = within("the next part", parts.message())
        .await
        .expect("a part")
    {
        text.push_str(&part.text);
    }
    assert!(text.ends_with("# EOF\n"), "every part arrived, in order");
    assert_eq!(
        requests.pool(Class::Work).stats().in_use,
        0,
        "the lease is back at the end"
    );
    assert!(other.walk(WalkRequest::default()).await.is_ok());
    running.stop().await;
}

#[tokio::test]
async fn health_turns_not_serving_at_the_signal() {
    let exporter = exporter(Config {
        shutdown_deadline: Duration::from_millis(500),
        ..small()
    });
    let running = serve(exporter).await;
    let mut health = running.health().await;
    let mut watch = health.watch(overall()).await.expect("a watch").into_inner();
    let first: HealthCheckResponse = watch.message().await.expect("a status").expect("one");
    assert_eq!(first.status, serving());

    let _ = running.stop.send(());
    let turned = within("health to turn", watch.message())
        .await
        .expect("a status")
        .expect("one");
    assert_eq!(turned.status, ServingStatus::NotServing as i32);
    // The open watch keeps its connection busy: the server stops by its
    // deadline and says so.
    let stopped = within("the exporter to stop", running.server)
        .await
        .expect("the server task")
        .expect("stopped");
    assert!(stopped.took <= Duration::from_millis(500) + Duration::from_secs(1));
}

#[tokio::test]
async fn the_binary_serves_walks_and_health_and_drains_on_sigterm() {
    let mut service =
        Service::start(env!("CARGO_BIN_EXE_grpc-exporter"), &["--series", "50"]).await;
    let uri = format!("http://{}", service.addr);
    let mut client = within("a connection", RegistryClient::connect(uri.clone()))
        .await
        .expect("connect");
    let walked = client.walk(WalkRequest::default()).await.expect("a walk");
    assert!(walked.get_ref().text.contains(r#"series="series-49""#));
    let channel = Endpoint::from_shared(uri)
        .expect("a URI")
        .connect()
        .await
        .expect("connect");
    let checked = HealthClient::new(channel)
        .check(overall())
        .await
        .expect("a check");
    assert_eq!(checked.get_ref().status, serving());
    drop(client);

    service.assert_alive("a walk and a health check");
    service.terminate();
    let (status, logs) = service.exit_within(Duration::from_secs(15)).await;
    assert!(status.success(), "exits 0 after SIGTERM:\n{logs}");
    assert!(
        logs.contains("shutdown drained"),
        "the drain is logged:\n{logs}"
    );
}
