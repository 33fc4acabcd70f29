//! The answers the middle describes, from refusals real pools make: the
//! problem document and its `429` option, a budget refusal's body, the
//! gRPC form of the same facts, and a reentrant wait answered as the
//! programming error it is, never as overload.

use std::time::Duration;

use admission_core::{Admission, Caller, Class, Code, Criticality, Pool, RequestPools, WorkError};
use admission_http::{GrpcAnswer, GrpcRefusalStatus, HttpRefusalStatus, Problem, Protocol};

/// The 429 choice lives in the adapters; the middle's part is the answer
/// it describes: a refusal answered with `TooManyRequests` says 429 in its
/// status and its body, and keeps `Retry-After`.
#[test]
fn the_429_option_shows_in_the_problem_answer() {
    let requests = RequestPools::builder().work(1).build().unwrap();
    let _held = requests.try_lease(Class::Work).unwrap();
    let refusal = requests.try_lease(Class::Work).unwrap_err();
    let problem = Problem::refusal(&refusal, HttpRefusalStatus::TooManyRequests);
    assert_eq!(problem.status(), 429);
    assert!(
        problem.body().contains(r#""status":429"#),
        "{}",
        problem.body()
    );
    assert!(problem.body().contains(r#""pool":"work""#));
    assert_eq!(problem.retry_after(), Some(refusal.retry_after_secs()));
    let default = Problem::refusal(&refusal, HttpRefusalStatus::default());
    assert_eq!(default.status(), 503, "503 stays the default");
}

#[tokio::test(flavor = "current_thread")]
async fn a_budget_refusal_names_its_code_and_the_callers_criticality() {
    let pool = Pool::new("answers-budget", 1).unwrap();
    let short = Caller::new(Criticality::Critical)
        .with_budget(Duration::ZERO)
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast))
        .await;
    let Err(WorkError::Refused(refusal)) = short else {
        panic!("a spent budget is refused: {short:?}");
    };
    let problem = Problem::refusal(&refusal, HttpRefusalStatus::default());
    assert!(
        problem
            .body()
            .contains(r#""code":"ADMISSION_BUDGET_TOO_SHORT""#)
    );
    assert!(problem.body().contains(r#""criticality":"critical""#));
    let grpc = GrpcAnswer::refusal(&refusal, GrpcRefusalStatus::default());
    assert_eq!(grpc.code(), 4, "DEADLINE_EXCEEDED");
}

/// A task that holds the only slot and waits for another would wait
/// forever: the pool refuses it at once with `ADMISSION_REENTRANT`, and
/// the answer is a `500` (gRPC `INTERNAL`) with its code and no retry
/// hint: a balancer must not retry a programming error on another replica,
/// nor a client back off from it as from load.
#[tokio::test(flavor = "current_thread")]
async fn a_reentrant_wait_is_a_programming_error_not_overload() {
    let pool = Pool::new("answers-reentrant", 1).unwrap();
    let _held = pool.admit().await.unwrap();
    let refusal = pool.admit().await.unwrap_err();
    assert_eq!(refusal.code(), Code::Reentrant);

    for status in [
        HttpRefusalStatus::ServiceUnavailable,
        HttpRefusalStatus::TooManyRequests,
    ] {
        let problem = Problem::refusal(&refusal, status);
        assert_eq!(problem.status(), 500);
        assert_eq!(problem.retry_after(), None);
        assert!(
            !problem
                .clone()
                .into_http(|_| ())
                .headers()
                .contains_key("retry-after"),
            "no Retry-After"
        );
        assert!(problem.body().contains(r#""code":"ADMISSION_REENTRANT""#));
        assert!(!problem.body().contains("retry"), "{}", problem.body());
        let response = status.refusal(&refusal);
        assert_eq!(response.status(), 500);
        assert!(response.headers().get("retry-after").is_none());
        assert_eq!(
            Problem::work_error_status(&WorkError::<()>::Refused(refusal.clone()), status),
            500
        );
    }
    for status in [
        GrpcRefusalStatus::Unavailable,
        GrpcRefusalStatus::ResourceExhausted,
    ] {
        let answer = GrpcAnswer::refusal(&refusal, status);
        assert_eq!(answer.code(), 13, "INTERNAL");
        assert_eq!(answer.pushback_ms(), None);
        assert!(answer.message().starts_with("ADMISSION_REENTRANT: "));
        let response = status.refusal(&refusal);
        assert_eq!(response.headers()["grpc-status"], "13");
        assert!(response.headers().get("grpc-retry-pushback-ms").is_none());
    }
}

#[test]
fn every_answer_type_is_send_sync_and_unpin() {
    fn all<T: Send + Sync + Unpin>() {}
    all::<Problem>();
    all::<HttpRefusalStatus>();
    all::<GrpcAnswer>();
    all::<GrpcRefusalStatus>();
}
