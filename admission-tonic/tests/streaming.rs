//! A server-streaming call holds its lease until its last message and
//! trailers, and a client that cancels the call releases it; over real
//! HTTP/2 with tonic's own client.

mod common;

use admission_core::{Class, RequestPools};
use admission_tonic::AdmissionLayer;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

use common::{check, client, eventually, probe, serve, within};

#[tokio::test]
async fn a_watch_holds_its_lease_until_its_last_message() {
    let requests = RequestPools::new(1, 1).unwrap();
    let control_pool = || requests.pool(Class::Control).stats();
    let (probe, mut control) = probe(&requests);
    let addr = serve(AdmissionLayer::new(requests.clone()), probe).await;
    let mut client = client(addr).await;

    let mut stream = within("the stream's head", client.watch(check("")))
        .await
        .expect("admitted")
        .into_inner();
    let feed = control.feed().await;
    feed.statuses.send(ServingStatus::Serving).unwrap();
    let first = within("the first message", stream.message()).await.unwrap();
    assert_eq!(first.map(|m| m.status), Some(ServingStatus::Serving as i32));
    assert_eq!(control_pool().in_use, 1, "the open stream holds the lease");
    let refused = client.check(check("")).await.unwrap_err();
    assert_eq!(
        refused.code(),
        Code::Unavailable,
        "the one slot is the stream's"
    );

    feed.statuses.send(ServingStatus::NotServing).unwrap();
    let last = within("the last message", stream.message()).await.unwrap();
    assert_eq!(
        last.map(|m| m.status),
        Some(ServingStatus::NotServing as i32)
    );
    assert_eq!(control_pool().in_use, 1, "the stream has not ended yet");

    drop(feed.statuses); // the stream ends
    let end = within("the trailers", stream.message()).await.unwrap();
    assert!(end.is_none(), "the client saw the end, status OK");
    // The lease goes when the body yields its trailers, before the server
    // writes them: by the time the client has read them it is back.
    let stats = control_pool();
    assert_eq!(stats.in_use, 0, "the lease is back once the stream ended");
    assert_eq!(stats.admitted, stats.released, "released exactly once");
}

#[tokio::test]
async fn a_client_cancelling_its_watch_releases_the_lease() {
    let requests = RequestPools::new(1, 1).unwrap();
    let control_pool = || requests.pool(Class::Control).stats();
    let (probe, mut control) = probe(&requests);
    let addr = serve(AdmissionLayer::new(requests.clone()), probe).await;
    let mut client = client(addr).await;

    let mut stream = within("the stream's head", client.watch(check("")))
        .await
        .expect("admitted")
        .into_inner();
    let feed = control.feed().await;
    feed.statuses.send(ServingStatus::Serving).unwrap();
    within("the first message", stream.message())
        .await
        .unwrap()
        .expect("a message");
    assert_eq!(control_pool().in_use, 1);

    drop(stream); // RST_STREAM(CANCEL); the connection stays open
    within("the server to drop the cancelled stream", feed.dropped)
        .await
        .expect("the stream says when it is dropped");
    eventually("the cancelled stream's lease to come back", || {
        control_pool().in_use == 0
    })
    .await;
    let stats = control_pool();
    assert_eq!(stats.admitted, stats.released, "released exactly once");
    assert!(
        client.check(check("")).await.is_ok(),
        "the slot serves the next call on the same connection"
    );
    drop(feed.statuses);
}
