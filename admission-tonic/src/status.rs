//! The client's side of a refusal: when to come back.
//!
//! This module owns [`pushback`]: how a caller reads the
//! `grpc-retry-pushback-ms` trailer from tonic's metadata, the way gRPC's
//! retry design (gRFC A6) says a retry policy must. The grammar and the
//! [`Hint`] it gives are `admission-http`'s, which `admission-client` reads
//! the trailer with too, so the two cannot disagree. It must never build an
//! answer: the server's side is the layer's refusal.

use admission_http::wire;
use tonic::metadata::{MetadataMap, MetadataValue};

pub use admission_http::RETRY_PUSHBACK_MS;
pub use admission_http::wire::Hint;

/// What a call's `grpc-retry-pushback-ms` trailer asks of its client, read
/// as gRFC A6 says: a non-negative 32-bit integer with no unnecessary
/// leading zeros is a delay before the next attempt ([`Hint::After`]); a
/// negative or unparseable value, a repeated trailer included, asks the
/// client not to retry at all ([`Hint::Stop`]); no trailer leaves the delay
/// to the client's own back-off ([`Hint::None`]).
///
/// tonic's client has no retry policy of its own (grpc/grpc-rust#1463), so
/// a caller that retries does it around the call and reads the pushback of
/// the failed call's `Status` (`status.metadata()`) or of a stream's
/// trailers here.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_tonic::status::{Hint, RETRY_PUSHBACK_MS, pushback};
///
/// let mut refused = tonic::Status::unavailable("ADMISSION_SATURATED");
/// refused.metadata_mut().insert(RETRY_PUSHBACK_MS, 2000.into());
/// assert_eq!(pushback(refused.metadata()), Hint::After(Duration::from_secs(2)));
///
/// refused.metadata_mut().insert(RETRY_PUSHBACK_MS, "-1".parse().unwrap());
/// assert_eq!(pushback(refused.metadata()), Hint::Stop);
///
/// assert_eq!(pushback(tonic::Status::unavailable("").metadata()), Hint::None);
/// ```
#[must_use]
pub fn pushback(metadata: &MetadataMap) -> Hint {
    let values = metadata.get_all(RETRY_PUSHBACK_MS);
    wire::pushback(values.iter().map(MetadataValue::as_encoded_bytes))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // The grammar itself is tested once, in admission-http's wire module and
    // the workspace's property test (tests/tests/hints.rs); this checks what
    // is tonic's: every value of a repeated trailer reaches it.
    #[test]
    fn a_repeated_trailer_asks_not_to_retry() {
        let mut metadata = MetadataMap::new();
        assert_eq!(pushback(&metadata), Hint::None);
        metadata.insert(RETRY_PUSHBACK_MS, 10.into());
        assert_eq!(pushback(&metadata), Hint::After(Duration::from_millis(10)));
        metadata.append(RETRY_PUSHBACK_MS, 20.into());
        assert_eq!(pushback(&metadata), Hint::Stop);
    }
}
