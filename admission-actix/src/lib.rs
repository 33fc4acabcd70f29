//! actix-web adapter for `admission`.
