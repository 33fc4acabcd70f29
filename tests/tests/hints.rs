//! Every retry hint a server writes reads back as itself, and the two
//! readers of gRPC's pushback (`admission-client`'s and the tonic
//! adapter's `status::pushback`) agree with each other and with gRFC A6 on any
//! trailer at all: `0`, `-1`, the largest `int32` and one past it, leading
//! zeros, garbage, and the trailer repeated.

use std::time::{Duration, SystemTime};

use admission_client::{Hint, pushback, retry_after, retry_after_ms};
use admission_core::{Pool, WorkError};
use admission_http::wire::{http_hints, pushback_ms};
use admission_http::{GrpcAnswer, GrpcRefusalStatus, HttpRefusalStatus, Problem};
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;

const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// What the tonic adapter reads from a trailers-only answer's head, as
/// the client's `Hint`.
fn tonic_reads(head: &HeaderMap) -> Hint {
    let status = tonic::Status::from_header_map(head).expect("a grpc-status");
    admission_tonic::status::pushback(status.metadata())
}

/// A trailers-only `UNAVAILABLE` head carrying `values` as its pushback.
fn grpc_head(values: &[String]) -> HeaderMap {
    let mut head = HeaderMap::new();
    head.insert("content-type", HeaderValue::from_static("application/grpc"));
    head.insert("grpc-status", HeaderValue::from_static("14"));
    for value in values {
        head.append(
            HeaderName::from_static(PUSHBACK),
            HeaderValue::from_str(value).expect("a header value"),
        );
    }
    head
}

/// gRFC A6, written out on its own: one value, `0` or a digit 1-9 and
/// more digits, within `int32`, is the wait; none is no hint; anything
/// else (a repeat included) is do not retry.
fn a6(values: &[String]) -> Hint {
    match values {
        [] => Hint::None,
        [value] => {
            let canonical = value == "0"
                || (value.starts_with(|c: char| ('1'..='9').contains(&c))
                    && value.bytes().all(|b| b.is_ascii_digit()));
            match value.parse::<i32>() {
                Ok(ms) if canonical => Hint::After(Duration::from_millis(ms as u64)),
                _ => Hint::Stop,
            }
        }
        _ => Hint::Stop,
    }
}

/// One pushback value: what a server writes, the edges, and garbage.
fn pushback_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u32>().prop_map(|ms| pushback_ms(ms).to_string()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just(i32::MAX.to_string()),
        Just((i32::MAX as i64 + 1).to_string()),
        Just(u32::MAX.to_string()),
        (0u32..1000).prop_map(|ms| format!("0{ms}")),
        any::<i32>().prop_map(|ms| ms.to_string()),
        "[ -~]{0,12}",
    ]
}

proptest! {
    #[test]
    fn both_readers_of_a_pushback_agree_with_a6(values in prop::collection::vec(pushback_value(), 0..=3)) {
        let head = grpc_head(&values);
        let client = pushback(&head);
        prop_assert_eq!(client, tonic_reads(&head), "{:?}", values);
        prop_assert_eq!(client, a6(&values), "{:?}", values);
    }

    #[test]
    fn every_hint_the_server_writes_reads_back_as_itself(ms in 1u32..) {
        // HTTP: `Retry-After` and the millisecond header, as a problem writes them.
        let mut head = HeaderMap::new();
        for (name, number) in http_hints(ms) {
            head.insert(HeaderName::from_static(name), HeaderValue::from(number));
        }
        let now = SystemTime::now();
        let fine = Duration::from_millis(u64::from(ms));
        prop_assert_eq!(retry_after_ms(&head), Hint::After(fine));
        let Hint::After(coarse) = retry_after(&head, now) else {
            return Err(TestCaseError::fail("no Retry-After"));
        };
        prop_assert!(coarse >= fine && coarse < fine + Duration::from_secs(1), "{coarse:?} for {ms} ms");

        // gRPC: the pushback, as a trailers-only refusal writes it.
        let written = pushback_ms(ms);
        let head = grpc_head(&[written.to_string()]);
        let wait = Hint::After(Duration::from_millis(u64::from(written)));
        prop_assert_eq!(pushback(&head), wait);
        prop_assert_eq!(tonic_reads(&head), wait);
        prop_assert_eq!(written, ms.min(i32::MAX as u32), "held to int32, never do-not-retry");
    }
}

/// The answers themselves, from a real refusal: the problem's response and
/// the trailers-only gRPC response read back as the refusal's hint by both
/// readers; a cancelled piece of work's answers say one second.
#[test]
fn real_answers_read_back_as_their_refusals_hint() {
    let pool = Pool::new("hints", 1).unwrap();
    let _held = pool.try_admit().unwrap();
    let refusal = pool.try_admit().unwrap_err();
    let hint = Hint::After(Duration::from_millis(u64::from(
        refusal.retry_after_millis(),
    )));

    let http = Problem::refusal(&refusal, HttpRefusalStatus::default()).into_http(|_| ());
    assert_eq!(retry_after_ms(http.headers()), hint);
    assert_eq!(
        retry_after(http.headers(), SystemTime::now()),
        Hint::After(refusal.retry_after())
    );

    for answer in [
        GrpcAnswer::refusal(&refusal, GrpcRefusalStatus::default()),
        GrpcAnswer::work_error(&WorkError::<()>::Cancelled, GrpcRefusalStatus::default()),
    ] {
        let expected = Hint::After(Duration::from_millis(answer.pushback_ms().unwrap()));
        let head = answer.into_trailers_only().into_parts().0.headers;
        assert_eq!(pushback(&head), expected, "the client");
        assert_eq!(tonic_reads(&head), expected, "the tonic adapter");
    }
    assert_eq!(
        hint,
        Hint::After(Duration::from_secs(1)),
        "no work seen: 1 s"
    );
}
