//! The default connection bound, from the descriptors the process may
//! open and those it already holds.
//!
//! This module owns reading `RLIMIT_NOFILE` and counting the open
//! descriptors (both from `/proc`, no `unsafe`). It must never return a
//! bound of zero, nor one that leaves no descriptor for what the process
//! opens besides connections.

/// The most connections the default allows, whatever the descriptor
/// limit: beyond this, memory rather than descriptors is the bound to
/// think about, and that is the operator's call.
const DEFAULT_CEILING: usize = 4096;

/// The descriptor limit assumed where it cannot be read.
const ASSUMED_OPEN_FILES: u64 = 1024;

/// The descriptors assumed open where they cannot be counted.
const ASSUMED_HELD: u64 = 32;

/// The default bound: the soft open-file limit, less the descriptors open
/// now, less a reserve of a quarter of the limit; at least 1, at most 4096.
pub(crate) fn default_max_connections() -> usize {
    max_connections_for(open_files_limit(), open_descriptors())
}

/// The bound for a `limit` with `held` descriptors open.
fn max_connections_for(limit: Option<u64>, held: Option<u64>) -> usize {
    let limit = limit.unwrap_or(ASSUMED_OPEN_FILES);
    let held = held.unwrap_or(ASSUMED_HELD);
    let bound = limit.saturating_sub(held).saturating_sub(limit / 4);
    usize::try_from(bound)
        .unwrap_or(usize::MAX)
        .clamp(1, DEFAULT_CEILING)
}

/// The soft `RLIMIT_NOFILE` of this process (`None` when it cannot be
/// read), from `/proc/self/limits`.
#[cfg(target_os = "linux")]
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_files(&limits)
}

#[cfg(not(target_os = "linux"))]
fn open_files_limit() -> Option<u64> {
    None
}

/// The descriptors this process holds now, from `/proc/self/fd` (the
/// directory's own descriptor left out).
#[cfg(target_os = "linux")]
fn open_descriptors() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?.count();
    u64::try_from(entries.saturating_sub(1)).ok()
}

#[cfg(not(target_os = "linux"))]
fn open_descriptors() -> Option<u64> {
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
    fn the_default_bound_leaves_what_is_open_and_a_quarter() {
        assert_eq!(max_connections_for(Some(1024), Some(24)), 744);
        assert_eq!(max_connections_for(Some(64), Some(22)), 26, "issue 38.4");
        assert_eq!(
            max_connections_for(Some(1_048_576), Some(20)),
            4096,
            "capped"
        );
        assert_eq!(
            max_connections_for(Some(u64::MAX), Some(20)),
            4096,
            "unlimited"
        );
        assert_eq!(max_connections_for(Some(16), Some(30)), 1, "at least one");
        assert_eq!(max_connections_for(None, None), 736, "1024 and 32 assumed");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_open_descriptors_are_counted() {
        let before = open_descriptors().unwrap();
        let files: Vec<_> = (0..5)
            .map(|_| std::fs::File::open("/proc/self/limits").unwrap())
            .collect();
        assert!(
            open_descriptors().unwrap() >= before + 5,
            "five more files are five more descriptors"
        );
        drop(files);
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
}
