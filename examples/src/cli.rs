//! The start-up every example binary shares.
//!
//! This module owns [`Cli`]: logs on stderr, `--help`, flags parsed into a
//! configuration or a usage error (exit code 2), and the `listening on ADDR`
//! line tests read. It must never hold a binary's own flags, and never let
//! a client write one log line per request it sends: the HTTP framework's
//! own errors about clients (see [`CLIENT_NOISE`]) are counted and logged
//! as one `WARN` line per [`CLIENT_NOISE_EVERY`] at most.

use std::fmt;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tracing::level_filters::LevelFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::time::FormatTime as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::args::{ArgError, Args};

/// Log targets of the HTTP frameworks whose `ERROR` and `WARN` events a
/// client can cause at will: actix-web's HTTP/1 dispatcher (a malformed
/// request, a reset, a timeout: one `ERROR` per request), its acceptor
/// (`Too many open files`, every 500 ms while descriptors run out), and
/// the `h2` crate under hyper and tonic (HTTP/2 rapid reset: one `WARN`
/// per connection it closes with `ENHANCE_YOUR_CALM`).
pub const CLIENT_NOISE: [&str; 4] = [
    "actix_http::h1::dispatcher",
    "actix_http::h2::dispatcher",
    "actix_server::accept",
    "h2",
];

/// How often, at most, the framework's client errors are logged: one
/// `WARN` line carrying how many there were since the previous line.
pub const CLIENT_NOISE_EVERY: Duration = Duration::from_secs(10);

/// A binary's name and usage text.
///
/// # Examples
///
/// ```no_run
/// use admission_examples::cli::Cli;
///
/// let cli = Cli { name: "demo", usage: "usage: demo [--workers N]" };
/// let Some(workers) = cli.start(tracing::Level::INFO, |mut args| {
///     let workers = args.value::<usize>("workers")?.unwrap_or(2);
///     args.finish()?;
///     Ok(workers)
/// }) else {
///     return; // `--help` was printed
/// };
/// # let _ = workers;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Cli {
    /// The binary's name, which prefixes its usage errors.
    pub name: &'static str,
    /// The usage text, printed for `--help` and after a usage error.
    pub usage: &'static str,
}

impl Cli {
    /// Starts logging to stderr at `level`, then parses the command line
    /// with `config`. Prints the usage and returns `None` for `--help`; exits
    /// with code 2 on a usage error.
    ///
    /// Events from [`CLIENT_NOISE`] targets at `WARN` or above are not
    /// written as they come: they are counted, and one `WARN` line says how
    /// many there were since the previous one, at most every
    /// [`CLIENT_NOISE_EVERY`]. It carries the count and the target, not the
    /// framework's message (which may describe what the client sent),
    /// except for the acceptor, whose message is an OS error such as `Too
    /// many open files`. A burst is reported by its first event at once and
    /// by the next line after the interval.
    pub fn start<C>(
        self,
        level: tracing::Level,
        config: impl FnOnce(Args) -> Result<C, ArgError>,
    ) -> Option<C> {
        let mut everything_else = Targets::new().with_default(level);
        let mut noise = Targets::new();
        for target in CLIENT_NOISE {
            everything_else = everything_else.with_target(target, LevelFilter::OFF);
            noise = noise.with_target(target, LevelFilter::WARN);
        }
        let lines = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(everything_else);
        tracing_subscriber::registry()
            .with(lines)
            .with(ClientNoise::new().with_filter(noise))
            .init();
        let mut args = match Args::parse(std::env::args().skip(1)) {
            Ok(args) => args,
            Err(err) => self.fail(&err),
        };
        if args.flag("help") {
            println!("{}", self.usage);
            return None;
        }
        match config(args) {
            Ok(config) => Some(config),
            Err(err) => self.fail(&err),
        }
    }

    /// Prints `name: err` and the usage on stderr and exits with code 2.
    pub fn fail(self, err: &dyn fmt::Display) -> ! {
        eprintln!("{}: {err}\n{}", self.name, self.usage);
        std::process::exit(2);
    }

    /// Prints `listening on ADDR` on stdout (what tests and scripts wait
    /// for), or fails when the socket has no address.
    pub fn announce(self, addr: std::io::Result<SocketAddr>) {
        match addr {
            Ok(addr) => println!("listening on {addr}"),
            Err(err) => self.fail(&format!("no local address: {err}")),
        }
    }
}

/// Every event [`ClientNoise`] counted in this process.
static CLIENT_ERRORS: AtomicU64 = AtomicU64::new(0);

/// How many client errors the HTTP framework reported since start-up
/// (events from [`CLIENT_NOISE`] targets at `WARN` or above): the total
/// behind the rate-limited lines, for a shutdown summary or a status page.
///
/// # Examples
///
/// ```
/// assert_eq!(admission_examples::cli::client_errors(), 0, "no server ran here");
/// ```
pub fn client_errors() -> u64 {
    CLIENT_ERRORS.load(Relaxed)
}

/// Counts the framework's client errors and writes one line per interval.
///
/// It writes to stderr itself: an event emitted from inside a layer would
/// be dropped by `tracing` (it does not dispatch re-entrantly).
#[derive(Debug)]
struct ClientNoise {
    epoch: Instant,
    /// Events since the last line.
    count: AtomicU64,
    /// Microseconds since `epoch` before which no line is due.
    next: AtomicU64,
}

impl ClientNoise {
    fn new() -> ClientNoise {
        ClientNoise {
            epoch: Instant::now(),
            count: AtomicU64::new(0),
            next: AtomicU64::new(0),
        }
    }

    /// Counts one event; the count since the last line when one is due.
    fn due(&self) -> Option<u64> {
        CLIENT_ERRORS.fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let next = self.next.load(Relaxed);
        let every = u64::try_from(CLIENT_NOISE_EVERY.as_micros()).unwrap_or(u64::MAX);
        if now < next
            || self
                .next
                .compare_exchange(next, now.saturating_add(every), Relaxed, Relaxed)
                .is_err()
        {
            return None;
        }
        Some(self.count.swap(0, Relaxed))
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ClientNoise {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let Some(count) = self.due() else {
            return;
        };
        let target = event.metadata().target();
        let mut line = String::new();
        let _ = tracing_subscriber::fmt::time::SystemTime
            .format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut line));
        line.push_str(&format!(
            "  WARN {target}: client errors from the HTTP framework, at most one line per {} s count={count}",
            CLIENT_NOISE_EVERY.as_secs()
        ));
        if target == "actix_server::accept" {
            // An OS error (e.g. `Too many open files`), not client input.
            let mut message = Message(String::new());
            event.record(&mut message);
            line.push_str(&format!(" last={:?}", message.0));
        }
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// The `message` field of an event.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_noise_is_one_line_per_interval_with_the_count() {
        let noise = ClientNoise::new();
        assert_eq!(noise.due(), Some(1), "the first is written at once");
        for _ in 0..4999 {
            assert_eq!(noise.due(), None, "then counted");
        }
        // The interval has passed.
        noise.next.store(0, Relaxed);
        assert_eq!(noise.due(), Some(5000), "the next line carries the count");
    }
}
