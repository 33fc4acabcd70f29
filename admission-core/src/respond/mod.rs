//! Framework response impls for refusals, work errors and problems, behind
//! the `axum` and `actix` features the adapters turn on.
//!
//! They live here, not in the adapters, because Rust's orphan rule lets only
//! the crate that defines [`Refusal`](crate::Refusal) implement a foreign
//! trait such as `IntoResponse` or `ResponseError` for it. Every impl renders
//! [`Problem`](crate::Problem) and nothing else, so both frameworks send the
//! same bytes. This module must never decide a status or a body itself.

#[cfg(feature = "actix")]
mod actix;
#[cfg(feature = "axum")]
mod axum;
