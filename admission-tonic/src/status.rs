//! The client's side of a refusal: when to come back.
//!
//! This module owns [`Pushback`]: how a caller reads the
//! `grpc-retry-pushback-ms` trailer the way gRPC's retry design (gRFC A6)
//! says a retry policy must. It must never build an answer: the server's
//! side is `admission-http`'s [`GrpcAnswer`](admission_http::GrpcAnswer),
//! whose trailer name is re-exported here.

use std::time::Duration;

use admission_http::wire::{self, Hint};
use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};

pub use admission_http::RETRY_PUSHBACK_MS;

/// What a server's `grpc-retry-pushback-ms` asks of a client, read as
/// gRFC A6 says: a non-negative 32-bit integer with no unnecessary leading
/// zeros is a delay before the next attempt; a negative or unparseable
/// value (a repeated trailer included) asks the client not to retry at
/// all; no value leaves the delay to the client's own back-off. The
/// grammar is `admission-http`'s, which `admission-client` reads it with
/// too: the two cannot disagree.
///
/// tonic's client has no retry policy of its own (grpc/grpc-rust#1463), so
/// a caller that retries does it around the call and reads the pushback
/// here.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_tonic::status::{Pushback, RETRY_PUSHBACK_MS};
///
/// let mut refused = tonic::Status::unavailable("ADMISSION_SATURATED");
/// refused.metadata_mut().insert(RETRY_PUSHBACK_MS, 2000.into());
/// assert_eq!(Pushback::from_status(&refused), Some(Pushback::RetryAfter(Duration::from_secs(2))));
///
/// refused.metadata_mut().insert(RETRY_PUSHBACK_MS, "-1".parse().unwrap());
/// assert_eq!(Pushback::from_status(&refused), Some(Pushback::DoNotRetry));
///
/// assert_eq!(Pushback::from_status(&tonic::Status::unavailable("")), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pushback {
    /// Retry, but not before this long.
    RetryAfter(Duration),
    /// Do not retry.
    DoNotRetry,
}

impl Pushback {
    /// The pushback a failed call's status carries, if any.
    pub fn from_status(status: &Status) -> Option<Pushback> {
        Pushback::from_metadata(status.metadata())
    }

    /// The pushback in a call's trailing metadata, if any. A repeated
    /// trailer is unparseable, hence [`DoNotRetry`](Pushback::DoNotRetry).
    pub fn from_metadata(metadata: &MetadataMap) -> Option<Pushback> {
        let values = metadata.get_all(RETRY_PUSHBACK_MS);
        match wire::pushback(values.iter().map(MetadataValue::as_encoded_bytes)) {
            Hint::None => None,
            Hint::After(wait) => Some(Pushback::RetryAfter(wait)),
            Hint::Stop => Some(Pushback::DoNotRetry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One trailer of `value`, read.
    fn parse_pushback(value: &'static [u8]) -> Pushback {
        let mut metadata = MetadataMap::new();
        let value = tonic::metadata::AsciiMetadataValue::try_from(value).unwrap();
        metadata.insert(RETRY_PUSHBACK_MS, value);
        Pushback::from_metadata(&metadata).unwrap()
    }

    #[test]
    fn pushback_follows_a6() {
        let after = |ms| Pushback::RetryAfter(Duration::from_millis(ms));
        assert_eq!(parse_pushback(b"0"), after(0));
        assert_eq!(parse_pushback(b"1000"), after(1000));
        assert_eq!(parse_pushback(b"2147483647"), after(2_147_483_647));
        for bad in [
            &b"-1"[..],
            b"-5",
            b"",
            b"007",
            b"+5",
            b"1.5",
            b"2147483648",
            b"1 ",
            b"ms",
        ] {
            assert_eq!(parse_pushback(bad), Pushback::DoNotRetry, "{bad:?}");
        }
    }

    #[test]
    fn a_repeated_trailer_asks_not_to_retry() {
        let mut metadata = MetadataMap::new();
        assert_eq!(Pushback::from_metadata(&metadata), None);
        metadata.insert(RETRY_PUSHBACK_MS, 10.into());
        assert_eq!(
            Pushback::from_metadata(&metadata),
            Some(Pushback::RetryAfter(Duration::from_millis(10)))
        );
        metadata.append(RETRY_PUSHBACK_MS, 20.into());
        assert_eq!(
            Pushback::from_metadata(&metadata),
            Some(Pushback::DoNotRetry)
        );
    }
}
