//! Run: `cargo run -p admission-examples --bin metrics-reference`
//!
//! Writes `docs/METRICS.md`, the metrics reference generated from
//! `admission_core::metrics::METRICS`. The test `metrics_reference` in
//! `admission-core` fails when the committed file differs from what this
//! writes. `--stdout` prints the reference instead of writing the file.

use std::path::Path;

use admission_examples::metrics_reference::reference_markdown;

const USAGE: &str = "usage: metrics-reference [--stdout]";

fn main() {
    let reference = reference_markdown();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag] if flag == "--stdout" => {
            print!("{reference}");
            return;
        }
        [flag] if flag == "--help" => {
            println!("{USAGE}");
            return;
        }
        _ => {
            eprintln!("metrics-reference: unexpected arguments {args:?}\n{USAGE}");
            std::process::exit(2);
        }
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
