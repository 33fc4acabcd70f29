//! Run: `cargo run -p admission-lab --bin metrics-reference`
//!
//! Writes `docs/METRICS.md`, the metrics reference generated from
//! `admission_core::metrics::METRICS`. The test `metrics_reference` in
//! `admission-core` fails when the committed file differs from what this
//! writes. `--stdout` prints the reference instead of writing the file.

use std::path::Path;

use admission_lab::metrics_reference::reference_markdown;

/// Writes `docs/METRICS.md`, the metrics reference generated from
/// `admission_core::metrics::METRICS`.
#[derive(Debug, clap::Parser)]
#[command(name = "metrics-reference", args_override_self = true)]
struct Flags {
    /// Print the reference on stdout instead of writing the file.
    #[arg(long)]
    stdout: bool,
}

fn main() {
    let flags = <Flags as clap::Parser>::parse();
    let reference = reference_markdown();
    if flags.stdout {
        print!("{reference}");
        return;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new(".."));
    let path = workspace.join("docs/METRICS.md");
    if let Err(err) = std::fs::write(&path, reference) {
        eprintln!("metrics-reference: cannot write {}: {err}", path.display());
        std::process::exit(1);
    }
    println!("wrote {}", path.display());
}
