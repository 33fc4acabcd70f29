//! `grpc-timeout` over real HTTP/2: a well-formed budget reaches the
//! handler (its caller's deadline, `Caller::current`) and the classifier
//! (`Call::remaining`); a malformed one is ignored, the call served, and
//! counted; a repeated one is counted and its shortest value holds (an
//! expired deadline however the header repeats: `refusal.rs`).

mod common;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use admission_core::{Class, RequestPools};
use admission_tonic::AdmissionLayer;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request};

use common::{check, client, probe, serve};

/// `left` is what remains of `budget` a moment after the layer read it.
fn assert_left_of(left: Option<Duration>, budget: Duration, what: &str) {
    let left = left.unwrap_or_else(|| panic!("a deadline for {what}"));
    assert!(
        left <= budget && left + Duration::from_secs(5) > budget,
        "{left:?} left of {budget:?} for {what}"
    );
}

#[tokio::test]
async fn a_tonic_clients_timeout_reaches_the_handler_as_a_deadline() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, mut control) = probe(&requests);
    let layer = AdmissionLayer::new(requests.clone());
    let addr = serve(layer.clone(), probe).await;
    let mut client = client(addr).await;

    let mut request = Request::new(check(""));
    request.set_timeout(Duration::from_secs(30)); // tonic writes `30000000u`
    client.check(request).await.expect("served");
    assert_left_of(
        control.seen().await.remaining,
        Duration::from_secs(30),
        "a 30 s timeout",
    );

    client.check(check("")).await.expect("served");
    assert!(
        control.seen().await.remaining.is_none(),
        "no header, no deadline"
    );
    assert_eq!(layer.malformed_headers(), 0);
}

#[tokio::test]
async fn every_unit_reaches_the_handler() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, mut control) = probe(&requests);
    let addr = serve(AdmissionLayer::new(requests.clone()), probe).await;
    let mut client = client(addr).await;

    // `n` is covered by the parser's tests: 8 digits of nanoseconds are at
    // most 0.1 s, which tonic itself would enforce against a busy test.
    let cases = [
        ("2H", Duration::from_secs(2 * 3600)),
        ("3M", Duration::from_secs(3 * 60)),
        ("40S", Duration::from_secs(40)),
        ("45000m", Duration::from_secs(45)),
        ("50000000u", Duration::from_secs(50)),
    ];
    for (value, budget) in cases {
        let mut request = Request::new(check(""));
        request
            .metadata_mut()
            .insert("grpc-timeout", MetadataValue::from_static(value));
        client.check(request).await.expect("served");
        assert_left_of(
            control.seen().await.remaining,
            budget,
            &format!("`grpc-timeout: {value}`"),
        );
    }
}

#[tokio::test]
async fn malformed_and_repeated_timeouts_are_ignored_and_counted() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, mut control) = probe(&requests);
    let layer = AdmissionLayer::new(requests.clone());
    let addr = serve(layer.clone(), probe).await;
    let mut client = client(addr).await;

    for (n, value) in ["5s", "-1S", "123456789m", "1.5S"].into_iter().enumerate() {
        let mut request = Request::new(check(""));
        request
            .metadata_mut()
            .insert("grpc-timeout", MetadataValue::from_static(value));
        client
            .check(request)
            .await
            .expect("a malformed timeout never fails a call");
        assert!(
            control.seen().await.remaining.is_none(),
            "`{value}` is ignored"
        );
        assert_eq!(
            layer.malformed_headers(),
            n as u64 + 1,
            "`{value}` is counted"
        );
    }

    let mut request = Request::new(check(""));
    let metadata = request.metadata_mut();
    metadata.append("grpc-timeout", MetadataValue::from_static("20S"));
    metadata.append("grpc-timeout", MetadataValue::from_static("30S"));
    client.check(request).await.expect("served");
    assert_left_of(
        control.seen().await.remaining,
        Duration::from_secs(20),
        "two budgets: the shorter",
    );
    assert_eq!(layer.malformed_headers(), 5, "a repeat is counted");
}

#[tokio::test]
async fn the_classifier_sees_the_deadline() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, _control) = probe(&requests);
    let budgets = Arc::new(Mutex::new(Vec::new()));
    let layer = AdmissionLayer::classify(requests.clone(), {
        let budgets = Arc::clone(&budgets);
        move |call| {
            let left = call.remaining();
            budgets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(left);
            // Callers in a hurry lease from *control*.
            if left.is_some() {
                Class::Control
            } else {
                Class::Work
            }
        }
    });
    let addr = serve(layer, probe).await;
    let mut client = client(addr).await;

    let _control_full = requests.try_lease(Class::Control).unwrap();
    let mut hurried = Request::new(check(""));
    hurried.set_timeout(Duration::from_millis(1500));
    let refused = client.check(hurried).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(refused.message().contains("pool `control`"));
    client
        .check(check(""))
        .await
        .expect("no deadline: *work*, which is free");
    let seen = budgets
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_left_of(seen[0], Duration::from_millis(1500), "a 1.5 s timeout");
    assert_eq!(seen[1], None, "no timeout, no deadline");
}
