//! Per-request cost of the actix-web middleware beside the bare app, in one
//! run: `cargo bench -p admission-actix --bench middleware`.
//!
//! * `bare`: an app with a trivial handler and no middleware;
//! * `admission`: the same app wrapped in `AdmissionControl` (a lease
//!   taken, the body wrapped, the lease released when the body ends);
//! * `refused`: a request the middleware refuses (503 + problem body).

use std::hint::black_box;
use std::time::Duration;

use actix_web::{App, HttpResponse, test, web};
use admission_actix::AdmissionControl;
use admission_core::{Class, RequestPools};
use criterion::{Criterion, criterion_group, criterion_main};

async fn hello() -> HttpResponse {
    HttpResponse::Ok().body("hello")
}

fn per_request(c: &mut Criterion) {
    let system = actix_rt::System::new();
    let mut group = c.benchmark_group("actix_per_request");
    group.measurement_time(Duration::from_secs(3));

    let bare = system.block_on(test::init_service(
        App::new().route("/", web::get().to(hello)),
    ));
    group.bench_function("bare", |b| {
        b.iter(|| {
            system.block_on(async {
                let response =
                    test::call_service(&bare, test::TestRequest::get().uri("/").to_request()).await;
                black_box(test::read_body(response).await)
            })
        });
    });

    let requests = RequestPools::new(64, 64).unwrap();
    let admitted = system.block_on(test::init_service(
        App::new()
            .wrap(AdmissionControl::new(requests.clone()))
            .route("/", web::get().to(hello)),
    ));
    group.bench_function("admission", |b| {
        b.iter(|| {
            system.block_on(async {
                let response =
                    test::call_service(&admitted, test::TestRequest::get().uri("/").to_request())
                        .await;
                black_box(test::read_body(response).await)
            })
        });
    });

    let full = RequestPools::new(1, 1).unwrap();
    let _held = full.try_lease(Class::Control).unwrap();
    let refusing = system.block_on(test::init_service(
        App::new()
            .wrap(AdmissionControl::new(full.clone()))
            .route("/", web::get().to(hello)),
    ));
    group.bench_function("refused", |b| {
        b.iter(|| {
            system.block_on(async {
                let response =
                    test::call_service(&refusing, test::TestRequest::get().uri("/").to_request())
                        .await;
                assert_eq!(response.status(), 503);
                black_box(test::read_body(response).await)
            })
        });
    });
    group.finish();
}

criterion_group!(benches, per_request);
criterion_main!(benches);
