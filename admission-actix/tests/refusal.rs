//! A refused request over real HTTP: status, headers and core's problem
//! body, byte for byte.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{HttpResponse, web};
use admission_actix::AdmissionControl;
use admission_core::{Class, RequestPools};
use admission_http::{HttpRefusalStatus, Problem};
use reqwest::StatusCode;

use common::{client, data, problem, serve};

#[tokio::test]
async fn refused_request_gets_503_retry_after_and_the_problem_body() {
    let pools = RequestPools::new(1, 1).unwrap();
    let ran = data(AtomicUsize::new(0));
    let server = serve(AdmissionControl::new(pools.clone()), {
        let ran = ran.clone();
        move |cfg| {
            cfg.app_data(ran.clone()).route(
                "/status",
                web::get().to(|ran: web::Data<AtomicUsize>| async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    HttpResponse::Ok().body("ok")
                }),
            );
        }
    });

    let held = pools.try_lease(Class::Control).unwrap();
    let expected = Problem::refusal(
        &pools.try_lease(Class::Control).unwrap_err(),
        HttpRefusalStatus::default(),
    );
    let res = client().get(server.url("/status")).send().await.unwrap();

    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let headers = res.headers().clone();
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["retry-after"], "1", "whole seconds, at least 1");
    for (name, value) in expected.clone().into_http(|_| ()).headers() {
        assert_eq!(
            headers[name.as_str()],
            value.to_str().unwrap(),
            "header `{name}` is the middle's"
        );
    }
    let body = res.text().await.unwrap();
    assert_eq!(body, expected.body(), "core's problem body, byte for byte");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["code"], "ADMISSION_SATURATED");
    assert_eq!(json["pool"], "control");
    assert_eq!(json["status"], 503);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a refused request never runs its handler"
    );
    assert_eq!(
        pools.pool(Class::Control).stats().in_use,
        1,
        "only the test's lease"
    );

    drop(held);
    let res = client().get(server.url("/status")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.text().await.unwrap(), "ok");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_middleware_built_with_refusal_status_429_answers_429() {
    let pools = RequestPools::new(1, 1).unwrap();
    let admission =
        AdmissionControl::new(pools.clone()).refusal_status(HttpRefusalStatus::TooManyRequests);
    let server = serve(admission, |cfg| {
        cfg.route("/items", web::post().to(HttpResponse::Created));
    });

    let held = pools.try_lease(Class::Work).unwrap();
    let expected = Problem::refusal(
        &pools.try_lease(Class::Work).unwrap_err(),
        HttpRefusalStatus::TooManyRequests,
    );
    let res = client().post(server.url("/items")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert_eq!(res.text().await.unwrap(), expected.body());

    drop(held);
    let res = client().post(server.url("/items")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    server.stop().await;
}

#[tokio::test]
async fn default_classifier_sends_reads_to_control_and_mutations_to_work() {
    let pools = RequestPools::new(1, 1).unwrap();
    let server = serve(AdmissionControl::new(pools.clone()), |cfg| {
        cfg.route("/items", web::to(HttpResponse::Ok));
    });
    let url = server.url("/items");

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
        "POST leases from work"
    );
    assert_eq!(problem(write).await["pool"], "work");
    let delete = client().delete(&url).send().await.unwrap();
    assert_eq!(
        delete.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "DELETE leases from work"
    );
    drop(work);

    let control = pools.try_lease(Class::Control).unwrap();
    let read = client().get(&url).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(problem(read).await["pool"], "control");
    let write = client().put(&url).send().await.unwrap();
    assert_eq!(write.status(), StatusCode::OK);
    drop(control);
    server.stop().await;
}

#[tokio::test]
async fn a_scope_can_fix_the_class_and_a_closure_can_choose_it() {
    let pools = RequestPools::new(1, 1).unwrap();
    // The app's closure picks by header; the `/fixed` scope's own middleware
    // (inside it) always leases control.
    let admission = AdmissionControl::classify(pools.clone(), |req| {
        if req.headers().contains_key("x-control") {
            Class::Control
        } else {
            Class::Work
        }
    });
    let server = serve(admission, {
        let pools = pools.clone();
        move |cfg| {
            cfg.route("/status", web::get().to(HttpResponse::Ok))
                .service(
                    web::scope("/fixed")
                        .wrap(AdmissionControl::class(pools.clone(), Class::Control))
                        .route("/stop", web::post().to(HttpResponse::Accepted)),
                );
        }
    });

    let work = pools.try_lease(Class::Work).unwrap();
    let plain = client().get(server.url("/status")).send().await.unwrap();
    assert_eq!(
        plain.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the closure chose work"
    );
    let tagged = client()
        .get(server.url("/status"))
        .header("x-control", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(tagged.status(), StatusCode::OK, "the closure chose control");
    drop(work);

    // `/fixed/stop` takes a work lease from the app's middleware, then a
    // control lease from the scope's: with control full, the scope refuses.
    let control = pools.try_lease(Class::Control).unwrap();
    let stop = client()
        .post(server.url("/fixed/stop"))
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        problem(stop).await["pool"],
        "control",
        "the scope fixed the class"
    );
    drop(control);
    let stop = client()
        .post(server.url("/fixed/stop"))
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), StatusCode::ACCEPTED);
    server.stop().await;
}

#[test]
fn a_rejection_with_the_apps_page_keeps_the_status_and_every_hint() {
    use actix_web::ResponseError as _;
    use actix_web::body::MessageBody as _;
    use actix_web::http::header::HeaderValue;

    let pools = RequestPools::new(1, 1).unwrap();
    let _held = pools.try_lease(Class::Control).unwrap();
    let refused = admission_actix::Rejection::from(pools.try_lease(Class::Control).unwrap_err())
        .with_body(
            &HeaderValue::from_static("text/html"),
            bytes::Bytes::from_static(b"<h1>Busy</h1>"),
        );
    let response = refused.error_response();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE.as_u16());
    let headers = response.headers();
    assert_eq!(headers.get("content-type").unwrap(), "text/html");
    assert_eq!(headers.get("retry-after").unwrap(), "1");
    assert_eq!(headers.get("x-admission-retry-after-ms").unwrap(), "1000");
    assert_eq!(
        headers.get("x-admission-refusal").unwrap(),
        "ADMISSION_SATURATED"
    );
    let body = response.into_body().try_into_bytes().unwrap();
    assert_eq!(body, "<h1>Busy</h1>");
}
