//! Registry work from handlers over real HTTP: a refusal returned with `?`,
//! a panic answered with 500 while the server keeps serving, and pure work
//! that runs under the request's lease.

mod common;

use std::convert::Infallible;

use admission_axum::{AdmissionLayer, Rejection};
use admission_core::{Admission, Class, Pool, RequestPools};
use axum::extract::State;
use axum::{
    Router,
    routing::{get, post},
};
use reqwest::StatusCode;

use common::{client, problem, serve};

#[derive(Clone)]
struct App {
    registry: Pool,
    requests: RequestPools,
}

async fn metrics(State(app): State<App>) -> Result<String, Rejection> {
    let walk = || Ok::<_, Infallible>("# EOF\n".to_owned());
    Ok(app.registry.run(walk, Admission::FailFast).await?)
}

async fn explode(State(app): State<App>) -> Result<String, Rejection> {
    let walk = || -> Result<String, Infallible> { panic!("registry walk blew up") };
    Ok(app.registry.run(walk, Admission::FailFast).await?)
}

async fn transition(State(app): State<App>) -> Result<String, Rejection> {
    let next = app
        .requests
        .execute_pure(Class::Work, || Ok::<_, Infallible>(7))
        .await?;
    Ok(format!("state {next}"))
}

async fn app_server() -> (App, String) {
    let app = App {
        registry: Pool::new("registry", 1).unwrap(),
        requests: RequestPools::new(1, 1).unwrap(),
    };
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/explode", get(explode))
        .route("/transition", post(transition))
        .layer(AdmissionLayer::new(app.requests.clone()))
        .with_state(app.clone());
    let addr = serve(router).await;
    (app, format!("http://{addr}"))
}

#[tokio::test]
async fn panic_in_registry_work_is_500_and_the_next_request_succeeds() {
    let (app, base) = app_server().await;

    let exploded = client()
        .get(format!("{base}/explode"))
        .send()
        .await
        .unwrap();
    assert_eq!(exploded.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        exploded.headers()["content-type"],
        "application/problem+json"
    );
    assert!(
        exploded.headers().get("retry-after").is_none(),
        "a panic is not a refusal"
    );
    let body = problem(exploded).await;
    assert_eq!(body["code"], "ADMISSION_WORK_PANICKED");
    assert!(
        !body.to_string().contains("blew up"),
        "the panic message never reaches the client"
    );

    let stats = app.registry.stats();
    assert_eq!(
        (stats.panicked, stats.in_use),
        (1, 0),
        "the panic was counted and the slot is back"
    );

    let next = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(next.status(), StatusCode::OK, "the worker thread survived");
    assert_eq!(
        next.headers()["content-length"],
        "6",
        "the leased body keeps the inner body's exact size"
    );
    assert_eq!(next.text().await.unwrap(), "# EOF\n");
}

#[tokio::test]
async fn busy_registry_refusal_is_returned_with_question_mark() {
    let (app, base) = app_server().await;

    let busy = app.registry.try_admit().unwrap();
    let refused = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body = problem(refused).await;
    assert_eq!(body["code"], "ADMISSION_SATURATED");
    assert_eq!(
        body["pool"], "registry",
        "the refusal names the registry pool, not a request class"
    );
    drop(busy);

    let served = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), StatusCode::OK);
}

#[tokio::test]
async fn pure_work_in_a_handler_runs_under_the_request_lease() {
    let (app, base) = app_server().await;

    // The request holds the only *work* slot; its pure work needs no second.
    let response = client()
        .post(format!("{base}/transition"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "state 7");
    let work = app.requests.pool(Class::Work).stats();
    assert_eq!(
        work.admitted, 1,
        "one lease for the request, none for its pure work"
    );
}
