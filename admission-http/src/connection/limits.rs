//! The connection limits, their defaults and their one validation error.
//!
//! This module owns [`ConnectionLimits`] and their validation. It must
//! never let a zero setting reach an accept loop: [`ConnectionLimits::validate`]
//! names it, and [`Incoming::new`](super::Incoming::new) calls it.

use std::time::Duration;

use super::descriptors::default_max_connections;
use admission_core::ConfigError;

/// How an [`Incoming`](super::Incoming) bounds connections and how long it
/// waits for clients, one set for every adapter (axum's `serve`, tonic's
/// `connections`, actix-web's `serve`).
///
/// Build it with [`ConnectionLimits::new`] and the `with_*` setters; read
/// it with the getters of the same names. A zero setting is refused by
/// [`validate`](Self::validate), which every accept loop calls where it
/// is built.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::connection::ConnectionLimits;
///
/// let limits = ConnectionLimits::new()
///     .with_max_connections(256)
///     .with_header_timeout(Duration::from_secs(5));
/// assert_eq!(limits.max_connections(), 256);
/// assert_eq!(limits.header_timeout(), Duration::from_secs(5));
/// assert_eq!(limits.idle_timeout(), Duration::from_secs(60), "the default");
/// assert!(limits.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `None`: the default, counted from the descriptors open when the
    /// accept loop is built ([`ConnectionLimits::resolved`]).
    max_connections: Option<usize>,
    header_timeout: Duration,
    idle_timeout: Duration,
    write_timeout: Duration,
    accept_backoff: Duration,
    log_every: Duration,
    http2_max_concurrent_streams: u32,
    http2_keepalive_interval: Duration,
    http2_keepalive_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits::new()
    }
}

impl ConnectionLimits {
    /// The defaults, the same for every protocol:
    ///
    /// * **max connections**: the process's soft open-file limit
    ///   (`RLIMIT_NOFILE`), less the descriptors it holds *now* (counted
    ///   in `/proc/self/fd`), less a reserve of a quarter of the limit; at
    ///   least 1 and at most 4096. 1024 and 32 are assumed where they
    ///   cannot be read. The count is taken when the accept loop is built
    ///   ([`Incoming::new`](super::Incoming::new), which every adapter's
    ///   server calls as it starts listening), not when the limits are:
    ///   limits built from flags at startup, before the runtime, the pools
    ///   and the worker threads have opened their descriptors, still get a
    ///   bound that leaves room for them. At `ulimit -n 1024` with 24 open that is 744; at
    ///   `ulimit -n 64` with 22 open, 26. The reserve is for what the
    ///   process opens later (files, outgoing connections, a health
    ///   probe's accept while an evicted connection closes).
    /// * **header timeout** 10 s, **idle timeout** 60 s, **write timeout**
    ///   10 s, **accept back-off** 100 ms, one `WARN` line per 10 s at most;
    /// * HTTP/2 (applied by `admission-tonic`'s `server`): 100 concurrent
    ///   streams, a keepalive ping every 30 s answered within 10 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::connection::ConnectionLimits;
    ///
    /// let limits = ConnectionLimits::new();
    /// assert!((1..=4096).contains(&limits.max_connections()));
    /// ```
    pub fn new() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: None,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            accept_backoff: Duration::from_millis(100),
            log_every: Duration::from_secs(10),
            http2_max_concurrent_streams: 100,
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(10),
        }
    }

    /// Checks every setting: the accept loops call it where they are
    /// built; call it yourself for a configuration read at startup.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] naming the first setting that is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::ConfigError;
    /// use admission_http::connection::ConnectionLimits;
    ///
    /// let limits = ConnectionLimits::new().with_write_timeout(Duration::ZERO);
    /// assert_eq!(
    ///     limits.validate().unwrap_err(),
    ///     ConfigError::ZeroSetting { setting: "write_timeout" }
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let zero = [
            ("max_connections", self.max_connections == Some(0)),
            ("header_timeout", self.header_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            ("write_timeout", self.write_timeout.is_zero()),
            ("accept_backoff", self.accept_backoff.is_zero()),
            ("log_every", self.log_every.is_zero()),
            (
                "http2_max_concurrent_streams",
                self.http2_max_concurrent_streams == 0,
            ),
            (
                "http2_keepalive_interval",
                self.http2_keepalive_interval.is_zero(),
            ),
            (
                "http2_keepalive_timeout",
                self.http2_keepalive_timeout.is_zero(),
            ),
        ];
        match zero.into_iter().find(|(_, zero)| *zero) {
            Some((name, _)) => Err(ConfigError::ZeroSetting { setting: name }),
            None => Ok(()),
        }
    }

    /// At most `max` connections open at once; past it a newcomer evicts
    /// the connection that has waited longest for a request head (however
    /// briefly), or is closed at once (see the [module docs](super)).
    #[must_use]
    pub fn with_max_connections(self, max: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: Some(max),
            ..self
        }
    }

    /// How long a client may take to send a whole request head (HTTP/1)
    /// or the 24-byte client preface (HTTP/2 with prior knowledge),
    /// counted from the accept, or from the first byte of the next request
    /// on a kept-alive HTTP/1 connection.
    #[must_use]
    pub fn with_header_timeout(self, timeout: Duration) -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: timeout,
            ..self
        }
    }

    /// How long a kept-alive HTTP/1 connection with no request in flight
    /// may stay silent before it is closed.
    #[must_use]
    pub fn with_idle_timeout(self, timeout: Duration) -> ConnectionLimits {
        ConnectionLimits {
            idle_timeout: timeout,
            ..self
        }
    }

    /// How long a write may make no progress. The rule: a connection is
    /// closed when its socket has accepted **no byte** for `timeout` while
    /// a write waits. The socket keeps at most 16 KiB that the peer's
    /// window does not yet let out (`TCP_NOTSENT_LOWAT`, on Linux), so it
    /// accepts more as soon as the reader takes bytes: a reader that takes
    /// 16 KiB per `timeout` (1.6 KiB/s at the default 10 s), however
    /// slowly and unevenly, is never cut; one that takes none is.
    #[must_use]
    pub fn with_write_timeout(self, timeout: Duration) -> ConnectionLimits {
        ConnectionLimits {
            write_timeout: timeout,
            ..self
        }
    }

    /// How long accepting pauses after an error it could not make room
    /// for (the process out of descriptors with no waiting connection to
    /// close, or out of memory).
    #[must_use]
    pub fn with_accept_backoff(self, backoff: Duration) -> ConnectionLimits {
        ConnectionLimits {
            accept_backoff: backoff,
            ..self
        }
    }

    /// How often, at most, the `WARN` line with the counts of what was
    /// enforced is written.
    #[must_use]
    pub fn with_log_every(self, every: Duration) -> ConnectionLimits {
        ConnectionLimits {
            log_every: every,
            ..self
        }
    }

    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`.
    #[must_use]
    pub fn with_http2_max_concurrent_streams(self, streams: u32) -> ConnectionLimits {
        ConnectionLimits {
            http2_max_concurrent_streams: streams,
            ..self
        }
    }

    /// How often an HTTP/2 keepalive ping goes out on a quiet connection,
    /// and how long its answer may take before the connection is closed.
    #[must_use]
    pub fn with_http2_keepalive(self, interval: Duration, timeout: Duration) -> ConnectionLimits {
        ConnectionLimits {
            http2_keepalive_interval: interval,
            http2_keepalive_timeout: timeout,
            ..self
        }
    }

    /// The bound on open connections: the one set, or else the default
    /// counted now (an accept loop counts it once, as it is built).
    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or_else(default_max_connections)
    }

    /// The same limits with the default bound counted now: what an accept
    /// loop keeps.
    pub(crate) fn resolved(self) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: Some(self.max_connections()),
            ..self
        }
    }

    /// The header (or HTTP/2 preface) timeout.
    pub fn header_timeout(&self) -> Duration {
        self.header_timeout
    }

    /// The idle keep-alive timeout.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// The write-progress timeout.
    pub fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// The pause after an accept error.
    pub fn accept_backoff(&self) -> Duration {
        self.accept_backoff
    }

    /// The interval of the `WARN` line.
    pub fn log_every(&self) -> Duration {
        self.log_every
    }

    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub fn http2_max_concurrent_streams(&self) -> u32 {
        self.http2_max_concurrent_streams
    }

    /// The HTTP/2 keepalive ping interval.
    pub fn http2_keepalive_interval(&self) -> Duration {
        self.http2_keepalive_interval
    }

    /// The HTTP/2 keepalive answer timeout.
    pub fn http2_keepalive_timeout(&self) -> Duration {
        self.http2_keepalive_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_zero_setting_is_named() {
        let ok = ConnectionLimits::new();
        assert_eq!(ok.validate(), Ok(()));
        let cases = [
            (ok.with_max_connections(0), "max_connections"),
            (ok.with_header_timeout(Duration::ZERO), "header_timeout"),
            (ok.with_idle_timeout(Duration::ZERO), "idle_timeout"),
            (ok.with_write_timeout(Duration::ZERO), "write_timeout"),
            (ok.with_accept_backoff(Duration::ZERO), "accept_backoff"),
            (ok.with_log_every(Duration::ZERO), "log_every"),
            (
                ok.with_http2_max_concurrent_streams(0),
                "http2_max_concurrent_streams",
            ),
            (
                ok.with_http2_keepalive(Duration::ZERO, Duration::from_secs(1)),
                "http2_keepalive_interval",
            ),
            (
                ok.with_http2_keepalive(Duration::from_secs(1), Duration::ZERO),
                "http2_keepalive_timeout",
            ),
        ];
        for (limits, name) in cases {
            assert_eq!(
                limits.validate(),
                Err(ConfigError::ZeroSetting { setting: name })
            );
        }
    }
}
