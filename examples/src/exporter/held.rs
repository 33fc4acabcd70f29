//! The bytes held by response bodies not yet sent, shared across
//! connections.
//!
//! This module owns [`HeldBytes`]: every walk's text becomes a `Bytes`
//! whose owner counts its length here until the last reference (the
//! connections sending it, hyper's write queues) is dropped, so coalesced
//! scrapes sharing one walk count its body once. It must never copy a
//! body, and never let a walk start (on the HTTP routes) while the bound
//! is reached: past it walks are refused, not buffered.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;

/// The bytes held by walk bodies alive now, against a bound.
#[derive(Debug, Clone)]
pub(crate) struct HeldBytes {
    inner: Arc<Inner>,
    /// `exporter_response_bytes_held`.
    pub(crate) gauge: Gauge,
}

#[derive(Debug)]
struct Inner {
    held: AtomicUsize,
    max: usize,
}

impl HeldBytes {
    /// Nothing held yet; at most about `max` bytes.
    pub(crate) fn new(max: usize) -> HeldBytes {
        HeldBytes {
            inner: Arc::new(Inner {
                held: AtomicUsize::new(0),
                max,
            }),
            gauge: Gauge::default(),
        }
    }

    /// Whether the bound is reached: no new walk for a scrape.
    pub(crate) fn is_full(&self) -> bool {
        self.inner.held.load(Relaxed) >= self.inner.max
    }

    /// `text` as a body counted here until its last reference is dropped.
    pub(crate) fn hold(&self, text: String) -> Bytes {
        let len = text.len();
        self.inner.held.fetch_add(len, Relaxed);
        self.gauge.inc_by(i64::try_from(len).unwrap_or(i64::MAX));
        Bytes::from_owner(Held {
            text,
            held: self.clone(),
        })
    }
}

/// One body's buffer and the count it gives back when dropped.
struct Held {
    text: String,
    held: HeldBytes,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let len = self.text.len();
        self.held.inner.held.fetch_sub(len, Relaxed);
        self.held
            .gauge
            .dec_by(i64::try_from(len).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_counted_once_however_many_share_it_until_the_last_goes() {
        let held = HeldBytes::new(10);
        let body = held.hold("0123456789".to_owned());
        let shares: Vec<Bytes> = (0..100).map(|_| body.clone()).collect();
        assert_eq!(held.gauge.get(), 10, "shared, not copied");
        assert!(held.is_full());
        drop(body);
        let tail = shares[7].slice(5..);
        drop(shares);
        assert!(held.is_full(), "a slice still holds the buffer");
        drop(tail);
        assert_eq!(held.gauge.get(), 0);
        assert!(!held.is_full());
    }
}
