//! Layers stacked the ways tonic servers stack them, over real HTTP/2: one
//! around the whole server and one around a service (named by tonic's `named_layer`), of
//! the same pools, hold one lease per call (topped up to a costlier
//! service's cost); pure work in a handler runs under the call's lease.

mod common;

use admission_core::stats::PoolStats;
use admission_core::{Class, RequestPools};
use admission_tonic::AdmissionLayer;
use tonic::service::LayerExt as _;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::pb::health_server::HealthServer;

use common::{Seen, bind, check, client, eventually, probe, within};

/// One `Health/Check` call through a server-wide layer of `requests` and
/// `service_layer` around the service, held in its handler: what the
/// handler saw and the control class's stats while it was held. Returns
/// once the call is answered and every slot is back.
async fn held_call_through_both(
    requests: &RequestPools,
    service_layer: AdmissionLayer,
) -> (Seen, PoolStats) {
    let (probe, mut control) = probe(requests);
    let (listener, addr) = bind().await;
    let server = Server::builder()
        .layer(AdmissionLayer::new(requests.clone()).unleased([]))
        .add_service(service_layer.named_layer(HealthServer::new(probe)))
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(server);

    let mut client = client(addr).await;
    let call = tokio::spawn(async move { client.check(check("held")).await });
    let seen = control.seen().await;
    let stats = requests.pool(Class::Control).stats();
    control.open(1);
    within("the held call", call)
        .await
        .expect("the call task")
        .expect("an idle server must not refuse itself");
    eventually("every slot is back", || {
        requests.pool(Class::Control).stats().in_use == 0
    })
    .await;
    (seen, stats)
}

#[tokio::test]
async fn a_server_layer_and_a_service_layer_of_the_same_pools_hold_one_slot() {
    let requests = RequestPools::new(1, 1).unwrap();
    let service_layer = AdmissionLayer::class(requests.clone(), Class::Control).unleased([]);
    let (seen, stats) = held_call_through_both(&requests, service_layer).await;
    assert_eq!(
        seen.lease,
        Some(Class::Control),
        "the handler runs under the lease"
    );
    assert_eq!(
        (stats.in_use, stats.refused),
        (1, 0),
        "one call, one slot, however many layers"
    );
}

/// A service declared to cost 4 under a server-wide layer of the same
/// pools: the server's layer takes one slot before the service is known,
/// the service's tops the call's lease up to four, all back at the end.
#[tokio::test]
async fn a_costly_service_under_a_server_layer_holds_its_cost_once() {
    let requests = RequestPools::new(1, 4).unwrap();
    let service_layer = AdmissionLayer::class(requests.clone(), Class::Control)
        .unleased([])
        .cost(std::num::NonZeroU8::new(4).unwrap())
        .expect("a class of four holds a cost of four");
    let (_, stats) = held_call_through_both(&requests, service_layer).await;
    assert_eq!(
        (stats.in_use, stats.refused),
        (4, 0),
        "one call of cost 4: one slot and three on top"
    );
}

#[tokio::test]
async fn pure_work_in_a_handler_runs_under_the_calls_lease() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, mut control) = probe(&requests);
    let addr = common::serve(AdmissionLayer::new(requests.clone()), probe).await;
    let mut client = client(addr).await;

    // The call holds the only *control* slot; its pure work takes no other.
    client
        .check(check("pure"))
        .await
        .expect("pure work runs under the inherited lease");
    assert_eq!(control.seen().await.lease, Some(Class::Control));
    let stats = requests.pool(Class::Control).stats();
    assert_eq!(
        (stats.admitted, stats.refused),
        (1, 0),
        "one slot for the call and its work"
    );
}
