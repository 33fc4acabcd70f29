//! `IntoResponse` for [`Problem`], [`Refusal`] and [`WorkError`].
//!
//! This module only renders a [`Problem`]; it must never choose a status or a
//! body of its own.

use axum_core::body::Body;
use axum_core::response::{IntoResponse, Response};
use http::{HeaderName, HeaderValue, StatusCode};

use crate::{Problem, Refusal, WorkError};

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let headers: Vec<_> = self.headers().collect();
        let mut response = Response::new(Body::from(self.into_body()));
        *response.status_mut() = status;
        let map = response.headers_mut();
        for (name, value) in headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                map.insert(HeaderName::from_static(name), value);
            }
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
