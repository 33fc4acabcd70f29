//! A streamed response holds its request lease until its last chunk, and a
//! client that goes away mid-stream releases it.

mod common;

use std::convert::Infallible;

use admission_axum::AdmissionLayer;
use admission_core::{Class, RequestPools};
use axum::body::Body;
use axum::extract::State;
use axum::{Router, routing::get};
use bytes::Bytes;
use reqwest::StatusCode;
use tokio::sync::mpsc;

use common::{PATIENCE, client, serve};

/// Hands the test the sending end of each response's body stream.
type Feeds = mpsc::UnboundedSender<mpsc::Sender<Bytes>>;

async fn stream(State(feeds): State<Feeds>) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    feeds.send(tx).expect("the test is listening");
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    }))
}

/// A server whose `/stream` bodies are fed by the test, behind a layer over
/// pools of one slot each.
async fn streaming_server() -> (
    RequestPools,
    String,
    mpsc::UnboundedReceiver<mpsc::Sender<Bytes>>,
) {
    let pools = RequestPools::new(1, 1).unwrap();
    let (feeds, fed) = mpsc::unbounded_channel();
    let router = Router::new()
        .route("/stream", get(stream))
        .layer(AdmissionLayer::new(pools.clone()))
        .with_state(feeds);
    let addr = serve(router).await;
    (pools, format!("http://{addr}/stream"), fed)
}

async fn next_feed(fed: &mut mpsc::UnboundedReceiver<mpsc::Sender<Bytes>>) -> mpsc::Sender<Bytes> {
    tokio::time::timeout(PATIENCE, fed.recv())
        .await
        .expect("the handler ran in time")
        .expect("feeds open")
}

fn in_use(pools: &RequestPools) -> usize {
    pools.pool(Class::Control).stats().in_use
}

#[tokio::test]
async fn lease_is_held_until_the_streamed_body_ends() {
    let (pools, url, mut fed) = streaming_server().await;

    let mut response = client().get(&url).send().await.expect("response head");
    assert_eq!(response.status(), StatusCode::OK);
    let feed = next_feed(&mut fed).await;
    assert_eq!(
        in_use(&pools),
        1,
        "the handler returned, but the body still holds the lease"
    );

    feed.send(Bytes::from_static(b"first")).await.unwrap();
    assert_eq!(
        response.chunk().await.unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(in_use(&pools), 1, "mid-stream, the lease is held");
    let refused = client().get(&url).send().await.unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a second request is refused while the stream is open"
    );

    feed.send(Bytes::from_static(b"last")).await.unwrap();
    assert_eq!(
        response.chunk().await.unwrap().as_deref(),
        Some(&b"last"[..])
    );
    assert_eq!(in_use(&pools), 1, "the stream has not ended yet");

    drop(feed); // the stream ends
    assert_eq!(
        response.chunk().await.unwrap(),
        None,
        "the client saw the end"
    );
    // The server released the lease when the body reported its end, before
    // it wrote the end of the chunked body the client just read.
    assert_eq!(in_use(&pools), 0, "the lease is back once the body ended");

    let again = client().get(&url).send().await.unwrap();
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "the slot serves the next request"
    );
    drop(next_feed(&mut fed).await);
    assert_eq!(again.bytes().await.unwrap(), Bytes::new());
}

#[tokio::test]
async fn client_dropping_the_body_early_releases_the_lease() {
    let (pools, url, mut fed) = streaming_server().await;

    let mut response = client().get(&url).send().await.expect("response head");
    let feed = next_feed(&mut fed).await;
    feed.send(Bytes::from_static(b"first")).await.unwrap();
    assert_eq!(
        response.chunk().await.unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(in_use(&pools), 1);

    drop(response); // the client goes away mid-stream

    // The server learns of it when writing fails; it then drops the body,
    // and with it the stream's receiver: the test learns it from this
    // channel's sends failing.
    let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
    tokio::time::timeout(PATIENCE, async {
        while feed.send(chunk.clone()).await.is_ok() {}
    })
    .await
    .expect("the server dropped the body in time");
    // The body's lease is released before its stream (field order).
    assert_eq!(in_use(&pools), 0, "dropping the body released the lease");

    let again = client().get(&url).send().await.unwrap();
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "the slot serves the next request"
    );
    drop(next_feed(&mut fed).await);
    assert_eq!(again.bytes().await.unwrap(), Bytes::new());
}
