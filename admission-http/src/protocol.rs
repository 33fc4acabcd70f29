//! Which protocol a layer speaks: how it classifies by default and how it
//! answers a refusal.
//!
//! This module owns [`Protocol`], implemented by [`HttpRefusalStatus`] (a
//! problem document with `503`/`429` and `Retry-After`) and
//! [`GrpcRefusalStatus`] (a trailers-only `UNAVAILABLE`/`RESOURCE_EXHAUSTED`
//! with `grpc-retry-pushback-ms`): the refusal status an app configures is
//! also the protocol its layer speaks. It must never admit anything.

use std::cell::RefCell;
use std::fmt;
use std::thread::LocalKey;

use admission_core::{Code, Criticality, Refusal};
use bytes::Bytes;
use http::header::CONTENT_LENGTH;
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use crate::classify::Classify;
use crate::grpc::{GrpcAnswer, GrpcRefusalStatus};
use crate::problem::{HttpRefusalStatus, Problem};

mod sealed {
    #[doc(hidden)]
    pub trait Sealed {}
    impl Sealed for super::HttpRefusalStatus {}
    impl Sealed for super::GrpcRefusalStatus {}
}

/// The protocol a layer speaks, named by the refusal status it is
/// configured with: [`HttpRefusalStatus`] or [`GrpcRefusalStatus`]. Sealed:
/// this crate answers in these two forms only.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::{GrpcRefusalStatus, HttpRefusalStatus, Protocol};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refusal = pool.try_admit().unwrap_err();
///
/// let http = HttpRefusalStatus::default().refusal(&refusal);
/// assert_eq!(http.status(), 503);
/// assert!(http.body().is_some(), "a problem document");
///
/// let grpc = GrpcRefusalStatus::default().refusal(&refusal);
/// assert_eq!(grpc.headers()["grpc-status"], "14");
/// assert!(grpc.body().is_none(), "trailers-only: no body at all");
/// ```
#[doc(hidden)]
pub trait Protocol: sealed::Sealed + Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// How a request is classified when the app does not say.
    fn default_classify() -> Classify;

    /// The answer to a refusal: the response head, and the body's bytes
    /// (`None`: no body, the response ends with its head).
    fn refusal(&self, refusal: &Refusal) -> Response<Option<Bytes>>;
}

impl Protocol for HttpRefusalStatus {
    fn default_classify() -> Classify {
        Classify::Method
    }

    fn refusal(&self, refusal: &Refusal) -> Response<Option<Bytes>> {
        let write = || sized(Problem::refusal(refusal, *self).into_http(Some));
        kept_or(&HTTP_ANSWERS, Facts::of(refusal, self.code()), write)
    }
}

/// The answer with its `content-length`, written once with the answer
/// and kept with it: a server that would add the header itself (axum
/// does, for a body of known size) finds it there and need not format
/// the number and grow the copied header map on every refusal.
fn sized(mut response: Response<Option<Bytes>>) -> Response<Option<Bytes>> {
    let length = response.body().as_ref().map_or(0, Bytes::len);
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(length));
    response
}

impl Protocol for GrpcRefusalStatus {
    fn default_classify() -> Classify {
        Classify::GrpcPath
    }

    fn refusal(&self, refusal: &Refusal) -> Response<Option<Bytes>> {
        let write = || {
            GrpcAnswer::refusal(refusal, *self)
                .into_trailers_only()
                .map(|()| None)
        };
        kept_or(
            &GRPC_ANSWERS,
            Facts::of(refusal, u16::from(self.code())),
            write,
        )
    }
}

/// Everything a refusal's answer is written from: the answer is a function
/// of these and of nothing else (the configured status, the code, the
/// refused caller's criticality, the retry hint and the pool's name), so
/// an answer written once for them is the answer to every refusal with
/// the same facts, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Facts {
    status: u16,
    code: Code,
    criticality: Criticality,
    retry_after_ms: u32,
    pool: &'static str,
}

impl Facts {
    fn of(refusal: &Refusal, status: u16) -> Facts {
        Facts {
            status,
            code: refusal.code(),
            criticality: refusal.criticality(),
            retry_after_ms: refusal.retry_after_millis(),
            pool: refusal.pool(),
        }
    }
}

/// An answer as kept: the facts it was written from, its status, its
/// headers in order and its body.
type KeptAnswer = (Facts, StatusCode, HeaderMap, Option<Bytes>);

/// How many answers each thread keeps per protocol: the few refusals a
/// server sends under one overload (a class or two, a hint or two).
const KEPT: usize = 4;

/// The answers a thread wrote last, so that a refused request under a
/// sustained overload clones its answer (a header map whose values share
/// their bytes, and the body's `Bytes`) instead of writing the problem
/// document, formatting its numbers and parsing its header names again.
/// Bounded: [`KEPT`] answers per thread, the oldest replaced first.
struct Answers {
    kept: [Option<KeptAnswer>; KEPT],
    next: usize,
}

impl Answers {
    const fn new() -> Answers {
        Answers {
            kept: [None, None, None, None],
            next: 0,
        }
    }

    /// The answer for `facts`: a copy of the one kept, or `write`'s, kept.
    fn answer(
        &mut self,
        facts: Facts,
        write: impl FnOnce() -> Response<Option<Bytes>>,
    ) -> Response<Option<Bytes>> {
        let kept = self.kept.iter().flatten().find(|(kept, ..)| *kept == facts);
        if let Some((_, status, headers, body)) = kept {
            let mut response = Response::new(body.clone());
            *response.status_mut() = *status;
            *response.headers_mut() = headers.clone();
            return response;
        }
        let response = write();
        let kept = (
            facts,
            response.status(),
            response.headers().clone(),
            response.body().clone(),
        );
        self.kept[self.next] = Some(kept);
        self.next = (self.next + 1) % KEPT;
        response
    }
}

/// The answer for `facts` from this thread's `answers`, or `write`'s when
/// the thread is ending (its answers are gone).
fn kept_or(
    answers: &'static LocalKey<RefCell<Answers>>,
    facts: Facts,
    write: impl Fn() -> Response<Option<Bytes>>,
) -> Response<Option<Bytes>> {
    answers
        .try_with(|answers| answers.borrow_mut().answer(facts, &write))
        .unwrap_or_else(|_| write())
}

thread_local! {
    static HTTP_ANSWERS: RefCell<Answers> = const { RefCell::new(Answers::new()) };
    static GRPC_ANSWERS: RefCell<Answers> = const { RefCell::new(Answers::new()) };
}

#[cfg(test)]
mod tests {
    use admission_core::{Caller, Criticality, Pool};

    use super::*;

    /// A refusal of a full one-slot pool named `name`, for `criticality`.
    fn refusal(name: &str, criticality: Criticality) -> Refusal {
        let pool = Pool::new(name.to_owned(), 1).unwrap();
        let _held = pool.try_admit().unwrap();
        Caller::new(criticality).scope_sync(|| pool.try_admit().unwrap_err())
    }

    /// Status, headers in order, body: the bytes a server sends.
    type Wire = (u16, Vec<(String, Vec<u8>)>, Option<Bytes>);

    fn wire(response: &Response<Option<Bytes>>) -> Wire {
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
            .collect();
        (response.status().as_u16(), headers, response.body().clone())
    }

    #[test]
    fn a_kept_answer_is_the_written_one_byte_for_byte_whatever_the_facts() {
        let refusals = [
            refusal("kept-a", Criticality::Default),
            refusal("kept-a", Criticality::Sheddable),
            refusal("kept-b", Criticality::Default),
            refusal("kept-\"c\"", Criticality::Critical),
            refusal("kept-d", Criticality::Default),
            refusal("kept-e", Criticality::Default),
        ];
        // Twice round, more facts than a thread keeps: hits, misses and
        // replacements all answer as a fresh write does.
        for _ in 0..2 {
            for refusal in &refusals {
                for status in [
                    HttpRefusalStatus::ServiceUnavailable,
                    HttpRefusalStatus::TooManyRequests,
                ] {
                    let written = sized(Problem::refusal(refusal, status).into_http(Some));
                    let kept = status.refusal(refusal);
                    assert_eq!(wire(&kept), wire(&written));
                    let length = kept.body().as_ref().map_or(0, Bytes::len);
                    assert_eq!(kept.headers()[CONTENT_LENGTH], length.to_string());
                }
                for status in [
                    GrpcRefusalStatus::Unavailable,
                    GrpcRefusalStatus::ResourceExhausted,
                ] {
                    let written = GrpcAnswer::refusal(refusal, status)
                        .into_trailers_only()
                        .map(|()| None);
                    assert_eq!(wire(&status.refusal(refusal)), wire(&written));
                }
            }
        }
    }
}
