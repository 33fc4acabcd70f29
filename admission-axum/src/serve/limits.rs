//! The connection limits and their defaults.
//!
//! This module owns [`ConnectionLimits`] and the default bound read from
//! the process's open-file limit. It must never let a limit of zero exist:
//! each setter checks its value where the limits are built.

use std::time::Duration;

/// The most connections the default allows, whatever the descriptor
/// limit: beyond this, memory rather than descriptors is the bound to
/// think about, and that is the operator's call.
const DEFAULT_CEILING: usize = 4096;

/// The descriptor limit assumed where it cannot be read.
const ASSUMED_OPEN_FILES: u64 = 1024;

/// How [`Listener`](super::Listener) and [`serve`](super::serve) bound connections and how long it waits
/// for clients.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_axum::serve::ConnectionLimits;
///
/// let limits = ConnectionLimits::new()
///     .max_connections(256)
///     .header_read_timeout(Duration::from_secs(5));
/// assert_eq!(limits.get_max_connections(), 256);
/// assert_eq!(limits.get_header_read_timeout(), Duration::from_secs(5));
/// assert_eq!(limits.get_idle_timeout(), Duration::from_secs(60), "the default");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    max_connections: usize,
    header_read_timeout: Duration,
    idle_timeout: Duration,
    write_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits::new()
    }
}

impl ConnectionLimits {
    /// The defaults: at most three quarters of the process's soft
    /// open-file limit (`RLIMIT_NOFILE`, read once, here; 1024 is assumed
    /// where it cannot be read) and never more than 4096 connections, a
    /// 10 s header-read timeout, a 60 s idle timeout and a 10 s
    /// write-progress timeout.
    ///
    /// The remaining quarter of the descriptors is left to everything else
    /// the process opens (the listener, the runtime, files, outgoing
    /// connections), so an attacker holding every connection the bound
    /// allows cannot starve them. Raise the soft limit before calling this
    /// (or set the bound yourself) to serve more connections.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::serve::ConnectionLimits;
    ///
    /// let limits = ConnectionLimits::new();
    /// assert!((1..=4096).contains(&limits.get_max_connections()));
    /// ```
    pub fn new() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: default_max_connections(open_files_limit()),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
        }
    }

    /// At most `max` connections open at once; past it a newcomer evicts
    /// the connection that has waited longest for a request head (however
    /// briefly), or is
    /// closed at once (see the [module docs](super)).
    ///
    /// # Panics
    ///
    /// When `max` is 0: a server that accepts nothing is a configuration
    /// mistake, reported here rather than on the first connection.
    #[must_use]
    pub fn max_connections(self, max: usize) -> ConnectionLimits {
        assert!(max > 0, "`max_connections` must be at least 1");
        ConnectionLimits {
            max_connections: max,
            ..self
        }
    }

    /// How long a client may take to send a whole request head, counted
    /// from the accept or from the first byte of the next request on a
    /// kept-alive connection.
    ///
    /// # Panics
    ///
    /// When `timeout` is zero.
    #[must_use]
    pub fn header_read_timeout(self, timeout: Duration) -> ConnectionLimits {
        assert!(!timeout.is_zero(), "`header_read_timeout` must not be zero");
        ConnectionLimits {
            header_read_timeout: timeout,
            ..self
        }
    }

    /// How long a kept-alive connection with no request in flight may stay
    /// silent before it is closed.
    ///
    /// # Panics
    ///
    /// When `timeout` is zero.
    #[must_use]
    pub fn idle_timeout(self, timeout: Duration) -> ConnectionLimits {
        assert!(!timeout.is_zero(), "`idle_timeout` must not be zero");
        ConnectionLimits {
            idle_timeout: timeout,
            ..self
        }
    }

    /// How long a response may make no progress: when the client has not
    /// taken a single byte of it for that long (the socket stays full), the
    /// connection is closed and the response dropped, so a client that
    /// never reads cannot pin the response's memory past this bound.
    ///
    /// # Panics
    ///
    /// When `timeout` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_axum::serve::ConnectionLimits;
    ///
    /// let limits = ConnectionLimits::new().write_timeout(Duration::from_secs(3));
    /// assert_eq!(limits.get_write_timeout(), Duration::from_secs(3));
    /// ```
    #[must_use]
    pub fn write_timeout(self, timeout: Duration) -> ConnectionLimits {
        assert!(!timeout.is_zero(), "`write_timeout` must not be zero");
        ConnectionLimits {
            write_timeout: timeout,
            ..self
        }
    }

    /// The write-progress timeout.
    pub fn get_write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// The bound on open connections.
    pub fn get_max_connections(&self) -> usize {
        self.max_connections
    }

    /// The header-read timeout.
    pub fn get_header_read_timeout(&self) -> Duration {
        self.header_read_timeout
    }

    /// The idle keep-alive timeout.
    pub fn get_idle_timeout(&self) -> Duration {
        self.idle_timeout
    }
}

/// Three quarters of `open_files`, at least 1 and at most the ceiling.
fn default_max_connections(open_files: Option<u64>) -> usize {
    let open_files = open_files.unwrap_or(ASSUMED_OPEN_FILES);
    let bound = open_files - open_files / 4;
    usize::try_from(bound)
        .unwrap_or(usize::MAX)
        .clamp(1, DEFAULT_CEILING)
}

/// The soft `RLIMIT_NOFILE` of this process (`None` when it cannot be
/// read), from `/proc/self/limits`: no `unsafe` and no extra dependency.
#[cfg(target_os = "linux")]
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_files(&limits)
}

#[cfg(not(target_os = "linux"))]
fn open_files_limit() -> Option<u64> {
    None
}

/// The soft limit on the `Max open files` line; `unlimited` is `u64::MAX`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .strip_prefix("Max open files")?
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bound_leaves_a_quarter_of_the_descriptors() {
        assert_eq!(default_max_connections(Some(1024)), 768);
        assert_eq!(default_max_connections(Some(256)), 192);
        assert_eq!(default_max_connections(Some(1_048_576)), 4096, "capped");
        assert_eq!(default_max_connections(Some(u64::MAX)), 4096, "unlimited");
        assert_eq!(default_max_connections(Some(1)), 1, "at least one");
        assert_eq!(default_max_connections(None), 768, "1024 assumed");
    }

    #[test]
    fn the_soft_limit_is_read_from_proc() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_open_files(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_open_files(unlimited), Some(u64::MAX));
        assert_eq!(parse_open_files("Max processes 10 10 processes\n"), None);
    }

    #[test]
    #[should_panic(expected = "`max_connections` must be at least 1")]
    fn zero_connections_is_refused_where_the_limits_are_built() {
        let _ = ConnectionLimits::new().max_connections(0);
    }

    #[test]
    #[should_panic(expected = "`idle_timeout` must not be zero")]
    fn a_zero_timeout_is_refused_where_the_limits_are_built() {
        let _ = ConnectionLimits::new().idle_timeout(Duration::ZERO);
    }
}
