//! The answer a handler gives when admission or its work did not produce a
//! response, as a gRPC status.
//!
//! This module owns tonic's [`Rejection`] and the one place an
//! `admission-http` [`GrpcAnswer`] becomes a [`tonic::Status`]; everything
//! else about a rejection is `admission-http`'s shared one. It must never
//! choose a code, a message or a trailer of its own.

use admission_http::{GrpcAnswer, GrpcRefusalStatus, RETRY_PUSHBACK_MS};
use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};

admission_http::declare_rejection! {
    /// A refusal or a failed piece of work, as a tonic handler returns it:
    /// `UNAVAILABLE` (or `RESOURCE_EXHAUSTED`, see
    /// [`with_status`](Self::with_status)) with the stable code and the pool in
    /// the message and `grpc-retry-pushback-ms` for a refusal;
    /// `DEADLINE_EXCEEDED` and no pushback for a call whose deadline cannot
    /// cover the work; `INTERNAL` with a code (`ADMISSION_WORK_PANICKED`,
    /// `ADMISSION_WORK_FAILED`, `ADMISSION_REENTRANT`) and no message of the
    /// work's own for work that panicked or failed, and for a task that waited
    /// on a slot only it could free (a programming error, not overload).
    ///
    /// `From<Refusal>` and `From<WorkError<E>>` build one, and
    /// `From<Rejection> for Status` lets `?` finish the job, so registry work
    /// in a handler is one line:
    /// `pool.run(work, Admission::FailFast).await.map_err(Rejection::from)?`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Admission, Pool};
    /// use admission_tonic::Rejection;
    /// use tonic::{Code, Request, Response, Status};
    ///
    /// // The body of a method of a generated service trait.
    /// async fn walk(registry: &Pool, _request: Request<()>) -> Result<Response<String>, Status> {
    ///     let walk = || Ok::<_, std::fmt::Error>("# EOF\n".to_owned());
    ///     let text = registry.run(walk, Admission::FailFast).await.map_err(Rejection::from)?;
    ///     Ok(Response::new(text))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let registry = Pool::new("registry", 1).unwrap();
    /// assert_eq!(walk(&registry, Request::new(())).await.unwrap().into_inner(), "# EOF\n");
    ///
    /// let _walking = registry.try_admit().unwrap();
    /// let refused = walk(&registry, Request::new(())).await.unwrap_err();
    /// assert_eq!(refused.code(), Code::Unavailable);
    /// assert!(refused.message().starts_with("ADMISSION_SATURATED: pool `registry`"));
    /// // The walk took microseconds: the pushback is the pool's millisecond
    /// // hint (`Retry-After` would have to say 1 s).
    /// let pushback = refused.metadata().get("grpc-retry-pushback-ms").unwrap();
    /// assert!(pushback.to_str().unwrap().parse::<u32>().unwrap() < 1000);
    /// # }
    /// ```
    GrpcRefusalStatus
}

impl Rejection {
    /// The status this answers with.
    pub fn to_status(&self) -> Status {
        into_status(&self.0.answer())
    }
}

impl From<Rejection> for Status {
    fn from(rejection: Rejection) -> Status {
        rejection.to_status()
    }
}

/// The middle's answer as tonic's status: the same code, message and
/// pushback the layer sends for a refusal.
fn into_status(answer: &GrpcAnswer) -> Status {
    let mut metadata = MetadataMap::new();
    if let Some(ms) = answer.pushback_ms() {
        metadata.insert(RETRY_PUSHBACK_MS, MetadataValue::from(ms));
    }
    Status::with_metadata(
        tonic::Code::from_i32(i32::from(answer.code())),
        answer.message(),
        metadata,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_core::{Code, Pool, Refusal, WorkError};
    use admission_http::{WORK_FAILED, WORK_PANICKED};

    fn saturated(pool: &Pool) -> Refusal {
        let _held = pool.try_admit().unwrap();
        pool.try_admit().unwrap_err()
    }

    #[tokio::test]
    async fn a_budget_too_short_is_deadline_exceeded_without_pushback() {
        let pool = Pool::new("tonic-budget", 1).unwrap();
        let refusal = admission_core::Caller::default()
            .with_budget(std::time::Duration::ZERO)
            .scope(async { pool.try_admit().unwrap_err() })
            .await;
        assert_eq!(refusal.code(), Code::BudgetTooShort);
        let status = Rejection::from(refusal).to_status();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert!(status.message().starts_with("ADMISSION_BUDGET_TOO_SHORT"));
        assert!(
            !status.message().contains("retry"),
            "a retry would be refused again"
        );
        assert!(status.metadata().get(RETRY_PUSHBACK_MS).is_none());
    }

    #[test]
    fn a_refusal_names_code_pool_and_retry_and_nothing_else() {
        let pool = Pool::new("registry", 1).unwrap();
        let refusal = saturated(&pool);
        let status = Rejection::from(refusal.clone()).to_status();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(
            status.message(),
            format!(
                "ADMISSION_SATURATED: pool `registry` refused the call; retry in {} s",
                refusal.retry_after_secs()
            )
        );
        let pushback = status.metadata().get(RETRY_PUSHBACK_MS).unwrap();
        assert_eq!(
            pushback.to_str().unwrap(),
            refusal.retry_after_millis().to_string()
        );
        assert_eq!(status.metadata().len(), 1, "only the pushback");
        assert!(status.details().is_empty());
    }

    #[test]
    fn failures_carry_a_code_and_no_message_of_their_own() {
        let failed = Rejection::from(WorkError::Failed("secret value 42")).to_status();
        assert_eq!(failed.code(), tonic::Code::Internal);
        assert_eq!(failed.message(), WORK_FAILED);
        assert!(failed.metadata().is_empty(), "no pushback for a failure");

        let panicked = Rejection::from(WorkError::<()>::Panicked).to_status();
        assert_eq!(panicked.code(), tonic::Code::Internal);
        assert_eq!(panicked.message(), WORK_PANICKED);
    }

    #[test]
    fn shutdown_is_a_refusal_with_a_one_second_pushback() {
        for status in [
            GrpcRefusalStatus::Unavailable,
            GrpcRefusalStatus::ResourceExhausted,
        ] {
            let answer = Rejection::from(WorkError::<()>::Cancelled)
                .with_status(status)
                .to_status();
            assert_eq!(answer.code() as i32, i32::from(status.code()));
            assert!(answer.message().starts_with("ADMISSION_SHUTTING_DOWN: "));
            assert_eq!(answer.metadata().get(RETRY_PUSHBACK_MS).unwrap(), "1000");
        }
    }

    #[test]
    fn the_status_option_changes_refusals_only() {
        let pool = Pool::new("registry", 1).unwrap();
        let exhausted = Rejection::from(saturated(&pool))
            .with_status(GrpcRefusalStatus::ResourceExhausted)
            .to_status();
        assert_eq!(exhausted.code(), tonic::Code::ResourceExhausted);
        let panicked = Rejection::from(WorkError::<()>::Panicked)
            .with_status(GrpcRefusalStatus::ResourceExhausted)
            .to_status();
        assert_eq!(panicked.code(), tonic::Code::Internal);
    }
}
