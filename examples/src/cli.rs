//! The start-up every example binary shares.
//!
//! This module owns [`Cli`]: logs on stderr (`RUST_LOG` when set, else the
//! binary's level), flags parsed by `clap` into a configuration or a usage
//! error (exit code 2, clap's message and the usage), and the `listening on
//! ADDR` line tests read. It must never hold a binary's own flags, and
//! never let a client write one log line per request it sends: the HTTP
//! framework's own errors about clients (see [`CLIENT_NOISE`]) are counted
//! and logged as one `WARN` line per [`CLIENT_NOISE_EVERY`] at most,
//! whatever `RUST_LOG` asks for those targets.

use std::fmt;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use admission_http::connection::ConnectionLimits;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Parser};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{FilterExt as _, Targets};
use tracing_subscriber::fmt::time::FormatTime as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

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

/// A binary's name, which prefixes the errors found after its flags were
/// parsed.
///
/// # Examples
///
/// ```no_run
/// use admission_examples::cli::Cli;
///
/// /// A demo.
/// #[derive(clap::Parser)]
/// #[command(name = "demo")]
/// struct Flags {
///     /// Worker threads.
///     #[arg(long, default_value_t = 2)]
///     workers: usize,
/// }
///
/// let cli = Cli { name: "demo" };
/// let workers = cli.start(tracing::Level::INFO, |flags: Flags| {
///     if flags.workers == 0 {
///         return Err("`--workers` must be at least 1".to_owned());
///     }
///     Ok(flags.workers)
/// });
/// # let _ = workers;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Cli {
    /// The binary's name.
    pub name: &'static str,
}

impl Cli {
    /// Starts logging to stderr, then parses the command line into `F`
    /// and turns it into a configuration with `config`.
    ///
    /// `RUST_LOG` (an [`EnvFilter`] directive list such as
    /// `info,admission_core=debug`) chooses what is logged when set;
    /// without it everything at `level` and above is. `--help` and `-h`
    /// print the flags with their meaning and default and exit 0; a flag
    /// that does not parse, and an `Err` from `config` (flags that do not
    /// go together), print clap's error with the usage and exit with
    /// code 2.
    ///
    /// Events from [`CLIENT_NOISE`] targets at `WARN` or above are not
    /// written as they come: they are counted, and one `WARN` line says how
    /// many there were since the previous one, at most every
    /// [`CLIENT_NOISE_EVERY`]. It carries the count and the target, not the
    /// framework's message (which may describe what the client sent),
    /// except for the acceptor, whose message is an OS error such as `Too
    /// many open files`. A burst is reported by its first event at once and
    /// the rest of it when the interval ends (by a thread of its own, even
    /// if no event follows), or at [`flush_client_noise`] at shutdown.
    pub fn start<F: Parser, C>(
        self,
        level: tracing::Level,
        config: impl FnOnce(F) -> Result<C, String>,
    ) -> C {
        self.start_matched(level, |flags, _| config(flags))
    }

    /// [`start`](Self::start) for a binary whose `config` also needs to
    /// know which flags were given (see [`given`]).
    pub fn start_matched<F: Parser, C>(
        self,
        level: tracing::Level,
        config: impl FnOnce(F, &ArgMatches) -> Result<C, String>,
    ) -> C {
        logs(level);
        let matches = F::command().get_matches();
        let flags = F::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
        match config(flags, &matches) {
            Ok(config) => config,
            Err(message) => F::command()
                .error(ErrorKind::ArgumentConflict, message)
                .exit(),
        }
    }

    /// Prints `name: err` on stderr and exits with code 2.
    pub fn fail(self, err: &dyn fmt::Display) -> ! {
        eprintln!("{}: {err}", self.name);
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

    /// Listens on `addr` (a tokio listener) and [announces](Self::announce)
    /// the address it got; fails (exit code 2) when it cannot.
    pub async fn listen(self, addr: SocketAddr) -> tokio::net::TcpListener {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .unwrap_or_else(|err| self.fail(&format!("cannot listen on {addr}: {err}")));
        self.announce(listener.local_addr());
        listener
    }

    /// [`listen`](Self::listen) for a server that takes a std listener
    /// (actix-web).
    pub fn listen_std(self, addr: SocketAddr) -> std::net::TcpListener {
        let listener = std::net::TcpListener::bind(addr)
            .unwrap_or_else(|err| self.fail(&format!("cannot listen on {addr}: {err}")));
        self.announce(listener.local_addr());
        listener
    }

    /// For a binary's own tests: its flag definitions are consistent
    /// (clap's `debug_assert`), and no flags give `C::default()`, the
    /// configuration its `--help` documents.
    ///
    /// # Panics
    ///
    /// When either does not hold.
    pub fn assert_defaults<F: Parser, C: Default + PartialEq + fmt::Debug>(
        self,
        config: impl FnOnce(F) -> Result<C, String>,
    ) {
        F::command().debug_assert();
        let flags = F::try_parse_from([self.name])
            .unwrap_or_else(|err| panic!("{}: no flags parse: {err}", self.name));
        assert_eq!(
            config(flags),
            Ok(C::default()),
            "{}: no flags give the documented defaults",
            self.name
        );
    }

    /// Ends a server binary once its server has returned: `served` is
    /// `Ok` once the server has stopped and its report was logged. The
    /// client noise left over is written ([`flush_client_noise`]) and the
    /// process exits 0; a server that failed is logged with its error's
    /// class and the process exits 1.
    ///
    /// The exit is what ends the worker threads a blocked walk still holds:
    /// they cannot be joined, and the report says what was left running.
    pub fn exit(self, served: std::io::Result<()>) -> ! {
        match served {
            Ok(()) => {
                flush_client_noise();
                std::process::exit(0);
            }
            Err(err) => {
                tracing::error!(class = ?err.kind(), "server failed");
                std::process::exit(1);
            }
        }
    }
}

/// A `--gate` value that names no gate, for either exporter's gates.
///
/// # Examples
///
/// ```
/// use admission_examples::cli::UnknownGate;
///
/// let err = UnknownGate::new("nginx", "`admission` or `tonic`");
/// assert_eq!(err.to_string(), "unknown gate `nginx`; expected `admission` or `tonic`");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGate {
    given: String,
    expected: &'static str,
}

impl UnknownGate {
    /// `given` named no gate; `expected` lists the names that do.
    pub fn new(given: &str, expected: &'static str) -> UnknownGate {
        UnknownGate {
            given: given.to_owned(),
            expected,
        }
    }
}

impl fmt::Display for UnknownGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown gate `{}`; expected {}",
            self.given, self.expected
        )
    }
}

impl std::error::Error for UnknownGate {}

/// The arguments of `command` given on the command line (not those that
/// took their default), in `command`'s order.
///
/// # Examples
///
/// ```
/// use clap::{Arg, ArgAction, Command};
///
/// let command = Command::new("demo")
///     .arg(Arg::new("workers").long("workers").default_value("2"))
///     .arg(Arg::new("pin").long("pin").action(ArgAction::SetTrue));
/// let matches = command.clone().get_matches_from(["demo", "--pin"]);
/// let given: Vec<_> = admission_examples::cli::given(&command, &matches)
///     .filter_map(clap::Arg::get_long)
///     .collect();
/// assert_eq!(given, ["pin"]);
/// ```
pub fn given<'a>(
    command: &'a clap::Command,
    matches: &'a ArgMatches,
) -> impl Iterator<Item = &'a clap::Arg> {
    command
        .get_arguments()
        .filter(|arg| matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine))
}

/// The filter of the log lines: `directives` (`RUST_LOG`'s value) when
/// given (bad directives are reported on stderr and skipped), else
/// everything at `level` and above.
fn env_filter(level: tracing::Level, directives: Option<&str>) -> EnvFilter {
    EnvFilter::builder()
        .with_default_directive(LevelFilter::from_level(level).into())
        .parse_lossy(directives.unwrap_or_default())
}

/// Log lines through `filter` to `writer`, except the client noise, which
/// goes to [`ClientNoise`] only, whatever `filter` says about it.
fn subscriber<W>(
    filter: EnvFilter,
    writer: W,
    ansi: bool,
    noise: Arc<ClientNoise>,
) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let mut not_noise = Targets::new().with_default(LevelFilter::TRACE);
    let mut noise_filter = Targets::new();
    for target in CLIENT_NOISE {
        not_noise = not_noise.with_target(target, LevelFilter::OFF);
        noise_filter = noise_filter.with_target(target, LevelFilter::WARN);
    }
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi)
        .with_filter(filter.and(not_noise));
    tracing_subscriber::registry()
        .with(lines)
        .with(Throttled(noise).with_filter(noise_filter))
}

/// Logs to stderr by `RUST_LOG`, else `level`; the client noise's count
/// left over at the end of an interval is written by a thread of its own.
fn logs(level: tracing::Level) {
    let directives = std::env::var("RUST_LOG").ok();
    let noise = Arc::clone(NOISE.get_or_init(|| Arc::new(ClientNoise::new())));
    subscriber(
        env_filter(level, directives.as_deref()),
        std::io::stderr,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        Arc::clone(&noise),
    )
    .init();
    let _ = std::thread::Builder::new()
        .name("client-noise".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(noise.until_next());
                if let Some(count) = noise.left_over(false) {
                    noise.write(count, None);
                }
            }
        });
}

/// Writes the client noise counted since its last line, at once: for a
/// binary's shutdown, so that the count of its last interval is not lost
/// with the process. Nothing when nothing is left (or logging was not
/// started by [`Cli::start`]).
///
/// # Examples
///
/// ```
/// admission_examples::cli::flush_client_noise(); // nothing counted here: no line
/// ```
pub fn flush_client_noise() {
    if let Some(noise) = NOISE.get()
        && let Some(count) = noise.left_over(true)
    {
        noise.write(count, None);
    }
}

/// A count of at least 1 (`--workers`, `--max-connections`): zero is a
/// usage error.
///
/// # Errors
///
/// A message for clap when `text` is no whole number or is zero.
///
/// # Examples
///
/// ```
/// use admission_examples::cli::positive;
///
/// assert_eq!(positive("3"), Ok(3));
/// assert_eq!(positive("0").unwrap_err(), "must be at least 1");
/// assert!(positive("x").is_err());
/// ```
pub fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(err) => Err(err.to_string()),
    }
}

/// The connection limits of a `--max-connections` flag: the bound it
/// gives, or else the default, which the server counts from the
/// descriptors open when it starts listening
/// ([`ConnectionLimits::new`]).
///
/// # Examples
///
/// ```
/// use admission_examples::cli::connection_limits;
///
/// assert_eq!(connection_limits(Some(8)).max_connections(), 8);
/// assert!(connection_limits(None).max_connections() >= 1);
/// ```
pub fn connection_limits(max_connections: Option<usize>) -> ConnectionLimits {
    match max_connections {
        Some(max) => ConnectionLimits::new().with_max_connections(max),
        None => ConnectionLimits::new(),
    }
}

/// A positive, finite number (`--rate`, a multiple).
///
/// # Errors
///
/// A message for clap when `text` is no number, or is not above zero.
///
/// # Examples
///
/// ```
/// use admission_examples::cli::positive_number;
///
/// assert_eq!(positive_number("2.5"), Ok(2.5));
/// assert!(positive_number("0").is_err());
/// assert!(positive_number("inf").is_err());
/// ```
pub fn positive_number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err("must be a positive number".to_owned()),
        Err(err) => Err(err.to_string()),
    }
}

/// A `-ms` flag's value: whole milliseconds as a [`Duration`].
///
/// # Errors
///
/// A message for clap when `text` is no whole number.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_examples::cli::millis;
///
/// assert_eq!(millis("250"), Ok(Duration::from_millis(250)));
/// assert!(millis("1.5").is_err());
/// ```
pub fn millis(text: &str) -> Result<Duration, String> {
    text.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|err| err.to_string())
}

/// A `-ms` flag that must be at least one millisecond (a timeout, a
/// period).
///
/// # Errors
///
/// As [`millis`], and for zero.
///
/// # Examples
///
/// ```
/// use admission_examples::cli::positive_millis;
///
/// assert!(positive_millis("1").is_ok());
/// assert_eq!(positive_millis("0").unwrap_err(), "must be at least 1");
/// ```
pub fn positive_millis(text: &str) -> Result<Duration, String> {
    match millis(text)? {
        Duration::ZERO => Err("must be at least 1".to_owned()),
        d => Ok(d),
    }
}

/// Every event [`ClientNoise`] counted in this process.
static CLIENT_ERRORS: AtomicU64 = AtomicU64::new(0);

/// The throttle the process logs through, for [`flush_client_noise`].
static NOISE: OnceLock<Arc<ClientNoise>> = OnceLock::new();

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
    /// The target of the last event counted, named by a line written
    /// after it.
    target: Mutex<&'static str>,
}

impl ClientNoise {
    fn new() -> ClientNoise {
        ClientNoise {
            epoch: Instant::now(),
            count: AtomicU64::new(0),
            next: AtomicU64::new(0),
            target: Mutex::new(""),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Takes the next line's turn if it is due at `now`.
    fn take_turn(&self, now: u64) -> bool {
        let next = self.next.load(Relaxed);
        let every = u64::try_from(CLIENT_NOISE_EVERY.as_micros()).unwrap_or(u64::MAX);
        now >= next
            && self
                .next
                .compare_exchange(next, now.saturating_add(every), Relaxed, Relaxed)
                .is_ok()
    }

    /// The count no line has carried yet, taken, once the interval of the
    /// last line is over (or `at_once`).
    fn left_over(&self, at_once: bool) -> Option<u64> {
        if self.count.load(Relaxed) == 0 || !(at_once || self.take_turn(self.now())) {
            return None;
        }
        Some(self.count.swap(0, Relaxed)).filter(|&count| count > 0)
    }

    /// How long until the current interval ends (a whole interval when
    /// none runs), at least 10 ms.
    fn until_next(&self) -> Duration {
        let left = self.next.load(Relaxed).saturating_sub(self.now());
        match left {
            0 => CLIENT_NOISE_EVERY,
            micros => Duration::from_micros(micros).max(Duration::from_millis(10)),
        }
    }

    /// Writes one line carrying `count` (and the acceptor's OS error).
    fn write(&self, count: u64, last: Option<&str>) {
        let target = *self.target.lock().unwrap_or_else(PoisonError::into_inner);
        let mut line = String::new();
        let _ = tracing_subscriber::fmt::time::SystemTime
            .format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut line));
        line.push_str(&format!(
            "  WARN {target}: client errors from the HTTP framework, at most one line per {} s count={count}",
            CLIENT_NOISE_EVERY.as_secs()
        ));
        if let Some(last) = last {
            line.push_str(&format!(" last={last:?}"));
        }
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    /// Counts one event of `target`; the count since the last line when
    /// one is due.
    fn due(&self, target: &'static str) -> Option<u64> {
        CLIENT_ERRORS.fetch_add(1, Relaxed);
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
        self.count.fetch_add(1, Relaxed);
        if !self.take_turn(self.now()) {
            return None;
        }
        Some(self.count.swap(0, Relaxed))
    }
}

/// [`ClientNoise`] as a layer, shared with the thread that writes what an
/// interval left over.
struct Throttled(Arc<ClientNoise>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Throttled {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let target = event.metadata().target();
        let Some(count) = self.0.due(target) else {
            return;
        };
        if target == "actix_server::accept" {
            // An OS error (e.g. `Too many open files`), not client input.
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.write(count, Some(&message.0));
        } else {
            self.0.write(count, None);
        }
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
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;

    #[test]
    fn client_noise_is_one_line_per_interval_with_the_count() {
        let noise = ClientNoise::new();
        assert_eq!(noise.due("h2"), Some(1), "the first is written at once");
        for _ in 0..4999 {
            assert_eq!(noise.due("h2"), None, "then counted");
        }
        // The interval has passed.
        noise.next.store(0, Relaxed);
        assert_eq!(
            noise.due("h2"),
            Some(5000),
            "the next line carries the count"
        );
    }

    #[test]
    fn the_count_an_interval_left_over_is_taken_when_it_ends_or_at_shutdown() {
        let noise = ClientNoise::new();
        assert_eq!(noise.due("h2"), Some(1), "the first is written at once");
        for _ in 0..99 {
            assert_eq!(noise.due("h2"), None);
        }
        assert_eq!(noise.left_over(false), None, "not before the interval ends");
        assert!(
            noise.until_next() > CLIENT_NOISE_EVERY / 2,
            "the interval runs"
        );
        noise.next.store(0, Relaxed);
        assert_eq!(
            noise.left_over(false),
            Some(99),
            "when it ends, with no event after"
        );
        assert_eq!(noise.left_over(true), None, "taken once");
        for _ in 0..7 {
            assert_eq!(noise.due("h2"), None, "the new interval runs");
        }
        assert_eq!(noise.left_over(true), Some(7), "at shutdown, at once");
    }

    /// The log lines written under `directives` (as `RUST_LOG`) at the
    /// default `level`, while `emit` runs.
    fn lines_under(level: tracing::Level, directives: Option<&str>, emit: impl FnOnce()) -> String {
        let written = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::clone(&written);
        let writer = move || Sink(Arc::clone(&sink));
        tracing::subscriber::with_default(
            subscriber(
                env_filter(level, directives),
                writer,
                false,
                Arc::new(ClientNoise::new()),
            ),
            emit,
        );
        let bytes = written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        String::from_utf8(bytes).expect("log lines are text")
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn rust_log_chooses_the_lines_and_the_level_is_the_default() {
        let emit = || {
            tracing::info!(target: "admission_examples::demo", "info line");
            tracing::debug!(target: "admission_core::pool", "debug line");
        };
        let default = lines_under(tracing::Level::INFO, None, emit);
        assert!(
            default.contains("info line") && !default.contains("debug line"),
            "{default}"
        );
        let quiet = lines_under(tracing::Level::INFO, Some("warn"), emit);
        assert!(quiet.is_empty(), "{quiet}");
        let chosen = lines_under(
            tracing::Level::WARN,
            Some("warn,admission_core=debug"),
            emit,
        );
        assert!(
            chosen.contains("debug line") && !chosen.contains("info line"),
            "{chosen}"
        );
        let bad = lines_under(tracing::Level::INFO, Some("=[nonsense"), emit);
        assert!(
            bad.contains("info line"),
            "a bad directive leaves the default: {bad}"
        );
    }

    #[test]
    fn rust_log_cannot_print_the_client_noise_it_goes_to_the_throttle() {
        for directives in [None, Some("trace"), Some("info,h2=trace,actix_http=trace")] {
            let before = client_errors();
            let lines = lines_under(tracing::Level::INFO, directives, || {
                tracing::warn!(target: "h2", "client noise");
                tracing::error!(target: "h2::proto::connection", "client noise");
                tracing::error!(target: "actix_http::h1::dispatcher", "client noise");
                tracing::warn!(target: "admission_examples::demo", "a real warning");
            });
            assert!(!lines.contains("client noise"), "{directives:?}: {lines}");
            assert!(lines.contains("a real warning"), "{directives:?}: {lines}");
            assert!(
                client_errors() >= before + 3,
                "{directives:?}: the throttle counted the three"
            );
        }
    }
}
