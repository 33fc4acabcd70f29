//! Registry work from handlers: one line, `?` for the refusal, and a panic
//! answered with a 500 problem while the server keeps serving.

mod common;

use actix_web::{HttpResponse, web};
use admission_actix::{AdmissionControl, Rejection};
use admission_core::{Admission, Class, Pool, RequestPools};
use admission_http::{HttpRefusalStatus, Problem};
use reqwest::StatusCode;

use common::{client, data, problem, serve};

async fn metrics(pool: web::Data<Pool>) -> Result<HttpResponse, Rejection> {
    let walk = || Ok::<_, std::fmt::Error>("requests_total 1\n# EOF\n".to_owned());
    let text = pool.run(walk, Admission::FailFast).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(text))
}

async fn boom(pool: web::Data<Pool>) -> Result<String, Rejection> {
    let walk = || -> Result<String, std::fmt::Error> { panic!("walk exploded") };
    Ok(pool.run(walk, Admission::FailFast).await?)
}

async fn failing(pool: web::Data<Pool>) -> Result<String, Rejection> {
    let walk = || Err::<String, _>(std::fmt::Error);
    Ok(pool.run(walk, Admission::FailFast).await?)
}

async fn walker(pool: web::Data<Pool>) -> Result<String, Rejection> {
    let walk = || Ok::<_, std::fmt::Error>("walked".to_owned());
    Ok(pool.run(walk, Admission::Wait).await?)
}

fn app(requests: &RequestPools, pool: &Pool) -> common::Server {
    let pool = data(pool.clone());
    serve(AdmissionControl::new(requests.clone()), move |cfg| {
        cfg.app_data(pool.clone())
            .route("/metrics", web::get().to(metrics))
            .route("/boom", web::get().to(boom))
            .route("/failing", web::get().to(failing))
            .route("/walker", web::get().to(walker));
    })
}

#[tokio::test]
async fn registry_work_answers_and_a_busy_pool_refuses_with_the_problem() {
    let requests = RequestPools::new(2, 4).unwrap();
    let pool = Pool::new("registry", 1).unwrap();
    let server = app(&requests, &pool);

    let res = client().get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.text().await.unwrap(), "requests_total 1\n# EOF\n");

    let walking = pool.try_admit().unwrap();
    let expected = Problem::refusal(&pool.try_admit().unwrap_err(), HttpRefusalStatus::default());
    let res = client().get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(
        res.headers()["retry-after"],
        expected.retry_after().unwrap().to_string().as_str()
    );
    assert_eq!(
        res.text().await.unwrap(),
        expected.body(),
        "core's problem, byte for byte"
    );
    drop(walking);

    let res = client().get(server.url("/walker")).send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "walked");
    assert_eq!(pool.stats().in_use, 0);
    assert_eq!(
        requests.pool(Class::Control).stats().in_use,
        0,
        "request leases are back"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_panic_in_registry_work_answers_500_and_the_next_request_succeeds() {
    let requests = RequestPools::new(2, 4).unwrap();
    let pool = Pool::new("registry", 1).unwrap();
    let server = app(&requests, &pool);

    let res = client().get(server.url("/boom")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert!(
        res.headers().get("retry-after").is_none(),
        "a panic is no refusal"
    );
    let body = problem(res).await;
    assert_eq!(body["code"], "ADMISSION_WORK_PANICKED");
    assert!(
        !body.to_string().contains("exploded"),
        "the panic message is never sent"
    );

    let stats = pool.stats();
    assert_eq!(
        (stats.panicked, stats.in_use),
        (1, 0),
        "the panic released its slot"
    );
    let res = client().get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "the server and the pool keep serving"
    );
    assert_eq!(res.text().await.unwrap(), "requests_total 1\n# EOF\n");

    let res = client().get(server.url("/failing")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(problem(res).await["code"], "ADMISSION_WORK_FAILED");
    assert_eq!(requests.pool(Class::Control).stats().in_use, 0);
    server.stop().await;
}
