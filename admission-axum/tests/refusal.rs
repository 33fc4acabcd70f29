//! A refused request over real HTTP: status, headers and problem body.

mod common;

use admission_axum::AdmissionLayer;
use admission_axum::HttpRefusalStatus;
use admission_core::{Class, RequestPools};
use axum::extract::State;
use axum::{Router, routing::get};
use reqwest::StatusCode;

use common::{Gate, client, gate, problem, serve};

async fn held(State(gate): State<Gate>) -> &'static str {
    gate.pass().await;
    "done"
}

/// One request holds the only *control* slot; the next gets the refusal.
async fn refused_while_one_is_held(
    pools: RequestPools,
    status: HttpRefusalStatus,
) -> (reqwest::Response, StatusCode) {
    let (gate, mut control) = gate();
    let router = Router::new()
        .route("/held", get(held))
        .layer(AdmissionLayer::new(pools).refusal_status(status))
        .with_state(gate);
    let addr = serve(router).await;
    let url = format!("http://{addr}/held");

    let first = tokio::spawn({
        let url = url.clone();
        async move {
            client()
                .get(url)
                .send()
                .await
                .expect("first request")
                .status()
        }
    });
    control.entered(1).await;
    let refused = client().get(&url).send().await.expect("second request");
    assert_eq!(
        control.entered_now(),
        0,
        "a refused request never reaches the handler"
    );
    control.open(1);
    let first = first.await.expect("first request task");
    (refused, first)
}

#[tokio::test]
async fn refusal_is_503_with_retry_after_and_a_problem_body() {
    let pools = RequestPools::new(1, 1).unwrap();
    let (refused, first) =
        refused_while_one_is_held(pools.clone(), HttpRefusalStatus::default()).await;

    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let headers = refused.headers();
    assert_eq!(
        headers["retry-after"], "1",
        "no work history yet: the hint is 1 s"
    );
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(headers["cache-control"], "no-store");
    let body = problem(refused).await;
    assert_eq!(body["code"], "ADMISSION_SATURATED");
    assert_eq!(
        body["pool"], "control",
        "a GET leases from the control class"
    );
    assert_eq!(body["status"], 503);
    assert_eq!(body["retry_after"], 1);
    assert_eq!(body["type"], "urn:admission:ADMISSION_SATURATED");

    assert_eq!(first, StatusCode::OK, "the admitted request is unaffected");
    assert_eq!(
        pools.pool(Class::Control).stats().refused,
        1,
        "the refusal is counted"
    );
}

#[tokio::test]
async fn refusal_status_is_429_when_the_layer_says_so() {
    let pools = RequestPools::new(1, 1).unwrap();
    let (refused, first) =
        refused_while_one_is_held(pools, HttpRefusalStatus::TooManyRequests).await;

    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let body = problem(refused).await;
    assert_eq!(body["status"], 429);
    assert_eq!(body["code"], "ADMISSION_SATURATED");
    assert_eq!(first, StatusCode::OK);
}
