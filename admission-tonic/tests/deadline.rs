//! `grpc-timeout` over real HTTP/2: a well-formed budget reaches the
//! handler (a request extension) and the classifier (`Call::deadline`); a
//! malformed or repeated one is ignored, the call served, and counted.

mod common;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use admission_core::{Class, RequestPools};
use admission_tonic::AdmissionLayer;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request};

use common::{check, client, probe, serve};

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
    let deadline = control.seen().await.deadline.expect("a deadline");
    assert_eq!(deadline.budget(), Duration::from_secs(30));
    assert!(deadline.remaining() <= Duration::from_secs(30));

    client.check(check("")).await.expect("served");
    assert!(
        control.seen().await.deadline.is_none(),
        "no header, no deadline"
    );
    assert_eq!(layer.malformed_timeouts(), 0);
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
        let seen = control.seen().await.deadline.expect("a deadline");
        assert_eq!(seen.budget(), budget, "`grpc-timeout: {value}`");
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
            control.seen().await.deadline.is_none(),
            "`{value}` is ignored"
        );
        assert_eq!(
            layer.malformed_timeouts(),
            n as u64 + 1,
            "`{value}` is counted"
        );
    }

    let mut request = Request::new(check(""));
    let metadata = request.metadata_mut();
    metadata.append("grpc-timeout", MetadataValue::from_static("20S"));
    metadata.append("grpc-timeout", MetadataValue::from_static("30S"));
    client.check(request).await.expect("served");
    assert!(
        control.seen().await.deadline.is_none(),
        "two budgets are none"
    );
    assert_eq!(layer.malformed_timeouts(), 5);
}

#[tokio::test]
async fn the_classifier_sees_the_deadline() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, _control) = probe(&requests);
    let budgets = Arc::new(Mutex::new(Vec::new()));
    let layer = AdmissionLayer::classify(requests.clone(), {
        let budgets = Arc::clone(&budgets);
        move |call| {
            let deadline = call.deadline();
            budgets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(deadline.map(|d| d.budget()));
            // Callers in a hurry lease from *control*.
            if deadline.is_some() {
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
    assert_eq!(
        *budgets.lock().unwrap_or_else(PoisonError::into_inner),
        [Some(Duration::from_millis(1500)), None]
    );
}
