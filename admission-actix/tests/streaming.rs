//! A request's lease lives as long as its response body: until the last
//! chunk of a stream, or until the client drops the body.

mod common;

use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use actix_web::{HttpResponse, web};
use admission_actix::AdmissionControl;
use admission_core::{Class, Lease, RequestPools};
use bytes::Bytes;
use futures_util::Stream;
use reqwest::StatusCode;
use tokio::sync::{mpsc, oneshot};

use common::{client, data, eventually, serve, serve_with, within};

/// A body the test feeds chunk by chunk; it says when actix-web drops it.
struct Fed {
    chunks: mpsc::UnboundedReceiver<Bytes>,
    dropped: Option<oneshot::Sender<()>>,
}

impl Stream for Fed {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.chunks.poll_recv(cx).map(|chunk| chunk.map(Ok))
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        if let Some(dropped) = self.dropped.take() {
            let _ = dropped.send(());
        }
    }
}

/// The test's side of one streamed response.
struct Feed {
    chunks: mpsc::UnboundedSender<Bytes>,
    dropped: oneshot::Receiver<()>,
}

/// A `/stream` route whose one response body the test feeds.
fn streamed(pools: &RequestPools, allow_half_closed: bool) -> (common::Server, Feed) {
    let (chunks_tx, chunks_rx) = mpsc::unbounded_channel();
    let (dropped_tx, dropped_rx) = oneshot::channel();
    let body = data(Mutex::new(Some(Fed {
        chunks: chunks_rx,
        dropped: Some(dropped_tx),
    })));
    let server = serve_with(
        AdmissionControl::new(pools.clone()),
        move |cfg| {
            cfg.app_data(body.clone()).route(
                "/stream",
                web::get().to(|body: web::Data<Mutex<Option<Fed>>>| async move {
                    let fed = body.lock().unwrap().take().expect("one request per test");
                    HttpResponse::Ok().streaming(fed)
                }),
            );
        },
        allow_half_closed,
    );
    let feed = Feed {
        chunks: chunks_tx,
        dropped: dropped_rx,
    };
    (server, feed)
}

#[tokio::test]
async fn lease_is_held_until_the_streamed_body_sends_its_last_chunk() {
    let pools = RequestPools::new(1, 1).unwrap();
    let (server, feed) = streamed(&pools, true);
    let control = || pools.pool(Class::Control).stats();

    feed.chunks.send(Bytes::from_static(b"first\n")).unwrap();
    let mut res = client().get(server.url("/stream")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let first = within("the first chunk", res.chunk()).await.unwrap();
    assert_eq!(first.as_deref(), Some(&b"first\n"[..]));
    assert_eq!(
        control().in_use,
        1,
        "the open body holds the request's lease"
    );

    feed.chunks.send(Bytes::from_static(b"second\n")).unwrap();
    let second = within("the second chunk", res.chunk()).await.unwrap();
    assert_eq!(second.as_deref(), Some(&b"second\n"[..]));
    assert_eq!(control().in_use, 1, "still streaming, still held");
    let refused = client().get(server.url("/stream")).send().await.unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the slot is the stream's"
    );

    // End the stream: the body's last poll releases the lease before the
    // terminating chunk is written, so the client sees the end after it.
    drop(feed.chunks);
    let end = within("the end of the body", res.chunk()).await.unwrap();
    assert_eq!(end, None);
    let stats = control();
    assert_eq!(
        stats.in_use, 0,
        "the lease is back once the last chunk is sent"
    );
    assert_eq!(
        stats.admitted, stats.released,
        "every lease came back exactly once"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_drops_the_body_early_releases_the_lease() {
    let pools = RequestPools::new(1, 1).unwrap();
    // With half-closed connections refused, actix-web notices the client's
    // close at once and drops the pending response body.
    let (server, feed) = streamed(&pools, false);

    feed.chunks.send(Bytes::from_static(b"first\n")).unwrap();
    let mut res = client().get(server.url("/stream")).send().await.unwrap();
    let first = within("the first chunk", res.chunk()).await.unwrap();
    assert_eq!(first.as_deref(), Some(&b"first\n"[..]));
    assert_eq!(pools.pool(Class::Control).stats().in_use, 1);

    drop(res);
    within("actix-web to drop the body", feed.dropped)
        .await
        .expect("the body says when it is dropped");
    // The lease is dropped right after the body, on the worker's thread.
    eventually("the dropped body's lease to return", || {
        pools.pool(Class::Control).stats().in_use == 0
    })
    .await;
    let stats = pools.pool(Class::Control).stats();
    assert_eq!(stats.admitted, stats.released, "released exactly once");
    server.stop().await;
}

#[tokio::test]
async fn by_default_a_gone_client_releases_the_lease_at_the_next_write() {
    let pools = RequestPools::new(1, 1).unwrap();
    // actix-web's default allows half-closed connections: a closed client
    // is noticed when writing to it fails, and the body is dropped then.
    let (server, mut feed) = streamed(&pools, true);

    feed.chunks.send(Bytes::from_static(b"first\n")).unwrap();
    let mut res = client().get(server.url("/stream")).send().await.unwrap();
    let first = within("the first chunk", res.chunk()).await.unwrap();
    assert_eq!(first.as_deref(), Some(&b"first\n"[..]));

    drop(res);
    within("a write to fail and actix-web to drop the body", async {
        // The first writes may still land in the kernel's buffers; keep
        // writing until one fails.
        loop {
            let _ = feed.chunks.send(Bytes::from_static(&[b'.'; 16 * 1024]));
            tokio::select! {
                dropped = &mut feed.dropped => break dropped.expect("signalled"),
                () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
            }
        }
    })
    .await;
    eventually("the dropped body's lease to return", || {
        pools.pool(Class::Control).stats().in_use == 0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn pure_work_in_a_handler_runs_under_the_inherited_lease() {
    // One control slot: a fresh lease for the pure work would be refused.
    let pools = RequestPools::new(1, 1).unwrap();
    let server = serve(AdmissionControl::new(pools.clone()), {
        let pools = data(pools.clone());
        move |cfg| {
            cfg.app_data(pools.clone()).route(
                "/pure",
                web::get().to(|pools: web::Data<RequestPools>| async move {
                    let inherited = Lease::current().map(|lease| lease.class());
                    let out = pools
                        .execute_pure(Class::Control, || Ok::<_, std::fmt::Error>(21 * 2))
                        .await;
                    match (inherited, out) {
                        (Some(Class::Control), Ok(n)) => HttpResponse::Ok().body(n.to_string()),
                        (inherited, out) => HttpResponse::InternalServerError()
                            .body(format!("{inherited:?} {out:?}")),
                    }
                }),
            );
        }
    });

    let res = client().get(server.url("/pure")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.text().await.unwrap(), "42", "no second slot was needed");
    let stats = pools.pool(Class::Control).stats();
    assert_eq!(
        stats.admitted, 1,
        "one lease for the request and its pure work"
    );
    assert_eq!(stats.in_use, 0);
    server.stop().await;
}
