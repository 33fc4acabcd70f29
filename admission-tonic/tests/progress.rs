//! The progress bound of a leased response, driven by hand with real
//! timers: a reader that waits on a slow producer keeps the lease; a reader
//! that stops asking loses it at the bound without another poll; a body
//! sent in one frame never starts a watchdog.

use std::time::Duration;

use admission_core::{Class, RequestPools};
use admission_tonic::body::{LeasedBody, ProgressTimeout, Stalled};
use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::mpsc;

type Frames = mpsc::UnboundedSender<Result<Frame<Bytes>, std::convert::Infallible>>;

/// A body fed by the test, leased from *work*, with a 100 ms bound.
fn fed(
    pools: &RequestPools,
) -> (
    Frames,
    impl http_body::Body<Data = Bytes, Error = admission_tonic::body::BoxError> + Unpin,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let body = LeasedBody::new(
        StreamBody::new(stream),
        pools.try_lease(Class::Work).unwrap(),
    )
    .progress_timeout(ProgressTimeout::new(Duration::from_millis(100)).unwrap());
    (tx, body)
}

fn part() -> Result<Frame<Bytes>, std::convert::Infallible> {
    Ok(Frame::data(Bytes::from_static(b"part\n")))
}

#[tokio::test]
async fn a_reader_waiting_on_a_slow_producer_keeps_its_lease() {
    let pools = RequestPools::new(1, 1).unwrap();
    let in_use = || pools.pool(Class::Work).stats().in_use;
    let (tx, mut body) = fed(&pools);
    tx.send(part()).unwrap();
    body.frame().await.unwrap().unwrap();

    // The reader asks at once; the producer takes four bounds to answer.
    let producer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        tx.send(part()).unwrap();
        tx
    });
    body.frame().await.unwrap().unwrap();
    assert_eq!(in_use(), 1, "waiting on the producer is not a stall");

    // Now the reader stops asking: the lease goes at the bound, by itself.
    let _tx = producer.await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(in_use(), 0, "released without another poll");
    let err = body.frame().await.unwrap().unwrap_err();
    assert!(err.is::<Stalled>(), "{err}");
    assert!(body.frame().await.is_none(), "then the body has ended");
}
