//! The wire vocabulary: every header and trailer name, and one grammar and
//! one parser for each value, for the server's middle and for
//! `admission-client` alike.
//!
//! This module declares its three parts and re-exports them: `names` (every
//! name), `parse` (the request headers' grammars, the refusal code and
//! `grpc-status`) and `hint` (the retry hints, written and read). It builds
//! with `default-features = false`: a client gets the vocabulary without
//! the server middleware. It must never hold middleware, a framework type
//! or a second parser of a name it holds.
//!
//! Sibling crates use it; it is out of the documented API, and the names and
//! types users need are re-exported where they use them.

mod hint;
mod names;
mod parse;

pub use self::hint::{
    Hint, http_hints, pushback, pushback_ms, retry_after, retry_after_ms, retry_after_secs,
};
pub use self::names::{
    BUDGET_HEADER, CRITICALITY_HEADER, ENVOY_TIMEOUT_HEADER, FLOW_HEADER, GRPC_MESSAGE,
    GRPC_STATUS, GRPC_TIMEOUT_HEADER, ORCA_HEADER, REFUSAL_HEADER, RETRY_AFTER_MS_HEADER,
    RETRY_PUSHBACK_MS,
};
pub use self::parse::{
    MAX_FLOW_LEN, Malformed, budget_ms_value, grpc_status, grpc_timeout_value, parse_budget_ms,
    parse_flow, parse_grpc_timeout, refusal_code,
};
