//! `LeasedBody` and `ResponseFuture` driven by hand, chunk by chunk: when
//! the body lets go of its lease, what it says about its size, and what the
//! future's `Debug` shows in each state (never the response).

use std::future::poll_fn;
use std::pin::Pin;

use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{Service, Transform};
use actix_web::test::{TestRequest, ok_service};
use admission_actix::AdmissionControl;
use admission_actix::body::LeasedBody;
use admission_core::{Class, RequestPools};

fn in_use(pools: &RequestPools) -> usize {
    pools.pool(Class::Work).stats().in_use
}

async fn next<B: MessageBody + Unpin>(body: &mut B) -> Option<Result<bytes::Bytes, B::Error>> {
    poll_fn(|cx| Pin::new(&mut *body).poll_next(cx)).await
}

#[actix_web::test]
async fn a_leased_body_lets_go_of_its_lease_after_its_last_chunk() {
    let pools = RequestPools::new(1, 1).unwrap();
    let mut body = LeasedBody::new("ok", pools.try_lease(Class::Work).unwrap());
    assert!(body.holds_lease());
    assert_eq!(body.size(), BodySize::Sized(2));

    let chunk = next(&mut body).await.expect("a chunk").expect("no error");
    assert_eq!(chunk, "ok");
    assert!(next(&mut body).await.is_none());
    assert!(!body.holds_lease(), "the end of the body ended the hold");
    assert_eq!(
        in_use(&pools),
        0,
        "the slot is back before the body is dropped"
    );
}

#[actix_web::test]
async fn a_refusals_body_holds_no_lease_and_reports_its_exact_size() {
    let pools = RequestPools::new(1, 1).unwrap();
    let _held = pools.try_lease(Class::Work).unwrap();
    let middleware = AdmissionControl::class(pools.clone(), Class::Work)
        .new_transform(ok_service())
        .await
        .unwrap();
    let response = middleware
        .call(TestRequest::default().to_srv_request())
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let mut body = response.into_body();
    assert!(!body.holds_lease());
    let BodySize::Sized(size) = body.size() else {
        panic!("an exact size")
    };
    let chunk = next(&mut body).await.unwrap().unwrap();
    assert_eq!(chunk.len() as u64, size);
    assert!(chunk.starts_with(b"{\"code\":\"ADMISSION_SATURATED\""));
    assert!(next(&mut body).await.is_none(), "one chunk, then the end");
}

#[actix_web::test]
async fn the_response_futures_debug_names_its_state_and_never_the_response() {
    let pools = RequestPools::new(1, 1).unwrap();
    let control = AdmissionControl::class(pools.clone(), Class::Work);
    let middleware = control.clone().new_transform(ok_service()).await.unwrap();
    let admitted = middleware.call(TestRequest::default().to_srv_request());
    assert_eq!(
        format!("{admitted:?}"),
        r#"ResponseFuture { state: "Admitted" }"#
    );

    // The slot is the admitted request's: a queued request waits.
    let queued = control.queue().new_transform(ok_service()).await.unwrap();
    let waiting = queued.call(TestRequest::default().to_srv_request());
    assert_eq!(
        format!("{waiting:?}"),
        r#"ResponseFuture { state: "Queued" }"#
    );
    drop(waiting);

    let response = admitted.await.unwrap();
    assert_eq!(response.status(), 200);
    drop(response);
    assert_eq!(in_use(&pools), 0);

    let _held = pools.try_lease(Class::Work).unwrap();
    let refused = middleware.call(TestRequest::default().to_srv_request());
    assert_eq!(
        format!("{refused:?}"),
        r#"ResponseFuture { state: "Refused" }"#
    );
}
