//! `LeasedBody` driven by hand, frame by frame: it holds the call's lease
//! until its last frame and says so.

use admission_core::{Class, RequestPools};
use admission_tonic::body::LeasedBody;
use http_body::Body as _;
use http_body_util::BodyExt;

#[tokio::test]
async fn a_leased_body_lets_go_of_its_lease_with_its_last_frame() {
    let pools = RequestPools::new(1, 1).unwrap();
    let mut body = LeasedBody::new(
        String::from("message"),
        pools.try_lease(Class::Work).unwrap(),
    );
    assert!(body.holds_lease());
    assert!(!body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(7), "the inner body's size");
    assert_eq!(pools.pool(Class::Work).stats().in_use, 1);

    let frame = body.frame().await.expect("a frame").expect("no error");
    assert_eq!(frame.into_data().unwrap(), "message");
    assert!(!body.holds_lease(), "the last frame ended the call's hold");
    assert!(body.is_end_stream());
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        0,
        "the slot is back before the body is dropped"
    );
    assert!(body.frame().await.is_none());
}
