//! Middleware stacked the ways apps stack it, over real HTTP, on a one-slot
//! class: `App::wrap` plus `scope.wrap` of the same pools holds one slot per
//! request; middleware of other pools still takes its own; a scope that
//! costs more tops the request's lease up to its cost.

mod common;

use actix_web::web;
use admission_actix::AdmissionControl;
use admission_core::{Class, RequestPools};
use reqwest::StatusCode;

use common::{Gate, client, data, eventually, gate, serve, within};

async fn held(gate: web::Data<Gate>) -> &'static str {
    gate.pass().await;
    "done"
}

/// A POST (class *work*) to `/scoped/held`, served with `outer` on the app
/// and `inner` on the scope; while the handler is held, reports `pools`'
/// work slots in use, then lets it finish.
async fn in_use_while_held(
    outer: AdmissionControl,
    inner: AdmissionControl,
    pools: &RequestPools,
) -> (StatusCode, usize) {
    let (gate, mut control) = gate();
    let server = serve(outer, {
        let gate = data(gate);
        move |cfg| {
            cfg.app_data(gate.clone()).service(
                web::scope("/scoped")
                    .wrap(inner.clone())
                    .route("/held", web::post().to(held)),
            );
        }
    });
    let url = server.url("/scoped/held");
    let request = tokio::spawn(async move { client().post(url).send().await.unwrap().status() });
    control.arrivals(1).await;
    let in_use = pools.pool(Class::Work).stats().in_use;
    control.open();
    let status = within("the held response", request).await.unwrap();
    let work = pools.pool(Class::Work).clone();
    eventually("the lease is back", || work.stats().in_use == 0).await;
    server.stop().await;
    (status, in_use)
}

#[tokio::test]
async fn app_wrap_and_scope_wrap_of_the_same_pools_hold_one_slot() {
    let pools = RequestPools::new(1, 1).unwrap();
    let (status, in_use) = in_use_while_held(
        AdmissionControl::new(pools.clone()),
        AdmissionControl::class(pools.clone(), Class::Work),
        &pools,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an idle server must not refuse itself"
    );
    assert_eq!(in_use, 1, "one request, one slot of its class");
    assert_eq!(pools.pool(Class::Work).stats().refused, 0);
}

/// A scope declared to cost 4 under `App::wrap` of the same pools: the
/// app's middleware takes one slot before the scope is known, the scope's
/// tops the lease up to four, and all four come back with the response.
#[tokio::test]
async fn a_costly_scope_under_the_apps_middleware_holds_its_cost_once() {
    let pools = RequestPools::new(4, 1).unwrap();
    let (status, in_use) = in_use_while_held(
        AdmissionControl::new(pools.clone()),
        AdmissionControl::class(pools.clone(), Class::Work)
            .cost(std::num::NonZeroU8::new(4).unwrap())
            .unwrap(),
        &pools,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(in_use, 4, "the scope's cost, taken once");
    assert_eq!(pools.pool(Class::Work).stats().refused, 0);
}

#[tokio::test]
async fn middleware_of_different_pools_each_take_their_own_slot() {
    let outer = RequestPools::new(1, 1).unwrap();
    let inner = RequestPools::new(1, 1).unwrap();
    let (status, in_use) = in_use_while_held(
        AdmissionControl::new(outer.clone()),
        AdmissionControl::new(inner.clone()),
        &outer,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(in_use, 1);
    assert_eq!(
        inner.pool(Class::Work).stats().admitted,
        1,
        "the other pools' middleware admitted on its own slots"
    );
}

#[tokio::test]
async fn a_request_the_apps_middleware_lets_through_passes_a_scopes() {
    // The app's middleware bypasses /scoped/health; the scope's (other
    // pools) has no bypass of its own. Both are full.
    let outer = RequestPools::new(1, 1).unwrap();
    let inner = RequestPools::builder()
        .name("inner")
        .work(1)
        .control(1)
        .build()
        .unwrap();
    let _outer = outer.try_lease(Class::Control).unwrap();
    let _inner = inner.try_lease(Class::Control).unwrap();
    let scope = AdmissionControl::new(inner.clone());
    let server = serve(
        AdmissionControl::new(outer.clone()).bypass(|req| req.path() == "/scoped/health"),
        move |cfg| {
            cfg.service(
                web::scope("/scoped")
                    .wrap(scope.clone())
                    .route("/health", web::get().to(|| async { "ok" }))
                    .route("/status", web::get().to(|| async { "ok" })),
            );
        },
    );
    let health = client()
        .get(server.url("/scoped/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        health.status(),
        StatusCode::OK,
        "health never waits on load"
    );
    assert_eq!(
        inner.pool(Class::Control).stats().admitted,
        1,
        "only the test's own lease"
    );
    let other = client()
        .get(server.url("/scoped/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the bypass is for the route it names"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_queued_refusal_carries_the_apps_page() {
    let pools = RequestPools::new(1, 1).unwrap();
    let held = pools.clone();
    // Held by another thread (a lease of the server's task would be
    // shared, not waited for).
    let _held = std::thread::spawn(move || held.try_lease(Class::Control).unwrap())
        .join()
        .unwrap();
    let admission = AdmissionControl::new(pools.clone())
        .queue()
        .refusal_body(|_refusal, _req| {
            Some((
                actix_web::http::header::HeaderValue::from_static("text/html"),
                bytes::Bytes::from_static(b"<h1>Busy</h1>"),
            ))
        });
    let server = serve(admission, |cfg| {
        cfg.route("/page", web::get().to(|| async { "ok" }));
    });
    let refused = within(
        "a queued request is refused at the queue's limit",
        client().get(server.url("/page")).send(),
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["content-type"], "text/html");
    assert_eq!(
        refused.headers()["x-admission-refusal"],
        "ADMISSION_WAIT_TIMEOUT"
    );
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(refused.text().await.unwrap(), "<h1>Busy</h1>");
    server.stop().await;
}
