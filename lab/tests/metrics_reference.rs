//! `docs/METRICS.md` is exactly what the generator writes from
//! `admission_core::metrics::METRICS`: a family added, renamed or reworded in
//! the core fails here until the reference is regenerated.

use admission_lab::metrics_reference::reference_markdown;

#[test]
fn the_committed_reference_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/METRICS.md");
    let committed = std::fs::read_to_string(path)
        .expect("docs/METRICS.md exists")
        .replace("\r\n", "\n");
    assert!(
        committed == reference_markdown(),
        "docs/METRICS.md is stale: run `cargo run -p admission-lab --bin metrics-reference`"
    );
}
