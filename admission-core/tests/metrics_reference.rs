//! `docs/METRICS.md` is generated from `METRICS`: the committed file must be
//! exactly what the generator writes.

use admission_core::metrics::{METRICS, REFERENCE_COMMAND, reference_markdown};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/METRICS.md");

#[test]
fn committed_reference_matches_the_code() {
    let generated = reference_markdown();
    let committed = std::fs::read_to_string(PATH)
        .unwrap_or_else(|err| {
            panic!("docs/METRICS.md is missing ({err}); run `{REFERENCE_COMMAND}`")
        })
        .replace("\r\n", "\n");
    if committed == generated {
        return;
    }
    let (line, ours, theirs) = committed
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(generated.lines().map(Some).chain(std::iter::repeat(None)))
        .enumerate()
        .find(|(_, (committed, generated))| committed != generated)
        .map(|(i, (c, g))| {
            (
                i + 1,
                c.unwrap_or("<end of file>"),
                g.unwrap_or("<end of file>"),
            )
        })
        .unwrap_or((0, "<trailing newline>", "<trailing newline>"));
    panic!(
        "docs/METRICS.md is out of date with admission_core::metrics::METRICS; \
         run `{REFERENCE_COMMAND}` and commit the result.\n\
         first difference at line {line}:\n  committed: {ours}\n  generated: {theirs}"
    );
}

#[test]
fn reference_names_every_family_and_series() {
    let generated = reference_markdown();
    for metric in METRICS {
        for series in metric.series_names() {
            assert!(
                generated.contains(&format!("`{series}`")),
                "the reference lists the series {series}"
            );
        }
        assert!(
            generated.contains(metric.help),
            "the reference carries the help text of {}",
            metric.name
        );
    }
}
