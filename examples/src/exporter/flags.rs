//! The flags the `exporter` and `grpc-exporter` binaries share.
//!
//! This module owns [`WalkFlags`]: the walk pool, the registry, the extra
//! walk delay and the shutdown deadline, with their meaning and default in
//! `--help`. It must never hold a flag only one of the binaries has.

use std::time::Duration;

use crate::cli::{millis, positive, positive_millis};

/// The registry, its walks and the shutdown deadline, as flags (flattened
/// into each binary's own with `#[command(flatten)]`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_examples::exporter::WalkFlags;
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Flags {
///     #[command(flatten)]
///     walks: WalkFlags,
/// }
///
/// let flags = Flags::try_parse_from(["demo", "--workers", "3", "--walk-delay-ms=20"]).unwrap();
/// assert_eq!((flags.walks.workers, flags.walks.series), (3, 10_000));
/// assert_eq!(flags.walks.walk_delay, Duration::from_millis(20));
/// assert!(Flags::try_parse_from(["demo", "--workers", "0"]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct WalkFlags {
    /// Worker threads, and so slots, for registry walks.
    #[arg(long, value_name = "N", default_value = "2", value_parser = positive)]
    pub workers: usize,
    /// Series in the demo registry.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub series: usize,
    /// Extra time slept inside every walk, on the worker thread, standing
    /// in for a larger registry.
    #[arg(long = "walk-delay-ms", value_name = "MS", default_value = "0", value_parser = millis)]
    pub walk_delay: Duration,
    /// How long shutdown may take, counted from the signal (after the
    /// drain delay, where there is one).
    #[arg(long = "shutdown-deadline-ms", value_name = "MS", default_value = "5000", value_parser = positive_millis)]
    pub shutdown_deadline: Duration,
}
