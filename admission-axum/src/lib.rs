//! axum adapter for `admission`.
