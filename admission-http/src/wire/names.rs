//! The name of every header and trailer the admission crates write or read.
//!
//! This module owns the names, and only them: each value's grammar and its
//! one parser are [`parse`](super::parse)'s and [`hint`](super::hint)'s. It
//! must never hold a name twice, and no other module of any admission crate
//! spells one of these names out.

/// The request header naming the caller's criticality: `critical`,
/// `default` or `sheddable` (ASCII case-insensitive; anything else is
/// `default`).
pub const CRITICALITY_HEADER: &str = "x-admission-criticality";

/// This project's own budget header: the milliseconds the client will wait
/// for its answer, 1 to 9 ASCII digits (`x-admission-budget-ms: 250`). A
/// client or proxy that knows its timeout sets it; the server refuses at
/// once what could not be answered in time.
pub const BUDGET_HEADER: &str = "x-admission-budget-ms";

/// The budget Envoy's router sets on each request it forwards: the route's
/// timeout in milliseconds, same grammar as [`BUDGET_HEADER`].
pub const ENVOY_TIMEOUT_HEADER: &str = "x-envoy-expected-rq-timeout-ms";

/// The request header naming the flow a request is for (a tenant, an API
/// key): 1 to 64 characters, each an ASCII letter, digit, `-`, `_`, `.`
/// or `:` (`x-admission-flow: tenant-42`), case-sensitive. Honoured only
/// when the app trusts its peers; anything else is malformed and ignored
/// (see [`parse_flow`](super::parse_flow)).
pub const FLOW_HEADER: &str = "x-admission-flow";

/// gRPC's deadline header (see [`parse_grpc_timeout`](super::parse_grpc_timeout)).
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

/// The response header carrying a refusal's retry hint in milliseconds
/// beside `Retry-After` (whole seconds by RFC 9110, so at least 1 s even
/// for work that takes 20 ms): the pool's expected time until a slot
/// frees, at least 1; 1000 while the pool has seen no work.
/// `admission-client` waits this rather than `Retry-After` when both are
/// present; a client that knows only `Retry-After` loses nothing.
pub const RETRY_AFTER_MS_HEADER: &str = "x-admission-retry-after-ms";

/// The response header naming a refusal's code (`ADMISSION_SATURATED`,
/// `ADMISSION_BUDGET_TOO_SHORT`, ...) beside `Retry-After`, so that a
/// client knows without reading the body whether a retry with the same
/// deadline could ever be admitted.
pub const REFUSAL_HEADER: &str = "x-admission-refusal";

/// The trailer that tells a client's retry policy how long to wait before
/// trying again, in milliseconds (gRFC A6, "pushback").
pub const RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// gRPC's status code trailer (a trailers-only answer carries it in its
/// head).
pub const GRPC_STATUS: &str = "grpc-status";

/// gRPC's status message trailer, percent-encoded
/// (as the gRPC over HTTP/2 specification says).
pub const GRPC_MESSAGE: &str = "grpc-message";

/// The response header Envoy's client-side weighted round robin reads a
/// backend's load from (ORCA's `endpoint-load-metrics`).
pub const ORCA_HEADER: &str = "endpoint-load-metrics";
