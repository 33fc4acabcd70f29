//! Middleware stacked the ways apps stack it, over real HTTP, on a one-slot
//! class: `App::wrap` plus `scope.wrap` of the same pools holds one slot per
//! request; middleware of other pools still takes its own.

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
