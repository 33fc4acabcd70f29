//! `ResponseError` for [`Refusal`] and [`WorkError`], `Responder` for
//! [`Problem`].
//!
//! This module only renders a [`Problem`]; it must never choose a status or a
//! body of its own.

use std::fmt;

use actix_web::body::BoxBody;
use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use actix_web::{HttpRequest, HttpResponse, Responder, ResponseError};

use crate::problem::NO_STORE;
use crate::{PROBLEM_JSON, Problem, Refusal, WorkError};

impl Problem {
    /// The actix-web response for this problem.
    pub fn to_actix_response(&self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        // The headers of `Problem::headers`, in its order, without building
        // strings for the static ones.
        let mut builder = HttpResponse::build(status);
        builder.insert_header((CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
        builder.insert_header((CACHE_CONTROL, HeaderValue::from_static(NO_STORE)));
        if let Some(secs) = self.retry_after() {
            builder.insert_header((RETRY_AFTER, HeaderValue::from(secs)));
        }
        builder.body(self.body().to_owned())
    }
}

impl Responder for Problem {
    type Body = BoxBody;

    fn respond_to(self, _req: &HttpRequest) -> HttpResponse {
        self.to_actix_response()
    }
}

impl ResponseError for Refusal {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
    }

    fn error_response(&self) -> HttpResponse {
        Problem::refusal(self).to_actix_response()
    }
}

impl<E: fmt::Debug> ResponseError for WorkError<E> {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(Problem::work_error(self).status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        Problem::work_error(self).to_actix_response()
    }
}
