//! The start-up every example binary shares.
//!
//! This module owns [`Cli`]: logs on stderr, `--help`, flags parsed into a
//! configuration or a usage error (exit code 2), and the `listening on ADDR`
//! line tests read. It must never hold a binary's own flags.

use std::fmt;
use std::net::SocketAddr;

use crate::args::{ArgError, Args};

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
    pub fn start<C>(
        self,
        level: tracing::Level,
        config: impl FnOnce(Args) -> Result<C, ArgError>,
    ) -> Option<C> {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_max_level(level)
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
