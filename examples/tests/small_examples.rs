//! The small examples (`examples/examples/`), each run as its own test: the
//! file is included as a module and its server or loop started on loopback
//! as `main` would, then held to its one promise.

use std::time::Duration;

use admission_core::{Class, Pool, RequestPools, Shutdown};
use tokio::sync::mpsc;

#[path = "../examples/quickstart-axum.rs"]
#[allow(dead_code)]
mod quickstart_axum;

#[path = "../examples/quickstart-actix.rs"]
#[allow(dead_code)]
mod quickstart_actix;

#[path = "../examples/quickstart-tonic.rs"]
#[allow(dead_code)]
mod quickstart_tonic;

#[path = "../examples/background-loop.rs"]
#[allow(dead_code)]
mod background_loop;

/// `path` on `addr`: the status, the `Retry-After` header and the body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, Option<String>, String) {
    let response = reqwest::Client::new()
        .get(format!("http://{addr}{path}"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().expect("ASCII").to_owned());
    (status, retry_after, response.text().await.expect("a body"))
}

/// The quickstarts' one promise, over real HTTP: with the route's class
/// full, `/metrics` is refused `503` with `Retry-After` at once while
/// `/healthz` is served; with the slot back, `/metrics` walks.
async fn a_saturated_route_is_refused_and_health_is_served(
    addr: std::net::SocketAddr,
    requests: &RequestPools,
) {
    let held = requests
        .try_lease(Class::Control)
        .expect("the one control slot");
    let (status, retry_after, _) = get(addr, "/metrics").await;
    assert_eq!(status, 503, "refused while the class is full");
    assert!(retry_after.is_some(), "with Retry-After");
    let (status, _, body) = get(addr, "/healthz").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok"),
        "health never waits on load"
    );
    drop(held);
    let (status, _, body) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.ends_with("# EOF\n"), "{body}");
}

#[tokio::test]
async fn quickstart_axum_refuses_a_saturated_route_and_serves_health() {
    let requests = RequestPools::new(1, 1).unwrap();
    let registry = Pool::new("registry", 1).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = quickstart_axum::router(requests.clone(), registry);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    a_saturated_route_is_refused_and_health_is_served(addr, &requests).await;
    server.abort();
}

#[actix_web::test]
async fn quickstart_actix_refuses_a_saturated_route_and_serves_health() {
    let requests = RequestPools::new(1, 1).unwrap();
    let registry = Pool::new("registry", 1).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = quickstart_actix::server(listener, requests.clone(), registry).unwrap();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    a_saturated_route_is_refused_and_health_is_served(addr, &requests).await;
    handle.stop(false).await;
}

/// The tonic quickstart's promise, over real HTTP/2: with the *work*
/// class full, `Walk` ends at once with `UNAVAILABLE` and a pushback while
/// a health check is served; with the slot back, `Walk` walks.
#[tokio::test]
async fn quickstart_tonic_refuses_a_saturated_method_and_serves_health() {
    use quickstart_tonic::{Exposition, WALK, WalkRequest};
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let requests = RequestPools::new(1, 1).unwrap();
    let registry = Pool::new("registry", 1).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(quickstart_tonic::serve(
        listener,
        requests.clone(),
        registry,
        async {
            let _ = stopped.await;
        },
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("the server accepts");
    let walk = || {
        let mut client = tonic::client::Grpc::new(channel.clone());
        async move {
            client.ready().await.unwrap();
            let codec = tonic_prost::ProstCodec::<WalkRequest, Exposition>::default();
            let path = http::uri::PathAndQuery::from_static(WALK);
            client
                .unary(tonic::Request::new(WalkRequest {}), path, codec)
                .await
        }
    };

    let held = requests.try_lease(Class::Work).expect("the one work slot");
    let refused = walk().await.expect_err("refused while the class is full");
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    assert!(
        refused.metadata().get("grpc-retry-pushback-ms").is_some(),
        "with a pushback"
    );
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest::default())
        .await
        .expect("health never waits on load");
    assert_eq!(health.into_inner().status, 1, "SERVING");
    drop(held);
    let text = walk().await.expect("served").into_inner().text;
    assert!(text.ends_with("# EOF\n"), "{text}");

    let _ = stop.send(());
    server
        .await
        .unwrap()
        .map_err(|err| err.to_string())
        .unwrap();
}

/// The loop's promise: with every request *work* slot held, its turns are
/// served from its reservation, never refused; shutdown cancels it and
/// returns by its deadline.
#[tokio::test]
async fn background_loop_is_never_refused_and_stops_by_the_deadline() {
    let requests = RequestPools::new(1, 1).unwrap();
    let shutdown = Shutdown::new(Duration::from_secs(5)).unwrap();
    shutdown.register(&requests);
    shutdown.register(&background_loop::Refresher);
    let _overload = requests.try_lease(Class::Work).unwrap();
    assert!(
        requests.try_lease(Class::Work).is_err(),
        "requests are refused"
    );

    let (turns, mut done) = mpsc::unbounded_channel();
    let loop_requests = requests.clone();
    shutdown.spawn_lifespan(move |stop| {
        background_loop::Refresher.run(loop_requests, Duration::from_millis(10), stop, turns)
    });
    for expected in 1..=3 {
        let turn = tokio::time::timeout(Duration::from_secs(10), done.recv())
            .await
            .expect("a turn within 10 s")
            .expect("the loop runs");
        assert_eq!(
            turn,
            Ok(expected),
            "turn {expected} served from the reservation"
        );
    }

    let report = tokio::time::timeout(Duration::from_secs(10), shutdown.shutdown())
        .await
        .expect("shutdown returns by its deadline");
    assert!(report.drained(), "{report:?}");
    assert_eq!((report.loops_stopped, report.loops_aborted), (1, 0));
}
