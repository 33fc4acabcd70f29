//! Which class a request leases from: by method, per route, or by closure.

mod common;

use admission_axum::AdmissionLayer;
use admission_core::{Class, RequestPools};
use axum::{Router, routing::get};
use reqwest::StatusCode;

use common::{client, problem, serve};

#[tokio::test]
async fn default_classifier_sends_reads_to_control_and_mutations_to_work() {
    let pools = RequestPools::new(1, 1).unwrap();
    let router = Router::new()
        .route(
            "/items",
            get(|| async { "[]" }).post(|| async { "created" }),
        )
        .layer(AdmissionLayer::new(pools.clone()));
    let addr = serve(router).await;
    let url = format!("http://{addr}/items");

    let work = pools.try_lease(Class::Work).unwrap();
    let read = client().get(&url).send().await.unwrap();
    assert_eq!(
        read.status(),
        StatusCode::OK,
        "GET leases from control, which is free"
    );
    let head = client().head(&url).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK, "HEAD leases from control");
    let write = client().post(&url).send().await.unwrap();
    assert_eq!(
        write.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "POST leases from work, which is full"
    );
    assert_eq!(problem(write).await["pool"], "work");
    drop(work);

    common::eventually("the HEAD request's lease is back", || {
        pools.pool(Class::Control).stats().in_use == 0
    })
    .await;
    let control = pools.try_lease(Class::Control).unwrap();
    let read = client().get(&url).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(problem(read).await["pool"], "control");
    let write = client().post(&url).send().await.unwrap();
    assert_eq!(write.status(), StatusCode::OK);
    drop(control);
}

#[tokio::test]
async fn per_route_class_and_classifier_closure_choose_the_pool() {
    let pools = RequestPools::new(1, 1).unwrap();
    let router = Router::new()
        .route(
            "/metrics",
            get(|| async { "# EOF\n" }).layer(AdmissionLayer::class(pools.clone(), Class::Work)),
        )
        .route(
            "/status",
            get(|| async { "ok" }).layer(AdmissionLayer::classify(pools.clone(), |head| {
                if head.headers.contains_key("x-control") {
                    Class::Control
                } else {
                    Class::Work
                }
            })),
        );
    let addr = serve(router).await;

    let work = pools.try_lease(Class::Work).unwrap();
    let metrics = client()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        metrics.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the route's class is work, even for GET"
    );
    assert_eq!(problem(metrics).await["pool"], "work");

    let status = format!("http://{addr}/status");
    let plain = client().get(&status).send().await.unwrap();
    assert_eq!(
        plain.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the closure chose work"
    );
    let control = client()
        .get(&status)
        .header("x-control", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        control.status(),
        StatusCode::OK,
        "the closure chose control"
    );
    drop(work);
}
