//! The `exporter` binary the replicas run: it belongs to
//! `admission-examples`, so a lab binary or test finds it in its own
//! profile's output directory, built there first with the same profile.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `exporter` binary in `dir`, a profile's output directory (such as
/// `target/release`, where a `cargo run` of `fleet` puts `fleet`, or
/// `target/debug`, above a test's `deps/`).
///
/// With `cargo` (the cargo running this, e.g. `CARGO` as `cargo run` sets
/// it) it is built first, `cargo build -p admission-examples --bin
/// exporter` with `dir`'s profile into `dir`'s target directory, so that it
/// is never stale; cargo says nothing when it is up to date.
///
/// # Errors
///
/// Cargo could not run or the build failed, or there is no `exporter` in
/// `dir` (no `cargo` and none built before): the message says how to build
/// it.
pub fn exporter_in(dir: &Path, cargo: Option<&OsStr>) -> Result<PathBuf, String> {
    let exporter = dir.join(format!("exporter{}", std::env::consts::EXE_SUFFIX));
    if let Some(cargo) = cargo {
        let mut build = Command::new(cargo);
        build.args([
            "build",
            "--quiet",
            "-p",
            "admission-examples",
            "--bin",
            "exporter",
        ]);
        match dir.file_name().and_then(OsStr::to_str) {
            Some("debug") | None => {}
            Some("release") => {
                build.arg("--release");
            }
            Some(profile) => {
                build.args(["--profile", profile]);
            }
        }
        if let Some(target) = dir.parent() {
            build.arg("--target-dir").arg(target);
        }
        let status = build
            .status()
            .map_err(|err| format!("cannot run cargo build: {err}"))?;
        if !status.success() {
            return Err(format!("building the exporter failed: {status}"));
        }
    }
    if exporter.is_file() {
        Ok(exporter)
    } else {
        Err(format!(
            "no exporter at {}; build it (`cargo build --release -p admission-examples --bin exporter`) or pass --exporter PATH",
            exporter.display()
        ))
    }
}
