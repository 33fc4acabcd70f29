//! `IntoResponse` for [`Problem`], [`Refusal`] and [`WorkError`].
//!
//! This module only renders a [`Problem`]; it must never choose a status or a
//! body of its own.

use axum_core::body::Body;
use axum_core::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};

use crate::problem::NO_STORE;
use crate::{PROBLEM_JSON, Problem, Refusal, WorkError};

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        // The headers of `Problem::headers`, in its order, without building
        // strings for the static ones.
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let retry_after = self.retry_after();
        let mut response = Response::new(Body::from(self.into_body()));
        *response.status_mut() = status;
        let map = response.headers_mut();
        map.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        map.insert(CACHE_CONTROL, HeaderValue::from_static(NO_STORE));
        if let Some(secs) = retry_after {
            map.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        Problem::refusal(&self).into_response()
    }
}

impl<E> IntoResponse for WorkError<E> {
    fn into_response(self) -> Response {
        Problem::work_error(&self).into_response()
    }
}
